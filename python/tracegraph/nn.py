"""tg.nn: activations, losses, convolution and pooling (TensorFlow's tf.nn)."""
from tracegraph import _core
from tracegraph._core import (avg_pool2d, conv2d, conv2d_transpose, depthwise_conv2d, dropout,
                              elu, gelu, l2_normalize, leaky_relu, log_sigmoid, log_softmax,
                              max_pool2d, relu, relu6, sigmoid, softmax, softplus, tanh)
from tracegraph.math import top_k


def silu(features, beta=1.0, name=None):
    """x * sigmoid(beta * x) (tf.nn.silu, also tf.nn.swish)."""
    del name
    x = _core.convert_to_tensor(features)
    return _core.multiply(x, _core.sigmoid(_core.multiply(x, beta) if beta != 1.0 else x))


swish = silu


def bias_add(value, bias, data_format=None, name=None):
    """value + bias along the last axis (NHWC / channels last only)."""
    del name
    if data_format not in (None, "NHWC", "NWC", "N...C"):
        raise _core_unimplemented("bias_add", "only channels-last data formats are supported")
    return _core.add(value, bias)


def softmax_cross_entropy_with_logits(labels, logits, axis=-1, name=None):
    """Per-example -sum(labels * log_softmax(logits)) along `axis` (not averaged, as TF's)."""
    del name
    logits = _core.convert_to_tensor(logits)
    labels = _core.convert_to_tensor(labels, dtype_hint=logits.dtype)
    return _core.negative(_core.reduce_sum(_core.multiply(labels, _core.log_softmax(logits, axis)), axis))


def sparse_softmax_cross_entropy_with_logits(labels, logits, name=None):
    """Per-example -log_softmax(logits)[label] (labels are class indices; not averaged)."""
    del name
    logits = _core.convert_to_tensor(logits)
    classes = logits.shape[-1]
    if classes is None:
        raise _core_unimplemented("sparse_softmax_cross_entropy_with_logits",
                                  "the number of classes (the logits' last dim) must be known")
    one_hot = _core.one_hot(labels, classes, dtype=logits.dtype)
    return _core.negative(_core.reduce_sum(_core.multiply(one_hot, _core.log_softmax(logits)), -1))


def sigmoid_cross_entropy_with_logits(labels=None, logits=None, name=None):
    """Elementwise max(x, 0) - x * z + log(1 + e^-|x|): the logistic loss without overflow."""
    del name
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")
    x = _core.convert_to_tensor(logits)
    z = _core.convert_to_tensor(labels, dtype_hint=x.dtype)
    return _core.add(_core.subtract(_core.relu(x), _core.multiply(x, z)),
                     _core.log1p(_core.exp(_core.negative(_core.abs(x)))))


def moments(x, axes, shift=None, keepdims=False, name=None):
    """(mean, variance) over `axes`."""
    del shift, name
    x = _core.convert_to_tensor(x)
    mean = _core.reduce_mean(x, axes, keepdims=True)
    variance = _core.reduce_mean(_core.square(_core.subtract(x, mean)), axes, keepdims=keepdims)
    if not keepdims:
        mean = _core.reduce_mean(x, axes)
    return mean, variance


def embedding_lookup(params, ids, max_norm=None, name=None):
    """The rows of params at ids (tf.nn.embedding_lookup with one params tensor)."""
    del name
    if max_norm is not None:
        raise _core_unimplemented("embedding_lookup", "max_norm is not supported")
    return _core.gather(params, ids)


def _core_unimplemented(op, what):
    from tracegraph import errors  # pylint: disable=import-outside-toplevel
    return errors.UnimplementedError(None, None, f"[{op}] {what}")
