"""The tf.function guide's tracing sections (../shared/reference/tf-function-guide.txt), run as
written with `import tracegraph as tf`, printing what the guide prints (TF's "tf." in tensor and
spec texts reads "tg." here).

Cells left out, with the reason: Keras (conv_layer) and tf.data; GradientTape and Variables
(the Variables slice tests them); the `for _ in tf.range(num_steps)` loop of `train`, which over a
tensor needs AutoGraph (a later slice) - the cell runs without its empty loop; py_function.
"""
import contextlib
import textwrap
import traceback

import pytest

import tracegraph as tf


@contextlib.contextmanager
def assert_raises(error_class):
    try:
        yield
    except error_class as e:
        print('Caught expected exception \n  {}:'.format(error_class))
        traceback.print_exc(limit=2)
    except Exception as e:
        raise e
    else:
        raise Exception('Expected {} to be raised but no error was raised!'.format(error_class))


def expect(capsys, text):
    got = capsys.readouterr().out
    assert got == textwrap.dedent(text).lstrip("\n"), got


def test_tracing(capsys):
    @tf.function
    def double(a):
        print("Tracing with", a)
        return a + a
    print(double(tf.constant(1)))
    print()
    print(double(tf.constant(1.1)))
    print()
    print(double(tf.constant("a")))
    print()
    expect(capsys, """
        Tracing with Tensor("a:0", shape=(), dtype=int32)
        tg.Tensor(2, shape=(), dtype=int32)

        Tracing with Tensor("a:0", shape=(), dtype=float32)
        tg.Tensor(2.2, shape=(), dtype=float32)

        Tracing with Tensor("a:0", shape=(), dtype=string)
        tg.Tensor(b'aa', shape=(), dtype=string)

        """)
    # This doesn't print 'Tracing with ...'
    print(double(tf.constant("b")))
    expect(capsys, "tg.Tensor(b'bb', shape=(), dtype=string)\n")
    print(double.pretty_printed_concrete_signatures())
    expect(capsys, """
        Input Parameters:
          a (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(), dtype=tg.int32, name=None)
        Output Type:
          TensorSpec(shape=(), dtype=tg.int32, name=None)
        Input Parameters:
          a (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(), dtype=tg.float32, name=None)
        Output Type:
          TensorSpec(shape=(), dtype=tg.float32, name=None)
        Input Parameters:
          a (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(), dtype=tg.string, name=None)
        Output Type:
          TensorSpec(shape=(), dtype=tg.string, name=None)
        """)

    print("Obtaining concrete trace")
    double_strings = double.get_concrete_function(tf.constant("a"))
    print("Executing traced function")
    print(double_strings(tf.constant("a")))
    print(double_strings(a=tf.constant("b")))
    double_strings_from_inputspec = double.get_concrete_function(tf.TensorSpec(shape=[], dtype=tf.string))
    print(double_strings_from_inputspec(tf.constant("c")))
    print(double_strings)
    print(double_strings.function_type)
    expect(capsys, """
        Obtaining concrete trace
        Executing traced function
        tg.Tensor(b'aa', shape=(), dtype=string)
        tg.Tensor(b'bb', shape=(), dtype=string)
        tg.Tensor(b'cc', shape=(), dtype=string)
        ConcreteFunction Input Parameters:
          a (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(), dtype=tg.string, name=None)
        Output Type:
          TensorSpec(shape=(), dtype=tg.string, name=None)
        (a: TensorSpec(shape=(), dtype=tg.string, name=None)) -> TensorSpec(shape=(), dtype=tg.string, name=None)
        """)
    with assert_raises(tf.errors.InvalidArgumentError):
        double_strings(tf.constant(1))
    assert "Caught expected exception" in capsys.readouterr().out

    graph = double_strings.graph
    for node in graph.as_graph_def().node:
        print(f'{node.input} -> {node.name}')
    atomic_fn = double_strings.inference_fn
    print(repr(atomic_fn(tf.constant("a"))))
    expect(capsys, """
        [] -> a
        ['a', 'a'] -> add
        ['add'] -> Identity
        <tg.Tensor: shape=(), dtype=string, numpy=b'aa'>
        """)


def test_concrete_function_python_arguments(capsys):
    @tf.function
    def pow(a, b):  # pylint: disable=redefined-builtin
        return a ** b
    square = pow.get_concrete_function(a=tf.TensorSpec(None, tf.float32), b=2)
    print(square)
    expect(capsys, """
        ConcreteFunction Input Parameters:
          a (POSITIONAL_OR_KEYWORD): TensorSpec(shape=<unknown>, dtype=tg.float32, name=None)
          b (POSITIONAL_OR_KEYWORD): Literal[2]
        Output Type:
          TensorSpec(shape=<unknown>, dtype=tg.float32, name=None)
        """)
    assert square(tf.constant(10.0)) == 100
    with assert_raises(TypeError):
        square(tf.constant(10.0), b=3)
    assert "Can not cast 3 to Literal[2]" in capsys.readouterr().err


def test_controlling_retracing(capsys):
    @tf.function(input_signature=(tf.TensorSpec(shape=[None], dtype=tf.int32),))
    def next_collatz(x):
        print("Tracing with", x)
        return tf.where(x % 2 == 0, x // 2, 3 * x + 1)
    print(next_collatz(tf.constant([1, 2])))
    # You specified a 1-D tensor in the input signature, so this should fail.
    with assert_raises(TypeError):
        next_collatz(tf.constant([[1, 2], [3, 4]]))
    # You specified an int32 dtype in the input signature, so this should fail.
    with assert_raises(TypeError):
        next_collatz(tf.constant([1.0, 2.0]))
    captured = capsys.readouterr()
    assert captured.out == textwrap.dedent("""\
        Tracing with Tensor("x:0", shape=(None,), dtype=int32)
        tg.Tensor([4 1], shape=(2,), dtype=int32)
        Caught expected exception 
          <class 'TypeError'>:
        Caught expected exception 
          <class 'TypeError'>:
        """)
    assert ("Can not cast TensorSpec(shape=(2, 2), dtype=tg.int32, name=None) to "
            "TensorSpec(shape=(None,), dtype=tg.int32, name=None)") in captured.err

    @tf.function(input_signature=(tf.TensorSpec(shape=[None], dtype=tf.int32),))
    def g(x):
        print('Tracing with', x)
        return x
    # No retrace!
    print(g(tf.constant([1, 2, 3])))
    print(g(tf.constant([1, 2, 3, 4, 5])))
    expect(capsys, """
        Tracing with Tensor("x:0", shape=(None,), dtype=int32)
        tg.Tensor([1 2 3], shape=(3,), dtype=int32)
        tg.Tensor([1 2 3 4 5], shape=(5,), dtype=int32)
        """)

    @tf.function(reduce_retracing=True)
    def g(x):  # pylint: disable=function-redefined
        print('Tracing with', x)
        return x
    # Traces once.
    print(g(tf.constant([1, 2, 3])))
    # Traces again, but more generalized this time.
    print(g(tf.constant([1, 2, 3, 4, 5])))
    # No more tracing!
    print(g(tf.constant([1, 2, 3, 4, 5, 6, 7])))
    print(g(tf.constant([1, 2, 3, 4, 5, 6, 7, 8, 9])))
    expect(capsys, """
        Tracing with Tensor("x:0", shape=(3,), dtype=int32)
        tg.Tensor([1 2 3], shape=(3,), dtype=int32)
        Tracing with Tensor("x:0", shape=(None,), dtype=int32)
        tg.Tensor([1 2 3 4 5], shape=(5,), dtype=int32)
        tg.Tensor([1 2 3 4 5 6 7], shape=(7,), dtype=int32)
        tg.Tensor([1 2 3 4 5 6 7 8 9], shape=(9,), dtype=int32)
        """)


def test_python_arguments_retrace(capsys):
    @tf.function
    def train(num_steps):
        print("Tracing with num_steps = ", num_steps)
        tf.print("Executing with num_steps = ", num_steps)
    print("Retracing occurs for different Python arguments.")
    train(num_steps=10)
    train(num_steps=20)
    print()
    print("Traces are reused for Tensor arguments.")
    train(num_steps=tf.constant(10))
    train(num_steps=tf.constant(20))
    expect(capsys, """
        Retracing occurs for different Python arguments.
        Tracing with num_steps =  10
        Executing with num_steps =  10
        Tracing with num_steps =  20
        Executing with num_steps =  20

        Traces are reused for Tensor arguments.
        Tracing with num_steps =  Tensor("num_steps:0", shape=(), dtype=int32)
        Executing with num_steps =  10
        Executing with num_steps =  20
        """)

    def f():
        print('Tracing!')
        tf.print('Executing')
    tf.function(f)()
    tf.function(f)()
    expect(capsys, "Tracing!\nExecuting\nTracing!\nExecuting\n")


def test_custom_trace_types(capsys):
    @tf.function
    def get_mixed_flavor(fruit_a, fruit_b):
        print("traced")
        return fruit_a.flavor + fruit_b.flavor

    class Fruit:
        flavor = tf.constant([0, 0])

    class Apple(Fruit):
        flavor = tf.constant([1, 2])

    class Mango(Fruit):
        flavor = tf.constant([3, 4])
    get_mixed_flavor(Apple(), Mango())  # Traces a new concrete function
    get_mixed_flavor(Apple(), Mango())  # Traces a new concrete function again
    assert capsys.readouterr().out == "traced\ntraced\n"

    class FruitTraceType(tf.types.experimental.TraceType):
        def __init__(self, fruit):
            self.fruit_type = type(fruit)
            self.fruit_value = fruit

        def is_subtype_of(self, other):
            return (type(other) is FruitTraceType and self.fruit_type is other.fruit_type)

        def most_specific_common_supertype(self, others):
            return self if all(self == other for other in others) else None

        def placeholder_value(self, placeholder_context=None):
            return self.fruit_value

        def __eq__(self, other):
            return type(other) is FruitTraceType and self.fruit_type == other.fruit_type

        def __hash__(self):
            return hash(self.fruit_type)

    class FruitWithTraceType:
        def __tf_tracing_type__(self, context):
            return FruitTraceType(self)

    class AppleWithTraceType(FruitWithTraceType):
        flavor = tf.constant([1, 2])

    class MangoWithTraceType(FruitWithTraceType):
        flavor = tf.constant([3, 4])
    get_mixed_flavor(AppleWithTraceType(), MangoWithTraceType())  # Traces a new concrete function
    print(repr(get_mixed_flavor(AppleWithTraceType(), MangoWithTraceType())))  # Re-uses the trace
    expect(capsys, """
        traced
        <tg.Tensor: shape=(2,), dtype=int32, numpy=array([4, 6], dtype=int32)>
        """)


def test_python_side_effects(capsys):
    @tf.function
    def f(x):
        print("Traced with", x)
        tf.print("Executed with", x)
    f(1)
    f(1)
    f(2)
    expect(capsys, """
        Traced with 1
        Executed with 1
        Executed with 1
        Traced with 2
        Executed with 2
        """)

    external_list = []

    @tf.function
    def side_effect(x):
        print('Python side effect')
        external_list.append(x)
    side_effect(1)
    side_effect(1)
    side_effect(1)
    # The list append only happened once!
    assert len(external_list) == 1

    @tf.function
    def buggy_consume_next(iterator):
        tf.print("Value:", next(iterator))
    iterator = iter([1, 2, 3])
    buggy_consume_next(iterator)
    # This reuses the first value from the iterator, rather than consuming the next value.
    buggy_consume_next(iterator)
    buggy_consume_next(iterator)
    expect(capsys, "Python side effect\nValue: 1\nValue: 1\nValue: 1\n")


def test_leaked_tensors(capsys):
    x = None

    @tf.function
    def leaky_function(a):
        nonlocal x
        x = a + 1  # Bad - leaks local tensor
        return a + 2
    correct_a = leaky_function(tf.constant(1))
    print(correct_a.numpy())  # Good - value obtained from function's returns
    with pytest.raises(Exception):
        x.numpy()  # Bad - tensor leaked from inside the function, cannot be used here

    @tf.function
    def captures_leaked_tensor(b):
        b += x  # Bad - `x` is leaked from `leaky_function`
        return b
    with assert_raises(TypeError):
        captures_leaked_tensor(tf.constant(2))
    out = capsys.readouterr().out
    assert out.startswith("3\nCaught expected exception")


def test_recursive_functions(capsys):
    @tf.function
    def recursive_fn(n):
        if n > 0:
            return recursive_fn(n - 1)
        else:
            return 1
    with assert_raises(Exception):
        recursive_fn(tf.constant(5))  # Bad - a tensor condition needs AutoGraph; recursion fails
    assert "Caught expected exception" in capsys.readouterr().out

    @tf.function
    def recursive_fn(n):  # pylint: disable=function-redefined
        if n > 0:
            print('tracing')
            return recursive_fn(n - 1)
        else:
            return 1
    assert recursive_fn(5) == 1  # Warning - multiple tracings
    assert capsys.readouterr().out == "tracing\n" * 5
