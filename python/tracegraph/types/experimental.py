"""tg.types.experimental (tf.types.experimental): TraceType, the base class of user trace types.

A class whose instances are tg.function arguments may define `__tf_tracing_type__(self, context)`
returning an instance of a TraceType subclass; tg.function then matches calls by that type's
methods (called from the C++ dispatch under the GIL) instead of by object identity. `context` is
None in tracegraph.
"""
import abc


class TraceType(abc.ABC):
    """The type of an argument as tracing sees it (tf.types.experimental.TraceType).

    A call reuses a trace when each argument's type is_subtype_of the traced one; with
    reduce_retracing, most_specific_common_supertype generalises; the traced body receives
    placeholder_value(). Equal types must hash alike.
    """

    @abc.abstractmethod
    def is_subtype_of(self, other):
        """True if every value of this type is also a value of `other`."""

    @abc.abstractmethod
    def most_specific_common_supertype(self, others):
        """The most specific type that self and every one of `others` are subtypes of, or None."""

    @abc.abstractmethod
    def placeholder_value(self, placeholder_context=None):
        """The value the traced body receives for an argument of this type."""

    @abc.abstractmethod
    def __eq__(self, other):
        ...

    @abc.abstractmethod
    def __hash__(self):
        ...
