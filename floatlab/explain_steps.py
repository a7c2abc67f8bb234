"""The derivation behind :func:`floatlab.explain`: from the input and the rounding core's
result, build each step of an :class:`~floatlab.explanation.Explanation` (sign, window,
buckets, rounding, fields, overflow / underflow, error, ulp, neighbours, class) as text.

The rounding is always done by :func:`floatlab.round` (here only again in sibling formats with
an unbounded exponent, to narrate overflow and flushing); the neighbours and ulps come from
:mod:`floatlab.grid`.

>>> from floatlab import get_format
>>> steps = _Derivation(0.1, 0.1, 0.10009765625, get_format("bf16"), "nearest_even", False,
...                     True, []).build().steps
>>> [label for label, _ in steps][:4]
['input', 'sign', 'window', 'offset']
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np

from floatlab.codec import codes_to_bin, encode, fields
from floatlab.explanation import Explanation, _hex, _short
from floatlab.formats import Format
from floatlab.grid import _decimal, _ulp_of_magnitude, nextafter, ulp
from floatlab.rounding import round as round_to_format

__all__ = ["result_grid"]

_MODE_WORDS = {
    "nearest_even": "to nearest (ties to even)",
    "nearest_away": "to nearest (ties away from zero)",
    "toward_zero": "toward zero",
    "up": "up (toward +inf)",
    "down": "down (toward -inf)",
    "odd": "to odd",
    "stochastic": "stochastically (up with probability = the fraction)",
}
_NEAREST = ("nearest_even", "nearest_away")


def _float(value: Fraction) -> float:
    """``float(value)``, or +-inf when it is beyond float64's range (the relative error of
    rounding 5e-324 up to a format's smallest subnormal is about 2**1050)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _pow2(k: int) -> str:
    return f"2^{k}"


def result_grid(fmt: Format, subnormals: bool = True) -> Format:
    """The grid a rounding result lives on: ``fmt`` itself, or, under FTZ
    (``subnormals=False``), ``fmt`` without subnormals (no subnormals to be neighbours of).

    >>> from floatlab import get_format
    >>> result_grid(get_format("fp16"), subnormals=False).smallest_positive == 2.0**-14
    True
    """
    if subnormals or not (fmt.subnormals and fmt.has_zero):
        return fmt
    if not fmt.has_normals:  # the FTZ grid would be zero alone: no Format describes it
        raise ValueError(
            f"subnormals=False flushes every nonzero value of {fmt.name} to zero (it has no "
            "normal numbers: every finite value is subnormal), which leaves no grid of results "
            f"to explain; use subnormals=True, or floatlab.round(x, {fmt.name!r}, "
            "subnormals=False) for the zeros"
        )
    return replace(fmt, subnormals=False, name=f"{fmt.name} (FTZ)")


class _Derivation:
    """Builds the steps of an :class:`Explanation` from the input and the core's result."""

    def __init__(self, original, x, value, fmt, mode, saturate, subnormals, notes):
        self.original, self.x, self.value, self.fmt = original, x, value, fmt
        self.mode, self.saturate, self.notes = mode, saturate, notes
        self.subnormals = subnormals
        self.ftz = not (subnormals and fmt.subnormals)
        self.grid = result_grid(fmt, subnormals)
        # The value is on the grid (or inf / NaN), so this encoding is exact, not a 2nd rounding.
        self.code = int(encode(value, fmt))
        f = fields(np.asarray(self.code, dtype=fmt.code_dtype), fmt)
        self.sign, self.exp_field = int(f.sign), int(f.exponent)
        self.man_field, self.unbiased = int(f.mantissa), int(f.unbiased_exponent)
        self.kind = str(f.kind)
        self.bits = str(codes_to_bin(np.asarray(self.code), fmt))
        self.steps: list[tuple[str, str]] = []

    # ------------------------------------------------------------------ helpers
    def add(self, label: str, text: str) -> None:
        self.steps.append((label, text))

    def x_text(self) -> str:
        if isinstance(self.original, (int, np.integer)) and not isinstance(self.original, bool):
            return str(int(self.original))
        return repr(self.x)

    def num(self, value: float | Fraction, limit: int = 24) -> str:
        """A value of the format for prose: short, but enough digits to tell neighbours apart."""
        return _short(value, limit, 6 if self.fmt.p <= 11 else 17)

    def code_text(self, value: float, code: int) -> str:
        if math.isnan(value):
            return "none"
        return f"{self.num(value)} ({_hex(code, self.fmt)})"

    def split_bits(self) -> str:
        f, b = self.fmt, self.bits
        parts = [b[:1]] if f.signed else []
        start = 1 if f.signed else 0
        parts.append(b[start : start + f.exp_bits])
        if f.man_bits:
            parts.append(b[start + f.exp_bits :])
        return " | ".join(parts)

    # ------------------------------------------------------------------ the derivation
    def build(self) -> Explanation:
        f, x = self.fmt, self.x
        self.add("input", self.input_text())
        if math.isnan(x):
            outcome = self.special_input("nan")
        elif math.isinf(x):
            outcome = self.special_input("inf")
        else:
            self.sign_step()
            outcome = self.zero_input() if x == 0 else self.finite_input()
        self.add("bits", f"{self.split_bits()}  = {_hex(self.code, f)}")
        error, rel, error_ulps = self.error_step()
        step = self.ulp_step()
        prev, nxt = self.neighbour_step()
        self.class_step()
        if outcome != "invalid":  # an invalid input's warning is already the explanation
            for note in self.notes:
                self.add("note", note)
        return Explanation(
            x=x, fmt=f, rounding=self.mode, saturate=self.saturate, subnormals=self.subnormals,
            value=self.value, code=self.code, bits=self.bits, kind=self.kind, outcome=outcome,
            sign=self.sign, exponent=self.exp_field, mantissa=self.man_field,
            unbiased_exponent=self.unbiased, error=error, relative_error=rel, ulp=step,
            previous=prev, next=nxt, formula=self.formula(), steps=tuple(self.steps),
            x_text=self.x_text(), error_ulps=error_ulps,
        )

    def input_text(self) -> str:
        text = f"x = {self.x_text()}"
        if math.isfinite(self.x) and self.x != 0:
            exact = _decimal(self.x)
            if exact != self.x_text() and exact != self.x_text().removesuffix(".0"):
                if len(exact) <= 60:
                    text += f"\n(as a float64 it is exactly {exact})"
                else:
                    text += f"\n(as a float64 it is {self.x:.20g}..., not exactly {self.x_text()})"
        return text

    def sign_step(self) -> None:
        f, x = self.fmt, self.x
        negative = math.copysign(1.0, x) < 0
        if not f.signed:
            text = f"{f.name} has no sign bit: it holds positive values only"
            if negative:
                text += ", so a negative x cannot be stored (the result is NaN)"
        elif x == 0 and negative and not f.has_negative_zero:
            text = (
                f"x is -0, but {f.name} has no -0 (its code {_hex(f.sign_mask, f)} is the NaN): "
                "stored as +0, sign bit 0"
            )
        elif x == 0 and negative:
            text = "x is -0 (negative zero), so the sign bit is 1"
        elif negative:
            text = "x < 0, so the sign bit is 1; the rest encodes |x|"
        else:
            text = "x >= 0, so the sign bit is 0"
        self.add("sign", text)

    def special_input(self, what: str) -> str:
        f = self.fmt
        if what == "nan":
            where = {
                "ieee": "exponent all ones, mantissa non-zero; floatlab's canonical NaN sets the "
                "top mantissa bit",
                "fn": "the all-ones code is the only NaN",
                "fnuz": "the only NaN is the code 100...0, where -0 would be",
                "p3109": "the only NaN is the code 100...0, where -0 would be"
                if f.signed else "the all-ones code is the only NaN",
            }[f.special]
            self.add("special", f"NaN in, NaN out ({where})")
            return "nan"
        if f.has_inf:
            self.add("special", "inf is stored as exponent all ones, mantissa 0"
                     if f.special == "ieee" else
                     f"inf is stored as the largest code of its sign ({f.inf_code:#04x})")
        elif math.isnan(self.value):
            self.add(
                "special",
                f"{f.name} has no inf: inf becomes NaN (as ml_dtypes and torch's cast); "
                f"saturate=True gives +-max = {_short(f.max)} (as NVIDIA's satfinite "
                "conversion)",
            )
        else:
            self.add("special", f"{f.name} has no inf: saturate=True clamps inf to +-max")
        return "inf"

    def zero_input(self) -> str:
        f = self.fmt
        if not f.has_zero:
            self.add("zero", f"{f.name} has no zero (every code is a power of two or NaN): "
                     "0 cannot be stored, the result is NaN")
            return "invalid"
        self.add("zero", "zero is stored as exponent field 0 and mantissa 0")
        self.add("value", f"{_decimal(self.value)} exactly")
        return "exact"

    def finite_input(self) -> str:
        f, x = self.fmt, self.x
        ax = abs(x)
        if not f.signed and x < 0:
            return "invalid"
        e_x = math.frexp(ax)[1] - 1
        subnormal_window = e_x < f.emin and f.has_zero and not self.ftz
        if subnormal_window:
            start, exp_for_width = Fraction(0), f.emin
            self.add(
                "window",
                f"|x| < {_pow2(f.emin)} = {_short(math.ldexp(1.0, f.emin))}, where normals start: "
                "x lies "
                f"in the subnormal window [0, {_pow2(f.emin)}), where the exponent is fixed at "
                f"emin = {f.emin} and the hidden bit is 0",
            )
        else:
            start, exp_for_width = Fraction(2) ** e_x, e_x
            where = f"the window [{_short(start)}, {_short(2 * start)})"
            text = f"{_pow2(e_x)} <= |x| < {_pow2(e_x + 1)}, so e = {e_x}: x lies in {where}"
            if e_x > f.emax:
                text += f", but the largest exponent of {f.name} is emax = {f.emax}"
            elif e_x < f.emin:
                text += f", but the smallest exponent of {f.name} is emin = {f.emin}"
            self.add("window", text)
        width = Fraction(2) ** (exp_for_width - f.man_bits)
        offset = (Fraction(ax) - start) / width
        buckets = 2**f.man_bits
        self.add(
            "offset",
            f"the window holds 2^{f.man_bits} = {buckets} bucket{'s' if buckets > 1 else ''} "
            f"of width {_pow2(exp_for_width - f.man_bits)} = {_short(width)};\n"
            f"(|x| - {_short(start)}) / {_short(width)} = {self.offset_text(offset)}",
        )

        if not f.has_zero and e_x < f.emin:
            return self.clamp_up()
        rounded = self.unbounded(ax, start, offset, width, subnormal_window)
        self.bucket_step(offset, (Fraction(rounded) - start) / width, buckets, e_x,
                         subnormal_window)
        if rounded > f.max:
            return self.overflow(rounded)
        if self.value == 0:
            return self.underflow(ax, rounded)
        self.field_steps()
        if self.value == x:
            return "exact"
        return "subnormal" if self.kind == "subnormal" else "rounded"

    def offset_text(self, offset: Fraction) -> str:
        """The exact offset when short, else truncated (not rounded: 1023.9999 must not read
        as 1024) to 6 decimals."""
        text = _decimal(offset)
        if len(text) <= 12 or offset.denominator == 1:
            return text
        whole = math.floor(offset)
        if whole == 0 and offset < Fraction(1, 10**6):
            return f"{_short(offset)}..."
        decimals = str(math.floor((offset - whole) * 10**6)).rjust(6, "0").rstrip("0")
        return f"{whole}.{decimals or '0'}..."

    def bucket_step(self, offset, chosen, buckets, e_x, subnormal_window) -> None:
        how = _MODE_WORDS[self.mode]
        if offset.denominator == 1:
            text = f"exactly on bucket {offset}: no rounding needed"
        else:
            tie = " (a tie: exactly halfway)" if offset.denominator == 2 else ""
            text = f"between buckets {math.floor(offset)} and {math.floor(offset) + 1}{tie}; "
            text += f"rounding {how} picks bucket {chosen}"
        if chosen == buckets and not subnormal_window:
            text += f", which is the start of the next window {_pow2(e_x + 1)} (a carry)"
        elif chosen == buckets:
            text += ", which is the smallest normal (the carry leaves the subnormal window)"
        self.add("rounding", text)

    def unbounded(self, ax, start, offset, width, subnormal_window) -> Fraction:
        """|x| rounded with the format's precision but an unbounded exponent: the value the
        core compares with max (overflow) and, under FTZ, with the smallest normal (flush).

        The core does the rounding (never by hand): in a sibling format with the same mantissa
        width, on |x| scaled into [1, 2). In the subnormal window the stored value itself is
        the rounded one.
        """
        f, value = self.fmt, abs(self.value)
        if self.mode == "stochastic":
            # A second random draw could differ from the core's: read the choice off the result.
            lower = start + math.floor(offset) * width
            saturated = value == f.max and lower > f.max
            if math.isfinite(value) and value != 0 and not saturated:
                return Fraction(value)
            return lower if lower > f.max or value == 0 else lower + width
        if subnormal_window:
            # A fixed-point grid of quantum 2**(emin - M): round |x| / quantum to an integer in
            # a sibling whose subnormal quantum is 1 (emin = M), with room above, so values
            # past a tiny max (formats with no normal range, e.g. e1m1) are not clamped.
            quantum_exp = f.emin - f.man_bits
            sibling = Format(exp_bits=4, man_bits=f.man_bits, bias=1 - f.man_bits,
                             special="ieee" if f.man_bits else "fn")
            signed = math.copysign(math.ldexp(ax, -quantum_exp), self.x)
            scaled = abs(float(round_to_format(signed, sibling, rounding=self.mode)))
            return Fraction(scaled) * Fraction(2) ** quantum_exp
        # Round |x| scaled into [1, 2) in a sibling format with the same mantissa width and a
        # roomy exponent range, then scale back: exact, as rounding commutes with powers of two
        # in the normal range. (The scaling also keeps this off the core's fast path for formats
        # whose emin equals float64's, which rounds p = 1 ties differently; see the tests.)
        e_x = math.frexp(ax)[1] - 1
        sibling = Format(
            exp_bits=10, man_bits=f.man_bits, bias=511, special="ieee" if f.man_bits else "fn"
        )
        # Signed: directed modes round -x and x differently.
        signed = math.copysign(math.ldexp(ax, -e_x), self.x)
        scaled = abs(float(round_to_format(signed, sibling, rounding=self.mode)))
        return Fraction(scaled) * Fraction(2) ** e_x  # may be 2**1024: no float for that

    def field_steps(self) -> None:
        f = self.fmt
        if f.has_zero and self.exp_field == 0:
            self.add(
                "exponent",
                f"field {self.exp_field:0{f.exp_bits}b} marks a subnormal: the exponent is "
                f"emin = {f.emin} (not 0 - {f.bias})",
            )
        else:
            text = (
                f"field = e + bias = {self.unbiased} + {f.bias} = {self.exp_field} "
                f"= {self.exp_field:0{f.exp_bits}b} ({f.exp_bits} bits)"
            )
            if self.exp_field == f.exp_field_max and f.special in ("fn", "fnuz", "none"):
                text += (
                    f" (in {f.name} the all-ones exponent holds finite values"
                    + ("; only all-ones mantissa is NaN)" if f.special == "fn" else ")")
                )
            self.add("exponent", text)
        if f.man_bits == 0:
            self.add("mantissa", "no mantissa bits: the significand is the hidden 1 alone, "
                     "so every value is a power of two")
        else:
            hidden = "0" if self.kind == "subnormal" else "1"
            sig = Fraction(int(hidden) * 2**f.man_bits + self.man_field, 2**f.man_bits)
            self.add(
                "mantissa",
                f"bucket {self.man_field} = {self.man_field:0{f.man_bits}b} "
                f"({f.man_bits} bit{'s' if f.man_bits > 1 else ''}); "
                f"with the hidden bit the significand is\n{hidden}.{self.man_field:0{f.man_bits}b}"
                f" (binary) = {hidden} + {self.man_field}/{2**f.man_bits} = {_short(sig, 30)}",
            )
        formula = self.formula()
        self.add("value", formula if "≈" in formula else f"{formula} exactly")

    def formula(self) -> str:
        """``(-1)^s × 2^(E - bias) × (1 + m/2^M) = value`` for the stored code."""
        f, v = self.fmt, self.value
        if math.isnan(v) or math.isinf(v) or v == 0:
            return _decimal(v)
        sign = f"(-1)^{self.sign} × " if f.signed else ""
        if f.has_zero and self.exp_field == 0:
            scale, sig = f"2^{f.emin}", f"(0 + {self.man_field}/{2**f.man_bits})"
        else:
            scale = f"2^({self.exp_field} - {f.bias})"
            sig = f"(1 + {self.man_field}/{2**f.man_bits})" if f.man_bits else "1"
        exact = _decimal(v)
        shown = f"= {exact}" if len(exact) <= 60 else f"≈ {v!r}"
        return f"{sign}{scale} × {sig} {shown}"

    def overflow(self, unbounded: Fraction) -> str:
        f = self.fmt
        text = (
            f"|x| rounds to {_short(unbounded)} with an unbounded exponent, which is above "
            f"max = {_short(f.max)}: the value overflows"
        )
        if math.isinf(self.value):
            text += f", and {f.name} has inf, so the result is {_decimal(self.value)}"
        elif math.isnan(self.value):
            text += (
                f", and {f.name} has no inf, so the result is NaN (as ml_dtypes and torch's "
                f"cast); saturate=True gives +-{_short(f.max)} (as NVIDIA's satfinite "
                "conversion)"
            )
        elif self.saturate:
            text += f"; saturate=True clamps it to +-max = {_short(f.max)}"
        elif not f.has_nan:
            text += f"; {f.name} has neither inf nor NaN, so it saturates to +-max"
        else:
            text += f"; rounding {self.mode} never overflows to inf, so it gives +-max"
        threshold = self.overflow_threshold()
        if threshold:
            text += "\n" + threshold
        self.add("overflow", text)
        if math.isfinite(self.value):
            self.field_steps()
        elif math.isinf(self.value):
            self.add("value", "inf: exponent field all ones, mantissa 0" if f.special == "ieee"
                     else f"inf: the largest code of its sign, {_hex(self.code, f)}")
        else:
            self.add("value", f"NaN: the code {_hex(self.code, f)}")
        return "overflow"

    def overflow_threshold(self) -> str:
        f = self.fmt
        if self.mode not in _NEAREST:
            return ""
        half = Fraction(_ulp_of_magnitude(np.asarray(f.max), f).item()) / 2
        limit = Fraction(f.max) + half
        significand_odd = (Fraction(f.max) / (2 * half)).numerator % 2 == 1
        if self.mode == "nearest_away" or significand_odd:
            return (
                f"(every |x| >= {_short(limit)} = max + ulp(max)/2 overflows in this mode)"
            )
        return (
            f"(every |x| > {_short(limit)} = max + ulp(max)/2 overflows; {_short(limit)} "
            f"itself ties to the even max)"
        )

    def underflow(self, ax: float, rounded: Fraction) -> str:
        f = self.fmt
        smallest = f.smallest_positive
        if self.ftz:
            who = "this conversion flushes" if f.subnormals else f"{f.name} has no"
            why = (
                f"|x| rounds to {self.num(rounded)}, below the smallest normal {_pow2(f.emin)} = "
                f"{self.num(math.ldexp(1.0, f.emin))}, and {who} subnormals (FTZ): it is flushed "
                "to zero"
            )
        elif self.mode in _NEAREST:
            half = smallest / 2
            rel = "below" if ax < half else "exactly"
            why = (
                f"|x| is {rel} half the smallest subnormal ({_pow2(f.emin - f.man_bits - 1)} ≈ "
                f"{half:.3g}), so it rounds to zero"
                + (" (the tie goes to the even 0)" if ax == half else "")
            )
        else:
            why = f"rounding {self.mode} from the first bucket gives zero"
        sign = "-0" if math.copysign(1.0, self.value) < 0 else "+0"
        self.add("underflow", f"{why}: {sign}")
        return "underflow"

    def clamp_up(self) -> str:
        f = self.fmt
        self.add(
            "underflow",
            f"|x| < {_pow2(f.emin)}, the smallest value, and {f.name} has neither zero nor "
            f"subnormals: x is clamped up to {_pow2(f.emin)}",
        )
        self.field_steps()
        return "underflow"

    # ------------------------------------------------------------------ common tail
    def error_step(self) -> tuple[float, float, float]:
        x, v = self.x, self.value
        if not (math.isfinite(x) and math.isfinite(v)):
            return math.nan, math.nan, math.nan
        err = Fraction(v) - Fraction(x)
        rel = err / Fraction(x) if x != 0 else Fraction(0)
        if err == 0:
            self.add("error", "none: x is a value of the format")
            return 0.0, 0.0, 0.0
        in_ulps = err / Fraction(float(ulp(x, self.grid)))
        text = (
            f"stored - x = {_float(err):.6g} ({_float(in_ulps):+.3g} ulp); "
            f"relative {_float(rel):.3g}"
        )
        u = self.fmt.unit_roundoff
        normal_floor = self.fmt.normal_threshold
        normal_range = normal_floor <= abs(x) <= self.fmt.max
        if self.mode in _NEAREST and self.kind == "normal" and normal_range:
            text += f", within u = 2^-{self.fmt.p} ≈ {u:.3g}, the bound for round-to-nearest"
        elif abs(x) < normal_floor:
            why = " (subnormals have fewer significant bits)" if self.grid.subnormals else ""
            text += f"; below the smallest normal the relative error is not bounded by u{why}"
        self.add("error", text)
        return _float(err), _float(rel), _float(in_ulps)

    def ulp_step(self) -> float:
        v = self.value
        if not math.isfinite(v):
            return math.nan
        step = float(ulp(v, self.grid))
        k = math.frexp(step)[1] - 1
        self.add("ulp", f"ulp({self.num(v)}) = {_pow2(k)} = {self.num(step)}: the gap to the "
                 "next larger magnitude")
        return step

    def neighbour_step(self) -> tuple[float, float]:
        v = self.value
        if math.isnan(v):
            return math.nan, math.nan
        both = nextafter([v, v], [-np.inf, np.inf], self.grid)
        prev, nxt = float(both[0]), float(both[1])
        codes = [int(c) for c in encode(np.where(np.isnan(both), self.fmt.max, both), self.fmt)]
        self.add(
            "neighbours",
            f"previous {self.code_text(prev, codes[0])}, next {self.code_text(nxt, codes[1])}",
        )
        return prev, nxt

    def class_step(self) -> None:
        text = {
            "normal": "normal (hidden bit 1)",
            "subnormal": "subnormal (exponent field 0, hidden bit 0: fewer significant bits)",
            "zero": "zero",
            "inf": "infinity",
            "nan": "NaN (not a number)",
        }[self.kind]
        self.add("class", text)


# =========================================================================== HTML
