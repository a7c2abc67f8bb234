"""The truncating fast path of floatlab.sequential (round-toward-zero matmul accumulation, as in
DeepSeek-V3's e8m13 tensor-core accumulator): equal to the general path (TwoSum, round to odd,
floatlab.round) everywhere it applies, refused where its preconditions fail, and checked
against an exact fractions.Fraction model of truncation."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import floatlab
from floatlab import accumulate as acc_mod
from floatlab.accumulate import Accumulator, _ProductTerms, _truncating


def _both(a, b, acc, monkeypatch):
    """(fast path used?, fast result, general result)."""
    used = _truncating(_ProductTerms(a, b, None), acc)
    fast = floatlab.matmul(a, b, acc)
    monkeypatch.setattr(acc_mod, "_FAST_TRUNCATION", False)
    slow = floatlab.matmul(a, b, acc)
    monkeypatch.setattr(acc_mod, "_FAST_TRUNCATION", True)
    return used, fast, slow


def _same(x, y) -> bool:
    return np.array_equal(x, y, equal_nan=True) and np.array_equal(np.signbit(x), np.signbit(y))


def _fp8_operand(rng, shape, scale):
    """Dequantised E4M3 values times a float32 scale, as the recipes' GEMMs read them."""
    e = floatlab.round(rng.standard_normal(shape) * 40, "e4m3fn", saturate=True)
    values = (e.astype(np.float32) * np.float32(scale)).astype(np.float64)
    values[rng.random(shape) < 0.3] = 0.0  # ReLU zeros: zero products
    return values


ACCUMULATORS = [
    Accumulator("e8m13", "toward_zero", chunk=128, promote="float32"),
    Accumulator("e8m13", "toward_zero"),
    Accumulator("e8m13", "toward_zero", order="blocked", chunk=16),
    Accumulator("bf16", "toward_zero", chunk=7),
    Accumulator("fp16", "toward_zero"),
]


@pytest.mark.parametrize("acc", ACCUMULATORS, ids=repr)
def test_fast_path_equals_general_path(acc, monkeypatch):
    rng = np.random.default_rng(7)
    uses = 0
    for n, k, m in ((5, 300, 3), (17, 129, 9), (8, 64, 33), (1, 1, 1), (40, 257, 2)):
        a = _fp8_operand(rng, (n, k), 0.0123)
        b = _fp8_operand(rng, (k, m), 0.00731)
        if acc.fmt.max < 1e5:  # small integers: products on fp16's grid, sums in range
            a = rng.integers(-8, 9, (n, k)).astype(np.float64)
            b = rng.integers(-8, 9, (k, m)) * (rng.random((k, m)) < 0.7)
        used, fast, slow = _both(a, b, acc, monkeypatch)
        uses += used
        assert _same(fast, slow), (n, k, m)
    assert uses >= 3  # the fast path was exercised, not only refused


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_sums_just_below_a_grid_point(sign, monkeypatch):
    """float64 rounds 1 - 2**-60 up to 1.0 (on the e8m13 grid): truncation must still step
    below it; at a power of two the step lands in the finer binade below."""
    acc = Accumulator("e8m13", "toward_zero")
    a = sign * np.array([[1.0, -(2.0**-60)], [2.0, -(2.0**-70)], [1.5, 2.0**-60]])
    b = np.array([[1.0], [1.0]])
    used, fast, slow = _both(a, b, acc, monkeypatch)
    assert used
    expected = sign * np.array([[1 - 2.0**-14], [2 - 2.0**-13], [1.5]])
    assert _same(fast, expected) and _same(slow, expected)


def test_exact_cancellation_gives_plus_zero(monkeypatch):
    acc = Accumulator("e8m13", "toward_zero")
    a = np.array([[-3.0, 3.0, -0.0], [0.0, -0.0, 0.0]])
    b = np.array([[1.0, -1.0], [1.0, 1.0], [1.0, 1.0]])
    used, fast, slow = _both(a, b, acc, monkeypatch)
    assert used and _same(fast, slow)
    assert not np.signbit(fast).any()


def _truncate(v: Fraction, p: int, emin: int) -> Fraction:
    """Round toward zero to p significant bits with subnormals below 2**emin (exact)."""
    if v == 0:
        return Fraction(0)
    e = max(math.floor(math.log2(abs(v))), emin)
    while Fraction(2) ** e > abs(v) and e > emin:  # log2 of a Fraction may be off by one
        e -= 1
    while Fraction(2) ** (e + 1) <= abs(v):
        e += 1
    q = Fraction(2) ** (max(e, emin) - (p - 1))
    return math.copysign(1, v) * (abs(v) // q) * q


def test_against_exact_fraction_model(monkeypatch):
    """DeepSeek's accumulator from its definition: each product added exactly and truncated
    to 14 bits, every 128 products the partial sum added to a float32 register (round to
    nearest even: NumPy's float32 addition of float32 values)."""
    rng = np.random.default_rng(3)
    a = _fp8_operand(rng, (3, 300), 0.0123)
    b = _fp8_operand(rng, (300, 4), 0.00731)
    acc = Accumulator("e8m13", "toward_zero", chunk=128, promote="float32")
    used, fast, slow = _both(a, b, acc, monkeypatch)
    assert used and _same(fast, slow)
    for i in range(3):
        for j in range(4):
            register = np.float32(0)
            for start in range(0, 300, 128):
                partial = Fraction(0)
                for k in range(start, min(300, start + 128)):
                    partial = _truncate(partial + Fraction(a[i, k]) * Fraction(b[k, j]), 14, -126)
                register = np.float32(register + np.float32(float(partial)))
            assert float(register) == fast[i, j]


def test_refused_near_overflow_and_below_the_quantum(monkeypatch):
    acc = Accumulator("fp16", "toward_zero")
    big = np.full((2, 3), 200.0)
    used, fast, slow = _both(big, big.T, acc, monkeypatch)   # 3 * 40000 > fp16 max
    assert not used and _same(fast, slow)
    tiny = np.array([[2.0**-20, 3.0 * 2.0**-21]])
    used, fast, slow = _both(tiny, tiny.T, acc, monkeypatch)  # products below 2**-24
    assert not used and _same(fast, slow)
    used, fast, slow = _both(np.array([[np.inf]]), np.array([[1.0]]), acc, monkeypatch)
    assert not used and _same(fast, slow)


def test_other_modes_and_unfused_products_are_not_taken(monkeypatch):
    a = np.ones((2, 3))
    for acc in (Accumulator("e8m13"), Accumulator("e8m13", "toward_zero", fused=False),
                Accumulator("e8m13", "toward_zero", order="pairwise")):
        terms = _ProductTerms(a, a.T, None if acc.fused else acc)
        assert not (acc.order != "pairwise" and _truncating(terms, acc))



def test_bits_bound():
    from floatlab.sequential import _bits

    assert _bits(np.array([1.5, -2.0**-24, 65504.0, np.inf, 0.0])) == 11
    assert _bits(np.array([1.0, 2.0**-30])) == 11       # significant bits, not range
    assert _bits(np.array([65520.0])) == 24             # 12 significant bits
    assert _bits(np.array([1.0 + 2.0**-23])) == 24
    assert _bits(np.array([1.0 + 2.0**-30])) == 53
    assert _bits(np.array([1.0, np.nan])) == 53         # NaN: the bound that always holds
    assert _bits(np.array([1e39])) == 53                # beyond float32's range


_DETERMINISTIC = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd")


def _stalling_sums(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    walk = rng.standard_normal(700)  # fp8 / fp4 running sums stall, often on a power of two
    ends = np.concatenate([rng.standard_normal(300), np.zeros(100), [-0.0] * 50,
                           rng.standard_normal(50) * 1e-3])  # stalls to the very end
    spikes = rng.standard_normal(400) * rng.choice([1.0, 1e-6, 1e3], 400)
    spikes[[50, 51, 200]] = [-0.0, np.inf, -np.inf]  # then NaN: a stall to the end
    overflow = np.abs(rng.standard_normal(400)) * 300  # past max: inf, NaN or saturation
    return [walk, ends, spikes, overflow]


@pytest.mark.parametrize("fmt", ["e4m3fn", "e5m2fnuz", "e2m1", "float16", "e3m4", "e8m13"])
@pytest.mark.parametrize("mode", _DETERMINISTIC)
def test_speculative_sums_with_stalls_equal_step_by_step(fmt, mode):
    # the swamping and binade-hopping of low-precision sums, where the speculative blocks are
    # cut and sequential_scalar's stretches run: bit for bit the per-step loop, every partial
    # sum, signed zeros, inf and NaN included
    acc = Accumulator(fmt, mode)
    for x in _stalling_sums(7):
        terms = acc_mod._ArrayTerms(x[:, None])
        with np.errstate(all="ignore"):
            try:
                per_step = acc_mod._sequential(terms, acc, keep=True, fast=False)[:, 0]
            except ValueError as err:  # inf into e2m1 (no inf, no NaN): the same error
                with pytest.raises(ValueError, match="no inf and no NaN") as blocks_err:
                    acc_mod._speculative_column(x, acc)
                assert str(blocks_err.value) == str(err)
                continue
            blocks = acc_mod._speculative_column(x, acc)
        assert np.array_equal(blocks.view(np.uint64), per_step.view(np.uint64)) or (
            np.array_equal(blocks, per_step, equal_nan=True)
            and np.array_equal(np.signbit(blocks), np.signbit(per_step)))
