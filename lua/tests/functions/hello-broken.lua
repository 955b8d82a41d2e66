#!lua name=hello
redis.register_function('hello', function(keys, args) return 'never' end)
redis.register_function('other', 'not a function')
