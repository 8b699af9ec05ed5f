"""Grouped and depthwise convolution and conv2d_transpose from Python: tf.nn's functions against
NumPy, traced and differentiated, and Keras's DepthwiseConv2D, Conv2DTranspose and Conv2D groups."""
import numpy as np
import pytest

import tracegraph as tg

R = np.random.default_rng(11)


def test_grouped_conv2d_is_one_convolution_per_group():
    x = R.standard_normal((2, 6, 6, 4)).astype(np.float32)
    w = R.standard_normal((3, 3, 2, 6)).astype(np.float32)  # groups = 4 / 2
    y = tg.nn.conv2d(x, w, strides=1, padding="SAME").numpy()
    for g in range(2):
        part = tg.nn.conv2d(x[..., 2 * g:2 * g + 2], w[..., 3 * g:3 * g + 3], strides=1, padding="SAME")
        np.testing.assert_allclose(y[..., 3 * g:3 * g + 3], part.numpy(), rtol=1e-5, atol=1e-5)


def test_depthwise_conv2d_orders_channels_as_tensorflow():
    # Output channel c * multiplier + m comes from input channel c: one nonzero filter tap per
    # (c, m) makes each output channel a scaled copy of its input channel.
    x = R.standard_normal((1, 4, 4, 3)).astype(np.float32)
    w = np.zeros((1, 1, 3, 2), np.float32)
    for c in range(3):
        for m in range(2):
            w[0, 0, c, m] = 10 * c + m + 1
    y = tg.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "VALID").numpy()
    for c in range(3):
        for m in range(2):
            np.testing.assert_allclose(y[..., c * 2 + m], x[..., c] * (10 * c + m + 1), rtol=1e-6)


def test_conv2d_transpose_is_the_adjoint_of_conv2d():
    # <conv2d(u, w), v> == <u, conv2d_transpose(v, w)> for SAME stride 2 over an odd size.
    u = R.standard_normal((2, 7, 7, 3)).astype(np.float64)
    w = R.standard_normal((3, 3, 3, 5)).astype(np.float64)
    v = R.standard_normal((2, 4, 4, 5)).astype(np.float64)
    lhs = np.sum(tg.nn.conv2d(u, w, strides=2, padding="SAME").numpy() * v)
    rhs = np.sum(u * tg.nn.conv2d_transpose(v, w, [2, 7, 7, 3], strides=2, padding="SAME").numpy())
    assert lhs == pytest.approx(rhs, rel=1e-10)


def test_conv2d_transpose_takes_a_traced_output_shape_with_a_none_batch():
    w = R.standard_normal((3, 3, 2, 4)).astype(np.float32)

    @tg.function(input_signature=[tg.TensorSpec([None, 4, 4, 4], tg.float32)])
    def up(x):
        return tg.nn.conv2d_transpose(x, w, tg.stack([tg.shape(x)[0], 8, 8, 2]), strides=2, padding="SAME")

    x = R.standard_normal((3, 4, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(up(x).numpy(), tg.nn.conv2d_transpose(x, w, [3, 8, 8, 2], 2).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_depthwise_gradients_match_the_grouped_convolution():
    x = tg.constant(R.standard_normal((1, 5, 5, 3)).astype(np.float32))
    w = tg.constant(R.standard_normal((3, 3, 3, 2)).astype(np.float32))
    with tg.GradientTape(persistent=True) as tape:
        tape.watch(x)
        tape.watch(w)
        a = tg.reduce_sum(tg.square(tg.nn.depthwise_conv2d(x, w, [1, 2, 2, 1], "SAME")))
        b = tg.reduce_sum(tg.square(tg.nn.conv2d(x, tg.reshape(w, [3, 3, 1, 6]), 2, "SAME")))
    for da, db in zip(tape.gradient(a, [x, w]), tape.gradient(b, [x, w])):
        np.testing.assert_allclose(da.numpy(), db.numpy(), rtol=1e-4, atol=1e-5)


def test_mismatched_channels_raise_invalid_argument():
    x = np.zeros((1, 5, 5, 3), np.float32)
    with pytest.raises(tg.errors.InvalidArgumentError, match="must be equal"):
        tg.nn.depthwise_conv2d(x, np.zeros((3, 3, 4, 1), np.float32), [1, 1, 1, 1], "SAME")
    with pytest.raises(tg.errors.InvalidArgumentError, match="grouped convolution"):
        tg.nn.conv2d(x, np.zeros((3, 3, 2, 4), np.float32), 1, "SAME")
    with pytest.raises(tg.errors.InvalidArgumentError, match="does not fit output_shape"):
        tg.nn.conv2d_transpose(np.zeros((1, 4, 4, 2), np.float32), np.zeros((3, 3, 1, 2), np.float32),
                               [1, 12, 8, 1], 2, "SAME")


def test_keras_depthwise_conv2d_layer():
    layer = tg.keras.layers.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2)
    x = R.standard_normal((2, 7, 7, 3)).astype(np.float32)
    y = layer(x)
    assert layer.name.startswith("depthwise_conv2d")
    assert tuple(layer.depthwise_kernel.shape) == (3, 3, 3, 2)
    assert tuple(layer.bias.shape) == (6,)
    assert tuple(y.shape) == (2, 4, 4, 6)
    expected = tg.nn.depthwise_conv2d(x, layer.depthwise_kernel, [1, 2, 2, 1], "SAME")
    np.testing.assert_allclose(y.numpy(), expected.numpy(), rtol=1e-6, atol=1e-6)
    with tg.GradientTape() as tape:
        loss = tg.reduce_sum(tg.square(layer(x)))
    grads = tape.gradient(loss, layer.trainable_variables)
    assert [tuple(g.shape) for g in grads] == [(3, 3, 3, 2), (6,)]


def test_keras_conv2d_transpose_layer_sizes():
    x = R.standard_normal((2, 4, 5, 3)).astype(np.float32)
    assert tuple(tg.keras.layers.Conv2DTranspose(2, 3, strides=2, padding="same")(x).shape) == (2, 8, 10, 2)
    assert tuple(tg.keras.layers.Conv2DTranspose(2, 3, strides=2)(x).shape) == (2, 9, 11, 2)
    layer = tg.keras.layers.Conv2DTranspose(2, 3, strides=2, padding="same", output_padding=(0, 1))
    assert tuple(layer(x).shape) == (2, 7, 10, 2)
    assert tuple(layer.kernel.shape) == (3, 3, 2, 3)


def test_keras_conv2d_groups():
    layer = tg.keras.layers.Conv2D(6, 3, padding="same", groups=2)
    x = R.standard_normal((1, 5, 5, 4)).astype(np.float32)
    y = layer(x)
    assert tuple(layer.kernel.shape) == (3, 3, 2, 6)
    np.testing.assert_allclose(y.numpy(), tg.nn.conv2d(x, layer.kernel, 1, "SAME").numpy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="multiple of groups"):
        tg.keras.layers.Conv2D(5, 3, groups=2)
