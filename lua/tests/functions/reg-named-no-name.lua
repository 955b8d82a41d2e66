#!lua name=lib2
redis.register_function{callback=function() return 'hello' end, description='desc'}
