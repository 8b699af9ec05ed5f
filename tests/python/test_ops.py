"""Every op the extension module binds, against NumPy: one table row per case. A function of
tracegraph._core with no row here fails test_every_op_has_a_case."""
import numpy as np
import pytest

import tracegraph as tg
from tracegraph import _core
from conftest import assert_tensor

R = np.random.default_rng(7)
F = R.standard_normal((3, 4)).astype(np.float32)
G = R.standard_normal((3, 4)).astype(np.float32)
P = (np.abs(F) + 0.1).astype(np.float32)       # positive
M = R.standard_normal((4, 5)).astype(np.float32)
V = R.standard_normal((2, 3, 4)).astype(np.float64)
I = np.array([[3, -7, 0, 12], [5, 2, -9, 1], [4, 4, -1, 8]], np.int32)
J = np.array([[2, 3, -4, 5], [-3, 1, 2, 7], [6, -2, 3, 3]], np.int32)
BA = np.array([True, False, True, False])
BB = np.array([True, True, False, False])


def erf(x):
    import math  # pylint: disable=import-outside-toplevel
    return np.vectorize(math.erf)(x).astype(x.dtype)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def gelu(x):
    return (0.5 * x * (1 + erf(x / np.float32(np.sqrt(2))))).astype(x.dtype)


def conv2d_valid(x, w):
    n, h, wd, c = x.shape
    kh, kw, _, o = w.shape
    out = np.zeros((n, h - kh + 1, wd - kw + 1, o), x.dtype)
    for i in range(h - kh + 1):
        for j in range(wd - kw + 1):
            out[:, i, j, :] = np.tensordot(x[:, i:i + kh, j:j + kw, :], w, axes=([1, 2, 3], [0, 1, 2]))
    return out


def depthwise_valid(x, w):
    n, h, wd, c = x.shape
    kh, kw, _, m = w.shape
    out = np.zeros((n, h - kh + 1, wd - kw + 1, c * m), x.dtype)
    for i in range(h - kh + 1):
        for j in range(wd - kw + 1):
            out[:, i, j, :] = np.einsum("nhwc,hwcm->ncm", x[:, i:i + kh, j:j + kw, :], w).reshape(n, c * m)
    return out


def conv2d_transpose_valid(x, w, stride, output_shape):
    kh, kw = w.shape[:2]
    out = np.zeros(output_shape, x.dtype)
    for i in range(x.shape[1]):
        for j in range(x.shape[2]):
            out[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :] += np.einsum(
                "nc,hwoc->nhwo", x[:, i, j, :], w)
    return out


IMG = R.standard_normal((1, 5, 5, 2)).astype(np.float32)
KER = R.standard_normal((3, 3, 2, 3)).astype(np.float32)
DW_KER = R.standard_normal((3, 3, 2, 2)).astype(np.float32)
T_KER = R.standard_normal((3, 3, 4, 2)).astype(np.float32)

# (op name, call, expected) - call takes the module it is looked up in; expected is a NumPy value.
CASES = [
    # elementwise unary
    ("negative", lambda: tg.negative(F), -F),
    ("abs", lambda: tg.abs(I), np.abs(I)),
    ("sign", lambda: tg.sign(F), np.sign(F)),
    ("square", lambda: tg.square(F), F * F),
    ("exp", lambda: tg.exp(F), np.exp(F)),
    ("log", lambda: tg.math.log(P), np.log(P)),
    ("sqrt", lambda: tg.sqrt(P), np.sqrt(P)),
    ("rsqrt", lambda: tg.math.rsqrt(P), 1 / np.sqrt(P)),
    ("tanh", lambda: tg.tanh(F), np.tanh(F)),
    ("sigmoid", lambda: tg.sigmoid(F), 1 / (1 + np.exp(-F))),
    ("sin", lambda: tg.sin(F), np.sin(F)),
    ("cos", lambda: tg.cos(F), np.cos(F)),
    ("logical_not", lambda: tg.logical_not(BA), ~BA),
    ("log1p", lambda: tg.math.log1p(P), np.log1p(P)),
    ("expm1", lambda: tg.math.expm1(F), np.expm1(F)),
    ("erf", lambda: tg.math.erf(F), erf(F)),
    ("softplus", lambda: tg.nn.softplus(F), np.log1p(np.exp(F))),
    ("floor", lambda: tg.floor(F * 3), np.floor(F * 3)),
    ("ceil", lambda: tg.math.ceil(F * 3), np.ceil(F * 3)),
    ("round", lambda: tg.round(np.array([0.5, 1.5, 2.5, -0.5], np.float32)), np.array([0, 2, 2, -0.0], np.float32)),
    ("relu", lambda: tg.nn.relu(F), np.maximum(F, 0)),
    ("relu6", lambda: tg.nn.relu6(F * 5), np.minimum(np.maximum(F * 5, 0), 6)),
    ("elu", lambda: tg.nn.elu(F), np.where(F >= 0, F, np.expm1(F))),
    ("log_sigmoid", lambda: tg.math.log_sigmoid(F), -np.log1p(np.exp(-F))),
    ("identity", lambda: tg.identity(I), I),
    ("stop_gradient", lambda: tg.stop_gradient(F), F),
    ("reciprocal", lambda: tg.math.reciprocal(P), 1 / P),
    ("is_nan", lambda: tg.math.is_nan(np.array([1.0, np.nan], np.float32)), np.array([False, True])),
    ("is_inf", lambda: tg.math.is_inf(np.array([np.inf, -np.inf, 1.0], np.float32)), np.array([True, True, False])),
    ("is_finite", lambda: tg.math.is_finite(np.array([np.inf, np.nan, 1.0], np.float32)), np.array([False, False, True])),
    ("gelu", lambda: tg.nn.gelu(F), gelu(F)),
    ("leaky_relu", lambda: tg.nn.leaky_relu(F, alpha=0.1), np.where(F > 0, F, np.float32(0.1) * F)),
    # elementwise binary
    ("add", lambda: tg.add(F, G), F + G),
    ("subtract", lambda: tg.subtract(F, G), F - G),
    ("multiply", lambda: tg.multiply(F, G), F * G),
    ("truediv", lambda: tg.truediv(I, J), I / J),
    ("divide", lambda: tg.divide(F, P), F / P),
    ("realdiv", lambda: tg.realdiv(F, P), F / P),
    ("floordiv", lambda: tg.floordiv(I, J), I // J),
    ("floormod", lambda: tg.math.floormod(I, J), I % J),
    ("mod", lambda: tg.math.mod(F, P), np.mod(F, P)),
    ("pow", lambda: tg.pow(P, G), P ** G),
    ("maximum", lambda: tg.maximum(F, G), np.maximum(F, G)),
    ("minimum", lambda: tg.minimum(I, 2), np.minimum(I, 2)),
    ("squared_difference", lambda: tg.math.squared_difference(F, G), (F - G) ** 2),
    ("equal", lambda: tg.equal(I, J), I == J),
    ("not_equal", lambda: tg.not_equal(I, 4), I != 4),
    ("less", lambda: tg.less(F, G), F < G),
    ("less_equal", lambda: tg.less_equal(I, J), I <= J),
    ("greater", lambda: tg.greater(F, 0.0), F > 0),
    ("greater_equal", lambda: tg.greater_equal(I, J), I >= J),
    ("logical_and", lambda: tg.logical_and(BA, BB), BA & BB),
    ("logical_or", lambda: tg.logical_or(BA, BB), BA | BB),
    ("logical_xor", lambda: tg.math.logical_xor(BA, BB), BA ^ BB),
    ("where", lambda: tg.where(F > 0, F, G), np.where(F > 0, F, G)),
    ("where", lambda: tg.where(I > 3), np.argwhere(I > 3).astype(np.int64)),
    ("clip_by_value", lambda: tg.clip_by_value(F, -0.5, 0.5), np.clip(F, -0.5, 0.5)),
    # reductions and scans
    ("reduce_sum", lambda: tg.reduce_sum(F, axis=1), F.sum(axis=1)),
    ("reduce_sum", lambda: tg.reduce_sum(I), I.sum().astype(np.int32)),
    ("reduce_sum", lambda: tg.reduce_sum(F, axis=[]), F),
    ("reduce_mean", lambda: tg.reduce_mean(V, axis=(0, 2), keepdims=True), V.mean(axis=(0, 2), keepdims=True)),
    ("reduce_max", lambda: tg.reduce_max(I, axis=-1), I.max(axis=-1)),
    ("reduce_min", lambda: tg.reduce_min(F, axis=0), F.min(axis=0)),
    ("reduce_prod", lambda: tg.reduce_prod(P, axis=1), P.prod(axis=1)),
    ("reduce_any", lambda: tg.reduce_any(I > 10, axis=0), (I > 10).any(axis=0)),
    ("reduce_all", lambda: tg.reduce_all(I > -10), (I > -10).all()),
    ("reduce_logsumexp", lambda: tg.reduce_logsumexp(F, axis=1), np.log(np.exp(F).sum(axis=1))),
    ("argmax", lambda: tg.argmax(F, axis=1), F.argmax(axis=1)),
    ("argmin", lambda: tg.argmin(I, output_type=tg.int32), I.argmin(axis=0).astype(np.int32)),
    ("cumsum", lambda: tg.cumsum(I, axis=1), I.cumsum(axis=1).astype(np.int32)),
    ("cumprod", lambda: tg.math.cumprod(P, axis=0, reverse=True), np.flip(np.flip(P, 0).cumprod(axis=0), 0)),
    ("l2_normalize", lambda: tg.math.l2_normalize(F, axis=1), F / np.sqrt((F * F).sum(axis=1, keepdims=True))),
    ("softmax", lambda: tg.nn.softmax(F), softmax(F)),
    ("log_softmax", lambda: tg.nn.log_softmax(F, axis=0), log_softmax(F, axis=0)),
    ("sort", lambda: tg.sort(F, direction="DESCENDING"), -np.sort(-F, axis=-1)),
    ("argsort", lambda: tg.argsort(I[0]), np.argsort(I[0], kind="stable").astype(np.int32)),
    ("_top_k", lambda: tg.math.top_k(F, k=2).values, -np.sort(-F, axis=-1)[:, :2]),
    ("_top_k", lambda: tg.math.top_k(np.array([1.0, 9.0, 4.0], np.float32), k=2).indices, np.array([1, 2], np.int32)),
    # products
    ("matmul", lambda: tg.matmul(F, M), F @ M),
    ("matmul", lambda: tg.linalg.matmul(M, F, transpose_a=True, transpose_b=True), M.T @ F.T),
    ("einsum", lambda: tg.einsum("ij,jk->ik", F, M), F @ M),
    ("einsum", lambda: tg.linalg.einsum("ij->j", F), F.sum(axis=0)),
    # creation
    ("constant", lambda: tg.constant([[1, 2]]), np.array([[1, 2]], np.int32)),
    ("convert_to_tensor", lambda: tg.convert_to_tensor(F), F),
    ("zeros", lambda: tg.zeros([2, 3]), np.zeros((2, 3), np.float32)),
    ("zeros", lambda: tg.zeros(tg.constant([2, 1]), dtype=tg.int64), np.zeros((2, 1), np.int64)),
    ("ones", lambda: tg.ones((3,), tg.int32), np.ones(3, np.int32)),
    ("zeros_like", lambda: tg.zeros_like(I), np.zeros_like(I)),
    ("ones_like", lambda: tg.ones_like(I, dtype=tg.float32), np.ones(I.shape, np.float32)),
    ("fill", lambda: tg.fill([2, 2], 9), np.full((2, 2), 9, np.int32)),
    ("range", lambda: tg.range(5), np.arange(5, dtype=np.int32)),
    ("range", lambda: tg.range(1, 10, 3), np.arange(1, 10, 3, dtype=np.int32)),
    ("range", lambda: tg.range(0, 1, 0.25), np.arange(0, 1, 0.25, dtype=np.float32)),
    ("range", lambda: tg.range(3, dtype=tg.float64), np.arange(3, dtype=np.float64)),
    ("linspace", lambda: tg.linspace(0.0, 1.0, 5), np.linspace(0, 1, 5, dtype=np.float32)),
    ("one_hot", lambda: tg.one_hot([0, 2, 5], 3), np.array([[1, 0, 0], [0, 0, 1], [0, 0, 0]], np.float32)),
    ("one_hot", lambda: tg.one_hot([1], 2, on_value=5, off_value=-1), np.array([[-1, 5]], np.int32)),
    ("cast", lambda: tg.cast(F, tg.int32), np.trunc(F).astype(np.int32)),
    ("cast", lambda: tg.dtypes.cast(I, "float64"), I.astype(np.float64)),
    # shapes
    ("reshape", lambda: tg.reshape(F, [2, -1]), F.reshape(2, -1)),
    ("reshape", lambda: tg.reshape(F, tg.constant([4, 3])), F.reshape(4, 3)),
    ("transpose", lambda: tg.transpose(V), V.transpose()),
    ("transpose", lambda: tg.transpose(V, perm=[1, 0, 2]), V.transpose(1, 0, 2)),
    ("expand_dims", lambda: tg.expand_dims(F, -1), F[..., None]),
    ("squeeze", lambda: tg.squeeze(np.ones((1, 3, 1), np.float32)), np.ones(3, np.float32)),
    ("squeeze", lambda: tg.squeeze(np.ones((1, 3, 1), np.float32), axis=0), np.ones((3, 1), np.float32)),
    ("concat", lambda: tg.concat([F, G], axis=1), np.concatenate([F, G], axis=1)),
    ("concat", lambda: tg.concat([[1, 2], tg.constant([3])], 0), np.array([1, 2, 3], np.int32)),
    ("stack", lambda: tg.stack([F, G], axis=1), np.stack([F, G], axis=1)),
    ("unstack", lambda: tg.unstack(V, axis=1)[2], V[:, 2]),
    ("split", lambda: tg.split(F, 2, axis=1)[1], F[:, 2:]),
    ("split", lambda: tg.split(F, [1, -1], axis=0)[1], F[1:]),
    ("tile", lambda: tg.tile(I, [2, 1]), np.tile(I, (2, 1))),
    ("pad", lambda: tg.pad(I, [[1, 0], [0, 2]]), np.pad(I, ((1, 0), (0, 2)))),
    ("pad", lambda: tg.pad(F, [[0, 0], [2, 2]], mode="REFLECT"), np.pad(F, ((0, 0), (2, 2)), mode="reflect")),
    ("pad", lambda: tg.pad(F, tg.constant([[1, 1], [0, 0]]), "symmetric"), np.pad(F, ((1, 1), (0, 0)), mode="symmetric")),
    ("reverse", lambda: tg.reverse(I, [1]), I[:, ::-1]),
    ("slice", lambda: tg.slice(I, [1, 1], [2, -1]), I[1:3, 1:]),
    ("gather", lambda: tg.gather(F, [2, 0]), F[[2, 0]]),
    ("gather", lambda: tg.gather(F, [[1], [3]], axis=1), F[:, [[1], [3]]]),
    ("gather_nd", lambda: tg.gather_nd(I, [[0, 1], [2, 3]]), np.array([I[0, 1], I[2, 3]])),
    ("scatter_nd", lambda: tg.scatter_nd([[1], [3], [1]], [5, 6, 7], [4]), np.array([0, 12, 0, 6], np.int32)),
    ("tensor_scatter_nd_add", lambda: tg.tensor_scatter_nd_add(I[0], [[0]], [100]), I[0] + np.array([100, 0, 0, 0], np.int32)),
    ("boolean_mask", lambda: tg.boolean_mask(F, F[:, 0] > 0), F[F[:, 0] > 0]),
    ("broadcast_to", lambda: tg.broadcast_to([1, 2], [3, 2]), np.broadcast_to(np.array([1, 2], np.int32), (3, 2))),
    ("shape", lambda: tg.shape(V), np.array(V.shape, np.int32)),
    ("size", lambda: tg.size(V, out_type=tg.int64), np.int64(V.size)),
    ("rank", lambda: tg.rank(V), np.int32(3)),
    ("sequence_mask", lambda: tg.sequence_mask([1, 3], 4), np.arange(4) < np.array([[1], [3]])),
    # neural networks
    ("conv2d", lambda: tg.nn.conv2d(IMG, KER, strides=1, padding="VALID"), conv2d_valid(IMG, KER)),
    ("depthwise_conv2d", lambda: tg.nn.depthwise_conv2d(IMG, DW_KER, [1, 1, 1, 1], "VALID"),
     depthwise_valid(IMG, DW_KER)),
    ("conv2d_transpose", lambda: tg.nn.conv2d_transpose(IMG, T_KER, [1, 11, 11, 4], 2, "VALID"),
     conv2d_transpose_valid(IMG, T_KER, 2, (1, 11, 11, 4))),
    ("max_pool2d", lambda: tg.nn.max_pool2d(IMG, 2, 2, "VALID"),
     IMG[:, :4, :4, :].reshape(1, 2, 2, 2, 2, 2).max(axis=(2, 4))),
    ("avg_pool2d", lambda: tg.nn.avg_pool2d(IMG, [2, 2], [2, 2], "VALID"),
     IMG[:, :4, :4, :].reshape(1, 2, 2, 2, 2, 2).mean(axis=(2, 4))),
    ("dropout", lambda: tg.nn.dropout(F, rate=0.0), F),
]


@pytest.mark.parametrize("name,call,expected", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_op_matches_numpy(name, call, expected):
    del name
    expected = np.asarray(expected)
    got = call()
    assert_tensor(got, expected, rtol=2e-5, atol=1e-6)


def test_every_op_has_a_case():
    tested = {c[0] for c in CASES} | {"set_seed", "uniform", "normal", "truncated_normal",
                                      "stateless_uniform", "stateless_normal",
                                      "stateless_truncated_normal"}  # test_random below
    bound = {n for n in dir(_core) if not n.startswith("_") and callable(getattr(_core, n))
             and n not in ("Tensor", "Variable")} | {"_top_k"}  # classes, not ops
    assert sorted(bound - tested) == []


def test_tf_module_layout():
    assert tg.math.add is tg.add and tg.linalg.matmul is tg.matmul
    assert tg.nn.softmax is tg.math.softmax and tg.nn.top_k is tg.math.top_k
    for name in ("uniform", "normal", "truncated_normal", "set_seed", "stateless_uniform"):
        assert callable(getattr(tg.random, name))


def test_composed_ops():
    assert_tensor(tg.math.add_n([F, G, F]), F + G + F)
    assert_tensor(tg.math.reduce_variance(V, axis=1), V.var(axis=1))
    assert_tensor(tg.math.reduce_std(V), np.float64(V.std()))
    assert_tensor(tg.linalg.matvec(M.T, F[0]), M.T @ F[0], rtol=1e-5)
    assert_tensor(tg.linalg.matrix_transpose(V), V.transpose(0, 2, 1))
    assert_tensor(tg.linalg.norm(F), np.float32(np.sqrt((F * F).sum())), rtol=1e-5)
    labels = softmax(G)
    assert_tensor(tg.nn.softmax_cross_entropy_with_logits(labels, F), -(labels * log_softmax(F)).sum(-1), rtol=1e-5)
    sparse = np.array([0, 3, 1])
    assert_tensor(tg.nn.sparse_softmax_cross_entropy_with_logits(sparse, F),
                  -log_softmax(F)[np.arange(3), sparse], rtol=1e-5)
    z = (G > 0).astype(np.float32)
    assert_tensor(tg.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=F),
                  np.maximum(F, 0) - F * z + np.log1p(np.exp(-np.abs(F))), rtol=1e-5)
    mean, var = tg.nn.moments(V, axes=[0, 1])
    assert_tensor(mean, V.mean(axis=(0, 1)))
    assert_tensor(var, V.var(axis=(0, 1)))
    assert_tensor(tg.nn.silu(F), F / (1 + np.exp(-F)), rtol=1e-5)
    assert_tensor(tg.nn.bias_add(F, np.ones(4, np.float32)), F + 1)
    assert_tensor(tg.nn.embedding_lookup(M, [3, 0]), M[[3, 0]])


def test_random():
    tg.random.set_seed(5)
    a = tg.random.uniform([1000], minval=-2.0, maxval=3.0, seed=1)
    tg.random.set_seed(5)
    b = tg.random.uniform([1000], minval=-2.0, maxval=3.0, seed=1)
    assert a.dtype == tg.float32 and a.shape == [1000]
    np.testing.assert_array_equal(a.numpy(), b.numpy())  # the global seed restarts the stream
    assert -2.0 <= a.numpy().min() and a.numpy().max() < 3.0 and abs(a.numpy().mean() - 0.5) < 0.2
    ints = tg.random.uniform([500], minval=0, maxval=10, dtype=tg.int32, seed=3)
    assert ints.dtype == tg.int32 and set(np.unique(ints.numpy())) <= set(range(10))
    with pytest.raises(ValueError, match="maxval"):
        tg.random.uniform([2], dtype=tg.int32)
    n = tg.random.normal([4000], mean=1.0, stddev=2.0, dtype=tg.float64, seed=2).numpy()
    assert abs(n.mean() - 1.0) < 0.2 and abs(n.std() - 2.0) < 0.2
    t = tg.random.truncated_normal([4000], stddev=1.0).numpy()
    assert np.abs(t).max() <= 2.0
    s1 = tg.random.stateless_uniform([3, 2], seed=[1, 2])
    s2 = tg.random.stateless_uniform([3, 2], seed=[1, 2])
    np.testing.assert_array_equal(s1.numpy(), s2.numpy())
    assert tg.random.stateless_normal([5], seed=[3, 4], dtype=tg.float64).dtype == tg.float64
    assert tg.random.stateless_truncated_normal([5], seed=[3, 4]).shape == [5]
    assert tg.random.uniform(tg.constant([2, 3])).shape == [2, 3]


def test_kernels_flush_subnormals_as_tensorflow_does():
    # TensorFlow runs its kernels with subnormals flushed to zero (inputs and results) and
    # rounding to nearest; tracegraph's do the same, eagerly and in a function, and leave the
    # calling thread's own arithmetic (NumPy's here) as it was.
    tiny = np.full(40, 1e-40, dtype=np.float32)  # subnormal
    small = np.full(40, 1e-20, dtype=np.float32)  # normal; its square is subnormal
    assert not np.any(tg.multiply(tiny, 1.5).numpy())
    assert not np.any(tg.multiply(small, small).numpy())
    f = tg.function(lambda a, b: (a * 1.5, b * b))
    for out in f(tg.constant(tiny), tg.constant(small)):
        assert not np.any(out.numpy())
    np.testing.assert_array_equal(tg.constant(tiny).numpy(), tiny)  # a copy keeps the bits
    assert np.all(tiny * np.float32(1.5) > 0)
    assert np.all(small * small > 0)
