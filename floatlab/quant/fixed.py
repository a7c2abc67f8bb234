"""Fixed-point formats: ``FixedPoint(word_bits, frac_bits, signed=True)``.

A fixed-point value is an integer ``k`` times the quantum ``2**-frac_bits``; ``k`` is a
two's-complement integer of ``word_bits`` bits (``-2**(w-1) .. 2**(w-1) - 1``) or, unsigned,
``0 .. 2**w - 1``. Overflow saturates (QPyTorch's and mptorch's ``clamp=True``); wrap-around is
not emulated, so ``saturate`` is accepted by :meth:`FixedPoint.round` for symmetry with
floatlab.round and always on.

Rounding goes through :func:`floatlab.round` (one implementation, every mode): the grid of
multiples of ``2**-f`` below ``2**(emin + 1)`` is exactly the subnormal range plus the first
binade of the float format ``Format(exp_bits=1, man_bits=w - 1, bias=1 - emin, special="none")``
with ``emin = w - 1 - f`` (its subnormal quantum ``2**(emin - M)`` and its one normal binade's
quantum are both ``2**-f``). Rounding there and then clipping to ``[min, max]`` is rounding on
the unbounded fixed-point grid followed by saturation.

>>> import floatlab
>>> q = floatlab.FixedPoint(8, 6)                   # MXINT8's element: 1.984375 .. -2
>>> q.max, q.min, q.quantum
(1.984375, -2.0, 0.015625)
>>> floatlab.round([0.3, 5.0, -0.0078125], q)      # -1/128 is a tie: to even (0)
array([0.296875, 1.984375, 0.      ])
>>> floatlab.encode([0.296875, -2.0], q), floatlab.decode([19, 0x80], q)
(array([ 19, 128], dtype=uint8), array([ 0.296875, -2.      ]))
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import Any

import numpy as np

from floatlab._validate import check_flag
from floatlab.formats import Format
from floatlab.rounding import _resolve_mode, as_float_array
from floatlab.rounding import round as round_to_format

__all__ = ["FixedPoint"]


class FixedPoint:
    """A two's-complement (or unsigned) fixed-point format; see the module docstring.

    Parameters
    ----------
    word_bits : total bits, 1..53 (2..53 when signed) so every value is exact in float64.
    frac_bits : fraction bits (the quantum is ``2**-frac_bits``); any int, negative allowed.
    signed : two's complement (default) or unsigned.
    name : display name; default ``"fixed<w>_<f>"`` (``"ufixed..."`` unsigned).

    >>> FixedPoint(4, 0).values().tolist()              # int4
    [-8.0, -7.0, -6.0, -5.0, -4.0, -3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    """

    is_element_format = True  # floatlab.round / encode / decode / values / explain dispatch on it

    def __init__(self, word_bits: int, frac_bits: int, signed: bool = True, name: str = ""):
        for label, value in (("word_bits", word_bits), ("frac_bits", frac_bits)):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"FixedPoint {label} must be an int, got {value!r}")
        if not isinstance(signed, (bool, np.bool_)):
            raise TypeError(f"FixedPoint signed must be True or False, got {signed!r}")
        if not isinstance(name, str):
            raise TypeError(f"FixedPoint name must be a string, got {name!r}")
        low = 2 if signed else 1
        if not low <= word_bits <= 53:
            raise ValueError(
                f"word_bits={word_bits} is out of range: use {low}..53 (every value must be "
                "exact in float64)"
            )
        self.word_bits, self.frac_bits, self.signed = int(word_bits), int(frac_bits), bool(signed)
        self.name = name or f"{'' if signed else 'u'}fixed{word_bits}_{frac_bits}"
        magnitude_bits = self.word_bits - 1 if self.signed else self.word_bits
        emin = magnitude_bits - self.frac_bits
        if not -1022 <= emin <= 1022 or emin - magnitude_bits < -1074:
            raise ValueError(
                f"FixedPoint({word_bits}, {frac_bits}) leaves float64's range; use fewer "
                "fraction bits"
            )
        # The float format whose subnormals + first binade are this grid (module docstring).
        self._grid = Format(exp_bits=1, man_bits=magnitude_bits, bias=1 - emin, special="none",
                            name=f"grid of {self.name}")

    # ------------------------------------------------------------------ limits
    @property
    def bits(self) -> int:
        return self.word_bits

    @property
    def quantum(self) -> float:
        return math.ldexp(1.0, -self.frac_bits)

    @property
    def max(self) -> float:
        """Largest value, ``(2**(w-1) - 1) * 2**-f`` (unsigned: ``(2**w - 1) * 2**-f``)."""
        top = (1 << (self.word_bits - 1)) - 1 if self.signed else (1 << self.word_bits) - 1
        return math.ldexp(top, -self.frac_bits)

    @property
    def min(self) -> float:
        """Most negative value, ``-2**(w-1) * 2**-f`` (0 unsigned)."""
        return -math.ldexp(1.0, self.word_bits - 1 - self.frac_bits) if self.signed else 0.0

    @property
    def code_dtype(self) -> np.dtype:
        for dtype in (np.uint8, np.uint16, np.uint32, np.uint64):
            if self.word_bits <= np.dtype(dtype).itemsize * 8:
                return np.dtype(dtype)
        raise AssertionError("unreachable")

    def __repr__(self) -> str:
        kind = "two's complement" if self.signed else "unsigned"
        return (f"FixedPoint({self.name!r}: {self.word_bits} bits {kind}, {self.frac_bits} "
                f"fraction bits, range [{self.min:g}, {self.max:g}], step {self.quantum:g})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FixedPoint) and (
            (self.word_bits, self.frac_bits, self.signed)
            == (other.word_bits, other.frac_bits, other.signed))

    def __hash__(self) -> int:
        return hash(("FixedPoint", self.word_bits, self.frac_bits, self.signed))

    # ------------------------------------------------------------------ round / codes
    def round(self, x: Any, rounding: str = "nearest_even", saturate: bool = True,
              subnormals: bool = True, rng: Any = None, dtype: Any = None) -> np.ndarray:
        """Round to the grid with any floatlab rounding mode, then saturate to [min, max].

        NaN raises (fixed point has no NaN); +-inf saturate to max / min.

        >>> FixedPoint(8, 0).round([2.5, 3.5, 127.6, -300.0]).tolist()
        [2.0, 4.0, 127.0, -128.0]
        """
        _resolve_mode(rounding)  # the mode names are floatlab.round's
        check_flag(saturate, "saturate")  # (always on: a string must not look like a choice)
        check_flag(subnormals, "subnormals")
        arr = as_float_array(x)
        try:
            out = round_to_format(arr, self._grid, rounding=rounding, saturate=True, rng=rng,
                                  dtype=dtype)
        except ValueError as error:
            raise ValueError(str(error).replace(self._grid.name, self.name)) from None
        np.clip(out, self.min, self.max, out=out)
        out += 0.0  # two's complement has no -0
        return out

    def encode(self, x: Any, **rounding_options: Any) -> np.ndarray:
        """Round, then the codes: ``k mod 2**w`` (two's complement bit patterns)."""
        values = self.round(x, **rounding_options)
        return self.codes_of_values(values)

    def codes_of_values(self, values: np.ndarray) -> np.ndarray:
        """Codes of values already on the grid."""
        values = np.asarray(values)
        if values.dtype != np.float32:
            values = values.astype(np.float64, copy=False)
        scaled = values * values.dtype.type(math.ldexp(1.0, self.frac_bits))  # exact: k
        if self.word_bits in (8, 16, 32) and self.signed:  # two's complement is the int view
            return scaled.astype(f"int{self.word_bits}").view(self.code_dtype)
        k = scaled.astype(np.int64)
        return (k & ((1 << self.word_bits) - 1)).astype(self.code_dtype)

    def decode(self, codes: Any) -> np.ndarray:
        """Values (float64) of codes; codes must be ints in ``0 .. 2**w - 1``."""
        arr = np.asarray(codes)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"codes must be integers, got dtype {arr.dtype}")
        if arr.size and (arr.min() < 0 or arr.max() >= 1 << self.word_bits):
            raise ValueError(f"codes of {self.name} run from 0 to {(1 << self.word_bits) - 1}")
        k = arr.astype(np.int64)
        if self.signed:
            k = np.where(k >= 1 << (self.word_bits - 1), k - (1 << self.word_bits), k)
        return np.ldexp(k.astype(np.float64), -self.frac_bits)

    def values(self) -> np.ndarray:
        """Every value, ascending (word_bits <= 16)."""
        if self.word_bits > 16:
            raise ValueError(f"{self.name} has 2**{self.word_bits} values: values() lists at "
                             "most 16-bit formats")
        return np.sort(self.decode(np.arange(1 << self.word_bits)))

    @cached_property
    def float32_exact(self) -> bool:
        """Whether every value is a float32 (so float32 working arrays hold them exactly)."""
        magnitude_bits = self.word_bits - int(self.signed)
        return magnitude_bits <= 24 and -126 <= magnitude_bits - self.frac_bits <= 127 and \
            -self.frac_bits >= -149

    def explain(self, x: Any, rounding: str = "nearest_even", rng: Any = None):
        """How one value is stored: the integer k, its code and the error."""
        from floatlab.quant.codebook import ElementExplanation

        if np.ndim(x) != 0:
            raise TypeError(f"explain takes one value, got an array of shape {np.shape(x)}: "
                            f"pass one element, or use floatlab.round / encode for arrays")
        x64 = float(as_float_array(x).astype(np.float64))
        value = float(self.round(x64, rounding=rounding, rng=rng))
        code = int(self.codes_of_values(np.array(value)))
        k = int(math.ldexp(value, self.frac_bits))
        lines = [
            f"{self.name}({x64!r}) = {value!r}   [code {code:#0{2 + (self.word_bits + 3) // 4}x}]",
            f"  format   {self!r}",
            f"  integer  k = {k} (value = k * 2^-{self.frac_bits})"
            + ("   [saturated]" if x64 > self.max or x64 < self.min else ""),
            f"  bits     {code:0{self.word_bits}b}",
            f"  error    {value - x64:.6g}",
        ]
        return ElementExplanation(x64, value, code, self.name, "\n".join(lines))
