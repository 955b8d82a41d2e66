#!lua flags=no-writes
return redis.call('get', KEYS[1])
