"""tg.keras.layers.MultiHeadAttention (over tg::nn::MultiHeadAttention and the fused attention
op) against the same attention written in NumPy from the layer's own weights, eagerly and traced,
with its gradients and a training step; and Dense over rank-3 inputs, as Keras's."""
import numpy as np
import pytest

import tracegraph as tg


def numpy_attention(layer, query, value, causal=False, mask=None):
    qk, qb, kk, kb, vk, vb, ok, ob = [v.numpy().astype(np.float64) for v in layer.trainable_variables]
    q = np.einsum("btf,fhd->bhtd", query, qk) + qb[None, :, None, :]
    k = np.einsum("btf,fhd->bhtd", value, kk) + kb[None, :, None, :]
    v = np.einsum("btf,fhd->bhtd", value, vk) + vb[None, :, None, :]
    scores = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1])
    allowed = np.ones(scores.shape[-2:], bool)
    if causal:
        allowed &= np.tril(np.ones_like(allowed))
    if mask is not None:
        allowed = allowed & mask[:, None]
    scores = np.where(allowed, scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    out = np.einsum("bhqk,bhkd->bqhd", weights, v)
    return np.einsum("bqhd,hdo->bqo", out, ok) + ob


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("traced", [False, True])
def test_matches_attention_written_in_numpy(causal, traced):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 8)).astype(np.float32)
    layer = tg.keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)

    def call(inputs):
        return layer(inputs, inputs, use_causal_mask=causal)
    run = tg.function(call) if traced else call
    y = run(tg.constant(x)).numpy()
    assert y.shape == (2, 5, 8)
    assert len(layer.trainable_variables) == 8
    np.testing.assert_allclose(y, numpy_attention(layer, x, x, causal=causal), rtol=1e-5, atol=1e-5)


def test_cross_attention_with_a_padding_mask_and_other_sizes():
    rng = np.random.default_rng(4)
    query = rng.standard_normal((2, 3, 6)).astype(np.float32)
    value = rng.standard_normal((2, 4, 5)).astype(np.float32)
    mask = np.array([[[1, 1, 0, 0]] * 3, [[1, 1, 1, 1]] * 3], bool)
    layer = tg.keras.layers.MultiHeadAttention(num_heads=3, key_dim=2, value_dim=3, output_shape=7)
    y = layer(tg.constant(query), tg.constant(value), attention_mask=tg.constant(mask)).numpy()
    assert y.shape == (2, 3, 7)
    np.testing.assert_allclose(y, numpy_attention(layer, query, value, mask=mask), rtol=1e-5, atol=1e-5)


def test_a_traced_training_step_lowers_the_loss():
    rng = np.random.default_rng(5)
    x = tg.constant(rng.standard_normal((4, 6, 8)).astype(np.float32))
    target = tg.constant(rng.standard_normal((4, 6, 8)).astype(np.float32))
    layer = tg.keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    opt = tg.keras.optimizers.Adam(0.01)

    @tg.function
    def step():
        with tg.GradientTape() as tape:
            loss = tg.reduce_mean(tg.square(layer(x, x) - target))
        grads = tape.gradient(loss, layer.trainable_variables)
        assert all(g is not None for g in grads)
        opt.apply_gradients(zip(grads, layer.trainable_variables))
        return loss
    losses = [float(step()) for _ in range(30)]
    assert step.experimental_get_tracing_count() == 1
    assert losses[-1] < 0.7 * losses[0], losses


def test_refused_arguments_name_what_to_do():
    layer = tg.keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    x = tg.ones([1, 3, 8])
    with pytest.raises(tg.errors.UnimplementedError, match="return_attention_scores"):
        layer(x, x, return_attention_scores=True)
    with pytest.raises(tg.errors.UnimplementedError, match="attention_axes"):
        tg.keras.layers.MultiHeadAttention(num_heads=2, key_dim=4, attention_axes=(1,))
    with pytest.raises(ValueError, match="dropout"):
        tg.keras.layers.MultiHeadAttention(num_heads=2, key_dim=4, dropout=1.5)
    assert layer(x, x).shape == (1, 3, 8)  # builds for 8 value features
    with pytest.raises(tg.errors.InvalidArgumentError):
        layer(x, tg.ones([1, 3, 5]))


def test_dense_over_rank_3_contracts_the_last_axis():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    dense = tg.keras.layers.Dense(5, activation="gelu")
    y = dense(tg.constant(x)).numpy()
    assert y.shape == (2, 3, 5)
    flat = dense(tg.constant(x.reshape(6, 4))).numpy().reshape(2, 3, 5)
    np.testing.assert_array_equal(y, flat)
