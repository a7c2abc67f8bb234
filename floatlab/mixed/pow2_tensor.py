"""MS-AMP's per-tensor power-of-two fake quantisation, fast: the recipes' operands
(:func:`floatlab.mixed.recipe_gemm.quantize_operand`) and O3's held weights.

Two proved steps, each with a switch the tests turn off to check training byte-identical:

* :func:`_pow2_tensor_twin`: a per-tensor power-of-two Scheme (``msamp_scheme``) gives the
  values of a float32 :class:`~floatlab.quant.scalers.CurrentScaling` with power-of-two
  scales (Transformer Engine's order), its *twin* (``_POW2_TWINS``);
* :func:`_pow2_tensor_fake_quantize`: such a scaler's quantise-and-dequantise in one fused
  rounding, the rowwise kernel :func:`floatlab.quant.axiswise._round_rows_pow2` with one
  scale for the tensor (``_POW2_FUSED``).

(The optimizer's moments, many tensors at once, stay on their general path
(:func:`floatlab.mixed.optim8bit._fake_quantize_each`): the kernel with one row per element
and its tensor's scale was measured slower, 70 against 67 us for the lab's 5.5K moments.)

>>> import numpy as np
>>> from floatlab.mixed.recipe import msamp_scheme
>>> twin = _pow2_tensor_twin(msamp_scheme("e4m3fn"))
>>> _pow2_tensor_fake_quantize(twin, np.array([0.3, -1.1], np.float32)).tolist()
[0.3125, -1.125]
"""

from __future__ import annotations

import math

import numpy as np

from floatlab.formats import Format
from floatlab.quant.axiswise import _round_rows_pow2
from floatlab.quant.delayed import _as_float_with_amax
from floatlab.quant.elements import _format_fits_float32
from floatlab.quant.scalers import CurrentScaling, DelayedScaling
from floatlab.quant.scheme import Scheme

__all__: list[str] = []


def _pow2_tensor_twin(spec: Scheme) -> CurrentScaling | None:
    """For MS-AMP's per-tensor power-of-two Scheme (``msamp_scheme``: one "pow2" scale per
    tensor, the "rfloor" rule, nearest-even elements of a Format, no margin, Hadamard or
    global scale), the float32 :class:`CurrentScaling` with power-of-two scales that gives
    the same dequantised float32 values for float32 inputs (about 20 us less per operand);
    None for any other Scheme.

    Proof, for a float32 x with amax = max|x| (exact in float32) and q = fl32(fmax / amax):
    the Scheme's scale is 2**k with k = 1 - e, e the frexp exponent of q (the "rfloor" rule),
    unclamped because a finite normal q has e in [-125, 128]; the twin's multiplier is q with
    its mantissa bits cleared, 2**(e - 1) = 2**-k. The Scheme divides x by 2**k in float32,
    the twin multiplies by 2**-k in float32: the same real number, rounded once to float32
    alike; both saturate and round it with the same nearest-even rounding to the element; the
    Scheme dequantises element * 2**k in float32, the twin element * fl32(1 / 2**-k), and that
    reciprocal is exactly 2**k (k <= 126). An all-zero x gives zeros of the same signs either
    way (scale 2**-149 against 1: a product of +-0). The one case apart: an amax so small that
    q overflows float32 (the twin then takes float32's max, 2**127 once cleared, the Scheme
    2**-149); the caller sees the twin's scale 2**127 and takes the Scheme path for it (a
    finite q of 2**127 gives k = -127 on both sides, so that fallback is only conservative).
    Tests check training bit-identical without the twin (tests/test_mixed_recipe_fastpaths.py).
    """
    if not _POW2_TWINS:
        return None
    twin = _TWINS.get(spec, False)
    if twin is False:
        element = spec.element
        ok = (spec.block == "tensor" and spec.scale == "pow2" and spec.scale_rounding == "rfloor"
              and spec.rounding == "nearest_even" and not spec.margin and not spec.hadamard
              and not spec.global_scale and isinstance(element, Format)
              and element.signed and element.has_zero and _format_fits_float32(element))
        twin = _TWINS[spec] = CurrentScaling(element, float32=True, power_of_two=True) \
            if ok else None
    return twin


_TWINS: dict[Scheme, CurrentScaling | None] = {}


def _pow2_tensor_fake_quantize(scaler: CurrentScaling | DelayedScaling, x: np.ndarray
                               ) -> np.ndarray | None:
    """``scaler.quantize(x).dequantize(np.float32)`` for a float32 ``x`` and a float32
    (Transformer Engine order) scaler with power-of-two scales (MS-AMP's operands, and the
    twins of :func:`_pow2_tensor_twin`), in one fused rounding; None where it does not apply,
    before the scaler has recorded anything (the caller then quantises as before).

    A per-tensor scale is the one-row case of the rowwise kernel
    :func:`floatlab.quant.axiswise._round_rows_pow2`: its proof covers exactly
    ``fp8(clamp(float32(x) * s)) * float32(1 / s)`` with ``s = 2**k`` a float32 power of two,
    which is the general path (:func:`floatlab.quant.delayed._scaled` with ``float32=True``,
    saturating, then :meth:`ScaledTensor.dequantize`), and it returns None where a product
    would be clamped (a delayed scale that lags: the general path saturates) or its magic
    constants leave float32's normal range. The scale and the history follow the scaler's own
    rules (the same calls :meth:`DelayedScaling.quantize` makes: the history's scale, or the
    current amax's on the first call, then the amax recorded); a NaN / inf raises the same
    ValueError, from the same amax. Tests check it bit-equal to the general path on
    adversarial inputs and training byte-identical without it (switch ``_POW2_FUSED``)."""
    if not (_POW2_FUSED and scaler.power_of_two and scaler.float32
            and type(x) is np.ndarray and x.dtype == np.float32 and x.size):
        return None
    # max|x| as max(max x, -min x): two reductions and no |x| temporary (a third of
    # _as_float_with_amax's time on the lab's small tensors); a NaN makes both NaN and an inf
    # one of them inf, and then _as_float_with_amax raises its ValueError
    high, low = float(x.max()), float(x.min())
    amax = abs(high) if high >= -low else abs(low)
    if not math.isfinite(amax):
        if getattr(scaler, "nonfinite", "raise") == "record":
            return None  # the general path records Transformer Engine's amax
        _as_float_with_amax(x)
    delayed = isinstance(scaler, DelayedScaling)
    scale = scaler.scale if delayed else None
    if scale is None:
        scale = scaler._scale_of(amax) if delayed else scaler.scale_for(amax)
    if not scale < _TWIN_LIMIT:  # (the twin's overflowed scale, or beyond: the general path)
        return None
    values = _round_rows_pow2(np.ascontiguousarray(x), np.array(amax, np.float32),
                              np.array(scale, np.float32), scaler.fmt)
    if values is None:
        return None
    if delayed:
        scaler._record(amax, scale)
    return values


_POW2_FUSED = True  # switch for the tests (per-tensor power-of-two operands: the general path)
_TWIN_LIMIT = 2.0**127  # the twin's scale when fl32(fmax / amax) overflowed: not a twin then
_POW2_TWINS = True  # switch for the tests, which check training bit-identical without
