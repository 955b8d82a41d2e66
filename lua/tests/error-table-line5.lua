-- error table on line 5



error({err='MYCODE failed on line five'})
