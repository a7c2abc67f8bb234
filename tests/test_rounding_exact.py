"""Every rounding mode, both input paths, against the exact Fraction reference in oracles.py.

A few thousand values per format: every value and midpoint of the 8-bit formats (a sample for
16 bits), midpoints +- one float64 ulp (values that float32 cannot hold, so a float64 -> float32
-> format path would double-round), the overflow and subnormal boundaries, random float64 values
in and around the range, and the specials. gfloat is a second, independent oracle where it is
installed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from oracles import (
    MODES,
    Layout,
    all_values,
    assert_same,
    boundary_inputs,
    decode,
    float32_exact,
    floor_code_by_arithmetic,
    floor_code_by_table,
    max_value,
    midpoints,
    positive_table,
    reference_round,
    smallest_normal,
)

import floatlab
from floatlab import PRESETS, Format

CUSTOM = [
    Format(3, 4),
    Format(5, 2, special="fn"),
    Format(4, 3, subnormals=False),
    Format(3, 2, special="fnuz", bias=4),
    Format(2, 2, special="none"),
    Format(5, 4, bias=3),
    Format(6, 5),
    Format(4, 0, special="fn", signed=False, subnormals=False, has_zero=False),
    Format(8, 12),  # 21 bits: the arithmetic (non-table) reference path, float32 working layout
    Format(10, 20, special="fn"),  # emin -510: float64 working layout only
]
FORMATS = list(PRESETS.values()) + CUSTOM
IDS = [f.name + ("" if f.subnormals else "_nosub") for f in FORMATS]


def exact_inputs(fmt: Format, n_random: int = 1200, seed: int = 0) -> np.ndarray:
    """A few thousand float64 inputs that exercise every decision of the rounding."""
    lay = Layout.of(fmt)
    rng = np.random.default_rng(seed)
    parts = []
    if lay.bits <= 16:
        values = all_values(lay)
        mids = midpoints(values)
        if values.size > 600:  # 16-bit formats: a sample, always with both ends
            pick = np.unique(np.r_[rng.choice(values.size - 1, 600), :8, -8:0])
            values, mids = values[pick], mids[np.minimum(pick, mids.size - 1)]
        parts += [values, mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf)]
    else:  # build values and midpoints arithmetically: k * 2**(e - M), k of M+1 bits
        k = rng.integers(2**fmt.man_bits, 2 ** (fmt.man_bits + 1), 600).astype(np.float64)
        e = rng.integers(fmt.emin, fmt.emax + 1, 600)
        values = np.ldexp(k, e - fmt.man_bits)
        mids = values + np.ldexp(0.5, e - fmt.man_bits)
        parts += [values, mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf)]
    bounds = boundary_inputs(lay)
    lo_exp = fmt.emin - fmt.man_bits - 3
    with np.errstate(over="ignore"):
        rand = np.ldexp(1 + rng.random(n_random), rng.integers(lo_exp, fmt.emax + 3, n_random))
        parts += [bounds, rand, rand.astype(np.float32).astype(np.float64)]
    x = np.concatenate(parts)
    x = x[np.isfinite(x) & (x != 0)]
    if lay.signed:
        x = np.concatenate([x, -x])
    else:
        x = np.abs(x)
    specials = [0.0, np.inf] + ([-0.0, -np.inf] if lay.signed else [])
    if fmt.has_nan:
        specials.append(np.nan)
    if fmt.special == "none":
        specials = [s for s in specials if not np.isinf(s)]  # raise: tested in test_rounding
    if not fmt.has_zero:
        specials = [s for s in specials if s != 0]  # NaN + warning: tested in test_rounding
    return np.concatenate([x, specials])


@pytest.fixture(scope="module", params=FORMATS, ids=IDS)
def case(request):
    """(format, inputs, {mode: exact result}) -- the reference is computed once per format."""
    fmt = request.param
    x = exact_inputs(fmt)
    return fmt, x, reference_round(x, fmt, MODES)


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_float64_input_matches_the_exact_reference(case, mode):
    fmt, x, expected = case
    assert_same(floatlab.round(x, fmt, rounding=mode), expected[mode], x, f"{fmt.name} {mode}")


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_float32_input_matches_the_exact_reference(case, mode):
    fmt, x, expected = case
    keep = float32_exact(x)
    x32 = x[keep].astype(np.float32)
    assert x32.size > 100
    got = floatlab.round(x32, fmt, rounding=mode)
    assert_same(got, expected[mode][keep], x32, f"{fmt.name} {mode} float32")


SATURATE_NAMES = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e8m0fnu",
                  "float4_e2m1fn", "float32")  # fmt: skip


@pytest.mark.parametrize(
    "fmt", [PRESETS[n] for n in SATURATE_NAMES] + CUSTOM[1:3], ids=lambda f: f.name
)
def test_every_mode_with_saturate_matches_the_exact_reference(fmt):
    lay = Layout.of(fmt)
    top = max_value(lay)
    rng = np.random.default_rng(1)
    x = np.concatenate([boundary_inputs(lay), top * (1 + rng.random(300)), [np.inf, 1.0]])
    x = np.concatenate([x, -x]) if lay.signed else x
    expected = reference_round(x, fmt, MODES, saturate=True)
    for mode in MODES:
        got = floatlab.round(x, fmt, rounding=mode, saturate=True)
        assert_same(got, expected[mode], x, f"{fmt.name} {mode} saturate")
        assert np.isfinite(got[np.isfinite(x)]).all()


@pytest.mark.parametrize(
    "name", ["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float32"]
)
def test_every_mode_with_subnormals_off_matches_the_exact_reference(name):
    """FTZ: round with the exponent unbounded below, then flush what is below the smallest
    normal to a signed zero (floatlab's documented convention, x86-style)."""
    fmt = PRESETS[name]
    lay = Layout.of(fmt)
    normal = smallest_normal(lay)
    rng = np.random.default_rng(2)
    x = np.concatenate(
        [
            boundary_inputs(lay),
            normal * rng.random(400),
            normal * (1 - rng.random(100) * 2.0**-fmt.man_bits),
            normal * (1 + rng.random(100)),
        ]
    )
    x = np.concatenate([x, -x])
    expected = reference_round(x, fmt, MODES, subnormals=False)
    for mode in MODES:
        for dtype in (np.float64, np.float32):
            keep = float32_exact(x) if dtype is np.float32 else np.isfinite(x)
            got = floatlab.round(x[keep].astype(dtype), fmt, rounding=mode, subnormals=False)
            assert_same(got, expected[mode][keep], x[keep], f"{name} {mode} FTZ {dtype.__name__}")


@pytest.mark.parametrize("name", ["bfloat16", "tensorfloat32", "float32"])
def test_ftz_float32_subnormal_inputs_agree_with_float64_path(name):
    """A float32 subnormal input must round like the same value given as float64.

    2**-126 - 2**-134 is a float32 subnormal. With subnormals=False it is below bf16's smallest
    normal; rounded with an unbounded exponent it is exactly representable (1.1111111b * 2**-127)
    so it stays below 2**-126 and flushes to 0 -- the float64 path and the exact reference say 0.
    """
    fmt = PRESETS[name]
    q = 2.0 ** -(fmt.man_bits + 127)  # bf16: 2**-134, the ulp in the binade below 2**-126
    x = np.array([2.0**-126 - q, 2.0**-126 - 1.5 * q, 2.0**-126 - q / 2, 2.0**-127 * 1.5])
    x = x[x.astype(np.float32) == x]
    expected = reference_round(x, fmt, MODES, subnormals=False)
    for mode in MODES:
        got64 = floatlab.round(x, fmt, rounding=mode, subnormals=False)
        got32 = floatlab.round(x.astype(np.float32), fmt, rounding=mode, subnormals=False)
        assert_same(got64, expected[mode], x, f"{name} {mode} float64")
        assert_same(got32, expected[mode], x, f"{name} {mode} float32")


@pytest.mark.parametrize(
    "x, fmt, mode, expected",
    [
        (1 + 2**-4 + 2**-30, "e4m3fn", "nearest_even", 1.125),  # not 1.0 (float32 double round)
        (1 + 2**-8 + 2**-40, "bf16", "nearest_even", 1.0078125),
        (1 + 2**-4 + 2**-30, "e4m3fn", "nearest_away", 1.125),
        (1 + 2**-4 - 2**-30, "e4m3fn", "nearest_away", 1.0),  # float32(x) would tie away up
        (1 + 2**-30, "e4m3fn", "odd", 1.125),  # sticky bit far below float32's precision
        (1 + 2**-30, "e4m3fn", "up", 1.125),
        (-(1 + 2**-30), "e4m3fn", "down", -1.125),
        (-(1 + 2**-30), "e4m3fn", "up", -1.0),
        (1 + 2**-52, "bf16", "up", 1.0078125),
        (2**-126 * (1 + 2**-40), "bf16", "up", 2**-126 + 2**-133),
        (448 + 2**-20, "e4m3fn", "up", np.nan),  # up overflows positives: no inf -> NaN
        (-448 - 2**-20, "e4m3fn", "up", -448.0),
        (-448 - 2**-20, "e4m3fn", "down", np.nan),
        (1e300, "e4m3fn", "toward_zero", 448.0),
        (1e300, "e4m3fn", "odd", 448.0),
        (1e300, "fp16", "down", 65504.0),
        (-1e300, "fp16", "down", -np.inf),
        (-1e300, "fp16", "up", -65504.0),
        (1e300, "e8m0", "down", 2.0**127),
        (3.0, "e8m0", "odd", 2.0),  # p = 1: odd is truncation
        (3.0, "e8m0", "nearest_away", 4.0),
        (2.5 * 2**-9, "e4m3fn", "odd", 3 * 2**-9),  # subnormal codes: 2 even -> 3 odd
        (2**-10, "e4m3fn", "odd", 2**-9),  # half the smallest subnormal: odd = smallest
        (2**-10, "e4m3fn", "nearest_away", 2**-9),
        (2**-10, "e4m3fn", "nearest_even", 0.0),
    ],
)
def test_float64_path_examples(x, fmt, mode, expected):
    got = floatlab.round(x, fmt, rounding=mode)
    assert_same(got, np.float64(expected), np.float64(x), f"{fmt} {mode}")
    ref = reference_round([x], floatlab.get_format(fmt), (mode,))[mode][0]
    assert_same(np.float64(ref), np.float64(expected), np.float64(x), "reference")


# --------------------------------------------------------------------------- the oracle itself


@pytest.mark.parametrize(
    "fmt",
    [f for f in FORMATS if Layout.of(f).bits <= 16 and f.has_zero and f.subnormals],
    ids=lambda f: f.name,
)
def test_reference_table_and_arithmetic_neighbours_agree(fmt):
    """The reference finds neighbours by table search (<= 16 bits) or by exponent arithmetic
    (tf32, fp32, fp64): both must agree where both apply."""
    lay = Layout.of(fmt)
    values, codes = positive_table(lay)
    rng = np.random.default_rng(5)
    xs = rng.uniform(values[1], values[-1], 300).tolist() + list(values[1:])
    for a in xs:
        code = floor_code_by_arithmetic(lay, a)
        assert code == floor_code_by_table(lay, a), a
        assert decode(lay, code) <= a < (decode(lay, code + 1) if code < codes[-1] else math.inf)


def test_reference_knows_the_famous_cases():
    """The reference must be able to fail: spot checks of its own answers."""
    e4m3fn, fp16 = PRESETS["float8_e4m3fn"], PRESETS["float16"]
    r = reference_round([464.0, 465.0, 1 + 2**-4 + 2**-30], e4m3fn)
    assert r["nearest_even"][0] == 448 and math.isnan(r["nearest_even"][1])
    assert r["nearest_even"][2] == 1.125 and r["toward_zero"][2] == 1.0
    assert math.isnan(r["up"][0]) and r["down"][1] == 448 and r["toward_zero"][1] == 448
    r = reference_round([65519.99, 65520.0, 2.0**-25, -(2.0**-25)], fp16)
    assert r["nearest_even"].tolist()[:3] == [65504, math.inf, 0]
    assert np.signbit(r["nearest_even"][3])
    assert r["up"][2] == 2.0**-24 and r["down"][3] == -(2.0**-24) and r["odd"][2] == 2.0**-24


# --------------------------------------------------------------------------- gfloat


GFLOAT_FORMATS = {
    "float8_e4m3fn": "format_info_ocp_e4m3",
    "float8_e5m2": "format_info_ocp_e5m2",
    "float6_e2m3fn": "format_info_ocp_e2m3",
    "float6_e3m2fn": "format_info_ocp_e3m2",
    "float4_e2m1fn": "format_info_ocp_e2m1",
    "float16": "format_info_binary16",
    "bfloat16": "format_info_bfloat16",
    "float8_e8m0fnu": "format_info_ocp_e8m0",
}
GFLOAT_MODES = {
    "nearest_even": "TiesToEven",
    "nearest_away": "TiesToAway",
    "toward_zero": "TowardZero",
    "up": "TowardPositive",
    "down": "TowardNegative",
}


@pytest.mark.parametrize("name", sorted(GFLOAT_FORMATS))
def test_directed_and_nearest_modes_match_gfloat(name):
    gfloat = pytest.importorskip("gfloat")
    gformats = pytest.importorskip("gfloat.formats")

    fi = getattr(gformats, GFLOAT_FORMATS[name])
    fmt = PRESETS[name]
    x = exact_inputs(fmt, n_random=600, seed=9)
    x = x[np.isfinite(x)]
    if name == "float8_e8m0fnu":
        x = x[x >= fmt.smallest_normal]  # gfloat does not clamp below 2**-127
    sat = fmt.special == "none"  # fp4 / fp6 always saturate; gfloat raises unless sat=True
    for mode, gmode in GFLOAT_MODES.items():
        theirs = gfloat.round_ndarray(fi, x, getattr(gfloat.RoundMode, gmode), sat=sat)
        ours = floatlab.round(x, fmt, rounding=mode)
        if name == "float8_e8m0fnu" and mode == "nearest_even":
            # Oracle disagreement at exact ties: gfloat rounds 1.5 * 2**k to the even *code*
            # (half the ties go down: 3 -> 2), ml_dtypes/torch/floatlab round ties up (3 -> 4).
            # p = 1 has no mantissa bit to be even; floatlab's documented choice is "up".
            # At the top the tie 1.5 * 2**127 goes up to 2**128 and overflows: NaN (gfloat 2**127).
            ties = np.frexp(x)[0] == 0.75
            below = ties & (x < fmt.max)
            assert np.all(ours[below] == 2 * np.ldexp(1.0, np.frexp(x[below])[1] - 1))
            assert np.all(np.isnan(ours[ties & (x > fmt.max)]))
            x_, ours, theirs = x[~ties], ours[~ties], theirs[~ties]
        else:
            x_ = x
        assert_same(ours, theirs, x_, f"{name} {mode} vs gfloat")
