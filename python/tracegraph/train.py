"""tg.train: checkpoints of Variables in the .tgx container, by Variable name.

    tg.train.save_variables("ckpt.tgx", model)                 # a tg.Module, Variables, or lists of them
    tg.train.restore_variables("ckpt.tgx", model.variables)

These are the C++ tg::save_variables / tg::restore_variables: a Variable's value is stored under
its name, and restored into the Variable of the same name (names must be unique; a file a C++
program wrote restores into Python Variables and the reverse). TensorFlow's tf.train.Checkpoint
keys values by the path of attributes that reaches each Variable instead; tracegraph's files do
not hold that object graph, so the API keeps its own name rather than TF's.
"""
from tracegraph import _core

__all__ = ["save_variables", "restore_variables"]


def _variables(obj, out, seen):
    from tracegraph._variables import Variable  # pylint: disable=import-outside-toplevel
    if isinstance(obj, Variable):
        if id(obj) not in seen:
            seen.add(id(obj))
            out.append(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            _variables(v, out, seen)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _variables(v, out, seen)
    elif hasattr(obj, "variables"):
        v = obj.variables
        _variables(v() if callable(v) else v, out, seen)
    else:
        raise TypeError(f"expected tg.Variables, a tg.Module, or lists/tuples/dicts of them, got {type(obj).__name__}")
    return out


def save_variables(path, variables):
    """Writes each Variable's value under its name to the .tgx checkpoint `path`. `variables`:
    tg.Variables, objects with a `variables` attribute (tg.Module, a loaded function), or
    lists, tuples and dicts of those. Two Variables of one name raise ValueError."""
    _core._save_variables(_path(path), _variables(variables, [], set()))


def restore_variables(path, variables):
    """Assigns each Variable the value stored under its name in `path` (a checkpoint, or a
    saved function's file). Every Variable must be in the file with its dtype and shape, else
    ValueError; nothing is assigned unless all are."""
    _core._restore_variables(_path(path), _variables(variables, [], set()))


def _path(path):
    import os  # pylint: disable=import-outside-toplevel
    p = os.fspath(path)
    if not isinstance(p, str):
        raise TypeError(f"the path must be a str or os.PathLike, got {path!r}")
    return p
