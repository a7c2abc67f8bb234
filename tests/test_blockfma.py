"""The block-FMA accumulator (floatlab.blockfma) against an exact Fraction model.

The reference below is written from the model's definition (floatlab/blockfma.py's docstring:
Fasi et al. 2021's block FMA): per block, align every addend (the running value and the block's
products) to the largest exponent, truncate each toward zero to a multiple of
2**(E - man_bits - align_bits), add exactly, round once. Chunked promotion adds the chunk
results in the promote format, round to nearest even, as the per-addition accumulator does.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from exact_arith import _floor_log2, round_fraction
from hypothesis import given, settings
from hypothesis import strategies as st

import floatlab
from floatlab import Accumulator


def reference(values, acc: Accumulator) -> Fraction:
    fmt, block = acc.fmt, acc.block_fma

    def run(xs):
        c = Fraction(0)
        for i in range(0, len(xs), block):
            addends = [c, *xs[i : i + block]]
            peak = max(abs(v) for v in addends)
            e = max(_floor_log2(peak), fmt.emin) if peak else fmt.emin
            q = Fraction(2) ** (e - fmt.man_bits - acc.align_bits)
            exact = sum(math.trunc(v / q) * q for v in addends)
            c = round_fraction(exact, fmt, acc.rounding)
        return c

    xs = [Fraction(float(v)) for v in values]
    if acc.chunk is None:
        return run(xs)
    total = Fraction(0)
    for i in range(0, len(xs), acc.chunk):
        total = round_fraction(total + run(xs[i : i + acc.chunk]), acc.promote, "nearest_even")
    return total


# values with few significant bits over a spread of binades, both signs (some zeros)
values = st.builds(lambda m, e, s: s * m * 2.0**e, st.integers(0, 63), st.integers(-12, 6),
                   st.sampled_from([1, -1]))
MODES = ("toward_zero", "nearest_even", "up", "down", "odd")


@settings(max_examples=150, deadline=None)
@given(xs=st.lists(values, min_size=0, max_size=45), fmt=st.sampled_from(["e8m3", "e5m6",
       "e8m13", "e8m7"]), mode=st.sampled_from(MODES), block=st.integers(1, 9),
       align=st.integers(0, 3), chunk=st.sampled_from([None, 4, 7, 16]))
def test_block_fma_sums_match_the_exact_model(xs, fmt, mode, block, align, chunk):
    acc = Accumulator(fmt, mode, block_fma=block, align_bits=align, chunk=chunk,
                      promote=None if chunk is None else "float32")
    x = np.array(xs, dtype=np.float64)
    expected = float(reference(x, acc))
    assert float(floatlab.sum(x, acc)) == expected
    # the same sum in 3 columns at once (the vectorised path), inputs not mutated
    cols = np.stack([x] * 3, axis=1)
    before = cols.copy()
    np.testing.assert_array_equal(floatlab.sum(cols, acc, axis=0), expected)
    np.testing.assert_array_equal(cols, before)


@pytest.mark.parametrize("acc", [
    Accumulator("e8m13", "toward_zero", block_fma=32),
    Accumulator("e8m13", "toward_zero", block_fma=16, chunk=128, promote="float32"),
    Accumulator("e8m13", "toward_zero", block_fma=16, chunk=512, promote="float32"),  # 1 chunk
    Accumulator("e8m14", "toward_zero", block_fma=32, chunk=40, promote="float32",
                align_bits=2),
    Accumulator("e5m6", "nearest_even", block_fma=4, fused=False),
], ids=repr)
def test_block_fma_matmul_matches_the_exact_model(acc):
    rng = np.random.default_rng(3)
    a = floatlab.round(rng.standard_normal((4, 300)), "e4m3fn")
    b = floatlab.round(rng.standard_normal((300, 3)), "e4m3fn")
    got = floatlab.matmul(a, b, acc)
    for i in range(4):
        for j in range(3):
            prods = a[i] * b[:, j]  # exact in float64
            if not acc.fused:
                prods = [float(round_fraction(Fraction(float(p)), acc.fmt, acc.rounding))
                         for p in prods]
            assert got[i, j] == float(reference(prods, acc)), (acc, i, j)


def test_worked_example_and_what_sets_it_apart():
    x = [1.5, 0.3125, -0.0859375]
    assert float(floatlab.sum(x, Accumulator("e8m3", "toward_zero", block_fma=3))) == 1.75
    # per addition: trunc(1.8125) = 1.75, trunc(1.6640625) = 1.625
    assert float(floatlab.sum(x, Accumulator("e8m3", "toward_zero"))) == 1.625
    # extra alignment bits keep 0.3125 whole: 1.8125 truncates to 1.75 all the same, but the
    # small product now counts: 1.5 + 0.3125 - 0.0859375 = 1.7265625 -> 1.625
    acc = Accumulator("e8m3", "toward_zero", block_fma=3, align_bits=4)
    assert float(floatlab.sum(x, acc)) == 1.625


def test_specials_propagate():
    acc = Accumulator("e8m13", "toward_zero", block_fma=4)
    assert np.isnan(floatlab.sum([1.0, np.inf, -np.inf, 2.0], acc))
    assert float(floatlab.sum([1.0, np.inf, 3.0], acc)) == np.inf
    assert np.isnan(floatlab.sum([1.0, np.nan, 3.0], acc))
    assert floatlab.sum(np.zeros((0, 3)), acc, axis=0).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("kwargs, match", [
    (dict(block_fma=0), "block_fma=0 must be a positive int"),
    (dict(block_fma=True), "block_fma=True must be a positive int"),
    (dict(block_fma="32"), "must be a positive int"),
    (dict(block_fma=32, align_bits=-1), "align_bits=-1 must be a non-negative int"),
    (dict(align_bits=2), "align_bits applies to a block FMA"),
    (dict(block_fma=32, order="pairwise"), "order='sequential'"),
    (dict(block_fma=32, compensated=True), "order='sequential'"),
    (dict(block_fma=32, chunk=128), "needs promote"),
    (dict(block_fma=32, align_bits=40), "more than float64's 53 bits"),
])
def test_bad_block_fma_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Accumulator("e8m13", "toward_zero", **kwargs)


def test_bad_block_fma_format_and_cumsum():
    with pytest.raises(ValueError, match="at most 51 significand bits"):
        Accumulator("float64", block_fma=32)
    with pytest.raises(ValueError, match="one per block"):
        floatlab.cumsum([1.0, 2.0], Accumulator("e8m13", "toward_zero", block_fma=2))


@pytest.mark.parametrize("fmt", ["e8m13", "e8m14", "e5m6", "e4m3fn", "e8m3", "bf16"])
def test_masked_truncation_is_floatlab_round(fmt, monkeypatch):
    from floatlab import blockfma

    f = floatlab.get_format(fmt)
    rng = np.random.default_rng(11)
    exps = rng.integers(f.emin - f.man_bits - 3, f.emax + 3, 4000)
    v = rng.standard_normal(4000) * np.ldexp(1.0, exps)
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, f.max, -f.max, 2.0**f.emin, -(2.0**f.emin),
             np.nextafter(2.0**f.emin, 0), np.nextafter(f.max, np.inf), f.smallest_subnormal]
    v = np.concatenate([v, edges])
    acc = Accumulator(fmt, "toward_zero", block_fma=4)
    fast = blockfma._round_sums(v, acc)
    slow = floatlab.round(v, fmt, "toward_zero")
    np.testing.assert_array_equal(fast.view(np.uint64)[~np.isnan(slow)],
                                  slow.view(np.uint64)[~np.isnan(slow)])
    assert np.array_equal(np.isnan(fast), np.isnan(slow))
    # and whole sums through both paths
    a = floatlab.round(rng.standard_normal((6, 100)), "e4m3fn") * 2.0**-60
    b = floatlab.round(rng.standard_normal((100, 5)), "e4m3fn")
    acc = Accumulator("e8m13", "toward_zero", block_fma=8, chunk=32, promote="float32")
    fast_sum = floatlab.matmul(a, b, acc)
    monkeypatch.setattr(blockfma, "_FAST_TRUNCATION", False)
    np.testing.assert_array_equal(floatlab.matmul(a, b, acc), fast_sum)


def _adversarial_operands(rng, m, k, n):
    """E4M3-like values over a wide spread of binades (products with many bits below the
    quantum, products that swamp the rest, tiny products below e8m13's emin), both zeros."""
    def operand(shape):
        v = floatlab.round(rng.standard_normal(shape), "e4m3fn") * np.ldexp(
            1.0, rng.integers(-70, 20, shape))
        v[rng.random(shape) < 0.05] = 0.0
        v[rng.random(shape) < 0.05] = -0.0
        return v
    return operand((m, k)), operand((k, n))


@pytest.mark.parametrize("acc", [
    Accumulator("e8m13", "toward_zero", block_fma=32),
    Accumulator("e8m13", "toward_zero", block_fma=32, chunk=128, promote="float32"),
    Accumulator("e8m14", "toward_zero", block_fma=16, chunk=40, promote="float32",
                align_bits=2),
    Accumulator("e8m3", "toward_zero", block_fma=3, align_bits=3),
    Accumulator("e5m6", "nearest_even", block_fma=5),
    Accumulator("e8m7", "down", block_fma=7, chunk=9, promote="float32"),
], ids=repr)
@pytest.mark.parametrize("shape", [(7, 150, 5), (5, 150, 7), (1, 33, 1), (40, 64, 3),
                                   (3, 4, 70), (4, 256, 6), (3, 0, 2)])
def test_product_chunks_equal_the_general_path(acc, shape, monkeypatch):
    from floatlab import blockfma

    rng = np.random.default_rng(sum(shape))
    a, b = _adversarial_operands(rng, *shape)
    if shape[1] > 3:
        a[0, :3] = [np.inf, np.nan, -np.inf]
    before = a.copy(), b.copy()
    fast = floatlab.matmul(a, b, acc)
    monkeypatch.setattr(blockfma, "_FAST_PRODUCTS", False)
    with np.errstate(invalid="ignore"):   # inf * 0 in the general path's products
        general = floatlab.matmul(a, b, acc)
    np.testing.assert_array_equal(fast.view(np.int64)[~np.isnan(general)],
                                  general.view(np.int64)[~np.isnan(general)])
    assert np.array_equal(np.isnan(fast), np.isnan(general))
    assert np.array_equal(a, before[0], equal_nan=True) and np.array_equal(b, before[1])


def test_product_chunks_with_a_negative_zero_running_value(monkeypatch):
    """A tiny negative block sum rounded toward zero leaves c = -0; a following block of -0
    products sums to +0 on both paths (NumPy's sum starts from +0), which is why the fast
    path's einsum products (+0 for every zero product) are safe."""
    from floatlab import blockfma

    acc = Accumulator("e8m3", "toward_zero", block_fma=2, align_bits=3)
    a = np.array([[-(2.0**-131), 1.0, -1.0, -1.0]] * 3)
    b = np.array([[1.0, 0.0, 0.0, 0.0]]).T.repeat(2, axis=1)
    fast = floatlab.matmul(a, b, acc)
    monkeypatch.setattr(blockfma, "_FAST_PRODUCTS", False)
    general = floatlab.matmul(a, b, acc)
    assert float(floatlab.sum(a[0, :2] * b[:2, 0], acc)) == 0.0             # c = -0 ...
    assert np.signbit(floatlab.sum(a[0, :2] * b[:2, 0], acc))
    assert np.all(general == 0) and not np.any(np.signbit(general))      # ... then +0
    np.testing.assert_array_equal(fast.view(np.int64), general.view(np.int64))


@pytest.mark.parametrize("fmt", ["e8m13", "e5m6"])
def test_round_sums_range_check_in_place(fmt):
    """The two-reduction range check and the in-place rounding give the masked result."""
    from floatlab import blockfma

    f = floatlab.get_format(fmt)
    acc = Accumulator(fmt, "toward_zero", block_fma=4)
    for v in (np.array([0.0, -0.0, 1.5, -3.0]), np.array([2.0**f.emin, -f.max]),
              np.array([0.0, 2.0**(f.emin - 1)]), np.array([np.nextafter(f.max, np.inf)]),
              np.array([np.nan, 1.0]), np.array([-np.inf]), np.zeros(0)):
        expected = floatlab.round(v, fmt, "toward_zero")
        got = blockfma._round_sums(v.copy(), acc, in_place=True)
        np.testing.assert_array_equal(got.view(np.int64)[~np.isnan(expected)],
                                      expected.view(np.int64)[~np.isnan(expected)])
        assert np.array_equal(np.isnan(got), np.isnan(expected))
