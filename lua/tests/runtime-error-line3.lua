-- runtime error on line 3
local a = 1
local t = nil; return t.x
