"""Exact references for arithmetic and accumulation tests: rounding of exact real results.

Nothing here uses floatlab's rounding core. A result is described by a comparator
``cmp(v) = sign(exact - v)`` (exact with Fractions: a rational result, or sqrt(a) compared
through squares), and rounded on the table of a <= 16-bit format's values from oracles.py,
with the parity of codes for ties-to-even and round-to-odd. Results beyond max are not handled
here (``None``): overflow is checked against ml_dtypes.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from fractions import Fraction

from oracles import Layout, positive_table

MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd")


class Table:
    """The non-negative values of a format, as Fractions, with code parities."""

    def __init__(self, fmt):
        values, codes = positive_table(Layout.of(fmt))
        self.floats = values
        self.fracs = [Fraction(v) for v in values]
        self.odd = [bool(c & 1) for c in codes]


def neighbours(table: Table, magnitude_cmp, approx: float) -> tuple[int, int] | None:
    """Indices (lo, hi) of the values around a non-negative exact result (lo == hi if exact)."""
    i = min(max(bisect_left(table.floats, approx), 0), len(table.floats) - 1)
    while i > 0 and magnitude_cmp(table.fracs[i]) < 0:
        i -= 1
    while i + 1 < len(table.fracs) and magnitude_cmp(table.fracs[i + 1]) >= 0:
        i += 1
    if magnitude_cmp(table.fracs[i]) < 0:
        return None  # below zero cannot happen for magnitudes
    if magnitude_cmp(table.fracs[i]) == 0:
        return i, i
    if i + 1 == len(table.fracs):
        return None  # beyond max
    return i, i + 1


def round_exact(table: Table, cmp, approx: float, negative: bool, mode: str) -> float | None:
    """Round the exact value described by ``cmp`` (on signed values) in ``mode``."""
    def magnitude_cmp(v: Fraction) -> int:
        return -cmp(-v) if negative else cmp(v)

    pair = neighbours(table, magnitude_cmp, abs(approx))
    if pair is None:
        return None
    lo, hi = pair
    if lo == hi:
        pick = lo
    elif mode in ("nearest_even", "nearest_away"):
        mid = (table.fracs[lo] + table.fracs[hi]) / 2
        side = magnitude_cmp(mid)
        if side != 0:
            pick = hi if side > 0 else lo
        elif mode == "nearest_away":
            pick = hi
        else:
            pick = lo if not table.odd[lo] else hi
    elif mode == "toward_zero":
        pick = lo
    elif mode == "up":
        pick = lo if negative else hi
    elif mode == "down":
        pick = hi if negative else lo
    elif mode == "odd":
        pick = lo if table.odd[lo] else hi
    else:
        raise ValueError(mode)
    value = table.floats[pick]
    return -value if negative else value


def rational(q: Fraction):
    """(cmp, approx, negative) of a rational exact result."""
    return (lambda v: (q > v) - (q < v)), float(q), q < 0


def square_root(a: Fraction):
    """(cmp, approx, negative) of sqrt(a), a >= 0: compare v >= 0 through squares."""
    def cmp(v: Fraction) -> int:
        if v < 0:
            return 1
        return (a > v * v) - (a < v * v)

    return cmp, math.sqrt(a), False


def neighbours_of(table: Table, q: Fraction) -> tuple[float, float] | None:
    """The two signed values around a rational q (equal when exact); None beyond max."""
    cmp, approx, negative = rational(q)
    lo = round_exact(table, cmp, approx, negative, "toward_zero")
    hi = round_exact(table, cmp, approx, negative, "up" if not negative else "down")
    if lo is None or hi is None:
        return None
    return lo, hi


# --------------------------------------------------------------------------- by formula

def _floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    return e


def grid(q: Fraction, man_bits: int, emin: int) -> tuple[int, Fraction, Fraction]:
    """(k, quantum, remainder): |q| = k * quantum + remainder on the format's grid at |q|
    (subnormal quantum below 2**emin; the exponent is unbounded above: no overflow here)."""
    a = abs(q)
    e = max(_floor_log2(a), emin) if a else emin
    quantum = Fraction(2) ** (e - man_bits)
    k = math.floor(a / quantum)
    return k, quantum, a - k * quantum


def round_fraction(q: Fraction, fmt, mode: str) -> Fraction:
    """Round a rational to a format's grid in a deterministic mode (no overflow handling)."""
    if q == 0:
        return Fraction(0)
    negative = q < 0
    k, quantum, rem = grid(q, fmt.man_bits, fmt.emin)
    half = quantum / 2
    if rem == 0:
        up = False
    elif mode == "nearest_even":
        up = rem > half or (rem == half and k % 2 == 1)
    elif mode == "nearest_away":
        up = rem >= half
    elif mode == "toward_zero":
        up = False
    elif mode == "up":
        up = not negative
    elif mode == "down":
        up = negative
    elif mode == "odd":
        up = k % 2 == 0
    else:
        raise ValueError(mode)
    r = (k + up) * quantum
    return -r if negative else r


def neighbours_formula(q: Fraction, fmt) -> tuple[Fraction, Fraction]:
    """The two grid values around q, toward zero first (equal when q is on the grid)."""
    k, quantum, rem = grid(q, fmt.man_bits, fmt.emin)
    sign = -1 if q < 0 else 1
    lo = sign * k * quantum
    return lo, (lo if rem == 0 else sign * (k + 1) * quantum)
