#!lua name=busy
redis.register_function('spin', function(keys, args) local a = 1 while true do a = a + 1 end end)
redis.register_function('spin_after_write', function(keys, args) redis.call('set', 'written', '1') local a = 1 while true do a = a + 1 end end)
