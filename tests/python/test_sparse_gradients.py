"""Sparse gradients from Python, as TF gives them: tape.gradient of a gathered Variable (an
Embedding's table) is a tg.IndexedSlices, tg.convert_to_tensor densifies it, ops take it as the
dense tensor, and the optimizers apply it with Keras's sparse rules (only the gathered rows move
under SGD), eagerly and inside tg.function."""
import numpy as np
import pytest

import tracegraph as tg
from tracegraph import keras as K


def test_gather_gradient_is_indexed_slices_with_repeats_kept(rng):
    table = tg.Variable(rng.normal(size=(5, 3)).astype(np.float32))
    weights = rng.normal(size=(2, 2, 3)).astype(np.float32)
    with tg.GradientTape() as tape:
        loss = tg.reduce_sum(tg.gather(table, [[1, 3], [1, 4]]) * weights)
    g = tape.gradient(loss, table)
    assert isinstance(g, tg.IndexedSlices)
    np.testing.assert_array_equal(g.indices.numpy(), [1, 3, 1, 4])
    np.testing.assert_array_equal(g.values.numpy(), weights.reshape(4, 3))
    np.testing.assert_array_equal(g.dense_shape.numpy(), [5, 3])
    assert g.dtype == tg.float32 and g.shape == [5, 3]
    dense = tg.convert_to_tensor(g).numpy()
    want = np.zeros((5, 3), np.float32)
    np.add.at(want, [1, 3, 1, 4], weights.reshape(4, 3))
    np.testing.assert_array_equal(dense, want)
    # Any op takes it as its dense tensor, as TF converts it.
    np.testing.assert_array_equal(tg.multiply(g, 2.0).numpy(), 2 * want)


def test_a_dense_use_gives_a_dense_gradient():
    table = tg.Variable(np.ones((4, 2), np.float32))
    with tg.GradientTape() as tape:
        loss = tg.reduce_sum(tg.gather(table, [0])) + tg.reduce_sum(table * table)
    g = tape.gradient(loss, table)
    assert isinstance(g, tg.Tensor)
    want = 2 * np.ones((4, 2), np.float32)
    want[0] += 1
    np.testing.assert_array_equal(g.numpy(), want)


def test_sgd_moves_only_the_gathered_rows_eagerly_and_traced():
    emb = K.layers.Embedding(50, 4, seed=3)
    dense = K.layers.Dense(2)
    opt = K.optimizers.SGD(learning_rate=0.5)
    ids = np.array([[1, 2, 2], [7, 1, 9]], np.int32)
    labels = np.array([0, 1], np.int32)

    def step(ids, labels):
        with tg.GradientTape() as tape:
            logits = dense(tg.reduce_mean(emb(ids), axis=1))
            loss = tg.reduce_mean(tg.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        variables = emb.trainable_variables + dense.trainable_variables
        grads = tape.gradient(loss, variables)
        assert isinstance(grads[0], tg.IndexedSlices)
        opt.apply_gradients(zip(grads, variables))
        return loss

    emb(ids)  # builds the table
    before = emb.embeddings.numpy().copy()
    first = float(step(ids, labels))
    traced = tg.function(step)
    for _ in range(20):
        last = float(traced(ids, labels))
    assert last < first
    after = emb.embeddings.numpy()
    used = sorted(set(ids.ravel()))
    unused = [r for r in range(50) if r not in used]
    np.testing.assert_array_equal(after[unused], before[unused])
    assert np.all(np.any(after[used] != before[used], axis=1))


def test_clipping_keeps_the_slices():
    s = tg.IndexedSlices(tg.constant([[3.0], [0.0]]), tg.constant([1, 1]), dense_shape=[4, 1])
    clipped, norm = tg.clip_by_global_norm([s, tg.constant([4.0])], 1.0)
    assert float(norm) == pytest.approx(5.0)
    assert isinstance(clipped[0], tg.IndexedSlices)
    np.testing.assert_allclose(clipped[0].values.numpy(), [[0.6], [0.0]], rtol=1e-6)
    np.testing.assert_allclose(clipped[1].numpy(), [0.8], rtol=1e-6)


def test_bad_slices_raise():
    with pytest.raises(tg.errors.InvalidArgumentError, match="need values of shape"):
        tg.IndexedSlices(tg.constant([[1.0, 2.0]]), tg.constant([0, 1]), dense_shape=[3, 2])
    with pytest.raises(ValueError, match="dense_shape"):
        tg.IndexedSlices(tg.constant([[1.0]]), tg.constant([0]))
    with pytest.raises(tg.errors.InvalidArgumentError, match=r"is not in \[0, 3\)"):
        tg.convert_to_tensor(tg.IndexedSlices(tg.constant([[1.0]]), tg.constant([3]), dense_shape=[3, 1]))
