"""torchao's axiswise ("rowwise") float8 scaling, in torchao's own float32 order.

torchao's float8 training (``torchao/float8``: ``tensor_to_scale``, ``amax_to_scale``,
``hp_tensor_and_scale_to_float8``, ``to_fp8_saturated``) scales each row of a tensor (the
slice along the GEMM's inner dimension) by a float32 *multiplier*:

* ``amax`` of each row, in float32 (bf16 inputs are widened to float32 first: exact);
* ``scale = fp8_max / max(amax, 1e-12)``, divided in float64 and rounded to float32, which is
  the correctly rounded float32 quotient (both operands are float32 numbers, and double
  rounding through float64, p = 53 >= 2 * 24 + 2, is innocuous for a division: Figueroa 1995);
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

from floatlab.formats import Format, get_format
from floatlab.quant.blocks import _amax
from floatlab.quant.elements import _format_fits_float32, _round_scaled
from floatlab.rounding import overflow_threshold

__all__ = ["quantize_rowwise", "fake_quantize_rowwise", "RowwiseTensor", "TORCHAO_EPS"]

TORCHAO_EPS = 1e-12  # torchao's floor on amax ("avoid division by zero")


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
    values, scales, n = _quantize_rows(x, fmt, power_of_two, count)
    inverse = np.float32(1.0) / scales                     # IEEE float32 division, per row
    return np.multiply(values, inverse, out=values), n


def _quantize_rows(x: Any, fmt: str | Format, power_of_two: bool, count: bool):
    """(FP8 values as a fresh float32 array, float32 scales, saturation count)."""
    fmt = get_format(fmt)
    if not (fmt.signed and fmt.has_zero and _format_fits_float32(fmt)):
        raise ValueError(f"{fmt.name} cannot take rowwise float8 scaling: it needs a signed "
                         "format with zero that float32 holds, such as 'e4m3fn' or 'e5m2'")
    arr = np.asarray(x)
    if arr.ndim == 0 or arr.size == 0:
        raise ValueError(f"x must be a non-empty array with at least one axis, got shape "
                         f"{arr.shape}")
    if arr.dtype != np.float32:
        with np.errstate(over="ignore"):
            arr = arr.astype(np.float32)
    # the blocks' amax (floatlab.quant.blocks: NaN / inf raise), one per row
    amax = _amax(arr.reshape(-1, arr.shape[-1])).reshape(arr.shape[:-1] + (1,))
    # float64 quotient of float32 operands, rounded to float32: the float32 quotient
    top = float(np.float32(fmt.max))
    # (the floor applies in float64, as torchao clamps its float64 amax: exactly 1e-12)
    scales = (top / np.maximum(amax.astype(np.float64), TORCHAO_EPS)).astype(np.float32)
    if power_of_two:  # round down to 2**floor(log2(scale)): clear the mantissa bits
        scales = (scales.view(np.uint32) & np.uint32(0xFF800000)).view(np.float32)
    values, _, _, _ = _round_scaled(arr, scales, amax, fmt, "nearest_even", None,
                                    multiply=True)
    n = 0
    if count:
        threshold = overflow_threshold(fmt)
        with np.errstate(over="ignore"):
            if float((amax * scales).max()) >= threshold:
                mag = np.abs(arr * scales)
                beyond = mag > threshold
                if fmt.max_code & 1:
                    beyond |= mag == threshold
                n = int(np.count_nonzero(beyond))
    return values, scales, n
