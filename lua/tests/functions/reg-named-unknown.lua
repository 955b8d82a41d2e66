#!lua name=lib2
redis.register_function{function_name='f1', callback=function() return 'hello' end, description='desc', some_unknown='unknown'}
