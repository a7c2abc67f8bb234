"""Input checks shared by the public functions: flags, seeds, array-likes.

Each check raises an error that names the problem and the fix (DEVELOPERS.md, "Bad input"),
so the public functions stay short and all give the same message for the same mistake.

>>> check_flag(True, "saturate")
True
>>> check_flag("no", "saturate")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
TypeError: saturate must be True or False, got 'no' (str); strings are refused because ...
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from floatlab._interop import as_numpy

__all__ = ["check_flag", "resolve_rng", "as_array", "refuse_masked"]


def check_flag(value: Any, name: str) -> bool:
    """``value`` as a bool; only real bools (Python or numpy) are accepted.

    A flag given as a string ("False", "no") or a number would silently mean True (or
    False for 0): that is the surprise this check prevents.
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    why = (
        "strings are refused because any non-empty string, even 'False', would count as True"
        if isinstance(value, str)
        else "pass True or False"
    )
    raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__}); {why}")


def resolve_rng(rng: Any, stochastic: bool, mode: str) -> np.random.Generator | None:
    """The Generator for stochastic rounding, from a Generator, a seed, or None (fresh entropy).

    Seeds are non-negative ints (numpy's SeedSequence rule). For a deterministic mode an
    ``rng`` has nothing to do: it is ignored with a UserWarning (not an error, so code that
    threads one Generator through every call keeps working), and None is returned.
    """
    if rng is not None and not isinstance(rng, np.random.Generator):
        if isinstance(rng, (bool, np.bool_)) or not isinstance(rng, (int, np.integer)):
            raise TypeError(
                f"rng must be a numpy.random.Generator, a non-negative int seed or None, got "
                f"{rng!r} ({type(rng).__name__}); e.g. rng=np.random.default_rng(0) or rng=0"
            )
        if rng < 0:
            raise ValueError(f"rng seed must be a non-negative int, got {rng}")
    if not stochastic:
        if rng is not None:
            warnings.warn(
                f"rng is ignored: rounding={mode!r} is deterministic (only 'stochastic' draws "
                "random numbers); drop rng, or pass rounding='stochastic'",
                UserWarning,
                stacklevel=3,
            )
        return None
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def refuse_masked(x: Any, name: str) -> None:
    """Masked arrays are refused: numpy's conversions would drop the mask without a word."""
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError(
            f"{name} is a masked array; floatlab would lose its mask. Pass x.filled(value) "
            "(masked entries replaced) or x.compressed() (only the unmasked ones), and re-apply "
            "the mask to the result with np.ma.array(result, mask=np.ma.getmaskarray(x))"
        )


def as_array(x: Any, name: str, dtype: Any = None) -> np.ndarray:
    """``np.asarray(x)``, refusing masked arrays and explaining ragged nested lists; torch /
    JAX / DLPack arrays are converted (see :mod:`floatlab._interop`)."""
    x = as_numpy(x)
    refuse_masked(x, name)
    try:
        return np.asarray(x, dtype=dtype)
    except ValueError as err:
        if "inhomogeneous" not in str(err) and "sequence" not in str(err):
            raise
        raise ValueError(
            f"{name} is ragged (nested lists of different lengths, e.g. [[1], [1, 2]]): "
            "floatlab needs a rectangular array; pad the rows to one length or pass each "
            "row separately"
        ) from None
