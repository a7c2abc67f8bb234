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

import functools
import math
import numbers
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from floatlab._validate import resolve_rng

__all__ = ["number", "whole", "flag", "seed", "axes", "fraction", "tensor", "sizes_fit",
           "update_rounding", "AxisRangeError", "RepeatedAxisError", "IndexRangeError"]

_F = TypeVar("_F", bound=Callable[..., Any])

_EXAMPLES = {"lr": "0.001", "backoff_factor": "0.5", "growth_factor": "2.0",
             "loss_multiplier": "2**-16", "init_scale": "65536.0", "max_scale": "2**24",
             "momentum": "0.9", "eps": "1e-8", "weight_decay": "0.01", "scale": "8.0"}


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


def update_rounding(value: Any, kahan: bool = False) -> str:
    """An optimizer's ``update_rounding``, resolved by :func:`floatlab.round`'s own table (the
    same spellings and aliases as every ``rounding=``: "sr", "RNE", ...) to "nearest_even" or
    "stochastic", the two the optimizers offer; stochastic updates exclude ``kahan``.

    >>> update_rounding("sr")
    'stochastic'
    """
    from floatlab.rounding import _resolve_mode

    try:
        mode = _resolve_mode(value)
    except (TypeError, ValueError) as error:
        raise type(error)(f"update_rounding: {error}") from None
    if mode not in ("nearest_even", "stochastic"):
        raise ValueError(f"update_rounding={value!r} is {mode!r}: the optimizers round "
                         "w + update to nearest even or stochastically; use 'nearest_even' "
                         "or 'stochastic'")
    if mode == "stochastic" and kahan:
        raise ValueError("choose one remedy: update_rounding='stochastic' or kahan=True")
    return mode


def seed(name: str, value: Any) -> np.random.Generator:
    """``np.random.default_rng(value)`` for a ``seed=`` argument: a non-negative int, a Generator
    (used as it is) or None (fresh entropy); a bool, a float, a string or a negative int is
    refused with an error naming ``name`` (through :func:`floatlab._validate.resolve_rng`, the
    one seed check of the package), not numpy's "SeedSequence expects int".

    >>> seed("seed", 0).integers(10) == np.random.default_rng(0).integers(10)
    np.True_
    """
    return resolve_rng(value, True, name, name=name)


def fraction(name: str, value: Any) -> float:
    """``value`` as a float strictly between 0 and 1 (a train / test split), or an error naming
    ``name`` with an example.

    >>> fraction("train_fraction", 0.5)
    0.5
    """
    x = number(name, value)
    if not 0 < x < 1:
        raise ValueError(f"{name} must lie strictly between 0 and 1, e.g. 0.5, got {value!r}")
    return x


class AxisRangeError(ValueError, IndexError):
    """An axis out of range for the tensor. Also an IndexError: torch raises IndexError
    ("Dimension out of range") there, and numpy's AxisError, which the ops raised before
    :func:`axes` checked up front, is one too, so ``except IndexError`` keeps catching it."""


class IndexRangeError(ValueError, IndexError):
    """A token id or class index outside [0, n). Also an IndexError, as torch's: embedding
    raises "index out of range in self" and cross_entropy "Target 3 is out of bounds", both
    IndexErrors, so ``except IndexError`` written for torch catches it."""


class RepeatedAxisError(ValueError, RuntimeError):
    """An axis listed twice (``axis=(0, 0)``). Also a RuntimeError: torch raises one there
    ("dim 0 appears multiple times in the list of dims"), so ``except RuntimeError`` written
    for torch catches it."""


def axes(name: str, axis: Any, ndim: int) -> int | tuple[int, ...] | None:
    """``axis`` checked for an array of ``ndim`` dimensions: None, an int or a tuple (or list) of
    distinct ints in [-ndim, ndim), as numpy's reductions take them, with an error naming the op
    instead of numpy's AxisError (or an IndexError from the lab's own bookkeeping).

    A 0-d array takes axis 0 or -1 as torch's ``dim`` does (numpy is inconsistent there: its
    ``sum`` accepts them, its ``mean`` does not); they come back as ``()``, "reduce over no axis",
    which is what reducing a single value means.

    >>> axes("sum", -1, 2), axes("sum", [0, 1], 2), axes("sum", 0, 0)
    (-1, (0, 1), ())
    """
    if axis is None:
        return None
    many = isinstance(axis, (tuple, list))
    items = tuple(axis) if many else (axis,)
    span = max(ndim, 1)
    seen = set()
    for a in items:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, numbers.Integral):
            raise TypeError(f"{name}: axis must be an int, a tuple of ints or None, got "
                            f"{axis!r}; e.g. axis=-1 (the last axis) or axis=(0, 1)")
        if not -span <= a < span:
            raise AxisRangeError(f"{name}: axis {a} is out of range for a tensor of {ndim} "
                             f"dimension(s); use an axis in [{-span}, {span})")
        if int(a) % span in seen:
            raise RepeatedAxisError(f"{name}: axis {axis!r} names axis {int(a) % span} "
                                    "twice; list each axis once")
        seen.add(int(a) % span)
    if ndim == 0:
        return ()
    return tuple(int(a) for a in items) if many else int(axis)


@functools.cache
def _tensor_type() -> type:
    """floatlab.mixed's Tensor, imported once: the autograd imports this module, so it cannot
    be imported at the top, and an import statement in :func:`tensor` cost linear() about 2 us
    a call (three Linear layers: a measurable share of a float32 step)."""
    from floatlab.mixed.autograd import Tensor

    return Tensor


def tensor(name: str, value: Any, *, optional: bool = False) -> Any:
    """``value`` if it is a :class:`~floatlab.mixed.Tensor` (a parameter such as a weight,
    whose gradient the caller wants): arrays and lists are refused with a pointer to
    ``parameter()``, rather than an AttributeError from inside the op."""
    if value is None and optional:
        return None
    if not isinstance(value, _tensor_type()):
        none = " or None" if optional else ""
        raise TypeError(f"{name} must be a floatlab.mixed Tensor{none}, got "
                        f"{type(value).__name__}; wrap arrays with floatlab.mixed.parameter(x) "
                        "(trainable) or Tensor(x)")
    return value


def policy_fields(policy: Any) -> None:
    """Resolve and check a :class:`~floatlab.mixed.Policy`'s fields in place (it is frozen):
    format names become Formats, ``rounding`` its canonical mode, ``device`` and ``saturate``
    are checked -- so ``Policy(...)`` built by hand fails at construction, not inside an op."""
    from floatlab.accumulate import Accumulator
    from floatlab.formats import get_format
    from floatlab.mixed.autocast import check_device
    from floatlab.rounding import _resolve_mode

    def set_(name: str, value: Any) -> None:
        object.__setattr__(policy, name, value)

    for name in ("weights", "compute", "matmul_inputs", "safe", "inputs"):
        set_(name, get_format(getattr(policy, name)))
    if not isinstance(policy.accumulate, Accumulator):
        set_("accumulate", get_format(policy.accumulate))
    if policy.optimizer_state is not None:
        set_("optimizer_state", get_format(policy.optimizer_state))
    set_("rounding", _resolve_mode(policy.rounding))
    set_("device", check_device(policy.device))
    set_("saturate", flag("Policy: saturate", policy.saturate))


def recipe_fields(recipe: Any) -> None:
    """Check a :class:`~floatlab.mixed.Recipe` built by hand, resolving its format names in
    place (it is frozen): a string where a Gemm belongs, or a bogus scaler, used to surface as
    an AttributeError in the first training step."""
    from floatlab.formats import get_format
    from floatlab.mixed.recipe_specs import Gemm, _check_operand

    if not isinstance(recipe.name, str):
        raise TypeError(f"Recipe: name must be a str, got {recipe.name!r}")
    for name in ("forward", "dgrad", "wgrad"):
        if not isinstance(getattr(recipe, name), Gemm):
            raise TypeError(f"Recipe.{name} must be a Gemm (e.g. Gemm(TensorScaling('e4m3fn'), "
                            f"TensorScaling('e4m3fn'))), got {getattr(recipe, name)!r}")
    for name in ("compute", "master"):
        object.__setattr__(recipe, name, get_format(getattr(recipe, name)))
    if recipe.scaler not in (None, "dynamic"):
        raise ValueError(f"Recipe: scaler={recipe.scaler!r}; use None or 'dynamic'")
    if recipe.state is not None and not isinstance(recipe.state, dict):
        raise TypeError(f"Recipe: state must be a dict such as {{'exp_avg': 'e4m3fn'}} or None, "
                        f"got {recipe.state!r}")
    for name in ("weight_grad", "weights"):
        object.__setattr__(recipe, name, _check_operand(getattr(recipe, name), f"Recipe.{name}"))
    if not isinstance(recipe.options, dict):
        raise TypeError(f"Recipe: options must be a dict, got {recipe.options!r}")


def sizes_fit(fn: _F) -> _F:
    """Decorate a builder whose sizes the caller chooses (rows, widths, vocabularies): a size
    too large to allocate (``teacher_gaussians(n=10**12)``: 116 TiB) becomes a ValueError naming
    the builder, not numpy's MemoryError from inside it. The sizes' types and ranges are
    checked by the builder itself (:func:`whole`); only an impossible total is caught here."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MemoryError as err:
            raise ValueError(f"{fn.__qualname__.removesuffix('.__init__')}: the sizes asked for "
                             f"need more memory than there is ({err}); pass smaller sizes"
                             ) from None
    return wrapper  # type: ignore[return-value]
