"""explain, exact_decimal, nextafter, ulp and values: the seed article's examples, the grid
against decoding every code (and numpy's float16 nextafter), and well-formed HTML."""

from __future__ import annotations

import math
import re
import warnings
import xml.etree.ElementTree as ET
from decimal import Decimal
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from floatlab.codec import decode, encode, to_bin
from floatlab.explain import Explanation, explain
from floatlab.formats import PRESETS, Format, FormatNameError
from floatlab.grid import exact_decimal, nextafter, ulp, values
from floatlab.rounding import round as fl_round

SMALL = [f for f in PRESETS.values() if f.bits <= 16]
CUSTOM = [
    Format(exp_bits=3, man_bits=2, bias=2),                  # e3m2b2
    Format(exp_bits=4, man_bits=3, subnormals=False),        # FTZ
    Format(exp_bits=3, man_bits=1, special="none"),
    Format(exp_bits=5, man_bits=0, special="fn"),            # p = 1 with zero
]
GRID_FORMATS = SMALL + CUSTOM


def ids(fmt: Format) -> str:
    return fmt.name


def step(e: Explanation, label: str) -> str:
    texts = [text for name, text in e.steps if name == label]
    assert texts, f"no {label!r} step in {e.steps}"
    return texts[0]


# ============================================================================ the seed article

@pytest.mark.parametrize(
    "x, code, bits, value",
    [
        (3.141, 0x4248, "0100001001001000", "3.140625"),
        (3.1415, 0x4248, "0100001001001000", "3.140625"),   # 0.0005 apart, same code
        (3.142, 0x4249, "0100001001001001", "3.142578125"),
        (1 / 3, 0x3555, "0011010101010101", "0.333251953125"),
        (65504, 0x7BFF, "0111101111111111", "65504"),
        (2.0**-24, 0x0001, "0000000000000001", "0.000000059604644775390625"),
    ],
)
def test_seed_float16_values(x, code, bits, value):
    e = explain(x, "fp16")
    assert (e.code, e.bits, e.exact) == (code, bits, value)
    assert e.value == float(Fraction(value))


def test_seed_pi_derivation_steps():
    e = explain(3.141, "fp16")
    assert repr(e) == "float16(0x4248) 3.140625"
    assert (e.sign, e.exponent, e.unbiased_exponent, e.mantissa) == (0, 16, 1, 584)
    assert step(e, "window").startswith("2^1 <= |x| < 2^2, so e = 1: x lies in the window [2, 4)")
    assert "(|x| - 2) / 0.001953125 = 584.192..." in step(e, "offset")
    assert "picks bucket 584" in step(e, "rounding")
    assert step(e, "exponent") == "field = e + bias = 1 + 15 = 16 = 10000 (5 bits)"
    assert "1.1001001000 (binary) = 1 + 584/1024 = 1.5703125" in step(e, "mantissa")
    assert step(e, "value") == "(-1)^0 × 2^(16 - 15) × (1 + 584/1024) = 3.140625 exactly"
    assert step(e, "neighbours") == "previous 3.138671875 (0x4247), next 3.142578125 (0x4249)"
    assert step(e, "ulp").startswith("ulp(3.140625) = 2^-9 = 0.001953125")
    assert (e.previous, e.next, e.ulp) == (3.138671875, 3.142578125, 2.0**-9)
    assert e.error == 3.140625 - 3.141 and e.outcome == "rounded" and e.kind == "normal"
    assert abs(e.relative_error) <= 2.0**-11
    assert "3.1410000000000000142108547152020037174224853515625" in step(e, "input")


def test_seed_float32_one_third():
    e = explain(1 / 3, "fp32")
    assert e.exact == "0.3333333432674407958984375"
    assert repr(e) == "float32(0x3eaaaaab) 0.3333333432674407958984375"


def test_seed_overflow_to_inf():
    e = explain(10**6, "fp16")
    assert (e.value, e.code, e.outcome, e.kind) == (math.inf, 0x7C00, "overflow", "inf")
    assert str(e).startswith("float16(1000000) = inf   [overflow; code 0x7c00]")
    text = step(e, "overflow")
    assert "rounds to 999936 with an unbounded exponent, which is above max = 65504" in text
    assert "every |x| >= 65520 = max + ulp(max)/2 overflows" in text
    assert "e = 19: x lies in the window [524288, 1048576), but the largest exponent of " \
        "float16 is emax = 15" in step(e, "window")
    assert repr(e) == "float16(0x7c00) inf"


def test_seed_underflow_to_zero():
    e = explain(1e-8, "fp16")
    assert (e.value, e.code, e.outcome, e.kind) == (0.0, 0, "underflow", "zero")
    assert "below half the smallest subnormal (2^-25" in step(e, "underflow")
    assert "hidden bit is 0" in step(e, "window")


# ============================================================================ special cases

def test_e4m3fn_overflow_is_nan_or_saturates():
    e = explain(465, "e4m3fn")
    assert (math.isnan(e.value), e.code, e.outcome) == (True, 0x7F, "overflow")
    text = step(e, "overflow")
    assert "rounds to 480" in text and "no inf, so the result is NaN" in text
    assert "every |x| > 464" in text and "464 itself ties to the even max" in text
    sat = explain(465, "e4m3fn", saturate=True)
    assert (sat.value, sat.code, sat.outcome) == (448.0, 0x7E, "overflow")
    assert "saturate=True clamps it to +-max = 448" in step(sat, "overflow")
    tie = explain(464, "e4m3fn")
    assert (tie.value, tie.outcome) == (448.0, "rounded")
    assert "a tie" in step(tie, "rounding")
    assert "all-ones exponent holds finite values" in step(tie, "exponent")


@pytest.mark.parametrize(
    "x, fmt, code, kind",
    [
        (math.nan, "fp16", 0x7E00, "nan"),
        (math.nan, "e4m3fn", 0x7F, "nan"),
        (math.nan, "e4m3fnuz", 0x80, "nan"),
        (math.nan, "e8m0", 0xFF, "nan"),
        (math.inf, "fp16", 0x7C00, "inf"),
        (-math.inf, "bf16", 0xFF80, "inf"),
        (math.inf, "e4m3fn", 0x7F, "nan"),     # no inf: NaN, as ml_dtypes
        (math.inf, "e5m2fnuz", 0x80, "nan"),
    ],
)
def test_nan_and_inf_inputs(x, fmt, code, kind):
    e = explain(x, fmt)
    assert (e.code, e.kind) == (code, kind)
    assert e.outcome == ("nan" if math.isnan(x) else "inf")
    assert step(e, "special")


def test_inf_into_fp4_needs_saturate():
    e = explain(math.inf, "fp4", saturate=True)
    assert (e.value, e.code) == (6.0, 0x7)
    with pytest.raises(ValueError, match="saturate=True"):
        explain(math.inf, "fp4")
    with pytest.raises(ValueError, match="has no NaN"):
        explain(math.nan, "fp4")


def test_negative_zero():
    e = explain(-0.0, "fp16")
    assert (e.code, e.exact, e.sign, e.outcome) == (0x8000, "-0", 1, "exact")
    fnuz = explain(-0.0, "e4m3fnuz")
    assert (fnuz.code, fnuz.exact, fnuz.sign) == (0x00, "0", 0)
    assert "has no -0" in step(fnuz, "sign")
    assert explain(-1e-8, "e4m3fnuz").code == 0  # negative underflow: +0, never the NaN 0x80


def test_subnormal_shows_hidden_zero():
    e = explain(1e-6, "fp16")
    assert (e.code, e.kind, e.outcome) == (0x0011, "subnormal", "subnormal")
    assert "0.0000010001 (binary) = 0 + 17/1024" in step(e, "mantissa")
    assert "emin = -14 (not 0 - 15)" in step(e, "exponent")
    assert step(e, "value").startswith("(-1)^0 × 2^-14 × (0 + 17/1024) = ")


def test_flush_to_zero():
    e = explain(1e-6, "fp16", subnormals=False)
    assert (e.value, e.outcome) == (0.0, "underflow")
    assert "FTZ" in step(e, "underflow")
    ftz_format = explain(0.003, Format(exp_bits=4, man_bits=3, subnormals=False))
    assert ftz_format.value == 0.0 and "has no subnormals" in step(ftz_format, "underflow")


def test_e8m0():
    e = explain(3, "e8m0")  # p = 1: the tie goes up, as ml_dtypes and torch
    assert (e.value, e.code, e.bits) == (4.0, 0x81, "10000001")
    assert "no sign bit" in step(e, "sign")
    assert "every value is a power of two" in step(e, "mantissa")
    assert "start of the next window 2^2" in step(e, "rounding")
    tiny = explain(2.0**-130, "e8m0")
    assert (tiny.value, tiny.outcome) == (2.0**-127, "underflow")
    assert "clamped up to 2^-127" in step(tiny, "underflow")
    assert math.isnan(tiny.previous)
    big = explain(1.5 * 2.0**127, "e8m0")
    assert math.isnan(big.value) and big.outcome == "overflow"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the core's RuntimeWarning becomes the explanation
        zero = explain(0, "e8m0")
        negative = explain(-2.0, "e8m0")
    assert (math.isnan(zero.value), zero.outcome) == (True, "invalid")
    assert "has no zero" in step(zero, "zero")
    assert negative.outcome == "invalid" and "negative x cannot be stored" in step(negative, "sign")


def test_directed_modes_and_stochastic():
    up = explain(300, "e5m2", rounding="up")
    assert (up.value, up.rounding) == (320.0, "up")
    trunc = explain(-1e6, "fp16", rounding="rtz")
    assert (trunc.value, trunc.outcome, trunc.rounding) == (-65504.0, "overflow", "toward_zero")
    a = explain(3.141, "fp16", rounding="stochastic", rng=np.random.default_rng(1))
    b = explain(3.141, "fp16", rounding="stochastic", rng=np.random.default_rng(1))
    assert a.value == b.value in (3.140625, 3.142578125)


@pytest.mark.parametrize("fmt", list(PRESETS.values()) + CUSTOM, ids=ids)
def test_explanation_agrees_with_the_core(fmt):
    """For many inputs per format the explained value, code and bits are the core's, and the
    neighbours are nextafter's."""
    probes = [0.1, 1.0, -2.5, 7.0, fmt.max, -fmt.max * 4, fmt.smallest_positive / 3, 1e30, 3.0]
    for x in probes:
        if not fmt.signed and x < 0:
            continue
        e = explain(x, fmt)
        assert e.value == float(fl_round(x, fmt)) or (math.isnan(e.value))
        assert e.code == int(encode(x, fmt))
        assert e.bits == to_bin(x, fmt)
        assert str(e) and repr(e).startswith(f"{fmt.name}(0x")
        if math.isfinite(e.value):
            assert e.previous == float(nextafter(e.value, -math.inf, fmt)) or math.isnan(e.previous)
            assert e.next == float(nextafter(e.value, math.inf, fmt)) or math.isnan(e.next)


MODES = ["nearest_even", "nearest_away", "toward_zero", "up", "down", "odd"]
BUCKET = re.compile(r"picks bucket (-?\d+)")


@pytest.mark.parametrize(
    "fmt", [PRESETS[n] for n in ("float16", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu",
                                 "float4_e2m1fn", "bfloat16")] + CUSTOM, ids=ids)
def test_bucket_narrative_matches_the_stored_code(fmt):
    """The bucket the text says was picked is the mantissa actually stored (or a carry), in
    every mode: the narration's own rounding (a scaled sibling format) agrees with the core."""
    rng = np.random.default_rng(7)
    v = values(fmt)
    xs = np.concatenate([
        rng.uniform(-1, 1, 20) * fmt.max * 1.2,
        np.ldexp(rng.uniform(-2, 2, 20), rng.integers(fmt.emin - fmt.man_bits - 2, 4, 20)),
        rng.choice((v[:-1] + v[1:]) / 2, 20),  # ties
    ])
    for mode in MODES:
        for x in xs:
            if not fmt.signed and x <= 0:
                continue
            e = explain(float(x), fmt, rounding=mode)
            match = BUCKET.search(dict(e.steps).get("rounding", ""))
            if match is None or e.outcome == "overflow":
                continue
            bucket = int(match.group(1))
            if bucket == 2**fmt.man_bits:  # carry into the next window
                assert e.mantissa == 0, (x, mode)
            elif e.value != 0:
                assert e.mantissa == bucket, (x, mode, e.steps)


def test_overflow_is_narrated_exactly_when_the_core_overflows():
    for fmt in ("fp16", "e4m3fn", "e5m2", "e8m0", "e2m1"):
        f = PRESETS[{"fp16": "float16", "e4m3fn": "float8_e4m3fn", "e5m2": "float8_e5m2",
                     "e8m0": "float8_e8m0fnu", "e2m1": "float4_e2m1fn"}[fmt]]
        for x in np.linspace(f.max * 0.98, f.max * 1.3, 41):
            e = explain(float(x), f)
            overflowed = not math.isfinite(e.value) or (
                not f.has_nan and float(x) > f.max + float(ulp(f.max, f)) / 2
            )
            assert (e.outcome == "overflow") == overflowed, (fmt, x, e.value)


def test_html_has_one_box_per_bit_and_is_well_formed():
    for x, fmt in [(3.141, "fp16"), (3, "e8m0"), (-1.5, "e2m1"), (0.1, "fp64"), (465, "e4m3fn")]:
        e = explain(x, fmt)
        html = e._repr_html_()
        root = ET.fromstring(html)  # well-formed XML, no external CSS / JS
        assert "<script" not in html and "<link" not in html
        boxes = root.findall(".//span[@data-field]")
        f = e.fmt
        assert len(boxes) == f.bits
        fields = [b.get("data-field") for b in boxes]
        assert fields == ["sign"] * f.signed + ["exponent"] * f.exp_bits + ["mantissa"] * f.man_bits
        assert "".join(b.text for b in boxes) == e.bits
        assert root.find(".//div[@class='fl-formula']").text == e.formula


def test_bad_inputs():
    with pytest.raises(TypeError, match="one value"):
        explain([1.0, 2.0], "fp16")
    with pytest.raises(TypeError, match="real numbers"):
        explain("3.14", "fp16")
    with pytest.raises(FormatNameError, match="unknown format name"):
        explain(1.0, "fp9")
    with pytest.raises(ValueError, match="unknown rounding mode"):
        explain(1.0, "fp16", rounding="sideways")


def test_inputs_are_not_mutated():
    x = np.array(3.141)
    explain(x, "fp16")
    assert x == 3.141
    arr = np.array([1.0, 2.0])
    nextafter(arr, np.inf, "fp16"), ulp(arr, "fp16"), exact_decimal(arr, "fp16")
    assert arr.tolist() == [1.0, 2.0]


def test_accepts_numpy_and_ml_dtypes_scalars():
    assert explain(np.float16(3.141), "fp16").code == 0x4248
    assert explain(ml_dtypes.bfloat16(3.140625), "bf16").outcome == "exact"
    assert explain(np.int64(7), "e2m1").value == 6.0


def test_core_p1_ties_are_the_same_on_every_path():
    fmt = Format(exp_bits=8, man_bits=0, special="fn")  # emin = -126, like float32
    assert float(fl_round(np.float32(3.0), fmt)) == float(fl_round(3.0, fmt)) == 4.0


# ============================================================================ exact decimals

def test_exact_decimal_examples():
    assert exact_decimal(3.141, "fp16") == "3.140625"
    assert exact_decimal(1 / 3, "fp16") == "0.333251953125"
    assert exact_decimal(1 / 3, "fp32") == "0.3333333432674407958984375"
    assert exact_decimal(2.0**-24, "fp16") == "0.000000059604644775390625"
    assert exact_decimal(-0.0, "fp16") == "-0"
    assert exact_decimal(1e6, "fp16") == "inf"
    assert exact_decimal(2.0**127, "e8m0") == str(2**127)
    out = exact_decimal([[0.5, -448.0]], "e4m3fn")
    assert out.shape == (1, 2) and out.tolist() == [["0.5", "-448"]]


def test_exact_decimal_is_exact_for_random_float64():
    rng = np.random.default_rng(3)
    xs = np.ldexp(rng.uniform(-2, 2, 300), rng.integers(-1074, 1000, 300))
    for x in xs:
        text = exact_decimal(x, "fp64")
        assert Fraction(text) == Fraction(float(x))
        assert Decimal(text) == Decimal(float(x))  # Decimal(float) is exact too


# ============================================================================ the grid

@pytest.mark.parametrize("fmt", GRID_FORMATS, ids=ids)
def test_values_are_every_finite_decoded_code(fmt):
    codes = np.arange(1 << fmt.bits, dtype=np.uint32)
    decoded = decode(codes, fmt)
    expected = sorted({float(v) for v in decoded if math.isfinite(v)})  # -0 == 0: one zero
    v = values(fmt)
    assert v.tolist() == expected
    assert not np.signbit(v).any() or fmt.signed
    assert not np.signbit(v[v == 0]).any()  # the one zero is +0


@pytest.mark.parametrize("fmt", [f for f in SMALL], ids=ids)
def test_values_match_ml_dtypes_views(fmt):
    dtype = fmt.to_ml_dtype()
    codes = np.arange(1 << fmt.bits, dtype=np.uint16 if fmt.bits > 8 else np.uint8)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        peer = codes.view(dtype).astype(np.float64)
    assert np.array_equal(values(fmt), np.unique(peer[np.isfinite(peer)]))


def test_values_refuses_large_formats():
    assert len(values("fp16")) == 63487 and len(values("e4m3fn")) == 253
    with pytest.raises(ValueError, match="at most 16 bits"):
        values("fp32")


@pytest.mark.parametrize("fmt", GRID_FORMATS, ids=ids)
def test_nextafter_walks_the_decoded_grid(fmt):
    v = values(fmt)
    assert np.array_equal(nextafter(v[:-1], np.inf, fmt), v[1:])
    assert np.array_equal(nextafter(v[1:], -np.inf, fmt), v[:-1])
    top, bottom = nextafter(v[-1], "+inf", fmt), nextafter(v[0], "-inf", fmt)
    assert float(top) == math.inf if fmt.has_inf else math.isnan(top)
    if fmt.signed:
        assert float(bottom) == -math.inf if fmt.has_inf else math.isnan(bottom)
    else:
        assert math.isnan(bottom)  # E8M0: nothing below 2**-127


def test_nextafter_matches_numpy_float16_including_zero_signs():
    v = values("fp16")
    with np.errstate(over="ignore"):
        for target in (np.inf, -np.inf):
            ours = nextafter(v, target, "fp16")
            theirs = np.nextafter(v.astype(np.float16), np.float16(target)).astype(np.float64)
            assert np.array_equal(ours, theirs)
            assert np.array_equal(np.signbit(ours), np.signbit(theirs))
    zeros = nextafter([0.0, -0.0, 2.0**-24, -(2.0**-24)], [-1, 1, 0, 0], "fp16")
    assert zeros.tolist() == [-(2.0**-24), 2.0**-24, 0.0, 0.0]
    assert np.signbit(zeros).tolist() == [True, False, False, True]


def test_nextafter_matches_numpy_float32_on_random_values():
    rng = np.random.default_rng(5)
    x = np.ldexp(rng.uniform(-2, 2, 2000), rng.integers(-150, 128, 2000)).astype(np.float32)
    x = x[np.isfinite(x)]
    with np.errstate(over="ignore"):
        for target in (np.float32(np.inf), np.float32(-np.inf)):
            theirs = np.nextafter(x, target).astype(np.float64)
            assert np.array_equal(nextafter(x.astype(np.float64), float(target), "fp32"), theirs)


@pytest.mark.parametrize("fmt", [
    Format(2, 1, has_zero=False, subnormals=False, special="none"),
    Format(3, 4, has_zero=False, subnormals=False, special="fn"),
], ids=ids)
def test_nextafter_crosses_from_minus_to_plus_smallest_without_zero(fmt):
    """A signed format without zero: -min and +min are neighbours. nextafter(-min, +inf) gave
    NaN ("no such value") and explain(min) said 'previous none'."""
    v = values(fmt)
    assert np.array_equal(nextafter(v[:-1], np.inf, fmt), v[1:])
    assert np.array_equal(nextafter(v[1:], -np.inf, fmt), v[:-1])
    tiny = fmt.smallest_positive
    assert nextafter([tiny, -tiny], [0.0, 0.0], fmt).tolist() == [-tiny, tiny]
    assert explain(tiny, fmt).previous == -tiny and explain(-tiny, fmt).next == tiny


def test_fn_overflow_is_nan_as_torchs_cast_and_saturation_is_not_credited_to_torch():
    """Docs and explain said saturate=True gives +-max 'as torch's E4M3FN cast'; torch's c10
    cast gives NaN at every |x| >= 480 (the model below), as floatlab's default does; only
    NVIDIA's satfinite conversion (torch's CUDA cast when built with CUDA >= 13.2) saturates."""
    from torch_models import e4m3fn_code

    x = np.array([0.0, -0.0, 2.0**-10, 2.0**-9 * 1.5, 3.0, 448.0, 463.9, 464.0, 464.1, 479.9,
                  480.0, 1e6, np.inf, -np.inf, -465.0, np.nan], dtype=np.float32)
    torch_codes = [e4m3fn_code(float(v)) for v in x]  # NaN keeps x's sign in torch; floatlab
    canonical = [0x7F if c & 0x7F == 0x7F else c for c in torch_codes]  # has one NaN code
    assert encode(x, "e4m3fn").tolist() == canonical
    assert canonical[6:11] == [0x7E, 0x7E, 0x7F, 0x7F, 0x7F]  # 464 -> 448, 464.1 -> NaN
    for e in (explain(np.inf, "e4m3fn"), explain(500.0, "e4m3fnuz")):
        text = " ".join(str(e).split())  # the steps wrap lines
        assert "NaN (as ml_dtypes and torch's cast)" in text
        assert "(as torch)" not in text and "(as torch's cast)" not in text
        assert "NVIDIA's satfinite conversion" in text


def test_nextafter_conventions():
    assert float(nextafter(-(2.0**-10), np.inf, "e4m3fnuz")) == 0.0
    assert not np.signbit(nextafter(-(2.0**-10), np.inf, "e4m3fnuz"))  # FNUZ: no -0
    assert float(nextafter(math.inf, 0, "e4m3fn")) == 448.0  # inf is accepted as the line's end
    assert float(nextafter(-math.inf, 0, "e8m0")) == 2.0**-127
    assert float(nextafter(math.inf, math.inf, "fp16")) == math.inf
    assert float(nextafter(1.0, 1.0, "fp16")) == 1.0
    assert math.isnan(nextafter(math.nan, 1.0, "fp16"))
    assert math.isnan(nextafter(1.0, math.nan, "fp16"))
    assert math.isnan(nextafter(448.0, "up", "e4m3fn"))  # no inf: "no such value"
    assert math.isnan(nextafter(6.0, "up", "e2m1"))  # no inf, no NaN in fp4: still NaN
    out = nextafter([[1.0], [2.0]], [0.0, 3.0], "e2m1")  # broadcasting
    assert out.tolist() == [[0.5, 1.5], [1.5, 3.0]]
    with pytest.raises(ValueError, match="not a value of float16.*round first"):
        nextafter(3.141, np.inf, "fp16")
    with pytest.raises(ValueError, match="not a value of float8_e8m0fnu"):
        nextafter(0.0, 1.0, "e8m0")
    with pytest.raises(ValueError, match="direction"):
        nextafter(1.0, "sideways", "fp16")


@pytest.mark.parametrize("fmt", GRID_FORMATS, ids=ids)
def test_ulp_is_the_gap_to_the_next_larger_magnitude(fmt):
    v = values(fmt)
    mags = np.unique(np.abs(v))[:-1]  # all but max
    assert np.array_equal(ulp(mags, fmt), nextafter(mags, np.inf, fmt) - mags)
    assert np.array_equal(ulp(-mags, fmt), ulp(mags, fmt))  # symmetric, unlike np.spacing
    top = fmt.max
    assert float(ulp(top, fmt)) == 2.0 ** (fmt.emax - fmt.man_bits)  # the ulp of max's binade


def test_ulp_examples_and_numpy_on_positive_float16():
    assert ulp([1.0, 3.141, 65504.0, 0.0, 1e6], "fp16").tolist() == [
        2.0**-10, 2.0**-9, 32.0, 2.0**-24, 512.0  # beyond max: binades continue (1e6 -> 2**9)
    ]
    assert float(ulp(448, "e4m3fn")) == 32.0
    assert float(ulp(1.0, "e8m0")) == 1.0
    assert float(ulp(0.0, Format(exp_bits=4, man_bits=3, subnormals=False))) == 2.0**-6
    assert math.isnan(ulp(math.inf, "fp16")) and math.isnan(ulp(math.nan, "fp16"))
    v = values("fp16")
    v = v[(v >= 0) & (v < 65504)]
    # numpy.spacing agrees on positive float16 (for negative float16 it returns the gap toward
    # zero at powers of two: np.spacing(np.float16(-1)) == +0.000488, a numpy quirk).
    assert np.array_equal(ulp(v, "fp16"), np.spacing(v.astype(np.float16)).astype(np.float64))


def test_explain_with_ftz_uses_the_grid_without_subnormals():
    # With subnormals=False the neighbours of 0 are +-2**-14, not the subnormals FTZ removed.
    e = explain(1e-5, "fp16", subnormals=False)
    assert e.value == 0.0 and e.outcome == "underflow"
    assert (e.previous, e.next) == (-(2.0**-14), 2.0**-14)
    assert "ulp(0) = 2^-14" in str(e)
    assert "fewer significant bits" not in str(e)
