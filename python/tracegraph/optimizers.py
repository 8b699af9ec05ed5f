"""Keras's optimizers over tg::optim (tg.keras.optimizers, also tg.optimizers).

SGD, Adam, AdamW and RMSprop take Keras's arguments and defaults and update tg.Variables with
the C++ optimizers (each Variable in one fused pass), eagerly or inside tg.function; their slots
and step counter are tg.Variables created by the first apply_gradients, so, as in TF, a
tg.function that is traced again for a second optimizer raises the singleton-Variable
ValueError. Learning-rate schedules (schedules.ExponentialDecay, CosineDecay, or a
LearningRateSchedule subclass written in Python) are evaluated on the step counter inside each
step. clipnorm, clipvalue, global_clipnorm and weight_decay are applied as Keras does, before the
update.
"""
import logging

from tracegraph import _core
from tracegraph import errors
from tracegraph._gradient import GradientTape
from tracegraph._variables import Variable

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "schedules"]

_log = logging.getLogger("tracegraph")


def _unimplemented(optimizer, what):
    return errors.UnimplementedError(None, None, f"[{optimizer}] {what}")


# ---- learning-rate schedules -----------------------------------------------------------------

class LearningRateSchedule:
    """The base of learning-rate schedules (keras.optimizers.schedules.LearningRateSchedule).

    Subclass it and define __call__(self, step) with tg ops on `step` (the number of steps taken,
    an int64 scalar tensor; symbolic inside a traced train_step), returning the rate.
    """

    def __call__(self, step):
        raise NotImplementedError("Learning rate schedule must override __call__")

    def get_config(self):
        raise NotImplementedError(f"Learning rate schedule '{type(self).__name__}' must override "
                                  "`get_config()` in order to be serializable.")

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class ExponentialDecay(LearningRateSchedule):
    """initial_learning_rate * decay_rate ^ (step / decay_steps), floored when staircase."""

    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False, name=None):
        self.initial_learning_rate = initial_learning_rate
        self.decay_steps = decay_steps
        self.decay_rate = decay_rate
        self.staircase = staircase
        self.name = name
        self._cpp = _core._ExponentialDecay(float(initial_learning_rate), int(decay_steps),
                                            float(decay_rate), bool(staircase))

    def __call__(self, step):
        return _core.cast(self._cpp(step), "float32")

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate,
                "decay_steps": self.decay_steps, "decay_rate": self.decay_rate,
                "staircase": self.staircase, "name": self.name}


class CosineDecay(LearningRateSchedule):
    """Keras's cosine decay with an optional linear warm-up to warmup_target."""

    def __init__(self, initial_learning_rate, decay_steps, alpha=0.0, name=None,
                 warmup_target=None, warmup_steps=0):
        self.initial_learning_rate = initial_learning_rate
        self.decay_steps = decay_steps
        self.alpha = alpha
        self.name = name
        self.warmup_target = warmup_target
        self.warmup_steps = warmup_steps
        self._cpp = _core._CosineDecay(float(initial_learning_rate), int(decay_steps), float(alpha),
                                       None if warmup_target is None else float(warmup_target),
                                       int(warmup_steps))

    def __call__(self, step):
        return _core.cast(self._cpp(step), "float32")

    def get_config(self):
        return {"initial_learning_rate": self.initial_learning_rate,
                "decay_steps": self.decay_steps, "alpha": self.alpha, "name": self.name,
                "warmup_target": self.warmup_target, "warmup_steps": self.warmup_steps}


class _Schedules:
    """keras.optimizers.schedules."""
    LearningRateSchedule = LearningRateSchedule
    ExponentialDecay = ExponentialDecay
    CosineDecay = CosineDecay


schedules = _Schedules()


# ---- optimizers ------------------------------------------------------------------------------

def _clip_by_norm(g, clip_norm):
    if isinstance(g, _core._IndexedSlices):  # TF: the values' norm, the slices kept
        return _core._IndexedSlices(_clip_by_norm(g.values, clip_norm), g.indices, g.dense_shape)
    norm = _core.sqrt(_core.reduce_sum(_core.square(g)))
    limit = _core.cast(clip_norm, g.dtype)
    return _core.multiply(g, _core.divide(limit, _core.maximum(norm, limit)))


class Optimizer:
    """What SGD, Adam, AdamW and RMSprop share (keras.optimizers.Optimizer).

    Not meant to be subclassed with new update rules: the updates are the C++ optimizers'.
    """

    def __init__(self, cpp, name, learning_rate, weight_decay=None, clipnorm=None, clipvalue=None,
                 global_clipnorm=None, use_ema=False, ema_momentum=0.99,
                 ema_overwrite_frequency=None, loss_scale_factor=None,
                 gradient_accumulation_steps=None, **kwargs):
        del ema_momentum, ema_overwrite_frequency
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected keyword argument(s) "
                            f"{sorted(kwargs)}")
        if use_ema:
            raise _unimplemented(name, "use_ema=True (exponential moving averages of the weights) "
                                 "is not supported")
        if loss_scale_factor is not None:
            raise _unimplemented(name, "loss_scale_factor is not supported")
        if gradient_accumulation_steps is not None:
            raise _unimplemented(name, "gradient_accumulation_steps is not supported; sum the "
                                 "gradients of several steps and apply them once")
        if sum(x is not None for x in (clipnorm, clipvalue, global_clipnorm)) > 1:
            raise ValueError("Only one of `clipnorm`, `clipvalue` and `global_clipnorm` can be set. "
                             f"Received: clipnorm={clipnorm}, clipvalue={clipvalue}, "
                             f"global_clipnorm={global_clipnorm}")
        for what, x in (("clipnorm", clipnorm), ("global_clipnorm", global_clipnorm),
                        ("weight_decay", weight_decay)):
            if x is not None and not (isinstance(x, (int, float)) and x >= 0):
                raise ValueError(f"`{what}` must be a non-negative number, got {x!r}")
        if clipvalue is not None and not (isinstance(clipvalue, (int, float)) and clipvalue >= 0):
            raise ValueError(f"`clipvalue` must be a non-negative number, got {clipvalue!r}")
        self._cpp = cpp
        self.name = name
        self.weight_decay = weight_decay
        self.clipnorm = clipnorm
        self.clipvalue = clipvalue
        self.global_clipnorm = global_clipnorm
        self._schedule = None
        if isinstance(learning_rate, (ExponentialDecay, CosineDecay)):
            self._schedule = learning_rate
            cpp._set_schedule(learning_rate._cpp)
        elif isinstance(learning_rate, LearningRateSchedule) or (
                callable(learning_rate) and not isinstance(learning_rate, (Variable, _core.Tensor))):
            self._schedule = learning_rate
            cpp._set_python_schedule(learning_rate)

    # -- Keras's properties ---------------------------------------------------------------------

    @property
    def learning_rate(self):
        """The learning rate: its Variable (float64), or with a schedule the rate of the next
        step. Assign a number to change it (also in already-traced functions)."""
        if self._schedule is not None:
            return self._schedule(self._step())
        return self._cpp._learning_rate_variable()

    @learning_rate.setter
    def learning_rate(self, value):
        if self._schedule is not None:
            raise TypeError("This optimizer was created with a `LearningRateSchedule` object as its "
                            "`learning_rate` constructor argument, hence its learning rate is not "
                            "settable.")
        if isinstance(value, (Variable, _core.Tensor)):
            value = float(value.numpy())
        self._cpp._learning_rate = float(value)

    lr = learning_rate

    @property
    def iterations(self):
        """The number of steps taken: the step counter Variable (int64) once the first
        apply_gradients made it, a 0 tensor before."""
        v = self._cpp._iterations_variable()
        return v if v is not None else _core.constant(0, dtype="int64")

    @property
    def variables(self):
        """Every Variable of the optimizer: the learning rate, the step counter, the slots."""
        return list(self._cpp._variables())

    def get_slot(self, var, slot_name):
        """The slot `slot_name` of `var` (e.g. Adam's "m" and "v", SGD's "momentum")."""
        return self._cpp._slot(var, slot_name)

    def get_slot_names(self):
        return list(self._cpp._slot_names())

    def _step(self):
        v = self._cpp._iterations_variable()
        return v.read_value() if v is not None else _core.constant(0, dtype="int64")

    def _current_learning_rate(self):
        if self._schedule is not None:
            return _core.cast(self._schedule(self._step()), "float64")
        return self._cpp._learning_rate_variable().read_value()

    # -- updates --------------------------------------------------------------------------------

    def apply_gradients(self, grads_and_vars, name=None, skip_gradients_aggregation=False, **kwargs):
        """Applies (gradient, variable) pairs, e.g. zip(tape.gradient(loss, vars), vars). A None
        gradient leaves its variable as it is; all None is a ValueError."""
        del name, skip_gradients_aggregation, kwargs
        pairs = list(grads_and_vars)
        for pair in pairs:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise TypeError(f"apply_gradients expects (gradient, variable) pairs, got {pair!r}")
        grads = [g for g, _ in pairs]
        variables = [v for _, v in pairs]
        return self.apply(grads, variables)

    def apply(self, grads, trainable_variables=None):
        """Applies grads[i] to trainable_variables[i] (Keras 3's Optimizer.apply)."""
        if trainable_variables is None:
            raise ValueError(f"[{self.name}] apply: pass the variables the gradients belong to")
        grads = list(grads)
        variables = list(trainable_variables)
        if len(grads) != len(variables):
            raise ValueError(f"[{self.name}] got {len(grads)} gradients for {len(variables)} "
                             "variables; pass one gradient per variable")
        for i, v in enumerate(variables):
            if not isinstance(v, Variable):
                raise TypeError(f"[{self.name}] variable {i} must be a tg.Variable, got {v!r}")
        if all(g is None for g in grads):
            raise ValueError(f"No gradients provided for any variable: "
                             f"{[v.name for v in variables]}.")
        missing = [v.name for g, v in zip(grads, variables) if g is None]
        if missing:
            _log.warning("Gradients do not exist for variables %s when minimizing the loss.", missing)
        # An IndexedSlices (an Embedding's gradient) stays sparse: the C++ optimizer applies it
        # with Keras's sparse rule.
        grads = self._clip([None if g is None else g if isinstance(g, _core._IndexedSlices)
                            else _core.convert_to_tensor(g) for g in grads])
        if self.weight_decay:
            self._decay(grads, variables)
        self._cpp._apply_gradients(grads, variables)
        return self.iterations

    def _clip(self, grads):
        if self.clipvalue is not None:
            return _core._clip_list_by_value(grads, -float(self.clipvalue), float(self.clipvalue))
        if self.global_clipnorm is not None:
            return _core._clip_by_global_norm(grads, float(self.global_clipnorm))[0]
        if self.clipnorm is not None:
            return [None if g is None else _clip_by_norm(g, float(self.clipnorm)) for g in grads]
        return grads

    def _decay(self, grads, variables):
        # Keras: variable -= variable * weight_decay * lr, before the update.
        lr = self._current_learning_rate()
        for g, v in zip(grads, variables):
            if g is None:
                continue
            factor = _core.cast(_core.multiply(lr, float(self.weight_decay)), v.dtype)
            v.assign_sub(_core.multiply(v, factor))

    def minimize(self, loss, var_list, tape=None):
        """Computes the gradients of `loss` (a callable, or a tensor with the `tape` that
        recorded it) with respect to var_list (or a callable returning it) and applies them."""
        if not callable(loss) and tape is None:
            raise ValueError(f"`tape` is required when a `Tensor` loss is passed. Received: "
                             f"loss={loss}, tape={tape}.")
        if callable(loss):
            with GradientTape() as tape:
                if callable(var_list):
                    var_list = var_list()
                loss = loss()
        if callable(var_list):
            var_list = var_list()
        var_list = list(var_list)
        grads = tape.gradient(loss, var_list)
        return self.apply_gradients(zip(grads, var_list))

    def get_config(self):
        config = {"name": self.name, "weight_decay": self.weight_decay, "clipnorm": self.clipnorm,
                  "global_clipnorm": self.global_clipnorm, "clipvalue": self.clipvalue}
        config["learning_rate"] = self._schedule if self._schedule is not None \
            else self._cpp._learning_rate
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _initial_rate(learning_rate, optimizer):
    if isinstance(learning_rate, (ExponentialDecay, CosineDecay)):
        return float(learning_rate.initial_learning_rate)
    if isinstance(learning_rate, LearningRateSchedule) or (
            callable(learning_rate) and not isinstance(learning_rate, (Variable, _core.Tensor))):
        return 0.0  # unused: the schedule gives every step's rate
    if isinstance(learning_rate, (Variable, _core.Tensor)):
        return float(learning_rate.numpy())
    if isinstance(learning_rate, bool) or not isinstance(learning_rate, (int, float)):
        raise TypeError(f"[{optimizer}] learning_rate must be a number or a LearningRateSchedule, "
                        f"got {learning_rate!r}")
    return float(learning_rate)


class SGD(Optimizer):
    """Gradient descent with optional (Nesterov) momentum (keras.optimizers.SGD):
    velocity = momentum * velocity - lr * g; var += velocity (plain: var -= lr * g)."""

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, weight_decay=None,
                 clipnorm=None, clipvalue=None, global_clipnorm=None, name="SGD", **kwargs):
        cpp = _core._SGD(_initial_rate(learning_rate, name), float(momentum), bool(nesterov))
        super().__init__(cpp, name, learning_rate, weight_decay, clipnorm, clipvalue,
                         global_clipnorm, **kwargs)
        self.momentum = momentum
        self.nesterov = nesterov


class Adam(Optimizer):
    """Adam with Keras's bias correction and epsilon (keras.optimizers.Adam)."""

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, amsgrad=False,
                 weight_decay=None, clipnorm=None, clipvalue=None, global_clipnorm=None,
                 name="adam", **kwargs):
        if amsgrad:
            raise _unimplemented(name, "amsgrad=True is not supported")
        cpp = _core._Adam(_initial_rate(learning_rate, name), float(beta_1), float(beta_2),
                          float(epsilon))
        super().__init__(cpp, name, learning_rate, weight_decay, clipnorm, clipvalue,
                         global_clipnorm, **kwargs)
        self.beta_1, self.beta_2, self.epsilon, self.amsgrad = beta_1, beta_2, epsilon, amsgrad


class AdamW(Optimizer):
    """Adam with decoupled weight decay, scaled by the learning rate (keras.optimizers.AdamW)."""

    def __init__(self, learning_rate=0.001, weight_decay=0.004, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-7, amsgrad=False, clipnorm=None, clipvalue=None, global_clipnorm=None,
                 name="adamw", **kwargs):
        if amsgrad:
            raise _unimplemented(name, "amsgrad=True is not supported")
        if weight_decay is None:
            raise ValueError("Argument `weight_decay` must be a float. Received: weight_decay=None")
        cpp = _core._AdamW(_initial_rate(learning_rate, name), float(weight_decay), float(beta_1),
                           float(beta_2), float(epsilon))
        super().__init__(cpp, name, learning_rate, None, clipnorm, clipvalue, global_clipnorm,
                         **kwargs)
        self.weight_decay = weight_decay  # applied by the C++ AdamW itself
        self.beta_1, self.beta_2, self.epsilon, self.amsgrad = beta_1, beta_2, epsilon, amsgrad

    def _decay(self, grads, variables):
        del grads, variables  # the C++ AdamW decays in its own update


class RMSprop(Optimizer):
    """RMSprop as Keras defines it (keras.optimizers.RMSprop), optionally centered and with
    momentum."""

    def __init__(self, learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False,
                 weight_decay=None, clipnorm=None, clipvalue=None, global_clipnorm=None,
                 name="rmsprop", **kwargs):
        cpp = _core._RMSprop(_initial_rate(learning_rate, name), float(rho), float(momentum),
                             float(epsilon), bool(centered))
        super().__init__(cpp, name, learning_rate, weight_decay, clipnorm, clipvalue,
                         global_clipnorm, **kwargs)
        self.rho, self.momentum, self.epsilon, self.centered = rho, momentum, epsilon, centered
