"""The rounding core's kernels: bit layouts and the rounding of integer significands.

:func:`floatlab.round` (``floatlab/rounding.py``) chooses a working layout (float64, or float32
where the format fits), splits each input into an integer significand and exponent, and calls
the kernels here: :func:`_round_pattern` rounds a whole bit pattern at a fixed position (inputs
at or above the format's smallest normal), :func:`_round_significand` rounds when the number of
discarded bits varies per element (the subnormal range, FTZ), and :func:`_round_up_decision` is
the one place where each rounding mode decides, from the exact discarded remainder, whether to
step up by one quantum. Special values and overflow are :mod:`floatlab._rounding_specials`;
the proved whole-array fast paths are :mod:`floatlab._rounding_fast`.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

import numpy as np

from floatlab.formats import Format


class _Layout:
    """The integer view of an IEEE binary float used as working precision."""

    def __init__(self, dtype: type, uint: type, man_bits: int, bias: int):
        self.dtype, self.uint = np.dtype(dtype), np.dtype(uint)
        self.man_bits, self.bias = man_bits, bias
        self.width = self.dtype.itemsize * 8
        self.emin = 1 - bias  # exponent of the smallest normal working value
        self.man_mask = self.uint.type((1 << man_bits) - 1)
        self.hidden = self.uint.type(1 << man_bits)
        self.abs_mask = self.uint.type((1 << (self.width - 1)) - 1)
        self.exp_all_ones = (1 << (self.width - 1 - man_bits)) - 1


_F64 = _Layout(np.float64, np.uint64, 52, 1023)
_F32 = _Layout(np.float32, np.uint32, 23, 127)


@lru_cache(maxsize=256)
def _fits_float32(fmt: Format) -> bool:
    """Whether float32 can be the working precision: every quantum and every value of the
    format is a float32, and the format's normal range starts inside float32's (so that
    float32 subnormal inputs clamp to the format's subnormal quantum correctly)."""
    return fmt.man_bits <= 23 and fmt.emax <= 127 and fmt.emin >= _F32.emin


@lru_cache(maxsize=1024)
def _bits_of(value: float, L: _Layout) -> np.unsignedinteger:
    """The working-precision bit pattern of a (representable) limit such as max."""
    return L.dtype.type(value).view(L.uint)


def _round_pattern_nearest_even(bits, shift, out_bits) -> None:
    """out = bits rounded to nearest-even at bit ``shift``: add half - 1 (+1 if odd), truncate."""
    uint = bits.dtype.type
    if shift == 0:  # the format keeps every bit (float32 -> float32)
        out_bits[...] = bits
        return
    np.right_shift(bits, uint(shift), out=out_bits)
    out_bits &= uint(1)
    out_bits += uint((1 << (shift - 1)) - 1)
    out_bits += bits
    out_bits &= ~uint((1 << shift) - 1)


def _round_pattern(mag, fmt, mode, negative, rng, L) -> np.ndarray:
    """Round magnitude bit patterns at a fixed bit position (exact for inputs >= 2**emin).

    Within a binade the pattern, read as an integer, is linear in the value, and a carry out of
    the mantissa steps correctly into the next binade (or to inf).
    """
    uint = L.uint.type
    shift = L.man_bits - fmt.man_bits
    if shift == 0:
        return mag
    low_mask = uint((1 << shift) - 1)
    if mode == "nearest_even":  # add half - 1, plus 1 if the kept part is odd; then truncate
        odd = (mag >> uint(shift)) & uint(1)
        rounded = mag + uint((1 << (shift - 1)) - 1)
        rounded += odd
        rounded &= ~low_mask
        return rounded
    kept = mag >> uint(shift)
    rem = mag & low_mask
    half = uint(1 << (shift - 1))
    step = _round_up_decision(mode, kept, rem, half, rem != 0, negative, shift, rng, L)
    return (kept + step.astype(L.uint)) << uint(shift)


def _round_significand(mag, fmt, mode, negative, ftz, rng, L) -> np.ndarray:
    """Round magnitudes whose number of discarded bits varies per element.

    Works block by block in per-thread scratch buffers that live across calls: this path makes
    about a dozen full-size intermediates, and allocating them afresh costs more than the
    arithmetic (page faults on every call, depending on malloc's state).
    """
    out = np.empty_like(mag)
    for start in range(0, mag.size, _SIGNIFICAND_BLOCK):
        part = slice(start, start + _SIGNIFICAND_BLOCK)
        sub_negative = None if negative is None else negative[part]
        _round_significand_block(mag[part], fmt, mode, sub_negative, ftz, rng, L, out[part])
    return out


_SIGNIFICAND_BLOCK = 1 << 16
_scratch = threading.local()


def _buffers(n: int, dtype: np.dtype, count: int) -> list[np.ndarray]:
    """``count`` scratch arrays of ``n`` elements, reused by later calls in this thread."""
    pool = getattr(_scratch, "pool", None)
    if pool is None:
        pool = _scratch.pool = {}
    bufs = pool.get(dtype)
    if bufs is None or bufs[0].size < n or len(bufs) < count:
        bufs = pool[dtype] = [np.empty(max(n, _SIGNIFICAND_BLOCK), dtype) for _ in range(count)]
    return [b[:n] for b in bufs[:count]]


def _round_significand_block(mag, fmt, mode, negative, ftz, rng, L, dest) -> None:
    """Round when the number of discarded bits varies per element (target subnormals, FTZ).

    value = sig * 2**(e - man_bits); the target quantum is 2**q with q = binade - M, where the
    binade is clamped at the format's emin (subnormals share emin's quantum). All exponents are
    kept biased and unsigned, so every step is one cheap integer pass, written in place.
    """
    uint = L.uint.type
    e_biased, sig, binade, capped, n = _buffers(mag.size, L.uint, 5)
    np.right_shift(mag, uint(L.man_bits), out=e_biased)
    # Working-precision subnormals act as exponent field 1 without the hidden bit; their
    # exponent is <= the format's emin (checked when the layout is chosen), so clamping works.
    np.maximum(e_biased, uint(1), out=e_biased)
    # sig = hidden bit + mantissa: remove all exponent bits but the hidden one.
    np.subtract(e_biased, uint(1), out=sig)
    np.left_shift(sig, uint(L.man_bits), out=sig)
    np.subtract(mag, sig, out=sig)
    np.maximum(e_biased, uint(fmt.emin + L.bias if not ftz else 0), out=binade)
    # Discarded bits: (binade - e) + (L.man_bits - M), >= 0.
    np.subtract(binade, e_biased, out=capped)
    capped += uint(L.man_bits - fmt.man_bits)
    shift = capped.copy() if mode == "stochastic" else None  # the true shift, uncapped
    # Beyond width-1 discarded bits the kept part is 0 and the remainder < half; capping keeps
    # the shifts defined without changing any decision.
    np.minimum(capped, uint(L.width - 1), out=capped)
    kept = e_biased  # e_biased is no longer needed
    np.right_shift(sig, capped, out=kept)
    np.left_shift(uint(1), capped, out=n)
    n -= uint(1)  # n = low mask: the discarded bits
    if mode == "nearest_even" and fmt.man_bits < L.man_bits:  # every shift >= 1 here
        np.right_shift(n, uint(1), out=n)  # half - 1
        n += sig
        n += kept & uint(1)  # ties go up only from an odd kept part
        np.right_shift(n, capped, out=n)
    else:
        rem = sig & n
        half = (n >> uint(1)) + (capped > uint(0)).astype(L.uint)
        step = _round_up_decision(mode, kept, rem, half, rem != uint(0), negative, shift, rng, L)
        np.add(kept, step.astype(L.uint), out=n)
    # n * 2**q, exact: n < 2**(M+2), and 2**q is built from its biased exponent bits when
    # that is a normal working value (always, except for FTZ far below the format's range).
    result = dest.view(L.dtype)
    result[...] = n
    lowest_q_biased = (1 if ftz else fmt.emin + L.bias) - fmt.man_bits
    if lowest_q_biased >= 1:
        np.subtract(binade, uint(fmt.man_bits), out=binade)
        np.left_shift(binade, uint(L.man_bits), out=binade)
        result *= binade.view(L.dtype)
    else:
        q = binade.astype(np.int32) - np.int32(fmt.man_bits + L.bias)
        result *= np.ldexp(L.dtype.type(1), q)


def _round_up_decision(mode, kept, rem, half, inexact, negative, shift, rng, L) -> np.ndarray:
    """Whether to add one quantum to the truncated magnitude, per element."""
    if mode == "nearest_even":
        odd = (kept & L.uint.type(1)).astype(bool)
        return inexact & ((rem > half) | ((rem == half) & odd))
    if mode == "nearest_away":
        return inexact & (rem >= half)
    if mode == "toward_zero":
        return np.zeros(kept.shape, dtype=bool)
    if mode == "up":
        return inexact & ~negative
    if mode == "down":
        return inexact & negative
    if mode == "odd":
        return inexact & ~(kept & L.uint.type(1)).astype(bool)
    # stochastic: round up with probability rem / 2**shift (exact in float64 up to 2**-1074)
    fraction = np.ldexp(rem.astype(np.float64), -np.asarray(shift).astype(np.int32))
    if isinstance(rng, _LimitedRandomBits):  # k random bits: the probability is truncated
        fraction, rng = rng.truncate(fraction), rng.generator
    return inexact & (rng.random(kept.shape) < fraction)


class _LimitedRandomBits:
    """A generator for stochastic rounding with k random bits (see ``round(random_bits=)``).

    Hardware adds k random bits to the top k discarded bits and rounds up on a carry: the
    probability of rounding up is floor(fraction * 2**k) / 2**k. Comparing a uniform float64
    draw (a multiple of 2**-53) with that truncated fraction gives exactly this probability.
    """

    def __init__(self, generator: np.random.Generator, bits: int):
        self.generator, self.bits = generator, bits

    def truncate(self, fraction: np.ndarray) -> np.ndarray:
        return np.ldexp(np.floor(np.ldexp(fraction, self.bits)), -self.bits)


def _check_random_bits(bits: Any) -> int:
    if isinstance(bits, (bool, np.bool_)) or not isinstance(bits, (int, np.integer)):
        raise TypeError(f"random_bits must be an int (the number of random bits), got {bits!r}")
    if not 1 <= bits <= 52:
        raise ValueError(f"random_bits={bits} is out of range: use 1..52 (or None for exact "
                         "stochastic rounding)")
    return int(bits)
