"""Pictures of the bits: the sign / exponent / mantissa layout of formats, and the actual bits
of one value with what each field contributes.

>>> ax = value_bits(1.0, "bf16")
>>> "".join(t.get_text() for t in ax.texts[:16])
'0011111110000000'
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import matplotlib.patches as mpatches
from matplotlib.axes import Axes
from matplotlib.ticker import FixedLocator

from floatlab.codec import decode, fields
from floatlab.formats import Format, get_format
from floatlab.plots._common import (
    _FIELD_EDGE,
    FIELD_COLORS,
    FormatLike,
    _axes,
    _formats,
    _one_value,
)

__all__ = ["bit_layout", "value_bits"]


def _field_widths(fmt: Format) -> list[tuple[str, int]]:
    """(field, width) from the most significant bit down, omitting empty fields."""
    widths = [("sign", int(fmt.signed)), ("exponent", fmt.exp_bits), ("mantissa", fmt.man_bits)]
    return [(name, w) for name, w in widths if w]


def _box_label(name: str, width: int, chars_per_bit: float) -> str:
    """The longest field label that fits in a box ``width`` bits wide."""
    short = {"sign": "S", "exponent": f"E{width}", "mantissa": f"M{width}"}[name]
    long = "sign" if name == "sign" else f"{name} ({width})"
    for label in (long, short):
        if len(label) <= width * chars_per_bit:
            return label
    return ""


def _chars_per_bit(ax: Axes, span_bits: float, fontsize: float) -> float:
    """About how many characters of ``fontsize`` fit in one bit of the x axis."""
    width_in = ax.get_position().width * ax.figure.get_figwidth()
    return width_in * 72 / (0.62 * fontsize) / span_bits


def bit_layout(formats: FormatLike | Iterable[FormatLike] = ("float32", "float16", "bfloat16"),
               ax: Axes | None = None) -> Axes:
    """Sign / exponent / mantissa boxes of one or several formats, one row each, to scale.

    Every box is as wide as its field, so FP32 / FP16 / BF16 side by side show at a glance that
    BF16 keeps FP32's 8 exponent bits and FP16 keeps more mantissa bits. One Rectangle patch
    per non-empty field; E8M0 has a single exponent box.

    >>> ax = bit_layout(["fp32", "fp16", "bf16"])
    >>> len(ax.patches)
    9
    """
    fmts = _formats(formats)
    ax = _axes(ax, (10, 0.75 * len(fmts) + 1.2))
    span = max(f.bits for f in fmts)
    fontsize = 9
    chars_per_bit = _chars_per_bit(ax, span + 6, fontsize)  # +6: room for the right-hand notes
    for row, fmt in enumerate(fmts):
        y = -row
        start = 0
        for name, width in _field_widths(fmt):
            ax.add_patch(mpatches.Rectangle(
                (start, y - 0.35), width, 0.7, facecolor=FIELD_COLORS[name],
                edgecolor=_FIELD_EDGE, linewidth=1.2, label=name if row == 0 else None,
            ))
            # Thin dividers between the bits make the widths countable.
            if width > 1:
                ax.vlines(range(start + 1, start + width), y - 0.35, y - 0.25,
                          color=_FIELD_EDGE, linewidth=0.5)
            label = _box_label(name, width, chars_per_bit)
            ax.text(start + width / 2, y, label, ha="center", va="center", fontsize=fontsize)
            start += width
        ax.text(start + 0.4, y, f"{fmt.bits} bits, bias {fmt.bias}", va="center", fontsize=8.5)
    ax.set_yticks([-r for r in range(len(fmts))], [f.name for f in fmts])
    ax.set_ylim(-len(fmts) + 0.4, 0.6)
    ax.set_xlim(-0.3, span + max(6, span * 0.22))
    step = next(s for s in (1, 2, 4, 8) if span / s <= 16)
    ax.xaxis.set_major_locator(FixedLocator(list(range(0, span + 1, step))))
    ax.set_xlabel("bits (most significant on the left)")
    ax.set_title("Bit layout: sign | exponent | mantissa")
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(axis="y", length=0)
    return ax


def _describe_fields(fmt: Format, f: Any) -> tuple[list[tuple[str, str]], str]:
    """Per-field explanation lines (field, text) and the closing formula for one code."""
    kind = str(f.kind)
    lines: list[tuple[str, str]] = []
    negative = bool(int(f.sign))
    if fmt.signed:
        lines.append(("sign", f"sign  {int(f.sign)}  →  {'-' if negative else '+'}"))
    e_field, e = int(f.exponent), int(f.unbiased_exponent)
    e_bits = format(e_field, f"0{fmt.exp_bits}b")
    if kind in ("inf", "nan"):
        e_text = f"exponent  {e_bits}  →  special code ({kind})"
    elif kind in ("zero", "subnormal"):
        e_text = f"exponent  {e_bits}  →  zero / subnormal: scale 2^{fmt.emin} (emin)"
    else:
        e_text = f"exponent  {e_bits} = {e_field}  →  2^({e_field} - {fmt.bias}) = 2^{e}"
    lines.append(("exponent", e_text))
    m = int(f.mantissa)
    lead = "0" if kind in ("zero", "subnormal") else "1"
    significand = (int(lead) << fmt.man_bits | m) / 2**fmt.man_bits
    if fmt.man_bits:
        m_bits = format(m, f"0{fmt.man_bits}b")
        m_text = f"mantissa  {m_bits} = {m}"
        if kind not in ("inf", "nan"):
            m_text += f"  →  {lead} + {m}/2^{fmt.man_bits} = {significand!r}"
        lines.append(("mantissa", m_text))
    else:
        lines.append(("mantissa", "no mantissa bits: the significand is 1"))
    value = float(decode(f.code, fmt))
    if kind in ("inf", "nan"):
        formula = f"= {value!r}"
    else:
        sign = ("-" if negative else "+") if fmt.signed else ""
        formula = f"= {sign}2^{e} × {significand!r} = {value!r}"
    return lines, formula


def value_bits(x: float, fmt: FormatLike, ax: Axes | None = None) -> Axes:
    """The actual bits of ``x`` rounded to ``fmt``: one box per bit, coloured by field, with
    what each field contributes and the value they make.

    >>> ax = value_bits(3.141, "fp16")
    >>> "".join(t.get_text() for t in ax.texts[:16])
    '0100001001001000'
    """
    fmt = get_format(fmt)
    x = _one_value(x, "value_bits", fmt)
    f = fields(x, fmt)
    code = int(f.code)
    ax = _axes(ax, (min(16, max(6.5, 0.24 * fmt.bits + 2.5)), 3.0))
    digit_size = 11 if fmt.bits <= 32 else 7.5
    bit = 0
    for name, width in _field_widths(fmt):
        for i in range(width):
            ax.add_patch(mpatches.Rectangle(
                (bit + i, 0), 1, 1, facecolor=FIELD_COLORS[name], edgecolor=_FIELD_EDGE,
                linewidth=0.8,
            ))
        bit += width
    # Digits first (tests and readers find the bit string in ax.texts[:bits]).
    for i in range(fmt.bits):
        digit = (code >> (fmt.bits - 1 - i)) & 1
        ax.text(i + 0.5, 0.5, str(digit), ha="center", va="center", fontsize=digit_size,
                family="monospace")
    lines, formula = _describe_fields(fmt, f)
    for row, (name, text) in enumerate(lines):
        ax.text(0, -0.45 - 0.55 * row, text, fontsize=9.5, va="top", family="monospace",
                bbox={"facecolor": FIELD_COLORS[name], "edgecolor": "none", "pad": 2})
    ax.text(0, -0.55 - 0.55 * len(lines), formula, fontsize=10, va="top", family="monospace",
            weight="bold")
    value = float(decode(code, fmt))
    same = value == float(x) or (math.isnan(value) and math.isnan(float(x)))
    head = f"{float(x)!r} in {fmt.name}" if same else f"{float(x)!r} → {value!r} in {fmt.name}"
    hex_code = f"0x{code:0{(fmt.bits + 3) // 4}x}"
    ax.set_title(f"{head}   (code {hex_code}, {f.kind})", fontsize=11)
    ax.set_xlim(-0.2, fmt.bits + 0.2)
    ax.set_ylim(-0.9 - 0.55 * (len(lines) + 1), 1.15)
    ax.set_aspect("auto")
    ax.axis("off")
    return ax
