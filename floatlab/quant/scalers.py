"""Transformer Engine's per-tensor scalers: current scaling (each call's own amax) and
delayed scaling (a history of previous amaxes), on :mod:`floatlab.quant.delayed`'s amax scale
and :func:`~floatlab.quant.delayed.quantize_scaled` (the module docstring there gives TE's
float32 order, ``float32=True``, which the lab's FP8 recipes use).

>>> from floatlab.quant.scalers import CurrentScaling
>>> cs = CurrentScaling("e4m3fn", amax_epsilon=1e-3)
>>> cs.quantize([0.5, -2.0]).scale, cs.quantize([0.0, 0.0]).scale   # 448/2; 448/1e-3
(224.0, 448000.0)
"""

from __future__ import annotations

import math
import sys
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from floatlab._validate import check_flag
from floatlab.formats import Format
from floatlab.quant.delayed import (
    AMAX_COMPUTE_ALGOS,
    ScaledTensor,
    _as_float_with_amax,
    _as_float_with_te_amax,
    _check_amax,
    _check_epsilon,
    _check_int,
    _check_margin,
    _scale_rule,
    _scaled,
    _signed_format,
)

__all__ = ["CurrentScaling", "DelayedScaling"]


class _AmaxScaler:
    """What the two scalers share: the scale of an amax. The subclasses set ``fmt``,
    ``margin``, ``amax_epsilon``, ``power_of_two`` and ``_rule`` (:func:`_scale_rule`'s float64
    or float32 order)."""

    fmt: Format
    margin: int
    amax_epsilon: float
    power_of_two: bool
    _rule: Callable[[float, Format, int, bool], float]

    def _scale_of(self, amax: float) -> float:
        """The scale of a checked amax (a float, finite and >= 0): ``fmt.max / max(amax,
        amax_epsilon) / 2**margin`` in the scaler's order (an amax of 0 gives 1.0)."""
        return self._rule(max(amax, self.amax_epsilon), self.fmt, self.margin, self.power_of_two)


class CurrentScaling(_AmaxScaler):
    """Transformer Engine's current (just-in-time) scaling: each call scales by its own amax.

    ``scale = fmt.max / max(amax(x), amax_epsilon) / 2**margin``. ``amax_epsilon`` (TE's
    ``Float8CurrentScaling(amax_epsilon=...)``, default 0) floors the amax, so a tiny or zero
    amax never gives a huge or infinite scale; with amax 0 and no epsilon the scale is 1.0
    (TE's initial scale). NaN / inf in x raise ValueError. ``float32=True``: Transformer
    Engine's float32 order (module docstring), as the lab's FP8 recipes use it.

    >>> cs = CurrentScaling("e4m3fn")
    >>> q = cs.quantize([1.0, -3.5])
    >>> q.scale, q.values.tolist()
    (128.0, [128.0, -448.0])
    """

    def __init__(self, fmt: str | Format | Any, margin: int = 0, *, amax_epsilon: float = 0.0,
                 power_of_two: bool = False, float32: bool = False):
        self.fmt = _signed_format(fmt, "scaled into")
        self.margin = _check_margin(margin)
        self.amax_epsilon = _check_epsilon(amax_epsilon)
        self.power_of_two = check_flag(power_of_two, "power_of_two")
        self._rule = _scale_rule(float32)
        self.float32 = bool(float32)

    def scale_for(self, amax: float) -> float:
        """The scale for a tensor with this amax (a number >= 0, e.g. ``float(np.max(np.abs(
        x)))``)."""
        return self._scale_of(_check_amax(amax))

    def quantize(self, x: Any, *, rounding: str = "nearest_even",
                 rng: np.random.Generator | int | None = None) -> ScaledTensor:
        """Quantise ``x`` (saturating) with the scale of its own amax."""
        arr, amax = _as_float_with_amax(x)
        return _scaled(arr, self.fmt, self.scale_for(amax), rounding, True, rng, amax,
                       float32=self.float32)

    def __repr__(self) -> str:
        return (f"CurrentScaling({self.fmt.name}, margin={self.margin}, "
                f"amax_epsilon={self.amax_epsilon:g}{', float32' if self.float32 else ''})")


# ================================================================================ delayed

class DelayedScaling(_AmaxScaler):
    """Transformer Engine's delayed scaling: the scale comes from the previous steps' amaxes.

    Each :meth:`quantize` call uses ``scale = fmt.max / reduce(history) / 2**margin``
    computed from the history *before* it sees ``x`` (so the scale needs no extra pass over
    the tensor), then appends ``amax(x)``; the history keeps the last ``history_len`` amaxes.

    * ``amax_compute_algo``: "max" (default, TE's default) reduces the history by its maximum,
      "most_recent" takes the last recorded amax.
    * ``amax_epsilon``: a floor on the reduced amax (TE's recipe field, default 0), so a tiny
      or all-zero history never gives a huge or infinite scale.
    * **First call** (empty history): floatlab uses the current amax, i.e. just-in-time
      scaling. (Transformer Engine starts from scale 1.0 instead.)
    * **A reduced amax of 0** (an all-zero history, or "most_recent" after an all-zero tensor)
      without epsilon: the previous call's scale is kept, as Transformer Engine's update
      (``delayed_scaling.cu``: no amax to scale from, the scale stays) does; 1.0 if there is
      none (its initial scale). (TE's fused multi-tensor update also leaves a zero amax out of
      the history; floatlab records it.)
    * **NaN / inf in x**: ValueError, and the history is left unchanged (the default,
      ``nonfinite="raise"``). ``nonfinite="record"`` is Transformer Engine's behaviour, used
      by the lab's FP8 recipes, so that an overflowing step reaches the loss scaler instead of
      stopping in backward: the amax is TE's (``fmaxf`` over ``|x|`` from 0: NaN entries are
      ignored, an inf gives inf) and it is recorded; the tensor is quantised with the current
      scale (NaN stays NaN, inf saturates as the format does); and while the reduced amax is
      not finite the scale is kept (``delayed_scaling.cu``: "amax == inf or amax == nan: set
      scale to the previous scale (or 1)"), so with "max" an inf holds the scale for
      ``history_len`` calls, until it leaves the history. The history is updated whether or
      not the optimizer step is later skipped, as in TE (its update runs at the end of the
      forward and backward passes, not in the optimizer).
    * ``float32=True``: Transformer Engine's float32 order (module docstring).

    >>> ds = DelayedScaling("e4m3fn", history_len=2)
    >>> ds.scale is None                         # nothing seen yet
    True
    >>> ds.quantize([1.0, -2.0]).scale           # first call: its own amax, 448 / 2
    224.0
    >>> ds.quantize([0.5, 4.0]).n_saturated      # still 224: 4.0 * 224 > 448 saturates
    1
    >>> ds.history, ds.scale                     # the next call uses 448 / max(2, 4)
    ((2.0, 4.0), 112.0)
    >>> DelayedScaling("e4m3fn", amax_compute_algo="most_recent").quantize([8.0]).scale
    56.0
    >>> te = DelayedScaling("e5m2", history_len=2, nonfinite="record")
    >>> te.quantize([2.0]).scale, te.quantize([np.inf, 1.0]).values.tolist()   # 57344 / 2
    (28672.0, [inf, 28672.0])
    >>> te.history, te.scale                     # inf recorded, the scale kept
    ((2.0, inf), 28672.0)
    """

    def __init__(self, fmt: str | Format | Any, history_len: int = 16, margin: int = 0, *,
                 power_of_two: bool = False, amax_compute_algo: str = "max",
                 amax_epsilon: float = 0.0, float32: bool = False, nonfinite: str = "raise"):
        self.fmt = _signed_format(fmt, "scaled into")
        if nonfinite not in ("raise", "record"):
            raise ValueError(f"nonfinite must be 'raise' (refuse NaN / inf) or 'record' "
                             f"(Transformer Engine: record the amax, keep the scale), got "
                             f"{nonfinite!r}")
        self.nonfinite = nonfinite
        self.history_len = _check_int(
            history_len, "history_len", 1, "it is how many past amaxes are kept"
        )
        if self.history_len > sys.maxsize:  # (a deque's maxlen is a C ssize_t)
            raise ValueError(f"history_len={self.history_len} is more amaxes than a deque can "
                             "hold; Transformer Engine's default is 1024")
        self.margin = _check_margin(margin)
        self.power_of_two = check_flag(power_of_two, "power_of_two")
        if amax_compute_algo not in AMAX_COMPUTE_ALGOS:
            raise ValueError(f"amax_compute_algo must be one of {AMAX_COMPUTE_ALGOS} (as "
                             f"Transformer Engine's recipe), got {amax_compute_algo!r}")
        self.amax_compute_algo = amax_compute_algo
        self.amax_epsilon = _check_epsilon(amax_epsilon)
        self._rule = _scale_rule(float32)
        self.float32 = bool(float32)
        self._history: deque[float] = deque(maxlen=self.history_len)
        self._last_scale: float | None = None  # the scale the last quantize used

    @property
    def history(self) -> tuple[float, ...]:
        """The recorded amaxes, oldest first (at most ``history_len``)."""
        return tuple(self._history)

    @property
    def scale(self) -> float | None:
        """The scale the next :meth:`quantize` will use (None before the first call)."""
        if not self._history:
            return None
        reduced = max(self._history) if self.amax_compute_algo == "max" else self._history[-1]
        if max(reduced, self.amax_epsilon) == 0 or reduced == math.inf:
            # nothing to scale from (0, or an inf recorded by nonfinite="record"): TE keeps
            # its scale
            return 1.0 if self._last_scale is None else self._last_scale
        return self._scale_of(reduced)

    def _record(self, amax: float, scale: float) -> None:
        """After a quantisation with ``scale``: record the tensor's amax and the scale."""
        self._history.append(amax)
        self._last_scale = scale

    def quantize(self, x: Any, *, rounding: str = "nearest_even",
                 rng: np.random.Generator | int | None = None) -> ScaledTensor:
        """Quantise ``x`` (saturating) with the history's scale, then record ``amax(x)``."""
        if self.nonfinite == "raise":
            arr, amax = _as_float_with_amax(x)
            peak = amax
        else:
            arr, peak, amax = _as_float_with_te_amax(x)
        scale = self.scale
        if scale is None:  # first call: the current amax's scale (an inf one: TE's initial 1)
            scale = self._scale_of(amax) if amax < math.inf else 1.0
        out = _scaled(arr, self.fmt, scale, rounding, True, rng, peak, float32=self.float32)
        self._record(amax, scale)
        return out

    def __repr__(self) -> str:
        extra = "" if self.amax_compute_algo == "max" else ", amax_compute_algo='most_recent'"
        if self.amax_epsilon:
            extra += f", amax_epsilon={self.amax_epsilon:g}"
        if self.float32:
            extra += ", float32"
        if self.nonfinite != "raise":
            extra += f", nonfinite={self.nonfinite!r}"
        return (
            f"DelayedScaling({self.fmt.name}, history_len={self.history_len}, "
            f"margin={self.margin}{extra}, {len(self._history)} amaxes recorded)"
        )
