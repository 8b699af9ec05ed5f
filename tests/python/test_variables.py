"""tg.Variable, tg.name_scope and tg.init_scope from Python.

What TF's tf.Variable does that applies here: the constructor's arguments (initial_value as a
value or a callable, trainable, name, dtype, shape), names with ':0' under name scopes, assign /
assign_add / assign_sub, read_value / value / numpy, operators and conversions like a tensor, the
repr, ref() for hashing; Variables closed over by or created in a tg.function; Variables passed
to a tg.function (TF's VariableSpec: dtype, shape and aliasing decide the trace; the body reads
and writes the Variable each call passes; such functions save and load); init_scope.

Not here (and why): TF's assign returning an "UnreadVariable" object (tracegraph returns the new
value as a tensor: the C++ assign returns one); validate_shape=False and shapes with None dims
(a tracegraph Variable's shape is fixed by its value: UnimplementedError); constraint=,
synchronization=ON_READ, variable_def= (not supported: UnimplementedError); scatter_* and
sparse_read (no such ops); distribution strategies and devices.
"""
import collections
import copy
import pickle
import subprocess

import numpy as np
import pytest

import tracegraph as tg
from conftest import assert_tensor, tgx_path


# ---- construction ----------------------------------------------------------------------------

def test_values_and_dtypes_as_tf():
    assert tg.Variable(1.0).dtype == tg.float32
    assert tg.Variable(1).dtype == tg.int32
    assert tg.Variable([1, 2]).dtype == tg.int32
    assert tg.Variable(np.zeros(3, np.float64)).dtype == tg.float64
    assert tg.Variable(True).dtype == tg.bool
    assert tg.Variable("abc").dtype == tg.string
    v = tg.Variable(1, dtype=tg.float32)  # a Python int converts to the requested dtype
    assert v.dtype == tg.float32 and v.numpy() == 1.0
    assert_tensor(tg.Variable(lambda: tg.ones([2, 3])).read_value(), np.ones((2, 3), np.float32))
    v = tg.Variable(tg.constant([[1.0, 2.0]]))
    assert v.shape == [1, 2] and v.shape.as_list() == [1, 2] and v.ndim == 2
    assert v.get_shape() == tg.TensorShape([1, 2])


def test_initial_value_from_another_variable_is_a_copy():
    a = tg.Variable([1.0, 2.0])
    b = tg.Variable(a)
    a.assign([5.0, 6.0])
    assert_tensor(b.read_value(), np.array([1.0, 2.0], np.float32))


def test_bad_construction_raises():
    with pytest.raises(ValueError, match="initial_value"):
        tg.Variable()
    with pytest.raises(ValueError, match="initial_value"):
        tg.Variable(None)
    with pytest.raises(TypeError, match="float32"):
        tg.Variable("a", dtype=tg.float32)
    with pytest.raises(TypeError):
        tg.Variable(1.5, dtype=tg.int32)  # TF: a float never becomes an integer
    with pytest.raises(ValueError, match="dtype float64"):
        tg.Variable(tg.constant(1.0), dtype=tg.float64)  # a tensor keeps its dtype
    with pytest.raises(ValueError):
        tg.Variable(object())
    with pytest.raises(ValueError, match="not compatible"):
        tg.Variable([1.0, 2.0], shape=[3])
    with pytest.raises(tg.errors.UnimplementedError, match="fixed|keep the shape"):
        tg.Variable([1.0, 2.0], shape=[None])
    with pytest.raises(tg.errors.UnimplementedError):
        tg.Variable(1.0, validate_shape=False)
    with pytest.raises(tg.errors.UnimplementedError):
        tg.Variable(1.0, constraint=lambda x: x)
    with pytest.raises(TypeError, match="trainable"):
        tg.Variable(1.0, trainable="yes")
    with pytest.raises(TypeError, match="name"):
        tg.Variable(1.0, name=3)
    v = tg.Variable(1.0)
    with pytest.raises(RuntimeError, match="existing Variable"):
        v.__init__(2.0)
    assert v.numpy() == 1.0
    assert tg.Variable([1.0, 2.0], shape=[2]).shape == [2]
    assert tg.Variable([1.0, 2.0], shape=tg.TensorShape([2])).shape == [2]


def test_names_and_name_scopes():
    assert tg.Variable(1.0).name == "Variable:0"  # TF 2 eager: names are not made unique
    assert tg.Variable(1.0).name == "Variable:0"
    assert tg.Variable(1.0, name="w").name == "w:0"
    with tg.name_scope("outer") as scope:
        assert scope == "outer/"
        assert tg.Variable(1.0, name="w").name == "outer/w:0"
        with tg.name_scope("inner") as inner:
            assert inner == "outer/inner/"
            assert tg.Variable(1.0).name == "outer/inner/Variable:0"
        with tg.name_scope("absolute/"):
            assert tg.Variable(1.0, name="b").name == "absolute/b:0"
    assert tg.Variable(1.0, name="w").name == "w:0"
    with pytest.raises(TypeError):
        tg.name_scope(3)


def test_trainable():
    assert tg.Variable(1.0).trainable is True
    assert tg.Variable(1.0, trainable=False).trainable is False


# ---- reading, assigning ----------------------------------------------------------------------

def test_assign_family_returns_the_new_value_and_updates():
    v = tg.Variable([1.0, 2.0])
    assert_tensor(v.assign([3.0, 4.0]), np.array([3.0, 4.0], np.float32))
    assert_tensor(v.assign_add([1.0, 1.0]), np.array([4.0, 5.0], np.float32))
    assert_tensor(v.assign_sub(tg.constant([0.5, 0.5])), np.array([3.5, 4.5], np.float32))
    assert v.assign([0.0, 0.0], read_value=False) is None
    assert_tensor(v.read_value(), np.zeros(2, np.float32))
    assert_tensor(v.value(), np.zeros(2, np.float32))
    i = tg.Variable(1)
    i.assign_add(2)
    assert i.numpy() == 3 and i.dtype == tg.int32


def test_reads_are_snapshots():
    v = tg.Variable([1.0, 2.0])
    before = v.read_value()
    view = np.asarray(before)
    copy_ = v.numpy()
    v.assign([5.0, 6.0])
    assert_tensor(before, np.array([1.0, 2.0], np.float32))
    np.testing.assert_array_equal(view, [1.0, 2.0])
    copy_[0] = 100.0  # numpy() is the caller's copy
    assert_tensor(v.read_value(), np.array([5.0, 6.0], np.float32))


def test_bad_assigns_raise():
    v = tg.Variable([1.0, 2.0])
    with pytest.raises(TypeError, match="float32"):
        v.assign("a")
    with pytest.raises(TypeError, match="None"):
        v.assign(None)
    with pytest.raises(ValueError, match="int32"):
        v.assign(tg.constant([1, 2]))  # as TF: no implicit cast of a tensor
    with pytest.raises(tg.errors.InvalidArgumentError, match="shape"):
        v.assign([1.0, 2.0, 3.0])
    with pytest.raises(tg.errors.InvalidArgumentError, match="shape"):
        v.assign_add([[1.0, 2.0]])
    with pytest.raises(ValueError):
        v.assign_sub(object())
    assert_tensor(v.read_value(), np.array([1.0, 2.0], np.float32))  # unchanged by the failures


def test_repr_in_tf_format():
    assert repr(tg.Variable(1.0)) == "<tg.Variable 'Variable:0' shape=() dtype=float32, numpy=1.0>"
    assert str(tg.Variable(2, name="n")) == "<tg.Variable 'n:0' shape=() dtype=int32, numpy=2>"
    assert repr(tg.Variable([[1.0, 2.0], [3.0, 4.0]], name="w")) == (
        "<tg.Variable 'w:0' shape=(2, 2) dtype=float32, numpy=\n"
        "array([[1., 2.],\n       [3., 4.]], dtype=float32)>")


# ---- a Variable behaves like a tensor ---------------------------------------------------------

def test_operators_read_the_value():
    v = tg.Variable([1.0, 2.0])
    t = tg.constant([10.0, 20.0])
    assert_tensor(v + 1, np.array([2.0, 3.0], np.float32))
    assert_tensor(1 + v, np.array([2.0, 3.0], np.float32))
    assert_tensor(v * v, np.array([1.0, 4.0], np.float32))
    assert_tensor(t - v, np.array([9.0, 18.0], np.float32))
    assert_tensor(v / t, np.array([0.1, 0.1], np.float32))
    assert_tensor(v ** 2, np.array([1.0, 4.0], np.float32))
    assert_tensor(-v, np.array([-1.0, -2.0], np.float32))
    assert_tensor(abs(tg.Variable([-3.0])), np.array([3.0], np.float32))
    assert_tensor(v < 1.5, np.array([True, False]))
    assert_tensor(v == [1.0, 5.0], np.array([True, False]))
    assert_tensor(np.array([1.0, 1.0], np.float32) + v, np.array([2.0, 3.0], np.float32))
    m = tg.Variable([[1.0, 2.0], [3.0, 4.0]])
    assert_tensor(m @ m, np.array([[7.0, 10.0], [15.0, 22.0]], np.float32))
    assert_tensor(v[1], np.float32(2.0))
    assert_tensor(m[:, 0], np.array([1.0, 3.0], np.float32))
    assert len(v) == 2 and [float(x) for x in v] == [1.0, 2.0]
    assert float(tg.Variable(2.5)) == 2.5 and int(tg.Variable(3)) == 3
    assert [10, 20, 30][tg.Variable(1)] == 20
    assert bool(tg.Variable(True)) and not bool(tg.Variable(0.0))
    assert f"{tg.Variable(1.5):.2f}" == "1.50"
    np.testing.assert_array_equal(np.asarray(v), [1.0, 2.0])
    v += 1  # as TF 2: no in-place add; the name now holds a tensor
    assert isinstance(v, tg.Tensor)


def test_ops_take_variables():
    w = tg.Variable([[1.0], [2.0]])
    x = tg.constant([[3.0, 4.0]])
    assert_tensor(tg.matmul(x, w), np.array([[11.0]], np.float32))
    assert_tensor(tg.reduce_sum(w), np.float32(3.0))
    assert_tensor(tg.stack([w, w]), np.array([[[1.0], [2.0]]] * 2, np.float32))
    assert_tensor(tg.convert_to_tensor(w), np.array([[1.0], [2.0]], np.float32))
    assert_tensor(tg.constant([tg.Variable(1.0), tg.Variable(2.0)]), np.array([1.0, 2.0], np.float32))
    with pytest.raises(TypeError, match="int32"):
        tg.constant(tg.Variable(1), dtype=tg.float32)


def test_hashing_and_references():
    a, b = tg.Variable(1.0), tg.Variable(1.0)
    with pytest.raises(TypeError, match="unhashable"):
        hash(a)
    table = {a.ref(): "a", b.ref(): "b"}
    assert table[a.ref()] == "a" and table[b.ref()] == "b"
    assert a.ref().deref() is a
    assert a.experimental_ref() == a.ref() and a.ref() != b.ref()


def test_copies():
    v = tg.Variable([1.0], trainable=False, name="c")
    assert copy.copy(v) is v
    d = copy.deepcopy(v)
    assert d is not v and d.name == "c:0" and d.trainable is False
    d.assign([5.0])
    assert v.numpy()[0] == 1.0
    with pytest.raises(TypeError, match="pickle"):
        pickle.dumps(v)


# ---- inside tg.function ----------------------------------------------------------------------

def test_closed_over_variable_is_read_at_every_call():
    foo = tg.Variable(1)

    @tg.function
    def variable_add():
        return 1 + foo

    assert int(variable_add()) == 2
    foo.assign(100)
    assert int(variable_add()) == 101  # the guide's example
    assert variable_add.experimental_get_tracing_count() == 1


def test_assigns_run_at_every_call():
    counter = tg.Variable(0)

    @tg.function
    def step():
        return counter.assign_add(1)

    assert [int(step()) for _ in range(3)] == [1, 2, 3]
    assert counter.numpy() == 3


def test_variable_created_on_later_trace_raises_singleton_error():
    @tg.function
    def f(x):
        v = tg.Variable(1.0)
        return v + x

    with pytest.raises(ValueError, match="only supports singleton"):
        f(1.0)


def test_variable_created_once_on_first_trace():
    class Count(tg.Module):
        def __init__(self):
            super().__init__()
            self.count = None

        @tg.function
        def __call__(self):
            if self.count is None:
                self.count = tg.Variable(0)
            return self.count.assign_add(1)

    c = Count()
    assert int(c()) == 1 and int(c()) == 2


def test_variables_passed_as_arguments_compute_right():
    @tg.function
    def f(v, x):
        v.assign_add(x)
        return v.read_value() * 2

    a, b = tg.Variable(1.0), tg.Variable(5.0)
    assert float(f(a, 1.0)) == 4.0
    assert float(f(b, 1.0)) == 12.0
    assert float(f(a, 1.0)) == 6.0
    assert a.numpy() == 3.0 and b.numpy() == 6.0


def test_variables_of_one_spec_share_a_trace():
    @tg.function
    def f(v):
        return v * 2

    f(tg.Variable(1.0))
    f(tg.Variable(2.0))
    assert f.experimental_get_tracing_count() == 1
    # Another shape retraces (where the identity type used to compare the two with ==).
    assert float(f(tg.Variable([1.0, 2.0]))[1]) == 4.0
    assert f.experimental_get_tracing_count() == 2


# ---- Variables as arguments of a tg.function (TF's VariableSpec) ---------------------------
# Ported from tensorflow/python/eager/polymorphic_function/polymorphic_function_test.py (testVariableAliasIdInStructuredInputSignature,
# testStructuredSignatureAndMultipleVariables, testVariableRetracingOnDtypeChanges,
# testVariableRetracingDtypeShape, testMultipleInputsWithReducedRetracing) and from the
# guide's rule that a traced function reads and writes the Variable each call passes.

VariableSpec = tg._variables.VariableSpec


def test_aliasing_decides_the_trace_not_which_variables():
    traces = []

    @tg.function
    def f(a, b):
        traces.append(1)
        return a + 10.0 * b

    x, y, z = tg.Variable(1.0), tg.Variable(2.0), tg.Variable(3.0)
    assert float(f(x, y)) == 21.0
    assert float(f(y, x)) == 12.0   # (y, x) is (alias 0, alias 1) like (x, y)
    assert float(f(z, x)) == 13.0
    assert len(traces) == 1
    assert float(f(x, x)) == 11.0   # one Variable twice: alias ids (0, 0), a trace of its own
    assert len(traces) == 2
    assert float(f(z, z)) == 33.0
    assert len(traces) == 2


def test_aliasing_across_nested_arguments():
    @tg.function
    def f(pair, d):
        return pair[0] + 10.0 * pair[1] + 100.0 * d["v"]

    x, y, z = tg.Variable(1.0), tg.Variable(2.0), tg.Variable(3.0)
    assert float(f((x, y), {"v": z})) == 321.0
    assert float(f([y, z], {"v": x})) == 132.0      # a list is another structure: retraces
    assert float(f((z, x), {"v": y})) == 213.0      # same aliasing as the first call
    assert f.experimental_get_tracing_count() == 2
    assert float(f((x, y), {"v": x})) == 121.0      # x twice: d["v"] is alias 0
    assert f.experimental_get_tracing_count() == 3


@pytest.mark.parametrize("reduce_retracing", [False, True])
def test_structured_input_signature_has_alias_ids(reduce_retracing):
    @tg.function(reduce_retracing=reduce_retracing)
    def foo(v1, v2):
        return v1 + v2

    v1, v2 = tg.Variable(1.0), tg.Variable(2.0)
    args, kwargs = foo.get_concrete_function(v1, v1).structured_input_signature
    assert args == (VariableSpec([], alias_id=0), VariableSpec([], alias_id=0)) and kwargs == {}
    args, _ = foo.get_concrete_function(v1, v2).structured_input_signature
    assert args == (VariableSpec([], tg.float32, 0), VariableSpec([], tg.float32, 1))
    assert args[1] != VariableSpec([], tg.float64, 1) and args[1] != VariableSpec([2], alias_id=1)
    assert repr(args[1]) == "VariableSpec(shape=(), dtype=tg.float32, alias_id=1)"
    assert "v2 (POSITIONAL_OR_KEYWORD): VariableSpec(shape=(), dtype=tg.float32, alias_id=1)" in (
        foo.pretty_printed_concrete_signatures())


def test_concrete_function_traced_with_one_variable_twice_refuses_two():
    @tg.function
    def foo(v1, v2):
        return v1 + v2

    v1, v2 = tg.Variable(1.0), tg.Variable(2.0)
    cf = foo.get_concrete_function(v1, v1)
    assert float(cf(v1, v1)) == 2.0
    assert float(cf(v2, v2)) == 4.0
    with pytest.raises(TypeError, match="alias_id"):
        cf(v1, v2)


def test_concrete_function_binds_the_variables_it_is_called_with():
    @tg.function
    def add_to(v, x):
        v.assign_add(x)
        return v.read_value()

    a, b = tg.Variable([1.0, 2.0]), tg.Variable([10.0, 20.0])
    cf = add_to.get_concrete_function(a, tg.TensorSpec([2], tg.float32))
    assert a.numpy().tolist() == [1.0, 2.0]  # tracing ran nothing
    assert cf(b, tg.constant([1.0, 1.0])).numpy().tolist() == [11.0, 21.0]
    assert cf(a, x=tg.constant([1.0, 1.0])).numpy().tolist() == [2.0, 3.0]
    assert b.numpy().tolist() == [11.0, 21.0]
    with pytest.raises(TypeError, match="missing the argument 'v'"):
        cf(x=tg.constant([1.0, 1.0]))
    with pytest.raises(TypeError, match="Can not cast"):
        cf(tg.Variable([1.0, 2.0, 3.0]), tg.constant([1.0, 1.0]))
    with pytest.raises(TypeError, match="takes Variable arguments"):
        cf.inference_fn(tg.constant([1.0, 1.0]))


@pytest.mark.parametrize("reduce_retracing", [False, True])
def test_another_dtype_retraces(reduce_retracing):
    @tg.function(reduce_retracing=reduce_retracing)
    def defined(a, b):
        return a + b

    defined(tg.Variable(0.0), tg.Variable(0.0))
    assert len(defined._concrete_functions()) == 1
    assert int(defined(tg.Variable(0), tg.Variable(1))) == 1
    assert len(defined._concrete_functions()) == 2


def test_another_shape_retraces():
    @tg.function
    def defined(a, b):
        return a + b

    defined(tg.Variable(0.0), tg.Variable(0.0))
    defined(tg.Variable(1.0), tg.Variable(2.0))
    assert defined.experimental_get_tracing_count() == 1
    assert defined(tg.Variable([1.0]), tg.Variable([2.0])).numpy().tolist() == [3.0]
    assert defined(tg.Variable([[1.0]]), tg.Variable([[2.0]])).numpy().tolist() == [[3.0]]
    assert defined.experimental_get_tracing_count() == 3


def test_a_variable_and_a_tensor_of_one_spec_are_different_types():
    @tg.function
    def f(x):
        return x + 1.0

    assert float(f(tg.constant(1.0))) == 2.0
    assert float(f(tg.Variable(2.0))) == 3.0
    assert f.experimental_get_tracing_count() == 2


def test_assign_inside_changes_the_callers_variable():
    @tg.function
    def step(v, delta):
        v.assign_add(delta)
        return v.read_value()

    a, b = tg.Variable(1.0), tg.Variable(100.0)
    assert float(step(a, 1.0)) == 2.0
    assert float(step(b, 1.0)) == 101.0
    assert float(step(a, 1.0)) == 3.0
    assert step.experimental_get_tracing_count() == 1
    assert a.numpy() == 3.0 and b.numpy() == 101.0


def test_assigns_through_aliased_arguments_reach_one_variable():
    @tg.function
    def twice(p, q):
        p.assign_add(1.0)
        q.assign_add(10.0)
        return p.read_value() + q.read_value()

    x, y = tg.Variable(0.0), tg.Variable(0.0)
    assert float(twice(x, y)) == 11.0
    assert x.numpy() == 1.0 and y.numpy() == 10.0
    assert float(twice(x, x)) == 24.0   # x: 1 -> 2 -> 12; both reads see 12
    assert x.numpy() == 12.0


def test_assigns_reach_variables_nested_in_structures():
    Pair = collections.namedtuple("Pair", ["first", "second"])

    @tg.function
    def bump(state):
        for v in state["vars"]:
            v.assign_add(1.0)
        state["pair"].second.assign(state["pair"].first.read_value() * 2.0)
        return tg.constant(0.0)

    a, b, c, d = (tg.Variable(float(i)) for i in range(4))
    bump({"vars": [a, b], "pair": Pair(c, d)})
    assert [v.numpy() for v in (a, b, c, d)] == [1.0, 2.0, 2.0, 4.0]
    bump({"vars": [c, d], "pair": Pair(a, b)})
    assert [v.numpy() for v in (a, b, c, d)] == [1.0, 2.0, 3.0, 5.0]
    assert bump.experimental_get_tracing_count() == 1


def test_the_body_sees_a_variable_one_per_aliased_argument():
    seen = []

    @tg.function
    def f(p, q):
        seen.append((p, q))
        return p + q

    x = tg.Variable([1.0, 2.0], name="x", trainable=False)
    f(x, x)
    p, q = seen[0]
    assert isinstance(p, tg.Variable) and p is q
    assert p.shape == [2] and p.dtype == tg.float32
    assert not p.trainable
    assert p is not x  # the trace's Variable parameter, bound to x by each call


def test_returning_the_variable_argument_returns_its_value():
    @tg.function
    def f(t, v, w):
        v.assign_add(1.0)
        return [t, v, w]

    t, v, w = tg.constant(5.0), tg.Variable(1.0), tg.Variable(2.0)
    out = f(t, v, w)
    assert [type(o) for o in out] == [tg.Tensor] * 3
    assert [float(o) for o in out] == [5.0, 2.0, 2.0]
    out = f(t, w, v)
    assert [float(o) for o in out] == [5.0, 3.0, 2.0]


def test_a_variable_argument_passes_on_to_another_function():
    @tg.function
    def inner(v):
        return v.assign_add(1.0)

    @tg.function
    def outer(v, w):
        inner(v)
        return inner(w)

    a, b = tg.Variable(0.0), tg.Variable(10.0)
    assert float(outer(a, b)) == 11.0
    assert float(outer(b, a)) == 2.0
    assert a.numpy() == 2.0 and b.numpy() == 12.0
    assert outer.experimental_get_tracing_count() == 1


def test_gradient_of_a_variable_argument():
    @tg.function
    def grad(w, x):
        with tg.GradientTape() as tape:
            y = w * w * x
        return tape.gradient(y, w)

    assert float(grad(tg.Variable(3.0), tg.constant(2.0))) == 12.0
    assert float(grad(tg.Variable(4.0), tg.constant(2.0))) == 16.0
    assert grad.experimental_get_tracing_count() == 1


def test_cached_calls_stay_right_around_variable_calls():
    @tg.function
    def f(x, s):
        return x * s

    t = tg.constant(2.0)
    assert float(f(t, 3.0)) == 6.0
    assert float(f(t, 3.0)) == 6.0          # the cached path
    v = tg.Variable(5.0)
    assert float(f(v, 3.0)) == 15.0         # a Variable: the general path, its own trace
    v.assign(7.0)
    assert float(f(v, 3.0)) == 21.0         # read at the call, not baked in
    assert float(f(tg.Variable(1.0), 3.0)) == 3.0
    assert float(f(t, 3.0)) == 6.0          # the cached path again
    assert f.experimental_get_tracing_count() == 2


def test_variable_arguments_run_eagerly_too():
    @tg.function
    def f(v):
        return v.assign_add(1.0)

    v = tg.Variable(1.0)
    tg.config.run_functions_eagerly(True)
    try:
        assert float(f(v)) == 2.0
    finally:
        tg.config.run_functions_eagerly(False)
    assert float(f(v)) == 3.0 and v.numpy() == 3.0


def test_a_function_with_variable_arguments_saves_and_loads(tmp_path):
    @tg.function
    def step(v, x):
        v.assign_add(x)
        return v.read_value() * 2.0

    a = tg.Variable(1.0)
    assert float(step(a, tg.constant(1.0))) == 4.0
    tg.saved_model.save(step, tmp_path / "step.tgx")
    loaded = tg.saved_model.load(tmp_path / "step.tgx")
    assert "VariableSpec(shape=(), dtype=tg.float32, alias_id=0)" in loaded.signatures[0]
    b = tg.Variable(5.0)
    assert float(loaded(b, tg.constant(2.0))) == 14.0
    assert b.numpy() == 7.0 and a.numpy() == 2.0
    with pytest.raises(TypeError):
        loaded(tg.Variable([1.0, 2.0]), tg.constant(2.0))
    # C++ reads the file (tg::load in the tgx tool): a Variable parameter, read and written.
    shown = subprocess.run([str(tgx_path()), "inspect", str(tmp_path / "step.tgx")], capture_output=True,
                           text=True, timeout=120, check=True).stdout
    assert "v: VariableSpec(shape=(), dtype=tg.float32, alias_id=0)" in shown
    assert "writes: argument Variable 0" in shown


def test_saving_still_refuses_identity_objects_and_says_variables_may_be_passed(tmp_path):
    class Config:
        pass

    @tg.function
    def f(v, config):
        del config
        return v * 2.0

    config = Config()
    f(tg.Variable(1.0), config)
    with pytest.raises(ValueError, match="matched by identity") as info:
        tg.saved_model.save(f, tmp_path / "f.tgx")
    assert "tg.Variable can be passed" in str(info.value)


# ---- tg.init_scope ---------------------------------------------------------------------------

def test_init_scope_lifts_the_increment_out_of_the_function():
    class Model(tg.Module):
        def __init__(self):
            super().__init__()
            self.v = tg.Variable(0)
            self.counter = 0

        @tg.function
        def __call__(self):
            if self.counter == 0:
                with tg.init_scope():
                    self.counter += 1
                    self.v.assign_add(1)
            return self.v.read_value()

    m = Model()
    assert [int(m()) for _ in range(3)] == [1, 1, 1]  # the guide: 1, 1, 1 (not 1, 2, 3)


def test_without_init_scope_the_increment_is_in_the_graph():
    class Model(tg.Module):
        def __init__(self):
            super().__init__()
            self.v = tg.Variable(0)
            self.counter = 0

        @tg.function
        def __call__(self):
            if self.counter == 0:
                self.counter += 1
                self.v.assign_add(1)
            return self.v.read_value()

    m = Model()
    assert [int(m()) for _ in range(3)] == [1, 2, 3]


def test_init_scope_runs_eagerly_inside_a_trace_and_may_create_variables():
    made = []

    @tg.function
    def f(x):
        with tg.init_scope():
            value = tg.constant(2.0) * 3.0
            assert not value._is_symbolic
            made.append(tg.Variable(value))
        return x * made[-1]

    assert float(f(1.0)) == 6.0
    assert float(f(2.0)) == 12.0  # a later trace (new literal) creates one again: allowed there


def test_init_scope_cannot_use_the_trace_tensors():
    @tg.function
    def f(x):
        with tg.init_scope():
            return x + 1.0

    with pytest.raises((tg.errors.OutOfScopeError, TypeError, ValueError)):
        f(tg.constant(1.0))


def test_init_scope_pauses_tapes():
    x = tg.constant(3.0)
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
        with tg.init_scope():
            z = x * x
    assert float(tape.gradient(y, x)) == 6.0
    assert tape.gradient(z, x) is None
