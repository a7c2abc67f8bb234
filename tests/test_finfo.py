"""finfo and compare_formats: every field against numpy / ml_dtypes, identities, pinned reprs."""

from __future__ import annotations

import dataclasses
import math
import xml.etree.ElementTree as ET

import ml_dtypes
import numpy as np
import pytest

from floatlab.finfo import FInfo, compare_formats, finfo
from floatlab.formats import PRESETS, Format, FormatNameError
from floatlab.grid import nextafter, values
from floatlab.rounding import round as fl_round

NUMPY_FIELDS = (
    "bits", "nexp", "nmant", "eps", "epsneg", "machep", "negep", "precision", "resolution",
    "tiny", "smallest_normal", "smallest_subnormal", "max", "min", "maxexp", "minexp", "iexp",
)
# Where floatlab deliberately differs from the peers (see the FInfo docstring); checked apart.
DOCUMENTED_DIFFERENCES = ("precision", "resolution")

PEER_PRESETS = [name for name in PRESETS if name != "tensorfloat32"]  # tf32 has no dtype
CUSTOM = [
    Format(exp_bits=3, man_bits=2, bias=2),                       # e3m2b2, IEEE-like
    Format(exp_bits=5, man_bits=10, subnormals=False),            # fp16 with FTZ
    Format(exp_bits=4, man_bits=3, special="none"),               # every code finite
    Format(exp_bits=6, man_bits=9),
    Format(exp_bits=2, man_bits=3, bias=0, special="none"),       # 1.0 is a subnormal
]
ALL_FORMATS = [PRESETS[n] for n in PRESETS] + CUSTOM


def peer_finfo(name: str):
    """numpy.finfo for numpy's own dtypes, ml_dtypes.finfo for the rest."""
    dtype = PRESETS[name].to_ml_dtype()
    if name in ("float64", "float32", "float16"):
        return np.finfo(dtype)
    return ml_dtypes.finfo(dtype)


def ids(fmt: Format) -> str:
    return fmt.name


# ------------------------------------------------------------------------------ peers

@pytest.mark.parametrize("name", PEER_PRESETS)
def test_every_field_matches_the_peer(name):
    ours, peer = finfo(name), peer_finfo(name)
    for field in NUMPY_FIELDS:
        if field in DOCUMENTED_DIFFERENCES:
            continue
        theirs = getattr(peer, field)
        mine = getattr(ours, field)
        assert mine == (int(theirs) if isinstance(mine, int) else float(theirs)), field
        assert type(mine) is (int if isinstance(theirs, int) else float), field
    assert ours.dtype == name == np.dtype(peer.dtype).name


@pytest.mark.parametrize("name", PEER_PRESETS)
def test_precision_and_resolution_follow_the_reference(name):
    ours, peer = finfo(name), peer_finfo(name)
    p = PRESETS[name].p
    assert ours.precision == math.floor((p - 1) * math.log10(2))
    assert ours.resolution == float(f"1e-{ours.precision}")
    # Documented difference 1: ml_dtypes hard-codes precision 1 for every 8-bit format; the
    # reference formula gives 0 for p <= 4 (E4M3 / E5M2 families, E8M0), 1 for E3M4 (p = 5).
    if PRESETS[name].bits == 8:
        assert peer.precision == 1
        assert ours.precision == (1 if name == "float8_e3m4" else 0)
    else:
        assert peer.precision == ours.precision
    # Documented difference 2: the peers round 10**-precision into the dtype itself
    # (bfloat16 0.0100098, float32 9.99999997e-07); floatlab keeps it exact.
    dtype = PRESETS[name].to_ml_dtype()
    rounded = float(np.asarray(10.0 ** -peer.precision).astype(dtype))
    assert float(peer.resolution) == rounded


def test_resolution_differs_from_numpy_where_the_reference_says():
    assert finfo("bf16").resolution == 0.01 != float(ml_dtypes.finfo(ml_dtypes.bfloat16).resolution)
    assert finfo("fp32").resolution == 1e-06 != float(np.finfo(np.float32).resolution)
    assert finfo("fp16").resolution == 0.001


def test_tensorfloat32_from_the_reference_table():
    fi = finfo("tf32")
    assert (fi.bits, fi.nexp, fi.nmant, fi.bias, fi.p) == (19, 8, 10, 127, 11)
    assert fi.max == (2 - 2**-10) * 2.0**127
    assert (fi.smallest_normal, fi.smallest_subnormal, fi.eps) == (2.0**-126, 2.0**-136, 2.0**-10)
    assert (fi.precision, fi.resolution, fi.epsneg) == (3, 0.001, 2.0**-11)


def test_e8m0_conventions():
    fi = finfo("float8_e8m0fnu")
    assert fi.min == 2.0**-127 == fi.tiny == fi.smallest_subnormal  # no negative side, no zero
    assert fi.max == 2.0**127
    assert (fi.eps, fi.epsneg, fi.machep, fi.negep) == (1.0, 0.5, 0, -1)
    assert (fi.precision, fi.resolution) == (0, 1.0)
    assert fi.format.smallest_subnormal is None  # the Format says "none"; finfo gives a number


def test_epsneg_is_the_gap_below_one_for_mx_formats():
    # 1.0 is the smallest normal of e2m3 and e2m1: the value below it is a subnormal, eps away.
    assert finfo("e2m3").epsneg == 0.125 == finfo("e2m3").eps
    assert finfo("e2m1").epsneg == 0.5 == finfo("e2m1").eps
    assert finfo("e3m2").epsneg == 0.125 == finfo("e3m2").eps / 2


def test_eps_where_one_is_subnormal():
    # bias 0: the smallest normal is 2, so 1.0 is the subnormal 0.100b × 2^1 and the next value
    # is 1.25. Format.eps (2**-man_bits) describes the spacing relative to a binade instead.
    fmt = Format(exp_bits=2, man_bits=3, bias=0, special="none")
    assert (finfo(fmt).eps, finfo(fmt).machep, fmt.eps) == (0.25, -2, 0.125)


def test_e5m2fnuz_eps_is_derived_not_copied_from_torch():
    # torch.finfo(torch.float8_e5m2fnuz).eps prints 0.125; the value after 1.0 is 1.25.
    v = values("e5m2fnuz")
    assert v[np.searchsorted(v, 1.0) + 1] == 1.25
    assert finfo("e5m2fnuz").eps == 0.25


# ------------------------------------------------------------------------------ identities

@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=ids)
def test_identities(fmt):
    fi = finfo(fmt)
    assert fi.eps == 2.0**fi.machep
    assert fi.epsneg == 2.0**fi.negep
    assert fi.nmant + fi.nexp + int(fmt.signed) == fi.bits
    assert fi.nexp == fi.iexp
    assert (fi.maxexp, fi.minexp) == (fi.emax + 1, fi.emin)
    assert fi.tiny == fi.smallest_normal == 2.0**fi.emin
    assert fi.p == fi.nmant + 1
    assert fi.min == (-fi.max if fmt.signed else fi.smallest_subnormal)


@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=ids)
def test_max_rounds_to_itself_and_the_next_step_overflows(fmt):
    fi = finfo(fmt)
    assert float(fl_round(fi.max, fmt)) == fi.max
    beyond = float(fl_round(fi.max + 2.0 ** (fi.emax - fi.nmant), fmt))
    if fmt.has_inf:
        assert beyond == math.inf
    elif fmt.has_nan:
        assert math.isnan(beyond)
    else:  # no inf, no NaN: the core saturates (documented in floatlab.rounding)
        assert beyond == fi.max


@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=ids)
def test_half_the_smallest_value_rounds_to_zero(fmt):
    fi = finfo(fmt)
    half = float(fl_round(fi.smallest_subnormal / 2, fmt))
    if fmt.has_zero:
        assert half == 0.0
    else:  # E8M0 has no zero: tiny values clamp up to the smallest value
        assert half == fi.smallest_subnormal


@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=ids)
def test_eps_and_epsneg_are_the_gaps_around_one(fmt):
    fi = finfo(fmt)
    if not fi.smallest_subnormal <= 1.0 <= fi.max or float(fl_round(1.0, fmt)) != 1.0:
        pytest.skip("1.0 is not a value of this format")
    assert float(nextafter(1.0, 2.0, fmt)) - 1.0 == fi.eps
    assert 1.0 - float(nextafter(1.0, 0.0, fmt)) == fi.epsneg


def test_precision_is_exact_for_every_width():
    for m in range(0, 53):
        fi = finfo(Format(exp_bits=11, man_bits=m, bias=1023, special="fn" if m == 0 else "ieee"))
        assert fi.precision == math.floor(m * math.log10(2)) == len(str(2**m)) - 1


# ------------------------------------------------------------------------------ the object

def test_accepts_names_formats_and_dtypes_and_caches():
    assert finfo("fp16") is finfo("float16") is finfo(np.float16) is finfo(PRESETS["float16"])
    assert finfo(ml_dtypes.bfloat16) is finfo("bf16")
    assert isinstance(finfo("e4m3fn"), FInfo)


def test_custom_format_keeps_its_own_name():
    # Format equality ignores the name; the cache must not hand back float16's label.
    assert finfo("float16").dtype == "float16"
    assert finfo("e5m10").dtype == "e5m10"
    assert finfo("e5m10") != finfo("float16")
    assert finfo("e5m10").max == finfo("float16").max


def test_immutable_and_hashable():
    fi = finfo("fp16")
    with pytest.raises(dataclasses.FrozenInstanceError):
        fi.eps = 1.0
    assert hash(fi) == hash(finfo("float16"))
    assert len({finfo("fp16"), finfo("half"), finfo("bf16")}) == 2


def test_unknown_and_ambiguous_names_raise_format_name_error():
    with pytest.raises(FormatNameError, match="unknown format name"):
        finfo("fp9")
    with pytest.raises(FormatNameError, match="ambiguous"):
        finfo("e4m3")


# ------------------------------------------------------------------------------ renderings

@pytest.mark.parametrize(
    "name, expected",
    [
        ("float16", "finfo(resolution=0.001, min=-65504, max=65504, eps=0.000976562, "
                    "smallest_normal=6.10352e-05, tiny=6.10352e-05, dtype=float16)"),
        ("bfloat16", "finfo(resolution=0.01, min=-3.38953e+38, max=3.38953e+38, eps=0.0078125, "
                     "smallest_normal=1.17549e-38, tiny=1.17549e-38, dtype=bfloat16)"),
        ("float32", "finfo(resolution=1e-06, min=-3.40282e+38, max=3.40282e+38, eps=1.19209e-07, "
                    "smallest_normal=1.17549e-38, tiny=1.17549e-38, dtype=float32)"),
    ],
)
def test_repr_is_torch_finfo_byte_for_byte(name, expected):
    assert repr(finfo(name)) == expected


def test_repr_of_fp8_and_e8m0():
    assert repr(finfo("e4m3fn")) == (
        "finfo(resolution=1, min=-448, max=448, eps=0.125, smallest_normal=0.015625, "
        "tiny=0.015625, dtype=float8_e4m3fn)"
    )
    assert repr(finfo("e8m0")).startswith("finfo(resolution=1, min=5.87747e-39, max=1.70141e+38,")


def test_str_is_a_table_with_bias_range_subnormal_and_binades():
    text = str(finfo("bf16"))
    for needle in (
        "bias                127",
        "emin = -126 .. emax = 127",
        "smallest subnormal  9.18355e-41      = 2^-133",
        "261 binades",
        "(254 normal)",
        "= 1.1111111b × 2^127",
        "+-inf, NaN, -0",
    ):
        assert needle in text, needle
    assert "no subnormals" in str(finfo("e8m0"))
    assert "unsigned" in str(finfo("e8m0"))


def test_binades():
    assert (finfo("fp16").binades, finfo("fp16").normal_binades) == (40, 30)
    assert (finfo("e2m1").binades, finfo("e2m1").normal_binades) == (4, 3)
    assert finfo("e8m0").binades == finfo("e8m0").normal_binades == 255


@pytest.mark.parametrize("name", ["fp16", "e8m0", "e2m1"])
def test_html_is_well_formed(name):
    root = ET.fromstring(finfo(name)._repr_html_())
    assert root.tag == "table"
    assert len(root.findall("tr")) == len(finfo(name)._rows())


# ------------------------------------------------------------------------------ compare_formats

def test_compare_formats_text_table():
    table = compare_formats(["fp32", "bf16", "fp16", "e4m3fn", "e5m2"])
    lines = str(table).splitlines()
    assert lines[0].split() == ["float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2"]
    rows = dict(table.rows)
    assert rows["max"] == ("3.40282e+38", "3.38953e+38", "65504", "448", "57344")
    assert rows["eps (gap above 1)"] == ("1.19209e-07", "0.0078125", "0.000976562", "0.125", "0.25")
    assert rows["decimal digits"] == ("6", "2", "3", "0", "0")
    assert rows["inf / NaN / -0"][3] == "no/yes/yes"
    assert len(lines) == 1 + len(table.rows)


def test_compare_formats_repr_is_the_table():
    """A REPL echoes repr(): it must show the table, not "FormatComparison(...)"."""
    table = compare_formats(["fp16", "e4m3fn"])
    assert repr(table) == str(table)
    assert repr(table).splitlines()[0].split() == ["float16", "float8_e4m3fn"]
    assert "max" in repr(table) and "448" in repr(table)
    assert not repr(table).startswith("FormatComparison(")


def test_compare_formats_defaults_html_and_errors():
    table = compare_formats()
    assert [i.dtype for i in table.infos][:3] == ["float32", "bfloat16", "float16"]
    root = ET.fromstring(table._repr_html_())
    assert len(root.findall("tr")) == 1 + len(table.rows)
    assert dict(compare_formats(["e8m0"]).rows)["smallest subnormal"] == ("none",)
    assert compare_formats("fp16").infos == (finfo("fp16"),)
    with pytest.raises(ValueError, match="at least one format"):
        compare_formats([])
    with pytest.raises(FormatNameError):
        compare_formats(["fp16", "nope"])


# ------------------------------------------------------------------------------ numpy's inputs

@pytest.mark.parametrize(
    "value, numpy_name",
    [
        (np.float64(1.2), "float64"),
        (1.2, "float64"),  # numpy: a Python float means float64
        (np.float32(1.0), "float32"),
        (np.float16(1.0), "float16"),
        ("f4", "float32"),
        ("f2", "float16"),
        ("f8", "float64"),
        ("<f8", "float64"),
        (">f4", "float32"),
        ("float32", "float32"),
        (np.dtype("f8"), "float64"),
        (np.zeros(3, np.float16), "float16"),
        (np.zeros((2, 2), np.float32), "float32"),
        (np.array(1.5), "float64"),
    ],
    ids=repr,
)
def test_accepts_what_numpy_finfo_accepts(value, numpy_name):
    # numpy 2.4's finfo refuses arrays (older numpy and ml_dtypes.finfo take their dtype).
    fi, peer = finfo(value), np.finfo(value.dtype if isinstance(value, np.ndarray) else value)
    assert fi.dtype == numpy_name == peer.dtype.name
    assert (fi.max, fi.eps, fi.tiny) == (float(peer.max), float(peer.eps), float(peer.tiny))


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn])
def test_ml_dtypes_arrays_and_scalars_stand_for_their_dtype(dtype):
    array = np.zeros(4, dtype)
    assert finfo(array) is finfo(np.dtype(dtype)) is finfo(array[0])
    assert finfo(array).max == float(ml_dtypes.finfo(dtype).max)


def test_numpy_dtype_strings_do_not_suggest_other_formats():
    assert finfo("f4").dtype == "float32"  # used to fail with "Did you mean 'fp4'?"
    with pytest.raises(FormatNameError, match="int32, not a floating-point format"):
        finfo("i4")
    with pytest.raises(TypeError, match="not a floating-point format"):
        finfo(np.zeros(2, np.int32))


# ------------------------------------------------------------------------------ tiny formats


def _small_formats():
    """Every valid small format: E 0..3, M 0..3, biases around the default, every kind."""
    for e in range(4):
        for m in range(4):
            for special in ("ieee", "fn", "fnuz", "none", "p3109"):
                for signed in (True, False):
                    for has_zero, subnormals in ((True, True), (True, False), (False, False)):
                        for bias in range((1 << e >> 1) - 3, (1 << e >> 1) + 3):
                            try:
                                yield Format(e, m, bias=bias, signed=signed, special=special,
                                             subnormals=subnormals, has_zero=has_zero)
                            except ValueError:
                                continue


SMALL_FORMATS = list(_small_formats())


def test_e1m1_limits_are_consistent():
    """e1m1 (IEEE-like, bias 0): the exponent field 1 is all inf / NaN, so the values are
    0, 1 (a subnormal), inf. It used to report smallest_normal 2 above max 1."""
    fi = finfo("e1m1")
    assert (fi.max, fi.smallest_subnormal) == (1.0, 1.0)
    assert fi.smallest_normal is None and fi.tiny is None
    assert fi.normal_binades == 0 and fi.binades == 1
    assert "smallest_normal=none" in repr(fi)
    assert "no normal values" in str(fi)


def test_every_small_format_has_ordered_limits_equal_to_its_decoded_values():
    from oracles import Layout, positive_table

    assert len(SMALL_FORMATS) > 1000
    for fmt in SMALL_FORMATS:
        fi, lay = finfo(fmt), Layout.of(fmt)
        values, codes = positive_table(lay)
        positive = [v for v in values if v > 0]
        is_normal = [(c >> fmt.man_bits) > 0 or not fmt.has_zero for c in codes]
        normals = [v for v, n in zip(values, is_normal, strict=True) if n and v > 0]
        subnormals = [v for v, n in zip(values, is_normal, strict=True) if not n and v > 0]
        where = fmt.name
        assert fi.max == fmt.max == values[-1], where
        assert fi.min == (-fi.max if fmt.signed else values[0]), where
        assert fi.smallest_subnormal == fmt.smallest_positive == positive[0], where
        assert fi.smallest_normal == fi.tiny == fmt.smallest_normal, where
        assert fi.smallest_normal == (normals[0] if normals else None), where
        assert fmt.smallest_subnormal == (subnormals[0] if subnormals else None), where
        assert fmt.has_normals == bool(normals), where
        # ordered: smallest positive <= smallest normal <= max
        assert fi.smallest_subnormal <= (fi.smallest_normal or fi.max) <= fi.max, where
        assert fi.emax == math.frexp(fi.max)[1] - 1, where
        if normals:
            assert fi.emin == math.frexp(normals[0])[1] - 1, where
            assert fi.normal_binades == fi.emax - fi.emin + 1 >= 1, where
        else:
            assert fi.normal_binades == 0 and fi.emax < fi.emin, where
        assert fi.eps == 2.0**fi.machep and fi.epsneg == 2.0**fi.negep, where
        if 1.0 in values:  # eps / epsneg are the gaps to 1.0's neighbours when they exist
            i = values.index(1.0)
            if i + 1 < len(values):
                assert fi.eps == values[i + 1] - 1.0, where
            if i > 0:  # (1.0 is not the smallest value)
                assert fi.epsneg == 1.0 - values[i - 1], where
        repr(fi), str(fi)  # render without error
