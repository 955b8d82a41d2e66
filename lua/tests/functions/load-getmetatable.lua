#!lua name=lib2
mt = getmetatable(_G)
