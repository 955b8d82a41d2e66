#!lua name=lib2
return math.random()
