#!lua name=lib2
redis.register_function{function_name='f1', description='desc'}
