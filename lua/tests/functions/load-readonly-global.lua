#!lua name=lib2
a = 1
