"""Error-free transformations: the exact error of a float64 addition, and rounding to odd.

Every emulated addition in floatlab (FloatArray ``+ -``, ``fma``, each step of an Accumulator)
is one rounding of an exact sum of two float64 values. TwoSum gives ``s + e == a + b`` exactly
(Knuth); rounding s to odd in float64 (one ulp toward e when e != 0 and s is even) keeps the
information a later rounding needs: round-to-odd at 53 bits followed by any rounding to
p <= 51 bits equals that rounding of the exact value (Boldo & Melquiond, "When double rounding
is odd"). The rounding itself is always ``floatlab.round``.

>>> float(odd_sum(1.0, -2.0**-60)) == 1 - 2.0**-53
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["two_sum", "round_to_odd", "odd_sum", "zero_sum_sign", "sum_for_52",
           "sum_to_round"]


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Knuth's TwoSum: ``s = fl(a + b)`` and the exact error ``e``, ``s + e == a + b``.

    >>> s, e = two_sum(np.array([1.0]), np.array([2.0**-60]))
    >>> float(s[0]), float(e[0])
    (1.0, 8.673617379884035e-19)
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    shape = np.broadcast_shapes(a.shape, b.shape)
    s, e, tmp = np.empty(shape), np.empty(shape), np.empty(shape)  # 0-d arrays too
    _two_sum_into(a, b, s, e, tmp)
    return s, e


def _two_sum_into(a, b, s, e, tmp) -> None:
    """TwoSum written into s and e (tmp: scratch), six passes, no allocation."""
    np.add(a, b, out=s)
    np.subtract(s, a, out=tmp)       # the part of b that made it into s
    np.subtract(s, tmp, out=e)       # the part of a that made it into s
    np.subtract(a, e, out=e)         # a's lost part
    np.subtract(b, tmp, out=tmp)     # b's lost part
    e += tmp


def round_to_odd(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """The float64 round-to-odd of ``s + e`` (``s = fl(s + e)``, ``e`` its exact error).

    Where e != 0 and the last bit of s is even, step one float64 ulp toward e. The result then
    lies strictly between the same two p-bit neighbours as the exact value for any p <= 51, so
    one more rounding to p bits in any mode equals that rounding of the exact value.

    >>> float(round_to_odd(np.array([1.0]), np.array([-1e-30]))[0]) == 1 - 2.0**-53
    True
    """
    s = np.array(s, dtype=np.float64)  # a copy (0-d arrays too)
    _nudge_to_odd(s.reshape(-1), np.asarray(e).reshape(-1))
    return s


def _nudge_to_odd(s: np.ndarray, e: np.ndarray) -> None:
    """In place on 1-D s: where e != 0 and s is even, one float64 ulp toward e."""
    with np.errstate(invalid="ignore"):
        inexact = np.flatnonzero(e)  # usually few: only these need the parity test
    if inexact.size:  # inf + finite gives e = NaN: inf is exact, never nudged to max
        inexact = inexact[((s[inexact].view(np.int64) & 1) == 0) & np.isfinite(s[inexact])]
        s[inexact] = np.nextafter(s[inexact], np.where(e[inexact] > 0, np.inf, -np.inf))


def odd_sum(a: Any, b: Any) -> np.ndarray:
    """``round_to_odd(*two_sum(a, b))``, in cache-sized pieces (float64, broadcast shape).

    >>> float(odd_sum(1.0, -2.0**-60)) == 1 - 2.0**-53
    True
    """
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    shape = a.shape
    a, b = a.reshape(-1), b.reshape(-1)
    out = np.empty(a.size)
    e, tmp = np.empty(min(a.size, _PIECE)), np.empty(min(a.size, _PIECE))
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, a.size, _PIECE):
            piece = slice(start, start + _PIECE)
            k = out[piece].size
            _two_sum_into(a[piece], b[piece], out[piece], e[:k], tmp[:k])
            _nudge_to_odd(out[piece], e[:k])
    return out.reshape(shape)


_PIECE = 1 << 16


def zero_sum_sign(s: Any, a: Any, b: Any, mode: str) -> Any:
    """The sums ``s`` of ``a + b`` (float64, exact or rounded to odd) with IEEE 754's zero signs
    for rounding ``mode`` (IEEE 754-2019, 6.3).

    An exact zero sum of operands of opposite signs (x + (-x), +0 + -0) is +0 in every mode
    but roundTowardNegative ("down"), where it is -0; x + x keeps the sign of x (-0 + -0 is
    -0). float64's own addition gives the signs of round to nearest, which are those of every
    other mode (and of stochastic rounding, whose draws pick between nonzero neighbours), so
    only "down" changes: its exact zero sums become -0 unless both addends are +0. ``s`` is
    zero only where the exact sum is (a float64 sum of float64 values never rounds to zero:
    it is exact below 2**-1021); a nonzero sum that rounds to zero in the format later keeps
    its own sign. ``s`` is returned unchanged or as a new array, never modified.

    >>> float(zero_sum_sign(np.array(0.0), 1.0, -1.0, "down"))
    -0.0
    >>> zero_sum_sign(np.array([0.0, 0.0, 2.0]), [0.0, 0.0, 1.0], [0.0, -0.0, 1.0], "down")
    array([ 0., -0.,  2.])
    """
    if mode != "down":
        return s
    zero = np.asarray(s) == 0
    if not zero.any():  # one pass; the common case
        return s
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    # (s == 0 and a == +0 leave b = +-0: both +0 unless b's sign bit is set)
    both_plus = (a == 0) & ~np.signbit(a) & ~np.signbit(b)
    return np.where(zero & ~both_plus, -0.0, s)


def sum_for_52(a: Any, b: Any, mode: str) -> np.ndarray:
    """A float64 whose rounding in ``mode`` (deterministic) to a format of p = 52 significant
    bits (e11m51) equals that rounding of the exact ``a + b`` (float64 values of that format).

    Round-to-odd (:func:`odd_sum`) needs p + 2 <= 53 bits, one more than float64 has here, and
    float64's own sum s = fl(a + b) would be a second rounding. But the exact sum x = s + e
    (:func:`two_sum`, |e| <= half an ulp of s) differs from s by less than one float64 step,
    and the mode's breakpoints, where its rounding changes, are float64 numbers: the midpoints
    between neighbours (last bit set; the overflow threshold too) for the nearest modes, the
    format's values (last bit clear) for the directed ones. So where s is not a breakpoint, or
    e = 0, s and x round alike; where it is one and e != 0, the next float64 toward x (the other
    parity: not a breakpoint, and nothing lies between it and x) rounds as x does.

    >>> float(sum_for_52(1.0, 2.0**-52 + 2.0**-100, "nearest_even")) == 1 + 2.0**-51
    True
    """
    s, e = two_sum(a, b)
    breakpoint_bit = np.uint64(mode in ("nearest_even", "nearest_away"))
    with np.errstate(invalid="ignore"):
        move = ((s.view(np.uint64) & np.uint64(1)) == breakpoint_bit) & (e != 0) \
            & np.isfinite(e)
    if move.any():
        s[move] = np.nextafter(s[move], np.copysign(np.inf, e[move]))
    return zero_sum_sign(s, a, b, mode)


def sum_to_round(a: Any, b: Any, p: int, mode: str) -> np.ndarray:
    """A float64 whose rounding to a format of ``p`` significant bits in ``mode`` equals that
    rounding of the exact ``a + b`` (a and b float64 values of the format): round to odd for
    p <= 51 (53 >= p + 2 bits, every mode), :func:`sum_for_52` for p = 52 (deterministic modes)
    and float64's own sum for p = 53; exact zero sums signed as IEEE 754 says
    (:func:`zero_sum_sign`). floatlab's adders (the Accumulator's additions, FloatArray's ``+``
    and ``-``) all use it; they refuse, or document, the modes it does not cover.

    >>> float(sum_to_round(1.0, -2.0**-60, 24, "down")) < 1.0
    True
    """
    if p <= 51:
        return zero_sum_sign(odd_sum(a, b), a, b, mode)
    if p == 52 and mode != "stochastic":
        return sum_for_52(a, b, mode)
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return zero_sum_sign(a + b, a, b, mode)

