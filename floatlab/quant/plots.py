"""Pictures of block-scaled quantisation (re-exported by :mod:`floatlab.plots`).

* :func:`qsnr_by_scheme`: QSNR bars for several schemes on the same tensor, annotated with
  bits per value and the clipped / flushed fractions.
* :func:`scale_exponents`: the histogram of the block scales' exponents.
* :func:`block_before_after`: one block drawn element by element, before and after.
* :func:`element_grids`: the values of element formats, codebooks and fixed point, scaled to
  [-1, 1], one row each (NF4 against int4 and FP4, the dynamic map's decades).

Every function draws into ``ax`` (a new figure when None) and returns the Axes.

>>> import numpy as np
>>> x = np.random.default_rng(0).standard_normal((16, 256))
>>> ax = qsnr_by_scheme(x, ["mxfp8", "mxfp4", "nvfp4"])
>>> [t.get_text() for t in ax.get_yticklabels()]
['mxfp8', 'mxfp4', 'nvfp4']
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes

from floatlab._validate import as_float_array, resolve_rng
from floatlab.plots._common import _axes as _checked_axes
from floatlab.quant.quantize import QuantizedTensor, quantize
from floatlab.quant.scheme import Scheme, get_scheme

__all__ = ["qsnr_by_scheme", "scale_exponents", "block_before_after", "element_grids"]


def _axes(ax: Axes | None, figsize: tuple[float, float]) -> Axes:
    """The given Axes (checked: a string used to fail at the first draw call) or a new one."""
    if ax is not None:
        return _checked_axes(ax, figsize)
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=figsize)[1]


def _several(items: Any, what: str, example: str) -> list[Any]:
    """A non-empty list from one item (a name or an object) or a sequence of them."""
    if isinstance(items, str) or not isinstance(items, Iterable) or (
            isinstance(items, np.ndarray) and items.ndim == 0):
        items = [items]
    items = list(items)
    if not items:
        raise ValueError(f"{what} is empty: pass at least one, e.g. {example}")
    return items


def _label(scheme: str | Scheme) -> str:
    if isinstance(scheme, str):
        return scheme
    return scheme.name or scheme.describe()


def qsnr_by_scheme(x: Any, schemes: Sequence[str | Scheme], ax: Axes | None = None,
                   rng: Any = 0) -> Axes:
    """Horizontal QSNR bars (dB, higher is better), one per scheme, on the same ``x``; each
    bar is labelled with its bits per value and the clipped / flushed-to-zero percentages."""
    schemes = _several(schemes, "schemes", "['mxfp8', 'nvfp4']")
    resolved = [get_scheme(s) for s in schemes]  # every name checked before any work
    resolve_rng(rng, True, "stochastic")  # checked even when no scheme rounds stochastically
    x = as_float_array(x, name="x")
    ax = _axes(ax, (8, 0.5 + 0.55 * len(schemes)))
    labels, rows = [], []
    for s, scheme in zip(schemes, resolved, strict=True):
        q = quantize(x, scheme, rng=rng if scheme.rounding == "stochastic" else None)
        labels.append(_label(s))
        rows.append((q.stats.qsnr_db, q.bits_per_value, q.stats.clipped_fraction,
                     q.stats.flushed_fraction))
    y = np.arange(len(rows))
    qsnr = np.array([r[0] for r in rows])
    finite = np.where(np.isfinite(qsnr), qsnr, np.nan)
    ax.barh(y, np.nan_to_num(finite, nan=0.0), color=[f"C{i % 10}" for i in range(len(rows))])
    top = np.nanmax(finite) if np.any(np.isfinite(finite)) else 1.0
    for yi, (db, bits, clipped, flushed) in zip(y, rows, strict=True):
        ax.text((db if np.isfinite(db) else 0) + top * 0.01, yi,
                f"{db:.1f} dB  {bits:.3g} b/v  clipped {100 * clipped:.2f}%  "
                f"flushed {100 * flushed:.2f}%", va="center", fontsize=8)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.7)
    ax.set_xlabel("QSNR (dB)")
    ax.set_title("Quantisation error by scheme (same tensor)")
    ax.grid(True, axis="x", alpha=0.3)
    return ax


def scale_exponents(q: QuantizedTensor | Any, scheme: str | Scheme | None = None,
                    ax: Axes | None = None) -> Axes:
    """Histogram of ``floor(log2(scale))`` over the blocks of a QuantizedTensor (or of
    ``quantize(q, scheme)`` when ``q`` is an array).

    >>> ax = scale_exponents(np.arange(1.0, 65.0), "mxfp8")
    >>> [round(p.get_height()) for p in ax.patches]
    [1, 1]
    """
    if not isinstance(q, QuantizedTensor):
        if scheme is None:
            raise TypeError("pass a QuantizedTensor, or an array and a scheme")
        q = quantize(q, scheme)
    hist = q.stats.scale_histogram
    ax = _axes(ax, (7, 3.2))
    keys = sorted(hist)
    ax.bar(keys, [hist[k] for k in keys], width=0.8, color="C0")
    ax.set_xlabel("scale exponent k (scale in [2^k, 2^(k+1)))")
    ax.set_ylabel("blocks")
    ax.set_title(f"Block scales of {_label(q.scheme)} ({sum(hist.values())} blocks)")
    ax.grid(True, axis="y", alpha=0.3)
    return ax


def block_before_after(x: Any, scheme: str | Scheme, block: int = 0, ax: Axes | None = None
                       ) -> Axes:
    """One block of a 1-D-blocked scheme drawn element by element: the input values, the
    stored (dequantised) values, the element maximum times the scale (dashed: values beyond it
    are clipped) and the smallest nonzero element times the scale (dotted: below half of it,
    values flush to zero)."""
    scheme = get_scheme(scheme)
    if not isinstance(scheme.block, int):
        raise ValueError("block_before_after draws a 1-D block: use a scheme with an int block")
    if isinstance(block, (bool, np.bool_)) or not isinstance(block, (int, np.integer)):
        raise TypeError(f"block must be the int index of a block (0, 1, ...), got {block!r} "
                        f"({type(block).__name__})")
    block = int(block)  # a Python int: np.int64 products could wrap
    # as_float_array: bytes, strings, bools and masked arrays were read as numbers before
    flat = as_float_array(x, name="x").astype(np.float64).reshape(-1)
    start = block * scheme.block
    if not 0 <= start < flat.size:
        raise ValueError(f"block {block} is out of range: x has "
                         f"{-(-flat.size // scheme.block)} blocks of {scheme.block}")
    q = quantize(flat, scheme)
    values = flat[start:start + scheme.block]
    stored = q.dequantize()[start:start + scheme.block]
    scale = float(q._effective.reshape(-1)[block])
    ax = _axes(ax, (8, 3.4))
    i = np.arange(values.size)
    ax.vlines(i, 0, values, color="0.75", linewidth=1)
    ax.plot(i, values, "o", color="C0", label="input", markersize=5)
    ax.plot(i, stored, "x", color="C3", label="stored", markersize=7)
    emax = float(scheme.element.max) * scale
    ax.axhline(emax, color="C3", linestyle="--", linewidth=0.8, label="element max x scale")
    ax.axhline(-emax, color="C3", linestyle="--", linewidth=0.8)
    ax.set_xlabel(f"element of block {block}")
    ax.set_title(f"{_label(scheme)}: block {block}, scale {scale:.6g}, "
                 f"{int(np.count_nonzero(np.abs(values) > emax))} clipped")
    ax.legend(fontsize=8, loc="best")
    ax.grid(True, alpha=0.3)
    return ax


def element_grids(elements: Sequence[Any], ax: Axes | None = None) -> Axes:
    """One row per element format (a Format name, Codebook or FixedPoint, e.g. "nf4", "int4",
    "e2m1", "fp4_bnb"): its values divided by its max, as ticks on [-1, 1].

    >>> ax = element_grids(["nf4", "int4", "e2m1"])
    >>> [t.get_text() for t in ax.get_yticklabels()]
    ['nf4', 'int4', 'float4_e2m1fn']
    """
    from floatlab.grid import values
    from floatlab.quant.scheme import resolve_element

    fmts = [resolve_element(e) for e in _several(elements, "elements", "['nf4', 'e2m1']")]
    ax = _axes(ax, (8, 0.6 + 0.5 * len(fmts)))
    for row, fmt in enumerate(fmts):
        v = np.asarray(values(fmt), dtype=np.float64) / float(fmt.max)
        v = v[np.abs(v) <= 1]
        ax.vlines(v, row - 0.3, row + 0.3, color=f"C{row % 10}", linewidth=1.2)
    ax.set_yticks(range(len(fmts)), [f.name for f in fmts])
    ax.invert_yaxis()
    ax.set_xlim(-1.05, 1.05)
    ax.set_xlabel("value / max")
    ax.set_title("Element grids (absmax-scaled blocks map the block maximum to +-1)")
    ax.grid(True, axis="x", alpha=0.3)
    return ax
