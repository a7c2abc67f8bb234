"""The rounding core: map real numbers to the nearest (or directed) values of any Format.

Everything in floatlab that rounds calls :func:`round`. It works on the *bits* of the input
(float64, or float32 when the input is float32 and the format fits), so it rounds once, from
the exact input, with no double rounding:

>>> import floatlab
>>> float(floatlab.round(1 + 2**-4 + 2**-30, "e4m3fn"))   # float64 -> E4M3FN directly
1.125
>>> float(floatlab.round(3.141, "fp16"))
3.140625

How it works, per element: split the input into an integer significand ``sig`` and exponent,
choose the target quantum ``2**q`` (the ulp of the target format at that magnitude, clamped at
the subnormal range), shift ``sig`` right by the number of discarded bits, and decide from the
discarded remainder whether to step up by one quantum. The remainder is an exact integer, so
ties and the sticky information are exact. Overflow is decided *after* rounding with an
unbounded exponent (E4M3FN: 464 -> 448, 465 -> overflow).

Fast paths, each proved identical to that general path (the proofs are in the docstrings, the
tests compare both on every edge; ``_FAST_PATHS = False`` switches them off): inputs at or
above the smallest normal keep a fixed number of discarded bits, so their bit pattern is
rounded at a fixed position; inputs below it lie on the uniform subnormal grid and are rounded
by exact float operations on ``x * 2**k`` (``floatlab._rounding_fast``); overflow and the
selection between the two are branch-free whole-array passes; float32 -> bfloat16 / tf32 is
the carry alone.

Modules: this one holds the entry point and the per-chunk driver; the significand and
bit-pattern kernels are ``floatlab._rounding_kernels``, overflow / FTZ / inf / NaN handling
``floatlab._rounding_specials``, the proved whole-array fast paths ``floatlab._rounding_fast``.

Conventions that differ between libraries (documented here, taught in ``explain``):

* Overflow of finite values gives inf where the format has inf, NaN for FN / FNUZ formats
  (as ml_dtypes and torch's c10 cast), and ``saturate=True`` gives +-max instead (as NVIDIA's
  ``__NV_SATFINITE`` conversion, used by torch's CUDA E4M3FN cast only when built with
  CUDA >= 13.2). Directed modes follow IEEE 754: toward_zero never makes inf from a finite
  value; ``up`` overflows only for positive values, ``down`` only for negative ones. ``odd``
  saturates (it is truncation with a sticky bit).
* Formats with neither inf nor NaN (the MX fp6 / fp4 formats) always saturate finite overflow
  (there is nothing else to produce). NaN input to them raises ValueError; +-inf raises unless
  ``saturate=True``.
* E8M0 (``float8_e8m0fnu``, p = 1) has no mantissa bit to make "even": floatlab rounds the
  integer significand, which is 1 (odd) in every binade, so ties go up (3 -> 4, as ml_dtypes and
  torch; gfloat picks 2). It has no zero and no sign: 0 and negative inputs become NaN with a
  RuntimeWarning; positive values below 2**-127 become 2**-127.
* FNUZ formats have no -0: negative zero and negative underflow give +0.
* Stochastic rounding rounds up past max with the usual probability; that overflows like
  round-to-nearest does (inf, NaN in FN/FNUZ formats) unless ``saturate=True``.
* Round to odd with p = 1 (E8M0) is truncation: every significand is odd (1).
* ``subnormals=False`` flushes results below the smallest normal to (signed) zero (FTZ), in
  every rounding mode, as hardware FTZ does: ``up`` can then give 0 for a tiny positive x.
  Likewise E8M0, which has no zero, clamps positive values below 2**-127 up to 2**-127 in every
  mode, ``down`` included.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal

import numpy as np

# The kernels and the edge passes live in their own modules (floatlab._rounding_kernels,
# floatlab._rounding_specials); the names other modules import from here (_F32, _F64,
# _bits_of, _fits_float32, ...) stay importable from floatlab.rounding.
from floatlab._interop import caller_type
from floatlab._rounding_fast import (
    in_range_kernel_applies,
    overflow_by_bits,
    per_format,
    round_in_range_nearest_even,
    round_in_range_stochastic,
    round_on_uniform_grid,
    select_bits,
    stochastic_kernel_applies,
    uniform_grid_exponent,
)
from floatlab._rounding_kernels import (
    _F32,
    _F64,
    _bits_of,
    _buffers,
    _check_random_bits,
    _fits_float32,
    _Layout,
    _LimitedRandomBits,
    _round_pattern,
    _round_pattern_nearest_even,
    _round_significand,
)
from floatlab._rounding_specials import _apply_overflow, _apply_specials, _flush_or_clamp_tiny
from floatlab._validate import as_float_array, check_flag, resolve_rng
from floatlab.formats import Format, get_format

__all__ = ["round", "ROUNDING_MODES", "as_float_array"]

RoundingMode = Literal[
    "nearest_even", "nearest_away", "toward_zero", "up", "down", "odd", "stochastic"
]
ROUNDING_MODES: tuple[str, ...] = (
    "nearest_even", "nearest_away", "toward_zero", "up", "down", "odd", "stochastic"
)
_MODE_SET = frozenset(ROUNDING_MODES)
_MODE_ALIASES = {
    "rne": "nearest_even", "nearest": "nearest_even", "round_to_nearest_even": "nearest_even",
    "rna": "nearest_away", "rtz": "toward_zero", "truncate": "toward_zero", "trunc": "toward_zero",
    "rtp": "up", "ceil": "up", "toward_positive": "up",
    "rtn": "down", "floor": "down", "toward_negative": "down",
    "sr": "stochastic", "rto": "odd",
    "rn": "nearest_even", "rz": "toward_zero", "ru": "up", "rd": "down",  # MPFR / CUDA names
}


# --------------------------------------------------------------------------- input checking

def _resolve_mode(rounding: str) -> str:
    if not isinstance(rounding, str):
        raise TypeError(
            f"rounding must be one string such as 'nearest_even', got {rounding!r} "
            f"({type(rounding).__name__}); round once per mode to compare modes"
        )
    if rounding in _MODE_SET:  # the common case, without string munging
        return rounding
    key = rounding.strip().lower().replace("-", "_")
    key = _MODE_ALIASES.get(key, key)
    if key not in ROUNDING_MODES:
        raise ValueError(
            f"unknown rounding mode {rounding!r}; use one of {', '.join(ROUNDING_MODES)}"
        )
    return key


# --------------------------------------------------------------------------- the core

def round(  # noqa: A001 - the name users expect (inside floatlab, import it under another name)
    x: Any,
    fmt: str | Format | Any,
    rounding: RoundingMode | str = "nearest_even",
    saturate: bool = False,
    subnormals: bool = True,
    rng: np.random.Generator | int | None = None,
    dtype: Any = None,
    random_bits: int | None = None,
) -> np.ndarray:
    """Round ``x`` to the values of ``fmt``; return them as a float64 array (0-d for scalars).

    Parameters
    ----------
    x : number, list or array (float64/32/16, ml_dtypes floats, ints). Never modified.
    fmt : a format name ("fp16", "bf16", "e4m3fn", ...), a :class:`Format` or a dtype.
    rounding : "nearest_even" (default), "nearest_away", "toward_zero", "up", "down", "odd"
        or "stochastic" (probability of rounding up = distance from the lower neighbour / ulp).
    saturate : overflow gives +-max instead of inf / NaN (a bool; strings are refused).
    subnormals : False flushes results below the smallest normal to zero (FTZ) (a bool).
    rng : a ``numpy.random.Generator`` or a non-negative int seed, for stochastic rounding;
        with any other mode it is ignored, with a UserWarning.
    dtype : output dtype, float64 (default) or float32 (allowed when the format fits in it).
    random_bits : stochastic rounding with k random bits, as hardware does it (PTX ``cvt.rs``):
        the probability of rounding up is the distance fraction truncated to a multiple of
        2**-k, so a remainder below 2**-k of an ulp never rounds up (a bias toward zero).
        None (default) is exact stochastic rounding.

    >>> import floatlab
    >>> floatlab.round([464.0, 465.0], "float8_e4m3fn")
    array([448.,  nan])
    >>> floatlab.round([464.0, 465.0], "float8_e4m3fn", saturate=True)
    array([448., 448.])
    >>> floatlab.round(2.0**-25, "fp16"), floatlab.round(2.0**-25, "fp16", rounding="up")
    (array(0.), array(5.96046448e-08))
    """
    back = caller_type(x)  # torch in, torch out
    if getattr(fmt, "is_element_format", False):  # FixedPoint / Codebook (floatlab.quant)
        # The same checks as for a Format ('no' was a truthy saturate, random_bits was dropped
        # silently), and an array back (a codebook gave a numpy scalar, even for 0-d input).
        _resolve_mode(rounding)
        check_flag(saturate, "saturate")
        check_flag(subnormals, "subnormals")
        _check_out_dtype(dtype)
        if random_bits is not None:
            raise ValueError(f"random_bits={random_bits!r}: {type(fmt).__name__} rounds "
                             "without it; drop random_bits, or round to a floatlab format")
        return back(np.asarray(fmt.round(x, rounding=rounding, saturate=saturate,
                                          subnormals=subnormals, rng=rng, dtype=dtype)))
    fmt = get_format(fmt)
    mode = _resolve_mode(rounding)
    saturate = check_flag(saturate, "saturate")
    subnormals = check_flag(subnormals, "subnormals")
    rng = resolve_rng(rng, mode == "stochastic", mode)
    out_dtype = _resolve_out_dtype(dtype, fmt)
    arr = as_float_array(x)
    ftz = not (subnormals and fmt.subnormals)

    # With FTZ, inputs just below 2**emin must be rounded on their own (finer) binade's grid;
    # when the format's emin is float32's, those inputs are float32 subnormals, so use float64.
    f32_ok = _fits_float32(fmt) and not (ftz and fmt.emin == _F32.emin)
    if ftz and fmt.emin == _F64.emin and fmt.man_bits < _F64.man_bits:
        raise ValueError(
            f"subnormals=False is not supported for {fmt.name}: its normal range starts at "
            "float64's (emin = -1022), so inputs just below it are float64 subnormals that "
            "floatlab cannot round on their own grid; use subnormals=True"
        )
    layout = _F32 if arr.dtype == np.float32 and f32_ok else _F64
    work = arr.astype(layout.dtype, copy=False).reshape(-1)
    if random_bits is not None:  # hardware SR: the round-up probability kept to k bits
        if mode != "stochastic":
            raise ValueError(f"random_bits={random_bits!r} applies to rounding='stochastic' "
                             f"only; drop it for rounding={rounding!r}")
        rng = _LimitedRandomBits(rng, _check_random_bits(random_bits))
    out = np.empty(work.shape, dtype=layout.dtype)
    if _FAST_PATHS and layout is _F32 and mode == "nearest_even" and not saturate and not ftz \
            and _carry_is_the_whole_rounding(fmt):
        _round_float32_carry_only(work, fmt, out)
        return back(out.reshape(arr.shape).astype(out_dtype, copy=False))
    # Chunks: each of the ~20 element-wise passes then works on memory that is already in
    # cache and reused, instead of faulting in a fresh full-size temporary.
    # Stochastic rounding keeps the chunk size its random stream was defined with (the draw
    # order follows the chunks); the deterministic modes take larger chunks, which pay numpy's
    # per-call overhead (~50 calls per chunk) less often.
    chunk = _CHUNK if mode == "stochastic" or not _FAST_PATHS else _DETERMINISTIC_CHUNK
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for start in range(0, work.size, chunk):
            piece = slice(start, start + chunk)
            _round_bits(work[piece], fmt, mode, saturate, ftz, rng, layout, out[piece])
    return back(out.reshape(arr.shape).astype(out_dtype, copy=False))


def round_finite_in_range(x: np.ndarray, fmt: Format, *, in_place: bool = False,
                          rounding: str = "nearest_even",
                          rng: np.random.Generator | None = None,
                          positive_normal: bool = False) -> np.ndarray:
    """``round(x, fmt, rounding, saturate=True, rng=rng, dtype=x.dtype)`` for an array the
    caller knows to be finite and within range: below the overflow threshold ``max +
    ulp(max) / 2`` (:func:`overflow_threshold`) for "nearest_even", at most ``max`` for
    "stochastic" (``rng`` a Generator). The quantisation core clips the blocks that need it,
    so this skips round()'s checks and its overflow / special passes.

    Proved kernels (:mod:`floatlab._rounding_fast`): float32 / float64 nearest-even into the
    FP8 / FP6 / FP4 element formats (seven passes; into ``x`` itself with ``in_place=True``, a
    C-contiguous scratch array the caller owns), and float64 stochastic rounding with the
    same random draws as round() (in place too). Everything else, and ``_FAST_PATHS =
    False``, goes through :func:`round` (a new array). ``positive_normal=True``: the caller
    also knows every x is positive and at least the smallest normal (clamped block scales);
    the nearest-even kernel then skips the passes that change nothing for them.

    >>> import numpy as np
    >>> round_finite_in_range(np.array([0.3, -448.0, -1e-9], np.float32), get_format("e4m3fn"))
    array([ 3.125e-01, -4.480e+02, -0.000e+00], dtype=float32)
    """
    if rounding == "stochastic":
        if _FAST_PATHS and x.dtype == _FLOAT64 and stochastic_kernel_applies(fmt):
            in_place = in_place and x.flags.c_contiguous and x.flags.writeable
            return round_in_range_stochastic(x, fmt, rng, _CHUNK, x if in_place else None)
    elif rounding != "nearest_even":
        raise ValueError(f"round_finite_in_range rounds to nearest even or stochastically, "
                         f"not {rounding!r}")
    elif _FAST_PATHS and x.dtype in (_FLOAT32, _FLOAT64) and in_range_kernel_applies(fmt):
        in_place = in_place and x.flags.c_contiguous and x.flags.writeable
        return round_in_range_nearest_even(x, fmt, x if in_place else None,
                                           positive_normal=positive_normal)
    dtype = x.dtype if x.dtype == _FLOAT32 and _fits_float32(fmt) else _FLOAT64
    return round(x, fmt, rounding=rounding, saturate=True, rng=rng, dtype=dtype)


@per_format
def overflow_threshold(fmt: Format) -> float:
    """``max + ulp(max) / 2``: finite values below it round to nearest (either way) without
    overflow; at it, the tie goes to the even neighbour (E4M3FN: 464 -> 448)."""
    return fmt.max + 2.0 ** (fmt.emax - fmt.man_bits - 1)


_CHUNK = 1 << 17
_DETERMINISTIC_CHUNK = 1 << 19

# Switch for the tests, which check every fast path equal to the general one.
_FAST_PATHS = True
_FAST_CHUNK = 1 << 18  # fewer, larger passes: this path makes no temporaries


@lru_cache(maxsize=256)
def _carry_is_the_whole_rounding(fmt: Format) -> bool:
    """Whether round-to-nearest-even from float32 into ``fmt`` is the bit-pattern rounding
    alone ("add, mask"), with NaN inputs as the only exception (bfloat16, tf32, e8mX).

    Proof, for a signed IEEE format with float32's exponent field (8 bits, bias 127, so the
    same emin and emax), subnormals and inf: (1) Inputs and results share float32's layout,
    subnormals included (the format's subnormal quantum 2**(-126 - M) is a whole number of
    float32 subnormal steps), and within that layout the magnitude pattern is linear in the
    value within a binade with carries stepping into the next binade: rounding the pattern at
    bit 23 - M is rounding the value (ties to even: the kept part's lowest bit). (2) Above
    max (all ones, odd significand) the carry produces exponent 255 with mantissa 0, inf, at
    exactly the IEEE overflow threshold max + ulp/2 (a tie to the even inf); inf inputs have
    no low bits and stay inf. (3) Magnitudes never carry into the sign bit unless the input is
    a NaN. So the general path's overflow / special / FTZ passes change nothing, except for
    NaN inputs, whose chunks take the general path. Tested equal on every midpoint +-1 ulp,
    every exponent, specials and random patterns (test_rounding_fast_paths.py).
    """
    return (fmt.exp_bits == 8 and fmt.bias == 127 and fmt.special == "ieee" and fmt.signed
            and fmt.has_zero and fmt.subnormals and 1 <= fmt.man_bits <= 23)


def _round_float32_carry_only(work: np.ndarray, fmt: Format, out: np.ndarray) -> None:
    """Round float32 ``work`` into ``out`` by the bit pattern alone (see the proof above)."""
    bits, out_bits = work.view(np.uint32), out.view(np.uint32)
    shift = _F32.man_bits - fmt.man_bits
    for start in range(0, work.size, _FAST_CHUNK):
        piece = slice(start, start + _FAST_CHUNK)
        _round_pattern_nearest_even(bits[piece], shift, out_bits[piece])
        if np.isnan(np.max(work[piece])):  # max propagates NaN: one read-only pass
            with np.errstate(over="ignore", invalid="ignore"):
                _round_bits(work[piece], fmt, "nearest_even", False, False, None, _F32,
                            out[piece])


_FLOAT64, _FLOAT32 = np.dtype(np.float64), np.dtype(np.float32)
# _round_bits re-rounds the inputs above max on their own in chunks at least this long when
# they are at most 1/64 of the chunk (measured with 1/200 of them above max: 16384 values
# 74 us against 81 us; at 4096, 42 us against 34 us, the whole-chunk passes cost less).
_FEW_BIG_MIN_SIZE = 16384


def _check_out_dtype(dtype: Any) -> np.dtype:
    """float64 (for None) or float32, from anything numpy reads as a dtype."""
    if dtype is None:
        return _FLOAT64
    try:
        out = np.dtype(dtype)
    except (TypeError, ValueError, SyntaxError):  # numpy's own message names no argument
        raise TypeError(
            f"dtype must be float64 or float32 (np.float64, np.float32, 'float32' or None), "
            f"got {dtype!r} ({type(dtype).__name__})"
        ) from None
    if out not in (np.dtype(np.float64), np.dtype(np.float32)):
        raise TypeError(f"dtype must be float64 or float32, got {out}")
    return out


def _resolve_out_dtype(dtype: Any, fmt: Format) -> np.dtype:
    out = _check_out_dtype(dtype)
    if out == np.float32 and not _fits_float32(fmt):
        raise ValueError(
            f"{fmt.name} values do not all fit in float32; use dtype=np.float64 (the default)"
        )
    return out


def _round_bits(
    work: np.ndarray,
    fmt: Format,
    mode: str,
    saturate: bool,
    ftz: bool,
    rng: np.random.Generator | None,
    L: _Layout,
    dest: np.ndarray,
) -> None:
    """Round one 1-D chunk ``work`` into ``dest`` (same dtype and length)."""
    uint = L.uint.type
    bits = work.view(L.uint)
    mag = bits & L.abs_mask
    sign_bit = uint(1 << (L.width - 1))
    out_bits = dest.view(L.uint)
    directed = mode in ("up", "down")
    negative = (bits & sign_bit) != 0 if directed else None
    # Every input at or above the format's smallest normal keeps the same number of bits
    # (L.man_bits - M), so rounding its bit pattern at a fixed position is exact: a carry out
    # of the mantissa steps correctly into the next binade (or to inf). Nonzero inputs below
    # 2**emin need the subnormal quantum (or FTZ) and take the significand path. p = 1
    # formats always do: their last kept pattern bit is an exponent bit, not the parity of the
    # significand that the documented tie rule reads.
    count, tiny = 0, None
    if fmt.man_bits > 0 and (fmt.emin > L.emin or ftz):
        # 0 < mag < 2**emin in one unsigned compare: zero wraps around to the largest value.
        tiny = (mag - uint(1)) < _bits_of(fmt.normal_threshold, L) - uint(1)
        count = np.count_nonzero(tiny)
    mostly_tiny = count > mag.size // 4  # (unscaled gradients, data spread over many binades)
    grid_k = _uniform_grid_k(fmt, L, ftz) if _FAST_PATHS and count else None
    if fmt.man_bits == 0 or (mostly_tiny and grid_k is None):
        rounded = _round_significand(mag, fmt, mode, negative, ftz, rng, L)
        np.bitwise_or(rounded, bits & sign_bit, out=out_bits)
    else:
        pattern_rng, draws = rng, None
        if mode == "stochastic" and mostly_tiny:
            # The general path then draws one number per element, in order (this branch runs
            # only when grid_k is set); draw them so, and share them between the two kernels.
            pattern_rng, draws = _PreDrawn.share(rng, mag.size)
        if mode == "nearest_even":  # the hot path; a carry never reaches the sign bit
            _round_pattern_nearest_even(bits, L.man_bits - fmt.man_bits, out_bits)
        else:
            rounded = _round_pattern(mag, fmt, mode, negative, pattern_rng, L)
            np.bitwise_or(rounded, bits & sign_bit, out=out_bits)
        if count and grid_k is not None:
            _round_tiny_on_grid(work, tiny, count, grid_k, mode, rng, draws, L, dest)
        elif count:  # re-round the few tiny inputs
            where = np.flatnonzero(tiny)
            sub_negative = negative[where] if directed else None
            rounded = _round_significand(mag[where], fmt, mode, sub_negative, ftz, rng, L)
            out_bits[where] = rounded | (bits[where] & sign_bit)

    # One reduction tells whether anything can overflow or is inf / NaN; usually nothing is.
    peak = mag.max(initial=0)
    max_bits = _bits_of(fmt.max, L)
    plain = not ftz and fmt.has_zero and fmt.has_negative_zero
    if peak <= max_bits and plain:
        return
    if _FAST_PATHS and plain and mode != "stochastic" and mag.size >= _FEW_BIG_MIN_SIZE:
        # A few inputs above max (overflow, inf, NaN: a quotient x / 0, an outlier) among many:
        # round just those again through this function, instead of the whole-chunk overflow
        # and special passes. Proof: in a deterministic mode the rounding is element-wise (an
        # element's result, error or warning depends on that element alone), and an input at
        # most max rounds to at most max (max is on the grid), so with ``plain`` the passes
        # below change only the elements above max: rounding those alone gives the same bits.
        # Stochastic rounding is excluded: the re-rounding would draw new numbers.
        big = np.flatnonzero(mag > max_bits)
        if big.size <= mag.size // 64:
            few = np.empty(big.size, dest.dtype)
            _round_bits(work[big], fmt, mode, saturate, ftz, rng, L, few)
            dest[big] = few
            return
    out = dest
    if _FAST_PATHS and peak < uint(L.exp_all_ones << L.man_bits):
        negative = finite_in = None  # every input is finite (the fast overflow needs neither)
    else:
        negative = (bits & sign_bit) != 0
        finite_in = mag < uint(L.exp_all_ones << L.man_bits)
    if peak > max_bits:
        # Overflow is decided after rounding with an unbounded exponent.
        if _FAST_PATHS:  # branch-free; proved equal in _rounding_fast.overflow_by_bits
            overflow_by_bits(out, mode, saturate, fmt, L.uint.type, L.width)
        else:
            overflow = (np.abs(out) > fmt.max) & finite_in
            if overflow.any():
                _apply_overflow(out, overflow, negative, mode, saturate, fmt)
    if ftz:
        out = _flush_or_clamp_tiny(out, work, fmt, finite_in)
    out = _apply_specials(out, work, fmt, saturate, finite_in, negative)
    if out is not dest:
        dest[...] = out


def _uniform_grid_k(fmt: Format, L: _Layout, ftz: bool) -> int | None:
    """The exponent k of the uniform grid 2**-k of the inputs below 2**emin, or None."""
    return uniform_grid_exponent(fmt, L.emin, L.bias, L.man_bits, ftz)


def _round_tiny_on_grid(work, tiny, count, k, mode, rng, draws, L, dest) -> None:
    """Round the inputs below 2**emin (``tiny``) on their uniform grid into ``dest``.

    Many of them (spread data, MXFP4 elements below 1): one whole-chunk pass of the grid
    kernel and a branch-free select. Few: gather them, round, scatter. Stochastic rounding
    takes the whole-chunk form only with ``draws`` (one per element, shared with the pattern
    path, as the general path draws them); otherwise it draws ``count`` numbers for the tiny
    inputs in order, as the general path's re-rounding does.
    """
    limited = isinstance(rng, _LimitedRandomBits)
    truncate = rng.truncate if limited else None
    if count > work.size // 8 and (mode != "stochastic" or draws is not None):
        rounded, scratch = _buffers(work.size, L.dtype, 2)
        round_on_uniform_grid(work, k, mode, draws, truncate, rounded, scratch)
        select_bits(dest.view(L.uint), rounded.view(L.uint), tiny)
        return
    where = np.flatnonzero(tiny)
    values = work[where]
    if mode == "stochastic":
        draws = (rng.generator if limited else rng).random(count)
    dest[where] = round_on_uniform_grid(values, k, mode, draws, truncate, values,
                                        np.empty_like(values))


class _PreDrawn:
    """Uniform draws made in advance and handed out once, to a caller of ``.random``."""

    def __init__(self, draws: np.ndarray):
        self.draws = draws

    def random(self, shape) -> np.ndarray:
        if self.draws.shape != tuple(np.atleast_1d(shape)):  # an internal invariant
            raise RuntimeError(f"{self.draws.shape} draws were made, {shape} asked for")
        return self.draws

    @staticmethod
    def share(rng, n: int) -> tuple[Any, np.ndarray]:
        """(an rng for the pattern path that hands out these draws, the draws)."""
        if isinstance(rng, _LimitedRandomBits):
            draws = rng.generator.random(n)
            return _LimitedRandomBits(_PreDrawn(draws), rng.bits), draws
        draws = rng.random(n)
        return _PreDrawn(draws), draws
