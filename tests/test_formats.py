"""The Format model and get_format: names, dtypes, spec strings, derived limits, bad fields.

Limits are checked three ways: against the table in the reference (formats.md, typed in here),
against numpy.finfo / ml_dtypes.finfo, and against the value table decoded from the bit layout
in oracles.py (every code, no floatlab code involved).
"""

from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from oracles import ML_PRESETS, Layout, decode, max_value, ml_dtype, positive_table

import floatlab
from floatlab import PRESETS, Format, FormatNameError, get_format

# name: (E, M, bias, has_inf, max, min normal, min subnormal, eps) -- the reference table.
TABLE = {
    "float64": (11, 52, 1023, True, 1.7976931348623157e308, 2.0**-1022, 2.0**-1074, 2.0**-52),
    "float32": (8, 23, 127, True, 3.4028234663852886e38, 2.0**-126, 2.0**-149, 2.0**-23),
    "tensorfloat32": (8, 10, 127, True, (2 - 2.0**-10) * 2.0**127, 2.0**-126, 2.0**-136, 2.0**-10),
    "float16": (5, 10, 15, True, 65504.0, 2.0**-14, 2.0**-24, 2.0**-10),
    "bfloat16": (8, 7, 127, True, (2 - 2.0**-7) * 2.0**127, 2.0**-126, 2.0**-133, 2.0**-7),
    "float8_e4m3fn": (4, 3, 7, False, 448.0, 2.0**-6, 2.0**-9, 2.0**-3),
    "float8_e5m2": (5, 2, 15, True, 57344.0, 2.0**-14, 2.0**-16, 2.0**-2),
    "float8_e4m3fnuz": (4, 3, 8, False, 240.0, 2.0**-7, 2.0**-10, 2.0**-3),
    "float8_e5m2fnuz": (5, 2, 16, False, 57344.0, 2.0**-15, 2.0**-17, 2.0**-2),
    "float8_e4m3": (4, 3, 7, True, 240.0, 2.0**-6, 2.0**-9, 2.0**-3),
    "float8_e3m4": (3, 4, 3, True, 15.5, 2.0**-2, 2.0**-6, 2.0**-4),
    "float8_e4m3b11fnuz": (4, 3, 11, False, 30.0, 2.0**-10, 2.0**-13, 2.0**-3),
    "float8_e8m0fnu": (8, 0, 127, False, 2.0**127, 2.0**-127, None, 1.0),
    "float6_e2m3fn": (2, 3, 1, False, 7.5, 1.0, 0.125, 2.0**-3),
    "float6_e3m2fn": (3, 2, 3, False, 28.0, 0.25, 0.0625, 2.0**-2),
    "float4_e2m1fn": (2, 1, 1, False, 6.0, 1.0, 0.5, 2.0**-1),
}

# Names a user types -> the canonical preset (case and -/_ variants are tested separately).
ALIASES = {
    "fp64": "float64",
    "double": "float64",
    "binary64": "float64",
    "fp32": "float32",
    "single": "float32",
    "binary32": "float32",
    "tf32": "tensorfloat32",
    "fp16": "float16",
    "half": "float16",
    "binary16": "float16",
    "bf16": "bfloat16",
    "e4m3fn": "float8_e4m3fn",
    "fp8_e4m3fn": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
    "fp8_e5m2": "float8_e5m2",
    "e4m3fnuz": "float8_e4m3fnuz",
    "e5m2fnuz": "float8_e5m2fnuz",
    "e3m4": "float8_e3m4",
    "e4m3b11fnuz": "float8_e4m3b11fnuz",
    "e8m0": "float8_e8m0fnu",
    "e8m0fnu": "float8_e8m0fnu",
    "fp4": "float4_e2m1fn",
    "e2m1fn": "float4_e2m1fn",
    "e2m3fn": "float6_e2m3fn",
    "e3m2fn": "float6_e3m2fn",
}

AMBIGUOUS = {
    "e4m3": {"float8_e4m3fn": 448, "float8_e4m3": 240, "float8_e4m3fnuz": 240},
    "fp8_e4m3": {"float8_e4m3fn": 448, "float8_e4m3": 240, "float8_e4m3fnuz": 240},
    "fp8": {"float8_e4m3fn": 448, "float8_e5m2": 57344},
    "fp6": {"float6_e2m3fn": 7.5, "float6_e3m2fn": 28},
}


# --------------------------------------------------------------------------- name resolution


def test_every_preset_is_in_the_reference_table_and_vice_versa():
    assert set(PRESETS) == set(TABLE)
    assert floatlab.format_names() == list(PRESETS)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_every_preset_name_resolves_to_itself(name):
    fmt = get_format(name)
    assert fmt is PRESETS[name]
    assert fmt.name == name
    assert get_format(fmt) is fmt


@pytest.mark.parametrize("alias, canonical", sorted(ALIASES.items()))
def test_aliases_resolve(alias, canonical):
    assert get_format(alias) is PRESETS[canonical]


def test_every_registered_alias_resolves_to_a_preset():
    from floatlab import formats

    aliases = getattr(formats, "_ALIASES", {})
    for alias, target in aliases.items():
        assert get_format(alias) is PRESETS[target], alias


@pytest.mark.parametrize(
    "spelling, canonical",
    [
        ("FP16", "float16"),
        ("Bf16", "bfloat16"),
        ("FLOAT8_E4M3FN", "float8_e4m3fn"),
        ("float8-e4m3fn", "float8_e4m3fn"),
        ("  fp32 ", "float32"),
        ("E5M2", "float8_e5m2"),
        ("Float4_E2M1FN", "float4_e2m1fn"),
        ("TF32", "tensorfloat32"),
    ],
)
def test_names_are_case_insensitive_and_forgiving(spelling, canonical):
    assert get_format(spelling) is PRESETS[canonical]


@pytest.mark.parametrize("name", ML_PRESETS + ("float32", "float64"))
def test_numpy_and_ml_dtypes_resolve(name):
    dtype = ml_dtype(name)
    assert get_format(dtype) is PRESETS[name]
    assert get_format(dtype.type) is PRESETS[name]  # np.float16, ml_dtypes.bfloat16, ...
    assert PRESETS[name].to_ml_dtype() == dtype


def test_byte_order_does_not_matter_for_dtypes():
    assert get_format(np.dtype(">f2")) is PRESETS["float16"]


@pytest.mark.parametrize("name, candidates", sorted(AMBIGUOUS.items()))
def test_ambiguous_names_are_refused_with_candidates_and_maxima(name, candidates):
    with pytest.raises(FormatNameError) as info:
        get_format(name)
    message = str(info.value)
    assert "ambiguous" in message
    for candidate, maximum in candidates.items():
        # the candidate, then its maximum before the next candidate
        assert re.search(rf"{candidate}\b[^,;]*?\b{maximum:g}\b", message), (candidate, message)
    with pytest.raises(FormatNameError):  # case does not sneak past the check
        get_format(name.upper())


def test_format_name_error_is_a_value_error():
    assert issubclass(FormatNameError, ValueError)


@pytest.mark.parametrize(
    "typo, suggestion",
    [("flaot16", "float16"), ("bfloat61", "bfloat16"), ("float8_e4m3f", "float8_e4m3fn")],
)
def test_unknown_names_suggest_close_names(typo, suggestion):
    with pytest.raises(FormatNameError) as info:
        get_format(typo)
    message = str(info.value)
    assert "unknown format name" in message and repr(typo) in message
    assert "Did you mean" in message and repr(suggestion) in message


def test_unknown_name_without_close_match_lists_known_formats():
    with pytest.raises(FormatNameError) as info:
        get_format("zzzz")
    message = str(info.value)
    assert "Did you mean" not in message
    assert all(name in message for name in PRESETS)
    assert "e3m4" in message  # tells about spec strings


@pytest.mark.parametrize(
    "bad", [None, 3, 2.5, True, object(), np.dtype(np.int32), np.dtype(np.complex64)]
)
def test_non_format_objects_raise_type_error(bad):
    with pytest.raises(TypeError) as info:
        get_format(bad)
    message = str(info.value)
    assert "format" in message
    if isinstance(bad, np.dtype):
        assert bad.name in message and "float16" in message  # says what is known
    else:
        assert "'fp16'" in message  # shows what to pass


# --------------------------------------------------------------------------- spec strings


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("e5m10", PRESETS["float16"]),
        ("e8m7", PRESETS["bfloat16"]),
        ("e8m23", PRESETS["float32"]),
        ("e11m52", PRESETS["float64"]),
        ("e8m10", PRESETS["tensorfloat32"]),
        ("e4m3b11fnuz", PRESETS["float8_e4m3b11fnuz"]),
        ("e4m3b8fnuz", PRESETS["float8_e4m3fnuz"]),
        ("e5m3fn", Format(5, 3, special="fn")),
        ("E6M9", Format(6, 9)),
        ("e3m3", Format(3, 3)),
        ("e5m2b10", Format(5, 2, bias=10)),
    ],
)
def test_spec_strings_build_formats(spec, expected):
    fmt = get_format(spec)
    assert fmt == expected
    assert (fmt.exp_bits, fmt.man_bits, fmt.bias, fmt.special) == (
        expected.exp_bits,
        expected.man_bits,
        expected.bias,
        expected.special,
    )


def test_spec_strings_are_ieee_like_by_default():
    fmt = get_format("e6m9")
    assert fmt.special == "ieee" and fmt.bias == 31 and fmt.subnormals
    assert fmt.max == (2 - 2.0**-9) * 2.0**31 == 4290772992.0
    assert fmt.smallest_subnormal == 2.0 ** (-30 - 9)
    assert get_format("e3m3").max == (2 - 2.0**-3) * 2.0**3  # 15: IEEE-like, not an fn max


def test_spec_string_with_impossible_fields_explains():
    with pytest.raises(ValueError, match="exp_bits=12 is out of range"):
        get_format("e12m3")


# --------------------------------------------------------------------------- derived limits


@pytest.mark.parametrize("name", sorted(TABLE))
def test_limits_match_the_reference_table(name):
    E, M, bias, has_inf, top, normal, subnormal, eps = TABLE[name]
    fmt = PRESETS[name]
    assert (fmt.exp_bits, fmt.man_bits, fmt.bias) == (E, M, bias)
    assert fmt.p == M + 1
    assert fmt.has_inf is has_inf
    assert fmt.max == top
    assert fmt.smallest_normal == normal
    assert fmt.smallest_subnormal == subnormal
    assert fmt.eps == eps
    assert fmt.unit_roundoff == eps / 2 == 2.0**-fmt.p
    if name == "float8_e8m0fnu":
        assert fmt.min == fmt.smallest_positive == 2.0**-127  # unsigned: min is not -max
        assert fmt.bits == 8 and not fmt.signed
    else:
        assert fmt.min == -top
        assert fmt.smallest_positive == subnormal
    for value in (fmt.max, fmt.smallest_normal, fmt.eps):
        assert type(value) is float  # plain Python floats, exact


@pytest.mark.parametrize("name", ML_PRESETS + ("float32", "float64"))
def test_limits_match_finfo(name):
    dtype = ml_dtype(name)
    info = np.finfo(dtype) if name in ("float16", "float32", "float64") else ml_dtypes.finfo(dtype)
    fmt = PRESETS[name]
    assert fmt.bits == info.bits
    assert fmt.max == float(info.max)
    assert fmt.smallest_normal == float(info.smallest_normal)
    assert fmt.eps == float(info.eps)
    assert fmt.man_bits == info.nmant and fmt.exp_bits == info.nexp
    assert fmt.emax == info.maxexp - 1  # maxexp is the first power of two that overflows
    assert fmt.emin == info.minexp
    if name == "float8_e8m0fnu":
        # Disagreement (convention, not a bug): ml_dtypes reports smallest_subnormal = 2**-127
        # (= smallest_normal) for E8M0, which has no subnormals; floatlab and the reference
        # table say None. Both agree on the smallest positive value.
        assert fmt.smallest_subnormal is None
        assert fmt.smallest_positive == float(info.smallest_subnormal)
    else:
        assert fmt.smallest_subnormal == float(info.smallest_subnormal)


@pytest.mark.parametrize("name", ML_PRESETS)
def test_oracle_value_table_matches_ml_dtypes_views(name):
    """The test oracle itself: decoding every code from the bit layout == ml_dtypes/numpy."""
    fmt, dtype = PRESETS[name], ml_dtype(name)
    lay = Layout.of(fmt)
    codes = np.arange(1 << lay.bits, dtype=np.uint16 if lay.bits == 16 else np.uint8)
    with np.errstate(invalid="ignore"):
        theirs = codes.view(dtype).astype(np.float64)  # fp4 / fp6: the low bits of a byte
    ours = np.array([decode(lay, int(c)) for c in codes], dtype=np.float64)
    assert np.array_equal(ours, theirs, equal_nan=True)
    number = ~np.isnan(ours)  # NaN signs are not portable: compare NaN-ness only
    assert np.array_equal(np.signbit(ours[number]), np.signbit(theirs[number]))  # -0 included


@pytest.mark.parametrize(
    "fmt",
    [PRESETS[n] for n in TABLE if PRESETS[n].bits <= 16]
    + [
        Format(3, 4),
        Format(5, 2, special="fn"),
        Format(4, 3, subnormals=False),
        Format(3, 2, special="fnuz"),
        Format(2, 2, special="none"),
        Format(5, 4, bias=3),
        Format(4, 0, special="fn", signed=False, subnormals=False, has_zero=False),
    ],
    ids=lambda f: f.name,
)
def test_limits_equal_the_decoded_value_table(fmt):
    """max, smallest normal/subnormal and eps, derived by floatlab, == the decoded values."""
    lay = Layout.of(fmt)
    values, codes = positive_table(lay)
    positive = [v for v in values if v > 0]
    assert fmt.max == values[-1] == max_value(lay)
    assert fmt.max_code == codes[-1]
    assert fmt.smallest_positive == positive[0]
    normals = [
        v for v, c in zip(values, codes, strict=True) if (c >> lay.man_bits) > 0 or not lay.has_zero
    ]
    assert fmt.smallest_normal == normals[0]
    subnormals = [v for v in positive if v < normals[0]]
    assert fmt.smallest_subnormal == (subnormals[0] if subnormals else None)
    if 1.0 in values and values.index(1.0) + 1 < len(values):
        assert fmt.eps == values[values.index(1.0) + 1] - 1.0
    assert fmt.emax == math.frexp(fmt.max)[1] - 1
    assert fmt.emin == math.frexp(fmt.smallest_normal)[1] - 1


@pytest.mark.parametrize("name", ML_PRESETS)
def test_nan_and_inf_codes_match_ml_dtypes(name):
    fmt, dtype = PRESETS[name], ml_dtype(name)
    uint = np.uint16 if fmt.bits == 16 else np.uint8
    lay = Layout.of(fmt)
    nan_code = np.array(np.nan, dtype=np.float32).astype(dtype).view(uint)
    # floatlab's canonical NaN is the positive quiet NaN ml_dtypes / numpy produce (fp4/fp6 have
    # none: ml_dtypes turns NaN into -0 there, which is why floatlab raises instead).
    if fmt.has_nan:
        assert fmt.nan_code == int(nan_code)
        assert math.isnan(decode(lay, fmt.nan_code))
    else:
        assert fmt.nan_code is None
    if fmt.has_inf:
        inf_code = np.array(np.inf, dtype=np.float32).astype(dtype).view(uint)
        assert fmt.inf_code == int(inf_code)
        assert decode(lay, fmt.inf_code) == math.inf
    else:
        assert fmt.inf_code is None


def test_tensorfloat32_comes_from_the_table_not_a_dtype():
    tf32 = get_format("tf32")
    assert tf32.bits == 19 and tf32.p == 11
    assert tf32.max == (2 - 2.0**-10) * 2.0**127 == 3.4011621342146535e38
    assert tf32.smallest_subnormal == 2.0**-136
    with pytest.raises(ValueError, match="no numpy or ml_dtypes dtype"):
        tf32.to_ml_dtype()


@pytest.mark.parametrize(
    "fmt, top, normal, subnormal",
    [
        (Format(3, 4), 15.5, 0.25, 2.0**-6),
        (Format(5, 2, special="fn"), 98304.0, 2.0**-14, 2.0**-16),  # all-ones exponent is finite
        (Format(4, 3, subnormals=False), 240.0, 2.0**-6, None),
        (Format(4, 3, special="fn"), 448.0, 2.0**-6, 2.0**-9),
        (Format(2, 1, special="none"), 6.0, 1.0, 0.5),
    ],
)
def test_custom_format_limits(fmt, top, normal, subnormal):
    assert (fmt.max, fmt.smallest_normal, fmt.smallest_subnormal) == (top, normal, subnormal)


def test_format_equality_ignores_the_name():
    assert Format(5, 10) == PRESETS["float16"]
    assert hash(Format(5, 10)) == hash(PRESETS["float16"])
    assert Format(4, 3, special="fn") == PRESETS["float8_e4m3fn"]
    assert Format(4, 3) != PRESETS["float8_e4m3fn"]


def test_different_formats_get_different_default_names():
    """A custom name identifies the encoding: two different formats must not share one.

    Format(2, 1, special="fn") (NaN at all ones, max 4) and Format(2, 1, special="none")
    (no NaN, max 6) are different formats.
    """
    fn, none = Format(2, 1, special="fn"), Format(2, 1, special="none")
    assert fn != none and fn.max != none.max
    assert fn.name != none.name


def test_formats_are_immutable():
    with pytest.raises(AttributeError):
        PRESETS["float16"].man_bits = 3  # type: ignore[misc]


# --------------------------------------------------------------------------- invalid fields


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(exp_bits=-1, man_bits=3), ValueError, ["exp_bits=-1", "0..11"]),
        (dict(exp_bits=12, man_bits=3), ValueError, ["exp_bits=12", "0..11"]),
        (dict(exp_bits=0, man_bits=3), ValueError, ["exp_bits=0", "inf / NaN", "'p3109'"]),
        (dict(exp_bits=0, man_bits=3, special="fnuz", subnormals=False), ValueError,
         ["exp_bits=0", "subnormals=True"]),
        (dict(exp_bits=4, man_bits=3, special="p3109", has_zero=False, subnormals=False),
         ValueError, ["p3109", "has_zero=True"]),
        # FNUZ's NaN would take -smallest's code: round(-0.25, e2m2fnuz_nozero) was -0.25,
        # whose code 0x10 decodes as NaN.
        (dict(exp_bits=2, man_bits=2, special="fnuz", has_zero=False, subnormals=False),
         ValueError, ["fnuz", "-smallest", "has_zero=True"]),
        (dict(exp_bits=4, man_bits=-1), ValueError, ["man_bits=-1", "0..52"]),
        (dict(exp_bits=4, man_bits=53), ValueError, ["man_bits=53", "0..52"]),
        (dict(exp_bits=4.0, man_bits=3), TypeError, ["exp_bits", "int"]),
        (dict(exp_bits=True, man_bits=3), TypeError, ["exp_bits", "int"]),
        (dict(exp_bits=4, man_bits="3"), TypeError, ["man_bits", "int"]),
        (dict(exp_bits=4, man_bits=3, special="ocp"), ValueError, ["special='ocp'", "'fnuz'"]),
        (dict(exp_bits=8, man_bits=0), ValueError, ["man_bits >= 1", "special='fn'"]),
        (dict(exp_bits=4, man_bits=3, special="fnuz", signed=False), ValueError, ["sign bit"]),
        (dict(exp_bits=4, man_bits=3, has_zero=False), ValueError, ["subnormals=False"]),
        (dict(exp_bits=11, man_bits=52, bias=0), ValueError, ["float64", "bias"]),
        (dict(exp_bits=11, man_bits=52, special="fn"), ValueError, ["float64"]),
    ],
)
def test_invalid_fields_raise_with_a_clear_message(kwargs, error, words):
    with pytest.raises(error) as info:
        Format(**kwargs)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("bias", [7.5, "7", np.float64(7.0)])
def test_non_integer_bias_is_refused(bias):
    """bias must be an int like exp_bits/man_bits; a float bias used to build a broken Format
    (construction succeeded, then .max raised "Expected an int as second argument to ldexp")."""
    with pytest.raises(TypeError, match="bias"):
        Format(4, 3, bias=bias)


@pytest.mark.parametrize("field", ["signed", "subnormals", "has_zero"])
def test_non_bool_flags_are_refused(field):
    """signed="no" is truthy: accepting it silently builds the opposite of what was meant."""
    with pytest.raises(TypeError, match=field):
        Format(4, 3, special="fn", **{field: "no"})


# --------------------------------------------------------------------------- names round-trip

SPECIALS = ("ieee", "fn", "fnuz", "none", "p3109")


def _try_format(**fields) -> Format | None:
    try:
        return Format(**fields)
    except ValueError:  # an impossible combination (e.g. fnuz without a sign bit)
        return None


@st.composite
def any_format(draw) -> Format:
    """Any valid Format: every field combination, biases around the default and far off."""
    exp_bits = draw(st.integers(0, 11))
    man_bits = draw(st.integers(0, 52))
    special = draw(st.sampled_from(SPECIALS))
    signed, has_zero = draw(st.booleans()), draw(st.booleans())
    subnormals = draw(st.booleans()) and has_zero
    bias = draw(st.one_of(st.none(), st.integers(-1100, 1100)))
    fmt = _try_format(
        exp_bits=exp_bits, man_bits=man_bits, bias=bias, signed=signed, special=special,
        subnormals=subnormals, has_zero=has_zero,
    )
    assume(fmt is not None)
    return fmt


@given(any_format())
def test_every_default_name_parses_back_to_an_equal_format(fmt):
    assert get_format(fmt.name) == fmt
    assert get_format(fmt.name.upper()) == fmt  # names are case-insensitive


@given(any_format(), any_format())
def test_different_formats_never_share_a_default_name(a, b):
    assert (a.name == b.name) == (a == b)


def test_default_names_of_every_small_format_are_unique_and_round_trip():
    """Exhaustive over small widths: every field combination, biases default-3..default+3."""
    seen: dict[str, Format] = {}
    for e in range(0, 5):
        for m in range(0, 4):
            for special in SPECIALS:
                for signed in (True, False):
                    for has_zero, subnormals in ((True, True), (True, False), (False, False)):
                        for bias in range(-3 + (1 << e >> 1), 4 + (1 << e >> 1)):
                            fmt = _try_format(
                                exp_bits=e, man_bits=m, bias=bias, signed=signed,
                                special=special, subnormals=subnormals, has_zero=has_zero,
                            )
                            if fmt is None:
                                continue
                            assert seen.setdefault(fmt.name, fmt) == fmt, fmt.name
                            assert get_format(fmt.name) == fmt, fmt.name
    assert len(seen) > 2000


@pytest.mark.parametrize(
    "fmt, name",
    [
        # These short spellings are presets' aliases (MX fp4/fp6) or ambiguous (e4m3): the
        # IEEE-like custom formats spell their kind out.
        (Format(2, 1), "e2m1_ieee"),
        (Format(2, 3), "e2m3_ieee"),
        (Format(3, 2), "e3m2_ieee"),
        (Format(4, 3), "e4m3_ieee"),
        (Format(4, 3, bias=11), "e4m3b11_ieee"),  # "e4m3b11" is float8_e4m3b11fnuz's alias
        (Format(2, 1, special="fn"), "e2m1fn_nan"),
        (Format(4, 3, bias=-5), "e4m3b-5"),
        (Format(5, 3, bias=16, signed=False, special="fn"), "e5m3b16fn_unsigned"),
        (Format(5, 3, bias=16, signed=False, special="fn", has_zero=False, subnormals=False),
         "e5m3b16fnu"),
        (Format(5, 2, signed=False), "e5m2_unsigned"),
        (Format(4, 3, has_zero=False, subnormals=False, special="none"), "e4m3fn_nonan_nozero"),
        (Format(4, 3, subnormals=False), "e4m3_ftz"),
        (Format(5, 2, special="p3109"), "e5m2_p3109"),
        (Format(0, 7, special="fnuz"), "e0m7fnuz"),
        # A custom format with a preset's encoding and short name takes the preset's name.
        (Format(5, 2), "float8_e5m2"),
        (Format(5, 10), "e5m10"),  # spelled like no alias: keeps its spec name
    ],
)
def test_listed_names(fmt, name):
    assert fmt.name == name
    assert get_format(name) == fmt


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("e4m3b-5", Format(4, 3, bias=-5)),
        ("E4M3B-5FN", Format(4, 3, bias=-5, special="fn")),
        ("e2m1_ieee", Format(2, 1)),
        ("e2m1ieee", Format(2, 1)),
        ("e5m3b16fn_unsigned", Format(5, 3, bias=16, signed=False, special="fn")),
        ("e5m3b16fnu", Format(5, 3, bias=16, signed=False, special="fn", has_zero=False,
                              subnormals=False)),
        ("e5m3b16fn_unsigned_nozero", get_format("e5m3b16fnu")),
        ("e4m3b11fnuz", PRESETS["float8_e4m3b11fnuz"]),
        ("e5m2fn_nan", Format(5, 2, special="fn")),
        ("e5m2fn_nonan", Format(5, 2, special="none")),
        ("e5m10_ftz", Format(5, 10, subnormals=False)),
        ("e5m2_p3109", get_format("p3109_k8p3se")),
    ],
)
def test_spec_grammar(spec, expected):
    fmt = get_format(spec)
    assert fmt == expected
    assert fmt.bias == expected.bias


def test_the_issue_cases_no_longer_collide():
    assert get_format(Format(2, 1).name).max == 3.0 != get_format("e2m1").max
    with_zero = Format(5, 3, bias=16, signed=False, special="fn")
    without = Format(5, 3, bias=16, signed=False, special="fn", has_zero=False, subnormals=False)
    assert with_zero.name != without.name
    assert get_format(with_zero.name).has_zero and not get_format(without.name).has_zero


def test_unsigned_format_with_zero_has_min_zero():
    fmt = Format(5, 3, bias=16, signed=False, special="fn")
    assert fmt.min == 0.0 == min(positive_table(Layout.of(fmt))[0])
    assert PRESETS["float8_e8m0fnu"].min == 2.0**-127  # no zero: min is the smallest value


@pytest.mark.parametrize(
    "name, expected",
    [("f4", "float32"), ("f2", "float16"), ("<f8", "float64"), (">f4", "float32"),
     ("float32", "float32"), ("e", "float16"), ("d", "float64")],
)
def test_numpy_dtype_strings_resolve(name, expected):
    assert get_format(name) is PRESETS[expected]


def test_numpy_non_float_dtype_strings_are_refused_by_name():
    with pytest.raises(FormatNameError, match="'i4' is the numpy dtype int32"):
        get_format("i4")


def test_fixed_point_and_codebooks_where_a_float_format_is_needed():
    # the README said they work 'wherever a format does'; finfo, ulp, FloatArray, the plots and
    # error_profile said 'expected a format name ..., got FixedPoint' (error_profile: 'formats
    # must be a format or a list of them'): now the error says what they are and where they work
    import floatlab

    for element in (floatlab.FixedPoint(8, 4), floatlab.get_codebook("nf4")):
        for call in (lambda e: floatlab.finfo(e), lambda e: floatlab.ulp(0.3, e),
                     lambda e: floatlab.array([0.3], e),
                     lambda e: floatlab.error_profile(lambda x: x, [0.3], e)):
            with pytest.raises(TypeError, match=r"is not a floating-point Format: fixed point "
                               r"and codebooks work in floatlab.round, encode"):
                call(element)
        assert floatlab.round(0.3, element).shape == ()  # where they do work
