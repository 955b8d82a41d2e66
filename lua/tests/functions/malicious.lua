#!lua name=malicious
local lib = redis
lib.register_function('m1', function ()
    lib.redis = redis
    lib.math = math
    return {ok='OK'}
end)
lib.register_function('m2', function ()
    lib.register_function('m1', function ()
        return {ok='OK'}
    end)
end)
