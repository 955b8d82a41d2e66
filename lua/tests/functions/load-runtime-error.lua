#!lua name=lib2
local a = nil
local b = a + 1
