"""The optimizers' ``state_dict()`` / ``load_state_dict()``, in torch.optim's structure.

``{"state": {index: {"step": ..., "exp_avg": ..., ...}}, "param_groups": [{hyperparameters...,
"params": [0, 1, ...]}], "rng_state": ...}``: one parameter group (floatlab's optimizers take
one), each parameter's state under its index in ``params`` (only parameters that took a step,
as in torch), every value a NumPy array (a copy). torch's names: ``step`` (a float32 scalar,
as torch keeps it), ``exp_avg`` / ``exp_avg_sq`` (Adam), ``momentum_buffer`` (SGD); floatlab
adds ``kahan_buffer`` (``kahan=True``) and the top-level ``rng_state`` (the seeded generator of
stochastic updates and stochastic state schemes), so a resumed run is bit-identical.

A dict from another optimizer (another class, other hyperparameters, other parameter count or
shapes) is refused by name: floatlab does not overwrite the optimizer's settings as torch's
``load_state_dict`` does -- build the optimizer with the saved settings instead.

>>> import numpy as np
>>> from floatlab.mixed import Adam, parameter
>>> w = parameter([1.0, 2.0]); opt = Adam([w])
>>> w.grad = np.array([0.5, -0.5], np.float32); _ = opt.step()
>>> sd = opt.state_dict()
>>> sorted(sd["state"][0]), sd["state"][0]["step"], sd["param_groups"][0]["params"]
(['exp_avg', 'exp_avg_sq', 'step'], array(1., dtype=float32), [0])
>>> Adam([parameter([1.0, 2.0])]).load_state_dict(sd)
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np

from floatlab.mixed.opmath import _nearest

if TYPE_CHECKING:
    from floatlab.formats import Format
    from floatlab.mixed.optim import Optimizer

__all__ = ["state_dict", "load_state_dict"]

#: floatlab's state keys -> torch's names.
_NAMES = {"momentum": "momentum_buffer", "kahan": "kahan_buffer"}
_KEYS = {v: k for k, v in _NAMES.items()}

#: The hyperparameters recorded per class family (those the optimizer has), in torch's names.
_HYPER = ("lr", "betas", "eps", "weight_decay", "momentum", "dampening", "nesterov", "fused",
          "decoupled_weight_decay", "update_rounding", "kahan", "min_8bit_size", "block", "map",
          "expand")


def _hyper(opt: Optimizer) -> dict[str, Any]:
    out: dict[str, Any] = {"optimizer": type(opt).__name__}
    for key in _HYPER:
        if hasattr(opt, key):
            value = getattr(opt, key)
            out[key] = tuple(value) if key == "betas" else value
    out["state_format"] = opt.state_format.name if opt.state_format is not None else None
    if hasattr(opt, "specs"):  # StateAdam: each moment's storage
        out["moment_storage"] = {k: getattr(s, "name", None) for k, s in opt.specs.items()}
    return out


def _where(opt: Optimizer) -> list[tuple[Any, int]]:
    """(group, position in the group) of each parameter, in ``opt.params`` order."""
    place = {id(p): (g, j) for g in opt.groups for j, p in enumerate(g.params)}
    return [place[id(p)] for p in opt.params]


def state_dict(opt: Optimizer) -> dict[str, Any]:
    """The optimizer's state in torch's structure (copies; see the module docstring)."""
    state: dict[int, dict[str, np.ndarray]] = {}
    for i, (group, j) in enumerate(_where(opt)):
        steps = int(group.steps[j])
        if not steps:
            continue
        lo, hi = int(group.offsets[j]), int(group.offsets[j + 1])
        entry = {"step": np.array(float(steps), np.float32)}
        for key, flat in group.state.items():
            entry[_NAMES.get(key, key)] = flat[lo:hi].reshape(opt.params[i].shape).copy()
        state[i] = entry
    group = {**_hyper(opt), "params": list(range(len(opt.params)))}
    return {"state": state, "param_groups": [group],
            "rng_state": copy.deepcopy(opt._rng.bit_generator.state)}


def load_state_dict(opt: Optimizer, sd: Any) -> None:
    """Load a :func:`state_dict` of an optimizer built the same way; refuse any other."""
    who = f"{type(opt).__name__}.load_state_dict"
    if not isinstance(sd, dict) or not {"state", "param_groups"} <= set(sd):
        raise TypeError(f"{who}: pass the dict optimizer.state_dict() returned (keys 'state' "
                        f"and 'param_groups'), got {_what(sd)}")
    groups, state = sd["param_groups"], sd["state"]
    if not isinstance(groups, (list, tuple)) or len(groups) != 1 or \
            not isinstance(groups[0], dict) or not isinstance(state, dict):
        raise ValueError(f"{who}: loaded state dict has a different number of parameter groups "
                         "(torch's words): floatlab's optimizers have one")
    saved, n = groups[0], len(opt.params)
    if list(saved.get("params", ())) != list(range(n)):
        raise ValueError(f"{who}: loaded state dict contains a parameter group that doesn't "
                         f"match the size of optimizer's group (torch's words): it lists "
                         f"{len(list(saved.get('params', ())))} parameters, this optimizer has "
                         f"{n}")
    for key, mine in _hyper(opt).items():
        theirs = saved.get(key, "(missing)")
        if key == "betas" and isinstance(theirs, (list, tuple)):
            theirs = tuple(theirs)
        if theirs != mine:
            raise ValueError(f"{who}: the state dict was saved with {key}={theirs!r}, this "
                             f"optimizer has {key}={mine!r}; build the optimizer with the saved "
                             "settings before loading")
    rng = sd.get("rng_state")
    if rng is not None:
        try:
            trial = np.random.Generator(type(opt._rng.bit_generator)())
            trial.bit_generator.state = rng
        except (TypeError, ValueError, KeyError) as err:
            raise ValueError(f"{who}: rng_state is not the state of this optimizer's "
                             f"generator ({err})") from None
    before = [set(group.state) for group in opt.groups]
    try:
        steps, loaded = _check_state(who, opt, state, n)
    except (TypeError, ValueError):  # leave no state array the checks made
        for group, keys in zip(opt.groups, before, strict=True):
            for key in set(group.state) - keys:
                del group.state[key]
        raise
    # checked: now write (a refused dict leaves the optimizer as it was)
    places = _where(opt)
    for group in opt.groups:
        group.steps[:] = 0
        for flat in group.state.values():
            flat[:] = 0
    for index, count in steps.items():
        group, j = places[index]
        group.steps[j] = count
    for group, j, key, values in loaded:
        group.state[key][int(group.offsets[j]):int(group.offsets[j + 1])] = values.reshape(-1)
    if rng is not None:
        opt._rng.bit_generator.state = copy.deepcopy(rng)


def _check_state(who: str, opt: Optimizer, state: dict[Any, Any], n: int
                 ) -> tuple[dict[int, int], list[tuple[Any, int, str, np.ndarray]]]:
    """(step per parameter, the arrays to write), every entry checked."""
    places = _where(opt)
    loaded: list[tuple[Any, int, str, np.ndarray]] = []
    steps: dict[int, int] = {}
    for index, entry in state.items():
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or \
                not 0 <= index < n:
            raise ValueError(f"{who}: state has an entry for parameter {index!r}; the indices "
                             f"run from 0 to {n - 1}")
        if not isinstance(entry, dict) or "step" not in entry:
            raise ValueError(f"{who}: the state of parameter {index} must be a dict with a "
                             f"'step', got {_what(entry)}")
        group, j = places[index]
        steps[index] = _step(who, index, entry["step"])
        expected = {_NAMES.get(k, k) for k in _state_keys(opt, group)}
        if set(entry) - {"step"} != expected:
            raise ValueError(f"{who}: parameter {index}'s state has {sorted(set(entry) - {'step'})}"
                             f", this optimizer keeps {sorted(expected)}")
        for name in sorted(expected):
            key = _KEYS.get(name, name)
            fmt = group.fmt if key == "kahan" else None if hasattr(opt, "specs") else \
                group.state_fmt  # (StateAdam keeps dequantised float32 values)
            loaded.append((group, j, key, _values(who, index, name, entry[name],
                                                  opt.params[index].shape,
                                                  opt._state(group, key).dtype, fmt)))
    return steps, loaded


def _state_keys(opt: Optimizer, group: Any) -> list[str]:
    """The state a parameter of ``group`` keeps once it has stepped."""
    from floatlab.mixed.optim import SGD

    if isinstance(opt, SGD):
        keys = ["momentum"] if opt.momentum else []
    else:
        keys = ["exp_avg", "exp_avg_sq"]
    return keys + (["kahan"] if opt.kahan else [])


def _step(who: str, index: int, value: Any) -> int:
    arr = np.asarray(value)
    ok = arr.shape == () and arr.dtype.kind in "iuf" and np.isfinite(arr) and arr >= 1 and \
        float(arr) == int(arr)
    if not ok:
        raise ValueError(f"{who}: parameter {index}'s step must be a whole number >= 1, got "
                         f"{value!r}")
    return int(arr)


def _values(who: str, index: int, name: str, value: Any, shape: tuple[int, ...],
            dtype: np.dtype, fmt: Format | None) -> np.ndarray:
    arr = np.asarray(value) if isinstance(value, (np.ndarray, np.generic)) else None
    if arr is None or arr.dtype.kind != "f":
        raise TypeError(f"{who}: parameter {index}'s {name!r} must be a float NumPy array of "
                        f"shape {shape}, got {_what(value)}")
    if arr.shape != shape:
        raise ValueError(f"{who}: parameter {index}'s {name!r} has shape {arr.shape}, the "
                         f"parameter has shape {shape}")
    out = arr.astype(dtype)
    exact = np.array_equal(out.astype(arr.dtype), arr, equal_nan=True)
    if exact and fmt is not None:
        with np.errstate(all="ignore"):
            exact = np.array_equal(_nearest(out, fmt).astype(dtype), out, equal_nan=True)
    if not exact:
        where = f"{fmt.name}" if fmt is not None else str(dtype)
        raise ValueError(f"{who}: parameter {index}'s {name!r} holds values that are not exact "
                         f"in this optimizer's state ({where}); it comes from an optimizer with "
                         "another state format")
    return out


def _what(value: Any) -> str:
    return f"an array of dtype {value.dtype}" if isinstance(value, np.ndarray) else \
        type(value).__name__
