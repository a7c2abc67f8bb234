"""Pictures of floating-point formats: bits, values, range, rounding error, and real data.

Every function draws into ``ax`` (a new figure when ``ax`` is None) and returns the Axes, so
figures compose: ``fig, axs = plt.subplots(1, 2); bit_layout("fp16", ax=axs[0])``.
matplotlib is imported when this module is imported, never by ``import floatlab``; pyplot
itself only when a function has to make a new figure (so ``matplotlib.use(...)`` still works).

Colours mean the same thing everywhere: :data:`FIELD_COLORS` for sign / exponent / mantissa,
:data:`ZONE_COLORS` for the overflow / normal / subnormal / flushed ranges. Axes that span many
binades are drawn in log2 coordinates and labelled ``2^k``.

>>> ax = dynamic_range(["fp32", "bf16", "fp16"])   # BF16 keeps FP32's range, FP16 precision
>>> zone_fractions([0.0, 1.0, 1e-6, 1e6], "fp16")["overflow"]
0.25
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib.patches as mpatches
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

from floatlab._validate import check_flag
from floatlab.codec import decode, fields
from floatlab.formats import Format, get_format
from floatlab.rounding import as_float_array
from floatlab.rounding import round as round_to_format

__all__ = [
    "FIELD_COLORS",
    "ZONE_COLORS",
    "ZONES",
    "bit_layout",
    "value_bits",
    "number_line",
    "dynamic_range",
    "rounding_error",
    "zone_fractions",
    "zones",
    "gradient_histogram",
    "training_curves",
    "loss_scale",
    "underflow_over_time",
]

FormatLike = str | Format | Any

#: Fill colours of the three bit fields (light enough for black digits on top).
FIELD_COLORS: dict[str, str] = {"sign": "#9ecae9", "exponent": "#a1d99b", "mantissa": "#fdae6b"}
_FIELD_EDGE = "#333333"

#: Colours of the magnitude zones of a format, shared by every range picture.
ZONE_COLORS: dict[str, str] = {
    "flushed": "#8c8c8c",
    "subnormal": "#f0a030",
    "normal": "#4c8cd0",
    "overflow": "#d62728",
}
#: Zone names from small to large magnitude (exact zeros and NaNs are counted apart).
ZONES: tuple[str, ...] = ("flushed", "subnormal", "normal", "overflow")

_DEFAULT_RANGE_FORMATS = ("float32", "bfloat16", "float16", "float8_e5m2", "float8_e4m3fn")


# ----------------------------------------------------------------------------- small helpers

def _axes(ax: Axes | None, figsize: tuple[float, float]) -> Axes:
    """The given Axes, or a new figure's; pyplot is imported only here."""
    if ax is not None:
        if not isinstance(ax, Axes):
            raise TypeError(
                f"ax must be a matplotlib Axes (e.g. from fig, ax = plt.subplots()) or None "
                f"for a new figure, got {ax!r} ({type(ax).__name__})"
            )
        return ax
    import matplotlib.pyplot as plt

    _, new_ax = plt.subplots(figsize=figsize, layout="constrained")
    return new_ax


def _formats(formats: FormatLike | Iterable[FormatLike]) -> list[Format]:
    """One format or several, resolved (unknown names raise FormatNameError)."""
    if isinstance(formats, (str, Format)) or not isinstance(formats, Iterable):
        formats = [formats]
    resolved = [get_format(f) for f in formats]
    if not resolved:
        raise ValueError("no formats given: pass a name such as 'fp16' or a list of names")
    return resolved


def _one_value(x: Any, function: str, fmt: Format) -> float:
    """``x`` as one float64 value, or a clear error for arrays and non-numbers."""
    arr = as_float_array(x)
    if arr.ndim != 0:
        raise TypeError(
            f"{function} draws one value, got an array of shape {arr.shape}: pass one element, "
            f"e.g. {function}(x[0], {fmt.name!r})"
        )
    return float(arr.reshape(-1)[0])


def _pow2(k: float) -> str:
    """Mathtext label ``2^k`` for an integer k (empty for fractional tick positions)."""
    return f"$2^{{{int(k)}}}$" if float(k).is_integer() else ""


def _pow2_axis(axis: Any, nbins: int = 12) -> None:
    """Label an axis that holds log2 values as powers of two at integer positions."""
    axis.set_major_locator(MaxNLocator(nbins=nbins, integer=True))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: _pow2(v)))


def _pow2_ticks(axis: Any, lo: float, hi: float, nbins: int = 12) -> None:
    """Like :func:`_pow2_axis`, but ticks only within [lo, hi] (the data, not the margins
    left for annotations)."""
    ticks = MaxNLocator(nbins=nbins, integer=True).tick_values(lo, hi)
    axis.set_major_locator(FixedLocator([t for t in ticks if lo - 0.5 <= t <= hi + 0.5]))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: _pow2(v)))


def _dark(color: str, amount: float = 0.65) -> tuple[float, float, float]:
    """A darker shade of ``color``, readable as text over its own light shading."""
    return tuple(amount * c for c in to_rgb(color))  # type: ignore[return-value]


def _percent(fraction: float) -> str:
    """A fraction as a percentage that never shows a nonzero share as 0 (or all as 100)."""
    pct = 100.0 * fraction
    if fraction == 0:
        return "0%"
    if fraction == 1:
        return "100%"
    if pct < 0.001:
        return "<0.001%"
    if pct < 1:
        return f"{pct:.2g}%"
    if pct > 99.9:
        return ">99.9%"
    return f"{pct:.1f}%"


def _log2_binade(mag: np.ndarray) -> np.ndarray:
    """Exact floor(log2 m) of positive finite magnitudes (frexp, not log2: log2 can round up)."""
    _, exp = np.frexp(mag)
    return exp.astype(np.int64) - 1


# ----------------------------------------------------------------------------- bit layouts

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


# ----------------------------------------------------------------------------- number line

def _finite_values(fmt: Format) -> np.ndarray:
    """Every distinct finite value of a format (only sensible for small formats)."""
    values = decode(np.arange(1 << fmt.bits, dtype=np.uint64), fmt)
    return np.unique(values[np.isfinite(values)])


def _overflow_result(fmt: Format) -> str:
    if fmt.has_inf:
        return "inf"
    return "NaN" if fmt.has_nan else f"saturates to {fmt.max:g}"


def number_line(fmt: FormatLike, ax: Axes | None = None, negative: bool = False) -> Axes:
    """Where the values of ``fmt`` lie.

    Formats of up to 8 bits: every value as a tick on a symlog axis (linear below the smallest
    normal, where the subnormals sit evenly spaced and coloured, logarithmic above). Wider
    formats: how many values each binade [2^k, 2^(k+1)) holds, a flat plateau of 2^mantissa
    for normal binades and the halving staircase of gradual underflow below. ``negative``
    (small formats) also draws the negative half.

    >>> ax = number_line("e2m1")
    >>> len(ax.collections)   # normal, subnormal and zero ticks
    3
    """
    fmt = get_format(fmt)
    negative = check_flag(negative, "negative")
    if fmt.bits <= 8:
        return _number_line_values(fmt, _axes(ax, (11, 2.6)), negative)
    return _number_line_density(fmt, _axes(ax, (10, 3.6)))


def _number_line_values(fmt: Format, ax: Axes, negative: bool) -> Axes:
    values = _finite_values(fmt)
    if not negative:
        values = values[values >= 0]
    mag = np.abs(values)
    floor = fmt.normal_threshold  # where normals start
    sub = (mag > 0) & (mag < floor)
    normal = mag >= floor
    ax.vlines(values[normal], 0, 1, color=ZONE_COLORS["normal"], linewidth=1.2,
              label=f"normal ({int(normal.sum())})")
    ax.vlines(values[sub], 0, 1, color=ZONE_COLORS["subnormal"], linewidth=1.2,
              label=f"subnormal ({int(sub.sum())})" if sub.any() else None)
    if fmt.has_zero:
        ax.vlines([0.0], 0, 1, color="black", linewidth=1.6, label="zero")
        # Linear between 0 and the smallest normal (subnormals are evenly spaced there), log2
        # above, and that linear stretch as wide as one binade.
        ax.set_xscale("symlog", base=2, linthresh=floor, linscale=1)
        if sub.any():
            ax.axvspan(-floor if negative else 0, floor,
                       color=ZONE_COLORS["subnormal"], alpha=0.12, linewidth=0)
    else:
        ax.set_xscale("log", base=2)
    _value_ticks(ax, fmt, negative)
    _label_values(ax, fmt, values)
    top = fmt.max * 2 ** 0.6
    left = -floor / 6 if fmt.has_zero else floor / 2  # room for 0
    ax.set_xlim(-top if negative else left, top)
    ax.text(1.0, 1.02, f"beyond max: {_overflow_result(fmt)}", transform=ax.transAxes,
            ha="right", va="bottom", fontsize=8.5, color=ZONE_COLORS["overflow"])
    ax.set_ylim(0, 2.0)
    ax.set_yticks([])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    half = "" if negative or not fmt.signed else " (negative values mirror these)"
    ax.set_title(f"Every finite value of {fmt.name}{half}", loc="left", fontsize=11)
    ax.legend(loc="upper left", fontsize=8.5, frameon=False, ncols=3)
    return ax


def _value_ticks(ax: Axes, fmt: Format, negative: bool) -> None:
    """0 and powers of two as tick marks, thinned so that at most ~14 are labelled."""
    k_lo, k_hi = fmt.emin, fmt.emax
    most = 7 if negative else 14
    stride = next(s for s in (1, 2, 4, 8, 16, 32, 64) if (k_hi - k_lo + 1) / s <= most)
    # Multiples of the stride read best; the smallest normal always gets its tick.
    ks = sorted({k_lo} | {k for k in range(k_lo, k_hi + 1) if k % stride == 0})
    if stride > 1 and len(ks) > 1 and ks[1] - ks[0] < stride / 2:
        ks.pop(1)  # too close to the smallest normal's tick
    ticks = [2.0**k for k in ks] + ([0.0] if fmt.has_zero else [])
    if negative:
        ticks += [-2.0**k for k in ks]
    ax.xaxis.set_major_locator(FixedLocator(sorted(ticks)))
    ax.xaxis.set_minor_locator(FixedLocator([]))

    def label(v: float, _pos: int) -> str:
        if v == 0:
            return "0"
        k = math.log2(abs(v))
        return f"$-2^{{{int(k)}}}$" if v < 0 else _pow2(k)

    ax.xaxis.set_major_formatter(FuncFormatter(label))


def _label_values(ax: Axes, fmt: Format, values: np.ndarray) -> None:
    """Decimal labels: every positive value when there are few, else the landmarks."""
    positive = values[values > 0]
    if positive.size <= 16:
        marks = [(v, f"{v:g}") for v in positive]
        for v, text in marks:
            ax.text(v, 1.08, text, ha="center", va="bottom", fontsize=8.5)
        return
    marks = [(fmt.max, f"max\n{fmt.max:g}")]
    if fmt.smallest_normal is not None:  # None: every code is subnormal (P3109 binary8p8s*)
        marks.insert(0, (fmt.smallest_normal, f"min normal\n{fmt.smallest_normal:g}"))
    if fmt.smallest_subnormal is not None:
        marks.insert(0, (fmt.smallest_subnormal, f"min subnormal\n{fmt.smallest_subnormal:g}"))
    if (fmt.smallest_normal or fmt.smallest_positive) < 1 < fmt.max:
        marks.append((1.0, "1"))
    # The two small landmarks sit close together (one binade apart for E5M2): open their labels
    # away from each other so they never overlap.
    align = {fmt.smallest_subnormal: "right", fmt.smallest_normal: "left"}
    if fmt.smallest_subnormal is None:
        align = {}
    for v, text in marks:
        ax.annotate(text, (v, 1.0), (v, 1.3), ha=align.get(v, "center"), va="bottom",
                    fontsize=8, arrowprops={"arrowstyle": "-", "color": "0.4", "linewidth": 0.6})


def _number_line_density(fmt: Format, ax: Axes) -> Axes:
    """Values per binade of a wide format, in log2 coordinates."""
    M = fmt.man_bits
    normal_edges = np.arange(fmt.emin, fmt.emax + 2)
    ax.stairs(np.full(normal_edges.size - 1, float(M)), normal_edges, baseline=-1, fill=True,
              color=ZONE_COLORS["normal"], alpha=0.8,
              label=f"normal: 2^{M} values per binade")
    if fmt.smallest_subnormal is not None:
        # The subnormal binade [2^(emin-j), 2^(emin-j+1)) holds 2^(M-j) values, j = 1..M.
        sub_edges = np.arange(fmt.emin - M, fmt.emin + 1)
        ax.stairs(np.arange(M, dtype=float), sub_edges, baseline=-1, fill=True,
                  color=ZONE_COLORS["subnormal"], alpha=0.8,
                  label=f"subnormal: 2^{M} - 1 values, halving per binade")
    lo = math.log2(fmt.smallest_positive)
    hi = math.log2(fmt.max)
    pad = max(2.0, 0.04 * (hi - lo))
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_ylim(-1, M * 1.3 + 1)
    _pow2_axis(ax.xaxis)
    _pow2_axis(ax.yaxis, nbins=6)
    ax.set_xlabel("magnitude (log2 scale)")
    ax.set_ylabel("values per binade")
    _shade_zones(ax, fmt, (lo - pad, hi + pad))
    ax.text((fmt.emin + hi) / 2, M / 2, f"every binade [2^k, 2^(k+1)) holds\n2^{M} values, "
            f"spaced 2^(k-{M}) apart", ha="center", va="center", fontsize=9, color="white",
            weight="bold")
    ax.set_title(f"Values per binade of {fmt.name} (plus zero); beyond max: "
                 f"{_overflow_result(fmt)}", fontsize=10.5)
    ax.legend(loc="upper left", fontsize=8.5, frameon=False)
    return ax


# ----------------------------------------------------------------------------- dynamic range

def dynamic_range(formats: FormatLike | Iterable[FormatLike] = _DEFAULT_RANGE_FORMATS,
                  ax: Axes | None = None) -> Axes:
    """Bars of each format's positive range in powers of two: normal range solid, subnormal
    range hatched, annotated with the precision p (significand bits).

    The picture behind "BF16 keeps FP32's range, FP16 keeps more precision": the bf16 bar is
    as long as fp32's, the fp16 bar far shorter, while fp16's p = 11 beats bf16's p = 8.
    One normal patch per format plus one subnormal patch per format that has subnormals.

    >>> ax = dynamic_range(["fp32", "bf16", "fp16"])
    >>> len(ax.patches)
    6
    """
    fmts = _formats(formats)
    ax = _axes(ax, (10, 0.6 * len(fmts) + 1.5))
    lo_all = min(math.log2(f.smallest_positive) for f in fmts)
    hi_all = max(math.log2(f.max) for f in fmts)
    gap = 0.012 * (hi_all - lo_all) + 0.3  # between a bar and its labels
    for row, fmt in enumerate(fmts):
        y = -row
        lo_normal, hi = fmt.emin, math.log2(fmt.max)
        ax.barh(y, hi - lo_normal, left=lo_normal, height=0.6, color=ZONE_COLORS["normal"],
                edgecolor="black", linewidth=0.6, label="normal range" if row == 0 else None)
        lo = lo_normal
        if fmt.smallest_subnormal is not None:
            lo = math.log2(fmt.smallest_subnormal)
            ax.barh(y, lo_normal - lo, left=lo, height=0.6, facecolor="white",
                    edgecolor=ZONE_COLORS["subnormal"], hatch="////", linewidth=0.8,
                    label="subnormal range" if row == 0 else None)
        bits = "bit" if fmt.p == 1 else "bits"
        ax.text(hi + gap, y, f"max {fmt.max:g}   p = {fmt.p} {bits}", va="center", fontsize=8.5)
        ax.text(lo - gap, y, f"$2^{{{round(lo)}}}$", va="center", ha="right", fontsize=8.5)
    ax.axvline(0, color="0.3", linestyle=":", linewidth=1, label="1.0")
    ax.set_yticks([-r for r in range(len(fmts))], [f.name for f in fmts])
    span = hi_all - lo_all
    ax.set_xlim(lo_all - 0.1 * span - 3, hi_all + 0.45 * span + 4)  # room for the labels
    ax.set_ylim(-len(fmts) + 0.3, 0.9)
    _pow2_ticks(ax.xaxis, lo_all, hi_all, nbins=10)
    ax.set_xlabel("magnitude (log2 scale; p = significand bits, the precision)")
    ax.set_title("Dynamic range: normal (solid) and subnormal (hatched) magnitudes")
    ax.legend(loc="upper right", fontsize=8, ncols=3, frameon=False)
    return ax


# ----------------------------------------------------------------------------- rounding error

def _error_curve(fmt: Format, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (log2 x, log2 error) of the worst-case rounding error of ``fmt``.

    relative: half an ulp over |x|, ulp(x)/(2|x|) capped at 1 (a value that rounds to zero has
    lost all of itself). In log-log coordinates it is straight within a binade (slope -1), so
    the binade edges are the only vertices: the sawtooth from u = 2^-p down to u/2.
    ulp: the spacing itself, a staircase that doubles each binade.
    """
    M = fmt.man_bits
    ks = np.arange(fmt.emin, fmt.emax + 1, dtype=float)
    top = math.log2(fmt.max)
    if not fmt.has_normals:  # every code is subnormal (P3109 binary8p8s*): one straight piece
        s = math.log2(fmt.smallest_positive)
        return np.array([s - 1, top]), np.array([s, s] if kind == "ulp" else [0.0, s - 1 - top])
    if kind == "ulp":
        xs = np.repeat(np.append(ks, top), 2)[1:-1]
        ys = np.repeat(ks - M, 2)
    else:
        xs = np.column_stack([ks, ks + 1]).ravel()
        ys = np.tile([-(M + 1.0), -(M + 2.0)], ks.size)
        xs[-1], ys[-1] = top, fmt.emax - M - 1 - top  # the last binade ends at max
    if fmt.smallest_subnormal is not None:
        s = math.log2(fmt.smallest_subnormal)
        if kind == "ulp":  # below the normals the spacing stays at the smallest subnormal
            xs, ys = np.append([s - 1, fmt.emin], xs), np.append([s, s], ys)
        else:  # s/(2x): 1 at x = s/2, meeting u at 2^emin; everything below s/2 is flushed
            xs, ys = np.append([s - 1, fmt.emin], xs), np.append([0.0, -(M + 1.0)], ys)
    elif fmt.has_zero and kind == "relative":  # flush to zero below the smallest normal
        xs, ys = np.append([fmt.emin - 1, fmt.emin], xs), np.append([0.0, 0.0], ys)
    return xs, ys


def _error_samples(fmt: Format, lo: float, hi: float, n: int = 3000) -> tuple[np.ndarray, ...]:
    """Actual relative errors of the rounding core at log-uniform magnitudes (deterministic)."""
    x = np.exp2(np.random.default_rng(0).uniform(lo, hi, n))
    x = x[(x >= fmt.smallest_positive) & (x <= fmt.max)]
    with np.errstate(invalid="ignore"):
        r = round_to_format(x, fmt, saturate=True)
    err = np.abs(r - x) / x
    keep = err > 0
    return np.log2(x[keep]), np.log2(err[keep])


def rounding_error(formats: FormatLike | Iterable[FormatLike] = ("float16", "bfloat16"),
                   ax: Axes | None = None, lo: float | None = None, hi: float | None = None,
                   kind: str = "relative", samples: bool = True) -> Axes:
    """Worst-case rounding error across magnitudes for one or several formats (the sawtooth).

    kind="relative": ulp(x)/(2|x|), which wobbles between u = 2^-p and u/2 in every binade and
    climbs to 100% through the subnormals. kind="ulp": the absolute spacing. ``lo`` / ``hi``
    are magnitudes (e.g. 1e-8, 1e5). ``samples`` adds the actual errors of floatlab.round at
    random magnitudes as dots under each curve (formats with p < 53). A single format also
    gets its flushed / subnormal / overflow zones shaded.

    >>> ax = rounding_error("fp16")
    >>> len(ax.lines)   # the sawtooth
    1
    """
    if kind not in ("relative", "ulp"):
        raise ValueError(f"kind must be 'relative' or 'ulp', got {kind!r}")
    fmts = _formats(formats)
    ax = _axes(ax, (10, 4.2))
    x_lo = math.log2(lo) if lo else min(math.log2(f.smallest_positive) for f in fmts) - 3
    x_hi = math.log2(hi) if hi else max(math.log2(f.max) for f in fmts) + 2
    if not x_lo < x_hi:
        raise ValueError(f"lo must be below hi, got lo={lo!r}, hi={hi!r}")
    for i, fmt in enumerate(fmts):
        color = f"C{i % 10}"
        xs, ys = _error_curve(fmt, kind)
        if fmt.has_zero:  # below the smallest value everything is flushed: extend the flat part
            xs, ys = np.append(min(x_lo, xs[0]), xs), np.append(ys[0], ys)
        label = f"{fmt.name} (u = 2^-{fmt.p})" if kind == "relative" else fmt.name
        ax.plot(xs, ys, color=color, linewidth=1.4, label=label)
        if samples and kind == "relative" and fmt.p < 53:
            sx, sy = _error_samples(fmt, max(x_lo, xs[0]), min(x_hi, xs[-1]))
            ax.scatter(sx, sy, s=2, color=color, alpha=0.25, linewidths=0, rasterized=True)
    if len(fmts) == 1:
        _shade_zones(ax, fmts[0], (x_lo, x_hi))
    ax.set_xlim(x_lo, x_hi)
    if kind == "relative":  # the dots below the curve may reach far down: show the curves
        ax.set_ylim(-max(f.p for f in fmts) - 5, 1.5)
    _pow2_axis(ax.xaxis)
    _pow2_axis(ax.yaxis, nbins=8)
    ax.set_xlabel("|x| (log2 scale)")
    if kind == "relative":
        ax.set_ylabel("max relative rounding error")
        ax.set_title("Relative rounding error: the sawtooth between u = 2^-p and u/2")
    else:
        ax.set_ylabel("ulp (spacing of values)")
        ax.set_title("Spacing between neighbouring values (ulp) across magnitudes")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8.5)
    return ax


# ----------------------------------------------------------------------------- zones of data

@dataclass(frozen=True)
class _Edge:
    """A magnitude threshold: |x| is above it when |x| > value, or |x| == value and ties_up."""

    value: float
    ties_up: bool

    def above(self, mag: np.ndarray) -> np.ndarray:
        return (mag > self.value) | ((mag == self.value) & self.ties_up)


def _zone_edges(fmt: Format) -> dict[str, _Edge]:
    """Where round-to-nearest-even sends a magnitude into the next zone (exact thresholds).

    kept: smallest magnitude that does not round to zero (formats without zero clamp instead
    of flushing: that is the same loss, so it is counted the same). normal: smallest that
    rounds to the smallest normal or more. overflow: smallest whose rounding, with an unbounded
    exponent, exceeds max (so E4M3FN's 464 still rounds to 448: the threshold's tie goes up
    only when max's integer significand is odd, as the rounding core decides ties).
    """
    M, emin = fmt.man_bits, fmt.emin
    # Just below 2^emin the quantum is half the subnormal one (or of the binade below, with
    # flush-to-zero), so the midpoint under 2^emin sits at 2^emin (1 - 2^-(M+1)) or (1 - 2^-(M+2)).
    if fmt.smallest_subnormal is not None:
        kept = _Edge(fmt.smallest_subnormal / 2, ties_up=False)  # tie -> 0, the even neighbour
        normal = _Edge(math.ldexp(1 - 2.0 ** -(M + 1), emin), ties_up=True)
    else:
        kept = normal = _Edge(math.ldexp(1 - 2.0 ** -(M + 2), emin), ties_up=True)
    ulp_max = math.ldexp(1.0, fmt.emax - M)
    odd_max = int(fmt.max / ulp_max) % 2 == 1
    overflow = _Edge(fmt.max + ulp_max / 2, ties_up=odd_max)  # inf for float64: nothing overflows
    return {"kept": kept, "normal": normal, "overflow": overflow}


def _magnitudes(data: Any, scale: float, what: str = "data") -> np.ndarray:
    """|data * scale| as a flat float64 array, with a clear error for unusable input."""
    if isinstance(data, Mapping):
        data = list(data.values())
    if isinstance(data, (list, tuple)) and data and all(np.ndim(d) > 0 for d in data):
        data = np.concatenate([np.ravel(as_float_array(d, name=what)) for d in data])
    arr = np.ravel(as_float_array(data, name=what)).astype(np.float64)
    if arr.size == 0:
        raise ValueError(f"{what} is empty: zones need at least one value")
    is_number = isinstance(scale, (int, float, np.integer, np.floating)) and not isinstance(
        scale, (bool, np.bool_))
    if not is_number:
        raise TypeError(f"scale must be a positive finite number, got {scale!r} "
                        f"({type(scale).__name__})")
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    with np.errstate(over="ignore"):
        return np.abs(arr * float(scale))


def _classify(mag: np.ndarray, fmt: Format) -> dict[str, np.ndarray]:
    """Boolean masks of each zone, plus exact zeros and NaNs (they partition ``mag``)."""
    edges = _zone_edges(fmt)
    nan = np.isnan(mag)
    zero = mag == 0
    overflow = edges["overflow"].above(mag) | np.isinf(mag)
    normal = edges["normal"].above(mag) & ~overflow
    subnormal = edges["kept"].above(mag) & ~normal & ~overflow
    flushed = ~(nan | zero | overflow | normal | subnormal)
    return {"overflow": overflow, "normal": normal, "subnormal": subnormal,
            "flushed": flushed, "zero": zero, "nan": nan}


def zone_fractions(data: Any, fmt: FormatLike, scale: float = 1.0) -> dict[str, float]:
    """Fractions of ``data * scale`` that land in each zone of ``fmt`` when rounded to it.

    Keys: overflow (becomes inf / NaN / saturates), normal, subnormal, flushed (a nonzero value
    that becomes 0; in formats without zero, one clamped up to the smallest value), zero (exact
    zeros in the data) and nan. They sum to 1. Zones are decided by magnitude with the exact
    thresholds of round-to-nearest-even, the same ones the pictures shade; ±inf counts as
    overflow. ``data`` may be an array, a list of arrays or a dict of arrays.

    >>> zone_fractions([0.0, 1.0, 1e-6, 1e-9], "fp16")
    {'overflow': 0.0, 'normal': 0.25, 'subnormal': 0.25, 'flushed': 0.25, 'zero': 0.25, 'nan': 0.0}
    """
    fmt = get_format(fmt)
    mag = _magnitudes(data, scale)
    return {name: float(mask.sum()) / mag.size for name, mask in _classify(mag, fmt).items()}


def _zone_spans(fmt: Format) -> dict[str, tuple[float, float]]:
    """Each zone's extent in log2 magnitude (open ends are +-inf)."""
    edges = _zone_edges(fmt)
    with np.errstate(divide="ignore"):
        kept, normal, over = (float(np.log2(edges[k].value))
                              for k in ("kept", "normal", "overflow"))
    spans = {"flushed": (-math.inf, kept), "subnormal": (kept, normal),
             "normal": (normal, over), "overflow": (over, math.inf)}
    return {name: span for name, span in spans.items() if span[1] > span[0]}


def _shade_zones(ax: Axes, fmt: Format, xlim: tuple[float, float],
                 labels: dict[str, str] | None = None) -> list[Any]:
    """Shade every zone of ``fmt`` visible in ``xlim``; write ``labels`` at the top of each
    zone (or at the axis edge, with an arrow, when the zone lies outside the view).
    Returns the zone label texts."""
    texts: list[Any] = []
    previous: tuple[float, int] | None = None  # x and row of the last label
    x0, x1 = xlim
    for name, (a, b) in _zone_spans(fmt).items():
        va, vb = max(a, x0), min(b, x1)
        if vb > va:
            ax.axvspan(va, vb, color=ZONE_COLORS[name], alpha=0.14, linewidth=0, zorder=0)
        if labels is None:
            continue
        width = x1 - x0
        if b <= x0:
            x, ha, text = x0 + 0.005 * width, "left", "← " + labels[name]
        elif a >= x1:
            x, ha, text = x1 - 0.005 * width, "right", labels[name] + " →"
        else:  # centred on the visible part, but pushed inside near the edges
            x, ha, text = (va + vb) / 2, "center", labels[name]
            if x - x0 < 0.06 * width:
                x, ha = max(va, x0 + 0.005 * width), "left"
            elif x1 - x < 0.06 * width:
                x, ha = min(vb, x1 - 0.005 * width), "right"
        # A label close to the previous one goes on the other row, so they cannot collide.
        close = previous is not None and abs(x - previous[0]) < 0.13 * (x1 - x0)
        row = 1 - previous[1] if close else 0
        previous = (x, row)
        texts.append(ax.text(x, 0.97 - 0.13 * row, text, transform=ax.get_xaxis_transform(),
                             ha=ha, va="top", fontsize=8.5, color=_dark(ZONE_COLORS[name]),
                             weight="bold", zorder=5))
    return texts


_ZONE_TITLES = {"flushed": "flushed to 0", "subnormal": "subnormal", "normal": "normal",
                "overflow": "overflow"}


def _binade_hist(mag: np.ndarray, total: int) -> tuple[np.ndarray, np.ndarray]:
    """Percent of ``total`` per binade [2^k, 2^(k+1)) of the positive finite magnitudes."""
    mag = mag[np.isfinite(mag) & (mag > 0)]
    if mag.size == 0:
        return np.zeros(1), np.array([0.0, 1.0])
    k = _log2_binade(mag)
    counts = np.bincount(k - k.min())
    return 100.0 * counts / total, np.arange(k.min(), k.max() + 2, dtype=float)


def _zone_xlim(fmt: Format, edges_list: list[np.ndarray]) -> tuple[float, float]:
    """Data range, widened to the format's zone edges but at most 40 binades beyond the data
    (float64's edges would squeeze any real data into a sliver)."""
    lo = min(e[0] for e in edges_list)
    hi = max(e[-1] for e in edges_list)
    spans = _zone_spans(fmt)
    inner = [v for s in spans.values() for v in s if math.isfinite(v)]
    want_lo, want_hi = min(inner + [lo]) - 3, max(inner + [hi]) + 3
    return max(want_lo, lo - 40), min(want_hi, hi + 40)


def _zone_axes_finish(ax: Axes, xlim: tuple[float, float], top: float, title: str) -> None:
    ax.set_xlim(*xlim)
    ax.set_ylim(0, max(top, 1e-9) * 1.45)
    _pow2_axis(ax.xaxis)
    ax.set_xlabel("magnitude |x| (log2 scale, one bar per binade)")
    ax.set_ylabel("% of all values")
    ax.set_title(title, fontsize=11)
    ax.legend(loc="center left", fontsize=8.5, framealpha=0.9)


def _aside(fractions: dict[str, float], mag: np.ndarray) -> str:
    """What the histogram cannot show: exact zeros, infinities, NaNs."""
    notes = []
    if fractions["zero"]:
        notes.append(f"{_percent(fractions['zero'])} exact zeros")
    n_inf = int(np.isinf(mag).sum())
    if n_inf:
        notes.append(f"{_percent(n_inf / mag.size)} inf")
    if fractions["nan"]:
        notes.append(f"{_percent(fractions['nan'])} NaN")
    return f" ({', '.join(notes)} not shown)" if notes else ""


def zones(data: Any, fmt: FormatLike, ax: Axes | None = None, scale: float = 1.0) -> Axes:
    """Histogram of log2|data * scale| against ``fmt``'s zones: flushed to zero, subnormal,
    normal and overflow shaded, with the fraction of values in each zone written on it.

    The fractions are :func:`zone_fractions` (exact zeros, inf and NaN are counted there and
    named in the legend, since a log axis cannot show them).

    >>> import numpy as np
    >>> ax = zones(np.random.default_rng(0).lognormal(-12, 3, 1000), "fp16")
    >>> [t.get_text().split()[0] for t in ax.texts]
    ['flushed', 'subnormal', 'normal', 'overflow']
    """
    fmt = get_format(fmt)
    mag = _magnitudes(data, scale)
    fractions = {k: float(m.sum()) / mag.size for k, m in _classify(mag, fmt).items()}
    ax = _axes(ax, (10, 4.2))
    heights, edges = _binade_hist(mag, mag.size)
    xlim = _zone_xlim(fmt, [edges])
    labels = {z: f"{_ZONE_TITLES[z]}\n{_percent(fractions[z])}" for z in ZONES}
    _shade_zones(ax, fmt, xlim, labels)
    ax.stairs(heights, edges, fill=True, color="0.25", alpha=0.85,
              label="values" + _aside(fractions, mag))
    scaled = "" if scale == 1 else f" × {scale:g}"
    _zone_axes_finish(ax, xlim, float(heights.max()),
                      f"{mag.size:,} values{scaled} against the range of {fmt.name}")
    return ax


def _auto_loss_scale(mag: np.ndarray, fmt: Format) -> float:
    """The largest power of two that keeps the largest value one binade below 2^emax
    (at most 2^1023, the largest power of two float64 holds: a float64 target needs none)."""
    finite = mag[np.isfinite(mag) & (mag > 0)]
    if finite.size == 0:
        raise ValueError("the gradients hold no nonzero finite value: nothing to scale")
    top = int(_log2_binade(np.array([finite.max()]))[0])
    return math.ldexp(1.0, min(fmt.emax - 1 - top, 1023))


def gradient_histogram(grads: Any, fmt: FormatLike = "float16", scale: float | None = None,
                       ax: Axes | None = None) -> Axes:
    """Gradient magnitudes against ``fmt``'s range, without and with loss scaling: the analogue
    of Figure 3 of Micikevicius et al. 2017 ("Mixed Precision Training").

    Two step histograms of log2|g| (as is, and times ``scale``) over the shaded zones; each
    zone is labelled "unscaled → scaled" with the fraction of all values in it, so the share
    flushed to zero visibly moves into the representable range. ``scale=None`` picks the
    largest power of two that keeps the largest gradient a binade below overflow. ``grads``
    may be an array, a list of arrays or a dict {name: array}.

    >>> import numpy as np
    >>> g = np.random.default_rng(0).lognormal(-20, 2, 5000)
    >>> ax = gradient_histogram(g, "fp16", scale=2.0**10)
    >>> len(ax.patches) >= 2 + 4   # two histograms, four shaded zones
    True
    """
    fmt = get_format(fmt)
    mag = _magnitudes(grads, 1.0, what="grads")
    if scale is None:
        scale = _auto_loss_scale(mag, fmt)
    scaled = _magnitudes(grads, scale, what="grads")
    before = {k: float(m.sum()) / mag.size for k, m in _classify(mag, fmt).items()}
    after = {k: float(m.sum()) / mag.size for k, m in _classify(scaled, fmt).items()}
    ax = _axes(ax, (10, 4.4))
    h0, e0 = _binade_hist(mag, mag.size)
    h1, e1 = _binade_hist(scaled, mag.size)
    xlim = _zone_xlim(fmt, [e0, e1])
    same = scale == 1
    labels = {z: f"{_ZONE_TITLES[z]}\n{_percent(before[z])}"
              + ("" if same else f" → {_percent(after[z])}") for z in ZONES}
    _shade_zones(ax, fmt, xlim, labels)
    ax.stairs(h0, e0, fill=True, color="0.3", alpha=0.55,
              label="gradients" + _aside(before, mag))
    if not same:
        k = math.log2(scale)
        name = _pow2(k) if k.is_integer() else f"{scale:g}"
        ax.stairs(h1, e1, fill=False, color="#7b3294", linewidth=2,
                  label=f"× loss scale {name}")
    top = float(max(h0.max(), h1.max()))
    title = f"Gradients vs {fmt.name}" + ("" if same else ": without and with loss scaling")
    _zone_axes_finish(ax, xlim, top, title)
    return ax


# ----------------------------------------------------------------------------- training runs

_FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "loss": ("loss", "train_loss"),
    "accuracy": ("accuracy", "train_accuracy", "acc"),
    "loss_scale": ("loss_scale", "scale"),
    "skipped": ("skipped", "skipped_steps", "skip"),
    "underflow_fraction": ("underflow_fraction", "underflow"),
    "step": ("step", "steps"),
}
_KNOWN_FIELDS = {name for names in _FIELD_ALIASES.values() for name in names}


def _lookup(history: Any, key: str) -> Any:
    """One field by one name: a mapping key, a column of a table-like object
    (``history.columns`` + ``history[key]``, as floatlab.mixed.History), or an attribute."""
    if isinstance(history, Mapping):
        return history.get(key)
    columns = getattr(history, "columns", None)
    if columns is not None and not isinstance(columns, str) and key in columns:
        return history[key]
    return getattr(history, key, None)


def _field(history: Any, name: str) -> Any:
    """A history's field by any of its accepted names, or None."""
    for key in _FIELD_ALIASES.get(name, (name,)):
        value = _lookup(history, key)
        if value is not None:
            return value
    return None


def _label(history: Any, default: str) -> str:
    for key in ("label", "precision", "name"):
        value = history.get(key) if isinstance(history, Mapping) else getattr(history, key, None)
        if value is not None:
            return str(value)
    return default


def _is_single_history(obj: Any) -> bool:
    if isinstance(obj, Mapping):
        return any(k in _KNOWN_FIELDS for k in obj)
    return any(_lookup(obj, k) is not None for k in _KNOWN_FIELDS)


def _histories(histories: Any) -> list[tuple[str, Any]]:
    """(label, history) pairs from one history, a dict {label: history}, a list of them, or
    a result with a ``histories`` mapping (floatlab.mixed.compare's Comparison)."""
    inner = getattr(histories, "histories", None)
    if isinstance(inner, Mapping):
        histories = inner
    if _is_single_history(histories):
        return [(_label(histories, "run"), histories)]
    if isinstance(histories, Mapping):
        pairs = [(str(k), h) for k, h in histories.items()]
    elif isinstance(histories, Sequence) and not isinstance(histories, str):
        pairs = [(_label(h, f"run {i}"), h) for i, h in enumerate(histories)]
    else:
        raise TypeError(
            "expected a history (an object or mapping with per-step fields such as 'loss'), "
            f"a dict {{label: history}} or a list of histories, got {type(histories).__name__}"
        )
    if not pairs:
        raise ValueError("no histories given")
    return pairs


def _series(history: Any, name: str, label: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of one per-step field, with a clear error when it is missing."""
    raw = _field(history, name)
    if raw is None:
        names = " / ".join(repr(n) for n in _FIELD_ALIASES.get(name, (name,)))
        raise ValueError(f"history {label!r} has no {names} field to plot")
    values = np.asarray(raw, dtype=np.float64).ravel()
    steps_raw = _field(history, "step")
    steps = (np.arange(values.size) if steps_raw is None
             else np.asarray(steps_raw, dtype=np.float64).ravel())
    if steps.size != values.size:
        raise ValueError(f"history {label!r}: {steps.size} steps but {values.size} {name} values")
    return steps, values


def training_curves(histories: Any, metric: str = "loss", ax: Axes | None = None,
                    logy: bool = False) -> Axes:
    """One curve per precision of a per-step metric ("loss", "accuracy" or any field name).

    ``histories``: one history, a dict {label: history} or a list. A history is any object or
    mapping with per-step sequences (duck-typed; attribute or key):

    - ``loss`` (or ``train_loss``); ``accuracy`` (or ``train_accuracy``, ``acc``)
    - ``loss_scale`` (or ``scale``); ``skipped`` (bool per step, or the skipped step indices)
    - ``underflow_fraction`` (or ``underflow``), in [0, 1]
    - optional ``step`` (x values; default 0, 1, ...) and ``label`` / ``precision`` / ``name``

    A run whose metric turns NaN / inf is marked with an x at its last finite value and the
    step where it diverged (the "16-true" NaN of the seed article).

    >>> runs = {"32-true": {"loss": [1.0, 0.6, 0.4]}, "16-true": {"loss": [1.0, float("nan")]}}
    >>> ax = training_curves(runs)
    >>> [t.get_text() for t in ax.texts]
    ['NaN at step 1']
    """
    pairs = _histories(histories)
    ax = _axes(ax, (8, 4.2))
    for i, (label, history) in enumerate(pairs):
        steps, values = _series(history, metric, label)
        color = f"C{i % 10}"
        ax.plot(steps, values, color=color, linewidth=1.4, label=label)
        bad = ~np.isfinite(values)
        if bad.any():
            first = int(np.argmax(bad))
            y = values[first - 1] if first else (np.nanmax(values[np.isfinite(values)])
                                                 if np.isfinite(values).any() else 0.0)
            ax.plot([steps[first]], [y], marker="X", markersize=10, color=color,
                    linestyle="none")
            word = "NaN" if np.isnan(values[first]) else "inf"
            ax.annotate(f"{word} at step {steps[first]:g}", (steps[first], y), xytext=(6, 6),
                        textcoords="offset points", fontsize=8.5, color=color)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel(metric.replace("_", " "))
    ax.set_title(f"{metric.replace('_', ' ').capitalize()} per step, by precision")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8.5)
    return ax


def _skipped_mask(raw: Any, n: int, label: str) -> np.ndarray:
    """A bool mask of skipped steps from a bool-per-step sequence or from step indices."""
    arr = np.asarray(raw)
    # One 0/1 flag per step, as bools or as numbers (History.to_dict() stores 0.0 / 1.0).
    flags = arr.dtype == bool or (
        arr.size == n and n > 0 and np.isin(arr, (0, 1)).all() and arr.dtype.kind == "f")
    if flags:
        arr = arr.astype(bool)
        if arr.size != n:
            raise ValueError(f"history {label!r}: 'skipped' has {arr.size} flags for {n} steps")
        return arr.ravel()
    mask = np.zeros(n, dtype=bool)
    mask[arr.astype(np.int64).ravel()] = True
    return mask


def loss_scale(history: Any, ax: Axes | None = None) -> Axes:
    """The loss-scale trajectory on a log2 axis with skipped steps (inf/NaN gradients, the
    step not taken, the scale halved) marked by red x's. Accepts one history or several (see
    :func:`training_curves` for the fields); histories without ``loss_scale`` are left out.

    >>> h = {"loss_scale": [8, 8, 4, 4, 4, 8, 8], "skipped": [False, False, True] + [False] * 4}
    >>> ax = loss_scale(h)
    >>> len(ax.lines)   # trajectory and skip markers
    2
    """
    pairs = [(lab, h) for lab, h in _histories(history) if _field(h, "loss_scale") is not None]
    if not pairs:
        raise ValueError("no history has a 'loss_scale' field (runs without a scaler have none)")
    ax = _axes(ax, (8, 3.8))
    total_skipped = 0
    for i, (label, h) in enumerate(pairs):
        steps, scale = _series(h, "loss_scale", label)
        ax.step(steps, scale, where="post", color=f"C{i % 10}", linewidth=1.5, label=label)
        raw = _field(h, "skipped")
        if raw is not None:
            mask = _skipped_mask(raw, steps.size, label)
            total_skipped += int(mask.sum())
            ax.plot(steps[mask], scale[mask], "x", color=ZONE_COLORS["overflow"], markersize=7,
                    markeredgewidth=1.8,
                    label=f"skipped steps ({int(mask.sum())})" if len(pairs) == 1 else None)
    if total_skipped and len(pairs) > 1:
        ax.plot([], [], "x", color=ZONE_COLORS["overflow"],
                label=f"skipped steps ({total_skipped})")
    ax.set_yscale("log", base=2)
    ax.set_xlabel("step")
    ax.set_ylabel("loss scale (log2)")
    ax.set_title("Dynamic loss scale: halved on overflow (step skipped), grown when stable")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8.5, loc="best")
    return ax


def underflow_over_time(histories: Any, ax: Axes | None = None) -> Axes:
    """Fraction of gradient entries that underflowed to zero, per step, for each run
    (field ``underflow_fraction`` in [0, 1]; see :func:`training_curves`).

    >>> ax = underflow_over_time({"fp16": {"underflow_fraction": [1.0, 0.9, 0.8]}})
    >>> [round(float(v)) for v in ax.lines[0].get_ydata()]
    [100, 90, 80]
    """
    pairs = _histories(histories)
    ax = _axes(ax, (8, 3.8))
    for i, (label, h) in enumerate(pairs):
        steps, frac = _series(h, "underflow_fraction", label)
        ax.plot(steps, 100.0 * frac, color=f"C{i % 10}", linewidth=1.4, label=label)
    ax.set_ylim(-2.0, 102.0)  # a run stuck at 100% (or 0%) must not hide on the frame
    ax.set_yticks(range(0, 101, 20))
    ax.set_xlabel("step")
    ax.set_ylabel("% of gradient entries flushed to 0")
    ax.set_title("Gradient underflow over training")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8.5)
    return ax


# Block-scaled quantisation pictures live in floatlab/quant/plots.py; re-exported lazily here
# so that floatlab.plots.qsnr_by_scheme & co. work without importing them at module load.
_QUANT_PLOTS = ("qsnr_by_scheme", "scale_exponents", "block_before_after", "element_grids")
__all__ += list(_QUANT_PLOTS)


def __getattr__(name: str):
    if name in _QUANT_PLOTS:
        from floatlab.quant import plots as quant_plots

        return getattr(quant_plots, name)
    raise AttributeError(f"module 'floatlab.plots' has no attribute {name!r}")
