#!lua name=other
redis.register_function('HELLO', function(keys, args) return 1 end)
