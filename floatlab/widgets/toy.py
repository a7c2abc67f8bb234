"""FloatToy: click the bits of any format, type a value, watch every field change.

All computation happens here, in Python, through :mod:`floatlab.widgets.state`; the browser
receives the finished HTML (``html``) and the settings its controls show, and reports clicks
and typing back as messages. The state lives in ordinary traits, so it is read, set, observed
and linked from Python:

>>> toy = FloatToy("fp16", 3.141)
>>> toy.code == 0x4248, toy.stored
(True, 3.140625)
>>> toy.flip(0); toy.stored                 # the lowest mantissa bit
3.142578125
>>> toy.fmt = "e4m3fn"; toy.value = 500; toy.stored
nan
>>> toy.saturate = True; toy.stored
448.0
>>> toy.type_value("1e999999"), toy.stored  # shown in the widget, state unchanged
(False, 448.0)
>>> toy.message.split(": ", 1)[1]
"it is beyond float64's range (max ≈ 1.8e308): type inf for infinity."
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anywidget
import numpy as np
import traitlets

from floatlab.formats import Format, FormatNameError, format_names, get_format
from floatlab.widgets.parse import parse_value
from floatlab.widgets.render import number_text, toy_html
from floatlab.widgets.state import (
    TOY_ROUNDING_MODES,
    ToyState,
    _check_options,
    state_from_code,
    state_from_value,
)

__all__ = ["FloatToy"]

STATIC = Path(__file__).with_name("static")
_INPUT_ERRORS = (ValueError, TypeError, OverflowError, FormatNameError, traitlets.TraitError)


class _Default:
    """FloatToy's default value (3.141), told apart from a value passed alongside code=."""

    def __repr__(self) -> str:
        return "3.141"


_DEFAULT_VALUE = _Default()


class StateTrait(traitlets.TraitType):
    """A trait whose ``@validate`` method does all the checking (None included: traitlets'
    ``Any`` would let None through unchecked)."""

    allow_none = False
    info_text = "a value the widget's validator accepts"


def linked_refusal(err: Exception) -> str:
    """The message of a change this widget took but an observer of it refused: a widget linked
    with ``traitlets.link`` (a FormatCompare with fp4 refuses the NaN a toy just stored)."""
    return f"stored here, but a linked widget refused it: {err}"


def _as_value(value: Any) -> float:
    """A number, or the text of one (parsed safely), as a float64."""
    if isinstance(value, str):
        return parse_value(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float, np.integer, np.floating)
    ):
        raise TypeError(
            f"value must be a real number or the text of one (e.g. '2**-24'), got {value!r}"
        )
    if isinstance(value, (int, np.integer)) and abs(int(value)) > 2**53:
        try:
            exact = float(value) == int(value)
        except OverflowError:  # 10**400: float() would say only "int too large to convert"
            raise ValueError(
                f"the integer value (about 2**{abs(int(value)).bit_length() - 1}) is beyond "
                "float64's range (max ≈ 1.8e308): pass float('inf') for infinity"
            ) from None
        if not exact:
            raise ValueError(f"the integer {value} is not exact in float64: pass a float")
    return float(value)


class FloatToy(anywidget.AnyWidget):
    """An interactive float: bits as boxes (click or Space flips one), a value box, the format,
    rounding mode, saturate and FTZ, and what the code stores.

    Parameters
    ----------
    fmt : any format floatlab knows: a preset ("fp16", "e4m3fn") or a spec ("e3m4", "e6m9").
    value : the number to store (or its text: "2**-24", "inf", "nan").
    code : instead of ``value``, the code to show (``FloatToy("fp16", code=0x3c00)``).
    rounding, saturate, ftz : the options of :func:`floatlab.round` (``ftz=True`` is
        ``subnormals=False``); the toy offers the deterministic rounding modes.

    State (traits; set them to change the toy, observe or link them): ``fmt`` (canonical
    name), ``value`` (the input), ``code`` (the stored code; setting it shows that code),
    ``rounding``, ``saturate``, ``ftz``. Read-only: ``stored`` (the stored value), ``state``
    (the :class:`~floatlab.widgets.state.ToyState`), ``message`` (the last input's problem).
    Invalid settings from Python raise; typing in the widget (or :meth:`type_value`,
    :meth:`type_format`) shows the problem in the widget and keeps the state.
    """

    _esm = STATIC / "toy.js"
    _css = STATIC / "widgets.css"

    # The state, set from Python (not synced: codes can exceed JavaScript's 2**53 and NaN is
    # no JSON). Validators compute the new state first, so a bad setting changes nothing.
    value = StateTrait(3.141)
    code = StateTrait(0)
    fmt = traitlets.Unicode("float16").tag(sync=True)
    rounding = traitlets.Unicode("nearest_even").tag(sync=True)
    saturate = traitlets.Bool(False).tag(sync=True)
    ftz = traitlets.Bool(False).tag(sync=True)

    # What the browser shows.
    html = traitlets.Unicode("").tag(sync=True)
    message = traitlets.Unicode("").tag(sync=True)
    value_text = traitlets.Unicode("").tag(sync=True)
    has_subnormals = traitlets.Bool(True).tag(sync=True)
    formats = traitlets.List(traitlets.Unicode(), default_value=format_names()).tag(sync=True)
    rounding_modes = traitlets.List(
        traitlets.Unicode(), default_value=list(TOY_ROUNDING_MODES)
    ).tag(sync=True)

    def __init__(
        self,
        fmt: str | Format | Any = "fp16",
        value: Any = _DEFAULT_VALUE,
        *,
        code: Any = None,
        rounding: str = "nearest_even",
        saturate: bool = False,
        ftz: bool = False,
        **kwargs: Any,
    ) -> None:
        # code= would otherwise reach traitlets as a plain trait value and be overwritten by
        # the state of the default value, silently.
        if code is not None and value is not _DEFAULT_VALUE:
            raise TypeError(f"pass value or code, not both (got value={value!r}, code={code!r})")
        if code is not None:
            state = state_from_code(code, fmt, rounding, saturate, ftz)
        else:
            if value is _DEFAULT_VALUE:
                value = 3.141
            state = state_from_value(_as_value(value), fmt, rounding, saturate, ftz)
        self._state = state
        self._committing = True  # the traits below are the state, not requests to change it
        super().__init__(**kwargs)
        self._commit(state, value_text=value if isinstance(value, str) else None)
        self.on_msg(self._on_browser_message)

    # ------------------------------------------------------------------ state
    @property
    def state(self) -> ToyState:
        return self._state

    @property
    def stored(self) -> float:
        """The stored value (float64, exact)."""
        return self._state.value

    def _commit(self, state: ToyState, value_text: str | None = None) -> None:
        self._committing = True
        try:
            with self.hold_sync():
                self._state = state
                self.fmt = state.fmt.name
                self.rounding = state.rounding
                self.saturate = state.saturate
                self.ftz = state.ftz
                self.value = state.x
                self.code = state.code
                self.has_subnormals = state.fmt.subnormals and state.fmt.has_zero
                self.value_text = value_text if value_text is not None else number_text(state.x)
                self.message = ""
                self.html = toy_html(state, live=True)
        finally:
            self._committing = False

    # Setting a state trait from Python: its validator computes the new state from the proposal
    # and the other traits (raising, with nothing changed, if that fails) and commits it whole.
    # (Committing here, not in an observer, also keeps changes traitlets calls "equal": -0.0.)
    @traitlets.validate("value")
    def _validate_value(self, proposal):
        if self._committing:
            return proposal.value
        s = self._state
        state = state_from_value(_as_value(proposal.value), s.fmt, **s.options)
        self._commit(state, proposal.value if isinstance(proposal.value, str) else None)
        return state.x

    @traitlets.validate("code")
    def _validate_code(self, proposal):
        if self._committing:
            return proposal.value
        s = self._state
        state = state_from_code(proposal.value, s.fmt, **s.options)
        self._commit(state)
        return state.code

    @traitlets.validate("fmt")
    def _validate_fmt(self, proposal):
        if self._committing:
            return proposal.value
        s = self._state
        # A new format re-rounds the input (after a bit flip: the flipped code's value).
        state = state_from_value(s.x, get_format(proposal.value), **s.options)
        self._commit(state)
        return state.fmt.name

    @traitlets.validate("rounding", "saturate", "ftz")
    def _validate_option(self, proposal):
        if self._committing:
            return proposal.value
        s = self._state
        options = dict(s.options, **{proposal.trait.name: proposal.value})
        options["rounding"] = _check_options(**options)  # canonical: "rne" -> "nearest_even"
        self._commit(state_from_value(s.x, s.fmt, **options))
        return options[proposal.trait.name]

    # ------------------------------------------------------------------ actions
    def flip(self, bit: int) -> None:
        """Flip bit number ``bit`` (0 = the lowest mantissa bit, bits - 1 = the sign bit)."""
        self._commit(self._state.flip(bit))

    def type_value(self, text: str) -> bool:
        """Act as if ``text`` was typed into the value box: on a problem the widget shows the
        message and keeps its state. Returns whether the value was taken."""
        return self._attempt(lambda: setattr(self, "value", str(text)), str(text))

    def type_format(self, text: str) -> bool:
        """Act as if ``text`` was chosen or typed as the format (a preset or a spec)."""
        return self._attempt(lambda: setattr(self, "fmt", str(text)))

    def _attempt(self, action, value_text: str | None = None) -> bool:
        before = self._state
        try:
            action()
        except _INPUT_ERRORS as err:
            if self._state is not before:  # taken here; an observer (a linked widget) refused
                self.message = linked_refusal(err)
                return True
            # Announce the message afresh even when it repeats: the browser then re-reads the
            # unchanged state into its controls (a format menu or checkbox that was just
            # changed snaps back).
            self.message = ""
            self.message = str(err)
            if value_text is not None:
                self.value_text = value_text  # keep what was typed, to be corrected
            return False
        return True

    def _on_browser_message(self, _widget, content: dict, _buffers) -> None:
        event = content.get("event") if isinstance(content, dict) else None
        if event == "flip":
            self._attempt(lambda: self.flip(int(content.get("bit"))))
        elif event == "value":
            self.type_value(str(content.get("text", "")))
        elif event == "format":
            self.type_format(str(content.get("text", "")))
        elif event in ("rounding", "saturate", "ftz"):
            new = content.get("value")
            self._attempt(lambda: setattr(self, event, new))

    # ------------------------------------------------------------------ display
    def __repr__(self) -> str:
        s = self._state
        return (f"FloatToy({s.fmt.name}, {number_text(s.x)} -> {s.hex} = "
                f"{number_text(s.value)})")

    def _repr_mimebundle_(self, **kwargs: Any):
        """The live widget where a widget manager runs, and the same picture as static HTML
        for everyone else (GitHub, nbviewer, exported notebooks)."""
        bundle = super()._repr_mimebundle_(**kwargs)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        data = dict(data or {}, **{"text/html": toy_html(self._state, live=False)})
        return data, metadata
