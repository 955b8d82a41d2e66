#!lua name=lib2
redis.log(redis.LOG_DEBUG, 'loading')
redis.log()
