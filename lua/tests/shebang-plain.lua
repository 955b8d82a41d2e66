#!lua
return redis.call('set', KEYS[1], 'shebang')
