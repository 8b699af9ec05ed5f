#!/usr/bin/env python3
"""tracegraph's Python frontend on tg_bench's rows, for bench/run's "Python frontend vs C++" table.

Usage: PYTHONPATH=<build>/python /usr/bin/python3 bench/python_bench.py
           [--repetitions N] [--clock cpu|real] [--filter REGEX]

Rows (each the Python side of a tg_bench benchmark of the same name without "python/"):
  python/call/add_f32_scalar/traced  the cached call add(a, b) of a tg.function on two float32
                                     scalars (bench/function_call_bench.cpp)
  python/demo/train_step/traced      the Python demo's train_step (examples/python/train_demo.py:
                                     tg.keras Dense layers, Adam, a GradientTape inside a
                                     tg.function with the None-batch input_signature), called at
                                     batch 128 (bench/workloads_bench.cpp times the C++ demo's)

Timing as tg_bench's: the number of calls per repetition is chosen once so that a repetition lasts
the C++ row's MinTime; every repetition runs the rows in a fresh random order (tg_bench's random
interleaving), each on a fresh build of its function and data, made after the last one is freed,
followed by two untimed calls (as each Google Benchmark run destroys its model, sets one up anew and
reaches a steady state), and a row's figure is the median over the repetitions of the time per call,
on per-thread CPU time (--clock cpu) or wall time (real). The fresh build keeps the train step the
C++ row's workload: the first steps of a fresh model, not steps hundreds of calls into one.
Prints one JSON object on stdout: {"python", "threads_env", "clock", "results": {name:
{"median_ns", "cv", "iterations"}}, "errors": {name: message}}. Exits with status 3 (and a note
on stderr) when the tracegraph package cannot be imported.
"""
import argparse
import json
import logging
import os
import random
import re
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

try:
    import numpy as np
    import tracegraph as tg
except ImportError as e:
    print(f"python_bench.py: cannot import tracegraph ({e}); run it with PYTHONPATH=<build>/python "
          "and /usr/bin/python3", file=sys.stderr)
    sys.exit(3)

BATCH = 128  # the demo's batch (examples/demo_util.h, kMlpBatch)
DEMO_DIR = os.path.join(ROOT, "examples", "python")


def add_scalar_call():
    """The cached call of call/add_f32_scalar/traced: a + b traced once, called on the same two
    float32 scalars."""
    add = tg.function(lambda a, b: a + b)
    a, b = tg.constant(1.0), tg.constant(2.0)
    assert a.dtype == tg.float32 and a.shape.rank == 0
    return lambda: add(a, b), add


def demo_train_step():
    """The Python demo's train_step on one batch of 128: images in [0, 1], labels i % 10. One
    eager step first creates the weights and Adam's slots, as the demo (and the C++ row) do."""
    if DEMO_DIR not in sys.path:
        sys.path.insert(0, DEMO_DIR)
    import train_demo  # pylint: disable=import-outside-toplevel
    tg.random.set_seed(42)
    _, step, train_step = train_demo.build_training()
    rng = np.random.default_rng(5)
    x = tg.constant(rng.random((BATCH, 784), dtype=np.float32))
    y = tg.constant((np.arange(BATCH) % 10).astype(np.int32))
    step(x, y)
    return lambda: train_step(x, y), train_step


ROWS = {
    # name: (build, seconds per repetition: the C++ row's MinTime)
    "python/call/add_f32_scalar/traced": (add_scalar_call, 0.2),
    "python/demo/train_step/traced": (demo_train_step, 0.3),
}


def steady(build):
    """A fresh (call, function) from build, after the two untimed calls of tg_bench's
    reach_steady_state; the function must have traced once."""
    fn, function = build()
    fn()
    fn()
    if function.experimental_get_tracing_count() != 1:
        raise RuntimeError(f"traced {function.experimental_get_tracing_count()} times, "
                           "expected once: the timed calls were not all cached calls")
    return fn, function


def calibrate(fn, now, min_time):
    """Calls per repetition so that one lasts about min_time seconds."""
    iters = 1
    while True:
        t0 = now()
        for _ in range(iters):
            fn()
        dt = now() - t0
        if dt >= min_time * 1e9 or iters >= 1 << 24:
            return iters
        iters = max(iters * 2, int(iters * min_time * 1e9 / max(dt, 1) * 1.2))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--clock", choices=["cpu", "real"], default="cpu")
    ap.add_argument("--filter", default="", help="a regex: only the rows whose name matches")
    args = ap.parse_args()
    now = time.thread_time_ns if args.clock == "cpu" else time.perf_counter_ns
    # Every repetition makes its row's tg.function anew on purpose, which tracegraph warns about
    # after five; a retrace would fail the row (the traced-once check), not just warn.
    logging.getLogger("tracegraph").setLevel(logging.ERROR)
    pattern = re.compile(args.filter) if args.filter else None
    runs, errors = {}, {}
    for name, (build, min_time) in ROWS.items():
        if pattern and not pattern.search(name):
            continue
        try:
            fn, _ = steady(build)
            runs[name] = (build, calibrate(fn, now, min_time), [])
        except Exception as e:  # pylint: disable=broad-except
            errors[name] = f"{type(e).__name__}: {e}"
            print(f"  {name}: error: {errors[name]}", file=sys.stderr)
    order = list(runs)
    for _ in range(args.repetitions):
        random.shuffle(order)
        for name in order:
            build, iters, samples = runs[name]
            try:
                fn = function = None
                fn, function = steady(build)
                t0 = now()
                for _ in range(iters):
                    fn()
                elapsed = now() - t0
                if function.experimental_get_tracing_count() != 1:
                    raise RuntimeError("traced again during the timed calls")
                samples.append(elapsed / iters)
            except Exception as e:  # pylint: disable=broad-except
                errors[name] = f"{type(e).__name__}: {e}"
    results = {}
    for name, (_, iters, samples) in runs.items():
        if not samples:
            continue
        med = statistics.median(samples)
        cv = statistics.pstdev(samples) / statistics.mean(samples) if len(samples) > 1 else 0.0
        results[name] = {"median_ns": med, "cv": cv, "iterations": iters}
        print(f"  {name}: {med / 1e3:.2f} us", file=sys.stderr)
    json.dump({"python": sys.version.split()[0], "executable": sys.executable,
               "threads_env": os.environ.get("TG_NUM_THREADS"), "clock": args.clock,
               "results": results, "errors": errors}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
