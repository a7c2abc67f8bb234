"""Property tests for floatlab.round (hypothesis): agreement with the exact reference,
monotonicity, sign symmetry, idempotence, membership in the value set, directed-rounding
brackets, and float32 path == float64 path."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import assume, given
from hypothesis import strategies as st
from oracles import MODES, Layout, all_values, assert_same, reference_round

import floatlab
from floatlab import PRESETS, Format

FORMATS = list(PRESETS.values()) + [
    Format(3, 4),
    Format(5, 2, special="fn"),
    Format(4, 3, subnormals=False),
    Format(3, 2, special="fnuz", bias=4),
    Format(2, 2, special="none"),
    Format(4, 0, special="fn", signed=False, subnormals=False, has_zero=False),
    Format(8, 12),
]
MIRROR = {"up": "down", "down": "up"}  # the others are symmetric
formats = st.sampled_from(FORMATS)
modes = st.sampled_from(MODES)


@st.composite
def values_for(draw, fmt: Format, allow_nonpositive: bool = True):
    """A float64 near the format's range: sign * [1, 2) * 2**e, e from below the smallest
    subnormal to above max; sometimes an exact value, a midpoint or any float at all."""
    kind = draw(st.sampled_from(["scaled", "scaled", "scaled", "any", "grid"]))
    if kind == "any":
        x = draw(st.floats(allow_nan=False, allow_infinity=False))
    else:
        e = draw(st.integers(fmt.emin - fmt.man_bits - 3, fmt.emax + 2))
        if kind == "grid":  # multiples of a quarter ulp: values, midpoints, quarter points
            k = draw(st.integers(4 << fmt.man_bits, (8 << fmt.man_bits) - 1))
            mag = math.ldexp(float(k), e - fmt.man_bits - 2) if e < 1020 else math.inf
        else:
            mag = (
                math.ldexp(draw(st.floats(1.0, 2.0, exclude_max=True)), e) if e < 1020 else math.inf
            )
        x = mag * draw(st.sampled_from([1.0, -1.0]))
    assume(np.isfinite(x))
    if not fmt.signed or not allow_nonpositive:
        x = abs(x)
        assume(x > 0)
    return x


def _round(x, fmt, mode, **kw):
    return floatlab.round(np.asarray(x, dtype=np.float64), fmt, rounding=mode, **kw)


def _saturate(fmt: Format) -> bool:
    """Saturate where overflow would give NaN (FN / FNUZ), so that results stay ordered."""
    return fmt.has_nan and not fmt.has_inf


@given(data=st.data(), fmt=formats, mode=modes, use_float32=st.booleans())
def test_matches_the_exact_reference(data, fmt, mode, use_float32):
    x = data.draw(values_for(fmt))
    if use_float32:
        with np.errstate(over="ignore"):
            x = float(np.float32(x))
        assume(np.isfinite(x) and (x != 0 or fmt.has_zero))
        got = floatlab.round(np.float32(x), fmt, rounding=mode)
    else:
        got = _round(x, fmt, mode)
    expected = reference_round([x], fmt, (mode,))[mode][0]
    assert_same(got, np.float64(expected), np.float64(x), f"{fmt.name} {mode}")


@given(data=st.data(), fmt=formats, mode=modes)
def test_monotonic(data, fmt, mode):
    xs = sorted(data.draw(st.lists(values_for(fmt), min_size=2, max_size=30)))
    out = _round(xs, fmt, mode, saturate=_saturate(fmt))
    assert np.all(out[1:] >= out[:-1]), (xs, out)


@given(data=st.data(), fmt=formats, mode=modes)
def test_sign_symmetry(data, fmt, mode):
    if not fmt.signed:
        return
    x = data.draw(values_for(fmt))
    neg = _round(-x, fmt, mode)
    mirrored = -_round(x, fmt, MIRROR.get(mode, mode))
    if fmt.has_negative_zero:
        assert_same(neg, mirrored, np.float64(-x), f"{fmt.name} {mode}")
    else:  # FNUZ: -0 becomes +0, so compare numerically
        assert (neg == mirrored) or (np.isnan(neg) and np.isnan(mirrored))
        assert not np.signbit(neg) or neg != 0


@given(data=st.data(), fmt=formats, mode=st.sampled_from(MODES + ("stochastic",)))
def test_idempotent(data, fmt, mode):
    x = data.draw(values_for(fmt))
    once = _round(x, fmt, mode, rng=0 if mode == "stochastic" else None)
    for again_mode in MODES + ("stochastic",):
        twice = _round(once, fmt, again_mode, rng=1 if again_mode == "stochastic" else None)
        assert_same(twice, once, once, f"{fmt.name} {mode} then {again_mode}")


@given(
    data=st.data(),
    fmt=st.sampled_from([f for f in FORMATS if Layout.of(f).bits <= 16]),
    mode=st.sampled_from(MODES + ("stochastic",)),
    subnormals=st.booleans(),
)
def test_result_is_in_the_value_set(data, fmt, mode, subnormals):
    xs = np.array(data.draw(st.lists(values_for(fmt), min_size=1, max_size=30)))
    rng = 2 if mode == "stochastic" else None
    out = floatlab.round(xs, fmt, rounding=mode, subnormals=subnormals, rng=rng)
    lay = Layout.of(fmt)
    finite = out[np.isfinite(out)]
    values = all_values(lay, ftz=not (subnormals and fmt.subnormals))
    assert np.all(np.isin(finite, values)), finite[~np.isin(finite, values)]
    assert fmt.has_inf or not np.isinf(out).any()
    assert fmt.has_nan or not np.isnan(out).any()
    if not fmt.has_negative_zero:
        assert not np.any((out == 0) & np.signbit(out))


@given(data=st.data(), fmt=st.sampled_from([f for f in FORMATS if f.subnormals]))
def test_directed_modes_bracket_the_input(data, fmt):
    """down(x) <= x <= up(x), |toward_zero(x)| <= |x|, and nearest is the nearer of the two.

    Only for formats with subnormals: with FTZ, up(tiny) is 0 < x by design (flush after
    rounding), and E8M0 clamps tiny positives up to 2**-127.
    """
    x = data.draw(values_for(fmt))
    assume(abs(x) <= fmt.max)
    up, down = float(_round(x, fmt, "up")), float(_round(x, fmt, "down"))
    tz, ne = float(_round(x, fmt, "toward_zero")), float(_round(x, fmt, "nearest_even"))
    assert down <= x <= up
    assert abs(tz) <= abs(x) and tz in (up, down)
    assert ne in (up, down)
    assert abs(ne - x) <= abs(x - down) and abs(ne - x) <= abs(up - x)
    odd, away = float(_round(x, fmt, "odd")), float(_round(x, fmt, "nearest_away"))
    assert odd in (up, down) and away in (up, down)


@given(data=st.data(), fmt=formats, mode=modes, subnormals=st.booleans())
def test_float32_path_equals_float64_path(data, fmt, mode, subnormals):
    x = data.draw(st.lists(values_for(fmt), min_size=1, max_size=20))
    with np.errstate(over="ignore"):
        x32 = np.array(x, dtype=np.float64).astype(np.float32)
    assume(np.all(np.isfinite(x32)))
    if not fmt.signed or not fmt.has_zero:
        assume(np.all(x32 > 0))
    kw = dict(rounding=mode, subnormals=subnormals, saturate=True)
    assert_same(
        floatlab.round(x32, fmt, **kw),
        floatlab.round(x32.astype(np.float64), fmt, **kw),
        x32,
        f"{fmt.name} {mode} subnormals={subnormals}",
    )
