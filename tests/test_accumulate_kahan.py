"""The scalar Kahan engines (floatlab.kahan_scalar, floatlab.kahan_general: long compensated
sums in Python floats, column by column): equal to the general per-step path (TwoSum, round to
odd, floatlab.round per operation) in every format and mode they claim, on random,
cancellation-heavy, tie-making, subnormal and overflowing / NaN inputs, with the generator's
end state for stochastic rounding, and refused where they do not apply.
The Fraction model of Kahan's four roundings in test_accumulate.py checks both paths against
the definition."""

from __future__ import annotations

import numpy as np
import pytest

import floatlab
from floatlab import kahan_general, kahan_lockstep, kahan_scalar
from floatlab.accumulate import Accumulator, exact_add
from floatlab.eft import odd_sum

FORMATS = ["fp16", "bf16", "e5m2", "float32", "e8m13", "e5m6", "e11m40"]


def _same(x, y) -> bool:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    numbers = ~np.isnan(x)
    return (np.array_equal(x, y, equal_nan=True)
            and np.array_equal(np.signbit(x[numbers]), np.signbit(y[numbers])))


def _check(x, acc, monkeypatch):
    """The scalar engine's sums and running sums (one and two columns) equal the general path's."""
    assert kahan_scalar._kahan_engine(acc, 2) is not None
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
# (and e4m3fn in round to nearest even: NaN where IEEE formats have inf); the directed modes
# run the generated loop (e11m40: where its magic constant would overflow)
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
    Accumulator("bf16", "stochastic", compensated=True, rng=0),  # > 128 columns (below)
    Accumulator("float64", compensated=True),                # p = 53: native additions
    Accumulator("e5m2_nozero", compensated=True),            # no zero
    Accumulator("e8m0", compensated=True),                   # no sign, no zero, p = 1
    Accumulator("e11m40_ftz", compensated=True),             # FTZ at emin -1022: refused
])
def test_no_scalar_engine_outside_its_claim(acc):
    assert kahan_scalar._kahan_engine(acc, 129) is None


def test_pcg64_block_draws_equal_single_draws():
    """The general engine draws its uniform numbers in blocks; the per-step path draws one per
    rounding call. A PCG64 Generator gives the same doubles either way, and ends in the same
    state (each double is one 64-bit output; nothing is buffered between calls)."""
    block, single = np.random.default_rng(5), np.random.default_rng(5)
    drawn = block.random(1000)
    assert np.array_equal(drawn, np.concatenate([single.random(1) for _ in range(1000)]))
    assert block.random() == single.random()


def _columns(x, rng):
    """x as one, two and three columns: x beside -x, beside x with most values scaled below
    2**emin of every format (so that the per-step path's rounding calls see tiny values in
    some columns and not in others), and beside a cancelling column."""
    tiny = np.where(rng.random(x.size) < 0.7, x * 2.0**-140, x)
    with np.errstate(invalid="ignore"):  # (inf - inf)
        cancelling = x[::-1] - x
    return [x[:, None], np.stack([x, -x], axis=1), np.stack([x, tiny, cancelling], axis=1)]


def _check_general(x, acc_args, monkeypatch, rng):
    """The general scalar engine's sums and running sums (one to three columns) equal the
    per-step path's; stochastic rounding with the same seed gives the same values and leaves
    the generator in the same state."""
    for values in _columns(x, rng):
        m = values.shape[1]
        results, generators = [], []
        for engine in (True, False):
            monkeypatch.setattr(kahan_scalar, "_SCALAR_KAHAN", engine)
            acc = Accumulator(*acc_args[:2], compensated=True, **acc_args[2])
            assert (kahan_scalar._kahan_engine(acc, m) is kahan_scalar._general_kahan) == engine
            with np.errstate(all="ignore"):
                results.append([floatlab.sum(values, acc, axis=0),
                                floatlab.cumsum(values, acc, axis=0)])
            generators.append(acc.rng)
        for fast, slow in zip(*results, strict=True):
            assert _same(fast, slow), (acc_args, m, values[:4])
        if acc_args[1] == "stochastic":
            assert generators[0].random() == generators[1].random()


GENERAL_CASES = (
    [("e4m3fn", m, {}) for m in MODES[1:] + ["odd"]]                   # no inf: NaN on overflow
    + [("e4m3fn_ftz", "nearest_even", {})]
    + [("e5m2fnuz", m, {}) for m in ("nearest_even", "up", "odd")]     # no -0
    + [("e5m2_ftz", m, {}) for m in ("down", "nearest_away")]          # flush to zero
    + [("e2m1", "nearest_even", {}), ("e3m2", "up", {})]               # no NaN: saturate
    + [("fp16", "odd", {})]
    + [("e11m40", "odd", {}), ("e11m40", "stochastic", {"rng": 9})]   # M overflows: wide
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
        _check_general(x, args, monkeypatch, rng)


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


def test_stochastic_columns_up_to_128_take_the_engine():
    """Up to three stochastic sums run column by column, 4 to 128 in lockstep (a
    floatlab.round call on m >= 4 values with 1 <= count <= m // 4 of them below 2**emin
    draws m + count numbers: here 5); more keep the per-step path (as fast per value)."""
    acc = Accumulator("bf16", "stochastic", compensated=True, rng=1)
    for m in (1, 2, 3, 4, 8, 9, 128):
        assert kahan_scalar._kahan_engine(acc, m) is kahan_scalar._general_kahan
    assert kahan_scalar._kahan_engine(acc, 129) is None
    generator = np.random.default_rng(0)
    floatlab.round(np.array([1.1, 1.2, 1.3, 2.0**-130]), "bf16", "stochastic", rng=generator)
    assert generator.bit_generator.state == _advanced(np.random.default_rng(0), 5)
    with pytest.raises(ValueError, match="draws per call depend on the values"):
        kahan_general.general_kahan(np.ones((16, 4)), acc.fmt, "stochastic", acc.rng, None, False)


def _advanced(generator, n):
    generator.random(n)
    return generator.bit_generator.state


@pytest.mark.parametrize("mode", MODES + ["odd", "stochastic"])
@pytest.mark.parametrize("fmt", FORMATS + ["e4m3fn", "e5m2fnuz", "e5m2_ftz", "e2m1"])
def test_general_rounder_equals_exact_add(fmt, mode):
    """One rounding of the generated template equals the per-step path's exact_add (TwoSum,
    round to odd, floatlab.round), including sums whose float64 rounding lands on a tie of the
    format (a midpoint plus a tiny b: round to odd must keep b's side), grid points plus a tiny
    term (directed modes step off the grid; at powers of two the binade below is twice as
    fine), subnormals, overflow, exact cancellation and float64's extremes. Stochastic
    rounding: one exact_add per element (one draw each) against the same draws."""
    rng = np.random.default_rng(FORMATS.index(fmt) if fmt in FORMATS else len(fmt))
    info = floatlab.finfo(fmt)
    grid = np.asarray(floatlab.round(rng.standard_normal(400), fmt), dtype=float)
    midpoints = grid * (1.0 + info.eps / 2)
    a = np.concatenate([midpoints, grid, rng.standard_normal(400) * 1e3])
    b = np.concatenate([rng.choice([-1.0, 1.0], 400) * 2.0 ** rng.integers(-200, -60, 400),
                        rng.standard_normal(400) * 2.0 ** rng.integers(-30, 0, 400),
                        -a[800:] * (1 + rng.standard_normal(400) * 1e-6)])
    top = info.max
    powers = np.ldexp(1.0, rng.integers(info.minexp, info.maxexp, 200)) * rng.choice([-1, 1], 200)
    tiny = info.smallest_subnormal * rng.integers(-40, 40, 100) if fmt != "e5m2_ftz" \
        else info.tiny * rng.standard_normal(100)
    big = 1.7e308 * rng.choice([-1.0, 1.0], 4)
    a = np.concatenate([a, powers, grid[:200], tiny, big,
                        [top, -top, top, 1.0, -1.0, 0.0, -0.0, -0.0]])
    b = np.concatenate([b, rng.choice([-1.0, 1.0], 200) * 2.0 ** rng.integers(-300, -60, 200),
                        -grid[:200], tiny[::-1] / 3, [1e300, -3e299, 1.0, -1.0],
                        [top, -top, -top * 2**-30, -1.0, 1.0, -0.0, 0.0, -0.0]])
    if info.max > 1e300 or mode == "nearest_even":  # inf, where the format has it
        a, b = np.append(a, [np.inf, -np.inf]), np.append(b, [1.0, 1.0])
    fmt_object = floatlab.get_format(fmt)
    if not (fmt_object.has_inf or fmt_object.has_nan):
        keep = np.isfinite(a)
        a, b = a[keep], b[keep]
    add = kahan_general._general_rounder(fmt_object, mode)
    with np.errstate(over="ignore", invalid="ignore"):
        if mode == "stochastic":
            draws = np.random.default_rng(3).random(a.size)
            generator = np.random.default_rng(3)
            want = np.array([exact_add(x, y, fmt, mode, rng=generator)
                             for x, y in zip(a.tolist(), b.tolist(), strict=True)])
        else:
            draws = np.zeros(a.size)
            want = exact_add(a, b, fmt, mode)
        got = np.array([add(x, y, u) for x, y, u in
                        zip(a.tolist(), b.tolist(), draws.tolist(), strict=True)])
    assert _same(got, want), (fmt, mode)


class _FixedDraw(np.random.Generator):
    """A Generator whose draws are all one chosen number, to put the per-step path's uniform
    draw exactly where the general engine's TwoSum shortcut is decided."""

    def __init__(self, u):
        super().__init__(np.random.PCG64(0))
        self.u = u

    def random(self, size=None, dtype=np.float64, out=None):
        return np.full(size, self.u)


@pytest.mark.parametrize("random_bits", [None, 3])
@pytest.mark.parametrize("fmt", ["bf16", "e4m3fn", "fp16", "e5m2_ftz", "e5m2fnuz", "e11m40"])
def test_stochastic_rounder_at_its_windows(fmt, random_bits):
    """Stochastic rounding skips TwoSum unless the draw lies within 2**(p - 52) of the fraction
    f of the float64 sum s (or beyond 1 - 2**(p - 52)), where round to odd's one-ulp nudge of
    s can change the result: sums whose nudge is real (s with an even last bit, a tiny
    inexact term) and draws on, next to and across f, f's nudged value, 0 and 1: off the
    grid, on it, at powers of two (nudged into the finer binade below), at max (overflow),
    among subnormals; both signs. Each against one per-step exact_add with that draw."""
    info, fmt_object = floatlab.finfo(fmt), floatlab.get_format(fmt)
    q1 = 2.0 ** (1 - fmt_object.p)  # the quantum of [1, 2)
    cases = [(1.0 + 3 * q1 / 8, 2.0**-80), (1.0 + 3 * q1 / 8, -(2.0**-80)),  # off the grid
             (1.0 + 5 * q1, 2.0**-80), (1.0 + 5 * q1, -(2.0**-80)),          # on the grid
             (1.0, -(2.0**-80)), (2.0, -(2.0**-80)), (1.0, 2.0**-80),       # powers of two
             (info.max, 2.0**-60 * info.max), (info.max, -(2.0**-60) * info.max),
             (3 * info.smallest_subnormal, 2.0**-1060), (info.tiny * 1.5, -(2.0**-1060))]
    cases += [(-a, -b) for a, b in cases]
    add = kahan_general._general_rounder(fmt_object, "stochastic", random_bits)
    ulp = 2.0**-53
    for a, b in cases:
        s = a + b
        q = 2.0 ** (max(np.frexp(abs(s))[1] - 1, fmt_object.emin) - fmt_object.p + 1)
        f = abs(s) % q / q
        nudge = np.spacing(abs(s)) / q
        centres = [f, f + nudge, f - nudge, 0.0, 1.0, 1.0 - nudge]
        if random_bits is not None:  # the threshold w = (floor(u 2**b) + 1) / 2**b near f
            scale = 2.0**random_bits
            centres += [c - 1 / scale for c in centres] + [np.floor(f * scale) / scale]
        draws = sorted({min(max(c + j * ulp, 0.0), 1.0 - ulp) for c in centres
                        for j in (-2, -1, 0, 1, 2)})
        for u in draws:
            with np.errstate(over="ignore", invalid="ignore"):
                want = exact_add(a, b, fmt, "stochastic", rng=_FixedDraw(u),
                                 random_bits=random_bits)
                got = add(a, b, u)
            assert _same(got, want), (fmt, random_bits, a, b, u)


@pytest.fixture(params=["ahead", "row by row"])
def draws_ahead(request, monkeypatch):
    """The lockstep loop as it runs (draws made up to 2**16 at a time), and drawing row by row
    (every refill, extra draw and shifted operation at a block's edge)."""
    if request.param == "row by row":
        monkeypatch.setattr(kahan_lockstep, "_DRAWS_AHEAD", 1)
    kahan_lockstep._lockstep_loop.cache_clear()
    yield
    kahan_lockstep._lockstep_loop.cache_clear()


@pytest.mark.usefixtures("draws_ahead")
@pytest.mark.parametrize("random_bits", [None, 4])
@pytest.mark.parametrize("fmt", ["bf16", "e4m3fn", "e5m2_ftz", "e5m2fnuz", "fp16"])
def test_stochastic_lockstep_equals_per_step_path(fmt, random_bits, monkeypatch):
    """Four or more stochastic Kahan sums run in lockstep (floatlab.kahan_lockstep): equal to
    the per-step path, sums and running sums, with the generator in the same state, on columns
    of which some are mostly below 2**emin, so that the per-step path's calls draw m + count
    numbers (checked: more than 4 m draws per row in all) as well as m."""
    rng = np.random.default_rng(len(fmt))
    scale = floatlab.finfo(fmt).tiny
    for m in (4, 5, 9, 16):
        x = rng.standard_normal((80, m)) * 2.0 ** rng.integers(-12, 3, (80, m)) * scale * 64
        x[:, 1:1 + max(1, m // 8)] *= 2.0**-8      # mostly tiny: 1 <= count <= m // 4 in many calls
        x[rng.random(80) < 0.3, -1] *= 2.0**-8
        x[5, 0], x[9, 2] = np.inf if floatlab.get_format(fmt).has_nan else 1.0, -0.0
        results, states = [], []
        for engine in (True, False):
            monkeypatch.setattr(kahan_scalar, "_SCALAR_KAHAN", engine)
            acc = Accumulator(fmt, "stochastic", compensated=True, rng=11, random_bits=random_bits)
            assert (kahan_scalar._kahan_engine(acc, m) is kahan_scalar._general_kahan) == engine
            with np.errstate(all="ignore"):
                results.append([floatlab.sum(x, acc, axis=0), floatlab.cumsum(x, acc, axis=0)])
            states.append(acc.rng.bit_generator.state)
        for fast, slow in zip(*results, strict=True):
            assert _same(fast, slow), (fmt, m)
        assert states[0] == states[1]
        assert states[0] != _advanced(np.random.default_rng(11), 2 * 4 * m * 80)  # extra draws


def test_tininess_of_the_odd_sum_from_the_float64_sum():
    """The lockstep engine counts the odd sums below 2**emin from s = fl(a + b): the same as
    the odd sum's own tininess, also where s = +-2**emin and round to odd nudges it inward."""
    tmin = floatlab.get_format("bf16").normal_threshold
    a = np.array([tmin, tmin, -tmin, tmin, tmin * 0.75, tmin, 0.0, 3 * tmin, -tmin])
    b = np.array([-(2.0**-180), 2.0**-180, 2.0**-180, 0.0, 2.0**-200, -tmin, -0.0,
                  -2 * tmin - 2.0**-190, 2.0**-200])
    odd = np.abs(odd_sum(a, b))
    want = (odd > 0) & (odd < tmin)
    got = []
    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        s = abs(x + y)
        got.append(0.0 < s <= tmin and (s < tmin or kahan_lockstep._inward(x, y)))
    assert want.tolist() == got and any(got) and not all(got)
