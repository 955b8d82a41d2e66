#!lua name=lib2
redis.math.random()
