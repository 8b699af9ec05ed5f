"""tg.config (tf.config): process-wide settings of tracegraph."""
from tracegraph import _core


def run_functions_eagerly(run_eagerly):
    """Globally disables tracing: every tg.function runs its Python function at each call
    (tf.config.run_functions_eagerly), for debugging."""
    _core._run_functions_eagerly(bool(run_eagerly))


def functions_run_eagerly():
    """Whether tg.function bodies run eagerly (run_functions_eagerly(True))."""
    return _core._functions_run_eagerly()
