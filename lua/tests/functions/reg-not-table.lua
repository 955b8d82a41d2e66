#!lua name=lib2
redis.register_function(1)
