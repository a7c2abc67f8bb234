"""The elements of a block-scaled scheme: scaling, clipping, rounding, codes and values.

:func:`_round_elements` rounds scaled values to the element format (floatlab.round, the
proved in-range kernels, codebook lookup, fixed point), saturating at its max;
:func:`_clip_blocks` clips only the blocks that need it; codes come from values by a table.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from floatlab._rounding_fast import per_format
from floatlab.formats import Format
from floatlab.quant.codebook import Codebook, gather
from floatlab.quant.fixed import FixedPoint
from floatlab.quant.scheme import Scheme, element_max
from floatlab.rounding import overflow_threshold, round_finite_in_range
from floatlab.rounding import round as round_to_format


def random_lanes(rng: np.random.Generator, n: int, bits: int) -> np.ndarray:
    """n random ``bits``-bit integers (uint8 lanes for up to 8 bits, uint16 up to 16), the
    hardware's random bits: the generator's 64-bit words ``rng.integers(0, 2**64,
    dtype=uint64)`` split into little-endian lanes (eight bytes or four halves per word; the
    same bytes as 32-bit words taken low half first, as Transformer Engine splits one 32-bit
    Philox word over four NVFP4 values), each lane's top ``bits`` bits.

    The words of PCG64 (``default_rng``'s generator) and the other generators whose raw
    output is their 64-bit output come from ``bit_generator.random_raw``: numpy draws
    ``integers`` over the full uint64 range as one ``next_uint64`` per value (the range
    2**64 - 1 has no rejection: numpy/random/src/distributions/distributions.c,
    random_bounded_uint64_fill), and ``random_raw`` is one ``next_raw`` per value, the same
    function for these generators (their ``_bitgen.next_raw = &..._uint64``); the same words
    and end state (tested), without ``integers``' argument handling, which costs ~25 us a
    call when its code is out of the cache (a training step). MT19937's raw output is 32-bit:
    it keeps ``integers``.

    >>> random_lanes(np.random.default_rng(0), 6, 8).tolist()
    [95, 130, 194, 217, 207, 235]
    """
    lane = np.dtype("<u1") if bits <= 8 else np.dtype("<u2")
    count = -(-n * lane.itemsize // 8)
    bit_generator = rng.bit_generator
    if _RAW_WORDS and type(bit_generator) in _RAW_IS_UINT64:
        words = bit_generator.random_raw(count)
    else:
        words = rng.integers(0, 2**64, count, dtype=np.uint64)
    lanes = words.astype("<u8", copy=False).view(lane)[:n]
    shift = 8 * lane.itemsize - bits
    return lanes >> lane.type(shift) if shift else lanes


_RAW_IS_UINT64 = (np.random.PCG64, np.random.PCG64DXSM, np.random.Philox, np.random.SFC64)
_RAW_WORDS = True  # switch for the tests, which check the raw words equal to integers'


def round_random_bits(q: np.ndarray, fmt: Format, bits: int, rng: np.random.Generator, *,
                      saturate: bool = False) -> np.ndarray:
    """Stochastic rounding of finite ``q`` (``|q| <= fmt.max``: the core clips first; with
    ``saturate=True`` larger |q| give +-max, the values clipping first gives) with
    ``bits`` random bits per value, as the hardware does it (PTX ``cvt.rs``): the k = ``bits``
    random bits r (:func:`random_lanes`, one per value in C order) are added to the top k
    discarded bits of |q| and a carry rounds up. With Q the element's quantum at |q| (the
    subnormal quantum below 2**emin) and f = |q| / Q - floor(|q| / Q), it rounds up iff
    ``r < floor(f * 2**k)``: probability ``floor(f * 2**k) / 2**k``, as
    ``floatlab.round(..., random_bits=k)``, drawn from k-bit integers. Returns a new array
    of q's dtype (the results are values of fmt, exact in float32 when fmt fits), -0 kept.

    float32 q with M + k <= 11 (NVFP4's E2M1 with 8 bits) takes
    :func:`_round_random_bits_carry` (the hardware's own carry on the bit pattern); the rest
    this float64 definition (float32 q widens exactly; tests check the two equal):
    ``n = floor(|q| / Q * 2**k)`` (exact: a power-of-two scaling of a float64 below
    2**(M + 1 + k)), ``lo = floor(n / 2**k)``, up iff ``r < n - lo * 2**k``, result
    ``(lo + up) * Q`` (at most max: up needs |q| off the grid, so below max).
    """
    r = random_lanes(rng, q.size, bits).reshape(q.shape)
    if q.dtype == np.float32 and _CARRY_KERNEL and _random_bits_carry_ok(fmt, bits):
        return _round_random_bits_carry(q, fmt, bits, r, saturate)
    if saturate:
        q = np.clip(q, -fmt.max, fmt.max)
    a = np.abs(q).astype(np.float64)
    e = np.frexp(np.maximum(a, 2.0**fmt.emin))[1] - 1      # max(binade, emin)
    quantum = np.ldexp(1.0, e - fmt.man_bits)
    n = np.floor(a / quantum * 2.0**bits)
    lo = np.floor(n / 2.0**bits)
    out = (lo + (r < n - lo * 2.0**bits)) * quantum
    return np.copysign(out, q).astype(q.dtype)


@per_format
def _carry_constants(fmt: Format) -> tuple[np.uint32, np.uint32]:
    """(kept-bits mask, bits of 2**emin) of :func:`_round_random_bits_carry` (cached:
    Format.emin is a computed property)."""
    return (np.uint32(0x7FFFFFFF & ~((1 << (23 - fmt.man_bits)) - 1)),
            np.uint32((fmt.emin + 127) << 23))


def _random_bits_carry_ok(fmt: Format, bits: int) -> bool:
    """The carry kernel's conditions: the format fits float32, 2**emin is a normal float32
    (the offset of the subnormal range), and M + k <= 11 (see the proof's case 2)."""
    return _format_fits_float32(fmt) and fmt.emin >= -126 and fmt.man_bits + bits <= 11


def _round_random_bits_carry(q: np.ndarray, fmt: Format, bits: int, r: np.ndarray,
                             saturate: bool = False) -> np.ndarray:
    """:func:`round_random_bits` for float32 q as the hardware does it: the complement of the
    k random bits added below the kept bits of the float32 pattern, its carry rounding up,
    then the discarded bits cleared: integer passes on the patterns, no float / integer
    conversions, no copysign.

    Proof. W = 23 (float32's fraction bits), M the format's mantissa bits, k = ``bits``,
    D = W - M - k (>= 12 under :func:`_random_bits_carry_ok`), Q the element quantum at |q|,
    j = floor(f * 2**k) with f the fraction of |q| / Q: the definition rounds up iff r < j.
    t is the pattern of |q| with its D lowest bits cleared (a truncation: of a normal float32
    in binade e, at 2**(e - M - k); of a float32 subnormal, at 2**(-126 - M - k)); c =
    (2**k - 1 - r) << D; K the pattern's bits from W - M up (exponent and kept mantissa).

    1. |q| >= 2**emin (binade e >= emin, Q = 2**(e - M)): t's k bits below K are j, the
       bits below them were cleared. t + c carries into K iff j + 2**k - 1 - r >= 2**k, iff
       r < j: the rule. Clearing the W - M low bits leaves K or K + 1, and consecutive K are
       consecutive points of the element grid (within a binade the next kept mantissa; from a
       binade's last point the carry steps the exponent, 2**e (2 - 2**-M) + 2**(e - M) =
       2**(e + 1)): the result is (floor(|q| / Q) + up) * Q, finite (up needs |q| off the
       grid, so below max). t >= 2**e >= 2**emin, so the offset of case 2 is 0 here.
    2. |q| < 2**emin (Q = 2**(emin - M), the subnormal quantum; t < 2**emin too): t's
       truncation grid divides Q * 2**-k (emin >= -126), so t keeps floor(|q| / Q * 2**k).
       y = fl32(t + 2**emin) lies in binade emin; when the sum is exact (t's grid at least
       2**(emin - W)) y's kept and next k bits are floor(t / Q) and j, and case 1's steps on
       y give 2**emin + (floor(|q| / Q) + up) * Q, from which subtracting 2**emin is exact
       (Sterbenz). Otherwise |q| < 2**(emin - W + M + k) <= 2**(emin - M - k - 1) (as
       M + k <= 11): j = 0 and floor(|q| / Q) = 0, so the definition gives 0; and y, rounded
       monotonically, stays below 2**emin + Q * 2**-k (a float32), so its bits give 0 too.
    3. q's sign bit ORed in gives -0 for negative q rounded to 0, as copysign.
    4. ``saturate``: |q| above max (finite) is in case 1 (max >= 2**emin), where the steps
       give at least the grid point below |q| on the grid extended past max (its pattern, or
       beyond float32's top binade the pattern of inf, which compares larger too), so at
       least max; the minimum with max's pattern gives max, what clipping first gives (max is
       a grid point: j = 0, never up). For |q| <= max the result is at most max (up needs
       |q| below a grid point <= max), so the minimum changes nothing.

    Tests compare it with the float64 definition and exact rationals on every grid point,
    midpoint, quarter point and their float32 neighbours, subnormals, signed zeros and max,
    for every r (tests/test_quant_nvfp4_fast.py); ``_CARRY_KERNEL = False`` switches it off.
    """
    keep_mask, two_emin = _carry_constants(fmt)
    shift = 23 - fmt.man_bits - bits                                      # D
    pattern = q.view(np.uint32)
    t = np.bitwise_and(pattern, np.uint32(0x7FFFFFFF & ~((1 << shift) - 1)))
    offset = np.less(t, two_emin).astype(np.float32)                     # case 2: 1 ...
    if two_emin != np.uint32(0x3F800000):
        offset *= two_emin.view(np.float32)                               # ... * 2**emin
    y = t.view(np.float32)
    y += offset
    carry = np.bitwise_xor(r, r.dtype.type((1 << bits) - 1)).astype(np.uint32)
    carry <<= np.uint32(shift)                                            # c
    t += carry
    t &= keep_mask
    y -= offset
    if saturate:
        np.minimum(t, np.float32(fmt.max).view(np.uint32), out=t)
    sign = np.bitwise_and(pattern, np.uint32(0x80000000), out=carry)  # carry's array, free
    t |= sign
    return y


_CARRY_KERNEL = True  # switch for the tests, which check the carry kernel against the others


def _round_elements(q: np.ndarray, element: Any, rounding: str, rng: Any,
                    in_range: bool = False, random_bits: int | None = None):
    """(elements, codes or None) of the scaled values q, saturating at the element's max.

    q is clipped to [-max, max] first: for finite q, rounding the clipped value with
    ``saturate=True`` gives the same result in every mode (anything beyond max saturates to
    max, and max rounds to itself), and it keeps floatlab.round on its fast path.
    ``in_range``: the caller knows q is finite and clipped, so nearest-even and stochastic
    rounding into Format elements take :func:`floatlab.rounding.round_finite_in_range` (the
    same values and random draws, fewer passes).
    Codebooks return their codes too (they come from the same table lookup). Fixed-point
    elements saturate symmetrically at +-max, as symmetric absmax quantisation does: the most
    negative two's-complement code (-2**(w-1) quanta) is never produced.
    """
    if random_bits is not None:  # the Scheme checked: stochastic, a Format element
        if not in_range:
            raise ValueError("a block's effective scale underflowed to 0 (a float32 subnormal "
                             "global scale), so its values cannot be rounded with random_bits;"
                             " scale the tensor first")
        return round_random_bits(q, element, random_bits, rng), None
    if in_range and rounding in ("nearest_even", "stochastic") and isinstance(element, Format):
        return round_finite_in_range(q, element, in_place=True, rounding=rounding,
                                     rng=rng), None  # q is our scratch
    out_dtype = q.dtype if q.dtype == np.float32 and _float32_ok(element) else np.float64
    if isinstance(element, Codebook):
        idx = element.indices(q, rounding=rounding, rng=rng, finite=True)
        table = element._values32 if out_dtype == np.float32 else element._values
        return np.take(table, idx, mode="clip"), element.codes_of_indices(idx)
    if isinstance(element, Format):
        return round_to_format(q, element, rounding=rounding, saturate=True, rng=rng,
                               dtype=out_dtype), None
    return element.round(q, rounding=rounding, rng=rng, dtype=out_dtype), None


def _clip_blocks(q: np.ndarray, block_peak: np.ndarray, element: Any, count: bool,
                 nearest_even: bool = False, peak_max: float = np.nan) -> int:
    """Clip q to [-max, max] in place (not for codebooks, whose lookup saturates by itself);
    return how many elements exceeded max when ``count``.

    ``block_peak`` is each block's amax / scale in the working precision, the largest |q| of
    the block (division by a positive scale is monotone), so only the blocks whose peak
    exceeds max are touched. Clipping before rounding is the saturating rounding itself: for
    finite q, anything beyond max rounds (saturate=True) to max, as max does; it keeps
    floatlab.round on its fast path. Without counting, nearest-even rounding into a Format
    needs no clipping below the overflow threshold ``max + ulp(max) / 2`` (such values round
    to max or below either way): a float32 scale that puts a row's amax a hair above max
    (rowwise, per-tensor) then costs no clipping pass.
    """
    emax = element_max(element)
    limit = overflow_threshold(element) if nearest_even and not count and \
        isinstance(element, Format) else None
    # ``peak_max`` (the largest block peak, when the caller has it) settles the usual case,
    # nothing to clip, without a pass over the blocks.
    if peak_max <= emax or (limit is not None and peak_max < limit):
        return 0
    clip = not isinstance(element, Codebook)
    if q.size <= _CLIP_WHOLE_MAX and peak_max == peak_max:
        # A small q (weights, narrow layers) is clipped whole, without finding its blocks:
        # the other blocks hold no |q| above max when counting (their peaks are <= max), and
        # otherwise only values below the overflow threshold, which round to max either way.
        # minimum / maximum in place is np.clip's result, without its wrapper.
        n = int(np.count_nonzero(q > emax) + np.count_nonzero(q < -emax)) if count else 0
        if clip:
            np.maximum(np.minimum(q, emax, out=q), -emax, out=q)
        return n
    flagged = block_peak > emax if limit is None else block_peak >= limit
    if not flagged.any():
        return 0
    if q.ndim == 2 and np.count_nonzero(flagged) * 16 < flagged.size:  # few flagged rows
        rows = np.flatnonzero(flagged.reshape(-1))
        sub = q[rows]
        n = int(np.count_nonzero(np.abs(sub) > emax)) if count else 0
        if clip:
            q[rows] = np.clip(sub, -emax, emax)
        return n
    n = int(np.count_nonzero(q > emax) + np.count_nonzero(q < -emax)) if count else 0
    if clip:
        np.clip(q, -emax, emax, out=q)
    return n


_CLIP_WHOLE_MAX = 4096  # up to here clipping all of q costs less than finding its blocks
_FLOAT_TYPES = (np.float32, np.float64)


def _work_dtype(dtype: np.dtype, scheme: Scheme) -> type:
    """float32 for float32 inputs rounded to nearest, or stochastically with the hardware's
    random bits, into an element float32 holds (as the kernels do); float64 otherwise (exact
    stochastic and directed modes keep tiny quotients exact)."""
    if dtype == np.float32 and (scheme.rounding in ("nearest_even", "nearest_away")
                                or scheme.random_bits is not None) \
            and _float32_ok(scheme.element):
        return np.float32
    return np.float64


def _float32_ok(element: Any) -> bool:
    if isinstance(element, Format):
        return _format_fits_float32(element)
    return bool(element.float32_exact)


@per_format
def _format_fits_float32(element: Format) -> bool:
    """Cached: Format.emax is a computed property, and this runs on every quantisation."""
    return element.man_bits <= 23 and element.emax <= 127 and element.emin >= -126


@lru_cache(maxsize=64)
def _code_lut(element: Format):
    """(shift, table): codes of a Format's values from their float32 bits.

    Every value of a format with at most 7 mantissa bits that fits in float32 is a float32
    whose bits below ``23 - man_bits`` are zero (subnormals of the format are float32 normals
    with fewer significant bits), so ``bits >> (23 - man_bits)`` tells the values apart; the
    table maps that key to the code (NaN codes left out). Tests check it against
    floatlab.encode.
    """
    if not (_float32_ok(element) and element.man_bits <= 7 and element.bits <= 8):
        return None
    from floatlab.codec import decode

    shift = 23 - element.man_bits
    codes = np.arange(1 << element.bits)
    values = decode(codes, element)
    ok = ~np.isnan(values)
    keys = values[ok].astype(np.float32).view(np.uint32) >> np.uint32(shift)
    table = np.zeros(1 << (32 - shift), dtype=np.uint8)
    table[keys] = codes[ok]
    return np.uint32(shift), table


def _codes_of_values(values: np.ndarray, element: Any) -> np.ndarray:
    """Element codes of values already in the element format (see _code_lut)."""
    if isinstance(element, Format):
        lut = _code_lut(element)
        if lut is not None:
            shift, table = lut
            return gather(table, values.astype(np.float32, copy=False).view(np.uint32) >> shift)
        from floatlab.codec import _codes_of_values as encode_values

        return encode_values(np.asarray(values, dtype=np.float64), element)
    return element.codes_of_values(values)


@lru_cache(maxsize=64)
def _decode_table(element: Any, dtype: Any) -> np.ndarray:
    from floatlab.codec import decode

    if isinstance(element, Format):
        table = decode(np.arange(1 << element.bits), element)
    else:
        table = element.decode(np.arange(1 << element.bits)) if isinstance(element, FixedPoint) \
            else element._decode_table
    return np.asarray(table, dtype=dtype)


def _element_values(codes: np.ndarray, element: Any, dtype: Any) -> np.ndarray:
    if element.bits > 16:  # no table: decode (Formats: floatlab.decode, which has no method)
        if isinstance(element, Format):
            from floatlab.codec import decode

            return decode(codes, element).astype(dtype)
        return element.decode(codes).astype(dtype)
    return gather(_decode_table(element, np.dtype(dtype)), codes)


def _round_scaled(values: np.ndarray, scale: np.ndarray, amax: np.ndarray, element: Any,
                  rounding: str, rng: Any, *, multiply: bool = False, count: bool = False,
                  saturate: bool = True, finite: bool = True, random_bits: int | None = None):
    """The quantisation step every scheme shares: scale, clip, round.

    ``values`` (blocked, working precision) are scaled by their block's ``scale`` in the
    working precision, one IEEE rounding unless the scale is a power of two:

    * ``multiply=False`` (MX, NVFP4, DeepSeek, torchao, the :class:`Scheme` presets): ``scale``
      is the dequantisation multiplier, ``q = values / scale``;
    * ``multiply=True`` (Transformer Engine's per-tensor convention, :mod:`floatlab.quant.
      delayed`): ``scale`` is the quantisation multiplier ``fmax / amax``, ``q = values *
      scale`` (TE computes the product in float32, as the float32 working precision does here).

    Then q is clipped to the element's range where a block needs it (saturation, which rounding
    with ``saturate=True`` would do anyway; see :func:`_clip_blocks`) and rounded by
    :func:`_round_elements`. ``amax`` is each block's max |value| (broadcastable against
    ``values``): ``amax / scale`` (or ``* scale``) is the block's largest |q|, by monotonicity.
    ``saturate=False`` or ``finite=False`` (inputs that may hold NaN / inf) skip the clipping
    and round with floatlab.round's own overflow and special-value rules.

    Returns ``(elements, codes or None, clipped count, q before clipping)``; the last is None
    unless ``saturate=False`` or ``finite=False`` (callers that count overflows read it).
    """
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        q = values * scale if multiply else values / scale
        if not (saturate and finite):
            out_dtype = np.float32 if q.dtype == np.float32 and _float32_ok(element) \
                else np.float64
            return round_to_format(q, element, rounding=rounding, saturate=saturate, rng=rng,
                                   dtype=out_dtype), None, 0, q
        peak = amax * scale if multiply else amax / scale  # each block's largest |q|
    peak_max = float(peak.max())  # NaN when a zero scale made 0 / 0
    if peak_max != peak_max:
        # A zero effective scale (a float32-subnormal global scale times a block scale
        # underflows to 0: NVFP4 on a tensor of amax ~1e-42 with an all-zero block) divides the
        # block's zeros 0 / 0: their element is 0. (The NaN was refused as "the input holds
        # NaN", x holding none.) x is finite here, so 0 / 0 is the only NaN.
        with np.errstate(invalid="ignore"):
            q[np.isnan(q)] = 0.0
            peak = np.where(np.isnan(peak), 0.0, peak)
        peak_max = float(peak.max())
    clipped = _clip_blocks(q, peak, element, count=count,
                           nearest_even=rounding == "nearest_even", peak_max=peak_max)
    # Finite peaks: q is finite and, once clipped, within +-max (a zero scale, 0 / 0, is not).
    elements, codes = _round_elements(q, element, rounding, rng, peak_max < np.inf,
                                      random_bits)
    return elements, codes, clipped, None
