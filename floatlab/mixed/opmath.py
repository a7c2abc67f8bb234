"""torch's "opmath" arithmetic for in-place updates: ``x.add_(y, alpha=a)`` and ``x.mul_(s)``.

torch's CPU kernels for 16-bit and float32 tensors compute in float32 ("opmath"; float64 for
float64 tensors) and store the result in the tensor's dtype. Measured on torch 2.13 (CPU) and
modelled exactly here:

* ``x.add_(y, alpha=a)``: ``a`` is converted to the tensor's dtype, then ``x + a * y`` is one
  fused multiply-add in float32 (a single rounding), then stored in the dtype. So SGD's
  ``param.add_(grad, alpha=-lr)`` rounds once for float32 weights: w - lr * g is NOT rounded
  at the product.
* ``x.mul_(s)`` with a Python number ``s``: ``s`` becomes a float32 scalar, ``x * s`` is
  rounded to float32, then stored in the dtype.

(torch's scalar tail loop -- the last few elements of a tensor whose length is not a multiple
of twice the SIMD width -- rounds ``a * y`` to a 16-bit dtype separately; floatlab models the
vectorised body, which is every element of every tensor of a multiple-of-64 length.)

>>> import numpy as np; from floatlab import get_format
>>> w, g = np.float32(0.10490011), np.float32(975.7378)
>>> float(axpy(np.array([w]), -1e-3, np.array([g]), get_format("fp32"))[0])  # torch's
-0.8708377480506897
>>> float(np.float32(w - np.float32(np.float32(1e-3) * g)))                   # two roundings
-0.8708376884460449
"""

from __future__ import annotations

import numpy as np

from floatlab.formats import Format
from floatlab.mixed.policy import FP32, FP64, contains
from floatlab.mixed.tensor import quantize

__all__ = ["axpy", "scale", "fma32", "opmath_format", "round_to_odd_sum"]


def opmath_format(fmt: Format) -> Format:
    """The format torch computes in for tensors of ``fmt``: float32, or float64 above it."""
    return FP32 if contains(FP32, fmt) else FP64


def round_to_odd_sum(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``x + p`` in float64 rounded to odd instead of to nearest (both float64 arrays).

    Rounding to odd at 53 bits and then to nearest at 24 bits equals one rounding to nearest
    at 24 bits (53 >= 24 + 2), so this gives an exactly-rounded float32 fused multiply-add when
    ``p`` is an exact product. TwoSum recovers the error of the float64 addition; an inexact sum
    whose last bit is even moves one ulp toward the exact value (the odd neighbour).
    """
    s = x + p
    bp = s - x
    err = (x - (s - bp)) + (p - bp)  # s + err == x + p exactly (TwoSum, no overflow)
    even = (s.view(np.int64) & 1) == 0
    fix = (err != 0) & even & np.isfinite(s)
    if fix.any():
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s


def axpy(x: np.ndarray, alpha: float, y: np.ndarray, fmt: Format, *, what: str = "optimizer",
         rounding: str | None = None, rng: np.random.Generator | None = None) -> np.ndarray:
    """torch's ``x.add_(y, alpha=alpha)`` for tensors of ``fmt``: one rounding in opmath, then
    the store into ``fmt`` (``rounding`` / ``rng`` apply to that store, e.g. stochastic).

    ``x`` and ``y`` hold values of formats no wider than the opmath format.
    """
    a = _to(alpha, fmt)
    op = opmath_format(fmt)
    x, y = np.asarray(x), np.asarray(y)
    if a == 1.0 and x.dtype == y.dtype == np.float32:
        # Fast path (Adam's write): an IEEE float32 addition is the exact sum rounded once to
        # float32, which is what the FMA computes when alpha is 1. Tested equal to the
        # general path in tests/test_mixed_optim.py.
        wide = x + y
    elif op is FP64:  # float64 tensors: numpy has no FMA; the product rounds separately here
        wide = np.asarray(x, np.float64) + a * np.asarray(y, np.float64)
    else:  # a * y is exact in float64 (24 + 24 bits); the sum is rounded to odd, then to fp32
        summed = round_to_odd_sum(np.asarray(x, np.float64), a * np.asarray(y, np.float64))
        wide = _nearest(summed, FP32)
    return quantize(wide, fmt, what=what, rounding=rounding, rng=rng)


def fma32(a: np.ndarray | float, b: np.ndarray | float, c: np.ndarray) -> np.ndarray:
    """``a * b + c`` rounded once to float32 (a fused multiply-add), for float32 values.

    The product of two float32 values is exact in float64, so the round-to-odd sum followed by
    one rounding to float32 is the correctly rounded FMA.

    >>> x = np.float32(1 + 2**-12)
    >>> float(fma32(x, x, np.float32(-1.0))) == 2**-11 + 2**-24     # exact: 2**-11 + 2**-24
    True
    >>> float(x * x - np.float32(1.0))                              # x * x rounded first
    0.00048828125
    """
    product = np.asarray(a, np.float64) * np.asarray(b, np.float64)
    addend = np.asarray(c, np.float64)
    if not _FAST_FMA32:
        return _nearest(round_to_odd_sum(addend, product), FP32)
    out, risky = _fma32_cast(addend, product)
    if risky.any():  # the flagged elements (often a few percent: short values) take the
        #              round-to-odd path
        idx = np.flatnonzero(risky)
        c_all, p_all = np.broadcast_arrays(addend, product)
        odd = round_to_odd_sum(c_all.reshape(-1)[idx], p_all.reshape(-1)[idx])
        # Rounding to odd at 53 bits keeps RN32 of the exact sum (53 >= 24 + 2): inside
        # float32's normal range that is the IEEE cast, as _nearest computes it there (an odd
        # sum is no midpoint unless exact, when the cast's tie to even is the FMA's own); the
        # rest (subnormal, overflow, NaN) take _nearest itself.
        mag = np.abs(odd)
        normal = (mag >= _F32_TINY) & (mag <= _F32_MAX)
        fixed = odd.astype(np.float32)
        if not normal.all():
            fixed[~normal] = _nearest(odd[~normal], FP32)
        out.reshape(-1)[idx] = fixed
    return out


def _fma32_cast(c: np.ndarray, product: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the float32 cast of the float64 sum ``s = c + product``, the flags of the elements
    where that cast may differ from fma32's round-to-odd path), for Adam's moment updates.

    Proof that the cast equals ``_nearest(round_to_odd_sum(c, product), FP32)`` unless an
    element is flagged: let x = c + product (exact) and s = RN64(x). Every float32 rounding
    boundary -- the midpoint of two adjacent float32 values, normal or subnormal, and the
    overflow threshold -- is a float64 number (at most 25 significant bits, exponent >= -150).
    RN64 is monotone and fixes float64 numbers, so for a boundary m, x < m gives s <= m and
    x > m gives s >= m: unless s *is* a boundary, s and x lie strictly between the same two
    boundaries, and RN32(s) = RN32(x), the correctly rounded FMA, which is what rounding to
    odd then to nearest computes (53 >= 24 + 2). NumPy's float64 -> float32 cast is IEEE's
    RN32, and ``_nearest`` to FP32 is floatlab.round, the same RN32 for finite values inside
    float32's normal range (no saturation or subnormal rule comes into play there). Flagged:
    s a normal-range midpoint (its low 29 fraction bits are 1 followed by zeros), s nonzero
    below 2**-126 (the subnormal range, whose midpoints sit elsewhere), and |s| beyond
    float32's max (overflow, inf, NaN: the policy's saturation decides those). Tested equal to
    the round-to-odd path on midpoints, subnormals, overflow and random values
    (tests/test_mixed_optim.py).
    """
    s = c + product
    bits = s.view(np.uint64)
    mag = bits & _ABS64
    risky = (bits & _LOW29) == _HALF29
    risky |= mag > _F32_MAX_BITS
    risky |= (mag - np.uint64(1)) < _F32_TINY_BITS_MINUS_1  # 0 < |s| < 2**-126 (0 wraps)
    return np.asarray(s.astype(np.float32)), risky


_FAST_FMA32 = True  # switch for the tests, which check the cast against round-to-odd
_ABS64 = np.uint64(0x7FFF_FFFF_FFFF_FFFF)
_LOW29, _HALF29 = np.uint64((1 << 29) - 1), np.uint64(1 << 28)
_F32_MAX, _F32_TINY = float(np.finfo(np.float32).max), 2.0**-126
_F32_MAX_BITS = np.float64(np.finfo(np.float32).max).view(np.uint64)
_F32_TINY_BITS_MINUS_1 = np.float64(2.0**-126).view(np.uint64) - np.uint64(1)


def scale(x: np.ndarray, s: float, fmt: Format, *, what: str = "optimizer",
          rounding: str | None = None, rng: np.random.Generator | None = None) -> np.ndarray:
    """torch's ``x.mul_(s)`` for a Python number ``s`` and a tensor of ``fmt`` (``rounding`` /
    ``rng`` apply to the store into ``fmt``, e.g. stochastic)."""
    op = opmath_format(fmt)
    if op is FP64:
        return quantize(np.asarray(x, np.float64) * s, fmt, what=what, rounding=rounding, rng=rng)
    wide = _nearest(np.asarray(x, np.float64) * _to(s, FP32), FP32)  # the product is exact
    return quantize(wide, fmt, what=what, rounding=rounding, rng=rng)


def _nearest(values: np.ndarray, fmt: Format) -> np.ndarray:
    """An internal opmath rounding: always to nearest, never counted by telemetry."""
    return quantize(values, fmt, what="partial", rounding="nearest_even")


_SCALARS: dict[tuple[float, int], tuple[Format, float]] = {}


def _to(number: float, fmt: Format) -> float:
    """A Python number converted to ``fmt`` (C++'s conversion of a scalar argument); memoised,
    as an optimizer converts the same few hyperparameters every step."""
    key = (float(number), id(fmt))
    hit = _SCALARS.get(key)
    if hit is None or hit[0] is not fmt:
        hit = _SCALARS[key] = (fmt, float(_nearest(np.array([number], np.float64), fmt)[0]))
    return hit[1]
