"""Argument checks for the lab's public entry points: a clear error that names the argument,
what it got and what to pass -- never a TypeError from deep inside NumPy or a comparison.

>>> number("lr", 1e-3, positive=True)
0.001
>>> number("lr", "0.1", positive=True)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
TypeError: lr must be a number such as 0.001, got '0.1' (str); pass float('0.1') if it ...
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

__all__ = ["number", "whole", "flag"]

_EXAMPLES = {"lr": "0.001", "backoff_factor": "0.5", "growth_factor": "2.0",
             "loss_multiplier": "2**-16", "init_scale": "65536.0", "max_scale": "2**24",
             "momentum": "0.9", "eps": "1e-8", "weight_decay": "0.01"}


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def number(name: str, value: Any, *, positive: bool = False, nonnegative: bool = False,
           finite: bool = True) -> float:
    """``value`` as a float: a real number (Python or NumPy scalar), finite unless told, and
    > 0 (``positive``) or >= 0 (``nonnegative``) when asked."""
    if not _is_real(value):
        example = _EXAMPLES.get(name, "0.5")
        fix = (f"pass float({value!r}) if it holds a number" if isinstance(value, str)
               else "pass a Python float")
        raise TypeError(f"{name} must be a number such as {example}, got {value!r} "
                        f"({type(value).__name__}); {fix}")
    x = float(value)
    if finite and not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if positive and not x > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    if nonnegative and not x >= 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return x


def whole(name: str, value: Any, *, minimum: int = 1) -> int:
    """``value`` as an int: a Python or NumPy integer (not a float such as 2.5, not a bool, not a
    string) of at least ``minimum``.

    >>> whole("steps", 3)
    3
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        hint = (f"; int({value!r}) if it holds a whole number" if isinstance(value, str)
                else "; round it with int()" if _is_real(value) else "")
        raise TypeError(f"{name} must be a whole number (int) >= {minimum}, got {value!r} "
                        f"({type(value).__name__}){hint}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def flag(name: str, value: Any) -> bool:
    """``value`` if it is a bool (a string such as "no" would be truthy: refused).

    >>> flag("progress", False)
    False
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
