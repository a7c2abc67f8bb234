"""Pictures of arithmetic error: error profiles and sums against their bounds.

Exposed as ``floatlab.plots.error_profile`` (re-exported at the end of floatlab/plots.py).
Like every floatlab picture, each function draws into ``ax`` (a new figure when None) and
returns the Axes.

>>> import numpy as np, floatlab
>>> p = floatlab.error_profile(lambda x: np.sqrt(x + 1) - np.sqrt(x), [1.0, 10.0, 1000.0],
...                            ["fp16", "bf16"])
>>> ax = error_profile(p)
>>> ax.get_ylabel()
'bits of error'
"""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes

from floatlab.errors import ErrorProfile

__all__ = ["error_profile"]


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
    from floatlab.plots import _axes

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
