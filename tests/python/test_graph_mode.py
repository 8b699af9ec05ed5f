"""Inside a Python trace every op is a node of the graph, as in TensorFlow's graph mode: an
expression over constants is a symbolic tensor, not a value computed while tracing.

What TF's tf.function guide and tests rely on (the guide's measure_graph_size cell is in
test_guide.py): tf.constant and ops over Python values become graph nodes, so an unrolled Python
loop grows the graph by its body's nodes; a tensor made of constants has no value while tracing
(`.numpy()`, int() raise); AutoGraph converts `if` / `for` over such tensors; and what tracing
knows of a constant shape still gives static shapes. The optimiser folds the constants back.
"""
import pytest

import tracegraph as tg


def node_ops(f, *args):
    return [n.op for n in f.get_concrete_function(*args).graph.as_graph_def().node]


@pytest.mark.parametrize("n", [1, 2, 5])
def test_unrolled_loop_over_constants_grows_the_graph(n):
    @tg.function
    def total(data):
        loss = tg.constant(0)
        for x, y in data:
            loss += tg.abs(y - x)
        return loss
    ops = node_ops(total, [(1, 1)] * n)
    # One Const for the start, then per item the Const of `y - x`, abs and add; the output.
    assert len(ops) == 2 + 3 * n, ops
    assert ops.count("abs") == n and ops.count("add") == n and ops.count("Const") == 1 + n
    assert int(total([(1, 3)] * n)) == 2 * n


def test_a_constant_expression_has_no_value_while_tracing():
    seen = {}

    @tg.function
    def f():
        a = tg.constant(2) + 1
        seen["repr"] = repr(a)
        with pytest.raises(AttributeError, match="symbolic"):
            a.numpy()
        with pytest.raises(TypeError, match="symbolic"):
            int(a)
        return a
    assert int(f()) == 3
    assert seen["repr"].startswith('<tg.Tensor "add:0"') or seen["repr"].startswith('Tensor("add:0"'), seen
    assert node_ops(f) == ["Const", "Const", "add", "Identity"]


def test_the_optimiser_folds_the_constant_nodes():
    @tg.function
    def f(x):
        scale = tg.constant(2.0) * 3.0 + 1.0
        return x * scale
    cf = f.get_concrete_function(tg.TensorSpec([None], tg.float32))
    traced = [n.op for n in cf.graph.as_graph_def().node]
    optimized = [n.op for n in cf.optimized_graph.as_graph_def().node]
    assert traced.count("mul") == 2 and traced.count("add") == 1, traced
    assert optimized.count("mul") == 1 and "add" not in optimized, optimized
    assert f(tg.constant([1.0, 2.0])).numpy().tolist() == [7.0, 14.0]


def test_if_over_a_constant_tensor_traces_both_branches(capsys):
    @tg.function
    def f():
        if tg.constant(True):
            print("then")
            y = tg.constant(1)
        else:
            print("else")
            y = tg.constant(2)
        return y
    assert int(f()) == 1
    assert capsys.readouterr().out == "then\nelse\n"
    assert node_ops(f).count("cond") == 1


def test_for_over_a_range_of_python_ints_is_one_loop_node():
    body_traces = []

    @tg.function
    def f():
        s = tg.constant(0)
        for i in tg.range(4):
            body_traces.append(1)
            s += i
        return s
    assert int(f()) == 6
    assert body_traces == [1]
    assert node_ops(f).count("while") == 1


def test_constant_shapes_still_give_static_shapes():
    shapes = []

    @tg.function
    def f(x):
        z = tg.zeros(tg.constant([2, 3]))
        r = tg.reshape(x, tg.constant([3, 2]) * 1)
        shapes.append((z.shape.as_list(), r.shape.as_list()))
        return z, r
    z, r = f(tg.range(6))
    assert shapes == [([2, 3], [3, 2])]
    assert r.numpy().tolist() == [[0, 1], [2, 3], [4, 5]] and z.shape == (2, 3)


def test_init_scope_computes_eagerly():
    values = []

    @tg.function
    def f():
        with tg.init_scope():
            values.append(int(tg.constant(2) + 1))
        return tg.constant(0)
    f()
    assert values == [3]


def test_a_constant_made_outside_is_captured_not_recomputed():
    outside = tg.constant([1.0, 2.0]) * 2.0

    @tg.function
    def f():
        return outside + 1.0
    assert f().numpy().tolist() == [3.0, 5.0]
    ops = node_ops(f)
    assert ops.count("mul") == 0 and ops.count("add") == 1, ops
