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
MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down")
FORMATS = ("fp16", "bf16", "float8_e4m3fn")


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


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("mode", MODES)
def test_diff_rounds_each_difference_once(fmt, mode):
    rng = np.random.default_rng(3)
    x = _fa(rng.standard_normal(12) * 8, fmt, rounding=mode)
    got = np.diff(x, n=2, prepend=0.3)
    level = [Fraction(float(floatlab.round(0.3, fmt)))] + [Fraction(float(v)) for v in x.values]
    for _ in range(2):
        level = [round_fraction(b - a, x.fmt, mode) for a, b in zip(level, level[1:], strict=False)]
    assert got.fmt == x.fmt and got.values.tolist() == [float(q) for q in level]
    m = _fa(rng.standard_normal((3, 4)), fmt, rounding=mode)
    np.testing.assert_array_equal(np.diff(m, axis=0).values, (m[1:] - m[:-1]).values)
    np.testing.assert_array_equal(np.ediff1d(m, to_begin=[7.0]).values,
                                  np.concatenate([_fa([7.0], fmt), np.diff(m.ravel())]).values)
    with pytest.raises(ValueError, match="order must be non-negative"):
        np.diff(x, n=-1)
    with pytest.raises(TypeError, match="n is the number of differences, an int: got 1.0"):
        np.diff(x, n=1.0)
    with pytest.raises(TypeError, match="boolean"):
        np.diff(x, prepend=True)


def _accumulated(terms, fmt, mode):
    """The default accumulator: exact products, each addition rounded once."""
    total = Fraction(0)
    for t in terms:
        total = round_fraction(total + t, fmt, mode)
    return float(total)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("mode", MODES)
def test_vdot_convolve_correlate_through_the_accumulator(fmt, mode):
    rng = np.random.default_rng(4)
    a = _fa(rng.standard_normal(9) * 4, fmt, rounding=mode)
    v = _fa(rng.standard_normal(4), fmt, rounding=mode)
    fa, fv = ([Fraction(float(t)) for t in z.values] for z in (a, v))
    full = [_accumulated([fa[n - k] * fv[k] for k in range(4) if 0 <= n - k < 9], a.fmt, mode)
            for n in range(12)]
    assert np.convolve(a, v).values.tolist() == full
    assert np.convolve(a, v, "valid").values.tolist() == full[3:9]
    assert np.convolve(a, v, "same").values.tolist() == full[1:10]
    # correlate(a, v) is convolve(a, v reversed); in NumPy's float64 the same identity holds
    assert np.correlate(a, v, "full").values.tolist() == np.convolve(a, v[::-1]).values.tolist()
    assert np.correlate(a, v).shape == np.correlate(a.values, v.values).shape == (6,)
    assert float(np.vdot(a[:8].reshape(2, 4), a[:8])) == _accumulated(
        [t * t for t in fa[:8]], a.fmt, mode)
    # small integers: NumPy's float64 is exact, and so is the emulation
    for m, k in ((9, 4), (4, 9), (5, 5), (1, 3), (2, 5), (4, 6), (6, 3)):
        ia, iv = rng.integers(-9, 9, m).astype(float), rng.integers(-9, 9, k).astype(float)
        for how in ("full", "same", "valid"):
            for f in (np.convolve, np.correlate):
                got = f(_fa(ia, "fp16"), _fa(iv, "fp16"), how)
                assert got.values.tolist() == f(ia, iv, how).tolist(), (f, m, k, how)
    two = _fa(2.0, fmt)  # (a 0-d operand is a vector of one, as in NumPy)
    assert np.convolve(two, a).values.tolist() == (a * 2).values.tolist()
    assert np.correlate(a, two).values.tolist() == (a * 2).values.tolist()
    ones = _fa(np.ones(4096))
    assert float(np.vdot(ones, ones)) == 2048.0 and float(np.convolve(ones, ones)[4095]) == 2048.0
    with pytest.raises(ValueError, match="different lengths"):
        np.vdot(a, v)


@pytest.mark.parametrize("mode", MODES)
def test_nan_reductions_drop_nans_as_numpy_defines_them(mode):
    rng = np.random.default_rng(5)
    values = rng.standard_normal((4, 6)) * 50
    values[rng.random((4, 6)) < 0.3] = np.nan
    x = _fa(values, "bf16", rounding=mode)
    kept = [[Fraction(float(v)) for v in row if not np.isnan(v)] for row in x.values.T]
    sums = [_accumulated(col, x.fmt, mode) for col in kept]
    assert np.nansum(x, axis=0).values.tolist() == sums
    prods = []
    for col in kept:
        p = Fraction(1)
        for t in col:
            p = round_fraction(p * t, x.fmt, mode)
        prods.append(float(p))
    assert np.nanprod(x, axis=0).values.tolist() == prods
    means = [float(round_fraction(Fraction(s) / len(c), x.fmt, mode))
             for s, c in zip(sums, kept, strict=True)]
    assert np.nanmean(x, axis=0).values.tolist() == means
    np.testing.assert_array_equal(np.nancumsum(x, axis=1).values,
                                  np.cumsum(np.where(np.isnan(x.values), 0.0, x), axis=1).values)
    np.testing.assert_array_equal(np.nancumprod(x, axis=1).values,
                                  np.cumprod(np.where(np.isnan(x.values), 1.0, x), axis=1).values)
    for axis, ddof in ((0, 0), (1, 1), (None, 0)):  # nanvar: np.var's steps on the kept values
        got = np.nanvar(x, axis=axis, ddof=ddof)
        cols = x.values if axis == 1 else (x.values.T if axis == 0 else x.values.reshape(1, -1))
        want = [float(np.var(x[i][~np.isnan(x[i].values)] if axis == 1 else
                             _fa(c[~np.isnan(c)], "bf16", rounding=mode), ddof=ddof))
                for i, c in enumerate(cols)]
        assert np.ravel(got.values).tolist() == want
        np.testing.assert_array_equal(np.nanstd(x, axis=axis, ddof=ddof).values,
                                      np.sqrt(got).values)
    assert float(np.nanmedian(_fa([1.0, np.nan, 5.0, 2.0]))) == 2.0
    assert float(np.nanpercentile(_fa([1.0, np.nan, 5.0]), 50, method="higher")) == 5.0


def test_cumulative_nan_to_num_and_fix():
    x = _fa(np.ones(4096))
    assert float(np.cumulative_sum(x)[-1]) == 2048.0  # as cumsum, not float64's 4096
    got = np.cumulative_sum(_fa([1.0, 2.0]), include_initial=True)
    assert got.values.tolist() == [0.0, 1.0, 3.0]
    three = _fa([3.0, 3.0, 3.0], "float8_e4m3fn")
    assert np.cumulative_prod(three).values.tolist() == [3.0, 9.0, 28.0]  # 27: a tie, to 28
    with pytest.raises(ValueError, match="needs axis="):
        np.cumulative_sum(_fa(np.ones((2, 2))))
    with pytest.raises(ValueError, match="0-d FloatArray: it needs an array of at least one"):
        np.cumulative_prod(_fa(2.0))
    special = _fa([np.nan, np.inf, -np.inf, 1.5])
    assert np.nan_to_num(special).values.tolist() == [0.0, 65504.0, -65504.0, 1.5]
    assert np.nan_to_num(special, posinf=0.1).values[1] == float(floatlab.round(0.1, "fp16"))
    assert np.fix(_fa([-2.5, 2.5])).values.tolist() == [-2.0, 2.0]
