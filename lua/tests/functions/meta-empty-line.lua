#!
redis.register_function('foo', function() return 1 end)
