"""Exact references for the Format and rounding tests.

Nothing here uses floatlab's rounding core or codec. A format is read only through its seven
encoding fields (exp_bits, man_bits, bias, signed, special, subnormals, has_zero); every value,
limit, neighbour and rounding decision is derived here again from the bit layout, with Python
ints, exact float64 arithmetic and ``fractions.Fraction`` where a float could round. Slow but
unarguable: feed it a few thousand values per format, not millions.

Conventions (floatlab's documented choices, checked against IEEE 754 where IEEE has a rule):

* Round with an unbounded exponent, then compare with max (E4M3FN: 464 -> 448, 465 overflows).
* Overflow: nearest / stochastic -> inf (NaN without inf); toward_zero and odd -> +-max;
  up -> +inf for positives, -max for negatives; down mirrored; ``saturate`` -> +-max; formats
  with neither inf nor NaN always saturate.
* p = 1 (E8M0): ties go up (ml_dtypes and torch; IEEE's "even code" would give 3 -> 2 as gfloat
  does); round-to-odd is truncation, because both neighbours have the odd significand 1.
* FTZ (``subnormals=False`` or a format without subnormals): round with the exponent unbounded
  below, then flush results below the smallest normal to a signed zero (x86-style FTZ: tininess
  after rounding). Formats without zero (E8M0) clamp tiny positives to the smallest normal.
* No -0 in FNUZ formats; unsigned formats turn negatives and (without zero) 0 into NaN.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from fractions import Fraction
from functools import cache

import numpy as np

MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd")

# Presets with a numpy or ml_dtypes dtype (ml_dtypes is imported lazily by ml_dtype()).
ML_PRESETS = (
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e4m3",
    "float8_e3m4",
    "float8_e4m3b11fnuz",
    "float8_e8m0fnu",
    "float6_e2m3fn",
    "float6_e3m2fn",
    "float4_e2m1fn",
)


def ml_dtype(name: str) -> np.dtype:
    """The numpy / ml_dtypes dtype of a preset name."""
    if name in ("float16", "float32", "float64"):
        return np.dtype(name)
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, name))


def code_uint(bits: int) -> np.dtype:
    return np.dtype({4: np.uint8, 6: np.uint8, 8: np.uint8, 16: np.uint16}[bits])


@dataclass(frozen=True)
class Layout:
    """A format's encoding rules, copied out of a floatlab.Format (nothing derived is used)."""

    exp_bits: int
    man_bits: int
    bias: int
    signed: bool
    special: str
    subnormals: bool
    has_zero: bool

    @classmethod
    def of(cls, fmt) -> Layout:
        return cls(
            int(fmt.exp_bits),
            int(fmt.man_bits),
            int(fmt.bias),
            bool(fmt.signed),
            str(fmt.special),
            bool(fmt.subnormals),
            bool(fmt.has_zero),
        )

    @property
    def bits(self) -> int:
        return int(self.signed) + self.exp_bits + self.man_bits

    @property
    def has_negative_zero(self) -> bool:
        return self.signed and self.has_zero and self.special not in ("fnuz", "p3109")


# --------------------------------------------------------------------------- decoding


def decode(lay: Layout, code: int) -> float | None:
    """The value of one code, exactly, as a Python float (nan for NaN codes).

    Returns None for codes a format does not use (exponent field 0 with a non-zero mantissa in
    a format without subnormals).
    """
    E, M = lay.exp_bits, lay.man_bits
    sign = (code >> (E + M)) & 1 if lay.signed else 0
    field = (code >> M) & ((1 << E) - 1)
    mant = code & ((1 << M) - 1)
    field_ones, mant_ones = (1 << E) - 1, (1 << M) - 1
    if lay.special == "ieee" and field == field_ones:
        value = math.inf if mant == 0 else math.nan
    elif lay.special == "fn" and field == field_ones and mant == mant_ones:
        value = math.nan
    elif lay.special == "fnuz" and sign and field == 0 and mant == 0:
        return math.nan  # the code 100...0 is the only NaN
    elif lay.special == "p3109" and code == ((1 << (E + M)) if lay.signed else (1 << E + M) - 1):
        return math.nan  # signed: the -0 code 100...0; unsigned: all ones
    elif lay.special == "p3109" and (code & ((1 << E + M) - 1)) == (1 << E + M) - 1 - (
        0 if lay.signed else 1
    ):
        value = math.inf  # the largest code of each sign (unsigned: just below the NaN)
    elif lay.has_zero and field == 0:
        if mant == 0:
            value = 0.0
        elif not lay.subnormals:
            return None
        else:  # subnormal: 0.mant * 2**(1 - bias)
            value = math.ldexp(mant, 1 - lay.bias - M)  # exact: ldexp only scales
    else:  # normal: 1.mant * 2**(field - bias)
        value = math.ldexp((1 << M) | mant, field - lay.bias - M)
    return -value if sign else value


@cache
def positive_table(lay: Layout) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """Every non-negative finite value (sign bit clear), sorted, with its code. <= 16 bits."""
    if lay.bits > 16:
        raise ValueError("positive_table enumerates codes: formats up to 16 bits only")
    pairs = []
    for code in range(1 << (lay.exp_bits + lay.man_bits)):
        value = decode(lay, code)
        if value is not None and math.isfinite(value):
            pairs.append((value, code))
    pairs.sort()
    values = tuple(v for v, _ in pairs)
    if any(b <= a for a, b in zip(values, values[1:], strict=False)):
        raise AssertionError(f"{lay}: two codes decode to the same value")
    return values, tuple(c for _, c in pairs)


def all_values(lay: Layout, ftz: bool = False) -> np.ndarray:
    """Every finite value of a <= 16-bit format (both signs, sorted); ftz drops subnormals."""
    values = np.array(positive_table(lay)[0])
    if ftz and lay.has_zero:
        values = values[(values == 0) | (values >= smallest_normal(lay))]
    if lay.signed:
        values = np.concatenate([-values[::-1], values])
    return np.unique(values)


@cache
def max_code(lay: Layout) -> int:
    """The largest code (sign bit clear) that decodes to a finite value."""
    top = (1 << (lay.exp_bits + lay.man_bits)) - 1
    field_ones_minus = ((1 << lay.exp_bits) - 1 << lay.man_bits) - 1
    for code in (top, top - 1, top - 2, field_ones_minus):
        value = decode(lay, code)
        if value is not None and math.isfinite(value):
            return code
    raise AssertionError("no finite code")


@cache
def max_value(lay: Layout) -> float:
    return decode(lay, max_code(lay))


@cache
def smallest_normal(lay: Layout) -> float:
    """The value of the code with exponent field 1 (0 for formats without zero), mantissa 0."""
    return decode(lay, (1 if lay.has_zero else 0) << lay.man_bits)


def smallest_subnormal(lay: Layout) -> float | None:
    if not (lay.has_zero and lay.subnormals and lay.man_bits > 0):
        return None
    return decode(lay, 1)


def _exponent(a: float) -> int:
    """floor(log2(a)) for a finite a > 0, exactly (frexp reads the exponent bits)."""
    return math.frexp(a)[1] - 1


@cache
def _virtual_next(lay: Layout) -> float:
    """The value after max if the exponent were unbounded: max + ulp(max) (the subnormal
    quantum when max itself is subnormal, as in formats without exponent bits)."""
    top = max_value(lay)
    emin = (1 if lay.has_zero else 0) - lay.bias
    return top + math.ldexp(1.0, max(_exponent(top), emin) - lay.man_bits)


def floor_code_by_table(lay: Layout, a: float) -> int:
    """The code of the largest value <= a, by searching the decoded table (<= 16 bits)."""
    values, codes = positive_table(lay)
    return codes[bisect_right(values, a) - 1]


def floor_code_by_arithmetic(lay: Layout, a: float) -> int:
    """The code of the largest value <= a, from a's exponent (formats with subnormals or
    without zero; smallest value <= a <= max)."""
    M = lay.man_bits
    emin = (1 if lay.has_zero else 0) - lay.bias
    e = _exponent(a)
    if e < emin:  # subnormal range: quantum 2**(emin - M), exponent field 0
        return math.floor(Fraction(a) / Fraction(2) ** (emin - M))
    k = math.floor(Fraction(a) / Fraction(2) ** (e - M))  # in [2**M, 2**(M+1))
    return ((e + lay.bias) << M) | (k - (1 << M))


def _floor_code(lay: Layout, a: float) -> int:
    if lay.bits <= 16:
        return floor_code_by_table(lay, a)
    return floor_code_by_arithmetic(lay, a)


# --------------------------------------------------------------------------- rounding


class _Case:
    """Everything about one input that the rounding modes choose from."""

    __slots__ = ("fixed", "neg", "lo", "hi", "lo_odd", "hi_odd", "cmp", "hi_overflows")

    def __init__(self) -> None:
        self.fixed: float | None = None  # a result that does not depend on the mode
        self.neg = False
        self.lo = self.hi = 0.0
        self.lo_odd = self.hi_odd = False
        self.cmp = 0  # sign of (x - lo) - (hi - x): -1 nearer lo, 0 tie, +1 nearer hi
        self.hi_overflows = False


def _analyse(lay: Layout, x: float, ftz: bool, saturate: bool) -> _Case:
    case = _Case()
    case.neg = math.copysign(1.0, x) < 0
    top = max_value(lay)
    if math.isnan(x):
        if lay.special == "none":
            raise ValueError("NaN into a format without NaN")
        case.fixed = math.nan
        return case
    if not lay.signed and (x < 0 or (x == 0 and not lay.has_zero)):
        case.fixed = math.nan  # unsigned: negatives (and -inf) cannot be held
        if lay.special == "none":
            raise ValueError("negative into an unsigned format without NaN")
        return case
    if math.isinf(x):
        if lay.special in ("ieee", "p3109"):
            value = math.inf
        elif saturate:
            value = top
        elif lay.special == "none":
            raise ValueError("inf into a format without inf and NaN")
        else:
            value = math.nan
        case.fixed = -value if case.neg else value
        return case
    if x == 0:
        if not lay.has_zero:
            case.fixed = math.nan
        else:
            case.fixed = -0.0 if case.neg and lay.has_negative_zero else 0.0
        return case

    a = abs(x)
    if not lay.has_zero and a < smallest_normal(lay):
        case.fixed = smallest_normal(lay)  # no zero: tiny positives clamp to the smallest value
        return case

    if ftz and lay.has_zero and a < smallest_normal(lay):
        # Round with the exponent unbounded below, flush later (see _pick).
        e = _exponent(a)
        quantum = Fraction(2) ** (e - lay.man_bits)
        k = math.floor(Fraction(a) / quantum)
        case.lo, case.hi = float(k * quantum), float((k + 1) * quantum)
        case.lo_odd, case.hi_odd = bool(k & 1), not (k & 1)
    elif a >= top:
        case.lo, case.hi = top, _virtual_next(lay)
        case.lo_odd = bool(max_code(lay) & 1)
        case.hi_odd = not case.lo_odd
        case.hi_overflows = True
        if a >= case.hi:  # rounds to the virtual next value or beyond in every mode
            case.lo = case.hi
            case.lo_odd = case.hi_odd
    else:
        code = _floor_code(lay, a)
        case.lo, case.hi = decode(lay, code), decode(lay, code + 1)
        if lay.bits <= 16:  # the next value in the sorted table, not merely the next code
            values, codes = positive_table(lay)
            i = bisect_right(values, a) - 1
            case.hi, hi_code = values[i + 1], codes[i + 1]
        else:
            hi_code = code + 1
        case.lo_odd, case.hi_odd = bool(code & 1), bool(hi_code & 1)
    if a == case.lo:
        case.hi, case.hi_odd = case.lo, case.lo_odd
    diff = (Fraction(a) - Fraction(case.lo)) - (Fraction(case.hi) - Fraction(a))
    case.cmp = (diff > 0) - (diff < 0)
    return case


def _pick(lay: Layout, case: _Case, mode: str, ftz: bool, saturate: bool) -> float:
    if case.fixed is not None:
        return case.fixed
    lo, hi, neg = case.lo, case.hi, case.neg
    if lo == hi:
        up = False
    elif mode in ("nearest_even", "nearest_away"):
        if case.cmp != 0:
            up = case.cmp > 0
        elif mode == "nearest_away" or (lay.man_bits == 0 and case.lo != 0):
            up = True  # p = 1: ties between powers of two go up (documented)
        else:
            up = case.hi_odd is False  # ties to the even code
    elif mode == "toward_zero":
        up = False
    elif mode == "up":
        up = not neg
    elif mode == "down":
        up = neg
    elif mode == "odd":
        # p = 1: both neighbours have significand 1, so odd = truncate (jamming the sticky bit
        # into a last bit that is already 1) -- unless the lower one is 0 (significand 0, even).
        up = (lay.man_bits > 0 or case.lo == 0) and not case.lo_odd
    else:
        raise ValueError(mode)
    magnitude = hi if up else lo
    top = max_value(lay)
    if magnitude > top:
        if saturate or lay.special == "none" or mode in ("toward_zero", "odd"):
            magnitude = top
        elif (mode == "up" and neg) or (mode == "down" and not neg):
            magnitude = top
        else:
            magnitude = math.inf if lay.special in ("ieee", "p3109") else math.nan
    elif ftz and lay.has_zero and magnitude < smallest_normal(lay):
        magnitude = 0.0
    if magnitude == 0 and not lay.has_negative_zero:
        return 0.0
    return -magnitude if neg else magnitude


def reference_round(
    xs,
    fmt,
    modes=MODES,
    *,
    saturate: bool = False,
    subnormals: bool = True,
) -> dict[str, np.ndarray]:
    """Round every x (float64-exact) in every mode; {mode: float64 array}."""
    lay = Layout.of(fmt)
    ftz = not (subnormals and lay.subnormals)
    xs = np.asarray(xs, dtype=np.float64)
    out = {mode: np.empty(xs.shape) for mode in modes}
    for i, x in enumerate(xs.ravel().tolist()):
        case = _analyse(lay, x, ftz, saturate)
        for mode in modes:
            out[mode].flat[i] = _pick(lay, case, mode, ftz, saturate)
    return out


def reference_neighbours(xs, fmt) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower, upper, probability of upper) per finite in-range x, for stochastic rounding.

    lower/upper are signed values, lower toward zero; for exact x both are x and p = 0.
    """
    lay = Layout.of(fmt)
    xs = np.asarray(xs, dtype=np.float64).ravel()
    lo, hi, p = np.empty(xs.shape), np.empty(xs.shape), np.empty(xs.shape)
    for i, x in enumerate(xs.tolist()):
        case = _analyse(lay, x, not lay.subnormals, False)
        if case.fixed is not None:
            lo[i] = hi[i] = case.fixed
            p[i] = 0.0
            continue
        sign = -1.0 if case.neg else 1.0
        lo[i], hi[i] = sign * case.lo, sign * case.hi
        if case.hi == case.lo:
            p[i] = 0.0
        else:
            gap = Fraction(case.hi) - Fraction(case.lo)
            p[i] = float((Fraction(abs(x)) - Fraction(case.lo)) / gap)
    return lo, hi, p


# --------------------------------------------------------------------------- test helpers


def assert_same(got, expected, x, what: str = "") -> None:
    """Equal values, equal signs of zero, NaN where NaN; report the first mismatches."""
    got, expected, x = np.asarray(got), np.asarray(expected), np.asarray(x)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    both_nan = np.isnan(got) & np.isnan(expected)
    same = both_nan | ((got == expected) & (np.signbit(got) == np.signbit(expected)))
    if not same.all():
        bad = np.flatnonzero(~same.ravel())
        rows = [
            f"  x={x.ravel()[i]!r} ({float(x.ravel()[i]).hex()}): got {got.ravel()[i]!r}, "
            f"expected {expected.ravel()[i]!r}"
            for i in bad[:12]
        ]
        raise AssertionError(f"{what}: {bad.size} of {same.size} differ\n" + "\n".join(rows))


def float32_exact(x: np.ndarray) -> np.ndarray:
    """Mask of the float64 values that float32 holds exactly (NaN counts as exact)."""
    with np.errstate(over="ignore"):
        return (x.astype(np.float32) == x) | np.isnan(x)


def midpoints(values: np.ndarray) -> np.ndarray:
    """Midpoints between neighbouring sorted finite values (exact in float64 for <= 16 bits)."""
    return values[:-1] / 2 + values[1:] / 2


def boundary_inputs(lay: Layout) -> np.ndarray:
    """Values around the overflow threshold, the subnormal range and the smallest normal."""
    top = max_value(lay)
    nxt = _virtual_next(lay)
    tiny = smallest_subnormal(lay) or smallest_normal(lay)
    normal = smallest_normal(lay)
    base = [
        top,
        nxt,
        (top + nxt) / 2,
        2 * top,
        4 * nxt,
        1e300,
        tiny,
        tiny / 2,
        tiny / 4,
        1.5 * tiny,
        3 * tiny,
        2.0**-1074,
        2.0**-1022,
        normal,
        normal * (1 - 2.0**-lay.man_bits / 2),
        normal * (1 - 2.0**-lay.man_bits / 4),
        normal / 2,
        normal * 0.75,
        1.0,
        3.0,
    ]
    base = np.array(base, dtype=np.float64)
    base = base[np.isfinite(base)]
    with np.errstate(over="ignore"):
        up = np.nextafter(base, np.inf)
    down = np.nextafter(base, 0)
    out = np.unique(np.concatenate([base, up, down]))
    return out[out != 0]  # zero is a special: callers add +-0 themselves
