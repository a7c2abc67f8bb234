"""Transformer Engine's per-tensor scale in float32 (``recipe_common.cuh``'s
``compute_scale_from_amax``), for :mod:`floatlab.quant.delayed`'s ``float32=True`` order.

>>> _scale_from_amax32(3.0, get_format("e4m3fn"), 0, False)   # float32(448 / 3)
149.3333282470703
>>> _scale_from_amax32(3.0, get_format("e4m3fn"), 0, True)    # mantissa bits cleared
128.0
"""

from __future__ import annotations

import math
import struct
from functools import lru_cache

import numpy as np

from floatlab.formats import Format, get_format  # noqa: F401 - get_format: the doctest

__all__: list[str] = []  # private helpers of floatlab.quant.delayed


def _scale_from_amax32(amax: float, fmt: Format, margin: int, power_of_two: bool) -> float:
    """Transformer Engine's ``compute_scale_from_amax``: ``fp8_max * 2**-margin / amax`` as
    one float32 division of float32 operands (see the module docstring), as a Python float.

    Why this is TE's float32 quotient: ``fp8_max * 2**-margin`` and ``float32(amax)`` are
    float32 numbers (the first a power-of-two multiple of the format's max, checked below),
    their float64 quotient rounded once more to float32 is the correctly rounded float32
    quotient (double rounding through a format with p = 53 >= 2 * 24 + 2 bits is innocuous for
    the four operations: Figueroa 1995), and the float64 -> float32 conversion (C's cast in
    ``struct``'s "f" packing, as in NumPy's) is IEEE round to nearest even. ``power_of_two``
    clears the quotient's mantissa bits, as TE's ``force_pow_2_scales`` does (so a quotient
    that rounded up to a power of two keeps it).
    """
    amax32 = _to_float32(amax)
    if amax32 == 0:  # TE's amax is a float32: 0 there (even below its subnormals) gives 1.0
        return 1.0
    top = _float32_top(fmt, margin)
    scale = _to_float32(top / amax32)
    if scale == math.inf:
        scale = _FLOAT32_MAX  # TE: an amax too small for a float32 scale
    if power_of_two:
        scale = _F32.unpack(_U32.pack(_U32.unpack(_F32.pack(scale))[0] & 0xFF800000))[0]
    if not scale > 0:
        raise ValueError(f"the float32 scale {top:g} / {amax:g} is 0 (amax too large for "
                         f"margin {margin}); pass a scale explicitly or a smaller margin")
    return scale


def _to_float32(x: float) -> float:
    """x rounded to float32 (nearest even; inf beyond float32's range), as a Python float."""
    try:
        return _F32.unpack(_F32.pack(x))[0]
    except OverflowError:  # struct refuses what rounds beyond float32's max
        return math.copysign(math.inf, x)


@lru_cache(maxsize=64)
def _float32_top(fmt: Format, margin: int) -> float:
    """``fmt.max * 2**-margin``, checked to be a normal float32 (cached: one per operand)."""
    top = fmt.max * 2.0**-margin if margin < 1024 else 0.0
    if not (top == _to_float32(top) and _FLOAT32_TINY <= top <= _FLOAT32_MAX):
        raise ValueError(f"float32 scaling needs fp8_max * 2**-margin to be a normal float32, "
                         f"but {fmt.name}'s max {fmt.max:g} with margin {margin} is not; use a "
                         "smaller margin, a narrower format or float32=False")
    return top


_F32, _U32 = struct.Struct("<f"), struct.Struct("<I")
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_FLOAT32_TINY = float(np.finfo(np.float32).tiny)
