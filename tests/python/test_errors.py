"""Errors from Python: every tg:: error class arrives as its tg.errors class (or Python's
TypeError / ValueError) with the C++ message, and bad input raises - it never crashes."""
import numpy as np
import pytest

import tracegraph as tg
from tracegraph import _core


@pytest.mark.parametrize("code,cls", [
    ("ETYPE", TypeError), ("EVALUE", ValueError), ("EARG", tg.errors.InvalidArgumentError),
    ("ESCOPE", tg.errors.OutOfScopeError), ("ESTAGE", tg.errors.StagingError),
    ("ERTL", tg.errors.RetracingLimitError), ("ERESOURCE", tg.errors.ResourceExhaustedError),
    ("EPRECONDITION", tg.errors.FailedPreconditionError), ("EFORMAT", tg.errors.FormatError),
    ("EDEADLINE", tg.errors.DeadlineExceededError), ("EDESYNC", tg.errors.CollectiveMismatchError),
    ("EUNAVAILABLE", tg.errors.UnavailableError), ("EINTERNAL", tg.errors.InternalError),
    ("EUNIMPLEMENTED", tg.errors.UnimplementedError), ("ENEW", tg.errors.UnknownError),
])
def test_every_library_error_maps_to_a_class(code, cls):
    with pytest.raises(cls) as info:
        _core._raise_error_for_test(code, f"[op] message of {code}")
    assert str(info.value) == f"[op] message of {code}"
    if issubclass(cls, tg.errors.OpError):
        assert info.value.message == f"[op] message of {code}"
        assert info.value.tg_code == code
        assert info.value.op is None and info.value.node_def is None
        assert isinstance(info.value.error_code, int)


def test_errors_carry_their_data():
    with pytest.raises(tg.errors.ResourceExhaustedError) as info:
        _core._raise_error_for_test("ERESOURCE", "x")
    assert info.value.bytes_requested == 1234
    assert info.value.error_code == tg.errors.RESOURCE_EXHAUSTED
    with pytest.raises(tg.errors.DataLossError) as info:  # a FormatError is TF's DataLossError
        _core._raise_error_for_test("EFORMAT", "x")
    assert info.value.section == "header" and info.value.offset == 16
    with pytest.raises(tg.errors.DeadlineExceededError) as info:
        _core._raise_error_for_test("EDEADLINE", "x")
    assert info.value.ranks == [1, 3]
    with pytest.raises(TypeError):  # TF raises TypeError for an out-of-scope tensor
        _core._raise_error_for_test("ESCOPE", "x")


def test_tf_error_classes():
    for name in ("OpError", "CancelledError", "UnknownError", "InvalidArgumentError",
                 "DeadlineExceededError", "NotFoundError", "AlreadyExistsError",
                 "PermissionDeniedError", "UnauthenticatedError", "ResourceExhaustedError",
                 "FailedPreconditionError", "AbortedError", "OutOfRangeError",
                 "UnimplementedError", "InternalError", "UnavailableError", "DataLossError"):
        cls = getattr(tg.errors, name)
        assert issubclass(cls, tg.errors.OpError)
    e = tg.errors.NotFoundError(None, None, "missing")
    assert e.error_code == tg.errors.NOT_FOUND and str(e) == "missing"
    assert tg.errors.exception_type_from_error_code(tg.errors.INVALID_ARGUMENT) is tg.errors.InvalidArgumentError


def test_op_errors_carry_the_cpp_message():
    with pytest.raises(tg.errors.InvalidArgumentError, match=r"^\[reshape\]") as info:
        tg.reshape(tg.ones([2, 3]), [4])
    assert info.value.tg_code == "EARG"
    with pytest.raises(tg.errors.InvalidArgumentError, match=r"\[matmul\]"):
        tg.matmul(tg.ones([2, 3]), tg.ones([2, 3]))


HUGE = 2**31
BAD_CALLS = [
    (lambda: tg.constant({"a": 1}), ValueError),
    (lambda: tg.constant(None), ValueError),
    (lambda: tg.constant(object()), ValueError),
    (lambda: tg.constant(1 + 2j), ValueError),
    (lambda: tg.constant(np.array([1 + 2j])), TypeError),
    (lambda: tg.constant([[1, 2], [3]]), ValueError),
    (lambda: tg.constant([1, [2]]), ValueError),
    (lambda: tg.constant([1, "a"]), TypeError),
    (lambda: tg.constant([True, 1]), TypeError),
    (lambda: tg.constant(2**64), ValueError),
    (lambda: tg.constant(2**40, dtype=tg.int32), tg.errors.InvalidArgumentError),
    (lambda: tg.constant(1, dtype="complex64"), TypeError),
    (lambda: tg.constant(1, dtype=42), TypeError),
    (lambda: tg.constant(1, shape=[-2]), tg.errors.InvalidArgumentError),
    (lambda: tg.exp("a"), tg.errors.InvalidArgumentError),
    (lambda: tg.exp(None), ValueError),
    (lambda: tg.exp([1, 2]), tg.errors.InvalidArgumentError),  # int32: exp takes floats
    (lambda: tg.add({}, 1), ValueError),
    (lambda: tg.add(tg.ones([2]), tg.ones([3])), tg.errors.InvalidArgumentError),
    (lambda: tg.zeros(None), TypeError),
    (lambda: tg.zeros("abc"), TypeError),
    (lambda: tg.zeros([2.5]), TypeError),
    (lambda: tg.zeros([-1]), tg.errors.InvalidArgumentError),
    (lambda: tg.zeros([2**70]), ValueError),
    (lambda: tg.zeros([2**40, 2**40]), tg.errors.InvalidArgumentError),
    (lambda: tg.zeros([HUGE, HUGE]), tg.errors.ResourceExhaustedError),
    (lambda: tg.ones([HUGE, 4]), tg.errors.ResourceExhaustedError),
    (lambda: tg.fill([HUGE, HUGE], 1.0), tg.errors.ResourceExhaustedError),
    (lambda: tg.random.uniform([HUGE, HUGE]), tg.errors.ResourceExhaustedError),
    (lambda: tg.reshape(tg.ones([4]), [None, None]), tg.errors.InvalidArgumentError),
    (lambda: tg.reduce_sum(tg.ones([2]), axis="x"), TypeError),
    (lambda: tg.reduce_sum(tg.ones([2]), axis=5), tg.errors.InvalidArgumentError),
    (lambda: tg.reduce_sum(tg.ones([2]), axis=2**40), ValueError),
    (lambda: tg.concat(tg.ones([2]), axis=None), TypeError),
    (lambda: tg.concat(None, axis=0), TypeError),
    (lambda: tg.concat([tg.ones([2]), tg.ones([2], tg.int32)], 0), tg.errors.InvalidArgumentError),
    (lambda: tg.gather(tg.ones([3]), [5]), tg.errors.InvalidArgumentError),
    (lambda: tg.gather(tg.ones([3]), [0.5]), tg.errors.InvalidArgumentError),
    (lambda: tg.cast(tg.ones([2]), "nope"), TypeError),
    (lambda: tg.cast(tg.constant("a"), tg.float32), tg.errors.InvalidArgumentError),
    (lambda: tg.one_hot([1], depth="x"), TypeError),
    (lambda: tg.range(0, 10, 0), tg.errors.InvalidArgumentError),
    (lambda: tg.range("a"), TypeError),
    (lambda: tg.pad(tg.ones([2]), [[1]]), ValueError),
    (lambda: tg.pad(tg.ones([2]), [[1, 1]], mode="WRAP"), ValueError),
    (lambda: tg.nn.conv2d(tg.ones([1, 3, 3, 1]), tg.ones([2, 2, 1, 1]), 1, "FULL"), ValueError),
    (lambda: tg.nn.conv2d(tg.ones([1, 3, 3, 1]), tg.ones([2, 2, 1, 1]), 1, "SAME", data_format="NCHW"),
     tg.errors.UnimplementedError),
    (lambda: tg.nn.dropout(tg.ones([2]), rate=1.5), tg.errors.InvalidArgumentError),
    (lambda: tg.random.set_seed("x"), TypeError),
    (lambda: tg.random.normal([2], stddev="big"), TypeError),
    (lambda: tg.sort(tg.ones([2]), direction="UP"), ValueError),
    (lambda: tg.split(tg.ones([5]), 2), tg.errors.InvalidArgumentError),
    (lambda: tg.einsum("ij,jk,kl->il", tg.ones([1, 1]), tg.ones([1, 1]), tg.ones([1, 1])),
     tg.errors.UnimplementedError),
    (lambda: tg.math.top_k(tg.ones([3]), k=5), tg.errors.InvalidArgumentError),
    (lambda: tg.where(tg.ones([2]) > 0, tg.ones([2])), ValueError),
    (lambda: int(tg.constant([1, 2])), TypeError),
    (lambda: tg.matmul(tg.ones([2]), tg.ones([2])), tg.errors.InvalidArgumentError),
]


@pytest.mark.parametrize("call,error", BAD_CALLS, ids=[str(i) for i in range(len(BAD_CALLS))])
def test_bad_input_raises(call, error):
    with pytest.raises(error):
        call()


def every_core_class():
    return [c for c in vars(tg._core).values() if isinstance(c, type) and c.__module__ == "tracegraph._core"
            and not issubclass(c, BaseException)]


@pytest.mark.parametrize("cls", every_core_class(), ids=lambda c: c.__name__)
def test_an_object_made_without_init_raises_instead_of_reading_garbage(cls):
    # pybind11 lets T.__new__(T) skip __init__; the object's C++ value was never constructed.
    try:
        obj = cls.__new__(cls)
    except TypeError:
        return  # the class refuses __new__ itself
    for use in (repr, str, lambda o: o.numpy(), lambda o: o.shape, lambda o: o + 1, lambda o: tg.abs(o)):
        try:
            use(obj)
        except AttributeError:
            pass  # the class has no such attribute: nothing was read
        except TypeError as e:
            if "never initialised" not in str(e) and "unsupported operand" not in str(e):
                raise
        except (ValueError, tg.errors.InvalidArgumentError):
            pass  # tg.abs of an object that is not a tensor


def test_tensor_and_variable_made_without_init_raise():
    for cls in (tg.Tensor, tg.Variable):
        obj = cls.__new__(cls)
        with pytest.raises(TypeError, match="never initialised"):
            obj.numpy()
        with pytest.raises(TypeError, match="never initialised"):
            tg.abs(obj)
