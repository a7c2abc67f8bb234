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
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from floatlab._interop import as_numpy

__all__ = ["check_flag", "resolve_rng", "as_array", "as_float_array", "refuse_masked"]


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


def resolve_rng(
    rng: Any, stochastic: bool, mode: str, *, name: str = "rng"
) -> np.random.Generator | None:
    """The Generator for stochastic rounding, from a Generator, a seed, or None (fresh entropy).

    Seeds are non-negative ints (numpy's SeedSequence rule). For a deterministic mode an
    ``rng`` has nothing to do: it is ignored with a UserWarning (not an error, so code that
    threads one Generator through every call keeps working), and None is returned. ``name``
    is the argument's name in the caller's signature (``seed=`` in the training lab), so the
    error names what the user typed.
    """
    if rng is not None and not isinstance(rng, np.random.Generator):
        arg = name.rsplit(": ", 1)[-1]  # "Linear: seed" -> seed=...
        if isinstance(rng, (bool, np.bool_)) or not isinstance(rng, (int, np.integer)):
            raise TypeError(
                f"{name} must be a numpy.random.Generator, a non-negative int seed or None, got "
                f"{rng!r} ({type(rng).__name__}); e.g. {arg}=np.random.default_rng(0) or "
                f"{arg}=0"
            )
        if rng < 0:
            what = "rng seed" if name == "rng" else name
            raise ValueError(f"{what} must be a non-negative int, got {rng}")
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
    """``np.asarray(x)``, refusing masked arrays, lists mixing bools with numbers (numpy reads
    ``[1, True]`` as ``[1, 1]``: as values, codes, ids or targets alike) and explaining ragged
    nested lists; torch / JAX / DLPack arrays are converted (see :mod:`floatlab._interop`)."""
    x = as_numpy(x)
    refuse_masked(x, name)
    try:
        arr = np.asarray(x, dtype=dtype)
    except ValueError as err:
        if "inhomogeneous" not in str(err) and "sequence" not in str(err):
            raise
        raise ValueError(
            f"{name} is ragged (nested lists of different lengths, e.g. [[1], [1, 2]]): "
            "floatlab needs a rectangular array; pad the rows to one length or pass each "
            "row separately"
        ) from None
    if isinstance(x, (list, tuple)) and arr.dtype.kind in "fiu" and _hides_bools(x, arr):
        raise TypeError(
            f"{name} mixes booleans with numbers (numpy would read True as 1 and False as 0): "
            "pass numbers only, e.g. float(flag) for a flag you mean as a number"
        )
    return arr


def as_float_array(x: Any, *, name: str = "x") -> np.ndarray:
    """Convert ``x`` to a float array (float32 or float64) without mutating it.

    float16 / bfloat16 / any ml_dtypes float widens exactly to float32; integers widen to float64
    and must be exactly representable there (every |n| <= 2**53, and larger ones such as 2**60
    whose low bits are zero). Bools, complex numbers, strings, objects, ragged lists and masked
    arrays are refused with an error that says what to pass instead.

    >>> as_float_array([1, 2]).dtype
    dtype('float64')
    """
    arr = as_array(x, name)  # (which refuses lists mixing bools with numbers)
    if arr.dtype.type is np.float32 or arr.dtype.type is np.float64:
        # byte-swapped data ('>f4' from a file or the network) in the machine's order: the
        # fast paths read bit patterns through integer views, which would swap the bytes
        return arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))
    kind = arr.dtype.kind
    if kind == "f":  # float16 or longdouble
        if arr.dtype.itemsize > 8:
            raise TypeError(
                f"{name} has dtype {arr.dtype}; floatlab works on float64 at most: "
                f"convert with .astype(np.float64) (this may round)"
            )
        return arr.astype(np.float32)  # float16 widens exactly
    if kind == "V" and _is_ml_float(arr.dtype):  # bfloat16, float8_*, ...: widen exactly
        return arr.astype(np.float32)
    if kind in "iu":
        converted = arr.astype(np.float64)
        if arr.dtype.itemsize >= 8:  # int64 / uint64 may exceed float64's 53 bits
            _check_integers_exact(arr, converted, name)
        return converted
    if kind == "b":
        raise TypeError(
            f"{name} is a boolean array; pass numbers (e.g. x.astype(np.float64))"
        )
    if kind == "c":
        raise TypeError(
            f"{name} is complex; floatlab formats hold real numbers: round x.real and x.imag "
            "separately"
        )
    if kind == "O" and all(_is_real_number(v) for v in arr.flat):
        for v in arr.flat:
            if isinstance(v, (int, np.integer)) and not _int_is_exact_float(int(v)):
                raise _inexact_integer_error(name, int(v))
        return arr.astype(np.float64)
    exact = next((v for v in arr.flat if isinstance(v, (Fraction, Decimal))), None) \
        if kind == "O" else None
    if exact is not None:  # a real number, but not one floatlab rounds from (it would twice)
        raise TypeError(
            f"{name} holds {exact!r} ({type(exact).__name__}), which floatlab does not "
            "convert: it rounds from float64 (or float32), and converting may round first "
            "(a double rounding); pass float(value) if rounding to float64 first is meant"
        )
    raise TypeError(
        f"{name} must hold real numbers, got dtype {arr.dtype} ({_preview(arr)}); "
        "pass floats, ints, or a float array"
    )


def _hides_bools(x: list | tuple, arr: np.ndarray) -> bool:
    """Whether the nested lists / tuples ``x`` (which numpy read as the numbers ``arr``) hold
    a bool or a bool array, which numpy silently read as 1 or 0. Only arrays holding a 0 or a
    1 can hide one, so the Python walk over ``x`` runs only for those (a vectorised test
    first)."""
    if not ((arr == 0) | (arr == 1)).any():
        return False
    stack = [x]
    while stack:
        for item in stack.pop():
            if isinstance(item, (bool, np.bool_)) or (
                    isinstance(item, np.ndarray) and item.dtype.kind == "b"):  # [mask, x]
                return True
            if isinstance(item, (list, tuple)):
                stack.append(item)
    return False


def _is_real_number(value: Any) -> bool:
    """Python / numpy ints and floats, ml_dtypes' float scalars (``ml_dtypes.bfloat16(1.5)``,
    which are not np.floating), not bools, strings, None or complex."""
    if isinstance(value, (bool, np.bool_)):
        return False
    if isinstance(value, (int, float, np.integer, np.floating)):
        return True
    return isinstance(value, np.generic) and _is_ml_float(value.dtype)


def _int_is_exact_float(n: int) -> bool:
    """Whether the Python int ``n`` is a float64 value (int/float comparison is exact)."""
    try:
        return float(n) == n
    except OverflowError:  # beyond float64's range
        return False


def _check_integers_exact(arr: np.ndarray, converted: np.ndarray, name: str) -> None:
    """Refuse 64-bit integers float64 cannot hold (2**53 + 1), accept those it can (2**60)."""
    big = np.flatnonzero(np.abs(converted) >= 2.0**53)  # below that every integer is exact
    if big.size == 0:
        return
    values, floats = arr.reshape(-1)[big], converted.reshape(-1)[big]
    # Compare by converting back; the conversion rounded 2**63 - 1 up to 2**63, which the
    # integer dtype cannot hold, so those are inexact by construction.
    limit = 2.0**63 if arr.dtype.kind == "i" else 2.0**64
    in_range = (floats < limit) & (floats >= -limit)
    back = np.where(in_range, floats, 0.0).astype(arr.dtype)
    inexact = ~in_range | (back != values)
    if inexact.any():
        raise _inexact_integer_error(name, int(values[np.argmax(inexact)]))


def _inexact_integer_error(name: str, example: int) -> ValueError:
    digits = str(example)
    if len(digits) > 40:  # 10**400 in full is a screenful
        digits = f"{digits[:12]}...{digits[-6:]} ({len(digits.lstrip('-'))} digits)"
    if abs(example) >= 2**1024:  # np.asarray(x, dtype=np.float64) raises OverflowError here
        return ValueError(
            f"{name} holds the integer {digits}, which float64 cannot hold exactly: it is beyond "
            "float64's range (|x| < 2**1024, about 1.8e308), and floatlab rounds from float64; "
            "pass a number float64 holds (float('inf') if an infinity is meant)"
        )
    return ValueError(
        f"{name} holds the integer {digits}, which float64 cannot hold exactly (it has 53 "
        f"significant bits: every integer up to 2**53, larger ones only with enough trailing "
        "zero bits); round such integers to float64 yourself "
        "(np.asarray(x, dtype=np.float64)) if that is meant"
    )


def _is_ml_float(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is one of ml_dtypes' floating-point types (all fit in float32)."""
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - ml_dtypes is a dependency
        return False
    try:
        ml_dtypes.finfo(dtype)
    except (ValueError, TypeError, KeyError):
        return False
    return True


def _preview(arr: np.ndarray) -> str:
    flat = arr.reshape(-1)[:3].tolist()
    return repr(flat)[:60]
