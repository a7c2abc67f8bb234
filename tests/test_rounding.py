"""Round to nearest even against ml_dtypes / numpy, the edge cases, stochastic rounding, and
bad inputs.

ml_dtypes is an oracle only on float32-exact inputs: its float64 -> narrow cast goes through
float32 first (double rounding), see test_ml_dtypes_float64_path_double_rounds. numpy's own
float64 -> float16 and float64 -> float32 casts round once and are oracles for the float64 path.
Every other mode and the float64 path of the narrow formats: test_rounding_exact.py.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from oracles import (
    ML_PRESETS,
    Layout,
    all_values,
    assert_same,
    boundary_inputs,
    float32_exact,
    midpoints,
    ml_dtype,
    reference_neighbours,
    reference_round,
)

import floatlab
from floatlab import PRESETS, FormatNameError

NO_NAN = ("float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn")
UNSIGNED = ("float8_e8m0fnu",)


def ml_round(x32: np.ndarray, name: str) -> np.ndarray:
    """The ml_dtypes / numpy cast from float32 (a single rounding), as float64."""
    assert x32.dtype == np.float32
    with np.errstate(all="ignore"):
        return x32.astype(ml_dtype(name)).astype(np.float64)


def comparable(x: np.ndarray, name: str) -> np.ndarray:
    """Drop the inputs where floatlab deliberately differs from ml_dtypes (tested separately):
    fp4/fp6 raise on NaN and on inf (ml_dtypes: NaN -> -0, inf -> max); E8M0 warns on 0 and
    negatives (ml_dtypes: silent NaN), and ml_dtypes gets E8M0 wrong for float32 subnormals
    (test_e8m0_float32_subnormals_ml_dtypes_is_wrong)."""
    keep = np.ones(x.shape, dtype=bool)
    if name in NO_NAN:
        keep &= np.isfinite(x)
    if name in UNSIGNED:
        keep &= ~(x <= 0) & ~np.signbit(x)
        keep &= ~((x > 2.0**-127) & (x < 2.0**-126))
    return x[keep]


def sweep_inputs(name: str) -> np.ndarray:
    """Every value, every midpoint, midpoints +- one float32 ulp, boundaries, specials.

    All float32-exact, so ml_dtypes rounds them once.
    """
    lay = Layout.of(PRESETS[name])
    values = all_values(lay)
    mids = midpoints(values)
    exact = np.concatenate([values, mids])
    x32 = exact.astype(np.float32)
    assert np.array_equal(x32, exact), "midpoints of <= 16-bit formats are float32-exact"
    bounds = boundary_inputs(lay)
    bounds = np.concatenate([bounds, -bounds])
    bounds32 = bounds[float32_exact(bounds)].astype(np.float32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype=np.float32)
    x32 = np.concatenate(
        [
            x32,
            np.nextafter(x32, np.float32(np.inf)),
            np.nextafter(x32, np.float32(-np.inf)),
            bounds32,
            specials,
        ]
    )
    return comparable(x32, name)


def random_float32(name: str, n: int, seed: int) -> np.ndarray:
    """Random float32 bit patterns: half anywhere, half in and around the format's range."""
    fmt = PRESETS[name]
    rng = np.random.default_rng(seed)
    anywhere = rng.integers(0, 2**32, n // 2, dtype=np.uint32)
    lo_exp = max(fmt.emin - fmt.man_bits - 3 + 127, 0)
    hi_exp = min(fmt.emax + 3 + 127, 254)
    exp = rng.integers(lo_exp, hi_exp + 1, n - n // 2, dtype=np.uint32)
    man = rng.integers(0, 2**23, n - n // 2, dtype=np.uint32)
    sign = rng.integers(0, 2, n - n // 2, dtype=np.uint32)
    near = (sign << 31) | (exp << 23) | man
    x32 = np.concatenate([anywhere, near]).view(np.float32)
    return comparable(x32[~np.isnan(x32)], name)


# --------------------------------------------------------------------------- RNE vs ml_dtypes


@pytest.mark.parametrize("name", ML_PRESETS)
def test_nearest_even_sweep_matches_ml_dtypes(name):
    x32 = sweep_inputs(name)
    expected = ml_round(x32, name)
    assert_same(floatlab.round(x32, name), expected, x32, f"{name}, float32 input")
    x64 = x32.astype(np.float64)
    assert_same(floatlab.round(x64, name), expected, x64, f"{name}, float64 input")


@pytest.mark.parametrize("name", ML_PRESETS)
def test_nearest_even_million_random_match_ml_dtypes(name):
    x32 = random_float32(name, 1 << 20, seed=sum(map(ord, name)))
    expected = ml_round(x32, name)
    assert_same(floatlab.round(x32, name), expected, x32, f"{name}, float32 input")
    x64 = x32.astype(np.float64)
    assert_same(floatlab.round(x64, name), expected, x64, f"{name}, float64 input")


@pytest.mark.parametrize("name", ML_PRESETS)
def test_midpoints_plus_minus_one_float64_ulp(name):
    """Not float32-exact, so not for ml_dtypes: the expectation is the neighbour itself."""
    lay = Layout.of(PRESETS[name])
    values = all_values(lay)
    if name in UNSIGNED:
        values = values[values > 0]
    lo, hi = values[:-1], values[1:]
    mids = midpoints(values)
    above, below = np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf)
    # Above a midpoint the result is the upper neighbour, below it the lower one -- except where
    # a neighbour is 0 and the format keeps the sign of the input (-0 just below +0's side).
    got_above, got_below = floatlab.round(above, name), floatlab.round(below, name)
    assert np.array_equal(got_above, hi) and np.array_equal(got_below, lo), name
    assert not np.array_equal(above.astype(np.float32), above)  # the point: f32 cannot hold them


def test_float16_float64_path_matches_numpy():
    """numpy's float64 -> float16 cast rounds once (unlike ml_dtypes): a float64-path oracle."""
    rng = np.random.default_rng(16)
    x = np.concatenate(
        [
            np.ldexp(rng.random(200_000) + 1, rng.integers(-30, 18, 200_000)),
            rng.standard_normal(100_000) * 1e-6,
            np.nextafter(midpoints(all_values(Layout.of(PRESETS["float16"]))), np.inf),
            np.nextafter(midpoints(all_values(Layout.of(PRESETS["float16"]))), -np.inf),
        ]
    )
    x[: x.size // 2] *= rng.choice([-1.0, 1.0], x.size // 2)
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16).astype(np.float64)
    assert_same(floatlab.round(x, "fp16"), expected, x, "float16 from float64")


def test_float32_format_matches_numpy_cast():
    rng = np.random.default_rng(32)
    bits = rng.integers(0, 2**64, 500_000, dtype=np.uint64)
    x = bits.view(np.float64)
    x = x[~np.isnan(x)]
    x = np.concatenate([x, np.ldexp(rng.random(200_000) + 1, rng.integers(-160, 130, 200_000))])
    with np.errstate(over="ignore"):
        expected = x.astype(np.float32).astype(np.float64)
    assert_same(floatlab.round(x, "float32"), expected, x, "float32 from float64")
    x32 = expected[np.isfinite(expected)].astype(np.float32)
    assert_same(floatlab.round(x32, "float32"), x32.astype(np.float64), x32, "float32 identity")


def test_float64_format_is_the_identity():
    rng = np.random.default_rng(64)
    x = rng.integers(0, 2**64, 100_000, dtype=np.uint64).view(np.float64)
    assert_same(floatlab.round(x, "float64"), x, x, "float64")


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e3m4"])
def test_ml_dtypes_float64_path_double_rounds(name):
    """Oracle vs oracle: ml_dtypes' float64 -> narrow cast narrows to float32 first.

    On x = midpoint + one float64 ulp, float32(x) is the midpoint, which then ties to even:
    ml_dtypes gives the lower neighbour where the exact answer is the upper one. The exact
    reference (Fraction) and floatlab round once and agree; wherever ml_dtypes disagrees its
    answer equals the float32-first double rounding. ml_dtypes is wrong here, floatlab right.
    """
    lay = Layout.of(PRESETS[name])
    values = all_values(lay)
    x = np.nextafter(midpoints(values), np.inf)
    x = x[np.abs(x) < 1e4][::7]  # a few hundred values are plenty for the Fraction reference
    exact = reference_round(x, PRESETS[name], ("nearest_even",))["nearest_even"]
    assert_same(floatlab.round(x, name), exact, x, name)
    with np.errstate(all="ignore"):
        direct = x.astype(ml_dtype(name)).astype(np.float64)
        via_f32 = x.astype(np.float32).astype(ml_dtype(name)).astype(np.float64)
    differ = direct != exact
    assert np.array_equal(direct[differ], via_f32[differ])


def test_known_double_rounding_cases():
    assert float(floatlab.round(1 + 2**-4 + 2**-30, "e4m3fn")) == 1.125
    assert float(floatlab.round(1 + 2**-8 + 2**-40, "bf16")) == 1.0078125
    assert float(floatlab.round(-(1 + 2**-8 + 2**-40), "bf16")) == -1.0078125


@pytest.mark.parametrize(
    "x, fmt, expected",
    [
        (3.141, "fp16", 3.140625),
        (3.1415, "fp16", 3.140625),
        (3.142, "fp16", 3.142578125),
        (1 / 3, "fp16", 0.333251953125),
        (1 / 3, "fp32", 0.3333333432674407958984375),
        (10**6, "fp16", np.inf),
        (2.0**-24, "fp16", 2.0**-24),
        (1.0 + 2**-11, "fp16", 1.0),  # tie to even
        (1.0 + 3 * 2**-11, "fp16", 1.0 + 2 * 2**-10),  # tie to even (up)
    ],
)
def test_teaching_values(x, fmt, expected):
    assert float(floatlab.round(x, fmt)) == expected


# --------------------------------------------------------------------------- overflow edges


@pytest.mark.parametrize(
    "fmt, x, expected, saturated",
    [
        ("e4m3fn", 464.0, 448.0, 448.0),  # max 1.110b * 2**8 is even: the tie goes down
        ("e4m3fn", 465.0, np.nan, 448.0),
        ("e4m3fn", np.nextafter(464.0, 0), 448.0, 448.0),
        ("e4m3fn", -464.0, -448.0, -448.0),
        ("e4m3fn", -465.0, np.nan, -448.0),
        ("fp16", 65519.99, 65504.0, 65504.0),
        ("fp16", 65520.0, np.inf, 65504.0),  # max 1.111..1b is odd: the tie overflows
        ("fp16", -65520.0, -np.inf, -65504.0),
        ("e5m2", 61440.0, np.inf, 57344.0),
        ("e5m2", 61439.99, 57344.0, 57344.0),
        ("e4m3fnuz", 248.0, np.nan, 240.0),
        ("float8_e4m3", 248.0, np.inf, 240.0),
        ("bf16", 3.4e38, np.inf, PRESETS["bfloat16"].max),
        ("fp32", 1e39, np.inf, PRESETS["float32"].max),
        ("e8m0", 2.0**127 * 1.5, np.nan, 2.0**127),  # E8M0 ties up: 1.5 * 2**127 -> 2**128
        ("e8m0", 2.0**127 * 1.49, 2.0**127, 2.0**127),
    ],
)
def test_overflow_boundaries(fmt, x, expected, saturated):
    assert_same(floatlab.round(x, fmt), np.float64(expected), np.float64(x), fmt)
    assert_same(floatlab.round(x, fmt, saturate=True), saturated, np.float64(x), fmt)


@pytest.mark.parametrize(
    "fmt, pos_inf, neg_inf",
    [
        ("fp16", np.inf, -np.inf),
        ("bf16", np.inf, -np.inf),
        ("e5m2", np.inf, -np.inf),
        ("float8_e4m3", np.inf, -np.inf),
        ("e4m3fn", np.nan, np.nan),  # no inf: NaN (as ml_dtypes)
        ("e4m3fnuz", np.nan, np.nan),
        ("e5m2fnuz", np.nan, np.nan),
    ],
)
def test_inf_input_follows_the_format_convention(fmt, pos_inf, neg_inf):
    got = floatlab.round(np.array([np.inf, -np.inf]), fmt)
    assert_same(got, np.array([pos_inf, neg_inf]), np.array([np.inf, -np.inf]), fmt)
    top = floatlab.get_format(fmt).max
    sat = floatlab.round(np.array([np.inf, -np.inf]), fmt, saturate=True)
    if np.isinf(pos_inf):  # inf is a value of the format: saturate only affects overflow
        assert_same(sat, np.array([np.inf, -np.inf]), np.array([np.inf, -np.inf]), fmt)
    else:
        assert_same(sat, np.array([top, -top]), np.array([np.inf, -np.inf]), fmt)


@pytest.mark.parametrize("fmt", ["fp4", "float6_e2m3fn", "float6_e3m2fn"])
def test_formats_without_inf_and_nan_saturate(fmt):
    top = floatlab.get_format(fmt).max
    x = np.array([top * 1.2, -top * 1.2, 1e300, -1e300, top * 1.01])
    assert_same(floatlab.round(x, fmt), np.array([top, -top, top, -top, top]), x, fmt)
    for mode in ("nearest_away", "up", "down", "toward_zero", "odd"):
        assert np.array_equal(np.abs(floatlab.round(x, fmt, rounding=mode)), [top] * 5), mode


def test_fp4_tie_above_max_saturates():
    # 7 lies halfway between max 6 (1.1b * 2**2, odd) and the next power 8: it ties to 8, which
    # overflows, and fp4 can only saturate.
    assert float(floatlab.round(7.0, "fp4")) == 6.0
    assert float(floatlab.round(5.0, "fp4")) == 4.0  # ties to even: 4 (1.0b) not 6 (1.1b)


# --------------------------------------------------------------------------- zero, underflow


@pytest.mark.parametrize(
    "name",
    [
        "float16",
        "bfloat16",
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3",
        "float8_e3m4",
        "float6_e2m3fn",
        "float4_e2m1fn",
    ],
)
def test_negative_zero_is_kept_where_the_format_has_it(name):
    tiny = PRESETS[name].smallest_subnormal
    x = np.array([-0.0, -tiny / 4, -tiny / 2])  # -tiny/2 ties to even: -0
    got = floatlab.round(x, name)
    assert np.all(got == 0) and np.all(np.signbit(got)), (name, got)
    x32 = x.astype(np.float32)
    assert np.all(np.signbit(floatlab.round(x32, name)))


@pytest.mark.parametrize("name", ["float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz"])
def test_fnuz_has_no_negative_zero(name):
    tiny = PRESETS[name].smallest_subnormal
    x = np.array([-0.0, -tiny / 4, -tiny / 2, -1e-300])
    for mode in ("nearest_even", "toward_zero", "up"):  # (away / odd give -tiny here)
        got = floatlab.round(x, name, rounding=mode)
        assert np.all(got == 0) and not np.any(np.signbit(got)), (name, mode, got)
    for dtype in (np.float32, np.float64):
        got = floatlab.round(x.astype(dtype), name)
        assert not np.any(np.signbit(got))


SUBNORMAL_PRESETS = [
    n for n, f in PRESETS.items() if f.smallest_subnormal is not None and n != "float64"
]


@pytest.mark.parametrize("name", SUBNORMAL_PRESETS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_subnormal_edge(name, dtype):
    fmt = PRESETS[name]
    tiny, normal = fmt.smallest_subnormal, fmt.smallest_normal
    if dtype is np.float32 and tiny < 2.0**-149 * 4:
        pytest.skip("below float32's range")
    half = tiny / 2
    x = np.array([half, np.nextafter(half, 1), np.nextafter(half, 0), 1.5 * tiny, 2.5 * tiny])
    expected = np.array([0.0, tiny, 0.0, 2 * tiny, 2 * tiny])  # ties to even at the bottom
    if dtype is np.float32:
        keep = x.astype(np.float32) == x
        x, expected = x[keep], expected[keep]
    got = floatlab.round(x.astype(dtype), name)
    assert_same(got, expected, x, f"{name} {dtype.__name__}")
    negative = -expected if fmt.has_negative_zero else np.where(expected == 0, 0.0, -expected)
    assert_same(floatlab.round(-x.astype(dtype), name), negative, -x, f"{name} negative")
    # Within half an ulp below the smallest normal: round up to it. The ulp there is `tiny`.
    below = np.array([normal - tiny / 2, normal - tiny / 4, np.nextafter(normal, 0)])
    below = below[below.astype(dtype) == below]
    assert np.all(floatlab.round(below.astype(dtype), name) == normal), name
    assert float(floatlab.round(normal - tiny * 0.75, name)) == normal - tiny  # and not above


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2fnuz"])
def test_subnormals_false_flushes_to_signed_zero(name):
    fmt = PRESETS[name]
    tiny, normal = fmt.smallest_subnormal, fmt.smallest_normal
    x = np.array([tiny, 3 * tiny, normal / 2, -normal / 2, normal, -normal, 2 * normal])
    got = floatlab.round(x, name, subnormals=False)
    signed_zero = -0.0 if fmt.has_negative_zero else 0.0
    assert_same(got, np.array([0, 0, 0, signed_zero, normal, -normal, 2 * normal]), x, name)
    # with subnormals the same inputs survive
    assert np.array_equal(floatlab.round(x, name)[:3], [tiny, 3 * tiny, normal / 2])


def test_format_without_subnormals_flushes():
    fmt = floatlab.Format(4, 3, subnormals=False)
    x = np.array([2.0**-9, 2.0**-7, -(2.0**-7), 2.0**-6, 2.0**-6 * 1.0625])
    assert_same(floatlab.round(x, fmt), np.array([0, 0, -0.0, 2.0**-6, 2.0**-6]), x, fmt.name)


# --------------------------------------------------------------------------- E8M0, NaN inputs


def test_e8m0_ties_go_up():
    x = np.array([3.0, 6.0, 1.5, 0.75, 3 * 2.0**-100, 2.9, 3.1])
    expected = np.array([4.0, 8.0, 2.0, 1.0, 2.0**-98, 2.0, 4.0])
    assert_same(floatlab.round(x, "e8m0"), expected, x, "e8m0")
    # Oracle disagreement: gfloat rounds the tie to the even *code* (3 -> 2, 0x80); ml_dtypes and
    # torch round up (3 -> 4). p = 1 leaves no mantissa bit to be even, so both are defensible;
    # floatlab documents "ties up" and agrees with ml_dtypes.
    assert float(ml_round(np.float32([3.0]), "float8_e8m0fnu")[0]) == 4.0


def test_e8m0_float32_subnormals_ml_dtypes_is_wrong():
    """Oracle disagreement: for float32 subnormal inputs in (2**-127, 2**-126) ml_dtypes 0.6
    gives 2**-126 for every one of them (1.2 * 2**-127 -> 2**-126), although the midpoint of the
    neighbours 2**-127 and 2**-126 is 1.5 * 2**-127. The exact reference and floatlab agree:
    below 1.5 * 2**-127 the answer is 2**-127. ml_dtypes is wrong, floatlab right."""
    fmt = PRESETS["float8_e8m0fnu"]
    x = np.array([1.0000001, 1.2, 1.49, 1.5, 1.51, 1.99], dtype=np.float64) * 2.0**-127
    x32 = x.astype(np.float32)
    exact = reference_round(x32.astype(np.float64), fmt, ("nearest_even",))["nearest_even"]
    assert np.array_equal(exact / 2.0**-127, [1, 1, 1, 2, 2, 2])  # 1.5: ties up
    assert_same(floatlab.round(x32, fmt), exact, x32, "float32 input")
    assert_same(floatlab.round(x32.astype(np.float64), fmt), exact, x32, "float64 input")


def test_e8m0_clamps_tiny_positives_to_its_smallest_value():
    x = np.array([2.0**-128, 2.0**-140, 5e-324, 2.0**-127])
    assert np.all(floatlab.round(x, "e8m0") == 2.0**-127)


@pytest.mark.parametrize("bad", [0.0, -0.0, -1.0, -np.inf, -3e-300])
def test_e8m0_zero_and_negatives_become_nan_with_a_warning(bad):
    x = np.array([1.0, bad, 4.0])
    with pytest.warns(RuntimeWarning) as record:
        got = floatlab.round(x, "e8m0")
    assert np.isnan(got[1]) and got[0] == 1.0 and got[2] == 4.0
    message = str(record[0].message)
    assert "float8_e8m0fnu" in message and "NaN" in message
    assert ("zero" in message) if bad == 0 else ("negative" in message)


def test_e8m0_positive_inputs_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        floatlab.round(np.array([1.0, 2.0**-130, 1e38, np.inf, np.nan]), "e8m0")


@pytest.mark.parametrize("name", NO_NAN)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nan_into_formats_without_nan_raises(name, dtype):
    x = np.array([1.0, np.nan], dtype=dtype)
    with pytest.raises(ValueError) as info:
        floatlab.round(x, name)
    message = str(info.value)
    assert name in message and "no NaN" in message
    assert "nan_to_num" in message  # the fix
    # Oracle disagreement: ml_dtypes silently turns NaN into -0 here (a corrupt value that looks
    # like data); floatlab refuses, as DEVELOPERS.md requires. floatlab is right.


@pytest.mark.parametrize("name", NO_NAN)
def test_inf_into_formats_without_inf_and_nan_needs_saturate(name):
    x = np.array([np.inf, -np.inf])
    with pytest.raises(ValueError) as info:
        floatlab.round(x, name)
    assert "saturate=True" in str(info.value) and name in str(info.value)
    top = PRESETS[name].max
    assert np.array_equal(floatlab.round(x, name, saturate=True), [top, -top])


def test_nan_stays_nan_where_the_format_has_nan():
    for name in PRESETS:
        if PRESETS[name].has_nan:
            assert np.isnan(floatlab.round(np.nan, name)), name
            assert np.isnan(floatlab.round(np.float32(np.nan), name)), name


# --------------------------------------------------------------------------- stochastic


STOCHASTIC_FORMATS = ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2fnuz", "float4_e2m1fn"]


def _stochastic_inputs(name: str, n: int = 400) -> np.ndarray:
    fmt = PRESETS[name]
    rng = np.random.default_rng(7)
    mags = np.ldexp(1 + rng.random(n), rng.integers(fmt.emin - fmt.man_bits - 1, fmt.emax, n))
    x = mags * rng.choice([-1.0, 1.0], n)
    x = x[np.abs(x) < fmt.max]
    vals = all_values(Layout.of(fmt))
    return np.concatenate([x, midpoints(vals[np.abs(vals) < fmt.max])[::5]])


@pytest.mark.parametrize("name", STOCHASTIC_FORMATS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_stochastic_results_are_always_a_neighbour(name, dtype):
    x = _stochastic_inputs(name).astype(dtype).astype(np.float64)
    lo, hi, _ = reference_neighbours(x, PRESETS[name])
    draws = floatlab.round(np.tile(x.astype(dtype), (64, 1)), name, "stochastic", rng=1)
    assert np.all((draws == lo) | (draws == hi))
    # both neighbours actually occur for inputs halfway between them
    mid = np.abs(x - (lo + hi) / 2) == 0
    if mid.any():
        assert np.any(draws[:, mid] == lo[mid]) and np.any(draws[:, mid] == hi[mid])


@pytest.mark.parametrize("name", STOCHASTIC_FORMATS + ["float8_e8m0fnu"])
def test_stochastic_is_unbiased(name):
    """E[round(x)] == x: the mean of N draws is within 6 sigma of x, sigma from the binomial."""
    fmt = PRESETS[name]
    rng = np.random.default_rng(3)
    n_values, draws = 60, 20_000
    lo_exp = fmt.emin - (fmt.man_bits if fmt.smallest_subnormal else 0)
    x = np.ldexp(1 + rng.random(n_values), rng.integers(lo_exp, fmt.emax, n_values))
    if fmt.signed:
        x *= rng.choice([-1.0, 1.0], n_values)
    lo, hi, p = reference_neighbours(x, fmt)
    out = floatlab.round(np.broadcast_to(x, (draws, n_values)), fmt, "stochastic", rng=11)
    mean = out.mean(axis=0)
    sigma = np.abs(hi - lo) * np.sqrt(p * (1 - p) / draws)
    tolerance = 6 * sigma + 1e-12 * np.abs(x)  # + float64 summation error
    worst = np.max(np.abs(mean - x) / np.maximum(sigma, 1e-300))
    assert np.all(np.abs(mean - x) <= tolerance), f"{worst:.1f} sigma"
    assert np.all((out == lo) | (out == hi))


def test_stochastic_exact_values_never_move():
    for name in STOCHASTIC_FORMATS + ["float8_e8m0fnu"]:
        vals = all_values(Layout.of(PRESETS[name]))
        if not PRESETS[name].signed:
            vals = vals[vals > 0]
        out = floatlab.round(np.tile(vals, (20, 1)), name, "stochastic", rng=5)
        assert np.array_equal(out, np.tile(vals, (20, 1))), name


def test_stochastic_is_reproducible_from_a_seed_or_generator():
    x = np.linspace(-3, 3, 10_001)
    a = floatlab.round(x, "e4m3fn", "stochastic", rng=42)
    b = floatlab.round(x, "e4m3fn", "stochastic", rng=42)
    c = floatlab.round(x, "e4m3fn", "stochastic", rng=43)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    g1 = floatlab.round(x, "e4m3fn", "stochastic", rng=np.random.default_rng(42))
    g2 = floatlab.round(x, "e4m3fn", "stochastic", rng=np.random.default_rng(42))
    assert np.array_equal(g1, g2)
    gen = np.random.default_rng(0)  # a generator is advanced, so successive calls differ
    assert not np.array_equal(
        floatlab.round(x, "e4m3fn", "stochastic", rng=gen),
        floatlab.round(x, "e4m3fn", "stochastic", rng=gen),
    )


def test_stochastic_saturates_when_asked():
    out = floatlab.round(np.full(1000, 470.0), "e4m3fn", "stochastic", saturate=True, rng=0)
    assert set(np.unique(out)) == {448.0}


# --------------------------------------------------------------------------- bad inputs


def test_unknown_format_name():
    with pytest.raises(FormatNameError, match="Did you mean.*'float16'"):
        floatlab.round(1.0, "flaot16")


def test_ambiguous_format_name():
    with pytest.raises(FormatNameError) as info:
        floatlab.round(1.0, "e4m3")
    assert "ambiguous" in str(info.value) and "448" in str(info.value) and "240" in str(info.value)


@pytest.mark.parametrize(
    "x, words",
    [
        (np.array([True, False]), ["boolean", "astype"]),
        (True, ["boolean"]),
        (np.array([1 + 2j]), ["complex", "real"]),
        (1j, ["complex"]),
        (np.array(["1.5"]), ["real numbers", "<U3"]),
        ("1.5", ["real numbers"]),
        (np.array([b"1"]), ["real numbers"]),
        (np.array([None, 1.0], dtype=object), ["real numbers", "object"]),
        (np.array([{}, 1.0], dtype=object), ["real numbers"]),
        (np.array(["1.5", 2.0], dtype=object), ["real numbers"]),  # strings hidden in objects
        (np.datetime64("2024-01-01"), ["real numbers"]),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, np.ndarray) else str(v.dtype),
)
def test_wrong_dtypes_raise_type_error_saying_what_to_pass(x, words):
    with pytest.raises(TypeError) as info:
        floatlab.round(x, "fp16")
    for word in words:
        assert word in str(info.value), (word, str(info.value))


@pytest.mark.parametrize(
    "x",
    [
        np.array([2**53 + 1], dtype=np.int64),  # not exact in float64: rounds to 2**53
        2**53 + 1,
        np.array([2**60 + 2**6], dtype=np.int64),
        np.array([-(2**63) + 1], dtype=np.int64),
        np.array([2**63 - 1], dtype=np.int64),  # float64 rounds it to 2**63, beyond int64
        np.array([2**64 - 1], dtype=np.uint64),
        2**70 + 1,  # a Python int beyond int64 (numpy makes an object array)
        [1, 2**53 + 1],
    ],
    ids=["int64 2**53+1", "int 2**53+1", "2**60+2**6", "-2**63+1", "2**63-1", "uint64 max",
         "int 2**70+1", "list"],
)
def test_integers_float64_cannot_hold_raise(x):
    with pytest.raises(ValueError, match=r"holds the integer -?\d+, which float64 cannot hold "
                       r"exactly .*2\*\*53"):
        floatlab.round(x, "fp32")


@pytest.mark.parametrize("x", [10**400, -(2**1024), [1.0, 2**1024], 2**1024 + 1],
                         ids=["10**400", "-2**1024", "list", "2**1024+1"])
@pytest.mark.parametrize("call", [lambda x: floatlab.round(x, "fp32"),
                                  lambda x: floatlab.explain(x, "fp16") if np.ndim(x) == 0
                                  else floatlab.explain(x[1], "fp16"),
                                  lambda x: floatlab.float16_to_bin(x)])
def test_integers_beyond_float64_range_say_so(x, call):
    """They were refused for having more than 53 significant bits (2**1024 has one) and told to
    convert with np.asarray(x, dtype=np.float64), which raises OverflowError for them; the
    message printed all 401 digits of 10**400."""
    with pytest.raises(ValueError, match=r"holds the integer -?[\d.]+.*, which float64 cannot "
                       r"hold exactly: it is beyond float64's range") as caught:
        call(x)
    assert "np.asarray" not in str(caught.value) and len(str(caught.value)) < 300


@pytest.mark.parametrize(
    "x",
    [2**60, -(2**63), 2**64, 2**70, 2**1023, np.array([2**60, -(2**63)], dtype=np.int64),
     np.array([2**63, 2**64 - 2**11], dtype=np.uint64), np.array([2**60, 2**70], dtype=object)],
    ids=["2**60", "-2**63", "2**64", "2**70", "2**1023", "int64", "uint64", "object"],
)
def test_large_integers_float64_holds_exactly_are_accepted(x):
    """Only integers float64 cannot hold are refused: 2**60 is a float64 (issue 8)."""
    expected = np.asarray([float(v) for v in np.asarray(x, dtype=object).reshape(-1)])
    assert np.array_equal(floatlab.round(x, "float64").reshape(-1), expected)
    assert float(floatlab.round(2**60, "fp16")) == np.inf


def test_integers_up_to_2_53_are_exact_inputs():
    x = np.array([2**53, -(2**53), 3, 0, 2**24 + 1], dtype=np.int64)
    assert np.array_equal(floatlab.round(x, "float64"), x.astype(np.float64))
    assert float(floatlab.round(2**24 + 1, "fp32")) == 2.0**24  # tie to even
    assert floatlab.round(np.array([1, 2], dtype=np.int8), "fp16").dtype == np.float64


@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.parametrize("shape", [(0,), (2, 0, 3), (0, 0)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_empty_arrays_keep_their_shape(name, shape, dtype):
    for mode in ("nearest_even", "stochastic"):
        rng = 0 if mode == "stochastic" else None
        out = floatlab.round(np.empty(shape, dtype=dtype), name, mode, rng=rng)
        assert isinstance(out, np.ndarray) and out.shape == shape and out.dtype == np.float64


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_scalars_and_0d_arrays_come_back_0d(name):
    value = 1.0 if name != "float8_e8m0fnu" else 2.0
    inputs = [
        value,
        np.float64(value),
        np.float32(value),
        np.array(value),
        np.array(value, dtype=np.float32),
        int(value),
    ]
    for x in inputs:
        for mode in ("nearest_even", "up", "stochastic"):
            out = floatlab.round(x, name, mode, rng=0 if mode == "stochastic" else None)
            assert isinstance(out, np.ndarray), (name, type(x), mode, type(out))
            assert out.shape == () and out.dtype == np.float64 and float(out) == value


def test_shapes_are_kept():
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 7
    assert floatlab.round(x, "bf16").shape == (2, 3, 4)
    assert floatlab.round(x.T, "bf16").shape == (4, 3, 2)
    assert np.array_equal(floatlab.round(x.T, "bf16"), floatlab.round(x, "bf16").T)
    assert floatlab.round([[1.0, 2.0]], "fp16").shape == (1, 2)


def test_other_float_dtypes_are_accepted_exactly():
    import ml_dtypes

    x16 = np.array([1.5, -0.0, 65504, np.inf], dtype=np.float16)
    assert_same(floatlab.round(x16, "fp16"), x16.astype(np.float64), x16, "float16 in")
    xb = np.array([3.0, 1e38], dtype=ml_dtypes.bfloat16)
    assert_same(floatlab.round(xb, "bf16"), xb.astype(np.float64), xb, "bfloat16 in")
    x8 = np.array([448, -0.5], dtype=ml_dtypes.float8_e4m3fn)
    assert_same(floatlab.round(x8, "fp16"), x8.astype(np.float64), x8, "e4m3fn in")
    xbe = np.array([1 + 2**-11 + 2**-30, 3.0], dtype=">f8")  # byte order must not matter
    assert np.array_equal(floatlab.round(xbe, "fp16"), [1 + 2**-10, 3.0])


@pytest.mark.parametrize("mode", ["round_half_even", "", "banker", "nearest_odd", "sr_fast"])
def test_unknown_rounding_modes_are_refused(mode):
    with pytest.raises(ValueError) as info:
        floatlab.round(1.0, "fp16", rounding=mode)
    message = str(info.value)
    assert "unknown rounding mode" in message and repr(mode) in message
    assert all(m in message for m in floatlab.ROUNDING_MODES)  # lists the valid ones


@pytest.mark.parametrize("alias", ["NEAREST_EVEN ", "nearest-away", "RNE", "toward-zero"])
def test_rounding_mode_spelling_is_forgiving(alias):
    x = np.array([2.5, -2.5, 3.5]) * 2**-10 + 1
    canonical = alias.strip().lower().replace("-", "_").replace("rne", "nearest_even")
    assert np.array_equal(
        floatlab.round(x, "fp16", rounding=alias), floatlab.round(x, "fp16", rounding=canonical)
    )


def test_rounding_mode_must_be_a_string():
    with pytest.raises(TypeError, match="rounding must be one string"):
        floatlab.round(1.0, "fp16", rounding=None)


def test_output_dtype_option():
    out = floatlab.round([1.0, 1 / 3], "fp16", dtype=np.float32)
    assert out.dtype == np.float32 and out[1] == np.float32(0.333251953125)
    with pytest.raises(ValueError, match="float64"):
        floatlab.round([1.0], "float64", dtype=np.float32)
    with pytest.raises(TypeError, match="float64 or float32"):
        floatlab.round([1.0], "fp16", dtype=np.int32)


@pytest.mark.parametrize("mode", floatlab.ROUNDING_MODES)
def test_inputs_are_never_mutated(mode):
    import ml_dtypes

    rng = np.random.default_rng(0)
    base = np.concatenate(
        [rng.standard_normal(300) * 1e3, [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, 5e-324]]
    )
    arrays = [
        base.copy(),
        base.astype(np.float32),
        base.astype(np.float16),
        base.astype(ml_dtypes.bfloat16),
        base.reshape(-1, 1)[::3],  # non-contiguous
        np.asfortranarray(base[:300].reshape(20, 15)),
        base.astype(">f8"),
    ]
    for x in arrays:
        before = x.copy()
        for name in ("bf16", "e4m3fn", "e4m3fnuz", "float32", "float64"):
            floatlab.round(x, name, mode, rng=0 if mode == "stochastic" else None)
        assert x.tobytes() == before.tobytes() and x.dtype == before.dtype, (x.dtype, mode)
    readonly = base.copy()
    readonly.setflags(write=False)
    floatlab.round(readonly, "fp16", mode, rng=0 if mode == "stochastic" else None)  # no write
    lst = [1.0, -0.0, 3.5]
    floatlab.round(lst, "fp16", mode, rng=0 if mode == "stochastic" else None)
    assert lst == [1.0, -0.0, 3.5]
