#!lua name=test foo=bar
redis.register_function('foo', function() return 1 end)
