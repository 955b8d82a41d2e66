#!lua name=mylib
return 1
