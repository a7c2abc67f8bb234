"""Pictures of a recipe run's per-operand telemetry: amax against the scale, QSNR over steps.

Both take a :class:`~floatlab.mixed.History` of a recipe run (its ``info["operands"]``) or a
:class:`~floatlab.mixed.RecipeRun`, and return the matplotlib Axes.

>>> import numpy as np
>>> from floatlab.mixed import Tensor, parameter, linear, use_precision, recipe_run
>>> with use_precision("fp8-delayed"), recipe_run() as run:
...     w = parameter(np.eye(2, dtype=np.float32))
...     for step in range(3):
...         _ = linear(Tensor([[1.0, 2.0 * (step + 1)]]), w); _ = run.end_step()
>>> ax = plot_amax_history(run, "linear0.forward.a")
>>> [line.get_label() for line in ax.get_lines()][:2]
['amax', 'largest amax the scale allows']
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["plot_amax_history", "plot_operand_qsnr"]


def _records(source: Any) -> dict[str, list]:
    records = getattr(source, "history", None)
    if not isinstance(records, dict):  # not a RecipeRun
        info = getattr(source, "info", None)
        records = info.get("operands") if isinstance(info, dict) else None
    if not isinstance(records, dict):
        raise TypeError("pass the History of a recipe run (Trainer('fp8-delayed').fit(...)) or "
                        f"a RecipeRun; got {type(source).__name__} without per-operand "
                        "telemetry")
    if not records:  # (was "no operand ...; recorded: " with an empty list)
        raise ValueError("this recipe run recorded no per-operand telemetry (it ran with "
                         "telemetry=False, or no GEMM ran); train with Trainer(..., "
                         "telemetry=True)")
    return records


def _axes(ax: Any) -> Any:
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(7, 3))
    return ax


def plot_amax_history(source: Any, operand: str, ax: Any = None) -> Any:
    """The operand's amax per step against the largest amax its scale allows (per-tensor
    scaling: ``fmt.max / scale``); steps where the amax is above the line clipped (lag events,
    marked)."""
    records = _records(source)
    if operand not in records:
        raise KeyError(f"no operand {operand!r}; recorded: {', '.join(records)}")
    stats = records[operand]
    amax = np.array([s.amax for s in stats])
    limit = np.array([s.limit for s in stats])
    lag = np.array([s.lag for s in stats])
    ax = _axes(ax)
    steps = np.arange(len(stats))
    ax.semilogy(steps, amax, "k.-", label="amax")
    ax.semilogy(steps, limit, "C0-", label="largest amax the scale allows")
    if lag.any():
        ax.semilogy(steps[lag], amax[lag], "rv", label="lag event (clipped)")
    ax.set_xlabel("step")
    ax.set_title(operand, fontsize=9)
    ax.legend(fontsize=8)
    return ax


def plot_operand_qsnr(source: Any, ax: Any = None, contains: str = "") -> Any:
    """QSNR (dB) of every recorded operand (whose key contains ``contains``) over the steps."""
    records = _records(source)
    if not isinstance(contains, str):
        raise TypeError(f"contains must be a string such as 'forward' ('' for every operand), "
                        f"got {contains!r} ({type(contains).__name__})")
    chosen = {key: stats for key, stats in records.items() if contains in key}
    if not chosen:  # an empty picture, and matplotlib's 'No artists with labels' warning
        raise KeyError(f"no operand name contains {contains!r}; recorded: {', '.join(records)}")
    ax = _axes(ax)
    for key, stats in chosen.items():
        ax.plot([s.qsnr_db for s in stats], label=key, lw=1)
    ax.set_xlabel("step")
    ax.set_ylabel("QSNR (dB)")
    ax.legend(fontsize=6, ncol=2)
    return ax
