#!lua name=lib2
redis.register_function{function_name='f1', callback=function() return 1 end, flags={'unknown'}}
