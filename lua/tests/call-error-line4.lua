-- redis.call error on line 4
local v = redis.call("get", KEYS[1])

return redis.call("incr", KEYS[1])
