"""The flagship demo from Python: the C++ demo's MLP (examples/demo.cpp) written with tracegraph's
TensorFlow API - import the package as `tf` and this is TF 2 code - trained on Fashion-MNIST with a
traced train_step, then a deliberately bad train_step and the retracing diagnostics it triggers,
then the classifier the C++ demo saved (classify.tgx) loaded and run from Python.

    /usr/bin/python3 examples/python/train_demo.py DATA_DIR [EPOCHS] [CPP_DEMO_OUT]

DATA_DIR holds the four gzipped IDX files (Debian's dataset-fashion-mnist installs them in
/usr/share/datasets/fashion-mnist); CPP_DEMO_OUT is where the C++ demo wrote classify.tgx and
its test set (./tg demo uses build/demo). Run it with PYTHONPATH naming the built package
(./tg demo does: build/release/python).
"""
import gzip
import logging
import os
import struct
import sys
import time

import numpy as np

import tracegraph as tf

BATCH = 128


def read_idx(path):
    """An IDX file (gzipped) as a NumPy array: the format's header, then the elements (big-endian
    dims, unsigned bytes)."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, dtype_code, rank = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype_code != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * rank).reshape(dims)


def load(data_dir, split):
    images = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"))
    return images.reshape(len(images), 784).astype(np.float32) / 255.0, labels.astype(np.int32)


def section(title):
    print(f"\n######## {title} ########")


def build_training():
    """The model and train step of the C++ demo (examples/demo_util.h): Dense layers
    784-256-256-10 (relu, relu, logits), sparse softmax cross-entropy under a GradientTape,
    Adam(1e-3). Returns (model, step, train_step): the model as a function of a batch of images,
    the step (loss and accuracy) as plain Python, and the step as a tf.function.
    bench/python_bench.py times this train_step beside the C++ demo's."""
    layers = [tf.keras.layers.Dense(256, activation="relu"), tf.keras.layers.Dense(256, activation="relu"),
              tf.keras.layers.Dense(10)]
    optimizer = tf.keras.optimizers.Adam(1e-3)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def model(x):
        for layer in layers:
            x = layer(x)
        return x

    def step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x)
            loss = loss_fn(y, logits)
        variables = [v for layer in layers for v in layer.trainable_variables]
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, axis=1, output_type=tf.int32), y), tf.float32))
        return loss, accuracy

    # One trace for every batch: the batch dimension is None, so the last, smaller batch fits too.
    train_step = tf.function(step, input_signature=[tf.TensorSpec([None, 784], tf.float32),
                                                    tf.TensorSpec([None], tf.int32)])
    return model, step, train_step


def main(argv):
    data_dir = argv[1] if len(argv) > 1 else "/usr/share/datasets/fashion-mnist"
    epochs = int(argv[2]) if len(argv) > 2 else 2
    cpp_out = argv[3] if len(argv) > 3 else "build/demo"
    start = time.perf_counter()
    train_x, train_y = load(data_dir, "train")
    test_x, test_y = load(data_dir, "t10k")
    print(f"Fashion-MNIST: {len(train_x)} training and {len(test_x)} test images")

    tf.random.set_seed(42)
    model, step, train_step = build_training()
    predict = tf.function(model, input_signature=[tf.TensorSpec([None, 784], tf.float32)])

    section("Training the 784-256-256-10 MLP from Python: tf.function(train_step), Adam, batch 128")
    rng = np.random.default_rng(7)
    for _ in range(5):  # a few eager steps first: the first creates the weights and Adam's slots
        idx = rng.choice(len(train_x), BATCH, replace=False)
        step(tf.constant(train_x[idx]), tf.constant(train_y[idx]))
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(train_x))
        t0 = time.perf_counter()
        total_loss = total_acc = 0.0
        batches = 0
        for b in range(0, len(order), BATCH):
            idx = order[b:b + BATCH]
            loss, acc = train_step(train_x[idx], train_y[idx])
            total_loss += float(loss)
            total_acc += float(acc)
            batches += 1
        seconds = time.perf_counter() - t0
        test_acc = np.mean(np.argmax(predict(test_x).numpy(), axis=1) == test_y)
        print(f"epoch {epoch}/{epochs}: loss {total_loss / batches:.4f}  train accuracy {100 * total_acc / batches:.1f}%  "
              f"test accuracy {100 * test_acc:.2f}%  {len(order) / seconds:.0f} examples/s ({seconds:.1f} s)")
    print(f"train_step traced {train_step.experimental_get_tracing_count()} time; predict "
          f"{predict.experimental_get_tracing_count()} time")

    section("Step time, eager vs traced (the same batch, median of 30 steps each)")
    x, y = tf.constant(train_x[:BATCH]), tf.constant(train_y[:BATCH])
    for name, fn in (("eager", step), ("traced", train_step)):
        times = []
        for _ in range(30):
            t0 = time.perf_counter()
            loss, _ = fn(x, y)
            float(loss)
            times.append(time.perf_counter() - t0)
        print(f"{name:>6}: {1e3 * float(np.median(times)):.3f} ms per step")

    section("A deliberately bad train_step: the step counter as a Python int")
    logging.basicConfig(stream=sys.stdout, format="logging %(name)s %(levelname)s: %(message)s")

    @tf.function
    def bad_train_step(x, y, step_number):
        warmup = min(1.0, (step_number + 1) / 10)  # a Python value: part of the trace type
        loss, _ = step(x * warmup, y)
        return loss

    t0 = time.perf_counter()
    for step_number in range(10):
        bad_train_step(x, y, step_number)
    print(f"10 calls took {time.perf_counter() - t0:.2f} s and traced "
          f"{bad_train_step.experimental_get_tracing_count()} times. The last retrace's reason:")
    print("  " + bad_train_step.trace_history()[-1].reason)

    section("The fix: the step counter as a tensor")

    @tf.function
    def good_train_step(x, y, step_number):
        warmup = tf.minimum(1.0, (tf.cast(step_number, tf.float32) + 1.0) / 10.0)
        loss, _ = step(x * warmup, y)
        return loss

    t0 = time.perf_counter()
    for step_number in range(10):
        good_train_step(x, y, tf.constant(step_number))
    print(f"10 calls took {time.perf_counter() - t0:.2f} s and traced "
          f"{good_train_step.experimental_get_tracing_count()} time; no warnings")

    section("The C++ demo's classifier, loaded from Python")
    path = os.path.join(cpp_out, "classify.tgx")
    if not os.path.exists(path):
        print(f"{path} is missing: run the C++ demo first (./tg demo runs it before this script)")
    else:
        classify = tf.saved_model.load(path)
        print(f"{path}: {classify.producer}; " + "; ".join(classify.signatures))
        logits = classify(test_x).numpy()
        accuracy = np.mean(np.argmax(logits, axis=1) == test_y)
        print(f"test accuracy of the C++-trained model, run from Python: {100 * accuracy:.2f}%")
        expected = os.path.join(cpp_out, "expected_logits.npy")
        images = os.path.join(cpp_out, "test_images.npy")
        if os.path.exists(expected) and os.path.exists(images):
            same = np.array_equal(classify(np.load(images)).numpy(), np.load(expected))
            print(f"its logits on the C++ demo's saved test images {'equal' if same else 'DIFFER FROM'} the "
                  "C++ process's bit for bit")
            if not same:
                return 1
    print(f"\nPython demo finished in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
