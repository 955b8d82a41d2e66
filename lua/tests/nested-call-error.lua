local function f(k)
  return redis.call("lpush", k, "x")
end


return f(KEYS[1])
