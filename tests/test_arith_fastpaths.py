"""FloatArray fast paths against the general (emulated) path they replace.

* fma in the nearest modes adds in float64 and takes round-to-odd only where the float64 sum is a
  midpoint of the format (floatlab.fused_multiply_add._nearest_fma): compared with odd_sum on every
  element, on random data and on constructed hard cases (products that are midpoints with a tiny c
  of either sign, exact ties, subnormals, overflow, sign changes and exact cancellation).
* division by zero: no RuntimeWarning escapes to the user.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import floatlab
import floatlab.fused_multiply_add as fused
from floatlab.eft import odd_sum
from floatlab.formats import get_format
from floatlab.grid import values

FORMATS = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "e8m13", "float32")


def _hard_operands(fmt_name: str, rng: np.random.Generator, n: int = 20000):
    """Values of the format: random magnitudes over the whole range, products that land on
    midpoints, c tiny against a*b (either sign) or a*b tiny against c, exact cancellations."""
    fmt = get_format(fmt_name)
    scale = np.ldexp(1.0, rng.integers(fmt.emin - fmt.man_bits, fmt.emax + 1, size=(3, n)))
    raw = rng.standard_normal((3, n)) * scale
    a, b, c = (floatlab.round(v, fmt) for v in raw)
    # a*b a midpoint of the grid: a = 1 + k ulp with k odd makes a*a a (2p)-bit value; use
    # small odd integers times powers of two, whose products have about p + 1 bits.
    odd = rng.integers(1, 2 ** (fmt.man_bits + 1), size=n) | 1
    a2 = floatlab.round(np.ldexp(odd.astype(float), rng.integers(-6, 6, n)), fmt)
    b2 = floatlab.round(np.ldexp((rng.integers(1, 2 ** (fmt.man_bits + 1), size=n) | 1)
                                 .astype(float), rng.integers(-6, 6, n)), fmt)
    tiny = floatlab.round(rng.choice([-1.0, 1.0], n) * 2.0 ** (fmt.emin - fmt.man_bits)
                          * rng.integers(1, 4, n), fmt)
    a = np.concatenate([a, a2, a2, a[: n // 4], [fmt.max, fmt.max, -fmt.max, 0.0, 1.0]])
    b = np.concatenate([b, b2, b2, b[: n // 4], [2.0, 1.0, 1.0, -1.0, -1.0]])
    with np.errstate(over="ignore", invalid="ignore"):
        cancel = -(a[: n // 4] * b[: n // 4])
    c = np.concatenate([c, tiny, c[:n], cancel,
                        [0.0, fmt.max, -fmt.max, 0.0, 1.0]])
    c = floatlab.round(c, fmt)
    return a, b, c


def _assert_fast_fma_equals_slow(a, b, c, fmt, mode):
    """floatlab.fma with its fast paths on and off gives the same bits."""
    fa, fb, fc = (floatlab.array(v, fmt, rounding=mode) for v in (a, b, c))
    quick = floatlab.fma(fa, fb, fc).values
    fused._FAST_FMA = False
    try:
        slow = floatlab.fma(fa, fb, fc).values
    finally:
        fused._FAST_FMA = True
    np.testing.assert_array_equal(quick.view(np.uint64), slow.view(np.uint64))


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("mode", ["nearest_even", "nearest_away"])
def test_nearest_fma_fast_path_equals_round_to_odd(name, mode):
    rng = np.random.default_rng(9)
    a, b, c = _hard_operands(name, rng)
    fmt = get_format(name)
    with np.errstate(over="ignore", invalid="ignore"):
        product = a * b
    fast = fused._nearest_fma(a, b, c, fmt)
    # the value itself may differ from odd_sum's (it is not rounded to odd): its rounding may not
    want = floatlab.round(odd_sum(product, c), fmt, mode)
    got = floatlab.round(fast, fmt, mode)
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))
    # and through the public function, against the switched-off fast path
    _assert_fast_fma_equals_slow(a, b, c, fmt, mode)


def test_the_fast_path_fixes_a_midpoint_that_float64_would_round_wrongly():
    # 7 * 37 = 259 is a midpoint of bfloat16's grid (256, 258, 260 ...); 259 - 2**-100 must
    # round down to 258, but fl(259 - 2**-100) = 259, whose tie goes to the even 260.
    a, b = floatlab.array([7.0], "bf16"), floatlab.array([37.0], "bf16")
    c = floatlab.array([-(2.0**-100)], "bf16")
    assert floatlab.fma(a, b, c).tolist() == [258.0]
    assert floatlab.fma(a, b, -c).tolist() == [260.0]


def test_fma_of_plain_values_and_scalars_takes_the_same_path():
    x = 1 + 2.0**-10
    assert float(floatlab.fma(x, x, -1.0, fmt="fp32")) == float(np.float32(2.0**-9 + 2.0**-20))
    out = floatlab.fma(floatlab.array(3.0, "fp16"), 2.0, 1.0)
    assert out.shape == () and float(out) == 7.0


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_division_by_zero_leaks_no_warning(name):
    a = floatlab.array([1.0, -1.0, 0.0, 2.0], name)
    b = floatlab.array([0.0, 0.0, 0.0, 4.0], name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = (a / b).values
        rec = np.reciprocal(b).values
    assert np.isnan(out[2]) and out[3] == 0.5
    assert np.isnan(rec[0]) or np.isinf(rec[0])
    if get_format(name).special == "ieee":
        assert out[0] == np.inf and out[1] == -np.inf


@pytest.mark.parametrize("mode", ["toward_zero", "down", "odd", "nearest_even"])
def test_inf_plus_a_finite_value_stays_inf_in_every_mode(mode):
    """inf is exact: TwoSum's NaN error must not nudge it to float64's max (which a directed
    rounding would then turn into the format's max)."""
    a = floatlab.array([np.inf, -np.inf, 1.0], "fp16", rounding=mode)
    one = floatlab.array([1.0, 1.0, 1.0], "fp16", rounding=mode)
    assert (a + one).tolist()[:2] == [np.inf, -np.inf]
    assert floatlab.fma(a, one, one).tolist()[:2] == [np.inf, -np.inf]
    acc = floatlab.Accumulator("fp16", mode)
    assert float(floatlab.sum(np.array([np.inf, 1.0, 2.0]), acc)) == np.inf


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e4m3fnuz", "e3m2", "e2m1"])
@pytest.mark.parametrize("mode", ["nearest_even", "toward_zero", "up", "down", "odd"])
def test_fma_of_narrow_formats_adds_exactly(name, mode):
    """Formats whose a*b + c is always exact in float64 (fused._sums_exact) skip TwoSum: the
    same bits as the round-to-odd path in every deterministic mode, on every value triple of
    a random sample (all values of the format are drawn, zeros and max included)."""
    fmt = get_format(name)
    assert fused._sums_exact(fmt)
    rng = np.random.default_rng(5)
    pool = np.asarray(values(fmt), dtype=float)
    pool = pool[np.isfinite(pool)]
    a, b, c = (rng.choice(pool, 30000) for _ in range(3))
    _assert_fast_fma_equals_slow(a, b, c, fmt, mode)


@pytest.mark.parametrize("name", ["float64", "e11m20", "e10m5"])
def test_fma_of_wide_exponent_float_arrays(name):
    # _sums_exact squared the smallest quantum, which underflows to 0 for float64's exponents:
    # fma of two float64 FloatArrays raised ZeroDivisionError
    fmt = get_format(name)
    assert not fused._sums_exact(fmt)
    x = floatlab.array([1.5, -2.0], name)
    assert floatlab.fma(x, x, x).tolist() == [3.75, 2.0]


def test_a_midpoint_below_the_smallest_normal_is_fixed_too():
    # 1.5 * 2**-24 is the midpoint between fp16's two smallest subnormals; with c = -2**-80
    # the exact value is just below it (2**-24), but fl(a * b + c) is the midpoint itself,
    # whose tie goes to the even 2**-23. Midpoints there have fewer than p + 1 bits.
    got = floatlab.fma(2.0**-24, 1.5, -(2.0**-80), fmt="fp16")
    assert float(got) == 2.0**-24
    assert float(floatlab.fma(2.0**-24, 1.5, 2.0**-80, fmt="fp16")) == 2.0**-23


def test_fma_still_imports_from_arith():
    # fma moved to floatlab.fused_multiply_add; code written against floatlab.arith keeps working
    from floatlab.arith import fma

    assert fma is floatlab.fma
