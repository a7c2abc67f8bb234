"""What a training run recorded, step by step, and the table that compares runs.

>>> from floatlab.mixed import Trainer, teacher_gaussians
>>> h = Trainer("16-mixed", progress=False).fit(teacher_gaussians(n=1024), steps=4)
>>> len(h), h["scale"].tolist(), h.went_nan
(4, [65536.0, 65536.0, 65536.0, 65536.0], False)
>>> sorted(h.bytes_held["weights"].items())
[('float16', 11016)]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["History", "Comparison", "BYTE_CATEGORIES", "format_bytes"]

#: Per-step columns. Telemetry columns are NaN when telemetry is off; test_accuracy is NaN
#: except on evaluation steps.
COLUMNS: dict[str, str] = {
    "step": "step index, from 0",
    "loss": "cross-entropy of the batch (before the loss multiplier and the loss scale)",
    "accuracy": "accuracy on the batch",
    "test_accuracy": "accuracy on the test split (evaluation steps only); next-token accuracy "
                     "on the validation split for sequence models",
    "val_loss": "mean cross-entropy on the validation split (evaluation steps of sequence models "
                "only; exp of it is the perplexity)",
    "scale": "loss scale used for this step (1 without a scaler)",
    "skipped": "whether the scaler skipped the optimizer step (inf/NaN gradients)",
    "nonfinite": "op results (forward, backward, optimizer) that held inf or NaN",
    "overflow": "values that were finite before rounding and inf/NaN after",
    "underflow": "fraction of activation-gradient entries that the ReLUs let through and that "
                 "are zero (underflowed here or upstream); for models without ReLUs (the "
                 "Transformer), of the parameters' gradient entries that exact arithmetic "
                 "makes non-zero",
    "subnormal": "fraction of the values the rounding hook produced that lie in their format's "
                 "subnormal range",
    "lost_updates": "fraction of non-zero gradient entries whose weight did not change",
    "clipped": "recipes: fraction of GEMM operand values clipped (saturated) by quantisation",
    "flushed": "recipes: fraction of non-zero GEMM operand values quantised to zero",
    "lag_events": "recipes: operands whose delayed scale was too large for this step's amax",
}

BYTE_CATEGORIES = ("weights", "master weights", "gradients", "optimizer state", "activations")


def format_bytes(n: float) -> str:
    """``1536 -> '1.5 KiB'``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError


class History:
    """Per-step records of one run, plus its final accuracies, wall time and bytes held.

    ``history["loss"]`` is a NumPy array over steps; ``history.columns`` lists the names
    (described in :data:`COLUMNS`). ``history.bytes[step]`` maps each category ("weights",
    "master weights", "gradients", "optimizer state", "activations") to {format name: bytes}.
    """

    def __init__(self, precision: str, info: dict[str, Any] | None = None) -> None:
        if info is not None and not isinstance(info, dict):  # dict("x") fails obscurely
            raise TypeError(f"History: info must be a dict or None, got {type(info).__name__}")
        self.precision = precision
        self.info = dict(info or {})
        self._rows: dict[str, list[float]] = {name: [] for name in COLUMNS}
        self.bytes: list[dict[str, dict[str, int]]] = []
        self.final_train_accuracy = float("nan")
        self.final_test_accuracy = float("nan")
        self.final_val_loss = float("nan")  # sequence models
        self.wall_time = float("nan")

    def _append(self, bytes_held: dict[str, dict[str, int]] | None = None, **row: Any) -> None:
        unknown = set(row) - set(COLUMNS)
        if unknown:
            raise KeyError(f"unknown History columns {sorted(unknown)}; known: {list(COLUMNS)}")
        row.setdefault("step", len(self))
        for name, values in self._rows.items():
            values.append(float(row.get(name, math.nan)))
        if bytes_held is not None:
            self.bytes.append(bytes_held)

    # ------------------------------------------------------------------ access
    @property
    def columns(self) -> list[str]:
        return list(COLUMNS)

    def __len__(self) -> int:
        return len(self._rows["step"])

    def __getitem__(self, column: str) -> np.ndarray:
        if column not in self._rows:
            raise KeyError(f"no column {column!r}; columns: {', '.join(COLUMNS)}")
        values = np.array(self._rows[column])
        if column in ("step", "nonfinite", "overflow"):
            return values.astype(np.int64) if np.isfinite(values).all() else values
        return values.astype(bool) if column == "skipped" else values

    # ------------------------------------------------------------------ saving
    def to_dict(self) -> dict[str, Any]:
        """The run as plain JSON data (see :mod:`floatlab.mixed.history_io`): each column as
        a list of numbers, NaN and ±inf as the strings "nan", "inf", "-inf" (strict JSON has
        no token for them); "summary" (:meth:`summary`, same encoding); and, for
        :meth:`from_dict`, "kind", "version", "precision", "bytes", the final metrics,
        "wall_time" and "info".

        Dropped (their names listed under "dropped"): ``info["policy"]``, a Policy object (the
        run's precision keeps its name), and any other info value that is not plain data
        (strings, numbers, bools, None, lists and string-keyed dicts of them; tuples become
        lists). A recipe run's ``info["operands"]`` is kept: OperandStats as dicts.
        """
        from floatlab.mixed.history_io import history_to_dict

        return history_to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> History:
        """The History that :meth:`to_dict` wrote; a dict of another kind or version is
        refused with a ValueError."""
        from floatlab.mixed.history_io import history_from_dict

        return history_from_dict(data)

    def save(self, path: Any) -> None:
        """Write the run to ``path`` as JSON (:meth:`to_dict`; strict JSON, no NaN tokens).

        >>> import os, tempfile
        >>> h = History("bf16-mixed"); h._append(loss=0.5)
        >>> path = os.path.join(tempfile.mkdtemp(), "run.json")
        >>> h.save(path); History.load(path)["loss"].tolist()
        [0.5]
        """
        from floatlab.mixed.history_io import save_history

        save_history(self, path)

    @classmethod
    def load(cls, path: Any) -> History:
        """The History :meth:`save` wrote to ``path``; another file (not JSON, or JSON of
        another kind or version) is refused with a ValueError saying so."""
        from floatlab.mixed.history_io import load_history

        return load_history(path)

    # ------------------------------------------------------------------ summaries
    @property
    def skipped_steps(self) -> int:
        return int(np.sum(self["skipped"]))

    @property
    def first_nonfinite_step(self) -> int | None:
        """The first step whose loss was inf or NaN, or None."""
        bad = np.flatnonzero(~np.isfinite(self["loss"]))
        return int(bad[0]) if bad.size else None

    @property
    def went_nan(self) -> bool:
        """Whether the loss became non-finite at any step."""
        return self.first_nonfinite_step is not None

    @property
    def bytes_held(self) -> dict[str, dict[str, int]]:
        """Bytes held per category and format at the last step (the steady state)."""
        return self.bytes[-1] if self.bytes else {}

    @property
    def final_val_perplexity(self) -> float:
        """``exp(final_val_loss)`` (NaN for classifiers; inf when the loss overflowed)."""
        loss = self.final_val_loss
        return math.nan if math.isnan(loss) else math.exp(min(loss, 700.0))

    @property
    def total_bytes(self) -> int | None:
        """Bytes held at the last step, all categories; None when the run counted none
        (telemetry=False: nothing was counted, which is not 0 bytes)."""
        if not self.bytes:
            return None
        return int(sum(sum(v.values()) for v in self.bytes_held.values()))

    def mean(self, column: str) -> float:
        """Mean of a column over the steps where it is defined (NaN if never)."""
        values = self[column].astype(float)
        values = values[np.isfinite(values)]
        return float(values.mean()) if values.size else math.nan

    def summary(self) -> dict[str, Any]:
        """The run in one dict. What telemetry counts is None when the run counted nothing
        (telemetry=False): ``total_bytes`` and ``overflow`` (0 would read as "none happened");
        the telemetry means (underflow, subnormal, ...) are NaN then, as for any column never
        recorded. The compare() table shows both as "-".

        >>> h = History("32-true")
        >>> h._append(loss=1.0, skipped=False)
        >>> h.summary()["overflow"], h.summary()["total_bytes"], h.summary()["skipped_steps"]
        (None, None, 0)
        """
        overflow = self["overflow"]
        return {
            "precision": self.precision,
            "steps": len(self),
            "final_train_accuracy": self.final_train_accuracy,
            "final_test_accuracy": self.final_test_accuracy,
            "final_val_loss": self.final_val_loss,
            "final_val_perplexity": self.final_val_perplexity,
            "wall_time": self.wall_time,
            "total_bytes": self.total_bytes,
            "skipped_steps": self.skipped_steps,
            "underflow": self.mean("underflow"),
            "subnormal": self.mean("subnormal"),
            "lost_updates": self.mean("lost_updates"),
            "clipped": self.mean("clipped"),
            "flushed": self.mean("flushed"),
            "overflow": int(np.nansum(overflow)) if np.isfinite(overflow).any() else None,
            "went_nan": self.went_nan,
            "first_nonfinite_step": self.first_nonfinite_step,
        }

    def bytes_table(self) -> str:
        """The bytes held at the last step, per category and format."""
        rows = [f"{cat:<16} " + (", ".join(f"{fmt} {format_bytes(n)}"
                                           for fmt, n in self.bytes_held.get(cat, {}).items())
                                 or "-")
                for cat in BYTE_CATEGORIES]
        return "\n".join(rows + [f"{'total':<16} {_bytes_cell(self)}"])

    def __repr__(self) -> str:
        return (f"History({self.precision!r}: {len(self)} steps, train "
                f"{_pct(self.final_train_accuracy)}, test {_pct(self.final_test_accuracy)}, "
                f"skipped {self.skipped_steps}, nan {self.went_nan})")

    def __str__(self) -> str:
        shown = sorted(set(np.linspace(0, len(self) - 1, min(len(self), 11)).astype(int)))
        head = f"{'step':>6} {'loss':>9} {'acc':>6} {'scale':>9} {'skip':>5} {'undfl':>6} " \
               f"{'subn':>6} {'lost':>6}"
        lines = [repr(self), head]
        for i in shown:
            r = {k: v[i] for k, v in self._rows.items()}
            lines.append(f"{int(r['step']):>6} {r['loss']:>9.4g} {_pct(r['accuracy']):>6} "
                         f"{r['scale']:>9.3g} {'yes' if r['skipped'] else '':>5} "
                         f"{_pct(r['underflow']):>6} {_pct(r['subnormal']):>6} "
                         f"{_pct(r['lost_updates']):>6}")
        return "\n".join(lines)


def _pct(x: float, digits: int = 1) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{100 * x:.{digits}f}%"


def _bytes_cell(h: History) -> str:
    """The bytes held at the last step, or "-" when the run recorded none (telemetry off:
    "0 B" read as a run that held nothing)."""
    total = h.total_bytes
    return "-" if total is None else format_bytes(total)


def unique_run_name(name: str, taken) -> str:
    """``name``, or ``"<name> #2"``, ``"#3"``... -- the first not in ``taken``.

    >>> unique_run_name("16-mixed", {"16-mixed", "16-mixed #2"})
    '16-mixed #3'
    """
    candidate, n = name, 2
    while candidate in taken:
        candidate, n = f"{name} #{n}", n + 1
    return candidate


def shared_description(parts: list[list[str]]) -> tuple[str, list[str]]:
    """(the parts every run's description holds, joined; each run's other parts, joined).

    >>> shared_description([["MLP 16-64-4", "Adam lr 0.001", "λ = 1"],
    ...                     ["MLP 16-64-4", "AdamW lr 0.01", "λ = 1"]])
    ('MLP 16-64-4, λ = 1', ['Adam lr 0.001', 'AdamW lr 0.01'])
    """
    shared = [p for p in parts[0] if all(p in other for other in parts[1:])] if parts else []
    return ", ".join(shared), [", ".join(p for p in own if p not in shared) for own in parts]


class Comparison:
    """Results of the same experiment under several precisions; ``str()`` is the table.

    ``comparison["16-mixed"]`` is that run's :class:`History`; ``comparison.histories`` holds
    them all in order. ``header`` heads the table (compare(): what every run shares);
    ``settings``, one string per run, what sets each run apart (compare(): another optimizer,
    lr, model...), shown in a "settings" column when any is non-empty.
    """

    def __init__(self, histories: list[History], header: str = "",
                 settings: list[str] | None = None) -> None:
        one = isinstance(histories, (str, History)) or not hasattr(histories, "__iter__")
        histories = [histories] if one else list(histories)
        bad = [h for h in histories if not isinstance(h, History)]
        if one and not bad:
            raise TypeError("Comparison: histories must be a list of History objects; wrap a "
                            "single one: Comparison([history])")
        if bad:  # an AttributeError on .precision before
            raise TypeError(f"Comparison: histories must be a list of History objects (as "
                            f"Trainer.fit returns them), got {type(bad[0]).__name__}")
        # Two runs of one precision (two seeds, say) keep both rows: the second is named
        # "<precision> #2", as compare() names them (the Histories themselves are not renamed).
        self.histories: dict[str, History] = {}
        for h in histories:
            self.histories[unique_run_name(h.precision, self.histories)] = h
        self.header = header
        settings = [""] * len(histories) if settings is None else list(settings)
        if len(settings) != len(histories) or not all(isinstance(x, str) for x in settings):
            raise ValueError(f"Comparison: settings must be one string per history "
                             f"({len(histories)}), got {settings!r}")
        self.settings = dict(zip(self.histories, settings, strict=True))

    def __getitem__(self, precision: str) -> History:
        try:
            return self.histories[precision]
        except KeyError:
            raise KeyError(f"no run named {precision!r}; runs: "
                           f"{', '.join(self.histories)}") from None

    def __iter__(self):
        return iter(self.histories.values())

    def __len__(self) -> int:
        return len(self.histories)

    def rows(self) -> list[dict[str, Any]]:
        """Each run's :meth:`History.summary`, named as in the table, with its "settings"."""
        return [{**h.summary(), "precision": name, "settings": self.settings[name]}
                for name, h in self.histories.items()]

    def __str__(self) -> str:
        recipes = any(np.isfinite(h.mean("clipped")) for h in self.histories.values())
        head = ("precision", "train acc", "test acc", "time", "bytes held", "skipped",
                "underflow", "lost upd", "NaN") + (("clipped", "flushed") if recipes else ())
        body = [
            (name, _pct(h.final_train_accuracy), _pct(h.final_test_accuracy),
             f"{h.wall_time:.2f} s", _bytes_cell(h), str(h.skipped_steps),
             _pct(h.mean("underflow")), _pct(h.mean("lost_updates")),
             f"yes (step {h.first_nonfinite_step})" if h.went_nan else "no")
            + ((_pct(h.mean("clipped"), 3), _pct(h.mean("flushed"), 2)) if recipes else ())
            for name, h in self.histories.items()
        ]
        if any(not math.isnan(h.final_val_loss) for h in self.histories.values()):
            # language models: validation loss and perplexity beside the accuracies
            head = (*head[:3], "val loss", "perplexity", *head[3:])
            body = [(*r[:3], f"{h.final_val_loss:.4f}", f"{h.final_val_perplexity:.3g}", *r[3:])
                    for r, h in zip(body, self.histories.values(), strict=True)]
        if any(self.settings.values()):  # what sets each run apart from the header's line
            head = (head[0], "settings", *head[1:])
            body = [(r[0], self.settings[name] or "-", *r[1:])
                    for r, name in zip(body, self.histories, strict=True)]
        widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
        text = 2 if head[1] == "settings" else 1  # columns of words: left-aligned

        def line(cells: tuple[str, ...]) -> str:
            pairs = enumerate(zip(cells, widths, strict=True))
            return "| " + " | ".join(c.ljust(w) if i < text else c.rjust(w)
                                     for i, (c, w) in pairs) + " |"

        rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
        table = [line(head), rule, *(line(r) for r in body)]
        return "\n".join(([self.header] if self.header else []) + table)

    def __repr__(self) -> str:
        return f"Comparison({', '.join(self.histories)})"

    def _repr_html_(self) -> str:
        from html import escape

        return f"<pre>{escape(str(self))}</pre>"
