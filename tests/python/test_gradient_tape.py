"""tg.GradientTape from Python: TF's semantics, ported from TensorFlow's
tensorflow/python/eager/backprop_test.py.

Ported (the behaviour, in tracegraph's words): two targets, output_gradients, integer and string
targets and sources (None), no-op and identity gradients, multi-target sums, the tape inside and
around a tg.function, stop_recording, reset, watched_variables (automatic, explicit, after a
gradient call, after reset), gradient inside the tape's block, re-entering a tape, nested self
contexts, watching being tape-local, repeated sources, nested structures of sources, nested and
persistent tapes (higher order), one gradient() per non-persistent tape, unconnected gradients
(none / zero / unknown value), watch_accessed_variables=False, Python's max over Variables,
watching a bad thing, jacobian and batch_jacobian (with their shape errors).

Skipped, with the reason:
- backprop.gradients_function / implicit_grad / make_vjp / val_and_grad_function and
  tape_lib.record_operation: TF-internal APIs, not part of tf's public surface;
- custom_gradient and recompute_grad: the C++ library has no custom gradients;
- SparseTensor / composite watch: tracegraph has no SparseTensor (IndexedSlices gradients are
  tested in test_sparse_gradients.py);
- GPU, device copies, MaxPooling3D, op-attribute helpers, name scopes of gradient ops, memory
  checkers: not applicable (CPU only; no such ops or helpers);
- tests that a jacobian on a non-persistent tape without pfor raises: tracegraph computes
  jacobians one pass per element on any tape, as TF's pfor path allows.
Also here: values against NumPy and finite differences, bad input raising Python exceptions,
tapes and threads.
"""
import gc
import threading
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import tracegraph as tg
from conftest import assert_tensor


def value(t):
    return None if t is None else t.numpy().tolist()


# ---- TF's backprop tests ---------------------------------------------------------------------

def test_two_targets():
    with tg.GradientTape() as t:
        x, y = tg.constant(3.0), tg.constant(2.0)
        t.watch([x, y])
        xx, yy = 2 * x, 3 * y
    dx, dy = t.gradient([xx, yy], [x, y])
    assert float(dx) == 2.0 and float(dy) == 3.0


def test_output_gradients_used_in_computation():
    with tg.GradientTape() as t:
        x, y = tg.constant(3.0), tg.constant(2.0)
        t.watch([x, y])
        loss = x * y
    dx, = t.gradient([loss, x], [x], output_gradients=[1.0, 2.0])
    assert float(dx) == 4.0


def test_integer_target_has_no_gradient():
    x = tg.constant(1)
    with tg.GradientTape() as t:
        t.watch(x)  # accepted, with a warning, as TF
        y = x + x
    assert t.gradient(y, x) is None


def test_no_op_and_identity_gradients():
    x = tg.constant(3.0)
    with tg.GradientTape() as t:
        t.watch(x)
        y = x
    assert float(t.gradient(y, x)) == 1.0
    with tg.GradientTape() as t:
        t.watch(x)
        y = tg.identity(x)
    assert float(t.gradient(y, x)) == 1.0


def test_function_call_under_tape():
    @tg.function
    def f(x):
        return x + 1

    with tg.GradientTape() as t:
        x = tg.constant([1.0])
        t.watch(x)
        y = tg.gather(f(x), [0])
    assert value(t.gradient(y, x)) == [1.0]


def test_multi_target_sums():
    x = tg.constant(2.0)
    with tg.GradientTape() as t:
        t.watch(x)
        y = x * x
    assert float(t.gradient([x, y], x)) == 5.0
    x = tg.constant(3.0)
    with tg.GradientTape() as t:
        t.watch(x)
        y = x
    assert float(t.gradient([y, y], x)) == 2.0
    x, y = tg.constant(3.0), tg.constant(5.0)
    with tg.GradientTape() as t:
        t.watch(x)
        t.watch(y)
        z = y * y
    assert [value(g) for g in t.gradient([x, y, z], [x, y])] == [1.0, 11.0]


def test_string_targets_and_sources_give_none():
    s = tg.constant("unknown")
    x = tg.constant(3.0)
    with tg.GradientTape() as t:
        t.watch(x)
        t.watch(s)
    assert t.gradient(s, x) is None
    with tg.GradientTape() as t:
        t.watch(s)
    assert t.gradient(s, s) is None
    y = tg.constant(5.0)
    with tg.GradientTape() as t:
        t.watch([x, y, s])
        z = y * y
    grads = t.gradient([x, y, z, s], [x, y, s])
    assert [value(g) for g in grads[:2]] == [1.0, 11.0] and grads[2] is None


def test_no_op_on_variable_is_identity():
    v0 = tg.Variable(1.0)
    with tg.GradientTape() as t:
        y = v0.read_value()
    assert float(t.gradient(y, v0)) == 1.0


def test_no_op_gradients_2_by_2():
    a = tg.fill([2, 2], 2.0)
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(a)
    assert_tensor(tape.gradient(a, [a])[0], np.ones((2, 2), np.float32))
    assert_tensor(tape.gradient([a, a], [a])[0], np.full((2, 2), 2.0, np.float32))


def test_stop_recording():
    with tg.GradientTape() as t:
        x = tg.Variable(1.0)
        with t.stop_recording():
            y = x * x
    assert t.gradient(y, x) is None


def test_stop_start_recording():
    with tg.GradientTape(persistent=True) as t:
        x = tg.Variable(1.0)
        x2 = x * 2
        with t.stop_recording():
            y = x2 * x2
        z = x2 * x2
    assert t.gradient(y, x2) is None
    assert float(t.gradient(z, x2)) == 4.0


def test_stop_recording_when_not_recording_raises():
    t = tg.GradientTape()
    with pytest.raises(RuntimeError, match="not recording"):
        with t.stop_recording():
            pass


def test_reset():
    with tg.GradientTape() as t:
        v = tg.Variable(1.0)
        loss = v * v
        t.reset()
        loss += v * v
    assert float(t.gradient(loss, v)) == 2.0


def test_python_max_over_variables():
    x = [tg.Variable(2.0), tg.Variable(3.0), tg.Variable(5.0)]
    with tg.GradientTape() as t:
        f = max(x)
    grads = t.gradient(f, x)
    assert float(f.numpy()) == 5.0
    assert grads[0] is None and grads[1] is None and float(grads[2]) == 1.0


def test_automatic_and_explicit_watched_variables():
    with tg.GradientTape() as t:
        assert len(t.watched_variables()) == 0
        v = tg.Variable(1.0)
        loss = v * v
        assert t.watched_variables() == (v,)
        t.reset()
        assert len(t.watched_variables()) == 0
        loss += v * v
        assert t.watched_variables() == (v,)
    with tg.GradientTape() as t:
        w = tg.Variable(1.0, trainable=False)
        _ = w * 2
        assert t.watched_variables() == ()  # not trainable: not watched automatically
        t.watch(w)
        assert t.watched_variables() == (w,)
    del loss


def test_watched_variables_after_gradient_and_reset():
    with tg.GradientTape() as tape:
        x = tg.Variable(1.0)
        tape.watch(x)
    tape.gradient(x, x)
    assert tape.watched_variables() == (x,)
    with tg.GradientTape() as tape:
        x = tg.Variable(1.0)
        tape.watch(x)
        tape.reset()
        z = tg.Variable(2.0)
        tape.watch(z)
        assert tape.watched_variables() == (z,)
    tape.gradient(z, z)
    assert tape.watched_variables() == (z,)


def test_gradient_within_tape_block():
    v1 = tg.Variable(1.0)
    with tg.GradientTape() as t:
        loss = 2 * v1
        grad = t.gradient(loss, v1)
    assert float(grad) == 2.0
    with tg.GradientTape(persistent=True) as t:
        loss = 2 * v1
        grad = t.gradient(loss, v1)
    assert float(grad) == 2.0


def test_nested_self_contexts():
    with tg.GradientTape() as t:
        with pytest.raises(ValueError, match="re-enter"):
            with t:
                pass


def test_watching_is_tape_local():
    x1 = tg.Variable(2.0, trainable=False)
    x2 = tg.Variable(2.0, trainable=False)
    with tg.GradientTape() as tape1:
        with tg.GradientTape() as tape2:
            tape1.watch(x1)
            tape2.watch([x1, x2])
            y = x1 ** 3
            z = x2 ** 2
            dy, dz = tape2.gradient([y, z], [x1, x2])
        d2y, d2z = tape1.gradient([dy, dz], [x1, x2])
    assert float(d2y) == 12.0
    assert d2z is None


def test_re_enter_context():
    g = tg.GradientTape()
    with g:
        x = tg.constant(3.0)
        g.watch(x)
        y = 2 * x
    with g:
        z = 2 * y
    assert [value(d) for d in g.gradient(target=z, sources=[x])] == [4.0]


def test_repeated_sources():
    with tg.GradientTape(persistent=False) as g:
        x = tg.constant(3.0)
        g.watch(x)
        y = 2 * x
    assert [value(d) for d in g.gradient(target=y, sources=[x, x])] == [2.0, 2.0]
    with tg.GradientTape(persistent=True) as g:
        x, y = tg.constant(3.0), tg.constant(5.0)
        g.watch(x)
        g.watch(y)
        z = x * x + x * y
    assert [value(d) for d in g.gradient(target=z, sources=[x, x])] == [11.0, 11.0]
    assert [value(d) for d in g.gradient(target=z, sources=[y, x])] == [3.0, 11.0]


def test_structure_of_sources():
    with tg.GradientTape(persistent=True) as g:
        x1, x2, x3 = tg.constant(3.0), tg.constant(3.1), tg.constant(3.2)
        g.watch(x1)
        g.watch(x2)
        g.watch(x3)
        y = x1 + 2 * x2 + 3 * x3

    def values(structure):
        if isinstance(structure, dict):
            return {k: values(v) for k, v in structure.items()}
        if isinstance(structure, (list, tuple)):
            return type(structure)(values(v) for v in structure)
        return float(structure)

    assert float(g.gradient(y, x1)) == 1.0
    assert values(g.gradient(y, (x1,))) == (1.0,)
    assert values(g.gradient(y, (x1, x2))) == (1.0, 2.0)
    assert values(g.gradient(y, [(x1, x2), (x2, x3)])) == [(1.0, 2.0), (2.0, 3.0)]
    assert values(g.gradient(y, (x1, x2, [x1, x3]))) == (1.0, 2.0, [1.0, 3.0])
    assert values(g.gradient(y, [x1, {"x2": x2, "x3": x3}])) == [1.0, {"x2": 2.0, "x3": 3.0}]
    Pair = namedtuple("Pair", "a b")
    grads = g.gradient(y, Pair(x3, x1))
    assert isinstance(grads, Pair) and values(tuple(grads)) == (3.0, 1.0)
    grads = g.gradient({"out": y}, {"b": x2, "a": x1}, output_gradients={"out": 2.0})
    assert list(grads) == ["b", "a"] and values(grads) == {"b": 4.0, "a": 2.0}


def test_nested_tapes():
    with tg.GradientTape() as g:
        x = tg.constant(3.0)
        g.watch(x)
        y = x * x
        with tg.GradientTape() as gg:
            gg.watch(y)
            z = 2 * y
        inner_grad = gg.gradient(z, [y])[0]
        assert float(inner_grad) == 2.0
        y += inner_grad
    assert float(g.gradient(y, [x])[0]) == 6.0


def test_constant_target():
    with tg.GradientTape() as g:
        x = tg.Variable([3.0])
        y = tg.Variable([2.0])
    assert g.gradient(x, y) is None


def test_gradient_called_twice_on_non_persistent_tape():
    with tg.GradientTape() as g:
        x = tg.constant(3.0)
        g.watch(x)
        y = x * x
        z = y * y
    g.gradient(z, [x])
    with pytest.raises(RuntimeError, match="GradientTape.gradient can only be called once"):
        g.gradient(y, [x])


def test_persistent_tape():
    with tg.GradientTape(persistent=True) as g:
        x = tg.constant(3.0)
        g.watch(x)
        y = x * x
        z = y * y
    assert float(g.gradient(z, [x])[0]) == 4 * 3 * 3 * 3
    assert float(g.gradient(y, [x])[0]) == 2 * 3


def test_higher_order_gradient():
    with tg.GradientTape(persistent=True) as g:
        x = tg.constant(3.0)
        g.watch(x)
        y = x ** 3
        dy_dx = g.gradient(y, x)
        d2y_dx2 = g.gradient(dy_dx, x)
    d3y_dx3 = g.gradient(d2y_dx2, x)
    assert float(y) == 27.0 and float(dy_dx) == 27.0
    assert float(d2y_dx2) == 18.0 and float(d3y_dx3) == 6.0


def test_persistent_nested_tape():
    with tg.GradientTape(persistent=True) as g:
        x = tg.constant(3.0)
        g.watch(x)
        y = x * x
        with tg.GradientTape(persistent=True) as gg:
            gg.watch(y)
            z = 2 * y
        for _ in range(2):
            inner_grad = gg.gradient(z, [y])[0]
            assert float(inner_grad) == 2.0
        y += inner_grad
        del gg
    assert float(g.gradient(y, [x])[0]) == 6.0
    assert float(g.gradient(z, [x])[0]) == 12.0


def test_variable_and_nested_gradients():
    v = tg.Variable(1.0, name="v")
    with tg.GradientTape() as g:
        y = v * v
    assert float(g.gradient(y, [v])[0]) == 2.0
    x = tg.constant(3.0)
    with tg.GradientTape() as g:
        g.watch(x)
        y = x * x
        z = y * y
    dz_dx, dz_dy = g.gradient(z, [x, y])
    assert float(dz_dx) == 108.0 and float(dz_dy) == 18.0


def test_unconnected_gradients():
    x, y = tg.constant(1.0), tg.constant(3.0)
    with tg.GradientTape() as g:
        g.watch([x, y])
        z = y * 2
    assert g.gradient(z, x) is None
    x = tg.fill([2, 2], 1.0)
    with tg.GradientTape() as g:
        g.watch([x, y])
        z = y * 2
    assert_tensor(g.gradient(z, x, unconnected_gradients="zero"), np.zeros((2, 2), np.float32))
    xv, yv = tg.Variable(tg.fill([2, 2], 1.0)), tg.Variable(3.0)
    with tg.GradientTape() as g:
        g.watch([xv, yv])
        z = yv * 2
    assert_tensor(g.gradient(z, xv, unconnected_gradients=tg.UnconnectedGradients.ZERO),
                  np.zeros((2, 2), np.float32))
    with tg.GradientTape() as g:
        g.watch([x, y])
        z = y * 2
    with pytest.raises(ValueError, match="Unknown value for unconnected_gradients: 'nonsense'"):
        g.gradient(z, x, unconnected_gradients="nonsense")


def test_unwatched_tensor_has_no_gradient():
    w = tg.Variable([[1.0], [2.0]])
    x = tg.constant([[3.0, 4.0]])
    with tg.GradientTape() as t:
        y = tg.matmul(x, w)  # recorded (w is watched), x is only an input
    dw, dx = t.gradient(y, [w, x])
    assert_tensor(dw, np.array([[3.0], [4.0]], np.float32))
    assert dx is None


def test_selectively_watch_variables():
    x1, x2 = tg.Variable(1.0), tg.Variable(1.0)
    with tg.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(x2)
        y = x1 ** 2
        z = x2 ** 3
    assert tape.watched_variables() == (x2,)
    dy, dz = tape.gradient([y, z], [x1, x2])
    assert dy is None and float(dz) == 3.0


def test_non_trainable_variable_is_not_watched_automatically():
    v = tg.Variable(3.0, trainable=False)
    with tg.GradientTape() as tape:
        y = v * v
    assert tape.gradient(y, v) is None


def test_differentiating_equal_constants_apart():
    with tg.GradientTape(persistent=False) as g:
        x1, x2 = tg.constant(3.0), tg.constant(3.0)
        g.watch(x1)
        g.watch(x2)
        y = x1 + x2
    assert [value(d) for d in g.gradient(target=y, sources=[x1])] == [1.0]


def test_variables_and_constants_give_the_same_gradients():
    def get_grads(a, b):
        with tg.GradientTape() as tape:
            tape.watch([a, b])
            y = a ** 3
            z = b ** 2
        return [value(g) for g in tape.gradient([y, z], [a, b])]

    assert get_grads(tg.constant(2.0), tg.constant(2.0)) == \
        get_grads(tg.Variable(2.0), tg.Variable(2.0)) == [12.0, 4.0]


def test_watch_bad_thing():
    g = tg.GradientTape()
    with pytest.raises(ValueError, match="ndarray"):
        g.watch(np.array(1.0))
    with g:
        with pytest.raises(ValueError, match="float"):
            g.watch([tg.constant(1.0), 2.0])


def test_jacobian():
    with tg.GradientTape(persistent=True) as g:
        x, y = tg.constant([1.0, 2.0]), tg.constant([3.0, 4.0])
        g.watch(x)
        g.watch(y)
        z = x * x * y
    jx, jy = g.jacobian(z, [x, y])
    assert_tensor(jx, np.diag(2 * np.array([1.0, 2.0]) * [3.0, 4.0]).astype(np.float32))
    assert_tensor(jy, np.diag(np.array([1.0, 4.0])).astype(np.float32))
    with tg.GradientTape() as g:  # non-persistent: one jacobian, then spent
        x = tg.constant([[1.0, 2.0], [3.0, 4.0]])
        g.watch(x)
        y = tg.matmul(x, x)
    j = g.jacobian(y, x)
    xs = np.array([[1.0, 2.0], [3.0, 4.0]])
    want = np.zeros((2, 2, 2, 2))
    for i in range(2):
        for k in range(2):
            for a in range(2):
                for b in range(2):  # d(x @ x)[i,k] / dx[a,b]
                    want[i, k, a, b] = (i == a) * xs[b, k] + (k == b) * xs[i, a]
    assert_tensor(j, want.astype(np.float32))
    with pytest.raises(RuntimeError):
        g.jacobian(y, x)


def test_batch_jacobian():
    with tg.GradientTape(persistent=True) as g:
        x = tg.constant([[1.0, 2.0], [3.0, 4.0]])
        y = tg.constant([[3.0, 4.0], [5.0, 6.0]])
        g.watch(x)
        z = x * x * y
    bj = g.batch_jacobian(z, x)
    xs, ys = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[3.0, 4.0], [5.0, 6.0]])
    assert_tensor(bj, np.stack([np.diag(2 * xs[0] * ys[0]), np.diag(2 * xs[1] * ys[1])]).astype(np.float32))
    x = tg.random.uniform([2, 3])
    with tg.GradientTape() as g:
        g.watch(x)
        y = tg.concat([x, x], axis=0)
    with pytest.raises(ValueError, match="Need first dimension"):
        g.batch_jacobian(y, x)
    x = tg.random.uniform([2])
    with tg.GradientTape() as g:
        y = tg.random.uniform([2, 2])
    with pytest.raises(ValueError, match="rank at least 2"):
        g.batch_jacobian(y, x)


def test_degenerate_batch_jacobian():
    def f(x):
        with tg.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = x ** 2
        return tape.batch_jacobian(y, x)

    assert f(tg.zeros([1, 0])).shape == [1, 0, 0]


# ---- values against NumPy and finite differences ----------------------------------------------

def numeric_gradient(fn, x, eps=1e-6):
    x = np.array(x, np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (fn(up) - fn(down)) / (2 * eps)
    return g


@pytest.mark.parametrize("name,tg_fn,np_fn", [
    ("tanh", lambda x: tg.reduce_sum(tg.tanh(x) * x), lambda x: np.sum(np.tanh(x) * x)),
    ("exp_log", lambda x: tg.reduce_sum(tg.math.log(tg.exp(x) + 1.0)),
     lambda x: np.sum(np.log(np.exp(x) + 1.0))),
    ("sigmoid_sq", lambda x: tg.reduce_mean(tg.sigmoid(x) ** 2), lambda x: np.mean((1 / (1 + np.exp(-x))) ** 2)),
    ("softmax", lambda x: tg.reduce_sum(tg.nn.softmax(x) * tg.constant([[1.0, 2.0, 3.0]], tg.float64)),
     lambda x: np.sum(np.exp(x) / np.exp(x).sum(-1, keepdims=True) * [[1.0, 2.0, 3.0]])),
    ("matmul", lambda x: tg.reduce_sum(tg.matmul(x, tg.transpose(x)) ** 2),
     lambda x: np.sum((x @ x.T) ** 2)),
])
def test_gradients_match_finite_differences(name, tg_fn, np_fn, rng):
    del name
    x0 = rng.normal(size=(2, 3))
    x = tg.constant(x0)  # float64: finite differences are exact enough
    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg_fn(x)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), numeric_gradient(np_fn, x0),
                               rtol=1e-5, atol=1e-7)


def test_gradient_of_dense_layer_by_hand(rng):
    x0 = rng.normal(size=(4, 3)).astype(np.float32)
    w0 = rng.normal(size=(3, 2)).astype(np.float32)
    b0 = rng.normal(size=(2,)).astype(np.float32)
    w, b = tg.Variable(w0), tg.Variable(b0)
    with tg.GradientTape() as tape:
        y = tg.reduce_sum(tg.square(tg.matmul(x0, w) + b))
    dw, db = tape.gradient(y, [w, b])
    r = 2 * (x0 @ w0 + b0)
    np.testing.assert_allclose(dw.numpy(), x0.T @ r, rtol=1e-5)
    np.testing.assert_allclose(db.numpy(), r.sum(0), rtol=1e-5)


# ---- inside tg.function ----------------------------------------------------------------------

def test_tape_inside_function_with_closed_over_variable():
    w = tg.Variable(2.0)

    @tg.function
    def grad(x):
        with tg.GradientTape() as tape:
            y = w * x * x
        return tape.gradient(y, w)

    assert float(grad(tg.constant(3.0))) == 9.0
    w.assign(5.0)  # no retrace; the gradient does not depend on w here
    assert float(grad(tg.constant(4.0))) == 16.0
    assert grad.experimental_get_tracing_count() == 1


def test_higher_order_inside_function():
    @tg.function
    def second(x):
        with tg.GradientTape() as outer:
            outer.watch(x)
            with tg.GradientTape() as inner:
                inner.watch(x)
                y = x ** 3
            dy = inner.gradient(y, x)
        return dy, outer.gradient(dy, x)

    dy, d2y = second(tg.constant(2.0))
    assert float(dy) == 12.0 and float(d2y) == 12.0


def test_train_step_in_function_updates_variable():
    w = tg.Variable(2.0)
    x, y = tg.constant([-1.0]), tg.constant([2.0])

    @tg.function
    def train_step():
        with tg.GradientTape() as tape:
            loss = tg.reduce_sum(tg.square(w * x - y))
        (g,) = tape.gradient(loss, [w])
        w.assign_sub(0.1 * g)
        return loss

    losses = [float(train_step()) for _ in range(3)]
    want, wv = [], 2.0
    for _ in range(3):
        want.append((wv * -1.0 - 2.0) ** 2)
        wv -= 0.1 * 2 * (wv * -1.0 - 2.0) * -1.0
    np.testing.assert_allclose(losses, want, rtol=1e-6)
    np.testing.assert_allclose(w.numpy(), wv, rtol=1e-6)


# ---- bad input -------------------------------------------------------------------------------

def test_bad_sources_and_targets_raise():
    x = tg.constant(1.0)
    with tg.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * 2
    for bad in (3.0, None, np.array(1.0), "x", object()):
        with pytest.raises(ValueError, match="source"):
            t.gradient(y, bad)
        with pytest.raises(ValueError, match="source"):
            t.gradient(y, [x, bad])
    for bad in (None, 3.0, np.array([1.0])):
        with pytest.raises(ValueError, match="target"):
            t.gradient(bad, x)
    with pytest.raises(ValueError, match="output_gradients"):
        t.gradient([y, y], x, output_gradients=[1.0])
    with pytest.raises(TypeError):
        t.gradient(y, x, output_gradients=["a"])
    assert float(t.gradient(y, x)) == 2.0  # the tape still works after the errors


def test_gradient_of_a_tape_never_entered():
    with pytest.raises(RuntimeError, match="never entered"):
        tg.GradientTape().gradient(tg.constant(1.0), tg.constant(1.0))
    with pytest.raises(RuntimeError, match="not active"):
        tg.GradientTape().watch(tg.constant(1.0))


def test_integer_variable_source_gives_none_or_zeros():
    i = tg.Variable(3)
    with tg.GradientTape() as t:
        y = tg.cast(i, tg.float32) * 2.0
    assert t.gradient(y, i) is None
    with tg.GradientTape() as t:
        y = tg.cast(i, tg.float32) * 2.0
    assert_tensor(t.gradient(y, i, unconnected_gradients="zero"), np.int32(0))


# ---- threads ---------------------------------------------------------------------------------

def test_tape_belongs_to_its_thread():
    x = tg.constant(2.0)
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
    errors = []

    def other():
        try:
            tape.gradient(y, x)
        except ValueError as e:
            errors.append(str(e))

    th = threading.Thread(target=other)
    th.start()
    th.join()
    assert errors and "thread" in errors[0]
    assert float(tape.gradient(y, x)) == 4.0


def test_tape_dropped_on_another_thread_and_tapes_on_many_threads():
    holder = []
    with tg.GradientTape(persistent=True) as tape:
        x = tg.constant(1.0)
        tape.watch(x)
        _ = x * 3
    holder.append(tape)
    del tape

    def drop():
        holder.clear()
        gc.collect()

    th = threading.Thread(target=drop)
    th.start()
    th.join()
    results = []

    def work(k):
        xk = tg.constant(float(k))
        with tg.GradientTape() as t:
            t.watch(xk)
            yk = xk * xk
        results.append((k, float(t.gradient(yk, xk))))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(results) == [(k, 2.0 * k) for k in range(4)]
    with tg.GradientTape() as t:  # this thread's tapes still work (the orphan is gone)
        x = tg.constant(5.0)
        t.watch(x)
        y = x * x
    assert float(t.gradient(y, x)) == 10.0


# ---- property: tape gradients of random inputs are the analytic ones --------------------------

@settings(max_examples=40, deadline=None, database=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
                  elements=st.floats(-3, 3, allow_nan=False)),
       st.floats(-2, 2, allow_nan=False), st.booleans())
def test_gradients_of_random_inputs_are_analytic(x0, a, as_variable):
    # f = sum(tanh(a x) * x^2 + exp(-x)); df/dx = a (1 - tanh^2(a x)) x^2 + 2 x tanh(a x) - exp(-x)
    x = tg.Variable(x0) if as_variable else tg.constant(x0)
    with tg.GradientTape() as tape:
        if not as_variable:
            tape.watch(x)
        f = tg.reduce_sum(tg.tanh(a * x) * tg.square(x) + tg.exp(-x))
    g = tape.gradient(f, x)
    t = np.tanh(a * x0)
    want = a * (1 - t * t) * x0 * x0 + 2 * x0 * t - np.exp(-x0)
    assert g.shape == x0.shape and g.dtype == tg.float64
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-9, atol=1e-12)
