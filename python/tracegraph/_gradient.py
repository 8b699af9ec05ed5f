"""tg.GradientTape (tf.GradientTape) over the library's tg::GradientTape.

The C++ half (python/src/gradient_bindings.cpp) records and differentiates; this file gives it
TF's Python interface: a context manager; gradient() of a tensor, list or nested structure of
targets (summed, as TF does) with respect to a nested structure of sources, with
output_gradients and unconnected_gradients; watch() of nested structures; persistent tapes;
watch_accessed_variables and `trainable`; stop_recording(); reset(); watched_variables();
jacobian() and batch_jacobian().
"""
import contextlib
import enum
import logging
import threading

from tracegraph import _core
from tracegraph import nest
from tracegraph._tensor import Tensor, TensorShape
from tracegraph._variables import Variable

__all__ = ["GradientTape", "IndexedSlices", "UnconnectedGradients"]

# tf.IndexedSlices: the C++ type (python/src/gradient_bindings.cpp), with TF's dtype and shape.
IndexedSlices = _core._IndexedSlices
IndexedSlices.dtype = property(lambda self: self.values.dtype)
IndexedSlices.shape = property(lambda self: TensorShape([int(d) for d in self.dense_shape.numpy()]))

_log = logging.getLogger("tracegraph")


class UnconnectedGradients(enum.Enum):
    """What gradient() gives for a source the target does not depend on (tf.UnconnectedGradients)."""
    NONE = "none"
    ZERO = "zero"


# ---- the tapes recording on each thread, for stop_recording() and tg.init_scope ---------------

_local = threading.local()


def _recording_tapes():
    tapes = getattr(_local, "tapes", None)
    if tapes is None:
        tapes = _local.tapes = []
    return tapes


def _pause_recording_tapes():
    paused = [t for t in _recording_tapes() if t._tape is not None and t._tape._recording]
    for tape in paused:
        tape._tape._stop()
    return paused


def _resume_tapes(paused):
    for tape in paused:
        if tape._tape is not None:
            tape._tape._resume()


def note_layer_reads(variables):
    """Tells the recording tapes that a layer's C++ code read `variables` (for watched_variables();
    the C++ tape records the reads themselves)."""
    for tape in _recording_tapes():
        tape._note_layer_reads(variables)


def _is_floating(x):
    return x.dtype.is_floating


def _parse_unconnected(value):
    if isinstance(value, UnconnectedGradients):
        return value is UnconnectedGradients.ZERO
    if isinstance(value, str) and value in ("none", "zero"):
        return value == "zero"
    raise ValueError(f"Unknown value for unconnected_gradients: {value!r}")


def _describe(x):
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


class GradientTape:
    """Records operations for automatic differentiation (tf.GradientTape).

        with tg.GradientTape() as tape:
            loss = tg.reduce_sum(w * x)
        dw = tape.gradient(loss, w)

    Trainable floating-point Variables read while the tape records are watched automatically
    (unless watch_accessed_variables=False); other tensors with watch(). A tape allows one
    gradient() call unless persistent=True. Tapes nest: a tape recording while another computes
    its gradient records that computation, for higher-order derivatives. A tape belongs to the
    thread that entered it. Works eagerly and inside tg.function.
    """

    def __init__(self, persistent=False, watch_accessed_variables=True):
        self._persistent = bool(persistent)
        self._watch_accessed_variables = bool(watch_accessed_variables)
        self._tape = None
        self._explicit = []  # explicitly watched Variables, each once
        self._last_watched = ()
        self._used = False  # a non-persistent tape whose gradients were computed

    # -- recording ------------------------------------------------------------------------------

    def __enter__(self):
        if self._tape is not None and self._tape._recording:
            raise ValueError("Tape is still recording, This can happen if you try to re-enter an "
                             "already-active tape.")
        if self._tape is None:
            self._tape = _core._Tape(self._watch_accessed_variables)
            self._tape._start()
            self._explicit = []
        else:
            self._tape._resume()
        _recording_tapes().append(self)
        return self

    def __exit__(self, typ, value, traceback):
        if self._tape is not None and self._tape._recording:
            self._tape._stop()
        tapes = _recording_tapes()
        if self in tapes:
            tapes.remove(self)
        return False

    @contextlib.contextmanager
    def stop_recording(self):
        """Temporarily stops recording: ops inside the block are not differentiated."""
        if self._tape is None or not self._tape._recording:
            raise RuntimeError("Tape is not recording.")
        self._tape._stop()
        try:
            yield
        finally:
            if self._tape is not None:
                self._tape._resume()

    def reset(self):
        """Discards everything recorded so far; a tape that was recording goes on recording."""
        if self._tape is None:
            return
        recording = self._tape._recording
        self._tape._release()
        self._tape = _core._Tape(self._watch_accessed_variables)
        self._tape._start()
        self._explicit = []
        if not recording:
            self._tape._stop()

    def watch(self, tensor):
        """Watches a tensor, a Variable, or a nested structure of them.

        Non-floating tensors are accepted and have no gradient (TF logs a warning for them).
        """
        items = nest.flatten(tensor)
        for item in items:
            if not isinstance(item, (Tensor, Variable)):
                raise ValueError(f"Passed in object {_describe(item)} of type "
                                 f"{type(item).__name__!r}, not tg.Tensor or tg.Variable; watch "
                                 "only tensors and Variables (tg.constant converts other values)")
        if self._tape is None:
            raise RuntimeError("GradientTape.watch: the tape is not active; call watch() inside "
                               "`with tape:`")
        for item in items:
            if not _is_floating(item):
                _log.warning("The dtype of the watched tensor must be floating (e.g. tg.float32), "
                             "got %s", item.dtype.name)
                continue
            if isinstance(item, Variable):
                if not any(v._id == item._id for v in self._explicit):
                    self._explicit.append(item)
                self._tape._watch_variable(item)
            else:
                self._tape._watch_tensor(item)

    def watched_variables(self):
        """The Variables this tape watches: those watched explicitly and the trainable ones read
        through Python while it recorded (reads inside C++ layers are listed by the layers)."""
        if self._tape is None:
            return self._last_watched
        out, seen = [], set()
        for v in list(self._explicit) + list(self._tape._accessed()):
            if v._id not in seen:
                seen.add(v._id)
                out.append(v)
        return tuple(out)

    def _note_layer_reads(self, variables):
        """A layer of the C++ side read `variables` (see note_layer_reads)."""
        if self._tape is not None and self._tape._recording and self._watch_accessed_variables:
            for v in variables:
                if v.trainable and _is_floating(v) and not any(e._id == v._id for e in self._explicit):
                    self._explicit.append(v)

    # -- gradients ------------------------------------------------------------------------------

    def _connected(self, variable):
        """Whether this tape may give `variable` a gradient (TF's watch rules)."""
        if any(v._id == variable._id for v in self._explicit):
            return True
        return self._watch_accessed_variables and variable.trainable

    def _combined_target(self, targets, output_gradients):
        """One floating scalar whose gradient is the sum of the targets' (TF's rule for a list),
        each weighted by its output gradient; None when no target is floating."""
        pairs = []
        for i, t in enumerate(targets):
            if isinstance(t, Variable):
                t = self._recorded(t.read_value)
            elif not isinstance(t, Tensor):
                raise ValueError(f"GradientTape.gradient: a target must be a tg.Tensor or a "
                                 f"tg.Variable (or a nested structure of them), got "
                                 f"{_describe(t)} of type {type(t).__name__!r}")
            if not _is_floating(t):
                _log.warning("The dtype of the target tensor must be floating (e.g. tg.float32) "
                             "when calling GradientTape.gradient, got %s", t.dtype.name)
                continue
            pairs.append((t, None if output_gradients is None else output_gradients[i]))
        if not pairs:
            return None
        if len(pairs) == 1 and pairs[0][1] is None:
            return pairs[0][0]

        def build():
            total = None
            for t, g in pairs:
                term = t if g is None else _core.multiply(t, _core.convert_to_tensor(g, dtype=t.dtype))
                term = _core.reduce_sum(term)
                if total is not None and term.dtype != total.dtype:
                    term = _core.cast(term, total.dtype)
                total = term if total is None else _core.add(total, term)
            return total
        return self._recorded(build)

    def _recorded(self, fn):
        """fn() with this tape recording (the sum of several targets must be on the tape)."""
        if self._tape._recording:
            return fn()
        self._tape._resume()
        try:
            return fn()
        finally:
            self._tape._stop()

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=UnconnectedGradients.NONE):
        """d(target)/d(sources), shaped like `sources` (a tensor, Variable or nested structure).

        target: a tensor or Variable, or a list / nested structure of them, whose gradients are
        summed. output_gradients: one per target (same structure), the gradient flowing into
        it (default ones). unconnected_gradients: "none" (a source the target does not depend on
        gets None) or "zero" (zeros shaped like the source). Non-floating targets and sources
        give None, as TF's. A non-persistent tape allows one call (RuntimeError afterwards).
        """
        if self._tape is None:
            if self._used:
                raise RuntimeError(
                    "GradientTape.gradient can only be called once on non-persistent tapes: a "
                    "non-persistent GradientTape can only be used to compute one set of gradients "
                    "(or jacobians). Create it with persistent=True to call gradient() again")
            raise RuntimeError("GradientTape.gradient: the tape was never entered; record with "
                               "`with tape:` first")
        zero = _parse_unconnected(unconnected_gradients)
        flat_targets = nest.flatten(target)
        flat_outputs = None
        if output_gradients is not None:
            flat_outputs = nest.flatten(output_gradients)
            if len(flat_outputs) != len(flat_targets):
                raise ValueError(f"GradientTape.gradient: output_gradients has {len(flat_outputs)} "
                                 f"entries for {len(flat_targets)} targets; give one per target "
                                 "(None for ones)")
        flat_sources = nest.flatten(sources)
        for s in flat_sources:
            if not isinstance(s, (Tensor, Variable)):
                raise ValueError(f"GradientTape.gradient: a source must be a tg.Tensor or a "
                                 f"tg.Variable (or a nested structure of them), got "
                                 f"{_describe(s)} of type {type(s).__name__!r}")

        if not self._persistent:
            # One call: the tape stops recording (its own backward is of no use to it) and goes.
            if self._tape._recording:
                self._tape._stop()
                _log.debug("GradientTape.gradient called inside the tape's context")

        try:
            combined = self._combined_target(flat_targets, flat_outputs)
            wanted = [s for s in flat_sources
                      if _is_floating(s) and (not isinstance(s, Variable) or self._connected(s))]
            grads = {}
            if combined is not None and wanted:
                computed = self._tape._gradient(combined, wanted, zero)
                for s, g in zip(wanted, computed):
                    grads[id(s)] = g
            result = []
            for s in flat_sources:
                g = grads.get(id(s))
                if g is None and zero and s.dtype.name != "string":
                    g = _core.zeros_like(s)
                result.append(g)
        finally:
            if not self._persistent:
                self._spend()
        return nest.pack_sequence_as(sources, result)

    def _spend(self):
        """A non-persistent tape after its one computation: its recording goes."""
        self._last_watched = self.watched_variables()
        self._tape._release()
        self._tape = None
        self._used = True
        tapes = _recording_tapes()
        if self in tapes:
            tapes.remove(self)

    def _begin_multi_pass(self):
        """jacobian(): many gradient passes on one tape, which then is spent unless persistent."""
        if self._tape is None:
            self.gradient(None, [])  # raises the error gradient() gives
        persistent = self._persistent
        if not persistent and self._tape._recording:
            self._tape._stop()
        self._persistent = True
        return persistent

    def _end_multi_pass(self, persistent):
        self._persistent = persistent
        if not persistent and self._tape is not None:
            self._spend()

    def jacobian(self, target, sources, unconnected_gradients=UnconnectedGradients.NONE,
                 parallel_iterations=None, experimental_use_pfor=True):
        """d(target[i...])/d(source[j...]) for every element pair: shaped target.shape +
        source.shape for each source (one gradient pass per element of the target)."""
        del parallel_iterations, experimental_use_pfor
        target = target.read_value() if isinstance(target, Variable) else target
        if not isinstance(target, Tensor):
            raise ValueError(f"GradientTape.jacobian: the target must be a tg.Tensor, got "
                             f"{_describe(target)}")
        n = target.shape.num_elements()
        if n is None:
            raise ValueError("GradientTape.jacobian: the target's shape must be fully known, got "
                             f"{target.shape}")
        flat_sources = nest.flatten(sources)
        rows = [[] for _ in flat_sources]
        persistent = self._begin_multi_pass()
        try:
            for i in range(n):
                seed = _core.reshape(_core.one_hot(i, n, dtype=target.dtype), target.shape.as_list())
                grads = self.gradient(target, flat_sources, output_gradients=[seed],
                                      unconnected_gradients=unconnected_gradients)
                for row, g in zip(rows, grads):
                    row.append(g)
        finally:
            self._end_multi_pass(persistent)
        out = []
        for s, row in zip(flat_sources, rows):
            if n == 0 or any(g is None for g in row):
                out.append(None if n else _core.zeros(target.shape.as_list() + s.shape.as_list(),
                                                      dtype=s.dtype))
                continue
            out.append(_core.reshape(_core.stack(row), target.shape.as_list() + s.shape.as_list()))
        return nest.pack_sequence_as(sources, out)

    def batch_jacobian(self, target, source, unconnected_gradients=UnconnectedGradients.NONE,
                       parallel_iterations=None, experimental_use_pfor=True):
        """d(target[b, i...])/d(source[b, j...]) for each example b: shaped (batch,) +
        target.shape[1:] + source.shape[1:]. Assumes, as TF, that example b of the target
        depends only on example b of the source."""
        del parallel_iterations, experimental_use_pfor
        target = target.read_value() if isinstance(target, Variable) else target
        if target.shape.rank is None or target.shape.rank < 2 or source.shape.rank < 2:
            raise ValueError("GradientTape.batch_jacobian: the target and the source must have "
                             "rank at least 2")
        if target.shape[0] != source.shape[0]:
            raise ValueError(f"Need first dimension of target shape ({target.shape}) and source "
                             f"shape ({source.shape}) to match.")
        inner = target.shape[1:].num_elements()
        batch = target.shape[0]
        if inner is None or batch is None:
            raise ValueError("GradientTape.batch_jacobian: the target's shape must be fully known, "
                             f"got {target.shape}")
        persistent = self._begin_multi_pass()
        rows = []
        try:
            for i in range(inner):
                seed = _core.tile(_core.reshape(_core.one_hot(i, inner, dtype=target.dtype), [1, inner]),
                                  [batch, 1])
                seed = _core.reshape(seed, target.shape.as_list())
                g = self.gradient(target, source, output_gradients=[seed],
                                  unconnected_gradients=unconnected_gradients)
                rows.append(g)
        finally:
            self._end_multi_pass(persistent)
        if inner and any(g is None for g in rows):
            return None
        shape = [batch] + target.shape.as_list()[1:] + source.shape.as_list()[1:]
        if not inner:
            return _core.zeros(shape, dtype=source.dtype)
        stacked = _core.stack(rows, axis=1)  # (batch, inner, source dims...)
        return _core.reshape(stacked, shape)
