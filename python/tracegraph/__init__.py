"""tracegraph: TensorFlow's tf.function system in C++, with TensorFlow's Python API.

    import tracegraph as tf

Tensors and ops have TensorFlow's names, parameters and modules (tg.math, tg.nn, tg.random,
tg.linalg, tg.dtypes, tg.errors); see docs/python.md for what is the same and what differs.
The interpreter is Debian's /usr/bin/python3 (where python3-numpy lives).
"""
from tracegraph import _core
from tracegraph import dtypes
from tracegraph import errors
from tracegraph._tensor import Tensor, TensorShape, is_tensor, newaxis, unknown_shape
from tracegraph.dtypes import DType, as_dtype, bfloat16, bool, double, float32, float64, int32, int64, string, uint8  # pylint: disable=redefined-builtin

from tracegraph._core import (  # TF's top-level functions
    abs, add, argmax, argmin, argsort, boolean_mask, broadcast_to, cast, clip_by_value, concat,
    constant, convert_to_tensor, cos, cumsum, divide, einsum, equal, exp, expand_dims, fill,
    floor, floordiv, gather, gather_nd, greater, greater_equal, identity, less, less_equal,
    linspace, logical_and, logical_not, logical_or, matmul, maximum, minimum, multiply, negative,
    not_equal, one_hot, ones, ones_like, pad, pow, range, rank, realdiv, reduce_all, reduce_any,
    reduce_logsumexp, reduce_max, reduce_mean, reduce_min, reduce_prod, reduce_sum, reshape,
    reverse, round, scatter_nd, sequence_mask, shape, sigmoid, sign, sin, size, slice, sort,
    split, sqrt, square, squeeze, stack, stop_gradient, subtract, tanh, tensor_scatter_nd_add,
    tile, transpose, truediv, unstack, where, zeros, zeros_like)
from tracegraph import linalg
from tracegraph import math
from tracegraph import nest
from tracegraph import nn
from tracegraph import random
from tracegraph.math import add_n
from tracegraph._variables import (Variable, VariableAggregation, VariableSynchronization,
                                   init_scope, name_scope)
from tracegraph._gradient import GradientTape, IndexedSlices, UnconnectedGradients
from tracegraph.module import Module
from tracegraph import optimizers
from tracegraph import keras
from tracegraph._core import _clip_by_global_norm as clip_by_global_norm
from tracegraph import config
from tracegraph import saved_model
from tracegraph import train
from tracegraph import types
from tracegraph import experimental
from tracegraph._function import ConcreteFunction, Function, TensorSpec, function, print  # pylint: disable=redefined-builtin
from tracegraph._control_flow import TensorArray, cond, while_loop
from tracegraph._py_function import py_function
from tracegraph import autograph

__version__ = "0.1.0"
