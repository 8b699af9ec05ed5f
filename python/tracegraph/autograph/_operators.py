"""AutoGraph's runtime: what converted code calls (`ag__.if_stmt`, `ag__.while_stmt`, ...).

Each statement the transform rewrote (tracegraph/autograph/_transform.py) arrives here as
functions - the branches or the loop body, which read and write the function's variables through
`nonlocal`, and get_state / set_state, which read and write the variables the statement carries.
The operators decide when the statement runs: a condition or iterable that is a tg.Tensor in a
trace makes a cond / while node (both branches, or the body once, traced); anything else runs as
the Python statement it was.
"""
import numbers
import threading

import numpy as np

from tracegraph import _core
from tracegraph import _control_flow as cf
from tracegraph._tensor import Tensor

__all__ = ["Undefined", "UndefinedReturnValue", "ld", "is_undefined", "retval", "if_stmt", "while_stmt",
           "for_stmt", "and_", "or_", "not_", "if_exp", "converted_call"]


# ---- undefined values ------------------------------------------------------------------------------

class Undefined:
    """The value of a variable that has no value yet at this point of the function."""

    _tg_undefined = True
    __slots__ = ("symbol_name",)

    def __init__(self, symbol_name):
        self.symbol_name = symbol_name

    def __repr__(self):
        return f"<undefined '{self.symbol_name}'>"

    def __bool__(self):
        raise UnboundLocalError(f"local variable '{self.symbol_name}' referenced before assignment")


class UndefinedReturnValue:
    """The return value on a path where no return statement has run yet."""

    _tg_undefined = True
    symbol_name = "the return value"

    def __repr__(self):
        return "<undefined return value>"


def ld(thunk, name):
    """A variable's value, or Undefined(name) when it has none."""
    try:
        return thunk()
    except NameError:
        return Undefined(name)


def bound_to_undefined(thunk):
    """Whether the variable read by thunk holds an Undefined (converted code then deletes it, so
    that reading it raises as in Python); False when it is not bound at all."""
    try:
        value = thunk()
    except NameError:
        return False
    return is_undefined(value)


def is_undefined(value):
    return getattr(value, "_tg_undefined", False) is True and isinstance(value, (Undefined, UndefinedReturnValue))


def retval(value):
    """What the function returns: None where no return statement ran."""
    return None if isinstance(value, UndefinedReturnValue) else value


# ---- errors that name the user's line ----------------------------------------------------------------

class Location:
    """Where a converted statement is in the user's source."""

    __slots__ = ("filename", "lineno", "function", "statement")

    def __init__(self, filename, lineno, function, statement):
        self.filename = filename
        self.lineno = lineno
        self.function = function
        self.statement = statement

    def __str__(self):
        return f'File "{self.filename}", line {self.lineno}, in {self.function}'


_USER = "_tg_raised_in_user_code"


def _call_user(fn, *args):
    """Calls code of the user's (a branch, a loop body, a condition): its exceptions are marked so
    that the operators leave them as they are (their traceback already names the user's line)."""
    try:
        return fn(*args)
    except BaseException as e:
        if isinstance(e, Exception):
            try:
                setattr(e, _USER, True)
            except AttributeError:
                pass
        raise


def _located(error, where):
    """The error with the statement's location in its message (TypeError / ValueError, which the
    control flow raises) or as a note (the others)."""
    if getattr(error, _USER, False) or getattr(error, "_tg_located", False):
        return error
    text = f"{error}\n  in user code: {where} (the {where.statement})"
    if type(error) in (TypeError, ValueError, NotImplementedError, UnboundLocalError, NameError):
        new = type(error)(text)
        new._tg_located = True
        return new.with_traceback(error.__traceback__)
    try:
        error.add_note(f"in user code: {where} (the {where.statement})")
        error._tg_located = True
    except AttributeError:
        pass
    return error


def _run_located(where, fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # pylint: disable=broad-except
        located = _located(e, where)
        if located is e:
            raise
        raise located from None


# ---- values that a staged statement carries ----------------------------------------------------------

class _Keep:
    """A Python value carried through a staged cond or loop as itself (not as a tensor)."""

    __slots__ = ("value",)
    _tg_keep = True

    def __init__(self, value):
        self.value = value


def _tensor_like(value):
    return isinstance(value, (Tensor, cf.TensorArray, bool, numbers.Number, np.ndarray, np.generic, list, tuple,
                              dict))


def _prepare(value):
    """Numbers, arrays, tensors and containers of them travel as tensors; other Python objects
    (None, modules, functions, objects) as themselves, and must then be the same on every path."""
    if _tensor_like(value) and not isinstance(value, str):
        return value
    return _Keep(value)


def _unkeep(value):
    return value.value if isinstance(value, _Keep) else value


# ---- if --------------------------------------------------------------------------------------------

def if_stmt(cond, body, orelse, get_state, set_state, names, live, where):
    """`if cond: body() else: orelse()`: a cond node when cond is a tensor in a trace."""
    if not cf.is_staged(cond):
        if _call_user(bool, cond):
            body()
        else:
            orelse()
        return
    _run_located(where, _staged_if, cond, body, orelse, get_state, set_state, names, live, where)


def _staged_if(cond, body, orelse, get_state, set_state, names, live, where):
    init = get_state() if get_state is not None else ()
    outputs = [i for i, is_live in enumerate(live) if is_live]

    def branch(fn):
        def run():
            if set_state is not None:
                set_state(init)
            _call_user(fn)
            values = get_state() if get_state is not None else ()
            return tuple(_prepare(values[i]) for i in outputs)
        return run

    def check(true_values, false_values, true_result, false_result):
        del true_result, false_result
        for k, i in enumerate(outputs):
            a, b = _unkeep(true_values[k]), _unkeep(false_values[k])
            if is_undefined(a) == is_undefined(b):
                continue
            missing = "else" if is_undefined(b) else "if"
            if _dry_run_active() and (isinstance(a, UndefinedReturnValue) or isinstance(b, UndefinedReturnValue)):
                # A `return` inside a tensor loop: the type of the return value is learned from the
                # branch that returns (TF needs the value defined before the loop; tracegraph types it).
                _dry_run_learn(names[i], a if is_undefined(b) else b)
            if isinstance(a, UndefinedReturnValue) or isinstance(b, UndefinedReturnValue):
                raise ValueError(f"A value must also be returned from the {missing} branch: the tensor-dependent "
                                 f"`if` returns a value in one branch only, and a graph needs a value on both paths")
            raise ValueError(f"'{names[i]}' must also be initialized in the {missing} branch: the tensor-dependent "
                             f"`if` assigns it in one branch only, and it is used afterwards")

    try:
        result = cf.cond_structured(cond, branch(body), branch(orelse), check=_checked(check, names, outputs))
    finally:
        if set_state is not None:
            set_state(init)
    if set_state is not None and outputs:
        values = list(init)
        for k, i in enumerate(outputs):
            values[i] = _unkeep(result[k])
        set_state(tuple(values))


def _checked(check, names, outputs):
    """The per-variable check, then the structure check rephrased with the variable's name."""
    def run(true_values, false_values, true_result, false_result):
        check(true_values, false_values, true_result, false_result)
        for k, i in enumerate(outputs):
            ta, fa = [], []
            sa = cf.flatten(true_values[k], True, ta, lambda p: f"'{names[i]}{p}'")
            sb = cf.flatten(false_values[k], True, fa, lambda p: f"'{names[i]}{p}'")
            if not cf.same_structure(sa, sb):
                raise TypeError(f"'{names[i]}' must have the same nested structure in the if and else branches "
                                f"of the tensor-dependent `if`: it is {cf.describe(sa, ta)} in the if branch but "
                                f"{cf.describe(sb, fa)} in the else branch")
            for (path, _), x, y in zip(cf.leaf_paths(sa, ""), ta, fa):
                if x.dtype != y.dtype:
                    raise TypeError(f"'{names[i]}{path}' has dtype {x.dtype.name} in the if branch but "
                                    f"{y.dtype.name} in the else branch of the tensor-dependent `if`; give it one "
                                    "dtype on both paths (tg.cast)")
    return run


# ---- loops -----------------------------------------------------------------------------------------

def while_stmt(test, body, get_state, set_state, names, where):
    """`while test(): body()`: a while node when the first test() is a tensor in a trace."""
    first = _call_user(test)
    if cf.is_staged(first):
        _run_located(where, _staged_loop, None, test, None, body, get_state, set_state, names, where)
        return
    c = first
    while True:
        if cf.is_staged(c):
            raise _located(NotImplementedError(
                "condition of while loop started as non-Tensor, then changed to Tensor: the loop runs as Python "
                "while tracing, and a tensor condition cannot decide a Python loop. Make the condition a tensor "
                "from the start (e.g. tg.constant(...) for its variables) or keep it Python"), where)
        if not _call_user(bool, c):
            break
        body()
        c = _call_user(test)


def for_stmt(iterable, extra_test, body, get_state, set_state, names, where):
    """`for item in iterable: body(item)` (while extra_test() holds, for break and return): a
    while node over the first dimension when iterable is a tensor in a trace."""
    if cf.is_staged(iterable):
        _run_located(where, _staged_loop, iterable, None, extra_test, body, get_state, set_state, names, where)
        return
    if isinstance(iterable, cf.TensorArray):
        raise _located(TypeError("iterating over a tg.TensorArray is not supported; iterate over "
                                 "ta.stack(), or over tg.range(ta.size()) and read"), where)
    for item in iterable:
        if extra_test is not None:
            go = _call_user(extra_test)
            if cf.is_staged(go):
                raise _located(NotImplementedError(
                    "break and return statements which depend on a tensor condition are not supported in Python "
                    "for loops: this loop iterates over a Python value, so it runs as Python while tracing. Did "
                    "you intend a graph loop? Iterate over a tensor (tg.range(n), or tg.stack(values))"), where)
            if not go:
                break
        body(item)


def _staged_loop(iterable, test, extra_test, body, get_state, set_state, names, where):
    """The loop as a while node. For a `for` over a tensor an index is the first loop variable."""
    init = tuple(get_state()) if get_state is not None else ()
    names = tuple(names)
    invariants = [None] * len(init)
    init = _define_undefined(iterable, body, get_state, set_state, init, names, invariants, where)
    if iterable is not None:
        if iterable._shape_tuple() == ():
            raise TypeError("Cannot iterate over a scalar tensor: a `for` loop over a tensor iterates over its "
                            "first dimension")
        length = _core.shape(iterable)[0]
        index0 = _core.constant(0, dtype=length.dtype)

    def restore(values):
        if set_state is not None:
            set_state(tuple(_unkeep(v) for v in values))

    def loop_cond(values):
        if iterable is not None:
            index, values = values[0], values[1:]
        restore(values)
        if iterable is None:
            return _as_bool(_call_user(test), "the `while` condition")
        more = index < length
        if extra_test is None:
            return more
        return and_(lambda: more, lambda: _as_bool(_call_user(extra_test), "the loop's break / return test"))

    def loop_body(values):
        if iterable is not None:
            index, values = values[0], values[1:]
        restore(values)
        if iterable is None:
            _call_user(body)
        else:
            _call_user(body, _core.gather(iterable, index))
        new = tuple(_prepare(v) for v in get_state()) if get_state is not None else ()
        for name, v in zip(names, new):
            if is_undefined(_unkeep(v)):
                raise ValueError(f"'{name}' is undefined after an iteration of the tensor-dependent loop")
        return ((index + 1,) if iterable is not None else ()) + new

    start = tuple(_prepare(v) for v in init)
    all_names = names
    all_invariants = invariants
    if iterable is not None:
        start = (index0,) + start
        all_names = ("<loop index>",) + names
        all_invariants = [None] + invariants
    if not start:
        raise ValueError("a tensor-dependent loop needs at least one loop variable")
    try:
        out = cf.loop_structured(start, loop_cond, loop_body,
                                 all_invariants if any(i is not None for i in all_invariants) else None,
                                 -1, "while", all_names)
    except Exception:
        restore(init)
        raise
    if iterable is not None:
        out = out[1:]
    restore(out)


def _as_bool(value, what):
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (bool, np.bool_)) or isinstance(value, numbers.Number):
        return _core.constant(bool(value))
    raise TypeError(f"{what} must be a bool tensor or a Python bool, got {type(value).__name__}")


# Undefined loop variables: a variable the loop assigns and the code uses afterwards but that has
# no value on entry (or the return value of a `return` inside the loop). Its type comes from
# tracing the body once into a throwaway graph; it then enters the loop as zeros of that type.
_dry_run_state = threading.local()


def _dry_run_active():
    return getattr(_dry_run_state, "learned", None) is not None


class _Learned(Exception):
    """Ends a dry run early: a cond inside it gave a variable that was undefined on one path."""


def _dry_run_learn(name, value):
    if isinstance(value, Tensor):
        _dry_run_state.learned[name] = (value.dtype.name, value._shape_tuple())
        raise _Learned()


def _define_undefined(iterable, body, get_state, set_state, init, names, invariants, where):
    undefined = [i for i, v in enumerate(init) if is_undefined(v)]
    if not undefined:
        return init
    del where
    values = list(init)
    failure = None
    for _ in range(len(undefined)):
        missing = [i for i in undefined if is_undefined(values[i])]
        if not missing:
            break
        learned = {}
        previous = getattr(_dry_run_state, "learned", None)
        _dry_run_state.learned = learned
        results = []

        # The defined tensor variables (and a `for` loop's element) enter the dry run as
        # placeholders: the body must see symbolic values, as it will in the loop.
        like, slots = [], []
        for i, v in enumerate(values):
            if isinstance(v, (bool, numbers.Number)) and not isinstance(v, np.ndarray):
                v = _core.convert_to_tensor(v)
            if isinstance(v, Tensor):
                like.append(v)
                slots.append(i)
        if iterable is not None:
            like.append(_core.gather(iterable, _core.constant(0)))

        def dry(placeholders, missing=missing, slots=slots):
            entry = list(values)
            for i, p in zip(slots, placeholders):
                entry[i] = p
            set_state(tuple(entry))
            if iterable is None:
                _call_user(body)
            else:
                _call_user(body, placeholders[-1])
            after = get_state()
            out = []
            for i in missing:
                v = after[i]
                if isinstance(v, (bool, numbers.Number)):
                    v = _core.convert_to_tensor(v)
                if isinstance(v, Tensor):
                    results.append(i)
                    out.append(v)
            return out
        try:
            types = _core._trace_types(dry, like)
        except _Learned:
            types = []
        except (TypeError, ValueError, UnboundLocalError) as e:
            types = []
            failure = e
        finally:
            _dry_run_state.learned = previous
            set_state(tuple(init))
        progress = False
        for i, (dtype, dims) in zip(results, types):
            values[i] = _zeros(dtype, dims, i, invariants)
            progress = True
        for i in missing:
            if names[i] in learned:
                values[i] = _zeros(*learned[names[i]], i, invariants)
                progress = True
        if not progress:
            break
    because = f" (tracing the loop body to find its type failed: {failure})" if failure is not None else ""
    for i in undefined:
        if is_undefined(values[i]):
            if isinstance(init[i], UndefinedReturnValue):
                raise ValueError("the value of a `return` inside this tensor-dependent loop could not be typed: "
                                 "return a tensor on every path of the loop, or assign the result to a variable "
                                 f"defined before the loop and return it after{because}")
            raise ValueError(f"'{names[i]}' must be defined before the loop: the tensor-dependent loop assigns it "
                             "and it is used afterwards (or in the next iteration), so it is a loop variable and "
                             f"needs a value on entry{because}")
    return tuple(values)


def _zeros(dtype, dims, index, invariants):
    if dims is None:
        raise ValueError("a loop variable first assigned in the loop has an unknown rank; define it before the loop")
    shape = [0 if d is None else d for d in dims]
    if any(d is None for d in dims):
        invariants[index] = list(dims)
    return _core.zeros(shape, dtype=dtype)


# ---- and / or / not --------------------------------------------------------------------------------

def and_(a, b):
    """`a and b` (a and b are thunks): tg.cond when a is a tensor in a trace, else Python."""
    x = a()
    if cf.is_staged(x):
        return cf.cond(x, lambda: _as_bool(b(), "the right side of `and`"), lambda: x)
    return x and b()


def or_(a, b):
    x = a()
    if cf.is_staged(x):
        return cf.cond(x, lambda: x, lambda: _as_bool(b(), "the right side of `or`"))
    return x or b()


def if_exp(cond, if_true, if_false):
    """`if_true() if cond else if_false()`: tg.cond when cond is a tensor in a trace."""
    if cf.is_staged(cond):
        return cf.cond(cond, if_true, if_false)
    return if_true() if cond else if_false()


def not_(x):
    if cf.is_staged(x):
        return _core.logical_not(x)
    return not x


# ---- calls -----------------------------------------------------------------------------------------

def converted_call(f, args, kwargs):
    """Calls f, converting it first when it is the user's Python function (TF's recursive
    conversion); library code, builtins and tg.functions are called as they are."""
    from tracegraph.autograph import _transform
    target = _transform.call_target(f)
    if kwargs:
        return target(*args, **kwargs)
    return target(*args)
