"""Long sequential sums whose stretches run in Python floats (floatlab.sequential_scalar):
bit for bit the per-step path (every partial sum, signed zeros, ties, overflow, NaN and inf),
and the exact Fraction model of one rounding per addition."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from exact_arith import round_fraction

from floatlab import accumulate as acc_mod
from floatlab import sequential, sequential_scalar
from floatlab.accumulate import Accumulator

_MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd")
_FORMATS = ("e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz", "e3m2", "e2m3", "e2m1", "bf16", "fp16",
            "float32")


def _adversarial(fmt, seed: int) -> list[np.ndarray]:
    """Terms that put running sums on ties and grid points, below 2**emin, on +-0, past max,
    and NaN / inf terms, plus zero-mean walks that cross binades every few terms."""
    rng = np.random.default_rng(seed)
    q = 2.0 ** (fmt.emin - fmt.man_bits)  # the least quantum
    top = fmt.max
    ties = rng.integers(-12, 13, 600) * 0.5 * 2.0 ** rng.integers(0, 6, 600) * rng.choice(
        [q, 1.0, top / 64], 600)  # half-quantum multiples at several scales: ties, exact sums
    tiny = rng.integers(-9, 10, 300) * q * 0.25  # below the least quantum and around it
    zeros = np.array([-0.0, -0.0, 0.0, -0.0, 1.0, -1.0, -0.0, 0.0, q, -q, -0.0, 2 * q, -2 * q])
    walk = rng.standard_normal(1500) * rng.choice([1.0, 1e-3, top / 16], 1500)
    over = np.concatenate([[top, top, -top, -top, -top], rng.standard_normal(50) * top,
                           [top / 2, top / 2 + top / 8, top]])
    special = rng.standard_normal(200)
    special[[20, 60, 61, 150]] = [np.inf, -np.inf, np.inf, np.nan]
    mean = rng.normal(3.0, 1.0, 500) * top / 64  # climbs into the top binade, then overflows
    return [ties, tiny, zeros, walk, over, special, -special, mean,
            np.concatenate([zeros, walk[:300], tiny, ties[:200]])]


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return np.array_equal(a.view(np.uint64), b.view(np.uint64))


@pytest.mark.parametrize("stretch", [16, 1024])
@pytest.mark.parametrize("fmt", _FORMATS)
@pytest.mark.parametrize("mode", _MODES)
def test_scalar_stretches_equal_the_per_step_path(fmt, mode, stretch, monkeypatch):
    # short stretches (16 terms) alternate with speculative blocks many times on these inputs
    monkeypatch.setattr(sequential, "_SCALAR_MIN", stretch)
    acc = Accumulator(fmt, mode)
    assert sequential_scalar.scalar_steps(acc.fmt, mode) is not None
    for x in _adversarial(acc.fmt, 11):
        terms = acc_mod._ArrayTerms(x[:, None])
        with np.errstate(all="ignore"):
            try:
                per_step = acc_mod._sequential(terms, acc, keep=True, fast=False)[:, 0]
            except ValueError as err:  # inf / NaN into fp4 / fp6 (neither): an error too
                assert "has no" in str(err)  # (a block holding both may name NaN, not inf)
                with pytest.raises(ValueError, match=f"{acc.fmt.name} has no"):
                    acc_mod._speculative_column(x, acc)
                continue
            got = acc_mod._speculative_column(x, acc)
        assert _same_bits(got, per_step), (fmt, mode, x[:5])


@pytest.mark.parametrize("fmt", ["e4m3fn", "e5m2fnuz", "e2m1", "e3m2", "bf16"])
@pytest.mark.parametrize("mode", _MODES)
def test_scalar_stretches_equal_the_exact_model(fmt, mode, monkeypatch):
    # every partial sum against one exact rounding of the exact sum (Fractions), while the
    # sums stay within range (the model has no overflow); zeros' signs by the per-step test
    monkeypatch.setattr(sequential, "_SCALAR_MIN", 32)
    acc = Accumulator(fmt, mode)
    rng = np.random.default_rng(5)
    q = 2.0 ** (acc.fmt.emin - acc.fmt.man_bits)
    scale = min(1.0, acc.fmt.max / 64)
    pieces = np.concatenate([rng.integers(-6, 7, 400) * 0.5 * q,
                             rng.standard_normal(400) * scale,
                             rng.integers(-6, 7, 400) * 0.5 * scale])
    # every 16th term cancels the running sum exactly, and any term after a sum beyond max / 4
    # (directed modes drift to overflow; fp4's terms of 3 quanta of 0.5 reach max 6 fast)
    terms, totals, total = [], [], Fraction(0)
    for k, v in enumerate(pieces):
        v = -float(total) if k % 16 == 15 or abs(total) >= acc.fmt.max / 4 else float(v)
        total = round_fraction(total + Fraction(v), acc.fmt, mode)
        terms.append(v)
        totals.append(total)
    got = acc_mod._speculative_column(np.array(terms), acc)
    assert max(abs(t) for t in totals) <= acc.fmt.max  # (the model has no overflow)
    assert [Fraction(float(g)) for g in got] == totals


@pytest.mark.parametrize("fmt", ["e4m3fn", "e2m1", "bf16"])
def test_long_zero_mean_sums_equal_the_column_engine_without_them(fmt, monkeypatch):
    # 1M standard-normal terms took 12-34 s in fp8 before: binades of 8 values cut every
    # speculative block within a few terms. The engine without the scalar stretches (tables
    # of nearby values, checked against the per-step path above) gives the same bits
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(3000), rng.normal(0, 1e-3, 3000),
                        rng.random(3000), -rng.random(3000)])
    for mode in ("nearest_even", "toward_zero", "up"):
        acc = Accumulator(fmt, mode)
        fast = acc_mod._speculative_column(x, acc)
        monkeypatch.setattr(sequential_scalar, "_SCALAR_STEPS", False)
        slow = acc_mod._speculative_column(x, acc)
        monkeypatch.setattr(sequential_scalar, "_SCALAR_STEPS", True)
        assert _same_bits(fast, slow), mode


def test_stochastic_and_other_formats_keep_the_column_engine():
    # stochastic rounding: the blocks draw per block, an order a per-step loop would not keep
    for acc in (Accumulator("e4m3fn", "stochastic", rng=0), Accumulator("e8m0"),
                Accumulator("float64")):
        assert sequential_scalar.scalar_steps(acc.fmt, acc.rounding) is None


def test_input_is_not_mutated_and_strided_columns_work():
    x = np.random.default_rng(1).standard_normal((2000, 3))
    before = x.copy()
    acc = Accumulator("e5m2", "down")
    got = acc_mod._speculative_column(x[:, 1], acc)
    assert np.array_equal(x, before)
    per_step = acc_mod._sequential(acc_mod._ArrayTerms(x[:, 1:2].copy()), acc, keep=True,
                                   fast=False)[:, 0]
    assert _same_bits(got, per_step)
