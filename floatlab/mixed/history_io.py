"""A :class:`~floatlab.mixed.History` as plain data: ``to_dict`` / ``from_dict`` and the JSON
file of ``save`` / ``load``.

Strict JSON has no NaN or infinity, and a History is full of them (a column not recorded at a
step is NaN; a loss that overflowed is inf), so every float is written as a number when it is
finite and as one of the strings ``"nan"``, ``"inf"``, ``"-inf"`` otherwise; reading turns
those strings back into floats (in the fields that hold floats only, so a string elsewhere is
never mistaken for one). ``json.dumps(history.to_dict(), allow_nan=False)`` works.

>>> from floatlab.mixed import History
>>> h = History("16-mixed")
>>> h._append(loss=float("inf"), skipped=True)
>>> d = h.to_dict()
>>> d["loss"], d["accuracy"], d["skipped"]
(['inf'], ['nan'], [1.0])
>>> History.from_dict(d)["loss"].tolist()
[inf]
"""

from __future__ import annotations

import copy
import json
import math
import os
from dataclasses import asdict, fields
from typing import Any

from floatlab.mixed.history import COLUMNS, History

__all__ = ["history_to_dict", "history_from_dict", "save_history", "load_history", "KIND",
           "VERSION"]

#: The "kind" and "version" of a saved History (from_dict refuses any other).
KIND = "floatlab.mixed.History"
VERSION = 1

_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_FINALS = ("final_train_accuracy", "final_test_accuracy", "final_val_loss", "wall_time")


class _NotPlain(Exception):
    """An info value with no plain-data form (dropped by to_dict)."""


def _encode(x: float) -> float | str:
    """``x`` as a JSON number, or "nan" / "inf" / "-inf"."""
    x = float(x)
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else "inf" if x > 0 else "-inf"


def _decode(value: Any, where: str) -> float:
    """A float written by :func:`_encode` (a number, or "nan" / "inf" / "-inf")."""
    if isinstance(value, str) and value in _NONFINITE:
        return _NONFINITE[value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"History.from_dict: {where} must be a number or 'nan' / 'inf' / "
                         f"'-inf', got {value!r}")
    return float(value)


def _plain(value: Any) -> Any:
    """``value`` as JSON data (tuples become lists), or _NotPlain."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):  # (a string here would come back as a string)
            raise _NotPlain
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _plain(v) for k, v in value.items()}
    raise _NotPlain


def _operands_to_plain(operands: dict[str, list[Any]]) -> dict[str, list[dict[str, Any]]]:
    """A recipe run's per-operand records (OperandStats) as dicts of their fields."""
    return {key: [{name: (v if isinstance(v, (bool, int)) else _encode(v))
                   for name, v in asdict(s).items()} for s in records]
            for key, records in operands.items()}


def _operands_from_plain(operands: Any) -> dict[str, list[Any]]:
    from floatlab.mixed.recipe_gemm import OperandStats

    if not isinstance(operands, dict):
        raise ValueError(f"History.from_dict: info['operands'] must be a dict, got "
                         f"{type(operands).__name__}")
    kinds = {f.name: f.type for f in fields(OperandStats)}
    out = {}
    for key, records in operands.items():
        rows = []
        for i, record in enumerate(records):
            if not isinstance(record, dict) or set(record) != set(kinds):
                raise ValueError(f"History.from_dict: info['operands'][{key!r}][{i}] must hold "
                                 f"the fields {sorted(kinds)}, got {record!r}")
            where = f"info['operands'][{key!r}][{i}]"
            rows.append(OperandStats(**{
                name: (bool(v) if kinds[name] == "bool" else int(v) if kinds[name] == "int"
                       else _decode(v, f"{where}[{name!r}]")) for name, v in record.items()}))
        out[key] = rows
    return out


def history_to_dict(history: History) -> dict[str, Any]:
    """See :meth:`History.to_dict`."""
    info, dropped = {}, []
    for key, value in history.info.items():
        try:
            info[key] = (_operands_to_plain(value) if key == "operands" and isinstance(value, dict)
                         else _plain(value))
        except (_NotPlain, TypeError):  # (asdict of a non-dataclass: TypeError)
            dropped.append(key)
    summary = {k: _encode(v) if isinstance(v, float) else v
               for k, v in history.summary().items()}
    return {
        **{name: [_encode(v) for v in values] for name, values in history._rows.items()},
        "summary": summary,
        "kind": KIND,
        "version": VERSION,
        "precision": str(history.precision),
        "bytes": [{cat: dict(formats) for cat, formats in step.items()}
                  for step in history.bytes],
        **{name: _encode(getattr(history, name)) for name in _FINALS},
        "info": info,
        "dropped": dropped,
    }


def history_from_dict(data: Any) -> History:
    """See :meth:`History.from_dict`."""
    if not isinstance(data, dict):
        raise TypeError(f"History.from_dict takes the dict of History.to_dict(), got "
                        f"{type(data).__name__}")
    kind, version = data.get("kind"), data.get("version")
    if kind != KIND:
        raise ValueError(f"History.from_dict: this is not a saved History (kind {kind!r}, "
                         f"expected {KIND!r}); pass what History.to_dict() or History.save() "
                         f"wrote")
    if version != VERSION:
        raise ValueError(f"History.from_dict: a saved History of version {version!r}; this "
                         f"floatlab reads version {VERSION}: load it with the floatlab that "
                         f"saved it")
    missing = [name for name in COLUMNS if not isinstance(data.get(name), list)]
    if missing or not isinstance(data.get("precision"), str):
        what = f"columns {missing}" if missing else "'precision' (a string)"
        raise ValueError(f"History.from_dict: the dict has no {what}; it was not written by "
                         f"History.to_dict()")
    lengths = {name: len(data[name]) for name in COLUMNS}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"History.from_dict: the columns have different lengths {lengths}")
    info = data.get("info", {})
    if not isinstance(info, dict) or not isinstance(data.get("bytes", []), list):
        raise ValueError("History.from_dict: 'info' must be a dict and 'bytes' a list")
    history = History(data["precision"], {
        k: _operands_from_plain(v) if k == "operands" else copy.deepcopy(v)
        for k, v in info.items()})
    for name in COLUMNS:
        history._rows[name] = [_decode(v, f"{name}[{i}]") for i, v in enumerate(data[name])]
    try:
        history.bytes = [{cat: {fmt: int(n) for fmt, n in formats.items()}
                          for cat, formats in step.items()} for step in data.get("bytes", [])]
    except (AttributeError, TypeError, ValueError):
        raise ValueError("History.from_dict: 'bytes' must be a list (one per step) of "
                         "{category: {format: bytes}}") from None
    for name in _FINALS:
        setattr(history, name, _decode(data.get(name, "nan"), name))
    return history


def save_history(history: History, path: str | os.PathLike) -> None:
    """See :meth:`History.save`."""
    text = json.dumps(history_to_dict(history), allow_nan=False)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def load_history(path: str | os.PathLike) -> History:
    """See :meth:`History.load`."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"History.load: {os.fspath(path)!r} is not JSON ({e}); it reads the "
                         f"files History.save() writes") from None
    if not isinstance(data, dict):
        raise ValueError(f"History.load: {os.fspath(path)!r} holds a JSON "
                         f"{type(data).__name__}, not a saved History; it reads the files "
                         f"History.save() writes")
    return history_from_dict(data)
