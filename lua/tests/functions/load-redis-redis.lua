#!lua name=lib2
redis.redis.call('ping')
