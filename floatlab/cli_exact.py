"""Typed numbers rounded ONCE: the command line keeps the exact value of what people type
(``1.00048828125000000000000000001``, ``0.1**2``, ``0x1.00000000000001p0``) and hands
floatlab's rounding a float64 *carrier* that rounds to the target exactly as the typed value
does, instead of the float64 nearest to it (rounding to float64 first and then to the format
rounds twice: the decimal just above fp16's tie 1 + 2**-11 became 1 + 2**-11, then 1.0).

How the carrier is chosen, for a typed value q that is not itself a float64:

* formats with a precision p <= 51 (p + 2 <= 53 bits: every preset but float64) whose smallest
  quantum is at least 2**-1072: q rounded to float64 *to odd* (truncated, then the last bit set
  if anything was cut). Between two neighbours of the format, or of their midpoints, there are
  at least three float64s, so the odd float64 lies strictly on the same side of every value and
  midpoint of the format as q: every mode (nearest_even, nearest_away, toward_zero, up, down,
  odd) rounds it to what it rounds q to; stochastic rounding sees a probability off by less
  than 2**-(53 - p). (With --ftz floatlab rounds the binade just below 2**emin on its own grid;
  it refuses --ftz for the formats whose normals start at float64's, the only ones where that
  grid could be finer than 2**-1072.)
* wider formats (float64, e11m51, e11m52: p > 51, smallest quantum below 2**-1072): the
  format's values are float64s, so the carrier is the correctly rounded result itself, chosen
  from q's two neighbours in the format (ties to even by the code's last bit; stochastic from
  64 random bits; an overflow is inf, or max with --saturate).

Range edges: values float64 cannot hold (the nearest float64 is inf or 0: 1e400, 1e-400) are
refused by the parser; a value between float64's max and max + half an ulp is kept (its odd
carrier is max, which still overflows every narrower format as q does).

>>> from floatlab.formats import get_format
>>> t = typed("1.00048828125000000000000000001")
>>> t.nearest, t.is_float64, t.carrier(get_format("fp16"), "nearest_even")
(1.00048828125, False, 1.0004882812500002)
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from floatlab.formats import Format
from floatlab.rounding import round as round_to_format

__all__ = ["Typed", "typed", "round_to_odd_f64"]


@dataclass(frozen=True)
class Typed:
    """A number as typed: its text, the float64 nearest to it, and its exact value (None for
    inf and nan, whose float64 is exact)."""

    text: str
    nearest: float
    exact: Fraction | None

    @property
    def is_float64(self) -> bool:
        return self.exact is None or Fraction(self.nearest) == self.exact

    @property
    def echo(self) -> str:
        """The value for an 'x -> stored' line: the float64's repr when it is the typed value,
        otherwise the text as typed (the float64 repr would name a value x is not)."""
        return repr(self.nearest) if self.is_float64 else self.text.strip()

    def carrier(self, fmt: Format, rounding: str, saturate: bool = False,
                rng: np.random.Generator | None = None) -> float:
        """A float64 that floatlab.round(., fmt, rounding, ...) rounds as it would round the
        exact typed value (see the module docstring)."""
        if self.is_float64:
            return self.nearest  # also keeps -0.0, inf, nan
        if fmt.p + 2 <= 53 and fmt.normal_threshold * 2.0**-fmt.man_bits >= 2.0**-1072:
            return round_to_odd_f64(self.exact)
        return _wide_result(self.exact, fmt, rounding, saturate, rng)


def typed(text: str) -> Typed:
    """Parse ``text`` as floatlab.cli_input.parse_number does, keeping the exact value."""
    from floatlab.cli_input import _parse_exact

    nearest, exact = _parse_exact(text)
    return Typed(text, nearest, exact)


def _bits(value: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", value))[0]


def round_to_odd_f64(q: Fraction) -> float:
    """``q`` rounded to float64 to odd: exact if q is a float64, else whichever neighbour has
    an odd last bit (max for max < |q|; q must not round to inf or 0 to nearest).

    >>> round_to_odd_f64(Fraction(1, 10)).hex(), (0.1).hex()
    ('0x1.9999999999999p-4', '0x1.999999999999ap-4')
    """
    f = float(q)
    if Fraction(f) == q:
        return f
    other = math.nextafter(f, -math.inf if Fraction(f) > q else math.inf)
    return f if _bits(f) & 1 else other


def _wide_result(q: Fraction, fmt: Format, rounding: str, saturate: bool,
                 rng: np.random.Generator | None) -> float:
    """The exact rounding of ``q`` (not a float64) to a format whose values are float64s."""
    f = float(q)  # q's float64 neighbours a < q < b (b = inf above max, a = -inf below -max)
    a, b = ((f, math.nextafter(f, math.inf)) if Fraction(f) < q
            else (math.nextafter(f, -math.inf), f))
    lo = float(round_to_format(a, fmt, rounding="down")) if math.isfinite(a) else -math.inf
    hi = float(round_to_format(b, fmt, rounding="up")) if math.isfinite(b) else math.inf
    top = Fraction(2) ** (fmt.emax + 1)  # beyond max, the next 'value' is 2**(emax + 1)
    lo_q = -top if math.isinf(lo) else Fraction(lo)
    hi_q = top if math.isinf(hi) else Fraction(hi)
    if rounding in ("nearest_even", "nearest_away"):
        mid = (lo_q + hi_q) / 2  # (float64's own midpoints are no float64s: q may be one)
        if q != mid:
            up = q > mid
        elif rounding == "nearest_away":
            up = q > 0
        else:  # ties to even: the neighbour whose last code bit is 0 (2**(emax + 1) is even)
            up = not math.isfinite(hi) or not _code_lsb(hi, fmt)
    elif rounding in ("up", "down"):
        up = rounding == "up"
    elif rounding == "toward_zero":
        up = q < 0
    elif rounding == "odd":
        up = math.isfinite(hi) and bool(int(_code_lsb(hi, fmt)))
    else:  # stochastic: up with probability (q - lo) / (hi - lo), from 64 random bits
        rng = np.random.default_rng() if rng is None else rng
        draw = Fraction(int(rng.integers(0, 2**63, dtype=np.uint64)), 2**63)
        up = draw < (q - lo_q) / (hi_q - lo_q)
    result = hi if up else lo
    if math.isinf(result) and saturate:
        return math.copysign(fmt.max, result)
    return result


def _code_lsb(value: float, fmt: Format) -> int:
    from floatlab.codec import encode

    return int(encode(value, fmt)) & 1


def explain_typed(number: Typed, fmt: Format, options: dict) -> str:
    """floatlab.explain's text for a typed number: of its carrier, with the input and the
    error told of the typed value itself when no float64 is that value."""
    from dataclasses import replace

    from floatlab.explain import explain, result_grid
    from floatlab.explain_steps import _float
    from floatlab.grid import ulp

    rng = np.random.default_rng(options["rng"]) if options["rounding"] == "stochastic" else None
    c = number.carrier(fmt, options["rounding"], options["saturate"], rng)
    e = explain(c, fmt, **options)
    if number.is_float64:
        return str(e)
    text, q = number.text.strip(), number.exact
    wide = not (fmt.p + 2 <= 53 and c != e.value)
    how = (f"the steps below explain that result, x rounded once ({options['rounding']})"
           if wide else f"the steps use the float64 {c!r}, on the same side of every value and "
           f"midpoint of {fmt.name} as x, so it rounds as x does (rounded once, not via float64)")
    steps = []
    for label, step in e.steps:
        if label == "input":
            step = f"x = {text}\n(no float64 is x: the nearest is {number.nearest!r}; {how})"
        elif label == "window" and wide:  # a carry can put the result in the next window
            step = _window_text(q, fmt, options)
        elif label == "offset":  # the carrier's offset, moved to x's exact one
            step = _offset_step(q, fmt, options)
        elif label == "rounding" and wide and math.isfinite(e.value):  # the carrier is exact
            step = _wide_rounding_text(q, e.value, fmt, options)
        elif label == "error" and math.isfinite(e.value):
            err = Fraction(e.value) - q
            grid = result_grid(fmt, options["subnormals"])  # (x's ulp: its odd float64's)
            in_ulps = err / Fraction(float(ulp(round_to_odd_f64(q), grid)))
            exact_text = (f"stored - x = {_float(err):.6g} ({_float(in_ulps):+.3g} ulp); "
                          f"relative {_float(err / q):.3g}")
            step = re.sub(r"^stored - x = \S+ \(\S+ ulp\); relative [^,;]+", exact_text, step) \
                if step.startswith("stored") else exact_text
        steps.append((label, step))
    return str(replace(e, x_text=text, steps=tuple(steps),
                       outcome="rounded" if e.outcome == "exact" else e.outcome))


def _window(q: Fraction, fmt: Format, options: dict) -> tuple[Fraction, int, int, bool]:
    """explain's window of x: its start, exponent, the exponent of its bucket width and
    whether it is the subnormal window (q's odd float64 lies in q's window: powers of two
    are float64s)."""
    e_x = math.frexp(abs(round_to_odd_f64(q)))[1] - 1
    ftz = not (options["subnormals"] and fmt.subnormals)
    if e_x < fmt.emin and fmt.has_zero and not ftz:
        return Fraction(0), e_x, fmt.emin, True
    return Fraction(2) ** e_x, e_x, e_x, False


def _offset_text(q: Fraction, fmt: Format, options: dict) -> tuple[str, Fraction]:
    """explain's offset (|x| - window start) / bucket width, of the typed value."""
    from floatlab.explain_steps import _Derivation

    start, _, exp_for_width, _ = _window(q, fmt, options)
    offset = (abs(q) - start) / Fraction(2) ** (exp_for_width - fmt.man_bits)
    if offset.denominator & (offset.denominator - 1) == 0:  # dyadic: explain's own text
        return _Derivation.offset_text(None, offset), offset
    whole = math.floor(offset)  # truncated as explain does (1023.9999 must not read as 1024)
    if whole == 0 and offset < Fraction(1, 10**6):
        return f"{float(offset):.6g}...", offset
    decimals = str(math.floor((offset - whole) * 10**6)).rjust(6, "0").rstrip("0")
    return f"{whole}.{decimals or '0'}...", offset


def _offset_step(q: Fraction, fmt: Format, options: dict) -> str:
    """explain's offset step (floatlab.explain_steps, finite_input) for the typed value."""
    from floatlab.explain_steps import _pow2, _short

    start, _, exp_for_width, _ = _window(q, fmt, options)
    width, buckets = Fraction(2) ** (exp_for_width - fmt.man_bits), 2**fmt.man_bits
    return (f"the window holds 2^{fmt.man_bits} = {buckets} bucket{'s' if buckets > 1 else ''} "
            f"of width {_pow2(exp_for_width - fmt.man_bits)} = {_short(width)};\n"
            f"(|x| - {_short(start)}) / {_short(width)} = {_offset_text(q, fmt, options)[0]}")


def _window_text(q: Fraction, fmt: Format, options: dict) -> str:
    """explain's window step (floatlab.explain_steps, finite_input) for the typed value."""
    from floatlab.explain_steps import _pow2, _short

    start, e_x, _, subnormal = _window(q, fmt, options)
    if subnormal:
        return (f"|x| < {_pow2(fmt.emin)} = {_short(math.ldexp(1.0, fmt.emin))}, where normals "
                f"start: x lies in the subnormal window [0, {_pow2(fmt.emin)}), where the "
                f"exponent is fixed at emin = {fmt.emin} and the hidden bit is 0")
    text = (f"{_pow2(e_x)} <= |x| < {_pow2(e_x + 1)}, so e = {e_x}: x lies in the window "
            f"[{_short(start)}, {_short(2 * start)})")
    if e_x < fmt.emin:
        text += f", but the smallest exponent of {fmt.name} is emin = {fmt.emin}"
    return text


def _wide_rounding_text(q: Fraction, value: float, fmt: Format, options: dict) -> str:
    """explain's rounding step for x (no float64) rounded to a format of float64s."""
    from types import SimpleNamespace

    from floatlab.explain_steps import _Derivation

    start, e_x, exp_for_width, subnormal = _window(q, fmt, options)
    width = Fraction(2) ** (exp_for_width - fmt.man_bits)
    offset = _offset_text(q, fmt, options)[1]
    steps: list[tuple[str, str]] = []
    me = SimpleNamespace(mode=options["rounding"], add=lambda *step: steps.append(step))
    _Derivation.bucket_step(me, offset, (abs(Fraction(value)) - start) / width,
                            2**fmt.man_bits, e_x, subnormal)
    return steps[0][1]
