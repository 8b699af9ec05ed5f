"""tracegraph's exceptions (TensorFlow's tf.errors): one class per error code, all OpErrors.

The C++ library's errors arrive as these classes with its message (python/src/errors_bindings.cpp):
tg::InvalidArgumentError -> InvalidArgumentError, tg::ResourceExhaustedError ->
ResourceExhaustedError (with bytes_requested), tg::FormatError -> FormatError (a DataLossError,
with section and offset), ...; tg::TypeError and tg::ValueError arrive as Python's TypeError and
ValueError, as TensorFlow raises those. Every instance from the library has `tg_code`, the C++
error's stable code ("EARG", ...).
"""

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class OpError(Exception):
    """The base of tracegraph's errors (tf.errors.OpError): `message`, `error_code`, and `op` and
    `node_def` (None: tracegraph's errors name their op in the message, "[op] ...")."""

    def __init__(self, node_def, op, message, error_code=UNKNOWN, *args):
        super().__init__(message, *args)
        self._node_def = node_def
        self._op = op
        self._message = message
        self._error_code = error_code
        self.tg_code = None

    @property
    def message(self):
        return self._message

    @property
    def op(self):
        return self._op

    @property
    def node_def(self):
        return self._node_def

    @property
    def error_code(self):
        return self._error_code

    def __str__(self):
        return self._message

    def __reduce__(self):
        return type(self), (self._node_def, self._op, self._message) + (
            (self._error_code,) if type(self) is OpError else ())


def _error_class(name, code, doc, base=OpError):
    def __init__(self, node_def, op, message, *args):
        OpError.__init__(self, node_def, op, message, code, *args)
    return type(name, (base,), {"__init__": __init__, "__doc__": doc, "__module__": __name__})


CancelledError = _error_class("CancelledError", CANCELLED, "An operation was cancelled.")
UnknownError = _error_class("UnknownError", UNKNOWN, "An error of no other class.")
InvalidArgumentError = _error_class(
    "InvalidArgumentError", INVALID_ARGUMENT,
    "An op received arguments it cannot work on: shapes, axes, indices, values.")
DeadlineExceededError = _error_class(
    "DeadlineExceededError", DEADLINE_EXCEEDED,
    "A deadline passed: a collective of a distributed job did not complete (`ranks`: those that "
    "did not answer).")
NotFoundError = _error_class("NotFoundError", NOT_FOUND, "Something requested was not found.")
AlreadyExistsError = _error_class("AlreadyExistsError", ALREADY_EXISTS, "Something to be created exists.")
PermissionDeniedError = _error_class("PermissionDeniedError", PERMISSION_DENIED,
                                     "The caller may not do this.")
UnauthenticatedError = _error_class("UnauthenticatedError", UNAUTHENTICATED,
                                    "The request has no valid credentials.")
ResourceExhaustedError = _error_class(
    "ResourceExhaustedError", RESOURCE_EXHAUSTED,
    "Memory for a tensor could not be had (`bytes_requested`: the size asked for).")
FailedPreconditionError = _error_class(
    "FailedPreconditionError", FAILED_PRECONDITION,
    "An operation ran on state not ready for it (e.g. a Variable read before its value exists).")
AbortedError = _error_class("AbortedError", ABORTED, "An operation was aborted.")
OutOfRangeError = _error_class("OutOfRangeError", OUT_OF_RANGE, "An operation went past a valid range.")
UnimplementedError = _error_class(
    "UnimplementedError", UNIMPLEMENTED,
    "Something TensorFlow does that tracegraph does not (the message says what to do instead).")
InternalError = _error_class("InternalError", INTERNAL, "A broken invariant: a tracegraph bug.")
UnavailableError = _error_class(
    "UnavailableError", UNAVAILABLE,
    "The communication layer of a distributed job failed.")
DataLossError = _error_class("DataLossError", DATA_LOSS, "Data was lost or corrupted.")

# tracegraph's own kinds, each under the tf.errors class it is closest to.
FormatError = _error_class(
    "FormatError", DATA_LOSS,
    "A file tracegraph reads (.tgx, checkpoint) is malformed: `section` and `offset` say where.",
    DataLossError)
CollectiveMismatchError = _error_class(
    "CollectiveMismatchError", ABORTED,
    "The ranks of a distributed job reached different collectives.", AbortedError)
RetracingLimitError = _error_class(
    "RetracingLimitError", RESOURCE_EXHAUSTED,
    "A function was traced more often than its limit allows.", OpError)
StagingError = _error_class(
    "StagingError", INVALID_ARGUMENT,
    "Tracing went wrong in a way that is the program's structure (e.g. recursive tracing).", OpError)


class OutOfScopeError(OpError, TypeError):
    """A symbolic tensor used outside the trace that made it (a TypeError too, as TF's)."""

    def __init__(self, node_def, op, message, *args):
        OpError.__init__(self, node_def, op, message, FAILED_PRECONDITION, *args)


_CODE_TO_CLASS = {
    CANCELLED: CancelledError, UNKNOWN: UnknownError, INVALID_ARGUMENT: InvalidArgumentError,
    DEADLINE_EXCEEDED: DeadlineExceededError, NOT_FOUND: NotFoundError,
    ALREADY_EXISTS: AlreadyExistsError, PERMISSION_DENIED: PermissionDeniedError,
    UNAUTHENTICATED: UnauthenticatedError, RESOURCE_EXHAUSTED: ResourceExhaustedError,
    FAILED_PRECONDITION: FailedPreconditionError, ABORTED: AbortedError,
    OUT_OF_RANGE: OutOfRangeError, UNIMPLEMENTED: UnimplementedError, INTERNAL: InternalError,
    UNAVAILABLE: UnavailableError, DATA_LOSS: DataLossError,
}


def exception_type_from_error_code(error_code):
    """The class of an error code (tf.errors.exception_type_from_error_code)."""
    return _CODE_TO_CLASS[error_code]


def error_code_from_exception_type(cls):
    """The error code of a class (tf.errors.error_code_from_exception_type)."""
    for code, c in _CODE_TO_CLASS.items():
        if issubclass(cls, c):
            return code
    return UNKNOWN
