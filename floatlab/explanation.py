"""The record :func:`floatlab.explain` returns: :class:`Explanation` holds how one value is
stored in a format (the numbers, and the derivation as (label, text) steps) and renders itself
as text (``str``: the steps, ``repr``: one line); its HTML lives in
:mod:`floatlab.explain_html`. Also the helpers that write numbers for prose.

>>> from floatlab import explain
>>> e = explain(0.1, "bf16")
>>> e, e.hex, e.exact
(bfloat16(0x3dcd) 0.10009765625, '0x3dcd', '0.10009765625')
>>> _short(2 / 3), _short(0.5)
('0.666667', '0.5')
"""

from __future__ import annotations

import decimal
import math
import textwrap
from dataclasses import dataclass
from fractions import Fraction

from floatlab.explain_html import _render_html
from floatlab.formats import Format
from floatlab.grid import _decimal

__all__ = ["Explanation"]


def _short(value: float | Fraction, limit: int = 20, digits: int = 6) -> str:
    """A number for prose: its exact decimal when that is short (at most ``limit`` characters
    and 12 significant digits), else ``digits`` significant digits (17 name any float64)."""
    if isinstance(value, float) and not math.isfinite(value):
        return _decimal(value)
    text = _decimal(value)
    significant = len(text.lstrip("-").replace(".", "").lstrip("0"))
    if len(text) <= limit and significant <= 12:
        return text
    try:
        return f"{float(value):.{digits}g}"
    except OverflowError:  # 2**1024 (a window past float64's max) is a Fraction, not a float
        frac = Fraction(value)
        with decimal.localcontext() as ctx:
            ctx.prec = digits + 2
            approx = decimal.Decimal(frac.numerator) / decimal.Decimal(frac.denominator)
            return f"{approx:.{digits}g}"


def _hex(code: int, fmt: Format) -> str:
    return f"0x{code:0{(fmt.bits + 3) // 4}x}"


@dataclass(frozen=True)
class Explanation:
    """How one value is stored in a format: the numbers, and the derivation as text / HTML.

    ``str()`` is the step-by-step derivation, ``repr()`` a one-liner such as
    ``float16(0x4248) 3.140625``, ``_repr_html_`` the bits as coloured boxes with the formula.
    ``steps`` holds the derivation as (label, text) pairs; ``error_ulps`` the rounding error in
    ulps of ``x`` (on the FTZ grid under ``subnormals=False``). ``outcome`` is one of ``"exact"``,
    ``"rounded"``, ``"subnormal"`` (rounded into the subnormal range), ``"overflow"``,
    ``"underflow"`` (became zero, or E8M0's clamp up), ``"invalid"`` (NaN for an input the
    format cannot hold), ``"nan"`` / ``"inf"`` (special input).

    >>> from floatlab import explain
    >>> e = explain(0.1, "bf16")
    >>> e, e.outcome, e.kind, round(e.error_ulps, 3)
    (bfloat16(0x3dcd) 0.10009765625, 'rounded', 'normal', 0.2)
    """

    x: float
    fmt: Format
    rounding: str
    saturate: bool
    subnormals: bool
    value: float
    code: int
    bits: str
    kind: str
    outcome: str
    sign: int
    exponent: int
    mantissa: int
    unbiased_exponent: int
    error: float
    relative_error: float
    ulp: float
    previous: float
    next: float
    formula: str
    steps: tuple[tuple[str, str], ...]
    x_text: str
    error_ulps: float  # (stored - x) / ulp(x) on the grid the result lives on (NaN if undefined)

    @property
    def hex(self) -> str:
        return _hex(self.code, self.fmt)

    @property
    def exact(self) -> str:
        """The stored value as an exact decimal string."""
        return _decimal(self.value)

    def __repr__(self) -> str:
        shown = self.exact if len(self.exact) <= 40 else repr(self.value)
        return f"{self.fmt.name}({self.hex}) {shown}"

    def __str__(self) -> str:
        title = (
            f"{self.fmt.name}({self.x_text}) = {_short(self.value, 40)}   "
            f"[{self.outcome}; code {self.hex}]"
        )
        width = max(len(label) for label, _ in self.steps)
        lines = [title]
        for label, text in self.steps:
            pieces = [
                line
                for paragraph in text.split("\n")
                for line in textwrap.wrap(paragraph, 96 - width, break_long_words=False)
            ]
            lines.append(f"  {label:<{width}}  {pieces[0]}")
            lines.extend(f"  {'':<{width}}  {piece}" for piece in pieces[1:])
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return _render_html(self)
