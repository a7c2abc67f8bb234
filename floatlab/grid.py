"""The grid of a format: every value, the gaps between them, and exact decimals.

Vectorised helpers that walk a format's representable values (arrays in, arrays out):

>>> exact_decimal(1/3, "fp16")
'0.333251953125'
>>> nextafter(1.0, 2.0, "fp16"), ulp(3.141, "fp16")
(array(1.00097656), array(0.00195312))
>>> values("e2m1")
array([-6. , -4. , -3. , -2. , -1.5, -1. , -0.5,  0. ,  0.5,  1. ,  1.5,
        2. ,  3. ,  4. ,  6. ])

Rounding is always done by :func:`floatlab.round` and decoding by :mod:`floatlab.codec`.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction
from typing import Any

import numpy as np

from floatlab._interop import as_numpy, caller_type
from floatlab.codec import decode
from floatlab.formats import Format, get_format
from floatlab.rounding import as_float_array
from floatlab.rounding import round as round_to_format

__all__ = ["exact_decimal", "nextafter", "ulp", "values"]

_MAX_LISTED_BITS = 16  # values() lists at most 2**16 codes


# =========================================================================== exact decimals

def _decimal(value: float | Fraction) -> str:
    """The exact decimal expansion of a float or dyadic Fraction (every float is one).

    ``n / 2**k == n * 5**k / 10**k``, so the digits are those of the integer ``n * 5**k``
    with the point ``k`` places from the right: exact, with no float formatting involved.
    """
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if value == 0:
            return "-0" if math.copysign(1.0, value) < 0 else "0"
    frac = Fraction(value)
    sign = "-" if frac < 0 else ""
    num, den = abs(frac.numerator), frac.denominator
    k = den.bit_length() - 1
    if den != 1 << k:
        raise ValueError(f"{value!r} is not a dyadic rational, so it has no finite decimal")
    digits = str(num * 5**k).rjust(k + 1, "0")
    whole, tail = digits[: len(digits) - k], digits[len(digits) - k :].rstrip("0")
    return f"{sign}{whole}.{tail}" if tail else f"{sign}{whole}"


_ROUND_OPTIONS = frozenset({"rounding", "saturate", "subnormals", "rng", "dtype", "random_bits"})


def exact_decimal(x: Any, fmt: str | Format | Any, **rounding_options: Any) -> str | np.ndarray:
    """The exact decimal value stored when ``x`` is rounded to ``fmt`` (str, or array of str).

    Every binary float is a finite decimal; this writes all of its digits, computed with
    integers (no float formatting, no "≈"). ``rounding_options`` are those of
    :func:`floatlab.round`. -0 gives ``'-0'``; inf and NaN give ``'inf'``, ``'-inf'``, ``'nan'``.

    >>> exact_decimal(3.141, "fp16")
    '3.140625'
    >>> exact_decimal(1/3, "fp32")
    '0.3333333432674407958984375'
    >>> exact_decimal([2**-24, -65504.0, 1e6], "fp16").tolist()
    ['0.000000059604644775390625', '-65504', 'inf']
    """
    unknown = set(rounding_options) - _ROUND_OPTIONS
    if unknown:  # else Python's message would blame round(), which the caller did not call
        raise TypeError(f"unknown option(s) {', '.join(sorted(unknown))}; the rounding options "
                        f"are {', '.join(sorted(_ROUND_OPTIONS))} (those of floatlab.round)")
    stored = round_to_format(as_numpy(x), get_format(fmt), **rounding_options)
    out = np.array([_decimal(float(v)) for v in stored.reshape(-1)], dtype=object)
    if stored.ndim == 0:
        return str(out[0])
    return out.astype(str).reshape(stored.shape)


# =========================================================================== the grid: ulp

def _as_float64(x: Any, name: str) -> np.ndarray:
    return as_float_array(x, name=name).astype(np.float64)


def _ulp_of_magnitude(mag: np.ndarray, fmt: Format) -> np.ndarray:
    """Spacing of the grid at magnitudes ``mag`` (finite, >= 0): ``2**(e - man_bits)`` where
    ``e`` is the binade of ``mag``, clamped at the subnormal range."""
    safe = np.where(mag > 0, mag, 1.0)
    binade = np.frexp(safe)[1] - 1  # exact, unlike log2 near powers of two
    quantum = np.ldexp(1.0, np.maximum(binade, fmt.emin) - fmt.man_bits)
    below_normal = mag < fmt.normal_threshold
    # Below the smallest normal the step is the subnormal quantum 2**(emin - M); without
    # subnormals (FTZ customs, E8M0) the first step is from 0 to the smallest normal.
    tiny_step = fmt.smallest_positive if fmt.subnormals else fmt.smallest_normal
    return np.where(below_normal, tiny_step, quantum)


def ulp(x: Any, fmt: str | Format | Any) -> np.ndarray:
    """The unit in the last place at ``|x|``: the gap from ``|x|`` to the next larger magnitude
    of the grid of ``fmt`` (float64 array, 0-d for a scalar).

    Conventions: the result is always positive (``numpy.spacing`` carries the sign of x). ``x``
    need not be a value of ``fmt``: the ulp is that of the binade ``|x|`` lies in. At ``max``
    it is the ulp of max's binade (the gap to the first value beyond, had the exponent room),
    and beyond ``max`` the binades continue as if the exponent were unbounded (the spacing the
    rounding core uses to decide overflow). Below the smallest normal it is the subnormal step
    ``2**(emin - man_bits)``, or the smallest normal itself when the format has no subnormals.
    inf and NaN give NaN.

    >>> ulp([1.0, 3.141, 65504.0, 0.0], "fp16")
    array([9.76562500e-04, 1.95312500e-03, 3.20000000e+01, 5.96046448e-08])
    >>> float(ulp(448, "e4m3fn"))
    32.0
    """
    back = caller_type(x)  # torch in, torch out
    fmt = get_format(fmt)
    arr = _as_float64(x, "x")
    mag = np.abs(arr)
    finite = np.isfinite(mag)
    out = _ulp_of_magnitude(np.where(finite, mag, 0.0), fmt)
    return back(np.where(finite, out, np.nan))


# =========================================================================== nextafter

_DIRECTION_WORDS = {"+inf": np.inf, "inf": np.inf, "up": np.inf, "-inf": -np.inf, "down": -np.inf}


def _parse_direction(toward: Any) -> np.ndarray:
    if isinstance(toward, str):
        key = toward.strip().lower()
        if key not in _DIRECTION_WORDS:
            raise ValueError(
                f"direction {toward!r} is not understood: pass a number to step toward, or one "
                "of '+inf' / 'up', '-inf' / 'down'"
            )
        return np.asarray(_DIRECTION_WORDS[key])
    return _as_float64(toward, "direction")


def _successor(mag: np.ndarray, fmt: Format) -> np.ndarray:
    """Next larger magnitude after a representable magnitude (NaN: none; inf past max)."""
    beyond_max = np.inf if fmt.has_inf else np.nan
    with np.errstate(over="ignore"):  # float64's max + ulp: replaced just below
        step_up = mag + _ulp_of_magnitude(mag, fmt)
    out = np.where(mag == 0, fmt.smallest_positive, step_up)
    return np.where(mag >= fmt.max, beyond_max, out)


def _predecessor(mag: np.ndarray, fmt: Format) -> np.ndarray:
    """Next smaller magnitude before a representable magnitude > 0 (NaN: none)."""
    mantissa, k = np.frexp(np.where(mag > 0, mag, 1.0))
    binade = k - 1
    # At the start of a normal binade the step down is the finer spacing of the binade below.
    starts_binade = (mantissa == 0.5) & (binade > fmt.emin)
    down = np.where(
        starts_binade,
        mag - np.ldexp(1.0, binade - 1 - fmt.man_bits),
        mag - _ulp_of_magnitude(mag, fmt),
    )
    below_smallest = 0.0 if fmt.has_zero else np.nan
    return np.where(mag <= fmt.smallest_positive, below_smallest, down)


def nextafter(x: Any, direction: Any, fmt: str | Format | Any) -> np.ndarray:
    """The neighbour of ``x`` in ``fmt`` in the direction of ``direction`` (like numpy's).

    ``x`` must hold values of ``fmt`` (round first with :func:`floatlab.round` otherwise: a
    silent rounding here would make "the next value after 3.1415" depend on which way 3.1415
    rounded); +-inf is accepted in every format as the end of the real line. ``direction`` is a
    number (step toward it; equal gives ``x`` back) or ``'+inf'``/``'up'``, ``'-inf'``/
    ``'down'``. Arrays broadcast. Returns float64 (0-d for scalars).

    Edge conventions: stepping up from ``max`` gives inf where the format has inf and NaN
    ("no such value") otherwise; stepping down from the smallest positive value gives 0 (NaN
    for E8M0, which has no zero; -smallest in a signed format without zero); zeros step to
    +-smallest positive value; stepping toward zero from the smallest negative value gives -0
    where the format has -0 (FNUZ: +0). NaN in, NaN out.

    >>> nextafter([1.0, 65504.0, 0.0], "+inf", "fp16")
    array([1.00097656e+00,            inf, 5.96046448e-08])
    >>> nextafter(448.0, "up", "e4m3fn"), nextafter(1.0, 0.0, "e8m0")
    (array(nan), array(0.5))
    """
    back = caller_type(x)  # torch in, torch out
    fmt = get_format(fmt)
    arr = _as_float64(x, "x")
    toward = _parse_direction(direction)
    try:
        arr, toward = np.broadcast_arrays(arr, toward)
    except ValueError:
        raise ValueError(
            f"x (shape {arr.shape}) and direction (shape {toward.shape}) do not broadcast: "
            "pass one direction for all (e.g. 'up'), or one per element of x"
        ) from None
    _require_representable(arr, fmt)

    with np.errstate(invalid="ignore"):
        mag = np.abs(arr)
        finite = np.isfinite(arr)
        fmag = np.where(finite, mag, 0.0)
        negative = np.signbit(arr)
        up, down = toward > arr, toward < arr
        away = np.where(negative, down, up)  # magnitude grows
        succ = _successor(fmag, fmt)
        pred = _predecessor(fmag, fmt)
        signed_pred = np.where(negative, -pred, pred)
        if not fmt.has_negative_zero:
            signed_pred = signed_pred + 0.0  # -0.0 + 0.0 is +0.0
        lowest = -fmt.smallest_positive if fmt.signed else np.nan
        out = np.where(away, np.where(negative, -succ, succ), signed_pred)
        if fmt.signed and not fmt.has_zero:  # no zero between -min and +min: they neighbour
            out = np.where(~away & (fmag == fmt.smallest_positive), -arr, out)
        # Zeros (either sign) step to +-smallest positive, whatever their sign bit says.
        out = np.where(fmag == 0, np.where(up, fmt.smallest_positive, lowest), out)
        # +-inf: one step inward is the extreme finite value; outward stays infinite.
        out = np.where(~finite & down & (arr > 0), fmt.max, out)
        out = np.where(~finite & up & (arr < 0), fmt.min, out)
        out = np.where(~finite & ~(down & (arr > 0)) & ~(up & (arr < 0)), arr, out)
        out = np.where(~up & ~down, arr, out)  # equal (or NaN direction: NaN below)
        out = np.where(np.isnan(arr) | np.isnan(toward), np.nan, out)
    return back(out.astype(np.float64))


def _require_representable(arr: np.ndarray, fmt: Format) -> None:
    finite = np.isfinite(arr)
    filler = np.where(finite, arr, fmt.max)  # a representable stand-in for inf / NaN
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # E8M0's "became NaN" is what we test
        stored = round_to_format(filler, fmt)
    bad = finite & ~(stored == arr)
    if bad.any():
        first = float(arr[bad].flat[0])
        raise ValueError(
            f"{first!r} is not a value of {fmt.name} ({int(bad.sum())} such input(s)); nextafter "
            f"steps from values of the format: round first, e.g. "
            f"nextafter(floatlab.round(x, {fmt.name!r}), direction, {fmt.name!r})"
        )


# =========================================================================== values

def values(fmt: str | Format | Any) -> np.ndarray:
    """Every finite value of ``fmt``, ascending, as float64 (formats up to 16 bits).

    Zero appears once, as +0.0 (-0 compares equal to it). Without zero (E8M0) the list starts
    at the smallest value; for formats without subnormals (FTZ customs) the codes of the
    subnormal range all mean zero and are listed once. Larger formats are refused: float32
    alone has 4 billion codes -- walk a range with :func:`nextafter` instead.

    >>> values("e2m1")[-4:], len(values("e4m3fn")), len(values("fp16"))
    (array([2., 3., 4., 6.]), 253, 63487)
    """
    if getattr(fmt, "is_element_format", False):  # FixedPoint / Codebook (floatlab.quant)
        return fmt.values()
    fmt = get_format(fmt)
    if fmt.bits > _MAX_LISTED_BITS:
        raise ValueError(
            f"{fmt.name} has {fmt.bits} bits ({2**fmt.bits:,} codes): values() lists formats of "
            f"at most {_MAX_LISTED_BITS} bits. Walk a range with floatlab.nextafter, or count "
            f"values with floatlab.finfo({fmt.name!r})"
        )
    decoded = decode(np.arange(1 << fmt.bits, dtype=np.uint32), fmt)
    finite = np.unique(decoded[np.isfinite(decoded)])  # sorted; -0 and +0 merge
    return finite + 0.0  # the merged zero may carry a sign bit: make it +0
