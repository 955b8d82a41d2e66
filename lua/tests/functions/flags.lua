#!LUA name=FLAGS
redis.register_function{function_name='F_ALL', callback=function() return 1 end, flags={'no-writes','ALLOW-OOM','allow-stale','no-cluster','allow-cross-slot-keys'}, description='all the flags'}
