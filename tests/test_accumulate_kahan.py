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


def _inputs(fmt, rng, n=200):
    top = floatlab.get_format(fmt).max
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
    if floatlab.get_format(fmt).has_nan:  # (formats without NaN refuse them: tested below)
        special[[7, 50]] = [np.nan, np.inf]
    special[:4] = [-0.0, -0.0, -1e-300, 1e-300]                          # signed zeros, underflow
    yield special
    yield np.array([-0.0] * 8)


MODES = ["nearest_even", "nearest_away", "toward_zero", "up", "down"]
# every format in round to nearest even; the other modes on a few (the general path is slow)
# (and e4m3fn in round to nearest even: NaN where IEEE formats have inf)
CASES = [(f, "nearest_even") for f in FORMATS + ["e4m3fn"]] + [
    (f, m) for f in ("bf16", "e5m2", "e11m40") for m in MODES[1:]]


@pytest.mark.parametrize(("fmt", "mode"), CASES)
def test_scalar_kahan_equals_general_path(fmt, mode, monkeypatch):
    rng = np.random.default_rng(len(fmt))
    for x in _inputs(fmt, rng):
        _check(x, Accumulator(fmt, mode, compensated=True), monkeypatch)


def test_scalar_kahan_compensates():
    """Kahan in fp16 keeps the 1e-4 terms that a plain fp16 sum drops past 1."""
    x = np.concatenate([[1.0], np.full(1000, 1e-4)])
    plain = float(floatlab.sum(x, Accumulator("fp16")))
    kahan = float(floatlab.sum(x, Accumulator("fp16", compensated=True)))
    assert plain == 1.0 and abs(kahan - 1.1) < 1e-3


@pytest.mark.parametrize("acc", [
    Accumulator("bf16", "stochastic", compensated=True, rng=0),  # needs one column (below)
    Accumulator("float64", compensated=True),                # p = 53: native additions
    Accumulator("e5m2_nozero", compensated=True),            # no zero
    Accumulator("e8m0", compensated=True),                   # no sign, no zero, p = 1
    Accumulator("e11m40_ftz", compensated=True),             # FTZ at emin -1022: refused
])
def test_no_scalar_engine_outside_its_claim(acc):
    assert kahan_scalar._kahan_engine(acc, 2) is None


def test_pcg64_block_draws_equal_single_draws():
    """The general engine draws its uniform numbers in blocks; the per-step path draws one per
    rounding call. A PCG64 Generator gives the same doubles either way, and ends in the same
    state (each double is one 64-bit output; nothing is buffered between calls)."""
    block, single = np.random.default_rng(5), np.random.default_rng(5)
    drawn = block.random(1000)
    assert np.array_equal(drawn, np.concatenate([single.random(1) for _ in range(1000)]))
    assert block.random() == single.random()


def _check_general(x, acc_args, monkeypatch):
    """The general scalar engine's sum and running sums equal the per-step path's; stochastic
    rounding with the same seed gives the same values and leaves the generator in the same
    state."""
    results, generators = [], []
    for engine in (True, False):
        monkeypatch.setattr(kahan_scalar, "_SCALAR_KAHAN", engine)
        acc = Accumulator(*acc_args[:2], compensated=True, **acc_args[2])
        assert (kahan_scalar._kahan_engine(acc, 1) is kahan_scalar._general_kahan) == engine
        with np.errstate(all="ignore"):
            results.append([floatlab.sum(x, acc), floatlab.cumsum(x, acc)])
        generators.append(acc.rng)
    for fast, slow in zip(*results, strict=True):
        assert _same(fast, slow), (acc_args, x[:4])
    if acc_args[1] == "stochastic":
        assert generators[0].random() == generators[1].random()


GENERAL_CASES = (
    [("e4m3fn", m, {}) for m in MODES[1:] + ["odd"]]                   # no inf: NaN on overflow
    + [("e4m3fn_ftz", "nearest_even", {})]
    + [("e5m2fnuz", m, {}) for m in ("nearest_even", "up", "odd")]     # no -0
    + [("e5m2_ftz", m, {}) for m in ("down", "nearest_away")]          # flush to zero
    + [("e2m1", "nearest_even", {}), ("e3m2", "up", {})]               # no NaN: saturate
    + [("fp16", "odd", {})]
    + [(f, "stochastic", {"rng": 7}) for f in
       ("bf16", "e4m3fn", "e5m2fnuz", "e4m3fn_ftz", "e2m1", "fp16")]
    + [(f, "stochastic", {"rng": 8, "random_bits": k}) for f, k in (("bf16", 3), ("e4m3fn", 5))]
)


@pytest.mark.parametrize("args", GENERAL_CASES, ids=str)
def test_general_scalar_kahan_equals_per_step_path(args, monkeypatch):
    """Random data, wide exponent spreads (subnormals), cancellation, ties, overflow, signed
    zeros, NaN and inf: the Python-float engine equals the per-step floatlab.round path."""
    rng = np.random.default_rng(len(args[0]) + len(args[1]))
    for x in _inputs(args[0], rng, n=60):
        _check_general(x, args, monkeypatch)


@pytest.mark.parametrize("mode", ["nearest_even", "stochastic"])
def test_general_scalar_kahan_raises_as_per_step_path(mode, monkeypatch):
    """A format without NaN or inf refuses a NaN / inf term on both paths, with round()'s
    message."""
    x = np.array([1.0, 2.0, np.inf, 3.0])
    for engine in (True, False):
        monkeypatch.setattr(kahan_scalar, "_SCALAR_KAHAN", engine)
        acc = Accumulator("e2m1", mode, compensated=True, rng=0 if mode == "stochastic" else None)
        with pytest.raises(ValueError, match="has no inf and no NaN"):
            floatlab.sum(x, acc)


def test_stochastic_several_columns_take_the_per_step_path():
    """With two sums the per-step path's draws per call depend on both columns' values, so the
    stochastic engine is refused there (and the results still come from floatlab.round)."""
    acc = Accumulator("bf16", "stochastic", compensated=True, rng=1)
    assert kahan_scalar._kahan_engine(acc, 1) is kahan_scalar._general_kahan
    assert kahan_scalar._kahan_engine(acc, 2) is None


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
