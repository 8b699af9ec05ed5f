"""tg.nest, the one walker of nested structures (TF's tf.nest rules), and the parts of the
package that walk structures through it: GradientTape.gradient, tg.cond and tg.while_loop.

The rules are TensorFlow's (tensorflow/python/util/nest_test.py): lists, tuples, namedtuples and
dicts nest; None and other objects are leaves; a dict's leaves come in sorted key order; a
rebuilt dict keeps the key order of the structure it was built like.
"""
import collections

import pytest

import tracegraph as tg

Point = collections.namedtuple("Point", ["x", "y"])


def test_flatten_orders_dict_leaves_by_sorted_key():
    structure = {"b": 1, "a": (2, [3, None]), "c": Point(4, 5)}
    assert tg.nest.flatten(structure) == [2, 3, None, 1, 4, 5]
    assert tg.nest.flatten(7) == [7]
    assert tg.nest.flatten(None) == [None]


def test_pack_sequence_as_keeps_the_containers_and_key_order():
    structure = {"b": 1, "a": (2, [3, None]), "c": Point(4, 5)}
    packed = tg.nest.pack_sequence_as(structure, [20, 30, 40, 10, 50, 60])
    assert packed == {"b": 10, "a": (20, [30, 40]), "c": Point(50, 60)}
    assert list(packed) == ["b", "a", "c"]
    assert type(packed["c"]) is Point
    ordered = collections.OrderedDict([("z", 1), ("y", 2)])
    again = tg.nest.pack_sequence_as(ordered, [20, 10])
    assert type(again) is collections.OrderedDict and list(again.items()) == [("z", 10), ("y", 20)]


def test_pack_sequence_as_refuses_a_wrong_count():
    with pytest.raises(ValueError, match="2 leaves but flat_sequence has 3"):
        tg.nest.pack_sequence_as((1, 2), [1, 2, 3])


def test_unsortable_keys_are_refused():
    with pytest.raises(TypeError, match="sortable keys"):
        tg.nest.flatten({1: "a", "b": 2})


def test_map_structure_and_assert_same_structure():
    assert tg.nest.map_structure(lambda a, b: a + b, {"x": 1, "y": [2]}, {"y": [20], "x": 10}) == {"x": 11, "y": [22]}
    with pytest.raises(ValueError, match="same nested structure"):
        tg.nest.assert_same_structure([1, 2], [1, [2]])
    with pytest.raises(TypeError, match="same sequence type"):
        tg.nest.assert_same_structure([1, 2], (1, 2))
    tg.nest.assert_same_structure([1, 2], (1, 2), check_types=False)


def test_gradient_of_a_dict_of_sources_comes_back_by_key():
    a, b = tg.Variable(2.0), tg.Variable(3.0)
    with tg.GradientTape() as tape:
        y = a * a * b
    grads = tape.gradient(y, {"b": b, "a": a})
    assert list(grads) == ["b", "a"]
    assert float(grads["a"]) == 12.0 and float(grads["b"]) == 4.0


@pytest.mark.parametrize("traced", [False, True])
def test_cond_and_while_return_dicts_in_the_callers_key_order(traced):
    def f(x):
        out = tg.cond(x > 0, lambda: {"z": x + 1, "a": x - 1}, lambda: {"z": x * 2, "a": x * 3})
        loop = tg.while_loop(lambda s: s["i"] < 3, lambda s: {"n": s["n"] * 2, "i": s["i"] + 1},
                             [{"n": x, "i": tg.constant(0)}])
        return out, loop
    run = tg.function(f) if traced else f
    out, loop = run(tg.constant(5))
    assert list(out) == ["z", "a"] and int(out["z"]) == 6 and int(out["a"]) == 4
    state = loop[0] if isinstance(loop, list) else loop
    assert list(state) == ["n", "i"] and int(state["n"]) == 40 and int(state["i"]) == 3
