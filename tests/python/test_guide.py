"""The tf.function guide (the reference text the project shares, tf-function-guide), cell by cell
in its order, run as written with `import tracegraph as tf` and compared with what the guide prints
("tf." in tensor and spec texts reads "tg."; tracebacks on stderr are checked for their message only).
The text lost some lines of the cells (decorators, `try:`/`else:` lines); they are restored from the
guide's notebook.

  Cells (57)                                   | here
  Setup: import, assert_raises                 | run (module top)
  Usage: add, GradientTape, dense_layer        | run  test_usage
  Usage: conv timeit (keras Conv2D)            | run, timings not compared  test_usage_conv_timing
  Tracing: double x3, pretty_printed           | run  test_tracing
  Retracing: next_collatz, g x2, train, f      | run  test_controlling_retracing, ..._retrace
  Retracing: Fruit / __tf_tracing_type__       | run  test_custom_trace_types
  Concrete functions (7 cells), graphs (2)     | run  test_tracing, test_concrete_function_...
  AutoGraph: while loop, to_code               | run; random digits and TF's generated code
                                               |   checked for what they must be
  AutoGraph: fizzbuzz, dynamic_rnn             | run
  AutoGraph: measure_graph_size, Python lists  | run (11 and 32 nodes, as TF)
  AutoGraph: measure_graph_size, tf.data half  | skipped: tracegraph has no tf.data
  Side effects: f(1) f(1) f(2), list append    | run  test_python_side_effects
  Side effects: tf.py_function (2 cells)       | run  test_py_function
  Side effects: Model counter, init_scope      | run  test_python_counter_side_effect
  Side effects: buggy_consume_next             | run
  Side effects: good_consume_next              | skipped: tf.data iterator
  Outputs: leaky_function x2, captures_leaked  | run; the AttributeError's text is TF's followed
                                               |   by tracegraph's explanation  test_leaked_...
  Outputs: external_list / MyClass             | run (defines only)
  Recursion: both cells                        | run  test_recursive_functions
  Known issues: global/free variables (4)      | run  test_global_and_free_variables
  Known issues: Python objects (6)             | run  test_depending_on_python_objects
  Known issues: Variables (2), optimizers (3)  | run  test_creating_variables, ..._optimizers
Counts: 56 run (the two leak cells print TF's error text with tracegraph's explanation after it),
1 skipped (the tf.data iterator).
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


def test_usage(capsys):
    @tf.function  # The decorator converts `add` into a `PolymorphicFunction`.
    def add(a, b):
        return a + b
    print(repr(add(tf.ones([2, 2]), tf.ones([2, 2]))))  # [[2., 2.], [2., 2.]]
    expect(capsys, """
        <tg.Tensor: shape=(2, 2), dtype=float32, numpy=
        array([[2., 2.],
               [2., 2.]], dtype=float32)>
        """)

    v = tf.Variable(1.0)
    with tf.GradientTape() as tape:
        result = add(v, 1.0)
    print(repr(tape.gradient(result, v)))
    expect(capsys, "<tg.Tensor: shape=(), dtype=float32, numpy=1.0>\n")

    @tf.function
    def dense_layer(x, w, b):
        return add(tf.matmul(x, w), b)
    print(repr(dense_layer(tf.ones([3, 2]), tf.ones([2, 2]), tf.ones([2]))))
    expect(capsys, """
        <tg.Tensor: shape=(3, 2), dtype=float32, numpy=
        array([[3., 3.],
               [3., 3.],
               [3., 3.]], dtype=float32)>
        """)


def test_usage_conv_timing(capsys):
    import timeit
    conv_layer = tf.keras.layers.Conv2D(100, 3)

    @tf.function
    def conv_fn(image):
        return conv_layer(image)
    image = tf.zeros([1, 200, 200, 100])
    # Warm up
    conv_layer(image); conv_fn(image)  # noqa: E702
    print("Eager conv:", timeit.timeit(lambda: conv_layer(image), number=10))
    print("Function conv:", timeit.timeit(lambda: conv_fn(image), number=10))
    print("Note how there's not much difference in performance for convolutions")
    lines = capsys.readouterr().out.splitlines()
    # Timings differ from run to run: the lines' structure is what the guide shows.
    assert len(lines) == 3
    assert lines[0].startswith("Eager conv: ") and float(lines[0].split(": ")[1]) > 0
    assert lines[1].startswith("Function conv: ") and float(lines[1].split(": ")[1]) > 0
    assert lines[2] == "Note how there's not much difference in performance for convolutions"
    # Both paths compute the same convolution.
    import numpy as np
    np.testing.assert_allclose(conv_fn(image).numpy(), conv_layer(image).numpy(), rtol=1e-5, atol=1e-6)
    assert conv_fn(image).shape == (1, 198, 198, 100)


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
    captured = capsys.readouterr()
    assert captured.out == ("Caught expected exception \n"
                            "  <class 'tracegraph.errors.InvalidArgumentError'>:\n"), captured.out
    assert "tracegraph.errors.InvalidArgumentError: " in captured.err

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
    captured = capsys.readouterr()
    assert captured.out == "Caught expected exception \n  <class 'TypeError'>:\n", captured.out
    assert "Can not cast 3 to Literal[2]" in captured.err


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
    def train_one_step():
        pass

    @tf.function
    def train(num_steps):
        print("Tracing with num_steps = ", num_steps)
        tf.print("Executing with num_steps = ", num_steps)
        for _ in tf.range(num_steps):
            train_one_step()
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
        return fruit_a.flavor + fruit_b.flavor

    class Fruit:
        flavor = tf.constant([0, 0])

    class Apple(Fruit):
        flavor = tf.constant([1, 2])

    class Mango(Fruit):
        flavor = tf.constant([3, 4])
    get_mixed_flavor(Apple(), Mango())  # Traces a new concrete function
    get_mixed_flavor(Apple(), Mango())  # Traces a new concrete function again
    assert get_mixed_flavor.experimental_get_tracing_count() == 2

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
    expect(capsys, "<tg.Tensor: shape=(2,), dtype=int32, numpy=array([4, 6], dtype=int32)>\n")
    assert get_mixed_flavor.experimental_get_tracing_count() == 3


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



def test_py_function(capsys):
    @tf.py_function(Tout=tf.float32)
    def py_plus(x, y):
        print('Executing eagerly.')
        return x + y

    @tf.function
    def tf_wrapper(x, y):
        print('Tracing.')
        return py_plus(x, y)

    assert tf_wrapper(tf.constant(1.0), tf.constant(2.0)).numpy() == 3.0
    expect(capsys, "Tracing.\nExecuting eagerly.\n")
    # Later calls run the graph: the Python function again, the trace's print not.
    assert tf_wrapper(tf.constant(1.0), tf.constant(5.0)).numpy() == 6.0
    expect(capsys, "Executing eagerly.\n")


x = None  # the guide's notebook global that leaky_function leaks into
foo = None  # the guide's global in "Depending on Python global and free variables"


def test_leaked_tensors(capsys):
    global x
    x = None

    @tf.function
    def leaky_function(a):
        global x
        x = a + 1  # Bad - leaks local tensor
        return a + 2
    correct_a = leaky_function(tf.constant(1))
    print(correct_a.numpy())  # Good - value obtained from function's returns
    try:
        x.numpy()  # Bad - tensor leaked from inside the function, cannot be used here
    except AttributeError as expected:
        print(expected)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0] == "3", lines
    # TF's text, then what tracegraph adds: which tensor leaked from which function, and the fix.
    assert lines[1].startswith("'SymbolicTensor' object has no attribute 'numpy'"), lines[1]
    assert "'add:0' of function 'leaky_function'" in lines[1] and "leaked out of its trace" in lines[1]

    @tf.function
    def leaky_function(a):  # pylint: disable=function-redefined
        global x
        x = a + 1  # Bad - leaks local tensor
        return x  # Good - uses local tensor
    correct_a = leaky_function(tf.constant(1))
    print(correct_a.numpy())  # Good - value obtained from function's returns
    try:
        x.numpy()  # Bad - tensor leaked from inside the function, cannot be used here
    except AttributeError as expected:
        print(expected)

    @tf.function
    def captures_leaked_tensor(b):
        b += x  # Bad - `x` is leaked from `leaky_function`
        return b
    with assert_raises(TypeError):
        captures_leaked_tensor(tf.constant(2))
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == "2" and lines[1].startswith("'SymbolicTensor' object has no attribute 'numpy'")
    assert lines[2:] == ["Caught expected exception ", "  <class 'TypeError'>:"], lines
    # TF: "<tf.Tensor 'add:0' ...> is out of scope and cannot be used here."
    assert "'add:0' of function 'leaky_function'" in captured.err
    assert "was used while tracing function 'captures_leaked_tensor'" in captured.err

    class MyClass:
        def __init__(self):
            self.field = None
    external_list = []
    external_object = MyClass()

    def leaky_function():  # pylint: disable=function-redefined
        a = tf.constant(1)
        external_list.append(a)  # Bad - leaks tensor
        external_object.field = a  # Bad - leaks tensor
    del leaky_function  # the guide defines it only


def test_recursive_functions(capsys):
    @tf.function
    def recursive_fn(n):
        if n > 0:
            return recursive_fn(n - 1)
        else:
            return 1
    with assert_raises(Exception):
        recursive_fn(tf.constant(5))  # Bad - maximum recursion error.
    captured = capsys.readouterr()
    assert captured.out == "Caught expected exception \n  <class 'Exception'>:\n", captured.out
    # TF: StagingError ... RecursionError; tracegraph stops at the first self-call with the same types.
    assert "tracegraph.errors.StagingError: function 'recursive_fn' called itself" in captured.err

    @tf.function
    def recursive_fn(n):  # pylint: disable=function-redefined
        if n > 0:
            print('tracing')
            return recursive_fn(n - 1)
        else:
            return 1
    print(repr(recursive_fn(5)))  # Warning - multiple tracings
    expect(capsys, "tracing\n" * 5 + "<tg.Tensor: shape=(), dtype=int32, numpy=1>\n")


def test_python_counter_side_effect(capsys):
    class Model(tf.Module):
        def __init__(self):
            self.v = tf.Variable(0)
            self.counter = 0

        @tf.function
        def __call__(self):
            if self.counter == 0:
                # A python side-effect
                self.counter += 1
                self.v.assign_add(1)
            return self.v
    m = Model()
    for n in range(3):
        print(m().numpy())  # prints 1, 2, 3
    expect(capsys, "1\n2\n3\n")

    class Model(tf.Module):  # pylint: disable=function-redefined
        def __init__(self):
            self.v = tf.Variable(0)
            self.counter = 0

        @tf.function
        def __call__(self):
            if self.counter == 0:
                # Lifts ops out of function-building graphs
                with tf.init_scope():
                    self.counter += 1
                    self.v.assign_add(1)
            return self.v
    m = Model()
    for n in range(3):
        print(m().numpy())  # prints 1, 1, 1
    expect(capsys, "1\n1\n1\n")


# ---- AutoGraph transformations -------------------------------------------------------------------

def test_autograph_simple_loop(capsys):
    # A simple loop

    @tf.function
    def f(x):
        while tf.reduce_sum(x) > 1:
            tf.print(x)
            x = tf.tanh(x)
        return x
    result = f(tf.random.uniform([5]))
    print(repr(result))
    lines = capsys.readouterr().out.splitlines()
    # The guide's digits come from TF's random numbers: check what they must be instead. Each
    # iteration prints x (5 numbers in brackets) while its sum is > 1; the result's sum is <= 1.
    printed = [line for line in lines if line.startswith("[") and not line.startswith("[[")]
    assert lines[-3:-1] == ["<tg.Tensor: shape=(5,), dtype=float32, numpy=",
                           lines[-2]] and lines[-3].startswith("<tg.Tensor: shape=(5,)")
    values = [[float(v) for v in line.strip("[]").split()] for line in printed]
    assert all(len(v) == 5 and sum(v) > 1 for v in values)
    for before, after in zip(values, values[1:]):
        assert after == pytest.approx([__import__("math").tanh(b) for b in before], rel=1e-5)
    assert float(tf.reduce_sum(result)) <= 1

    print(tf.autograph.to_code(f.python_function))
    code = capsys.readouterr().out
    assert code.startswith("def f(x):") and "ag__.while_stmt(" in code


def test_autograph_conditionals(capsys):
    @tf.function
    def fizzbuzz(n):
        for i in tf.range(1, n + 1):
            print('Tracing for loop')
            if i % 15 == 0:
                print('Tracing fizzbuzz branch')
                tf.print('fizzbuzz')
            elif i % 3 == 0:
                print('Tracing fizz branch')
                tf.print('fizz')
            elif i % 5 == 0:
                print('Tracing buzz branch')
                tf.print('buzz')
            else:
                print('Tracing default branch')
                tf.print(i)
    fizzbuzz(tf.constant(5))
    fizzbuzz(tf.constant(20))
    expect(capsys, """
        Tracing for loop
        Tracing fizzbuzz branch
        Tracing fizz branch
        Tracing buzz branch
        Tracing default branch
        1
        2
        fizz
        4
        buzz
        1
        2
        fizz
        4
        buzz
        fizz
        7
        8
        fizz
        buzz
        11
        fizz
        13
        14
        fizzbuzz
        16
        17
        fizz
        19
        buzz
        """)


def test_autograph_loops_over_python_data_unroll(capsys):
    def measure_graph_size(f, *args):
        g = f.get_concrete_function(*args).graph
        print("{}({}) contains {} nodes in its graph".format(
            f.__name__, ', '.join(map(str, args)), len(g.as_graph_def().node)))

    @tf.function
    def train(dataset):
        loss = tf.constant(0)
        for x, y in dataset:
            loss += tf.abs(y - x)  # Some dummy computation.
        return loss
    small_data = [(1, 1)] * 3
    big_data = [(1, 1)] * 10
    measure_graph_size(train, small_data)
    measure_graph_size(train, big_data)
    assert capsys.readouterr().out == textwrap.dedent("""\
        train([(1, 1), (1, 1), (1, 1)]) contains 11 nodes in its graph
        train([(1, 1), (1, 1), (1, 1), (1, 1), (1, 1), (1, 1), (1, 1), (1, 1), (1, 1), (1, 1)]) contains 32 nodes in its graph
        """)


def test_autograph_tensor_array_accumulates(capsys):
    batch_size = 2
    seq_len = 3
    feature_size = 4

    def rnn_step(inp, state):
        return inp + state

    @tf.function
    def dynamic_rnn(rnn_step, input_data, initial_state):
        # [batch, time, features] -> [time, batch, features]
        input_data = tf.transpose(input_data, [1, 0, 2])
        max_seq_len = input_data.shape[0]

        states = tf.TensorArray(tf.float32, size=max_seq_len)
        state = initial_state
        for i in tf.range(max_seq_len):
            state = rnn_step(input_data[i], state)
            states = states.write(i, state)
        return tf.transpose(states.stack(), [1, 0, 2])
    data = tf.random.uniform([batch_size, seq_len, feature_size])
    result = dynamic_rnn(rnn_step, data, tf.zeros([batch_size, feature_size]))
    print(repr(result))
    out = capsys.readouterr().out
    assert out.startswith("<tg.Tensor: shape=(2, 3, 4), dtype=float32, numpy=\narray([[[")
    # With a zero initial state each step adds the input: the states are running sums over time.
    import numpy as np
    np.testing.assert_allclose(result.numpy(), np.cumsum(data.numpy(), axis=1), rtol=1e-6)


# ---- Known issues ---------------------------------------------------------------------------------

def test_global_and_free_variables(capsys):
    global foo

    @tf.function
    def buggy_add():
        return 1 + foo

    @tf.function
    def recommended_add(foo):
        return 1 + foo
    foo = 1
    print("Buggy:", buggy_add())
    print("Correct:", recommended_add(foo))
    expect(capsys, """
        Buggy: tg.Tensor(2, shape=(), dtype=int32)
        Correct: tg.Tensor(2, shape=(), dtype=int32)
        """)

    print("Updating the value of `foo` to 100!")
    foo = 100
    print("Buggy:", buggy_add())  # Did not change!
    print("Correct:", recommended_add(foo))
    expect(capsys, """
        Updating the value of `foo` to 100!
        Buggy: tg.Tensor(2, shape=(), dtype=int32)
        Correct: tg.Tensor(101, shape=(), dtype=int32)
        """)

    @tf.function
    def variable_add():
        return 1 + foo
    foo = tf.Variable(1)
    print("Variable:", variable_add())
    expect(capsys, "Variable: tg.Tensor(2, shape=(), dtype=int32)\n")

    print("Updating the value of `foo` to 100!")
    foo.assign(100)
    print("Variable:", variable_add())
    expect(capsys, """
        Updating the value of `foo` to 100!
        Variable: tg.Tensor(101, shape=(), dtype=int32)
        """)


def test_depending_on_python_objects(capsys):
    class SimpleModel(tf.Module):
        def __init__(self):
            # These values are *not* tf.Variables.
            self.bias = 0.
            self.weight = 2.

    @tf.function
    def evaluate(model, x):
        return model.weight * x + model.bias
    simple_model = SimpleModel()
    x = tf.constant(10.)
    print(evaluate(simple_model, x))
    expect(capsys, "tg.Tensor(20.0, shape=(), dtype=float32)\n")

    print("Adding bias!")
    simple_model.bias += 5.0
    print(evaluate(simple_model, x))  # Didn't change :(
    expect(capsys, """
        Adding bias!
        tg.Tensor(20.0, shape=(), dtype=float32)
        """)

    def evaluate(model, x):
        return model.weight * x + model.bias
    new_model = SimpleModel()
    evaluate_no_bias = tf.function(evaluate).get_concrete_function(new_model, x)
    # Don't pass in `new_model`. `tf.function` already captured its state during tracing.
    print(evaluate_no_bias(x))
    expect(capsys, "tg.Tensor(20.0, shape=(), dtype=float32)\n")

    print("Adding bias!")
    new_model.bias += 5.0
    # Create new `tf.function` and `ConcreteFunction` since you modified `new_model`.
    evaluate_with_bias = tf.function(evaluate).get_concrete_function(new_model, x)
    print(evaluate_with_bias(x))  # Don't pass in `new_model`.
    expect(capsys, """
        Adding bias!
        tg.Tensor(25.0, shape=(), dtype=float32)
        """)

    class BetterModel:
        def __init__(self):
            self.bias = tf.Variable(0.)
            self.weight = tf.Variable(2.)

    @tf.function
    def evaluate(model, x):  # pylint: disable=function-redefined
        return model.weight * x + model.bias
    better_model = BetterModel()
    print(evaluate(better_model, x))
    expect(capsys, "tg.Tensor(20.0, shape=(), dtype=float32)\n")

    print("Adding bias!")
    better_model.bias.assign_add(5.0)  # Note: instead of better_model.bias += 5
    print(evaluate(better_model, x))  # This works!
    expect(capsys, """
        Adding bias!
        tg.Tensor(25.0, shape=(), dtype=float32)
        """)
    assert evaluate.experimental_get_tracing_count() == 1  # the Variable changed, not the trace


def test_creating_variables(capsys):
    @tf.function
    def f(x):
        v = tf.Variable(1.0)
        return v
    with assert_raises(ValueError):
        f(1.0)
    captured = capsys.readouterr()
    assert captured.out == "Caught expected exception \n  <class 'ValueError'>:\n", captured.out
    # TF: "tf.function only supports singleton tf.Variables created on the first call."
    assert "only supports singleton tg.Variables created on the first call" in captured.err
    assert "tg::" not in captured.err  # the Python package's words

    class Count(tf.Module):
        def __init__(self):
            self.count = None

        @tf.function
        def __call__(self):
            if self.count is None:
                self.count = tf.Variable(0)
            return self.count.assign_add(1)
    c = Count()
    print(c())
    print(c())
    expect(capsys, """
        tg.Tensor(1, shape=(), dtype=int32)
        tg.Tensor(2, shape=(), dtype=int32)
        """)


def test_using_multiple_optimizers(capsys):
    opt1 = tf.keras.optimizers.Adam(learning_rate=1e-2)
    opt2 = tf.keras.optimizers.Adam(learning_rate=1e-3)

    @tf.function
    def train_step(w, x, y, optimizer):
        with tf.GradientTape() as tape:
            L = tf.reduce_sum(tf.square(w * x - y))
        gradients = tape.gradient(L, [w])
        optimizer.apply_gradients(zip(gradients, [w]))
    w = tf.Variable(2.)
    x = tf.constant([-1.])
    y = tf.constant([2.])
    train_step(w, x, y, opt1)
    print("Calling `train_step` with different optimizer...")
    with assert_raises(ValueError):
        train_step(w, x, y, opt2)
    captured = capsys.readouterr()
    assert captured.out == ("Calling `train_step` with different optimizer...\n"
                            "Caught expected exception \n  <class 'ValueError'>:\n"), captured.out
    assert "only supports singleton tg.Variables created on the first call" in captured.err
    assert "one tg.function per optimizer" in captured.err and "tg::" not in captured.err
    # Adam's first step moves w by the learning rate, against the gradient's sign.
    assert float(w.numpy()) == pytest.approx(2.0 - 1e-2, abs=1e-6)

    class TrainStep(tf.Module):
        def __init__(self, optimizer):
            self.optimizer = optimizer

        @tf.function
        def __call__(self, w, x, y):
            with tf.GradientTape() as tape:
                L = tf.reduce_sum(tf.square(w * x - y))
            gradients = tape.gradient(L, [w])
            self.optimizer.apply_gradients(zip(gradients, [w]))
    opt1 = tf.keras.optimizers.Adam(learning_rate=1e-2)
    opt2 = tf.keras.optimizers.Adam(learning_rate=1e-3)
    train_o1 = TrainStep(opt1)
    train_o2 = TrainStep(opt2)
    train_o1(w, x, y)
    train_o2(w, x, y)
    assert float(w.numpy()) == pytest.approx(2.0 - 2e-2 - 1e-3, abs=1e-6)

    opt1 = tf.keras.optimizers.Adam(learning_rate=1e-2)
    opt2 = tf.keras.optimizers.Adam(learning_rate=1e-3)

    # Not a tf.function.
    def train_step(w, x, y, optimizer):  # pylint: disable=function-redefined
        with tf.GradientTape() as tape:
            L = tf.reduce_sum(tf.square(w * x - y))
        gradients = tape.gradient(L, [w])
        optimizer.apply_gradients(zip(gradients, [w]))
    w = tf.Variable(2.)
    x = tf.constant([-1.])
    y = tf.constant([2.])
    # Make a new tf.function and ConcreteFunction for each optimizer.
    train_step_1 = tf.function(train_step)
    train_step_2 = tf.function(train_step)
    for i in range(10):
        if i % 2 == 0:
            train_step_1(w, x, y, opt1)
        else:
            train_step_2(w, x, y, opt2)
    assert capsys.readouterr().out == ""
    # Five Adam steps of each rate; the gradient keeps its sign, so each moves w by about its rate.
    assert float(w.numpy()) == pytest.approx(2.0 - 5 * 1e-2 - 5 * 1e-3, abs=1e-4)
    assert train_step_1.experimental_get_tracing_count() == 1
    assert train_step_2.experimental_get_tracing_count() == 1
