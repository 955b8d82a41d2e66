redis.setresp(3)
local h = redis.call('hgetall', KEYS[1])
local out = {}
for k, v in pairs(h.map) do out[#out + 1] = k .. '=' .. v end
table.sort(out)
return out
