"""Name resolution: :func:`get_format` turns a name (preset, alias, P3109 name, spec name,
numpy dtype string), a :class:`~floatlab.formats.Format` or a dtype into a Format, and refuses
unknown and ambiguous names with a :class:`FormatNameError` that names the way out.

>>> get_format("Float8-E4M3FN") is get_format("e4m3fn")
True
"""

from __future__ import annotations

import difflib
from typing import Any

import numpy as np

from floatlab.formats.format import Format
from floatlab.formats.presets import _ALIASES, _AMBIGUOUS, PRESETS, format_names
from floatlab.formats.spec import _from_spec

__all__ = ["FormatNameError", "get_format"]


class FormatNameError(ValueError):
    """A format name that floatlab cannot resolve (unknown or ambiguous); a ValueError.

    >>> get_format("fp17")
    Traceback (most recent call last):
    ...
    floatlab.formats.FormatNameError: unknown format name 'fp17'. Did you mean 'fp16', 'fp4', ...
    """


# Its public home, as before the split: tracebacks (and the README) show
# floatlab.formats.FormatNameError, and pickles find it there.
FormatNameError.__module__ = "floatlab.formats"


def _registered(name: str) -> Format | str | None:
    """What a registered name (preset, alias, P3109 name) means; "ambiguous"; or None."""
    if name in _AMBIGUOUS:
        return "ambiguous"
    target = _ALIASES.get(name, name)
    if target in PRESETS:
        return PRESETS[target]
    from floatlab.p3109 import find_p3109  # p3109 builds on this module: import on use

    return find_p3109(name)


def _normalise(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(" ", "")


def _ambiguity_message(name: str, candidates: tuple[str, ...]) -> str:
    rows = ", ".join(f"{c} (max {PRESETS[c].max:g})" for c in candidates)
    return (
        f"format name {name!r} is ambiguous: it means different formats in different "
        f"libraries. Say which one: {rows}."
    )


def _one_format(formats: Any) -> bool:
    """Whether ``formats`` (of a function taking one format or a list of them) is one format:
    a name, a Format, a dtype or scalar type, or a 0-d array (finfo reads its dtype), which
    are iterable (or not) without being lists of formats."""
    return isinstance(formats, (str, bytes, Format, np.dtype, type)) or (
        isinstance(formats, np.ndarray) and formats.ndim == 0)


def get_format(fmt: str | Format | Any) -> Format:
    """Resolve a name, a :class:`Format`, or a numpy / ml_dtypes dtype to a Format.

    Names are case-insensitive; ``-`` and ``_`` are interchangeable. They are looked up in
    this order: preset names and their aliases (``"fp16"``, ``"e4m3fn"``), the IEEE P3109 names
    (``"p3109_k8p3se"``, alias ``"binary8p3se"``), spec names (below), and last numpy dtype
    strings (``"f4"``, ``"<f8"``). Ambiguous names such as ``"e4m3"`` or ``"fp8"`` are refused.
    The short names of presets win over the spec reading: ``"e5m2"``, ``"e3m4"`` are the
    ml_dtypes formats (IEEE-like anyway), and ``"e2m1"`` / ``"e2m3"`` / ``"e3m2"`` are the OCP MX
    element formats (no inf, no NaN: E2M1's max is 6, not the IEEE-like reading's 3).

    Spec names describe any :class:`Format` field by field::

        e<E>m<M> [b<bias>] [kind] [_unsigned] [_nozero] [_ftz]

    * ``b<bias>``: the bias, possibly negative (``b-5``); omitted = the kind's default
      (``2**(E-1) - 1``; ``2**(E-1)`` for fnuz and p3109; 0 when E is 0).
    * kind: nothing or ``_ieee`` (IEEE-like: inf and NaN in the all-ones exponent), ``fn`` or
      ``fn_nan`` (NaN only at all ones), ``fnuz`` (NaN at the -0 code), ``fn_nonan`` (no inf,
      no NaN), ``_p3109`` (P3109 extended: +-inf at the top codes, NaN at the -0 code), and
      ``fnu``, ml_dtypes' spelling of ``fn_unsigned_nozero`` (E8M0).
    * flags: ``_unsigned`` (no sign bit), ``_nozero`` (no zero: the exponent field 0 is an
      ordinary binade; implies no subnormals), ``_ftz`` (zero but no subnormals).

    Every Format's default name is its spec name, with the kind spelled out (``_ieee``,
    ``fn_nan``) where the short spelling is a preset's alias or ambiguous, so
    ``get_format(fmt.name) == fmt`` for every Format and no two different Formats share a name.

    >>> get_format("BF16").name
    'bfloat16'
    >>> import numpy as np; get_format(np.float16).max
    65504.0
    >>> get_format("e6m9").max   # a custom IEEE-like format
    4290772992.0
    >>> Format(2, 1).name, get_format("e2m1_ieee").max, get_format("e2m1").max
    ('e2m1_ieee', 3.0, 6.0)
    >>> Format(4, 3, bias=-5).name, Format(5, 3, bias=16, signed=False, special="fn").name
    ('e4m3b-5', 'e5m3b16fn_unsigned')
    >>> get_format("f4").name, get_format("binary8p3se").name
    ('float32', 'p3109_k8p3se')
    """
    if isinstance(fmt, Format):
        return fmt
    if isinstance(fmt, str):
        return _format_from_name(fmt)
    if fmt is None or isinstance(fmt, (bool, int, float)):
        raise TypeError(
            f"expected a format name such as 'fp16', a floatlab.Format or a numpy dtype, "
            f"got {fmt!r}"
        )
    if isinstance(fmt, (bytes, list, tuple, dict, set)):
        # np.dtype reads these as structured-dtype specs ([] is 'void', b'01' a Python literal
        # it cannot parse): none of them names a format.
        hint = " (a bytes name: decode it to str)" if isinstance(fmt, bytes) else (
            "; for several formats call once per format" if isinstance(fmt, (list, tuple, set))
            else "")
        raise TypeError(
            f"expected a format name such as 'fp16', a floatlab.Format or a numpy dtype, "
            f"got {type(fmt).__name__} {fmt!r}{hint}"
        )
    if getattr(fmt, "is_element_format", False):  # FixedPoint / Codebook (floatlab.quant)
        raise TypeError(
            f"{type(fmt).__name__} {fmt.name!r} is not a floating-point Format: fixed point and "
            "codebooks work in floatlab.round, encode, decode, values, explain and as a "
            "Scheme's elements; this needs a floating-point format such as 'fp16' or 'e4m3fn'"
        )
    try:
        dtype = np.dtype(fmt)
    except (TypeError, ValueError, SyntaxError):
        raise TypeError(
            f"expected a format name such as 'fp16', a floatlab.Format or a numpy dtype, "
            f"got {type(fmt).__name__} {fmt!r}"
        ) from None
    if dtype.name in PRESETS:
        return PRESETS[dtype.name]
    raise TypeError(
        f"dtype {dtype.name!r} is not a floating-point format floatlab knows; "
        f"known dtypes: {', '.join(format_names())}"
    )


def _format_from_name(name: str) -> Format:
    key = _normalise(name)
    if key in PRESETS:
        return PRESETS[key]
    if key in _ALIASES:
        return PRESETS[_ALIASES[key]]
    if key in _AMBIGUOUS:
        raise FormatNameError(_ambiguity_message(name, _AMBIGUOUS[key]))
    from floatlab.p3109 import P3109, find_p3109

    p3109 = find_p3109(key)
    if p3109 is not None:
        return p3109
    spec = _from_spec(key)
    if spec is not None:
        return spec
    dtype = _numpy_dtype_string(name)
    if dtype is not None:
        if dtype.name not in PRESETS:  # a name, so a wrong value (FormatNameError), not a type
            raise FormatNameError(
                f"{name!r} is the numpy dtype {dtype.name}, which floatlab does not model "
                f"(its values leave as float64): use 'f8' (float64) or another of "
                f"{', '.join(format_names())}"
            )
        return get_format(dtype)
    known = list(PRESETS) + list(_ALIASES) + list(P3109)
    close = difflib.get_close_matches(key, known, n=4, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise FormatNameError(
        f"unknown format name {name!r}.{hint} Known formats: {', '.join(format_names())}; "
        "or a spec such as 'e3m4' for a custom IEEE-like format."
    )


def _numpy_dtype_string(name: str) -> np.dtype | None:
    """The numpy (or ml_dtypes) floating-point dtype a string such as ``"f4"`` or ``"<f8"``
    names, or None. Checked after floatlab's own names, which take precedence."""
    import ml_dtypes  # noqa: F401 - registers "bfloat16", "float8_e4m3fn", ... with numpy

    try:
        dtype = np.dtype(name.strip())
    except (TypeError, ValueError, SyntaxError):  # numpy parses some strings as Python ('01')
        return None
    if dtype.kind == "f" or dtype.name in PRESETS:
        return dtype
    raise FormatNameError(
        f"{name!r} is the numpy dtype {dtype.name}, not a floating-point format: use e.g. "
        "'f4' (float32), 'fp16' or a floatlab.Format"
    )
