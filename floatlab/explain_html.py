"""The HTML rendering of an :class:`~floatlab.explanation.Explanation` (its ``_repr_html_``,
what Jupyter shows): the bits as boxes coloured by field, a legend, the formula and the steps.
:data:`FIELD_COLOURS` is shared with the widgets.

>>> from floatlab import explain
>>> _render_html(explain(1.0, "fp16")).count("class='fl-bit ")
16
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

from floatlab.formats import Format

if TYPE_CHECKING:  # explanation.py imports this module: the type only, for annotations
    from floatlab.explanation import Explanation

__all__ = ["FIELD_COLOURS"]

# Okabe & Ito's palette (orange, sky blue, bluish green): told apart with every common colour
# vision deficiency, and dark text stays readable on each (contrast >= 6:1). The widgets share it.
FIELD_COLOURS = {"sign": "#E69F00", "exponent": "#56B4E9", "mantissa": "#009E73"}


def _bit_fields(fmt: Format) -> Sequence[str]:
    return (["sign"] if fmt.signed else []) + ["exponent"] * fmt.exp_bits + [
        "mantissa"
    ] * fmt.man_bits


def _render_html(e: Explanation) -> str:
    boxes = "".join(
        f"<span class='fl-bit fl-{name}' data-field='{name}' title='{name}' "
        f"style='display:inline-block;min-width:1.3em;text-align:center;margin:1px;"
        f"border:1px solid #555;background:{FIELD_COLOURS[name]}'>{bit}</span>"
        for bit, name in zip(e.bits, _bit_fields(e.fmt), strict=True)
    )
    f = e.fmt
    described = {
        "sign": f"sign {e.sign}",
        "exponent": f"exponent {e.exponent:0{f.exp_bits}b} = {e.exponent}",
        "mantissa": f"mantissa {e.mantissa:0{f.man_bits}b} = {e.mantissa}" if f.man_bits else "",
    }
    legend = " ".join(
        f"<span class='fl-{name}' style='background:{FIELD_COLOURS[name]};padding:0 4px'>"
        f"{html.escape(text)}</span>"
        for name, text in described.items()
        if text and (name != "sign" or f.signed)
    )
    rows = "".join(
        f"<tr><th style='text-align:left;vertical-align:top;padding-right:1em'>"
        f"{html.escape(label)}</th><td style='text-align:left'>"
        f"{html.escape(text).replace(chr(10), '<br/>')}</td></tr>"
        for label, text in e.steps
    )
    title = html.escape(str(e).split("\n", 1)[0])
    return (
        "<div class='floatlab-explain' style='font-family:monospace'>"
        f"<div style='font-weight:bold'>{title}</div>"
        f"<div class='fl-bits'>{boxes}</div>"
        f"<div class='fl-legend'>{legend}</div>"
        f"<div class='fl-formula' style='margin:0.4em 0'>{html.escape(e.formula)}</div>"
        f"<table class='fl-steps'>{rows}</table>"
        "</div>"
    )
