"""Pictures of real data against a format: which fraction of the values lands in each zone
(flushed to zero, subnormal, normal, overflow), as numbers and as a histogram per binade, and
gradients without and with loss scaling.

>>> zone_fractions([1.0, 1e-9], "bf16")["normal"]
1.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.axes import Axes

from floatlab.formats import Format, get_format
from floatlab.plots._common import (
    ZONES,
    FormatLike,
    _axes,
    _log2_binade,
    _percent,
    _positive_finite,
    _pow2,
    _pow2_axis,
)
from floatlab.plots.ranges import _shade_zones, _zone_edges, _zone_spans
from floatlab.rounding import as_float_array

__all__ = ["zone_fractions", "zones", "gradient_histogram"]


def _magnitudes(data: Any, scale: float, what: str = "data") -> np.ndarray:
    """|data * scale| as a flat float64 array, with a clear error for unusable input."""
    if isinstance(data, Mapping):
        data = list(data.values())
    if isinstance(data, (list, tuple)) and data and all(np.ndim(d) > 0 for d in data):
        data = np.concatenate([np.ravel(as_float_array(d, name=what)) for d in data])
    arr = np.ravel(as_float_array(data, name=what)).astype(np.float64)
    if arr.size == 0:
        raise ValueError(f"{what} is empty: zones need at least one value")
    scale = _positive_finite(scale, "scale", "1.0 or 2.0**16")
    with np.errstate(over="ignore"):
        return np.abs(arr * scale)


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
        raise ValueError("the gradients hold no nonzero finite value, so scale=None has no "
                         "largest gradient to choose a loss scale from; pass scale=1.0 to "
                         "draw them unscaled (zeros, inf and NaN are counted in the legend)")
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
