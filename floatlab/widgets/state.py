"""The state of a float toy: one code of one format, and how it got there.

A :class:`ToyState` is immutable and computed entirely by floatlab: rounding by
:func:`floatlab.explain` (which calls :func:`floatlab.round`), decoding by
:func:`floatlab.decode`, the neighbours by :func:`floatlab.nextafter`. The widgets keep one and
replace it on every change, so an input that fails leaves the old state untouched.

>>> s = state_from_value(3.141, "fp16")
>>> s.hex, s.value, s.explanation.outcome
('0x4248', 3.140625, 'rounded')
>>> s.flip(0).value          # the lowest mantissa bit: one ulp up
3.142578125
>>> state_from_value(500, "e4m3fn").value, state_from_value(500, "e4m3fn", saturate=True).value
(nan, 448.0)
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from floatlab.codec import Fields, decode, encode, fields
from floatlab.explain import Explanation, explain, result_grid
from floatlab.formats import Format, get_format
from floatlab.grid import nextafter
from floatlab.rounding import _resolve_mode

__all__ = ["ToyState", "state_from_value", "state_from_code", "TOY_ROUNDING_MODES"]

# The deterministic modes. Stochastic rounding draws a new random number on every redraw, so a
# toy whose picture changed by itself would teach nothing: floatlab.round(..., rng=...) has it.
TOY_ROUNDING_MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd")


@dataclass(frozen=True)
class ToyState:
    """One code of one format, with the input it came from and the options used.

    ``x`` is the input: the typed value, or the code's own value after a bit flip or a code
    set from Python (``from_code``; then nothing was rounded and the error is 0).
    ``explanation`` is :func:`floatlab.explain` of ``x`` with the same options.
    """

    fmt: Format
    x: float
    code: int
    rounding: str
    saturate: bool
    ftz: bool
    from_code: bool
    explanation: Explanation

    @property
    def value(self) -> float:
        """The stored value (float64, exact)."""
        return float(decode(self.code, self.fmt))

    @property
    def hex(self) -> str:
        return f"0x{self.code:0{(self.fmt.bits + 3) // 4}x}"

    @property
    def bits(self) -> str:
        """The code's bits, most significant (sign) first."""
        return format(self.code, f"0{self.fmt.bits}b")

    @property
    def fields(self) -> Fields:
        return fields(np.asarray(self.code, dtype=self.fmt.code_dtype), self.fmt)

    @property
    def kind(self) -> str:
        """zero, subnormal, normal, inf or nan: read from the code itself."""
        return str(self.fields.kind)

    @property
    def grid(self) -> Format:
        """The grid the neighbours live on (without subnormals under FTZ, for typed values)."""
        return result_grid(self.fmt, subnormals=self.from_code or not self.ftz)

    def flip(self, bit: int) -> ToyState:
        """The state with bit number ``bit`` flipped (0 = the lowest mantissa bit)."""
        if isinstance(bit, bool) or not isinstance(bit, (int, np.integer)):
            raise TypeError(f"bit must be an int (0 = the lowest mantissa bit), got {bit!r}")
        if not 0 <= bit < self.fmt.bits:
            raise ValueError(
                f"bit {bit} does not exist: {self.fmt.name} has bits 0..{self.fmt.bits - 1} "
                f"(0 = the lowest mantissa bit, {self.fmt.bits - 1} = the "
                f"{'sign' if self.fmt.signed else 'top exponent'} bit)"
            )
        return state_from_code(self.code ^ (1 << int(bit)), self.fmt, **self.options)

    @property
    def options(self) -> dict[str, Any]:
        return dict(rounding=self.rounding, saturate=self.saturate, ftz=self.ftz)

    def neighbours(self) -> list[tuple[float, str | None]]:
        """The previous and next values on the grid with their hex codes (None: no code)."""
        e = self.explanation
        if self.from_code and math.isnan(self.value):
            return [(math.nan, None), (math.nan, None)]
        return [(v, self._hex_of(v)) for v in (e.previous, e.next)]

    def number_line(self, each_side: int = 2) -> list[float]:
        """Grid values around the stored one, ascending (finite ones only)."""
        v = self.value
        if not math.isfinite(v):
            return []
        ticks = [v]
        for direction in (-math.inf, math.inf):
            current = v
            for _ in range(each_side):
                current = float(nextafter(current, direction, self.grid))
                if not math.isfinite(current):
                    break
                ticks.append(current)
        return sorted(set(ticks))

    def _hex_of(self, value: float) -> str | None:
        if math.isnan(value):
            return None
        code = int(encode(value, self.grid))
        return f"0x{code:0{(self.fmt.bits + 3) // 4}x}"


def _check_options(rounding: Any, saturate: Any, ftz: Any) -> str:
    mode = _resolve_mode(rounding)
    if mode not in TOY_ROUNDING_MODES:
        raise ValueError(
            f"the toy offers the deterministic rounding modes ({', '.join(TOY_ROUNDING_MODES)}); "
            f"for {mode!r} use floatlab.round(x, fmt, rounding={mode!r}, rng=seed)"
        )
    for name, flag in (("saturate", saturate), ("ftz", ftz)):
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"{name} must be True or False, got {flag!r}")
    return mode


def state_from_value(
    x: Any,
    fmt: str | Format | Any,
    rounding: str = "nearest_even",
    saturate: bool = False,
    ftz: bool = False,
) -> ToyState:
    """Round ``x`` into ``fmt`` (``ftz=True``: flush subnormal results to zero)."""
    fmt = get_format(fmt)
    mode = _check_options(rounding, saturate, ftz)
    if ftz and fmt.subnormals and fmt.has_zero and not fmt.has_normals:
        # explain's own message speaks of its subnormals=False, which the toy calls FTZ.
        raise ValueError(
            f"FTZ would flush every nonzero value of {fmt.name} to zero (it has no normal "
            "numbers: every finite value is subnormal): untick FTZ (ftz=False) to explore it"
        )
    e = explain(x, fmt, rounding=mode, saturate=bool(saturate), subnormals=not ftz)
    return ToyState(fmt=fmt, x=e.x, code=e.code, rounding=mode, saturate=bool(saturate),
                    ftz=bool(ftz), from_code=False, explanation=e)


def state_from_code(
    code: Any,
    fmt: str | Format | Any,
    rounding: str = "nearest_even",
    saturate: bool = False,
    ftz: bool = False,
) -> ToyState:
    """The state showing ``code`` of ``fmt`` itself (any code, NaN payloads included)."""
    fmt = get_format(fmt)
    mode = _check_options(rounding, saturate, ftz)
    if isinstance(code, (bool, np.bool_)) or not isinstance(code, (int, np.integer)):
        raise TypeError(f"code must be an int such as 0x4248, got {code!r}")
    code = int(code)
    value = float(decode(code, fmt))  # refuses codes that do not fit the format's bits
    # The code's own value is on the grid, so explaining it rounds nothing; FTZ is a rule for
    # rounding typed values and does not change what a stored subnormal code means.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        e = explain(value, fmt, rounding=mode, saturate=bool(saturate), subnormals=True)
    return ToyState(fmt=fmt, x=value, code=code, rounding=mode, saturate=bool(saturate),
                    ftz=bool(ftz), from_code=True, explanation=e)
