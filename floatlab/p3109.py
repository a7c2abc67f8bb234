"""The IEEE P3109 8-bit formats (``p3109_k8p3se``, alias ``binary8p3se``), as floatlab Formats.

P3109 defines binary8 formats for every precision P = 1..8, signed or unsigned, in two kinds:
Extended (with +-inf) and Finite. :data:`P3109` holds all 32 by their P3109 names (gfloat's
spelling); :func:`floatlab.get_format` resolves those names and the ``binary8...`` aliases.

>>> from floatlab import get_format
>>> get_format("binary8p3se") is P3109["p3109_k8p3se"]
True
"""

from __future__ import annotations

import numpy as np

from floatlab._validate import check_flag
from floatlab.formats import Format

__all__ = ["P3109", "p3109_format"]


def p3109_format(precision: int, signed: bool = True, extended: bool = True) -> Format:
    """The IEEE P3109 8-bit format ``binary8p<P>`` with ``precision`` significand bits (1..8).

    P3109's rules, as gfloat's ``format_info_p3109(8, P, signedness, domain)``: exponent
    bits ``8 - P`` (signed) or ``9 - P`` (unsigned), bias ``2**(7 - P)`` (signed, 0 for P = 8) or
    ``2**(8 - P)`` (unsigned), zero at code 0, subnormals, no -0. Signed formats have one NaN at
    0x80 (the -0 code); unsigned ones at 0xff. The Extended kind puts +-inf at the largest code
    of each sign (0x7f / 0xff signed, 0xfe unsigned) -- floatlab's ``special="p3109"``; the
    Finite kind has no inf, which makes it floatlab's ``"fnuz"`` (signed: binary8p4sf *is*
    float8_e4m3fnuz, binary8p3sf is float8_e5m2fnuz) or an unsigned ``"fn"`` with zero.
    binary8p8s* has no exponent bits: every code is zero or subnormal (``smallest_normal`` is
    None).

    Decoding agrees with gfloat on every code of all 32 formats, rounding on every value,
    midpoint and edge in its five modes, except (tests/test_p3109.py):

    * ``saturate=True`` keeps +-inf inputs as +-inf (saturation is for finite overflow, as in
      torch and ml_dtypes); gfloat's ``sat=True`` turns them into +-max.
    * p = 1 ties under nearest_even go up (the significand is always 1, so floatlab reads it
      as odd, as ml_dtypes and torch do for E8M0); gfloat picks the even *code* (even exponent).
    * ``"odd"`` saturates finite overflow like toward_zero (truncate, then jam the sticky bit);
      gfloat 0.5.2 has no round-to-odd, and its later ToOdd (P3109) rounds to the odd code with
      an unbounded exponent, which overflows to inf where max's code is even (the Extended
      formats, whose next code is inf).
    * gfloat's ties-away adds 0.5 in float64, so inputs within 2**-54 below half the smallest
      subnormal come back as the smallest subnormal; floatlab gives the exact answer, 0.
    * negative inputs to unsigned formats give NaN (with a warning); gfloat drops the sign test
      and returns a negative number the format cannot hold.

    >>> p3109_format(3).name, p3109_format(3).max, p3109_format(3).inf_code
    ('p3109_k8p3se', 49152.0, 127)
    >>> p3109_format(4, signed=False, extended=False)  # doctest: +NORMALIZE_WHITESPACE
    Format('p3109_k8p4uf': 8 bits = 5 exponent + 3 mantissa, bias 16, fn, max 57344)
    """
    if isinstance(precision, bool) or not isinstance(precision, (int, np.integer)):
        raise TypeError(f"precision must be an int in 1..8, got {precision!r}")
    if not 1 <= precision <= 8:
        raise ValueError(f"P3109 8-bit formats have precision 1..8, got {precision}")
    signed, extended = check_flag(signed, "signed"), check_flag(extended, "extended")
    name = f"p3109_k8p{precision}{'s' if signed else 'u'}{'e' if extended else 'f'}"
    if name in P3109:
        return P3109[name]
    exp_bits = 8 - precision + (0 if signed else 1)
    special = "p3109" if extended else ("fnuz" if signed else "fn")
    return Format(
        exp_bits, precision - 1, bias=(1 << exp_bits) >> 1, signed=bool(signed),
        special=special, name=name,
    )


P3109: dict[str, Format] = {}
P3109.update(
    (f.name, f)
    for f in (
        p3109_format(p, signed, extended)
        for p in range(1, 9)
        for signed in (True, False)
        for extended in (True, False)
    )
)
# binary8p3se etc.: the P3109 interim report's own spelling of the same names.
_P3109_ALIASES = {name.replace("p3109_k8", "binary8"): name for name in P3109}


def find_p3109(name: str) -> Format | None:
    """The P3109 format a normalised name or alias means, or None."""
    return P3109.get(_P3109_ALIASES.get(name, name))
