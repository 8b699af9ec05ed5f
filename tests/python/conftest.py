"""pytest setup of the Python package's tests: they import the build tree's package
(PYTHONPATH=<build>/python, set by CTest - python/CMakeLists.txt)."""
import os
import pathlib

import numpy as np
import pytest

import tracegraph as tg

# The build tree the package was imported from: <build>/python/tracegraph/__init__.py.
BUILD = pathlib.Path(tg.__file__).resolve().parents[2]


def tgx_path():
    """The tgx tool CTest names (TG_TGX, python/CMakeLists.txt), else this build tree's; a build
    without tools (the ASan preset) skips what needs it - the Release run covers it."""
    named = os.environ.get("TG_TGX")
    path = pathlib.Path(named) if named else BUILD / "tools" / "tgx" / "tgx"
    if not named and not path.exists():
        pytest.skip(f"this build has no tgx tool ({path}); the Release build's tests run it")
    assert path.exists(), f"{path} is missing: build the tgx target (cmake --build {BUILD} --target tgx)"
    return path


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
