#!lua name=lib2
redis.register_function('a-b', function() return 1 end)
