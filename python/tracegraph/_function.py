"""tg.function: TensorFlow's tf.function over tracegraph's C++ function core.

The call path - binding arguments to parameters, trace types of Python values, the traced body,
the cached path - is C++ (python/src/function_bindings.cpp). This module holds what is Python:
the decorator and its options, methods (one Function per instance, held weakly, as TF's
descriptor), ConcreteFunction and its graph, TensorSpec, tg.print, and the routing of the
core's retracing diagnostics (which the core writes in Python terms for these functions) to the
"tracegraph" logger.
"""
import builtins
import functools
import inspect
import itertools
import logging
import re
import secrets
import weakref
from collections import namedtuple

import numpy as np

from tracegraph import _core
from tracegraph import dtypes
from tracegraph import nest
from tracegraph._tensor import Tensor, TensorShape
from tracegraph._variables import Variable
from tracegraph.types import experimental as _types

__all__ = ["function", "Function", "ConcreteFunction", "TensorSpec", "print"]

_logger = logging.getLogger("tracegraph")


# ---- TensorSpec -------------------------------------------------------------------------------

class TensorSpec:
    """Describes a tensor (tf.TensorSpec): a shape whose dims may be None, a dtype and a name.

    Used in input_signature and in place of tensors for get_concrete_function.
    """

    __slots__ = ("_shape", "_dtype", "_name")

    def __init__(self, shape, dtype=dtypes.float32, name=None):
        self._shape = TensorShape(shape)
        self._dtype = dtypes.as_dtype(dtype)
        self._name = name or None

    @classmethod
    def from_tensor(cls, tensor, name=None):
        return cls(tensor.shape, tensor.dtype, name)

    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)
    name = property(lambda self: self._name)

    def is_compatible_with(self, other):
        if isinstance(other, Tensor):
            other = TensorSpec.from_tensor(other)
        return (isinstance(other, TensorSpec) and self._dtype == other._dtype
                and self._shape.is_compatible_with(other._shape))

    def is_subtype_of(self, other):
        return (isinstance(other, TensorSpec) and self._dtype == other._dtype
                and (other._name is None or self._name == other._name)
                and self._shape.is_subtype_of(other._shape))

    def most_specific_common_supertype(self, others):
        shape = self._shape
        for o in others:
            if not isinstance(o, TensorSpec) or o._dtype != self._dtype or o._name != self._name:
                return None
            shape = shape.most_specific_compatible_shape(o._shape)
        return TensorSpec(shape, self._dtype, self._name)

    def __eq__(self, other):
        return (isinstance(other, TensorSpec) and self._shape == other._shape
                and self._dtype == other._dtype and self._name == other._name)

    def __hash__(self):
        return hash((self._shape, self._dtype, self._name))

    def __repr__(self):
        name = "None" if self._name is None else repr(self._name)
        return f"TensorSpec(shape={self._shape}, dtype=tg.{self._dtype.name}, name={name})"

    def __reduce__(self):
        return TensorSpec, (self._shape.dims, self._dtype.name, self._name)


# ---- ConcreteFunction and its graph -------------------------------------------------------------

NodeDef = namedtuple("NodeDef", ["name", "op", "input"])
NodeDef.__doc__ = "One node of a graph as TF's GraphDef lists it: name, op and input names."
TraceRecord = namedtuple("TraceRecord", ["index", "function_type", "reason", "changed_arguments"])
TraceRecord.__doc__ = "Why one trace happened (Function.trace_history())."


class GraphDef:
    """A graph's nodes in topological order (TF's GraphDef, as far as .node goes)."""

    def __init__(self, nodes):
        self.node = [NodeDef(n[0], n[1], list(n[2])) for n in nodes]

    def __repr__(self):
        return f"<GraphDef with {len(self.node)} nodes>"


class Operation:
    """A node of a traced graph (tf.Operation's name, type and input names)."""

    def __init__(self, name, op_type, inputs, outputs):
        self.name = name
        self.type = op_type
        self.input_names = list(inputs)
        self.output_specs = list(outputs)

    def __repr__(self):
        return f"<tg.Operation '{self.name}' type={self.type}>"


class Graph:
    """The graph of one trace, as the code traced it (ConcreteFunction.graph)."""

    def __init__(self, handle, optimized=False):
        self._handle = handle
        self._optimized = optimized

    def as_graph_def(self):
        return GraphDef(self._handle.graph_nodes(self._optimized))

    def get_operations(self):
        return [Operation(n[0], n[1], n[2], [o[0] for o in n[4]])
                for n in self._handle.graph_nodes(self._optimized)]

    def to_dot(self):
        """Graphviz DOT text of the graph."""
        return self._handle.graph_dot()

    def __str__(self):
        return self._handle.graph_text(self._optimized)

    def __repr__(self):
        return f"<tg.Graph of '{self._handle.name}' trace #{self._handle.index}>"


class FunctionType:
    """A ConcreteFunction's parameters and output (tf.types.experimental.FunctionType): str()
    reads "(a: TensorSpec(...), b: Literal[2]) -> TensorSpec(...)"."""

    Parameter = namedtuple("Parameter", ["name", "kind", "type_constraint"])

    def __init__(self, handle):
        self._text = handle.function_type()
        self.parameters = {p[0]: FunctionType.Parameter(p[0], p[1], p[2]) for p in handle.parameters()}
        self.output = handle.output_description()

    def __str__(self):
        return self._text

    __repr__ = __str__

    def __eq__(self, other):
        return isinstance(other, FunctionType) and other._text == self._text

    def __hash__(self):
        return hash(self._text)


class ConcreteFunction:
    """One trace of a tg.function: callable with its tensor arguments (Python values it was
    traced with may be left out or must equal the traced ones), with its graph and signature."""

    def __init__(self, handle, function):
        self._handle = handle
        self._function_ref = weakref.ref(function)

    def __call__(self, *args, **kwargs):
        return self._handle(*args, **kwargs)

    @property
    def name(self):
        return self._handle.name

    @property
    def graph(self):
        """The graph as traced (one node per op the code ran)."""
        return Graph(self._handle)

    @property
    def optimized_graph(self):
        """The graph that runs: the traced one after tracegraph's optimiser."""
        return Graph(self._handle, optimized=True)

    @property
    def function_type(self):
        return FunctionType(self._handle)

    @property
    def structured_input_signature(self):
        """(args, kwargs) as traced: TensorSpecs for tensors, the values of Python arguments."""
        args, kwargs = [], {}
        for name, kind, _, value in self._handle.parameters():
            if kind == "KEYWORD_ONLY":
                kwargs[name] = value
            elif kind == "VAR_KEYWORD":
                kwargs.update(value)
            elif kind == "VAR_POSITIONAL":
                args.extend(value)
            else:
                args.append(value)
        return tuple(args), kwargs

    @property
    def structured_outputs(self):
        """The result structure, with a TensorSpec for each tensor."""
        return self._handle.structured_outputs()

    @property
    def inference_fn(self):
        """The graph called on flat tensors (TF's atomic function): no binding, no structure."""
        handle = self._handle

        def call_flat(*tensors):
            out = handle.call_flat(list(tensors))
            return out[0] if len(out) == 1 else out
        return call_flat

    def pretty_printed_signature(self, verbose=True):
        del verbose
        lines = ["Input Parameters:"]
        for name, kind, text, _ in self._handle.parameters():
            lines.append(f"  {name} ({kind}): {text}")
        lines.append("Output Type:")
        lines.append("  " + self._handle.output_description())
        return "\n".join(lines)

    def __str__(self):
        return "ConcreteFunction " + self.pretty_printed_signature()

    def __repr__(self):
        return f"<ConcreteFunction {self._handle.function_type()} at 0x{id(self):X}>"


# ---- tg.function ------------------------------------------------------------------------------

_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: 0,
    inspect.Parameter.POSITIONAL_OR_KEYWORD: 1,
    inspect.Parameter.VAR_POSITIONAL: 2,
    inspect.Parameter.KEYWORD_ONLY: 3,
    inspect.Parameter.VAR_KEYWORD: 4,
}
_instance_numbers = itertools.count()


def _parameters(python_function, drop_first=False):
    """(name, kind[, default]) per parameter, in inspect's order."""
    try:
        signature = inspect.signature(python_function)
    except (TypeError, ValueError):
        return [("args", 2), ("kwargs", 4)]  # a builtin without a signature: everything goes through
    params = list(signature.parameters.values())
    if drop_first:
        params = params[1:]
    out = []
    for p in params:
        if p.default is inspect.Parameter.empty:
            out.append((p.name, _KINDS[p.kind]))
        else:
            out.append((p.name, _KINDS[p.kind], p.default))
    return out


def _function_name(python_function):
    name = getattr(python_function, "__name__", None)
    if name is None and isinstance(python_function, functools.partial):
        return _function_name(python_function.func)
    if name is None:
        name = type(python_function).__name__
    return name


def _callable_type(python_function):
    """What identifies the Python code a Function wraps: Functions made over the same code count
    as re-creations ("created in a loop" in the retracing diagnostics)."""
    target = python_function
    while isinstance(target, functools.partial):
        target = target.func
    code = getattr(target, "__code__", None)
    if code is not None:
        return f"{code.co_filename}:{code.co_firstlineno}:{getattr(target, '__qualname__', code.co_name)}"
    return f"{type(target).__module__}.{type(target).__qualname__}@{next(_instance_numbers)}"


def _autograph_transform(python_function):
    """The callable a trace runs when autograph=True: the function converted by AutoGraph
    (tracegraph/autograph), whose `if` / `while` / `for` over tensors become tg.cond /
    tg.while_loop; the function itself when it cannot be converted (no source: a warning)."""
    from tracegraph.autograph import _transform
    return _transform.transform_for_function(python_function)


_CONVERTED_RESULTS = (builtins.bool, builtins.int, builtins.float, builtins.str, builtins.bytes,
                      np.generic, np.ndarray)


def _results_as_tensors(value):
    """What a trace returns, with its Python numbers, strings and NumPy values as constants: TF
    converts a traced body's results to tensors (func_graph's convert), so `return 1` gives
    tf.Tensor(1) on every call. Tuples, namedtuples, lists and dicts are walked; None, other
    objects and values no dtype holds (an int beyond int64) are returned as they are, where TF
    raises TypeError. Returns `value` itself when nothing changes."""
    if isinstance(value, _CONVERTED_RESULTS):
        try:
            return _core.constant(value)
        except (TypeError, ValueError):
            return value
    if isinstance(value, (tuple, list)):
        items = [_results_as_tensors(v) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        if isinstance(value, list):
            return items
        return type(value)(*items) if hasattr(type(value), "_fields") else tuple(items)
    if isinstance(value, dict):
        changed = {k: c for k, v in value.items() for c in (_results_as_tensors(v),) if c is not v}
        if not changed:
            return value
        out = value.copy()
        out.update(changed)
        return out
    return value


def _returning_tensors(traced):
    """The callable a trace runs: `traced`, its results as tensors (_results_as_tensors). Under
    tg.config.run_functions_eagerly(True) the results stay as the Python function returned them,
    as TF's eager mode does."""
    def body(*args, **kwargs):
        result = traced(*args, **kwargs)
        return result if _core._functions_run_eagerly() else _results_as_tensors(result)
    functools.update_wrapper(body, traced)
    return body


class Function(_core._Function):
    """A tg.function (tf.function's PolymorphicFunction): callable like the Python function,
    tracing it once per new input trace type."""

    def __init__(self, python_function, name=None, input_signature=None, autograph=True,
                 jit_compile=None, reduce_retracing=False, experimental_max_traces=1000,
                 _params=None, _callable_type=None, _bound_instance=None):
        if not callable(python_function):
            raise TypeError(f"tg.function expects a callable, got {python_function!r}")
        if input_signature is not None:
            input_signature = tuple(input_signature)
        self._python_function = python_function
        self._autograph = builtins.bool(autograph)
        self._jit_compile = jit_compile
        self._input_signature = input_signature
        self._reduce_retracing = builtins.bool(reduce_retracing)
        self._max_traces = int(experimental_max_traces)
        self._descriptor_cache = {}
        self._concrete = {}
        self._bound_instance = _bound_instance
        traced = _returning_tensors(_autograph_transform(python_function) if autograph else python_function)
        params = _params if _params is not None else _parameters(python_function)
        _core._Function.__init__(
            self, traced, name or _function_name(python_function), params, input_signature,
            self._reduce_retracing, _callable_type or _callable_type_of(python_function),
            self._max_traces)
        self._module_alias = _module_alias_of(python_function)
        try:
            functools.update_wrapper(self, python_function)
        except AttributeError:
            pass

    # -- methods: one Function per instance (TF's descriptor) --
    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        key = id(instance)
        entry = self._descriptor_cache.get(key)
        if entry is not None and entry[0]() is instance:
            return entry[1]
        bound = self._bind(instance)
        cache = self._descriptor_cache

        def forget(_, key=key):
            cache.pop(key, None)
        try:
            cache[key] = (weakref.ref(instance, forget), bound)
        except TypeError:
            pass  # not weakly referenceable: a new Function (and trace) for each access
        return bound

    def _bind(self, instance):
        method = _autograph_transform(self._python_function) if self._autograph else self._python_function
        instance_ref = weakref.ref(instance) if _weakrefable(instance) else (lambda: instance)

        def bound_method(*args, **kwargs):
            target = instance_ref()
            if target is None:
                raise ReferenceError(f"the instance that {_function_name(method)} was bound to has been deleted")
            return method(target, *args, **kwargs)
        functools.update_wrapper(bound_method, method)
        return Function(bound_method, name=_function_name(method), input_signature=self._input_signature,
                        autograph=self._autograph, jit_compile=self._jit_compile,
                        reduce_retracing=self._reduce_retracing, experimental_max_traces=self._max_traces,
                        _params=_parameters(method, drop_first=True),
                        _callable_type=f"{_callable_type_of(method)}@instance{next(_instance_numbers)}",
                        _bound_instance=instance_ref)

    # -- TF's PolymorphicFunction API --
    @property
    def python_function(self):
        return self._python_function

    @property
    def name(self):
        return self._name

    @property
    def input_signature(self):
        return self._input_signature

    def _wrap(self, handle):
        wrapper = self._concrete.get(handle.key)
        if wrapper is None:
            wrapper = ConcreteFunction(handle, self)
            self._concrete[handle.key] = wrapper
        return wrapper

    def get_concrete_function(self, *args, **kwargs):
        """The ConcreteFunction for these arguments, tracing if needed (any tensor may be a
        TensorSpec)."""
        return self._wrap(self._get_concrete_function(*args, **kwargs))

    def _list_all_concrete_functions(self):
        return [self._wrap(h) for h in self._concrete_functions()]

    def pretty_printed_concrete_signatures(self, verbose=True):
        return "\n".join(c.pretty_printed_signature(verbose) for c in self._list_all_concrete_functions())

    def trace_history(self):
        """Why each trace happened, oldest first (the most recent 64)."""
        words = self._module_alias
        return [TraceRecord(i, _in_user_words(t, words), _in_user_words(r, words), list(c))
                for i, t, r, c in self._trace_history()]

    def suggested_input_signature(self):
        """An input_signature covering every call seen, or None."""
        sig = self._suggested_input_signature()
        return None if sig is None else tuple(sig)

    def experimental_retracing_report(self):
        """The JSON retracing report (docs/retracing.md), its advice written as Python."""
        return _in_user_words(self._retracing_report(), self._module_alias)

    retracing_report = experimental_retracing_report

    def __repr__(self):
        return f"<tracegraph.Function {self._name} at 0x{id(self):X}>"


def _weakrefable(obj):
    try:
        weakref.ref(obj)
        return True
    except TypeError:
        return False


def _callable_type_of(python_function):
    return _callable_type(python_function)


def function(func=None, input_signature=None, autograph=True, jit_compile=None,
             reduce_retracing=False, experimental_implements=None,
             experimental_autograph_options=None, experimental_attributes=None,
             experimental_relax_shapes=None, experimental_compile=None,
             experimental_follow_type_hints=None, experimental_max_traces=1000):
    """Compiles a Python function into graphs, traced once per input trace type (tf.function).

    Use as a decorator (`@tg.function`, `@tg.function(reduce_retracing=True)`) or a call
    (`tg.function(f)`). input_signature fixes one FunctionType (a list of tg.TensorSpec);
    reduce_retracing generalises shapes instead of retracing. autograph=True (the default)
    converts the function's `if` / `while` / `for` over tensors into tg.cond / tg.while_loop
    (tracegraph.autograph); autograph=False leaves its control flow to run while tracing, where a
    tensor condition raises TypeError. jit_compile is accepted
    and changes nothing: every trace is optimised and planned by tracegraph. The other
    experimental_* flags TF accepts are accepted and ignored, except experimental_relax_shapes
    (TF's old name of reduce_retracing). experimental_max_traces: tracegraph's limit on traces,
    after which a call raises tg.errors.RetracingLimitError (0: no limit).
    """
    del experimental_implements, experimental_autograph_options, experimental_attributes
    del experimental_compile, experimental_follow_type_hints
    if experimental_relax_shapes:
        reduce_retracing = True

    def decorate(f):
        return Function(f, input_signature=input_signature, autograph=autograph,
                        jit_compile=jit_compile, reduce_retracing=reduce_retracing,
                        experimental_max_traces=experimental_max_traces)
    return decorate if func is None else decorate(func)


# ---- tg.print ---------------------------------------------------------------------------------

class _TensorSlot:
    """Stands for the i-th tensor of a structure while the structure's text is made. Its text
    carries a nonce drawn per print, so no text the structure itself holds can pass for one."""

    def __init__(self, index, nonce):
        self.index = index
        self.nonce = nonce

    def __repr__(self):
        return f"<{self.nonce}:{self.index}>"


def _sorted_like_nest(value, tensors, nonce):
    """`value` with dicts in tg.nest's (sorted) key order and tensors as _TensorSlot markers."""
    if isinstance(value, (Tensor, Variable)):
        tensors.append(value)
        return _TensorSlot(len(tensors) - 1, nonce)
    if nest.is_nested(value):
        if isinstance(value, dict):
            return {k: _sorted_like_nest(value[k], tensors, nonce) for k in nest.sorted_keys(value)}
        return nest.sequence_like(value, [_sorted_like_nest(v, tensors, nonce) for _, v in nest.children(value)])
    return value


def _print_parts(value, parts, glue):
    """One input of tf.print as parts: a tensor (formatted when the print runs), text, or a
    structure written as Python writes it with its tensors in place; `glue` gets the separator
    after each part but the input's last."""
    if isinstance(value, (Tensor, Variable)):
        parts.append(value)
        return
    tensors = []
    nonce = secrets.token_hex(8)
    template = _sorted_like_nest(value, tensors, nonce) if nest.is_nested(value) else value
    text = template if isinstance(template, str) else str(template)
    if not tensors:
        parts.append(text)
        return
    pieces = re.split(f"<{nonce}:(\\d+)>", text)  # text, slot, text, slot, ..., text
    for i, piece in enumerate(pieces):
        if i % 2:
            parts.append(tensors[int(piece)])
        elif piece or i == 0:
            parts.append(piece)
        else:
            continue
        glue.append(len(parts) - 1)
    glue.pop()  # the input's last part takes the separator between inputs


def print(*inputs, output_stream=None, summarize=3, sep=" ", end="\n", name=None):  # pylint: disable=redefined-builtin
    """Prints its inputs at every execution (tf.print): eagerly at once, inside a tg.function
    each time the graph runs, in order with Python's own output (both go to sys.stdout; TF's
    default stream is stderr). Inputs are separated by `sep` and followed by `end`.
    Tensors are written as TF's tf.print writes them: "[0 1 2 ... 7 8 9]" (the first and last
    `summarize` entries of each longer dimension; -1 prints all), floats with the digits that
    read back ("43.5", "0.722626925"), bools as 1 and 0, matrix rows on lines of their own;
    structures as Python writes them, dict keys sorted, tensors in place."""
    del name
    import sys
    if output_stream not in (None, sys.stdout):
        raise _errors().UnimplementedError(
            None, None, "tg.print writes to sys.stdout only (output_stream="
            f"{output_stream!r}); print there, or redirect sys.stdout")
    if summarize is None:
        summarize = 3
    if isinstance(summarize, bool) or not isinstance(summarize, int) or summarize < -1:
        raise ValueError(f"summarize must be -1 (print every element) or an int >= 0, got {summarize!r}")
    if not isinstance(sep, str) or not isinstance(end, str):
        raise TypeError(f"sep and end must be str, got {sep!r} and {end!r}")
    parts, glued = [], []
    for value in inputs:
        _print_parts(value, parts, glued)
    glued = set(glued)
    separators = ["" if i in glued else sep for i in range(len(parts) - 1)] + [end]
    _core._print(parts, summarize, separators)


def _errors():
    from tracegraph import errors
    return errors


# ---- the core's diagnostics ------------------------------------------------------------------

_PACKAGE_PREFIX = re.compile(r"(?<![\w.])tg\.")


def _in_user_words(text, alias):
    """The core's Python text with the package named as the user's module names it: after
    `import tracegraph as tf`, the fix `@tg.function(...)` reads `@tf.function(...)`, which works
    when pasted there."""
    return text if alias == "tg" else _PACKAGE_PREFIX.sub(alias + ".", text)


def _module_alias_of(python_function):
    """The name the function's module binds the tracegraph package to ("tf" after
    `import tracegraph as tf`), else "tg"."""
    import tracegraph  # pylint: disable=import-outside-toplevel
    while isinstance(python_function, functools.partial):
        python_function = python_function.func
    names = getattr(inspect.unwrap(python_function), "__globals__", None) or {}
    bound = [name for name, value in names.items() if value is tracegraph]
    return "tg" if not bound or "tg" in bound else ("tf" if "tf" in bound else sorted(bound)[0])


def _log(message, alias="tg"):
    """A message of the C++ core (called by the extension; a Python function's retracing
    diagnostics come already written in Python terms): to the "tracegraph" logger."""
    if message.startswith("tracegraph warning: "):
        message = message[len("tracegraph warning: "):]
    _logger.warning(_in_user_words(message, alias))


_core._register_python_classes(TensorSpec, _types.TraceType, __import__(__name__, fromlist=["_log", "_in_user_words"]))
