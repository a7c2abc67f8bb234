"""What every floatlab picture shares: the Axes to draw into (pyplot is imported only here,
and only to make a new figure), format resolution, the colours that mean the same thing in
every picture, power-of-two axes and percentage labels.

>>> _percent(1 / 3), _percent(1e-9), _pow2(-14)
('33.3%', '<0.001%', '$2^{-14}$')
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

from floatlab.formats import Format, get_format
from floatlab.formats.resolve import _one_format
from floatlab.rounding import as_float_array

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
    if _one_format(formats) or not isinstance(formats, Iterable):
        formats = [formats]  # one format; get_format then says what a bad one should be
    resolved = [get_format(f) for f in formats]
    if not resolved:
        raise ValueError("no formats given: pass a name such as 'fp16' or a list of names")
    return resolved


def _positive_finite(value: Any, name: str, example: str) -> float:
    """``value`` as a positive finite float: a scale, or a magnitude on a log axis.

    bools are refused (True would be 1), and so are arrays, strings and ints beyond float64.
    """
    is_number = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_))
    if not is_number:
        raise TypeError(f"{name} must be a positive finite number such as {example}, got "
                        f"{value!r} ({type(value).__name__})")
    try:
        number = float(value)
    except OverflowError:  # a Python int beyond float64
        number = math.inf
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{name} must be a positive finite number such as {example}, got "
                         f"{value!r}")
    return number


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
