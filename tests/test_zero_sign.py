"""Signs of zero sums (IEEE 754-2019, 6.3) in FloatArray ``+ -``, ``fma`` and every accumulator.

An exact zero sum of operands of opposite signs (or difference of like signs) is +0 in every
rounding direction but roundTowardNegative ("down"), where it is -0; x + x keeps the sign of x
(-0 + -0 = -0); fma's a*b + c likewise, the product's zero sign being the xor of a's and b's; a
nonzero result that rounds to zero keeps the exact result's sign. Every order of an Accumulator
starts from +0 (acc = 0; acc += x). The references below apply that rule per addition to exact
Fraction values with explicit zero signs, on small sums of all the interesting terms.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from functools import cache

import numpy as np
import pytest
from exact_arith import round_fraction

import floatlab
from floatlab.formats import get_format

MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd")
FORMATS = ("fp16", "bf16", "e4m3fn", "float32")


# --------------------------------------------------------------------------- the reference
# A value is (q, negative): the exact Fraction and its sign bit (which matters when q == 0).

def _value(v: float) -> tuple[Fraction, bool]:
    return Fraction(v), bool(np.signbit(v))


def _float(v: tuple[Fraction, bool]) -> float:
    q, negative = v
    return float(q) if q else (-0.0 if negative else 0.0)


def _neg(v):
    return -v[0], not v[1]


@cache
def _add(x, y, fmt_name: str, mode: str, exact: bool = False):
    """x + y rounded once to the format by IEEE 754's rule (not rounded: ``exact``)."""
    q = x[0] + y[0]
    if q == 0:
        same = x[0] == 0 and y[0] == 0 and x[1] == y[1]
        return Fraction(0), (x[1] if same else mode == "down")
    if exact:
        return q, q < 0
    return round_fraction(q, get_format(fmt_name), mode), q < 0


def _mul(x, y):
    return x[0] * y[0], x[1] != y[1]


ZERO = (Fraction(0), False)


def _sequential(terms, fmt, mode):
    acc, partials = ZERO, []
    for x in terms:
        acc = _add(acc, x, fmt, mode)
        partials.append(acc)
    return acc, partials


def _pairwise(terms, fmt, mode):
    if not terms:
        return ZERO
    if len(terms) == 1:
        return _add(ZERO, terms[0], fmt, mode)
    level = [_add(ZERO, terms[0], fmt, mode, exact=True), *terms[1:]]  # starts from +0
    while len(level) > 1:
        summed = [_add(level[i], level[i + 1], fmt, mode) for i in range(0, len(level) - 1, 2)]
        level = summed + level[-1:] if len(level) % 2 else summed
    return level[0]


def _blocked(terms, fmt, mode, chunk, promote=None):
    sums = [_sequential(terms[i : i + chunk], fmt, mode)[0]
            for i in range(0, len(terms), chunk)]
    outer = (fmt, mode) if promote is None else (promote, "nearest_even")
    return _sequential(sums, *outer)[0]


def _kahan(terms, fmt, mode):
    total = comp = ZERO
    partials = []
    for x in terms:
        y = _add(x, _neg(comp), fmt, mode)
        t = _add(total, y, fmt, mode)
        comp = _add(_add(t, _neg(total), fmt, mode), _neg(y), fmt, mode)
        total = t
        partials.append(total)
    return total, partials


ORDERS = {  # name: (Accumulator keywords, reference total)
    "sequential": ({}, lambda t, f, m: _sequential(t, f, m)[0]),
    "pairwise": ({"order": "pairwise"}, _pairwise),
    "blocked2": ({"order": "blocked", "chunk": 2}, lambda t, f, m: _blocked(t, f, m, 2)),
    "blocked4": ({"order": "blocked", "chunk": 4}, lambda t, f, m: _blocked(t, f, m, 4)),
    "promote": ({"chunk": 2, "promote": "float32"},
                lambda t, f, m: _blocked(t, f, m, 2, "float32")),
    "compensated": ({"compensated": True}, lambda t, f, m: _kahan(t, f, m)[0]),
}


def _terms(fmt_name: str) -> list[float]:
    fmt = get_format(fmt_name)
    tiny = 2.0 ** (fmt.emin - fmt.man_bits - 2)  # a quarter of the smallest subnormal: rounds
    return [0.0, -0.0, 1.0, -1.0, 2.0**-24, -(2.0**-24), 3.0, -3.0, tiny, -tiny]  # to zero


def _sequences(fmt_name: str, seed: int = 0) -> dict[int, list[tuple[float, ...]]]:
    """Sums of lengths 0-6: every one of length <= 3, 150 random ones of each longer length."""
    values = _terms(fmt_name)
    rng = np.random.default_rng(seed)
    out = {n: list(itertools.product(values, repeat=n)) for n in range(4)}
    for n in (4, 5, 6):
        out[n] = [tuple(values[i] for i in rng.integers(0, len(values), n)) for _ in range(150)]
    return out


def _bits(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).view(np.uint64)


def _check(got, expected, what):
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    bad = np.flatnonzero(_bits(got).reshape(-1) != _bits(expected).reshape(-1))
    if bad.size:
        g, e = got.reshape(-1)[bad[0]], expected.reshape(-1)[bad[0]]
        raise AssertionError(f"{what}: {bad.size} differ, first at {bad[0]}: got {g!r}, "
                             f"expected {e!r}")


# --------------------------------------------------------------------------- accumulators

@pytest.mark.parametrize("order", sorted(ORDERS))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_sum_follows_the_zero_sign_rule_per_addition(fmt, mode, order):
    keywords, reference = ORDERS[order]
    acc = floatlab.Accumulator(fmt, mode, **keywords)
    for n, sequences in _sequences(fmt).items():
        expected = [_float(reference(tuple(map(_value, s)), fmt, mode)) for s in sequences]
        columns = np.array(sequences, dtype=np.float64).reshape(len(sequences), n).T
        # many sums side by side (the per-step paths) ...
        _check(floatlab.sum(columns, acc, axis=0), expected, f"{n} terms, side by side")
        # ... and single sums (the speculative, Kahan-engine and native paths)
        for j in range(0, len(sequences), 37):
            _check(floatlab.sum(columns[:, j], acc), expected[j], f"{sequences[j]}")


@pytest.mark.parametrize("compensated", [False, True])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_cumsum_follows_the_zero_sign_rule_per_addition(fmt, mode, compensated):
    acc = floatlab.Accumulator(fmt, mode, compensated=compensated)
    run = _kahan if compensated else _sequential
    for n, sequences in _sequences(fmt, seed=1).items():
        if n == 0:
            continue
        expected = [[_float(v) for v in run(tuple(map(_value, s)), fmt, mode)[1]]
                    for s in sequences]
        columns = np.array(sequences, dtype=np.float64).T
        _check(floatlab.cumsum(columns, acc, axis=0), np.array(expected).T, f"{n} terms")
        for j in range(0, len(sequences), 37):
            _check(floatlab.cumsum(columns[:, j], acc), expected[j], f"{sequences[j]}")


@pytest.mark.parametrize("order", ["sequential", "pairwise", "blocked2", "promote"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_dot_and_matmul_follow_the_zero_sign_rule(fmt, mode, order):
    """Exact products (fused) whose zeros carry the xor of the factors' signs."""
    keywords, reference = ORDERS[order]
    acc = floatlab.Accumulator(fmt, mode, **keywords)
    rng = np.random.default_rng(2)
    factors = np.array([1.0, -1.0, 0.0, -0.0])
    for n, sequences in _sequences(fmt, seed=3).items():
        if n == 0:
            continue
        b = factors[rng.integers(0, 4, n)]
        a = np.array(sequences, dtype=np.float64)
        products = [tuple(_mul(_value(x), _value(y)) for x, y in zip(s, b, strict=True))
                    for s in sequences]
        expected = [_float(reference(p, fmt, mode)) for p in products]
        _check(floatlab.matmul(a, b, acc), expected, f"matmul, {n} terms")
        for j in range(0, len(sequences), 37):
            _check(floatlab.dot(a[j], b, acc), expected[j], f"dot {sequences[j]} . {b}")


@pytest.mark.parametrize("mode", ["nearest_even", "up", "down", "stochastic"])
def test_every_order_starts_from_plus_zero(mode):
    """[-0] and [-0, -0] sum to +0 in every order (as acc = 0; acc += x), -0 in "down" (but
    where a promoted float32 register, which rounds to nearest, adds the block sums)."""
    rng = 0 if mode == "stochastic" else None
    for keywords in (*(k for k, _ in ORDERS.values()), {"order": "blocked", "chunk": 1}):
        acc = floatlab.Accumulator("fp16", mode, rng=rng, **keywords)
        down = mode == "down" and "promote" not in keywords
        for x in ([-0.0], [-0.0, -0.0], [-0.0, -0.0, -0.0]):
            _check(floatlab.sum(np.array(x), acc), -0.0 if down else 0.0, f"{keywords} {x}")
    # the caller's array is not modified by the pairwise order's first leaf
    x = np.array([[-0.0, 1.0], [-0.0, 2.0]])
    floatlab.sum(x, floatlab.Accumulator("fp16", mode, "pairwise", rng=rng), axis=0)
    assert np.signbit(x[0, 0]) and np.signbit(x[1, 0])


def test_exact_add_down():
    from floatlab.accumulate import exact_add

    _check(exact_add([1.0, 0.0, 0.0, -0.0], [-1.0, 0.0, -0.0, -0.0], "bf16", "down"),
           [-0.0, 0.0, -0.0, -0.0], "exact_add")


# --------------------------------------------------------------------------- FloatArray

def _pair_values(fmt_name: str) -> list[float]:
    fmt = get_format(fmt_name)
    sub = 2.0 ** (fmt.emin - fmt.man_bits)  # smallest subnormal
    return [0.0, -0.0, 1.0, -1.0, 3.0, -3.0, sub, -sub, 2.0 * sub, -2.0 * sub]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_float_array_add_subtract_fma_on_all_pairs(fmt, mode):
    values = _pair_values(fmt)
    pairs = list(itertools.product(values, repeat=2))
    xs, ys = (np.array(v) for v in zip(*pairs, strict=True))
    a, b = floatlab.array(xs, fmt, rounding=mode), floatlab.array(ys, fmt, rounding=mode)
    vx, vy = [_value(v) for v in xs], [_value(v) for v in ys]
    plus = [_float(_add(x, y, fmt, mode)) for x, y in zip(vx, vy, strict=True)]
    minus = [_float(_add(x, _neg(y), fmt, mode)) for x, y in zip(vx, vy, strict=True)]
    _check((a + b).values, plus, "a + b")
    _check((a - b).values, minus, "a - b")
    _check(np.add(a, ys).values, plus, "a + plain")
    _check(np.subtract(xs, b).values, minus, "plain - b")
    _check((a + a).values, [_float(_add(x, x, fmt, mode)) for x in vx], "a + a")
    _check((a - a).values, [_float(_add(x, _neg(x), fmt, mode)) for x in vx], "a - a")
    for c in values:  # fma(a, b, c) for every c: all triples
        expected = [_float(_add(_mul(x, y), _value(c), fmt, mode))
                    for x, y in zip(vx, vy, strict=True)]
        _check(floatlab.fma(a, b, c).values, expected, f"fma(a, b, {c})")
        _check(floatlab.fma(a, b, floatlab.array(np.full(xs.shape, c), fmt, mode)).values,
               expected, f"fma(a, b, array {c})")
        _check(floatlab.fma(xs, ys, c, fmt=fmt, rounding=mode), expected, f"plain fma {c}")


@pytest.mark.parametrize("fast", [True, False])
def test_fma_paths_give_the_same_zero_signs(monkeypatch, fast):
    """The exact-product path (e4m3fn), the general one, and the switch that turns them off."""
    from floatlab import fused_multiply_add

    monkeypatch.setattr(fused_multiply_add, "_FAST_FMA", fast)
    for fmt in ("e4m3fn", "fp16"):
        x = floatlab.array([1.0, 1.0, -0.0, 0.0, 2.0], fmt, rounding="down")
        got = floatlab.fma(x, floatlab.array([1.0, -1.0, 0.0, 0.0, 3.0], fmt, "down"),
                           floatlab.array([-1.0, 1.0, 0.0, -0.0, -6.0], fmt, "down"))
        _check(got.values, [-0.0, -0.0, -0.0, -0.0, -0.0], f"{fmt} fast={fast}")


def test_float_array_stochastic_and_float64_zero_sums():
    # stochastic rounding keeps nearest's signs: +0 unless both addends are -0
    x = floatlab.array([1.0, 0.0, -0.0, -0.0], "fp16", "stochastic", rng=0)
    y = floatlab.array([-1.0, -0.0, 0.0, -0.0], "fp16", "stochastic", rng=0)
    _check((x + y).values, [0.0, 0.0, 0.0, -0.0], "stochastic")
    # formats that add natively in float64 follow the rule too
    for fmt in ("float64", "e8m30"):
        x = floatlab.array([1.0, 0.0, -0.0, 0.0], fmt, "down")
        _check((x - x).values, [-0.0, -0.0, -0.0, -0.0], f"{fmt} x - x")
        _check((x + x).values, [2.0, 0.0, -0.0, 0.0], f"{fmt} x + x")


@pytest.mark.parametrize("fmt", ["float64", "e11m51"])
def test_native_adders_refuse_other_modes(fmt):
    """exact_add in a format of p > 51 added natively whatever the mode: 1 + -1 gave +0 and
    1 - 2**-60 gave 1 in "down" (as the Accumulator already refused). float64 still adds
    natively (nearest even only); e11m51's modes are exact from TwoSum's error
    (eft.sum_for_52, accumulate._stochastic_52)."""
    from floatlab.accumulate import exact_add

    native = fmt == "float64"
    for mode in ("down", "up", "toward_zero", "stochastic"):
        if native:
            with pytest.raises(ValueError, match="natively in float64 .*='nearest_even'"):
                exact_add(1.0, -1.0, fmt, mode)
            with pytest.raises(ValueError, match="an Accumulator in .* adds natively"):
                floatlab.Accumulator(fmt, mode)
    _check(exact_add(1.0, -1.0, fmt), 0.0, "nearest_even still adds")
    if not native:
        _check(exact_add(1.0, -1.0, fmt, "down"), -0.0, "down: an exact zero sum is -0")
        assert float(exact_add(1.0, -2.0**-60, fmt, "down")) == 1 - 2.0**-52
