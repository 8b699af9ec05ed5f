"""AutoGraph and the control flow under it: tg.cond, tg.while_loop, tg.TensorArray, and Python
`if` / `while` / `for` / `break` / `continue` / `return` converted by tg.function.

Ported (the scenarios, in tracegraph's words) from TensorFlow's AutoGraph reference tests:
- tensorflow/python/autograph/tests/loop_control_flow_test.py: break / continue / return in
  single and nested for / while loops over Python values and tensors, each compared with the
  same Python run eagerly;
- tensorflow/python/autograph/tests/loop_with_variable_type_illegal_cases_test.py: a loop
  variable changing dtype, shape or structure; a while condition turning from Python to tensor;
- the tests cond_basic, early_return, nested_control_flow, logical_expression, basic_ifexp,
  call_to_user_function, call_to_print_function, loop_basic, loop_scoping and
  loop_created_variables (a variable first assigned in a loop), each a *_test module of that
  folder;
- the rules of tensorflow/python/autograph/g3doc/reference/control_flow.md: both branches traced,
  Python values modified in tensor control flow become tensors, undefined values, "A value must
  also be returned from the else branch", Python loops with a tensor-dependent break.

Skipped, with the reason:
- tf.data datasets and distributed datasets as loop iterables: tracegraph has no tf.data;
- tf.autograph.experimental.set_loop_options (shape invariants inside a converted loop) and
  compound symbols (`a.b` / `a[i]` as loop variables): not converted (docs/python.md);
- TF's "must iterate at least once to initialize" error for a `return` in a tensor loop that runs
  zero times: tracegraph types the return value by tracing the body once and starts it at zeros,
  so the function returns what Python returns (the tests below assert that);
- the tests assertion (tf.debugging.assert_* in graphs), ext_slice, type_annotations and
  generator: the ops or features are not in tracegraph (generators run unconverted);
- the test basic_list (Python lists turned into TensorLists by AutoGraph's list converter): a
  list appended in a tensor loop is an error here, as in TF 2 without that converter - use
  tg.TensorArray.
"""
import gc
import inspect
import logging
import weakref

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tracegraph as tg


def value_of(x):
    """A comparable Python / NumPy form of a function's result."""
    if isinstance(x, tg.Tensor):
        return x.numpy().tolist()
    if isinstance(x, (list, tuple)):
        return type(x)(value_of(v) for v in x)
    return x


def assert_matches_eager(target, *args):
    """The converted, traced function returns what the plain Python function returns eagerly."""
    eager = target(*args)
    traced = tg.function(target)(*args)
    assert value_of(traced) == value_of(eager), (target.__name__, args, value_of(traced), value_of(eager))


def line_of(fn, text):
    """The file line of the first line of fn's source containing text."""
    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if text in line:
            return start + i
    raise AssertionError(text)


# ---- loops with break / continue / return (loop_control_flow_test) ---------------------------------

def skip_odd_for(items):
    total = 0
    for v in items:
        if v % 2 > 0:
            continue
        total += v
    return total


def stop_at_odd_for(items):
    total = 0
    for v in items:
        if v % 2 > 0:
            break
        total += v
    return total


def return_first_for(items):
    total = 0
    for v in items:
        total += v
        return total
    return total


def return_either_for(items):
    total = 0
    for v in items:
        total += v
        if v % 2 > 0:
            return total
        else:
            return -total
    return total


def skip_odd_while(n):
    total = 0
    while n > 0:
        n -= 1
        if n % 2 > 0:
            continue
        total += n
    return total


def stop_at_odd_while(n):
    total = 0
    while n > 0:
        n -= 1
        if n % 2 > 0:
            break
        total += n
    return total


def two_breaks_while(n):
    acc = 1
    i = 0
    while i < n:
        i += 1
        if i > 10 * n:
            break
        if i == n:
            break
        acc = acc * 10 + i
    return i, acc


def break_then_cond_while(n):
    while n > 0:
        if n == 2:
            break
        if n > 0:
            n -= 1
    return n


def return_first_while(n):
    total = 0
    while n > 0:
        n -= 1
        total += n
        return total
    return total


def return_either_while(n):
    total = 0
    while n > 0:
        n -= 1
        total += n
        if n % 2 > 0:
            return total
        else:
            return -total
    return total


def skip_odd_inner_for(rows):
    total = 0
    for row in rows:
        for v in row:
            if v % 2 > 0:
                continue
            total += v
    return total


def stop_at_odd_inner_for(rows):
    total = 0
    for row in rows:
        for v in row:
            if v % 2 > 0:
                break
            total += v
    return total


def break_or_continue_inner_for(rows):
    total = 0
    for row in rows:
        for v in row:
            if v % 2 > 0:
                break
            else:
                continue
            total += v  # pylint: disable=unreachable
    return total


def skip_inner_while(n, m):
    total = 0
    while n > 0:
        n -= 1
        while m > 0:
            m -= 1
            if (n + m) % 2 > 0:
                continue
            total += n + m
    return total


def stop_inner_while(n, m):
    total = 0
    while n > 0:
        n -= 1
        while m > 0:
            m -= 1
            if (n + m) % 2 == 0:
                break
            total += n + m
    return total


def int_tensor(v):
    return tg.constant(v, dtype=tg.int32)


@pytest.mark.parametrize("items", [[], [1], [1, 2], [1, 2, 3], [2, 4, 5, 6]])
@pytest.mark.parametrize("kind", [list, int_tensor])
@pytest.mark.parametrize("target", [skip_odd_for, stop_at_odd_for, return_first_for, return_either_for])
def test_single_for_matches_python(items, kind, target):
    assert_matches_eager(target, kind(items))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("kind", [int, int_tensor])
@pytest.mark.parametrize("target", [skip_odd_while, stop_at_odd_while, two_breaks_while, break_then_cond_while,
                                    return_first_while, return_either_while])
def test_single_while_matches_python(n, kind, target):
    assert_matches_eager(target, kind(n))


@pytest.mark.parametrize("rows", [[[], []], [[1], [2]], [[1, 2], [3, 4]], [[2, 4, 5], [6, 1, 8]]])
@pytest.mark.parametrize("kind", [list, int_tensor, lambda rows: [int_tensor(r) for r in rows]])
@pytest.mark.parametrize("target", [skip_odd_inner_for, stop_at_odd_inner_for, break_or_continue_inner_for])
def test_nested_for_matches_python(rows, kind, target):
    assert_matches_eager(target, kind(rows))


@pytest.mark.parametrize("n", [0, 1, 3])
@pytest.mark.parametrize("m", [0, 2, 4])
@pytest.mark.parametrize("kinds", [(int, int), (int_tensor, int), (int, int_tensor), (int_tensor, int_tensor)])
@pytest.mark.parametrize("target", [skip_inner_while, stop_inner_while])
def test_nested_while_matches_python(n, m, kinds, target):
    assert_matches_eager(target, kinds[0](n), kinds[1](m))


def test_tensor_loops_are_one_while_node_and_trace_their_body_once():
    traces = []

    def count_down(n):
        total = 0
        while n > 0:
            traces.append("body")
            n -= 1
            total += n
        return total
    f = tg.function(count_down)
    assert int(f(tg.constant(5))) == 10
    assert int(f(tg.constant(50))) == 1225  # same trace: the loop runs in the graph
    assert traces == ["body"]
    ops = [n.op for n in f.get_concrete_function(tg.constant(1)).graph.as_graph_def().node]
    assert ops.count("while") == 1, ops


def test_python_loop_unrolls():
    def f(x):
        for i in range(3):
            x = x + i
        return x
    g = tg.function(f).get_concrete_function(tg.constant(1)).graph
    assert [n.op for n in g.as_graph_def().node].count("while") == 0
    assert int(tg.function(f)(tg.constant(1))) == 4


# ---- conditionals (cond_basic_test, early_return_test, nested_control_flow_test) -------------------

def three_way(x):
    if x > 0:
        y = 1
    elif x < 0:
        y = -1
    else:
        y = 0
    return y


def early_return(x):
    if x > 10:
        return x * 2
    x = x + 1
    if x > 5:
        return x
    return -x


def nested_if_in_loop(n):
    evens, odds = 0, 0
    for i in tg.range(n):
        if i % 2 == 0:
            if i > 2:
                evens += i
        else:
            odds += i
    return evens, odds


def if_in_python_loop(x):
    for k in [1, 2, 3]:
        if x > k:
            x = x - k
        else:
            x = x + k
    return x


@pytest.mark.parametrize("x", [-3, 0, 4])
@pytest.mark.parametrize("kind", [int, int_tensor])
def test_if_elif_else_matches_python(x, kind):
    assert_matches_eager(three_way, kind(x))


@pytest.mark.parametrize("x", [-1, 3, 5, 12])
@pytest.mark.parametrize("kind", [int, int_tensor])
def test_early_return_matches_python(x, kind):
    assert_matches_eager(early_return, kind(x))


@pytest.mark.parametrize("n", [0, 1, 6])
def test_nested_control_flow_matches_python(n):
    assert_matches_eager(nested_if_in_loop, tg.constant(n))


@pytest.mark.parametrize("x", [-4, 0, 7])
def test_if_in_python_loop_matches_python(x):
    assert_matches_eager(if_in_python_loop, tg.constant(x))


def test_both_branches_are_traced_and_print_runs_while_tracing(capsys):
    @tg.function
    def f(x):
        print("before if")
        if x > 0:
            print("true branch")
            tg.print("ran true")
        else:
            print("false branch")
            tg.print("ran false")
        print("after if")
        return x
    f(tg.constant(1))
    assert capsys.readouterr().out == "before if\ntrue branch\nfalse branch\nafter if\nran true\n"
    f(tg.constant(-1))
    assert capsys.readouterr().out == "ran false\n"


def test_python_condition_runs_one_branch(capsys):
    @tg.function
    def f(x, flag):
        if flag:
            print("true branch")
            x = x + 1
        else:
            print("false branch")
        return x
    assert int(f(tg.constant(1), True)) == 2
    assert capsys.readouterr().out == "true branch\n"


def test_python_values_modified_in_tensor_cond_become_tensors():
    @tg.function
    def f(x):
        i = 0
        if x > 0:
            i = 1
        return i
    out = f(tg.constant(3))
    assert isinstance(out, tg.Tensor) and out.dtype == tg.int32 and int(out) == 1
    assert int(f(tg.constant(-3))) == 0


def test_branch_locals_are_not_outputs():
    @tg.function
    def f(x):
        if x > 0:
            scratch = tg.constant([1.0, 2.0])  # used only here: different types per branch are fine
            x = x + tg.reduce_sum(scratch)
        else:
            scratch = "unused"
            x = x - 1.0
        return x
    assert float(f(tg.constant(1.0))) == 4.0
    assert float(f(tg.constant(-1.0))) == -2.0


def test_structures_and_none_through_cond():
    @tg.function
    def f(x):
        pair = (x, [x])
        extra = None
        if x > 0:
            pair = (x * 2, [x * 3])
        return pair, extra
    (a, (b,)), extra = f(tg.constant(2))
    assert (int(a), int(b), extra) == (4, 6, None)


# ---- and / or / not / ternary (logical_expression_test, basic_ifexp_test) --------------------------

def logic(x, y):
    a = x > 0 and y > 0
    b = x > 0 or y > 0
    c = not x > 0
    return a, b, c


def ternary(x):
    return x * 2 if x > 0 else -x


def lazy_and(x, items):
    # The right side runs only when the left holds (an index error otherwise).
    return len(items) > 0 and items[0] > x


@pytest.mark.parametrize("x,y", [(1, 1), (1, -1), (-1, 1), (-1, -1)])
def test_logical_expressions_match_python(x, y):
    assert_matches_eager(logic, tg.constant(x), tg.constant(y))
    assert_matches_eager(logic, x, y)


@pytest.mark.parametrize("x", [-2, 3])
def test_conditional_expression_matches_python(x):
    assert_matches_eager(ternary, tg.constant(x))


def test_and_is_lazy():
    # The Python False (the right side never ran) is returned as a tensor, as TF's.
    assert repr(tg.function(lazy_and)(tg.constant(1), [])) == "<tg.Tensor: shape=(), dtype=bool, numpy=False>"
    assert bool(tg.function(lazy_and)(tg.constant(1), [tg.constant(3)]))


# ---- loops over tensors, tg.range and TensorArrays (loop_basic_test, loop_scoping_test) ------------

def sum_rows(m):
    total = tg.zeros([2])
    for row in m:
        total += row
    return total


def squares(n):
    ta = tg.TensorArray(tg.int32, size=n)
    for i in tg.range(n):
        ta = ta.write(i, i * i)
    return ta.stack()


def last_value(n):
    for i in tg.range(n):
        last = i * 3  # first assigned in the loop, used after it
    return last


def running_max(xs):
    best = xs[0]
    for x in xs:
        if x > best:
            best = x
    return best


def test_for_over_tensor_rows():
    m = tg.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    np.testing.assert_allclose(tg.function(sum_rows)(m).numpy(), [9.0, 12.0])


def test_for_over_tensor_of_unknown_length():
    f = tg.function(sum_rows, input_signature=[tg.TensorSpec([None, 2], tg.float32)])
    np.testing.assert_allclose(f(tg.ones([4, 2])).numpy(), [4.0, 4.0])
    np.testing.assert_allclose(f(tg.ones([0, 2])).numpy(), [0.0, 0.0])


def test_tensor_array_in_converted_loop():
    f = tg.function(squares)
    np.testing.assert_array_equal(f(tg.constant(5)).numpy(), [0, 1, 4, 9, 16])
    np.testing.assert_array_equal(f(tg.constant(2)).numpy(), [0, 1])
    assert f.experimental_get_tracing_count() == 1


def test_variable_first_assigned_in_loop():
    assert int(tg.function(last_value)(tg.constant(4))) == 9


@pytest.mark.parametrize("xs", [[3, 1, 4, 1, 5], [9, 2], [7]])
def test_running_max_matches_python(xs):
    assert_matches_eager(running_max, tg.constant(xs))


def test_loop_scoping_iterate_is_local_to_the_loop():
    @tg.function
    def f(n):
        total = tg.constant(0)
        for i in tg.range(n):
            j = i * 2  # local to an iteration
            total += j
        return total
    assert int(f(tg.constant(4))) == 12


# ---- calls (call_to_user_function_test, call_to_print_function_test) -------------------------------

def clamp_negative(x):
    if x < 0:
        return tg.zeros_like(x)
    return x


class Accumulator:
    def __init__(self, start):
        self.start = start

    def add_while_positive(self, n):
        total = self.start
        while n > 0:
            total += n
            n -= 1
        return total


def test_user_functions_called_from_a_converted_function_are_converted():
    @tg.function
    def f(x):
        return clamp_negative(x) + 1
    assert int(f(tg.constant(-5))) == 1
    assert int(f(tg.constant(5))) == 6


def test_methods_are_converted():
    acc = Accumulator(tg.constant(100))

    @tg.function
    def f(n):
        return acc.add_while_positive(n)
    assert int(f(tg.constant(3))) == 106


def test_tg_function_methods_are_converted():
    class Gate(tg.Module):
        def __init__(self):
            super().__init__()
            self.opened = tg.Variable(0)

        @tg.function
        def __call__(self, x):
            if x > 0:
                self.opened.assign_add(1)
            return self.opened.read_value()

    g = Gate()
    assert [int(g(tg.constant(v))) for v in (1, -1, 2)] == [1, 1, 2]


def test_nested_functions_are_converted():
    @tg.function
    def f(x):
        def absolute(y):
            if y < 0:
                return -y
            return y
        return absolute(x) * 10
    assert int(f(tg.constant(-4))) == 40


def test_super_in_converted_method():
    class Base:
        def scale(self, x):
            return x * 2

    class Child(Base):
        def scale(self, x):
            if x > 0:
                x = super().scale(x)
            return x

    child = Child()
    f = tg.function(lambda x: child.scale(x))
    assert int(f(tg.constant(3))) == 6
    assert int(f(tg.constant(-3))) == -3


def test_library_code_is_not_converted():
    from tracegraph.autograph import _transform
    assert _transform.call_target(np.sum) is np.sum
    assert _transform.call_target(tg.reduce_sum) is tg.reduce_sum
    assert _transform.call_target(print) is print
    assert _transform.call_target(clamp_negative) is not clamp_negative


def test_print_stays_python(capsys):
    @tg.function
    def f(n):
        for i in tg.range(n):
            print("tracing the body")
            tg.print("i =", i)
    f(tg.constant(3))
    assert capsys.readouterr().out == "tracing the body\ni = 0\ni = 1\ni = 2\n"


def test_python_function_keeps_the_original_and_autograph_false_turns_it_off():
    def f(x):
        if x > 0:
            return x
        return -x
    converted = tg.function(f)
    assert converted.python_function is f
    assert int(converted(tg.constant(-2))) == 2
    plain = tg.function(f, autograph=False)
    with pytest.raises(TypeError, match="(?s)symbolic tg.Tensor as a Python bool.*AutoGraph"):
        plain(tg.constant(-2))  # a symbolic tensor used as a Python bool: the message is Python's


def test_to_code_shows_the_converted_source():
    def f(x):
        while x > 0:
            x -= 1
        return x
    code = tg.autograph.to_code(f)
    assert "ag__.while_stmt(" in code and "def loop_body_" in code
    assert int(tg.autograph.to_graph(f)(3)) == 0  # plain Python values still run as Python


def test_functions_without_source_run_unconverted_with_a_warning(caplog):
    namespace = {}
    exec("def made(x):\n    return x + 1\n", namespace)  # pylint: disable=exec-used
    with caplog.at_level(logging.WARNING, logger="tracegraph"):
        f = tg.function(namespace["made"])
    assert int(f(tg.constant(1))) == 2
    assert "could not transform" in caplog.text


def test_do_not_convert():
    @tg.autograph.experimental.do_not_convert
    def raw(x):
        if x > 0:
            return x
        return -x

    @tg.function
    def f(x):
        return raw(x)
    with pytest.raises(TypeError):
        f(tg.constant(1))


def test_recursion_through_tensor_condition_raises():
    @tg.function
    def countdown(n):
        if n > 0:
            return countdown(n - 1)
        return 0
    with pytest.raises(Exception) as info:
        countdown(tg.constant(3))
    assert "recurs" in str(info.value).lower() or "called itself" in str(info.value)


# ---- errors that name the user's line (loop_with_variable_type_illegal_cases_test) ------------------

def cond_one_branch(x):
    if x > 0:
        y = x
    return y


def cond_dtypes(x):
    if x > 0:
        y = x
    else:
        y = tg.constant(1)
    return y


def cond_structures(x):
    if x > 0:
        y = (x, x)
    else:
        y = x
    return y


def cond_returns_once(x):
    if x > 0:
        return x


def while_dtype():
    n = tg.constant(0, dtype=tg.int32)
    while tg.constant(True):
        n = tg.constant(0, dtype=tg.float32)
    return n


def while_dtype_early_stop():
    n = tg.constant(0, dtype=tg.int32)
    while tg.constant(True):
        n = tg.constant(0, dtype=tg.float32)
        break
    return n


def for_dtype(items):
    n = tg.constant(0, dtype=tg.int32)
    for _ in items:
        n = tg.constant(0, dtype=tg.float32)
    return n


def while_shape():
    t = tg.constant([1])
    while tg.constant(True):
        t = tg.constant([1, 1])
    return t


def for_structure(items):
    s = [tg.constant(0)]
    for _ in items:
        s = s + [tg.constant(0)]
    return s


def while_dict_to_tensor():
    s = {"a": tg.constant(0)}
    while tg.constant(True):
        s = tg.constant(7.0)
    return s


def while_python_then_tensor():
    n = tg.constant(0)
    c = True
    while c:
        c = tg.constant(True)
    return n


def python_loop_tensor_break(x):
    for i in range(10):
        if x > i:
            break
    return x


def undefined_after_loop(n):
    while n > 0:
        n -= 1
        if n > 2:
            seen = n
    return seen


ERROR_CASES = [
    (cond_one_branch, (tg.constant(1.0),), ValueError, "'y' must also be initialized in the else branch",
     "if x > 0"),
    (cond_dtypes, (tg.constant(1.0),), TypeError, "'y' has dtype float32 in the if branch but int32", "if x > 0"),
    (cond_structures, (tg.constant(1.0),), TypeError, "'y' must have the same nested structure", "if x > 0"),
    (cond_returns_once, (tg.constant(1.0),), ValueError, "A value must also be returned from the else branch",
     "if x > 0"),
    (while_dtype, (), TypeError, "'n' has dtype int32 before the loop, but dtype float32 after one iteration",
     "while tg.constant(True)"),
    (while_dtype_early_stop, (), TypeError, "'n' has dtype int32 before the loop, but dtype float32 after",
     "while tg.constant(True)"),
    (for_dtype, (tg.constant([1, 2, 3]),), TypeError, "'n' has dtype int32 before the loop, but dtype float32",
     "for _ in items"),
    (for_dtype, (tg.range(3),), TypeError, "'n' has dtype int32 before the loop, but dtype float32",
     "for _ in items"),
    (while_shape, (), ValueError, "'t' has shape (1,) before the loop, but shape (2,) after one iteration",
     "while tg.constant(True)"),
    (for_structure, (tg.constant([1, 2, 3]),), TypeError, "'s' does not have the same nested structure",
     "for _ in items"),
    (while_dict_to_tensor, (), TypeError, "'s' does not have the same nested structure", "while tg.constant(True)"),
    (while_python_then_tensor, (), NotImplementedError,
     "condition of while loop started as non-Tensor, then changed to Tensor", "while c:"),
    (python_loop_tensor_break, (tg.constant(3),), NotImplementedError,
     "break and return statements which depend on a tensor condition are not supported in Python for loops",
     "for i in range(10)"),
    (undefined_after_loop, (tg.constant(5),), ValueError, "'seen' must be defined before the loop",
     "while n > 0"),
]


@pytest.mark.parametrize("target,args,error,text,statement", ERROR_CASES,
                         ids=[c[0].__name__ + str(i) for i, c in enumerate(ERROR_CASES)])
def test_bad_control_flow_raises_naming_the_users_line(target, args, error, text, statement):
    with pytest.raises(error) as info:
        tg.function(target)(*args)
    message = str(info.value)
    assert text in message, message
    assert f'File "{__file__}", line {line_of(target, statement)}, in {target.__name__}' in message, message


def test_error_inside_a_branch_has_the_users_line_in_its_traceback():
    def f(x):
        if x > 0:
            y = tg.reshape(x, [3])  # a scalar cannot become 3 elements
        else:
            y = tg.reshape(x, [1])
        return y
    with pytest.raises(Exception) as info:
        tg.function(f)(tg.constant(1.0))
    lines = [(entry.path, entry.lineno + 1) for entry in info.traceback]
    assert (__file__, line_of(f, "tg.reshape(x, [3])")) in [(str(p), n) for p, n in lines]


# ---- tg.cond / tg.while_loop / tg.TensorArray called directly --------------------------------------

def test_cond_eager_and_traced():
    x = tg.constant(3.0)
    assert float(tg.cond(x > 0, lambda: x * 2, lambda: -x)) == 6.0
    assert tg.cond(tg.constant(False), lambda: 1, lambda: 2) == 2  # eagerly the branch's value as it is

    @tg.function
    def f(x):
        return tg.cond(x > 0, lambda: {"a": x, "b": (x, x * 2)}, lambda: {"a": -x, "b": (x, x)})
    out = f(tg.constant(2.0))
    assert float(out["a"]) == 2.0 and float(out["b"][1]) == 4.0
    out = f(tg.constant(-2.0))
    assert float(out["a"]) == 2.0 and float(out["b"][1]) == -2.0


def test_cond_errors():
    @tg.function
    def different(x):
        return tg.cond(x > 0, lambda: (x, x), lambda: x)
    with pytest.raises(ValueError, match="same number, type, and overall structure"):
        different(tg.constant(1.0))

    @tg.function
    def dtypes(x):
        return tg.cond(x > 0, lambda: x, lambda: tg.constant(1))
    with pytest.raises(TypeError, match="dtype float32 in true_fn but int32 in false_fn"):
        dtypes(tg.constant(1.0))
    with pytest.raises(tg.errors.InvalidArgumentError, match="scalar"):
        tg.cond(tg.constant([True, False]), lambda: 1, lambda: 2)
    with pytest.raises(TypeError):
        tg.cond(tg.constant(1.0), lambda: 1, lambda: 2)
    with pytest.raises(TypeError, match="callable"):
        tg.cond(tg.constant(True), 1, 2)
    with pytest.raises(TypeError):
        tg.cond("yes", lambda: 1, lambda: 2)


def test_while_loop_eager_and_traced():
    i, total = tg.while_loop(lambda i, t: i < 5, lambda i, t: (i + 1, t + i), (tg.constant(0), tg.constant(0)))
    assert (int(i), int(total)) == (5, 10)
    single = tg.while_loop(lambda x: x < 100, lambda x: x * 2, tg.constant(3))
    assert int(single) == 192

    @tg.function
    def f(n):
        return tg.while_loop(lambda i, acc: i < n, lambda i, acc: (i + 1, {"s": acc["s"] + i}),
                             [0, {"s": tg.constant(0)}])
    i, acc = f(tg.constant(4))
    assert (int(i), int(acc["s"])) == (4, 6)


def test_while_loop_shape_invariants_and_maximum_iterations():
    @tg.function
    def grow(n):
        return tg.while_loop(lambda x: tg.size(x) < n, lambda x: tg.concat([x, x], 0), [tg.ones([1])],
                             shape_invariants=[tg.TensorShape([None])])
    assert grow(tg.constant(5))[0].shape == (8,)

    @tg.function
    def bad_grow(n):
        return tg.while_loop(lambda x: tg.size(x) < n, lambda x: tg.concat([x, x], 0), [tg.ones([1])])
    with pytest.raises(ValueError):
        bad_grow(tg.constant(5))
    capped = tg.function(lambda: tg.while_loop(lambda i: i < 100, lambda i: i + 1, [tg.constant(0)],
                                               maximum_iterations=7))
    assert int(capped()[0]) == 7
    assert int(tg.while_loop(lambda i: i < 100, lambda i: i + 1, [tg.constant(0)], maximum_iterations=3)[0]) == 3


def test_while_loop_errors():
    with pytest.raises(TypeError):
        tg.function(lambda: tg.while_loop(lambda i: i < 3, lambda i: tg.cast(i, tg.float32) + 1,
                                          [tg.constant(0)]))()
    with pytest.raises(TypeError):
        tg.while_loop(lambda i: i < 3, lambda i: (i, i), [tg.constant(0)])
    with pytest.raises(ValueError):
        tg.while_loop(lambda: True, lambda: (), [])
    with pytest.raises(TypeError):
        tg.while_loop(lambda i: i, lambda i: i + 1, [tg.constant(0)])  # an int condition
    with pytest.raises(ValueError):
        tg.while_loop(lambda i: i < 3, lambda i: i + 1, [tg.constant(0)], maximum_iterations=-1)


def test_tensor_array_eager():
    ta = tg.TensorArray(tg.float32, size=3)
    ta.write(0, 1.0)  # eagerly the array is also updated in place, as TF's eager TensorArray
    ta = ta.write(2, [3.0][0])
    np.testing.assert_array_equal(ta.stack().numpy(), [1.0, 0.0, 3.0])
    assert float(ta.read(2)) == 3.0
    assert int(ta.size()) == 3 and ta.dtype == tg.float32
    grown = tg.TensorArray(tg.int32, size=0, dynamic_size=True)
    for i in range(4):
        grown = grown.write(i, i * 10)
    np.testing.assert_array_equal(grown.stack().numpy(), [0, 10, 20, 30])
    np.testing.assert_array_equal(grown.gather([3, 1]).numpy(), [30, 10])
    parts = tg.TensorArray(tg.float32, size=2, element_shape=[2]).unstack(tg.constant([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_array_equal(parts.read(1).numpy(), [3.0, 4.0])
    np.testing.assert_array_equal(parts.concat().numpy(), [1.0, 2.0, 3.0, 4.0])
    scattered = tg.TensorArray(tg.int32, size=3).scatter([2, 0], tg.constant([7, 8]))
    np.testing.assert_array_equal(scattered.stack().numpy(), [8, 0, 7])
    assert scattered.element_shape == tg.TensorShape([])


def test_tensor_array_errors():
    ta = tg.TensorArray(tg.float32, size=2)
    with pytest.raises(Exception) as info:
        ta.write(5, 1.0)
    assert isinstance(info.value, (ValueError, tg.errors.InvalidArgumentError, tg.errors.OutOfRangeError))
    with pytest.raises(Exception):
        ta.read(0)  # nothing written yet
    with pytest.raises((TypeError, ValueError)):
        ta.write(0, tg.constant([1, 2]))  # int32 into a float32 array
    with pytest.raises(ValueError):
        tg.TensorArray(tg.float32)  # no size and not dynamic
    with pytest.raises(ValueError):
        tg.TensorArray(tg.float32, size=-1)


def test_tensor_array_in_tg_while_loop():
    @tg.function
    def f(n):
        ta = tg.TensorArray(tg.float32, size=n)
        _, ta = tg.while_loop(lambda i, ta: i < n, lambda i, ta: (i + 1, ta.write(i, tg.cast(i, tg.float32))),
                              [tg.constant(0), ta])
        return ta.stack()
    np.testing.assert_array_equal(f(tg.constant(3)).numpy(), [0.0, 1.0, 2.0])


# ---- Python semantics kept, gradients, bad input --------------------------------------------------

def test_unassigned_variable_raises_as_in_python():
    @tg.function
    def f(flag):
        if flag:
            y = 1
        return y
    assert f(True) == 1
    with pytest.raises(UnboundLocalError):
        f(False)


def test_global_and_nonlocal_declarations_are_kept():
    hits = []
    state = {"n": 0}

    @tg.function
    def f(x):
        nonlocal state
        for _ in range(2):
            state = {"n": state["n"] + 1}
        if x > 0:
            hits.append("traced")
            x = x + 1
        return x
    assert int(f(tg.constant(1))) == 2
    assert state == {"n": 2} and hits == ["traced"]


def test_loop_else_runs_without_break():
    def f(n):
        i = 0
        while i < n:
            i += 1
            if i == 5:
                break
        else:
            i = i * 10
        return i
    for n in (3, 9):
        assert_matches_eager(f, tg.constant(n))
        assert_matches_eager(f, n)


def test_gradient_through_converted_control_flow():
    x = tg.Variable(2.0)

    @tg.function
    def f():
        with tg.GradientTape() as tape:
            y = x * 1.0
            if x > 0:
                y = y * y
            else:
                y = -y
            i = tg.constant(0)
            while i < 3:
                y = y * 2.0
                i += 1
        return tape.gradient(y, x)
    assert float(f()) == 32.0  # d(8 x^2)/dx at 2


def test_converted_function_does_not_keep_its_original_alive():
    """AutoGraph's cache of converted functions is weak in the original function: a tg.function
    that is dropped frees what its function captures (a model's Variables, say). The converted
    copy once held the original, which kept the cache entry and every model built in a loop."""
    class Captured:
        pass

    def make():
        captured = Captured()

        def body(x):
            return x + 1.0 if captured is not None else x
        f = tg.function(body)
        f(tg.constant(1.0))
        return weakref.ref(captured)

    captured_ref = make()
    gc.collect()
    assert captured_ref() is None


def test_bad_iterables_and_conditions_raise():
    @tg.function
    def scalar(x):
        for v in x:
            x += v
        return x
    with pytest.raises(TypeError, match="scalar"):
        scalar(tg.constant(1))

    @tg.function
    def over_array(n):
        ta = tg.TensorArray(tg.int32, size=2)
        for v in ta:
            n += v
        return n
    with pytest.raises(TypeError, match="TensorArray"):
        over_array(tg.constant(1))

    @tg.function
    def string_condition(s):
        if s:
            return 1
        return 2
    with pytest.raises(TypeError):
        string_condition(tg.constant("yes"))

    @tg.function
    def vector_condition(v):
        while v:
            v = v - 1
        return v
    with pytest.raises((TypeError, ValueError, tg.errors.InvalidArgumentError)):
        vector_condition(tg.constant([1, 2]))


def collatz_steps(n, limit):
    steps = 0
    while n != 1:
        if steps >= limit:
            break
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps, n


def filtered_sum(items, low, high):
    total = 0
    for v in items:
        if v < low:
            continue
        if v > high:
            break
        total += v
    return total


COLLATZ = tg.function(collatz_steps)
FILTERED = tg.function(filtered_sum)


@settings(max_examples=40, deadline=None, database=None)
@given(st.integers(1, 60), st.integers(0, 30))
def test_property_collatz_matches_python(n, limit):
    assert value_of(COLLATZ(tg.constant(n), tg.constant(limit))) == value_of(collatz_steps(n, limit))


@settings(max_examples=40, deadline=None, database=None)
@given(st.lists(st.integers(-20, 20), min_size=1, max_size=12), st.integers(-20, 20), st.integers(-20, 20))
def test_property_filtered_sum_matches_python(items, low, high):
    expected = filtered_sum(items, low, high)
    assert int(FILTERED(tg.constant(items), tg.constant(low), tg.constant(high))) == expected
