"""tg.types (tf.types): the types user code builds on. tg.types.experimental.TraceType is the
base of the trace types a class returns from __tf_tracing_type__."""
from tracegraph.types import experimental
