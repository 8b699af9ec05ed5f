"""AutoGraph (tf.autograph): Python `if`, `while` and `for` over tensors as graph control flow.

tg.function converts the function it wraps (autograph=True, the default): the function's source
is rewritten (tracegraph/autograph/_transform.py) so that each `if`, `while` and `for` calls a
runtime operator (tracegraph/autograph/_operators.py) that makes a tg.cond / tg.while_loop node
when the condition or the iterable is a tensor in a trace, and runs the Python statement
otherwise. See docs/python.md for what is converted and what differs from TensorFlow.
"""
import functools

from tracegraph.autograph import _transform

__all__ = ["to_code", "to_graph", "experimental"]


def to_code(entity, recursive=True, experimental_optional_features=None):
    """The Python source of the converted function (tf.autograph.to_code)."""
    del recursive, experimental_optional_features
    entity = getattr(entity, "python_function", entity)
    return _transform.to_code_of(entity)


def to_graph(entity, recursive=True, experimental_optional_features=None):
    """The converted function (tf.autograph.to_graph): call it inside a tg.function."""
    del recursive, experimental_optional_features
    entity = getattr(entity, "python_function", entity)
    return _transform.convert(entity)


class experimental:  # pylint: disable=invalid-name
    """tf.autograph.experimental."""

    @staticmethod
    def do_not_convert(func=None):
        """Marks a function that AutoGraph must call as it is (its control flow stays Python)."""
        def mark(f):
            @functools.wraps(f)
            def wrapper(*args, **kwargs):
                return f(*args, **kwargs)
            wrapper.__tg_do_not_convert__ = True
            return wrapper
        return mark if func is None else mark(func)
