"""tg.experimental.dlpack and the DLPack protocol (python/src/dlpack_bindings.cpp): tensors cross
to and from NumPy and PyTorch without copies where the memory is row-major and aligned, with
their values, dtypes and shapes; the producer's memory lives as long as a tensor uses it; what
cannot cross raises a Python exception."""
import gc

import numpy as np
import pytest

import tracegraph as tg
from tracegraph.experimental import dlpack


def address(t):
    """The address of a tg.Tensor's elements (np.asarray shares them)."""
    return np.asarray(t).__array_interface__["data"][0]


# NumPy 1.24 and PyTorch 1.13 have no DLPack bool (DLPack 0.8's code 6); tracegraph's own round
# trip covers it.
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8]


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_reads_a_tensor_without_a_copy(dtype):
    t = tg.constant(np.arange(12).reshape(3, 4).astype(dtype))
    a = np.from_dlpack(t)
    assert a.dtype == dtype and a.shape == (3, 4)
    np.testing.assert_array_equal(a, np.arange(12).reshape(3, 4).astype(dtype))
    assert a.__array_interface__["data"][0] == address(t)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_numpy_array_becomes_a_tensor_without_a_copy(dtype):
    a = np.arange(6).reshape(2, 3).astype(dtype)
    t = dlpack.from_dlpack(a)
    assert t.dtype == tg.as_dtype(dtype) and t.shape == (2, 3)
    np.testing.assert_array_equal(t.numpy(), a)
    assert address(t) == a.__array_interface__["data"][0]


def test_the_producer_lives_as_long_as_the_tensor():
    a = np.arange(1000, dtype=np.float32)
    t = dlpack.from_dlpack(a)
    del a
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), np.arange(1000, dtype=np.float32))
    u = t[10:20] * 2.0  # a view and an op over the shared memory
    np.testing.assert_array_equal(u.numpy(), np.arange(10, 20, dtype=np.float32) * 2)


def test_an_exported_tensor_outlives_its_handle():
    t = tg.range(0, 8) * 3
    a = np.from_dlpack(t)
    del t
    gc.collect()
    np.testing.assert_array_equal(a, np.arange(8) * 3)


def test_a_view_exports_its_own_elements():
    t = tg.reshape(tg.range(0, 12), [3, 4])
    row = t[1]
    np.testing.assert_array_equal(np.from_dlpack(row), [4, 5, 6, 7])


def test_strided_memory_is_copied_with_its_values():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    for view in (a.T, a[:, ::2], a[::-1]):
        t = dlpack.from_dlpack(view)
        np.testing.assert_array_equal(t.numpy(), view)
        assert address(t) != view.__array_interface__["data"][0]


def test_scalars_and_empty_tensors_cross():
    assert dlpack.from_dlpack(np.array(2.5, np.float32)).numpy() == 2.5
    z = dlpack.from_dlpack(np.zeros((0, 3), np.int32))
    assert z.shape == (0, 3) and z.dtype == tg.int32
    s = tg.constant(7)
    assert np.from_dlpack(s).shape == () and int(np.from_dlpack(s)) == 7


def test_bool_round_trips_through_a_capsule():
    flags = tg.constant([[True, False], [False, True]])
    back = dlpack.from_dlpack(dlpack.to_dlpack(flags))
    assert back.dtype == tg.bool
    np.testing.assert_array_equal(back.numpy(), [[True, False], [False, True]])
    assert address(back) == address(flags)


def test_a_capsule_is_consumed_once():
    capsule = dlpack.to_dlpack(tg.constant([1.0, 2.0]))
    t = dlpack.from_dlpack(capsule)
    np.testing.assert_array_equal(t.numpy(), [1.0, 2.0])
    with pytest.raises(ValueError, match="already consumed"):
        dlpack.from_dlpack(capsule)


def test_an_unconsumed_capsule_frees_its_tensor():
    for _ in range(1000):  # leaks would show under ASan
        dlpack.to_dlpack(tg.zeros([64]))
    gc.collect()


def test_what_cannot_cross_raises():
    with pytest.raises(TypeError, match="string"):
        dlpack.to_dlpack(tg.constant(["a", "b"]))
    with pytest.raises(TypeError, match="tracegraph dtype"):  # NumPy exports float16 as (kDLFloat, 16)
        dlpack.from_dlpack(np.zeros(3, np.float16))
    with pytest.raises(TypeError, match="__dlpack__"):
        dlpack.from_dlpack([1, 2, 3])
    with pytest.raises(TypeError):
        dlpack.from_dlpack(None)
    with pytest.raises(ValueError, match="stream"):
        tg.constant([1.0]).__dlpack__(stream=1)


def test_a_symbolic_tensor_cannot_be_exported():
    @tg.function
    def f(x):
        dlpack.to_dlpack(x)
        return x

    with pytest.raises(TypeError, match="symbolic"):
        f(tg.constant([1.0]))


def test_pytorch_tensors_cross_without_copies():
    torch = pytest.importorskip("torch")
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    t = dlpack.from_dlpack(x)
    assert t.dtype == tg.float32 and t.shape == (3, 4)
    assert address(t) == x.data_ptr()
    np.testing.assert_array_equal(t.numpy(), x.numpy())
    back = torch.from_dlpack(t)
    assert back.data_ptr() == x.data_ptr()
    y = torch.from_dlpack(tg.constant([[1, 2], [3, 4]], dtype=tg.int64) * 10)
    assert y.dtype == torch.int64 and y.tolist() == [[10, 20], [30, 40]]
    transposed = dlpack.from_dlpack(x.t())  # strided: copied
    np.testing.assert_array_equal(transposed.numpy(), x.t().numpy())
    with pytest.raises(TypeError, match="tracegraph dtype"):
        dlpack.from_dlpack(torch.zeros(3, dtype=torch.float16))
    del x
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4))
