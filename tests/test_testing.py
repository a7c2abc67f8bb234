"""floatlab.testing: the encoder / decoder checkers find exactly the planted errors, and pass
correct casts (ml_dtypes / numpy on float32-exact inputs, where those are correctly rounded)."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from floatlab.testing import assert_decoder, assert_encoder, check_decoder, check_encoder

ML = {
    "e4m3fn": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2,
    "e4m3fnuz": ml_dtypes.float8_e4m3fnuz, "e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
    "float8_e4m3": ml_dtypes.float8_e4m3, "e3m4": ml_dtypes.float8_e3m4,
    "e4m3b11fnuz": ml_dtypes.float8_e4m3b11fnuz, "e2m1": ml_dtypes.float4_e2m1fn,
    "e3m2": ml_dtypes.float6_e3m2fn, "e2m3": ml_dtypes.float6_e2m3fn,
    "bf16": ml_dtypes.bfloat16,
}


def _ml_encoder(dtype):
    code = np.uint16 if np.dtype(dtype).itemsize == 2 else np.uint8
    return lambda x: x.astype(dtype).view(code)


def _recording(fn, seen):
    def wrapped(x):
        seen.append(x.copy())
        return fn(x)
    return wrapped


@pytest.mark.parametrize("name", sorted(ML))
def test_correct_casts_pass(name):
    """ml_dtypes rounds float32 directly (one rounding), so on float32 inputs it is an exact
    reference for these formats; its decoders are plain table lookups."""
    report = check_encoder(_ml_encoder(ML[name]), name)
    assert report.ok, str(report)
    assert sum(report.checked.values()) > 50 and report.checked["midpoint"] > 10
    assert_decoder(lambda c: c.view(ML[name]).astype(np.float32), name)


def test_numpy_half_casts_pass_from_float32_and_float64():
    with np.errstate(over="ignore"):
        for dtype in (np.float32, np.float64):
            assert_encoder(lambda x: x.astype(np.float16).view(np.uint16), "fp16", dtype=dtype)
    assert_encoder(lambda x: x.view(np.uint32), "fp32")
    assert_encoder(lambda x: x.view(np.uint64), "fp64", dtype=np.float64)
    assert_decoder(lambda c: c.view(np.float32), "fp32")


def test_ml_dtypes_e8m0_rounds_float32_subnormals_up_and_floatlab_is_right():
    """ml_dtypes 0.6 (and torch 2.13, checked by hand) send float32 subnormals such as
    1.25 * 2**-127 to 2**-126: they round the float32 bit pattern, which below 2**-126 has no
    hidden bit, so their halfway point is 2**-127 itself. The nearest power of two is 2**-127
    (distance 0.25 * 2**-127 against 0.75 * 2**-127): floatlab follows the definition."""
    report = check_encoder(_ml_encoder(ml_dtypes.float8_e8m0fnu), "e8m0")
    assert report.mismatches
    for m in report.mismatches:
        x = Fraction(m.input)
        assert x < Fraction(2) ** -126 and m.expected == 0 and m.got == 1
        assert abs(x - Fraction(2) ** -127) < abs(x - Fraction(2) ** -126)


def test_truncating_encoder_is_caught_exactly_where_rounding_goes_up():
    seen = []
    truncate = _recording(lambda x: (x.view(np.uint32) >> 16).astype(np.uint16), seen)
    report = check_encoder(truncate, "bf16")
    bits = seen[0].view(np.uint32)
    low, kept_odd = bits & 0xFFFF, (bits >> 16) & 1
    finite = np.isfinite(seen[0])
    planted = finite & ((low > 0x8000) | ((low == 0x8000) & (kept_odd == 1)))
    wrong = {int(np.float32(m.input).view(np.uint32)) for m in report.mismatches}
    assert wrong == set(bits[planted].tolist())
    assert report.counts["midpoint+1ulp"] == report.checked["midpoint+1ulp"]
    assert report.counts["midpoint-1ulp"] == 0


def test_wrong_nan_code_is_caught_only_at_nan():
    def inf_for_nan(x):
        with np.errstate(over="ignore"):
            codes = x.astype(np.float16).view(np.uint16)
        return np.where(np.isnan(x), np.uint16(0x7C00), codes)

    report = check_encoder(inf_for_nan, "fp16")
    assert [(m.category, m.expected, m.got) for m in report.mismatches] == [
        ("nan", 0x7E00, 0x7C00)]
    # Any NaN code passes unless the canonical one is required:
    def other_nan(x):
        with np.errstate(over="ignore"):
            codes = x.astype(np.float16).view(np.uint16)
        return np.where(np.isnan(x), np.uint16(0x7FFF), codes)

    assert check_encoder(other_nan, "fp16").ok
    assert len(check_encoder(other_nan, "fp16", any_nan_code=False).mismatches) == 1


def test_missing_saturation_is_caught_exactly_past_the_threshold():
    """E4M3FN: max 448, ulp 32 there; 464 ties to the even 448, everything above overflows."""
    seen = []
    report = check_encoder(_recording(_ml_encoder(ml_dtypes.float8_e4m3fn), seen), "e4m3fn",
                           saturate=True)
    x = seen[0].astype(np.float64)
    planted = np.isfinite(x) & (np.abs(x) > 464)
    assert sorted(m.input for m in report.mismatches) == sorted(x[planted].tolist())
    assert all(m.got in (0x7F, 0xFF) for m in report.mismatches)
    text = str(report)
    assert "464.0000305175781 (0x43e80001)" in text and "0x7e (448.0)" in text


def test_decoder_without_subnormals_is_caught_at_exactly_the_subnormal_codes():
    def no_subnormals(codes):
        values = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
        exponent, mantissa = (codes >> 3) & 0xF, codes & 0x7
        as_normal = np.ldexp(1 + mantissa / 8, -7) * np.where(codes & 0x80, -1, 1)
        return np.where((exponent == 0) & (mantissa != 0), as_normal, values)

    report = check_decoder(no_subnormals, "e4m3fn")
    planted = [c for c in range(256) if (c >> 3) & 0xF == 0 and c & 7]
    assert sorted(m.input for m in report.mismatches) == planted
    assert set(report.counts) == {"subnormal"}


def test_decoder_losing_the_sign_of_zero_is_caught():
    report = check_decoder(lambda c: np.abs(c.view(np.float16).astype(np.float32)), "fp16")
    negative = [m for m in report.mismatches if m.category != "nan"]
    assert 0x8000 in [m.input for m in negative]
    zero = [m for m in report.mismatches if m.category == "zero"]
    assert [m.input for m in zero] == [0x8000]


def test_assert_variants_raise_with_the_report():
    with pytest.raises(AssertionError, match=r"check_encoder\(bfloat16.*inputs wrong"):
        assert_encoder(lambda x: (x.view(np.uint32) >> 16).astype(np.uint16), "bf16")
    with pytest.raises(AssertionError, match="check_decoder"):
        assert_decoder(lambda c: np.zeros(c.shape), "e4m3fn")


def test_bad_checker_input():
    with pytest.raises(TypeError, match="must return integer codes"):
        check_encoder(lambda x: x, "fp16")
    with pytest.raises(ValueError, match="returned shape"):
        check_encoder(lambda x: np.zeros(3, np.uint16), "fp16")
    with pytest.raises(TypeError, match="dtype must be float32 or float64"):
        check_encoder(lambda x: x, "fp16", dtype=np.float16)
    with pytest.raises(TypeError, match="saturate must be True or False"):
        check_encoder(lambda x: x, "fp16", saturate="yes")
