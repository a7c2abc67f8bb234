"""One long Kahan (compensated) sum in Python floats: the scalar engine of floatlab.sequential.

A Kahan sum's state (sum, compensation) is a recurrence no scan can split, and a single long
sum has one output to vectorise over; so it runs step by step in Python floats, each operation
one rounding of the exact result to the accumulator's format (one to two microseconds per step
instead of floatlab.round calls on 0-d arrays). Tests check it equal to the general per-step
path (TwoSum, round to odd, floatlab.round) in every mode it claims.

Two engines: :func:`_scalar_kahan` (signed IEEE formats with subnormals, the deterministic
modes but round to odd; the faster one) and :func:`_general_kahan`, which computes exactly
what the per-step path does, ``floatlab.round(odd_sum(a, b))``, for every mode and every
signed format with a zero and 2 <= p <= 51: FN (NaN on overflow), FNUZ (no -0), FTZ, the
saturating MX formats, round to odd, and stochastic rounding with the per-step path's random
stream (one sum only). :func:`_kahan_engine` picks one, or None for the per-step path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from floatlab.formats import Format

if TYPE_CHECKING:
    from floatlab.accumulate import Accumulator

_SCALAR_MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down")


def _scalar_kahan_applies(acc: Accumulator) -> bool:
    """Whether :func:`_scalar_kahan` is this Kahan adder: a deterministic mode other than
    round-to-odd in a signed IEEE format (inf on overflow, subnormals, p <= 51 so that every
    grid point and midpoint is a float64 number), or round to nearest even in an FN format
    (NaN where IEEE has inf, as :func:`_scalar_kahan_nearest` handles)."""
    fmt = acc.fmt
    ieee = fmt.special == "ieee" or (
        fmt.special == "fn" and not fmt.has_inf and fmt.has_nan and fmt.has_negative_zero
        and _nearest_engine_applies(acc))
    return (_SCALAR_KAHAN and acc.rounding in _SCALAR_MODES and ieee
            and fmt.signed and fmt.subnormals and fmt.has_zero and fmt.p <= 51)


def _nearest_engine_applies(acc: Accumulator) -> bool:
    fmt = acc.fmt
    return acc.rounding == "nearest_even" and fmt.p <= 25 and fmt.emax - fmt.p < 900


_SCALAR_KAHAN = True  # switch for the tests, which check this path equal to the general one


def _scalar_adder(fmt: Format, mode: str = "nearest_even", in_format: bool = False):
    """A Python-float function ``add(a, b)``: the exact a + b rounded once to ``fmt`` (a signed
    IEEE format, p <= 51) in ``mode`` (one of ``_SCALAR_MODES``), as floatlab.accumulate's
    vectorised adder (TwoSum, round to odd, floatlab.round) does; tests check them equal.

    s = fl(a + b) and, by TwoSum (only where s is a midpoint or a grid point, where it matters),
    its exact error err (X = a + b = s + err). s = m * 2**k
    (frexp, 0.5 <= |m| < 1): its binade is 2**(k-1), its quantum in fmt
    q = 2**(max(k - 1, emin) - p + 1); r = (s + M) - M with M = 1.5 * 2**52 * q is s rounded
    to nearest even on fmt's grid (see :func:`_scalar_kahan_nearest`), and r -+ q the other
    neighbour where s is off the grid (where M would overflow float64: round(s / q) * q, exact).
    fmt's grid points and midpoints are float64 numbers and float64's rounding is monotone, so:

    * s off the grid (and not a midpoint, for the nearest modes): X lies strictly between the
      same two grid points (and on the same side of their midpoint) as s: round s.
    * s a grid point, err != 0: nearest modes give s (X is within half a
      float64 ulp of s, nearer than any midpoint for p <= 51); a directed mode that moves away
      from s in err's direction steps one quantum, or half a quantum where |s| is a power of
      two above 2**emin and the step lowers the magnitude (the binade below is twice as fine).
    * s a midpoint, err != 0: X is on err's side of the midpoint.

    Overflow: a result above max is inf in the nearest modes and where the directed rounding
    raises the magnitude, else max (IEEE 754). A zero result keeps s's sign; s == 0 only for
    an exact cancellation (err == 0), whose sign float64's addition already gives as the
    vectorised path does. inf and NaN pass through (inf is exact: never rounded to max).

    ``in_format=True`` (nearest even, p <= 25, both operands values of fmt) skips TwoSum: the
    float64 sum is then exact or rounds innocuously (Figueroa: 53 >= 2p + 2), so s and X round
    alike (as in floatlab.arith's proof for + and -).
    """
    from math import copysign, frexp, inf

    p, emin, top = fmt.p, fmt.emin, fmt.max
    # the quantum of every float64 binade k - 1 (frexp's k runs from -1073 to 1024)
    quanta = [2.0 ** (max(k - 1, emin) - p + 1) for k in range(-1073, 1025)]
    lowest_halving = emin + 2  # frexp's k of the powers of two whose binade below is finer

    if in_format and mode == "nearest_even" and p <= 25:
        def add_in_format(a: float, b: float) -> float:
            s = a + b
            if s - s != 0.0 or s == 0.0:  # inf / NaN, or an exact zero
                return s
            q = quanta[frexp(s)[1] + 1073]
            r = round(s / q) * q
            if -top <= r <= top:
                return r if r else copysign(0.0, s)
            return copysign(inf, s)

        return add_in_format

    away = mode == "nearest_away"
    down_if_positive = mode in ("down", "toward_zero")  # directed: which way for s > 0
    down_if_negative = mode == "down"
    # (M, q, q / 2) per frexp exponent: (s + M) - M is s rounded to a multiple of q, ties to
    # even (see _scalar_kahan_nearest); M None where it would overflow (then round(s / q) * q)
    magic = [(1.5 * 2.0**52 * q if q < 2.0**960 else None, q, 0.5 * q) for q in quanta]

    def add_nearest(a: float, b: float) -> float:
        s = a + b
        if s - s != 0.0 or s == 0.0:  # inf / NaN, or an exact zero (then err == 0)
            return s
        big, q, half = magic[frexp(s)[1] + 1073]
        r = (s + big) - big if big is not None else round(s / q) * q  # nearest, ties even
        if r - s == half or s - r == half:  # s is a midpoint: which side is X?
            bb = s - a
            err = (a - (s - bb)) + (b - bb)
            if err:
                r = s + half if err > 0.0 else s - half
            elif away:
                r = s + half if s > 0.0 else s - half
        if -top <= r <= top:
            return r if r else copysign(0.0, s)
        return copysign(inf, r)

    def add_directed(a: float, b: float) -> float:
        s = a + b
        if s - s != 0.0 or s == 0.0:  # inf / NaN, or an exact zero (then err == 0)
            return s
        m, k = frexp(s)
        big, q, half = magic[k + 1073]
        r = (s + big) - big if big is not None else round(s / q) * q  # nearest, ties even
        if s > 0.0:
            if r != s:  # s strictly between two grid points: the one below / above
                if down_if_positive:
                    if r > s:
                        r -= q
                elif r < s:
                    r += q
            else:  # s on the grid: X just beyond it in the rounding's direction?
                bb = s - a
                err = (a - (s - bb)) + (b - bb)
                if down_if_positive:
                    if err < 0.0:  # a power of two: the binade below is twice as fine
                        r -= half if m == 0.5 and k >= lowest_halving else q
                elif err > 0.0:
                    r += q
        else:
            if r != s:
                if down_if_negative:
                    if r > s:
                        r -= q
                elif r < s:
                    r += q
            else:
                bb = s - a
                err = (a - (s - bb)) + (b - bb)
                if down_if_negative:
                    if err < 0.0:
                        r -= q
                elif err > 0.0:
                    r += half if m == -0.5 and k >= lowest_halving else q
        if -top <= r <= top:
            return r if r else copysign(0.0, s)
        if not down_if_positive if r > 0.0 else down_if_negative:
            return copysign(inf, r)  # the rounding raises the magnitude: overflow to inf
        return copysign(top, r)

    return add_nearest if mode in ("nearest_even", "nearest_away") else add_directed


def _scalar_kahan(x: np.ndarray, acc: Accumulator, keep: bool) -> np.ndarray:
    """One long Kahan sum in Python floats: each of y = x - c, t = s + y, c = (t - s) - y is
    one rounding of the exact result (:func:`_scalar_adder`), s = t. The last three operations
    add values of the format, which in round to nearest even with p <= 25 need no TwoSum.
    Returns the running sums (keep) or the total, as float64."""
    fmt = acc.fmt
    if _nearest_engine_applies(acc):
        return _scalar_kahan_nearest(x, fmt, keep)
    add = _scalar_adder(fmt, acc.rounding)
    add_fmt = _scalar_adder(fmt, acc.rounding, in_format=True)
    values = x.tolist()
    out = [0.0] * len(values) if keep else None
    s = c = 0.0
    for i, v in enumerate(values):
        y = add(v, -c)
        t = add_fmt(s, y)
        c = add_fmt(add_fmt(t, -s), -y)
        s = t
        if keep:
            out[i] = s
    return np.array(out, dtype=np.float64) if keep else np.float64(s)


def _scalar_kahan_nearest(x: np.ndarray, fmt: Format, keep: bool) -> np.ndarray:
    """:func:`_scalar_kahan` in round to nearest even for p <= 25, written out in one loop.

    Each rounding of a float64 value d to fmt is ``(d + M) - M`` with M = 1.5 * 2**52 * q for
    d's quantum q (from frexp, as in :func:`_scalar_adder`): |d| < 2**51 q, so d + M lies in
    [2**52 q, 2**53 q), where float64's ulp is q, and float64's own rounding to nearest even
    rounds d to a multiple of q, ties to an even multiple (M / q is even); subtracting M is
    exact. The first operation (y = v - c, v any float64 term) is one rounding of the exact
    difference: where float64's result d is inexact (TwoSum's err != 0) and a midpoint of fmt
    (|y - d| == q / 2), X = d + err lies on err's side of it, so y steps to that neighbour
    (the correction :func:`_scalar_adder` proves, in other words). The other three add values
    of fmt: their float64 sums round innocuously (Figueroa, 53 >= 2p + 2), no TwoSum needed;
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
    values = x.tolist()
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

_GENERAL_MODES = _SCALAR_MODES + ("odd", "stochastic")
_DRAW_BLOCK = 1 << 14  # uniform draws made at once for stochastic rounding (4 per term)


def _general_kahan_applies(acc: Accumulator, columns: int) -> bool:
    """Whether :func:`_general_kahan` is this Kahan adder: any floatlab mode in a signed format
    with a zero and 2 <= p <= 51 (IEEE, FN, FNUZ, saturating MX formats, FTZ formats).
    Stochastic rounding only for one sum (``columns == 1``): with several, the per-step path
    draws per vectorised call, and how many depends on how many of the columns' values lie
    below the smallest normal (floatlab.rounding._round_bits), which a column-by-column loop
    cannot reproduce. FTZ formats need emin > -1022 (floatlab.round refuses the others); with
    at most 11 exponent bits every quantum and max are float64 numbers."""
    fmt = acc.fmt
    return (_SCALAR_KAHAN and acc.rounding in _GENERAL_MODES and fmt.signed and fmt.has_zero
            and 2 <= fmt.p <= 51 and (acc.rounding != "stochastic" or columns == 1)
            and (fmt.subnormals or fmt.emin > -1022))


def _general_rounder(fmt: Format, mode: str, random_bits: int | None = None):
    """A Python-float function ``add(a, b, u)``: ``floatlab.round(odd_sum(a, b), fmt, mode)``
    (what floatlab.accumulate's per-step path computes; tests check them equal), with u the
    uniform draw the per-step path's stochastic rounding compares with (ignored otherwise).

    o = odd_sum(a, b) as floatlab.eft computes it: s = a + b, TwoSum's exact error err, and
    where err != 0 and s is finite with an even last bit, one float64 ulp toward err
    (math.nextafter). Then o is rounded as floatlab.round does it, on its magnitude a = |o|:

    * the quantum q of a's binade (frexp's k: 2**(k-1) <= a < 2**k): 2**(max(k-1, emin) - p
      + 1), or without the clamp at emin for FTZ formats (which round on the input's own
      binade, then flush); a / q (exact: q is a power of two, and q < 1 wherever a is small
      enough for the quotient to underflow), its fraction f = (a / q) mod 1 and kept part
      a / q - f (both exact) give the truncation lo = kept * q;
    * one step up ((kept + 1) * q, exact: kept + 1 <= 2**p) by the mode's decision on f, exactly as
      floatlab._rounding_kernels._round_up_decision reads the discarded remainder: nearest
      even f > 1/2 or f == 1/2 with kept odd, nearest away f >= 1/2, up / down f > 0 for a
      positive / negative o, odd f > 0 with kept even, stochastic u < f (f truncated to a
      multiple of 2**-k first for ``random_bits=k``, as _LimitedRandomBits does);
    * overflow (a result above max), as floatlab._rounding_fast.overflow_by_bits: +-max for
      formats without NaN, toward_zero and odd; ``up`` gives -max for negative o and ``down``
      +max for positive o; otherwise inf, or NaN where the format has no inf;
    * FTZ: a result below 2**emin becomes a zero of o's sign (binades below emin - 1 cannot
      round up to 2**emin and flush at once); FNUZ formats have no -0: every zero is +0;
    * non-finite o: NaN stays NaN, inf stays inf, or becomes NaN in formats without inf;
      formats with neither raise floatlab.round's own error (it is called on that value).

    >>> from floatlab.formats import get_format
    >>> add = _general_rounder(get_format("e4m3fn"), "nearest_even")
    >>> add(448.0, 16.0, 0.0), add(448.0, 17.0, 0.0)  # 464 ties to 448 (even); 465: NaN
    (448.0, nan)
    >>> _general_rounder(get_format("e4m3fn"), "stochastic")(1.0, 0.0625, 0.49)  # f = 1/2
    1.125
    """
    from math import copysign, floor, frexp, inf, nan, nextafter

    p, emin, top = fmt.p, fmt.emin, fmt.max
    ftz = not fmt.subnormals
    # the quantum of every float64 binade k - 1 (frexp's k from -1073 to 1024); None: flush
    # (indexed by k itself: negative k count from the end of the list)
    quanta: list[float | None] = [None] * 2098
    for k in range(-1073, 1025):
        e = k - 1 if ftz else max(k - 1, emin)
        quanta[k] = None if ftz and k - 1 < emin - 1 else 2.0 ** (e - p + 1)
    smallest = 2.0**emin if ftz else 2.0 ** (emin - p + 1)  # the least positive result
    zero = 0.0 if not fmt.has_negative_zero else None
    overflow_value = inf if fmt.has_inf else nan
    if not fmt.has_nan or mode in ("toward_zero", "odd"):
        over_pos = over_neg = top
    else:
        over_pos = top if mode == "down" else overflow_value
        over_neg = top if mode == "up" else overflow_value
    scale = 2.0**random_bits if random_bits is not None else 0.0
    stochastic, nearest_even = mode == "stochastic", mode == "nearest_even"
    nearest_away, odd, up_if_positive = mode == "nearest_away", mode == "odd", mode == "up"
    toward_zero = mode == "toward_zero"

    def special(o: float) -> float:
        if o != o and fmt.has_nan:
            return o
        if fmt.has_inf:
            return o
        if fmt.has_nan:
            return copysign(nan, o)
        from floatlab.rounding import round as _round  # raises its own clear error

        return float(_round(o, fmt, "nearest_even"))

    def add(a: float, b: float, u: float) -> float:
        o = a + b
        if o - o != 0.0:
            return special(o)
        # (an exact zero o, with the sign float64's addition gives, runs through as 0 * q)
        bb = o - a
        err = (a - (o - bb)) + (b - bb)
        m, k = frexp(o)
        if err and (m * 9007199254740992.0) % 2.0 == 0.0:  # even: one ulp toward err
            o = nextafter(o, inf if err > 0.0 else -inf)
            if (m == 0.5 or m == -0.5) and (err > 0.0) != (m > 0.0):
                k -= 1  # a power of two nudged toward zero: into the binade below
        q = quanta[k]
        if q is None:  # FTZ, far below the normal range
            return copysign(0.0, o) if zero is None else zero
        positive = o > 0.0
        scaled = (o if positive else -o) / q  # |o| in quanta
        f = scaled % 1.0
        kept = scaled - f
        if not f:
            pass
        elif stochastic:
            if u < (floor(f * scale) / scale if scale else f):
                kept += 1.0
        elif nearest_even:
            if f > 0.5 or (f == 0.5 and kept % 2.0 == 1.0):
                kept += 1.0
        elif nearest_away:
            if f >= 0.5:
                kept += 1.0
        elif odd:
            if kept % 2.0 == 0.0:
                kept += 1.0
        elif positive == up_if_positive and not toward_zero:  # up / down: o's sign decides
            kept += 1.0
        r = kept * q
        if r > top:
            return over_pos if positive else -over_neg
        if r < smallest:  # zero, or flushed
            return copysign(0.0, o) if zero is None else zero
        return r if positive else -r

    return add


def _kahan_engine(acc: Accumulator, columns: int):
    """The scalar function that runs one of ``columns`` long Kahan sums of ``acc``, or None
    where only the per-step path applies."""
    if _scalar_kahan_applies(acc):
        return _scalar_kahan
    if _general_kahan_applies(acc, columns):
        return _general_kahan
    return None


def _general_kahan(x: np.ndarray, acc: Accumulator, keep: bool) -> np.ndarray:
    """One long Kahan sum through :func:`_general_rounder`, each of its four operations one
    ``floatlab.round(odd_sum(a, b))`` as the per-step path computes it.

    Stochastic rounding draws the numbers the per-step path draws, in its order: that path
    calls floatlab.round on one element per operation, and round() draws exactly one uniform
    double per element and call whatever the value (floatlab.rounding._round_bits: the
    pattern kernel, the significand kernel and the shared draws of the tiny-input kernel each
    take ``rng.random(1)``; ``random_bits`` draws from the same generator), so the stream is
    4 draws per term, in the order y, t, t - s, c. They are drawn here in blocks: a PCG64
    Generator's ``random(n)`` yields the same doubles as n calls of ``random(1)`` (one 64-bit
    output per double, nothing buffered; a test checks it), and exactly 4 n are drawn in all,
    so the generator ends in the same state. (Where a format without NaN meets a NaN or inf,
    both paths raise, and the generator may then have run ahead here.)
    """
    fmt = acc.fmt
    add = _general_rounder(fmt, acc.rounding, acc.random_bits)
    values = x.tolist()
    n = len(values)
    out = [0.0] * n if keep else None
    stochastic = acc.rounding == "stochastic"
    generator = acc.rng
    s = c = 0.0
    draws: list[float] = [0.0] * 4 * min(n, _DRAW_BLOCK)
    for start in range(0, n, _DRAW_BLOCK):
        stop = min(n, start + _DRAW_BLOCK)
        if stochastic:
            draws = generator.random(4 * (stop - start)).tolist()
        j = 0
        for i in range(start, stop):
            y = add(values[i], -c, draws[j])
            t = add(s, y, draws[j + 1])
            c = add(add(t, -s, draws[j + 2]), -y, draws[j + 3])
            j += 4
            s = t
            if keep:
                out[i] = s
    return np.array(out, dtype=np.float64) if keep else np.float64(s)
