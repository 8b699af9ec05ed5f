"""tg.Module from Python, ported from TensorFlow's
tensorflow/python/module/module_test.py.

Ported: module names (default snake_case, invalid names), name scopes (construct in a scope,
entered by with_name_scope in __call__ and other methods, subclasses, submodules created late,
property getters/setters, patched callables not entering, memoized name_scope, not numbered in
eager), errors in constructors and methods leaving no scope behind, __getattr__ not entering the
scope, Variable names under module scopes, variables / trainable_variables / submodules in TF's
order (recursive modules, non-trainable ones, late submodules), _flatten over lists, tuples,
namedtuples and dicts (recursive or not, with paths), custom attribute traversal keys, ignored
properties, unsortable dict keys, abstract modules, tg.function methods of modules.

Skipped, with the reason: TF 1 graph-mode numbering and memoization (no graph mode);
distributed variables (MirroredVariable, TPU, AggregatingVariable: no distribution strategies);
get_name_scope() through tf.name_scope(...) inside a traced function returning the scope as a
string tensor (tracegraph's name scopes name Variables only: the helper below reads the scope
stack instead).
"""
import abc
import collections
import itertools

import pytest

import tracegraph as tg
from tracegraph import module as module_lib


def get_name_scope():
    return module_lib._current_name_scope()  # pylint: disable=protected-access


class ErrorModuleError(Exception):
    pass


class ErrorModule(tg.Module):
    def __init__(self, call_super, raise_in_constructor=True):
        if call_super:
            super().__init__()
        if raise_in_constructor:
            raise ErrorModuleError("Deliberate error!")

    def __call__(self):
        raise ErrorModuleError("Deliberate error!")


class RecursiveModule(tg.Module):
    def __init__(self, depth, trainable=True):
        super().__init__(name="badger")
        with self.name_scope:
            self.child = None
            if depth > 1:
                self.child = RecursiveModule(depth - 1, trainable=trainable)
            self.w = tg.Variable(1.0, trainable=trainable, name="mushroom")


class AbstractModule(tg.Module, metaclass=abc.ABCMeta):
    @abc.abstractmethod
    def __call__(self, x):
        pass


class ConcreteModule(AbstractModule):
    @tg.Module.with_name_scope
    def __call__(self, x):
        return x ** 2, get_name_scope()


class TreeModule(tg.Module):
    def __init__(self, name=None):
        super().__init__(name=name)
        self._leaves = []

    @tg.Module.with_name_scope
    def new_leaf(self, name=None):
        leaf = TreeModule(name=name)
        self._leaves.append(leaf)
        return leaf


class ReturnsNameScopeModule(tg.Module):
    @tg.Module.with_name_scope
    def alternative_forward(self):
        return get_name_scope()

    @tg.Module.with_name_scope
    def __call__(self):
        return get_name_scope()


class SubclassedReturnsNameScopeModule(ReturnsNameScopeModule):
    @tg.Module.with_name_scope
    def alternative_alternative_forward(self):
        return get_name_scope()


class PropertyThrowsWhenCalledModule(tg.Module):
    @property
    def raise_assertion_error(self):
        raise AssertionError


class ModuleOverridingNameScope(ReturnsNameScopeModule):
    @property
    def name_scope(self):
        return tg.name_scope("yolo/")


class PropertyModule(tg.Module):
    def __init__(self):
        super().__init__()
        self._setter_scope_name = None

    @property
    @tg.Module.with_name_scope
    def some_property(self):
        return get_name_scope(), self._setter_scope_name

    @some_property.setter
    @tg.Module.with_name_scope
    def some_property(self, my_property):
        del my_property
        self._setter_scope_name = get_name_scope()

    @property
    def no_name_scope_property(self):
        return get_name_scope(), self._setter_scope_name

    @no_name_scope_property.setter
    def no_name_scope_property(self, my_property):
        del my_property
        self._setter_scope_name = get_name_scope()


# ---- naming ----------------------------------------------------------------------------------

def test_single_name():
    mod = tg.Module(name="simple")
    assert mod.name == "simple"
    assert mod.name_scope.name == "simple/"


def test_default_name_is_snake_case():
    class MyDenseLayer(tg.Module):
        pass

    assert MyDenseLayer().name == "my_dense_layer"
    assert tg.Module().name == "module"


def test_construct_in_scope():
    with tg.name_scope("foo"):
        mod = tg.Module(name="bar")
    assert mod.name == "bar"
    assert mod.name_scope.name == "foo/bar/"


def test_enters_name_scope_in_call_and_other_methods():
    mod = ReturnsNameScopeModule()
    for _ in range(3):
        assert mod() == mod.name_scope.name
        assert mod.alternative_forward() == mod.name_scope.name
    mod = SubclassedReturnsNameScopeModule()
    for _ in range(3):
        assert mod.alternative_forward() == mod.name_scope.name
        assert mod.alternative_alternative_forward() == mod.name_scope.name
    assert get_name_scope() == ""


def test_submodule_created_late():
    m = TreeModule()
    assert m.name == "tree_module" and m.name_scope.name == "tree_module/"
    leaf1 = m.new_leaf()
    assert leaf1.name == "tree_module"
    assert leaf1.name_scope.name == "tree_module/tree_module/"


def test_does_not_evaluate_property_methods():
    mod = PropertyThrowsWhenCalledModule()
    with pytest.raises(AssertionError):
        mod.raise_assertion_error  # pylint: disable=pointless-statement
    assert mod.variables == ()  # tracking reads __dict__, never properties


def test_overridden_name_scope():
    mod = ModuleOverridingNameScope()
    assert mod() == "yolo/"
    assert mod.alternative_forward() == "yolo/"


def test_patched_callable():
    with tg.name_scope("foo"):
        mod = tg.Module(name="bar")
    mod.foo = get_name_scope
    assert mod.foo() == ""  # not a method: the scope is not entered


def test_property_getter_and_setter():
    mod = PropertyModule()
    mod.some_property = None, None
    assert mod.some_property == ("property_module/", "property_module/")
    mod.no_name_scope_property = None, None
    assert mod.no_name_scope_property == ("", "")


def test_invalid_name():
    for bad in ("$Foo", "a b", "1abc", ""):
        with pytest.raises(ValueError, match="is not a valid module name"):
            tg.Module(name=bad)
    with pytest.raises(ValueError, match="is not a valid module name"):
        tg.Module(name=3)


def test_modules_not_numbered_in_eager():
    mod = RecursiveModule(2)
    assert mod.name_scope.name == "badger/"
    assert mod.child.name_scope.name == "badger/badger/"
    mod = RecursiveModule(2)
    assert mod.name_scope.name == "badger/"
    assert mod.child.name_scope.name == "badger/badger/"


def test_errors_leave_no_scope_behind():
    with pytest.raises(ErrorModuleError):
        ErrorModule(call_super=True)
    assert get_name_scope() == ""
    with pytest.raises(ErrorModuleError):
        ErrorModule(call_super=False)
    assert get_name_scope() == ""
    mod = ErrorModule(call_super=True, raise_in_constructor=False)
    with pytest.raises(ErrorModuleError):
        mod()
    assert get_name_scope() == ""


def test_getattr_does_not_enter_name_scope():
    scope_names = []

    class GetAttrModule(tg.Module):
        def __getattr__(self, name):
            scope_names.append((name, get_name_scope()))
            raise AttributeError(name)

    mod = GetAttrModule()
    with pytest.raises(AttributeError):
        mod.does_not_exist  # pylint: disable=pointless-statement
    assert ("does_not_exist", "") in scope_names


def test_memoized_name_scope():
    mod = tg.Module(name="name")
    assert mod.name_scope is mod.name_scope


def test_variable_names():
    mod = RecursiveModule(3)
    assert mod.w.name == "badger/mushroom:0"
    assert mod.child.w.name == "badger/badger/mushroom:0"
    assert mod.child.child.w.name == "badger/badger/badger/mushroom:0"


def test_with_name_scope_names_variables_created_in_call():
    class MyModule(tg.Module):
        @tg.Module.with_name_scope
        def __call__(self, x):
            if not hasattr(self, "w"):
                self.w = tg.Variable(tg.ones([x.shape[1], 3]))
            return tg.matmul(x, self.w)

    mod = MyModule()
    assert mod(tg.ones([1, 2])).shape == [1, 3]
    assert mod.w.name == "my_module/Variable:0"


# ---- tracking --------------------------------------------------------------------------------

def test_variables():
    m = RecursiveModule(3)
    assert m.variables == (m.w, m.child.w, m.child.child.w)
    assert m.child.variables == (m.child.w, m.child.child.w)
    assert m.child.child.variables == (m.child.child.w,)


def test_trainable_variables():
    m = RecursiveModule(3)
    assert m.trainable_variables == (m.w, m.child.w, m.child.child.w)
    assert m.child.trainable_variables == (m.child.w, m.child.child.w)
    assert m.non_trainable_variables == ()
    m = RecursiveModule(3, trainable=False)
    assert len(m.trainable_variables) == 0 and len(m.child.trainable_variables) == 0
    assert m.non_trainable_variables == (m.w, m.child.w, m.child.child.w)


def test_submodules():
    m = RecursiveModule(3)
    assert list(m.submodules) == [m.child, m.child.child]
    assert list(m.child.submodules) == [m.child.child]
    assert list(m.child.child.submodules) == []


def test_non_ctor_submodule():
    m = TreeModule()
    leaf1 = m.new_leaf()
    assert set(map(id, m.submodules)) == {id(leaf1)}
    leaf2 = m.new_leaf()
    assert set(map(id, m.submodules)) == {id(leaf1), id(leaf2)}


def test_containers_and_shared_variables_are_tracked_once():
    m = tg.Module()
    shared = tg.Variable(1.0, name="shared")
    m.layers = [tg.Module(name="a"), tg.Module(name="b")]
    m.layers[0].v = shared
    m.layers[1].v = shared
    m.table = {"z": tg.Variable(2.0, name="z"), "a": (tg.Variable(3.0, name="a"), shared)}
    m.plain = 3  # other values are ignored
    names = [v.name for v in m.variables]
    # m's own attributes first (sorted: layers, plain, table; the dict by key), then the
    # submodules', whose `shared` was seen already.
    assert names == ["a:0", "shared:0", "z:0"]
    assert len(m.submodules) == 2


class MemberType:
    pass


class SimpleModule(tg.Module):
    def __init__(self, create_child=True, container_type=list):
        super().__init__()
        self.z = MemberType()
        self.a = container_type([MemberType(), MemberType()])
        if create_child:
            self.c = SimpleModule(create_child=False)


def is_member(v):
    return isinstance(v, MemberType)


NamedPair = collections.namedtuple("NamedPair", ("first", "second"))


@pytest.mark.parametrize("container_type", [lambda v: NamedPair(*v), list, tuple,
                                            lambda v: dict(enumerate(v))])
def test_flatten(container_type):
    parent = SimpleModule(container_type=container_type)
    child = parent.c
    assert list(parent._flatten(recursive=False, predicate=is_member)) == \
        [parent.a[0], parent.a[1], parent.z]
    assert list(parent._flatten(predicate=is_member)) == \
        [parent.a[0], parent.a[1], parent.z, child.a[0], child.a[1], child.z]


class LayerModule(tg.Module):
    def __init__(self):
        super().__init__()
        self._trainable_variables = [tg.Variable(1.0, name="a"), tg.Variable(2.0, name="b")]
        self._non_trainable_variables = [tg.Variable(3.0, name="c"), tg.Variable(4.0, name="d")]
        self._bonus = tg.Variable(5.0, name="e")

    @property
    def variables(self):
        def key_function(name):
            indexes = {"_trainable_variables": 0, "_non_trainable_variables": 1}
            return indexes.get(name, 2), name

        return list(self._flatten(predicate=module_lib._is_variable,
                                  attribute_traversal_key=key_function))


def test_attribute_traversal_key():
    mod = LayerModule()
    assert mod.variables == mod._trainable_variables + mod._non_trainable_variables + [mod._bonus]


def test_attributes_to_ignore():
    class DangerousModule(tg.Module):
        _TF_MODULE_IGNORED_PROPERTIES = frozenset(itertools.chain(
            ("dangerous_submodule", "dangerous_variable"),
            tg.Module._TF_MODULE_IGNORED_PROPERTIES))

    mod = DangerousModule()
    mod.dangerous_submodule = tg.Module()
    mod.dangerous_variable = tg.Variable(1.0)
    mod.normal_variable = tg.Variable(2.0)
    assert len(mod.submodules) == 0
    assert len(mod.variables) == 1 and mod.variables[0] is mod.normal_variable


def test_with_path():
    mod = tg.Module()
    mod.w = tg.Variable(1.0)
    mod.encoder = tg.Module()
    mod.encoder.w = [({"k": mod.w}, {"k": mod.w})]
    mod.decoder = mod.encoder
    state = dict(mod._flatten(with_path=True, predicate=module_lib._is_variable))
    assert state == {("w",): mod.w,
                     ("encoder", "w", 0, 0, "k"): mod.w, ("encoder", "w", 0, 1, "k"): mod.w,
                     ("decoder", "w", 0, 0, "k"): mod.w, ("decoder", "w", 0, 1, "k"): mod.w}


def test_raises_error_with_path():
    m = tg.Module()
    m.layers = {object(): None, object(): None}
    with pytest.raises(ValueError, match="Error processing property 'layers'"):
        m.variables  # pylint: disable=pointless-statement


def test_abstract_and_concrete_modules():
    with pytest.raises(TypeError, match="abstract"):
        AbstractModule()  # pylint: disable=abstract-class-instantiated
    mod = ConcreteModule()
    x, scope_name = mod(2.0)
    assert x == 4.0 and scope_name == "concrete_module/"
    assert get_name_scope() == ""


def test_function_methods_of_modules():
    class Scaler(tg.Module):
        def __init__(self):
            super().__init__()
            with self.name_scope:
                self.scale = tg.Variable(2.0, name="scale")

        @tg.function
        @tg.Module.with_name_scope
        def __call__(self, x):
            return x * self.scale

    s = Scaler()
    assert float(s(tg.constant(3.0))) == 6.0
    s.scale.assign(4.0)
    assert float(s(tg.constant(3.0))) == 12.0
    assert s.variables == (s.scale,) and s.scale.name == "scaler/scale:0"
