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
from floatlab.accumulate import sum as sum_

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


def test_other_formats_keep_the_column_engine():
    for acc in (Accumulator("e8m0"), Accumulator("float64"),
                Accumulator("e11m51", "stochastic", rng=0)):  # (p = 52: _stochastic_52)
        assert sequential_scalar.scalar_steps(acc.fmt, acc.rounding, acc.rng) is None


_STOCHASTIC_FORMATS = ("e4m3fn", "e5m2", "e2m1", "bf16", "e4m3fnuz", "e3m2", "fp16")


def _clone(rng: np.random.Generator) -> np.random.Generator:
    bits = type(rng.bit_generator)()
    bits.state = rng.bit_generator.state
    return np.random.Generator(bits)


def _per_step(x: np.ndarray, total: float, acc, rng) -> np.ndarray:
    """x added to total one acc._add at a time (the per-step path), drawing from rng."""
    out, t = np.empty(x.size), np.array([total])
    for k in range(x.size):
        t = acc_mod._add(t, x[k : k + 1], acc.fmt, "stochastic", rng, acc.random_bits)
        out[k] = t[0]
    return out


@pytest.mark.parametrize("random_bits", [None, 4])
@pytest.mark.parametrize("fmt", _STOCHASTIC_FORMATS)
def test_stochastic_stretch_equals_the_per_step_path(fmt, random_bits, monkeypatch):
    # one stretch for the whole sum: every partial sum and the generator's end state are the
    # per-step path's (ties, zeros, tiny sums, overflow, NaN / inf terms)
    monkeypatch.setattr(sequential, "_SCALAR_MIN", 1 << 20)
    for seed, x in enumerate(_adversarial(Accumulator(fmt).fmt, 11)):
        acc = Accumulator(fmt, "stochastic", rng=seed, random_bits=random_bits)
        ref = Accumulator(fmt, "stochastic", rng=seed, random_bits=random_bits)
        terms = acc_mod._ArrayTerms(x[:, None])
        with np.errstate(all="ignore"):
            try:
                per_step = acc_mod._sequential(terms, ref, keep=True, fast=False)[:, 0]
            except ValueError as err:  # inf / NaN into fp4 / fp6 (neither): an error too
                assert "has no" in str(err)
                with pytest.raises(ValueError, match=f"{acc.fmt.name} has no"):
                    acc_mod._speculative_column(x, acc)
                continue
            got = acc_mod._speculative_column(x, acc)
        assert _same_bits(got, per_step), (fmt, random_bits, seed)
        assert acc.rng.bit_generator.state == ref.rng.bit_generator.state


@pytest.mark.parametrize("random_bits", [None, 4])
@pytest.mark.parametrize("fmt", ["e4m3fn", "e5m2", "e2m1", "bf16"])
def test_every_stochastic_stretch_of_the_engine_equals_its_steps(fmt, random_bits,
                                                                 monkeypatch):
    # short stretches between speculative blocks: each one, from the running sum and the
    # generator state the engine hands it, gives the bits and end state of its steps run
    # one acc._add at a time
    monkeypatch.setattr(sequential, "_SCALAR_MIN", 16)
    acc = Accumulator(fmt, "stochastic", rng=3, random_bits=random_bits)
    real_run, seen = sequential._scalar_run, []

    def checked(steps, x, start, stop, total, out):
        rng = _clone(acc.rng)
        expected = _per_step(x[start:stop], float(total[0]), acc, rng)
        last = real_run(steps, x, start, stop, total, out)
        assert _same_bits(out[start:stop], expected), (start, stop)
        assert acc.rng.bit_generator.state == rng.bit_generator.state
        seen.append(stop - start)
        return last

    monkeypatch.setattr(sequential, "_scalar_run", checked)
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.standard_normal(3000), rng.random(2000) * 0.01 + 0.3,
                        rng.integers(-8, 9, 2000) * 2.0 ** rng.integers(-3, 3, 2000)])
    with np.errstate(all="ignore"):
        acc_mod._speculative_column(x, acc)
    assert len(seen) > 3  # (blocks and stretches alternate)


@pytest.mark.parametrize("bits", [np.random.PCG64, np.random.MT19937, np.random.Philox,
                                  np.random.SFC64])
def test_one_draw_of_n_is_n_draws_of_one(bits):
    # the module's proof: a stretch's rng.random(n) is the per-step path's n draws of one
    many, one = np.random.Generator(bits(7)), np.random.Generator(bits(7))
    got = many.random(1001)
    assert _same_bits(got, np.concatenate([one.random(1) for _ in range(1001)]))
    # the same state: the next raw outputs agree (MT19937's state holds an array)
    assert np.array_equal(many.bit_generator.random_raw(64), one.bit_generator.random_raw(64))


def test_stochastic_sums_change_only_their_draws_not_their_distribution():
    # the mean of many long stochastic e4m3fn sums of zero-mean, scaled terms (stretches
    # throughout) is the exact sum's, within 5 sigma; the nearest-even sum stalls away from it
    x = np.random.default_rng(4).standard_normal(4000) * 0.05 + 0.01
    exact = float(np.sum(x))
    totals = np.array([float(sum_(x, Accumulator("e4m3fn", "stochastic", rng=seed)))
                       for seed in range(100)])
    sigma = totals.std(ddof=1) / np.sqrt(totals.size)
    assert abs(totals.mean() - exact) < 5 * sigma, (totals.mean(), exact, sigma)
    assert abs(float(sum_(x, Accumulator("e4m3fn"))) - exact) > 10 * sigma


def test_input_is_not_mutated_and_strided_columns_work():
    x = np.random.default_rng(1).standard_normal((2000, 3))
    before = x.copy()
    acc = Accumulator("e5m2", "down")
    got = acc_mod._speculative_column(x[:, 1], acc)
    assert np.array_equal(x, before)
    per_step = acc_mod._sequential(acc_mod._ArrayTerms(x[:, 1:2].copy()), acc, keep=True,
                                   fast=False)[:, 0]
    assert _same_bits(got, per_step)
