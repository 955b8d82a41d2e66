#!lua flags=no-writes
return redis.call('set', KEYS[1], 'v')
