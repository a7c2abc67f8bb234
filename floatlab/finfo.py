"""Machine limits of any format, with numpy's field names and torch's one-line repr.

:func:`finfo` answers "how big, how small, how precise" for a :class:`~floatlab.Format`. Every
field is derived from the Format's encoding rules (no table of constants per format), and the
fields carry numpy's names, so code written for ``numpy.finfo`` / ``ml_dtypes.finfo`` reads the
same:

>>> fi = finfo("fp16")
>>> fi  # doctest: +NORMALIZE_WHITESPACE
finfo(resolution=0.001, min=-65504, max=65504, eps=0.000976562,
      smallest_normal=6.10352e-05, tiny=6.10352e-05, dtype=float16)
>>> fi.max, fi.eps, fi.smallest_subnormal, fi.bias, fi.emax, fi.emin, fi.p
(65504.0, 0.0009765625, 5.960464477539063e-08, 15, 15, -14, 11)

:func:`compare_formats` puts the main limits of several formats side by side, the "which
format should I use" view:

>>> print(compare_formats(["fp16", "bf16"]))  # doctest: +NORMALIZE_WHITESPACE
                     float16        bfloat16
bits (sign/exp/man)  16 (1/5/10)    16 (1/8/7)
bias                 15             127
max                  65504          3.38953e+38
smallest normal      6.10352e-05    1.17549e-38
smallest subnormal   5.96046e-08    9.18355e-41
eps (gap above 1)    0.000976562    0.0078125
decimal digits       3              2
binades (normal)     40 (30)        261 (254)
inf / NaN / -0       yes/yes/yes    yes/yes/yes
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from floatlab.formats import Format, get_format
from floatlab.formats.resolve import _one_format

__all__ = ["finfo", "FInfo", "compare_formats", "FormatComparison"]

# Fields shown in the one-line repr, in torch.finfo's order.
_TORCH_FIELDS = ("resolution", "min", "max", "eps", "smallest_normal", "tiny")


def _pow2(k: int) -> str:
    return f"2^{k}"


def _g(value: float | None, spec: str = "g") -> str:
    """A limit as torch prints it, or "none" where the format has no such value."""
    return "none" if value is None else format(value, spec)


def _max_formula(value: float, exponent: int, man_bits: int) -> str:
    """``value`` as significand × 2**exponent with all ``man_bits`` shown (``1.110b × 2^8``),
    or ``(2 - 2^-52) × 2^1023`` when the binary significand would be too long to read."""
    significand = int(math.ldexp(value, man_bits - exponent))  # exact: value is on the grid
    if man_bits == 0:
        return f"2^{exponent}"
    if man_bits > 12 and significand == 2 ** (man_bits + 1) - 1:
        return f"(2 - 2^-{man_bits}) × 2^{exponent}"
    digits = format(significand, "b")
    return f"{digits[0]}.{digits[1:]}b × 2^{exponent}"


def _gap_above_one(fmt: Format) -> float:
    """numpy's ``eps``: the spacing of the format's grid at 1.0, read with the exponent
    unbounded above (as rounding reads it).

    It is the gap between 1.0 and the next value whenever both are values of the format:
    ``2**-man_bits`` when 1.0 is a normal number (every preset); the subnormal quantum
    ``2**(emin - man_bits)`` when the normal range starts above 1.0 (``Format.eps`` still says
    ``2**-man_bits``, the spacing relative to a binade). Where 1.0 is the largest value (e1m1)
    the next grid point 1.0 + eps lies past max; where the quantum exceeds 1.0 (formats with a
    large negative bias) 1.0 is not a value and eps is the quantum, the step between the values
    around it.
    """
    if fmt.emin > 0 and fmt.subnormals and fmt.man_bits > 0:
        return math.ldexp(1.0, fmt.emin - fmt.man_bits)
    return math.ldexp(1.0, max(fmt.emin, 0) - fmt.man_bits)


def _gap_below_one(fmt: Format) -> float:
    """numpy's ``epsneg``: the gap between 1.0 and the largest grid value below it.

    Normally 1.0 starts a binade and the value below it lies in the binade under it, one
    ulp ``2**(-1 - man_bits)`` away. When 1.0 is the smallest normal (the MX formats e2m3 and
    e2m1) the value below it is the largest subnormal, ``2**(emin - man_bits)`` = eps away; with
    no subnormals it is 0 (gap 1.0). When 1.0 itself is subnormal the gap is the subnormal step;
    when the subnormal step exceeds 1.0 the grid value below 1.0 is 0 (gap 1.0). numpy's rule
    ``eps / 2`` is wrong for the MX cases; ml_dtypes gets them right.
    """
    if fmt.emin <= -1:
        return math.ldexp(1.0, -1 - fmt.man_bits)
    if fmt.subnormals and fmt.man_bits > 0:
        return min(math.ldexp(1.0, fmt.emin - fmt.man_bits), 1.0)
    return 1.0  # the value below 1.0 (= smallest normal, or below the normal range) is zero


def _decimal_digits(p: int) -> int:
    """``floor((p - 1) * log10(2))`` computed exactly: the digits of ``2**(p-1)`` minus one."""
    return len(str(2 ** (p - 1))) - 1


@dataclass(frozen=True, repr=False)
class FInfo:
    """Machine limits of a floating-point format, derived from its encoding rules.

    Build one with :func:`finfo` (``finfo("fp16")``, ``finfo("e3m4")``, ``finfo(np.float16)``),
    which caches them; the object is immutable. Field names follow ``numpy.finfo``:

    ============================  ===============================================================
    bits, nexp, nmant, iexp       storage width, exponent bits (nexp == iexp), stored mantissa bits
    eps, machep                   gap between 1.0 and the next value, ``eps == 2**machep``
    epsneg, negep                 gap between 1.0 and the previous value, ``epsneg == 2**negep``
    precision, resolution         decimal digits ``floor((p - 1) log10 2)``; ``10**-precision``
    tiny, smallest_normal         smallest positive normal ``2**emin`` (None if no code is normal)
    smallest_subnormal            smallest positive subnormal (see E8M0 below)
    max, min                      largest finite value; smallest one (``-max``; 0 if unsigned)
    maxexp, minexp                ``emax + 1`` (first overflowing power of two); ``emin``
    dtype                         the canonical name, a str (numpy holds a ``np.dtype`` here)
    bias, emax, emin, p           exponent bias, exponent range, significand bits with hidden bit
    format                        the :class:`~floatlab.Format` itself
    ============================  ===============================================================

    Values are exact Python floats and ints. Where floatlab deliberately differs from a peer:

    * ``precision`` is ``floor((p - 1) * log10(2))`` for every format, as torch and numpy's
      formula give: 0 for the E4M3 / E5M2 families and E8M0 (p <= 4), 1 for E3M4 (p = 5).
      ml_dtypes hard-codes 1 for every 8-bit format.
    * ``resolution`` is ``10**-precision`` exactly as torch prints it (``0.01`` for bfloat16);
      numpy and ml_dtypes round it into the dtype (bfloat16 ``0.0100098``, float32
      ``1e-06`` as float32 = 9.99999997e-07).
    * ``epsneg`` is the true gap below 1.0: ``eps`` for e2m3 / e2m1, where 1.0 is the smallest
      normal (ml_dtypes agrees; numpy's ``eps / 2`` rule and gfloat do not).
    * ``eps`` is derived, never copied: float8_e5m2fnuz has eps 0.25 (1.0 -> 1.25), where
      ``torch.finfo(torch.float8_e5m2fnuz).eps`` prints 0.125. It is the true gap above 1.0, so
      in a custom format where 1.0 is subnormal it is the subnormal step, not ``Format.eps``.
    * float8_e8m0fnu (unsigned, no zero, no subnormals): ``min`` is its smallest value
      ``+2**-127``, not ``-max``; ``smallest_subnormal`` is the smallest positive value
      ``2**-127`` (= tiny), as ml_dtypes reports, so that the field is always a number. The same
      holds for custom formats without subnormals; ``Format.smallest_subnormal`` is None there.
    * ``dtype`` is the canonical name (a str), so custom formats such as ``"e3m4b2"`` have one.
    * Formats whose normal range is empty (every finite code is zero or subnormal: P3109's
      binary8p8s*, an IEEE-style ``"e1m1"`` whose exponent field 1 is all inf / NaN) have
      ``smallest_normal = tiny = None`` (numpy's formula ``2**emin`` would lie above max; gfloat
      reports it anyway), ``emax < emin``, ``normal_binades = 0``. Every other limit is a value
      the codes decode to: ``smallest_subnormal <= smallest_normal <= max``.
    * ``eps`` / ``epsneg`` are the spacing of the grid at 1.0 above / below it (see
      ``_gap_above_one``): the gaps to the neighbours of 1.0 whenever they are values.

    >>> fi = finfo("e4m3fn")
    >>> fi.max, fi.eps, fi.epsneg, fi.precision, fi.resolution, fi.maxexp
    (448.0, 0.125, 0.0625, 0, 1.0, 9)
    >>> finfo("e2m1").epsneg       # 1.0 is the smallest normal: the gap below is the subnormal step
    0.5
    >>> finfo("float8_e8m0fnu").min, finfo("float8_e8m0fnu").smallest_subnormal
    (5.877471754111438e-39, 5.877471754111438e-39)
    """

    bits: int
    nexp: int
    nmant: int
    eps: float
    epsneg: float
    machep: int
    negep: int
    precision: int
    resolution: float
    tiny: float | None
    smallest_normal: float | None
    smallest_subnormal: float
    max: float
    min: float
    maxexp: int
    minexp: int
    iexp: int
    dtype: str
    bias: int
    emax: int
    emin: int
    p: int
    format: Format = field(compare=False)

    # ------------------------------------------------------------------ derived views
    @property
    def unit_roundoff(self) -> float:
        """``u = eps / 2 = 2**-p``: the largest relative error of round-to-nearest."""
        return self.eps / 2

    @property
    def smallest_positive(self) -> float:
        """The smallest positive value of any kind (subnormal if the format has them)."""
        return self.smallest_subnormal

    @property
    def binades(self) -> int:
        """How many powers of two the positive values span, smallest value to max."""
        return self.emax - (math.frexp(self.smallest_positive)[1] - 1) + 1

    @property
    def normal_binades(self) -> int:
        """How many binades hold normal values: ``emax - emin + 1`` (0 if none does)."""
        return max(self.emax - self.emin + 1, 0)

    # ------------------------------------------------------------------ renderings
    def __repr__(self) -> str:
        # torch.finfo prints with C++ ostream defaults: 6 significant digits, %g style.
        parts = [f"{name}={_g(getattr(self, name))}" for name in _TORCH_FIELDS]
        return f"finfo({', '.join(parts)}, dtype={self.dtype})"

    def _rows(self) -> list[tuple[str, str, str]]:
        f = self.format
        subnormal = (
            (f"{self.smallest_subnormal:.6g}", f"= {_pow2(f.emin - f.man_bits)}")
            if f.smallest_subnormal is not None
            else ("none", f"(no subnormals; smallest value {self.smallest_positive:.6g})")
        )
        specials = ", ".join(
            label
            for label, present in (
                ("+-inf", f.has_inf), ("NaN", f.has_nan), ("-0", f.has_negative_zero),
                ("no zero", not f.has_zero), ("unsigned", not f.signed),
            )
            if present
        ) or "none: every code is a finite number"
        return [
            ("bias", str(self.bias), ""),
            ("exponent range", f"emin = {self.emin} .. emax = {self.emax}",
             f"(minexp = {self.minexp}, maxexp = {self.maxexp})"),
            ("max", f"{self.max:.6g}",
             f"= {_max_formula(self.max, self.emax, self.nmant)}"),
            ("min", f"{self.min:.6g}", "(the smallest value: no sign bit)" if not f.signed else ""),
            ("smallest normal", *(
                (f"{self.smallest_normal:.6g}", f"= {_pow2(self.emin)} (tiny)")
                if self.smallest_normal is not None
                else ("none", f"(no normal values: every finite code is below {_pow2(self.emin)})")
            )),
            ("smallest subnormal", *subnormal),
            ("eps", f"{self.eps:.6g}", f"= {_pow2(self.machep)} (gap above 1.0)"),
            ("epsneg", f"{self.epsneg:.6g}", f"= {_pow2(self.negep)} (gap below 1.0)"),
            ("unit roundoff", f"{self.unit_roundoff:.6g}",
             f"= {_pow2(self.machep - 1)} (max relative error of round-to-nearest)"),
            ("precision", f"{self.precision} decimal digits", f"(resolution {self.resolution:g})"),
            ("dynamic range", f"{self.binades} binades",
             f"({self.normal_binades} normal), "
             f"{_pow2(self.emax - self.binades + 1)} .. {self.max:.6g}"),
            ("special values", specials, ""),
        ]

    def __str__(self) -> str:
        f = self.format
        layout = f"{'1 sign + ' if f.signed else ''}{f.exp_bits} exponent + {f.man_bits} mantissa"
        lines = [f"finfo({self.dtype}): {self.bits} bits = {layout}, p = {self.p}"]
        for label, value, note in self._rows():
            lines.append(f"  {label:<19} {value:<16} {note}".rstrip())
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(label)}</th>"
            f"<td style='text-align:right'>{html.escape(value)}</td>"
            f"<td style='text-align:left'>{html.escape(note)}</td></tr>"
            for label, value, note in self._rows()
        )
        f = self.format
        caption = html.escape(
            f"finfo({self.dtype}): {self.bits} bits, {f.exp_bits} exponent + {f.man_bits} "
            f"mantissa, p = {self.p}"
        )
        return f"<table class='floatlab-finfo'><caption>{caption}</caption>{body}</table>"


@lru_cache(maxsize=256)
def _cached_finfo(fmt: Format, name: str) -> FInfo:
    eps, epsneg = _gap_above_one(fmt), _gap_below_one(fmt)
    precision = _decimal_digits(fmt.p)
    return FInfo(
        bits=fmt.bits,
        nexp=fmt.exp_bits,
        nmant=fmt.man_bits,
        eps=eps,
        epsneg=epsneg,
        machep=math.frexp(eps)[1] - 1,
        negep=math.frexp(epsneg)[1] - 1,
        precision=precision,
        resolution=float(f"1e-{precision}"),  # the correctly rounded 10**-precision
        tiny=fmt.smallest_normal,
        smallest_normal=fmt.smallest_normal,
        smallest_subnormal=fmt.smallest_positive,
        max=fmt.max,
        min=fmt.min,
        maxexp=fmt.emax + 1,
        minexp=fmt.emin,
        iexp=fmt.exp_bits,
        dtype=name,
        bias=fmt.bias,
        emax=fmt.emax,
        emin=fmt.emin,
        p=fmt.p,
        format=fmt,
    )


def finfo(fmt: str | Format | Any) -> FInfo:
    """Machine limits of ``fmt`` (a name, a :class:`~floatlab.Format` or a numpy / ml_dtypes
    dtype), as a cached, immutable :class:`FInfo` with numpy's field names.

    Like ``numpy.finfo`` it also takes a float scalar or array and describes its dtype (a Python
    float means float64), and numpy dtype strings such as ``"f4"`` or ``"<f8"``.

    >>> finfo("bf16")  # doctest: +NORMALIZE_WHITESPACE
    finfo(resolution=0.01, min=-3.38953e+38, max=3.38953e+38, eps=0.0078125,
          smallest_normal=1.17549e-38, tiny=1.17549e-38, dtype=bfloat16)
    >>> import numpy as np; finfo(np.float32).max
    3.4028234663852886e+38
    >>> finfo("fp16") is finfo("float16")     # cached per format
    True
    >>> finfo(1.2).dtype, finfo(np.zeros(3, np.float16)).dtype, finfo("f4").dtype
    ('float64', 'float16', 'float32')
    """
    fmt = get_format(_dtype_of_value(fmt))
    # Key on the name too: Format equality ignores names, and finfo("e5m10") must not come
    # back labelled float16.
    return _cached_finfo(fmt, fmt.name)


def _dtype_of_value(fmt: Any) -> Any:
    """What numpy.finfo accepts besides dtypes: a float scalar or an array stands for its
    dtype, a Python float for float64. Anything else is passed on unchanged."""
    if isinstance(fmt, (str, Format, bool)) or fmt is None:
        return fmt
    if isinstance(fmt, (np.ndarray, np.generic)):
        return fmt.dtype
    if isinstance(fmt, float):
        return np.dtype(np.float64)
    return fmt


# ------------------------------------------------------------------------- compare_formats

DEFAULT_COMPARISON = ("float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


@dataclass(frozen=True)
class FormatComparison:
    """The main limits of several formats side by side (one column per format).

    ``repr()`` and ``str()`` are the text table (so a REPL shows it), ``_repr_html_`` an HTML
    table (notebooks); ``rows`` holds the cells.

    >>> table = compare_formats(["fp16", "bf16"])
    >>> dict(table.rows)["max"], dict(table.rows)["eps (gap above 1)"]
    (('65504', '3.38953e+38'), ('0.000976562', '0.0078125'))
    """

    infos: tuple[FInfo, ...]
    rows: tuple[tuple[str, tuple[str, ...]], ...] = field(repr=False)

    def __repr__(self) -> str:
        return str(self)

    def __str__(self) -> str:
        label_width = max(len(label) for label, _ in self.rows)
        widths = [
            max(len(info.dtype), *(len(cells[i]) for _, cells in self.rows))
            for i, info in enumerate(self.infos)
        ]
        head = " " * label_width + "  " + "  ".join(
            i.dtype.ljust(w) for i, w in zip(self.infos, widths, strict=True)
        )
        lines = [head.rstrip()]
        for label, cells in self.rows:
            row = label.ljust(label_width) + "  " + "  ".join(
                c.ljust(w) for c, w in zip(cells, widths, strict=True)
            )
            lines.append(row.rstrip())
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = "<tr><th></th>" + "".join(
            f"<th>{html.escape(i.dtype)}</th>" for i in self.infos
        ) + "</tr>"
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(label)}</th>"
            + "".join(f"<td style='text-align:right'>{html.escape(c)}</td>" for c in cells)
            + "</tr>"
            for label, cells in self.rows
        )
        return f"<table class='floatlab-compare'>{head}{body}</table>"


def compare_formats(formats: Iterable[str | Format | Any] | None = None) -> FormatComparison:
    """Side-by-side limits of several formats: which one has the range, which the precision.

    ``formats`` is a list of names, Formats or dtypes (default: float32, bfloat16, float16,
    float8_e4m3fn, float8_e5m2). Rows: width and layout, bias, max, smallest normal and
    subnormal, eps, decimal digits, the dynamic range in binades (normal ones in brackets), and
    which specials exist.

    >>> table = compare_formats(["e4m3fn", "e5m2"])
    >>> table  # doctest: +NORMALIZE_WHITESPACE
                         float8_e4m3fn  float8_e5m2
    bits (sign/exp/man)  8 (1/4/3)      8 (1/5/2)
    bias                 7              15
    max                  448            57344
    smallest normal      0.015625       6.10352e-05
    smallest subnormal   0.00195312     1.52588e-05
    eps (gap above 1)    0.125          0.25
    decimal digits       0              0
    binades (normal)     18 (15)        32 (30)
    inf / NaN / -0       no/yes/yes     yes/yes/yes
    >>> dict(table.rows)["max"]
    ('448', '57344')
    """
    if formats is not None and (_one_format(formats) or not isinstance(formats, Iterable)):
        formats = [formats]  # one format (a dtype, a float or a 0-d array counts, as in finfo)
    chosen: Sequence[Any] = DEFAULT_COMPARISON if formats is None else list(formats)
    if not chosen:
        raise ValueError("compare_formats needs at least one format, e.g. ['fp16', 'bf16']")
    infos = tuple(finfo(f) for f in chosen)

    def layout(i: FInfo) -> str:
        sign = 1 if i.format.signed else 0
        return f"{i.bits} ({sign}/{i.nexp}/{i.nmant})"

    def subnormal(i: FInfo) -> str:
        return f"{i.smallest_subnormal:.6g}" if i.format.smallest_subnormal else "none"

    def specials(i: FInfo) -> str:
        f = i.format
        return "/".join(_yes(x) for x in (f.has_inf, f.has_nan, f.has_negative_zero))

    getters = (
        ("bits (sign/exp/man)", layout),
        ("bias", lambda i: str(i.bias)),
        ("max", lambda i: f"{i.max:.6g}"),
        ("smallest normal", lambda i: _g(i.smallest_normal, ".6g")),
        ("smallest subnormal", subnormal),
        ("eps (gap above 1)", lambda i: f"{i.eps:.6g}"),
        ("decimal digits", lambda i: str(i.precision)),
        ("binades (normal)", lambda i: f"{i.binades} ({i.normal_binades})"),
        ("inf / NaN / -0", specials),
    )
    rows = tuple((label, tuple(get(i) for i in infos)) for label, get in getters)
    return FormatComparison(infos=infos, rows=rows)
