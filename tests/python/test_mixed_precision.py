"""tg.keras.mixed_precision: Policy and its dtypes, the global policy (the C++ one,
tg::nn::set_global_policy) that layers built afterwards follow, a layer's dtype= argument,
"mixed_bfloat16" Dense / Conv2D / DepthwiseConv2D / Conv2DTranspose layers (float32 Variables,
bfloat16 outputs close to the float32 computation, float32 gradients, a tg.function training
loop with Adam), the layers without a mixed policy, and the errors."""
import numpy as np
import pytest

import tracegraph as tg

K = tg.keras
mp = K.mixed_precision


@pytest.fixture(autouse=True)
def float32_policy():
    """Each test starts and ends with the default global policy (it is process-wide)."""
    mp.set_global_policy("float32")
    yield
    mp.set_global_policy("float32")


def as_f32(t):
    return tg.cast(t, tg.float32).numpy()


@pytest.mark.parametrize("name, variable, compute", [
    ("float32", "float32", "float32"),
    ("float64", "float64", "float64"),
    ("bfloat16", "bfloat16", "bfloat16"),
    ("mixed_bfloat16", "float32", "bfloat16"),
])
def test_policy_properties(name, variable, compute):
    policy = mp.Policy(name)
    assert policy.name == name
    assert policy.variable_dtype == variable and policy.compute_dtype == compute
    assert repr(policy) == f'<Policy "{name}">'
    assert mp.Policy(policy) == policy


def test_global_policy_is_float32_until_set_and_none_resets_it():
    assert mp.global_policy().name == "float32"
    mp.set_global_policy(mp.Policy("mixed_bfloat16"))
    assert mp.global_policy() == mp.Policy("mixed_bfloat16")
    mp.set_global_policy("bfloat16")
    assert mp.global_policy().compute_dtype == "bfloat16"
    mp.set_global_policy(None)
    assert mp.global_policy().name == "float32"


@pytest.mark.parametrize("name", ["mixed_float16", "float16", "int32", "mixed_bf16", ""])
def test_unknown_names_raise_value_error_saying_what_is_accepted(name):
    with pytest.raises(ValueError, match="mixed_bfloat16"):
        mp.Policy(name)
    with pytest.raises(ValueError, match="mixed_bfloat16"):
        mp.set_global_policy(name)
    assert mp.global_policy().name == "float32"  # unchanged
    with pytest.raises(ValueError, match="mixed_bfloat16"):
        K.layers.Dense(3, dtype=name)


def test_mixed_float16_says_why():
    with pytest.raises(ValueError, match="no float16"):
        mp.Policy("mixed_float16")


def test_bad_argument_types():
    with pytest.raises(TypeError, match="Policy"):
        mp.set_global_policy(16)
    with pytest.raises(TypeError, match="string"):
        mp.Policy(tg.float32)


def test_layers_follow_the_global_policy_set_before_they_are_constructed(rng):
    before = K.layers.Dense(4)
    mp.set_global_policy("mixed_bfloat16")
    after = K.layers.Dense(4)
    x = tg.constant(rng.standard_normal((2, 3)).astype(np.float32))
    assert before(x).dtype == tg.float32 and before.compute_dtype == "float32"
    y = after(x)
    assert after.dtype_policy == mp.Policy("mixed_bfloat16")
    assert after.dtype == "float32" and after.variable_dtype == "float32"
    assert after.compute_dtype == "bfloat16"
    assert after.kernel.dtype == tg.float32 and after.bias.dtype == tg.float32
    assert y.dtype == tg.bfloat16
    expected = x.numpy() @ after.kernel.numpy() + after.bias.numpy()
    np.testing.assert_allclose(as_f32(y), expected, rtol=3e-2, atol=3e-2)


def reference_conv(x, kernel, stride=1):
    """A 'valid' NHWC convolution with an HWIO kernel, in float64."""
    n, h, w, _ = x.shape
    kh, kw, _, out = kernel.shape
    oh, ow = (h - kh) // stride + 1, (w - kw) // stride + 1
    y = np.zeros((n, oh, ow, out))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
            y[:, i, j, :] = np.tensordot(patch, kernel, axes=([1, 2, 3], [0, 1, 2]))
    return y


def test_convolutions_under_mixed_bfloat16(rng):
    mp.set_global_policy("mixed_bfloat16")
    x_np = rng.standard_normal((2, 6, 6, 3)).astype(np.float32)
    x = tg.constant(x_np)
    conv = K.layers.Conv2D(4, 3)
    depthwise = K.layers.DepthwiseConv2D(3, depth_multiplier=2)
    transpose = K.layers.Conv2DTranspose(5, 3, strides=2)
    outputs = {}
    for layer in (conv, depthwise, transpose):
        y = layer(x)
        outputs[type(layer).__name__] = y
        assert layer.compute_dtype == "bfloat16" and layer.dtype == "float32"
        assert y.dtype == tg.bfloat16, type(layer).__name__
        assert all(v.dtype == tg.float32 for v in layer.trainable_variables)
    assert outputs["Conv2D"].shape == (2, 4, 4, 4)
    assert outputs["DepthwiseConv2D"].shape == (2, 4, 4, 6)
    assert outputs["Conv2DTranspose"].shape == (2, 13, 13, 5)
    expected = reference_conv(x_np, conv.kernel.numpy()) + conv.bias.numpy()
    np.testing.assert_allclose(as_f32(outputs["Conv2D"]), expected, rtol=5e-2, atol=5e-2)
    # The float32 layer with the same Variables computes what the mixed one rounds.
    mp.set_global_policy("float32")
    for layer, y in ((depthwise, outputs["DepthwiseConv2D"]), (transpose, outputs["Conv2DTranspose"])):
        twin = type(layer)(**{k: getattr(layer, k) for k in _conv_args(layer)})
        twin(x)
        for mine, theirs in zip(twin.trainable_variables, layer.trainable_variables):
            mine.assign(theirs)
        np.testing.assert_allclose(as_f32(y), twin(x).numpy(), rtol=5e-2, atol=5e-2)


def _conv_args(layer):
    if isinstance(layer, K.layers.DepthwiseConv2D):
        return ("kernel_size", "strides", "depth_multiplier")
    return ("filters", "kernel_size", "strides")


def test_a_layers_dtype_argument_overrides_the_global_policy(rng):
    x = tg.constant(rng.standard_normal((2, 3)).astype(np.float32))
    mixed = K.layers.Dense(2, dtype="mixed_bfloat16")
    assert mixed(x).dtype == tg.bfloat16 and mixed.kernel.dtype == tg.float32
    by_policy = K.layers.Dense(2, dtype=mp.Policy("bfloat16"))
    assert by_policy(tg.cast(x, tg.bfloat16)).dtype == tg.bfloat16
    assert by_policy.kernel.dtype == tg.bfloat16 and by_policy.dtype == "bfloat16"
    kernel = as_f32(by_policy.kernel)  # Glorot-uniform, drawn in float32 and rounded
    assert np.all(np.abs(kernel) <= np.sqrt(6.0 / 5)) and np.any(kernel != 0)
    mp.set_global_policy("mixed_bfloat16")
    head = K.layers.Dense(2, dtype="float32")  # Keras's advice for a model's last layer
    assert head(x).dtype == tg.float32 and head.compute_dtype == "float32"
    wide = K.layers.Dense(2, dtype=tg.float64)
    assert wide.dtype_policy.name == "float64" and wide(tg.cast(x, tg.float64)).dtype == tg.float64


def test_layers_without_a_mixed_policy(rng):
    with pytest.raises(tg.errors.UnimplementedError, match="dtype='float32'"):
        K.layers.LayerNormalization(dtype="mixed_bfloat16")
    mp.set_global_policy("mixed_bfloat16")
    norm = K.layers.LayerNormalization()
    assert norm.dtype_policy.name == "float32" and norm.compute_dtype == "float32"
    x = tg.constant(rng.standard_normal((2, 4)).astype(np.float32))
    assert norm(x).dtype == tg.float32


def test_gradients_are_float32_and_training_reduces_the_loss(rng):
    mp.set_global_policy("mixed_bfloat16")
    hidden = K.layers.Dense(16, activation="relu")
    logits_layer = K.layers.Dense(3)
    loss_fn = K.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = K.optimizers.Adam(0.02)
    x = tg.constant(rng.standard_normal((32, 4)).astype(np.float32))
    labels = tg.constant((x.numpy()[:, 0] > 0).astype(np.int64) + (x.numpy()[:, 1] > 0))

    def loss_of():
        return loss_fn(labels, logits_layer(hidden(x)))

    with tg.GradientTape() as tape:
        first = loss_of()
    variables = hidden.trainable_variables + logits_layer.trainable_variables
    grads = tape.gradient(first, variables)
    assert len(grads) == 4
    for g, v in zip(grads, variables):
        assert g.dtype == tg.float32 and g.shape == v.shape
        assert np.all(np.isfinite(g.numpy())) and np.any(g.numpy() != 0)

    @tg.function
    def train_step():
        with tg.GradientTape() as step_tape:
            loss = loss_of()
        optimizer.apply_gradients(zip(step_tape.gradient(loss, variables), variables))
        return loss

    losses = [float(tg.cast(train_step(), tg.float32)) for _ in range(40)]
    assert train_step.experimental_get_tracing_count() == 1
    assert all(v.dtype == tg.float32 for v in variables)
    assert losses[-1] < 0.5 * float(tg.cast(first, tg.float32)), losses
