#!lua name=numbers
redis.register_function(42, function() return 42 end)
