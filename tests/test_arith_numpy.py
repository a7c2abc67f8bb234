"""NumPy functions on FloatArrays (floatlab.arith_numpy): emulated, or refused with a way out.

They returned plain float64 results computed without the format (np.inner of 4096 fp16 ones
gave 4096.0, not the fp16 accumulator's 2048; np.prod multiplied in float64, never rounding).
Each now rounds every operation once to the format and sums through the accumulator, checked
against the same steps written with the operators and against exact Fraction loops.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from exact_arith import round_fraction

import floatlab

FP16 = floatlab.get_format("fp16")


def _fa(x, fmt="fp16", **kw):
    return floatlab.array(np.asarray(x, dtype=np.float64), fmt, **kw)


def test_inner_tensordot_trace_sum_through_the_accumulator():
    ones = _fa(np.ones(4096))
    assert float(np.inner(ones, ones)) == 2048.0  # swamping, as ones @ ones
    rng = np.random.default_rng(0)
    a, b = _fa(rng.standard_normal((2, 3, 40))), _fa(rng.standard_normal((4, 40)))
    got = np.inner(a, b)
    assert got.shape == np.inner(a.values, b.values).shape == (2, 3, 4)
    for i, j, k in np.ndindex(got.shape):
        assert float(got[i, j, k]) == float(a[i, j] @ b[k])
    c = _fa(rng.standard_normal((40, 3, 5)))
    td = np.tensordot(a, c, axes=([2], [0]))
    assert td.shape == (2, 3, 3, 5) and isinstance(td, floatlab.FloatArray)
    for i, j, k, m in np.ndindex(td.shape):
        assert float(td[i, j, k, m]) == float(a[i, j] @ c[:, k, m])
    two = np.tensordot(a, _fa(rng.standard_normal((3, 40, 2))), axes=([1, 2], [0, 1]))
    assert two.shape == (2, 2)
    assert float(np.tensordot(_fa(np.ones((64, 64))), _fa(np.ones((64, 64))))) == 2048.0
    empty = np.tensordot(_fa(np.ones((2, 0, 3))), _fa(np.ones((0, 3, 4))), ([1, 2], [0, 1]))
    assert empty.shape == (2, 4) and not empty.values.any()  # (an empty sum: +0)
    diag = _fa(np.diag([2048.0, 1.0, 1.0]))
    assert float(np.trace(diag)) == 2048.0  # 2048 + 1 is a tie in fp16: stays


def test_outer_kron_round_each_product_once():
    x, y = _fa([1.0 + 2.0**-10, 3.0]), _fa([1.0 + 2.0**-10, 5.0])
    want = (x[:, None] * y[None, :]).values
    for got in (np.outer(x, y), np.kron(x[:, None], y[None, :])):
        assert isinstance(got, floatlab.FloatArray) and got.fmt == FP16
        np.testing.assert_array_equal(got.values, want)
    assert float(np.outer(x, y)[0, 0]) == 1 + 2.0**-9  # (1 + 2**-10)**2 rounded to fp16


@pytest.mark.parametrize("mode", ["nearest_even", "toward_zero", "up"])
def test_prod_and_cumprod_round_every_product(mode):
    rng = np.random.default_rng(1)
    x = _fa(rng.random(30) + 0.6, "bf16", rounding=mode)
    running, want = Fraction(1), []
    for v in x.values:
        running = round_fraction(running * Fraction(float(v)), x.fmt, mode)
        want.append(float(running))
    assert np.cumprod(x).values.tolist() == want
    assert float(np.prod(x)) == want[-1]
    m = _fa(rng.random((3, 4)) + 0.5)
    np.testing.assert_array_equal(np.prod(m, axis=0).values, (m[0] * m[1] * m[2]).values)
    assert np.cumprod(m, axis=1).shape == (3, 4) and float(np.prod(_fa([]))) == 1.0


def test_var_std_average_are_the_operators_steps():
    rng = np.random.default_rng(2)
    x = _fa(rng.standard_normal((5, 7)) * 100)
    for axis in (None, 0, 1):
        mean = x.mean(axis=axis)
        d = x - (mean if axis is None else np.expand_dims(mean, axis))
        n = x.size if axis is None else x.shape[axis]
        for ddof in (0, 1):
            var = np.var(x, axis=axis, ddof=ddof)
            want = ((d * d).sum(axis=axis) / (n - ddof))
            np.testing.assert_array_equal(var.values, want.values)
            np.testing.assert_array_equal(np.std(x, axis=axis, ddof=ddof).values,
                                          np.sqrt(want).values)
    w = _fa(rng.random(7))
    got = np.average(x, axis=1, weights=w)
    np.testing.assert_array_equal(got.values, ((x * w).sum(axis=1) / w.sum()).values)
    with pytest.raises(ZeroDivisionError, match="Weights sum to zero"):
        np.average(x, axis=1, weights=np.zeros(7))


def test_selections_are_exact_and_keep_the_format():
    x = _fa([0.1, 2.0, -3.0, np.nan])
    clipped = np.clip(x, -1, 1.7)
    assert clipped.fmt == FP16 and clipped.values[:3].tolist() == [
        float(floatlab.round(0.1, "fp16")), float(floatlab.round(1.7, "fp16")), -1.0]
    assert np.isnan(clipped.values[3])
    chosen = np.where(x.values > 0, x, 0.3)
    assert chosen.fmt == FP16 and chosen.values[2] == float(floatlab.round(0.3, "fp16"))
    assert np.round(_fa([2.5, -1.5, 0.4])).values.tolist() == [2.0, -2.0, -0.0]
    y = _fa([1.0, 3.0, 2.0, 2048.0])
    assert float(np.ptp(_fa([-1.0, 2048.0]))) == 2048.0 and np.ptp(y).fmt == FP16  # 2049
    assert float(np.median(_fa([1.0, 2.0**-11 + 1, 5.0, 9.0]))) == 3.0
    assert float(np.median(_fa([1.0, 2.0, 1 + 2.0**-10, 7.0]))) == float(
        floatlab.round((2.0 + 1 + 2.0**-10) / 2, "fp16"))
    assert float(np.percentile(y, 50, method="lower")) == 2.0


@pytest.mark.parametrize("call, words", [
    (lambda x: np.einsum("i,i->", x, x), "np.einsum .*@ / floatlab.matmul"),
    (lambda x: np.percentile(x, 30), "method='linear'.*method='lower'"),
    (lambda x: np.quantile(x, 0.3), "method='linear'"),
    (lambda x: np.round(x, 1), r"decimals=1.*astype"),
    (lambda x: np.linalg.norm(x.reshape(2, 2), "nuc"), "ord='nuc'"),
    (lambda x: np.var(x, dtype=np.float32), "takes axis only"),
])
def test_functions_not_emulated_say_what_is(call, words):
    with pytest.raises(TypeError, match=words):
        call(_fa([1.0, 2.0, 3.0, 4.0]))


def test_norm_orders_against_the_exact_steps():
    v = _fa([3.0, -4.0, 2048.0, 1.0])
    assert float(np.linalg.norm(v, 1)) == 2056.0  # 7 + 2048 -> 2056 (a tie), + 1 -> 2056
    assert float(np.linalg.norm(v, np.inf)) == 2048.0 and float(np.linalg.norm(v, -np.inf)) == 1.0
    m = _fa([[1.0, -2.0], [3.0, 4.0]])
    assert float(np.linalg.norm(m, 1)) == 6.0 and float(np.linalg.norm(m, -1)) == 4.0
    assert float(np.linalg.norm(m, np.inf)) == 7.0 and float(np.linalg.norm(m, -np.inf)) == 3.0
    assert np.linalg.norm(m, 1, axis=1).values.tolist() == [3.0, 7.0]
