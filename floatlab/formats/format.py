"""The :class:`Format` dataclass: a binary floating-point format described by its encoding
rules alone (exponent and mantissa widths, bias, sign bit, where inf / NaN live, subnormals,
zero), and every limit derived from them (emax, emin, max, the smallest normal and subnormal,
the codes of NaN and +-inf, eps).

>>> f = Format(exp_bits=5, man_bits=10)      # IEEE half precision, by its rules alone
>>> f.name, f.max, f.nan_code == 0x7e00
('e5m10', 65504.0, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import numpy as np

from floatlab._validate import check_flag

__all__ = ["Format", "SpecialValues"]

SpecialValues = Literal["ieee", "fn", "fnuz", "none", "p3109"]

_SPECIAL_HELP = {
    "ieee": "IEEE 754: the all-ones exponent holds +-inf (mantissa 0) and NaN (mantissa != 0)",
    "fn": "finite: no inf; NaN only where exponent and mantissa are all ones",
    "fnuz": "finite, unsigned zero: no inf, no -0; the only NaN is the code 100...0",
    "none": "no inf and no NaN: every code is a finite number",
    "p3109": "IEEE P3109 extended: +-inf at the largest codes of each sign (0x7f / 0xff), "
    "one NaN at the negative-zero code 100...0, no -0 (unsigned: NaN all ones, +inf below it)",
}


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
            object.__setattr__(self, attr, check_flag(getattr(self, attr), f"Format.{attr}"))
        if self.name is None:  # "no name": the spec name, as for the default ""
            object.__setattr__(self, "name", "")
        if not isinstance(self.name, str):  # it is shown, compared by get_format, and looked up
            raise TypeError(
                f"Format.name must be a str (or '' for the spec name), got {self.name!r} "
                f"({type(self.name).__name__})"
            )
        if not isinstance(self.special, str):  # a list would fail the lookup below as unhashable
            raise TypeError(
                f"Format.special must be one of {sorted(_SPECIAL_HELP)}, got {self.special!r} "
                f"({type(self.special).__name__})"
            )
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
        if self.special == "fnuz" and not self.has_zero:
            # Without zero, the code NaN takes (0x80) would be -smallest: the negative side
            # would lack the smallest magnitude the positive side has, which the rounding does
            # not model (it gave -smallest, a value whose code decodes as NaN).
            raise ValueError(
                "special='fnuz' puts NaN at the negative-zero code, which in a format without "
                "zero is the code of -smallest (the negatives would lose their smallest "
                "magnitude): pass has_zero=True, or special='fn' for a format without zero"
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
        # The name grammar and the registry are built on Format: imported on use.
        from floatlab.formats.resolve import _registered
        from floatlab.formats.spec import _spec_name

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

        >>> from floatlab import get_format
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

        >>> from floatlab import get_format
        >>> get_format("bf16").to_ml_dtype()
        dtype(bfloat16)
        >>> get_format("binary8p4sf").to_ml_dtype()   # the same encoding, by another name
        dtype(float8_e4m3fnuz)
        """
        from floatlab.formats.presets import PRESETS  # built on Format: import on use

        # A preset with the same encoding lends its (dtype) name: Format(5, 10) is float16.
        name = next((p.name for p in PRESETS.values() if p == self), self.name)
        if name in ("float64", "float32", "float16"):
            return np.dtype(name)
        import ml_dtypes

        dtype = getattr(ml_dtypes, name, None)
        if dtype is None:
            raise ValueError(f"{self.name} has no numpy or ml_dtypes dtype")
        return np.dtype(dtype)
