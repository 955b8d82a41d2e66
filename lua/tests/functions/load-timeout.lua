#!lua name=lib2
local a = 1
while 1 do a = a + 1 end
