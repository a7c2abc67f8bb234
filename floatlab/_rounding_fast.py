"""Proved fast paths of the rounding core for spread-out data: inputs below the smallest normal
(the subnormal range, and FTZ), and results beyond max.

:func:`floatlab.round` rounds inputs at or above the format's smallest normal ``2**emin`` by
their bit pattern (fast). Below ``2**emin`` its general path rounds each element's integer
significand by a per-element shift (a dozen integer passes, plus a gather / scatter when such
inputs are few); overflow was a gather / scatter too. On data spread over many binades a
quarter to a half of the elements fall in one of the two, and they set the speed. The kernels
here do the same work in a few whole-array passes. Each is proved identical to the general
path in its docstring, sits behind ``floatlab.rounding._FAST_PATHS`` and is tested equal to the
general path (tests/test_rounding_fast_paths.py) on every subnormal-range value, midpoint and
midpoint +- 1 ulp of every preset, P3109 and custom formats, in every mode, and on random data.

Like the general path (and NumPy itself), these rely on the IEEE 754 default environment:
round-to-nearest for float arithmetic and no flush-to-zero / denormals-are-zero.
"""

from __future__ import annotations

import math
import threading
from functools import lru_cache, wraps
from typing import Any

import numpy as np

from floatlab._rounding_kernels import _buffers
from floatlab.formats import Format


def per_format(fn: Any) -> Any:
    """Memoise a function of one format by the format object's identity.

    ``functools.lru_cache`` hashes its argument on every call, and hashing a Format (a
    dataclass) costs about as much as the small facts cached here; the quantisation core asks
    for them several times per operand, thousands of times per training run. Formats are
    immutable, and the memo keeps each one alive, so an id is never reused for another.
    """
    memo: dict[int, tuple[Any, Any]] = {}

    @wraps(fn)
    def cached(fmt: Any) -> Any:
        hit = memo.get(id(fmt))
        if hit is not None and hit[0] is fmt:
            return hit[1]
        value = fn(fmt)
        if len(memo) >= 512:
            memo.clear()
        memo[id(fmt)] = (fmt, value)
        return value

    return cached


@lru_cache(maxsize=512)
def uniform_grid_exponent(fmt: Format, work_emin: int, work_bias: int, work_man_bits: int,
                          ftz: bool) -> int | None:
    """k such that the inputs below ``2**emin`` round on the grid of multiples of ``2**-k``, or
    None where the uniform-grid kernel is not proved (then the general path runs).

    Without FTZ, every magnitude below ``2**emin`` has the subnormal quantum
    ``q = 2**(emin - M)``: k = M - emin. With FTZ (``subnormals=False``, or a format without
    subnormals), the general path rounds such an input on its *own* binade's grid and then
    flushes (or, without zero, clamps) every result below ``2**emin``; only the binade
    ``[2**(emin-1), 2**emin)`` can round up to ``2**emin``, and its quantum is
    ``2**(emin - 1 - M)``: k = M + 1 - emin. Lower binades round to at most ``2**(emin - 1)``
    on either grid, so both are flushed alike (see :func:`round_on_uniform_grid`).

    Conditions: M >= 1 (p = 1 formats read the tie parity from the exponent: general path);
    k >= 0, so that ``x * 2**k`` is a scaling *up*, exact for every working value (even a
    working subnormal) that does not overflow; ``2**k`` a normal working value (k <= bias);
    the quantum ``2**-k`` representable (>= the smallest working subnormal); and the integers
    up to ``2**(M+1)`` exact in the working precision.
    """
    if fmt.man_bits < 1 or fmt.man_bits > work_man_bits:
        return None
    k = fmt.man_bits - fmt.emin + (1 if ftz else 0)
    if k < 0 or k > work_bias or -k < work_emin - work_man_bits:
        return None
    return k


def round_on_uniform_grid(values: np.ndarray, k: int, mode: str, draws: np.ndarray | None,
                          truncate: Any, out: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """``values`` (signed, working precision) rounded to multiples of ``2**-k``, into ``out``.

    Only elements with ``0 < |x| < 2**emin`` are used by the caller (others give some value,
    possibly inf or NaN, that is discarded). ``draws``: one uniform float64 per element for
    stochastic rounding; ``truncate``: the random_bits truncation of the probability, or None.
    ``scratch`` is an array like ``values`` (the kernel uses it for the magnitudes).

    Proof that this equals the general path (``_round_significand_block``) bit for bit, for
    ``0 < |x| < 2**emin``. Let q = 2**-k (the subnormal quantum; with FTZ, see
    :func:`uniform_grid_exponent`). The general path writes |x| = sig * 2**(e - W) and shifts
    sig right by the number of bits below q: kept = floor(|x| / q); the discarded remainder
    is the fraction f = |x|/q - kept of one quantum, exactly (an integer rem over 2**shift).
    It adds step in {0, 1} to kept and returns (kept + step) * q with the input's sign bit:
    nearest_even: f > 1/2, or f == 1/2 and kept odd; nearest_away: f >= 1/2; toward_zero:
    0; up: f != 0 and x > 0; down: f != 0 and x < 0; odd: f != 0 and kept even;
    stochastic: u < f, with u the next uniform draw (f truncated to ``random_bits`` bits first,
    by the same function). Here:

    1. y = x * 2**k is exact: a scaling up (k >= 0) whose result |y| < 2**(M + 1) cannot
       overflow; a product of floats is exact when the exact product is representable.
       So |y| = |x| / q and trunc(|y|) = kept.
    2. f = |y| - trunc(|y|) is exact: 0 when |y| < 1 gives f = |y|; otherwise
       t <= |y| < t + 1 <= 2t, so |y| / 2 <= t <= |y| (Sterbenz).
    3. The directed and nearest-even modes are numpy's roundToIntegral operations on the
       signed y, which IEEE 754 defines exactly and which keep the sign even at zero:
       rint (ties to even, the default rounding direction), trunc, ceil (up: kept + 1 for
       x > 0 when inexact, kept for x < 0) and floor (the mirror image). The other modes add
       their step to t = trunc(|y|) (an integer < 2**(M + 1), exact), and copysign restores
       the sign bit, -0 included. Stochastic compares the same draw with the same f (float32
       f widens to float64 exactly), consuming one draw per element as the general path.
       Odd ORs the inexact flag into the integer t.
    4. (kept + step) * q is exact: an integer <= 2**(M + 1) times a power of two whose
       product is at least q, representable (``uniform_grid_exponent``'s conditions).

    With FTZ the general path rounds x on its own binade's grid, 2**(e - M), which is q for
    the top binade below 2**emin, and then flushes every result below 2**emin to signed zero
    (or clamps it up to 2**emin without zero). Rounding a lower binade's x on the coarser q
    grid gives at most 2**(emin - 1) (the grid point above it), as on its own grid: flushed
    alike, with the same sign. Stochastic rounding draws one number per element either way.
    """
    dt = values.dtype.type
    y = np.multiply(values, dt(math.ldexp(1.0, k)), out=out)
    if mode == "nearest_even":
        np.rint(y, out=y)
    elif mode == "toward_zero":
        np.trunc(y, out=y)
    elif mode == "up":
        np.ceil(y, out=y)
    elif mode == "down":
        np.floor(y, out=y)
    else:
        magnitude = np.abs(y, out=scratch)
        kept = np.trunc(magnitude)
        fraction = np.subtract(magnitude, kept, out=magnitude)
        if mode == "nearest_away":
            kept += fraction >= 0.5
        elif mode == "odd":
            kept_int = kept.astype(_UINT[kept.dtype])
            kept_int |= fraction != 0
            kept[...] = kept_int
        else:  # stochastic
            if fraction.dtype != np.float64:
                fraction = fraction.astype(np.float64)
            if truncate is not None:
                fraction = truncate(fraction)
            kept += draws < fraction
        np.copysign(kept, y, out=y)
    y *= dt(math.ldexp(1.0, -k))
    return y


_UINT = {np.dtype(np.float32): np.dtype(np.uint32), np.dtype(np.float64): np.dtype(np.uint64)}


def select_bits(dest_bits: np.ndarray, new_bits: np.ndarray, where: np.ndarray) -> None:
    """dest_bits[where] = new_bits[where], branch-free (new_bits is overwritten).

    A masked copy or np.where costs 2-4 ns per element on a random mask (a mispredicted
    branch each); three bitwise passes over an all-ones / all-zeros mask cost a fraction.
    """
    mask = np.negative(where.view(np.uint8), dtype=dest_bits.dtype)  # True -> all ones
    np.bitwise_xor(new_bits, dest_bits, out=new_bits)
    new_bits &= mask
    dest_bits ^= new_bits


def overflow_by_bits(out: np.ndarray, mode: str, saturate: bool, fmt: Format, uint: type,
                     width: int) -> None:
    """Replace every result beyond max by +-max or the overflow value (inf, or NaN), in place.

    Equal to the general ``_apply_overflow`` followed by ``_apply_specials``: (1) the general
    path picks, per element with |out| > max and a finite input, +-max when saturating, for
    formats without NaN, toward_zero and odd; otherwise inf (NaN without inf), except that
    ``up`` gives -max for negative and ``down`` +max for positive inputs; the sign is the
    input's, which the rounded result keeps (rounding never changes a sign bit). The same
    choice is made here from the result's sign bit, and NaN is written as the working
    precision's quiet NaN with that sign, as ``-np.nan`` is. (2) Results of non-finite inputs
    are also rewritten here (|inf| and NaN exceed max or compare false), but
    ``_apply_specials`` overwrites every non-finite input's result afterwards, so they do not
    matter. The three forms, by case:

    * all to +-max: ``clip(out, -max, max)`` changes exactly the elements beyond max, to
      +-max with their sign.
    * all to +-inf: ``out / (1 - over)`` divides the overflowed (finite, nonzero) elements by
      +0, which gives inf with their sign, and the others by 1, which changes nothing (NaN and
      -0 included). Division by zero is silenced by round()'s errstate.
    * NaN, or a mix (up / down): a branch-free select of the chosen bit pattern.
    """
    to_max_all = saturate or not fmt.has_nan or mode in ("toward_zero", "odd")
    if to_max_all:
        np.clip(out, -fmt.max, fmt.max, out=out)
        return
    over = np.abs(out) > fmt.max
    if not over.any():
        return
    if fmt.has_inf and mode not in ("up", "down"):
        out /= np.subtract(1, over, dtype=out.dtype)
        return
    bits = out.view(uint)
    sign_bit = uint(1 << (width - 1))
    max_bits = out.dtype.type(fmt.max).view(uint)
    special = out.dtype.type(np.inf if fmt.has_inf else np.nan).view(uint)
    if mode in ("up", "down"):
        # up: -max for negatives, the overflow value for positives; down: the mirror image.
        negative = (bits.view(np.dtype(f"i{width // 8}")) >> (width - 1)).view(uint)
        replacement = negative & uint(max_bits ^ special)
        replacement ^= special if mode == "up" else max_bits
        replacement |= bits & sign_bit
    else:
        replacement = bits & sign_bit
        replacement |= special
    select_bits(bits, replacement, over)


@per_format
def in_range_kernel_applies(fmt: Format) -> bool:
    """Whether :func:`round_in_range_nearest_even` is proved for ``fmt`` (see its proof):
    1 <= M <= 21 mantissa bits, a sign, zero and -0, subnormals, emin >= -126 and
    emax + 23 - M <= 127 (the FP8 / FP6 / FP4 element formats, fp16 and the like)."""
    return (1 <= fmt.man_bits <= 21 and fmt.signed and fmt.has_zero and fmt.has_negative_zero
            and fmt.subnormals and fmt.emin >= -126 and fmt.emax + 23 - fmt.man_bits <= 127)


_EXPONENT32, _SIGN32 = np.uint32(0x7F800000), np.uint32(0x80000000)


def round_in_range_nearest_even(x: np.ndarray, fmt: Format, out: np.ndarray | None = None,
                                *, positive_normal: bool = False) -> np.ndarray:
    """float32 or float64 ``x`` rounded to nearest-even in ``fmt``, for finite x below the
    overflow threshold, ``|x| < fmt.max + ulp(max) / 2`` (the caller guarantees it; the
    quantisation core clips the blocks that reach it), into ``out`` (a new array of x's dtype
    by default; ``out=x`` rounds in place): equal to ``floatlab.round(x, fmt, dtype=x.dtype)``.
    Seven cheap passes per cache-sized chunk. (Written for float32 below; float64 is the same
    with 23 -> 52 fraction bits and its exponent range, which the conditions also satisfy.)

    Proof (``in_range_kernel_applies`` gives the conditions; float32 arithmetic is IEEE
    round-to-nearest-even, as everywhere in this module). Let e be x's binade (the exponent
    field, so |x| < 2**(e + 1); 0 and float32 subnormals read as below -126), E = max(e, emin)
    and q = 2**(E - M): the general path's quantum for x (the subnormal quantum below
    2**emin). Let C = 2**(E + 23 - M) and c = 1.5 C, a normal float32 (E + 23 - M <= emax +
    23 - M <= 127; >= emin + 2 >= -124) built from its bits: exponent E + 23 - M, top
    mantissa bit set.

    1. |x| < 2**(E + 1) <= C / 2 (as 23 - M >= 2), so the exact sum x + c lies in
       (C, 2C): one binade, whose float32 ulp is C * 2**-23 = q, for either sign of x. The
       float32 sum is therefore c + RNE_q(x), rounded on the grid of q with ties to an even
       multiple of q; c / q = 1.5 * 2**23 is even, so the parity is that of RNE_q(x) / q:
       exactly the general path's nearest-even rounding of |x| on its quantum, with x's sign.
       Below the overflow threshold that is at most max, so the general path's overflow pass
       changes nothing.
    2. (x + c) - c = RNE_q(x) is exact: both operands lie in (C, 2C) (Sterbenz).
    3. Zero: when RNE_q(x) = 0 the difference is +0 (equal operands); ORing x's sign bit in
       gives -0 for negative x, as the general path, which ORs the input's sign bit into the
       rounded magnitude. Nonzero results already carry x's sign, so the OR changes nothing
       there.

    ``positive_normal=True``: the caller knows every x is positive and at least ``2**emin``
    (block scales clamped to the scale format's normal range), so E = e and the sign bit is 0:
    the floor on the exponent (E = max(e, emin)) and step 3's OR change nothing and are left
    out (four passes; small arrays only, where the saved calls matter).

    Tested equal to the general path on every grid point, midpoint and midpoint +- 1 ulp of
    the formats, float32 subnormals and random data (tests/test_rounding_fast_paths.py).
    """
    # float32 (W = 23 fraction bits, bias 127) or float64 (52, 1023): the proof holds for
    # either with 23 replaced by W (the conditions on the format imply float64's).
    dtype = x.dtype
    uint, floor_bits, offset, exponent_mask, sign_mask = _in_range_constants(fmt)[dtype]
    if out is None:
        out = np.empty(x.shape, dtype)  # C order whatever x's layout
    if not out.flags.c_contiguous or out.shape != x.shape:  # pragma: no cover - internal
        raise RuntimeError("out must be a C-contiguous array of x's shape")
    flat_x, flat_out = x.reshape(-1), out.reshape(-1)
    if flat_x.size <= _IN_RANGE_SMALL:
        # Small operands (weights, per-tensor scales): the same passes on fresh temporaries,
        # which NumPy's small-allocation cache serves, instead of the scratch pool's lookup.
        # positive_normal: no sign to keep and E = e, so those passes are left out.
        bits = flat_x.view(uint)
        # the sign before out (which may be x) is written
        sign = None if positive_normal else np.bitwise_and(bits, sign_mask)
        magic = np.bitwise_and(bits, exponent_mask)
        if not positive_normal:
            np.maximum(magic, floor_bits, out=magic)
        magic += offset
        c = magic.view(dtype)
        np.add(flat_x, c, out=flat_out)
        flat_out -= c
        if sign is not None:
            flat_out.view(uint)[...] |= sign
        return out
    # Per-thread scratch that lives across calls: fresh temporaries of this size cost page
    # faults on every call (the training step's operands are quantised thousands of times).
    scratch_magic, scratch_sign = _buffers(min(flat_x.size, _IN_RANGE_CHUNK), np.dtype(uint), 2)
    for start in range(0, flat_x.size, _IN_RANGE_CHUNK):
        xs = flat_x[start:start + _IN_RANGE_CHUNK]
        dest = flat_out[start:start + _IN_RANGE_CHUNK]
        magic, sign = scratch_magic[: xs.size], scratch_sign[: xs.size]
        np.bitwise_and(xs.view(uint), sign_mask, out=sign)
        np.bitwise_and(xs.view(uint), exponent_mask, out=magic)
        np.maximum(magic, floor_bits, out=magic)
        magic += offset                     # c = 1.5 * 2**(E + W - M), mantissa bits zero
        c = magic.view(dtype)
        np.add(xs, c, out=dest)
        dest -= c
        dest.view(uint)[...] |= sign        # -0 for negative inputs that round to zero
    return out


@per_format
def _in_range_constants(fmt: Format) -> dict:
    """{dtype: (uint, floor bits, offset, exponent mask, sign mask)} of the nearest-even
    kernel for ``fmt`` (cached: Format.emin is a computed property)."""
    constants = {}
    for dtype, (uint, width, bias, exponent_mask, sign_mask) in _IN_RANGE_LAYOUTS.items():
        floor_bits = uint((fmt.emin + bias) << width)
        offset = uint(((width - fmt.man_bits) << width) | (1 << (width - 1)))  # + W - M, 1.5
        constants[dtype] = (uint, floor_bits, offset, exponent_mask, sign_mask)
    return constants


_IN_RANGE_SMALL = 4096  # up to here the kernel allocates its two temporaries
_IN_RANGE_CHUNK = 1 << 16  # a chunk and its scratch stay in the L2 cache
_IN_RANGE_LAYOUTS = {  # dtype: (uint, fraction bits W, bias, exponent mask, sign mask)
    np.dtype(np.float32): (np.uint32, 23, 127, _EXPONENT32, _SIGN32),
    np.dtype(np.float64): (np.uint64, 52, 1023, np.uint64(0x7FF0000000000000),
                           np.uint64(0x8000000000000000)),
}


@per_format
def stochastic_kernel_applies(fmt: Format) -> bool:
    """Whether :func:`round_in_range_stochastic` is proved for ``fmt``: the in-range
    conditions, and emin <= M (so scaling by 2**(M - emin) is a scaling up)."""
    return in_range_kernel_applies(fmt) and fmt.emin <= fmt.man_bits


_ABS64, _SIGN64 = np.uint64(0x7FFFFFFFFFFFFFFF), np.uint64(0x8000000000000000)


def round_in_range_stochastic(x: np.ndarray, fmt: Format, rng: np.random.Generator,
                              chunk: int, out: np.ndarray | None = None) -> np.ndarray:
    """float64 ``x`` stochastically rounded in ``fmt``, for finite x with ``|x| <= fmt.max``
    (the quantisation core clips first), into ``out`` (a new float64 array by default;
    ``out=x`` rounds in place): equal to ``floatlab.round(x, fmt, "stochastic", rng=rng,
    saturate=True)`` with the same random draws, in chunks of ``chunk`` elements as round()
    makes them.

    The general path, per chunk, rounds every element's bit pattern with one uniform draw per
    element, ``u = rng.random(n)``, then re-rounds the inputs below ``2**emin`` ("tiny") on
    the subnormal grid: with the same draws when more than a quarter are tiny, otherwise with
    ``count`` fresh draws taken in index order. Each decision is "round up iff u < f", with f
    the exact fraction of one quantum q that truncation discards (q = 2**(E - M), E =
    max(binade, emin)); the result is (floor(|x| / q) + up) * q with x's sign. Here the draws
    are laid out the same way (the tiny inputs' entries replaced by the fresh draws), and:

    1. E is the binade of max(|x|, 2**emin) (a float64 maximum, exact; binades are monotone),
       read from its exponent field; 1 / q = 2**(M - E) is the normal float64 whose field is
       2046 + M - (E + 1023) (its biased exponent 1023 + M - E lies in [1, 2046] for these
       small formats: one integer subtraction from the field of 2**E), and y = |x| / q =
       |x| * 2**(M - E) is exact: a scaling by a power of two that neither overflows
       (y < 2**(M + 1)) nor loses bits (below 2**emin, E = emin <= M scales up; above, y >=
       2**M is normal).
    2. floor(y) is exact, and f = y - floor(y) is exact (0 when y < 1 gives f = y; otherwise
       floor(y) >= y / 2: Sterbenz), so it equals the general path's discarded fraction
       (``rem / 2**shift`` or ``|y| - trunc(|y|)``), and ``u < f`` is the same decision.
    3. (floor(y) + up) * 2**(E - M) is exact (a scaling by a power of two with a result at
       most max; 2**(E - M) is normal, its biased exponent 2046 - (1023 + M - E) in [1, 2045]:
       one integer subtraction from the bits of 2**(M - E)); ORing x's sign bit gives the
       signed result, -0 included. ``up`` is written as 1.0 / 0.0 (the comparison's result
       stored as float64), so the addition is floor(y) + 1 or + 0, as the general path's.

    The draws of a chunk are all taken first; the arithmetic then runs on pieces of
    ``_STOCHASTIC_SUB`` elements, whose scratch is reused across calls (element-wise: the same
    values). The sign is ORed back from x's bits, -0 included.

    Tested equal to the general path (tests/test_rounding_fast_paths.py).
    """
    if out is None:
        out = np.empty(x.shape, np.float64)
    if not out.flags.c_contiguous or out.shape != x.shape:  # pragma: no cover - internal
        raise RuntimeError("out must be a C-contiguous array of x's shape")
    flat_x, flat_out = x.reshape(-1), out.reshape(-1)
    tiny_below = np.uint64(((fmt.emin + 1023) << 52) - 1)  # bits of 2**emin, minus 1
    smallest_normal = math.ldexp(1.0, fmt.emin)
    top = np.uint64((2046 + fmt.man_bits) << 52)
    n = min(flat_x.size, chunk)
    (field_all,) = _buffers(n, _UINT64, 1)  # scratch (see round_in_range_nearest_even)
    (draws_all,) = _buffers(n, _FLOAT64, 1)
    m = min(n, _STOCHASTIC_SUB)
    inv_buf, sign_buf = _buffers_sub(m, _UINT64, 2)
    kept_buf, up_buf = _buffers_sub(m, _FLOAT64, 2)
    for start in range(0, flat_x.size, chunk):
        xs = flat_x[start:start + chunk]
        dest = flat_out[start:start + chunk]
        size = xs.size
        draws, field = draws_all[:size], field_all[:size]
        rng.random(out=draws)
        np.bitwise_and(xs.view(np.uint64), _ABS64, out=field)
        field -= np.uint64(1)
        tiny = field < tiny_below  # 0 < |x| < 2**emin (0 wraps around)
        count = int(np.count_nonzero(tiny))
        if 0 < count <= size // 4:  # few tiny inputs: they take fresh draws, in order
            draws[np.flatnonzero(tiny)] = rng.random(count)  # (an index array scatters
            #                                                    faster than the mask)
        # The arithmetic per cache-sized piece of the chunk (the draws are all taken above).
        for sub in range(0, size, _STOCHASTIC_SUB):
            xb = xs[sub:sub + _STOCHASTIC_SUB]
            db = dest[sub:sub + _STOCHASTIC_SUB]
            k = xb.size
            inv, sign, kept, up = inv_buf[:k], sign_buf[:k], kept_buf[:k], up_buf[:k]
            np.bitwise_and(xb.view(np.uint64), _SIGN64, out=sign)
            mag = np.abs(xb, out=db)
            # bits of 2**E, E = max(binade, emin): the binade of max(|x|, 2**emin) (monotone)
            np.maximum(mag, smallest_normal, out=kept)
            np.bitwise_and(kept.view(np.uint64), _EXPONENT64, out=inv)
            np.subtract(top, inv, out=inv)  # bits of 2**(M - E): (2046 + M - (E + 1023)) << 52
            inv_q = inv.view(np.float64)
            y = np.multiply(mag, inv_q, out=db)
            np.floor(y, out=kept)
            y -= kept
            # up as 1.0 / 0.0 (the same decision; adding a float array is cheaper than a bool)
            np.less(draws[sub:sub + _STOCHASTIC_SUB], y, out=up, casting="unsafe")
            np.add(kept, up, out=kept)
            # times 2**(E - M) (bits (2046 << 52) - bits of 2**(M - E): both normal) instead of
            # dividing by 2**(M - E): the same exact scaling, cheaper
            np.subtract(_Q_OF_INV, inv, out=inv)
            np.multiply(kept, inv_q, out=db)
            db.view(np.uint64)[...] |= sign
    return out


_STOCHASTIC_SUB = 1 << 15  # pieces of the stochastic kernel's arithmetic (8K measured slower)
_Q_OF_INV = np.uint64(2046 << 52)  # bits of 2**(E - M) = _Q_OF_INV - bits of 2**(M - E)
_EXPONENT64 = np.uint64(0x7FF0000000000000)
_sub_scratch = threading.local()


def _buffers_sub(n: int, dtype: np.dtype, count: int) -> list[np.ndarray]:
    """Small per-thread scratch of the stochastic kernel's pieces (apart from the chunk-sized
    pool of :func:`floatlab._rounding_kernels._buffers`, which the same call also holds)."""
    pool = getattr(_sub_scratch, "pool", None)
    if pool is None:
        pool = _sub_scratch.pool = {}
    bufs = pool.get(dtype)
    if bufs is None or len(bufs) < count or bufs[0].size < n:
        bufs = pool[dtype] = [np.empty(max(n, _STOCHASTIC_SUB), dtype) for _ in range(count)]
    return [b[:n] for b in bufs[:count]]


_UINT32, _UINT64, _FLOAT64 = np.dtype(np.uint32), np.dtype(np.uint64), np.dtype(np.float64)
