#!lua name=flagsempty
redis.register_function{function_name='f_empty', callback=function() return 1 end, flags={}, description=''}
