// core tests
