"""Describe any binary floating-point format by its encoding rules.

A :class:`Format` holds only the encoding rules (exponent and mantissa widths, bias, sign bit,
where infinities and NaNs live, whether subnormals and zero exist). Every limit -- emax, emin,
max, the smallest normal and subnormal, the codes of NaN and +-inf -- is *derived* from those
fields, so a custom format gets them for free and no table of constants can drift.

>>> from floatlab import get_format
>>> fp16 = get_format("fp16")
>>> fp16.max, fp16.smallest_normal, fp16.smallest_subnormal
(65504.0, 6.103515625e-05, 5.960464477539063e-08)
>>> get_format("E4M3FN").max
448.0
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import numpy as np

__all__ = [
    "Format",
    "FormatNameError",
    "get_format",
    "format_names",
    "PRESETS",
]

SpecialValues = Literal["ieee", "fn", "fnuz", "none", "p3109"]

_SPECIAL_HELP = {
    "ieee": "IEEE 754: the all-ones exponent holds +-inf (mantissa 0) and NaN (mantissa != 0)",
    "fn": "finite: no inf; NaN only where exponent and mantissa are all ones",
    "fnuz": "finite, unsigned zero: no inf, no -0; the only NaN is the code 100...0",
    "none": "no inf and no NaN: every code is a finite number",
    "p3109": "IEEE P3109 extended: +-inf at the largest codes of each sign (0x7f / 0xff), "
    "one NaN at the negative-zero code 100...0, no -0 (unsigned: NaN all ones, +inf below it)",
}


class FormatNameError(ValueError):
    """A format name that floatlab cannot resolve (unknown or ambiguous)."""


def _default_bias(exp_bits: int, special: str) -> int:
    """IEEE's ``2**(E-1) - 1``; FNUZ and P3109 use ``2**(E-1)`` (their NaN took over -0, not
    the top binade); 0 without exponent bits."""
    if exp_bits == 0:
        return 0
    return (1 << (exp_bits - 1)) - (0 if special in ("fnuz", "p3109") else 1)



@dataclass(frozen=True)
class Format:
    """A binary floating-point format, described by its encoding rules.

    Parameters
    ----------
    exp_bits : exponent field width, 0..11 (0: every code is zero or subnormal, as in the
        P3109 format with P = K; such a format has no normal values).
    man_bits : stored mantissa (fraction) bits, 0..52; the hidden bit is not counted.
    bias : exponent bias; defaults to the IEEE value ``2**(exp_bits-1) - 1``, or
        ``2**(exp_bits-1)`` for ``"fnuz"`` and ``"p3109"`` (0 when exp_bits is 0).
    signed : whether there is a sign bit (E8M0 has none).
    special : where inf / NaN live: ``"ieee"``, ``"fn"``, ``"fnuz"``, ``"none"`` or ``"p3109"``.
    subnormals : whether the exponent field 0 encodes subnormals (else only zero).
    has_zero : whether zero exists; without it the exponent field 0 is an ordinary binade (E8M0).
    name : a display name; custom formats get a spec name (``"e3m4"``, ``"e4m3b-5fn"``...)
        that :func:`get_format` parses back to an equal Format (the grammar is in its docstring).

    Every value of a Format is exactly representable as a float64, so formats whose range or
    precision exceeds float64 are refused.

    >>> f = Format(exp_bits=3, man_bits=4)          # an IEEE-like E3M4
    >>> f.bits, f.bias, f.max, f.smallest_subnormal
    (8, 3, 15.5, 0.015625)
    >>> Format(exp_bits=4, man_bits=3, special="fn").max   # OCP E4M3: all-ones exponent is finite
    448.0
    """

    exp_bits: int
    man_bits: int
    bias: int | None = None
    signed: bool = True
    special: SpecialValues = "ieee"
    subnormals: bool = True
    has_zero: bool = True
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        for attr in ("exp_bits", "man_bits", "bias"):
            value = getattr(self, attr)
            if attr == "bias" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"Format.{attr} must be an int, got {value!r}")
            object.__setattr__(self, attr, int(value))
        for attr in ("signed", "subnormals", "has_zero"):
            value = getattr(self, attr)
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"Format.{attr} must be True or False, got {value!r}")
            object.__setattr__(self, attr, bool(value))
        if not 0 <= self.exp_bits <= 11:
            raise ValueError(
                f"exp_bits={self.exp_bits} is out of range: use 0..11 (float64 has 11)"
            )
        if not 0 <= self.man_bits <= 52:
            raise ValueError(
                f"man_bits={self.man_bits} is out of range: use 0..52 (float64 has 52)"
            )
        if self.special not in _SPECIAL_HELP:
            raise ValueError(
                f"special={self.special!r} is not one of {sorted(_SPECIAL_HELP)}: "
                + "; ".join(f"{k!r} = {v}" for k, v in _SPECIAL_HELP.items())
            )
        if self.bias is None:
            object.__setattr__(self, "bias", _default_bias(self.exp_bits, self.special))
        if self.exp_bits == 0:
            if self.special == "ieee":
                raise ValueError(
                    "exp_bits=0 leaves no all-ones exponent field for IEEE inf / NaN: use "
                    "special='p3109', 'fnuz', 'fn' or 'none'"
                )
            if not (self.has_zero and self.subnormals):
                raise ValueError(
                    "with exp_bits=0 every code has exponent field 0, i.e. is zero or "
                    "subnormal: pass has_zero=True and subnormals=True"
                )
        if self.special == "p3109" and not self.has_zero:
            raise ValueError(
                "special='p3109' keeps zero at code 0 (its NaN replaces -0): pass has_zero=True"
            )
        if self.special == "ieee" and self.man_bits == 0:
            raise ValueError(
                "an IEEE-style format needs man_bits >= 1 to tell inf from NaN; "
                "use special='fn' (NaN at all ones, like E8M0) or 'none'"
            )
        if self.special == "fnuz" and not self.signed:
            raise ValueError(
                "special='fnuz' puts NaN at the negative-zero code; it needs a sign bit"
            )
        if not self.has_zero and self.subnormals:
            raise ValueError(
                "a format without zero cannot have subnormals (the exponent field 0 is an "
                "ordinary binade): pass subnormals=False"
            )
        if self.max_code < self.min_positive_code:
            raise ValueError("this encoding leaves no finite positive value")
        # floatlab's values leave it as float64, exactly: refuse what float64 cannot hold.
        if self.emax > 1023 or self.emin < -1022:
            raise ValueError(
                f"exponent range [{self.emin}, {self.emax}] with bias {self.bias} does not fit "
                "in float64 (emax <= 1023, emin >= -1022): choose a smaller exp_bits "
                "or another bias"
            )
        if not self.name:
            object.__setattr__(self, "name", self._default_name())

    # ------------------------------------------------------------------ naming
    def _default_name(self) -> str:
        """The spec name (grammar in :func:`get_format`): every field that differs from the
        defaults is spelled out, so different formats get different names. Where the plain
        spelling is a preset's alias (``"e2m1"`` is the MX fp4) or ambiguous (``"e4m3"``), the
        kind is made explicit (``"e2m1_ieee"``, ``"e2m1fn_nan"``) unless the format *is* that
        preset, which then lends its name."""
        name = _spec_name(self, explicit_kind=False)
        taken = _registered(name)
        if taken is None:
            return name
        if taken == self:
            return taken.name
        return _spec_name(self, explicit_kind=True)

    def __repr__(self) -> str:
        return (
            f"Format({self.name!r}: {self.bits} bits = "
            f"{'1 sign + ' if self.signed else ''}{self.exp_bits} exponent + "
            f"{self.man_bits} mantissa, bias {self.bias}, {self.special}, max {self.max:g})"
        )

    # ------------------------------------------------------------------ layout
    @property
    def bits(self) -> int:
        """Total storage width in bits."""
        return int(self.signed) + self.exp_bits + self.man_bits

    @property
    def p(self) -> int:
        """Significand precision in bits, counting the hidden bit."""
        return self.man_bits + 1

    @property
    def code_dtype(self) -> np.dtype:
        """The smallest unsigned integer dtype that holds one code."""
        for dtype in (np.uint8, np.uint16, np.uint32, np.uint64):
            if self.bits <= np.dtype(dtype).itemsize * 8:
                return np.dtype(dtype)
        raise AssertionError("unreachable: bits <= 64 by construction")

    @property
    def exp_field_max(self) -> int:
        """The all-ones exponent field."""
        return 2**self.exp_bits - 1

    @property
    def sign_mask(self) -> int:
        """The sign bit's mask (0 for unsigned formats)."""
        return 1 << (self.exp_bits + self.man_bits) if self.signed else 0

    # ------------------------------------------------------------------ special values
    @property
    def has_inf(self) -> bool:
        return self.special in ("ieee", "p3109")

    @property
    def has_nan(self) -> bool:
        return self.special != "none"

    @property
    def has_negative_zero(self) -> bool:
        return self.signed and self.has_zero and self.special not in ("fnuz", "p3109")

    @property
    def has_normals(self) -> bool:
        """Whether any code is a normal number (not so when every finite code is zero or
        subnormal: exp_bits 0, or an IEEE-style exp_bits 1 whose field 1 is all inf / NaN)."""
        return not self.has_zero or self.max_code >= 1 << self.man_bits

    @property
    def min_positive_code(self) -> int:
        """The code of the smallest positive value."""
        if not self.has_zero:
            return 0
        return 1 if self.subnormals else 1 << self.man_bits

    @property
    def max_code(self) -> int:
        """The code of the largest finite value (``+max``)."""
        all_ones = (1 << (self.exp_bits + self.man_bits)) - 1
        if self.special == "ieee":  # the all-ones exponent is reserved for inf / NaN
            return (self.exp_field_max << self.man_bits) - 1
        if self.special == "fn":  # only the all-ones code is NaN
            return all_ones - 1
        if self.special == "p3109":  # +inf just below it (unsigned: NaN at all ones, then inf)
            return all_ones - (1 if self.signed else 2)
        return all_ones  # fnuz (NaN is the -0 code) and none

    @property
    def inf_code(self) -> int | None:
        """The code of +inf, or None for formats without inf (-inf is it with the sign bit)."""
        if self.special == "p3109":
            return self.max_code + 1
        return self.exp_field_max << self.man_bits if self.has_inf else None

    @property
    def nan_code(self) -> int | None:
        """floatlab's canonical NaN code (positive quiet NaN), or None if there is no NaN.

        IEEE formats: exponent all ones, top mantissa bit set (fp16 0x7e00, bf16 0x7fc0,
        fp32 0x7fc00000). FN formats: all ones (E4M3FN 0x7f, E8M0 0xff). FNUZ: 0x80.
        P3109: 0x80 (the -0 code) when signed, all ones (0xff) when unsigned.
        """
        if self.special == "p3109" and not self.signed:
            return (1 << (self.exp_bits + self.man_bits)) - 1
        if self.special == "ieee":
            return (self.exp_field_max << self.man_bits) | (1 << (self.man_bits - 1))
        if self.special == "fn":
            return (1 << (self.exp_bits + self.man_bits)) - 1
        if self.special in ("fnuz", "p3109"):
            return self.sign_mask
        return None

    # ------------------------------------------------------------------ exponent range
    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal binade."""
        # With zero, the exponent field 0 holds zero and subnormals; without, it is a binade.
        return (1 if self.has_zero else 0) - self.bias

    @property
    def emax(self) -> int:
        """Unbiased exponent of the largest finite value's binade, ``floor(log2(max))``.

        Below emin when the format has no normal values (then max is a subnormal).
        """
        exp_field = self.max_code >> self.man_bits
        if exp_field == 0 and self.has_zero:  # max is subnormal: its top bit sets the binade
            return self.emin - self.man_bits + self.max_code.bit_length() - 1
        return exp_field - self.bias

    # ------------------------------------------------------------------ limits (exact floats)
    def _code_magnitude(self, code: int) -> float:
        """Exact value of a non-special, non-negative code (pure Python, for limits)."""
        exp_field, mantissa = code >> self.man_bits, code & ((1 << self.man_bits) - 1)
        if exp_field == 0 and self.has_zero:
            return math.ldexp(mantissa, self.emin - self.man_bits)
        return math.ldexp((1 << self.man_bits) | mantissa, exp_field - self.bias - self.man_bits)

    @cached_property
    def max(self) -> float:
        """Largest finite value."""
        return self._code_magnitude(self.max_code)

    @property
    def min(self) -> float:
        """Smallest finite value: ``-max``; 0 if unsigned; the smallest positive value if
        unsigned without zero (E8M0)."""
        if self.signed:
            return -self.max
        return 0.0 if self.has_zero else self.smallest_positive

    @cached_property
    def smallest_normal(self) -> float | None:
        """Smallest positive normal value, ``2**emin``; None if the format has no normal value
        (``has_normals``), as ``smallest_subnormal`` is None without subnormals. The normal
        range always starts at ``2**emin``: that is where rounding switches to the subnormal
        quantum."""
        return self.normal_threshold if self.has_normals else None

    @cached_property
    def normal_threshold(self) -> float:
        """``2**emin``: magnitudes below it are subnormal (or zero), at and above it normal.

        Equal to ``smallest_normal`` whenever the format has a normal value, and defined even
        when it has none (e1m1, P3109's binary8p8 formats): rounding switches to the subnormal
        quantum here either way.

        >>> get_format("fp16").normal_threshold, get_format("e1m1").normal_threshold
        (6.103515625e-05, 2.0)
        """
        return math.ldexp(1.0, self.emin)

    @cached_property
    def smallest_subnormal(self) -> float | None:
        """Smallest positive subnormal, ``2**(emin - man_bits)``; None without subnormals."""
        if not self.subnormals or self.man_bits == 0:
            return None
        return math.ldexp(1.0, self.emin - self.man_bits)

    @property
    def smallest_positive(self) -> float:
        """The smallest positive value of any kind."""
        return self._code_magnitude(self.min_positive_code)

    @cached_property
    def eps(self) -> float:
        """``2**-man_bits``: the gap above 1.0 when 1.0 is a normal value of the format.

        (When 1.0 is below the normal range, as in ``Format(2, 3, bias=0)``, the true gap is
        larger; ``floatlab.finfo(fmt).eps`` reports the true gap.)
        """
        return math.ldexp(1.0, -self.man_bits)

    @property
    def unit_roundoff(self) -> float:
        """``u = 2**-p = eps / 2``, the bound on relative error of round-to-nearest."""
        return self.eps / 2

    # ------------------------------------------------------------------ conversions
    def to_ml_dtype(self) -> np.dtype:
        """The numpy / ml_dtypes dtype with the same encoding, for interop.

        >>> get_format("bf16").to_ml_dtype()
        dtype(bfloat16)
        >>> get_format("binary8p4sf").to_ml_dtype()   # the same encoding, by another name
        dtype(float8_e4m3fnuz)
        """
        # A preset with the same encoding lends its (dtype) name: Format(5, 10) is float16.
        name = next((p.name for p in PRESETS.values() if p == self), self.name)
        if name in ("float64", "float32", "float16"):
            return np.dtype(name)
        import ml_dtypes

        dtype = getattr(ml_dtypes, name, None)
        if dtype is None:
            raise ValueError(f"{self.name} has no numpy or ml_dtypes dtype")
        return np.dtype(dtype)


# ---------------------------------------------------------------------------------- presets

def _preset(name: str, e: int, m: int, **kw: Any) -> Format:
    return Format(exp_bits=e, man_bits=m, name=name, **kw)


PRESETS: dict[str, Format] = {
    f.name: f
    for f in (
        _preset("float64", 11, 52),
        _preset("float32", 8, 23),
        _preset("tensorfloat32", 8, 10),
        _preset("float16", 5, 10),
        _preset("bfloat16", 8, 7),
        _preset("float8_e4m3fn", 4, 3, special="fn"),
        _preset("float8_e5m2", 5, 2),
        _preset("float8_e4m3fnuz", 4, 3, bias=8, special="fnuz"),
        _preset("float8_e5m2fnuz", 5, 2, bias=16, special="fnuz"),
        _preset("float8_e4m3", 4, 3),
        _preset("float8_e3m4", 3, 4),
        _preset("float8_e4m3b11fnuz", 4, 3, bias=11, special="fnuz"),
        _preset(
            "float8_e8m0fnu", 8, 0, signed=False, special="fn", subnormals=False, has_zero=False
        ),
        _preset("float6_e2m3fn", 2, 3, special="none"),
        _preset("float6_e3m2fn", 3, 2, special="none"),
        _preset("float4_e2m1fn", 2, 1, special="none"),
    )
}

_ALIASES: dict[str, str] = {
    "fp64": "float64", "double": "float64", "f64": "float64", "binary64": "float64",
    "fp32": "float32", "single": "float32", "float": "float32", "f32": "float32",
    "binary32": "float32",
    "tf32": "tensorfloat32",
    "fp16": "float16", "half": "float16", "f16": "float16", "binary16": "float16",
    "bf16": "bfloat16", "bfloat": "bfloat16",
    "e4m3fn": "float8_e4m3fn", "fp8_e4m3fn": "float8_e4m3fn", "ocp_e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2", "fp8_e5m2": "float8_e5m2", "ocp_e5m2": "float8_e5m2",
    "e4m3fnuz": "float8_e4m3fnuz", "fp8_e4m3fnuz": "float8_e4m3fnuz",
    "e5m2fnuz": "float8_e5m2fnuz", "fp8_e5m2fnuz": "float8_e5m2fnuz",
    "e3m4": "float8_e3m4", "fp8_e3m4": "float8_e3m4",
    "e4m3b11fnuz": "float8_e4m3b11fnuz", "e4m3b11": "float8_e4m3b11fnuz",
    "e8m0": "float8_e8m0fnu", "e8m0fnu": "float8_e8m0fnu", "fp8_e8m0": "float8_e8m0fnu",
    "e2m3": "float6_e2m3fn", "e2m3fn": "float6_e2m3fn", "fp6_e2m3": "float6_e2m3fn",
    "e3m2": "float6_e3m2fn", "e3m2fn": "float6_e3m2fn", "fp6_e3m2": "float6_e3m2fn",
    "e2m1": "float4_e2m1fn", "e2m1fn": "float4_e2m1fn", "fp4_e2m1": "float4_e2m1fn",
    "fp4": "float4_e2m1fn", "float4": "float4_e2m1fn",
}

# Names people type that mean different formats in different libraries: never guess.
_AMBIGUOUS: dict[str, tuple[str, ...]] = {
    "e4m3": ("float8_e4m3fn", "float8_e4m3", "float8_e4m3fnuz", "float8_e4m3b11fnuz"),
    "fp8_e4m3": ("float8_e4m3fn", "float8_e4m3", "float8_e4m3fnuz"),
    "fp8": ("float8_e4m3fn", "float8_e5m2", "float8_e4m3", "float8_e4m3fnuz", "float8_e5m2fnuz"),
    "float8": ("float8_e4m3fn", "float8_e5m2", "float8_e4m3", "float8_e4m3fnuz", "float8_e5m2fnuz"),
    "fp6": ("float6_e2m3fn", "float6_e3m2fn"),
    "float6": ("float6_e2m3fn", "float6_e3m2fn"),
}

# ------------------------------------------------------------------------------ spec names

_KIND_TOKEN = {"ieee": "", "fn": "fn", "fnuz": "fnuz", "none": "fn_nonan", "p3109": "_p3109"}
_EXPLICIT_KIND_TOKEN = {**_KIND_TOKEN, "ieee": "_ieee", "fn": "fn_nan"}
_TOKEN_KIND = {
    "": "ieee", "ieee": "ieee", "fn": "fn", "fn_nan": "fn", "fnu": "fn", "fnuz": "fnuz",
    "fn_nonan": "none", "p3109": "p3109",
}
_SPEC = re.compile(
    r"^e(?P<e>\d+)m(?P<m>\d+)(?:b(?P<bias>_?\d+))?"
    r"(?:_?(?P<kind>ieee|fnuz|fnu|fn_nonan|fn_nan|fn|p3109))?"
    r"(?P<flags>(?:_(?:unsigned|nozero|ftz))*)$"
)


def _spec_name(fmt: Format, explicit_kind: bool) -> str:
    bias = "" if fmt.bias == _default_bias(fmt.exp_bits, fmt.special) else f"b{fmt.bias}"
    if fmt.special == "fn" and not fmt.signed and not fmt.has_zero:
        return f"e{fmt.exp_bits}m{fmt.man_bits}{bias}fnu"  # ml_dtypes' E8M0 spelling
    kind = (_EXPLICIT_KIND_TOKEN if explicit_kind else _KIND_TOKEN)[fmt.special]
    flags = "".join(
        f"_{flag}"
        for flag, present in (
            ("unsigned", not fmt.signed),
            ("nozero", not fmt.has_zero),
            ("ftz", fmt.has_zero and not fmt.subnormals),
        )
        if present
    )
    return f"e{fmt.exp_bits}m{fmt.man_bits}{bias}{kind}{flags}"


def _registered(name: str) -> Format | str | None:
    """What a registered name (preset, alias, P3109 name) means; "ambiguous"; or None."""
    if name in _AMBIGUOUS:
        return "ambiguous"
    target = _ALIASES.get(name, name)
    if target in PRESETS:
        return PRESETS[target]
    from floatlab.p3109 import find_p3109  # p3109 builds on this module: import on use

    return find_p3109(name)


def format_names() -> list[str]:
    """Every canonical preset name, in registry order.

    >>> format_names()[:4]
    ['float64', 'float32', 'tensorfloat32', 'float16']
    """
    return list(PRESETS)


def format_aliases() -> dict[str, list[str]]:
    """The short names of each preset (canonical name -> aliases, in registry order).

    >>> format_aliases()["float16"]
    ['fp16', 'half', 'f16', 'binary16']
    """
    short: dict[str, list[str]] = {name: [] for name in PRESETS}
    for alias, name in _ALIASES.items():
        short[name].append(alias)
    return short


def _normalise(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(" ", "")


def _ambiguity_message(name: str, candidates: tuple[str, ...]) -> str:
    rows = ", ".join(f"{c} (max {PRESETS[c].max:g})" for c in candidates)
    return (
        f"format name {name!r} is ambiguous: it means different formats in different "
        f"libraries. Say which one: {rows}."
    )


def _from_spec(spec: str) -> Format | None:
    """Parse a spec name (grammar in :func:`get_format`) into a Format; None if it is none."""
    match = _SPEC.match(spec)
    if match is None:
        return None
    e, m = int(match["e"]), int(match["m"])
    token = match["kind"] or ""
    special = _TOKEN_KIND[token]
    flags = match["flags"]
    kwargs: dict[str, Any] = {"special": special}
    if token == "fnu" or "_unsigned" in flags:
        kwargs["signed"] = False
    if token == "fnu" or "_nozero" in flags:
        kwargs.update(has_zero=False, subnormals=False)
    if "_ftz" in flags:
        kwargs["subnormals"] = False
    bias = match["bias"]
    if bias is not None:
        kwargs["bias"] = -int(bias[1:]) if bias.startswith("_") else int(bias)
    else:
        kwargs["bias"] = _default_bias(e, special)
    return Format(exp_bits=e, man_bits=m, **kwargs)


def get_format(fmt: str | Format | Any) -> Format:
    """Resolve a name, a :class:`Format`, or a numpy / ml_dtypes dtype to a Format.

    Names are case-insensitive; ``-`` and ``_`` are interchangeable. They are looked up in
    this order: preset names and their aliases (``"fp16"``, ``"e4m3fn"``), the IEEE P3109 names
    (``"p3109_k8p3se"``, alias ``"binary8p3se"``), spec names (below), and last numpy dtype
    strings (``"f4"``, ``"<f8"``). Ambiguous names such as ``"e4m3"`` or ``"fp8"`` are refused.
    The short names of presets win over the spec reading: ``"e5m2"``, ``"e3m4"`` are the
    ml_dtypes formats (IEEE-like anyway), and ``"e2m1"`` / ``"e2m3"`` / ``"e3m2"`` are the OCP MX
    element formats (no inf, no NaN: E2M1's max is 6, not the IEEE-like reading's 3).

    Spec names describe any :class:`Format` field by field::

        e<E>m<M> [b<bias>] [kind] [_unsigned] [_nozero] [_ftz]

    * ``b<bias>``: the bias, possibly negative (``b-5``); omitted = the kind's default
      (``2**(E-1) - 1``; ``2**(E-1)`` for fnuz and p3109; 0 when E is 0).
    * kind: nothing or ``_ieee`` (IEEE-like: inf and NaN in the all-ones exponent), ``fn`` or
      ``fn_nan`` (NaN only at all ones), ``fnuz`` (NaN at the -0 code), ``fn_nonan`` (no inf,
      no NaN), ``_p3109`` (P3109 extended: +-inf at the top codes, NaN at the -0 code), and
      ``fnu``, ml_dtypes' spelling of ``fn_unsigned_nozero`` (E8M0).
    * flags: ``_unsigned`` (no sign bit), ``_nozero`` (no zero: the exponent field 0 is an
      ordinary binade; implies no subnormals), ``_ftz`` (zero but no subnormals).

    Every Format's default name is its spec name, with the kind spelled out (``_ieee``,
    ``fn_nan``) where the short spelling is a preset's alias or ambiguous, so
    ``get_format(fmt.name) == fmt`` for every Format and no two different Formats share a name.

    >>> get_format("BF16").name
    'bfloat16'
    >>> import numpy as np; get_format(np.float16).max
    65504.0
    >>> get_format("e6m9").max   # a custom IEEE-like format
    4290772992.0
    >>> Format(2, 1).name, get_format("e2m1_ieee").max, get_format("e2m1").max
    ('e2m1_ieee', 3.0, 6.0)
    >>> Format(4, 3, bias=-5).name, Format(5, 3, bias=16, signed=False, special="fn").name
    ('e4m3b-5', 'e5m3b16fn_unsigned')
    >>> get_format("f4").name, get_format("binary8p3se").name
    ('float32', 'p3109_k8p3se')
    """
    if isinstance(fmt, Format):
        return fmt
    if isinstance(fmt, str):
        return _format_from_name(fmt)
    if fmt is None or isinstance(fmt, (bool, int, float)):
        raise TypeError(
            f"expected a format name such as 'fp16', a floatlab.Format or a numpy dtype, "
            f"got {fmt!r}"
        )
    try:
        dtype = np.dtype(fmt)
    except TypeError:
        raise TypeError(
            f"expected a format name such as 'fp16', a floatlab.Format or a numpy dtype, "
            f"got {type(fmt).__name__} {fmt!r}"
        ) from None
    if dtype.name in PRESETS:
        return PRESETS[dtype.name]
    raise TypeError(
        f"dtype {dtype.name!r} is not a floating-point format floatlab knows; "
        f"known dtypes: {', '.join(format_names())}"
    )


def _format_from_name(name: str) -> Format:
    key = _normalise(name)
    if key in PRESETS:
        return PRESETS[key]
    if key in _ALIASES:
        return PRESETS[_ALIASES[key]]
    if key in _AMBIGUOUS:
        raise FormatNameError(_ambiguity_message(name, _AMBIGUOUS[key]))
    from floatlab.p3109 import P3109, find_p3109

    p3109 = find_p3109(key)
    if p3109 is not None:
        return p3109
    spec = _from_spec(key)
    if spec is not None:
        return spec
    dtype = _numpy_dtype_string(name)
    if dtype is not None:
        return get_format(dtype)
    known = list(PRESETS) + list(_ALIASES) + list(P3109)
    close = difflib.get_close_matches(key, known, n=4, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise FormatNameError(
        f"unknown format name {name!r}.{hint} Known formats: {', '.join(format_names())}; "
        "or a spec such as 'e3m4' for a custom IEEE-like format."
    )


def _numpy_dtype_string(name: str) -> np.dtype | None:
    """The numpy (or ml_dtypes) floating-point dtype a string such as ``"f4"`` or ``"<f8"``
    names, or None. Checked after floatlab's own names, which take precedence."""
    import ml_dtypes  # noqa: F401 - registers "bfloat16", "float8_e4m3fn", ... with numpy

    try:
        dtype = np.dtype(name.strip())
    except (TypeError, ValueError):
        return None
    if dtype.kind == "f" or dtype.name in PRESETS:
        return dtype
    raise FormatNameError(
        f"{name!r} is the numpy dtype {dtype.name}, not a floating-point format: use e.g. "
        "'f4' (float32), 'fp16' or a floatlab.Format"
    )
