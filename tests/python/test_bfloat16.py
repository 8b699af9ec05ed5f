"""tg.bfloat16 from Python: the dtype object, tensors made from lists and arrays, printing,
.numpy() (which raises: NumPy has no bfloat16), casts and ops computed in float32 and rounded."""
import numpy as np
import pytest

import tracegraph as tg


def test_dtype_object():
    assert tg.bfloat16.name == "bfloat16"
    assert tg.bfloat16.is_floating and not tg.bfloat16.is_integer
    assert tg.bfloat16.size == 2
    assert tg.bfloat16.as_numpy_dtype is None and not tg.bfloat16.is_numpy_compatible
    assert tg.as_dtype("bfloat16") == tg.bfloat16
    assert tg.bfloat16.max == 3.3895313892515355e38 and tg.bfloat16.min == -tg.bfloat16.max
    assert tg.as_dtype(np.float64) == tg.float64  # no NumPy type maps to bfloat16


def test_values_round_to_nearest_even_and_print():
    x = tg.constant([1.0, 1.00390625, 1.01171875, -2.5], dtype=tg.bfloat16)
    assert x.dtype == tg.bfloat16
    np.testing.assert_array_equal(tg.cast(x, tg.float32).numpy(), [1.0, 1.0, 1.015625, -2.5])
    assert str(x) == "tg.Tensor([ 1.        1.        1.015625 -2.5     ], shape=(4,), dtype=bfloat16)"
    assert "dtype=bfloat16" in repr(x)
    a = tg.constant(np.array([0.1, 3.0], np.float32), dtype=tg.bfloat16)
    np.testing.assert_array_equal(tg.cast(a, tg.float32).numpy(), [0.10009765625, 3.0])


def test_numpy_raises_with_the_way_out():
    x = tg.constant([1.0], dtype=tg.bfloat16)
    with pytest.raises(TypeError, match="NumPy has no bfloat16"):
        x.numpy()


def test_ops_and_gradients():
    a = tg.cast(tg.constant([[1.0, 2.0], [3.0, 4.0]]), tg.bfloat16)
    b = tg.cast(tg.constant([[1.0], [0.00390625]]), tg.bfloat16)
    y = tg.matmul(a, b)
    assert y.dtype == tg.bfloat16
    np.testing.assert_array_equal(tg.cast(y, tg.float32).numpy(), [[1.0078125], [3.015625]])
    w = tg.Variable(tg.constant([[0.5, -1.0]]))
    with tg.GradientTape() as tape:
        loss = tg.reduce_sum(tg.cast(tg.nn.relu(tg.cast(w, tg.bfloat16)), tg.float32))
    (g,) = tape.gradient(loss, [w])
    assert g.dtype == tg.float32
    np.testing.assert_array_equal(g.numpy(), [[1.0, 0.0]])
