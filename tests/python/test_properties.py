"""Property-based tests (hypothesis): elementwise ops, reductions and slicing on random arrays
compute what NumPy computes."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import tracegraph as tg

settings.register_profile("tg", max_examples=60, deadline=None, database=None)
settings.load_profile("tg")

# No subnormals: kernels read and return them as zero, as TensorFlow's do (DECISIONS.md), where
# NumPy keeps them; results that would be subnormal are compared with an absolute tolerance of
# the smallest normal float.
FLOATS = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_subnormal=False, width=32)
TINY = np.finfo(np.float32).tiny
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)


def pair(dtype, elements):
    """Two arrays of broadcast-compatible shapes."""
    return hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4).flatmap(
        lambda s: st.tuples(hnp.arrays(dtype, s.input_shapes[0], elements=elements),
                            hnp.arrays(dtype, s.input_shapes[1], elements=elements)))


BINARY_FLOAT = [
    (tg.add, np.add), (tg.subtract, np.subtract), (tg.multiply, np.multiply),
    (tg.maximum, np.maximum), (tg.minimum, np.minimum), (tg.less, np.less),
    (tg.greater_equal, np.greater_equal), (tg.equal, np.equal),
]


@pytest.mark.parametrize("tg_op,np_op", BINARY_FLOAT)
@given(arrays=pair(np.float32, FLOATS))
def test_binary_float_ops_match_numpy(tg_op, np_op, arrays):
    a, b = arrays
    got = tg_op(a, b)
    want = np_op(a, b)
    assert got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=TINY)


INTS = st.integers(min_value=-1000, max_value=1000)


@pytest.mark.parametrize("tg_op,np_op", [(tg.add, np.add), (tg.multiply, np.multiply),
                                          (tg.floordiv, np.floor_divide), (tg.math.floormod, np.mod)])
@given(arrays=pair(np.int32, INTS))
def test_integer_ops_match_numpy(tg_op, np_op, arrays):
    a, b = arrays
    if tg_op in (tg.floordiv, tg.math.floormod):
        b = np.where(b == 0, 1, b).astype(np.int32)
    got = tg_op(a, b)
    np.testing.assert_array_equal(got.numpy(), np_op(a, b).astype(np.int32))


@pytest.mark.parametrize("tg_op,np_op", [(tg.abs, np.abs), (tg.negative, np.negative),
                                          (tg.square, np.square), (tg.tanh, np.tanh),
                                          (tg.nn.relu, lambda x: np.maximum(x, 0)),
                                          (tg.sign, np.sign), (tg.floor, np.floor)])
@given(x=hnp.arrays(np.float32, SHAPES, elements=FLOATS))
def test_unary_ops_match_numpy(tg_op, np_op, x):
    np.testing.assert_allclose(tg_op(x).numpy(), np_op(x), rtol=2e-6, atol=1e-6)


@given(x=hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5), elements=FLOATS),
       data=st.data())
def test_reductions_match_numpy(x, data):
    axis = data.draw(st.integers(min_value=-x.ndim, max_value=x.ndim - 1))
    keepdims = data.draw(st.booleans())
    np.testing.assert_allclose(tg.reduce_sum(x, axis=axis, keepdims=keepdims).numpy(),
                               x.sum(axis=axis, keepdims=keepdims), rtol=1e-9, atol=1e-9)
    if x.shape[axis] > 0:
        np.testing.assert_array_equal(tg.reduce_max(x, axis=axis).numpy(), x.max(axis=axis))


def index_items(shape):
    def one(dim):
        return st.one_of(
            st.integers(min_value=-dim, max_value=dim - 1) if dim > 0 else st.nothing(),
            st.builds(slice, st.none() | st.integers(-7, 7), st.none() | st.integers(-7, 7),
                      st.none() | st.sampled_from([-3, -2, -1, 1, 2, 3])))
    return st.tuples(*[one(d) for d in shape])


@given(x=hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5), elements=INTS),
       data=st.data())
def test_slicing_matches_numpy(x, data):
    key = data.draw(index_items(x.shape))
    if data.draw(st.booleans()):
        key = key + (None,)
    got = tg.constant(x)[key]
    want = x[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


@given(x=hnp.arrays(st.sampled_from([np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_]),
                    SHAPES))
def test_numpy_round_trip_without_copies(x):
    t = tg.constant(x)
    assert t.shape == x.shape and t.dtype == tg.as_dtype(x.dtype)
    back = np.asarray(t)
    np.testing.assert_array_equal(back, x)
    if x.size > 0:
        assert np.shares_memory(back, x)
