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

The package gathers one module per job: :mod:`~floatlab.formats.format` (the Format dataclass
and its derived limits), :mod:`~floatlab.formats.presets` (named presets, aliases, ambiguous
names), :mod:`~floatlab.formats.spec` (the spec-name grammar) and
:mod:`~floatlab.formats.resolve` (get_format and its errors).
"""

from floatlab.formats.format import Format, SpecialValues  # noqa: F401
from floatlab.formats.presets import (  # noqa: F401 - _ALIASES / _AMBIGUOUS: tests read them
    _ALIASES,
    _AMBIGUOUS,
    PRESETS,
    format_aliases,
    format_names,
)
from floatlab.formats.resolve import FormatNameError, get_format

__all__ = [
    "Format",
    "FormatNameError",
    "get_format",
    "format_names",
    "PRESETS",
]
