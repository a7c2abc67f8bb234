"""Argument checks of floatlab's optimizers, in torch.optim's words: the value ranges, the
``betas`` pair, and torch's options that floatlab accepts only at the values that change nothing.

>>> _check_ranges("Adam", lr=-1.0)
Traceback (most recent call last):
...
ValueError: Adam: Invalid learning rate: -1.0 (need lr >= 0; e.g. lr=1e-3)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from floatlab.mixed.checks import number

#: torch.optim's wording for each out-of-range argument, what floatlab requires and an example.
_RANGES = {
    "lr": ("Invalid learning rate", "need lr >= 0", "lr=1e-3", lambda v: v >= 0),
    "momentum": ("Invalid momentum value", "need momentum >= 0", "momentum=0.9",
                 lambda v: v >= 0),
    "weight_decay": ("Invalid weight_decay value", "need weight_decay >= 0",
                     "weight_decay=0.01", lambda v: v >= 0),
    "eps": ("Invalid epsilon value", "need eps >= 0", "eps=1e-8", lambda v: v >= 0),
    "beta1": ("Invalid beta parameter at index 0", "need 0 <= betas[0] < 1",
              "betas=(0.9, 0.999)", lambda v: 0 <= v < 1),
    "beta2": ("Invalid beta parameter at index 1", "need 0 <= betas[1] < 1",
              "betas=(0.9, 0.999)", lambda v: 0 <= v < 1),
}


#: torch.optim's options that floatlab's SGD / Adam do not model, and the value at which each
#: changes nothing (code written for torch often passes them at that value).
_TORCH_ONLY = {"amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
               "differentiable": False, "decoupled_weight_decay": False}


def _check_torch_options(who: str, options: dict[str, Any]) -> None:
    """Accept torch.optim's options at the values that change nothing (``amsgrad=False``,
    ``foreach=None``, ...); refuse any other value, and unknown keywords, by name. They were
    "Optimizer.__init__() got an unexpected keyword argument 'amsgrad'", whatever the value."""
    for name, value in options.items():
        if name not in _TORCH_ONLY:
            raise TypeError(f"{who}() got an unexpected keyword argument {name!r}")
        inert = _TORCH_ONLY[name]
        if value is inert or (name == "foreach" and value is False):
            continue
        raise ValueError(f"{who}: {name}={value!r} is a torch.optim option that floatlab's "
                         f"{who} does not model (it follows torch's single-tensor "
                         f"{'SGD' if who == 'SGD' else 'Adam'} without it); drop it, or pass "
                         f"{name}={inert!r}")


def _check_ranges(who: str, **values: float) -> None:
    """A ValueError naming the first argument out of its range, in torch.optim's words (code
    that matches torch's "Invalid learning rate: -1.0" keeps matching) plus the fix. The
    ranges are torch's: lr = 0 is allowed (a warm-up schedule's first step, a frozen group),
    as in torch.optim and bitsandbytes."""
    for name, value in values.items():
        torch_words, rule, example, ok = _RANGES[name]
        if not ok(value):
            raise ValueError(f"{who}: {torch_words}: {value} ({rule}; e.g. {example})")


def _betas(who: str, betas: Any) -> tuple[float, float]:
    """``betas`` as two floats. torch.optim reads ``betas[0]``, ``betas[1]`` and unpacks the
    pair at each step, so any sequence of two numbers works there: a tuple, a list, a NumPy
    array of shape (2,) (whose items are NumPy floats). Refused: anything else (a number, a
    string, a set or dict, an array of another shape), with the pair to pass."""
    fix = "pass two numbers such as betas=(0.9, 0.999)"
    if isinstance(betas, np.ndarray):
        if betas.shape != (2,):
            raise TypeError(f"{who}: betas must be a pair (beta1, beta2), got an array of shape "
                            f"{betas.shape}; {fix}")
        betas = betas.tolist()
    elif isinstance(betas, (str, bytes, dict, set, frozenset)) or \
            not isinstance(betas, Sequence) or len(betas) != 2:
        got = f"{len(betas)} values" if isinstance(betas, (tuple, list)) else repr(betas)
        raise TypeError(f"{who}: betas must be a pair (beta1, beta2), got {got}; {fix}")
    return number("betas[0]", betas[0]), number("betas[1]", betas[1])
