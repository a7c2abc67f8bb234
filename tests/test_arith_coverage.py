"""Every NumPy array function on a FloatArray: emulated, exact (keeps the format), plain, or
refused (floatlab.arith_coverage), and FloatArray's ndarray methods.

Functions FloatArray did not handle ran on the exact float64 values and returned plain float64
results (np.linalg.matmul, np.linalg.solve, np.max, np.cumulative_sum ... gave answers computed
without the format, or dropped it); the new emulations are in tests/test_arith_numpy.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import floatlab
from floatlab import arith_coverage as cov
from floatlab.arith import _FUNCTIONS, _SHAPE_FUNCTIONS


def _fa(x, fmt="fp16", **kw):
    return floatlab.array(np.asarray(x, dtype=np.float64), fmt, **kw)


def _array_functions():
    for module in (np, np.linalg, np.fft):
        for name in dir(module):
            f = getattr(module, name)
            if not name.startswith("_") and hasattr(f, "_implementation") and not isinstance(
                    f, np.ufunc):
                yield f


def test_every_numpy_array_function_is_classified_once():
    classes = (set(_FUNCTIONS), set(_SHAPE_FUNCTIONS), set(cov.SELECTIONS), set(cov.PLAIN),
               set(cov.MUTATORS), set(cov.REFUSED))
    unclassified = []
    for f in _array_functions():
        homes = [i for i, c in enumerate(classes) if f in c]
        assert len(homes) <= 1, f"{f.__name__} in several classes {homes}"
        if not homes and f.__module__ != "numpy.fft":
            unclassified.append(f.__name__)
    assert not unclassified  # (np.fft: refused by the default, tested below)


@pytest.mark.parametrize("call, words", [
    (lambda x: np.linalg.solve(x, [1.0, 2.0]), "np.linalg.solve .*floatlab.array\\(result"),
    (lambda x: np.linalg.inv(x), "linalg.inv .*no factorisation"),
    (lambda x: np.linalg.det(x), "linalg.det .*no factorisation"),
    (lambda x: np.cov(x), "np.cov .*d @ d.T"),
    (lambda x: np.corrcoef(x), "np.corrcoef"),
    (lambda x: np.interp(x, [0.0, 3.0], [0.0, 1.0]), "np.interp .*floatlab.array"),
    (lambda x: np.polyval([1.0, 2.0], x), "np.polyval .*Horner"),
    (lambda x: np.cross(x, x), "np.cross .*a\\[1\\] \\* b\\[2\\]"),
    (lambda x: np.gradient(x[0]), "np.gradient .*np.diff"),
    (lambda x: np.fft.fft(x), "np.fft.fft on a FloatArray is not emulated"),
    (lambda x: np.pad(x, 1, mode="mean"), "np.pad with this mode .*constant"),
    (lambda x: np.linalg.matrix_power(x, 2), "matrix_power .*@"),
    (lambda x: np.put(x, [0], [5.0]), "np.put writes into its first argument.*x\\[index\\]"),
    (lambda x: x.sort(), "sort in place.*np.sort\\(x\\)"),
])
def test_functions_not_emulated_are_refused_with_a_way_out(call, words):
    with pytest.raises(TypeError, match=words):
        call(_fa([[1.0, 2.0], [3.0, 5.0]]))


def test_selections_keep_the_format_and_convert_plain_numbers():
    x = _fa([3.0, -1.0, np.nan, 2.0, 2.0])
    for got, want in ((np.max(x), np.nan), (np.nanmax(x), 3.0), (np.nanmin(x), -1.0),
                      (np.min(x[:2]), -1.0)):
        assert isinstance(got, floatlab.FloatArray) and got.fmt == x.fmt
        np.testing.assert_array_equal(got.values, want)
    u = np.unique_inverse(x[[0, 1, 3, 4]])
    assert u.values.fmt == x.fmt and u.inverse_indices.tolist() == [2, 0, 1, 1]
    parts = np.split(x[:4], 2)
    assert [p.fmt for p in parts] == [x.fmt] * 2
    tenth = float(floatlab.round(0.1, "fp16"))
    assert np.append(x, [0.1]).values[-1] == tenth  # (0.1 itself: not an fp16 value)
    assert np.pad(x[:2], 1, constant_values=0.1).values.tolist() == [tenth, 3.0, -1.0, tenth]
    assert np.full_like(x, 0.1).values.tolist() == [tenth] * 5
    assert isinstance(np.argmax(x[:2]), np.integer) and np.allclose(x[:2], [3.0, -1.0])
    with pytest.raises(TypeError, match="takes no out= / dtype="):
        np.max(x, out=np.zeros(()))
    for bad in (lambda: np.append(x, [True]), lambda: np.insert(x, 1, "a"),
                lambda: np.full_like(x, fill_value=True),
                lambda: np.pad(x, 1, constant_values=[True])):
        with pytest.raises(TypeError, match="boolean|str"):  # (1.0, or a plain string array)
            bad()


def test_linalg_aliases_are_the_emulated_functions():
    rng = np.random.default_rng(6)
    a, b = _fa(rng.standard_normal((2, 3, 40))), _fa(rng.standard_normal((40, 5)))
    np.testing.assert_array_equal(np.linalg.matmul(a, b).values, (a @ b).values)
    np.testing.assert_array_equal(np.linalg.tensordot(a, b, axes=1).values,
                                  np.tensordot(a, b, axes=1).values)
    np.testing.assert_array_equal(np.linalg.vecdot(a, a).values, np.vecdot(a, a).values)
    np.testing.assert_array_equal(np.linalg.vecdot(b, b, axis=0).values,
                                  np.vecdot(b.T, b.T).values)
    np.testing.assert_array_equal(np.linalg.outer(b[0], b[1]).values, np.outer(b[0], b[1]).values)
    sq = _fa(rng.standard_normal((2, 4, 4)))
    np.testing.assert_array_equal(np.linalg.trace(sq).values,
                                  np.trace(sq, axis1=-2, axis2=-1).values)
    assert isinstance(np.linalg.trace(sq), floatlab.FloatArray)


def test_methods_call_the_functions():
    rng = np.random.default_rng(7)
    x = _fa(rng.standard_normal((3, 4)) * 10)
    for name, args, kwargs in (("var", (), {"axis": 0, "ddof": 1}), ("std", (), {}),
                               ("prod", (1,), {}), ("cumprod", (), {"axis": 0}),
                               ("max", (), {"axis": 1}), ("min", (), {}), ("argmax", (), {}),
                               ("argmin", (0,), {}), ("clip", (-1.0, 0.1), {}),
                               ("round", (), {}), ("trace", (), {}), ("all", (), {}),
                               ("any", (), {}), ("squeeze", (), {}), ("swapaxes", (0, 1), {})):
        got, want = getattr(x, name)(*args, **kwargs), getattr(np, name)(x, *args, **kwargs)
        assert type(got) is type(want), name
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        assert getattr(got, "fmt", x.fmt) == x.fmt
    for name in ("sum", "mean", "cumsum"):  # (they took axis only: keepdims=False was a
        got = getattr(x, name)(0, keepdims=False)  # TypeError, dtype= an unexpected keyword)
        np.testing.assert_array_equal(got.values, getattr(np, name)(x, 0).values)
        with pytest.raises(TypeError, match=f"np.{name} on a FloatArray takes axis only"):
            getattr(x, name)(dtype=np.float32)
    assert x.flatten().values.tolist() == x.values.ravel().tolist() and x.flatten().fmt == x.fmt
    assert x.item(1) == x.values.item(1) and isinstance(x.item(1), float)
    assert x.T.shape == (4, 3) and x.copy().fmt == x.fmt
    # a format spec was "unsupported format string passed to FloatArray.__format__"
    assert f"{_fa(2.0**-11 + 1).sum():.4f} {np.max(_fa([1.5, 2.5])):g}" == "1.0000 2.5"
    assert f"{_fa([1.0])}" == "FloatArray(float16, [1.0])"
    with pytest.raises(TypeError, match="unsupported format string"):  # (as ndarray: 0-d only)
        f"{x:.3f}"
