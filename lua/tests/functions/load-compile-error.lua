#!lua name=lib2
bad script
