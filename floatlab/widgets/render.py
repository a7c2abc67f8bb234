"""HTML for the widgets, written in Python so that the live widget and the static snapshot a
notebook keeps for readers without a kernel are one and the same picture.

The JavaScript inserts this HTML and adds the controls; it never computes a value. Every piece
of text is escaped; styles are inline so the snapshot looks right where no stylesheet loads
(GitHub, nbviewer, exported HTML). Bit boxes carry ``data-bit`` (0 = the lowest mantissa bit),
``role="switch"`` and ``aria-checked`` for the script and for screen readers.

>>> from floatlab.widgets.state import state_from_value
>>> html = toy_html(state_from_value(3.141, "fp16"))
>>> "0x4248" in html and "3.140625" in html and html.count("data-bit=") == 16
True
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from fractions import Fraction

from floatlab.explain import FIELD_COLOURS, Explanation
from floatlab.formats import Format
from floatlab.grid import exact_decimal
from floatlab.widgets.state import ToyState

__all__ = ["toy_html", "compare_html", "number_text", "PALE_COLOURS", "MARK_COLOURS"]

# A 0 bit is the pale tint of its field's colour, a 1 bit the full colour, and the digit is
# always written in the box: the pattern reads without colour vision too.
PALE_COLOURS = {"sign": "#f7e2b3", "exponent": "#cce9f8", "mantissa": "#b3e2d5"}
# Okabe-Ito blue and vermillion on the number line: the stored value and the input.
MARK_COLOURS = {"stored": "#0072B2", "input": "#D55E00"}
_FONT = "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace"


def number_text(value: float, digits: int = 17) -> str:
    """A float for display: the shortest repr that reads back, or ``digits`` significant digits;
    NaN as ``NaN`` (what the formats call it), infinities as ``inf`` / ``-inf``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(float(value)) if digits >= 17 else f"{value:.{digits}g}"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _field_of_bits(fmt: Format) -> list[str]:
    """The field of each bit, most significant first."""
    return (["sign"] if fmt.signed else []) + ["exponent"] * fmt.exp_bits + (
        ["mantissa"] * fmt.man_bits)


# --------------------------------------------------------------------------------- bit boxes

def _box(bit: str, index: int, field: str, live: bool, small: bool) -> str:
    size = "min-width:0.75em;padding:0 1px;font-size:0.8em" if small else (
        "min-width:1.5em;padding:4px 3px;font-size:1.05em")
    cursor = "cursor:pointer;" if live else ""
    on = bit == "1"
    style = (
        f"display:inline-block;text-align:center;{size};margin:{0 if small else 1}px;{cursor}"
        f"border:2px solid {FIELD_COLOURS[field]};border-radius:3px;color:#000;"
        f"background:{FIELD_COLOURS[field] if on else PALE_COLOURS[field]};"
        f"font-weight:{'bold' if on else 'normal'}"
    )
    attrs = f"class='flt-bit flt-{field}' data-bit='{index}' data-field='{field}'"
    if live:
        label = f"bit {index}, {field}, is {bit}; press space to flip"
        attrs += (f" role='switch' aria-checked='{'true' if on else 'false'}' tabindex='-1'"
                  f" aria-label='{_e(label)}' title='{_e(label)}'")
    else:
        attrs += f" title='bit {index} ({field})'"
    return f"<span {attrs} style='{style}'>{bit}</span>"


def _field_captions(state: ToyState) -> dict[str, str]:
    f = state.fields
    fmt = state.fmt
    sign, exponent, mantissa = int(f.sign), int(f.exponent), int(f.mantissa)
    kind = str(f.kind)
    captions = {"sign": f"{sign} ({'−' if sign else '+'})"}
    low_field = fmt.has_zero and exponent == 0
    exp_text = f"{exponent:0{fmt.exp_bits}b} = {exponent}"
    if kind in ("inf", "nan") and exponent == fmt.exp_field_max and fmt.special == "ieee":
        exp_text += ": all ones, inf / NaN"
    elif kind in ("inf", "nan"):
        exp_text += f": the {'inf' if kind == 'inf' else 'NaN'} code"
    elif low_field:
        exp_text += f": 2^{fmt.emin} (subnormal)" if kind == "subnormal" else ": zero"
    else:
        exp_text += f" → 2^({exponent} − {fmt.bias}) = 2^{exponent - fmt.bias}"
    captions["exponent"] = exp_text
    if fmt.man_bits:
        hidden = 0 if low_field else 1
        significand = Fraction(hidden * 2**fmt.man_bits + mantissa, 2**fmt.man_bits)
        man_text = f"{mantissa:0{fmt.man_bits}b} = {mantissa}"
        if kind in ("normal", "subnormal"):
            man_text += (f" → {hidden} + {mantissa}/{2**fmt.man_bits} = "
                         f"{number_text(float(significand))}")
        captions["mantissa"] = man_text
    return captions


def _bit_groups(state: ToyState, live: bool) -> str:
    fmt, bits = state.fmt, state.bits
    names = _field_of_bits(fmt)
    captions = _field_captions(state)
    groups = []
    start = 0
    for field in ("sign", "exponent", "mantissa"):
        width = names.count(field)
        if not width:
            continue
        boxes = "".join(
            _box(bits[i], fmt.bits - 1 - i, field, live, small=False)
            for i in range(start, start + width)
        )
        start += width
        # An inline table whose caption wraps to the width of the boxes above it.
        groups.append(
            f"<div class='flt-group flt-group-{field}' style='display:inline-table;"
            f"vertical-align:top;margin:0 8px 4px 0;min-width:{3 if field == 'sign' else 11}em'>"
            f"<div style='display:flex;flex-wrap:wrap'>{boxes}</div>"
            f"<div class='flt-caption' style='display:table-caption;caption-side:bottom;"
            f"font-size:0.8em;color:#222;margin-top:2px'>"
            f"<b>{field}</b> {_e(captions.get(field, ''))}</div></div>"
        )
    return f"<div class='flt-bits' style='margin:6px 0'>{''.join(groups)}</div>"


def _mini_bits(bits: str, fmt: Format) -> str:
    names = _field_of_bits(fmt)
    return "".join(
        _box(b, fmt.bits - 1 - i, name, live=False, small=True)
        for i, (b, name) in enumerate(zip(bits, names, strict=True))
    )


# --------------------------------------------------------------------------------- the facts

def _row(label: str, value_html: str, cls: str = "") -> str:
    return (
        f"<tr class='{cls}'><th style='text-align:left;padding:1px 10px 1px 0;"
        f"vertical-align:top;font-weight:600'>{_e(label)}</th>"
        f"<td style='text-align:left;padding:1px 0;overflow-wrap:anywhere'>{value_html}</td></tr>"
    )


def _stored_text(state: ToyState) -> str:
    value = state.value
    if not math.isfinite(value):
        return number_text(value)
    return exact_decimal(value, state.fmt)


def _error_text(state: ToyState) -> str:
    e: Explanation = state.explanation
    if state.from_code:
        return "none: the value is the code's own (set by its bits)"
    if math.isnan(e.error):
        which = "input" if not math.isfinite(state.x) else "result"
        return f"undefined: the {which} is not finite ({e.outcome})"
    if e.error == 0:
        return "none: the input is a value of the format"
    return (f"{e.error:+.6g} = {e.error_ulps:+.3g} ulp (relative {e.relative_error:+.3g})")


def _outcome_notes(state: ToyState) -> list[str]:
    """The derivation's lines about what happened beyond plain rounding."""
    keep = ["overflow", "underflow", "special", "note", "zero"]
    if state.from_code:
        return []
    x, fmt = state.x, state.fmt
    if math.copysign(1.0, x) < 0 and not math.isnan(x) and (
            not fmt.signed or (x == 0 and not fmt.has_negative_zero)):
        keep.append("sign")  # why -2 is NaN in E8M0, why -0 is +0 in FNUZ formats
    return [f"{label}: {text}" for label, text in state.explanation.steps if label in keep]


def _facts(state: ToyState) -> str:
    e = state.explanation
    neighbours = state.neighbours()
    pieces = []
    for word, (value, code) in zip(("previous", "next"), neighbours, strict=True):
        shown = "none" if code is None else f"{number_text(value)} ({code})"
        pieces.append(f"{word} <span class='flt-{word}'>{_e(shown)}</span>")
    input_text = number_text(state.x)
    if state.from_code:
        input_text += " (from the bits)"
    else:
        input_text += f" → {e.outcome}"
    ulp_text = "undefined" if math.isnan(e.ulp) else (
        f"{number_text(e.ulp)} = 2^{math.frexp(e.ulp)[1] - 1}")
    rows = [
        _row("stored", f"<span class='flt-stored' style='font-size:1.25em;font-weight:bold'>"
             f"{_e(_stored_text(state))}</span>"),
        _row("code", f"<span class='flt-hex' style='font-weight:bold'>{_e(state.hex)}</span>"
             f"&nbsp; <span style='color:#444'>{_e(_spaced_bits(state))}</span>"),
        _row("class", f"<span class='flt-kind'>{_e(state.kind)}</span>"),
        _row("input", f"<span class='flt-input'>{_e(input_text)}</span>"),
        _row("value", _e(e.formula if math.isfinite(state.value) and state.value else
                         _stored_text(state))),
        _row("ulp", f"<span class='flt-ulp'>{_e(ulp_text)}</span>"),
        _row("error", f"<span class='flt-error'>{_e(_error_text(state))}</span>"),
        _row("neighbours", " &nbsp; ".join(pieces)),
    ]
    rows += [_row("why", _e(note), "flt-note") for note in _outcome_notes(state)]
    table_style = "border-collapse:collapse;margin:4px 0"
    return f"<table class='flt-facts' style='{table_style}'>{''.join(rows)}</table>"


def _spaced_bits(state: ToyState) -> str:
    fmt, bits = state.fmt, state.bits
    s = 1 if fmt.signed else 0
    parts = [bits[:s]] if s else []
    parts.append(bits[s : s + fmt.exp_bits])
    if fmt.man_bits:
        parts.append(bits[s + fmt.exp_bits :])
    return " ".join(parts)


# --------------------------------------------------------------------------------- number line

def _tick_labels(ticks: list[float]) -> list[str]:
    """The fewest significant digits (at least 7, like float32's) that tell the ticks apart."""
    for digits in range(7, 18):
        labels = [number_text(t, digits) for t in ticks]
        if len(set(labels)) == len(labels):
            return labels
    return [number_text(t) for t in ticks]


def _label_places(ticks, labels, position, width: int, keep: int) -> list[float | None]:
    """Where to centre each label (kept inside the picture), None where it would overlap one
    already placed; the stored value's (``keep``) is placed first."""
    placed: list[tuple[float, float]] = []
    centres: list[float | None] = [None] * len(ticks)
    for i in [keep] + [j for j in range(len(ticks)) if j != keep]:
        half = len(labels[i]) * 3.4 + 2  # ~6.7 px per character at font-size 11
        centre = min(max(position(ticks[i]), half), width - half)
        left, right = centre - half, centre + half
        if all(right <= a or left >= b for a, b in placed):
            placed.append((left, right))
            centres[i] = centre
    return centres


def _number_line(state: ToyState, width: int = 560, height: int = 74) -> str:
    ticks = state.number_line()
    if not ticks:
        return (f"<div class='flt-line' style='color:#444;font-size:0.85em'>number line: "
                f"{_e(number_text(state.value))} is not a point on the real line</div>")
    x = state.x
    lo, hi = ticks[0], ticks[-1]
    x_in_range = math.isfinite(x) and (hi - lo == 0 or (
        lo - (hi - lo) <= x <= hi + (hi - lo)))
    if x_in_range:
        lo, hi = min(lo, x), max(hi, x)
    pad = 48
    span = hi - lo

    def position(v: float) -> float:
        return width / 2 if span == 0 else pad + (v - lo) / span * (width - 2 * pad)

    parts = [f"<line x1='{pad - 20}' y1='30' x2='{width - pad + 20}' y2='30' stroke='#555' "
             "stroke-width='1.5'/>"]
    labels = _tick_labels(ticks)
    centres = _label_places(ticks, labels, position, width, keep=ticks.index(state.value))
    for t, label, centre in zip(ticks, labels, centres, strict=True):
        px = position(t)
        stored = t == state.value
        colour = MARK_COLOURS["stored"] if stored else "#555"
        text = "" if centre is None else (
            f"<text x='{centre:.1f}' y='54' font-size='11' text-anchor='middle' "
            f"fill='{colour}' font-weight='{'bold' if stored else 'normal'}'>{_e(label)}</text>")
        parts.append(
            f"<g><title>{_e(exact_decimal(t, state.fmt))} ({_e(state._hex_of(t))})</title>"
            f"<line x1='{px:.1f}' y1='{22 if stored else 25}' x2='{px:.1f}' "
            f"y2='{38 if stored else 35}' stroke='{colour}' stroke-width='{3 if stored else 1.5}'/>"
            f"{text}</g>"
        )
    if math.isfinite(x) and not state.from_code:
        if x_in_range:
            px, text = position(x), f"x = {number_text(x, 6)}"
        else:  # far outside: an arrow at the edge toward it
            px = width - pad + 14 if x > hi else pad - 14
            text = f"x = {number_text(x, 6)} {'→' if x > hi else '←'}"
        anchor = "end" if px > width * 0.75 else "start" if px < width * 0.25 else "middle"
        parts.append(
            f"<g class='flt-x'><path d='M {px - 5:.1f} 8 L {px + 5:.1f} 8 L {px:.1f} 18 Z' "
            f"fill='{MARK_COLOURS['input']}'/><text x='{px:.1f}' y='70' font-size='11' "
            f"text-anchor='{anchor}' fill='{MARK_COLOURS['input']}'>{_e(text)}</text></g>"
        )
    legend = (f"<span style='color:{MARK_COLOURS['stored']}'>▮ stored value</span>, its "
              f"neighbours in {_e(state.grid.name)}"
              + (f"; <span style='color:{MARK_COLOURS['input']}'>▼ the input</span>"
                 if not state.from_code and math.isfinite(x) else ""))
    return (
        f"<div class='flt-line'><svg width='{width}' height='{height}' role='img' "
        f"aria-label='number line around {_e(number_text(state.value))}' "
        f"style='max-width:100%;overflow:visible'>{''.join(parts)}</svg>"
        f"<div style='font-size:0.8em;color:#333'>{legend}</div></div>"
    )


# --------------------------------------------------------------------------------- pages

def _format_line(fmt: Format) -> str:
    pieces = (["1 sign"] if fmt.signed else ["no sign"]) + [f"{fmt.exp_bits} exponent"] + [
        f"{fmt.man_bits} mantissa"]
    normal = fmt.smallest_normal  # None where a format has no normal values (P3109 p8)
    return (f"<b>{_e(fmt.name)}</b>: {fmt.bits} bits = {' + '.join(pieces)}, bias {fmt.bias}, "
            f"max {_e(number_text(fmt.max, 6))}, "
            + ("no normal values" if normal is None else
               f"smallest normal {_e(number_text(normal, 6))}"))


def toy_html(state: ToyState, live: bool = False) -> str:
    """The toy's picture of ``state``. ``live``: bits are keyboard / click targets (the
    widget); otherwise a static snapshot that says how it was made."""
    settings = (f"rounding {state.rounding}, saturate {'on' if state.saturate else 'off'}, "
                f"FTZ {'on' if state.ftz else 'off'}")
    header = f"<div class='flt-format' style='margin-bottom:2px'>{_format_line(state.fmt)}</div>"
    if not live:
        header += (f"<div style='font-size:0.8em;color:#444'>{_e(settings)} · a static "
                   "snapshot of floatlab's FloatToy: run the notebook to click the bits</div>")
    return (
        f"<div class='floatlab-toy' style='{_FONT};font-size:13px;line-height:1.35;"
        f"color:#000;background:#fff;padding:6px'>"
        f"{header}{_bit_groups(state, live)}{_facts(state)}{_number_line(state)}</div>"
    )


def compare_html(x: float, states: Sequence[ToyState], live: bool = False) -> str:
    """One value in several formats, a row each: bits, code, stored value, error, class."""
    head = "".join(
        f"<th style='text-align:left;padding:2px 8px;border-bottom:1px solid #888;"
        f"white-space:nowrap'>{h}</th>"
        for h in ("format", "bits (sign · exponent · mantissa)", "code", "stored", "error",
                  "relative", "class")
    )
    rows = []
    for s in states:
        e = s.explanation
        error = "—" if math.isnan(e.error) else (
            "0" if e.error == 0 else f"{e.error_ulps:+.3g} ulp")
        relative = "—" if math.isnan(e.relative_error) else f"{e.relative_error:+.3g}"
        cells = (
            f"<b>{_e(s.fmt.name)}</b>", _mini_bits(s.bits, s.fmt),
            f"<span class='flt-hex'>{_e(s.hex)}</span>",
            f"<span class='flt-stored'>{_e(number_text(s.value))}</span>",
            _e(error), _e(relative), _e(f"{s.kind}" + (
                f" ({e.outcome})" if e.outcome not in ("exact", "rounded") else "")),
        )
        rows.append("<tr class='flt-row' data-format='" + _e(s.fmt.name) + "'>" + "".join(
            f"<td style='text-align:left;padding:2px 8px;vertical-align:middle;"
            f"white-space:nowrap'>{c}</td>"
            for c in cells) + "</tr>")
    caption = f"x = {_e(number_text(x))}"
    if not live:
        caption += (" · a static snapshot of floatlab's FormatCompare: run the notebook to type "
                    "another value")
    return (
        f"<div class='floatlab-compare' style='{_FONT};font-size:13px;color:#000;"
        f"background:#fff;padding:6px'><div style='margin-bottom:4px'>{caption}</div>"
        f"<table style='border-collapse:collapse'><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )
