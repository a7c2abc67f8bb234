"""Accumulator, sum, cumsum, dot and matmul against oracles.

* Sequential round-to-nearest sums against ``np.add.accumulate`` on float16, ml_dtypes bfloat16
  and float32 arrays (NumPy adds sequentially there, each step correctly rounded: float16 and
  bfloat16 add in float32 and round once, which is correct for p <= 11), through the fast path,
  the speculative binade-block engine and the plain per-step loop.
* Every other order, chunked promotion, truncation, round-to-odd, Kahan and stochastic rounding
  against a slow exact loop over Fractions (tests/exact_arith.py) on small cases.
* Stochastic accumulation is unbiased: a 5-sigma bound on the mean of many sums, fixed seeds.
"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from exact_arith import neighbours_formula, round_fraction

import floatlab
from floatlab.accumulate import _ArrayTerms, _sequential, _speculative_column, exact_add

NATIVE = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}


def _data(n: int, seed: int, scale_spread: bool = True) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    if scale_spread:
        x *= rng.choice([1.0, 1e-3, 30.0], n)
    return x


@pytest.mark.parametrize("name", sorted(NATIVE))
def test_sequential_sums_match_numpy_add_accumulate(name):
    dtype = NATIVE[name]
    x = _data(5000, 1).astype(dtype)
    x = np.concatenate([x, np.full(3000, 0.01, dtype=dtype)])  # a stall, then growth
    expected = np.add.accumulate(x).astype(np.float64)
    acc = floatlab.Accumulator(name)
    x64 = x.astype(np.float64)
    terms = _ArrayTerms(x64[:, None])
    fast = _sequential(terms, acc, keep=True)[:, 0]
    step_by_step = _sequential(terms, acc, keep=True, fast=False)[:, 0]
    speculative = _speculative_column(x64, acc)
    for got, path in ((fast, "fast"), (step_by_step, "per step"), (speculative, "blocks")):
        np.testing.assert_array_equal(got, expected, err_msg=f"{name} {path}")
    np.testing.assert_array_equal(floatlab.cumsum(x, name), expected)
    assert float(floatlab.sum(x, name)) == expected[-1]


@pytest.mark.parametrize("name", sorted(NATIVE))
def test_sequential_columns_match_numpy(name):
    dtype = NATIVE[name]
    x = _data(3000, 2).reshape(300, 10).astype(dtype)
    expected = np.add.accumulate(x, axis=0).astype(np.float64)
    got = floatlab.cumsum(x.astype(np.float64), floatlab.Accumulator(name), axis=0)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(floatlab.sum(x.T, name, axis=1), expected[-1])


def _reference(values, acc: floatlab.Accumulator) -> Fraction:
    """The slow exact loop: every addition of exact Fractions rounded by formula."""
    fmt, mode = acc.fmt, acc.rounding

    def rnd(q, f=fmt, m=mode):
        return round_fraction(q, f, m)

    def sequential(xs, f=fmt, m=mode):
        total = Fraction(0)
        for x in xs:
            total = rnd(total + x, f, m)
        return total

    xs = [Fraction(float(v)) for v in values]
    if acc.chunk is not None:
        blocks = [sequential(xs[i : i + acc.chunk]) for i in range(0, len(xs), acc.chunk)]
        if acc.promote is None:
            return sequential(blocks)
        return sequential(blocks, acc.promote, "nearest_even")
    if acc.order == "pairwise":
        level = xs if len(xs) > 1 else [rnd(xs[0])]
        while len(level) > 1:
            pairs = [rnd(level[i] + level[i + 1]) for i in range(0, len(level) - 1, 2)]
            level = pairs + ([level[-1]] if len(level) % 2 else [])
        return level[0]
    if acc.compensated:
        total, comp = Fraction(0), Fraction(0)
        for x in xs:
            y = rnd(x - comp)
            t = rnd(total + y)
            comp = rnd(rnd(t - total) - y)
            total = t
        return total
    return sequential(xs)


CASES = [
    dict(fmt="fp16", order="pairwise"),
    dict(fmt="bf16", order="pairwise", rounding="toward_zero"),
    dict(fmt="fp16", order="blocked", chunk=7),
    dict(fmt="e5m6", order="blocked", chunk=16, rounding="up"),
    dict(fmt="fp16", chunk=32, promote="float32"),
    dict(fmt="e8m13", chunk=16, promote="float32", rounding="toward_zero"),
    dict(fmt="e8m13", rounding="toward_zero"),
    dict(fmt="e4m3fn", rounding="odd"),
    dict(fmt="bf16", rounding="nearest_away"),
    dict(fmt="e8m14", rounding="down"),
    dict(fmt="fp16", compensated=True),
    dict(fmt="bf16", compensated=True, rounding="toward_zero"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_orders_promotion_truncation_and_kahan_against_exact_loop(case):
    acc = floatlab.Accumulator(**case)
    rng = np.random.default_rng(5)
    small = "e4m3fn" in case.values()
    for n in (1, 2, 3, 50, 301):
        x = rng.random(n) * (0.5 if small else 4.0) + (0.0 if small else 0.25)
        x = np.where(rng.random(n) < 0.2, -x / 3, x)
        expected = float(_reference(x, acc))
        got = floatlab.sum(x, acc)
        assert float(got) == expected, (case, n, float(got), expected)
        # the same sums as 4 independent columns at once (the vectorised path)
        cols = floatlab.sum(np.stack([x] * 4, axis=1), acc, axis=0)
        assert np.all(cols == expected), (case, n)


def test_matmul_and_dot_against_exact_loop():
    rng = np.random.default_rng(6)
    a = floatlab.round(rng.standard_normal((5, 40)), "e4m3fn")
    b = floatlab.round(rng.standard_normal((40, 3)), "e4m3fn")
    for acc in (floatlab.Accumulator("e8m13", rounding="toward_zero"),
                floatlab.Accumulator("fp16", fused=False),
                floatlab.Accumulator("e8m13", "toward_zero", chunk=8, promote="float32")):
        got = floatlab.matmul(a, b, acc)
        for i in range(5):
            for j in range(3):
                prods = [Fraction(float(p)) for p in a[i] * b[:, j]]
                if not acc.fused:
                    prods = [round_fraction(p, acc.fmt, acc.rounding) for p in prods]
                assert got[i, j] == float(_reference([float(p) for p in prods], acc)), (acc, i)
        assert float(floatlab.dot(a[0], b[:, 0], acc)) == got[0, 0]
    # float32 accumulation of bf16 products (exact in float32) is numpy's float32 sequence
    a16, b16 = floatlab.round(a, "bf16"), floatlab.round(b, "bf16")
    prods = (a16[:, :, None] * b16[None, :, :]).astype(np.float32)
    expected = np.add.accumulate(prods, axis=1)[:, -1, :]
    np.testing.assert_array_equal(floatlab.matmul(a16, b16, "float32"), expected)


@pytest.mark.parametrize("random_bits", [None, 3])
def test_stochastic_accumulation_picks_neighbours_at_every_step(random_bits):
    x = _data(400, 7, scale_spread=False) * 3
    acc = floatlab.Accumulator("bf16", "stochastic", rng=3, random_bits=random_bits)
    fmt = acc.fmt
    for got in (floatlab.cumsum(x, acc), floatlab.cumsum(np.stack([x] * 16, 1), acc, axis=0)[:, 5]):
        previous = Fraction(0)
        for value, step in zip(got.tolist(), x.tolist(), strict=True):
            lo, hi = neighbours_formula(previous + Fraction(step), fmt)
            assert Fraction(value) in (lo, hi)
            previous = Fraction(value)


def test_stochastic_accumulation_is_unbiased():
    # 1000 terms of about 2**-8 into a bf16 sum that reaches ~4: round to nearest stalls
    # (the terms are below half an ulp), stochastic rounding is right on average.
    rng = np.random.default_rng(8)
    x = floatlab.round(rng.random(1000) * 2.0**-7, "bf16")
    exact = float(np.sum(x))
    runs = 2000
    totals = floatlab.sum(np.tile(x[:, None], (1, runs)),
                          floatlab.Accumulator("bf16", "stochastic", rng=9), axis=0)
    single = np.array([float(floatlab.sum(x, floatlab.Accumulator("bf16", "stochastic",
                                                                   rng=seed)))
                       for seed in range(200)])
    nearest = float(floatlab.sum(x, "bf16"))
    assert abs(nearest - exact) > 1.0  # the stall the test is about
    for sample in (totals, single):
        sigma = sample.std(ddof=1) / np.sqrt(sample.size)
        assert abs(sample.mean() - exact) < 5 * sigma, (sample.mean(), exact, sigma)
    # k random bits bias the sum downward (remainders below 2**-k of an ulp never round up)
    biased = floatlab.sum(np.tile(x[:, None], (1, runs)),
                          floatlab.Accumulator("bf16", "stochastic", rng=9, random_bits=2),
                          axis=0)
    assert biased.mean() < exact - 5 * biased.std(ddof=1) / np.sqrt(runs)


def test_floatarray_reductions_use_the_accumulator():
    x = np.full(3000, 1.0)
    fa = floatlab.array(x, "fp16")
    assert float(fa.sum()) == 2048.0 and float(np.sum(fa)) == 2048.0
    assert float(fa.cumsum()[-1]) == 2048.0
    wide = floatlab.array(x, "fp16", accumulator="float32")
    assert float(wide.sum()) == 3000.0 and wide.sum().fmt.name == "float16"
    assert float(fa.mean()) == float(floatlab.round(2048.0 / 3000, "fp16"))
    m = floatlab.array(np.ones((2, 3000)), "fp16")
    prod = m @ floatlab.array(np.ones((3000, 1)), "fp16")
    assert prod.fmt.name == "float16" and prod.values.ravel().tolist() == [2048.0, 2048.0]
    v = floatlab.array([3.0, 4.0], "fp16")
    assert float(np.linalg.norm(v)) == 5.0 and isinstance(np.linalg.norm(v), floatlab.FloatArray)
    assert float(np.add.reduce(fa)) == 2048.0


def test_bad_accumulators_and_inputs():
    with pytest.raises(ValueError, match="chunk=0 must be a positive number of terms"):
        floatlab.Accumulator("fp16", chunk=0)
    with pytest.raises(ValueError, match="promote=float16 is narrower than"):
        floatlab.Accumulator("float32", chunk=4, promote="fp16")
    with pytest.raises(ValueError, match="unknown order 'tree'"):
        floatlab.Accumulator("fp16", order="tree")
    with pytest.raises(ValueError, match="needs chunk"):
        floatlab.Accumulator("fp16", order="blocked")
    with pytest.raises(ValueError, match="promote needs chunk"):
        floatlab.Accumulator("fp16", promote="float32")
    with pytest.raises(ValueError, match="compensated=True is Kahan summation in sequential"):
        floatlab.Accumulator("fp16", order="pairwise", compensated=True)
    with pytest.raises(TypeError, match="chunk must be a positive int"):
        floatlab.Accumulator("fp16", chunk="8")
    with pytest.raises(TypeError, match="compensated must be True or False"):
        floatlab.Accumulator("fp16", compensated="yes")
    with pytest.raises(TypeError, match="must hold real numbers"):
        floatlab.sum(["a", "b"], "fp16")
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        floatlab.sum(np.ones((2, 2)), "fp16", axis=2)
    with pytest.raises(ValueError, match="do not align"):
        floatlab.matmul(np.ones((2, 3)), np.ones((2, 3)), "fp16")
    with pytest.raises(ValueError, match="cumsum runs in sequential order"):
        floatlab.cumsum([1.0], floatlab.Accumulator("fp16", order="pairwise"))
    with pytest.raises(TypeError, match="pass an accumulator"):
        floatlab.sum([1.0, 2.0])
    x = np.array([0.1, 0.2, 0.3])
    before = x.copy()
    floatlab.sum(x, "fp16"), floatlab.cumsum(x, "bf16"), floatlab.matmul(x, x, "fp16")
    np.testing.assert_array_equal(x, before)
    assert floatlab.sum(np.ones((0, 3)), "fp16", axis=0).tolist() == [0.0, 0.0, 0.0]


def test_float16_cast_path_equals_the_emulated_path():
    # products of fp16 / bf16 values (<= 22 bits) through an fp16 accumulator: the per-step
    # float64-sum-then-cast path against floatlab's rounding, with subnormals, big and tiny terms
    rng = np.random.default_rng(12)
    a = floatlab.round(rng.standard_normal((6, 64)) * rng.choice([1.0, 2.0**-8], (6, 64)),
                       "fp16")
    b = rng.standard_normal((64, 40)) * rng.choice([1.0, 2.0**-16, 2.0**8], (64, 40))
    b[:, :10] *= 2.0**-20  # outputs in fp16's subnormal range
    b = floatlab.round(b, "bf16")
    acc = floatlab.Accumulator("fp16")
    terms = floatlab.accumulate._ProductTerms(a, b, None)
    assert terms.bits <= 40  # 11 + 24: bf16 values are float32 values
    fast = _sequential(terms, acc, keep=True)
    emulated = _sequential(terms, acc, keep=True, fast=False)
    np.testing.assert_array_equal(fast, emulated)
    assert np.any(np.abs(emulated) < 2.0**-14) and np.any(np.abs(emulated) > 100)


def test_float16_matmul_loop_equals_the_emulated_path_and_the_lab_uses_it():
    from floatlab.mixed import Tensor, use_precision

    rng = np.random.default_rng(13)
    a = floatlab.round(rng.standard_normal((7, 300)) * rng.choice([1, 2.0**-10], (7, 300)),
                       "fp16")
    b = floatlab.round(rng.standard_normal((300, 5)) * 8, "fp16")
    acc = floatlab.Accumulator("fp16")
    fast = floatlab.matmul(a, b, acc)
    emulated = _sequential(floatlab.accumulate._ProductTerms(a, b, None), acc, keep=False,
                           fast=False).reshape(7, 5)
    np.testing.assert_array_equal(fast, emulated)
    for spec in (acc, "fp16", floatlab.Accumulator("e8m13", "toward_zero", chunk=64,
                                                    promote="float32")):
        with use_precision("16-mixed", accumulate=spec):
            got = (Tensor(a) @ Tensor(b)).data.astype(np.float64)
        expected = floatlab.round(floatlab.matmul(a, b, spec), "fp16")
        np.testing.assert_array_equal(got, expected)


def test_arrays_of_the_adders_own_dtype_are_summed_directly():
    x = _data(2000, 14).astype(ml_dtypes.bfloat16)
    direct = floatlab.sum(x, "bf16")
    emulated = _sequential(_ArrayTerms(x.astype(np.float64)[:, None]), floatlab.Accumulator(
        "bf16"), keep=False, fast=False)[0]
    assert float(direct) == emulated == float(np.add.accumulate(x)[-1])
    m = x.reshape(40, 50)
    np.testing.assert_array_equal(floatlab.sum(m, "bf16", axis=1),
                                  floatlab.sum(m.astype(np.float64), "bf16", axis=1))


@pytest.mark.parametrize("name", sorted(NATIVE))
def test_the_native_fast_path_takes_exactly_the_arrays_its_dtype_holds(name):
    """_cast_keeps (the bit-pattern check before np.add.accumulate) decides as the value
    comparison with NaN equal to NaN: on held values, +-0, a NaN the cast keeps and one whose
    payload it changes, values between two of the dtype's, overflow, float32 and strided
    input; and the fast path then returns what the per-step path does."""
    from floatlab.sequential import _cast_keeps

    dtype = np.dtype(NATIVE[name])
    held = _data(64, 3).astype(dtype).astype(np.float64)
    payload = np.array([0x7FF8000000000001], np.uint64).view(np.float64)  # low payload bits
    cases = {
        "held": held, "signed zeros": np.array([0.0, -0.0, 1.0, -0.0]),
        "nan": np.array([1.0, np.nan, -np.nan, 2.0]),
        "nan payload": np.concatenate([held[:3], payload]),
        "between": np.concatenate([held, [1 + 2.0**-30]]),
        "overflow": np.concatenate([held, [floatlab.finfo(name).max * 4]]),
        "strided": np.repeat(held, 2)[::2], "float32": held.astype(np.float32),
    }
    for label, values in cases.items():
        with np.errstate(over="ignore"):
            typed = values.astype(dtype)
        expected = np.array_equal(typed.astype(np.float64), values, equal_nan=True)
        assert _cast_keeps(typed, values) == expected, (name, label)
    assert _cast_keeps(cases["nan payload"].astype(dtype), cases["nan payload"])
    assert not _cast_keeps(cases["between"].astype(dtype), cases["between"])
    acc = floatlab.Accumulator(name)
    for label in ("held", "signed zeros", "between"):
        terms = _ArrayTerms(cases[label].astype(np.float64)[:, None])
        np.testing.assert_array_equal(_sequential(terms, acc, keep=True),
                                      _sequential(terms, acc, keep=True, fast=False),
                                      err_msg=f"{name} {label}")


@pytest.mark.parametrize("name", [*sorted(NATIVE), "float64"])
def test_the_native_fast_path_starts_at_plus_zero_like_the_per_step_path(name):
    """The running sum starts at +0 (acc = 0; acc += x): a sum of -0 terms is +0 in round to
    nearest, as the per-step path, np.sum and every other format give. np.add.accumulate
    starts at the first term, so the native path gave -0 for [-0.0] and [-0.0, -0.0]."""
    acc = floatlab.Accumulator(name)
    for data in ([-0.0], [-0.0, -0.0], [-0.0, 1.0, -1.0], [-0.0, 0.0]):
        for dtype in (np.float64, NATIVE.get(name, np.float64)):
            x = np.array(data).astype(dtype)
            column = x.astype(np.float64)[:, None]
            slow = _sequential(_ArrayTerms(column), acc, keep=True, fast=False)
            for fast in (_sequential(_ArrayTerms(column), acc, keep=True),
                         floatlab.cumsum(x, acc)[:, None]):
                assert np.array_equal(np.signbit(fast), np.signbit(slow)), (name, data, dtype)
            total = floatlab.sum(x, acc)
            assert not np.signbit(total) and not np.signbit(slow[-1, 0]), (name, data, dtype)
            assert np.signbit(x[0])  # the input is not touched
    summed = floatlab.sum(np.full((3, 2), -0.0), acc, axis=0)
    assert not np.signbit(summed).any()


def test_sums_in_a_52_bit_format_are_rounded_once():
    """e11m51 (p = 52) added natively: float64's sum, one bit too wide, was returned unrounded
    (sum([1, 2**-52]) gave 1 + 2**-52, not a value of the format); its rounding would have
    been a second one. Against the Fraction reference, ties and near-ties included."""
    fmt = floatlab.get_format("e11m51")
    rng = np.random.default_rng(52)
    sig = rng.integers(2**51, 2**52, size=(2, 4000))
    exps = rng.integers(-60, 60, size=(2, 4000))
    exps[1] = exps[0] - rng.integers(0, 56, size=4000)  # overlapping: ties and near-ties
    signs = rng.choice([-1.0, 1.0], size=(2, 4000))
    a, b = (signs * np.ldexp(sig.astype(np.float64), exps - 51))
    got = exact_add(a, b, fmt)
    want = [float(round_fraction(Fraction(x) + Fraction(y), fmt, "nearest_even"))
            for x, y in zip(a, b, strict=True)]
    assert np.array_equal(got, want)
    assert float(floatlab.sum(np.array([1.0, 2.0**-52]), "e11m51")) == 1.0  # a tie: to even
    assert float(floatlab.sum(np.array([1.0, 2.0**-52, 2.0**-100]), "e11m51",
                              )) == 1.0  # (sequential: the tie first)
    assert float(exact_add(1.0, 2.0**-52 + 2.0**-100, fmt)) == 1 + 2.0**-51


def test_52_bit_stochastic_rounding_has_the_exact_probability():
    """Stochastic e11m51 was refused (its probability came from a float64 that keeps one bit
    beyond the format: 1 + 2**-60 never rounded up). From TwoSum's s + e it rounds away from
    zero with the exact probability |x - t| / q: against Fractions, 5 sigma, both signs, a
    binade's edge, subnormals; random_bits truncates it; FloatArray's + uses it too."""
    fmt = floatlab.get_format("e11m51")
    n = 20000
    cases = [(1.0, 2.0**-60), (-1.0, -3 * 2.0**-58), (2.0, -2.0**-60), (1 + 2.0**-51, 2.0**-52),
             (2.0**-1070, 2.0**-1074), (3.0, -1e-17)]
    rng = np.random.default_rng(11)
    for a, b in cases:
        got = exact_add(np.full(n, a), np.full(n, b), fmt, "stochastic", rng=rng)
        exact = Fraction(a) + Fraction(b)
        lo, hi = neighbours_formula(exact, fmt)  # toward zero first
        assert set(got.tolist()) <= {float(lo), float(hi)}, (a, b)
        p = float((exact - lo) / (hi - lo)) if hi != lo else 0.0
        away = int(np.count_nonzero(got == float(hi))) if hi != lo else 0
        assert abs(away - n * p) <= 5 * np.sqrt(n * p * (1 - p)) + 1, (a, b, away, n * p)
    for bits, expected in ((8, 0.0), (9, 2.0**-9)):
        acc = floatlab.Accumulator("e11m51", "stochastic", rng=4, random_bits=bits)
        up = np.count_nonzero(floatlab.sum(np.tile([[1.0], [2.0**-60]], (1, n)), acc, axis=0) > 1)
        assert abs(up - n * expected) <= 5 * np.sqrt(n * expected) + 1, (bits, up)
    x = floatlab.array(np.ones(n), "e11m51", "stochastic", rng=5) + 2.0**-60
    assert abs(np.count_nonzero(x.values > 1) - n * 2.0**-9) <= 5 * np.sqrt(n * 2.0**-9)
    x = _data(300, 12) * 1e-3  # every running sum one of the exact sum's two neighbours
    previous = Fraction(0)
    cum = floatlab.cumsum(x, floatlab.Accumulator("e11m51", "stochastic", rng=6))
    for value, step in zip(cum.tolist(), x.tolist(), strict=True):
        assert Fraction(value) in neighbours_formula(previous + Fraction(step), fmt)
        previous = Fraction(value)


E11M51_CASES = [dict(order="sequential"), dict(order="pairwise"), dict(order="blocked", chunk=5),
                dict(chunk=7, promote="float64"), dict(compensated=True)]


@pytest.mark.parametrize("mode", ["nearest_away", "toward_zero", "up", "down", "odd"])
@pytest.mark.parametrize("case", E11M51_CASES, ids=lambda c: "-".join(map(str, c.values())))
def test_52_bit_accumulators_in_every_deterministic_mode(mode, case):
    """e11m51 accumulators refused every mode but nearest even ("adds natively in float64",
    which it does not: its additions are one TwoSum and one rounding, eft.sum_for_52). Every
    deterministic mode, every order, against the exact Fraction loop: ties and terms far
    below the last bit included; one long column runs the binade-block engine."""
    acc = floatlab.Accumulator("e11m51", mode, **case)
    rng = np.random.default_rng(51)
    for n in (1, 2, 3, 40, 300):
        sig = rng.integers(2**52, 2**53, size=n).astype(np.float64)
        x = np.ldexp(sig, rng.integers(-60, 2, size=n) - 52) * rng.choice([-1.0, 1.0, 1.0], n)
        x[::7] = 2.0**-60  # far below the running sum's last bit
        expected = float(_reference(x, acc))
        assert float(floatlab.sum(x, acc)) == expected, (n, mode)
        cols = floatlab.sum(np.stack([x] * 3, axis=1), acc, axis=0)
        assert np.all(cols == expected), (n, mode)
    if case == E11M51_CASES[0]:  # the products of a matmul (exact in float64) as terms
        a = floatlab.round(rng.standard_normal((3, 30)), "float32")
        b = floatlab.round(rng.standard_normal((30, 2)), "float32")
        got = floatlab.matmul(a, b, acc)
        for i, j in np.ndindex(got.shape):
            assert got[i, j] == float(_reference(a[i] * b[:, j], acc)), (i, j)
