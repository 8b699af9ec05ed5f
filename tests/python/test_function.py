"""tg.function from Python: TF's tracing rules, ported from TensorFlow's own tests.

Ported (the behaviour, in tracegraph's words) from TensorFlow's
tensorflow/python/eager/polymorphic_function/polymorphic_function_test.py,
tensorflow/python/eager/polymorphic_function/tracing_compilation_test.py and
tensorflow/core/function/trace_type/default_types_test.py: Python literals by value
(compared with ==, so 1, 1.0 and True are one literal, every NaN is one literal, and a string is
never a number; in containers and as dict keys too), tensors by dtype and shape, containers
structurally, namedtuples and dataclasses by class and fields, objects by weak identity (then ==),
custom TraceTypes (__tf_tracing_type__), keyword arguments and defaults, *args/**kwargs,
keyword-only parameters, functools.partial, callable objects, methods with one cache per
instance, input_signature, reduce_retracing, get_concrete_function with TensorSpecs and literals,
ConcreteFunction calls and views.

Skipped, with the reason:
- tests of tf.Variable arguments (VariableSpec) and of Variables created in a function: they are
  in tests/python/test_variables.py;
- AutoGraph (converted if/while/for): a later slice;
- XLA / jit_compile, device placement, SavedModel, distribution strategies, CompositeTensors,
  RaggedTensor, SparseTensor, ExtensionTypes, tf.data, py_function: not in tracegraph;
- dict keys other than str/int/float/bool: tracegraph's mapping keys are literals.
"""
import collections.abc
import dataclasses
import functools
import gc
import json
import logging
import math
import threading
import weakref
from collections import namedtuple

import numpy as np
import pytest

import tracegraph as tg


def traced(fn, **kwargs):
    """A tg.function over fn that counts its Python executions (traces)."""
    calls = []

    def body(*args, **kw):
        calls.append(1)
        return fn(*args, **kw)
    functools.update_wrapper(body, fn)
    return tg.function(body, **kwargs), calls


# ---- literals, tensors, containers --------------------------------------------------------------

def test_python_literals_trace_per_value():
    f, calls = traced(lambda x, n: x * n if not isinstance(n, str) else x)
    x = tg.constant(2)
    assert int(f(x, 2)) == 4
    assert int(f(x, 2)) == 4
    assert len(calls) == 1
    assert int(f(x, 3)) == 6
    assert len(calls) == 2
    f(x, "two")  # a string is a literal too
    assert len(calls) == 3


# TF's Literal is `isinstance(other, Literal) and self.value == other.value`, hashed by
# hash(value), with every NaN mapped to one marker (tensorflow/core/function/trace_type/default_types.py): equal numbers of any Python
# type are one literal, and the trace keeps the value of the call that made it.

def test_equal_numbers_are_one_literal_whatever_their_python_type():
    seen = []

    @tg.function
    def f(n):
        seen.append(n)
        return n, tg.constant(n)
    # A returned Python number is a tensor of its dtype (as TF's): int32 for the int 1, float32
    # for 1.0, so the result's dtype tells which literal the trace was made with.
    n, t = f(1)
    assert (n.dtype, int(n), t.dtype) == (tg.int32, 1, tg.int32)
    for same in (1.0, True, 1 + 0j, 1, True, 1.0):  # the cached path, then the same again
        n, t = f(same)
        assert (n.dtype, int(n), t.dtype) == (tg.int32, 1, tg.int32)  # the trace made with 1
    assert f.experimental_get_tracing_count() == 1
    assert seen == [1] and type(seen[0]) is int  # the body ran once, with the value that traced
    f(False)
    f(0.0)
    f(-0.0)
    f(0)
    assert f.experimental_get_tracing_count() == 2 and seen[1] is False
    f(2.0)
    assert f.experimental_get_tracing_count() == 3 and type(seen[2]) is float
    n, t = f(2)
    assert (n.dtype, float(n), t.dtype) == (tg.float32, 2.0, tg.float32)
    f(2.5)
    assert f.experimental_get_tracing_count() == 4


def test_numbers_compare_exactly_beyond_float_precision_and_int64():
    f = tg.function(lambda n: n)
    f(2 ** 53 + 1)
    f(float(2 ** 53))  # float(2 ** 53 + 1) rounds to this, but the int is not equal to it
    assert f.experimental_get_tracing_count() == 2
    f(2 ** 53)
    assert f.experimental_get_tracing_count() == 2
    f(2 ** 70)  # beyond int64: compared as Python values, still with ==
    f(2.0 ** 70)
    f(complex(2 ** 70, 0))
    assert f.experimental_get_tracing_count() == 3
    f(2 ** 70 + 1)
    assert f.experimental_get_tracing_count() == 4
    assert f(2.0 ** 70) == 2 ** 70 and type(f(2.0 ** 70)) is int


class _CountsHashes:
    """An object argument whose __hash__ counts: only the general path hashes it (to build its
    trace type); the cached path matches it by identity."""

    def __init__(self):
        self.hashes = 0

    def __hash__(self):
        self.hashes += 1
        return 7


def test_equal_numbers_take_the_cached_path():
    f = tg.function(lambda o, n: n)
    o = _CountsHashes()
    traced_values = (1, (2.0, "s"), float("nan"))
    for n in traced_values + traced_values:  # traced, then remembered for the cached path
        f(o, n)
    built = o.hashes
    for n in (1.0, True, 1 + 0j, (2, "s"), (2 + 0j, "s"), float("nan"), complex(1, math.nan), 1):
        f(o, n)
    assert o.hashes == built  # no call built trace types: the fast hash and match found each one
    assert f.experimental_get_tracing_count() == 3


def test_tracing_count_after_one_one_point_zero_and_true():
    f = tg.function(lambda x: x)
    f(1)
    f(1.0)
    f(True)
    assert f.experimental_get_tracing_count() == 1


def test_literal_of_a_new_trace_is_the_calls_own_value():
    seen = []

    @tg.function
    def f(x, n):
        seen.append(n)
        return x
    f(tg.constant([1.0]), 1)
    f(tg.constant([1.0, 2.0]), 1.0)  # a new shape traces again, with this call's 1.0
    f(tg.constant([1.0]), True)
    assert seen == [1, 1.0] and [type(v) for v in seen] == [int, float]
    assert f.experimental_get_tracing_count() == 2


def test_nan_literals_match_each_other():
    seen = []

    @tg.function
    def f(n):
        seen.append(n)
        return n
    first = f(float("nan"))
    for other in (float("nan"), math.nan, -math.nan, complex(math.nan, 1), complex(1, math.nan)):
        assert math.isnan(f(other))  # the trace's own result, never retraced
    assert f.experimental_get_tracing_count() == 1
    assert len(seen) == 1 and type(seen[0]) is float and math.isnan(seen[0]) and math.isnan(first)
    f(math.inf)
    f(-math.inf)
    f(1.0)
    assert f.experimental_get_tracing_count() == 4


def test_complex_nan_traces_with_a_float_nan():
    seen = []

    @tg.function
    def f(n):
        seen.append(n)
        return n
    f(complex(math.nan, 1))
    f(float("nan"))
    assert f.experimental_get_tracing_count() == 1
    assert type(seen[0]) is float and math.isnan(seen[0])  # TF's placeholder of its NaN marker


def test_other_hashable_values_compare_with_eq_and_nan_matches_nan():
    f = tg.function(lambda n: n)
    f(np.float64("nan"))
    f(np.float32("nan"))  # neither weakly referenceable: TF's Literal of the value
    assert f.experimental_get_tracing_count() == 1
    f(np.int64(3))
    f(np.int32(3))  # equal values of different types
    assert f.experimental_get_tracing_count() == 2
    f(b"3")
    assert f.experimental_get_tracing_count() == 3


def test_a_mapping_with_equal_keys_raises_type_error():
    class Pairs(collections.abc.Mapping):
        """Keys looked up by identity, so 1 and 1.0 stay two keys."""

        def __init__(self, items):
            self._items = items

        def __getitem__(self, key):
            return next(v for k, v in self._items if k is key)

        def __iter__(self):
            return iter([k for k, _ in self._items])

        def __len__(self):
            return len(self._items)
    f = tg.function(lambda m: len(m))
    with pytest.raises(TypeError, match="keys 1 and 1.0, which are one key"):
        f(Pairs([(1, "a"), (1.0, "b")]))


def test_strings_never_equal_numbers():
    f = tg.function(lambda v: v)
    f(1)
    f("1")
    f(1.0)
    f("1.0")
    f(True)
    f("True")
    assert f.experimental_get_tracing_count() == 4
    assert f("1") == "1" and f(1.0) == 1 and f("True") == "True"
    assert f.experimental_get_tracing_count() == 4


def test_equal_literals_inside_containers_share_a_trace():
    f, calls = traced(lambda v: v)
    f((1, 2.0, True))
    f((1.0, 2, 1))  # tuples take the cached path
    f((True, 2.0 + 0j, 1.0))
    assert len(calls) == 1
    f((1, 2.5, True))
    assert len(calls) == 2
    f([1, float("nan")])
    f([1.0, float("nan")])
    assert len(calls) == 3
    f({"a": 0, "b": (1,)})
    f({"b": (True,), "a": 0.0})
    assert len(calls) == 4
    f({"a": 0, "b": (1.5,)})
    assert len(calls) == 5


def test_equal_dict_keys_are_one_key():
    @tg.function
    def f(d):
        return d[1] * 10 + d["k"]
    assert int(f({1: tg.constant(2), "k": tg.constant(3)})) == 23
    assert int(f({1.0: tg.constant(4), "k": tg.constant(5)})) == 45
    assert int(f({"k": tg.constant(7), True: tg.constant(6)})) == 67
    assert f.experimental_get_tracing_count() == 1
    assert int(f({2: tg.constant(1), "k": tg.constant(0), 1: tg.constant(1)})) == 10
    assert f.experimental_get_tracing_count() == 2
    g = tg.function(lambda d: len(d))
    g({"1": 1})
    g({1: 1})
    assert g.experimental_get_tracing_count() == 2


def test_dict_equality_ignores_order_and_needs_the_same_keys():
    # default_types_test.testDictTypeEquality, through calls
    f = tg.function(lambda d: sorted(d))
    f({1: 2, 3: 4})
    f({3: 4, 1: 2})
    f({3.0: 4.0, True: 2})
    assert f.experimental_get_tracing_count() == 1
    f({1: 2})
    assert f.experimental_get_tracing_count() == 2


def test_literals_never_generalise():
    # default_types_test.testLiteralSupertypes: the supertype of equal literals is the literal,
    # of different ones there is none (even with reduce_retracing)
    f, calls = traced(lambda n: n, reduce_retracing=True)
    f(1)
    f(1.0)
    assert len(calls) == 1
    f(2)
    f(3)
    assert len(calls) == 3
    assert "Literal[" in f.pretty_printed_concrete_signatures()


def test_concrete_function_accepts_an_equal_literal():
    @tg.function
    def power(a, b):
        return a ** b
    square = power.get_concrete_function(a=tg.TensorSpec(None, tg.float32), b=2)
    assert float(square(tg.constant(3.0), 2.0)) == 9.0
    with pytest.raises(TypeError, match="Can not cast"):
        square(tg.constant(3.0), 2.5)
    with pytest.raises(TypeError, match="Can not cast"):
        square(tg.constant(3.0), "2")


def test_tensors_by_dtype_and_shape():
    f, calls = traced(lambda x: x + x)
    f(tg.constant([1, 2]))
    f(tg.constant([3, 4]))
    assert len(calls) == 1
    f(tg.constant([1, 2, 3]))
    f(tg.constant([1.0, 2.0]))
    assert len(calls) == 3


def test_numpy_arrays_trace_as_tensors():
    f, calls = traced(lambda x: x * 2)
    out = f(np.array([1.0, 2.0], dtype=np.float32))
    np.testing.assert_array_equal(out.numpy(), [2.0, 4.0])
    f(np.array([5.0, 6.0], dtype=np.float32))
    assert len(calls) == 1


def test_none_argument():
    f, calls = traced(lambda x, y=None: x if y is None else x + y)
    assert int(f(tg.constant(1))) == 1
    assert int(f(tg.constant(1), None)) == 1
    assert len(calls) == 1
    assert int(f(tg.constant(1), tg.constant(2))) == 3
    assert len(calls) == 2


def test_lists_tuples_dicts_structurally():
    f, calls = traced(lambda d: d["a"] + d["b"][0])
    assert int(f({"a": tg.constant(1), "b": (tg.constant(2),)})) == 3
    assert int(f({"b": (tg.constant(5),), "a": tg.constant(1)})) == 6  # key order does not matter
    assert len(calls) == 1
    g, gcalls = traced(lambda xs: xs[0] + xs[1])
    g([tg.constant(1), tg.constant(2)])
    g((tg.constant(1), tg.constant(2)))  # a tuple is another type than a list
    assert len(gcalls) == 2
    g([1, 2])
    g([2, 1])  # [1, 2] and [2, 1] differ (the guide)
    assert len(gcalls) == 4


def test_dict_with_tensors_in_sorted_and_given_order():
    @tg.function
    def f(d):
        return d["z"] - d["a"]
    assert int(f({"z": tg.constant(10), "a": tg.constant(3)})) == 7
    assert int(f({"a": tg.constant(3), "z": tg.constant(10)})) == 7


Point = namedtuple("Point", ["x", "y"])


@dataclasses.dataclass
class Config:
    lr: float
    w: object


def test_namedtuples_by_class_and_fields():
    f, calls = traced(lambda p: Point(p[0] * 2, p[1]) if isinstance(p, Point) else p[0])
    out = f(Point(tg.constant(1), 3))
    assert isinstance(out, Point) and int(out.x) == 2 and out.y == 3
    f(Point(tg.constant(5), 3))
    assert len(calls) == 1
    f(Point(tg.constant(5), 4))
    assert len(calls) == 2
    f((tg.constant(5), 4))  # a plain tuple is not the namedtuple
    assert len(calls) == 3


def test_dataclasses_by_class_and_fields():
    f, calls = traced(lambda c: c.w * c.lr)
    assert float(f(Config(2.0, tg.constant(3.0)))) == 6.0
    assert float(f(Config(2.0, tg.constant(4.0)))) == 8.0
    assert len(calls) == 1
    f(Config(3.0, tg.constant(4.0)))
    assert len(calls) == 2


# ---- objects: weak identity, then == -------------------------------------------------------------

class Plain:
    pass


class Equal:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return isinstance(other, Equal) and other.v == self.v

    def __hash__(self):
        return hash(self.v)


def test_objects_by_identity_and_weakly_held():
    f, calls = traced(lambda o, x: x + 1)
    a = Plain()
    f(a, tg.constant(1))
    f(a, tg.constant(1))
    assert len(calls) == 1
    f(Plain(), tg.constant(1))
    assert len(calls) == 2
    ref = weakref.ref(a)
    del a
    gc.collect()
    assert ref() is None, "a traced function must not keep its object arguments alive"


def test_equal_objects_share_a_trace():
    f, calls = traced(lambda o: tg.constant(o.v))
    a, b, c = Equal(1), Equal(1), Equal(2)  # alive: a dead object never matches
    f(a)
    f(b)
    assert len(calls) == 1
    f(c)
    assert len(calls) == 2


def test_dead_object_never_matches_again():
    # The guide's Apple and Mango: a new object each call retraces.
    f, calls = traced(lambda o: tg.constant(1))
    f(Plain())
    gc.collect()
    f(Plain())
    assert len(calls) == 2


def test_unhashable_unweakrefable_argument_raises():
    f = tg.function(lambda s: tg.constant(1))
    with pytest.raises(TypeError, match="TraceType"):
        f(bytearray(b"neither hashable nor weakly referenceable"))


class FruitTraceType(tg.types.experimental.TraceType):
    def __init__(self, fruit):
        self.fruit_type = type(fruit)
        self.fruit_value = fruit

    def is_subtype_of(self, other):
        return type(other) is FruitTraceType and self.fruit_type is other.fruit_type

    def most_specific_common_supertype(self, others):
        return self if all(self == other for other in others) else None

    def placeholder_value(self, placeholder_context=None):
        return self.fruit_value

    def __eq__(self, other):
        return type(other) is FruitTraceType and self.fruit_type == other.fruit_type

    def __hash__(self):
        return hash(self.fruit_type)


class Fruit:
    def __tf_tracing_type__(self, context):
        return FruitTraceType(self)


class Apple(Fruit):
    flavor = tg.constant([1, 2])


class Mango(Fruit):
    flavor = tg.constant([3, 4])


def test_custom_trace_type_protocol():
    f, calls = traced(lambda a, b: a.flavor + b.flavor)
    np.testing.assert_array_equal(f(Apple(), Mango()).numpy(), [4, 6])
    np.testing.assert_array_equal(f(Apple(), Mango()).numpy(), [4, 6])
    assert len(calls) == 1
    f(Mango(), Apple())
    assert len(calls) == 2


def test_tracing_type_must_be_a_trace_type():
    class Bad:
        def __tf_tracing_type__(self, context):
            return 3
    with pytest.raises(TypeError, match="TraceType"):
        tg.function(lambda o: tg.constant(1))(Bad())


def test_trace_type_is_abstract():
    with pytest.raises(TypeError):
        tg.types.experimental.TraceType()


# ---- binding: kwargs, defaults, *args, keyword-only, partial, callables, methods ------------

def test_kwargs_and_defaults():
    f, calls = traced(lambda x, y=2, *, scale=1: (x + y) * scale)
    assert int(f(tg.constant(1))) == 3
    assert int(f(tg.constant(1), y=2)) == 3
    assert int(f(x=tg.constant(1), y=2)) == 3
    assert len(calls) == 1, "a default and the same value given explicitly are one trace"
    assert int(f(tg.constant(1), scale=10)) == 30
    assert len(calls) == 2


def test_varargs_and_varkwargs():
    @tg.function
    def f(a, *args, **kwargs):
        return a + sum(args) + sum(kwargs.values())
    assert int(f(tg.constant(1), tg.constant(2), tg.constant(3), z=tg.constant(4))) == 10
    assert int(f(tg.constant(1))) == 1
    sig = f.get_concrete_function(tg.constant(1), tg.constant(2), k=tg.constant(3)).pretty_printed_signature()
    assert "args (VAR_POSITIONAL)" in sig and "kwargs (VAR_KEYWORD)" in sig


def test_bad_arguments_raise_type_error():
    f = tg.function(lambda x, y: x + y)
    with pytest.raises(TypeError, match="missing 1 required argument: 'y'"):
        f(tg.constant(1))
    with pytest.raises(TypeError, match="takes 2 positional arguments but 3 were given"):
        f(1, 2, 3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        f(1, 2, z=3)
    with pytest.raises(TypeError, match="multiple values for argument 'x'"):
        f(1, 2, x=3)


def test_functools_partial():
    def scale(x, factor):
        return x * factor
    f = tg.function(functools.partial(scale, factor=3))
    assert int(f(tg.constant(2))) == 6
    assert f.get_concrete_function(tg.constant(2)).function_type.parameters["factor"].type_constraint == "Literal[3]"


def test_callable_object():
    class Scale:
        def __call__(self, x):
            return x * 4
    f = tg.function(Scale())
    assert int(f(tg.constant(2))) == 8
    assert f.name == "Scale"


class Model:
    def __init__(self, k):
        self.k = k
        self.traces = 0

    @tg.function
    def apply(self, x):
        self.traces += 1
        return x * self.k


def test_methods_have_one_cache_per_instance():
    a, b = Model(2), Model(3)
    assert int(a.apply(tg.constant(1))) == 2
    assert int(a.apply(tg.constant(5))) == 10
    assert int(b.apply(tg.constant(1))) == 3
    assert a.traces == 1 and b.traces == 1
    assert a.apply is a.apply
    assert a.apply.experimental_get_tracing_count() == 1


def test_method_function_does_not_keep_instance_alive():
    m = Model(2)
    m.apply(tg.constant(1))
    ref = weakref.ref(m)
    del m
    gc.collect()
    assert ref() is None


# ---- input_signature, reduce_retracing ----------------------------------------------------------

def test_input_signature_traces_once_and_rejects_mismatches():
    f, calls = traced(lambda x: x, input_signature=[tg.TensorSpec(shape=[None], dtype=tg.int32)])
    f(tg.constant([1, 2]))
    f(tg.constant([1, 2, 3]))
    assert len(calls) == 1
    with pytest.raises(TypeError, match="Can not cast"):
        f(tg.constant([[1, 2]]))
    with pytest.raises(TypeError, match="Can not cast"):
        f(tg.constant([1.0]))
    with pytest.raises(TypeError, match="None"):
        f(None)
    np.testing.assert_array_equal(f([4, 5]).numpy(), [4, 5])  # Python values convert, as TF
    assert len(calls) == 1


def test_input_signature_names_graph_inputs_and_get_concrete_function():
    f = tg.function(lambda x: x + 1, input_signature=[tg.TensorSpec([None], tg.float32, name="batch")])
    cf = f.get_concrete_function()
    assert [n.name for n in cf.graph.as_graph_def().node][0] == "batch"
    np.testing.assert_allclose(cf(tg.constant([1.0])).numpy(), [2.0])


def test_input_signature_must_be_specs():
    with pytest.raises(TypeError, match="TensorSpec"):
        tg.function(lambda x: x, input_signature=[3])


def test_reduce_retracing_generalises_shapes():
    f, calls = traced(lambda x: x, reduce_retracing=True)
    f(tg.constant([1, 2, 3]))
    f(tg.constant([1, 2, 3, 4, 5]))
    f(tg.constant([1, 2, 3, 4, 5, 6, 7]))
    assert len(calls) == 2
    assert "shape=(None,)" in f.pretty_printed_concrete_signatures()


# ---- concrete functions -----------------------------------------------------------------------

def test_concrete_function_with_spec_and_literal():
    @tg.function
    def power(a, b):
        return a ** b
    square = power.get_concrete_function(a=tg.TensorSpec(None, tg.float32), b=2)
    assert float(square(tg.constant(10.0))) == 100.0
    assert float(square(tg.constant(10.0), 2)) == 100.0
    with pytest.raises(TypeError, match="Can not cast 3 to Literal\\[2\\]"):
        square(tg.constant(10.0), b=3)
    assert "b (POSITIONAL_OR_KEYWORD): Literal[2]" in str(square)
    args, kwargs = square.structured_input_signature
    assert args == (tg.TensorSpec(None, tg.float32, "a"), 2) and kwargs == {}


def test_same_types_give_the_same_concrete_function():
    f = tg.function(lambda x: x * 2)
    a = f.get_concrete_function(tg.constant(1))
    b = f.get_concrete_function(tg.TensorSpec([], tg.int32))
    assert a is b
    assert f.experimental_get_tracing_count() == 1


def test_get_concrete_function_does_not_count_as_call_but_traces():
    f, calls = traced(lambda x: x)
    f.get_concrete_function(tg.TensorSpec([2], tg.float32))
    assert len(calls) == 1 and f.experimental_get_tracing_count() == 1


def test_concrete_function_dtype_mismatch_is_invalid_argument():
    cf = tg.function(lambda a: a + a).get_concrete_function(tg.constant("a"))
    with pytest.raises(tg.errors.InvalidArgumentError):
        cf(tg.constant(1))


def test_structured_outputs_and_nested_results():
    @tg.function
    def f(x):
        return {"sum": x + 1, "pair": (x, 3), "none": None}
    out = f(tg.constant(1))
    # The Python 3 is returned as a tensor, as TF converts a traced body's results.
    assert int(out["sum"]) == 2 and int(out["pair"][0]) == 1 and out["none"] is None
    assert repr(out["pair"][1]) == "<tg.Tensor: shape=(), dtype=int32, numpy=3>"
    so = f.get_concrete_function(tg.constant(1)).structured_outputs
    assert so["sum"] == tg.TensorSpec([], tg.int32) and so["pair"][1] == tg.TensorSpec([], tg.int32)


def test_function_returning_nothing():
    f = tg.function(lambda x: None)
    assert f(tg.constant(1)) is None


def test_graph_nodes_as_the_guide_counts_them():
    cf = tg.function(lambda a: a + a).get_concrete_function(tg.constant("a"))
    nodes = [(list(n.input), n.name) for n in cf.graph.as_graph_def().node]
    assert nodes == [([], "a"), (["a", "a"], "add"), (["add"], "Identity")]
    assert [op.type for op in cf.graph.get_operations()][0] == "Placeholder"


def test_function_type_text():
    cf = tg.function(lambda a, n: a * n).get_concrete_function(tg.TensorSpec([None], tg.float32), 2)
    assert str(cf.function_type) == (
        "(a: TensorSpec(shape=(None,), dtype=tg.float32, name=None), n: Literal[2]) -> "
        "TensorSpec(shape=(None,), dtype=tg.float32, name=None)")


# ---- side effects, leaks, nesting, eager mode ---------------------------------------------------

def test_python_print_only_while_tracing_tg_print_every_call(capsys):
    @tg.function
    def f(x):
        print("Traced with", x)
        tg.print("Executed with", x)
    f(1)
    f(1)
    f(2)
    assert capsys.readouterr().out.splitlines() == [
        "Traced with 1", "Executed with 1", "Executed with 1", "Traced with 2", "Executed with 2"]


def test_python_list_appended_only_while_tracing():
    external = []

    @tg.function
    def side_effect(x):
        external.append(x)
    side_effect(1)
    side_effect(1)
    side_effect(1)
    assert len(external) == 1


def test_leaked_symbolic_tensor_raises_clear_error():
    leaked = []

    @tg.function
    def leaky(a):
        leaked.append(a + 1)
        return a + 2
    assert int(leaky(tg.constant(1))) == 3
    with pytest.raises(Exception, match="symbolic|out of scope|trace"):
        leaked[0].numpy()

    @tg.function
    def uses(b):
        return b + 1
    with pytest.raises(tg.errors.OutOfScopeError):
        uses(leaked[0])


def test_nested_functions():
    inner = tg.function(lambda x: x * 2)
    outer = tg.function(lambda x: inner(x) + 1)
    assert int(outer(tg.constant(3))) == 7
    assert int(outer(tg.constant(4))) == 9
    assert outer.experimental_get_tracing_count() == 1


def test_recursive_tracing_of_same_types_is_a_staging_error():
    @tg.function
    def recursive(n):
        return recursive(n - 1)
    with pytest.raises(tg.errors.StagingError, match="(?s)Python value.*tg.while_loop") as info:
        recursive(tg.constant(5))
    assert "C++" not in str(info.value) and "tg::" not in str(info.value)


def test_python_exception_in_body_propagates():
    @tg.function
    def f(x):
        raise KeyError("boom")
    with pytest.raises(KeyError, match="boom"):
        f(tg.constant(1))
    assert f.experimental_get_tracing_count() == 0


def test_run_functions_eagerly():
    f, calls = traced(lambda x: x + 1)
    tg.config.run_functions_eagerly(True)
    try:
        assert tg.config.functions_run_eagerly()
        f(tg.constant(1))
        f(tg.constant(1))
        assert len(calls) == 2
    finally:
        tg.config.run_functions_eagerly(False)
    f(tg.constant(1))
    f(tg.constant(1))
    assert len(calls) == 3


def test_python_function_and_wrapping():
    def my_fn(x):
        """Doc."""
        return x
    f = tg.function(my_fn)
    assert f.python_function is my_fn
    assert f.__name__ == "my_fn" and f.__doc__ == "Doc."
    assert isinstance(f, tg.Function)


# ---- retracing in Python terms -----------------------------------------------------------------

def test_retrace_reason_names_the_python_parameter():
    f = tg.function(lambda x, step: x + step)
    f(tg.constant(1), 1)
    f(tg.constant([1, 2]), 1)
    f(tg.constant([1, 2]), 2)
    history = f.trace_history()
    assert history[0].reason == "first call"
    assert history[1].changed_arguments == ["x"]
    assert history[2].changed_arguments == ["step"]


def test_frequent_retracing_warning_goes_through_logging_with_python_fix(caplog):
    @tg.function
    def train_step(x, step):
        return x + step
    with caplog.at_level(logging.WARNING, logger="tracegraph"):
        for step in range(6):
            train_step(tg.constant(1), step)
    messages = [r.getMessage() for r in caplog.records if r.name == "tracegraph"]
    assert messages, "no warning on the 'tracegraph' logger"
    assert "triggered tg.function retracing" in messages[0]
    assert "pass a tensor instead of the Python int `step`" in messages[0]


def test_warning_fix_names_a_python_number_for_mixed_ints_and_floats(caplog):
    @tg.function
    def scale(x, lr):
        return x * lr
    with caplog.at_level(logging.WARNING, logger="tracegraph"):
        for lr in (0.5, 1.0, 1.5, 2.0, 2.5, 3.0):  # 1.0 is the literal 1, shown as "1"
            scale(tg.constant(1.0), lr)
    messages = [r.getMessage() for r in caplog.records if r.name == "tracegraph"]
    assert "pass a tensor instead of the Python number `lr`" in messages[0]


def test_warning_fix_for_shapes_is_pasteable_python(caplog):
    @tg.function
    def f(x):
        return x * 2
    with caplog.at_level(logging.WARNING, logger="tracegraph"):
        for n in range(1, 7):
            f(tg.ones([n]))
    message = [r.getMessage() for r in caplog.records if r.name == "tracegraph"][0]
    fix = "@tg.function(input_signature=[tg.TensorSpec(shape=[None], dtype=tg.float32)])"
    assert fix in message and "@tg.function(reduce_retracing=True)" in message
    # The fix works when pasted.
    fixed = eval(fix[1:])(lambda x: x * 2)  # pylint: disable=eval-used
    for n in range(1, 7):
        fixed(tg.ones([n]))
    assert fixed.experimental_get_tracing_count() == 1


def test_fixes_name_the_package_as_the_user_module_imports_it(caplog):
    """After `import tracegraph as tf` (the guide's one changed line), the warning, the ERTL error,
    the report and the trace reasons write `tf.` - the fix works when pasted into that module."""
    import tracegraph  # pylint: disable=import-outside-toplevel
    user_module = {"tf": tracegraph}
    exec("@tf.function\ndef step(x):\n    return x * 2\n"  # pylint: disable=exec-used
         "limited = tf.function(lambda i: tf.constant(i), experimental_max_traces=2)\n", user_module)
    step = user_module["step"]
    with caplog.at_level(logging.WARNING, logger="tracegraph"):
        for n in range(1, 7):
            step(tg.ones([n]))
    message = [r.getMessage() for r in caplog.records if r.name == "tracegraph" and "retracing" in r.getMessage()][0]
    fix = "@tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.float32)])"
    assert fix in message and "@tf.function(reduce_retracing=True)" in message, message
    assert "tg." not in message
    fixed = eval(fix[1:], user_module)(lambda x: x * 2)  # pylint: disable=eval-used
    for n in range(1, 7):
        fixed(tg.ones([n]))
    assert fixed.experimental_get_tracing_count() == 1
    assert "tf.TensorSpec(" in step.experimental_retracing_report()
    assert "tg." not in step.experimental_retracing_report()
    limited = user_module["limited"]
    limited(0)
    limited(1)
    with pytest.raises(tg.errors.RetracingLimitError) as info:
        limited(2)
    assert "e.g. tf.constant(i)" in str(info.value) and "tg." not in str(info.value)
    # A module that imports the package as tg keeps tg.
    assert test_warning_fix_for_shapes_is_pasteable_python.__globals__["tg"] is tracegraph


def test_tracing_limit_raises_ertl_error():
    f = tg.function(lambda i: tg.constant(i), experimental_max_traces=3)
    for i in range(3):
        f(i)
    with pytest.raises(tg.errors.RetracingLimitError) as info:
        f(3)
    text = str(info.value)
    assert text.startswith("The function '<lambda>' has been retraced 3 times. The tracing limit has been reached.")
    assert "pass a tensor instead of the Python int `i`" in text
    assert info.value.tg_code == "ERTL"
    assert int(f(1)) == 1  # existing traces keep working


def test_retracing_report_json_from_python():
    f = tg.function(lambda x: x)
    for n in (2, 3, 4):
        f(tg.ones([n]))
    report = json.loads(f.experimental_retracing_report())
    assert report["function"] == "<lambda>" and report["trace_count"] == 3
    assert report["suggested_input_signature"][0]["shape"] == [None]
    assert any("reduce_retracing=True" in w["action"] for w in report["workarounds"])
    assert f.suggested_input_signature() == (tg.TensorSpec([None], tg.float32),)


def _retrace_texts(function, calls, caplog):
    """The first warning on the "tracegraph" logger, the ERTL message and the report of
    `function` (None where there is none) after `calls(function)`."""
    limit = None
    with caplog.at_level(logging.WARNING, logger="tracegraph"):
        try:
            calls(function)
        except tg.errors.RetracingLimitError as e:
            limit = str(e)
    warnings = [r.getMessage() for r in caplog.records if r.name == "tracegraph"]
    caplog.clear()
    report = function and json.loads(function.experimental_retracing_report())
    return (warnings[0] if warnings else None), limit, report


def _decorated(code, body):
    """`code` (a printed "@tg.function(...)" line) pasted above `def g(x): return body(x)`."""
    namespace = {"tg": tg, "body": body}
    exec(code + "\ndef g(x):\n    return body(x)\n", namespace)  # pylint: disable=exec-used
    return namespace["g"]


def test_limit_message_and_report_fixes_are_pasteable_python(caplog):
    f = tg.function(lambda x: x * 2, experimental_max_traces=6)
    warning, limit, report = _retrace_texts(f, lambda g: [g(tg.ones([n])) for n in range(1, 9)], caplog)
    fixes = [line.split(". ", 1)[1].split(" - ")[0] for line in limit.splitlines() if line[:4] in ("  1.", "  2.")]
    assert fixes == ["@tg.function(input_signature=[tg.TensorSpec(shape=[None], dtype=tg.float32)])",
                     "@tg.function(reduce_retracing=True)"]
    assert [w["action"] for w in report["workarounds"][:2]] == fixes
    assert "Fix: " + fixes[0] + " (" in warning and "Other fixes: " + fixes[1] in warning
    for code, most_traces in zip(fixes, (1, 2)):
        g = _decorated(code, lambda x: x * 2)
        for n in range(1, 9):
            np.testing.assert_allclose(g(tg.ones([n])).numpy(), np.full([n], 2.0))
        assert g.experimental_get_tracing_count() <= most_traces, code
    # the dead end named as code runs as written
    assert "  - tg.config.run_functions_eagerly(True): " in limit
    try:
        eval("tg.config.run_functions_eagerly(True)", {"tg": tg})  # pylint: disable=eval-used
        assert tg.config.functions_run_eagerly()
    finally:
        tg.config.run_functions_eagerly(False)


def test_signature_fix_of_several_arguments_scalars_and_ranks_is_pasteable_python(caplog):
    def body(x, s, m):
        return tg.reduce_sum(x) + s + tg.cast(tg.reduce_sum(tg.cast(m, tg.int32)), tg.float64)
    f = tg.function(body)
    shapes = [[2], [2, 3], [1, 1, 1], [4], [5, 2], [3, 3, 3]]

    def calls(g):
        for shape in shapes:
            g(tg.ones(shape, tg.float64), tg.constant(1.0, tg.float64), tg.ones([shape[0]], tg.bool))
    _, _, report = _retrace_texts(f, calls, caplog)
    code = report["workarounds"][0]["action"]
    assert code == ("@tg.function(input_signature=[tg.TensorSpec(shape=None, dtype=tg.float64), "
                    "tg.TensorSpec(shape=[], dtype=tg.float64), tg.TensorSpec(shape=[None], dtype=tg.bool)])")
    namespace = {"tg": tg, "body": body}
    exec(code + "\ndef g(x, s, m):\n    return body(x, s, m)\n", namespace)  # pylint: disable=exec-used
    calls(namespace["g"])
    assert namespace["g"].experimental_get_tracing_count() == 1


def test_literal_fix_is_pasteable_python(caplog):
    f = tg.function(lambda x, step: x + tg.cast(step, tg.float32), experimental_max_traces=5)
    warning, limit, report = _retrace_texts(f, lambda g: [g(tg.constant(1.0), s) for s in range(7)], caplog)
    fix = "pass a tensor instead of the Python int `step` (e.g. tg.constant(step))"
    assert "Fix: " + fix in warning and "  1. " + fix + " - " in limit
    assert report["workarounds"][0]["action"] == fix
    example = fix.split("(e.g. ")[1][:-1]
    g = tg.function(lambda x, step: x + tg.cast(step, tg.float32))
    for step in range(7):
        assert float(g(tg.constant(1.0), eval(example, {"tg": tg, "step": step}))) == 1.0 + step  # pylint: disable=eval-used
    assert g.experimental_get_tracing_count() == 1


def test_one_literal_fix_names_every_varying_python_value(caplog):
    f = tg.function(lambda a, b, x: x, experimental_max_traces=4)
    _, limit, _ = _retrace_texts(f, lambda g: [g(i, str(i), tg.constant(1)) for i in range(6)], caplog)
    assert ("  1. pass tensors instead of the Python int `a` and the Python str `b` (e.g. tg.constant(a)) - "
            in limit), limit
    assert "  2. " not in limit.split("Dead ends:")[0]


@pytest.mark.parametrize("case", ["literal", "flag and shapes", "dtypes", "objects", "loop", "nothing varies"])
def test_retracing_diagnostics_of_a_python_function_name_no_cpp(case, caplog):
    class Thing:
        pass
    made = []

    def new_function():
        made.append(tg.function(lambda x: x))
        return made[-1]
    cases = {
        "literal": (lambda s, x: x, lambda g: [g(i, tg.constant(1)) for i in range(6)]),
        "flag and shapes": (lambda s, x: x, lambda g: [g(n % 2 == 0, tg.ones([n])) for n in range(1, 7)]),
        "dtypes": (lambda s, x: x, lambda g: [g(1, tg.cast(tg.constant([1]), d)) for d in
                                              (tg.int32, tg.float32, tg.int64, tg.float64, tg.uint8, tg.bool)]),
        "objects": (lambda s, x: x, lambda g: [g(Thing(), tg.constant(1)) for _ in range(6)]),
        "loop": (None, lambda g: [new_function()(tg.constant(1)) for _ in range(6)]),
        "nothing varies": (lambda s, x: x[0], lambda g: [g(1, [tg.constant(1)] * n) for n in range(1, 7)]),
    }
    body, calls = cases[case]
    f = tg.function(body, experimental_max_traces=5) if body else None
    warning, limit, report = _retrace_texts(f, calls, caplog)
    f = f or made[-1]  # "loop": the last function made
    report = report or json.loads(f.experimental_retracing_report())
    texts = [warning or "", limit or "", json.dumps(report)] + [t.reason for t in f.trace_history()]
    assert warning or limit
    for text in texts:
        assert "tg::" not in text and "C++" not in text and "FunctionOptions" not in text, text


# ---- threads ---------------------------------------------------------------------------------

def test_threads_call_one_function():
    f = tg.function(lambda x: tg.reduce_sum(x * 2))
    x = tg.ones([100])
    errors = []

    def work():
        try:
            for _ in range(200):
                assert float(f(x)) == 200.0
        except Exception as e:  # pylint: disable=broad-except
            errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert f.experimental_get_tracing_count() == 1


def test_python_results_are_returned_as_tensors():
    # TF converts what a traced body returns (func_graph's convert): numbers, strings and NumPy
    # values become tensors inside tuples, namedtuples, lists and dicts; None and objects stay.
    Pair = collections.namedtuple("Pair", "a b")
    marker = object()

    @tg.function
    def f(x):
        return (1, 2.5, True, "s", np.float64(0.5), np.arange(3, dtype=np.int64), None, marker,
                Pair(x, 7), [3], collections.OrderedDict(k=4), 2 ** 70)
    for _ in range(2):  # the trace, then the cached call
        out = f(tg.constant(1))
        assert [repr(v) for v in out[:4]] == [
            "<tg.Tensor: shape=(), dtype=int32, numpy=1>", "<tg.Tensor: shape=(), dtype=float32, numpy=2.5>",
            "<tg.Tensor: shape=(), dtype=bool, numpy=True>", "<tg.Tensor: shape=(), dtype=string, numpy=b's'>"]
        assert out[4].dtype == tg.float64 and out[5].dtype == tg.int64 and out[5].shape == (3,)
        assert out[6] is None and out[7] is marker
        assert type(out[8]) is Pair and int(out[8].b) == 7 and tg.is_tensor(out[8].b)
        assert type(out[9]) is list and tg.is_tensor(out[9][0])
        assert type(out[10]) is collections.OrderedDict and int(out[10]["k"]) == 4
        assert out[11] == 2 ** 70 and type(out[11]) is int  # no dtype holds it: the value itself
    assert f.experimental_get_tracing_count() == 1
    tg.config.run_functions_eagerly(True)
    try:
        assert f(tg.constant(1))[0] == 1 and type(f(tg.constant(1))[0]) is int  # eager: as returned
    finally:
        tg.config.run_functions_eagerly(False)


def test_tf_print_writes_tensors_as_tensorflow(capsys):
    # tensorflow/python/kernel_tests/logging_ops_test.py's PrintV2Test, on stdout here.
    ten = tg.range(10)
    tg.print(ten, ten * 10)
    tg.print(ten, summarize=1)
    tg.print(ten, summarize=-1)
    tg.print(tg.constant(43.5), tg.constant([0.3, 12.4, -16.1]), tg.constant([True, False]))
    tg.print("first:", ten, {"small": tg.constant([0.3, 12.4, -16.1]), "Big": ten * 10}, 10)

    @tg.function
    def f(x):
        tg.print(x, summarize=2)
        return x
    f(tg.range(10))
    assert capsys.readouterr().out == (
        "[0 1 2 ... 7 8 9] [0 10 20 ... 70 80 90]\n"
        "[0 ... 9]\n"
        "[0 1 2 3 4 5 6 7 8 9]\n"
        "43.5 [0.3 12.4 -16.1] [1 0]\n"
        "first: [0 1 2 ... 7 8 9] {'Big': [0 10 20 ... 70 80 90], 'small': [0.3 12.4 -16.1]} 10\n"
        "[0 1 ... 8 9]\n")
    with pytest.raises(ValueError, match="summarize"):
        tg.print(ten, summarize=-2)
    # Text of any content stays text, next to tensors or inside a structure around them.
    tg.print("a\x00b", ["0\x001\x00", ten], tg.constant(1))
    assert capsys.readouterr().out == "a\x00b ['0\\x001\\x00', [0 1 2 ... 7 8 9]] 1\n"
    tg.print(ten, ten * 10, sep="<separator>", end="<customend>")
    tg.print("{}6", {"{}": ten * 10}, [ten * 2, "x"], 23, [23, 5], {"6": 12})
    assert capsys.readouterr().out == (
        "[0 1 2 ... 7 8 9]<separator>[0 10 20 ... 70 80 90]<customend>"
        "{}6 {'{}': [0 10 20 ... 70 80 90]} [[0 2 4 ... 14 16 18], 'x'] 23 [23, 5] {'6': 12}\n")
