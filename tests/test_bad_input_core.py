"""Bad input to the core (formats, rounding, codes, strings, the grid, finfo, plots, the CLI):
each mistake gets an error naming the argument and the fix, never a crash inside NumPy or
Python; valid edge input (empty, 0-d, views, float16 / float32) keeps working.

Found by the h-audit-core fuzz pass; each test names what used to happen.
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import floatlab
from floatlab import Format, FormatNameError, decode, fields, get_format

# --------------------------------------------------------------------------- get_format


@pytest.mark.parametrize("name", ["01", "007"])
def test_digit_strings_are_unknown_names_not_a_syntax_error(name):
    """numpy parses some dtype strings as Python literals: '01' used to escape as SyntaxError
    (a traceback from the CLI: floatlab finfo 01)."""
    with pytest.raises(FormatNameError, match=f"unknown format name '{name}'"):
        get_format(name)


@pytest.mark.parametrize(
    "bad, hint",
    [
        (b"fp16", r"bytes b'fp16' \(a bytes name: decode it to str\)"),
        ([], "list \\[\\]; for several formats call once per format"),
        (["fp16", "bf16"], "list .*for several formats"),
        (("fp16",), "tuple .*for several formats"),
        ({"fp16": 1}, "dict"),
    ],
)
def test_containers_and_bytes_are_not_formats(bad, hint):
    """b'01' used to raise SyntaxError, [] "dtype 'void' is not a floating-point format"."""
    with pytest.raises(TypeError, match=f"expected a format name such as 'fp16'.*got {hint}"):
        get_format(bad)


# --------------------------------------------------------------------------- Format fields


@pytest.mark.parametrize("name", [True, 0, 1.5, ["a"], np.array(["a", "b"]), b"x"])
def test_format_name_must_be_a_string(name):
    """name=True used to give a Format named True; an array name died on its truth value."""
    with pytest.raises(TypeError, match=r"Format.name must be a str \(or '' for the spec name\)"):
        Format(4, 3, special="fn", name=name)


def test_format_name_none_means_the_spec_name():
    assert Format(4, 3, special="fn", name=None).name == "float8_e4m3fn"


@pytest.mark.parametrize("special", [["ieee"], None, 1])
def test_format_special_must_be_a_string(special):
    """special=['ieee'] used to fail inside a dict lookup (unhashable type: 'list')."""
    with pytest.raises(TypeError, match="Format.special must be one of .*'ieee'"):
        Format(4, 3, special=special)


# --------------------------------------------------------------------------- round(dtype=)


@pytest.mark.parametrize("dtype", [b"01", 1.5, "abc", [1], np.zeros(2)])
def test_round_dtype_errors_name_the_argument(dtype):
    """numpy's own messages ("Cannot interpret '1.5' as a data type", SyntaxError for b'01')
    named no argument."""
    with pytest.raises(TypeError, match=r"dtype must be float64 or float32 \(np.float64"):
        floatlab.round(1.0, "fp16", dtype=dtype)


def test_round_dtype_accepts_the_usual_spellings():
    for dtype in (np.float32, "float32", np.dtype("f4"), "f4"):
        assert floatlab.round([1 / 3], "bf16", dtype=dtype).dtype == np.float32


# --------------------------------------------------------------------------- decode / fields


@pytest.mark.parametrize("codes, shape", [([], (0,)), ([[]], (1, 0)), ([[], []], (2, 0))])
def test_decode_of_no_codes_keeps_the_shape(codes, shape):
    """decode([]) used to say "decode expects integer codes, got None (NoneType)"."""
    out = decode(codes, "fp16")
    assert out.shape == shape and out.dtype == np.float64


def test_fields_reads_python_ints_as_codes_and_checks_them():
    """[2**64] (an object array) used to be rounded as a value: inf, silently."""
    with pytest.raises(ValueError, match=r"code 0x10000000000000000 .* does not fit"):
        fields([2**64], "fp16")
    f = fields(np.array([0x3C00, 1], dtype=object), "fp16")
    assert f.kind.tolist() == ["normal", "subnormal"]
    assert f.code.tolist() == [0x3C00, 1]


@pytest.mark.parametrize("bad, error, message", [
    ([True], TypeError, "codes_or_values is a boolean array"),
    (["a"], TypeError, "codes_or_values must hold real numbers"),
    ([1j], TypeError, "codes_or_values is complex"),
])
def test_fields_names_its_own_argument(bad, error, message):
    """The message used to say 'x', an argument fields does not have."""
    with pytest.raises(error, match=message):
        fields(bad, "fp16")


# --------------------------------------------------------------------------- nextafter


@pytest.mark.parametrize("direction", [[], [1.0, 2.0, 3.0]])
def test_nextafter_shapes_that_do_not_broadcast(direction):
    """numpy's "shape mismatch: objects cannot be broadcast to a single shape" before."""
    with pytest.raises(ValueError, match=r"x \(shape \(2,\)\) and direction .* do not broadcast"):
        floatlab.nextafter([1.0, 2.0], direction, "fp16")


# --------------------------------------------------------------------------- compare_formats


def test_compare_formats_takes_one_dtype():
    """np.float16 (a type), np.dtype('f2') and a 0-d array (its dtype, as finfo reads it) used
    to fail with "object is not iterable" / "iteration over a 0-d array"."""
    for one in (np.float16, np.dtype("f2"), np.array(1.0, np.float16), "fp16", get_format("fp16")):
        assert floatlab.compare_formats(one).rows[0] == ("bits (sign/exp/man)", ("16 (1/5/10)",))


@pytest.mark.parametrize("bad", [True, 3, b"fp16"])
def test_compare_formats_refuses_non_formats_clearly(bad):
    """'bool' object is not iterable / 'int' object is not iterable before."""
    with pytest.raises(TypeError, match="expected a format name such as 'fp16'"):
        floatlab.compare_formats(bad)


# --------------------------------------------------------------------------- plots


@pytest.fixture
def plots():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from floatlab import plots

    yield plots
    plt.close("all")


@pytest.mark.parametrize("kwargs, error, message", [
    ({"lo": 0}, ValueError, r"lo must be a positive finite number such as 1e-8 \(or None"),
    ({"lo": -1}, ValueError, "lo must be a positive finite number"),  # was: math domain error
    ({"hi": float("inf")}, ValueError, "hi must be a positive finite number"),  # matplotlib's
    ({"lo": True}, TypeError, r"lo must be .*got True \(bool\)"),  # was: read as 1
    ({"lo": "1e-8"}, TypeError, r"got '1e-8' \(str\)"),  # was: must be real number, not str
    ({"hi": np.ones(3)}, TypeError, "hi must be a positive finite number"),  # truth value
    ({"samples": "False"}, TypeError, "samples must be True or False"),  # was: truthy
    ({"kind": np.array(["a", "b"])}, ValueError, "kind must be 'relative' or 'ulp'"),
])
def test_rounding_error_options(plots, kwargs, error, message):
    with pytest.raises(error, match=message):
        plots.rounding_error("fp16", **kwargs)


def test_rounding_error_still_takes_numpy_numbers(plots):
    ax = plots.rounding_error("fp16", lo=np.float32(2.0**-28), hi=np.int64(2**18), samples=False)
    assert ax.get_xlim() == (-28.0, 18.0)


@pytest.mark.parametrize("scale", [10**30, 10**400])
def test_zone_scale_beyond_float64_ints(plots, scale):
    """10**30 used to die in numpy's isfinite ("ufunc 'isfinite' not supported")."""
    if scale > 1e308:
        with pytest.raises(ValueError, match="scale must be a positive finite number"):
            plots.zone_fractions([1.0], "fp16", scale=scale)
    else:
        assert plots.zone_fractions([1.0], "fp16", scale=scale)["overflow"] == 1.0


@pytest.mark.parametrize("function", ["bit_layout", "dynamic_range", "rounding_error"])
def test_plot_formats_refuse_a_0d_array(plots, function):
    """"iteration over a 0-d array" before."""
    with pytest.raises(TypeError, match="expected a format name such as 'fp16'.*ndarray"):
        getattr(plots, function)(np.array(1.0))


# --------------------------------------------------------------------------- training plots

HISTORY = {"loss": [1.0, 0.5, 0.25], "loss_scale": [4.0, 2.0, 2.0]}


@pytest.mark.parametrize("kwargs, error, message", [
    ({"metric": ["loss"]}, TypeError, r"metric must be a field name .*got \['loss'\] \(list\)"),
    ({"logy": "no"}, TypeError, "logy must be True or False"),  # was: truthy
])
def test_training_curves_options(plots, kwargs, error, message):
    """metric=['loss'] used to fail as "unhashable type: 'list'"."""
    with pytest.raises(error, match=message):
        plots.training_curves(HISTORY, **kwargs)


@pytest.mark.parametrize("loss", [["a", "b", "c"], [[1.0], [1.0, 2.0], [3.0]]])
def test_training_fields_that_are_not_numbers(plots, loss):
    """numpy's "could not convert string to float" / "inhomogeneous shape" before."""
    with pytest.raises(TypeError, match="history 'run': the 'loss' field must be one number"):
        plots.training_curves({"loss": loss})


def test_training_fields_keep_reading_none_as_nan(plots):
    ax = plots.training_curves({"loss": [1.0, None, 0.5]})
    assert np.isnan(ax.lines[0].get_ydata()[1])


@pytest.mark.parametrize("skipped, error, message", [
    ([5], ValueError, "'skipped' names step 5, but the run has steps 0..2"),  # IndexError
    ([-1], ValueError, "names step -1"),  # silently marked the last step
    ([0.5], TypeError, "'skipped' must be one True / False per step or the skipped step"),
    (["a"], TypeError, "'skipped' must be one True / False"),
])
def test_loss_scale_skipped_steps(plots, skipped, error, message):
    with pytest.raises(error, match=message):
        plots.loss_scale({**HISTORY, "skipped": skipped})


def test_loss_scale_skipped_flags_and_indices_still_work(plots):
    for skipped in ([1], [False, True, False], [0.0, 1.0, 0.0]):
        ax = plots.loss_scale({**HISTORY, "skipped": skipped})
        assert ax.lines[1].get_xdata().tolist() == [1]


# --------------------------------------------------------------------------- quant plots

X64 = np.random.default_rng(0).standard_normal(64)


@pytest.mark.parametrize("function, args", [
    ("qsnr_by_scheme", (X64, ["mxfp8"])),
    ("scale_exponents", (X64, "mxfp8")),
    ("block_before_after", (X64, "mxfp8")),
    ("element_grids", (["e2m1"],)),
])
def test_quant_plots_check_ax(plots, function, args):
    """ax='x' used to end in "'str' object has no attribute 'barh'" (or 'vlines', 'bar')."""
    with pytest.raises(TypeError, match="ax must be a matplotlib Axes.*'x'"):
        getattr(plots, function)(*args, ax="x")


@pytest.mark.parametrize("schemes, error, message", [
    ([], ValueError, "schemes is empty"),  # was: an empty picture
    ([None], TypeError, "scheme must be a Scheme or a preset name"),  # was: AttributeError
    ([["mxfp8"]], TypeError, "scheme must be a Scheme or a preset name"),
])
def test_qsnr_by_scheme_schemes(plots, schemes, error, message):
    with pytest.raises(error, match=message):
        plots.qsnr_by_scheme(X64, schemes)


def test_qsnr_by_scheme_checks_rng_and_takes_one_name(plots):
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator"):
        plots.qsnr_by_scheme(X64, ["mxfp8"], rng="a")
    ax = plots.qsnr_by_scheme(X64, "mxfp8")  # one name, not its letters
    assert [t.get_text() for t in ax.get_yticklabels()] == ["mxfp8"]


@pytest.mark.parametrize("x, message", [
    (b"01", "x must hold real numbers"),  # was: drawn as the number 1
    ("0", "x must hold real numbers"),  # was: drawn as 0
    (True, "x is a boolean array"),
    (np.ma.array(X64, mask=X64 > 0), "x is a masked array"),  # was: unmasked silently
])
def test_block_before_after_x(plots, x, message):
    with pytest.raises(TypeError, match=message):
        plots.block_before_after(x, "mxfp8")


@pytest.mark.parametrize("block, error, message", [
    (np.int64(2**62), ValueError, "block 4611686018427387904 is out of range"),  # IndexError
    (1.0, TypeError, r"block must be the int index of a block .*got 1.0 \(float\)"),
    (True, TypeError, "block must be the int index"),
    ("0", TypeError, "block must be the int index"),  # '<=' not supported ...
])
def test_block_before_after_block(plots, block, error, message):
    with pytest.raises(error, match=message):
        plots.block_before_after(X64, "mxfp8", block=block)


def test_element_grids_elements(plots):
    with pytest.raises(ValueError, match="elements is empty"):
        plots.element_grids([])
    with pytest.raises(TypeError, match="expected a format name such as 'fp16'.*got 3"):
        plots.element_grids(3)  # 'int' object is not iterable before
    ax = plots.element_grids("nf4")  # one name, not its letters
    assert [t.get_text() for t in ax.get_yticklabels()] == ["nf4"]


# --------------------------------------------------------------------------- the CLI


def _cli(capsys, *argv):
    from floatlab.cli import main

    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("argv", [
    ["finfo", "01"], ["values", "01"], ["formats", "01"], ["bits", "1", "-f", "01"],
])
def test_cli_digit_format_names_are_one_line_errors(capsys, argv):
    """These printed a SyntaxError traceback from numpy's dtype parser."""
    code, _, err = _cli(capsys, *argv)
    assert code == 1
    assert err.count("\n") == 1 and "error: unknown format name '01'" in err


def test_cli_out_of_memory_is_one_line(capsys, monkeypatch):
    """compare --rows 10**15 printed a MemoryError traceback (numpy could not allocate 114 PiB);
    any subcommand that runs out of memory now says so in one line."""
    import floatlab.cli

    def too_big(args):
        raise MemoryError("Unable to allocate 114. PiB for an array")

    monkeypatch.setattr(floatlab.cli, "cmd_values", too_big)
    code, _, err = _cli(capsys, "values", "e2m1")
    assert code == 1 and err.count("\n") == 1
    assert "floatlab values: error: not enough memory (Unable to allocate 114. PiB" in err


# --------------------------------------------------------------------------- hex strings


@pytest.mark.parametrize("text, bad, position", [
    ("+3c00", "+", 0), ("0x0x3c00", "x", 1), ("-0x1", "-", 0), ("\u0663", "\u0663", 0),
])
def test_from_hex_takes_hex_digits_only(text, bad, position):
    """int(..., 16) read '+3c00' and '0x0x3c00' as 0x3c00 and the Arabic-Indic digit three as
    3; '-0x1' became the code -1."""
    expected = re.escape(f"has '{bad}' at digit {position}, which is not a hex")
    with pytest.raises(ValueError, match=expected):
        floatlab.from_hex(text, "fp16")


def test_from_hex_still_takes_its_spellings():
    assert [floatlab.from_hex(t, "fp16") for t in ("3C00", "0X3c00", " 0x3c_00 ", "3c|00")] == [
        1.0] * 4


# --------------------------------------------------------------------------- flags, names


@pytest.mark.parametrize("call, message", [
    (lambda: Format(4, 3, signed="False"), "Format.signed must be True or False, got 'False'"
                                           ".*strings are refused"),
    (lambda: floatlab.p3109_format(3, signed="no"), "signed must be True or False.*strings"),
    (lambda: floatlab.p3109_format(3, extended=1), r"extended must be True or False, got 1"),
])
def test_format_flags_go_through_check_flag(call, message):
    with pytest.raises(TypeError, match=message):
        call()


def test_p3109_flags_take_numpy_bools():
    assert floatlab.p3109_format(3, signed=np.False_).name == "p3109_k8p3ue"


@pytest.mark.parametrize("function", ["float16_to_bin", "bfloat16_to_bin", "float32_to_bin"])
def test_tutorial_bit_helpers_name_their_argument(function):
    """Their errors used to call the argument x; it is num."""
    with pytest.raises(TypeError, match="num is a boolean array"):
        getattr(floatlab, function)(True)
    with pytest.raises(TypeError, match="num must hold real numbers"):
        getattr(floatlab, function)("1.5")


@pytest.mark.parametrize("text, message", [
    ("1e-99999999999999999999", "is below float64's smallest positive value"),
    ("-1e99999999999999999999", "is beyond float64's range"),
    ("\u0663e-99999999999999999999", "is below float64's smallest positive value"),
])
def test_cli_numbers_with_huge_exponents_are_refused(text, message):
    """Decimal cannot hold these exponents, so the check that refuses 1e-400 let them through:
    1e-99999999999999999999 was read as 0 and -1e99999999999999999999 as -inf, silently."""
    from floatlab.cli_input import parse_number

    with pytest.raises(ValueError, match=message):
        parse_number(text)


def test_cli_zero_with_a_huge_exponent_is_zero():
    from floatlab.cli_input import parse_number

    assert parse_number("0.000e-99999999999999999999") == 0.0


@pytest.mark.parametrize("kwargs, message", [
    ({"label": None}, r"label must be a string such as 'naive' .*got None"),  # "None float16"
    ({"logx": "False"}, "logx must be True or False"),  # was: truthy, a log axis
])
def test_error_profile_plot_options(plots, kwargs, message):
    profile = floatlab.error_profile(lambda x: x + 1, [1.0, 2.0], "fp16")
    with pytest.raises(TypeError, match=message):
        plots.error_profile(profile, **kwargs)


def test_fields_of_codes_checks_and_reports_rounding_options():
    """Integer input is read as codes, so the rounding options did nothing, silently, even
    saturate='no' or an unknown option."""
    with pytest.raises(TypeError, match="saturate must be True or False"):
        fields([1], "fp16", saturate="no")
    with pytest.raises(TypeError, match="unknown option.*foo"):
        fields([1], "fp16", foo=1)
    with pytest.warns(UserWarning, match="rounding ignored: fields read integer input as codes"):
        f = fields([1], "fp16", rounding="up")
    assert f.kind.tolist() == ["subnormal"]


def test_exact_decimal_names_unknown_options():
    """Python's "round() got an unexpected keyword argument 'foo'" blamed a function the
    caller never called."""
    with pytest.raises(TypeError, match="unknown option.*foo; the rounding options are"):
        floatlab.exact_decimal(1.0, "fp16", foo=1)
    assert floatlab.exact_decimal(1 / 3, "fp16", rounding="up") == "0.33349609375"


# --------------------------------------------------------------------------- element formats


@pytest.fixture(params=["nf4", "fixed"])
def element(request):
    return floatlab.get_codebook("nf4") if request.param == "nf4" else floatlab.FixedPoint(8, 4)


@pytest.mark.parametrize("call, error, message", [
    (lambda e: floatlab.round(0.3, e, saturate="no"), TypeError, "saturate must be True or"),
    (lambda e: floatlab.round(0.3, e, subnormals="no"), TypeError, "subnormals must be True"),
    (lambda e: floatlab.round(0.3, e, dtype="bad"), TypeError, "dtype must be float64 or"),
    (lambda e: floatlab.round(0.3, e, "sr", random_bits=3), ValueError,
     "random_bits=3: .* rounds without it"),  # was dropped: exact SR instead of 3-bit SR
    (lambda e: floatlab.encode(0.3, e, saturate="no"), TypeError, "saturate must be True or"),
    (lambda e: floatlab.encode(0.3, e, foo=1), TypeError, "unknown option.*foo"),
    (lambda e: floatlab.explain(0.3, e, saturate="no"), TypeError, "saturate must be True or"),
])
def test_element_formats_get_the_same_checks(element, call, error, message):
    """Codebooks and FixedPoint ignored the flags, so 'no' passed; encode's unknown option
    ended in "Codebook.indices() got an unexpected keyword argument"."""
    with pytest.raises(error, match=message):
        call(element)


def test_element_formats_give_arrays(element):
    """A codebook gave numpy scalars (even for a 0-d array); floatlab's functions give 0-d
    arrays for one value, with the same value."""
    for out in (floatlab.round(np.array(0.3), element), floatlab.encode(0.3, element),
                floatlab.decode(3, element)):
        assert isinstance(out, np.ndarray) and out.shape == ()
    assert float(floatlab.round(0.3, element)) == float(element.round(0.3))


# --------------------------------------------------------------------------- spec names


@pytest.mark.parametrize("name, message", [
    ("e" + "9" * 30 + "m3", "has a 30-digit exp_bits: use 0..11"),  # OverflowError before
    ("e4m3b" + "9" * 5000, "has a 5000-digit bias"),  # Python's 4300-digit int() limit
    ("e4m" + "9" * 5000, "has a 5000-digit man_bits: use 0..52"),
])
def test_spec_names_with_huge_numbers(name, message):
    with pytest.raises(ValueError, match=message):
        get_format(name)


@pytest.mark.parametrize("name", ["e\uff14m3", "e\u0664m3"])
def test_spec_digits_are_ascii(name):
    """A fullwidth or Arabic-Indic 4 read as 4 made 'e4m3', which is refused as ambiguous,
    an IEEE-like E4M3 without a word."""
    with pytest.raises(FormatNameError, match="unknown format name"):
        get_format(name)


# --------------------------------------------------------------------------- valid edges

_BASE = np.arange(-6, 6, dtype=np.float64).reshape(3, 4) / 7


def _read_only(a):
    a = a.copy()
    a.setflags(write=False)
    return a


EDGE_INPUTS = {
    "empty 2-D": np.empty((0, 3)),
    "empty float32": np.empty((2, 0), np.float32),
    "0-d": np.array(1.5),
    "float16": _BASE.astype(np.float16),
    "float32": _BASE.astype(np.float32),
    "transposed": _BASE.T,
    "negative strides": _BASE[::-1, ::-2],
    "read-only": _read_only(_BASE),
}
EDGE_CALLS = {
    "round": lambda x: floatlab.round(x, "fp16"),
    "round stochastic": lambda x: floatlab.round(x, "e4m3fn", "stochastic", rng=0),
    "encode": lambda x: floatlab.encode(x, "e4m3fn"),
    "to_bin": lambda x: floatlab.to_bin(x, "fp16"),
    "to_hex": lambda x: floatlab.to_hex(x, "bf16"),
    "exact_decimal": lambda x: floatlab.exact_decimal(x, "fp16"),
    "fields": lambda x: fields(x, "fp16").kind,
    "ulp": lambda x: floatlab.ulp(x, "fp16"),
    "nextafter": lambda x: floatlab.nextafter(floatlab.round(x, "fp16"), "up", "fp16"),
    "decode": lambda x: decode(floatlab.encode(x, "fp16"), "fp16"),
}


@pytest.mark.parametrize("input_name", EDGE_INPUTS)
@pytest.mark.parametrize("call_name", EDGE_CALLS)
def test_valid_edge_input_keeps_its_shape_and_is_not_mutated(call_name, input_name):
    x = EDGE_INPUTS[input_name]
    before = x.copy()
    out = EDGE_CALLS[call_name](x)
    if x.ndim == 0 and call_name in ("to_bin", "to_hex", "exact_decimal"):
        assert isinstance(out, str)  # the string helpers give Python objects for scalars
    else:
        assert isinstance(out, np.ndarray) and out.shape == x.shape
    assert np.array_equal(before, x) and before.dtype == x.dtype


# --------------------------------------------------------------------------- floatlab.testing


@pytest.mark.parametrize("call, message", [
    (lambda t: t.check_encoder(None, "fp16"), r"fn must be the encoder to check .*got None"),
    (lambda t: t.check_decoder(3, "fp16"), r"fn must be the decoder to check .*got 3"),
    (lambda t: t.check_encoder(np.negative, "fp16", dtype="bad"),
     "dtype must be float32 or float64 .*got 'bad'"),  # numpy's "data type 'bad' not understood"
    (lambda t: t.check_decoder(np.negative, "fp16", limit=1.5), "limit must be a whole number"),
    (lambda t: t.check_encoder(np.negative, "fp16", any_nan_code="False"),
     "any_nan_code must be True or False"),  # was truthy
])
def test_checkers_check_their_options_first(call, message):
    """None failed only when called ("'NoneType' object is not callable"), limit=1.5 only when
    the report was printed, any_nan_code='False' counted as True."""
    from floatlab import testing

    with pytest.raises(TypeError, match=message):
        call(testing)


def test_checkers_limit_below_zero_is_a_value_error():
    # a wrong value, not a wrong type (it was a TypeError, as for limit=1.5)
    from floatlab import testing

    with pytest.raises(ValueError, match=r"limit must be a whole number >= 0 .*got -1"):
        testing.check_encoder(np.negative, "fp16", limit=-1)


@pytest.mark.parametrize("name", ["g", "longdouble"])
def test_long_double_names_are_format_name_errors(name):
    """A string naming numpy's long double got a TypeError, as if a string were the wrong
    type."""
    if np.dtype(np.longdouble).itemsize <= 8:
        pytest.skip("long double is float64 here")
    with pytest.raises(FormatNameError, match="is the numpy dtype float.*, which floatlab does"):
        get_format(name)


def test_cli_compare_plot_path_that_is_a_folder(capsys, tmp_path):
    """--plot on an existing folder named like a picture failed in savefig, after training."""
    folder = tmp_path / "curves.png"
    folder.mkdir()
    code, out, err = _cli(capsys, "compare", "32-true", "--steps", "1", "--rows", "8", "-q",
                          "--plot", str(folder))
    assert code == 1 and out == "" and err.count("\n") == 1
    assert f"--plot {folder} is a folder: give a file name" in err


@pytest.mark.parametrize("name", ["e1m1", "e1m2", "p3109_k8p8se", "e0m3fn"])
def test_explain_ftz_in_a_format_without_normals(name):
    """Every value of these formats is subnormal, so FTZ flushes all of them; explain died
    building the FTZ grid, with Format's own message ("this encoding leaves no finite positive
    value", "pass has_zero=True and subnormals=True") about an argument nobody passed."""
    assert float(floatlab.round(0.5, name, subnormals=False)) == 0.0
    with pytest.raises(ValueError, match="subnormals=False flushes every nonzero value of .* to "
                                         "zero .*use subnormals=True"):
        floatlab.explain(0.5, name, subnormals=False)


@pytest.mark.parametrize("data", [[1.0, True], [[1.0, 2.0], [False, 3.0]], [1, True],
                                  (0.5, np.bool_(True)), [[0.25, 0.5], (1.0, False)],
                                  [np.array([True, False]), np.array([2.0, 3.0])],
                                  [np.array(True), 2.0]])
@pytest.mark.parametrize("call", [lambda d: floatlab.round(d, "fp16"),
                                  lambda d: floatlab.encode(d, "bf16"),
                                  lambda d: floatlab.array(d, "fp16")])
def test_lists_mixing_bools_with_numbers_are_refused(data, call):
    """numpy reads [1.0, True] as [1.0, 1.0]: a flag silently became a number (the bool-array
    refusal never saw it, as the array is float64)."""
    with pytest.raises(TypeError, match="mixes booleans with numbers .*pass numbers only"):
        call(data)


@pytest.mark.parametrize("data", [[1, True], [[0x3C00], [False]], (5, np.bool_(True))])
@pytest.mark.parametrize("call", [lambda d: decode(d, "fp16"), lambda d: fields(d, "fp16")])
def test_code_lists_mixing_bools_with_ints_are_refused(data, call):
    """decode([1, True]) decoded the code 1 twice, and fields([1.5, True]) split 1.0: numpy
    read the flag as a number (the bool-array refusal never saw it, as the array is int64 /
    float64)."""
    with pytest.raises(TypeError, match="mixes booleans with numbers"):
        call(data)
    with pytest.raises(TypeError, match="codes_or_values mixes booleans with numbers"):
        fields([1.5, True], "fp16")
    assert decode([0, 1], "fp16").tolist() == [0.0, 2.0**-24]   # 0 / 1 without bools: codes
    assert fields([[1], [0]], "fp16").code.tolist() == [[1], [0]]


@pytest.mark.parametrize("value", [Fraction(1, 3), Decimal("0.1"), [1.0, Fraction(1, 2)]])
@pytest.mark.parametrize("call", [lambda v: floatlab.round(v, "fp16"),
                                  lambda v: floatlab.float16_to_bin(v),
                                  lambda v: floatlab.explain(v, "e4m3fn") if np.ndim(v) == 0
                                  else floatlab.encode(v, "e4m3fn")])
def test_fractions_and_decimals_are_named_with_the_reason(value, call):
    """They were refused as not 'real numbers' ("x must hold real numbers, got dtype object
    ([Fraction(1, 3)])"); the message now names the type and why (float() may round first)."""
    with pytest.raises(TypeError, match=r"holds (Fraction|Decimal)\(.*\) \((Fraction|Decimal)\),"
                                        r" which floatlab does not convert.*float\(value\)"):
        call(value)


@pytest.mark.parametrize("x, index", [([1.0, 2.0], "x[0]"), (np.ones((1, 1)), "x[0, 0]"),
                                      ([[[0.5]]], "x[0, 0, 0]")])
def test_explain_of_an_array_names_an_index_that_gives_one_value(x, index):
    """The hint said explain(x[0], ...) for every shape; for a 2-d x that is still an array."""
    with pytest.raises(TypeError, match=re.escape(f"explain({index}, 'float16')")):
        floatlab.explain(x, "fp16")
    floatlab.explain(np.asarray(x)[tuple([0] * np.ndim(x))], "fp16")  # the hint works


@pytest.mark.parametrize("call", [lambda d: floatlab.decode(d, "fp16"),
                                  lambda d: floatlab.fields(d, "fp16"),
                                  lambda d: floatlab.fields([float(v) for v in d[:-1]] + [True],
                                                            "fp16"),
                                  lambda d: floatlab.dequantize(d + [1] * 30, [1.0], "mxfp8")])
def test_code_lists_mixing_bools_with_numbers_are_refused(call):
    """Codes too: numpy reads [1, True] as the codes [1, 1], and fields([1.0, True]) checked
    the array numpy had already made, so a flag became a code or a value without a word."""
    with pytest.raises(TypeError, match="mixes booleans with numbers .*pass numbers only"):
        call([1, True])


def test_lists_of_zeros_and_ones_without_bools_still_convert():
    # (the Python walk looking for bools runs only when a 0 or a 1 is there: these take it)
    assert floatlab.round([0.0, 1.0, 1, 0], "fp16").tolist() == [0.0, 1.0, 1.0, 0.0]
    assert floatlab.round([[np.float32(1.0)], [np.int64(0)]], "fp16").tolist() == [[1.0], [0.0]]
