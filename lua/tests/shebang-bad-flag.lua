#!lua flags=bogus-flag
return 1
