"""Pictures of a format's range: every value on a number line, the dynamic range of several
formats as bars, and the magnitude zones (flushed / subnormal / normal / overflow) with their
exact round-to-nearest-even thresholds, which every range picture shades.

>>> ax = number_line("e2m1")
>>> sorted(_zone_spans(get_format("fp16")))
['flushed', 'normal', 'overflow', 'subnormal']
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.ticker import FixedLocator, FuncFormatter

from floatlab._validate import check_flag
from floatlab.codec import decode
from floatlab.formats import Format, get_format
from floatlab.plots._common import (
    ZONE_COLORS,
    FormatLike,
    _axes,
    _dark,
    _formats,
    _pow2,
    _pow2_axis,
    _pow2_ticks,
)

__all__ = ["number_line", "dynamic_range"]

_DEFAULT_RANGE_FORMATS = ("float32", "bfloat16", "float16", "float8_e5m2", "float8_e4m3fn")


# ----------------------------------------------------------------------------- zones of a format

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
    negative = negative and fmt.signed  # an unsigned format has no negative half to draw
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
    elif negative:  # no zero, but both signs: a log axis has no negative half
        ax.set_xscale("symlog", base=2, linthresh=floor, linscale=1)
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
