"""Scaling for narrow formats: per-tensor scales, delayed scaling, and MX block scales.

FP8 (and narrower) formats hold a tiny range, so a tensor is multiplied by a **scale** before
it is rounded and divided by it afterwards. Three recipes, all rounding through
:func:`floatlab.round`:

* **Per-tensor** (FP8 paper, Micikevicius et al. 2022): ``scale = fmt.max / amax / 2**margin``
  moves the tensor's largest magnitude ``amax = max|x|`` to the top of the format, leaving
  ``margin`` binades of headroom. :func:`amax_scale` computes it, :func:`quantize_scaled`
  applies it and returns a :class:`ScaledTensor`.
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
  format has one (E4M3FN, E5M2) and raises where it has none (FP6 / FP4); +-inf saturate to
  +-max.
* **Saturation** is the default: values beyond the format's max become +-max (the FP8 recipes
  and the MX spec both clip), not inf / NaN.
* **Arithmetic**: ``x * scale`` is the float64 product (Transformer Engine computes it in
  float32). A general scale rounds that product once in float64 before :func:`floatlab.round`
  rounds it to the format; with ``power_of_two=True`` (and always for MX) the scale is a power of
  two, so scaling is exact and :func:`floatlab.round` is the only rounding.
* **Empty arrays** have no amax: the functions that need one raise; :func:`quantize_scaled` with
  an explicit scale and :func:`mx_quantize` return empty results of the same shape.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from floatlab.formats import Format, get_format
from floatlab.rounding import as_float_array
from floatlab.rounding import round as round_to_format

__all__ = [
    "amax_scale",
    "quantize_scaled",
    "ScaledTensor",
    "DelayedScaling",
    "mx_scale",
    "mx_quantize",
    "MXTensor",
]

_E8M0_EMIN, _E8M0_EMAX = -127, 127  # E8M0 holds exactly the powers 2**-127 .. 2**127


# ================================================================================ input checks

def _as_float64(x: Any, name: str = "x") -> np.ndarray:
    """x as a float64 array (a new array or x itself; never written to)."""
    return as_float_array(x, name=name).astype(np.float64, copy=False)


def _signed_format(fmt: Any, what: str) -> Format:
    fmt = get_format(fmt)
    if not (fmt.signed and fmt.has_zero):
        raise ValueError(
            f"{fmt.name} cannot be {what}: it has no sign bit or no zero, so it cannot hold a "
            "tensor's negative or zero values; use a signed format such as 'e4m3fn', 'e5m2', "
            "'e3m2', 'e2m3' or 'e2m1'"
        )
    return fmt


def _check_int(value: Any, name: str, minimum: int, hint: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {value!r}; {hint}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}; {hint}")
    return int(value)


def _check_margin(margin: Any) -> int:
    return _check_int(
        margin, "margin", 0, "the margin is the headroom in powers of two (0, 1, 2, ...)"
    )


def _amax(arr: np.ndarray, what: str = "x") -> float:
    """max|arr| of a non-empty, all-finite array, as a Python float."""
    if arr.size == 0:
        raise ValueError(
            f"{what} is empty, so it has no amax to compute a scale from; pass a scale "
            "explicitly or a non-empty array"
        )
    amax = float(np.max(np.abs(arr)))
    if not math.isfinite(amax):
        _raise_nonfinite(arr, what)
    return amax


def _raise_nonfinite(arr: np.ndarray, what: str) -> None:
    n_nan = int(np.count_nonzero(np.isnan(arr)))
    n_inf = int(np.count_nonzero(np.isinf(arr)))
    raise ValueError(
        f"{what} holds {n_nan} NaN and {n_inf} inf values, so its amax is undefined and no "
        "scale can be computed; remove or replace them first (e.g. np.nan_to_num), or pass "
        "an explicit scale to quantize_scaled"
    )


# ================================================================================ per-tensor

def amax_scale(x: Any, fmt: str | Format | Any, margin: int = 0, *,
               power_of_two: bool = False) -> float:
    """The per-tensor scale ``fmt.max / amax / 2**margin``, with ``amax = max|x|``.

    This is the exact form of the FP8 paper and of Transformer Engine's delayed scaling
    (``fp8_max / amax / 2**margin``, computed in floating point, so not a power of two): the
    scaled amax lands on ``fmt.max / 2**margin`` up to one float64 rounding, and ``margin``
    binades are left free for a tensor that grows.

    Parameters
    ----------
    x : an array (its amax is taken) or a single amax; NaN / inf raise ValueError.
    fmt : a signed format with zero (a name, a :class:`Format` or a dtype).
    margin : headroom in powers of two, an int >= 0.
    power_of_two : round the scale *down* to a power of two, ``2**floor(log2(...))``, computed
        from the exponents (exact, no log2), so that ``x * scale`` is exact and the scaled amax
        lies in ``(fmt.max / 2**(margin + 1), fmt.max / 2**margin]``.

    amax = 0 gives 1.0 (Transformer Engine's initial scale; zeros quantise exactly anyway).
    A scale beyond float64's range (amax below about ``fmt.max / 1.8e308``) raises ValueError.

    >>> amax_scale([0.5, -3.5, 2.0], "e4m3fn")                   # 448 / 3.5
    128.0
    >>> amax_scale(3.0, "e4m3fn"), amax_scale(3.0, "e4m3fn", power_of_two=True)
    (149.33333333333334, 128.0)
    >>> amax_scale(0.25, "e2m1", margin=1)                       # 6 / 0.25 / 2
    12.0
    """
    fmt = _signed_format(fmt, "scaled into")
    margin = _check_margin(margin)
    amax = _amax(_as_float64(x))
    return _scale_from_amax(amax, fmt, margin, power_of_two)


def _scale_from_amax(amax: float, fmt: Format, margin: int, power_of_two: bool) -> float:
    if amax == 0:
        return 1.0
    if power_of_two:
        # Largest k with amax * 2**k <= fmt.max / 2**margin, from the exact frexp exponents:
        # amax = ma * 2**ea and max = mf * 2**ef with ma, mf in [0.5, 1).
        ma, ea = math.frexp(amax)
        mf, ef = math.frexp(fmt.max)
        k = ef - ea - (1 if ma > mf else 0) - margin
        scale = math.ldexp(1.0, k) if k <= 1023 else math.inf
    else:
        with np.errstate(over="ignore", under="ignore"):
            scale = float(np.float64(fmt.max) / amax / np.float64(2.0) ** margin)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(
            f"the scale {fmt.max:g} / {amax:g} / 2**{margin} is not a positive float64 "
            f"(it is {scale!r}): amax {amax:g} is too small or the margin too large for "
            f"{fmt.name}; pass a scale explicitly"
        )
    return scale


@dataclass(frozen=True, eq=False)
class ScaledTensor:
    """A tensor quantised with one scale: ``values`` are the format's values of ``x * scale``.

    Attributes
    ----------
    values : float64 array, the rounded ``x * scale`` (every entry a value of ``fmt``).
    scale : the scale that was applied.
    fmt : the :class:`Format` of ``values``.
    n_saturated : how many finite entries of ``x`` landed beyond the format's range, i.e.
        round-to-nearest would overflow them: ``|x * scale|`` above ``max + ulp(max) / 2``
        (E4M3FN: 464). Saturation clipped them to +-max (``saturate=False``: inf / NaN).

    The arrays are read-only.

    >>> q = quantize_scaled([1.0, -2.0, 4.0], "e4m3fn", scale=150.0)
    >>> q
    ScaledTensor(float8_e4m3fn, shape (3,), scale 150, 1 saturated)
    >>> q.values                                  # 4 * 150 = 600 saturates to 448
    array([ 144., -288.,  448.])
    """

    values: np.ndarray
    scale: float
    fmt: Format
    n_saturated: int = 0

    def dequantize(self) -> np.ndarray:
        """``values / scale`` as float64 (exact when the scale is a power of two)."""
        return self.values / self.scale

    @property
    def shape(self) -> tuple[int, ...]:
        return self.values.shape

    def __repr__(self) -> str:
        return (
            f"ScaledTensor({self.fmt.name}, shape {self.values.shape}, scale {self.scale:.6g}, "
            f"{self.n_saturated} saturated)"
        )


def quantize_scaled(
    x: Any,
    fmt: str | Format | Any,
    scale: float | None = None,
    margin: int = 0,
    *,
    power_of_two: bool = False,
    rounding: str = "nearest_even",
    saturate: bool = True,
    rng: np.random.Generator | int | None = None,
) -> ScaledTensor:
    """Scale ``x``, round it to ``fmt`` and keep the scale: ``round(x * scale)``.

    Parameters
    ----------
    x : numbers or an array (float64 / float32 / ints / ml_dtypes floats). Never modified.
    fmt : a signed format with zero.
    scale : a positive finite number; None computes ``amax_scale(x, fmt, margin,
        power_of_two=power_of_two)`` from ``x`` itself (NaN / inf / empty ``x`` then raise).
    margin, power_of_two : passed to :func:`amax_scale` when ``scale`` is None.
    rounding, saturate, rng : passed to :func:`floatlab.round`. ``saturate=True`` (default)
        clips to +-max as the FP8 recipes do; False gives inf / NaN on overflow.

    ``x * scale`` is computed in float64 (one rounding unless the scale is a power of two),
    then rounded to the format once by :func:`floatlab.round`.

    >>> q = quantize_scaled([0.001, 0.5, -1.0], "e4m3fn")
    >>> q.scale, q.values.tolist()
    (448.0, [0.4375, 224.0, -448.0])
    >>> quantize_scaled([1e-3, 0.3], "e5m2", scale=1.0).values.tolist()   # unscaled
    [0.0009765625, 0.3125]
    >>> quantize_scaled([3.0], "e4m3fn", power_of_two=True).scale   # exact scaling
    128.0
    """
    fmt = _signed_format(fmt, "scaled into")
    margin = _check_margin(margin)
    arr = _as_float64(x)
    if scale is None:
        scale = _scale_from_amax(_amax(arr), fmt, margin, power_of_two)
    elif margin or power_of_two:
        raise ValueError(
            "margin and power_of_two shape a scale computed from amax; with an explicit scale "
            "they would be ignored: pass either scale=... or margin / power_of_two"
        )
    else:
        scale = _check_scale(scale)
    with np.errstate(over="ignore"):
        scaled = arr * scale
    values = round_to_format(scaled, fmt, rounding=rounding, saturate=saturate, rng=rng)
    n_saturated = _count_beyond_range(scaled[np.isfinite(arr)], fmt)
    values.setflags(write=False)
    return ScaledTensor(values=values, scale=scale, fmt=fmt, n_saturated=n_saturated)


def _count_beyond_range(scaled: np.ndarray, fmt: Format) -> int:
    """How many values round-to-nearest would overflow: |v| beyond max + ulp(max) / 2.

    At exactly that threshold the tie goes to the even neighbour: up (overflow) when max's code
    is odd (fp16 65520 -> inf, E2M1 7 -> overflow), down when it is even (E4M3FN 464 -> 448).
    A float64 rounding of a non-power-of-two scale can put the amax entry a hair above max; it
    rounds to max and is not counted.
    """
    threshold = fmt.max + math.ldexp(1.0, fmt.emax - fmt.man_bits - 1)  # inf for float64
    mag = np.abs(scaled)
    beyond = mag > threshold
    if fmt.max_code & 1:
        beyond |= mag == threshold
    return int(np.count_nonzero(beyond))


def _check_scale(scale: Any) -> float:
    if isinstance(scale, (bool, np.bool_)) or not isinstance(
        scale, (int, float, np.integer, np.floating)
    ):
        raise TypeError(
            f"scale must be a positive number (one scale per tensor), got {scale!r}; "
            "for one scale per block use mx_quantize"
        )
    value = float(scale)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"scale must be positive and finite, got {value!r}")
    return value


# ================================================================================ delayed

class DelayedScaling:
    """Transformer Engine's delayed scaling: the scale comes from the previous steps' amaxes.

    Each :meth:`quantize` call uses ``scale = fmt.max / max(history) / 2**margin`` computed
    from the history *before* it sees ``x`` (so the scale needs no extra pass over the tensor),
    then appends ``amax(x)``; the history keeps the last ``history_len`` amaxes.

    * **First call** (empty history): floatlab uses the current amax, i.e. just-in-time
      scaling. (Transformer Engine starts from scale 1.0 instead.)
    * **All-zero history**: scale 1.0, as :func:`amax_scale` gives for amax 0.
    * **NaN / inf in x**: ValueError, and the history is left unchanged.

    >>> ds = DelayedScaling("e4m3fn", history_len=2)
    >>> ds.scale is None                         # nothing seen yet
    True
    >>> ds.quantize([1.0, -2.0]).scale           # first call: its own amax, 448 / 2
    224.0
    >>> ds.quantize([0.5, 4.0]).n_saturated      # still 224: 4.0 * 224 > 448 saturates
    1
    >>> ds.history, ds.scale                     # the next call uses 448 / max(2, 4)
    ((2.0, 4.0), 112.0)
    """

    def __init__(self, fmt: str | Format | Any, history_len: int = 16, margin: int = 0, *,
                 power_of_two: bool = False):
        self.fmt = _signed_format(fmt, "scaled into")
        self.history_len = _check_int(
            history_len, "history_len", 1, "it is how many past amaxes are kept"
        )
        self.margin = _check_margin(margin)
        self.power_of_two = bool(power_of_two)
        self._history: deque[float] = deque(maxlen=self.history_len)

    @property
    def history(self) -> tuple[float, ...]:
        """The recorded amaxes, oldest first (at most ``history_len``)."""
        return tuple(self._history)

    @property
    def scale(self) -> float | None:
        """The scale the next :meth:`quantize` will use (None before the first call)."""
        if not self._history:
            return None
        return _scale_from_amax(max(self._history), self.fmt, self.margin, self.power_of_two)

    def quantize(self, x: Any, *, rounding: str = "nearest_even",
                 rng: np.random.Generator | int | None = None) -> ScaledTensor:
        """Quantise ``x`` (saturating) with the history's scale, then record ``amax(x)``."""
        arr = _as_float64(x)
        amax = _amax(arr)
        scale = self.scale
        if scale is None:
            scale = _scale_from_amax(amax, self.fmt, self.margin, self.power_of_two)
        out = quantize_scaled(arr, self.fmt, scale=scale, rounding=rounding, rng=rng)
        self._history.append(amax)
        return out

    def __repr__(self) -> str:
        return (
            f"DelayedScaling({self.fmt.name}, history_len={self.history_len}, "
            f"margin={self.margin}, {len(self._history)} amaxes recorded)"
        )


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
        _raise_nonfinite(amax, "amax")
    if np.any(amax < 0):
        raise ValueError("amax must be >= 0 (it is a maximum of magnitudes)")
    return _mx_scale(amax, fmt)


def _mx_scale(amax: np.ndarray, fmt: Format) -> np.ndarray:
    _, e = np.frexp(amax)  # amax = m * 2**e, m in [0.5, 1): floor(log2(amax)) = e - 1
    k = e.astype(np.int64) - 1 - fmt.emax
    too_big = (amax > 0) & (k > _E8M0_EMAX)
    if np.any(too_big):
        worst = float(np.max(amax[too_big]))
        raise ValueError(
            f"a block amax of {worst:g} needs an MX scale above 2**127, E8M0's largest value "
            f"(with {fmt.name} elements, amax must be below 2**{128 + fmt.emax}); scale the "
            "tensor down first"
        )
    k = np.where(amax > 0, np.maximum(k, _E8M0_EMIN), _E8M0_EMIN)
    return np.ldexp(1.0, k)


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

    Per block: ``X = mx_scale(amax)`` (an E8M0 power of two), and each element becomes
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
        _raise_nonfinite(arr, "x")

    moved = np.moveaxis(arr, axis, -1)
    n = moved.shape[-1]
    n_blocks = -(-n // block_size)
    pad = n_blocks * block_size - n
    if pad:  # zeros never change a block's amax
        moved = np.concatenate([moved, np.zeros(moved.shape[:-1] + (pad,))], axis=-1)
    blocks = moved.reshape(moved.shape[:-1] + (n_blocks, block_size))
    if blocks.size:
        amax = np.max(np.abs(blocks), axis=-1, keepdims=True)
    else:
        amax = np.zeros(blocks.shape[:-1] + (1,))
    scales = _mx_scale(amax, fmt)
    elements = round_to_format(blocks / scales, fmt, rounding=rounding, saturate=True, rng=rng)

    elements = elements.reshape(moved.shape)[..., :n]
    elements = np.ascontiguousarray(np.moveaxis(elements, -1, axis))
    scales = np.ascontiguousarray(np.moveaxis(scales[..., 0], -1, axis))
    elements.setflags(write=False)
    scales.setflags(write=False)
    return MXTensor(elements=elements, scales=scales, fmt=fmt, block_size=block_size, axis=axis)
