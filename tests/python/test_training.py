"""Training from Python: Keras's optimizers, layers and losses over tg::optim and tg::nn.

Checked: each optimizer's update rule against NumPy over several steps (Keras's formulas, as
include/tracegraph/optim.h states them); apply_gradients / apply / minimize with TF's argument
forms and errors; learning rates, schedules (C++ and Python), clipping and weight decay; the
guide's optimizer cells inside tg.function (the singleton error for a second optimizer and its
two fixes); the layers against NumPy, their weights and Keras's build-on-first-call; the losses
against NumPy; a small MLP trained from Python whose losses equal those of the same model trained
by the C++ API alone (same data, same seeds), eagerly and inside tg.function; bad input.

Not here: keras.Model / Sequential / fit / metrics (tracegraph has no Keras models: the loop is
written with GradientTape), regularizers and constraints (UnimplementedError, tested), EMA and
loss scaling (UnimplementedError, tested), mixed precision.
"""
import logging

import numpy as np
import pytest

import tracegraph as tg
from conftest import assert_tensor

K = tg.keras


def run_steps(optimizer, w0, grads):
    w = tg.Variable(np.array(w0, np.float32))
    for g in grads:
        optimizer.apply_gradients([(tg.constant(np.array(g, np.float32)), w)])
    return w.numpy()


GRADS = [[0.5, -1.0, 2.0], [0.1, 0.3, -0.2], [-1.0, 0.0, 0.5], [0.2, 0.2, 0.2]]
W0 = [1.0, -2.0, 0.5]


def numpy_sgd(lr, momentum=0.0, nesterov=False):
    w, vel = np.array(W0, np.float64), np.zeros(3)
    for g in map(np.array, GRADS):
        if momentum == 0.0:
            w = w - lr * g
            continue
        vel = momentum * vel - lr * g
        w = w + (momentum * vel - lr * g if nesterov else vel)
    return w


def numpy_adam(lr, b1=0.9, b2=0.999, eps=1e-7, weight_decay=0.0):
    w, m, v = np.array(W0, np.float64), np.zeros(3), np.zeros(3)
    for t, g in enumerate(map(np.array, GRADS), start=1):
        w = w - w * weight_decay * lr
        m += (g - m) * (1 - b1)
        v += (g * g - v) * (1 - b2)
        w = w - lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m / (np.sqrt(v) + eps)
    return w


def numpy_rmsprop(lr, rho=0.9, momentum=0.0, eps=1e-7, centered=False):
    w, vel, mom, avg = np.array(W0, np.float64), np.zeros(3), np.zeros(3), np.zeros(3)
    for g in map(np.array, GRADS):
        vel = rho * vel + (1 - rho) * g * g
        if centered:
            avg = rho * avg + (1 - rho) * g
            denominator = vel - avg * avg + eps
        else:
            denominator = vel + eps
        increment = lr * g / np.sqrt(denominator)
        if momentum > 0:
            mom = momentum * mom + increment
            w = w - mom
        else:
            w = w - increment
    return w


@pytest.mark.parametrize("make,reference", [
    (lambda: K.optimizers.SGD(0.1), lambda: numpy_sgd(0.1)),
    (lambda: K.optimizers.SGD(learning_rate=0.1, momentum=0.9), lambda: numpy_sgd(0.1, 0.9)),
    (lambda: K.optimizers.SGD(0.1, momentum=0.9, nesterov=True), lambda: numpy_sgd(0.1, 0.9, True)),
    (lambda: K.optimizers.Adam(learning_rate=0.01), lambda: numpy_adam(0.01)),
    (lambda: K.optimizers.Adam(0.05, beta_1=0.5, beta_2=0.9, epsilon=1e-3),
     lambda: numpy_adam(0.05, 0.5, 0.9, 1e-3)),
    (lambda: K.optimizers.AdamW(0.01, weight_decay=0.1), lambda: numpy_adam(0.01, weight_decay=0.1)),
    (lambda: K.optimizers.Adam(0.01, weight_decay=0.1), lambda: numpy_adam(0.01, weight_decay=0.1)),
    (lambda: K.optimizers.RMSprop(0.01), lambda: numpy_rmsprop(0.01)),
    (lambda: K.optimizers.RMSprop(0.01, momentum=0.5, centered=True),
     lambda: numpy_rmsprop(0.01, momentum=0.5, centered=True)),
])
def test_update_rules_match_numpy(make, reference):
    np.testing.assert_allclose(run_steps(make(), W0, GRADS), reference(), rtol=1e-5, atol=1e-6)


def test_optimizer_state_as_keras():
    opt = K.optimizers.Adam(learning_rate=0.01)
    assert opt.name == "adam" and K.optimizers.SGD().name == "SGD"
    assert int(opt.iterations) == 0
    w = tg.Variable([1.0, 2.0], name="w")
    opt.apply_gradients(zip([tg.constant([1.0, 1.0])], [w]))
    opt.apply([tg.constant([1.0, 1.0])], [w])
    assert int(opt.iterations.numpy()) == 2
    assert opt.get_slot_names() == ["m", "v"]
    assert opt.get_slot(w, "m").shape == [2]
    names = [v.name for v in opt.variables]
    assert names[0].endswith("learning_rate:0") and "iterations" in names[1] and len(names) == 4
    assert abs(float(opt.learning_rate.numpy()) - 0.01) < 1e-12
    opt.learning_rate = 0.5
    assert float(opt.learning_rate.numpy()) == 0.5 and opt.lr is not None
    assert tg.optimizers is K.optimizers and tg.optimizers.Adam is K.optimizers.Adam


def test_none_gradients():
    a, b = tg.Variable(1.0), tg.Variable(2.0)
    opt = K.optimizers.SGD(1.0)
    opt.apply_gradients([(None, a), (tg.constant(1.0), b)])
    assert a.numpy() == 1.0 and b.numpy() == 1.0
    with pytest.raises(ValueError, match="No gradients provided"):
        opt.apply_gradients([(None, a), (None, b)])


def test_bad_apply_gradients_input():
    w = tg.Variable([1.0, 2.0])
    opt = K.optimizers.SGD(0.1)
    with pytest.raises(TypeError, match="tg.Variable"):
        opt.apply_gradients([(tg.constant([1.0, 1.0]), tg.constant([1.0, 2.0]))])
    with pytest.raises(TypeError, match="pairs"):
        opt.apply_gradients([tg.constant([1.0, 1.0])])
    with pytest.raises(ValueError, match="2 gradients for 1"):
        opt.apply([1.0, 2.0], [w])
    with pytest.raises(tg.errors.InvalidArgumentError, match="shape"):
        opt.apply_gradients([(tg.constant([1.0, 1.0, 1.0]), w)])
    with pytest.raises(tg.errors.InvalidArgumentError, match="dtype"):
        opt.apply_gradients([(tg.constant([1.0, 1.0], tg.float64), w)])
    with pytest.raises(tg.errors.InvalidArgumentError, match="twice"):
        opt.apply_gradients([(tg.constant([1.0, 1.0]), w), (tg.constant([1.0, 1.0]), w)])
    with pytest.raises(TypeError, match="int32"):
        opt.apply_gradients([(tg.constant(1), tg.Variable(1))])
    with pytest.raises(tg.errors.InvalidArgumentError, match="string"):
        opt.apply_gradients([("a", w)])
    np.testing.assert_array_equal(w.numpy(), [1.0, 2.0])  # nothing applied by the failures


def test_bad_optimizer_arguments():
    with pytest.raises(ValueError, match="Only one of"):
        K.optimizers.SGD(clipnorm=1.0, clipvalue=1.0)
    with pytest.raises(ValueError):
        K.optimizers.SGD(learning_rate=-1.0)
    with pytest.raises(ValueError):
        K.optimizers.Adam(beta_1=1.5)
    with pytest.raises(TypeError, match="learning_rate"):
        K.optimizers.Adam(learning_rate="fast")
    with pytest.raises(tg.errors.UnimplementedError, match="amsgrad"):
        K.optimizers.Adam(amsgrad=True)
    with pytest.raises(tg.errors.UnimplementedError, match="use_ema"):
        K.optimizers.SGD(use_ema=True)
    with pytest.raises(TypeError, match="unexpected"):
        K.optimizers.SGD(momentun=0.9)


def test_minimize():
    w = tg.Variable(3.0)
    opt = K.optimizers.SGD(0.1)
    opt.minimize(lambda: w * w, [w])
    assert abs(float(w.numpy()) - 2.4) < 1e-6
    with tg.GradientTape() as tape:
        loss = w * w
    opt.minimize(loss, lambda: [w], tape=tape)
    assert abs(float(w.numpy()) - 1.92) < 1e-6
    with pytest.raises(ValueError, match="`tape` is required"):
        opt.minimize(w * w, [w])


def test_schedules():
    sched = K.optimizers.schedules.ExponentialDecay(0.1, decay_steps=2, decay_rate=0.5)
    np.testing.assert_allclose([float(sched(s)) for s in range(4)],
                               [0.1 * 0.5 ** (s / 2) for s in range(4)], rtol=1e-6)
    stair = K.optimizers.schedules.ExponentialDecay(0.1, 2, 0.5, staircase=True)
    np.testing.assert_allclose([float(stair(s)) for s in range(4)], [0.1, 0.1, 0.05, 0.05], rtol=1e-6)
    cos = K.optimizers.schedules.CosineDecay(1.0, decay_steps=4)
    np.testing.assert_allclose([float(cos(s)) for s in (0, 2, 4, 8)], [1.0, 0.5, 0.0, 0.0], atol=1e-6)
    opt = K.optimizers.SGD(learning_rate=stair)
    w = tg.Variable(0.0)
    for _ in range(3):
        opt.apply_gradients([(tg.constant(1.0), w)])
    np.testing.assert_allclose(w.numpy(), -(0.1 + 0.1 + 0.05), rtol=1e-6)
    with pytest.raises(TypeError, match="not settable"):
        opt.learning_rate = 0.1
    with pytest.raises(ValueError):
        K.optimizers.schedules.ExponentialDecay(0.1, decay_steps=0, decay_rate=0.5)


def test_python_schedule_runs_inside_each_step():
    class Halving(K.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            return 1.0 / tg.cast(step + 1, tg.float32)

    opt = K.optimizers.SGD(learning_rate=Halving())
    w = tg.Variable(0.0)

    @tg.function
    def step():
        opt.apply_gradients([(tg.constant(1.0), w)])

    for _ in range(3):
        step()
    np.testing.assert_allclose(w.numpy(), -(1.0 + 1 / 2 + 1 / 3), rtol=1e-6)
    assert step.experimental_get_tracing_count() == 1


def test_clipping():
    g = [np.array([3.0, 4.0], np.float32), np.array([0.0, 12.0], np.float32)]

    def applied(**kwargs):
        ws = [tg.Variable(np.zeros(2, np.float32)) for _ in g]
        K.optimizers.SGD(1.0, **kwargs).apply_gradients(zip([tg.constant(x) for x in g], ws))
        return [-w.numpy() for w in ws]

    by_norm = applied(clipnorm=1.0)
    np.testing.assert_allclose(by_norm[0], [0.6, 0.8], rtol=1e-6)
    np.testing.assert_allclose(by_norm[1], [0.0, 1.0], rtol=1e-6)
    by_value = applied(clipvalue=3.5)
    np.testing.assert_allclose(by_value[0], [3.0, 3.5])
    np.testing.assert_allclose(by_value[1], [0.0, 3.5])
    by_global = applied(global_clipnorm=6.5)  # the global norm is 13
    np.testing.assert_allclose(by_global[0], [1.5, 2.0], rtol=1e-6)
    np.testing.assert_allclose(by_global[1], [0.0, 6.0], rtol=1e-6)
    clipped, norm = tg.clip_by_global_norm([tg.constant(x) for x in g] + [None], 6.5)
    assert float(norm) == 13.0 and clipped[2] is None
    np.testing.assert_allclose(clipped[1].numpy(), [0.0, 6.0], rtol=1e-6)


# ---- the guide's optimizer cells inside tg.function -------------------------------------------

def test_second_optimizer_in_one_function_raises_singleton_error():
    opt1 = K.optimizers.Adam(learning_rate=1e-2)
    opt2 = K.optimizers.Adam(learning_rate=1e-3)

    @tg.function
    def train_step(w, x, y, optimizer):
        with tg.GradientTape() as tape:
            L = tg.reduce_sum(tg.square(w * x - y))
        gradients = tape.gradient(L, [w])
        optimizer.apply_gradients(zip(gradients, [w]))

    w = tg.Variable(2.0)
    x, y = tg.constant([-1.0]), tg.constant([2.0])
    train_step(w, x, y, opt1)
    with pytest.raises(ValueError, match="only supports singleton"):
        train_step(w, x, y, opt2)


def test_one_function_per_optimizer():
    class TrainStep(tg.Module):
        def __init__(self, optimizer):
            super().__init__()
            self.optimizer = optimizer

        @tg.function
        def __call__(self, w, x, y):
            with tg.GradientTape() as tape:
                L = tg.reduce_sum(tg.square(w * x - y))
            gradients = tape.gradient(L, [w])
            self.optimizer.apply_gradients(zip(gradients, [w]))
            return L

    w = tg.Variable(2.0)
    x, y = tg.constant([-1.0]), tg.constant([2.0])
    train_o1 = TrainStep(K.optimizers.Adam(learning_rate=1e-2))
    train_o2 = TrainStep(K.optimizers.Adam(learning_rate=1e-3))
    train_o1(w, x, y)
    train_o2(w, x, y)
    # Two Adam steps from 2.0 with gradient 2 * (-w - 2) * -1 = 8 > 0: each moves w down by its lr.
    np.testing.assert_allclose(w.numpy(), 2.0 - 1e-2 - 1e-3, rtol=1e-5)

    def train_step(w, x, y, optimizer):
        with tg.GradientTape() as tape:
            L = tg.reduce_sum(tg.square(w * x - y))
        gradients = tape.gradient(L, [w])
        optimizer.apply_gradients(zip(gradients, [w]))

    opt1, opt2 = K.optimizers.Adam(learning_rate=1e-2), K.optimizers.Adam(learning_rate=1e-3)
    train_step_1, train_step_2 = tg.function(train_step), tg.function(train_step)
    for i in range(10):
        if i % 2 == 0:
            train_step_1(w, x, y, opt1)
            train_step_2(w, x, y, opt2)
    assert int(opt1.iterations) == 5 and int(opt2.iterations) == 5


# ---- layers ----------------------------------------------------------------------------------

def test_dense(rng):
    layer = K.layers.Dense(3, activation="relu", kernel_initializer=K.initializers.GlorotUniform(seed=7))
    assert not layer.built and layer.variables == ()
    x = rng.normal(size=(4, 5)).astype(np.float32)
    y = layer(x)
    assert layer.built and layer.kernel.shape == [5, 3] and layer.bias.shape == [3]
    np.testing.assert_allclose(y.numpy(), np.maximum(x @ layer.kernel.numpy() + layer.bias.numpy(), 0),
                               rtol=1e-5, atol=1e-6)
    assert layer.weights[0] is layer.kernel and layer.weights[1] is layer.bias
    assert [v.name for v in layer.trainable_variables] == [f"{layer.name}/kernel:0", f"{layer.name}/bias:0"]
    limit = np.sqrt(6 / (5 + 3))
    assert np.all(np.abs(layer.kernel.numpy()) <= limit)
    same = K.layers.Dense(3, kernel_initializer=K.initializers.GlorotUniform(seed=7))
    same(x)
    np.testing.assert_array_equal(same.kernel.numpy(), layer.kernel.numpy())  # seeded: repeatable
    x3 = rng.normal(size=(2, 4, 5)).astype(np.float32)  # rank 3: the last axis
    np.testing.assert_allclose(layer(x3).numpy(),
                               np.maximum(x3 @ layer.kernel.numpy() + layer.bias.numpy(), 0), rtol=1e-5,
                               atol=1e-6)
    with pytest.raises(tg.errors.InvalidArgumentError):
        layer(np.ones((4, 6), np.float32))  # built for 5 features
    layer.set_weights([np.ones((5, 3), np.float32), np.full(3, -1.0, np.float32)])
    np.testing.assert_allclose(layer(np.ones((1, 5), np.float32)).numpy(), [[4.0, 4.0, 4.0]])
    assert layer.count_params() == 18


def test_layer_names_and_unsupported_options():
    a, b = K.layers.Dense(2), K.layers.Dense(2)
    assert a.name != b.name and a.name.startswith("dense") and b.name.startswith("dense")
    assert K.layers.Conv2D(1, 1).name.startswith("conv2d")
    assert K.layers.BatchNormalization().name.startswith("batch_normalization")
    with pytest.raises(tg.errors.UnimplementedError, match="use_bias"):
        K.layers.Dense(2, use_bias=False)
    with pytest.raises(tg.errors.UnimplementedError, match="regularizer"):
        K.layers.Dense(2, kernel_regularizer="l2")
    with pytest.raises(tg.errors.UnimplementedError, match="kernel_initializer"):
        K.layers.Dense(2, kernel_initializer="he_normal")(np.ones((1, 2), np.float32))
    with pytest.raises(ValueError, match="initializer"):
        K.layers.Dense(2, kernel_initializer="no_such_initializer")
    with pytest.raises(ValueError, match="units"):
        K.layers.Dense(0)
    with pytest.raises(ValueError, match="activation"):
        K.layers.Dense(2, activation="no_such_activation")
    with pytest.raises(tg.errors.UnimplementedError, match="channels_last"):
        K.layers.Conv2D(2, 3, data_format="channels_first")
    with pytest.raises(TypeError, match="unexpected"):
        K.layers.Dense(2, units2=3)


def test_conv2d_matches_numpy(rng):
    layer = K.layers.Conv2D(4, (3, 3), padding="valid", activation=None,
                            kernel_initializer=K.initializers.GlorotUniform(seed=3))
    x = rng.normal(size=(2, 6, 5, 3)).astype(np.float32)
    y = layer(x).numpy()
    k, b = layer.kernel.numpy(), layer.bias.numpy()
    want = np.zeros((2, 4, 3, 4), np.float32)
    for i in range(4):
        for j in range(3):
            want[:, i, j, :] = np.tensordot(x[:, i:i + 3, j:j + 3, :], k, axes=([1, 2, 3], [0, 1, 2])) + b
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    same = K.layers.Conv2D(2, 3, padding="same", strides=2)
    assert same(x).shape == [2, 3, 3, 2]


def test_stateless_layers(rng):
    x = rng.normal(size=(2, 4, 4, 3)).astype(np.float32)
    assert_tensor(K.layers.Flatten()(x), x.reshape(2, -1))
    pooled = K.layers.MaxPooling2D()(x).numpy()
    np.testing.assert_allclose(pooled, x.reshape(2, 2, 2, 2, 2, 3).max(axis=(2, 4)))
    avg = K.layers.AveragePooling2D(pool_size=2)(x).numpy()
    np.testing.assert_allclose(avg, x.reshape(2, 2, 2, 2, 2, 3).mean(axis=(2, 4)), rtol=1e-5)
    np.testing.assert_allclose(K.layers.ReLU()(x).numpy(), np.maximum(x, 0))
    np.testing.assert_allclose(K.layers.Activation("tanh")(x).numpy(), np.tanh(x), rtol=1e-5, atol=1e-6)


def test_dropout_layer():
    x = np.ones((200, 50), np.float32)
    drop = K.layers.Dropout(0.5, seed=1)
    np.testing.assert_array_equal(drop(x).numpy(), x)  # training=None: inference
    np.testing.assert_array_equal(drop(x, training=False).numpy(), x)
    y = drop(x, training=True).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and 0.4 < (y == 0).mean() < 0.6
    with pytest.raises(tg.errors.InvalidArgumentError):
        K.layers.Dropout(1.5)


def test_embedding_and_normalization_layers(rng):
    emb = K.layers.Embedding(10, 4, seed=5)
    ids = np.array([[1, 2], [3, 9]], np.int32)
    out = emb(ids)
    assert out.shape == [2, 2, 4]
    np.testing.assert_array_equal(out.numpy(), emb.embeddings.numpy()[ids])
    assert np.all(np.abs(emb.embeddings.numpy()) <= 0.05)
    with pytest.raises(tg.errors.InvalidArgumentError):
        emb(np.array([10], np.int32))
    x = rng.normal(size=(3, 6)).astype(np.float32)
    ln = K.layers.LayerNormalization(epsilon=1e-3)
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-3)
    np.testing.assert_allclose(ln(x).numpy(), want, rtol=1e-4, atol=1e-5)
    assert [v.name.split("/")[-1] for v in ln.weights] == ["gamma:0", "beta:0"]
    bn = K.layers.BatchNormalization(momentum=0.5)
    np.testing.assert_allclose(bn(x).numpy(), x / np.sqrt(1 + 1e-3), rtol=1e-5)  # inference
    y = bn(x, training=True).numpy()
    np.testing.assert_allclose(y, (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-3), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn.moving_mean.numpy(), 0.5 * x.mean(0), rtol=1e-5, atol=1e-6)
    assert len(bn.trainable_weights) == 2 and len(bn.non_trainable_weights) == 2
    assert [w.name.split("/")[-1] for w in bn.weights] == ["gamma:0", "beta:0", "moving_mean:0",
                                                          "moving_variance:0"]


def test_recurrent_cells(rng):
    x = rng.normal(size=(2, 3)).astype(np.float32)
    gru = K.layers.GRUCell(4, seed=1)
    out, states = gru(x, [np.zeros((2, 4), np.float32)])
    assert out.shape == [2, 4] and isinstance(states, list) and states[0] is out
    assert [v.shape.as_list() for v in gru.weights] == [[3, 12], [4, 12], [2, 12]]
    lstm = K.layers.LSTMCell(5, seed=1)
    h, (h2, c) = lstm(x, [np.zeros((2, 5), np.float32), np.zeros((2, 5), np.float32)])
    assert h.shape == [2, 5] and c.shape == [2, 5] and h2 is h
    # One step from zero state: c = sigmoid(i) * tanh(g), h = sigmoid(o) * tanh(c).
    z = x @ lstm.kernel.numpy() + lstm.bias.numpy()
    i, _, g, o = np.split(z, 4, axis=1)
    sig = lambda v: 1 / (1 + np.exp(-v))
    np.testing.assert_allclose(c.numpy(), sig(i) * np.tanh(g), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h.numpy(), sig(o) * np.tanh(sig(i) * np.tanh(g)), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"\[h, c\]"):
        lstm(x, np.zeros((2, 5), np.float32))


def test_layer_trainable_flag_and_custom_layer():
    frozen = K.layers.Dense(2, trainable=False)
    frozen(np.ones((1, 3), np.float32))
    assert frozen.trainable_variables == () and len(frozen.non_trainable_variables) == 2

    class Scale(K.layers.Layer):
        def build(self, input_shape):
            self.w = self.add_weight(name="w", shape=[input_shape[-1]], initializer="ones")

        def call(self, inputs):
            return inputs * self.w

    class Block(K.layers.Layer):
        def __init__(self):
            super().__init__()
            self.inner = K.layers.Dense(2, kernel_initializer=K.initializers.GlorotUniform(seed=1))
            self.scale = Scale()

        def call(self, inputs):
            return self.scale(self.inner(inputs))

    block = Block()
    out = block(np.ones((1, 3), np.float32))
    assert out.shape == [1, 2]
    assert len(block.trainable_variables) == 3
    assert block.scale.w.name == f"{block.scale.name}/w:0"


# ---- losses ----------------------------------------------------------------------------------

def test_losses_match_numpy(rng):
    logits = rng.normal(size=(4, 3)).astype(np.float32)
    labels = np.array([0, 2, 1, 2])
    onehot = np.eye(3, dtype=np.float32)[labels]
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    want = -(onehot * logp).sum(-1).mean()
    L = K.losses
    np.testing.assert_allclose(L.SparseCategoricalCrossentropy(from_logits=True)(labels, logits).numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(L.SparseCategoricalCrossentropy(from_logits=True)(labels[:, None], logits).numpy(),
                               want, rtol=1e-5)
    np.testing.assert_allclose(L.CategoricalCrossentropy(from_logits=True)(onehot, logits).numpy(), want, rtol=1e-5)
    probs = np.exp(logp)
    np.testing.assert_allclose(L.SparseCategoricalCrossentropy()(labels, probs).numpy(), want, rtol=1e-4)
    np.testing.assert_allclose(L.CategoricalCrossentropy()(onehot, probs).numpy(), want, rtol=1e-4)
    y_true = rng.uniform(size=(4, 3)).astype(np.float32)
    np.testing.assert_allclose(L.MeanSquaredError()(y_true, logits).numpy(), ((logits - y_true) ** 2).mean(),
                               rtol=1e-5)
    z = (rng.uniform(size=(4, 3)) > 0.5).astype(np.float32)
    bce = (np.maximum(logits, 0) - logits * z + np.log1p(np.exp(-np.abs(logits)))).mean()
    np.testing.assert_allclose(L.BinaryCrossentropy(from_logits=True)(z, logits).numpy(), bce, rtol=1e-5)
    p = 1 / (1 + np.exp(-logits))
    np.testing.assert_allclose(L.BinaryCrossentropy()(z, p).numpy(), bce, rtol=1e-4)
    e = logits - y_true
    huber = np.where(np.abs(e) <= 1.0, 0.5 * e * e, np.abs(e) - 0.5).mean()
    np.testing.assert_allclose(L.Huber()(y_true, logits).numpy(), huber, rtol=1e-5)
    with pytest.raises(tg.errors.UnimplementedError, match="sample_weight"):
        L.MeanSquaredError()(y_true, logits, sample_weight=np.ones(4))
    with pytest.raises(tg.errors.InvalidArgumentError):
        L.MeanSquaredError()(y_true, logits[:, :2])
    with pytest.raises(tg.errors.UnimplementedError, match="reduction"):
        L.MeanSquaredError(reduction="none")


# ---- a model trained from Python matches the C++ API -----------------------------------------

def make_data():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(32, 6)).astype(np.float32)
    labels = (x[:, 0] + x[:, 1] > 0).astype(np.int32) + (x[:, 2] > 1).astype(np.int32)
    return x, labels


def python_model(seed):
    first = K.layers.Dense(16, activation="relu", kernel_initializer=K.initializers.GlorotUniform(seed=seed))
    second = K.layers.Dense(3, kernel_initializer=K.initializers.GlorotUniform(seed=seed + 1))
    return first, second


@pytest.mark.parametrize("traced", [False, True])
def test_mlp_trained_from_python_matches_cpp(traced):
    x, labels = make_data()
    steps, seed, lr = 8, 11, 0.05
    want = tg._core._train_mlp_reference_for_test(x, labels, 16, 3, seed, lr, steps)
    first, second = python_model(seed)
    optimizer = K.optimizers.Adam(learning_rate=lr)
    loss_fn = K.losses.SparseCategoricalCrossentropy(from_logits=True)

    def train_step(xb, yb):
        with tg.GradientTape() as tape:
            loss = loss_fn(yb, second(first(xb)))
        variables = first.trainable_variables + second.trainable_variables
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables))
        return loss

    if traced:
        train_step = tg.function(train_step)
    xt, yt = tg.constant(x), tg.constant(labels)
    got = [float(train_step(xt, yt)) for _ in range(steps)]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert got[-1] < got[0] * 0.9  # it learns
    if traced:
        assert train_step.experimental_get_tracing_count() == 1


def test_training_logs_missing_gradients(caplog):
    used, unused = tg.Variable(1.0), tg.Variable(2.0)
    with tg.GradientTape() as tape:
        loss = used * 3.0
    grads = tape.gradient(loss, [used, unused])
    assert grads[1] is None
    with caplog.at_level(logging.WARNING, logger="tracegraph"):
        K.optimizers.SGD(0.1).apply_gradients(zip(grads, [used, unused]))
    assert "Gradients do not exist" in caplog.text
    assert abs(float(used.numpy()) - 0.7) < 1e-6 and unused.numpy() == 2.0
