"""tg.linalg: matrix products (TensorFlow's tf.linalg, as far as tracegraph's ops go)."""
from tracegraph import _core
from tracegraph._core import einsum, l2_normalize, matmul


def matrix_transpose(a, name="matrix_transpose", conjugate=False):
    """a with its last two dims swapped (rank >= 2)."""
    del name, conjugate
    a = _core.convert_to_tensor(a)
    rank = a.shape.rank
    if rank is None or rank < 2:
        raise ValueError(f"matrix_transpose needs a tensor of rank >= 2, got shape {a.shape}")
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return _core.transpose(a, perm)


def matvec(a, b, transpose_a=False, adjoint_a=False, name=None):
    """The product of matrices a (..., m, n) and vectors b (..., n): (..., m)."""
    del name
    product = _core.matmul(a, _core.expand_dims(b, -1), transpose_a=transpose_a or adjoint_a)
    return _core.squeeze(product, axis=-1)


def norm(tensor, ord="euclidean", axis=None, keepdims=None, name=None):  # pylint: disable=redefined-builtin
    """The Euclidean (Frobenius) norm over `axis` (other orders are not supported)."""
    del name
    if ord not in ("euclidean", "fro", 2, 2.0) or (ord in (2, 2.0) and axis is not None and
                                                   not isinstance(axis, int)):
        from tracegraph import errors  # pylint: disable=import-outside-toplevel
        raise errors.UnimplementedError(None, None, f"[norm] ord={ord!r} is not supported; "
                                        "tracegraph computes the Euclidean norm")
    return _core.sqrt(_core.reduce_sum(_core.square(tensor), axis, keepdims=bool(keepdims)))
