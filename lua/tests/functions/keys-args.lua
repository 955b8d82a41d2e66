#!lua name=keysargs
redis.register_function('keys_args', function(keys, args) return {#keys, #args, keys, args} end)
