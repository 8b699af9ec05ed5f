"""pytest setup of the Python package's tests: they import the build tree's package
(PYTHONPATH=<build>/python, set by CTest - python/CMakeLists.txt)."""
import numpy as np
import pytest

import tracegraph as tg


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def assert_tensor(t, expected, dtype=None, rtol=1e-6, atol=0.0):
    """t is a tg.Tensor equal to the NumPy value `expected` in shape, values and dtype."""
    assert isinstance(t, tg.Tensor), f"expected a tg.Tensor, got {type(t).__name__}"
    expected = np.asarray(expected)
    want_dtype = tg.as_dtype(dtype if dtype is not None else expected.dtype)
    assert t.dtype == want_dtype, f"dtype {t.dtype} != {want_dtype}"
    assert t.shape == expected.shape, f"shape {t.shape} != {expected.shape}"
    got = t.numpy()
    if want_dtype.is_floating:
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)
