#!lua NAME=upper
redis.register_function('upper', function() return 1 end)
