"""The codec against oracles: every code of every preset up to 16 bits, round trips, strings."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import floatlab
from floatlab import PRESETS, decode, encode, fields, from_bin, from_hex, to_bin, to_hex
from floatlab.codec import codes_to_bin, codes_to_hex

SMALL = [name for name, fmt in PRESETS.items() if fmt.bits <= 16]


def all_codes(fmt: floatlab.Format) -> np.ndarray:
    return np.arange(1 << fmt.bits, dtype=np.uint64).astype(fmt.code_dtype)


def oracle_values(fmt: floatlab.Format, codes: np.ndarray) -> np.ndarray:
    """The values ml_dtypes / numpy assign to the same bit patterns."""
    dtype = fmt.to_ml_dtype()
    storage = codes.astype(np.uint8) if fmt.bits < 8 else codes  # sub-byte types use a byte
    # (ml_dtypes' cast of a signalling NaN pattern raises the invalid flag; the NaN it gives
    # is what the test compares, so the warning is noise)
    with np.errstate(invalid="ignore"):
        return storage.view(dtype).astype(np.float64)


def same_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Equal including the sign of zero; NaN equals NaN."""
    return ((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))


@pytest.mark.parametrize("name", SMALL)
def test_decode_every_code_matches_ml_dtypes(name):
    fmt = PRESETS[name]
    codes = all_codes(fmt)
    ours = decode(codes, fmt)
    assert ours.dtype == np.float64
    assert same_values(ours, oracle_values(fmt, codes)).all()


@pytest.mark.parametrize("name", SMALL)
def test_encode_decode_round_trip_every_code(name):
    fmt = PRESETS[name]
    codes = all_codes(fmt)
    values = decode(codes, fmt)
    nan = np.isnan(values)
    back = encode(values[~nan], fmt)
    assert back.dtype == fmt.code_dtype
    np.testing.assert_array_equal(back, codes[~nan])
    # Every NaN encodes to the one canonical NaN code, which decodes to NaN.
    if nan.any():
        assert set(encode(values[nan], fmt).tolist()) == {fmt.nan_code}
        assert np.isnan(decode(fmt.nan_code, fmt))


def test_canonical_nan_codes():
    expected = {
        "float16": 0x7E00, "bfloat16": 0x7FC0, "float32": 0x7FC00000,
        "float64": 0x7FF8000000000000, "float8_e4m3fn": 0x7F, "float8_e5m2": 0x7E,
        "float8_e4m3fnuz": 0x80, "float8_e5m2fnuz": 0x80, "float8_e8m0fnu": 0xFF,
        "float4_e2m1fn": None,
    }
    for name, code in expected.items():
        assert PRESETS[name].nan_code == code, name


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_wide_formats_use_numpys_bit_patterns(name):
    rng = np.random.default_rng(7)
    dtype = np.dtype(name)
    x = rng.standard_normal(10_000) * np.exp2(rng.integers(-60, 60, 10_000))
    x = np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, 5e-324, 1e-45]]).astype(dtype)
    codes = encode(x, name)
    np.testing.assert_array_equal(codes, x.view(codes.dtype))
    assert same_values(decode(codes, name), x.astype(np.float64)).all()


def test_tensorfloat32_codes_are_the_top_19_bits_of_float32():
    rng = np.random.default_rng(3)
    x = rng.standard_normal(5_000).astype(np.float32)
    rounded = floatlab.round(x, "tf32").astype(np.float32)
    codes = encode(x, "tf32")
    np.testing.assert_array_equal(codes, rounded.view(np.uint32) >> 13)
    np.testing.assert_array_equal(decode(codes, "tf32"), rounded)


def test_encode_rounds_with_the_given_options():
    assert int(encode(465.0, "e4m3fn")) == 0x7F  # overflow -> NaN
    assert int(encode(465.0, "e4m3fn", saturate=True)) == 0x7E  # 448
    assert int(encode(1 + 2**-11, "fp16", rounding="up")) == 0x3C01
    assert int(encode(-0.0, "e4m3fnuz")) == 0x00  # FNUZ has no -0; 0x80 is NaN
    assert int(encode(-0.0, "e4m3fn")) == 0x80


def test_seed_article_values():
    assert floatlab.float16_to_bin(3.141) == "0100001001001000"
    assert floatlab.bin_to_float16("0100001001001000") == 3.140625
    assert floatlab.float16_to_bin(3.1415) == "0100001001001000"
    assert to_hex(3.142, "fp16") == "0x4249"
    assert float(decode(0x4249, "fp16")) == 3.142578125
    assert float(floatlab.round(1 / 3, "fp16")) == 0.333251953125
    assert floatlab.float32_to_bin(1 / 3) == "00111110101010101010101010101011"
    assert floatlab.bin_to_float32("00111110101010101010101010101011") == 0.3333333432674408
    assert floatlab.float16_to_bin(10**6) == "0111110000000000"
    assert floatlab.bfloat16_to_bin(3.141) == "0100000001001001"
    assert floatlab.bin_to_bfloat16("0100000001001001") == 3.140625
    # The seed article's 0000000000000001: the smallest subnormal, 2**-24 (not 6e-5).
    assert floatlab.bin_to_float16("0000000000000001") == 2.0**-24


@pytest.mark.parametrize("name", SMALL + ["tensorfloat32", "float32"])
def test_bit_strings_round_trip(name):
    fmt = PRESETS[name]
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 1 << fmt.bits, 2_000, dtype=np.uint64).astype(fmt.code_dtype)
    values = decode(codes, fmt)
    strings = codes_to_bin(codes, fmt)
    assert strings.shape == codes.shape
    assert all(len(s) == fmt.bits for s in strings[:10])
    assert [int(s, 2) for s in strings] == codes.astype(np.uint64).tolist()
    assert same_values(from_bin(list(strings), fmt), values).all()
    spaced = codes_to_bin(codes, fmt, sep=" ")
    assert same_values(from_bin(list(spaced), fmt), values).all()
    finite = np.isfinite(values)
    hexes = to_hex(values[finite], fmt)
    assert same_values(from_hex(list(hexes), fmt), values[finite]).all()


def test_bit_string_layout_and_separators():
    assert to_bin(-1.5, "bf16", sep="_") == "1_01111111_1000000"
    assert to_bin(2.0, "e8m0", sep=" ") == "10000000 "[:-1]  # unsigned: exponent only
    assert to_bin(1.0, "e2m1", sep="|") == "0|01|0"
    assert from_bin("0b0_10000_1001001000", "fp16") == 3.140625
    assert from_bin(" 0 10000 1001001000 ", "fp16") == 3.140625
    assert from_bin("0|1111|110", "e4m3fn") == 448.0
    assert np.isnan(from_bin("01111111", "e4m3fn"))
    assert from_hex("0X7BFF", "fp16") == 65504.0
    arr = to_bin(np.array([[1.0, 2.0]]), "e4m3fn")
    assert arr.shape == (1, 2) and arr.tolist() == [["00111000", "01000000"]]


def test_fields_of_values_and_codes():
    f = fields(3.141, "fp16")
    assert (int(f.sign), int(f.exponent), int(f.unbiased_exponent), int(f.mantissa)) == (
        0, 16, 1, 584)
    assert str(f.kind) == "normal"
    g = fields(np.array([0x0000, 0x8000, 0x0001, 0x0400, 0x7C00, 0xFE00], np.uint16), "fp16")
    assert g.kind.tolist() == ["zero", "zero", "subnormal", "normal", "inf", "nan"]
    assert g.sign.tolist() == [0, 1, 0, 0, 0, 1]
    assert g.unbiased_exponent.tolist()[:4] == [-14, -14, -14, -14]
    e8 = fields(np.array([0, 127, 254, 255], np.uint8), "e8m0")
    assert e8.kind.tolist() == ["normal", "normal", "normal", "nan"]
    assert e8.unbiased_exponent.tolist()[:3] == [-127, 0, 127]
    assert "code=0x4248" in repr(f)


def test_scalars_give_0d_and_empty_arrays_keep_shape():
    assert encode(1.0, "fp16").shape == ()
    assert decode(0x3C00, "fp16").shape == ()
    empty = np.zeros((0, 3))
    assert encode(empty, "fp16").shape == (0, 3)
    assert decode(np.zeros((0, 3), np.uint16), "fp16").shape == (0, 3)
    assert to_bin(empty, "fp16").shape == (0, 3)


def test_inputs_are_not_mutated():
    x = np.array([3.141, -0.0, np.nan, 1e9])
    before = x.copy()
    encode(x, "fp16")
    fields(x, "e4m3fn")
    to_bin(x, "bf16")
    np.testing.assert_array_equal(x, before)
    codes = np.array([1, 2, 3], np.uint16)
    decode(codes, "fp16")
    np.testing.assert_array_equal(codes, [1, 2, 3])


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: from_bin("010000100100100", "fp16"), ValueError, "15 bits but float16 needs 16"),
        (lambda: from_bin("01000010010010a0", "fp16"), ValueError, "'a' at digit 14"),
        (lambda: from_bin("", "fp16"), ValueError, "empty bit string"),
        (lambda: from_bin(1010, "fp16"), TypeError, "expected a bit string"),
        (lambda: from_hex("0x1ff", "e4m3fn"), ValueError, "does not fit in the 8 bits"),
        (lambda: from_hex("0xzz", "e4m3fn"), ValueError, "not a hex digit"),
        (lambda: decode(256, "e4m3fn"), ValueError, "valid codes are 0..0xff"),
        (lambda: decode(-1, "e4m3fn"), ValueError, "does not fit"),
        (lambda: decode(np.array([1.5]), "fp16"), TypeError, "use floatlab.encode"),
        (lambda: encode("3.1", "fp16"), TypeError, "must hold real numbers"),
        (lambda: encode(np.array([True]), "fp16"), TypeError, "boolean array"),
        (lambda: encode(1 + 2j, "fp16"), TypeError, "complex"),
        (lambda: encode(2**60 + 1, "fp16"), ValueError, "float64 cannot hold exactly"),
        (lambda: encode(np.nan, "e2m1"), ValueError, "has no NaN"),
        (lambda: to_bin(1.0, "e4m3"), floatlab.FormatNameError, "ambiguous"),
        (lambda: to_bin(1.0, "fp17"), floatlab.FormatNameError, "Did you mean"),
    ],
)
def test_bad_input_messages(call, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace("*", r"\*")):
        call()


def test_e8m0_cannot_hold_zero_or_negatives():
    with pytest.warns(RuntimeWarning, match="cannot hold negative values"):
        codes = encode([-1.0, 2.0], "e8m0")
    assert codes.tolist() == [0xFF, 128]
    with pytest.warns(RuntimeWarning, match="no zero"):
        assert int(encode(0.0, "e8m0")) == 0xFF


@given(st.integers(min_value=0, max_value=0xFFFF))
def test_fp16_code_round_trip_property(code):
    value = decode(code, "fp16")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if not np.isnan(value):
            assert int(encode(value, "fp16")) == code
        assert int(to_bin(value, "fp16"), 2) == (code if not np.isnan(value) else 0x7E00)


def test_decode_matches_ml_dtypes_view_for_ml_dtype_arrays():
    x = np.array([1.0, -2.5, 0.1], dtype=ml_dtypes.bfloat16)
    np.testing.assert_array_equal(decode(x.view(np.uint16), "bf16"), x.astype(np.float64))


def test_numpy_view_decoding_equals_the_arithmetic_decoder():
    from floatlab.codec import _decode_arithmetic

    rng = np.random.default_rng(5)
    for fmt in (PRESETS["float32"], floatlab.Format(8, 23), PRESETS["float64"]):
        codes = rng.integers(0, 2**63, 20_000, dtype=np.uint64) >> np.uint64(64 - fmt.bits)
        codes = np.concatenate([codes, [0, 1, fmt.max_code, fmt.inf_code, fmt.nan_code]])
        codes = codes.astype(np.uint64)
        assert same_values(decode(codes.astype(fmt.code_dtype), fmt),
                           _decode_arithmetic(codes, fmt)).all()


def _parse_both(parse, strings, fmt):
    """(fast result or error, per-string result or error) of from_bin / from_hex."""
    from floatlab import bitstrings

    results = []
    for fast in (True, False):
        bitstrings._FAST_STRINGS = fast
        try:
            results.append(parse(strings, fmt))
        except (ValueError, TypeError) as err:
            results.append((type(err), str(err)))
        finally:
            bitstrings._FAST_STRINGS = True
    return results


def _assert_same_parse(fast, slow):
    """The same error, or the same values bit for bit (and shape)."""
    if isinstance(slow, tuple):
        assert fast == slow
    else:
        assert fast.shape == slow.shape and np.array_equal(
            fast.view(np.uint64), slow.view(np.uint64))


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "e4m3fn", "e5m2fnuz", "e2m1", "e8m0", "fp32",
                                 "float64", floatlab.Format(5, 7, name="e5m7")])
def test_string_arrays_fast_path_equals_per_string_parser(fmt):
    # from_bin / from_hex parse str arrays in whole-array passes (bitstrings._plain_codes):
    # every code of small formats and edge codes of wide ones, with and without separators
    # and prefixes, against the per-string parser (which the fast path falls back to)
    f = floatlab.get_format(fmt)
    if f.bits <= 16:
        codes = np.arange(1 << f.bits, dtype=np.uint64)
    else:
        top = (1 << f.bits) - 1
        codes = np.array([0, 1, 2, top, top - 1, top >> 1, (top >> 1) + 1, 0x3C00,
                          (1 << (f.bits - 1)) | 1], dtype=np.uint64)
    bins = codes_to_bin(codes, f)
    cases = [bins, codes_to_bin(codes, f, sep=" "), codes_to_bin(codes, f, sep="_"),
             codes_to_bin(codes, f, sep="|").reshape(1, -1), bins[:1].reshape(()),
             np.char.add(" ", bins), np.char.add("0b", bins), np.char.add(bins, "\t"),
             bins[:0], bins.astype(bins.dtype.newbyteorder(">"))]
    for strings in cases:
        _assert_same_parse(*_parse_both(from_bin, strings, f))
    hexes = codes_to_hex(codes, f)
    bare = np.char.lstrip(np.char.lstrip(hexes, "0"), "x")  # no prefix (and lengths vary)
    mixed = hexes.copy()
    mixed[::2] = np.char.upper(hexes[::2])
    for strings in (hexes, bare, mixed, np.char.replace(hexes, "0x", "0X"),
                    np.char.add("0x0", np.char.lstrip(np.char.lstrip(hexes, "0"), "x")),
                    np.char.add(hexes, "f"), np.char.replace(hexes, "0x", "x0"),
                    np.char.add("0x", np.char.zfill(np.char.lstrip(np.char.lstrip(hexes, "0"),
                                                                    "x"), 17)),
                    hexes.reshape(-1, 1)):
        _assert_same_parse(*_parse_both(from_hex, strings, f))


def test_string_arrays_fast_path_falls_back_with_the_same_errors():
    good = to_bin(np.array([1.0, 2.0, 3.0]), "fp16")
    for bad in (np.array([good[0], good[1][:-1], good[2]]),        # a short string
                np.array([good[0], good[1].replace("1", "2"), good[2]]),  # a bad digit
                np.array([good[0], "é" * 16, good[2]]),            # beyond ASCII
                np.array([good[0], good[1], ""])):                 # an empty string
        fast, slow = _parse_both(from_bin, bad, "fp16")
        assert isinstance(slow, tuple) and fast == slow
    for bad in (np.array(["0x3c00", "0x1ff"]), np.array(["0x3c00", "3c00x"])):
        fast, slow = _parse_both(from_hex, bad, "e4m3fn")
        assert isinstance(slow, tuple) and fast == slow


@pytest.mark.parametrize("fmt", ["e2m1", "e3m2", "e4m3fn", "fp16", "e8m13", "fp32", "float64",
                                 floatlab.Format(5, 7, name="e5m7")])
def test_codes_to_hex_table_equals_python_formatting(fmt):
    # codes_to_hex gathers whole strings from a table for formats of <= 4 digits and builds
    # them digit by digit beyond: both against Python's formatting of the low 4 * digits bits
    # (codes beyond the format included: the table is indexed by those bits)
    f = floatlab.get_format(fmt)
    digits = (f.bits + 3) // 4
    rng = np.random.default_rng(3)
    codes = np.concatenate([np.arange(min(1 << f.bits, 1 << 16), dtype=np.uint64),
                            rng.integers(0, 1 << 63, 2000, dtype=np.uint64) * np.uint64(2),
                            np.array([(1 << 64) - 1, (1 << f.bits) - 1], dtype=np.uint64)])
    mask = (1 << 4 * digits) - 1
    expected = [f"0x{int(c) & mask:0{digits}x}" for c in codes]
    got = codes_to_hex(codes, f)
    assert got.dtype == np.dtype(f"U{digits + 2}") and got.tolist() == expected
    assert codes_to_hex(codes[:6].reshape(2, 3), f).tolist() == [expected[:3], expected[3:6]]
    assert codes_to_hex(codes[:0], f).shape == (0,) and codes_to_hex(codes[5], f).shape == ()
