"""Per-tensor scaling: the amax scale, current scaling and delayed scaling.

The FP8 recipes' per-tensor convention (FP8 paper, Transformer Engine, torchao's tensorwise
float8): the *multiplier* ``scale = fmt.max / amax / 2**margin`` moves the tensor's largest
magnitude to the top of the format; the stored values are ``round(x * scale)`` and mean
``values / scale``. (Block schemes in :mod:`floatlab.quant.scheme` store the reciprocal, the
dequantisation scale ``amax / fmt.max``, as MX, NVFP4 and DeepSeek-V3 do.)

One implementation: :func:`quantize_scaled` (and so :class:`CurrentScaling` and
:class:`DelayedScaling`) runs the quantisation core's scale-clip-round step
(``floatlab.quant.elements._round_scaled``) with the multiply convention, in float64: the
product ``x * scale`` is one float64 rounding (none for a power-of-two scale), then
:func:`floatlab.round` rounds it once to the format, saturating.

Transformer Engine's order of operations (``recipe_common.cuh``, ``delayed_scaling.cu``,
``dequantize_fp8.cuh``), available with ``float32=True`` and used by the lab's FP8 recipes:
``scale = fp8_max * 2**-margin / amax`` as one float32 division (``__fdiv_rn``; amax below
``amax_epsilon`` is raised to it; amax 0 gives 1.0; an infinite quotient becomes float32's
max; TE's ``force_pow_2_scales`` clears the quotient's mantissa bits); quantise
``fp8(float32(x) * scale)``: the product rounded to float32 (round to nearest even, as
``__fmul_rn``), then that float32 rounded to FP8 by floatlab, saturating (CUDA's
``__NV_SATFINITE`` conversion): a double rounding on purpose, since that is what the hardware
does; ``scale_inv = 1 / scale`` in float32; dequantise ``x_fp8 * scale_inv`` in float32. The
default (``float32=False``) keeps float64 throughout and dequantises by dividing by the scale
(exact for power-of-two scales): the scale and the product then carry no float32 rounding, a
difference of at most 2**-24 relative before the FP8 rounding (which can move an element by
one FP8 step where the float32 rounding crosses an FP8 midpoint).

* :func:`amax_scale` computes the scale, :func:`quantize_scaled` applies it.
* :mod:`floatlab.quant.scalers` builds Transformer Engine's two per-tensor scalers on them:
  ``CurrentScaling`` (``Float8CurrentScaling``: the scale comes from the tensor's own amax at
  every call, with ``amax_epsilon`` as a floor on amax) and ``DelayedScaling`` (the scale comes
  from a history of previous amaxes, reduced by ``amax_compute_algo``, "max" over the history
  or "most_recent", with ``amax_epsilon``).

>>> amax_scale([0.5, -2.0], "e4m3fn")                          # 448 / 2
224.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from floatlab._rounding_fast import per_format
from floatlab._validate import check_flag, resolve_rng
from floatlab.formats import Format, get_format
from floatlab.quant.blocks import raise_nonfinite
from floatlab.quant.elements import _format_fits_float32, _round_scaled
from floatlab.quant.te_scale import _scale_from_amax32, _to_float32
from floatlab.rounding import _resolve_mode, as_float_array, overflow_threshold

__all__ = [
    "amax_scale",
    "quantize_scaled",
    "ScaledTensor",
    "AMAX_COMPUTE_ALGOS",
]

AMAX_COMPUTE_ALGOS = ("max", "most_recent")


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
        _nonfinite_amax(arr, what)
    return amax


def _as_float_with_amax(x: Any) -> tuple[np.ndarray, float]:
    """(x as a float32 or float64 array, max|x|), not widened: :func:`_scaled` forms the
    float64 product ``x * scale`` straight from float32 values (float32 -> float64 is exact,
    so it is the product of the widened array), and the amax of a float32 array is the
    widened amax (the widening is exact and increasing; NaN / inf propagate alike)."""
    # A float32 / float64 ndarray is what as_float_array returns unchanged (its type is exactly
    # ndarray: not masked); skip its checks for the per-step callers (the recipes' operands).
    arr = x if type(x) is np.ndarray and x.dtype.type in (np.float32, np.float64) else \
        as_float_array(x, name="x")
    return arr, _amax(arr)


def _as_float_with_te_amax(x: Any) -> tuple[np.ndarray, float, float]:
    """(x as in :func:`_as_float_with_amax`, max|x| with NaN propagating, Transformer Engine's
    amax): TE's amax kernels reduce ``fmaxf(|x|, max)`` from 0, so NaN entries are ignored
    (an all-NaN tensor has amax 0) and an inf gives inf. Both amaxes are max|x| when x is
    finite; they are what ``DelayedScaling(nonfinite="record")`` quantises with and records."""
    arr = x if type(x) is np.ndarray and x.dtype.type in (np.float32, np.float64) else \
        as_float_array(x, name="x")
    if arr.size == 0:
        _amax(arr)  # the empty-array error
    peak = float(np.max(np.abs(arr)))
    if math.isfinite(peak):
        return arr, peak, peak
    return arr, peak, float(np.fmax.reduce(np.abs(arr), axis=None, initial=0.0))


def _nonfinite_amax(arr: np.ndarray, what: str) -> None:
    """floatlab.quant.blocks.raise_nonfinite, worded for a per-tensor scale."""
    raise_nonfinite(arr, what, "its amax is undefined and no scale can be computed",
                    "Or pass an explicit scale to quantize_scaled.")


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
    power_of_two = check_flag(power_of_two, "power_of_two")
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
    else:  # Python floats are IEEE doubles: the same two roundings, no NumPy scalar overhead
        # (2.0**margin raises past 2**1023 where NumPy gave inf, and x / inf = 0: refused below)
        scale = fmt.max / amax / 2.0**margin if margin < 1024 else 0.0
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(
            f"the scale {fmt.max:g} / {amax:g} / 2**{margin} is not a positive float64 "
            f"(it is {scale!r}): amax {amax:g} is too small or the margin too large for "
            f"{fmt.name}; pass a scale explicitly"
        )
    return scale


def _scale_rule(float32: Any):
    """The scale computation of the chosen order: TE's float32 one or the float64 one."""
    return _scale_from_amax32 if check_flag(float32, "float32") else _scale_from_amax


@dataclass(frozen=True, eq=False)
class ScaledTensor:
    """A tensor quantised with one scale: ``values`` are the format's values of ``x * scale``.

    Attributes
    ----------
    values : float64 array, the rounded ``x * scale`` (every entry a value of ``fmt``); a
        float32 array with ``float32=True``.
    scale : the scale that was applied (a float32 number with ``float32=True``).
    fmt : the :class:`Format` of ``values``.
    n_saturated : how many finite entries of ``x`` landed beyond the format's range, i.e.
        round-to-nearest would overflow them: ``|x * scale|`` above ``max + ulp(max) / 2``
        (E4M3FN: 464). Saturation clipped them to +-max (``saturate=False``: inf / NaN).
    float32 : whether Transformer Engine's float32 order made it (module docstring): then
        :meth:`dequantize` multiplies by ``scale_inv = float32(1 / scale)`` in float32.

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
    float32: bool = False

    def dequantize(self, dtype: Any = np.float64) -> np.ndarray:
        """``values / scale`` computed in float64 (exact when the scale is a power of two),
        returned as ``dtype``: float32 rounds each float64 quotient once to float32, in the
        same pass (NumPy runs the float64 loop and casts on store), as ``.astype`` would.
        With ``float32=True``: Transformer Engine's ``values * scale_inv`` in float32, with
        ``scale_inv = float32(1 / scale)`` (the float32 products, widened exactly for float64).

        >>> quantize_scaled([1.0], "e4m3fn", scale=3.0).dequantize(np.float32)
        array([1.], dtype=float32)
        >>> te = quantize_scaled([0.00703125], "e4m3fn", scale=5.0, float32=True)
        >>> te.values.tolist(), te.dequantize(np.float32).tolist()   # times float32(1 / 5)
        ([0.03515625], [0.007031250279396772])
        >>> quantize_scaled([0.00703125], "e4m3fn", scale=5.0).dequantize(np.float32).tolist()
        [0.007031249813735485]
        """
        dtype = np.dtype(dtype)
        if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):  # (ints truncated)
            raise TypeError(f"dtype must be float32 or float64, got {dtype}")
        # Values / scale lands in float32's subnormals for tiny tensors: that rounding is the
        # emulation's (TE's own float32 product), not a FloatingPointError under a caller's
        # np.errstate(under="raise"). At the top, an amax near float32's max can round up past
        # it (3.4e38 * 2**-120 = 255.8 rounds to E4M3's 256, and 256 * 2**120 = 2**128): the
        # float32 product is inf, the exact value rounded to float32, not a RuntimeWarning.
        with np.errstate(under="ignore", over="ignore"):
            return self._dequantize(dtype)

    def _dequantize(self, dtype: np.dtype) -> np.ndarray:
        if self.float32:
            scale_inv = np.float32(1.0) / np.float32(self.scale)   # IEEE float32 division
            out = np.multiply(self.values, scale_inv, dtype=np.float32)
            return out if np.dtype(dtype) == np.float32 else out.astype(dtype)
        if np.dtype(dtype) == np.float64:
            return self.values / self.scale
        out = np.empty(self.values.shape, dtype)
        if self.values.size >= _RECIPROCAL_MIN and _reciprocal_is_exact(self.fmt, self.scale,
                                                                          out.dtype):
            return np.multiply(self.values, 1.0 / self.scale, out=out, casting="unsafe")
        return np.divide(self.values, np.float64(self.scale), out=out, casting="unsafe")

    @property
    def shape(self) -> tuple[int, ...]:
        return self.values.shape

    def __repr__(self) -> str:
        return (
            f"ScaledTensor({self.fmt.name}, shape {self.values.shape}, scale {self.scale:.6g}, "
            f"{self.n_saturated} saturated{', float32' if self.float32 else ''})"
        )


def _reciprocal_is_exact(fmt: Format, scale: float, dtype: np.dtype) -> bool:
    """Whether ``v * (1 / scale)`` and ``v / scale`` (float64, then rounded to ``dtype``) agree
    for *every* value v an FP8 / FP6 / FP4 tensor of ``fmt`` can hold, so that dequantising may
    multiply (about twice as fast as dividing) with the same result.

    Proof: exhaustive. The check runs both on all of the format's non-negative values (a few
    hundred at most), inf and NaN included; a negative value and -0 give the negated results
    on both sides (IEEE rounding is symmetric, NaN keeps its sign). The multiplication can
    differ only where v / scale sits within about 2**-52 of a rounding boundary of ``dtype``;
    for the usual float32 output that almost never happens, and then the caller divides.
    Tested against the division (tests/test_mixed_recipe_fastpaths.py).
    """
    grid = _nonnegative_values(fmt)
    if grid is None:
        return False
    with np.errstate(over="ignore", invalid="ignore"):
        divided = (grid / scale).astype(dtype)
        multiplied = (grid * (1.0 / scale)).astype(dtype)
    return divided.tobytes() == multiplied.tobytes()


_RECIPROCAL_MIN = 8192  # smaller tensors: the check would cost more than the division


@per_format
def _nonnegative_values(fmt: Format) -> np.ndarray | None:
    """All values of a format of at most 8 bits with the sign bit clear (inf and NaN
    included), as float64; None for wider formats."""
    if fmt.bits > 8:
        return None
    from floatlab.codec import decode

    codes = np.arange(1 << fmt.bits)
    values = decode(codes, fmt)
    return np.unique(np.concatenate([np.abs(values[np.isfinite(values)]),
                                     [np.inf, np.nan]]))


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
    float32: bool = False,
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
    float32 : Transformer Engine's float32 order (module docstring): x is rounded to float32,
        the scale is TE's float32 quotient (an explicit scale is rounded to float32, as TE
        stores it), ``x * scale`` is one float32 rounding, then the FP8 rounding.

    By default ``x * scale`` is computed in float64 (one rounding unless the scale is a
    power of two), then rounded to the format once by :func:`floatlab.round`: the quantisation
    core's step with the multiply convention (see the module docstring for Transformer
    Engine's float32 order).

    >>> q = quantize_scaled([0.001, 0.5, -1.0], "e4m3fn")
    >>> q.scale, q.values.tolist()
    (448.0, [0.4375, 224.0, -448.0])
    >>> quantize_scaled([1e-3, 0.3], "e5m2", scale=1.0).values.tolist()   # unscaled
    [0.0009765625, 0.3125]
    >>> quantize_scaled([3.0], "e4m3fn", power_of_two=True).scale   # exact scaling
    128.0
    >>> quantize_scaled([3.0], "e4m3fn", float32=True).scale        # float32(448 / 3)
    149.3333282470703
    """
    fmt = _signed_format(fmt, "scaled into")
    margin = _check_margin(margin)
    power_of_two = check_flag(power_of_two, "power_of_two")
    rule = _scale_rule(float32)
    arr = _as_float64(x)
    amax = None
    if scale is None:
        amax = _amax(arr)
        scale = rule(amax, fmt, margin, power_of_two)
    elif margin or power_of_two:
        raise ValueError(
            "margin and power_of_two shape a scale computed from amax; with an explicit scale "
            "they would be ignored: pass either scale=... or margin / power_of_two"
        )
    else:
        scale = _check_scale(scale)
        if float32:
            scale = _check_scale(float(np.float32(scale)))  # TE keeps its scale in float32
    return _scaled(arr, fmt, scale, rounding, saturate, rng, amax, float32=bool(float32))


def _scaled(arr: np.ndarray, fmt: Format, scale: float, rounding: str, saturate: Any, rng: Any,
            amax: float | None = None, *, float32: bool = False) -> ScaledTensor:
    """quantize_scaled's work on a float64 (or float32) array and a checked scale (``amax``:
    max|arr| when the caller has it, e.g. the scaling classes, which computed the scale from
    it). By default the product ``x * scale`` is float64: the scale is a float64 scalar, so
    NumPy widens float32 values (exactly) inside the multiplication. ``float32``: x is taken
    as float32 (rounded to nearest even if wider; its amax is then the float32 of ``amax``, by
    monotonicity) and the scale is a float32 scalar, so NumPy forms the IEEE float32 product,
    Transformer Engine's ``float32(x) * scale``."""
    saturate = check_flag(saturate, "saturate")
    mode = _resolve_mode(rounding)
    rng = resolve_rng(rng, mode == "stochastic", mode)
    peak = amax if amax is not None else float(np.max(np.abs(arr))) if arr.size else math.nan
    finite = math.isfinite(peak)
    if float32:
        if not _format_fits_float32(fmt):
            raise ValueError(f"float32=True rounds float32 products, but {fmt.name} does not "
                             "fit in float32; use float32=False")
        if finite and _to_float32(peak) == math.inf:
            raise ValueError(f"x holds finite values beyond float32's range (amax {peak:g}): "
                             "float32=True rounds x to float32 first, as Transformer Engine "
                             "reads a float32 tensor; scale x down or use float32=False")
        if arr.dtype != np.float32:  # (float64 subnormals flush: the cast's own rounding)
            with np.errstate(under="ignore"):
                arr = arr.astype(np.float32)
        peak_w, scale_w = np.float32(peak), np.float32(scale)
    else:
        peak_w, scale_w = np.float64(peak), np.float64(scale)
    # The quantisation core's step with Transformer Engine's multiply convention.
    values, _, _, scaled = _round_scaled(arr, scale_w, peak_w, fmt, mode, rng, multiply=True,
                                         saturate=saturate, finite=finite)
    with np.errstate(over="ignore"):
        if scaled is None and float(peak_w * scale_w) >= overflow_threshold(fmt):
            # clipped in place: count from the largest |x * scale| first
            scaled = arr * scale_w
    n_saturated = 0 if scaled is None else _count_beyond_range(scaled, fmt, arr)
    values.setflags(write=False)
    return ScaledTensor(values=values, scale=scale, fmt=fmt, n_saturated=n_saturated,
                        float32=float32)


def _count_beyond_range(scaled: np.ndarray, fmt: Format, source: np.ndarray) -> int:
    """How many finite entries of ``source`` round-to-nearest would overflow once scaled
    (``scaled``): |v| beyond max + ulp(max) / 2.

    At exactly that threshold the tie goes to the even neighbour: up (overflow) when max's code
    is odd (fp16 65520 -> inf, E2M1 7 -> overflow), down when it is even (E4M3FN 464 -> 448).
    A float64 rounding of a non-power-of-two scale can put the amax entry a hair above max; it
    rounds to max and is not counted.
    """
    threshold = overflow_threshold(fmt)  # inf for float64
    if not math.isfinite(threshold):
        scaled = scaled[np.isfinite(source)]
    mag = np.abs(scaled)
    beyond = mag > threshold
    if fmt.max_code & 1:
        beyond |= mag == threshold
    count = int(np.count_nonzero(beyond))
    if count and math.isfinite(threshold):
        # inf entries of source scale to inf, beyond any finite threshold: counted above, taken
        # back here (NaN entries compare false). Usually nothing is beyond: no isinf pass.
        count -= int(np.count_nonzero(np.isinf(source)))
    return count


def _check_scale(scale: Any) -> float:
    if isinstance(scale, (bool, np.bool_)) or not isinstance(
        scale, (int, float, np.integer, np.floating)
    ):
        raise TypeError(
            f"scale must be a positive number (one scale per tensor), got {scale!r}; "
            "for one scale per block use mx_quantize or floatlab.quantize"
        )
    value = float(scale)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"scale must be positive and finite, got {value!r}")
    return value


# ================================================================================ current

def _check_epsilon(amax_epsilon: Any) -> float:
    if isinstance(amax_epsilon, (bool, np.bool_)) or not isinstance(
            amax_epsilon, (int, float, np.integer, np.floating)):
        raise TypeError(f"amax_epsilon must be a number >= 0, got {amax_epsilon!r}")
    value = float(amax_epsilon)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"amax_epsilon must be finite and >= 0, got {value!r}")
    return value


def _check_amax(amax: Any) -> float:
    """A given amax: a real number, finite and >= 0 (a string or a negative one was taken)."""
    if isinstance(amax, (bool, np.bool_)) or not isinstance(
            amax, (int, float, np.integer, np.floating)):
        raise TypeError(f"amax must be a number >= 0 (the largest magnitude of a tensor), got "
                        f"{amax!r}; e.g. float(np.max(np.abs(x)))")
    try:
        value = float(amax)
    except OverflowError:  # a Python int beyond float64 (10**400)
        raise ValueError("amax must be finite and >= 0 (a largest magnitude), got an integer "
                         "beyond float64's range") from None
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"amax must be finite and >= 0 (a largest magnitude), got {value!r}")
    return value
