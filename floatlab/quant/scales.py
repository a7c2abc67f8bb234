"""Block scales from block amaxes: the four scale-rounding rules and the scale formats.

A scale ``s`` is the *dequantisation* multiplier: a block stores elements ``e = round(x / s)``
and means ``e * s``. The rules choose ``s`` from the block's ``amax = max|x|`` and the element
format's ``max`` (its largest exponent ``emax = floor(log2 max)``), as torchao's MX code
(``ScaleCalculationMode``) defines them. For power-of-two scales ("e8m0", "pow2")
``s = 2**k`` with, worked on a block whose amax is 150 with E4M3FN elements (max 448, emax 8,
3 mantissa bits):

* ``"floor"`` (OCP MX spec, microxcaling, torchao's default): ``k = floor(log2 amax) - emax``.
  150 = 1.171875 * 2**7: k = 7 - 8 = -1, s = 0.5, amax / s = 300 <= 448. In general amax / s
  lands in [2**emax, 2**(emax+1)), which can exceed max: E4M3's max 448 < 512, so a block whose
  amax is in (464, 512) * s is *clipped* (about 0.9% of N(0,1) elements with blocks of 32).
* ``"ceil"``: ``k = ceil(log2 amax) - emax`` (floor, plus one unless amax is a power of two).
  150: k = 8 - 8 = 0 (E8M0 code 127), s = 1, amax / s = 150: never clips, but wastes up to a
  binade.
* ``"even"``: round amax to the element's mantissa width first (half up: add half an element
  ulp to amax's float32 bits and truncate), then floor. 150 stays 1.171875 * 2**7 -> k = -1.
  An amax of 1.97 * 2**7 becomes 2**8 -> k = 0.
* ``"rceil"`` (cuBLAS, Transformer Engine MXFP8, torchao RCEIL): ``k`` is the E8M0 round-up of
  ``amax * (1 / max)``, both computed in float32 as torchao does: any nonzero mantissa bit
  rounds the exponent up. 150 * (1/448) = 0.3348 = 1.339 * 2**-2 -> k = -1 (E8M0 code 126),
  s = 0.5, amax / s = 300. So rceil gives code 126 where ceil gives 127: rceil never clips
  (amax / s <= max) and never wastes a binade.
* ``"rfloor"`` (MS-AMP's ``ScalingMeta``, Transformer Engine's ``force_pow_2_scales``): the
  *multiplier* ``max / amax`` as a float32 quotient, rounded down to a power of two 2**j
  (``2**floor(log2(...))``, exactly: the quotient's exponent), and ``s = 2**-j``.
  448 / 150 = 2.987 -> j = 1, s = 0.5. It is rceil up to where the two float32 roundings put
  the amax: equal for every float32 amax with E4M3 and E5M2 elements, one amax per binade apart
  with float16 (tests/test_quant_fastpaths.py checks both, exhaustively over binades).

E8M0 holds 2**-127 .. 2**127: k is clamped below at -127 (an all-zero block gets 2**-127, as
torchao and microxcaling give it), and a k above 127 raises (torchao would write the NaN scale
0xFF). "pow2" scales are float32 powers of two (clamped to 2**-149 .. 2**127), stored as
float32.

For the other scale formats ("float32", "bf16", "e4m3fn") ``s = amax / max * 2**margin`` is
computed in float64, clamped into [the scale format's smallest normal, its max] (torchao's
NVFP4 clamps E4M3 scales to [2**-6, 448]; an all-zero block therefore gets the smallest normal)
and rounded to the scale format by the rule: "even" to nearest-even, "floor" down, "ceil" and
"rceil" up. With ``global_scale`` (NVFP4's two levels, as torchao's ``nvfp4_quantize``) every
step is float32: ``g = amax_tensor / (scale.max * element.max)``, ``b = block_amax /
element.max``, ``b / g`` clamped and rounded to the scale format, and the block's effective
scale is ``g * that``. A tensor whose amax is 0 gets ``g = 1``.
"""

from __future__ import annotations

import numpy as np

from floatlab.formats import Format, get_format
from floatlab.quant.scheme import Scheme, element_emax, element_max
from floatlab.rounding import round as round_to_format
from floatlab.rounding import round_finite_in_range

__all__ = ["block_scales", "pow2_exponents"]

_RULE_MODE = {"even": "nearest_even", "floor": "down", "ceil": "up", "rceil": "up",
              "rfloor": "up"}
_E8M0 = get_format("e8m0")
_FLOAT32 = get_format("float32")


def pow2_exponents(amax: np.ndarray, element: Format | object, rule: str) -> np.ndarray:
    """The exponent k of the power-of-two scale 2**k of each amax (int64), before clamping.

    amax must be finite and >= 0; amax = 0 gives a very negative k (clamped later).

    >>> from floatlab import get_format
    >>> e4m3 = get_format("e4m3fn")
    >>> [int(pow2_exponents(np.float32(150), e4m3, r)) for r in ("floor", "ceil", "even", "rceil")]
    [-1, 0, -1, -1]
    """
    amax = np.asarray(amax)
    emax = element_emax(element)
    if rule in ("rceil", "rfloor"):
        return _float32_rule_exponents(amax, element, rule)
    # frexp of a float32 amax gives the same significand and exponent as of its (exact)
    # float64 widening; "even" compares the significand in float64.
    work = amax.astype(np.float64) if rule == "even" else amax
    mant, e = np.frexp(work)
    k = e.astype(np.int64)
    k -= 1 + emax
    if rule == "even":
        # round amax half-up at the element's mantissa width (torchao adds half an ulp to the
        # float32 bits and truncates): the binade bumps iff the significand >= 2 - 2**-(m+1).
        k += mant >= 1.0 - 2.0 ** -(element.man_bits + 2)
    elif rule == "ceil":
        k += mant != 0.5
    return np.where(work > 0, k, -100000)


def _float32_rule_exponents(amax: np.ndarray, element: Format | object, rule: str
                            ) -> np.ndarray:
    """k of the rules computed in float32 ("rceil", "rfloor"), as pow2_exponents gives it.

    Their float32 steps are defined for float32 amaxes (torchao's and MS-AMP's inputs). A
    float64 amax beyond float32's range (a float64 tensor) is first scaled by 2**-64 (exact),
    so its float32 rounding and the float32 product / quotient keep the same significand as
    they would with float32's exponent range unbounded, and 64 is added back to k: amax = 2**130
    with E4M3 gets k = 122, as floor does, instead of the overflowed float32 cast's inf giving
    k = 0 (rceil) or the underflowed quotient's 0 giving k = 1 (rfloor), every value clipped
    to max without a word. Beyond 2**192 the scaled amax still overflows: k is made too large
    for any scale, so block_scales raises as it does for the other rules. Amaxes within float32's
    range take the unscaled steps (the same values as before). Underflow into float32's
    subnormals is the emulation's own rounding (no FloatingPointError under a caller's
    np.errstate(under="raise")).

    Likewise rfloor's quotient max / amax overflows float32 for amaxes below about
    max * 2**-128 (float32 subnormals): it took the very negative k of an all-zero block, so
    "pow2" scales (down to 2**-149) gave 2**-149 where the rule gives 2**-143 (E4M3, amax
    2.3e-41), and x / 2**-149 clipped to max. Amaxes below 2**-100 are scaled by 2**64 first
    (k - 64 after): the same values for every amax whose quotient was finite. (E8M0 scales
    clamp such k to -127 either way.) The quotient overflows below max * 2**-128 whatever the
    max: bf16 or float32 elements (max ~2**128) overflowed it for every amax below ~1, whose
    pow2 scales became 2**-149 and whose values all clipped to max (0.5 -> 4.7e-7); so the
    bound is max(1, max) * 2**-100.
    """
    shift = np.where(amax > _F32_MAX, 64, 0) if amax.dtype == np.float64 else 0
    if rule == "rfloor":
        tiny = max(1.0, element_max(element)) * 2.0**-100
        shift = np.where((amax > 0) & (amax < tiny), -64, shift)
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        a = amax if np.isscalar(shift) else np.ldexp(amax, -shift)
        a32 = a.astype(np.float32)
        if rule == "rceil":
            # torchao: descale = amax * (1 / max) in float32, then E8M0 round-up.
            descale = a32 * np.float32(1.0 / np.float32(element_max(element)))
            mant, e = np.frexp(descale.astype(np.float64))
            k = e.astype(np.int64) - 1 + (mant != 0.5)
            k = np.where(descale > 0, k + shift, -100000)
        else:
            # MS-AMP: the float32 quotient max / amax (a float64 quotient of float32
            # operands rounded to float32 is the correctly rounded float32 one: p = 53 >=
            # 2 * 24 + 2), its exact floor(log2) from frexp, negated. An infinite quotient
            # (amax 0 or subnormal-tiny) gets the very negative k that is clamped later.
            q = (float(np.float32(element_max(element))) / a32.astype(np.float64)
                 ).astype(np.float32)
            e = np.frexp(q.astype(np.float64))[1].astype(np.int64)
            k = np.where(np.isfinite(q) & (amax > 0), 1 - e + shift, -100000)
    return np.where(np.isinf(a32), 100000, k)  # beyond 2**192: above every scale


_F32_MAX = float(np.finfo(np.float32).max)


def block_scales(amax: np.ndarray, scheme: Scheme, tensor_amax: float | None = None,
                 want_codes: bool = True):
    """Scales (float64 values), their codes, and the global scale (or None) for block amaxes.

    Returns ``(scales, codes, global_scale, effective)`` where ``effective`` is the
    multiplier each block's elements are dequantised with (``scales`` times the global scale).
    ``want_codes=False`` (fake quantisation) skips the codes: ``codes`` is None.
    """
    element, rule = scheme.element, scheme.scale_rounding
    if _FAST_E8M0_FLOOR and scheme.scale == "e8m0" and rule == "floor" and not scheme.margin \
            and isinstance(amax, np.ndarray) and amax.dtype == np.float32 \
            and element_emax(element) >= 0:
        return _e8m0_floor_scales(amax, element_emax(element), want_codes)
    if scheme.scale in ("e8m0", "pow2"):
        k = pow2_exponents(amax, element, rule)
        if scheme.margin:
            k += scheme.margin
        low, high = (-127, 127) if scheme.scale == "e8m0" else (-149, 127)
        if k.max() > high:
            worst = float(np.max(np.asarray(amax)[k > high]))
            raise ValueError(
                f"a block amax of {worst:g} needs a scale above 2**{high}, the largest "
                f"{scheme.scale} scale (with {element.name} elements); scale the tensor down "
                "first"
            )
        np.maximum(k, low, out=k)
        scales = np.ldexp(1.0, k)
        if not want_codes:
            codes = None
        elif scheme.scale == "e8m0":
            codes = (k + 127).astype(np.uint8)
        else:
            codes = scales.astype(np.float32).view(np.uint32)
        return scales, codes, None, scales
    fmt = scheme.scale_format
    if scheme.global_scale:
        scales32, g = global_block_scales(amax, scheme, tensor_amax)
        scales = scales32.astype(np.float64)
        with np.errstate(under="ignore"):  # (float32's subnormals: torchao's own product)
            effective = (g * scales32).astype(np.float64)
        codes = _codes(scales, fmt) if want_codes else None
        return scales, codes, float(g), effective
    mode = _RULE_MODE[rule]
    # float64 subnormal amaxes (x * 1e-310) underflow here, then clamp up to the scale
    # format's smallest normal: no FloatingPointError under np.errstate(under="raise")
    with np.errstate(under="ignore"):
        raw = amax.astype(np.float64) / element_max(element) * 2.0**scheme.margin
    # Clamped (raw is finite and >= 0; minimum / maximum cost less than np.clip's wrapper).
    raw = np.maximum(np.minimum(raw, fmt.max, out=raw), fmt.smallest_normal, out=raw)
    is_float32 = fmt is _FLOAT32 or fmt == _FLOAT32
    if _FAST_FLOAT32_SCALES and is_float32 and mode == "nearest_even":
        # NumPy's float64 -> float32 cast is the IEEE conversion, round to nearest even; raw
        # is finite and clamped into float32's normal range [2**-126, max], where no
        # subnormal, overflow or NaN case arises, so the cast is floatlab.round's result
        # (tests check it against floatlab.round).
        scales = raw.astype(np.float32).astype(np.float64)
    else:
        scales = round_to_format(raw, fmt, rounding=mode)
    return scales, _codes(scales, fmt) if want_codes else None, None, scales


def global_block_scales(amax: np.ndarray, scheme: Scheme, tensor_amax: float):
    """NVFP4's two levels (``scheme.global_scale``), every step in float32 as torchao's
    ``nvfp4_quantize``: ``(scales32, g)``, the block scales (values of E4M3, the one scale
    format a global scale allows, as float32: exact) and the float32 global scale ``g``; a
    block's effective (dequantisation) scale
    is the float32 product ``g * scales32``. Shared by :func:`block_scales` and the fused
    NVFP4 path (:mod:`floatlab.quant.nvfp4_fast`), which needs no float64 copy.
    """
    fmt = scheme.scale_format
    # Every step rounds in float32, as torchao's does, into float32's subnormals or to zero
    # for tiny amaxes: that rounding is the emulation's, not a FloatingPointError under a
    # caller's np.errstate(under="raise"). An amax below float32's range gives g = 0, refused
    # as one in its subnormals is (it was cast to tmax = 0, an all-zero tensor's g = 1, and
    # every value flushed to zero without a word).
    # (A float64 tensor amax beyond float32's range overflows the cast to inf: refused below
    # as a global scale outside float32's range, not an overflow warning or error first.)
    with np.errstate(under="ignore", over="ignore"):
        return _global_block_scales(amax, scheme, fmt, tensor_amax)


def _global_block_scales(amax: np.ndarray, scheme: Scheme, fmt: Format, tensor_amax: float):
    f32 = np.float32
    emax_value = element_max(scheme.element)
    tmax = f32(tensor_amax)
    g = f32(tmax / f32(fmt.max * emax_value)) if tensor_amax > 0 else f32(1.0)
    if not np.isfinite(g) or g == 0:
        raise ValueError(f"the tensor amax {tensor_amax:g} gives a global scale outside "
                         "float32's normal range; scale the tensor first")
    b = amax.astype(f32, copy=False) / f32(emax_value)  # float32 / float32: float32
    if scheme.margin:
        b = b * f32(2.0**scheme.margin)
    ratio = b / g  # float32, finite: clamped (minimum / maximum: np.clip's result, cheaper)
    ratio = np.maximum(np.minimum(ratio, fmt.max, out=ratio), fmt.smallest_normal, out=ratio)
    mode = _RULE_MODE[scheme.scale_rounding]
    if mode == "nearest_even":  # finite (g > 0) and clamped: the in-range rounding, on
        # positive normals of fmt, in place (ratio is this call's own array)
        scales32 = round_finite_in_range(ratio, fmt, in_place=True, positive_normal=True)
    else:  # float64 values of fmt, so float32 numbers: the cast is exact
        scales32 = round_to_format(ratio, fmt, rounding=mode).astype(f32)
    return scales32, g


# Switch for the tests, which check the float32 cast equal to floatlab.round.
_FAST_FLOAT32_SCALES = True


def _e8m0_floor_scales(amax: np.ndarray, emax: int, want_codes: bool):
    """block_scales' result for E8M0 scales, the "floor" rule and no margin (the MX presets),
    from float32 amaxes' exponent fields: the same k in three integer passes instead of frexp,
    where, a clamp and ldexp (the MX recipes quantise ~16 operands a step).

    Proof, with F the amax's biased exponent field (amax >= 0 and finite, checked by the
    caller's amax): the general path takes k = floor(log2 amax) - emax (amax > 0; amax = 0
    gives a very negative k), then clamps k below at -127; no k exceeds 127 (F <= 254 and
    emax >= 0 give F - 127 - emax <= 127). A normal amax has floor(log2 amax) = F - 127, the
    same k. A subnormal or zero amax (F = 0) has floor(log2 amax) <= -127 on the general path,
    so with emax >= 0 its k <= -127 clamps to -127, as max(0 - 127 - emax, -127) does. The
    scale 2**k (k in [-127, 127]) is the normal float64 with exponent field k + 1023, its E8M0
    code k + 127. Tests compare it with the general path (tests/test_quant_fastpaths.py).
    """
    k = amax.view(np.int32) >> 23           # the exponent field F (the sign bit is clear)
    k -= 127 + emax
    np.maximum(k, -127, out=k)
    scales = ((k.astype(np.int64) + 1023) << 52).view(np.float64)
    codes = (k + 127).astype(np.uint8) if want_codes else None
    return scales, codes, None, scales


_FAST_E8M0_FLOOR = True  # switch for the tests, which check it against pow2_exponents


def _codes(scales: np.ndarray, fmt: Format) -> np.ndarray:
    """Codes of scales that are already values of ``fmt``."""
    if fmt == _FLOAT32:
        return scales.astype(np.float32).view(np.uint32)
    from floatlab.quant.elements import _codes_of_values  # the element codes' fast path

    return _codes_of_values(scales, fmt)
