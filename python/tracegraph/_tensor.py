"""tg.Tensor's Python side (shape, dtype, repr, indexing, iteration, scalars) and tg.TensorShape.

The class itself is the extension module's (python/src/tensor_bindings.cpp: storage, the buffer
protocol, operators); the methods below are added to it when the package is imported.
"""
import operator

import numpy as np

from tracegraph import _core
from tracegraph import dtypes
from tracegraph import errors

Tensor = _core.Tensor
newaxis = None

__all__ = ["Tensor", "TensorShape", "newaxis", "is_tensor", "unknown_shape"]


def _dim(value):
    if value is None:
        return None
    if hasattr(value, "value") and not isinstance(value, (int, np.integer)):
        value = value.value  # a Dimension-like object
        if value is None:
            return None
    if isinstance(value, bool):
        raise TypeError(f"a dimension must be an integer or None, got {value!r}")
    try:
        d = operator.index(value)
    except TypeError:
        raise TypeError(f"a dimension must be an integer or None, got {value!r} "
                        f"(of type {type(value).__name__})") from None
    if d < 0:
        raise ValueError(f"Dimension {d} must be >= 0")
    return d


class TensorShape:
    """A shape whose rank may be unknown and whose dims may be None (tf.TensorShape).

    TensorShape([2, None]) == [2, None]; shape[0] is an int or None; as_list() gives the dims.
    """

    __slots__ = ("_dims",)

    def __init__(self, dims):
        if dims is None:
            self._dims = None
        elif isinstance(dims, TensorShape):
            self._dims = dims._dims
        elif isinstance(dims, (str, bytes)):
            raise TypeError(f"a shape must be a list of dimensions, got {dims!r}")
        else:
            try:
                items = iter(dims)
            except TypeError:
                self._dims = (_dim(dims),)  # one dimension, as TF
            else:
                self._dims = tuple(_dim(d) for d in items)

    @property
    def rank(self):
        return None if self._dims is None else len(self._dims)

    @property
    def ndims(self):
        return self.rank

    @property
    def dims(self):
        return None if self._dims is None else list(self._dims)

    def as_list(self):
        if self._dims is None:
            raise ValueError("as_list() is not defined on a TensorShape of unknown rank.")
        return list(self._dims)

    def is_fully_defined(self):
        return self._dims is not None and all(d is not None for d in self._dims)

    def assert_is_fully_defined(self):
        if not self.is_fully_defined():
            raise ValueError(f"Shape {self} is not fully defined")

    def num_elements(self):
        if not self.is_fully_defined():
            return None
        n = 1
        for d in self._dims:
            n *= d
        return n

    def is_compatible_with(self, other):
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return True
        if len(self._dims) != len(other._dims):
            return False
        return all(a is None or b is None or a == b for a, b in zip(self._dims, other._dims))

    def assert_is_compatible_with(self, other):
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {as_shape(other)} are incompatible")

    def merge_with(self, other):
        other = as_shape(other)
        if self._dims is None:
            return other
        if other._dims is None:
            return self
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        return TensorShape([a if a is not None else b for a, b in zip(self._dims, other._dims)])

    def most_specific_compatible_shape(self, other):
        other = as_shape(other)
        if self._dims is None or other._dims is None or len(self._dims) != len(other._dims):
            return TensorShape(None)
        return TensorShape([a if a == b else None for a, b in zip(self._dims, other._dims)])

    most_specific_common_supertype_of_two = most_specific_compatible_shape

    def is_subtype_of(self, other):
        other = as_shape(other)
        if other._dims is None:
            return True
        if self._dims is None or len(self._dims) != len(other._dims):
            return False
        return all(b is None or a == b for a, b in zip(self._dims, other._dims))

    def concatenate(self, other):
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return TensorShape(None)
        return TensorShape(self._dims + other._dims)

    def with_rank(self, rank):
        if self._dims is None:
            return TensorShape([None] * rank)
        if len(self._dims) != rank:
            raise ValueError(f"Shape {self} must have rank {rank}")
        return self

    def assert_has_rank(self, rank):
        if self._dims is not None and len(self._dims) != rank:
            raise ValueError(f"Shape {self} must have rank {rank}")

    def __add__(self, other):
        return self.concatenate(other)

    def __radd__(self, other):
        return as_shape(other).concatenate(self)

    def __len__(self):
        if self._dims is None:
            raise ValueError("Cannot take the length of a shape of unknown rank.")
        return len(self._dims)

    def __iter__(self):
        if self._dims is None:
            raise ValueError("Cannot iterate over a shape of unknown rank.")
        return iter(self._dims)

    def __bool__(self):
        return self._dims is not None

    def __getitem__(self, key):
        if self._dims is None:
            return TensorShape(None) if isinstance(key, slice) else None
        if isinstance(key, slice):
            return TensorShape(self._dims[key])
        return self._dims[key]

    def __eq__(self, other):
        try:
            other = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        return self._dims == other._dims

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self):
        return hash(self._dims)

    def __repr__(self):
        return "TensorShape(None)" if self._dims is None else f"TensorShape({list(self._dims)})"

    def __str__(self):
        if self._dims is None:
            return "<unknown>"
        if len(self._dims) == 1:
            return f"({self._dims[0]},)"
        return "(" + ", ".join(str(d) for d in self._dims) + ")"

    def __reduce__(self):
        return TensorShape, (self.dims,)


def as_shape(shape):
    return shape if isinstance(shape, TensorShape) else TensorShape(shape)


def unknown_shape(rank=None):
    return TensorShape(None if rank is None else [None] * rank)


def is_tensor(x):
    """Whether x is a tg.Tensor (tf.is_tensor)."""
    return isinstance(x, Tensor)


# ---- Tensor: the methods written in Python ----------------------------------------------------

_core_numpy = Tensor.numpy


def _numpy(self):
    """The value as a NumPy array (TF's numpy()). A symbolic tensor has none: AttributeError, as
    TF's SymbolicTensor has no numpy attribute (the guide catches exactly that), with the core's
    explanation of where the tensor came from."""
    try:
        return _core_numpy(self)
    except TypeError as e:
        if not self._is_symbolic:
            raise
        raise AttributeError(f"'SymbolicTensor' object has no attribute 'numpy': {e}") from None


def _numpy_text(tensor, is_repr):
    # NumPy has no bfloat16: its values print as the float32 values they are exactly.
    is_bf16 = tensor.dtype == dtypes.bfloat16
    value = (_core.cast(tensor, dtypes.float32) if is_bf16 else tensor).numpy()
    text = repr(value) if is_repr else str(value)
    if is_bf16:
        text = text.replace("dtype=float32", "dtype=bfloat16")
    if "\n" in text:
        text = "\n" + text
    return text


def _repr(self):
    if self._is_symbolic:
        return self._to_string()
    return "<tg.Tensor: shape=%s, dtype=%s, numpy=%s>" % (self.shape, self.dtype.name,
                                                         _numpy_text(self, True))


def _str(self):
    if self._is_symbolic:
        return self._to_string()
    return "tg.Tensor(%s, shape=%s, dtype=%s)" % (_numpy_text(self, False), self.shape,
                                                  self.dtype.name)


def _len(self):
    dims = self._shape_tuple()
    if dims is None:
        raise TypeError("len() of a tensor of unknown rank is not defined.")
    if not dims:
        raise TypeError("A scalar tensor has no len().")
    if dims[0] is None:
        raise TypeError("len() of a tensor whose first dimension is unknown (None) is not "
                        "defined while tracing; use tg.shape(x)[0].")
    return dims[0]


def _iter(self):
    dims = self._shape_tuple()
    if dims == ():
        raise TypeError("Cannot iterate over a scalar tensor.")
    if dims is None or dims[0] is None:
        raise TypeError("Cannot iterate over a tensor whose first dimension is unknown while "
                        "tracing; use tg.range(tg.shape(x)[0]) and index.")
    return iter(_core.unstack(self, axis=0))


def _hash(self):
    raise TypeError("A tg.Tensor is unhashable (== is elementwise). Use tensor.ref() as the key.")


class _Reference:
    """A hashable reference to a tensor, by identity (Tensor.ref())."""

    __slots__ = ("_tensor",)

    def __init__(self, tensor):
        self._tensor = tensor

    def deref(self):
        return self._tensor

    def __hash__(self):
        return id(self._tensor)

    def __eq__(self, other):
        return isinstance(other, _Reference) and other._tensor is self._tensor

    def __repr__(self):
        return f"<Reference wrapping {self._tensor!r}>"


def _index(self):
    if not self.dtype.is_integer or self._shape_tuple() != ():
        raise TypeError("only integer scalar tensors can be used as a Python index, got "
                        f"a {self.dtype.name} tensor of shape {self.shape}")
    return int(self.numpy())


def _format(self, spec):
    if self._is_symbolic:
        return format(str(self), spec)
    return self.numpy().__format__(spec)


# ---- Indexing: TF's __getitem__ (integers, slices with steps, ..., None, int tensors) ---------

def _index_error(key):
    raise TypeError("Only integers, slices (`:`), ellipsis (`...`), tg.newaxis (`None`) and "
                    f"scalar int32/int64 tensors are valid indices, got {key!r}")


def _as_index(value, what):
    """A Python int from an int, a NumPy integer or an eager integer scalar tensor; None stays."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        _index_error(value)
    if isinstance(value, Tensor):
        if value._is_symbolic:
            raise errors.UnimplementedError(
                None, None, f"a symbolic tensor as a slice {what} is not supported yet; "
                "use tg.slice or tg.gather with a computed index")
        if not value.dtype.is_integer or value._shape_tuple() != ():
            _index_error(value)
    try:
        return operator.index(value)
    except TypeError:
        _index_error(value)


def _getitem(self, key):
    if type(key) is int:  # the common case: one position along dim 0
        dims = self._shape_tuple()
        if dims == ():
            raise errors.InvalidArgumentError(
                None, None, f"[getitem] cannot index a scalar tensor (index {key})")
        if dims is not None and dims[0] is not None and not -dims[0] <= key < dims[0]:
            raise errors.InvalidArgumentError(
                None, None, f"[getitem] index {key} is out of bounds for dimension 0 of size {dims[0]}")
        return self._index(key)
    if not isinstance(key, tuple):
        key = (key,)
    items = []
    for k in key:
        if k is Ellipsis or k is None:
            items.append(k)
        elif isinstance(k, slice):
            items.append(slice(_as_index(k.start, "start"), _as_index(k.stop, "stop"),
                               _as_index(k.step, "step")))
        elif isinstance(k, Tensor) and k._is_symbolic:
            if not k.dtype.is_integer or k._shape_tuple() != ():
                _index_error(k)
            items.append(k)
        elif isinstance(k, list) or (isinstance(k, np.ndarray) and k.ndim > 0):
            _index_error(k)  # no fancy indexing, as TF: use tg.gather / tg.boolean_mask
        else:
            items.append(_as_index(k, "index"))
    if sum(1 for k in items if k is Ellipsis) > 1:
        raise ValueError("An index can only have a single ellipsis ('...')")
    dims = self._shape_tuple()
    if dims is None:
        raise errors.UnimplementedError(
            None, None, "indexing a tensor of unknown rank is not supported; reshape it first")
    consumed = sum(1 for k in items if k is not None and k is not Ellipsis)
    if consumed > len(dims):
        raise errors.InvalidArgumentError(
            None, None, f"[getitem] too many indices: {consumed} for a tensor of rank {len(dims)}")
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (len(dims) - consumed)
    else:
        items += [slice(None)] * (len(dims) - consumed)

    begin, size, strided, dynamic, squeeze, layout = [], [], [], [], [], []
    axis = 0
    for k in items:
        if k is None:
            layout.append("new")
            continue
        dim = dims[axis]
        if isinstance(k, slice):
            layout.append("keep")
            if dim is None:
                if (k.step in (None, 1) and (k.start is None or k.start >= 0) and k.stop is None):
                    begin.append(k.start or 0)
                    size.append(-1)
                else:
                    raise errors.UnimplementedError(
                        None, None, f"[getitem] the slice {k} of dimension {axis}, whose size is "
                        "unknown (None), is not supported yet; only x[a:] with a >= 0 is")
            else:
                start, stop, step = k.indices(dim)
                if step == 1:
                    begin.append(start)
                    size.append(max(stop - start, 0))
                else:
                    begin.append(0)
                    size.append(-1)
                    strided.append((axis, list(range(start, stop, step))))
        elif isinstance(k, Tensor):  # symbolic integer scalar
            begin.append(0)
            size.append(-1)
            dynamic.append((axis, k))
            squeeze.append(axis)
        else:
            if dim is not None and not -dim <= k < dim:
                raise errors.InvalidArgumentError(
                    None, None, f"[getitem] index {k} is out of bounds for dimension {axis} of size {dim}")
            if k < 0:
                if dim is None:
                    raise errors.UnimplementedError(
                        None, None, f"[getitem] a negative index ({k}) into dimension {axis} of "
                        "unknown size (None) is not supported yet")
                k += dim
            begin.append(k)
            size.append(1)
            squeeze.append(axis)
        axis += 1

    result = self
    if any(b != 0 for b in begin) or any(s != -1 and s != d for s, d in zip(size, dims)):
        result = _core.slice(result, begin, size)
    for ax, positions in strided:
        result = _core.gather(result, np.asarray(positions, dtype=np.int64).reshape(-1), axis=ax)
    for ax, index in dynamic:
        dim = _core.cast(_core.shape(result)[ax], index.dtype)
        index = _core.where(index < 0, index + dim, index)
        result = _core.gather(result, _core.reshape(index, [1]), axis=ax)
    if squeeze:
        result = _core.squeeze(result, axis=squeeze)
    position = 0
    for kind in layout:
        if kind == "new":
            result = _core.expand_dims(result, position)
        position += 1
    return result


def _rebuild(value):
    """Unpickles a tensor (a module-level function: the extension's own functions do not pickle)."""
    return _core.constant(value)


def _install():
    t = Tensor
    t.shape = property(lambda self: TensorShape(self._shape_tuple()),
                       doc="The shape (a tg.TensorShape; dims may be None while tracing).")
    t.dtype = property(lambda self: dtypes._BY_ENUM[self._dtype_enum], doc="The element type.")
    t.ndim = property(lambda self: TensorShape(self._shape_tuple()).rank, doc="The rank.")
    t.device = property(lambda self: "/job:localhost/replica:0/task:0/device:CPU:0")
    t.get_shape = lambda self: self.shape
    t.__repr__ = _repr
    t.__str__ = _str
    t.__format__ = _format
    t.__len__ = _len
    t.__iter__ = _iter
    t.__getitem__ = _getitem
    t.__hash__ = _hash
    t.numpy = _numpy
    # int() and float() of a symbolic tensor stay TypeErrors (a value that cannot convert).
    t.__int__ = lambda self: int(_core_numpy(self))
    t.__float__ = lambda self: float(_core_numpy(self))
    t.__index__ = _index
    t.__copy__ = lambda self: self
    t.__deepcopy__ = lambda self, memo: self
    t.__reduce__ = lambda self: (_rebuild, (_core_numpy(self),))
    t.ref = lambda self: _Reference(self)
    t.experimental_ref = t.ref
    # NumPy's operators defer to the tensor's reflected ones (np_array + t is a tensor), as TF's.
    t.__array_priority__ = 100


_install()
