"""Element types of tensors (TensorFlow's tf.dtypes): DType objects and as_dtype."""
import builtins

import numpy as np

from tracegraph import _core

__all__ = ["DType", "as_dtype", "float32", "float64", "double", "int32", "int64", "uint8", "bool",
           "string", "bfloat16", "cast"]

# bfloat16's largest finite value, (2 - 2^-7) * 2^127: NumPy has no bfloat16 to ask.
_BFLOAT16_MAX = 3.3895313892515355e38


class DType:
    """An element type: tg.float32, tg.int32, ... (tf.DType).

    Compares equal to anything as_dtype turns into the same type ("float32", np.float32).
    """

    __slots__ = ("_tg_enum", "_name", "_numpy", "_tf_enum", "_kind", "_size")

    def __init__(self, tg_enum, name, numpy_type, tf_enum, kind, size):
        self._tg_enum = tg_enum      # the C++ tg::DType value, read by the extension module
        self._name = name
        self._numpy = numpy_type
        self._tf_enum = tf_enum      # TensorFlow's DataType number
        self._kind = kind            # "f", "i", "u", "b" or "s"
        self._size = size

    @property
    def name(self):
        return self._name

    @property
    def as_numpy_dtype(self):
        return self._numpy

    @property
    def as_datatype_enum(self):
        return self._tf_enum

    @property
    def base_dtype(self):
        return self

    @property
    def real_dtype(self):
        return self

    @property
    def is_floating(self):
        return self._kind == "f"

    @property
    def is_integer(self):
        return self._kind in ("i", "u")

    @property
    def is_unsigned(self):
        return self._kind == "u"

    @property
    def is_bool(self):
        return self._kind == "b"

    @property
    def is_complex(self):
        return False

    @property
    def is_quantized(self):
        return False

    @property
    def is_numpy_compatible(self):
        return self._numpy is not None

    @property
    def size(self):
        return self._size

    @property
    def min(self):
        if self._numpy is None:
            return -_BFLOAT16_MAX
        if self._kind == "f":
            return float(np.finfo(self._numpy).min)
        if self._kind in ("i", "u"):
            return int(np.iinfo(self._numpy).min)
        raise TypeError(f"Cannot find minimum value of {self!r}.")

    @property
    def max(self):
        if self._numpy is None:
            return _BFLOAT16_MAX
        if self._kind == "f":
            return float(np.finfo(self._numpy).max)
        if self._kind in ("i", "u"):
            return int(np.iinfo(self._numpy).max)
        raise TypeError(f"Cannot find maximum value of {self!r}.")

    def is_compatible_with(self, other):
        try:
            return self == as_dtype(other)
        except TypeError:
            return False

    def __eq__(self, other):
        if isinstance(other, DType):
            return self._tg_enum == other._tg_enum
        if other is None:
            return False
        try:
            return self._tg_enum == as_dtype(other)._tg_enum
        except TypeError:
            return False

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(self._tg_enum)

    def __repr__(self):
        return "tg." + self._name

    def __str__(self):
        return "<dtype: %r>" % self._name

    def __reduce__(self):
        return as_dtype, (self._name,)


# The order of tg::DType in include/tracegraph/dtype.h (checked below against the module).
float32 = DType(0, "float32", np.float32, 1, "f", 4)
float64 = DType(1, "float64", np.float64, 2, "f", 8)
int32 = DType(2, "int32", np.int32, 3, "i", 4)
int64 = DType(3, "int64", np.int64, 9, "i", 8)
bool = DType(4, "bool", np.bool_, 10, "b", 1)  # pylint: disable=redefined-builtin
string = DType(5, "string", np.object_, 7, "s", 0)
uint8 = DType(6, "uint8", np.uint8, 4, "u", 1)
# NumPy has no bfloat16 (TensorFlow's as_numpy_dtype is ml_dtypes' type, which this Python lacks):
# as_numpy_dtype is None, and .numpy() of a bfloat16 tensor raises (docs/DECISIONS.md).
bfloat16 = DType(7, "bfloat16", None, 14, "f", 2)
double = float64

_BY_ENUM = (float32, float64, int32, int64, bool, string, uint8, bfloat16)
if [d.name for d in _BY_ENUM] != list(_core._dtype_names):
    raise ImportError("tracegraph: the Python dtypes do not match the extension module's "
                      f"({_core._dtype_names}); rebuild the package")

_BY_NAME = {d.name: d for d in _BY_ENUM}
_BY_NAME.update({"double": float64, "float": float32, "bool_": bool})
_BY_TF_ENUM = {d.as_datatype_enum: d for d in _BY_ENUM}
_PYTHON_TYPES = {builtins.float: float32, builtins.bool: bool, builtins.int: int32,
                 builtins.str: string, builtins.bytes: string, builtins.object: string}


def as_dtype(type_value):
    """The DType of a DType, a name ("float32"), a NumPy dtype or type, a Python type
    (float -> float32, int -> int32, bool -> bool, str/bytes -> string) or TF's enum number.

    Raises TypeError for anything else, and for types tracegraph does not have (e.g. int8).
    """
    if isinstance(type_value, DType):
        return type_value
    if isinstance(type_value, builtins.str):
        found = _BY_NAME.get(type_value)
        if found is None:
            raise TypeError(f"Cannot convert {type_value!r} to a tracegraph DType: the dtypes are "
                            f"{', '.join(sorted(d.name for d in _BY_ENUM))}.")
        return found
    if isinstance(type_value, builtins.type) and type_value in _PYTHON_TYPES:
        return _PYTHON_TYPES[type_value]
    if isinstance(type_value, builtins.int) and not isinstance(type_value, builtins.bool):
        if type_value in _BY_TF_ENUM:
            return _BY_TF_ENUM[type_value]
        raise TypeError(f"Cannot convert the DataType number {type_value} to a tracegraph DType.")
    try:
        np_dtype = np.dtype(type_value)
    except TypeError:
        np_dtype = None
    if np_dtype is not None:
        if np_dtype.kind in ("U", "S", "O"):
            return string
        for d in _BY_ENUM:
            if d is not string and d.as_numpy_dtype is not None and np.dtype(d.as_numpy_dtype) == np_dtype:
                return d
        raise TypeError(f"Cannot convert the NumPy dtype {np_dtype} to a tracegraph DType: "
                        "tracegraph has float32, float64, int32, int64, uint8, bool and string.")
    raise TypeError(f"Cannot convert {type_value!r} (of type {type(type_value).__name__}) to a "
                    "tracegraph DType.")


cast = _core.cast
