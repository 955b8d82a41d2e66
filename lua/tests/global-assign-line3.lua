local a = 1
local b = 2
x_global = 3
