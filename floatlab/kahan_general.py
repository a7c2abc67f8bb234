"""Kahan sums in Python floats in every mode and signed format with a zero: the general engine.

:mod:`floatlab.kahan_scalar` runs a long compensated sum step by step in Python floats. Its
IEEE nearest-even loop is written by hand; everything else (round to odd, stochastic rounding
with or without ``random_bits``, the directed modes, FN / FNUZ / FTZ / saturating MX formats)
runs here, each of Kahan's four operations ``floatlab.round(odd_sum(a, b), fmt, mode)`` as the
per-step path computes it (tests check the two bit-equal, and the generator's end state).

Why generated code: a Kahan step is four roundings, and a Python call per rounding costs about
a quarter of the loop's time; a test of the mode inside each rounding costs as much again. So
the loop is assembled from one rounding template (:data:`_ROUND`, the only place the rounding
is written) and one decision snippet for the mode (:data:`_DECIDE`), inlined four times, and
compiled once per (mode, variant) with the format's constants bound as default arguments
(:func:`_kahan_loop`; ``print(_kahan_source("stochastic"))`` shows the code).

The rounding of o = odd_sum(a, b) (s = a + b, TwoSum's error err; where err != 0 and s's last
bit is even, one float64 ulp toward err), on its magnitude x = |o| in the binade
2**(k-1) <= x < 2**k, with q the quantum of that binade, 2**(max(k-1, emin) - p + 1) (FTZ
formats round on the input's own binade, then flush), computed as ulp(x) * 2**(53 - p)
clamped to the least quantum (float64's ulp(x) is 2**(k - 53) for normal x, and subnormal x
lie below every format's 2**emin):

* r = (x + M) - M, M = 1.5 * 2**52 * q, is x rounded to the nearest multiple of q, ties to an
  even multiple: x < 2**k <= 2**p q <= 2**51 q, so x + M lies in [2**52 q, 2**53 q), where
  float64's ulp is q, and float64's own rounding to nearest even does it; subtracting M is
  exact (Sterbenz). (Where M would overflow, e11 formats: round(x / q) * q, exact.)
* lo = r, or r - q where r > x, is the truncation; x - lo is exact (both lie in x's binade on
  float64's grid, lo a multiple of q) and f = (x - lo) / q, the discarded fraction, is exact
  (a power-of-two scaling of a number above float64's underflow). This is the remainder
  ``rem / 2**shift`` that floatlab._rounding_kernels._round_up_decision reads: nearest even
  is r itself; nearest away steps up at f = 1/2; toward zero, up, down step to lo or lo + q
  by the sign of o; odd keeps an odd multiple; stochastic steps up where u < f, or, for
  ``random_bits=b``, where u < floor(f 2**b) / 2**b, that is where f >= w with
  w = (floor(u 2**b) + 1) / 2**b (both sides times 2**b: an integer n = floor(f 2**b) exceeds
  u 2**b exactly when n >= floor(u 2**b) + 1), w computed from the draws with NumPy.
* Overflow (r > max): +-max or inf / NaN by mode and format, as
  floatlab._rounding_fast.overflow_by_bits; r below the least positive result (0, or below
  2**emin in FTZ formats) is a zero of o's sign, +0 in FNUZ formats; NaN and inf go to
  :func:`_special`, as floatlab.round treats them; an exact zero sum is -0 in mode "down"
  unless both addends are +0 (floatlab.eft.zero_sum_sign). Binades beyond 2**(emax + 2) take
  binade emax + 1's quantum (every x there overflows in every mode, and M stays finite); FTZ
  binades below emin - 1 take binade emin - 1's (every x there flushes in every mode).

TwoSum and the nudge only where they can matter (``_CRITICAL``); the rest of the time the
rounding reads s itself (o = s unless err != 0 and s is even; then o = s +- ulp(s), toward err):

* Deterministic modes: the result is constant between consecutive breakpoints (grid points;
  for the nearest modes, midpoints). Breakpoints are float64 numbers with an even last bit
  (at most p + 1 <= 52 significant bits), so an odd o is never one; X = a + b lies within half
  an ulp of s = fl(X), so no float64 number, breakpoints included, lies strictly between them;
  and o is s's neighbour. So where s is not a breakpoint, s, X and o share the open interval
  between two breakpoints and round alike: only ``r == x`` (s on the grid) for the directed
  modes and odd, s a midpoint for the nearest modes, needs TwoSum.
* Stochastic rounding: where s is not on the grid, o lies between the same two grid points
  and in the same binade (powers of two are grid points), so lo and q stay and f moves by
  ulp(s) / q <= 2**(p - 53): u < f can only change where |u - f| <= 2**(p - 53). On the
  grid (f = 0, result s), a nudge away from zero gives f = ulp / q (a change only where u is
  below it) and toward zero lo = s - q (or s - q / 2 at a power of two), f = 1 - ulp / q' (a
  change where u >= that), with ulp / q' <= 2**(p - 53) too. So TwoSum runs only where
  d = u - f lies within D = 2**(p - 52) of 0, or d >= 1 - D (twice the bound: d's own float64
  rounding error is below 2**-53). The same holds for d = w - f with ``random_bits``. A test
  puts the draw on, next to and across each window.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from functools import lru_cache
from math import copysign, frexp, inf, nan, nextafter, ulp

import numpy as np

from floatlab.formats import Format

# One rounding: the exact a + b (via odd_sum) rounded to the format, into {out}. Names: o (the
# odd sum), x = |o|, q the quantum of x's binade (M = big), r the result's magnitude, d the
# draw less the discarded fraction (stochastic rounding).
_ROUND = """\
o = {a} {op} {b}
if ninf < o < inf:
    x = o if o > 0.0 else -o
{quantum_4}
{nearest_4}
    if {critical}:  # the exact sum's side of o may matter: TwoSum, and round to odd
        bb = o - {a}
        err = ({a} - (o - bb)) {op} ({b} {opp} bb)
        if err and {is_even}:  # inexact with an even last bit: one ulp toward err
            o = nextafter(o, inf if err > 0.0 else -inf)
            x = o if o > 0.0 else -o
{quantum_12}
{nearest_12}
{decide}
    if r > top:
        {out} = over_pos if o > 0.0 else over_neg
    elif r < smallest:
        {out} = {zero}
    elif o > 0.0:
        {out} = r
    else:
        {out} = -r
else:
    {out} = special(o)
"""

# Where the exact sum's side of o can change the result (see the module's docstring): at grid
# points for the directed modes and round to odd, at midpoints for the nearest modes, and for
# stochastic rounding where the draw lies within D = 2**(p - 52) of the fraction f (or of
# f + 1: a grid point nudged toward zero), u < f compared with w <= f for random_bits.
_CRITICAL = {"nearest_even": "x - r == 0.5 * q or r - x == 0.5 * q",
             "nearest_away": "x - r == 0.5 * q or r - x == 0.5 * q",
             "toward_zero": "r == x", "up": "r == x", "down": "r == x", "odd": "r == x",
             "stochastic": "nD <= d <= D or d >= E", "stochastic_bits": "nD <= d <= D or d >= E"}

# Stochastic rounding reads the truncation lo (kept in r) and the fraction f = (x - lo) / q,
# through d = u - f (d < 0 exactly where u < f: a float64 difference has the exact one's sign)
# or d = w - f for random_bits (d <= 0 where f >= w).
_FRACTION = "if r > x:\n    r -= q\nd = {u} - (x - r) / q"

# The mode's step from r (x rounded to nearest even on the grid) to the result's magnitude.
_DECIDE = {
    "nearest_even": "pass",
    "nearest_away": "if x - r == 0.5 * q:\n    r += q",
    "toward_zero": "if r > x:\n    r -= q",
    "up": "if o > 0.0:\n    if r < x:\n        r += q\nelif r > x:\n    r -= q",
    "down": "if o < 0.0:\n    if r < x:\n        r += q\nelif r > x:\n    r -= q",
    "odd": "if r != x and (r / q) % 2.0 == 0.0:\n    r = r + q if r < x else r - q",
    "stochastic": "if d < 0.0:\n    r += q",
    "stochastic_bits": "if d <= 0.0:\n    r += q",
}

_LOOP = """\
def kahan(values, draws, s, c, out, S=S, qmin=qmin, qmax=qmax, M1=M1, top=top,
          smallest=smallest, over_pos=over_pos, over_neg=over_neg, special=special,
          ulp=ulp, frexp=frexp, nextafter=nextafter, inf=inf, ninf=ninf, copysign=copysign,
          D=D, nD=nD, E=E):
    append = out.append
    {header}
{body}
    return s, c
"""


def _rounding(a: str, op: str, b: str, u: str, out: str, mode: str, wide: bool,
              signed_zero: bool) -> str:
    """One :data:`_ROUND` of ``a op b`` (op "+" or "-": TwoSum of a and -b, written as a
    difference: float64's rounding is symmetric, so fl(-b - bb) == -fl(b + bb)) into ``out``.
    ``wide``: formats whose magic constant M would overflow (see :func:`_wide`)."""
    decide = _DECIDE[mode]
    # q = 2**(k - p) for x in [2**(k-1), 2**k) is ulp(x) * 2**(53 - p) (ulp(x) = 2**(k - 53)
    # for normal float64 x), clamped below at the least quantum (subnormals: 2**(emin - p +
    # 1); FTZ: binade emin - 1's, as every x below flushes anyway), and above at binade
    # emax + 1's (every x beyond overflows in every mode; M stays finite)
    quantum = "q = ulp(x) * S\nif q < qmin:\n    q = qmin"
    if wide:  # M overflows: round(x / q) is exact (x / q < 2**52); parity from frexp
        nearest = "r = round(x / q) * q"
        is_even = "(frexp(o)[0] * 9007199254740992.0) % 2.0 == 0.0"
    else:  # 2**k = ulp(x) * 2**53: x + 2**k rounds to float64's grid of 2 ulp(x)
        quantum += "\nelif q > qmax:\n    q = qmax\nbig = q * M1"
        nearest = "r = (x + big) - big"
        is_even = "(x + ulp(x) * 9007199254740992.0) - ulp(x) * 9007199254740992.0 == x"
    if mode.startswith("stochastic"):
        nearest += "\n" + _FRACTION.replace("{u}", u)
    zero = "copysign(0.0, o)" if signed_zero else "0.0"
    if signed_zero and mode == "down":  # an exact zero a op b (o == 0) is -0 unless a and
        #   op b are both +0 (IEEE 754 6.3, floatlab.eft.zero_sum_sign); float64 gave +0
        zero = (f"copysign(0.0, o) if o or copysign(1.0, {a}) {op} copysign(1.0, {b}) == 2.0 "
                "else -0.0")
    return _ROUND.format(
        a=a, op=op, opp="-" if op == "+" else "+", b=b, out=out, zero=zero,
        critical=_CRITICAL[mode], is_even=is_even, decide=textwrap.indent(decide, " " * 4),
        quantum_4=textwrap.indent(quantum, " " * 4), quantum_12=textwrap.indent(quantum, " " * 12),
        nearest_4=textwrap.indent(nearest, " " * 4), nearest_12=textwrap.indent(nearest, " " * 12))


def _kahan_source(mode: str, wide: bool = False, signed_zero: bool = True,
                  keep: bool = True) -> str:
    """The Python source of the Kahan loop for ``mode`` ("stochastic_bits": stochastic with
    ``random_bits``): y = v - c, t = s + y, c = (t - s) - y, s = t, each operation one
    :data:`_ROUND`, as floatlab.accumulate's per-step path computes them (its order of draws:
    y, t, t - s, c)."""
    random = mode.startswith("stochastic")
    header = ("for v, u0, u1, u2, u3 in zip(values, *(iter(draws),) * 4):" if random
              else "for v in values:")
    steps = [("v", "-", "c", "u0", "y"), ("s", "+", "y", "u1", "t"),
             ("t", "-", "s", "u2", "w"), ("w", "-", "y", "u3", "c")]
    body = [_rounding(*step, mode, wide, signed_zero) for step in steps]
    body.append("s = t")
    if keep:
        body.append("append(s)")
    return _LOOP.format(header=header, body=textwrap.indent("\n".join(body), " " * 8))


def _constants(fmt: Format, mode: str) -> dict:
    """The format's constants the loop binds: the quantum's scale S = 2**(53 - p) and bounds,
    M / q, max, the least positive result, the overflow values by sign, the handler of NaN /
    inf sums, and the stochastic window D (see the module's docstring)."""
    p, emin, top = fmt.p, fmt.emin, fmt.max
    ftz = not fmt.subnormals
    overflow_value = inf if fmt.has_inf else nan
    if not fmt.has_nan or mode in ("toward_zero", "odd"):
        over_pos = over_neg = top
    else:
        over_pos = top if mode == "down" else overflow_value
        over_neg = top if mode == "up" else overflow_value
    return {"S": 2.0 ** (53 - p), "qmin": 2.0 ** (emin - p + (0 if ftz else 1)),
            "qmax": 2.0 ** (min(fmt.emax + 1, 1023) - p + 1), "M1": 1.5 * 2.0**52,
            "top": top, "smallest": 2.0**emin if ftz else 2.0 ** (emin - p + 1),
            "over_pos": over_pos, "over_neg": -over_neg, "special": _special(fmt),
            "ulp": ulp, "frexp": frexp, "nextafter": nextafter, "inf": inf, "ninf": -inf,
            "copysign": copysign, "D": 2.0 ** (p - 52), "nD": -(2.0 ** (p - 52)),
            "E": 1.0 - 2.0 ** (p - 52)}


def _special(fmt: Format) -> Callable[[float], float]:
    """A NaN or inf sum as floatlab.round treats it: NaN stays NaN, inf stays inf or becomes
    NaN in formats without inf; formats with neither raise floatlab.round's own error."""
    def special(o: float) -> float:
        if o != o and fmt.has_nan:
            return o
        if fmt.has_inf:
            return o
        if fmt.has_nan:
            return copysign(nan, o)
        from floatlab.rounding import round as _round  # raises its own clear error

        return float(_round(o, fmt, "nearest_even"))

    return special


def _wide(fmt: Format) -> bool:
    """Whether some quantum's magic constant 1.5 * 2**52 * q would overflow float64."""
    return fmt.emax - fmt.p + 1 + 53 > 1023


@lru_cache(maxsize=64)
def _kahan_loop(fmt: Format, mode: str, keep: bool):
    """The compiled loop ``kahan(values, draws, s, c, out) -> (s, c)`` for ``fmt`` and
    ``mode`` (see :func:`_kahan_source`); ``out`` collects the running sums (keep)."""
    namespace = _constants(fmt, mode)
    namespace["round"] = round
    source = _kahan_source(mode, _wide(fmt), fmt.has_negative_zero, keep)
    exec(compile(source, f"<floatlab.kahan_general: {fmt.name} {mode}>", "exec"), namespace)
    return namespace["kahan"]


def _compiled_rounder(fmt: Format, mode: str):
    """One rounding of the template as a function ``add(a, b, u)``, u the uniform draw
    ("stochastic") or the threshold w ("stochastic_bits"), ignored by the other modes."""
    namespace = _constants(fmt, mode)
    namespace["round"] = round
    body = _rounding("a", "+", "b", "u", "result", mode, _wide(fmt), fmt.has_negative_zero)
    source = "def add(a, b, u):\n" + textwrap.indent(body, "    ") + "    return result\n"
    exec(compile(source, f"<floatlab.kahan_general rounder: {fmt.name} {mode}>", "exec"),
         namespace)
    return namespace["add"]


def _general_rounder(fmt: Format, mode: str, random_bits: int | None = None):
    """``add(a, b, u)``: ``floatlab.round(odd_sum(a, b), fmt, mode)``, u the uniform draw of
    stochastic rounding (ignored otherwise), through one rounding of the template the Kahan
    loops inline. For tests and the examples.

    >>> from floatlab.formats import get_format
    >>> add = _general_rounder(get_format("e4m3fn"), "nearest_even")
    >>> add(448.0, 16.0, 0.0), add(448.0, 17.0, 0.0)  # 464 ties to 448 (even); 465: NaN
    (448.0, nan)
    >>> _general_rounder(get_format("e4m3fn"), "stochastic")(1.0, 0.0625, 0.49)  # f = 1/2
    1.125
    """
    if mode != "stochastic" or random_bits is None:
        return _compiled_rounder(fmt, mode)
    add = _compiled_rounder(fmt, "stochastic_bits")
    return lambda a, b, u: add(a, b, float(_thresholds([u], random_bits)[0]))


def _thresholds(draws, random_bits: int) -> np.ndarray:
    """w = (floor(u 2**b) + 1) / 2**b per draw u: stochastic rounding with b random bits steps
    up exactly where the discarded fraction f >= w (see the module's docstring)."""
    scale = 2.0**random_bits
    return (np.floor(np.asarray(draws, dtype=np.float64) * scale) + 1.0) / scale


_DRAW_BLOCK = 1 << 14  # rows whose uniform draws are made at once for stochastic rounding


def _tiny_check(fmt: Format) -> bool:
    """Whether floatlab.round's float64 kernels look for inputs below 2**emin (which change
    the number of draws of a stochastic call): formats whose emin is above float64's, or FTZ
    (floatlab.rounding._round_bits)."""
    return fmt.p > 1 and (fmt.emin > -1022 or not fmt.subnormals)


def general_kahan(values: np.ndarray, fmt: Format, mode: str, rng, random_bits: int | None,
                  keep: bool) -> np.ndarray:
    """Kahan sums of the columns of ``values`` (n, m) through the generated loop: the totals
    (m,) or the running sums (n, m), float64.

    Stochastic rounding draws the numbers the per-step path draws, in its order. That path
    rounds each operation of a row for all m columns in one floatlab.round call, which draws
    exactly m uniform doubles, element j taking the j-th, whatever the values, where m <= 3
    or the format's emin is float64's (floatlab.rounding._round_bits looks for inputs below
    2**emin only in the other formats; with m // 4 == 0 any such input makes the call
    "mostly tiny", and then the significand kernel, or the shared draws of the uniform-grid
    kernel, take one draw per element; with none, the pattern kernel does). Only with
    1 <= count <= m // 4 tiny inputs does a call draw m + count: more columns run in
    lockstep (:mod:`floatlab.kahan_lockstep`). So the stream is row by row, operation by
    operation (y, t, t - s, c), column by column: 4 m draws per row. They are drawn here in
    blocks of rows, and column j reads its stride: a PCG64 Generator's ``random(n)`` yields
    the same doubles as n calls of ``random(1)`` (one 64-bit output per double, nothing
    buffered; a test checks it), and exactly 4 m n are drawn in all, so the generator ends in
    the same state. (Where a format without NaN meets a NaN or inf, both paths raise, and the
    generator may then have run ahead here.)
    """
    n, m = values.shape
    random = mode == "stochastic"
    if random and m > 3 and _tiny_check(fmt):
        raise ValueError(f"{m} stochastic sums in {fmt.name}: the per-step path's draws per "
                         "call depend on the values; use floatlab.kahan_lockstep")
    name = "stochastic_bits" if random and random_bits is not None else mode
    loop = _kahan_loop(fmt, name, keep)
    # The loop iterates over memoryviews of contiguous float64 arrays: each Python float is
    # made as it is read and freed soon after, instead of a list of all of them first
    # (about a tenth of a stochastic sum's time)
    columns = [np.ascontiguousarray(values[:, j], dtype=np.float64) for j in range(m)]
    state = [(0.0, 0.0)] * m
    outs: list[list[float]] = [[] for _ in range(m)]
    block = _DRAW_BLOCK if random else max(n, 1)
    for start in range(0, n, block):
        stop = min(n, start + block)
        draws = None
        if random:
            draws = rng.random(4 * m * (stop - start)).reshape(stop - start, 4, m)
        for j in range(m):
            column_draws = None
            if random:
                column_draws = np.ascontiguousarray(draws[:, :, j]).reshape(-1)
                if random_bits is not None:
                    column_draws = _thresholds(column_draws, random_bits)
                column_draws = memoryview(column_draws)
            state[j] = loop(memoryview(columns[j][start:stop]), column_draws, *state[j],
                            outs[j])
    if keep:
        return np.array(outs, dtype=np.float64).reshape(m, n).T.copy()
    return np.array([s for s, _ in state], dtype=np.float64)
