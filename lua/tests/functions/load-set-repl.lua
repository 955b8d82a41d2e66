#!lua name=lib2
return redis.set_repl(redis.REPL_NONE)
