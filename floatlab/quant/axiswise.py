"""torchao's axiswise ("rowwise") float8 scaling, in torchao's own float32 order.

torchao's float8 training (``torchao/float8``: ``tensor_to_scale``, ``amax_to_scale``,
``hp_tensor_and_scale_to_float8``, ``to_fp8_saturated``) scales each row of a tensor (the
slice along the GEMM's inner dimension) by a float32 *multiplier*:

* ``amax`` of each row, in float32 (bf16 inputs are widened to float32 first: exact);
* ``scale = fp8_max / max(amax, 1e-12)``, divided in float64 and rounded to float32, which is
  the correctly rounded float32 quotient (both operands are float32 numbers, and double
  rounding through float64, p = 53 >= 2 * 24 + 2, is innocuous for a division: Figueroa 1995),
  so floatlab divides in float32 (``_row_scales``);
* the "rowwise" recipe rounds that scale *down* to a power of two (``round_scales_to_power_of_2
  =True``, torchao's ``exp2(floor(log2(scale)))``); floatlab takes the exact floor of log2
  from the float32 exponent field. (torch's float32 ``log2`` can round a scale within a few
  float32 ulps below 2**k up to k, giving 2**k; floatlab does not model that libm rounding:
  the scaled amax then lands a hair above fp8_max and rounds to it either way);
* quantise ``fp8(clamp(float32(x) * scale, -fp8_max, fp8_max))``: the float32 product (round
  to nearest even; exact for power-of-two scales unless it is subnormal), clamped, then
  rounded to FP8 (nearest even) by floatlab;
* the GEMM (``torch._scaled_mm``) receives ``scale.reciprocal()`` in float32, so the lab
  dequantises ``x_fp8 * float32(1 / scale)`` in float32.

:func:`quantize_rowwise` does this on the last axis (one scale per index of the leading
axes): the values, the float32 scales and the saturation count;
:meth:`RowwiseTensor.dequantize` the float32 dequantised values.

>>> import numpy as np
>>> q = quantize_rowwise(np.array([[0.3, -2.0], [1.0, 0.0]], np.float32), "e4m3fn")
>>> q.scales.ravel().tolist()                    # float32(448 / 2), float32(448 / 1)
[224.0, 448.0]
>>> q.dequantize().tolist()                      # 0.3 * 224 = 67.2 -> 64 -> 64 / 224
[[0.2857142984867096, -2.0], [1.0, 0.0]]
>>> quantize_rowwise(np.array([[0.3, -2.0]], np.float32), "e4m3fn",
...                  power_of_two=True).scales.ravel().tolist()         # 2**7 <= 224
[128.0]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from floatlab._rounding_fast import (
    _in_range_constants,
    in_range_kernel_applies,
    per_format,
    round_in_range_nearest_even,
)
from floatlab._rounding_kernels import _buffers
from floatlab.formats import Format, get_format
from floatlab.quant.blocks import _amax, raise_nonfinite
from floatlab.quant.elements import _format_fits_float32, _round_scaled
from floatlab.rounding import overflow_threshold

__all__ = ["quantize_rowwise", "fake_quantize_rowwise", "RowwiseTensor", "TORCHAO_EPS"]

TORCHAO_EPS = 1e-12  # torchao's floor on amax ("avoid division by zero")
# The recipes' dequantised rows: power-of-two rows in one fused rounding (_round_rows_pow2),
# float32-scaled rows straight through the rounding kernel (_quantize_rows), both proved
# identical to the general scale / clip / round / dequantise path and tested bit-equal to it
# (tests/test_quant_fastpaths.py): False runs the general path everywhere.
_FAST_ROWS = True


@dataclass(frozen=True, eq=False)
class RowwiseTensor:
    """The result of :func:`quantize_rowwise`.

    values : float32 array, the FP8 values of ``float32(x) * scale`` (x's shape).
    scales : float32 multipliers, one per row (shape ``x.shape[:-1] + (1,)``).
    n_saturated : how many products lay beyond the format's overflow threshold (clamped).
    """

    values: np.ndarray
    scales: np.ndarray
    fmt: Format
    n_saturated: int = 0

    def dequantize(self) -> np.ndarray:
        """``values * float32(1 / scale)`` in float32 (what the scaled GEMM applies)."""
        inverse = np.float32(1.0) / self.scales           # IEEE float32 division, per row
        return np.multiply(self.values, inverse, dtype=np.float32)


def quantize_rowwise(x: Any, fmt: str | Format, *, power_of_two: bool = False,
                     count: bool = False) -> RowwiseTensor:
    """Quantise each row of ``x`` (blocks along the last axis) in torchao's order (module
    docstring). ``x``: a float array of at least one dimension (float64 values are rounded to
    float32 first, as ``.to(float32)`` does); NaN / inf raise ValueError. ``count``: count
    the saturated products (telemetry); otherwise ``n_saturated`` is 0.

    Each element's rounding is floatlab's (the quantisation core's scale-clip-round step with
    the multiply convention, ``floatlab.quant.elements._round_scaled``, in float32).
    """
    values, scales, n = _quantize_rows(x, fmt, power_of_two, count)
    values.setflags(write=False)
    return RowwiseTensor(values=values, scales=scales, fmt=get_format(fmt), n_saturated=n)


def fake_quantize_rowwise(x: Any, fmt: str | Format, *, power_of_two: bool = False,
                          count: bool = False) -> tuple[np.ndarray, int]:
    """``(quantize_rowwise(x, ...).dequantize(), n_saturated)`` without keeping the FP8
    values: they are dequantised in place (the recipes' per-step entry)."""
    values, _, n = _quantize_rows(x, fmt, power_of_two, count, dequantized=True)
    return values, n


def _quantize_rows(x: Any, fmt: str | Format, power_of_two: bool, count: bool,
                   dequantized: bool = False):
    """(FP8 values as a fresh float32 array, float32 scales, saturation count).

    ``dequantized=True`` returns the dequantised values instead (in place), from the fused
    power-of-two path (:func:`_round_rows_pow2`) where it applies.
    """
    fmt = get_format(fmt)
    if not (fmt.signed and fmt.has_zero and _format_fits_float32(fmt)):
        raise ValueError(f"{fmt.name} cannot take rowwise float8 scaling: it needs a signed "
                         "format with zero that float32 holds, such as 'e4m3fn' or 'e5m2'")
    arr = np.asarray(x)
    if arr.ndim == 0:
        raise ValueError(f"x must be an array with at least one axis (its rows), got shape "
                         f"{arr.shape}; pass np.atleast_1d(x)")
    source = arr
    if arr.dtype != np.float32:  # (float64 subnormals flush: the cast's own rounding)
        with np.errstate(over="ignore", under="ignore"):
            arr = arr.astype(np.float32)
    if arr.size == 0:  # no values (as quantize): each row's amax is 0, the zero-amax scale
        scales = _row_scales(np.zeros(arr.shape[:-1] + (1,), np.float32), fmt, power_of_two)
        return np.zeros(arr.shape, np.float32), scales, 0
    if dequantized and power_of_two and _FAST_ROWS and not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)  # one strided pass here, not one per kernel pass
    # the blocks' amax (floatlab.quant.blocks: NaN / inf raise), one per row
    try:
        amax = _row_amax(arr.reshape(-1, arr.shape[-1])).reshape(arr.shape[:-1] + (1,))
    except ValueError:
        if source is arr:
            raise
        if not np.isfinite(source).all():  # count x's own NaN / inf, not the cast's
            raise_nonfinite(source)
        raise ValueError(
            f"x holds finite values beyond float32's range (amax "
            f"{float(np.max(np.abs(source))):g}): rowwise scaling reads x as float32, as "
            "torchao does; scale x down first") from None
    scales = _row_scales(amax, fmt, power_of_two)
    n = _count_saturated(arr, amax, scales, fmt) if count else 0
    if dequantized and power_of_two and _FAST_ROWS:
        values = _round_rows_pow2(arr, amax, scales, fmt)
        if values is not None:
            return values, scales, n
    if dequantized and _FAST_ROWS and in_range_kernel_applies(fmt) and \
            float((amax * scales).max()) < overflow_threshold(fmt):
        # _round_scaled's steps without its dispatch (5-7 us a call): its float32 product
        # (C order, as its rounded result), no clipping (below the overflow threshold it
        # clips nothing: such values round to max or below either way), and floatlab.round's
        # nearest-even kernel, which is floatlab.round for finite values below the threshold
        values = np.multiply(arr, scales, out=np.empty(arr.shape, np.float32))
        round_in_range_nearest_even(values, fmt, out=values)
        # (a row whose amax is near float32's max can round up past it: its float32 product is
        # inf, the exact value rounded to float32, as in floatlab.quant.delayed's dequantize)
        with np.errstate(over="ignore"):
            return np.multiply(values, np.float32(1.0) / scales, out=values), scales, n
    values, _, _, _ = _round_scaled(arr, scales, amax, fmt, "nearest_even", None,
                                    multiply=True)
    if dequantized:
        inverse = np.float32(1.0) / scales                 # IEEE float32 division, per row
        with np.errstate(over="ignore"):  # (inf past float32's max, as above)
            np.multiply(values, inverse, out=values)
    return values, scales, n


def _row_amax(rows: np.ndarray) -> np.ndarray:
    """max |row| of a 2-D float32 array, shaped (rows, 1): floatlab.quant.blocks' ``_amax``.

    Rows of 32 or more (the wide operands) take the maximum of the bit patterns with the sign
    cleared, one integer reduction per row and no float |x| temporary (measured 1.4-1.9x
    faster at 64 and 512 wide; blocks' folding wins on shorter rows). For finite float32 the
    pattern of |x| read as an unsigned integer increases with |x| (-0 reads as +0), so the
    largest pattern is that of the largest |x|: the same amax. inf and NaN patterns are
    larger than every finite one; when one is the maximum, ``_amax`` runs and raises.
    """
    if rows.shape[1] < 32:
        return _amax(rows)
    mag = np.bitwise_and(rows.view(np.uint32), np.uint32(0x7FFFFFFF))
    top = mag.max(axis=1, keepdims=True)
    if int(top.max()) >= 0x7F800000:
        return _amax(rows)  # raises ValueError naming the NaN / inf
    return top.view(np.float32)


def _row_scales(amax: np.ndarray, fmt: Format, power_of_two: bool) -> np.ndarray:
    """torchao's ``fl32(fmax / max(amax, 1e-12))`` per row (float32 amax), in float32 only.

    torchao divides the float32 fmax by its float64 amax clamped at 1e-12 and rounds the
    quotient to float32. For amax >= 1e-12 that is the float32 quotient (correctly rounded:
    double rounding through float64 is innocuous for a division, module docstring). For
    amax < 1e-12 it is the constant ``cap = fl32(fmax / 1e-12)``, and by the monotonicity of
    rounding fl32(fmax / a) >= cap exactly when a <= 1e-12 (for a = 1e-12 both are cap): so
    ``min(fl32(fmax / max(amax, 1e-30)), cap)`` is torchao's scale for every amax (the 1e-30
    floor, below 1e-12, only keeps the division away from zero).
    """
    top, cap = _scale_constants(fmt)
    scales = np.maximum(amax, np.float32(1e-30))
    np.divide(top, scales, out=scales)
    np.minimum(scales, cap, out=scales)
    if power_of_two:  # round down to 2**floor(log2(scale)): clear the mantissa bits
        scales.view(np.uint32)[...] &= np.uint32(0xFF800000)
    return scales


@per_format
def _scale_constants(fmt: Format) -> tuple[np.float32, np.float32]:
    """(float32 fmax, fl32(fmax / 1e-12)): the latter divided in float64 as torchao does."""
    top = np.float32(fmt.max)
    return top, np.float32(float(top) / TORCHAO_EPS)


def _count_saturated(arr: np.ndarray, amax: np.ndarray, scales: np.ndarray, fmt: Format
                     ) -> int:
    """How many products ``arr * scales`` lie beyond the format's overflow threshold."""
    n = 0
    threshold = overflow_threshold(fmt)
    with np.errstate(over="ignore"):
        if float((amax * scales).max()) >= threshold:
            mag = np.abs(arr * scales)
            beyond = mag > threshold
            if fmt.max_code & 1:
                beyond |= mag == threshold
            n = int(np.count_nonzero(beyond))
    return n


def _round_rows_pow2(arr: np.ndarray, amax: np.ndarray, scales: np.ndarray, fmt: Format
                     ) -> np.ndarray | None:
    """``fp8(clamp(arr * s)) * float32(1 / s)`` for power-of-two row scales ``s = 2**k``, in
    one rounding of ``arr`` on the FP8 grid scaled by ``2**-k`` (six passes instead of a
    multiply, the seven-pass rounding kernel and a dequantising multiply); None (the caller
    runs the general path) where a row falls outside the conditions checked below.

    Proof (notation of :func:`floatlab._rounding_fast.round_in_range_nearest_even`, whose
    proof this reuses; M mantissa bits, emin / emax the format's, float32 arithmetic IEEE
    round-to-nearest-even). Let x be an element of a row with scale 2**k.

    * No clamp: every row has ``fl32(amax * s) <= fmax`` (checked; always true here, as
      ``s <= fl32(fmax / amax)`` makes the exact ``amax * s <= fmax * (1 + 2**-24)``, which
      rounds to fmax), and ``x * s`` is exact unless it underflows float32, so
      ``|x * s| <= amax * s <= fmax``: the clamp changes nothing, and x*s is in range.
    * The general path rounds y = fl32(x * s) with the kernel's magic constant c =
      1.5 * 2**(E + 23 - M), E = max(e(y), emin), then multiplies by fl32(1 / s) = 2**-k.
      Here c' = 1.5 * 2**(E' + 23 - M) with E' = max(e(x), emin - k), built from x's
      exponent bits and a per-row floor ``floor_bits - (k << 23)``. Where x * s is normal,
      e(x * s) = e(x) + k, so E' = E - k and c' = c * 2**-k. Where |x * s| < 2**-126 (x a
      float32 subnormal with any k, or x * s underflowing) both E and E' are at their floors
      (e(x) + k <= -126 < emin, the field of a subnormal x reading as below -126), and both
      paths round to a signed zero: |y|, |x| lie far below half their quantum.
    * Checked per row: c' is a normal float32 (exponent E' + 23 - M between -126 and 127 for
      every E' from emin - k to emax - k, as |x| <= fmax * 2**-k < 2**(emax + 1 - k)).
      Then x + c' lies in (C', 2C'), C' = 2**(E' + 23 - M), the same binade scaled by 2**-k
      as the general path's x*s + c in (C, 2C): the float32 grids correspond exactly, ties
      and their even neighbours included, so fl32(x + c') = 2**-k * fl32(x*s + c), and
      fl32(x + c') - c' = 2**-k * RNE_q(x*s) (Sterbenz), which is the general path's
      dequantised value, y's FP8 rounding times 2**-k: exact, since it is a multiple of
      2**(emin - M - k) >= 2**-149 of magnitude at most fmax * 2**-k (the same checks).
    * Signs: nonzero results carry x's sign already; a zero result is +0, and ORing x's sign
      bit in gives x's sign, as the general path ORs the sign of x * s (x's, s > 0) into it.
    """
    if not in_range_kernel_applies(fmt):
        return None
    constants = _in_range_constants(fmt)[np.dtype(np.float32)]
    uint, floor_bits, offset, exponent_mask, sign_mask = constants
    if float((amax * scales).max()) > fmt.max:  # never for torchao's rowwise scales (proof);
        return None  # a lagging delayed per-tensor scale (mixed.pow2_tensor): it would clamp
    # A power-of-two float32 scale's bits are (k + 127) << 23 (positive, mantissa zero).
    k_bits = scales.view(np.uint32)
    low, high = int(k_bits.min()), int(k_bits.max())
    floor_for_k0 = int(floor_bits) + (127 << 23)                     # (emin - k + 127) << 23
    if floor_for_k0 - high < 0 or floor_for_k0 - high + int(offset) < (1 << 23) or \
            ((fmt.emax + 254) << 23) - low + int(offset) >= (255 << 23):
        # the floor's field emin - k + 127 below 0 (k > emin + 127: a per-tensor scale of a
        # tiny tensor; torchao's rowwise scales stop far below) would wrap around the
        # unsigned maximum below; or c' (from E' = emin - k to emax - k) would leave the
        # normal float32 range
        return None
    row_floor = np.subtract(uint(floor_for_k0), k_bits)              # no wrap: checked above
    out = np.empty(arr.shape, np.float32)
    magic, sign = _buffers(arr.size, np.dtype(uint), 2)
    magic, sign = magic.reshape(arr.shape), sign.reshape(arr.shape)
    np.bitwise_and(arr.view(uint), exponent_mask, out=magic)
    np.maximum(magic, row_floor, out=magic)
    magic += offset                               # c' = 1.5 * 2**(E' + 23 - M) per element
    c = magic.view(np.float32)
    np.add(arr, c, out=out)
    out -= c
    # x's sign bit ORed in (not np.copysign: 2.5x slower than these two SIMD passes)
    np.bitwise_and(arr.view(uint), sign_mask, out=sign)
    out_bits = out.view(uint)
    np.bitwise_or(out_bits, sign, out=out_bits)
    return out
