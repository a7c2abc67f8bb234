"""The scalar Kahan engine (floatlab.kahan_scalar) (one long compensated sum in Python floats):
equal to the general per-step path (TwoSum, round to odd, floatlab.round per operation) in
every format it claims, on random, cancellation-heavy, tie-making and overflowing / NaN inputs,
and refused where it does not apply. The Fraction model of Kahan's four roundings in
test_accumulate.py checks both paths against the definition."""

from __future__ import annotations

import numpy as np
import pytest

import floatlab
from floatlab import kahan_scalar
from floatlab.accumulate import Accumulator, exact_add

FORMATS = ["fp16", "bf16", "e5m2", "float32", "e8m13", "e5m6", "e11m40"]


def _same(x, y) -> bool:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    numbers = ~np.isnan(x)
    return (np.array_equal(x, y, equal_nan=True)
            and np.array_equal(np.signbit(x[numbers]), np.signbit(y[numbers])))


def _check(x, acc, monkeypatch):
    """The scalar engine's sums and running sums (one and two columns) equal the general path's."""
    assert kahan_scalar._scalar_kahan_applies(acc)
    runs = [lambda: floatlab.sum(x, acc), lambda: floatlab.cumsum(x, acc),
            lambda: floatlab.cumsum(np.stack([x, -x], axis=1), acc, axis=0)]
    with np.errstate(all="ignore"):
        fast = [run() for run in runs]
        monkeypatch.setattr(kahan_scalar, "_SCALAR_KAHAN", False)
        slow = [run() for run in runs]
        monkeypatch.setattr(kahan_scalar, "_SCALAR_KAHAN", True)
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


MODES = ["nearest_even", "nearest_away", "toward_zero", "up", "down"]
# every format in round to nearest even; the other modes on a few (the general path is slow)
CASES = [(f, "nearest_even") for f in FORMATS] + [
    (f, m) for f in ("bf16", "e5m2", "e11m40") for m in MODES[1:]]


@pytest.mark.parametrize(("fmt", "mode"), CASES)
def test_scalar_kahan_equals_general_path(fmt, mode, monkeypatch):
    rng = np.random.default_rng(FORMATS.index(fmt))
    for x in _inputs(fmt, rng):
        _check(x, Accumulator(fmt, mode, compensated=True), monkeypatch)


def test_scalar_kahan_compensates():
    """Kahan in fp16 keeps the 1e-4 terms that a plain fp16 sum drops past 1."""
    x = np.concatenate([[1.0], np.full(1000, 1e-4)])
    plain = float(floatlab.sum(x, Accumulator("fp16")))
    kahan = float(floatlab.sum(x, Accumulator("fp16", compensated=True)))
    assert plain == 1.0 and abs(kahan - 1.1) < 1e-3


@pytest.mark.parametrize("acc", [
    Accumulator("e4m3fn", compensated=True),                 # no inf: overflow differs
    Accumulator("fp16", "odd", compensated=True),            # round to odd is not claimed
    Accumulator("bf16", "stochastic", compensated=True, rng=0),
    Accumulator("float64", compensated=True),                # p = 53: native additions
])
def test_scalar_kahan_refused_outside_its_claim(acc):
    assert not kahan_scalar._scalar_kahan_applies(acc)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_scalar_adder_equals_exact_add(fmt, mode):
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
    top = info.max
    # grid points plus a tiny term of either sign (directed modes step off the grid; at powers
    # of two the binade below is twice as fine), overflow and exact cancellation
    powers = np.ldexp(1.0, rng.integers(info.minexp, info.maxexp, 200)) * rng.choice([-1, 1], 200)
    a = np.concatenate([a, powers, grid[:200], [top, -top, top, 1.0, -1.0, np.inf, -np.inf]])
    b = np.concatenate([b, rng.choice([-1.0, 1.0], 200) * 2.0 ** rng.integers(-300, -60, 200),
                        -grid[:200], [top, -top, -top * 2**-30, -1.0, 1.0, 1.0, 1.0]])
    want = exact_add(a, b, fmt, mode)
    for in_format in (False, True):
        add = kahan_scalar._scalar_adder(floatlab.get_format(fmt), mode, in_format)
        if in_format and add.__name__ != "add_in_format":
            continue
        if in_format:  # only values of the format, as Kahan's last three additions see
            a, b = (np.asarray(floatlab.round(v, fmt), dtype=float) for v in (a, b))
            want = exact_add(a, b, fmt, mode)
        with np.errstate(over="ignore", invalid="ignore"):
            got = np.array([add(x, y) for x, y in zip(a.tolist(), b.tolist(), strict=True)])
        assert _same(got, want), (fmt, mode, in_format)
