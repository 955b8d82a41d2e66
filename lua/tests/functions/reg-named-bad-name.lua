#!lua name=lib2
redis.register_function{function_name=function() return 1 end, callback=function() return 'hello' end, description='some desc'}
