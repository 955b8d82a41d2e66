local x = 1

return undefined_global_here
