"""Scheme: the four choices of a block-scaled quantisation recipe, and the named presets.

Every recipe in use is the same four choices: how many values share a scale (``block``), what
format the scale is stored in (``scale``), how the scale is rounded (``scale_rounding``) and how
the elements are rounded (``rounding``), plus the element format itself.

>>> import floatlab
>>> s = floatlab.get_scheme("mxfp8")
>>> s
Scheme('mxfp8_e4m3': float8_e4m3fn elements, blocks of 32, e8m0 scales (floor), 8.25 bits/value)
>>> floatlab.get_scheme("nvfp4").bits_per_value
4.5
>>> floatlab.Scheme("e2m1", 16, "e4m3fn", "even", global_scale=True) == floatlab.get_scheme("nvfp4")
True
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from floatlab.formats import Format, FormatNameError, get_format
from floatlab.quant.codebook import Codebook, codebook_names, get_codebook
from floatlab.quant.fixed import FixedPoint

__all__ = ["Scheme", "get_scheme", "format_or_scheme", "scheme_names", "SCALE_FORMATS",
           "SCALE_ROUNDINGS", "resolve_element"]

SCALE_FORMATS = ("float32", "pow2", "e8m0", "e4m3fn", "bf16", "dq8")
SCALE_ROUNDINGS = ("floor", "ceil", "even", "rceil", "rfloor")
_SCALE_BITS = {"float32": 32, "pow2": 32, "e8m0": 8, "e4m3fn": 8, "bf16": 16, "dq8": 8}
_SCALE_FORMAT_NAMES = {"float32": "float32", "pow2": "float32", "e8m0": "float8_e8m0fnu",
                       "e4m3fn": "float8_e4m3fn", "bf16": "bfloat16", "dq8": "float32"}
_NAMED_BLOCKS = ("tensor", "row", "column")


def _scale_key(scale: Any) -> str:
    """The SCALE_FORMATS key of ``scale``: a key, or any spelling get_format reads of the
    float32 / e8m0 / e4m3fn / bf16 scale formats ("fp32", "E8M0", a Format, np.float32)."""
    if isinstance(scale, str) and scale in SCALE_FORMATS:
        return scale
    key = scale.strip().lower() if isinstance(scale, str) else None
    if key in ("pow2", "dq8"):  # rules over float32, not format names
        return key
    try:
        fmt = get_format(scale)
    except (TypeError, ValueError):  # unknown, ambiguous ('e4m3'), not a format
        fmt = None
    for name in ("float32", "e8m0", "e4m3fn", "bf16"):
        if fmt is not None and fmt == get_format(_SCALE_FORMAT_NAMES[name]):
            return name
    close = difflib.get_close_matches(str(key or scale), SCALE_FORMATS, n=2, cutoff=0.4)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    raise ValueError(f"unknown scale format {scale!r}.{hint} Use one of "
                     f"{', '.join(SCALE_FORMATS)} (or another name of float32, e8m0, e4m3fn, "
                     "bf16, e.g. 'fp32' or a Format)")


def _scale_rounding_key(rule: Any) -> str:
    """The SCALE_ROUNDINGS key of ``rule``, read as format and rounding names are: in any case,
    surrounding spaces ignored ("CEIL", " rceil"); unknown names get the close ones."""
    if isinstance(rule, str) and rule in SCALE_ROUNDINGS:  # the common case
        return rule
    if not isinstance(rule, str):
        raise TypeError(f"scale_rounding must be a string, one of {', '.join(SCALE_ROUNDINGS)}; "
                        f"got {rule!r} ({type(rule).__name__})")
    key = rule.strip().lower()
    if key in SCALE_ROUNDINGS:
        return key
    close = difflib.get_close_matches(key, SCALE_ROUNDINGS, n=2, cutoff=0.5)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    raise ValueError(f"unknown scale_rounding {rule!r}.{hint} Use one of "
                     f"{', '.join(SCALE_ROUNDINGS)}")


_F32_MAX = float(np.finfo(np.float32).max)
DQ8_BLOCK = 256  # QLoRA's double quantisation: the absmax values in blocks of 256


def resolve_element(element: Any) -> Format | Codebook | FixedPoint:
    """A Format, Codebook or FixedPoint from a name or object (codebook names first)."""
    if isinstance(element, (Format, Codebook, FixedPoint)):
        fmt = element
    elif isinstance(element, str) and element.strip().lower().replace("-", "_") in \
            codebook_names():
        fmt = get_codebook(element)
    else:
        fmt = get_format(element)
    if isinstance(fmt, Format) and not (fmt.signed and fmt.has_zero):
        raise ValueError(
            f"{fmt.name} cannot be an element format: it has no sign bit or no zero; use e.g. "
            "'e4m3fn', 'e5m2', 'e2m3', 'e3m2', 'e2m1', a Codebook or a FixedPoint"
        )
    return fmt


def element_max(fmt: Format | Codebook | FixedPoint) -> float:
    """The magnitude a block's amax is mapped to (Format.max, the codebook's largest |value|,
    the fixed-point max)."""
    return float(fmt.max)


def element_emax(fmt: Format | Codebook | FixedPoint) -> int:
    """floor(log2(max)): the exponent the power-of-two scale rules aim the amax at."""
    if isinstance(fmt, Format):
        return fmt.emax
    return math.frexp(element_max(fmt))[1] - 1


def _check_block(block: Any) -> Any:
    if isinstance(block, str):
        if block not in _NAMED_BLOCKS:
            raise ValueError(f"block {block!r} is not one of {_NAMED_BLOCKS}, an int (1-D "
                             "blocks along axis) or a tile such as (1, 128)")
        return block
    if isinstance(block, (bool,)) or block is None:
        raise TypeError(f"block must be 'tensor', 'row', 'column', an int or a 2-tuple, got "
                        f"{block!r}")
    if isinstance(block, int) or (hasattr(block, "__index__") and not isinstance(block, tuple)):
        b = int(block)
        if b < 1:
            raise ValueError(f"block size must be >= 1, got {b}")
        return b
    if isinstance(block, (tuple, list)) and len(block) == 2 and all(
            isinstance(b, (int, np.integer)) and not isinstance(b, (bool, np.bool_))
            for b in block):
        if min(block) < 1:
            raise ValueError(f"tile sizes must be >= 1, got {tuple(block)}")
        return tuple(int(b) for b in block)
    raise TypeError(f"block must be 'tensor', 'row', 'column', an int or a 2-tuple of ints "
                    f"such as (128, 128), got {block!r}")


@dataclass(frozen=True)
class Scheme:
    """A block-scaled quantisation scheme.

    Parameters
    ----------
    element : element format: any floatlab Format name or object ("e4m3fn", "e5m2", "e2m3",
        "e3m2", "e2m1", ...), a :class:`Codebook` or codebook name ("nf4", "dynamic8", ...) or a
        :class:`FixedPoint` ("int8", "int4", "mxint8").
    block : "tensor" (one scale), "row" (one per index of the leading axes: blocks run along
        the last axis), "column" (one per index of the last axis), an int ``b`` (1-D blocks of
        ``b`` along ``axis``) or a 2-D tile ``(r, c)`` over the last two axes. Ragged edges are
        padded logically with zeros (a shorter last block, scaled by its own amax).
    scale : "float32", "pow2" (float32 powers of two), "e8m0", "e4m3fn", "bf16" (or any
        name, Format or dtype of these four, e.g. "fp32"), or "dq8"
        (QLoRA's double quantisation: float32 absmax values, stored as 8-bit dynamic-map codes
        in blocks of 256 after subtracting their mean). As in bitsandbytes, dq8 with int
        blocks blocks the flattened tensor (C order, the last block partial; one scale per
        block, ``scales`` 1-D), whatever its shape, so ``axis`` does not apply to it.
    scale_rounding : "floor", "ceil", "even", "rceil", "rfloor" -- see
        :mod:`floatlab.quant.scales`.
    rounding : element rounding, any :func:`floatlab.round` mode ("nearest_even",
        "stochastic", ...).
    global_scale : NVFP4's second level: a per-tensor float32 scale ``amax / (scale.max *
        element.max)`` that the block scales are divided by before they are rounded (e4m3fn
        scales only).
    margin : headroom in powers of two: the scale is multiplied by ``2**margin``.
    axis : the axis of int blocks (and of the Hadamard transform); None: int blocks over the
        flattened tensor in C order (the last block partial, ``scales`` 1-D), as bitsandbytes'
        ``quantize_blockwise`` / ``quantize_4bit`` block any tensor -- the ``nf4``,
        ``dynamic8`` and ``udynamic8`` presets do.
    hadamard : None or a power of two ``h`` (NVFP4 uses 16): a random Hadamard transform over
        blocks of ``h`` along ``axis`` before quantising, inverted on dequantising.
    random_bits : None (exact stochastic rounding) or ``k`` in 1..16 with
        ``rounding="stochastic"`` and a float element format: the hardware's stochastic
        rounding with k random bits per value (NVFP4's ``cvt.rs`` E2M1 conversion takes 8),
        in the kernels' float32 arithmetic. See :func:`floatlab.quant.elements.
        round_random_bits` for the exact rule and the random stream.
    name : a label (the presets set it); not part of equality.

    >>> s = Scheme("e4m3fn", 32, "e8m0", "rceil")       # MXFP8 with cuBLAS / TE's scale rule
    >>> s
    Scheme(float8_e4m3fn elements, blocks of 32, e8m0 scales (rceil), 8.25 bits/value)
    >>> s == get_scheme("mxfp8").replace(scale_rounding="rceil")
    True
    """

    element: Any
    block: Any = 32
    scale: str = "e8m0"
    scale_rounding: str = "floor"
    rounding: str = "nearest_even"
    global_scale: bool = False
    margin: int = 0
    axis: int | None = -1
    hadamard: int | None = None
    random_bits: int | None = None
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "element", resolve_element(self.element))
        object.__setattr__(self, "block", _check_block(self.block))
        object.__setattr__(self, "scale", _scale_key(self.scale))
        object.__setattr__(self, "scale_rounding", _scale_rounding_key(self.scale_rounding))
        from floatlab.rounding import _resolve_mode

        object.__setattr__(self, "rounding", _resolve_mode(self.rounding))
        # What quantisation derives from the scheme, memoised (per-shape block layouts, the
        # scale format, whether the fused NVFP4 path applies); not a field: no part of
        # equality, hashing or repr.
        object.__setattr__(self, "_plans", {})
        for label, value in (("margin", self.margin), ("axis", self.axis)):
            if label == "axis" and value is None:  # int blocks over the flattened tensor
                continue
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                what = "an int, or None (int blocks over the flattened tensor)" \
                    if label == "axis" else "an int"
                raise TypeError(f"{label} must be {what}, got {value!r}")
            object.__setattr__(self, label, int(value))
        if self.margin < 0:
            raise ValueError(f"margin must be >= 0, got {self.margin}")
        if self.margin > 1023:  # (2.0**margin would overflow: an OverflowError deep inside)
            raise ValueError(f"margin={self.margin} is beyond float64's exponents: it is the "
                             "headroom in powers of two, a few binades at most (e.g. margin=1)")
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a string (a label), got {self.name!r}")
        if not isinstance(self.global_scale, bool):
            raise TypeError(f"global_scale must be True or False, got {self.global_scale!r}")
        if self.global_scale and self.scale != "e4m3fn":
            # (float32 / bf16 block scales: scale.max * element.max overflows float32, and in
            # any precision amax / it is below float32's normal range for every tensor of
            # amax under ~1e3, so each quantize raised "global scale outside float32's normal
            # range"; they need no second level: they span float32's range themselves)
            raise ValueError("global_scale is NVFP4's second level for E4M3 block scales "
                             "(their narrow range is what it widens); it makes no sense with "
                             f"{self.scale!r} scales; use scale='e4m3fn' or drop global_scale")
        if self.global_scale and not float(self.element.max) * 448.0 <= _F32_MAX:
            # (the float32 divisor scale.max * element.max of g = amax / it overflowed, so g
            # was 0 and every quantize raised "the tensor amax ... gives a global scale
            # outside float32's normal range; scale the tensor first", whatever the tensor)
            raise ValueError(f"global_scale divides the tensor amax by E4M3's max times the "
                             f"element's max in float32, and 448 * {self.element.max:g} "
                             f"({self.element.name}) overflows float32; use a narrower element "
                             "format (e.g. 'e2m1', 'e4m3fn') or drop global_scale")
        if self.scale == "dq8" and isinstance(self.block, int) and self.axis not in (-1, None) and \
                not self.hadamard:
            raise ValueError(f"axis={self.axis} does not apply to dq8 scales with int blocks: "
                             "they are bitsandbytes' (QLoRA's double quantisation), whose "
                             "blocks run over the flattened tensor in C order; drop axis")
        if self.scale_rounding == "even" and self.scale in ("pow2", "e8m0") and \
                not isinstance(self.element, Format):
            raise ValueError("scale_rounding='even' rounds amax to the element's mantissa "
                             "width: it needs a float element format, not "
                             f"{self.element.name}; use 'floor', 'ceil' or 'rceil'")
        for label in ("random_bits", "hadamard"):  # numpy ints as margin and axis take them
            value = getattr(self, label)
            if isinstance(value, np.integer) and not isinstance(value, np.bool_):
                object.__setattr__(self, label, int(value))
        if self.random_bits is not None:
            k = self.random_bits
            if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 16:
                raise ValueError(f"random_bits must be None or an int in 1..16 (NVFP4's hardware "
                                 f"uses 8), got {k!r}")
            if self.rounding != "stochastic" or not isinstance(self.element, Format):
                raise ValueError("random_bits is the hardware's stochastic rounding with few "
                                 "random bits: it needs rounding='stochastic' and a float "
                                 f"element format, not {self.rounding!r} elements of "
                                 f"{self.element.name}")
        if self.hadamard is not None:
            if self.axis is None:
                raise ValueError("hadamard runs along an axis, but axis=None blocks the "
                                 "flattened tensor; pass an axis (e.g. axis=-1) for it")
            h = self.hadamard
            if isinstance(h, bool) or not isinstance(h, int) or h < 2 or h & (h - 1):
                raise ValueError(f"hadamard must be None or a power of two >= 2 (NVFP4 uses "
                                 f"16), got {h!r}")

    # ------------------------------------------------------------------ derived
    @property
    def scale_format(self) -> Format:
        """The floatlab Format the scales are stored in (pow2 and dq8: float32 values)."""
        fmt = self._plans.get("scale_format")  # memoised: quantisation asks every call
        if fmt is None:
            fmt = self._plans["scale_format"] = get_format(_SCALE_FORMAT_NAMES[self.scale])
        return fmt

    @property
    def scale_bits(self) -> int:
        return _SCALE_BITS[self.scale]

    @property
    def block_size(self) -> int | None:
        """Values per scale for int blocks and tiles; None for tensor / row / column."""
        if isinstance(self.block, int):
            return self.block
        if isinstance(self.block, tuple):
            return self.block[0] * self.block[1]
        return None

    @property
    def bits_per_value(self) -> float:
        """Nominal storage per value: element bits + scale bits / block size (per-tensor,
        per-row and per-column scales count as 0 here; QuantizedTensor.bits_per_value is exact).
        """
        bits = float(self.element.bits)
        if self.block_size:
            per_block = self.scale_bits
            if self.scale == "dq8":  # plus one float32 absmax per 256 scales
                per_block += 32 / DQ8_BLOCK
            bits += per_block / self.block_size
        return bits

    def replace(self, **changes: Any) -> Scheme:
        """A copy with some fields changed: ``get_scheme("mxfp8").replace(scale_rounding=
        "rceil")``."""
        changes.setdefault("name", "")
        return replace(self, **changes)

    def describe(self) -> str:
        blocks = {"tensor": "one scale per tensor", "row": "one scale per row",
                  "column": "one scale per column"}
        if isinstance(self.block, str):
            where = blocks[self.block]
        elif isinstance(self.block, int):
            where = f"blocks of {self.block}"
            if self.axis is None or self.scale == "dq8":  # (blocks._over_flat)
                where += " over the flattened tensor"
        else:
            where = f"{self.block[0]}x{self.block[1]} tiles"
        extra = ""
        if self.global_scale:
            extra += " + float32 tensor scale"
        if self.hadamard:
            extra += f", Hadamard {self.hadamard}"
        if self.rounding != "nearest_even":
            extra += f", {self.rounding} elements"
        if self.random_bits is not None:
            extra += f" ({self.random_bits} random bits)"
        if self.margin:
            extra += f", margin {self.margin}"
        return (f"{self.element.name} elements, {where}, {self.scale} scales "
                f"({self.scale_rounding}){extra}")

    def __repr__(self) -> str:
        label = f"{self.name!r}: " if self.name else ""
        return f"Scheme({label}{self.describe()}, {self.bits_per_value:g} bits/value)"


def _preset(name: str, element: Any, block: Any, scale: str, rule: str, **kw: Any) -> Scheme:
    return Scheme(element, block, scale, rule, name=name, **kw)


def _build_presets() -> dict[str, Scheme]:
    mx = [("mxfp8_e4m3", "e4m3fn"), ("mxfp8_e5m2", "e5m2"), ("mxfp6_e2m3", "e2m3"),
          ("mxfp6_e3m2", "e3m2"), ("mxfp4", "e2m1"), ("mxint8", "mxint8")]
    presets = [_preset(n, e, 32, "e8m0", "floor") for n, e in mx]
    presets += [
        _preset("nvfp4", "e2m1", 16, "e4m3fn", "even", global_scale=True),
        _preset("fp8_tensorwise", "e4m3fn", "tensor", "float32", "even"),
        _preset("fp8_rowwise", "e4m3fn", "row", "float32", "even"),
        _preset("fp8_1x128", "e4m3fn", (1, 128), "float32", "even"),
        _preset("fp8_128x128", "e4m3fn", (128, 128), "float32", "even"),
        _preset("int8_tensor", "int8", "tensor", "float32", "even"),
        _preset("int8_row", "int8", "row", "float32", "even"),
        # bitsandbytes' blockwise quantisation (quantize_4bit, quantize_blockwise) blocks the
        # flattened tensor; dq8's int blocks always do
        _preset("nf4", "nf4", 64, "float32", "even", axis=None),
        _preset("nf4_dq", "nf4", 64, "dq8", "even"),
        _preset("dynamic8", "dynamic8", 256, "float32", "even", axis=None),
        _preset("udynamic8", "udynamic8", 256, "float32", "even", axis=None),
    ]
    return {s.name: s for s in presets}


_PRESETS: dict[str, Scheme] | None = None
_ALIASES = {"mxfp8": "mxfp8_e4m3", "mxfp6": "mxfp6_e2m3"}


def scheme_names() -> list[str]:
    """The preset names (aliases: "mxfp8" = "mxfp8_e4m3", "mxfp6" = "mxfp6_e2m3").

    >>> scheme_names()[:3]
    ['mxfp8_e4m3', 'mxfp8_e5m2', 'mxfp6_e2m3']
    """
    return list(_presets())


def _presets() -> dict[str, Scheme]:
    global _PRESETS
    if _PRESETS is None:
        _PRESETS = _build_presets()
    return _PRESETS


def format_or_scheme(name: Any, where: str) -> Format | Scheme:
    """What a name means where a format or a scheme may go (an optimizer state, a recipe's GEMM
    operand): a format (any name or dtype :func:`get_format` reads), else a scheme preset. An
    ambiguous format name keeps its candidates; an unknown one both resolvers' close names.

    >>> format_or_scheme("E4M3FN", "x").name, format_or_scheme("mxfp8", "x").name
    ('float8_e4m3fn', 'mxfp8_e4m3')
    """
    try:
        return get_format(name)
    except (ValueError, TypeError) as format_error:
        if not isinstance(name, str):
            raise type(format_error)(f"{where}: {format_error}") from None
        try:
            return get_scheme(name)
        except ValueError as scheme_error:
            if "ambiguous" in str(format_error):  # 'fp8': say which formats it may mean
                raise FormatNameError(f"{where}: {format_error}") from None
            close = [m.group(1) for e in (format_error, scheme_error)
                     if (m := re.search(r"Did you mean (.*?)\?", str(e)))]
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise FormatNameError(
                f"{where}={name!r} is neither a floatlab format nor a scheme name.{hint} "
                "E.g. 'e4m3fn', 'bf16', 'fp8_tensorwise', 'dynamic8'") from None


def get_scheme(scheme: str | Scheme) -> Scheme:
    """A preset Scheme by name (or a Scheme itself); unknown names list the close ones.

    >>> get_scheme("fp8_rowwise").block
    'row'
    >>> get_scheme("mxfp9")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown scheme 'mxfp9'. Did you mean 'mxfp8', 'mxfp6', 'mxfp4'? Known schemes: ...
    """
    if isinstance(scheme, Scheme):
        return scheme
    if not isinstance(scheme, str):
        raise TypeError(f"scheme must be a Scheme or a preset name such as 'mxfp8', got "
                        f"{scheme!r}")
    key = scheme.strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    presets = _presets()
    if key in presets:
        return presets[key]
    known = list(presets) + list(_ALIASES)
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    raise ValueError(f"unknown scheme {scheme!r}.{hint} Known schemes: {', '.join(known)}")
