"""The fused NVFP4 fake-quantisation of the training recipe's operands (proved equal to
:func:`floatlab.quant.quantize.fake_quantize`).

The "nvfp4" recipe quantises 13-14 operands per step (1x16 blocks of activations and
gradients, 16x16 weight tiles, stochastic rounding of gradients, the Hadamard-rotated wgrad
operands). The general core pays per call for its generality: argument checks, the working
precision, the scale rules' dispatch, the clipping bookkeeping, floatlab.round's dispatch, and
for stochastic rounding a float64 result that the float32 BLAS GEMM then narrows.
:func:`fake_quantize_nvfp4` runs the same steps for the one scheme family with nothing else:

1. the Hadamard transform (the same :func:`~floatlab.quant.hadamard.apply_hadamard` call on
   the same float32 array). The general core first checks x finite; here the check runs only
   when the transformed blocks are not (step 2 raises), which they are whenever x is not: a
   NaN propagates through the transform's products and sums, and an inf times +-1/4 is an
   inf, whose sum with finite values or infs is an inf or a NaN. So the same error, without
   the pass over x when all is well;
2. block amaxes of the float32 values and the tensor amax, their largest
   (:func:`~floatlab.quant.blocks._amax_and_max` on the same
   :func:`~floatlab.quant.blocks._blocked` view; the general core takes them from the float32
   values too, ``_NARROW_AMAX``, also when it then works in float64);
3. the scales (:func:`~floatlab.quant.scales.global_block_scales`, the general code), and the
   float32 effective scale ``g * s``, which the general core widens to float64 and, for
   float32 work, narrows back exactly;
4. ``q = x / eff`` in the working precision: float32 for nearest-even (the same float32
   division), float64 for stochastic rounding (``np.divide`` of the float32 view by the
   float64 scales widens x exactly inside the ufunc: the general core's ``astype(float64)``
   then division, one rounding of the same exact quotient); on long operands against eff
   repeated to one value per element (:func:`_per_value`: the same operand pairs, so the
   same quotients and, in step 7, the same products);
5. clipping: every |q| of a block is at most its peak ``amax / eff`` (division by a positive
   scale is monotone, and amax is the block's largest |x|). The general core clips the blocks
   whose peak exceeds the element's max (stochastic) or reaches the overflow threshold
   ``max + ulp(max) / 2`` (nearest-even, which rounds everything below it to at most max);
   clipping all of q instead changes no value of the other blocks (stochastic: they are
   within max already; nearest-even: their values below the threshold round to the clipped
   value or below, and rounding then sees max or the value itself, which rounds to the same
   element). A non-finite peak (a zero effective scale) is left to the general core. With
   hardware SR the rounding kernel saturates instead (``round_random_bits(saturate=True)``,
   proved equal to clipping first);
6. the element rounding by the same proved kernels the general core calls for finite, clipped
   q (:func:`~floatlab._rounding_fast.round_in_range_nearest_even`,
   :func:`~floatlab._rounding_fast.round_in_range_stochastic` with the chunk size of
   ``round_finite_in_range``, so the same random draws in the same order);
7. dequantisation ``element * eff``: float32 multiplication for float32 work (the general
   core's product); for stochastic rounding the float64 product is exact (an E2M1 element
   has at most 2 significant bits, eff 24, both far inside float64's range), and with
   ``float32=True`` it is rounded once to float32 by the multiplication's output cast: the
   value the float32 GEMM reads after the general core's float64 result is narrowed by
   ``astype(float32)`` (both round the same exact product to nearest even).

With ``Scheme(random_bits=k)`` (the recipe's gradients: the hardware's 8 random bits) the
general core works in float32 as for nearest-even (``_work_dtype``), and steps 4-7 are the
float32 ones with :func:`~floatlab.quant.elements.round_random_bits` as the rounding (the
general core's own call on the same clipped float32 q: the same lanes in the same C order).

Nothing is drawn from ``rng`` before the last step that can still fall back, so a fallback
(``None``: the caller runs the general core) leaves the random stream as the general core
finds it. Tests check the fused path bit for bit against the general core on adversarial
blocks and random data, and training bit-identical (tests/test_quant_nvfp4_fast.py);
``_FAST_NVFP4 = False`` switches it off.
"""

from __future__ import annotations

import numpy as np

from floatlab import rounding
from floatlab._rounding_fast import round_in_range_nearest_even, round_in_range_stochastic
from floatlab.formats import get_format
from floatlab.quant.blocks import _amax_and_max, _blocked, _unblock, raise_nonfinite
from floatlab.quant.elements import round_random_bits
from floatlab.quant.hadamard import apply_hadamard
from floatlab.quant.scales import global_block_scales
from floatlab.quant.scheme import Scheme
from floatlab.rounding import _CHUNK, overflow_threshold

__all__ = ["fake_quantize_nvfp4", "nvfp4_fast_applies"]

_E2M1 = get_format("e2m1")
_FAST_NVFP4 = True  # switch for the tests, which check the fused path against the general core


def nvfp4_fast_applies(scheme: Scheme) -> bool:
    """Whether :func:`fake_quantize_nvfp4` handles ``scheme``: E2M1 elements, E4M3 block
    scales rounded to nearest even under a float32 global scale, no margin, 1-D blocks of 16
    along the last axis or 16x16 tiles, nearest-even or stochastic elements, and no Hadamard
    transform or one of 16 along the last axis (the NVFP4 presets and the recipe's variants).
    """
    hit = scheme._plans.get("nvfp4_fast")  # memoised on the Scheme, as its block layouts
    if hit is None:
        hit = scheme._plans["nvfp4_fast"] = bool(
            scheme.element == _E2M1 and scheme.scale == "e4m3fn"
            and scheme.scale_rounding == "even" and scheme.global_scale and not scheme.margin
            and scheme.rounding in ("nearest_even", "stochastic")
            and scheme.random_bits in (None, 8) and scheme.block in (16, (16, 16))
            and scheme.hadamard in (None, 16) and scheme.axis == -1)
    return hit


def fake_quantize_nvfp4(x: np.ndarray, scheme: Scheme, rng: np.random.Generator | None, *,
                        rotated: bool = False, float32: bool = False) -> np.ndarray | None:
    """``fake_quantize(x, scheme, rng, rotated=rotated)`` for a 2-D float32 ``x`` and a scheme
    :func:`nvfp4_fast_applies` accepts (see the module docstring for the proof), or None when
    the general core must run (other inputs, a Hadamard transform to invert, a non-finite
    block peak, more values than one chunk of exact stochastic rounding); nothing is drawn
    from ``rng`` then.

    ``float32=True``: stochastically rounded operands come back as float32 (the values a
    float32 GEMM reads from the general core's float64 result); nearest-even operands are
    float32 either way, as the general core's.
    """
    if not (_FAST_NVFP4 and rounding._FAST_PATHS and type(x) is np.ndarray
            and x.dtype == np.float32 and x.ndim == 2 and x.size
            and nvfp4_fast_applies(scheme)):
        return None
    stochastic = scheme.rounding == "stochastic"
    hardware_sr = scheme.random_bits is not None  # float32 work, k-bit draws (no chunks)
    if stochastic and (not isinstance(rng, np.random.Generator)
                       or (x.size > _CHUNK and not hardware_sr)):
        return None
    source = None
    if scheme.hadamard:
        if not rotated:
            return None  # the inverse transform runs on the general core's dtype
        source = x
        with np.errstate(invalid="ignore"):  # x's NaN / inf are reported below
            x = apply_hadamard(x, scheme.hadamard, scheme.axis)
    b = _blocked(x, scheme)
    try:
        amax, tensor_amax = _amax_and_max(b.view)  # float32, finite (NaN / inf raise)
    except ValueError:
        if source is None or np.all(np.isfinite(source)):
            raise                  # the transform overflowed: the general core's error too
        amax = None
    if amax is None:
        raise_nonfinite(source)    # x's own NaN / inf, as the general core reports them
    scales32, g = global_block_scales(amax, scheme, tensor_amax)
    eff32 = g * scales32
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        # float64 for exact stochastic rounding (x, amax widened exactly inside the ufuncs),
        # else float32; C order: the kernels' scratch
        eff = eff32.astype(np.float64) if stochastic and not hardware_sr else eff32
        eff_q = _per_value(eff, b.view)
        q = np.divide(b.view, eff_q, order="C")
        peak = amax / eff
    peak_max = float(peak.max())
    if not peak_max < np.inf:                 # a zero effective scale: the general core
        return None
    limit = _E2M1.max if stochastic else overflow_threshold(_E2M1)
    clip = (peak_max > limit) if stochastic else (peak_max >= limit)
    if hardware_sr:  # the kernel saturates: clipping first, in one pass instead of two
        elements = round_random_bits(q, _E2M1, scheme.random_bits, rng, saturate=clip)
        out = np.multiply(elements, eff_q, out=elements)
        return _unblock(out, b.padded, b.shape)
    if clip:
        np.maximum(np.minimum(q, _E2M1.max, out=q), -_E2M1.max, out=q)
    if stochastic:
        elements = round_in_range_stochastic(q, _E2M1, rng, _CHUNK, q)
        if float32:
            out = np.multiply(elements, eff_q, out=np.empty(q.shape, np.float32),
                              casting="unsafe")
        else:
            out = np.multiply(elements, eff_q, out=elements)
    else:
        elements = round_in_range_nearest_even(q, _E2M1, q)
        out = np.multiply(elements, eff_q, out=elements)
    return _unblock(out, b.padded, b.shape)


def _per_value(eff: np.ndarray, view: np.ndarray) -> np.ndarray:
    """The blocks' effective scales repeated to one per value for rows of 1x16 blocks (an
    (N, 1) column against the (N, 16) view), so that the division and the dequantising
    multiplication run as contiguous passes instead of broadcasting 16 values per row
    (~2x faster at the recipe's 32K values, repeat included): the same operands, so the same
    float32 / float64 results. 2-D tiles and small operands broadcast as before."""
    if view.ndim != 2 or view.shape[0] < _PER_VALUE_ROWS:
        return eff
    return np.repeat(eff, view.shape[1], axis=1)


_PER_VALUE_ROWS = 256  # from here the repeat pays (measured)
