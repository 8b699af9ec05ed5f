"""tg.Variable's Python side, tg.name_scope and tg.init_scope.

The class is the extension module's tg::Variable (python/src/variable_bindings.cpp), so that a
traced function sees the library's Variable: read at every call, assigns as ordered stateful ops,
the singleton rule on creation. TF's constructor arguments, names with ':0', `trainable`, repr,
operators and conversions are added here when the package is imported.
"""
import contextlib
import threading

import numpy as np

from tracegraph import _core
from tracegraph import dtypes
from tracegraph import errors
from tracegraph._tensor import Tensor, TensorShape

Variable = _core.Variable

__all__ = ["Variable", "VariableSpec", "name_scope", "init_scope", "VariableSynchronization",
           "VariableAggregation"]


class VariableSynchronization:
    """tf.VariableSynchronization: accepted for compatibility (one device: every value is AUTO)."""
    AUTO = 0
    NONE = 1
    ON_WRITE = 2
    ON_READ = 3


class VariableAggregation:
    """tf.VariableAggregation: accepted for compatibility (no distribution strategies)."""
    NONE = 0
    SUM = 1
    MEAN = 2
    ONLY_FIRST_REPLICA = 3


class VariableSpec:
    """The trace type of a tg.Variable argument of a tg.function (TF's VariableSpec).

    shape and dtype are the Variable's; alias_id is the position of the Variable among the distinct
    Variables of the call, so f(x, y) and f(y, x) share a trace while f(x, x) has its own. A
    ConcreteFunction's structured_input_signature shows one per Variable parameter. Unlike TF's,
    it has no `trainable`: whether a Variable is trainable is not part of its trace type here.
    """

    __slots__ = ("_shape", "_dtype", "_alias_id")

    def __init__(self, shape, dtype=dtypes.float32, alias_id=None):
        self._shape = TensorShape(shape)
        self._dtype = dtypes.as_dtype(dtype)
        if alias_id is not None and (isinstance(alias_id, bool) or not isinstance(alias_id, int)
                                     or alias_id < 0):
            raise TypeError(f"VariableSpec: alias_id must be None or an int >= 0, got {alias_id!r}")
        self._alias_id = alias_id

    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)
    alias_id = property(lambda self: self._alias_id)

    def __eq__(self, other):
        return (isinstance(other, VariableSpec) and self._shape == other._shape
                and self._dtype == other._dtype and self._alias_id == other._alias_id)

    def __hash__(self):
        return hash((self._shape, self._dtype, self._alias_id))

    def __repr__(self):
        return (f"VariableSpec(shape={self._shape}, dtype=tg.{self._dtype.name}, "
                f"alias_id={self._alias_id})")


# ---- name scopes -----------------------------------------------------------------------------

_local = threading.local()


def _scope_stack():
    stack = getattr(_local, "scopes", None)
    if stack is None:
        stack = _local.scopes = [""]
    return stack


def _current_scope():
    return _scope_stack()[-1]


class name_scope:  # pylint: disable=invalid-name
    """tf.name_scope (TF 2): a prefix for the names of the Variables created inside it.

    `with tg.name_scope("layer") as scope:` gives "layer/" (nested scopes join with "/"; a name
    ending in "/" is used as it is). As in TF 2's eager mode, names are not made unique. Tensors
    have no names here, so only Variables (and the graph nodes of traced functions, which name
    themselves) are affected.
    """

    def __init__(self, name):
        if not isinstance(name, str):
            raise TypeError(f"name_scope: the name must be a str, got {name!r}")
        self._name = name
        self._entered = []

    @property
    def name(self):
        return self._name

    def _full(self):
        if not self._name:
            return ""
        if self._name.endswith("/"):
            return self._name
        return _current_scope() + self._name + "/"

    def __enter__(self):
        scope = self._full()
        _scope_stack().append(scope)
        self._entered.append(scope)
        return scope

    def __exit__(self, *exc_info):
        _scope_stack().pop()
        self._entered.pop()
        return False


# ---- tg.init_scope ---------------------------------------------------------------------------

@contextlib.contextmanager
def init_scope():
    """tf.init_scope: lifts the code inside it out of a function being traced.

    Inside it, no trace records on this thread: ops run eagerly (a Variable read is its current
    value, an assign happens now, once) and Variables may be created even on a later trace, as
    TF's init_scope does; recording GradientTapes are paused. Symbolic tensors of the trace cannot
    be used inside it (tg.errors.OutOfScopeError). Outside tracing it only pauses the tapes.
    """
    from tracegraph import _gradient  # pylint: disable=import-outside-toplevel
    scope = _core._EagerScope()
    paused = _gradient._pause_recording_tapes()
    scope._enter()
    try:
        yield
    finally:
        scope._exit()
        _gradient._resume_tapes(paused)


# ---- the Variable ----------------------------------------------------------------------------

_cpp_init = Variable.__init__

_NOT_SUPPORTED = "tracegraph's Variables"


def _unimplemented(what):
    return errors.UnimplementedError(None, None, f"[Variable] {what}")


def _init(self, initial_value=None, trainable=None, validate_shape=True, caching_device=None,
          name=None, variable_def=None, dtype=None, import_scope=None, constraint=None,
          synchronization=VariableSynchronization.AUTO, aggregation=VariableAggregation.NONE,
          shape=None, experimental_enable_variable_lifting=True):
    """tf.Variable(initial_value, trainable=None, ..., name=None, dtype=None, ..., shape=None).

    initial_value: a tensor, a Python or NumPy value, or a callable returning one (called with
    no arguments, under tg.init_scope as TF does). dtype: the Variable's dtype (Python values are
    converted to it; a tensor of another dtype is an error, as TF's). shape: must be compatible
    with the value; a shape with None dims is refused (a Variable's shape is fixed here).
    trainable: whether GradientTape watches it automatically and tg.Module lists it as
    trainable (default True). name: within the current tg.name_scope (default "Variable").
    """
    del caching_device, experimental_enable_variable_lifting  # one device, no lifting to do
    if "_trainable" in self.__dict__:
        raise RuntimeError("Variable.__init__ was called on an existing Variable; create a new "
                           "tg.Variable, or assign() a new value to this one")
    if variable_def is not None or import_scope is not None:
        raise _unimplemented("variable_def / import_scope (TF 1 graph protos) are not supported; "
                             "create the Variable from a value")
    if initial_value is None:
        raise ValueError("The `initial_value` arg (`None`) must be specified.")
    if constraint is not None:
        raise _unimplemented("constraint= is not supported; apply the constraint after each "
                             "optimizer step with v.assign(constraint(v))")
    if not validate_shape:
        raise _unimplemented("validate_shape=False is not supported: a Variable's shape is fixed "
                             "by its initial value")
    if synchronization not in (VariableSynchronization.AUTO, VariableSynchronization.NONE,
                               VariableSynchronization.ON_WRITE):
        raise _unimplemented("synchronization=ON_READ needs a distribution strategy")
    del aggregation  # meaningful only under a distribution strategy
    if trainable is None:
        trainable = True
    if not isinstance(trainable, (bool, np.bool_)):
        raise TypeError(f"trainable must be a bool, got {trainable!r}")
    if name is None:
        name = "Variable"
    if not isinstance(name, str):
        raise TypeError(f"Variable name must be a str, got {name!r}")
    if name.endswith(":0"):
        name = name[:-2]
    if callable(initial_value) and not isinstance(initial_value, (Tensor, Variable)):
        with init_scope():
            initial_value = initial_value()
    target = None if dtype is None else dtypes.as_dtype(dtype)
    if isinstance(initial_value, (Tensor, Variable)):
        value = _core.convert_to_tensor(initial_value)
        if target is not None and value.dtype != target:
            raise ValueError(f"Tensor conversion requested dtype {target.name} for a value of dtype "
                             f"{value.dtype.name}: the initial value {value!r}; tg.cast it first")
    else:
        value = _core.convert_to_tensor(initial_value, dtype=target)
    if shape is not None:
        wanted = TensorShape(shape)
        if not wanted.is_compatible_with(value.shape):
            raise ValueError(f"The initial value's shape ({value.shape}) is not compatible with "
                             f"the explicitly supplied `shape` argument ({wanted}).")
        if not wanted.is_fully_defined():
            raise _unimplemented(
                f"shape={wanted} has unknown dims, but {_NOT_SUPPORTED} keep the shape of their "
                f"initial value ({value.shape}); pass that shape or none")
    scope = _current_scope()
    full_name = name if name.endswith("/") else scope + name
    _cpp_init(self, value, full_name.rstrip("/") or "Variable")
    self._trainable = bool(trainable)


def _numpy_text(value):
    text = repr(value.numpy())
    return "\n" + text if "\n" in text else text


def _repr(self):
    header = f"<tg.Variable '{self.name}' shape={self.shape} dtype={self.dtype.name}"
    try:
        value = self.read_value()
    except (errors.OpError, TypeError, ValueError):
        return header + ">"
    if value._is_symbolic:
        return header + ">"
    return header + ", numpy=" + _numpy_text(value) + ">"


def _hash(self):
    raise TypeError("Variable is unhashable (== is elementwise). Instead, use variable.ref() as "
                    "the key.")


class _VariableReference:
    """A hashable reference to a Variable, by its state (Variable.ref())."""

    __slots__ = ("_variable",)

    def __init__(self, variable):
        self._variable = variable

    def deref(self):
        return self._variable

    def __hash__(self):
        return hash(self._variable._id)

    def __eq__(self, other):
        return isinstance(other, _VariableReference) and other._variable._id == self._variable._id

    def __repr__(self):
        return f"<Reference wrapping {self._variable!r}>"


def _assign(self, value, use_locking=None, name=None, read_value=True):
    """Replaces the value (dtype and shape must match); returns the new value as a tensor."""
    del use_locking, name
    result = self._assign(value)
    return result if read_value else None


def _assign_add(self, delta, use_locking=None, name=None, read_value=True):
    """Adds delta to the value; returns the new value as a tensor."""
    del use_locking, name
    result = self._assign_add(delta)
    return result if read_value else None


def _assign_sub(self, delta, use_locking=None, name=None, read_value=True):
    """Subtracts delta from the value; returns the new value as a tensor."""
    del use_locking, name
    result = self._assign_sub(delta)
    return result if read_value else None


def _deepcopy(self, memo):
    copy = Variable(self.read_value(), trainable=self.trainable, name=self._cpp_name + "/")
    memo[id(self)] = copy
    return copy


def _reduce(self):
    raise TypeError("a tg.Variable cannot be pickled; save Variables with tg.train.Checkpoint-"
                    "style checkpoints (tg::save_variables) or pickle v.numpy()")


def _read_through(method):
    def forward(self, *args):
        return getattr(self.read_value(), method)(*args)
    forward.__name__ = method
    return forward


_FORWARDED = [
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
    "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__",
    "__matmul__", "__rmatmul__", "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__",
    "__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__", "__neg__", "__abs__",
    "__invert__", "__getitem__", "__bool__", "__int__", "__float__", "__index__", "__len__",
    "__iter__", "__format__",
]


def _install():
    v = Variable
    v.__init__ = _init
    v._trainable = True  # Variables made by the library (an optimizer's slots) are trainable
    v.trainable = property(lambda self: self._trainable,
                           doc="Whether GradientTape watches it automatically (tf's trainable).")
    v.name = property(lambda self: self._cpp_name + ":0", doc="The name, TF's way ('w:0').")
    v.dtype = property(lambda self: dtypes._BY_ENUM[self._dtype_enum], doc="The element type.")
    v.shape = property(lambda self: TensorShape(self._shape_tuple()), doc="The (fixed) shape.")
    v.ndim = property(lambda self: len(self._shape_tuple()), doc="The rank.")
    v.device = property(lambda self: "/job:localhost/replica:0/task:0/device:CPU:0")
    v.synchronization = property(lambda self: VariableSynchronization.AUTO)
    v.aggregation = property(lambda self: VariableAggregation.NONE)
    v.get_shape = lambda self: self.shape
    v.value = lambda self: self.read_value()
    v.numpy = lambda self: self.read_value().numpy()
    v.assign = _assign
    v.assign_add = _assign_add
    v.assign_sub = _assign_sub
    v.__repr__ = _repr
    v.__str__ = _repr
    v.__hash__ = _hash
    v.__array__ = lambda self, dtype=None, copy=None: np.asarray(self.numpy(), dtype=dtype)
    v.__array_priority__ = 100
    v.__copy__ = lambda self: self
    v.__deepcopy__ = _deepcopy
    v.__reduce__ = _reduce
    v.ref = lambda self: _VariableReference(self)
    v.experimental_ref = v.ref
    for method in _FORWARDED:
        setattr(v, method, _read_through(method))


_install()
