local s = redis.call('get', KEYS[1])
if s == false then
  return redis.error_reply('NOTFOUND key ' .. KEYS[1] .. ' is missing')
end
return s
