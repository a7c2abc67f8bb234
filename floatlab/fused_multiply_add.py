"""``floatlab.fma(a, b, c)``: ``a * b + c`` rounded once, correctly in every mode.

Why one float64 addition is not enough and what is done instead (TwoSum and round-to-odd,
Boldo & Melquiond) is in :mod:`floatlab.arith`'s module notes; :func:`_nearest_fma` is the
fast path for the modes to nearest, with its proof. Split from :mod:`floatlab.arith` (the
FloatArray class), which it uses.

>>> import floatlab
>>> float(floatlab.fma(1 + 2.0**-10, 1 + 2.0**-10, -1.0, fmt="fp16"))
0.001953125
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from floatlab.arith import _NEAREST, FloatArray, correctly_rounded, result_format
from floatlab.eft import odd_sum, zero_sum_sign
from floatlab.formats import Format, get_format
from floatlab.promotion import contains
from floatlab.rounding import _resolve_mode, as_float_array
from floatlab.rounding import round as _round

__all__ = ["fma"]


def fma(a: Any, b: Any, c: Any, fmt: str | Format | None = None,
        rounding: str | None = None, rng: Any = None) -> Any:
    """``a * b + c`` rounded once (correctly rounded in every mode; see the module notes).

    With FloatArray operands the result is a FloatArray of their promoted format and the first
    one's rounding (and rng: ``rounding`` / ``rng`` other than those are refused, not ignored);
    with plain operands pass ``fmt`` (they are taken exactly), ``rounding`` (default
    "nearest_even") and ``rng``, and get float64.

    >>> from floatlab import array
    >>> x = array([1 + 2.0**-10], "fp16")
    >>> fma(x, x, array([-1.0], "fp16"))       # x*x - 1 = 2**-9 + 2**-20: 2**-9 after rounding
    FloatArray(float16, [0.001953125])
    >>> float(fma(1 + 2.0**-10, 1 + 2.0**-10, -1.0, fmt="fp32"))
    0.0019540786743164062
    """
    arrays = [v for v in (a, b, c) if isinstance(v, FloatArray)]
    if arrays:
        lead = arrays[0]
        out_fmt = result_format(*arrays) if fmt is None else get_format(fmt)
        va, vb, vc = (lead._weak(v, out_fmt) for v in (a, b, c))
        _check_lead_settings(lead, rounding, rng)
        mode, rng = lead.rounding, lead.rng
    else:
        if fmt is None:
            raise TypeError("fma of plain numbers needs fmt=<format of the result>")
        out_fmt = get_format(fmt)
        mode = _resolve_mode("nearest_even" if rounding is None else rounding)
        va, vb, vc = (np.asarray(as_float_array(v, name=n), dtype=np.float64)
                      for v, n in ((a, "a"), (b, "b"), (c, "c")))
        for v, n in ((va, "a"), (vb, "b")):
            if not _exact_product_operand(v).all():
                raise ValueError(f"fma: {n} has more than 26 significant bits, or lies beyond "
                                 "float32's range and outside [2**-500, 2**500); the product "
                                 "is exact in float64 only for such inputs (round them to "
                                 "float32 or to the format first)")
    try:
        np.broadcast_shapes(np.shape(va), np.shape(vb), np.shape(vc))
    except ValueError:
        raise ValueError(f"fma: a, b and c have shapes {np.shape(va)}, {np.shape(vb)} and "
                         f"{np.shape(vc)}, which do not broadcast together; pass arrays of one "
                         "shape (or scalars)") from None
    if _FAST_FMA and arrays and all(contains(out_fmt, f.fmt) for f in arrays) \
            and _sums_exact(out_fmt):
        with np.errstate(invalid="ignore", over="ignore"):
            exact = va * vb + vc  # exact (see _sums_exact): rounded once below, in any mode
    elif _FAST_FMA and mode in _NEAREST and correctly_rounded(out_fmt):
        exact = _nearest_fma(va, vb, vc, out_fmt)
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            product = va * vb
        exact = odd_sum(product, vc)
    if mode == "down":  # an exact zero a*b + c is -0 in this mode (IEEE 754 6.3)
        with np.errstate(invalid="ignore", over="ignore"):
            exact = zero_sum_sign(exact, va * vb, vc, mode)
    if arrays:
        return lead._new(exact, out_fmt)
    return _round(exact, out_fmt, mode, rng=rng)


def _exact_product_operand(v: np.ndarray) -> np.ndarray:
    """Where ``v`` may enter a float64 product exactly: a float32 value (24 bits, exponents
    -149..127: products of two lie in float64's range) or any value of at most 26 significant
    bits in [2**-500, 2**500) (products of two have at most 52 bits, keep their lowest bit
    above 2**-1074 and stay below 2**1024). The values of every format that
    :func:`correctly_rounded` accepts (p <= 25) pass: e9m1's 1.5 * 2**255 and e1m24's
    2 - 2**-24 were refused before as "more than 24 significant bits".
    """
    with np.errstate(invalid="ignore"):
        fits32 = (_round(v, "float32") == v) | np.isnan(v)
        mantissa, exponent = np.frexp(v)
        few_bits = np.ldexp(mantissa, 26) == np.trunc(np.ldexp(mantissa, 26))
        in_range = (exponent > -500) & (exponent <= 500)
    return fits32 | (few_bits & in_range)


def _check_lead_settings(lead: FloatArray, rounding: Any, rng: Any) -> None:
    """fma's ``rounding`` / ``rng`` with FloatArray operands: the first one's settings decide,
    so a different mode or generator would be silently ignored; it is refused instead."""
    if rounding is not None and _resolve_mode(rounding) != lead.rounding:
        raise ValueError(f"fma: rounding={rounding!r}, but FloatArray operands round with the "
                         f"first one's mode ({lead.rounding!r}); drop rounding=, or build that "
                         f"operand with floatlab.array(..., rounding={rounding!r})")
    if rng is not None and rng is not lead.rng:
        raise ValueError("fma: rng= applies to plain operands; FloatArray operands draw from "
                         "the first one's generator: pass it to floatlab.array(..., rng=...)")


_FAST_FMA = True  # switch for the tests, which check the fast path equal to odd_sum's


def _sums_exact(fmt: Format) -> bool:
    """Whether ``a * b + c`` is exact in float64 for all values a, b, c of ``fmt``.

    Every value is a multiple of the smallest subnormal q (or of the smallest normal's
    quantum, the same number), so a*b + c is a multiple of q**2 (q <= 1) of magnitude at most
    max**2 + max: an integer times q**2 below 2**53 is a float64 number. True for the 8-bit
    formats with few exponent bits (e4m3fn: 37 bits), false for fp16 / bf16.
    """
    q = 2.0 ** (fmt.emin - fmt.man_bits)
    # (False below 2**-500, where q * q underflows to 0: float64 and other wide exponents,
    # whose exponent span is far too wide anyway; it divided by zero there)
    return 2.0**-500 <= q <= 1 and (fmt.max * fmt.max + fmt.max) / (q * q) < 2.0**53


def _nearest_fma(a: np.ndarray, b: np.ndarray, c: np.ndarray, fmt: Format) -> np.ndarray:
    """A float64 value whose rounding to nearest (even or away) in ``fmt`` equals that of the
    exact ``a * b + c`` (a * b exact: inputs of at most 26 bits): ``fl(a * b + c)``, with
    round-to-odd (:func:`odd_sum`) only where needed, in cache-sized pieces.

    Proof. Call the points of ``fmt``'s grid and the midpoints between neighbours (the overflow
    threshold max + ulp/2 included) *breakpoints*: a rounding to nearest is constant strictly
    between two consecutive breakpoints. They all have at most p + 1 significant bits and, for
    a format where :func:`correctly_rounded` holds (p <= 25, exponents far inside float64's),
    they are float64 numbers. float64's rounding of the exact sum X is monotone and fixes every
    float64 number, so s = fl(X) lies in the closed interval between the breakpoints around X:
    if s is strictly inside it, or is a grid point (then X is within half a float64 ulp of it,
    closer than the nearest midpoint), s and X round alike. The one bad case is s a midpoint
    and s != X. So only midpoints need the exact treatment: elements where s has exactly
    p + 1 significant bits (the low 52 - p bits of its float64 fraction zero, bit 52 - p set),
    or at most p + 1 and |s| below 2**emin (midpoints there have fewer bits); odd_sum on them
    (round to odd, see floatlab.eft) gives the value the general path gives. inf / NaN sums
    (only from inf / NaN inputs) are left as they are, as odd_sum leaves them.
    Tests compare this path with ``odd_sum`` on random, tie, subnormal and overflow cases.
    """
    a, b, c = np.broadcast_arrays(a, b, c)
    out = np.empty(a.shape)  # a fresh array (0-d too)
    flat_a, flat_b, flat_c, flat = (v.reshape(-1) for v in (a, b, c, out))
    size = builtins.min(flat.size, _PIECE)
    product, low = np.empty(size), np.empty(size, dtype=np.uint64)
    low_mask, mid_bit = np.uint64((1 << (52 - fmt.p)) - 1), np.uint64(1 << (52 - fmt.p))
    with np.errstate(invalid="ignore", over="ignore"):
        for start in range(0, flat.size, _PIECE):
            piece = slice(start, start + _PIECE)
            s = flat[piece]
            k = s.size
            np.multiply(flat_a[piece], flat_b[piece], out=product[:k])
            np.add(product[:k], flat_c[piece], out=s)
            # breakpoints have at most p + 1 significant bits: low 52 - p fraction bits zero
            np.bitwise_and(s.view(np.uint64), low_mask, out=low[:k])
            if low[:k].all():
                continue
            candidates = np.flatnonzero(low[:k] == 0)
            # grid points need nothing: keep the midpoints (bit 52 - p set: p + 1 significant
            # bits) and everything below 2**emin (midpoints there have fewer bits)
            found = s[candidates]
            keep = ((found.view(np.uint64) & mid_bit) != 0) | (np.abs(found) < 2.0**fmt.emin)
            candidates = candidates[keep]
            s[candidates] = odd_sum(product[candidates], flat_c[piece][candidates])
    return out


_PIECE = 1 << 15
