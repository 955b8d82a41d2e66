#!lua name=lib2
return redis.setresp(3)
