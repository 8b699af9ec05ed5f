"""Threads: ops run without the GIL, so Python threads compute at once and get their own
results; a NumPy array shared by tensors is released from whichever thread drops it last."""
import threading
import time

import numpy as np

import tracegraph as tg


def test_threads_compute_their_own_results():
    errors = []
    x = np.arange(256 * 256, dtype=np.float32).reshape(256, 256) / 1e4

    def work(k):
        try:
            a = tg.constant(x * k)
            for _ in range(5):
                y = tg.reduce_sum(tg.matmul(a, a), axis=1)
            np.testing.assert_allclose(y.numpy(), ((x * k) @ (x * k)).sum(axis=1), rtol=1e-4)
        except Exception as e:  # pylint: disable=broad-except
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_an_op_runs_without_the_gil():
    # While a thread is inside a long matmul, this thread wakes from its sleeps on time. An op
    # that held the GIL would keep it asleep until the matmul ended.
    a = tg.ones([2500, 2500])
    start = time.perf_counter()
    tg.matmul(a, a)
    op_time = time.perf_counter() - start
    entered = threading.Event()

    def run():
        entered.set()
        tg.matmul(a, a)

    worker = threading.Thread(target=run)
    worker.start()
    entered.wait()
    worst = 0.0
    while worker.is_alive():
        t = time.perf_counter()
        time.sleep(0.0005)
        worst = max(worst, time.perf_counter() - t)
    worker.join()
    assert op_time > 0.02, "the matmul is too quick to tell"
    assert worst < op_time / 2, f"a 0.5 ms sleep took {worst:.3f} s during a {op_time:.3f} s op"


def test_numpy_backed_tensors_die_on_other_threads():
    arrays = [np.full((64,), float(i), np.float32) for i in range(8)]
    tensors = [tg.constant(a) for a in arrays]
    del arrays
    results = []

    def use(t):
        results.append(float(tg.reduce_sum(t * 2.0)))

    threads = [threading.Thread(target=use, args=(t,)) for t in tensors]
    del tensors  # the threads hold the last references
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [128.0 * i for i in range(8)]
