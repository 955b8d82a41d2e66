#!lua name=lib2
redis.register_function('', function() return 1 end)
