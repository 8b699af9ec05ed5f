"""tf.py_function: a Python function run as a graph op (the core's host_call).

Inside a tg.function the op calls the Python function every time the graph runs, with eager
tensors, in order with tg.print and Variable updates; eagerly it calls it at once. The op has
no gradient here (TF's py_function records the function on a tape; tracegraph does not), and a
function holding it cannot be saved or exported: the Python function lives in this process.
"""
import functools

from tracegraph import _core
from tracegraph import dtypes as _dtypes


def _function_name(func):
    return getattr(func, "__name__", None) or type(func).__name__


def _call_and_convert(func, tout, single, name):
    """The host function: calls func with the op's inputs, gives its results as tensors of tout."""
    from tracegraph import convert_to_tensor

    def call(tensors):
        result = func(*tensors)
        if single:
            results = [result]
        elif result is None:
            results = []
        elif isinstance(result, (list, tuple)):
            results = list(result)
        else:
            results = [result]
        if len(results) != len(tout):
            raise ValueError(
                f"tf.py_function's function '{name}' returned {len(results)} value(s), but Tout "
                f"declares {len(tout)} ({', '.join(d.name for d in tout) or 'none'}); return one "
                "value per dtype in Tout")
        return [convert_to_tensor(r, dtype=d) for r, d in zip(results, tout)]

    return call


def py_function(func=None, inp=None, Tout=None, name=None):  # pylint: disable=invalid-name
    """Wraps a Python function as an op (tf.py_function).

    Returns func's results as tensors: a single tensor when Tout is one dtype, a list when it is
    a list or tuple (an empty list when func returns nothing). Without func it is a decorator:
    the decorated function's arguments are the inputs. An exception raised by func surfaces as a
    tg.errors error of the call or graph run (ValueError and TypeError as InvalidArgumentError,
    others as UnknownError), with Python's exception type and message.
    """
    if func is None:
        def decorator(f):
            @functools.wraps(f)
            def wrapped(*args):
                return py_function(f, list(args), Tout=Tout, name=name)
            return wrapped
        return decorator
    if not callable(func):
        raise TypeError(f"tf.py_function expects a callable as func, got {func!r}")
    if Tout is None:
        raise TypeError("tf.py_function needs Tout: the dtype of func's result, a list of dtypes, "
                        "or [] when func returns nothing")
    single = not isinstance(Tout, (list, tuple))
    tout = [_dtypes.as_dtype(Tout)] if single else [_dtypes.as_dtype(d) for d in Tout]
    inputs = [] if inp is None else (list(inp) if isinstance(inp, (list, tuple)) else [inp])
    fname = _function_name(func)
    outputs = _core._py_function(_call_and_convert(func, tout, single, fname), inputs, tout, fname)
    return outputs[0] if single else list(outputs)
