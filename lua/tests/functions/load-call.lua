#!lua name=lib2
return redis.call('ping')
