"""Pictures of training runs: per-step curves by precision, the loss-scale trajectory with
its skipped steps, and gradient underflow over time. A history is any object or mapping with
per-step fields (duck-typed: floatlab.mixed.History, a dict of lists, ...).

>>> ax = training_curves({"fp32": {"loss": [1.0, 0.5]}, "fp16": {"loss": [1.0, 0.6]}})
>>> [t.get_text() for t in ax.get_legend().get_texts()]
['fp32', 'fp16']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes

from floatlab._validate import check_flag
from floatlab.plots._common import ZONE_COLORS, _axes

__all__ = ["training_curves", "loss_scale", "underflow_over_time"]


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


def _numbers(raw: Any, label: str, name: str) -> np.ndarray:
    """A per-step field as a flat float64 array (None entries read as NaN, as numpy does);
    strings, ragged lists and the like get an error naming the run and the field."""
    try:
        return np.asarray(raw, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise TypeError(
            f"history {label!r}: the {name!r} field must be one number per step, got "
            f"{repr(raw)[:60]} ({type(raw).__name__})"
        ) from None


def _series(history: Any, name: str, label: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of one per-step field, with a clear error when it is missing."""
    raw = _field(history, name)
    if raw is None:
        names = " / ".join(repr(n) for n in _FIELD_ALIASES.get(name, (name,)))
        raise ValueError(f"history {label!r} has no {names} field to plot")
    values = _numbers(raw, label, name)
    steps_raw = _field(history, "step")
    steps = np.arange(values.size) if steps_raw is None else _numbers(steps_raw, label, "step")
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

    A run whose metric turns NaN / inf for good is marked with an x at its last finite value
    and the step where it diverged (the "16-true" NaN of the seed article); NaNs between finite
    values are steps without a value (a History's test_accuracy between evaluations): gaps,
    with a dot on each value.

    >>> runs = {"32-true": {"loss": [1.0, 0.6, 0.4]}, "16-true": {"loss": [1.0, float("nan")]}}
    >>> ax = training_curves(runs)
    >>> [t.get_text() for t in ax.texts]
    ['NaN at step 1']
    """
    if not isinstance(metric, str):  # a field name; a list would fail as an unhashable key
        raise TypeError(f"metric must be a field name such as 'loss' or 'accuracy', got "
                        f"{metric!r} ({type(metric).__name__})")
    logy = check_flag(logy, "logy")
    pairs = _histories(histories)
    ax = _axes(ax, (8, 4.2))
    for i, (label, history) in enumerate(pairs):
        steps, values = _series(history, metric, label)
        color = f"C{i % 10}"
        # A run diverged where its values turn non-finite for good; a NaN followed by finite
        # values means "not recorded at this step" (History's test_accuracy between
        # evaluations, lost_updates on skipped steps): a gap, and a dot per value so that
        # values between gaps show.
        finite = np.isfinite(values)
        first = values.size - int(np.argmax(finite[::-1])) if finite.any() else 0
        gaps = not finite[:first].all()
        ax.plot(steps, values, color=color, linewidth=1.4, label=label,
                marker="." if gaps else None)
        if first < values.size:
            y = values[first - 1] if first else 0.0  # the last finite value
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
    # (the cast of a number dtype cannot fail; strings and objects never get to it)
    steps = arr.astype(np.int64).ravel() if arr.dtype.kind in "iuf" else None
    if steps is None or (steps != arr.ravel()).any():
        raise TypeError(f"history {label!r}: 'skipped' must be one True / False per step or "
                        f"the skipped step indices, got {repr(raw)[:60]}")
    if steps.size and not (0 <= steps.min() and steps.max() < n):
        # a negative index would silently mark a step counted from the end
        bad = int(steps.min() if steps.min() < 0 else steps.max())
        raise ValueError(f"history {label!r}: 'skipped' names step {bad}, but the run has "
                         f"steps 0..{n - 1}")
    mask = np.zeros(n, dtype=bool)
    mask[steps] = True
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
