#!lua name="quoted"
redis.register_function('quoted', function() return 1 end)
