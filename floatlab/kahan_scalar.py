"""Long Kahan (compensated) sums in Python floats: the scalar engines of floatlab.sequential.

A Kahan sum's state (sum, compensation) is a recurrence no scan can split, and a few long sums
have few outputs to vectorise over; so they run step by step in Python floats, column by
column, each operation one rounding of the exact result to the accumulator's format (about a
microsecond per step instead of floatlab.round calls on 0-d arrays). Tests check them equal to
the per-step path (TwoSum, round to odd, floatlab.round per operation) in every mode they
claim, and the generator's end state for stochastic rounding.

Two engines: :func:`_scalar_kahan` (round to nearest even with p <= 25 in signed IEEE and FN
formats, written out by hand; the fastest) and :func:`_general_kahan`
(:mod:`floatlab.kahan_general`: a loop generated per mode from one rounding template), which
computes exactly what the per-step path does, ``floatlab.round(odd_sum(a, b))``, for every
mode and every signed format with a zero and 2 <= p <= 51: FN (NaN on overflow), FNUZ (no -0),
FTZ, the saturating MX formats, the directed modes, round to odd, and stochastic rounding with
the per-step path's random stream (up to 3 sums at once). :func:`_kahan_engine` picks one, or
None for the per-step path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from floatlab.formats import Format
from floatlab.kahan_general import _tiny_check, general_kahan
from floatlab.kahan_lockstep import lockstep_kahan

if TYPE_CHECKING:
    from floatlab.accumulate import Accumulator


def _scalar_kahan_applies(acc: Accumulator) -> bool:
    """Whether :func:`_scalar_kahan` is this Kahan adder: round to nearest even with p <= 25
    in a signed IEEE format (inf on overflow, subnormals) or an FN format (NaN where IEEE has
    inf)."""
    fmt = acc.fmt
    ieee = fmt.special == "ieee" or (
        fmt.special == "fn" and not fmt.has_inf and fmt.has_nan and fmt.has_negative_zero)
    return (_SCALAR_KAHAN and ieee and fmt.signed and fmt.subnormals and fmt.has_zero
            and acc.rounding == "nearest_even" and fmt.p <= 25 and fmt.emax - fmt.p < 900)


_SCALAR_KAHAN = True  # switch for the tests, which check these engines equal to the per-step path


def _scalar_kahan(values: np.ndarray, acc: Accumulator, keep: bool) -> np.ndarray:
    """Kahan sums of the columns of ``values`` (n, m), one after the other, through
    :func:`_scalar_kahan_nearest`: the totals (m,) or the running sums (n, m), float64."""
    columns = [_scalar_kahan_nearest(values[:, j], acc.fmt, keep) for j in range(values.shape[1])]
    if keep:
        return np.stack(columns, axis=1) if columns else np.zeros((values.shape[0], 0))
    return np.array(columns, dtype=np.float64).reshape(values.shape[1])


def _scalar_kahan_nearest(x: np.ndarray, fmt: Format, keep: bool) -> np.ndarray:
    """:func:`_scalar_kahan` in round to nearest even for p <= 25, written out in one loop.

    Each rounding of a float64 value d to fmt is ``(d + M) - M`` with M = 1.5 * 2**52 * q for
    d's quantum q (2**(max(k - 1, emin) - p + 1), k from frexp: 2**(k-1) <= |d| < 2**k, so
    |d| < 2**p q <= 2**51 q, so d + M lies in
    [2**52 q, 2**53 q), where float64's ulp is q, and float64's own rounding to nearest even
    rounds d to a multiple of q, ties to an even multiple (M / q is even); subtracting M is
    exact. The first operation (y = v - c, v any float64 term) is one rounding of the exact
    difference X = d + err: fmt's grid points and midpoints are float64 numbers and float64's
    rounding is monotone, so where d is not a midpoint X lies on the same side of every
    midpoint as d and rounds as d does; where d is a midpoint of fmt (|y - d| == q / 2) and
    inexact (TwoSum's err != 0), X lies on err's side of it, so y steps to that neighbour.
    The other three add values of fmt: their float64 sums round innocuously (Figueroa,
    53 >= 2p + 2), no TwoSum needed;
    their exact sums are never nonzero below the smallest subnormal, so a zero result is an
    exact zero whose sign float64's addition gives. Overflow gives inf (|r| > max), inf and
    NaN pass through; in an FN format (no inf, NaN) both overflow and an inf term give NaN,
    as floatlab.round does (an inf can only come from a term: the sums of two values of the
    format stay far below float64's overflow).
    """
    from math import copysign, frexp, inf, nan

    p, emin, top = fmt.p, fmt.emin, fmt.max
    big_value = inf if fmt.has_inf else nan  # overflow: inf, or NaN in FN formats
    magic = [(1.5 * 2.0**52 * 2.0 ** (max(k - 1, emin) - p + 1),
              0.5 * 2.0 ** (max(k - 1, emin) - p + 1)) for k in range(-1073, 1025)]
    # a memoryview makes each Python float as the loop reads it (faster than a list of them)
    values = memoryview(np.ascontiguousarray(x, dtype=np.float64))
    out = [0.0] * len(values) if keep else None
    s = c = 0.0
    for i, v in enumerate(values):
        # y = round(v - c): the exact difference, with the midpoint correction
        d = v - c
        if d - d == 0.0 and d != 0.0:
            bb = d - v
            err = (v - (d - bb)) + (-c - bb)
            big, half = magic[frexp(d)[1] + 1073]
            y = (d + big) - big
            if err and (y - d == half or d - y == half):
                y = d + half if err > 0.0 else d - half
            if y > top or y < -top:
                y = copysign(big_value, y)
            elif not y:
                y = copysign(0.0, d)
        else:
            y = d if d == 0.0 or big_value == inf else d * 0.0  # FN: inf (and NaN) -> NaN
        # t = round(s + y); the three roundings below are written out rather than called:
        # a Python function call per rounding would add about a quarter to the loop's time
        t = s + y
        if t - t == 0.0 and t != 0.0:
            big = magic[frexp(t)[1] + 1073][0]
            t = (t + big) - big
            if t > top or t < -top:
                t = copysign(big_value, t)
        # c = round(round(t - s) - y)
        u = t - s
        if u - u == 0.0 and u != 0.0:
            big = magic[frexp(u)[1] + 1073][0]
            u = (u + big) - big
            if u > top or u < -top:
                u = copysign(big_value, u)
        c = u - y
        if c - c == 0.0 and c != 0.0:
            big = magic[frexp(c)[1] + 1073][0]
            c = (c + big) - big
            if c > top or c < -top:
                c = copysign(big_value, c)
        s = t
        if keep:
            out[i] = s
    return np.array(out, dtype=np.float64) if keep else np.float64(s)


# --------------------------------------------------------------------------- every other case

# Up to this many columns (with at least 4 rows per column) a Kahan sum runs in Python floats:
# about a microsecond per value, where the per-step path's four vectorised calls per row cost
# about 140 us per row, a microsecond per value only from ~140 columns on
_KAHAN_ENGINE_MAX_COLUMNS = 128

_GENERAL_MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd",
                  "stochastic")


def _general_kahan_applies(acc: Accumulator) -> bool:
    """Whether :func:`_general_kahan` is this Kahan adder: any floatlab mode in a signed format
    with a zero and 2 <= p <= 51 (IEEE, FN, FNUZ, saturating MX formats, FTZ formats).
    Stochastic rounding up to 3 columns column by column, more in lockstep
    (floatlab.kahan_lockstep), where the per-step path's draws per call depend on how many of
    the columns' values lie below 2**emin (see floatlab.kahan_general.general_kahan).
    FTZ formats need emin > -1022 (floatlab.round refuses the others); with at most 11
    exponent bits every quantum and max are float64 numbers."""
    fmt = acc.fmt
    return (_SCALAR_KAHAN and acc.rounding in _GENERAL_MODES and fmt.signed and fmt.has_zero
            and 2 <= fmt.p <= 51
            and (fmt.subnormals or fmt.emin > -1022))


def _general_kahan(values: np.ndarray, acc: Accumulator, keep: bool) -> np.ndarray:
    """Kahan sums of the columns of ``values`` (n, m) through the generated loops of
    :mod:`floatlab.kahan_general` (every operation ``floatlab.round(odd_sum(a, b))`` as the
    per-step path computes it, stochastic rounding with its stream of draws), or of
    :mod:`floatlab.kahan_lockstep` for 4 or more stochastic sums whose draws per call depend on
    the values."""
    if acc.rounding == "stochastic" and values.shape[1] > 3 and _tiny_check(acc.fmt):
        return lockstep_kahan(values, acc.fmt, acc.rng, acc.random_bits, keep)
    return general_kahan(values, acc.fmt, acc.rounding, acc.rng, acc.random_bits, keep)


def _kahan_engine(acc: Accumulator, columns: int):
    """The function ``engine(values, acc, keep)`` that runs the ``columns`` long Kahan sums of
    ``acc`` in Python floats, or None where only the per-step path applies (or is as fast)."""
    if columns > _KAHAN_ENGINE_MAX_COLUMNS:
        return None
    if _scalar_kahan_applies(acc):
        return _scalar_kahan
    if _general_kahan_applies(acc):
        return _general_kahan
    return None
