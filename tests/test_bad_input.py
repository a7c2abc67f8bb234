"""Issue 8, section 2: every bad input gets a clear error (never a numpy-internal message, a
truthy-string surprise or a wrong answer), and explain survives every edge of every format."""

from __future__ import annotations

import math
import warnings

import ml_dtypes
import numpy as np
import pytest

import floatlab
from floatlab import PRESETS, ROUNDING_MODES, decode, encode, explain, to_bin
from floatlab.codec import codes_to_bin

ALL_FORMATS = list(dict.fromkeys(PRESETS.values())) + [
    floatlab.get_format(name) for name in ("e1m1", "e5m2fnu", "e3m0fnu", "e1m2", "e2m3")
]


# --------------------------------------------------------------------------- explain sweep

def _edge_values(fmt):
    tiny = fmt.smallest_positive
    ulp_one = 2.0 ** -fmt.man_bits
    return [
        5e-324, -5e-324, -1e-320, 0.0, -0.0, tiny, -tiny, tiny / 2, tiny * 1.5,
        fmt.normal_threshold, fmt.max, -fmt.max, fmt.max * 1.25, 1e300, -1e300,
        1.0 + ulp_one / 2, -(1.0 + ulp_one / 2), 1.5, -1.5, math.inf, -math.inf, math.nan,
    ]


@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=lambda f: f.name)
def test_explain_survives_every_edge_in_every_mode(fmt):
    """5e-324 rounded up (relative error ~2**1050), e1m1's empty normal range, unsigned
    formats: explain used to die in its number formatting. The stored value must be the
    core's, and only the format's own limits (no NaN / no inf) may refuse an input."""
    for mode in ROUNDING_MODES:
        rng = 0 if mode == "stochastic" else None
        for x in _edge_values(fmt):
            for saturate in (False, True):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    try:
                        expected = float(floatlab.round(x, fmt, mode, saturate, rng=rng))
                    except ValueError as err:
                        assert "has no NaN" in str(err) or "no inf and no NaN" in str(err)
                        with pytest.raises(ValueError, match="has no"):
                            explain(x, fmt, mode, saturate, rng=rng)
                        continue
                e = explain(x, fmt, mode, saturate, rng=rng)
                assert e.value == expected or (math.isnan(e.value) and math.isnan(expected)), (
                    fmt.name, mode, x, e.value, expected)
                assert str(e) and repr(e) and e._repr_html_()


def test_explain_reports_huge_relative_errors_and_tiny_formats():
    e = explain(5e-324, "fp16", rounding="up")
    assert e.value == 2.0**-24 and e.relative_error == math.inf and e.outcome == "subnormal"
    assert explain(-1e-320, "bf16", rounding="down").value == -(2.0**-133)
    e = explain(-1.5, "e1m1")  # the tie rounds to 2, past max = 1: overflow to -inf
    assert e.outcome == "overflow" and e.value == -math.inf
    e = explain(-1.5, "e1m1", saturate=True)
    assert e.outcome == "overflow" and e.value == -1.0
    assert explain(1.5, "e5m2fnu", rounding="odd").value == 1.5


def test_explain_warns_once_about_an_unused_rng():
    with pytest.warns(UserWarning, match="rng is ignored"):
        e = explain(1 / 3, "fp16", rng=0)
    assert not any("rng" in text for label, text in e.steps if label == "note")


# --------------------------------------------------------------------------- round options

@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"x": [[1], [1, 2]]}, ValueError, "ragged"),
        ({"rng": -1, "rounding": "stochastic"}, ValueError, "rng seed must be a non-negative"),
        ({"rng": "abc", "rounding": "stochastic"}, TypeError, "numpy.random.Generator"),
        ({"rng": 1.5, "rounding": "stochastic"}, TypeError, "non-negative int seed"),
        ({"rng": True, "rounding": "stochastic"}, TypeError, "numpy.random.Generator"),
        ({"rounding": ["up"]}, TypeError, "rounding must be one string"),
        ({"subnormals": "False"}, TypeError, "subnormals must be True or False.*'False'"),
        ({"saturate": "no"}, TypeError, "saturate must be True or False"),
        ({"saturate": 1}, TypeError, "saturate must be True or False"),
        ({"x": np.ma.array([1.0, 2.0], mask=[0, 1])}, TypeError, "masked array"),
    ],
)
def test_round_option_errors(kwargs, error, message):
    call = {"x": 1.0, "fmt": "fp16", **kwargs}
    with pytest.raises(error, match=message):
        floatlab.round(**call)


def test_flags_accept_numpy_bools():
    assert float(floatlab.round(1e6, "fp16", saturate=np.bool_(True))) == 65504.0
    assert float(floatlab.round(2.0**-20, "fp16", subnormals=np.False_)) == 0.0


def test_rng_with_a_deterministic_mode_warns_that_it_is_ignored():
    with pytest.warns(UserWarning, match="rng is ignored: rounding='up' is deterministic"):
        out = floatlab.round(1 / 3, "fp16", "up", rng=np.random.default_rng(0))
    assert float(out) == float(floatlab.round(1 / 3, "fp16", "up"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        floatlab.round(1 / 3, "fp16", "stochastic", rng=0)  # used: no warning
        floatlab.round(1 / 3, "fp16", "up")  # no rng: no warning


# --------------------------------------------------------------------------- masked arrays

MASKED = np.ma.array([1.0, 2.0, 3.0], mask=[0, 1, 0])


@pytest.mark.parametrize(
    "call",
    [
        lambda: floatlab.round(MASKED, "fp16"),
        lambda: encode(MASKED, "fp16"),
        lambda: decode(np.ma.array([1, 2], mask=[0, 1]), "fp16"),
        lambda: to_bin(MASKED, "fp16"),
        lambda: floatlab.to_hex(MASKED, "fp16"),
        lambda: floatlab.fields(MASKED, "fp16"),
        lambda: floatlab.ulp(MASKED, "fp16"),
        lambda: floatlab.nextafter(MASKED, "up", "fp16"),
        lambda: floatlab.exact_decimal(MASKED, "fp16"),
        lambda: explain(np.ma.array(1.0, mask=True), "fp16"),
    ],
    ids=["round", "encode", "decode", "to_bin", "to_hex", "fields", "ulp", "nextafter",
         "exact_decimal", "explain"],
)
def test_masked_arrays_are_refused_everywhere(call):
    with pytest.raises(TypeError, match="masked array.*filled"):
        call()


# --------------------------------------------------------------------------- decode

@pytest.mark.parametrize(
    "codes, error, message",
    [
        ([2**64], ValueError, r"code 0x10000000000000000 \(18446744073709551616\) does not fit"),
        (np.array([-1], dtype=object), ValueError, r"code -0x1 \(-1\) does not fit"),
        ([-1, 2**63], ValueError, r"code -0x1 \(-1\) does not fit in the 16 bits"),
        ([1, 2**63], ValueError, r"code 0x8000000000000000 .* does not fit"),
        ([1.5], TypeError, r"integer codes, got 1.5 \(float\)"),
        (np.array([1.0]), TypeError, "integer codes, got dtype float64"),
        ([[1], [1, 2]], ValueError, "ragged"),
        ([True], TypeError, "integer codes"),
    ],
)
def test_decode_code_errors(codes, error, message):
    with pytest.raises(error, match=message):
        decode(codes, "fp16")


def test_decode_takes_python_ints_of_any_width_that_fit():
    assert decode([2**63, 1], "fp64").tolist() == [-0.0, 5e-324]
    assert decode(np.array([0x3C00, 1], dtype=object), "fp16").tolist() == [1.0, 2.0**-24]


# --------------------------------------------------------------------------- to_bin

def test_to_bin_separators():
    assert to_bin(1.0, "fp16", sep="·") == "0·01111·0000000000"
    assert to_bin(-1.0, "fp32", sep=" | ") == "1 | 01111111 | " + "0" * 23
    with pytest.raises(TypeError, match="sep must be a string"):
        to_bin(1.0, "fp16", sep=1)
    with pytest.raises(TypeError, match="sep must be a string"):
        codes_to_bin(np.array([1]), floatlab.get_format("fp16"), sep=None)


def _python_bin(code: int, fmt, sep: str) -> str:
    digits = f"{code:0{fmt.bits}b}"
    widths = [w for w in ([1] if fmt.signed else []) + [fmt.exp_bits, fmt.man_bits] if w]
    pieces, start = [], 0
    for w in widths:
        pieces.append(digits[start : start + w])
        start += w
    return sep.join(pieces)


@pytest.mark.parametrize("name", ["fp16", "e4m3fn", "e8m0", "e5m2fnu", "e2m1", "fp32", "fp64",
                                  "tf32"])
@pytest.mark.parametrize("sep", ["", " ", "·", "<>"])
def test_bit_strings_match_python_formatting(name, sep):
    """The table-driven writer against Python's own formatting: every code of formats up to
    16 bits, random and extreme codes of the wider ones."""
    fmt = floatlab.get_format(name)
    if fmt.bits <= 16:
        codes = np.arange(1 << fmt.bits, dtype=np.uint64)
    else:
        rng = np.random.default_rng(fmt.bits)
        top = (1 << fmt.bits) - 1
        codes = np.concatenate([rng.integers(0, top, 3000, dtype=np.uint64, endpoint=True),
                                np.array([0, 1, top, top - 1], dtype=np.uint64)])
    got = codes_to_bin(codes.astype(fmt.code_dtype), fmt, sep)
    assert got.tolist() == [_python_bin(int(c), fmt, sep) for c in codes]


# --------------------------------------------------------------------------- encode

@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=lambda f: f.name)
def test_encode_of_every_value_is_its_code(fmt):
    """encode(decode(code)) == code for every code of every format up to 16 bits (NaN codes go
    to the canonical NaN, -0 of FNUZ formats does not exist); an oracle independent of the
    bit-pattern arithmetic in _codes_from_rounded."""
    if fmt.bits > 16:
        pytest.skip("wide formats: checked against numpy below")
    codes = np.arange(1 << fmt.bits, dtype=np.uint64).astype(fmt.code_dtype)
    values = decode(codes, fmt)
    for dtype in (np.float64, np.float32):
        if dtype is np.float32 and not np.array_equal(values.astype(np.float32), values,
                                                      equal_nan=True):
            continue
        got = encode(values.astype(dtype), fmt)
        nan = np.isnan(values)
        assert np.array_equal(got[~nan], codes[~nan]), fmt.name
        if nan.any():
            assert (got[nan] == fmt.nan_code).all()


def test_encode_matches_numpy_and_ml_dtypes_on_random_bits():
    rng = np.random.default_rng(3)
    x64 = rng.integers(0, 2**64, 200_000, dtype=np.uint64).view(np.float64)
    x64 = x64[~np.isnan(x64)]
    assert np.array_equal(encode(x64, "fp64"), x64.view(np.uint64))
    x32 = rng.integers(0, 2**32, 400_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x32 = x32[~np.isnan(x32)]
    assert np.array_equal(encode(x32, "fp32"), x32.view(np.uint32))
    with np.errstate(over="ignore"):
        as_half = x32.astype(np.float16)
    assert np.array_equal(encode(x32, "fp16"), as_half.view(np.uint16))
    assert np.array_equal(encode(x32, "bf16"), x32.astype(ml_dtypes.bfloat16).view(np.uint16))
    assert np.array_equal(encode(x32, "e5m2"),
                          x32.astype(ml_dtypes.float8_e5m2).view(np.uint8))


def test_chunked_stochastic_encode_draws_like_one_round_call():
    x = np.random.default_rng(1).standard_normal(300_000)  # several chunks
    codes = encode(x, "e4m3fn", rounding="stochastic", rng=7)
    values = floatlab.round(x, "e4m3fn", rounding="stochastic", rng=7)
    assert np.array_equal(decode(codes, "e4m3fn"), values)


def test_encode_takes_random_bits_as_round_does():
    """encode's options are documented as floatlab.round's, but random_bits (hardware SR) was
    refused as an 'unknown option', so the codes of a k-bit stochastic rounding had no path."""
    x = np.random.default_rng(1).standard_normal(300_000)  # several chunks
    for fmt in ("e2m1", "e4m3fn", "bf16"):
        codes = encode(x, fmt, rounding="stochastic", rng=7, random_bits=3)
        values = floatlab.round(x, fmt, rounding="stochastic", rng=7, random_bits=3)
        assert np.array_equal(decode(codes, fmt), values)
    assert to_bin(0.3, "e2m1", rounding="stochastic", rng=0, random_bits=1) == "0000"  # 0.6 -> 0
    with pytest.raises(ValueError, match="random_bits=3 applies to rounding='stochastic' only"):
        encode([], "e2m1", random_bits=3)   # checked even with nothing to round
    with pytest.raises(ValueError, match="random_bits=0 is out of range"):
        encode([], "e2m1", rounding="stochastic", random_bits=0)
    with pytest.raises(ValueError, match="Codebook rounds without it"):
        encode([1.0], floatlab.get_codebook("nf4"), rounding="stochastic", random_bits=3)


def test_encode_checks_its_options_even_for_empty_input():
    with pytest.raises(TypeError, match="saturate must be True or False"):
        encode([], "fp16", saturate="no")
    with pytest.raises(TypeError, match="rounding must be one string"):
        to_bin([], "fp16", rounding=["up"])


def test_encode_refuses_unknown_options():
    with pytest.raises(TypeError, match="unknown option.*dtype"):
        encode(1.0, "fp16", dtype=np.float32)


# --------------------------------------------------------------------------- plots

def test_plot_inputs():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from floatlab import plots

    with pytest.raises(TypeError, match=r"value_bits draws one value, got an array of shape"):
        plots.value_bits([1, 2], "fp16")
    with pytest.raises(TypeError, match="ax must be a matplotlib Axes.*'x'"):
        plots.bit_layout(ax="x")
    with pytest.raises(TypeError, match="negative must be True or False"):
        plots.number_line("e2m1", negative="yes")
    with pytest.raises(TypeError, match="scale must be a positive finite number"):
        plots.zone_fractions([1.0], "fp16", scale="a")
