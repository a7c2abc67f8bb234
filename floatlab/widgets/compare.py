"""FormatCompare: one value in several formats, side by side, redrawn as the value changes.

>>> cmp = FormatCompare(3.141, formats=["fp32", "bf16", "fp16", "e4m3fn"])
>>> [s.hex for s in cmp.states]
['0x40490625', '0x4049', '0x4248', '0x45']
>>> cmp.value = 1e6; [s.kind for s in cmp.states]
['normal', 'normal', 'inf', 'nan']

It has a ``value`` trait like :class:`~floatlab.widgets.FloatToy`, so the two can be linked:
``traitlets.link((toy, "value"), (cmp, "value"))``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anywidget
import traitlets

from floatlab.formats import Format, get_format
from floatlab.widgets.render import compare_html, number_text
from floatlab.widgets.state import ToyState, _check_options, state_from_value
from floatlab.widgets.toy import _INPUT_ERRORS, STATIC, StateTrait, _as_value, linked_refusal

__all__ = ["FormatCompare"]

DEFAULT_FORMATS = ("fp32", "tf32", "bf16", "fp16", "e4m3fn", "e5m2")


class FormatCompare(anywidget.AnyWidget):
    """``value`` rounded into each of ``formats`` (names or specs), one row per format: the
    bits coloured by field, the code, the stored value, the error in ulps and relative, the
    class. ``value``, ``formats``, ``rounding``, ``saturate`` and ``ftz`` are traits; the
    widget's text box (or :meth:`type_value`) takes typed values, and shows problems in the
    widget without changing the table.
    """

    _esm = STATIC / "compare.js"
    _css = STATIC / "widgets.css"

    value = StateTrait(3.141)
    formats = traitlets.List(traitlets.Unicode())
    rounding = traitlets.Unicode("nearest_even")
    saturate = traitlets.Bool(False)
    ftz = traitlets.Bool(False)

    html = traitlets.Unicode("").tag(sync=True)
    message = traitlets.Unicode("").tag(sync=True)
    value_text = traitlets.Unicode("").tag(sync=True)

    def __init__(
        self,
        value: Any = 3.141,
        formats: Sequence[Any] = DEFAULT_FORMATS,
        *,
        rounding: str = "nearest_even",
        saturate: bool = False,
        ftz: bool = False,
        **kwargs: Any,
    ) -> None:
        if isinstance(formats, str) or not isinstance(formats, Sequence) or not formats:
            raise TypeError(
                f"formats must be a non-empty list of format names, e.g. {list(DEFAULT_FORMATS)}"
                f", got {formats!r}"
            )
        x = _as_value(value)
        options = dict(rounding=_check_options(rounding, saturate, ftz), saturate=saturate,
                       ftz=ftz)
        resolved = [get_format(f) for f in formats]
        # Formats given as objects are kept by name: a custom name (Format(3, 4, name="mine"))
        # does not parse back, and the rows are recomputed from the names.
        self._given = {f.name: f for f, given in zip(resolved, formats, strict=True)
                       if not isinstance(given, str)}
        names = [f.name for f in resolved]
        states = self._compute(x, names, options)
        self._ready = False
        super().__init__(**kwargs)
        self.value, self.formats = x, names
        self.rounding, self.saturate, self.ftz = options["rounding"], saturate, ftz
        self._ready = True
        self._show(states, x, value if isinstance(value, str) else None)
        self.on_msg(self._on_browser_message)

    def _format(self, name: str) -> Format:
        return self._given.get(name) or get_format(name)

    def _compute(self, x: float, names: Sequence[str], options: dict) -> list[ToyState]:
        return [state_from_value(x, self._format(name), **options) for name in names]

    @property
    def states(self) -> list[ToyState]:
        """One :class:`~floatlab.widgets.state.ToyState` per format, in order."""
        return list(self._states)

    def _show(self, states: list[ToyState], x: float, value_text: str | None = None) -> None:
        self._states = states
        with self.hold_sync():
            self.value_text = value_text if value_text is not None else number_text(x)
            self.message = ""
            self.html = compare_html(x, states, live=True)

    # Validators compute every row first (a value or format that fails changes nothing), then
    # show them; the trait itself is stored when the validator returns.
    @traitlets.validate("value")
    def _validate_value(self, proposal):
        x = _as_value(proposal.value)
        if self._ready:
            states = self._compute(x, self.formats, self._options())
            self._show(states, x, proposal.value if isinstance(proposal.value, str) else None)
        return x

    @traitlets.validate("formats")
    def _validate_formats(self, proposal):
        names = [self._format(f).name for f in proposal.value]
        if not names:
            raise ValueError("formats is empty: give at least one format name, e.g. ['fp16']")
        if self._ready:
            self._show(self._compute(self.value, names, self._options()), self.value)
        return names

    @traitlets.validate("rounding", "saturate", "ftz")
    def _validate_option(self, proposal):
        options = dict(self._options(), **{proposal.trait.name: proposal.value})
        options["rounding"] = _check_options(**options)
        if self._ready:
            self._show(self._compute(self.value, self.formats, options), self.value)
        return options[proposal.trait.name]

    def _options(self) -> dict:
        return dict(rounding=self.rounding, saturate=self.saturate, ftz=self.ftz)

    def type_value(self, text: str) -> bool:
        """Act as if ``text`` was typed into the value box (problems are shown, not raised)."""
        before = self._states
        try:
            self.value = str(text)
        except _INPUT_ERRORS as err:
            if self._states is not before:  # taken here; a linked widget refused it
                self.message = linked_refusal(err)
                return True
            self.message = str(err)
            self.value_text = str(text)
            return False
        return True

    def _on_browser_message(self, _widget, content: dict, _buffers) -> None:
        if isinstance(content, dict) and content.get("event") == "value":
            self.type_value(str(content.get("text", "")))

    def __repr__(self) -> str:
        rows = ", ".join(f"{s.fmt.name} {s.hex}" for s in self._states)
        return f"FormatCompare({number_text(self.value)}: {rows})"

    def _repr_mimebundle_(self, **kwargs: Any):
        bundle = super()._repr_mimebundle_(**kwargs)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        data = dict(data or {}, **{"text/html": compare_html(self.value, self._states)})
        return data, metadata
