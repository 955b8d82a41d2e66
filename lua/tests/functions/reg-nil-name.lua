#!lua name=lib2
redis.register_function(nil, function() return 1 end)
