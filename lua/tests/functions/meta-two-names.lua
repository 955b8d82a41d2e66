#!lua name=foo name=bar
redis.register_function('foo', function() return 1 end)
