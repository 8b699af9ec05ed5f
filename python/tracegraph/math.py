"""tg.math: elementwise math, reductions, scans and top_k (TensorFlow's tf.math)."""
import collections

from tracegraph import _core
from tracegraph._core import (  # pylint: disable=redefined-builtin
    abs, add, argmax, argmin, ceil, cos, cumprod, cumsum, divide, equal, erf, exp, expm1, floor,
    floordiv, floormod, greater, greater_equal, is_finite, is_inf, is_nan, l2_normalize, less,
    less_equal, log, log1p, log_sigmoid, log_softmax, logical_and, logical_not, logical_or,
    logical_xor, maximum, minimum, mod, multiply, negative, not_equal, pow, realdiv, reciprocal,
    reduce_all, reduce_any, reduce_logsumexp, reduce_max, reduce_mean, reduce_min, reduce_prod,
    reduce_sum, round, rsqrt, sigmoid, sign, sin, softmax, softplus, sqrt, square,
    squared_difference, subtract, tanh, truediv)

TopKV2 = collections.namedtuple("TopKV2", ["values", "indices"])


def top_k(input, k=1, sorted=True, index_type=None, name=None):  # pylint: disable=redefined-builtin
    """The k largest entries along the last axis, largest first: (values, indices)."""
    values, indices = _core._top_k(input, k, sorted, index_type, name)
    return TopKV2(values, indices)


def add_n(inputs, name=None):
    """The sum of a list of tensors of one shape and dtype."""
    del name
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise ValueError("inputs must be a non-empty list of tensors")
    total = _core.convert_to_tensor(inputs[0])
    for x in inputs[1:]:
        total = _core.add(total, x)
    return total


def reduce_variance(input_tensor, axis=None, keepdims=False, name=None):
    """The variance over `axis` (floating dtypes)."""
    del name
    x = _core.convert_to_tensor(input_tensor)
    mean = _core.reduce_mean(x, axis, keepdims=True)
    return _core.reduce_mean(_core.square(_core.subtract(x, mean)), axis, keepdims=keepdims)


def reduce_std(input_tensor, axis=None, keepdims=False, name=None):
    """The standard deviation over `axis` (floating dtypes)."""
    return _core.sqrt(reduce_variance(input_tensor, axis, keepdims, name))


def reduce_euclidean_norm(input_tensor, axis=None, keepdims=False, name=None):
    """sqrt(sum(x ** 2)) over `axis`."""
    del name
    return _core.sqrt(_core.reduce_sum(_core.square(input_tensor), axis, keepdims=keepdims))
