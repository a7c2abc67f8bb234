"""The scalar Kahan engine of floatlab.sequential (one long compensated sum in Python floats):
equal to the general per-step path (TwoSum, round to odd, floatlab.round per operation) in
every format it claims, on random, cancellation-heavy, tie-making and overflowing / NaN inputs,
and refused where it does not apply. The Fraction model of Kahan's four roundings in
test_accumulate.py checks both paths against the definition."""

from __future__ import annotations

import numpy as np
import pytest

import floatlab
from floatlab import sequential
from floatlab.accumulate import Accumulator, exact_add

FORMATS = ["fp16", "bf16", "e5m2", "float32", "e8m13", "e5m6", "e11m40"]


def _same(x, y) -> bool:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    numbers = ~np.isnan(x)
    return (np.array_equal(x, y, equal_nan=True)
            and np.array_equal(np.signbit(x[numbers]), np.signbit(y[numbers])))


def _check(x, acc, monkeypatch):
    """The scalar engine's sums and running sums (one and two columns) equal the general path's."""
    assert sequential._scalar_kahan_applies(acc)
    runs = [lambda: floatlab.sum(x, acc), lambda: floatlab.cumsum(x, acc),
            lambda: floatlab.cumsum(np.stack([x, -x], axis=1), acc, axis=0)]
    with np.errstate(all="ignore"):
        fast = [run() for run in runs]
        monkeypatch.setattr(sequential, "_SCALAR_KAHAN", False)
        slow = [run() for run in runs]
        monkeypatch.setattr(sequential, "_SCALAR_KAHAN", True)
    for f, s in zip(fast, slow, strict=True):
        assert _same(f, s), (acc, x[:4])


def _inputs(fmt, rng):
    top = floatlab.get_format(fmt).max
    n = 200
    yield rng.standard_normal(n) * 10.0 ** rng.integers(-6, 4)          # random
    yield rng.random(n) * 2.0 ** rng.integers(-40, 5, n)                  # wide exponent spread
    big = np.concatenate([[1.0], rng.random(n) * 2.0**-9, [-1.0]])        # cancellation
    yield np.concatenate([big, -big[::-1]]) * 3.0
    grid = floatlab.round(rng.standard_normal(n), fmt)                   # values in the format:
    half_ulps = floatlab.finfo(fmt).eps / 2 * rng.choice([-1.0, 1.0, 3.0], n)
    yield np.where(rng.random(n) < 0.5, grid, 1.0 + half_ulps)           # ties and near ties
    with np.errstate(over="ignore"):
        yield np.where(rng.random(n) < 0.5, top, -top) * (rng.random(n) + 0.5)  # overflow
    special = rng.standard_normal(n)
    special[[7, 50]] = [np.nan, np.inf]
    special[:4] = [-0.0, -0.0, -1e-300, 1e-300]                          # signed zeros, underflow
    yield special
    yield np.array([-0.0] * 8)


@pytest.mark.parametrize("fmt", FORMATS)
def test_scalar_kahan_equals_general_path(fmt, monkeypatch):
    rng = np.random.default_rng(FORMATS.index(fmt))
    for x in _inputs(fmt, rng):
        _check(x, Accumulator(fmt, compensated=True), monkeypatch)


def test_scalar_kahan_compensates():
    """Kahan in fp16 keeps the 1e-4 terms that a plain fp16 sum drops past 1."""
    x = np.concatenate([[1.0], np.full(1000, 1e-4)])
    plain = float(floatlab.sum(x, Accumulator("fp16")))
    kahan = float(floatlab.sum(x, Accumulator("fp16", compensated=True)))
    assert plain == 1.0 and abs(kahan - 1.1) < 1e-3


@pytest.mark.parametrize("acc", [
    Accumulator("e4m3fn", compensated=True),                 # no inf: overflow differs
    Accumulator("fp16", "toward_zero", compensated=True),    # only nearest even is claimed
    Accumulator("bf16", "stochastic", compensated=True, rng=0),
    Accumulator("float64", compensated=True),                # p = 53: native additions
])
def test_scalar_kahan_refused_outside_its_claim(acc):
    assert not sequential._scalar_kahan_applies(acc)


@pytest.mark.parametrize("fmt", FORMATS)
def test_scalar_adder_equals_exact_add(fmt):
    """One rounding of the exact a + b, including sums whose float64 rounding lands on a tie of
    the format (a midpoint plus a tiny b: round to odd must keep b's side)."""
    rng = np.random.default_rng(FORMATS.index(fmt))
    info = floatlab.finfo(fmt)
    grid = np.asarray(floatlab.round(rng.standard_normal(400), fmt), dtype=float)
    midpoints = grid * (1.0 + info.eps / 2)
    a = np.concatenate([midpoints, grid, rng.standard_normal(400) * 1e3])
    b = np.concatenate([rng.choice([-1.0, 1.0], 400) * 2.0 ** rng.integers(-200, -60, 400),
                        rng.standard_normal(400) * 2.0 ** rng.integers(-30, 0, 400),
                        -a[800:] * (1 + rng.standard_normal(400) * 1e-6)])
    add = sequential._scalar_adder(floatlab.get_format(fmt))
    got = np.array([add(x, y) for x, y in zip(a.tolist(), b.tolist(), strict=True)])
    assert _same(got, exact_add(a, b, fmt))
