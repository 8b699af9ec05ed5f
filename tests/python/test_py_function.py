"""tf.py_function: a Python function run by the graph at every call (the core's host_call op)."""
import threading

import numpy as np
import pytest

import tracegraph as tf


def test_eagerly_it_calls_the_function_at_once():
    seen = []

    def add(x, y):
        seen.append((type(x), x.numpy().tolist(), y.numpy().tolist()))
        return x + y

    out = tf.py_function(add, [tf.constant([1.0, 2.0]), 3.0], tf.float32)
    assert isinstance(out, tf.Tensor)
    assert out.numpy().tolist() == [4.0, 5.0]
    assert seen == [(tf.Tensor, [1.0, 2.0], 3.0)]


def test_in_a_function_it_runs_once_per_call_in_order_with_tf_print(capsys):
    calls = []

    def note(x):
        calls.append(float(x.numpy()))
        print("python", x.numpy())

    @tf.function
    def f(x):
        tf.print("before", x)
        tf.py_function(note, [x], [])  # no output used: still runs
        tf.print("after", x)
        return x * 2

    for v in (1.0, 2.0, 3.0):
        assert f(tf.constant(v)).numpy() == 2 * v
    assert calls == [1.0, 2.0, 3.0]
    assert f.experimental_get_tracing_count() == 1
    # tf.print writes 1.0 as TF does ("1"); Python's print of the NumPy scalar says 1.0.
    assert capsys.readouterr().out == "".join(
        f"before {v}\npython {v}.0\nafter {v}\n" for v in ("1", "2", "3"))


def test_list_of_outputs_and_unknown_shapes():
    @tf.function
    def f(x):
        a, b = tf.py_function(lambda t: (t * 2, np.arange(3, dtype=np.int32)), [x], [tf.float32, tf.int32])
        assert a.shape.rank is None and b.dtype == tf.int32
        return a + 1.0, b

    a, b = f(tf.constant([1.0, 2.0]))
    assert a.numpy().tolist() == [3.0, 5.0]
    assert b.numpy().tolist() == [0, 1, 2]
    assert tf.py_function(lambda: None, [], []) == []


def test_wrong_tout_count_or_dtype_raises_a_clear_error():
    @tf.function
    def two(x):
        return tf.py_function(lambda t: t, [x], [tf.float32, tf.float32])

    with pytest.raises(tf.errors.InvalidArgumentError, match=r"returned 1 value\(s\), but Tout declares 2"):
        two(tf.constant(1.0))

    @tf.function
    def wrong_dtype(x):
        return tf.py_function(lambda t: tf.cast(t, tf.int32), [x], tf.float32)

    with pytest.raises(tf.errors.InvalidArgumentError, match=r"'<lambda>' raised TypeError: .*float32"):
        wrong_dtype(tf.constant(1.0))


def test_an_exception_in_func_becomes_an_error_of_the_run():
    def boom(x):
        raise RuntimeError(f"boom at {x.numpy()}")

    @tf.function
    def f(x):
        return tf.py_function(boom, [x], tf.float32)

    with pytest.raises(tf.errors.UnknownError, match=r"Python function 'boom' raised RuntimeError: boom at 4.0"):
        f(tf.constant(4.0))
    with pytest.raises(tf.errors.UnknownError, match="boom at 5.0"):
        tf.py_function(boom, [tf.constant(5.0)], tf.float32)

    def bad_value(x):
        raise ValueError("no such value")

    with pytest.raises(tf.errors.InvalidArgumentError, match="raised ValueError: no such value"):
        tf.function(lambda x: tf.py_function(bad_value, [x], tf.float32))(tf.constant(1.0))


def test_a_gradient_through_it_is_refused():
    @tf.function
    def f(x):
        return tf.py_function(lambda t: t * t, [x], tf.float32) * x

    x = tf.constant(2.0)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    with pytest.raises(tf.errors.InvalidArgumentError, match="second time"):
        tape.gradient(y, x)


def test_it_cannot_be_saved(tmp_path):
    @tf.function
    def f(x):
        return tf.py_function(lambda t: t, [x], tf.float32)

    f(tf.constant(1.0))
    with pytest.raises(ValueError, match="host_call.*cannot leave this process"):
        tf.saved_model.save(f, str(tmp_path / "f.tgx"))


def test_threads_each_run_it():
    lock = threading.Lock()
    calls = []

    def record(x):
        with lock:
            calls.append(int(x.numpy()))
        return x

    @tf.function
    def f(x):
        return tf.py_function(record, [x], tf.int32) + 1

    f(tf.constant(0))
    threads = [threading.Thread(target=lambda i=i: f(tf.constant(i))) for i in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(calls) == [0, 1, 2, 3, 4]
