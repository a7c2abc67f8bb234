"""Loss scaling: torch's dynamic GradScaler, and a static scaler for the "scale by 8" experiment.

Multiplying the loss by S multiplies every gradient by S, lifting small gradients out of fp16's
underflow zone; the scaler divides the master gradients by S before the optimizer uses them.
:class:`GradScaler` follows ``torch.amp.GradScaler`` name for name: the scale is a float32
number, ``update()`` halves it after a step whose gradients held inf/NaN (that step is skipped)
and doubles it after ``growth_interval`` clean steps.

>>> from floatlab.mixed import SGD, parameter
>>> w = parameter([1.0]); opt = SGD([w], lr=1e-3)
>>> scaler, trajectory = GradScaler(init_scale=8.0, growth_interval=3), []
>>> for it in range(7):
...     scaler.scale((w * 3.0).sum()).backward()
...     if it == 2:
...         w.grad = w.grad * np.inf                  # an overflow in iteration 2
...     report = scaler.step(opt)                     # None when the step is skipped
...     scaler.update(); opt.zero_grad()
...     trajectory.append((scaler.get_scale(), scaler.state_dict()["_growth_tracker"]))
>>> trajectory   # torch's own trajectory on this sequence
[(8.0, 1), (8.0, 2), (4.0, 0), (4.0, 1), (4.0, 2), (8.0, 0), (8.0, 1)]

The order in a training step is torch's::

    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)     # optional: to clip or inspect true gradients
    scaler.step(optimizer)         # skipped if any gradient is inf / NaN
    scaler.update()
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from floatlab.mixed.checks import flag, number
from floatlab.mixed.policy import FP16
from floatlab.mixed.tensor import Tensor, mul, quantize

__all__ = ["GradScaler", "StaticScaler", "GradScalerError", "GradScalerValueError"]

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"

# torch's own wording, two spaces included, so logs and tests written for torch match.
_FIX = ("This may indicate your script did not use scaler.scale(loss or outputs) earlier in the "
        "iteration.")
_NEW_SCALE_REASON = ("new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
                     "torch.FloatTensor with requires_grad=False.")


class GradScalerError(RuntimeError, AssertionError):
    """A scaler misused where torch raises ``AssertionError`` (update or unscale_ before
    scale(), update without a step, a step with no gradients).

    It is also a RuntimeError, so ``except AssertionError`` (code written for torch) and
    ``except RuntimeError`` both catch it.
    """


class GradScalerValueError(ValueError, AssertionError):
    """A bad scaler argument where torch raises ``AssertionError`` (growth_factor <= 1,
    backoff_factor >= 1, a new_scale with more than one element); also a ValueError."""


def _real(name: str, value: Any) -> float:
    """``value`` as a float if it is a real number (Python or NumPy scalar), else a TypeError."""
    return number(name, value, finite=False)


class _LossScaler:
    """The per-optimizer state machine shared by both scalers, with torch's misuse errors."""

    _allow_fp16_grads = False
    _round_unscaled = True  # unscaled gradients rounded to their parameter's format (torch)

    def __init__(self, init_scale: float, enabled: bool, name: str = "init_scale") -> None:
        value = _real(name, init_scale)
        # float32-finite: the scale is a float32 (1e300 became inf, and every step skipped)
        if not (0 < value <= float(np.finfo(np.float32).max)):
            raise ValueError(f"{name} must be a positive finite number (a float32: at most "
                             f"3.4e38), got {init_scale!r}")
        # a real flag: torch takes enabled="False" as enabled (any non-empty string is truthy)
        self._enabled = flag("enabled", enabled)
        self._init_scale = value
        self._scale: np.float32 | None = None
        self._per_optimizer: dict[int, dict[str, Any]] = {}

    # ------------------------------------------------------------------ helpers
    def _lazy_init(self) -> np.float32:
        return np.float32(self._init_scale)

    def _state(self, optimizer: Any) -> dict[str, Any]:
        key = id(optimizer)
        if key not in self._per_optimizer:
            self._per_optimizer[key] = {"optimizer": optimizer, "stage": _READY,
                                        "found_inf": None}
        return self._per_optimizer[key]

    def _check_scale(self, what: str) -> np.float32:
        if self._scale is None:
            raise GradScalerError(f"Attempted {what} but _scale is None.  {_FIX}")
        return self._scale

    # ------------------------------------------------------------------ torch's API
    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        """The current scale as a Python float (1.0 when disabled; init_scale before first use)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale)

    def scale(self, outputs: Any) -> Any:
        """``outputs * scale`` for a Tensor or a (nested) list / tuple of Tensors.

        >>> float(GradScaler(init_scale=4.0).scale(Tensor([1.5])).data[0])
        6.0
        """
        if not self._enabled:
            return outputs
        if self._scale is None:
            self._scale = self._lazy_init()
        if isinstance(outputs, Tensor):
            with np.errstate(over="ignore"):  # an overflowing scaled loss is what update() fixes
                return mul(outputs, float(self._scale))
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def unscale_(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place; note any inf / NaN.

        The reciprocal is computed in float64 and used as float32 (as torch). Gradients are
        unscaled even when some are non-finite; the step is skipped later.
        """
        if not self._enabled:
            return
        st = self._state(optimizer)
        if st["stage"] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update().")
        if st["stage"] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = np.float32(1.0 / np.float64(self._check_scale("unscale_")))
        found_inf, checked = False, False
        for p in getattr(optimizer, "params", ()):
            if p.grad is None:
                continue
            if p.fmt == FP16 and not self._allow_fp16_grads:
                raise ValueError("Attempting to unscale FP16 gradients. (The scaler assumes "
                                 "float32 master weights: use '16-mixed', not '16-true'.)")
            checked = True
            found_inf = found_inf or not bool(np.isfinite(p.grad).all())
            with np.errstate(all="ignore"):
                unscaled = p.grad * inv_scale
                p.grad = quantize(unscaled, p.fmt, what="grads") if self._round_unscaled \
                    else unscaled
        st["stage"] = _UNSCALED
        st["found_inf"] = found_inf if checked else None

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """Unscale (if not done yet), then run ``optimizer.step()`` unless a gradient was
        inf / NaN. Returns the optimizer's return value, or None when the step was skipped."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        self._check_scale("step")
        st = self._state(optimizer)
        if st["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] == _READY:
            self.unscale_(optimizer)
        if st["found_inf"] is None:
            raise GradScalerError("No inf checks were recorded for this optimizer.")
        result = None if self._skip(st["found_inf"]) else optimizer.step(*args, **kwargs)
        st["stage"] = _STEPPED
        return result

    def _skip(self, found_inf: bool) -> bool:
        return found_inf

    def update(self, new_scale: Any = None) -> None:
        raise NotImplementedError

    def _set_scale(self, new_scale: Any) -> None:
        """torch's ``_scale.fill_(new_scale)`` / ``copy_``: one rounding to float32."""
        values = new_scale.data if isinstance(new_scale, Tensor) else new_scale
        if isinstance(values, numbers.Real) and not isinstance(values, (bool, np.bool_)):
            self._scale = np.float32(float(values))
            return
        if not isinstance(values, (np.ndarray, list, tuple)):
            raise TypeError(f"update(new_scale={new_scale!r}): {_NEW_SCALE_REASON} Pass a "
                            "number such as 1024.0")
        arr = np.asarray(values)
        if arr.dtype.kind not in "iuf":
            raise TypeError(f"update(new_scale=...): got an array of dtype {arr.dtype}; "
                            f"{_NEW_SCALE_REASON}")
        if arr.size != 1:
            raise GradScalerValueError(f"{_NEW_SCALE_REASON} (got {arr.size} elements)")
        self._scale = np.float32(arr.reshape(-1)[0])

    def __repr__(self) -> str:
        state = f"scale={self.get_scale():g}" if self._enabled else "disabled"
        return f"{type(self).__name__}({state})"


def _times(scale: np.float32, factor: float) -> np.float32:
    """torch's ``_amp_update_scale_``: ``float * double`` in C++ is a double product (the exact
    product rounded to float64), stored back into the float32 scale (one more rounding).

    The factor is NOT rounded to float32 first: 3.0 * 0.9 gives 2.700000047683716, not the
    2.6999998 of float32(3) * float32(0.9). NumPy's casts are IEEE round-to-nearest-even, the
    same two roundings C++ performs.
    """
    return np.float32(np.float64(scale) * factor)


class GradScaler(_LossScaler):
    """Dynamic loss scaling with ``torch.amp.GradScaler``'s names, defaults and semantics.

    Parameters
    ----------
    device : accepted for drop-in compatibility with torch's signature (default "cuda"); ignored.
    init_scale : the first scale (2**16).
    growth_factor : multiplies the scale after ``growth_interval`` clean steps (2.0).
    backoff_factor : multiplies the scale after a step with inf / NaN gradients (0.5).
    growth_interval : clean steps between growths (2000).
    enabled : False makes every method a pass-through (scale 1, steps never skipped).
    max_scale : a cap on the scale (floatlab extension; Apex's ``max_loss_scale`` = 2**24).
        torch has no cap, and no lower bound either.

    >>> s = GradScaler()
    >>> s.get_scale(), s.state_dict()["_growth_tracker"]
    (65536.0, 0)
    """

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
        *,
        max_scale: float | None = None,
    ) -> None:
        super().__init__(init_scale, enabled)
        growth, backoff = _real("growth_factor", growth_factor), _real("backoff_factor",
                                                                       backoff_factor)
        if not growth > 1.0:  # torch: AssertionError with this message
            raise GradScalerValueError(f"The growth factor must be > 1.0. (got {growth_factor!r})")
        if not backoff < 1.0:
            raise GradScalerValueError(f"The backoff factor must be < 1.0. (got "
                                       f"{backoff_factor!r})")
        if not backoff > 0.0:  # torch accepts it; a scale of 0 or below is never meant
            raise ValueError(f"The backoff factor must be in (0, 1), got {backoff_factor!r}.")
        if isinstance(growth_interval, (bool, np.bool_)) or not isinstance(
            growth_interval, numbers.Integral
        ) or growth_interval < 1:
            raise ValueError(f"growth_interval must be a positive int, got {growth_interval!r}")
        if max_scale is not None and not _real("max_scale", max_scale) > 0:
            raise ValueError(f"max_scale must be positive or None, got {max_scale!r}")
        self.device = device
        self._growth_factor = growth
        self._backoff_factor = backoff
        self._growth_interval = int(growth_interval)
        self._max_scale = max_scale
        self._growth_tracker = 0

    def update(self, new_scale: Any = None) -> None:
        """Adjust the scale from the steps' inf checks (or set it to ``new_scale``).

        Found inf: scale *= backoff_factor, tracker = 0. Otherwise tracker += 1, and at
        ``growth_interval`` the scale grows by ``growth_factor`` (if the result is finite) and the
        tracker resets. ``update(new_scale)`` sets the scale and leaves the tracker alone.
        """
        if not self._enabled:
            return
        scale = self._check_scale("update")
        if new_scale is not None:
            self._set_scale(new_scale)
        else:
            found = [st["found_inf"] for st in self._per_optimizer.values()
                     if st["found_inf"] is not None]
            if not found:
                raise GradScalerError("No inf checks were recorded prior to update.")
            if any(found):
                self._scale = _times(scale, self._backoff_factor)
                self._growth_tracker = 0
            elif self._growth_tracker + 1 == self._growth_interval:
                with np.errstate(over="ignore"):  # checked for finiteness just below
                    grown = _times(scale, self._growth_factor)
                if self._max_scale is not None:
                    grown = min(grown, np.float32(self._max_scale))
                if np.isfinite(grown):
                    self._scale = grown
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
        self._per_optimizer = {}

    # ------------------------------------------------------------------ torch's accessors
    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = _real("new_factor", new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = _real("new_factor", new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = int(new_interval)

    def state_dict(self) -> dict[str, Any]:
        """torch's keys: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker
        (an empty dict when disabled)."""
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._growth_tracker,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` (refuses the empty dict of a disabled scaler)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        missing = {"scale", "growth_factor", "backoff_factor", "growth_interval",
                   "_growth_tracker"} - set(state_dict)
        if missing:
            raise KeyError(f"GradScaler state dict lacks {sorted(missing)}")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale = np.float32(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])


class _MSAMPGradScaler(GradScaler):
    """torch's GradScaler as MS-AMP trains with it (``floatlab.mixed.policy.takes_loss_scaler``:
    its usage guide and examples pair ``msamp.initialize`` with ``torch.cuda.amp.GradScaler``).

    The scale, the skipped steps and ``update()`` are torch's. The unscaling is MS-AMP's: its
    override of ``torch._amp_foreach_non_finite_check_and_unscale_`` multiplies the float32
    ``scale_inv`` of each FP8 weight gradient (a ScalingTensor) by ``1 / scale`` and checks its
    amax, so the gradients of the FP16 weights are neither refused ("Attempting to unscale FP16
    gradients", torch's rule for FP16 tensors) nor rounded again. Here those gradients are
    float arrays of FP16 parameters: they are unscaled in their own dtype and not rounded back
    to FP16 (exact for the power-of-two scales of the default factors), so the optimizer reads
    the values MS-AMP's would.
    """

    _allow_fp16_grads = True
    _round_unscaled = False


class StaticScaler(_LossScaler):
    """A constant loss scale (the mixed-precision paper's "scale by 8"), same interface.

    Steps are not skipped on inf / NaN gradients unless ``skip_nonfinite=True`` (a static scale
    trusts its factor, as Apex's static mode does). Float16 gradients are allowed.

    >>> s = StaticScaler(8.0)
    >>> s.get_scale(), s.state_dict()
    (8.0, {'scale': 8.0})
    """

    _allow_fp16_grads = True

    def __init__(self, scale: float = 8.0, *, skip_nonfinite: bool = False,
                 enabled: bool = True) -> None:
        super().__init__(scale, enabled, name="scale")
        self.skip_nonfinite = flag("skip_nonfinite", skip_nonfinite)

    def _skip(self, found_inf: bool) -> bool:
        return found_inf and self.skip_nonfinite

    def update(self, new_scale: Any = None) -> None:
        """End the iteration (the scale stays, unless ``new_scale`` is given)."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._set_scale(new_scale)
            self._init_scale = float(self._scale)
        self._per_optimizer = {}

    def state_dict(self) -> dict[str, Any]:
        return {"scale": self.get_scale()} if self._enabled else {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if self._enabled:
            if "scale" not in state_dict:
                raise KeyError("StaticScaler state dict needs a 'scale'")
            self._init_scale = float(state_dict["scale"])
            self._scale = np.float32(self._init_scale)
