#!lua name=lib2
return 1
