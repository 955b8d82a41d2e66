#!lua name=lib2
redis.register_function('test\0test', function() return 1 end)
