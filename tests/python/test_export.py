"""tg.saved_model and tg.train from Python: files saved from Python load in Python, in C++ (the
tgx tool, which loads with tg::load) and back; C++'s golden files load in Python with the values
tests/export/golden_test.cpp expects; bad files and calls raise Python exceptions."""
import pathlib
import subprocess
from collections import namedtuple

import numpy as np
import pytest

import tracegraph as tg
from conftest import BUILD, assert_tensor, tgx_path

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "export" / "golden"
def tgx(*args):
    return subprocess.run([str(tgx_path()), *map(str, args)], capture_output=True, text=True, timeout=120)


# ---- Python -> Python -------------------------------------------------------------------

def test_saved_function_loads_and_computes_the_same(tmp_path):
    w = tg.Variable(tg.constant([[1.0, 2.0], [3.0, 4.0]]), name="w")

    @tg.function
    def f(x, scale=2):
        return tg.matmul(x, w) * scale

    x = tg.constant([[1.0, -1.0]])
    want2, want3 = f(x).numpy(), f(x, 3).numpy()
    tg.saved_model.save(f, tmp_path / "f.tgx")
    loaded = tg.saved_model.load(tmp_path / "f.tgx")
    assert loaded.name == "f"
    assert len(loaded.signatures) == 2 and "Literal[3]" in loaded.signatures[1]
    assert_tensor(loaded(x), want2)
    assert_tensor(loaded(x, 3), want3)
    assert_tensor(loaded(x, scale=3), want3)
    assert_tensor(loaded(np.array([[1.0, -1.0]], np.float32)), want2)  # NumPy in
    [v] = loaded.variables
    np.testing.assert_array_equal(v.numpy(), w.numpy())
    with pytest.raises(TypeError, match="(?s)never traces.*Option 2"):
        loaded(x, 5)  # no trace for the literal 5
    with pytest.raises(TypeError, match="unexpected keyword argument 'y'"):
        loaded(x, y=1)


def test_dispatch_prefers_the_exact_signature_then_the_most_specific(tmp_path):
    @tg.function
    def f(x):
        return tg.reduce_sum(x) + tg.cast(tg.size(x), tg.float32) * 0.0 + float(x.shape[0] or -1)

    f.get_concrete_function(tg.TensorSpec([3], tg.float32))  # shape[0] is 3 in this trace
    f.get_concrete_function(tg.TensorSpec([None], tg.float32))  # and None (-1) in this one
    tg.saved_model.save(f, tmp_path / "f.tgx")
    loaded = tg.saved_model.load(tmp_path / "f.tgx")
    assert loaded(tg.constant([1.0, 2.0, 3.0])).numpy() == pytest.approx(6.0 + 3.0)
    assert loaded(tg.constant([1.0, 2.0])).numpy() == pytest.approx(3.0 - 1.0)
    with pytest.raises(TypeError, match="Could not find matching concrete function"):
        loaded(tg.constant([1, 2]))  # int32: no signature


def test_structured_results_come_back_as_structures(tmp_path):
    Pair = namedtuple("Pair", "a b")

    @tg.function
    def f(x):
        return {"sum": tg.reduce_sum(x), "parts": (x * 2.0, [x + 1.0]), "k": 7, "pair": Pair(x, x)}

    x = tg.constant([1.0, 2.0])
    f(x)
    tg.saved_model.save(f, tmp_path / "f.tgx")
    out = tg.saved_model.load(tmp_path / "f.tgx")(x)
    assert set(out) == {"sum", "parts", "k", "pair"}
    assert_tensor(out["sum"], np.float32(3.0))
    assert isinstance(out["parts"], tuple) and isinstance(out["parts"][1], list)
    assert_tensor(out["parts"][0], np.array([2.0, 4.0], np.float32))
    assert_tensor(out["parts"][1][0], np.array([2.0, 3.0], np.float32))
    assert out["k"] == 7
    assert isinstance(out["pair"], tuple) and len(out["pair"]) == 2  # the class is not in the file


def test_signatures_choose_what_is_saved(tmp_path):
    @tg.function
    def f(x):
        return x + 1

    c_float = f.get_concrete_function(tg.TensorSpec([None], tg.float32))
    f.get_concrete_function(tg.TensorSpec([None], tg.int32))
    tg.saved_model.save(f, tmp_path / "f.tgx", signatures=c_float)
    loaded = tg.saved_model.load(tmp_path / "f.tgx")
    assert len(loaded.signatures) == 1
    with pytest.raises(TypeError):
        loaded(tg.constant([1, 2]))

    @tg.function
    def g(x):
        return x

    g(tg.constant(1.0))
    with pytest.raises(ValueError, match="is not one of function 'f'"):
        tg.saved_model.save(f, tmp_path / "x.tgx", signatures=[g.get_concrete_function(tg.constant(1.0))])


def test_what_cannot_leave_the_process_is_refused(tmp_path):
    class Config:
        pass

    @tg.function
    def f(x, config):
        del config
        return x * 2.0

    config = Config()
    f(tg.constant(1.0), config)
    with pytest.raises(ValueError, match="matched by identity"):
        tg.saved_model.save(f, tmp_path / "f.tgx")

    class Step(tg.types.experimental.TraceType):
        def is_subtype_of(self, other):
            return self == other

        def most_specific_common_supertype(self, others):
            return self if all(self == o for o in others) else None

        def placeholder_value(self, placeholder_context=None):
            return 1

        def __eq__(self, other):
            return isinstance(other, Step)

        def __hash__(self):
            return 1

    class Custom:
        def __tf_tracing_type__(self, context):
            return Step()

    @tg.function
    def g(x, c):
        return x * float(c)

    g(tg.constant(1.0), Custom())
    with pytest.raises(ValueError, match="TraceType written in Python"):
        tg.saved_model.save(g, tmp_path / "g.tgx")

    @tg.function
    def never(x):
        return x

    with pytest.raises(ValueError, match="never traced"):
        tg.saved_model.save(never, tmp_path / "n.tgx")
    with pytest.raises(TypeError, match="expects a tg.function"):
        tg.saved_model.save(lambda x: x, tmp_path / "l.tgx")
    assert not any(tmp_path.iterdir())  # nothing written


def test_a_loaded_train_step_trains_and_saves_again(tmp_path):
    w = tg.Variable(tg.constant([[0.5], [-0.5]]), name="w")

    @tg.function(input_signature=[tg.TensorSpec([None, 2], tg.float32), tg.TensorSpec([None, 1], tg.float32)])
    def train_step(x, y):
        with tg.GradientTape() as tape:
            loss = tg.reduce_mean(tg.square(tg.matmul(x, w) - y))
        w.assign_sub(0.1 * tape.gradient(loss, w))
        return loss

    train_step.get_concrete_function()
    tg.saved_model.save(train_step, tmp_path / "t.tgx")
    loaded = tg.saved_model.load(tmp_path / "t.tgx")
    [lw] = loaded.variables
    x = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)
    y = np.array([[1.0], [0.0]], np.float32)
    w0 = lw.numpy()
    err = x @ w0 - y
    loss = loaded(x, y)
    assert loss.numpy() == pytest.approx(np.mean(err ** 2), rel=1e-6)
    np.testing.assert_allclose(lw.numpy(), w0 - 0.1 * (2.0 / 2.0) * x.T @ err, rtol=1e-6)
    np.testing.assert_array_equal(w.numpy(), [[0.5], [-0.5]])  # the original is untouched
    tg.saved_model.save(loaded, tmp_path / "t2.tgx")
    again = tg.saved_model.load(tmp_path / "t2.tgx")
    np.testing.assert_array_equal(again.variables[0].numpy(), lw.numpy())


def test_checkpoints_restore_by_name(tmp_path):
    class Model(tg.Module):
        def __init__(self):
            super().__init__()
            self.w = tg.Variable(tg.constant([1.0, 2.0]), name="model/w")
            self.step = tg.Variable(tg.constant(5, tg.int64), name="model/step")

    m = Model()
    tg.train.save_variables(tmp_path / "ckpt.tgx", m)
    m.w.assign([0.0, 0.0])
    m.step.assign(0)
    tg.train.restore_variables(tmp_path / "ckpt.tgx", [m.step, m.w])
    np.testing.assert_array_equal(m.w.numpy(), [1.0, 2.0])
    assert m.step.numpy() == 5
    with pytest.raises(ValueError, match="no Variable named 'other'"):
        tg.train.restore_variables(tmp_path / "ckpt.tgx", tg.Variable(1.0, name="other"))
    with pytest.raises(ValueError, match="both named"):
        tg.train.save_variables(tmp_path / "dup.tgx", [tg.Variable(1.0, name="a"), tg.Variable(2.0, name="a")])


# ---- Python -> C++ (the tgx tool loads with tg::load) -------------------------------------

def test_a_python_saved_function_runs_in_cpp(tmp_path):
    w = tg.Variable(tg.constant([[1.0, 2.0, 0.5], [3.0, 4.0, -1.0]]), name="dense/kernel")

    @tg.function(input_signature=[tg.TensorSpec([None, 2], tg.float32)])
    def predict(x):
        return tg.nn.relu(tg.matmul(x, w))

    x = np.array([[1.0, -1.0], [0.5, 2.0]], np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "want.npy", predict(x).numpy())
    tg.saved_model.save(predict, tmp_path / "predict.tgx")
    checked = tgx("validate", tmp_path / "predict.tgx")
    assert checked.returncode == 0, checked.stderr
    assert "function 'predict'" in checked.stdout and "1 Variable" in checked.stdout
    ran = tgx("run", tmp_path / "predict.tgx", "--input", f"x={tmp_path / 'x.npy'}",
              "--expect", f"output_0={tmp_path / 'want.npy'}", "--rtol", "1e-6")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    wrong = np.save(tmp_path / "wrong.npy", predict(x).numpy() + 1.0)
    del wrong
    mismatch = tgx("run", tmp_path / "predict.tgx", "--input", f"x={tmp_path / 'x.npy'}",
                   "--expect", f"output_0={tmp_path / 'wrong.npy'}")
    assert mismatch.returncode != 0  # the comparison can fail


def test_tgx_reads_the_signatures_of_a_python_file(tmp_path):
    @tg.function
    def f(x, n):
        return (x * float(n), tg.reduce_sum(x))

    f(tg.constant([1.0, 2.0]), 3)
    tg.saved_model.save(f, tmp_path / "f.tgx")
    shown = tgx("inspect", tmp_path / "f.tgx")
    assert shown.returncode == 0, shown.stderr
    assert "Literal[3]" in shown.stdout


# ---- C++ -> Python ----------------------------------------------------------------------

def golden_w1():
    return np.array([[0.1 * (i - j) + 0.05 for j in range(3)] for i in range(4)], np.float32)


def mlp(x):
    w2 = np.array([[0.5, -0.25], [-0.75, 0.5], [0.25, 1.0]], np.float32)
    h = np.maximum(x @ golden_w1() + np.array([0.1, -0.1, 0.0], np.float32), 0)
    z = h @ w2
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_the_cpp_golden_mlp_classifies_in_python():
    classify = tg.saved_model.load(GOLDEN / "mlp_v1_0.tgx")
    assert classify.name == "classify"
    assert classify.signatures == ("(images: TensorSpec(shape=(None, 4), dtype=tg.float32, name=None)) -> "
                                   "TensorSpec(shape=(None, 2), dtype=tg.float32, name=None)",)
    batch = np.array([[1.0, 2.0, 3.0, 4.0], [-1.0, 0.5, 0.0, 2.0]], np.float32)
    assert_tensor(classify(batch), mlp(batch), rtol=1e-6, atol=1e-7)
    assert_tensor(classify(images=tg.constant(np.tile(batch, (3, 1)))), mlp(np.tile(batch, (3, 1))), rtol=1e-6, atol=1e-7)
    by_name = {v.name.split(":")[0]: v for v in classify.variables}
    assert set(by_name) == {"dense1/kernel", "dense1/bias", "dense2/kernel"}
    np.testing.assert_allclose(by_name["dense1/kernel"].numpy(), golden_w1(), rtol=1e-6)


def test_the_cpp_golden_control_flow_dispatches_on_its_float_literal():
    looping = tg.saved_model.load(GOLDEN / "control_flow_v1_0.tgx")
    assert len(looping.signatures) == 2
    for scale in (0.5, 2.0):
        for x in ([1.0, 2.0], [-3.0, 1.0]):
            acc, i = looping(tg.constant(x), tg.constant(3), scale)  # a C++ float literal from a Python float
            y = np.array(x, np.float32) * (2.0 if sum(x) > 0 else -1.0)
            assert_tensor(acc, 3 * y * np.float32(scale))
            assert i.numpy() == 3
    with pytest.raises(TypeError, match="Option 2"):
        looping(tg.constant([1.0, 2.0]), tg.constant(3), 1.0)


def test_the_cpp_golden_train_step_trains_in_python():
    train_step = tg.saved_model.load(GOLDEN / "train_step_v1_0.tgx")
    w = train_step.variables[0]
    assert w.name.split(":")[0] == "w"
    x = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)
    y = np.array([[1.0], [0.0]], np.float32)
    w0 = w.numpy()
    err = x @ w0 - y
    assert train_step(x, y).numpy() == pytest.approx(np.mean(err ** 2), rel=1e-6)
    np.testing.assert_allclose(w.numpy(), w0 - 0.1 * x.T @ err, rtol=1e-6)


def test_the_cpp_golden_checkpoint_restores_python_variables():
    w = tg.Variable(tg.zeros([2, 1]), name="w")
    step = tg.Variable(tg.constant(0, tg.int64), name="step")
    tg.train.restore_variables(GOLDEN / "checkpoint_v1_0.tgx", [w, step])
    np.testing.assert_array_equal(w.numpy(), [[0.5], [-0.5]])
    assert step.numpy() == 42


DEMO = BUILD.parent / "demo"


@pytest.mark.skipif(not (DEMO / "classify.tgx").exists(), reason="./tg demo has not written build/demo yet")
def test_the_cpp_demo_classifies_in_python_with_the_same_logits():
    classify = tg.saved_model.load(DEMO / "classify.tgx")
    images = np.load(DEMO / "test_images.npy")
    expected = np.load(DEMO / "expected_logits.npy")
    got = classify(images)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)
    assert (got.numpy().argmax(-1) == expected.argmax(-1)).all()


# ---- bad input -------------------------------------------------------------------------

def test_bad_files_raise_python_exceptions(tmp_path):
    with pytest.raises(tg.errors.OpError):
        tg.saved_model.load(tmp_path / "missing.tgx")
    data = (GOLDEN / "mlp_v1_0.tgx").read_bytes()
    for n in (0, 10, len(data) // 2, len(data) - 1):
        (tmp_path / "cut.tgx").write_bytes(data[:n])
        with pytest.raises(tg.errors.FormatError):
            tg.saved_model.load(tmp_path / "cut.tgx")
    flipped = bytearray(data)
    flipped[len(data) // 3] ^= 0xFF
    (tmp_path / "flipped.tgx").write_bytes(bytes(flipped))
    with pytest.raises(tg.errors.FormatError):
        tg.saved_model.load(tmp_path / "flipped.tgx")
    with pytest.raises(tg.errors.FormatError):
        tg.saved_model.load(GOLDEN / "checkpoint_v1_0.tgx")  # a checkpoint, not a function
    with pytest.raises(TypeError):
        tg.saved_model.load(42)


def test_bad_calls_raise_python_exceptions():
    classify = tg.saved_model.load(GOLDEN / "mlp_v1_0.tgx")
    with pytest.raises(TypeError, match="never traces"):
        classify(np.zeros((2, 3), np.float32))  # wrong shape
    with pytest.raises(TypeError):
        classify(np.zeros((2, 4), np.int32))  # wrong dtype
    with pytest.raises(TypeError):
        classify(None)
    with pytest.raises(TypeError):
        classify("images")
    with pytest.raises(TypeError, match="takes 1 argument"):
        classify(np.zeros((2, 4), np.float32), 1)
    with pytest.raises(TypeError):
        classify()
    with pytest.raises(TypeError):
        classify(object())


def test_extension_binds_a_cpp_function():
    import tg_example_extension as ext  # pylint: disable=import-outside-toplevel
    x = tg.constant([[1.0, 2.0]])
    w = tg.constant([[1.0], [1.0]])
    assert_tensor(ext.affine(x, w), np.array([[4.0]], np.float32))
    assert_tensor(ext.affine(np.array([[2.0, 2.0]], np.float32), w), np.array([[5.0]], np.float32))
    assert ext.affine.experimental_get_tracing_count() == 1  # the same input type: one trace
    ext.affine(tg.constant([[1.0, 2.0], [3.0, 4.0]]), w)
    assert ext.affine.experimental_get_tracing_count() == 2  # a new shape retraces
    scaled, total = ext.scaled(x, 3)
    assert_tensor(scaled, np.array([[3.0, 6.0]], np.float32))
    assert_tensor(total, np.float32(3.0))
    before = ext.scaled.experimental_get_tracing_count()
    ext.scaled(x, 3)
    assert ext.scaled.experimental_get_tracing_count() == before
    ext.scaled(x, 4)  # a C++ int literal: one trace per value
    assert ext.scaled.experimental_get_tracing_count() == before + 1
    assert_tensor(ext.square(x), np.array([[1.0, 4.0]], np.float32))
    assert "x (POSITIONAL_OR_KEYWORD): TensorSpec(shape=(1, 2)" in ext.affine.pretty_printed_concrete_signatures()
    with pytest.raises(tg.errors.InvalidArgumentError):
        ext.affine(x, tg.constant([[1.0, 1.0, 1.0]]))  # (1, 2) @ (1, 3)
    with pytest.raises(TypeError, match="takes 2 arguments"):
        ext.affine(x)
    with pytest.raises(TypeError, match="C\\+\\+ type int"):
        ext.scaled(x, "three")



def test_extension_shares_the_library_with_python():
    """The extension links tracegraph::shared, the library copy tracegraph._core links: a bound
    C++ function records into a Python trace (a nested, inlined function) and onto a Python
    GradientTape. A static copy in the extension would see neither - a missing gradient."""
    import tg_example_extension as ext  # pylint: disable=import-outside-toplevel
    x = tg.constant([[1.0, 2.0]])
    w = tg.constant([[3.0], [4.0]])

    @tg.function
    def inside(t, v):
        return ext.affine(ext.square(t), v) * 2.0

    assert_tensor(inside(x, w), np.array([[2 * (3.0 + 16.0 + 1.0)]], np.float32))
    assert inside.experimental_get_tracing_count() == 1
    graph_ops = [op.type for op in inside.get_concrete_function(x, w).graph.get_operations()]
    assert "matmul" in graph_ops  # the C++ function's ops were recorded into the Python trace

    with tg.GradientTape() as tape:
        tape.watch(x)
        y = tg.reduce_sum(ext.affine(ext.square(x), w))
    grad = tape.gradient(y, x)
    assert grad is not None
    assert_tensor(grad, np.array([[2 * 1.0 * 3.0, 2 * 2.0 * 4.0]], np.float32))  # d/dx (x^2) @ w
