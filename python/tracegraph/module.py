"""tg.Module (tf.Module): a named container of Variables and other Modules.

Tracking follows TF's rules: the attributes of a module (its __dict__, in sorted key order,
minus _TF_MODULE_IGNORED_PROPERTIES) are walked, lists / tuples / namedtuples / dicts inside them
too, and every Variable and Module found is collected, each once (by identity); submodules are
walked after the module's own attributes. `variables`, `trainable_variables`,
`non_trainable_variables` and `submodules` are tuples in that order. `name_scope` prefixes the
names of Variables created inside it ("my_module/w:0"); Module.with_name_scope enters it around a
method.
"""
import re

from tracegraph import _variables
from tracegraph._variables import Variable, name_scope

__all__ = ["Module"]

_CAMEL_TO_SNAKE = re.compile(r"((?<=[a-z0-9])[A-Z]|(?!^)[A-Z](?=[a-z]))")
_VALID_NAME = re.compile(r"^[a-zA-Z_]([a-zA-Z0-9_])*$")


def _camel_to_snake(value):
    return _CAMEL_TO_SNAKE.sub(r"_\1", value).lower()


def _is_variable(obj):
    return isinstance(obj, Variable)


def _is_trainable_variable(obj):
    return isinstance(obj, Variable) and obj.trainable


def _is_non_trainable_variable(obj):
    return isinstance(obj, Variable) and not obj.trainable


def _is_module(obj):
    return isinstance(obj, Module)


def _leaves_with_paths(value, path=()):
    """(path, leaf) of lists, tuples, namedtuples and dicts (sorted keys, as tf.nest)."""
    if isinstance(value, dict):
        try:
            keys = sorted(value)
        except TypeError as cause:
            raise ValueError(f"the keys of {value!r} cannot be sorted") from cause
        for key in keys:
            yield from _leaves_with_paths(value[key], path + (key,))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _leaves_with_paths(item, path + (i,))
    else:
        yield path, value


def _flatten_module(module, recursive, predicate, attribute_traversal_key, with_path,
                    module_path=(), seen=None):
    if seen is None:
        seen = {id(module)}
    properties = vars(module)
    ignored = getattr(module, "_TF_MODULE_IGNORED_PROPERTIES", frozenset())
    submodules = []
    for key in sorted(properties, key=attribute_traversal_key):
        if key in ignored:
            continue
        value = properties[key]
        try:
            leaves = list(_leaves_with_paths(value))
        except Exception as cause:  # pylint: disable=broad-except
            raise ValueError(f"Error processing property {key!r} of {value!r}") from cause
        for leaf_path, leaf in leaves:
            leaf_path = (key,) + leaf_path
            if not with_path:
                if id(leaf) in seen:
                    continue
                seen.add(id(leaf))
            if predicate(leaf):
                yield (module_path + leaf_path, leaf) if with_path else leaf
            if recursive and _is_module(leaf):
                submodules.append((module_path + leaf_path, leaf))
    for sub_path, sub in submodules:
        yield from _flatten_module(sub, recursive, predicate, attribute_traversal_key, with_path,
                                   sub_path, seen)


class Module:
    """A named container of Variables and submodules (tf.Module).

        class Dense(tg.Module):
            def __init__(self, in_features, out_features, name=None):
                super().__init__(name=name)
                with self.name_scope:
                    self.w = tg.Variable(tg.random.normal([in_features, out_features]), name="w")
                    self.b = tg.Variable(tg.zeros([out_features]), name="b")

            def __call__(self, x):
                return tg.nn.relu(x @ self.w + self.b)

    name: a Python identifier (default: the class name in snake_case).
    """

    _TF_MODULE_IGNORED_PROPERTIES = frozenset(("_self_unconditional_checkpoint_dependencies",
                                               "_self_unconditional_dependency_names"))

    def __init__(self, name=None):
        if name is None:
            name = _camel_to_snake(type(self).__name__)
        elif not isinstance(name, str) or not _VALID_NAME.match(name):
            raise ValueError(f"{name!r} is not a valid module name. Module names must be valid "
                             "Python identifiers (e.g. a valid class name).")
        self._name = name
        with name_scope(name) as scope:
            self._name_scope = name_scope(scope)

    @property
    def name(self):
        """The module's name (without its enclosing scopes)."""
        return self._name

    @property
    def name_scope(self):
        """The module's name scope: `with self.name_scope:` prefixes Variable names."""
        return self._name_scope

    @property
    def variables(self):
        """Every Variable of this module and its submodules, each once, in TF's order."""
        return tuple(self._flatten(predicate=_is_variable))

    @property
    def trainable_variables(self):
        """The trainable ones of `variables`."""
        return tuple(self._flatten(predicate=_is_trainable_variable))

    @property
    def non_trainable_variables(self):
        """The non-trainable ones of `variables`."""
        return tuple(self._flatten(predicate=_is_non_trainable_variable))

    @property
    def submodules(self):
        """Every Module reachable from this one (not itself), breadth first."""
        return tuple(self._flatten(predicate=_is_module))

    def _flatten(self, recursive=True, predicate=None, attribute_traversal_key=None,
                 with_path=False, expand_composites=False):
        """The leaves of this module's attributes (and of its submodules' when recursive) that
        satisfy predicate; with_path gives (path, leaf) pairs and does not de-duplicate."""
        del expand_composites
        if predicate is None:
            predicate = lambda _: True
        return _flatten_module(self, recursive, predicate, attribute_traversal_key, with_path)

    @classmethod
    def with_name_scope(cls, method):
        """Decorator: runs the method inside the module's name scope."""
        def method_with_name_scope(self, *args, **kwargs):
            with self.name_scope:
                return method(self, *args, **kwargs)
        method_with_name_scope.__name__ = getattr(method, "__name__", "method")
        method_with_name_scope.__qualname__ = getattr(method, "__qualname__", "method")
        method_with_name_scope.__doc__ = getattr(method, "__doc__", None)
        method_with_name_scope.__wrapped__ = method
        return method_with_name_scope


def _current_name_scope():
    """The name scope in force ('' at the top), for tests and for layers."""
    return _variables._current_scope()  # pylint: disable=protected-access
