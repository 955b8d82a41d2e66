#!lua name=hello
redis.register_function('hello', function(keys, args) return 'hello v2' end)
