"""tg.Tensor from Python: construction and dtype inference, NumPy in and out without copies,
shape and dtype objects, reprs, scalars, iteration, indexing and operators."""
import gc
import operator

import numpy as np
import pytest

import tracegraph as tg
from conftest import assert_tensor


# ---- tg.constant and dtype inference (TF's: int -> int32, float -> float32) --------------------

@pytest.mark.parametrize("value,dtype,shape", [
    (1, tg.int32, ()),
    (2**40, tg.int64, ()),
    ([1, 2**40], tg.int64, (2,)),
    (1.5, tg.float32, ()),
    (True, tg.bool, ()),
    ("a", tg.string, ()),
    (b"bytes", tg.string, ()),
    ([1, 2, 3], tg.int32, (3,)),
    ([1, 2.5], tg.float32, (2,)),
    ([[True], [False]], tg.bool, (2, 1)),
    ([], tg.float32, (0,)),
    ([[], []], tg.float32, (2, 0)),
    ((1, 2), tg.int32, (2,)),
    (np.float64(1.5), tg.float64, ()),
    ([np.float64(1.5), 2.0], tg.float64, (2,)),
    ([np.int64(1), 2], tg.int64, (2,)),
    (np.array([1, 2], np.int64), tg.int64, (2,)),
    (np.array([1.0], np.float64), tg.float64, (1,)),
    (np.array([1], np.uint8), tg.uint8, (1,)),
    (np.array([1], np.int16), tg.int32, (1,)),
    (np.array([1], np.float16), tg.float32, (1,)),
    (np.array(["a", "bc"]), tg.string, (2,)),
])
def test_constant_infers_tf_dtypes(value, dtype, shape):
    t = tg.constant(value)
    assert t.dtype == dtype
    assert t.shape == shape
    expected = np.array(value, dtype=object if dtype == tg.string else None)
    if dtype == tg.string:
        as_bytes = np.vectorize(lambda s: s.encode() if isinstance(s, str) else s, otypes=[object])
        np.testing.assert_array_equal(t.numpy(), as_bytes(expected))
    else:
        np.testing.assert_array_equal(t.numpy(), expected.astype(dtype.as_numpy_dtype))


def test_constant_with_dtype_and_shape():
    assert_tensor(tg.constant(1, dtype=tg.float64), np.float64(1.0))
    assert_tensor(tg.constant([1, 2], dtype="float32"), np.array([1, 2], np.float32))
    assert_tensor(tg.constant(7, shape=[2, 2]), np.full((2, 2), 7, np.int32))
    assert_tensor(tg.constant([1, 2, 3, 4], shape=(2, 2)), np.array([[1, 2], [3, 4]], np.int32))
    assert_tensor(tg.constant(np.array([1, 2]), dtype=tg.float32), np.array([1, 2], np.float32))
    assert_tensor(tg.constant(np.array([1.5]), dtype=tg.float32), np.array([1.5], np.float32))
    with pytest.raises(TypeError, match="cannot fill the shape"):
        tg.constant([1, 2, 3], shape=[2, 2])
    with pytest.raises(TypeError):
        tg.constant(1.5, dtype=tg.int32)  # a float never becomes an integer (TF)
    with pytest.raises(TypeError):
        tg.constant(np.array([1.5]), dtype=tg.int32)
    with pytest.raises(TypeError):
        tg.constant(tg.constant(1), dtype=tg.float32)  # a tensor is not cast by constant
    with pytest.raises(ValueError, match="do not fit"):
        tg.constant(np.array([2**40]), dtype=tg.int32)


def test_convert_to_tensor_hint_and_requirement():
    assert tg.convert_to_tensor(1, dtype_hint=tg.float32).dtype == tg.float32
    assert tg.convert_to_tensor(1.5, dtype_hint=tg.int32).dtype == tg.float32  # a hint may not fit
    t = tg.constant([1, 2])
    assert tg.convert_to_tensor(t) is not None and tg.convert_to_tensor(t).dtype == tg.int32
    with pytest.raises(TypeError):
        tg.convert_to_tensor(t, dtype=tg.float32)


# ---- NumPy in and out ---------------------------------------------------------------------------

def address(array):
    return array.__array_interface__["data"][0]


def test_constant_from_numpy_shares_memory():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = tg.constant(x)
    assert t._data_ptr() == address(x)
    assert np.shares_memory(np.asarray(t), x)
    del x
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4))


def test_constant_copies_when_the_layout_needs_it():
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    strided = x[:, ::2]  # not contiguous
    t = tg.constant(strided)
    assert not np.shares_memory(np.asarray(t), x)
    assert_tensor(t, strided)
    big_endian = np.arange(4, dtype=">i4")
    assert_tensor(tg.constant(big_endian), np.arange(4, dtype=np.int32))


def test_asarray_is_a_read_only_view_that_keeps_the_tensor_alive():
    t = tg.constant([[1.0, 2.0], [3.0, 4.0]])
    a = np.asarray(t)
    assert address(a) == t._data_ptr()
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0, 0] = 5.0
    m = memoryview(t)
    assert m.readonly and m.shape == (2, 2) and m.format == "f"
    del t, m
    gc.collect()
    for _ in range(100):  # new tensors would reuse freed memory
        tg.ones([2, 2]) * 7.0
    np.testing.assert_array_equal(a, [[1.0, 2.0], [3.0, 4.0]])


def test_numpy_returns_a_writable_copy_and_scalars():
    t = tg.constant([1, 2, 3])
    n = t.numpy()
    assert n.flags.writeable and not np.shares_memory(n, np.asarray(t))
    n[0] = 100
    assert t.numpy()[0] == 1
    s = tg.constant(2.5).numpy()
    assert isinstance(s, np.float32) and s == 2.5
    assert tg.constant("x").numpy() == b"x"
    assert np.asarray(t, dtype=np.float64).dtype == np.float64


def test_numpy_round_trip_of_every_dtype(rng):
    for dtype in (np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_):
        x = (rng.standard_normal((3, 5)) * 10).astype(dtype)
        t = tg.constant(x)
        assert t.dtype == tg.as_dtype(dtype)
        np.testing.assert_array_equal(np.asarray(t), x)


# ---- shape, dtype, repr ---------------------------------------------------------------------

def test_tensor_shape_behaves_like_tfs():
    s = tg.TensorShape([2, None])
    assert s == [2, None] and s == (2, None) and s != [2, 3]
    assert s.rank == 2 and s[0] == 2 and s[1] is None and s.as_list() == [2, None]
    assert str(s) == "(2, None)" and repr(s) == "TensorShape([2, None])"
    assert str(tg.TensorShape([3])) == "(3,)" and str(tg.TensorShape([])) == "()"
    assert not s.is_fully_defined() and s.num_elements() is None
    assert tg.TensorShape([2, 3]).num_elements() == 6
    unknown = tg.TensorShape(None)
    assert unknown.rank is None and str(unknown) == "<unknown>"
    with pytest.raises(ValueError):
        unknown.as_list()
    assert s.is_compatible_with([2, 5]) and not s.is_compatible_with([3, 5])
    assert tg.TensorShape([2, 3]).most_specific_compatible_shape([2, 4]) == [2, None]
    assert s[1:] == [None] and tg.TensorShape([1]) + [2] == [1, 2]
    with pytest.raises(ValueError):
        tg.TensorShape([-1])


def test_dtype_objects():
    t = tg.constant([1.0])
    assert t.dtype is tg.float32 and t.dtype == "float32" and t.dtype == np.float32
    assert t.dtype != tg.float64 and t.dtype != "not a dtype"
    assert tg.float32.name == "float32" and tg.float32.as_numpy_dtype is np.float32
    assert repr(tg.int64) == "tg.int64" and str(tg.int64) == "<dtype: 'int64'>"
    assert tg.as_dtype(float) is tg.float32 and tg.as_dtype(np.dtype("int64")) is tg.int64
    assert tg.float32.is_floating and tg.int32.is_integer and tg.bool.is_bool
    assert tg.int32.max == 2**31 - 1 and tg.uint8.min == 0
    assert {tg.float32: 1}[tg.as_dtype("float32")] == 1
    with pytest.raises(TypeError):
        tg.as_dtype(np.int8)
    with pytest.raises(TypeError):
        tg.as_dtype("float16")


@pytest.mark.parametrize("value,text", [
    ([1.0, 2.0], "<tg.Tensor: shape=(2,), dtype=float32, numpy=array([1., 2.], dtype=float32)>"),
    (1.0, "<tg.Tensor: shape=(), dtype=float32, numpy=1.0>"),
    (3, "<tg.Tensor: shape=(), dtype=int32, numpy=3>"),
    ([[1, 2], [3, 4]],
     "<tg.Tensor: shape=(2, 2), dtype=int32, numpy=\narray([[1, 2],\n       [3, 4]], dtype=int32)>"),
    ("hi", "<tg.Tensor: shape=(), dtype=string, numpy=b'hi'>"),
    ([True, False], "<tg.Tensor: shape=(2,), dtype=bool, numpy=array([ True, False])>"),
])
def test_repr_is_tfs(value, text):
    assert repr(tg.constant(value)) == text


def test_str_is_tfs():
    assert str(tg.constant([1, 2, 3])) == "tg.Tensor([1 2 3], shape=(3,), dtype=int32)"
    assert str(tg.constant(2.5)) == "tg.Tensor(2.5, shape=(), dtype=float32)"
    assert str(tg.constant([[1.0], [2.0]])) == "tg.Tensor(\n[[1.]\n [2.]], shape=(2, 1), dtype=float32)"
    assert f"{tg.constant(2.5):.3f}" == "2.500"


# ---- scalars, len, iteration -------------------------------------------------------------------

def test_python_scalars_from_tensors():
    assert int(tg.constant(3)) == 3 and float(tg.constant(2.5)) == 2.5
    assert bool(tg.constant(True)) and not bool(tg.constant(0.0))
    assert [10, 20, 30][tg.constant(2)] == 30 and operator.index(tg.constant(1, tg.int64)) == 1
    with pytest.raises(TypeError):
        operator.index(tg.constant(1.0))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(tg.constant([1, 2]))
    with pytest.raises(TypeError):
        int(tg.constant([1, 2]))


def test_len_and_iteration():
    t = tg.constant([[1, 2], [3, 4], [5, 6]])
    assert len(t) == 3
    rows = list(t)
    assert len(rows) == 3 and all(r.shape == [2] for r in rows)
    assert_tensor(rows[2], np.array([5, 6], np.int32))
    with pytest.raises(TypeError):
        len(tg.constant(1))
    with pytest.raises(TypeError):
        iter(tg.constant(1))
    assert list(tg.zeros([0, 2])) == []


def test_copy_and_pickle():
    import copy  # pylint: disable=import-outside-toplevel
    import pickle  # pylint: disable=import-outside-toplevel
    t = tg.constant([[1.5, 2.0]])
    assert copy.copy(t) is t and copy.deepcopy(t) is t
    assert_tensor(pickle.loads(pickle.dumps(t)), np.array([[1.5, 2.0]], np.float32))
    assert_tensor(pickle.loads(pickle.dumps(tg.constant(["a"]))), np.array([b"a"], object), dtype=tg.string)
    assert pickle.loads(pickle.dumps(tg.int64)) is tg.int64
    assert pickle.loads(pickle.dumps(tg.TensorShape([2, None]))) == [2, None]
    e = pickle.loads(pickle.dumps(tg.errors.InvalidArgumentError(None, None, "m")))
    assert isinstance(e, tg.errors.InvalidArgumentError) and e.message == "m"


def test_tensors_are_unhashable_but_have_refs():
    t = tg.constant(1)
    with pytest.raises(TypeError, match="ref"):
        hash(t)
    assert {t.ref(): 1}[t.ref()] == 1 and t.ref().deref() is t


# ---- indexing and slicing against NumPy ----------------------------------------------------------

X = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)


@pytest.mark.parametrize("key", [
    0, -1, 1, (1, 2), (1, 2, 3), (-1, -2, -3),
    slice(None), slice(1, None), slice(None, 1), slice(None, None, -1), slice(None, None, 2),
    (slice(None), slice(None, None, -2)), (Ellipsis, 1), (Ellipsis, slice(1, 3)), (0, Ellipsis),
    (None,), (None, 0), (0, None, slice(None), None), (Ellipsis, None), (slice(5, 10),),
    (slice(None), slice(3, 0, -1)), (slice(None), slice(-100, 100)), (1, slice(None), -2),
    (slice(None), 1, slice(None, None, 3)), (slice(-1, None, -1), Ellipsis, slice(0, 4, 3)),
    np.int64(1), (np.int32(0), slice(np.int64(1), None)),
])
def test_indexing_matches_numpy(key):
    assert_tensor(tg.constant(X)[key], X[key])


def test_indexing_with_tensors():
    t = tg.constant(X)
    assert_tensor(t[tg.constant(1)], X[1])
    assert_tensor(t[:, tg.constant(-1, tg.int64)], X[:, -1])
    assert_tensor(t[tg.constant(0):tg.constant(2), 1], X[0:2, 1])


@pytest.mark.parametrize("key,error", [
    (2, tg.errors.InvalidArgumentError), (-3, tg.errors.InvalidArgumentError),
    ((0, 3), tg.errors.InvalidArgumentError), ((0, 0, 0, 0), tg.errors.InvalidArgumentError),
    ((Ellipsis, Ellipsis), ValueError), ("a", TypeError), ([0, 1], TypeError), (1.5, TypeError),
    (tg.constant(1.0), TypeError), (tg.constant([0]), TypeError), (slice(0, "a"), TypeError),
    (slice(None, None, 0), ValueError), ({}, TypeError), (True, TypeError),
])
def test_bad_indices_raise(key, error):
    with pytest.raises(error):
        tg.constant(X)[key]


def test_scalar_cannot_be_indexed():
    with pytest.raises(tg.errors.InvalidArgumentError):
        tg.constant(1)[0]


# ---- operators and TF's dtype rules --------------------------------------------------------------

A = np.array([[1.5, -2.0], [3.0, 0.25]], np.float32)
B = np.array([[2.0, 0.5], [-1.0, 4.0]], np.float32)
I = np.array([7, -3, 5], np.int32)
J = np.array([2, 2, -4], np.int32)


@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.truediv,
                                operator.floordiv, operator.mod, operator.pow, operator.lt,
                                operator.le, operator.gt, operator.ge, operator.eq, operator.ne])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's NaN of a negative base's power
def test_binary_operators_match_numpy(op):
    a, b = tg.constant(A), tg.constant(B)
    want = op(A, np.abs(B)) if op is operator.pow else op(A, B)
    got = op(a, tg.abs(b)) if op is operator.pow else op(a, b)
    assert_tensor(got, want, rtol=1e-6)
    # A Python number on either side takes the tensor's dtype.
    assert_tensor(op(a, 2), op(A, np.float32(2)))
    assert_tensor(op(2, a), op(np.float32(2), A))
    assert_tensor(op(a, 0.5), op(A, np.float32(0.5)))


def test_integer_operators_follow_tf():
    i, j = tg.constant(I), tg.constant(J)
    assert_tensor(i // j, I // J)
    assert_tensor(i % j, I % J)
    assert_tensor(i / j, I / J, dtype=tg.float64)  # TF's / converts int32 to float64
    assert_tensor(tg.constant(np.array([3], np.uint8)) / 2, np.array([1.5], np.float32))
    assert_tensor(i * 3, I * 3)
    assert_tensor(-i, -I)
    assert_tensor(abs(i), np.abs(I))
    with pytest.raises(TypeError):
        i + 1.5  # TF: a float does not become an int32
    with pytest.raises(tg.errors.InvalidArgumentError):
        i + tg.constant([1.0, 2.0, 3.0])  # tensors of two dtypes: no promotion


def test_matmul_operator_and_numpy_on_the_left():
    a, b = tg.constant(A), tg.constant(B)
    assert_tensor(a @ b, A @ B, rtol=1e-6)
    assert_tensor(A @ b, A @ B, rtol=1e-6)
    got = B + a  # NumPy defers to the tensor (TF's __array_priority__)
    assert isinstance(got, tg.Tensor)
    assert_tensor(got, A + B)
    assert_tensor(np.array([1.0, 2.0]) + tg.constant([1.0, 2.0]), np.array([2.0, 4.0], np.float32))


def test_bool_operators():
    p, q = tg.constant([True, True, False, False]), tg.constant([True, False, True, False])
    P, Q = p.numpy(), q.numpy()
    assert_tensor(p & q, P & Q)
    assert_tensor(p | q, P | Q)
    assert_tensor(p ^ q, P ^ Q)
    assert_tensor(~p, ~P)
    assert_tensor(p & True, P & True)
    with pytest.raises(tg.errors.UnimplementedError):
        tg.constant([1, 2]) & tg.constant([3, 4])
    with pytest.raises(tg.errors.UnimplementedError):
        ~tg.constant([1, 2])


def test_equality_is_elementwise_with_tfs_exceptions():
    t = tg.constant([1, 2, 3])
    assert_tensor(t == [1, 0, 3], np.array([True, False, True]))
    assert (t == None) is False and (t != None) is True  # noqa: E711
    assert_tensor(t == tg.constant([1, 2]), np.array(False))  # shapes that do not broadcast
    assert (t == {"a": 1}) is False


def test_unsupported_operands_raise_type_error():
    t = tg.constant([1.0])
    with pytest.raises(ValueError):
        t + None
    with pytest.raises(ValueError):
        t + object()
    with pytest.raises(ValueError):
        t * {"x": 1}
