#!lua name=calls
local function add1(a)
    return a + 1
end
redis.register_function('set_key', function(keys, args) return redis.call('set', keys[1], args[1]) end)
redis.register_function{function_name='get_key', callback=function(keys, args) return redis.call('get', keys[1]) end, flags={'no-writes'}}
redis.register_function{function_name='ro_write', callback=function(keys, args) return redis.call('set', 'x', '1') end, flags={'no-writes'}}
redis.register_function('add', function(keys, args) return add1(tonumber(args[1])) end)
redis.register_function('raise', function(keys, args) return redis.call('incr', keys[1]) end)
redis.register_function('pcall_err', function(keys, args) return redis.pcall('incr', keys[1]) end)
redis.register_function('lua_error', function(keys, args) error('boom') end)
redis.register_function('table_error', function(keys, args) error({err='MYERR custom'}) end)
redis.register_function('error_reply', function(keys, args) return redis.error_reply('OOPS my error') end)
redis.register_function('status_reply', function(keys, args) return redis.status_reply('FINE') end)
redis.register_function('resp3_map', function(keys, args) redis.setresp(3) return redis.call('hgetall', keys[1]) end)
redis.register_function('resp3_values', function(keys, args) return {double=3.5} end)
redis.register_function('globals_keys', function(keys, args) return KEYS end)
redis.register_function('set_global', function(keys, args) x = 1 end)
redis.register_function('register_inside', function(keys, args) redis.register_function('f2', function() return 2 end) return 1 end)
redis.register_function('math_random', function(keys, args) return type(math.random()) end)
redis.register_function('eval_from_function', function(keys, args) return redis.call('eval', 'return 1', 0) end)
redis.register_function('fcall_from_function', function(keys, args) return redis.call('fcall', 'add', 0, 1) end)
redis.register_function('function_from_function', function(keys, args) return redis.call('function', 'list') end)
redis.register_function('trick_globals', function(keys, args) mt = getmetatable(_G) end)
redis.register_function('log', function(keys, args) redis.log(redis.LOG_DEBUG, 'from a function') return redis.LOG_WARNING end)
redis.register_function('nil_return', function(keys, args) return nil end)
redis.register_function('nested', function(keys, args) return {1, {2, {3, 'x'}}, {ok='S'}, false, true} end)
redis.register_function('sha1', function(keys, args) return redis.sha1hex('') end)
redis.register_function('select_db', function(keys, args) redis.call('select', 1) return redis.call('set', 'indb1', '1') end)
