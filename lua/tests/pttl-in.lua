-- 1 when every KEYS[i] has a PTTL within [ARGV[1], ARGV[2]];
-- otherwise {key, pttl} for the first one outside (time-tolerant TTL check)
for i = 1, #KEYS do
  local t = redis.call('pttl', KEYS[i])
  if t < tonumber(ARGV[1]) or t > tonumber(ARGV[2]) then return {KEYS[i], t} end
end
return 1
