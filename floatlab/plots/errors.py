"""Pictures of error: a format's worst-case rounding error across its range (the sawtooth), and
the error profile of an expression evaluated in several formats.

>>> import numpy as np, floatlab
>>> p = floatlab.error_profile(lambda x: np.sqrt(x + 1) - np.sqrt(x), [1.0, 10.0, 1000.0],
...                            ["fp16", "bf16"])
>>> ax = error_profile(p)
>>> ax.get_ylabel()
'bits of error'
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from matplotlib.axes import Axes

from floatlab._validate import check_flag
from floatlab.errors import ErrorProfile
from floatlab.formats import Format
from floatlab.plots._common import (
    FormatLike,
    _axes,
    _formats,
    _positive_finite,
    _pow2_axis,
)
from floatlab.plots.ranges import _shade_zones
from floatlab.rounding import round as round_to_format

__all__ = ["rounding_error", "error_profile"]


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
    """Actual relative errors of the rounding core at log-uniform magnitudes (deterministic);
    none when the window [2^lo, 2^hi] misses the format's range (a zoom beyond its max)."""
    if not lo < hi:
        return np.empty(0), np.empty(0)
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
    if not isinstance(kind, str) or kind not in ("relative", "ulp"):
        raise ValueError(f"kind must be 'relative' or 'ulp', got {kind!r}")
    samples = check_flag(samples, "samples")
    # Magnitudes on a log axis: None is the default range; 0, negatives, inf are refused.
    lo = None if lo is None else _positive_finite(lo, "lo", "1e-8 (or None for the default)")
    hi = None if hi is None else _positive_finite(hi, "hi", "1e5 (or None for the default)")
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


def error_profile(profile: ErrorProfile, ax: Axes | None = None, label: str = "",
                  logx: bool | None = None) -> Axes:
    """Bits of error against the input, one line per format (0 = correctly rounded).

    ``profile`` comes from :func:`floatlab.error_profile`; ``label`` prefixes the legend
    entries (to draw a naive and a rewritten formula on the same axes); ``logx`` defaults to a
    log axis when the inputs are positive and span more than two decades.
    """
    if not isinstance(profile, ErrorProfile):
        raise TypeError(f"error_profile draws a floatlab.ErrorProfile (from "
                        f"floatlab.error_profile(f, x, formats)), got {type(profile).__name__}")
    if not isinstance(label, str):  # it prefixes the legend: None would print as "None fp16"
        raise TypeError(f"label must be a string such as 'naive' (or '' for none), got "
                        f"{label!r} ({type(label).__name__})")
    logx = None if logx is None else check_flag(logx, "logx")
    ax = _axes(ax, (6.4, 3.6))
    x = profile.x.reshape(-1)
    order = np.argsort(x)
    for fmt in profile.formats:
        bits = profile.bits[fmt.name].reshape(-1)
        name = f"{label} {fmt.name}".strip()
        ax.plot(x[order], bits[order], marker=".", markersize=3, linewidth=1, label=name)
    positive = x[x > 0]
    if logx is None:
        logx = positive.size == x.size and x.size > 1 and positive.max() / positive.min() > 100
    if logx:
        ax.set_xscale("log")
    top = max(fmt.p for fmt in profile.formats)
    ax.set_ylim(-0.5, top + 1.5)
    ax.set_xlabel("x")
    ax.set_ylabel("bits of error")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8.5)
    return ax
