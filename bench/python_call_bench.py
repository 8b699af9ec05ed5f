"""The cost of a cached call of a tg.function from Python, next to the same call from C++.

    PYTHONPATH=build/release/python /usr/bin/python3 bench/python_call_bench.py [path/to/tg_bench]

Times 100k calls of `add(a, b)` on two float32 scalars (the C++ row call/add_f32_scalar/traced
of bench/function_call_bench.cpp), of `f(x)` on one tensor, and of `f(x, 3)` with a Python int;
then runs that C++ row of tg_bench when given its path. Issue 34's target: a cached call from
Python costs at most 2 us more than from C++.
"""
import subprocess
import sys
import time

import tracegraph as tg

N = 100_000


def per_call_us(fn, *args):
    for _ in range(1000):  # the trace, and the cached path warm
        fn(*args)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(N):
            fn(*args)
        best = min(best, time.perf_counter() - start)
    return best / N * 1e6


def main():
    add = tg.function(lambda a, b: a + b)
    a, b = tg.constant(1.0), tg.constant(2.0)
    double = tg.function(lambda x: x + x)
    scaled = tg.function(lambda x, n: x * n)
    rows = [("add(a, b), two float32 scalars", per_call_us(add, a, b)),
            ("f(x), one float32 scalar", per_call_us(double, a)),
            ("f(x, 3), a tensor and a Python int", per_call_us(scaled, a, 3)),
            ("eager a + b (no function)", per_call_us(lambda x, y: x + y, a, b))]
    for name, us in rows:
        print(f"python  {name:40s} {us:7.3f} us/call")
    if len(sys.argv) > 1:
        out = subprocess.run([sys.argv[1], "--benchmark_filter=call/add_f32_scalar"],
                             capture_output=True, text=True, check=True).stdout
        print(out)


if __name__ == "__main__":
    main()
