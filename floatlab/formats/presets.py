"""The registry of named formats: the presets (float64 ... float4_e2m1fn, with numpy's and
ml_dtypes' names), their aliases (``fp16``, ``e4m3fn``, ...) and the names that mean different
formats in different libraries (``e4m3``, ``fp8``), which are refused rather than guessed.

>>> PRESETS["float16"].max, format_aliases()["bfloat16"]
(65504.0, ['bf16', 'bfloat'])
"""

from __future__ import annotations

from typing import Any

from floatlab.formats.format import Format

__all__ = ["PRESETS", "format_names", "format_aliases"]


def _preset(name: str, e: int, m: int, **kw: Any) -> Format:
    return Format(exp_bits=e, man_bits=m, name=name, **kw)


PRESETS: dict[str, Format] = {
    f.name: f
    for f in (
        _preset("float64", 11, 52),
        _preset("float32", 8, 23),
        _preset("tensorfloat32", 8, 10),
        _preset("float16", 5, 10),
        _preset("bfloat16", 8, 7),
        _preset("float8_e4m3fn", 4, 3, special="fn"),
        _preset("float8_e5m2", 5, 2),
        _preset("float8_e4m3fnuz", 4, 3, bias=8, special="fnuz"),
        _preset("float8_e5m2fnuz", 5, 2, bias=16, special="fnuz"),
        _preset("float8_e4m3", 4, 3),
        _preset("float8_e3m4", 3, 4),
        _preset("float8_e4m3b11fnuz", 4, 3, bias=11, special="fnuz"),
        _preset(
            "float8_e8m0fnu", 8, 0, signed=False, special="fn", subnormals=False, has_zero=False
        ),
        _preset("float6_e2m3fn", 2, 3, special="none"),
        _preset("float6_e3m2fn", 3, 2, special="none"),
        _preset("float4_e2m1fn", 2, 1, special="none"),
    )
}

_ALIASES: dict[str, str] = {
    "fp64": "float64", "double": "float64", "f64": "float64", "binary64": "float64",
    "fp32": "float32", "single": "float32", "float": "float32", "f32": "float32",
    "binary32": "float32",
    "tf32": "tensorfloat32",
    "fp16": "float16", "half": "float16", "f16": "float16", "binary16": "float16",
    "bf16": "bfloat16", "bfloat": "bfloat16",
    "e4m3fn": "float8_e4m3fn", "fp8_e4m3fn": "float8_e4m3fn", "ocp_e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2", "fp8_e5m2": "float8_e5m2", "ocp_e5m2": "float8_e5m2",
    "e4m3fnuz": "float8_e4m3fnuz", "fp8_e4m3fnuz": "float8_e4m3fnuz",
    "e5m2fnuz": "float8_e5m2fnuz", "fp8_e5m2fnuz": "float8_e5m2fnuz",
    "e3m4": "float8_e3m4", "fp8_e3m4": "float8_e3m4",
    "e4m3b11fnuz": "float8_e4m3b11fnuz", "e4m3b11": "float8_e4m3b11fnuz",
    "e8m0": "float8_e8m0fnu", "e8m0fnu": "float8_e8m0fnu", "fp8_e8m0": "float8_e8m0fnu",
    "e2m3": "float6_e2m3fn", "e2m3fn": "float6_e2m3fn", "fp6_e2m3": "float6_e2m3fn",
    "e3m2": "float6_e3m2fn", "e3m2fn": "float6_e3m2fn", "fp6_e3m2": "float6_e3m2fn",
    "e2m1": "float4_e2m1fn", "e2m1fn": "float4_e2m1fn", "fp4_e2m1": "float4_e2m1fn",
    "fp4": "float4_e2m1fn", "float4": "float4_e2m1fn",
}

# Names people type that mean different formats in different libraries: never guess.
_AMBIGUOUS: dict[str, tuple[str, ...]] = {
    "e4m3": ("float8_e4m3fn", "float8_e4m3", "float8_e4m3fnuz", "float8_e4m3b11fnuz"),
    "fp8_e4m3": ("float8_e4m3fn", "float8_e4m3", "float8_e4m3fnuz"),
    "fp8": ("float8_e4m3fn", "float8_e5m2", "float8_e4m3", "float8_e4m3fnuz", "float8_e5m2fnuz"),
    "float8": ("float8_e4m3fn", "float8_e5m2", "float8_e4m3", "float8_e4m3fnuz", "float8_e5m2fnuz"),
    "fp6": ("float6_e2m3fn", "float6_e3m2fn"),
    "float6": ("float6_e2m3fn", "float6_e3m2fn"),
}


def format_names() -> list[str]:
    """Every canonical preset name, in registry order.

    >>> format_names()[:4]
    ['float64', 'float32', 'tensorfloat32', 'float16']
    """
    return list(PRESETS)


def format_aliases() -> dict[str, list[str]]:
    """The short names of each preset (canonical name -> aliases, in registry order).

    >>> format_aliases()["float16"]
    ['fp16', 'half', 'f16', 'binary16']
    """
    short: dict[str, list[str]] = {name: [] for name in PRESETS}
    for alias, name in _ALIASES.items():
        short[name].append(alias)
    return short
