// error tests
