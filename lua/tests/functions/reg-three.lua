#!lua name=lib2
redis.register_function('f1', function() return 1 end, {})
