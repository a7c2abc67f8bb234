"""The widgets' Python half: every number they show is floatlab's, every input is checked.

Oracles: numpy's float16 cast (correctly rounded from float64) and ml_dtypes' views for the
codes and values of fp16 / bf16 / FP8; floatlab.round / encode / explain for the options (their
own oracle tests live in test_rounding*.py and test_explain.py); XOR for bit flips.
"""

from __future__ import annotations

import importlib
import math
import re
import sys
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import traitlets
from hypothesis import given, settings
from hypothesis import strategies as st

import floatlab
from floatlab.widgets import FloatToy, FormatCompare, parse_value
from floatlab.widgets.state import TOY_ROUNDING_MODES, state_from_value

# Presets whose codes ml_dtypes / numpy decode independently of floatlab.
ORACLE_DTYPES = {
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
    "float8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "float8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
    "float8_e3m4": ml_dtypes.float8_e3m4,
    "float8_e4m3": ml_dtypes.float8_e4m3,
    "float8_e8m0fnu": ml_dtypes.float8_e8m0fnu,
}
UINT = {8: np.uint8, 16: np.uint16}


def oracle_value(code: int, name: str) -> float:
    dtype = np.dtype(ORACLE_DTYPES[name])
    return float(np.array(code, dtype=UINT[dtype.itemsize * 8]).view(dtype).astype(np.float64))


def same(a: float, b: float) -> bool:
    """Equal as stored values: NaN equals NaN, and the sign of zero counts."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


def text_of(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


def snapshot(widget) -> tuple:
    """Everything a person can see or read of a toy."""
    return (widget.fmt, repr(widget.value), widget.code, widget.rounding, widget.saturate,
            widget.ftz, widget.html, widget.state)


# ----------------------------------------------------------------------------- the story

def test_the_issue_walkthrough():
    toy = FloatToy("fp16", 3.141)
    assert (toy.fmt, toy.code, toy.stored) == ("float16", 0x4248, 3.140625)
    assert "0x4248" in toy.html and "3.140625" in toy.html
    toy.flip(0)
    assert (toy.code, toy.stored, toy.value) == (0x4249, 3.142578125, 3.142578125)
    toy.type_format("e4m3fn")
    assert toy.fmt == "float8_e4m3fn"
    assert toy.type_value("500")
    assert math.isnan(toy.stored) and toy.code == 0x7F and toy.state.kind == "nan"
    toy.saturate = True
    assert (toy.stored, toy.code) == (448.0, 0x7E)
    assert ">448<" in toy.html.replace("'", "") or "448</span>" in toy.html


def test_state_is_settable_from_python_and_observable():
    toy = FloatToy()  # the defaults: fp16, 3.141
    seen = []
    toy.observe(lambda change: seen.append(change["name"]), names=["value", "code", "fmt"])
    toy.value = 2**-24
    assert toy.code == 0x0001 and toy.state.kind == "subnormal"
    toy.code = 0x3C00
    assert toy.value == 1.0 and toy.stored == 1.0 and toy.value_text == "1.0"
    toy.fmt = "BF16"
    assert toy.fmt == "bfloat16" and toy.code == 0x3F80
    assert {"value", "code", "fmt"} <= set(seen)
    toy.value = "2**-10"  # the text of a number works from Python too
    assert toy.value == 2**-10 and toy.value_text == "2**-10"


def test_a_toy_can_start_from_a_code():
    # code= was taken by traitlets as a plain trait value and overwritten by 3.141's state.
    toy = FloatToy("fp16", code=0x3C00)
    assert (toy.code, toy.stored, toy.value) == (0x3C00, 1.0, 1.0) and toy.state.from_code
    payload = FloatToy("fp16", code=0x7C01, saturate=True)  # any code: a NaN payload too
    assert payload.code == 0x7C01 and payload.saturate and "0x7c01" in payload.html
    with pytest.raises(TypeError, match="pass value or code, not both"):
        FloatToy("fp16", 3.141, code=0x3C00)
    with pytest.raises(ValueError, match="does not fit in the 8 bits of float8_e4m3fn"):
        FloatToy("e4m3fn", code=0x100)
    with pytest.raises(TypeError, match="value must be a real number"):
        FloatToy("fp16", None)  # None is still refused, not taken as the default
    assert repr(FloatToy()) == "FloatToy(float16, 3.141 -> 0x4248 = 3.140625)"


def test_value_and_code_track_numpy_float16_on_random_inputs():
    rng = np.random.default_rng(13)
    xs = np.concatenate([rng.standard_normal(60) * 10.0 ** rng.integers(-9, 6, 60),
                         [0.0, -0.0, 65504.0, 65520.0, 2**-25, 3 * 2**-26, np.inf, -np.inf]])
    toy = FloatToy("fp16", 1.0)
    for x in xs:
        toy.value = float(x)
        with np.errstate(over="ignore"):  # numpy rounds float64 -> fp16 once (inf on overflow)
            expected = np.float16(x)
        assert toy.code == int(expected.view(np.uint16)), x
        assert same(toy.stored, float(expected))
        assert f"0x{toy.code:04x}" in toy.html


@settings(max_examples=60)  # each example builds a widget and its HTML (~20 ms)
@given(st.floats(allow_nan=False, width=32), st.sampled_from(TOY_ROUNDING_MODES),
       st.booleans(), st.booleans(), st.sampled_from(["e4m3fn", "e5m2", "bf16", "e3m4", "e2m1"]))
def test_every_option_is_floatlab_round(x, mode, saturate, ftz, fmt):
    if fmt == "e2m1" and math.isinf(x) and not saturate:
        return  # refused: see test_values_a_format_cannot_hold
    toy = FloatToy(fmt, x, rounding=mode, saturate=saturate, ftz=ftz)
    options = dict(rounding=mode, saturate=saturate, subnormals=not ftz)
    assert same(toy.stored, float(floatlab.round(x, fmt, **options)))
    assert toy.code == int(floatlab.encode(x, fmt, **options))


@pytest.mark.parametrize("name", sorted(ORACLE_DTYPES))
def test_flipping_each_bit_flips_the_code_and_shows_its_value(name):
    fmt = floatlab.get_format(name)
    start = 1.5 if fmt.signed else 2.0
    toy = FloatToy(name, start)
    for bit in range(fmt.bits):
        before = toy.code
        toy.flip(bit)
        assert toy.code == before ^ (1 << bit)
        assert same(toy.stored, oracle_value(toy.code, name))
        assert toy.state.from_code and same(toy.value, toy.stored) or math.isnan(toy.stored)
        boxes = re.findall(r"data-bit='(\d+)'[^>]*aria-checked='(true|false)'", toy.html)
        assert {int(i): v == "true" for i, v in boxes} == {
            i: bool(toy.code >> i & 1) for i in range(fmt.bits)}
        toy.flip(bit)
        assert toy.code == before


@pytest.mark.parametrize("name", floatlab.format_names())
def test_every_preset_shows_every_bit_flip(name):
    fmt = floatlab.get_format(name)
    toy = FloatToy(name, 1.0)
    for bit in range(fmt.bits):  # from 1.0, each bit in turn: specials, subnormals, extremes
        before = toy.code
        toy.flip(bit)
        assert toy.code == before ^ (1 << bit)
        assert same(toy.stored, float(floatlab.decode(toy.code, fmt)))
        assert toy.state.hex in toy.html and toy.state.kind in toy.html


def test_flip_keeps_nan_payloads_and_wide_codes():
    toy = FloatToy("fp16", "inf")
    toy.flip(0)  # inf's mantissa 0 -> 1: a NaN with payload 1, not the canonical 0x7e00
    assert toy.code == 0x7C01 and toy.state.kind == "nan" and "0x7c01" in toy.html
    wide = FloatToy("fp64", 1.0)
    wide.flip(0)  # codes beyond 2**53 stay exact (they never travel through JavaScript)
    assert wide.code == 0x3FF0000000000001 and wide.stored == 1 + 2**-52
    assert "0x3ff0000000000001" in wide.html


def test_captions_under_the_fields_and_the_facts():
    toy = FloatToy("fp16", 3.141)
    html = toy.html
    assert "10000 = 16 → 2^(16 − 15) = 2^1" in html
    assert "1001001000 = 584 → 1 + 584/1024 = 1.5703125" in html
    assert "previous 3.138671875 (0x4247)" in text_of(html)
    assert "next 3.142578125 (0x4249)" in text_of(html)
    assert "0.001953125 = 2^-9" in html
    assert "-0.192 ulp" in html
    toy.value = 2**-24
    assert "2^-14 (subnormal)" in toy.html and "0 + 1/1024" in toy.html


def test_number_line_ticks_are_consecutive_grid_values():
    for fmt, x in [("fp16", 3.141), ("e4m3fn", 448.0), ("fp16", 0.0), ("e2m1", 5.2),
                   ("e8m0", 1.0)]:
        state = state_from_value(x, fmt)
        ticks = state.number_line()
        assert state.value in ticks
        for low, high in zip(ticks, ticks[1:], strict=False):
            assert float(floatlab.nextafter(low, np.inf, fmt)) == high
    flushed = state_from_value(2**-20, "fp16", ftz=True)
    ticks = flushed.number_line()  # on the FTZ grid: nothing between 0 and the smallest normal
    assert flushed.value == 0.0 and ticks[1:4] == [-(2**-14), 0.0, 2**-14]


def test_error_in_ulps_is_exact():
    from fractions import Fraction

    for fmt, x in [("fp16", 3.141), ("bf16", 1 / 3), ("e4m3fn", 0.3), ("fp16", 1e-6)]:
        e = state_from_value(x, fmt).explanation
        ulp_x = Fraction(float(floatlab.ulp(x, fmt)))
        assert e.error_ulps == float((Fraction(e.value) - Fraction(x)) / ulp_x)


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("abc", r"'abc' is not a number"),
        ("", r"the value is empty"),
        ("1e400", r"beyond float64's range"),
        ("__import__('os').system('echo hacked')", r"calls are not allowed"),
        ("2**53 + 1", r"not exact in float64"),
        ("1/0", r"division by zero"),
        ("1j", r"complex numbers"),
        ("9**9**9**9", r"beyond float64's range"),
        # Below float64's smallest subnormal: read as 0 they would round to 0 even upward.
        ("1e-400", r"below float64's smallest subnormal.*type 0 for zero"),
        ("-1e-400", r"below float64's smallest subnormal"),
        ("2**-1075", r"below float64's smallest subnormal"),
        ("1e-200 * 1e-200", r"below float64's smallest subnormal"),
        ("5e-324 / 2", r"below float64's smallest subnormal"),
    ],
)
def test_typed_values_that_fail_show_a_message_and_change_nothing(text, message):
    toy = FloatToy("fp16", 3.141)
    before = snapshot(toy)
    assert toy.type_value(text) is False
    assert re.search(message, toy.message)
    assert snapshot(toy) == before
    assert toy.value_text == text  # the typed text stays in the box, to be corrected
    assert toy.type_value("2.5") and toy.message == "" and toy.stored == 2.5


@pytest.mark.parametrize(
    ("text", "message"),
    [("e4m3", r"ambiguous.*float8_e4m3fn \(max 448\)"), ("fp17", r"unknown format name"),
     ("e20m3", r"exp_bits=20 is out of range"), ("e5m0", r"man_bits >= 1")],
)
def test_formats_that_fail_show_a_message_and_change_nothing(text, message):
    toy = FloatToy("fp16", 3.141)
    before = snapshot(toy)
    assert toy.type_format(text) is False
    assert re.search(message, toy.message)
    assert snapshot(toy) == before


def test_a_refused_change_resets_the_browser_controls():
    toy = FloatToy("e2m1", "inf", saturate=True)  # fp4 has no inf: it saturates to 6
    announced = []
    toy.observe(lambda change: announced.append(change["new"]), names=["message"])
    for _ in range(2):  # unticking saturate cannot work (inf has nowhere to go): twice
        toy._on_browser_message(toy, {"event": "saturate", "value": False}, [])
    assert toy.saturate is True and toy.stored == 6.0
    # Each refusal is announced anew, so the browser re-reads the state into its checkbox.
    assert len([m for m in announced if m]) == 2 and "saturate=True" in announced[-1]


def test_values_a_format_cannot_hold():
    toy = FloatToy("e2m1", 1.0)
    before = snapshot(toy)
    assert not toy.type_value("nan")
    assert "has no NaN" in toy.message and snapshot(toy) == before
    toy = FloatToy("e8m0", 1.0)  # E8M0 has no zero: NaN, and the reason is shown
    assert toy.type_value("0") and math.isnan(toy.stored)
    assert "zero" in toy.html
    # A sign the format cannot keep: the reason is a "why" line, not only the word "invalid".
    assert toy.type_value("-2") and math.isnan(toy.stored)
    assert "why</th>" in toy.html and "has no sign bit" in text_of(toy.html)
    fnuz = FloatToy("e4m3fnuz", "-0")
    assert fnuz.code == 0 and "has no -0 (its code 0x80 is the NaN): stored as +0" in text_of(
        fnuz.html)
    assert "sign bit is 1" not in text_of(FloatToy("fp16", -1.0).html)  # nothing to explain


def test_python_setters_raise_clearly_and_change_nothing():
    toy = FloatToy("e4m3fn", 3.141)
    before = snapshot(toy)
    cases = [
        ("fmt", "e4m3", floatlab.FormatNameError, r"ambiguous"),
        ("code", 0x100, ValueError,
         r"code 0x100 \(256\) does not fit in the 8 bits of float8_e4m3fn"),
        ("code", 1.5, TypeError, r"code must be an int"),
        ("code", True, TypeError, r"code must be an int"),
        ("value", "x + 1", ValueError, r"'x' is not a number"),
        ("value", None, TypeError, r"value must be a real number"),
        ("code", None, TypeError, r"code must be an int"),
        ("value", True, TypeError, r"value must be a real number"),
        ("rounding", "stochastic", ValueError, r"deterministic rounding modes"),
        ("rounding", "sideways", ValueError, r"unknown rounding mode"),
        ("saturate", "yes", traitlets.TraitError, r"saturate"),
        ("value", 10**400, ValueError, r"about 2\*\*1328\) is beyond float64's range"),
        ("value", -(2**1024), ValueError, r"beyond float64's range.*float\('inf'\)"),
    ]
    for name, bad, error, message in cases:
        with pytest.raises(error, match=message):
            setattr(toy, name, bad)
        assert snapshot(toy) == before, name
    with pytest.raises(ValueError, match=r"bit 8 does not exist: float8_e4m3fn has bits 0..7"):
        toy.flip(8)
    with pytest.raises(TypeError, match=r"bit must be an int"):
        toy.flip("0")
    assert snapshot(toy) == before
    with pytest.raises(floatlab.FormatNameError, match=r"unknown format name 'fp17'"):
        FloatToy("fp17")


def test_browser_messages_drive_the_same_actions():
    toy = FloatToy("fp16", 1.0)
    send = lambda **content: toy._on_browser_message(toy, content, [])  # noqa: E731
    send(event="value", text="3.141")
    assert toy.code == 0x4248
    send(event="flip", bit=0)
    assert toy.stored == 3.142578125
    send(event="format", text="e4m3fn")
    send(event="value", text="500")
    assert math.isnan(toy.stored)
    send(event="saturate", value=True)
    assert toy.stored == 448.0
    send(event="rounding", value="toward_zero")
    send(event="ftz", value=True)
    assert (toy.rounding, toy.ftz) == ("toward_zero", True)
    before = snapshot(toy)
    send(event="flip", bit=99)
    assert "bit 99 does not exist" in toy.message and snapshot(toy) == before
    send(event="rounding", value="stochastic")
    assert "deterministic" in toy.message and snapshot(toy) == before
    send(event="nonsense")  # unknown events are ignored
    assert snapshot(toy) == before


def test_custom_spec_formats():
    toy = FloatToy("e5m2fnuz", 3.141)
    assert toy.fmt == "float8_e5m2fnuz"
    assert toy.type_format("e6m9") and toy.fmt == "e6m9"
    assert toy.stored == float(floatlab.round(3.141, "e6m9"))
    assert "e6m9: 16 bits = 1 sign + 6 exponent + 9 mantissa, bias 31" in text_of(toy.html)
    assert toy.type_format("e3m3fn_nonan") and not toy.state.fmt.has_nan
    toy.ftz = True  # e1m1 has no normal numbers: FTZ would leave only zeros, said in toy words
    assert not toy.type_format("e1m1") and toy.fmt == "e3m3fn_nonan"
    assert "untick FTZ (ftz=False)" in toy.message and "subnormals=False" not in toy.message


# ----------------------------------------------------------------------------- display

def test_static_output_for_readers_without_a_kernel():
    toy = FloatToy("fp16", 3.141)
    data, _ = toy._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    static = data["text/html"]
    assert "0x4248" in static and "3.140625" in static and "static snapshot" in static
    assert "tabindex" not in static  # no dead controls in the snapshot
    assert repr(toy) == "FloatToy(float16, 3.141 -> 0x4248 = 3.140625)"


def test_typed_text_is_escaped_in_the_page():
    toy = FloatToy("fp16", 1.0)
    toy.type_value("<img src=x onerror=alert(1)>")
    assert "<img" not in toy.html
    assert "<img" in toy.message  # shown by the browser as text (textContent), not as HTML


def test_colours_are_the_colour_blind_safe_palette():
    from floatlab.explain import FIELD_COLOURS

    assert FIELD_COLOURS == {"sign": "#E69F00", "exponent": "#56B4E9", "mantissa": "#009E73"}
    html = FloatToy("fp16", -1.0).html
    for colour in FIELD_COLOURS.values():
        assert colour in html


def test_static_files_ship_inside_the_package():
    static = Path(floatlab.widgets.toy.__file__).with_name("static")
    for name in ("toy.js", "compare.js", "widgets.css"):
        assert (static / name).is_file()
    js = (static / "toy.js").read_text(encoding="utf-8")
    assert "model.send" in js and "ArrowLeft" in js and '" "' in js


# ----------------------------------------------------------------------------- FormatCompare

def test_format_compare_rows_are_the_toys_states():
    cmp = FormatCompare(3.141, formats=["fp32", "bf16", "fp16", "e4m3fn", "e6m9"])
    assert [s.fmt.name for s in cmp.states] == ["float32", "bfloat16", "float16",
                                                "float8_e4m3fn", "e6m9"]
    for s in cmp.states:
        assert s.code == state_from_value(3.141, s.fmt).code
        assert s.hex in cmp.html
    cmp.value = 1e6
    assert [s.kind for s in cmp.states] == ["normal", "normal", "inf", "nan", "normal"]
    cmp.formats = ["e5m2"]
    assert cmp.states[0].code == int(floatlab.encode(1e6, "e5m2"))


def test_format_compare_bad_input():
    with pytest.raises(ValueError, match=r"beyond float64's range"):  # not int() overflow
        FormatCompare(10**400)
    cmp = FormatCompare(3.141, formats=["fp16", "e2m1"])
    before = (cmp.html, cmp.value, cmp.formats)
    assert not cmp.type_value("nan")  # fp4 has no NaN: refused for every row
    assert "has no NaN" in cmp.message and (cmp.html, cmp.value, cmp.formats) == before
    with pytest.raises(floatlab.FormatNameError, match="ambiguous"):
        cmp.formats = ["fp16", "fp8"]
    assert (cmp.html, cmp.value, cmp.formats) == before
    with pytest.raises(TypeError, match="non-empty list of format names"):
        FormatCompare(1.0, formats="fp16")
    with pytest.raises(ValueError, match="formats is empty"):
        cmp.formats = []
    with pytest.raises(TypeError, match="value must be a real number"):
        cmp.value = None
    assert (cmp.html, cmp.value, cmp.formats) == before


def test_format_compare_takes_formats_with_custom_names():
    # The rows were recomputed from the names, and a custom name does not parse back:
    # FormatNameError "unknown format name 'mine'" for a valid Format.
    mine = floatlab.Format(3, 4, name="mine")
    cmp = FormatCompare(1 / 3, formats=[mine, "fp16"])
    assert cmp.formats == ["mine", "float16"] and cmp.states[0].fmt is mine
    assert cmp.states[0].value == float(floatlab.round(1 / 3, mine))
    cmp.value = 2.5
    cmp.rounding = "up"
    cmp.formats = ["fp16", "mine"]
    assert [s.value for s in cmp.states] == [2.5, 2.5] and cmp.states[1].fmt is mine
    assert ">mine<" in cmp.html


def test_format_compare_links_to_a_toy():
    toy, cmp = FloatToy("fp16", 1.0), FormatCompare(1.0, formats=["fp16", "bf16"])
    link = traitlets.link((toy, "value"), (cmp, "value"))
    toy.flip(0)
    assert cmp.value == 1 + 2**-10 and cmp.states[0].code == toy.code
    link.unlink()


def test_a_change_a_linked_widget_refuses_is_not_called_refused():
    # The toy takes NaN; the linked table (fp4 has no NaN) refuses it. The toy used to answer
    # False with fp4's message while showing the NaN it had stored.
    toy, cmp = FloatToy("fp16", 1.0), FormatCompare(1.0, formats=["fp16", "e2m1"])
    link = traitlets.link((toy, "value"), (cmp, "value"))
    assert toy.type_value("nan") is True and math.isnan(toy.stored)
    assert toy.message.startswith("stored here, but a linked widget refused it: float4_e2m1fn")
    assert cmp.value == 1.0  # the table keeps its value
    assert toy.type_value("2") and toy.message == "" and cmp.value == 2.0
    assert not toy.type_value("abc") and "'abc' is not a number" in toy.message
    link.unlink()
    cmp = FormatCompare(1.0, formats=["fp16"])
    back = traitlets.link((cmp, "value"), (FloatToy("e2m1", 1.0), "value"))
    assert cmp.type_value("nan") is True and cmp.message.startswith("stored here, but a linked")
    back.unlink()


# ----------------------------------------------------------------------------- the parser

@pytest.mark.parametrize(
    ("text", "value"),
    [("3.141", 3.141), ("2**-24", 2**-24), ("inf", math.inf), ("-Infinity", -math.inf),
     ("-0", -0.0), ("1/3", 1 / 3), ("0x3c00", 15360.0), ("1_000.5", 1000.5),
     ("(1 + 2**-10) * 2**15", 32800.0), ("−2.5", -2.5), ("2**1023 * 1.5", 2.0**1023 * 1.5),
     ("pi", math.pi), ("1e-320", 1e-320), ("2**-1074", 5e-324), ("0e-999", 0.0),
     ("-0.0e5", -0.0), ("2**-1074 - 2**-1074", 0.0), ("0.5**inf", 0.0)],
)
def test_parse_value_reads_what_python_would(text, value):
    assert same(parse_value(text), value)


@pytest.mark.parametrize("filter_", ["default", "error"])
def test_parse_value_leaks_no_syntax_warning(filter_):
    # ast.parse warns "invalid decimal literal" on 1if: printed under the notebook (or, under
    # an "error" filter, a different message), whatever the person's filters.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(filter_)
        with pytest.raises(ValueError, match="IfExp expressions are not allowed"):
            parse_value("1if 1 else 2")
    assert not caught


def test_parse_value_never_runs_code(tmp_path):
    marker = tmp_path / "ran"
    for text in [f"__import__('pathlib').Path({str(marker)!r}).touch()",
                 "(lambda: 1)()", "[x for x in ()]", "open('/etc/passwd')", "a.b", "x[0]"]:
        with pytest.raises(ValueError, match="cannot read"):
            parse_value(text)
    assert not marker.exists()
    with pytest.raises(TypeError, match="expected the text of a number"):
        parse_value(3.0)


def test_missing_anywidget_names_the_extra(monkeypatch):
    for name in list(sys.modules):
        if name == "floatlab.widgets" or name.startswith("floatlab.widgets."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "anywidget", None)  # what an absent package looks like
    monkeypatch.delattr(floatlab, "widgets", raising=False)
    with pytest.raises(ImportError, match=re.escape('pip install "floatlab[widgets]"')):
        importlib.import_module("floatlab.widgets")
    with pytest.raises(ImportError, match=re.escape("floatlab[widgets]")):
        floatlab.widgets  # noqa: B018 - the lazy attribute says the same


def test_notebook_01_keeps_a_static_picture_of_the_toy():
    """Readers without a kernel (GitHub, nbviewer) see the toy's HTML snapshot beside the
    widget view: the committed notebook carries both."""
    import json

    notebook = Path(__file__).resolve().parents[1] / "notebooks" / "01_bits_of_a_float.ipynb"
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    bundles = [out["data"] for cell in cells for out in cell.get("outputs", [])
               if "application/vnd.jupyter.widget-view+json" in out.get("data", {})]
    assert len(bundles) >= 2, "notebook 01 should show the toy (re-execute it with outputs)"
    first = "".join(bundles[0]["text/html"])
    assert "floatlab-toy" in first and "0x4248" in first and "3.140625" in first


def test_the_readme_screenshot_is_committed():
    """docs/floattoy.png comes from the browser test (FLOATLAB_DOCS_SCREENSHOT=1)."""
    png = Path(__file__).resolve().parents[1] / "docs" / "floattoy.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
