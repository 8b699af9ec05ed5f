"""tg.keras: the parts of Keras that the C++ side has - layers, initializers, losses and
optimizers under Keras's names and arguments.

    model_layers = [tg.keras.layers.Dense(256, activation="relu"), tg.keras.layers.Dense(10)]
    optimizer = tg.keras.optimizers.Adam(1e-3)
    loss_fn = tg.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

Layers are tg.Modules built on their first call, as Keras builds them (the input's last
dimension fixes the weights' shapes); the weighted ones hold the C++ layer (tg::nn::Dense,
Conv2D, Embedding, LayerNorm, BatchNorm, GRUCell, LSTMCell, Dropout) and its tg.Variables.
Options the C++ layers do not have (regularizers, constraints, other initializers for them,
use_bias=False on Dense, data_format="channels_first", groups) raise
tg.errors.UnimplementedError naming the option. There is no keras.Model / Sequential / fit:
write the training loop with tg.GradientTape (docs/python.md).
"""
import collections
import re
import threading

import numpy as np

from tracegraph import _core
from tracegraph import _gradient
from tracegraph import dtypes
from tracegraph import errors
from tracegraph import optimizers
from tracegraph._tensor import Tensor, TensorShape
from tracegraph._variables import Variable, init_scope
from tracegraph.module import Module

__all__ = ["layers", "initializers", "losses", "optimizers", "activations", "mixed_precision"]

optimizers = optimizers  # keras.optimizers: the optimizers of tracegraph.optimizers


def _unimplemented(where, what):
    return errors.UnimplementedError(None, None, f"[{where}] {what}")


# ---- activations -----------------------------------------------------------------------------

def _linear(x):
    return x


class activations:  # pylint: disable=invalid-name
    """keras.activations: by name or as functions."""
    relu = staticmethod(_core.relu)
    sigmoid = staticmethod(_core.sigmoid)
    tanh = staticmethod(_core.tanh)
    softmax = staticmethod(lambda x, axis=-1: _core.softmax(x, axis))
    gelu = staticmethod(_core.gelu)
    elu = staticmethod(_core.elu)
    softplus = staticmethod(_core.softplus)
    linear = staticmethod(_linear)

    @staticmethod
    def silu(x):
        return _core.multiply(x, _core.sigmoid(x))

    swish = silu

    @staticmethod
    def get(identifier):
        """An activation function from a name, a callable or None (linear)."""
        if identifier is None:
            return _linear
        if callable(identifier):
            return identifier
        if isinstance(identifier, str):
            fn = getattr(activations, identifier, None)
            if fn is not None and identifier not in ("get",):
                return fn
        raise ValueError(f"Could not interpret activation function identifier: {identifier!r}")


# ---- initializers ----------------------------------------------------------------------------

def _fresh_seed():
    """A seed for an unseeded initializer: drawn from tg.random's global stream, so that
    tg.random.set_seed makes a program's initial weights repeatable."""
    with init_scope():
        return int(_core.uniform([], 0, 2 ** 31 - 1, dtype="int64").numpy())


class Initializer:
    """keras.initializers.Initializer: __call__(shape, dtype=None) returns the initial value."""

    def __call__(self, shape, dtype=None):
        raise NotImplementedError

    def get_config(self):
        return {}


class _Seeded(Initializer):
    _fn = None

    def __init__(self, seed=None):
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                                 or seed < 0):
            raise ValueError(f"{type(self).__name__}: seed must be a non-negative int or None, "
                             f"got {seed!r}")
        self.seed = seed

    def _seed(self):
        return self.seed if self.seed is not None else _fresh_seed()

    def __call__(self, shape, dtype=None):
        return type(self)._fn(list(shape), self._seed(), dtype or "float32")

    def get_config(self):
        return {"seed": self.seed}


class GlorotUniform(_Seeded):
    """Uniform in [-limit, limit), limit = sqrt(6 / (fan_in + fan_out))."""
    _fn = staticmethod(_core._glorot_uniform)


class GlorotNormal(_Seeded):
    """Truncated normal with stddev sqrt(2 / (fan_in + fan_out))."""
    _fn = staticmethod(_core._glorot_normal)


class HeNormal(_Seeded):
    """Truncated normal with stddev sqrt(2 / fan_in)."""
    _fn = staticmethod(_core._he_normal)


class TruncatedNormal(_Seeded):
    """mean + stddev * a normal truncated at 2 stddev."""

    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        super().__init__(seed)
        self.mean, self.stddev = mean, stddev

    def __call__(self, shape, dtype=None):
        return _core._truncated_normal_init(list(shape), self._seed(), float(self.mean),
                                            float(self.stddev), dtype or "float32")


class Orthogonal(_Seeded):
    """An orthogonal matrix (times gain)."""

    def __init__(self, gain=1.0, seed=None):
        super().__init__(seed)
        self.gain = gain

    def __call__(self, shape, dtype=None):
        return _core._orthogonal_init(list(shape), self._seed(), float(self.gain), dtype or "float32")


class Zeros(Initializer):
    def __call__(self, shape, dtype=None):
        return _core.zeros(list(shape), dtype=dtype or "float32")


class Ones(Initializer):
    def __call__(self, shape, dtype=None):
        return _core.ones(list(shape), dtype=dtype or "float32")


class Constant(Initializer):
    def __init__(self, value=0.0):
        self.value = value

    def __call__(self, shape, dtype=None):
        return _core.fill(list(shape), _core.constant(self.value, dtype=dtype or "float32"))


class initializers:  # pylint: disable=invalid-name
    """keras.initializers."""
    Initializer = Initializer
    GlorotUniform = GlorotUniform
    GlorotNormal = GlorotNormal
    HeNormal = HeNormal
    TruncatedNormal = TruncatedNormal
    Orthogonal = Orthogonal
    Zeros = Zeros
    Ones = Ones
    Constant = Constant
    glorot_uniform = GlorotUniform
    glorot_normal = GlorotNormal
    he_normal = HeNormal
    truncated_normal = TruncatedNormal
    orthogonal = Orthogonal
    zeros = Zeros
    ones = Ones
    constant = Constant

    @staticmethod
    def get(identifier):
        if identifier is None:
            return None
        if isinstance(identifier, Initializer):
            return identifier
        if isinstance(identifier, str):
            snake = re.sub(r"(?<!^)(?=[A-Z])", "_", identifier).lower()
            cls = getattr(initializers, snake, None)
            if isinstance(cls, type) and issubclass(cls, Initializer):
                return cls()
        if callable(identifier):
            return identifier
        raise ValueError(f"Could not interpret initializer identifier: {identifier!r}")


def _glorot_seed(where, what, initializer):
    """The seed of a Glorot-uniform initializer (the C++ layers' kernel initializer)."""
    init = initializers.get(initializer)
    if type(init) is not GlorotUniform:  # pylint: disable=unidiomatic-typecheck
        raise _unimplemented(where, f"{what}={initializer!r}: the C++ layer's kernel is "
                             "Glorot-uniform; pass 'glorot_uniform' or "
                             "tg.keras.initializers.GlorotUniform(seed=...), or assign the "
                             "kernel after the layer is built")
    return init._seed()  # pylint: disable=protected-access


def _require_zeros(where, what, initializer):
    if type(initializers.get(initializer)) is not Zeros:  # pylint: disable=unidiomatic-typecheck
        raise _unimplemented(where, f"{what}={initializer!r}: the C++ layer starts it at zeros; "
                             "assign it after the layer is built")


# ---- layers ----------------------------------------------------------------------------------

_names_lock = threading.Lock()
_name_counts = collections.defaultdict(int)


def _unique_name(base):
    with _names_lock:
        n = _name_counts[base]
        _name_counts[base] += 1
    return base if n == 0 else f"{base}_{n}"


def _snake(name):
    """Keras's layer names: Dense -> dense, Conv2D -> conv2d, MaxPooling2D -> max_pooling2d."""
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


_UNSUPPORTED_LAYER_ARGS = ("kernel_regularizer", "bias_regularizer", "activity_regularizer",
                           "kernel_constraint", "bias_constraint", "embeddings_regularizer",
                           "embeddings_constraint", "gamma_regularizer", "beta_regularizer",
                           "gamma_constraint", "beta_constraint", "recurrent_regularizer",
                           "recurrent_constraint", "lora_rank")



# ---- mixed precision -------------------------------------------------------------------------

class Policy:
    """keras.mixed_precision.Policy: a layer's variable dtype and compute dtype, by name.

    "float32", "float64" and "bfloat16" make both the same; "mixed_bfloat16" keeps Variables in
    float32 and computes in bfloat16 (the layer casts its inputs and Variables at each call, its
    outputs are bfloat16, and gradients reach the Variables in float32). Any other name, such
    as "mixed_float16" (tracegraph has no float16), raises ValueError. The names and dtypes are
    tg::nn::DTypePolicy's, which the C++ layers take.
    """

    def __init__(self, name):
        if isinstance(name, Policy):
            name = name.name
        if not isinstance(name, str):
            raise TypeError(f"Policy(name): name must be a string such as \"mixed_bfloat16\", "
                            f"got {type(name).__name__}: {name!r}")
        self._name, self._variable_dtype, self._compute_dtype = _core._dtype_policy(name)

    @property
    def name(self):
        return self._name

    @property
    def variable_dtype(self):
        """The dtype of the layer's Variables, a string ("float32" under "mixed_bfloat16")."""
        return self._variable_dtype

    @property
    def compute_dtype(self):
        """The dtype the layer computes in and returns, a string ("bfloat16" under
        "mixed_bfloat16")."""
        return self._compute_dtype

    def __eq__(self, other):
        return isinstance(other, Policy) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f'<Policy "{self.name}">'


def _set_global_policy(policy):
    """keras.mixed_precision.set_global_policy: the policy of layers constructed from now on
    without a dtype argument (a Policy, a policy name, or None for "float32"). It is the C++
    tg::nn::set_global_policy, so C++ and Python layers follow the same one. Set it before
    building the model."""
    if policy is None:
        policy = "float32"
    if not isinstance(policy, (Policy, str)):
        raise TypeError("set_global_policy: policy must be a Policy, a policy name such as "
                        f"\"mixed_bfloat16\", or None, got {type(policy).__name__}: {policy!r}")
    _core._set_global_policy(Policy(policy).name)


def _global_policy():
    """keras.mixed_precision.global_policy: the current global Policy ("float32" until set)."""
    return Policy(_core._global_policy())


class mixed_precision:  # pylint: disable=invalid-name
    """keras.mixed_precision: Policy, set_global_policy and global_policy. Dense, Conv2D,
    DepthwiseConv2D and Conv2DTranspose take mixed policies; the other layers use the global
    policy's variable dtype for both (under "mixed_bfloat16" they compute in float32, and say so
    in compute_dtype) and raise UnimplementedError for a mixed policy passed as their dtype."""
    Policy = Policy
    set_global_policy = staticmethod(_set_global_policy)
    global_policy = staticmethod(_global_policy)


def _layer_policy(where, dtype, supports_mixed):
    """The Policy of a layer given its dtype argument (None: the global policy)."""
    if dtype is None:
        policy = _global_policy()
        if not supports_mixed and policy.variable_dtype != policy.compute_dtype:
            policy = Policy(policy.variable_dtype)
        return policy
    if isinstance(dtype, (Policy, str)):
        policy = Policy(dtype)
    else:
        policy = Policy(dtypes.as_dtype(dtype).name)
    if not supports_mixed and policy.variable_dtype != policy.compute_dtype:
        raise _unimplemented(where, f"dtype={policy.name!r}: a mixed policy is supported by Dense, "
                             "Conv2D, DepthwiseConv2D and Conv2DTranspose; give this layer "
                             f"dtype={policy.variable_dtype!r}")
    return policy


class Layer(Module):
    """keras.layers.Layer: a Module built on its first call.

    Subclass it with build(input_shape) (create weights with add_weight) and call(inputs).
    """

    def __init__(self, trainable=True, name=None, dtype=None, **kwargs):
        for key, value in kwargs.items():
            if key in _UNSUPPORTED_LAYER_ARGS:
                if value is not None:
                    raise _unimplemented(type(self).__name__, f"{key} is not supported")
            elif key not in ("input_shape", "input_dim", "autocast"):
                raise TypeError(f"{type(self).__name__}: unexpected keyword argument {key!r}")
        super().__init__(name=name or _unique_name(_snake(type(self).__name__)))
        self._layer_trainable = bool(trainable)
        self._dtype_policy = _layer_policy(type(self).__name__, dtype, self._supports_mixed_policy)
        self._dtype = dtypes.as_dtype(self._dtype_policy.variable_dtype)
        self.built = False

    # Layers whose C++ layer casts to the compute dtype (tg::nn::DTypePolicy) set this.
    _supports_mixed_policy = False

    @property
    def dtype(self):
        """The dtype of the layer's Variables (the policy's variable_dtype), as Keras's."""
        return self._dtype.name

    @property
    def dtype_policy(self):
        return self._dtype_policy

    @property
    def variable_dtype(self):
        return self._dtype_policy.variable_dtype

    @property
    def compute_dtype(self):
        return self._dtype_policy.compute_dtype

    @property
    def trainable(self):
        return self._layer_trainable

    @trainable.setter
    def trainable(self, value):
        self._layer_trainable = bool(value)
        for v in self.variables:
            v._trainable = bool(value)  # pylint: disable=protected-access

    # Keras orders a layer's weights by creation (kernel before bias), then its sublayers';
    # tg.Module's sorted walk finds the sublayers.
    @property
    def variables(self):
        out = list(getattr(self, "_created_weights", ()))
        seen = {id(v) for v in out}
        for v in Module.variables.fget(self):
            if id(v) not in seen:
                seen.add(id(v))
                out.append(v)
        return tuple(out)

    @property
    def trainable_variables(self):
        return tuple(v for v in self.variables if v.trainable)

    @property
    def non_trainable_variables(self):
        return tuple(v for v in self.variables if not v.trainable)

    @property
    def weights(self):
        return list(self.trainable_variables) + list(self.non_trainable_variables)

    @property
    def trainable_weights(self):
        return list(self.trainable_variables)

    @property
    def non_trainable_weights(self):
        return list(self.non_trainable_variables)

    def get_weights(self):
        return [v.numpy() for v in self.weights]

    def set_weights(self, weights):
        weights = list(weights)
        if len(weights) != len(self.weights):
            raise ValueError(f"Layer {self.name!r} expects {len(self.weights)} weights, but the "
                             f"received weights has {len(weights)} elements.")
        for v, w in zip(self.weights, weights):
            v.assign(w)

    def count_params(self):
        return int(sum(np.prod(v.shape.as_list()) for v in self.weights))

    def add_weight(self, name=None, shape=None, dtype=None, initializer=None, trainable=True,
                   **kwargs):
        """A new tg.Variable of the layer: initializer (a name or an Initializer; default
        glorot_uniform for floats) applied to shape."""
        for key, value in kwargs.items():
            if value is not None and key in ("regularizer", "constraint"):
                raise _unimplemented(self.name, f"add_weight({key}=...) is not supported")
        dtype = dtypes.as_dtype(dtype) if dtype is not None else self._dtype
        init = initializers.get(initializer if initializer is not None else
                                ("glorot_uniform" if dtype.is_floating else "zeros"))
        with self.name_scope:
            value = init(list(shape or ()), dtype=dtype.name)
            variable = Variable(value, trainable=bool(trainable) and self._layer_trainable,
                                name=name or "Variable", dtype=dtype)
        self._created_weights = list(getattr(self, "_created_weights", ())) + [variable]
        return variable

    def build(self, input_shape):
        del input_shape
        self.built = True

    def call(self, inputs, *args, **kwargs):
        del args, kwargs
        return inputs

    def __call__(self, inputs, *args, **kwargs):
        if not self.built:
            shape = inputs.shape if hasattr(inputs, "shape") else TensorShape(np.shape(inputs))
            with self.name_scope:
                self.build(TensorShape(shape))
            self.built = True
        _gradient.note_layer_reads(self.trainable_variables)
        return self.call(inputs, *args, **kwargs)

    def _own(self, variables):
        """tg.Variables made by the C++ layer, as this layer's (not trainable if it is not)."""
        for v in variables:
            v._trainable = self._layer_trainable  # pylint: disable=protected-access
        self._created_weights = list(getattr(self, "_created_weights", ())) + list(variables)
        return variables


def _last_dim(where, input_shape):
    dim = TensorShape(input_shape)[-1] if TensorShape(input_shape).rank else None
    if dim is None:
        raise ValueError(f"[{where}] the last dimension of the inputs must be known to build the "
                         f"layer, got shape {TensorShape(input_shape)}")
    return dim


def _positive_int(where, what, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"[{where}] {what} must be a positive integer, got {value!r}")
    return int(value)


def _pair(where, what, value):
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return [int(value), int(value)]
    value = list(value)
    if len(value) not in (1, 2):
        raise ValueError(f"[{where}] {what} must be an int or a pair, got {value!r}")
    return [int(v) for v in value] * (2 // len(value))


class Dense(Layer):
    """activation(inputs @ kernel + bias) over the last axis of inputs of any rank >= 2
    (keras.layers.Dense), computed by tg::nn::Dense."""

    _supports_mixed_policy = True

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.units = _positive_int("Dense", "units", units)
        self.activation = activations.get(activation)
        if not use_bias:
            raise _unimplemented("Dense", "use_bias=False: tg::nn::Dense always has a bias; "
                                 "assign it zeros and leave it out of the optimizer's variables")
        self.use_bias = True
        self._kernel_initializer = kernel_initializer
        _require_zeros("Dense", "bias_initializer", bias_initializer)
        initializers.get(kernel_initializer)  # an unknown name fails now, as Keras's
        self._layer = None

    def build(self, input_shape):
        features = _last_dim("Dense", input_shape)
        seed = _glorot_seed("Dense", "kernel_initializer", self._kernel_initializer)
        self._layer = _core._Dense(features, self.units, seed, self._dtype_policy.name, self.name)
        self.kernel, self.bias = self._own([self._layer.kernel, self._layer.bias])
        self.built = True

    def call(self, inputs):
        return self.activation(self._layer(inputs))


class Conv2D(Layer):
    """activation(conv2d(inputs, kernel) + bias), NHWC (keras.layers.Conv2D), computed by
    tg::nn::Conv2D."""

    _supports_mixed_policy = True

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None,
                 dilation_rate=(1, 1), groups=1, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.filters = _positive_int("Conv2D", "filters", filters)
        self.kernel_size = _pair("Conv2D", "kernel_size", kernel_size)
        self.strides = _pair("Conv2D", "strides", strides)
        self.dilation_rate = _pair("Conv2D", "dilation_rate", dilation_rate)
        if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
            raise ValueError(f"[Conv2D] padding must be 'valid' or 'same', got {padding!r}")
        self.padding = padding.lower()
        if data_format not in (None, "channels_last"):
            raise _unimplemented("Conv2D", f"data_format={data_format!r}: only channels_last "
                                 "(NHWC) is supported")
        self.groups = _positive_int("Conv2D", "groups", groups)
        if self.filters % self.groups:
            raise ValueError(f"[Conv2D] filters={self.filters} must be a multiple of groups={self.groups}")
        self.activation = activations.get(activation)
        self.use_bias = bool(use_bias)
        self._kernel_initializer = kernel_initializer
        _require_zeros("Conv2D", "bias_initializer", bias_initializer)
        initializers.get(kernel_initializer)
        self._layer = None

    def build(self, input_shape):
        channels = _last_dim("Conv2D", input_shape)
        seed = _glorot_seed("Conv2D", "kernel_initializer", self._kernel_initializer)
        if channels % self.groups:
            raise ValueError(f"[Conv2D] the inputs' {channels} channels must be a multiple of "
                             f"groups={self.groups}")
        self._layer = _core._Conv2D(channels, self.filters, self.kernel_size, self.strides,
                                    self.padding, self.dilation_rate, self.use_bias, seed,
                                    self._dtype_policy.name, self.name, self.groups)
        self.kernel = self._own([self._layer.kernel])[0]
        self.bias = self._own([self._layer.bias])[0] if self.use_bias else None
        self.built = True

    def call(self, inputs):
        return self.activation(self._layer(inputs))


def _conv_padding(where, padding):
    if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
        raise ValueError(f"[{where}] padding must be 'valid' or 'same', got {padding!r}")
    return padding.lower()


def _channels_last(where, data_format):
    if data_format not in (None, "channels_last"):
        raise _unimplemented(where, f"data_format={data_format!r}: only channels_last (NHWC) is "
                             "supported")


class DepthwiseConv2D(Layer):
    """activation(depthwise_conv2d(inputs, kernel) + bias), NHWC (keras.layers.DepthwiseConv2D):
    kernel (kh, kw, in_channels, depth_multiplier), computed by tg::nn::DepthwiseConv2D."""

    _supports_mixed_policy = True

    def __init__(self, kernel_size, strides=(1, 1), padding="valid", depth_multiplier=1,
                 data_format=None, dilation_rate=(1, 1), activation=None, use_bias=True,
                 depthwise_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.kernel_size = _pair("DepthwiseConv2D", "kernel_size", kernel_size)
        self.strides = _pair("DepthwiseConv2D", "strides", strides)
        self.dilation_rate = _pair("DepthwiseConv2D", "dilation_rate", dilation_rate)
        self.padding = _conv_padding("DepthwiseConv2D", padding)
        self.depth_multiplier = _positive_int("DepthwiseConv2D", "depth_multiplier", depth_multiplier)
        _channels_last("DepthwiseConv2D", data_format)
        self.activation = activations.get(activation)
        self.use_bias = bool(use_bias)
        self._depthwise_initializer = depthwise_initializer
        _require_zeros("DepthwiseConv2D", "bias_initializer", bias_initializer)
        initializers.get(depthwise_initializer)
        self._layer = None

    def build(self, input_shape):
        channels = _last_dim("DepthwiseConv2D", input_shape)
        seed = _glorot_seed("DepthwiseConv2D", "depthwise_initializer", self._depthwise_initializer)
        self._layer = _core._DepthwiseConv2D(channels, self.kernel_size, self.strides, self.padding,
                                             self.depth_multiplier, self.dilation_rate, self.use_bias,
                                             seed, self._dtype_policy.name, self.name)
        self.depthwise_kernel = self._own([self._layer.kernel])[0]
        self.bias = self._own([self._layer.bias])[0] if self.use_bias else None
        self.built = True

    def call(self, inputs):
        return self.activation(self._layer(inputs))


class Conv2DTranspose(Layer):
    """activation(conv2d_transpose(inputs, kernel) + bias), NHWC (keras.layers.Conv2DTranspose):
    kernel (kh, kw, filters, in_channels), Keras's output sizes, computed by
    tg::nn::Conv2DTranspose (the inputs' height and width must be known)."""

    _supports_mixed_policy = True

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", output_padding=None,
                 data_format=None, dilation_rate=(1, 1), activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.filters = _positive_int("Conv2DTranspose", "filters", filters)
        self.kernel_size = _pair("Conv2DTranspose", "kernel_size", kernel_size)
        self.strides = _pair("Conv2DTranspose", "strides", strides)
        self.dilation_rate = _pair("Conv2DTranspose", "dilation_rate", dilation_rate)
        self.padding = _conv_padding("Conv2DTranspose", padding)
        self.output_padding = (None if output_padding is None
                               else _pair("Conv2DTranspose", "output_padding", output_padding))
        _channels_last("Conv2DTranspose", data_format)
        self.activation = activations.get(activation)
        self.use_bias = bool(use_bias)
        self._kernel_initializer = kernel_initializer
        _require_zeros("Conv2DTranspose", "bias_initializer", bias_initializer)
        initializers.get(kernel_initializer)
        self._layer = None

    def build(self, input_shape):
        channels = _last_dim("Conv2DTranspose", input_shape)
        seed = _glorot_seed("Conv2DTranspose", "kernel_initializer", self._kernel_initializer)
        self._layer = _core._Conv2DTranspose(channels, self.filters, self.kernel_size, self.strides,
                                             self.padding, self.output_padding or [],
                                             self.dilation_rate, self.use_bias, seed,
                                             self._dtype_policy.name, self.name)
        self.kernel = self._own([self._layer.kernel])[0]
        self.bias = self._own([self._layer.bias])[0] if self.use_bias else None
        self.built = True

    def call(self, inputs):
        return self.activation(self._layer(inputs))


class Dropout(Layer):
    """Zeroes a fraction `rate` of the inputs and scales the rest by 1 / (1 - rate) when
    training (keras.layers.Dropout); training=None means inference, as outside Keras's fit."""

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        if noise_shape is not None:
            raise _unimplemented("Dropout", "noise_shape is not supported")
        self.rate, self.seed = rate, seed
        self._layer = _core._Dropout(float(rate), seed)

    def call(self, inputs, training=None):
        if training is None:
            training = False
        return self._layer(inputs, training)


class Embedding(Layer):
    """Rows of a (input_dim, output_dim) table by integer id (keras.layers.Embedding)."""

    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform", mask_zero=False,
                 seed=None, **kwargs):
        super().__init__(**kwargs)
        self.input_dim = _positive_int("Embedding", "input_dim", input_dim)
        self.output_dim = _positive_int("Embedding", "output_dim", output_dim)
        if embeddings_initializer not in ("uniform", "random_uniform"):
            raise _unimplemented("Embedding", f"embeddings_initializer={embeddings_initializer!r}: "
                                 "the C++ table starts uniform in [-0.05, 0.05)")
        if mask_zero:
            raise _unimplemented("Embedding", "mask_zero=True (masks) is not supported")
        self._seed_value = seed
        self._layer = None

    def build(self, input_shape):
        seed = self._seed_value if self._seed_value is not None else _fresh_seed()
        self._layer = _core._Embedding(self.input_dim, self.output_dim, seed, self._dtype.name,
                                       self.name)
        self.embeddings = self._own([self._layer.embeddings])[0]
        self.built = True

    def call(self, inputs):
        return self._layer(inputs)


class LayerNormalization(Layer):
    """(x - mean) / sqrt(variance + epsilon) * gamma + beta over the last axis."""

    def __init__(self, axis=-1, epsilon=1e-3, center=True, scale=True, **kwargs):
        super().__init__(**kwargs)
        if axis not in (-1, [-1], (-1,)):
            raise _unimplemented("LayerNormalization", f"axis={axis!r}: only the last axis")
        if not center or not scale:
            raise _unimplemented("LayerNormalization", "center=False / scale=False")
        self.axis, self.epsilon = -1, epsilon
        self._layer = None

    def build(self, input_shape):
        features = _last_dim("LayerNormalization", input_shape)
        self._layer = _core._LayerNorm(features, float(self.epsilon), self._dtype.name, self.name)
        self.gamma, self.beta = self._own([self._layer.gamma, self._layer.beta])
        self.built = True

    def call(self, inputs):
        return self._layer(inputs)


class BatchNormalization(Layer):
    """Normalises over every axis but the last: batch statistics when training (updating the
    moving ones), the moving statistics otherwise (training=None is inference)."""

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True, **kwargs):
        super().__init__(**kwargs)
        if axis not in (-1, [-1], (-1,)):
            raise _unimplemented("BatchNormalization", f"axis={axis!r}: only the last axis")
        if not center or not scale:
            raise _unimplemented("BatchNormalization", "center=False / scale=False")
        self.axis, self.momentum, self.epsilon = -1, momentum, epsilon
        self._layer = None

    def build(self, input_shape):
        features = _last_dim("BatchNormalization", input_shape)
        self._layer = _core._BatchNorm(features, float(self.momentum), float(self.epsilon),
                                       self._dtype.name, self.name)
        self.gamma, self.beta = self._own([self._layer.gamma, self._layer.beta])
        self.moving_mean, self.moving_variance = self._own([self._layer.moving_mean,
                                                           self._layer.moving_variance])
        self.moving_mean._trainable = False  # pylint: disable=protected-access
        self.moving_variance._trainable = False  # pylint: disable=protected-access
        self.built = True

    def call(self, inputs, training=None):
        return self._layer(inputs, False if training is None else training)


class _RecurrentCell(Layer):
    _cpp_class = None

    def __init__(self, units, seed=None, **kwargs):
        for key in ("activation", "recurrent_activation"):
            if key in kwargs and kwargs.pop(key) not in (None, "tanh" if key == "activation" else "sigmoid"):
                raise _unimplemented(type(self).__name__, f"{key} other than Keras's default")
        for key in ("dropout", "recurrent_dropout"):
            if kwargs.pop(key, 0.0):
                raise _unimplemented(type(self).__name__, f"{key} is not supported")
        if not kwargs.pop("use_bias", True):
            raise _unimplemented(type(self).__name__, "use_bias=False is not supported")
        super().__init__(**kwargs)
        self.units = _positive_int(type(self).__name__, "units", units)
        self._seed_value = seed
        self._layer = None

    def build(self, input_shape):
        features = _last_dim(type(self).__name__, input_shape)
        seed = self._seed_value if self._seed_value is not None else _fresh_seed()
        self._layer = type(self)._cpp_class(features, self.units, seed, self._dtype.name, self.name)
        self.kernel, self.recurrent_kernel, self.bias = self._own(list(self._layer._variables()))
        self.built = True


class GRUCell(_RecurrentCell):
    """One GRU step with Keras's defaults (reset_after=True): call(inputs, states) returns
    (h, [h]) for states [h] (or h, h for a tensor state)."""
    _cpp_class = _core._GRUCell

    def call(self, inputs, states, training=None):
        del training
        h = states[0] if isinstance(states, (list, tuple)) else states
        new_h = self._layer(inputs, h)
        return new_h, ([new_h] if isinstance(states, (list, tuple)) else new_h)


class LSTMCell(_RecurrentCell):
    """One LSTM step with Keras's defaults: call(inputs, [h, c]) returns (h', [h', c'])."""
    _cpp_class = _core._LSTMCell

    def call(self, inputs, states, training=None):
        del training
        if not isinstance(states, (list, tuple)) or len(states) != 2:
            raise ValueError("[LSTMCell] states must be [h, c]")
        h, c = self._layer(inputs, states[0], states[1])
        return h, [h, c]


class MultiHeadAttention(Layer):
    """keras.layers.MultiHeadAttention over tg::nn::MultiHeadAttention (one fused attention op
    whose kernel never holds the Tq x Tk scores): call(query, value, key=None,
    attention_mask=None, training=None, use_causal_mask=False) with inputs (batch, T, features).
    A query that sees no key gives zeros before the output projection, as PyTorch's attention
    does (Keras's masking gives the mean of the values there)."""

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True, output_shape=None,
                 attention_axes=None, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 seed=None, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = _positive_int("MultiHeadAttention", "num_heads", num_heads)
        self.key_dim = _positive_int("MultiHeadAttention", "key_dim", key_dim)
        self.value_dim = None if value_dim is None else _positive_int("MultiHeadAttention", "value_dim", value_dim)
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"[MultiHeadAttention] dropout must be in [0, 1), got {dropout!r}")
        self.dropout = float(dropout)
        self.use_bias = bool(use_bias)
        if isinstance(output_shape, (list, tuple)):
            if len(output_shape) != 1:
                raise _unimplemented("MultiHeadAttention", f"output_shape={output_shape!r}: only one "
                                     "output dimension (an int) is supported")
            output_shape = output_shape[0]
        self._output_dim = None if output_shape is None else _positive_int("MultiHeadAttention", "output_shape",
                                                                           output_shape)
        if attention_axes is not None:
            raise _unimplemented("MultiHeadAttention", "attention_axes: attention runs over axis 1 (time)")
        self._kernel_initializer = kernel_initializer
        _require_zeros("MultiHeadAttention", "bias_initializer", bias_initializer)
        initializers.get(kernel_initializer)
        self._dropout_seed = seed
        self._layer = None

    def __call__(self, query, value, key=None, attention_mask=None, return_attention_scores=False,
                 training=None, use_causal_mask=False):
        if return_attention_scores:
            raise _unimplemented("MultiHeadAttention", "return_attention_scores=True: the fused kernel "
                                 "never forms the scores; compute softmax(q k^T / sqrt(key_dim)) yourself")
        if not self.built:
            with self.name_scope:
                self.build(query.shape, value.shape, None if key is None else key.shape)
            self.built = True
        _gradient.note_layer_reads(self.trainable_variables)
        return self.call(query, value, key, attention_mask, training, use_causal_mask)

    def build(self, query_shape, value_shape=None, key_shape=None):
        value_shape = query_shape if value_shape is None else value_shape
        key_shape = value_shape if key_shape is None else key_shape
        query_features = _last_dim("MultiHeadAttention", query_shape)
        seed = _glorot_seed("MultiHeadAttention", "kernel_initializer", self._kernel_initializer)
        self._layer = _core._MultiHeadAttention(
            query_features, self.num_heads, self.key_dim, self.value_dim, self.dropout, self.use_bias,
            self._output_dim, _last_dim("MultiHeadAttention", key_shape),
            _last_dim("MultiHeadAttention", value_shape), seed, self._dropout_seed, self._dtype.name, self.name)
        self._own(list(self._layer._variables()))
        self.built = True

    def call(self, query, value, key=None, attention_mask=None, training=None, use_causal_mask=False):
        if training is not None and not isinstance(training, bool):
            raise _unimplemented("MultiHeadAttention", "a tensor `training` flag: pass a Python bool")
        return self._layer(query, value, key, attention_mask, bool(use_causal_mask), bool(training))


class Flatten(Layer):
    """(batch, ...) -> (batch, product of the rest)."""

    def __init__(self, data_format=None, **kwargs):
        super().__init__(**kwargs)
        del data_format

    def call(self, inputs):
        x = _core.convert_to_tensor(inputs)
        rest = x.shape[1:].num_elements()
        return _core.reshape(x, [-1, rest] if rest is not None else [_core.shape(x)[0], -1])


class _Pooling2D(Layer):
    _op = None

    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(**kwargs)
        if data_format not in (None, "channels_last"):
            raise _unimplemented(type(self).__name__, "only channels_last (NHWC) is supported")
        self.pool_size = _pair(type(self).__name__, "pool_size", pool_size)
        self.strides = _pair(type(self).__name__, "strides", strides) if strides is not None \
            else list(self.pool_size)
        self.padding = padding.upper()

    def call(self, inputs):
        return type(self)._op(inputs, self.pool_size, self.strides, self.padding)


class MaxPooling2D(_Pooling2D):
    _op = staticmethod(_core.max_pool2d)


class AveragePooling2D(_Pooling2D):
    _op = staticmethod(_core.avg_pool2d)


class Activation(Layer):
    def __init__(self, activation, **kwargs):
        super().__init__(**kwargs)
        self.activation = activations.get(activation)

    def call(self, inputs):
        return self.activation(inputs)


class ReLU(Layer):
    def call(self, inputs):
        return _core.relu(inputs)


class Softmax(Layer):
    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis

    def call(self, inputs):
        return _core.softmax(inputs, self.axis)


class layers:  # pylint: disable=invalid-name
    """keras.layers (the ones the C++ side has, and a few stateless ones)."""
    Layer = Layer
    Dense = Dense
    Conv2D = Conv2D
    DepthwiseConv2D = DepthwiseConv2D
    Conv2DTranspose = Conv2DTranspose
    Convolution2DTranspose = Conv2DTranspose
    Dropout = Dropout
    Embedding = Embedding
    LayerNormalization = LayerNormalization
    BatchNormalization = BatchNormalization
    GRUCell = GRUCell
    LSTMCell = LSTMCell
    MultiHeadAttention = MultiHeadAttention
    Flatten = Flatten
    MaxPooling2D = MaxPooling2D
    MaxPool2D = MaxPooling2D
    AveragePooling2D = AveragePooling2D
    AvgPool2D = AveragePooling2D
    Activation = Activation
    ReLU = ReLU
    Softmax = Softmax


# ---- losses ----------------------------------------------------------------------------------

_EPSILON = 1e-7


class Loss:
    """keras.losses.Loss: __call__(y_true, y_pred) is the batch mean of the per-example losses
    (reduction "sum_over_batch_size"; other reductions and sample_weight are not supported)."""

    def __init__(self, reduction="sum_over_batch_size", name=None):
        if reduction not in ("sum_over_batch_size", "auto", None):
            raise _unimplemented(type(self).__name__, f"reduction={reduction!r}: only the batch "
                                 "mean (sum_over_batch_size) is supported")
        self.reduction = "sum_over_batch_size"
        self.name = name or _snake(type(self).__name__)

    def __call__(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None:
            raise _unimplemented(type(self).__name__, "sample_weight is not supported")
        return self.call(y_true, y_pred)

    def call(self, y_true, y_pred):
        raise NotImplementedError


def _float_pair(y_true, y_pred):
    y_pred = _core.convert_to_tensor(y_pred)
    y_true = _core.cast(_core.convert_to_tensor(y_true), y_pred.dtype)
    return y_true, y_pred


class MeanSquaredError(Loss):
    def call(self, y_true, y_pred):
        y_true, y_pred = _float_pair(y_true, y_pred)
        return _core._mean_squared_error(y_true, y_pred)


class Huber(Loss):
    def __init__(self, delta=1.0, reduction="sum_over_batch_size", name="huber_loss"):
        super().__init__(reduction, name)
        self.delta = delta

    def call(self, y_true, y_pred):
        y_true, y_pred = _float_pair(y_true, y_pred)
        return _core._huber_mean(y_true, y_pred, float(self.delta))


def _clipped_log(p):
    return _core.log(_core.clip_by_value(p, _EPSILON, 1.0 - _EPSILON))


class CategoricalCrossentropy(Loss):
    def __init__(self, from_logits=False, label_smoothing=0.0, axis=-1,
                 reduction="sum_over_batch_size", name="categorical_crossentropy"):
        super().__init__(reduction, name)
        if label_smoothing or axis != -1:
            raise _unimplemented("CategoricalCrossentropy", "label_smoothing / axis != -1")
        self.from_logits = from_logits

    def call(self, y_true, y_pred):
        y_true, y_pred = _float_pair(y_true, y_pred)
        if self.from_logits:
            return _core._softmax_cross_entropy_mean(y_true, y_pred)
        p = _core.divide(y_pred, _core.reduce_sum(y_pred, -1, keepdims=True))
        per_example = _core.negative(_core.reduce_sum(_core.multiply(y_true, _clipped_log(p)), -1))
        return _core.reduce_mean(per_example)


class SparseCategoricalCrossentropy(Loss):
    def __init__(self, from_logits=False, ignore_class=None, reduction="sum_over_batch_size",
                 name="sparse_categorical_crossentropy"):
        super().__init__(reduction, name)
        if ignore_class is not None:
            raise _unimplemented("SparseCategoricalCrossentropy", "ignore_class is not supported")
        self.from_logits = from_logits

    def call(self, y_true, y_pred):
        y_pred = _core.convert_to_tensor(y_pred)
        labels = _core.convert_to_tensor(y_true)
        if labels.dtype.is_floating:
            labels = _core.cast(labels, "int64")
        if labels.shape.rank == 2 and labels.shape[-1] == 1:
            labels = _core.squeeze(labels, axis=[-1])
        if self.from_logits:
            return _core._sparse_softmax_cross_entropy_mean(y_pred, labels)
        classes = y_pred.shape[-1]
        p = _core.divide(y_pred, _core.reduce_sum(y_pred, -1, keepdims=True))
        one_hot = _core.one_hot(labels, classes, dtype=y_pred.dtype)
        per_example = _core.negative(_core.reduce_sum(_core.multiply(one_hot, _clipped_log(p)), -1))
        return _core.reduce_mean(per_example)


class BinaryCrossentropy(Loss):
    def __init__(self, from_logits=False, label_smoothing=0.0, reduction="sum_over_batch_size",
                 name="binary_crossentropy"):
        super().__init__(reduction, name)
        if label_smoothing:
            raise _unimplemented("BinaryCrossentropy", "label_smoothing is not supported")
        self.from_logits = from_logits

    def call(self, y_true, y_pred):
        y_true, y_pred = _float_pair(y_true, y_pred)
        if self.from_logits:
            return _core._binary_crossentropy_with_logits(y_true, y_pred)
        one = _core.ones_like(y_pred)
        per = _core.negative(_core.add(
            _core.multiply(y_true, _clipped_log(y_pred)),
            _core.multiply(_core.subtract(one, y_true), _clipped_log(_core.subtract(one, y_pred)))))
        return _core.reduce_mean(per)


class losses:  # pylint: disable=invalid-name
    """keras.losses (the class forms)."""
    Loss = Loss
    MeanSquaredError = MeanSquaredError
    Huber = Huber
    CategoricalCrossentropy = CategoricalCrossentropy
    SparseCategoricalCrossentropy = SparseCategoricalCrossentropy
    BinaryCrossentropy = BinaryCrossentropy
