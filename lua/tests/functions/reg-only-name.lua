#!lua name=lib2
redis.register_function('f1')
