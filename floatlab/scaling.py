"""Scaling for narrow formats: per-tensor scales, delayed scaling, and MX block scales.

This module keeps its names importable; the code lives in :mod:`floatlab.quant`: the per-tensor
recipes in :mod:`floatlab.quant.delayed` (re-exported here), and :func:`mx_quantize` /
:func:`mx_scale` are thin wrappers over :func:`floatlab.quantize` with an OCP MX
:class:`~floatlab.Scheme` (E8M0 scales, the floor rule), the one block-scaling core.

FP8 (and narrower) formats hold a tiny range, so a tensor is multiplied by a **scale** before
it is rounded and divided by it afterwards. Three recipes, all rounding through
:func:`floatlab.round`:

* **Per-tensor** (FP8 paper, Micikevicius et al. 2022): ``scale = fmt.max / amax / 2**margin``
  moves the tensor's largest magnitude ``amax = max|x|`` to the top of the format, leaving
  ``margin`` binades of headroom. :func:`amax_scale` computes it, :func:`quantize_scaled`
  applies it and returns a :class:`ScaledTensor` (in float64; ``float32=True`` follows
  Transformer Engine's float32 order, as the lab's FP8 recipes do: see
  :mod:`floatlab.quant.delayed`).
* **Delayed scaling** (NVIDIA Transformer Engine): :class:`DelayedScaling` takes the scale from
  a short history of *previous* amaxes, then records the new one.
* **MX block scaling** (OCP Microscaling spec v1.0): :func:`mx_quantize` gives every block of
  ``block_size`` (32) consecutive elements one shared power-of-two scale
  ``X = 2**(floor(log2(amax)) - emax_elem)``, stored in E8M0, and rounds the elements ``x / X``
  to the element format (FP8 / FP6 / FP4) with saturation. It returns an :class:`MXTensor`.

>>> import numpy as np
>>> from floatlab.scaling import amax_scale, quantize_scaled, mx_quantize
>>> x = np.array([0.5, -3.5, 2.0])
>>> amax_scale(x, "e4m3fn"), amax_scale(x, "e4m3fn", margin=2)   # 448 / 3.5 = 128
(128.0, 32.0)
>>> q = quantize_scaled([0.01, -0.3, 0.07], "e4m3fn")
>>> q.values, q.dequantize()
(array([  15., -448.,  104.]), array([ 0.01004464, -0.3       ,  0.06964286]))
>>> mx = mx_quantize([0.3, 0.1, -0.05, 0.0], "e2m1", block_size=4)
>>> mx.scales, mx.elements                  # amax 0.3: scale 2**(-2 - 2); -0.8 -> -1
(array([0.0625]), array([ 4. ,  1.5, -1. ,  0. ]))
>>> mx.dequantize().tolist()
[0.25, 0.09375, -0.0625, 0.0]

Conventions (the choices a reader should know):

* **amax = 0** (an all-zero tensor): the per-tensor scale is 1.0 (Transformer Engine's initial
  scale, which it keeps while amax is 0); any scale quantises zeros exactly. An all-zero MX block
  gets the smallest E8M0 scale, 2**-127, as the OCP reference code (microxcaling) gives it.
* **NaN and +-inf** have no amax: every function that computes an amax from ``x``
  (:func:`amax_scale`, :func:`quantize_scaled` without ``scale``, :meth:`DelayedScaling.quantize`,
  :func:`mx_quantize`) raises ValueError, so a NaN never hides inside a quantised tensor.
  (The OCP reference code instead gives such an MX block the NaN scale, E8M0's 0xFF, which makes
  all 32 elements NaN; Transformer Engine keeps the previous scale.) With an explicit ``scale``,
  :func:`quantize_scaled` passes NaN / inf to :func:`floatlab.round`: NaN stays NaN where the
  format has one (E4M3FN, E5M2) and raises where it has none (FP6 / FP4). +-inf is *not*
  saturated where the format has an infinity: ``quantize_scaled([inf], "e5m2", scale=1.0)``
  gives inf even with the default ``saturate=True`` (floatlab.round's rule: saturation clips
  finite values that overflow; an infinite input stays infinite in a format that holds it).
  In formats without inf, +-inf become +-max with
  ``saturate=True`` (E4M3FN, FP6, FP4) and, with ``saturate=False``, NaN (E4M3FN) or an error
  (FP6 / FP4, which have no NaN).
* **Saturation** is the default: finite values beyond the format's max become +-max (the FP8
  recipes and the MX spec both clip), not inf / NaN.
* **Arithmetic**: ``x * scale`` is the float64 product (Transformer Engine computes it in
  float32). A general scale rounds that product once in float64 before :func:`floatlab.round`
  rounds it to the format; with ``power_of_two=True`` (and always for MX) the scale is a power of
  two, so scaling is exact and :func:`floatlab.round` is the only rounding.
* **Empty arrays** have no amax: the functions that need one raise; :func:`quantize_scaled` with
  an explicit scale and :func:`mx_quantize` return empty results of the same shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from floatlab.formats import Format
from floatlab.quant.delayed import (
    ScaledTensor,
    _as_float64,
    _check_int,
    _nonfinite_amax,
    _signed_format,
    amax_scale,
    quantize_scaled,
)
from floatlab.quant.scalers import CurrentScaling, DelayedScaling

__all__ = [
    "amax_scale",
    "quantize_scaled",
    "ScaledTensor",
    "CurrentScaling",
    "DelayedScaling",
    "mx_scale",
    "mx_quantize",
    "MXTensor",
]

# ================================================================================ MX

def mx_scale(amax: Any, element_fmt: str | Format | Any = "e2m1") -> np.ndarray:
    """The MX shared scale of blocks with these amaxes: ``2**(floor(log2(amax)) - emax_elem)``.

    ``emax_elem`` is the element format's largest exponent (E4M3FN 8, E5M2 15, E3M2 4, E2M3 2,
    E2M1 2), so a block's largest element lands in the element format's top binade. The
    exponent comes from ``np.frexp`` (exact; ``log2`` can round up just below a power of two)
    and is clamped below at E8M0's smallest value 2**-127, so every scale is an E8M0 value.
    amax = 0 gives 2**-127. An amax that would need a scale above 2**127 (amax >= 2**(128 +
    emax_elem)), a negative amax, NaN or inf raise ValueError.

    >>> mx_scale([0.3, 1.0, 6.0, 7.99, 8.0], "e2m1")      # floor(log2) - 2
    array([0.0625, 0.25  , 1.    , 1.    , 2.    ])
    >>> float(mx_scale(0.0, "e4m3fn")) == 2.0**-127
    True
    """
    fmt = _signed_format(element_fmt, "an MX element format")
    amax = _as_float64(amax, name="amax")
    if amax.size and not np.all(np.isfinite(amax)):
        _nonfinite_amax(amax, "amax")
    if np.any(amax < 0):
        raise ValueError("amax must be >= 0 (it is a maximum of magnitudes)")
    if amax.size == 0:  # no blocks: no scales, the shape kept
        return np.zeros(amax.shape)
    return _mx_scale(amax, fmt)


def _mx_scale(amax: np.ndarray, fmt: Format) -> np.ndarray:
    from floatlab.quant.scales import block_scales
    from floatlab.quant.scheme import Scheme

    try:
        scales = block_scales(amax, Scheme(fmt, 32, "e8m0", "floor"))[0]
    except ValueError:
        raise ValueError(
            f"an amax of {float(np.max(amax)):g} needs an MX scale above 2**127, E8M0's "
            f"largest value (with {fmt.name} elements, amax must be below "
            f"2**{128 + fmt.emax}); scale the tensor down first"
        ) from None
    return np.asarray(scales, dtype=np.float64)


@dataclass(frozen=True, eq=False)
class MXTensor:
    """An MX-quantised tensor: element values and one power-of-two scale per block.

    Attributes
    ----------
    elements : float64 array of ``x``'s shape; every entry a value of ``fmt``.
    scales : float64 array of E8M0 values (powers of two in [2**-127, 2**127]); the shape of
        ``x`` with the blocked axis replaced by the number of blocks, ``ceil(n / block_size)``.
    fmt : the element :class:`Format`.
    block_size : elements per block (the last block along the axis may be shorter).
    axis : the (non-negative) axis along which blocks run.

    The arrays are read-only.

    >>> mx = mx_quantize(np.arange(1.0, 9.0).reshape(2, 4), "e2m1", block_size=4)
    >>> mx
    MXTensor(float4_e2m1fn, shape (2, 4), 2 blocks of 4 along axis 1)
    >>> mx.scales                               # amax 4 -> 2**(2 - 2); amax 8 -> 2**(3 - 2)
    array([[1.],
           [2.]])
    >>> mx.dequantize()                         # 5 and 7 are ties: to even (4 and 8)
    array([[1., 2., 3., 4.],
           [4., 6., 8., 8.]])
    """

    elements: np.ndarray
    scales: np.ndarray
    fmt: Format
    block_size: int
    axis: int

    def expanded_scales(self) -> np.ndarray:
        """The scales repeated along the axis to the shape of ``elements``."""
        n = self.elements.shape[self.axis]
        return np.repeat(self.scales, self.block_size, axis=self.axis).take(
            np.arange(n), axis=self.axis
        )

    def dequantize(self) -> np.ndarray:
        """``elements * scale`` per block, as float64 (exact: the scales are powers of two)."""
        return self.elements * self.expanded_scales()

    @property
    def shape(self) -> tuple[int, ...]:
        return self.elements.shape

    @property
    def scale_exponents(self) -> np.ndarray:
        """The scales as integer exponents (``scales == 2.0**scale_exponents``)."""
        return np.frexp(self.scales)[1].astype(np.int64) - 1

    def __repr__(self) -> str:
        n = self.scales.size
        return (
            f"MXTensor({self.fmt.name}, shape {self.elements.shape}, {n} block{'s' * (n != 1)} "
            f"of {self.block_size} along axis {self.axis})"
        )


def mx_quantize(
    x: Any,
    element_fmt: str | Format | Any = "e2m1",
    block_size: int = 32,
    axis: int = -1,
    *,
    rounding: str = "nearest_even",
    rng: np.random.Generator | int | None = None,
) -> MXTensor:
    """Quantise ``x`` to an MX format: blocks of ``block_size`` along ``axis`` share a scale.

    A thin wrapper over :func:`floatlab.quantize` with ``Scheme(element_fmt, block_size,
    "e8m0", "floor", rounding=rounding, axis=axis)``. Per block: ``X = mx_scale(amax)`` (an
    E8M0 power of two), and each element becomes
    ``floatlab.round(x / X, element_fmt, rounding=rounding, saturate=True)``. With E2M1
    (max 6, emax 2) a block's amax lands in [4, 8), so its largest elements may be clipped to
    6: the spec accepts that for a scale that is a pure power of two.

    Parameters
    ----------
    x : an array with at least one dimension (0-d is refused). Never modified.
    element_fmt : the element format: ``"e2m1"`` (MXFP4), ``"e2m3"`` / ``"e3m2"`` (MXFP6),
        ``"e4m3fn"`` / ``"e5m2"`` (MXFP8), or any signed format with zero.
    block_size : elements per block, an int >= 1 (the spec uses 32). When the axis length is
        not a multiple, the last block is shorter and scaled by its own amax.
    axis : the axis along which blocks run (default the last).
    rounding, rng : passed to :func:`floatlab.round` (e.g. ``"stochastic"`` with a seed).

    NaN or inf anywhere raises ValueError (see the module notes); an all-zero block gets the
    scale 2**-127; an empty array gives empty elements and scales. ``x / X`` is exact in float64
    except for an element more than about 2**-1000 times its block's amax, which underflows there
    (round to nearest gives 0 either way; a directed mode may differ in the last bit).

    >>> x = np.array([0.3, 0.1, -0.05, 0.0, 100.0, 3.0, -7.0, 0.5])
    >>> mx = mx_quantize(x, "e2m1", block_size=4)
    >>> mx.scales, mx.scale_exponents
    (array([ 0.0625, 16.    ]), array([-4,  4]))
    >>> mx.elements
    array([ 4. ,  1.5, -1. ,  0. ,  6. ,  0. , -0.5,  0. ])
    >>> mx.dequantize().tolist()               # 100 / 16 = 6.25 -> 6; 3 / 16 underflows
    [0.25, 0.09375, -0.0625, 0.0, 96.0, 0.0, -8.0, 0.0]
    """
    fmt = _signed_format(element_fmt, "an MX element format")
    block_size = _check_int(block_size, "block_size", 1, "the MX spec uses 32")
    arr = _as_float64(x)
    if arr.ndim == 0:
        raise ValueError(
            "x is 0-d, but MX blocks run along an axis; pass np.atleast_1d(x)"
        )
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"axis must be an int, got {axis!r}")
    if not -arr.ndim <= axis < arr.ndim:
        raise ValueError(f"axis {axis} is out of range for an array of shape {arr.shape}")
    axis = int(axis) % arr.ndim
    if arr.size and not np.all(np.isfinite(arr)):
        _nonfinite_amax(arr, "x")

    if arr.size == 0:
        empty_scales = list(arr.shape)
        empty_scales[axis] = -(-arr.shape[axis] // block_size)
        elements, scales = arr.copy(), np.zeros(empty_scales)
    else:
        from floatlab.quant.quantize import quantize
        from floatlab.quant.scheme import Scheme

        scheme = Scheme(fmt, block_size, "e8m0", "floor", rounding=rounding, axis=axis)
        q = quantize(arr, scheme, rng=rng)
        elements = np.ascontiguousarray(
            q._elements.reshape(q._padded)[tuple(slice(0, n) for n in arr.shape)],
            dtype=np.float64)
        scales = np.asarray(q.scales, dtype=np.float64)
    elements.setflags(write=False)
    scales.setflags(write=False)
    return MXTensor(elements=elements, scales=scales, fmt=fmt, block_size=block_size, axis=axis)
