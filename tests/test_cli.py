"""The command line, through main(argv) and once through the installed `floatlab` script."""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import floatlab
from floatlab.cli import EXIT_ERROR, EXIT_OK, EXIT_USAGE, build_parser, main
from floatlab.formats import format_names


class Terminal(io.StringIO):
    """A stdin that is an interactive terminal: never read when no values are given."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def stdin_is_a_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stdin", Terminal())


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_no_command_prints_the_tour(capsys):
    code, out, _ = run(capsys)
    assert code == EXIT_OK
    assert "float16        0 10000 1001001000  0x4248  3.140625" in out
    assert "float16        0 11111 0000000000  0x7c00  inf" in out  # 10**6 overflows


def test_bits(capsys):
    code, out, _ = run(capsys, "bits", "3.141", "-1.5", "--format", "bf16")
    assert code == EXIT_OK
    assert out.splitlines() == [
        "bfloat16       0 10000000 1001001  0x4049  3.140625",
        "bfloat16       1 01111111 1000000  0xbfc0  -1.5",
    ]


def test_bits_saturate_and_rounding_options(capsys):
    _, out, _ = run(capsys, "bits", "465", "-f", "e4m3fn")
    assert out.strip().endswith("0x7f  nan")
    _, out, _ = run(capsys, "bits", "465", "-f", "e4m3fn", "--saturate")
    assert out.strip().endswith("0x7e  448.0")
    _, out, _ = run(capsys, "bits", "1.0001", "-f", "fp16", "--rounding", "up")
    assert out.strip().endswith("1.0009765625")


def test_explain(capsys):
    code, out, _ = run(capsys, "explain", "1000000", "--format", "fp16")
    assert code == EXIT_OK
    assert out.startswith("float16(1000000.0) = inf")
    assert "overflow" in out and "65504" in out
    _, out, _ = run(capsys, "explain", "3e-8", "-f", "fp16", "--ftz")
    assert "= 0" in out.splitlines()[0]


def test_finfo(capsys):
    _, out, _ = run(capsys, "finfo", "fp16", "--oneline")
    assert out.strip() == (
        "finfo(resolution=0.001, min=-65504, max=65504, eps=0.000976562, "
        "smallest_normal=6.10352e-05, tiny=6.10352e-05, dtype=float16)"
    )
    _, out, _ = run(capsys, "finfo", "bf16")
    assert "smallest subnormal" in out and "binades" in out


def test_formats_list_and_comparison(capsys):
    _, out, _ = run(capsys, "formats")
    lines = out.splitlines()
    assert any(line.startswith("float8_e4m3fn") and " 448 " in line for line in lines)
    assert len([line for line in lines if line[:1].isalpha() and "  " in line]) == (
        1 + len(format_names()))
    _, out, _ = run(capsys, "formats", "fp16", "bf16")
    assert out.splitlines()[0].split() == ["float16", "bfloat16"]


def test_values(capsys):
    code, out, _ = run(capsys, "values", "e2m1")
    assert code == EXIT_OK
    lines = out.splitlines()
    assert lines[0].startswith("15 finite values of float4_e2m1fn")
    assert lines[1] == "0xf  1 11 1  -6.0" and lines[-1] == "0x7  0 11 1  6.0"
    code, _, err = run(capsys, "values", "fp16")
    assert code == EXIT_ERROR and "--limit 63487" in err
    # The way out names only formats that fit the limit, never the refused format itself.
    code, _, err = run(capsys, "values", "e4m3fn", "--limit", "100")
    assert code == EXIT_ERROR and "--limit 253" in err
    assert "e4m3fn," not in err and "e5m2" not in err and "(e2m1, ...)" in err
    code, _, err = run(capsys, "values", "e2m1", "--limit", "10")
    assert code == EXIT_ERROR and "--limit 15 to print them all\n" in err


def test_round_encode_decode_with_files(capsys, tmp_path):
    data = tmp_path / "values.txt"
    data.write_text("3.141, 1e6\n-0.0\n")
    _, out, _ = run(capsys, "round", "0.1", "--file", str(data), "-f", "fp16")
    assert out.splitlines() == [
        "0.1 -> 0.0999755859375", "3.141 -> 3.140625", "1000000.0 -> inf", "-0.0 -> -0.0"]
    _, out, _ = run(capsys, "encode", "3.141", "448", "-f", "e4m3fn")
    assert out.split() == ["0x45", "0x7e"]
    _, out, _ = run(capsys, "decode", "0x4248", "0b0011110000000000", "31744", "-f", "fp16")
    assert out.splitlines() == ["0x4248 -> 3.140625", "0b0011110000000000 -> 1.0",
                                "31744 -> inf"]


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["bits", "1", "-f", "e4m3"], EXIT_ERROR, "ambiguous"),
        (["finfo", "fp17"], EXIT_ERROR, "Did you mean"),
        (["decode", "0x1ff", "-f", "e4m3fn"], EXIT_ERROR, "does not fit"),
        (["decode", "pi", "-f", "fp16"], EXIT_ERROR, "not an integer code"),
        (["round", "-f", "fp16"], EXIT_ERROR, "no input"),
        (["round", "abc", "-f", "fp16"], EXIT_ERROR, "not a number"),
        (["round", "nan", "-f", "e2m1"], EXIT_ERROR, "has no NaN"),
        (["bits", "abc"], EXIT_ERROR, "not a number"),
        (["nosuchcommand"], EXIT_USAGE, "invalid choice"),
    ],
)
def test_errors_say_what_to_do(capsys, argv, code, message):
    got, _, err = run(capsys, *argv)
    assert got == code
    assert message in err


def test_help_exits_zero(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == EXIT_OK and "explain" in out and "values" in out
    code, out, _ = run(capsys, "explain", "--help")
    assert code == EXIT_OK and "--rounding" in out


def test_installed_console_script_end_to_end():
    exe = shutil.which("floatlab", path=os.path.dirname(sys.executable)) or shutil.which("floatlab")
    if exe is None:
        pytest.skip("the floatlab console script is not installed (pip install -e .)")
    done = subprocess.run([exe, "bits", "3.141", "--format", "fp16"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert "0 10000 1001001000  0x4248  3.140625" in done.stdout
    done = subprocess.run([exe, "finfo", "e4m3"], capture_output=True, text=True, timeout=60)
    assert done.returncode == EXIT_ERROR and "ambiguous" in done.stderr


def test_python_dash_m_runs_the_same_main():
    done = subprocess.run([sys.executable, "-m", "floatlab", "finfo", "fp16", "--oneline"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "dtype=float16)" in done.stdout


def test_compare_prints_the_table_and_saves_the_plot(capsys, tmp_path):
    png = tmp_path / "curves.png"
    code, out, _ = run(capsys, "compare", "32-true", "16-true", "--steps", "3", "--rows",
                       "1024", "--quiet", "--plot", str(png))
    assert code == EXIT_OK
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert [r.split("|")[1].strip() for r in rows[1:]] == ["32-true", "16-true"]
    assert "yes (step" in rows[-1]  # pure fp16 + Adam goes NaN (eps underflows)
    assert png.stat().st_size > 10_000 and f"curves saved to {png}" in out


def test_compare_plot_leaves_the_callers_matplotlib_backend(capsys, tmp_path):
    # main() called in-process (a notebook, a test) switched the session's backend to Agg
    # with matplotlib.use and opened a pyplot figure; the picture is now a Figure of its own
    code = subprocess.run([sys.executable, "-c", (
        "import matplotlib, sys\n"
        "matplotlib.use('svg')\n"
        "import matplotlib.pyplot as plt\n"
        "from floatlab.cli import main\n"
        f"code = main(['compare', '32-true', '--steps', '2', '--rows', '1024', '--quiet', "
        f"'--plot', {str(tmp_path / 'c.png')!r}])\n"
        "assert code == 0, code\n"
        "assert matplotlib.get_backend() == 'svg', matplotlib.get_backend()\n"
        "assert plt.get_fignums() == [], plt.get_fignums()\n")],
        capture_output=True, text=True, timeout=120)
    assert code.returncode == 0, code.stderr[-500:]
    assert (tmp_path / "c.png").stat().st_size > 10_000


def test_compare_lambda_and_bad_precision(capsys):
    code, out, _ = run(capsys, "compare", "16-mixed", "--steps", "2", "--rows", "1024",
                       "--quiet", "--lambda", "2**-16")
    assert code == EXIT_OK and "teaching device" in out
    code, _, err = run(capsys, "compare", "17-mixed", "--steps", "2")
    assert code == EXIT_ERROR and "16-mixed" in err  # the error lists the valid names
    code, _, err = run(capsys, "compare", "--lambda", "two", "--steps", "2")
    assert code == EXIT_ERROR and "not a number" in err


# --------------------------------------------------------------------------- issue 8, section 5

@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        # -1e-8 is below half of fp16's smallest subnormal 2**-24: it rounds to -0.
        (["round", "-f", "fp16", "-1e-8"], "-1e-8 -> -0.0"),
        (["round", "-1e-8", "-f", "fp16", "--saturate"], "-1e-8 -> -0.0"),
        (["round", "-f", "fp16", "-.5", "-0x1p-3", "-Infinity"],
         "-0.5 -> -0.5\n-0.125 -> -0.125\n-inf -> -inf"),
        (["bits", "-f", "fp16", "-inf"], "float16        1 11111 0000000000  0xfc00  -inf"),
        (["bits", "-f", "fp16", "-nan"], "float16        0 11111 1000000000  0x7e00  nan"),
        (["encode", "-f", "fp16", "-1", "-2**-24"], "0xbc00\n0x8001"),  # IEEE binary16 codes
    ],
)
def test_negative_numbers_are_values_without_dashdash(capsys, argv, expected):
    code, out, err = run(capsys, *argv)
    assert (code, err) == (EXIT_OK, "")
    assert out.strip() == expected


def test_explain_takes_negative_and_several_values_and_formats(capsys):
    code, out, _ = run(capsys, "explain", "-f", "fp16", "-1e-8")
    assert code == EXIT_OK and out.startswith("float16(-1e-8) = -0   [underflow; code 0x8000]")
    code, out, _ = run(capsys, "explain", "-2", "3.141", "-f", "fp16,bf16")
    heads = [line.split(" = ")[0] for line in out.splitlines() if line[:1].isalpha()]
    assert code == EXIT_OK
    assert heads == ["float16(-2.0)", "bfloat16(-2.0)", "float16(3.141)", "bfloat16(3.141)"]


def test_no_option_can_swallow_a_negative_number():
    """Values such as -inf, -nan, -1 are told from options by their first characters: no
    option of any subcommand may start with a digit, '.', 'i' or 'n' after its dash."""
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in [("floatlab", parser), *subparsers.choices.items()]:
        for action in sub._actions:
            for option in action.option_strings:
                assert not (option[1:2].isdigit() or option[1:2] in ".inIN"), (name, option)


@pytest.mark.parametrize("argv", [["decode", "-f", "fp16", "--", "-1"],
                                  ["decode", "-f", "fp16", "-1"]])
def test_decode_of_a_negative_code_says_what_to_type(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == EXIT_ERROR and out == ""
    assert "negative" in err and "floatlab encode -f float16 -1" in err
    assert "Traceback" not in err


def test_decode_of_a_huge_code_is_a_clean_error(capsys):
    code, _, err = run(capsys, "decode", "-f", "e4m3fn", "99999999999999999999999")
    assert code == EXIT_ERROR
    assert "does not fit in the 8 bits of float8_e4m3fn: valid codes are 0..0xff" in err


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == EXIT_OK
    assert out.startswith("floatlab ") and f"numpy {np.__version__}" in out


def test_values_from_a_pipe_when_none_are_given(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("3.141\n-1e6, 0.5\n"))
    code, out, _ = run(capsys, "round", "-f", "fp16")
    assert code == EXIT_OK
    assert out.splitlines() == ["3.141 -> 3.140625", "-1000000.0 -> -inf", "0.5 -> 0.5"]
    monkeypatch.setattr(sys, "stdin", io.StringIO("0x3c00\n"))
    assert run(capsys, "decode", "-f", "fp16")[1] == "0x3c00 -> 1.0\n"
    # Values given on the command line win: the pipe is not read.
    monkeypatch.setattr(sys, "stdin", io.StringIO("7\n"))
    assert run(capsys, "round", "1", "-f", "fp16")[1] == "1.0 -> 1.0\n"


def test_an_empty_pipe_or_a_terminal_is_no_input(capsys, monkeypatch):
    code, _, err = run(capsys, "bits")  # stdin is a terminal (the autouse fixture)
    assert code == EXIT_ERROR and "no input" in err and "pipe" in err
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code, _, err = run(capsys, "round", "-f", "fp16")
    assert code == EXIT_ERROR and "no input" in err


def test_piped_stdin_through_python_dash_m():
    done = subprocess.run([sys.executable, "-m", "floatlab", "round", "-f", "fp16"],
                          input="3.141\n", capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "3.141 -> 3.140625\n", "")


def test_bits_reads_a_file(capsys, tmp_path):
    data = tmp_path / "values.txt"
    data.write_text("1.5\n-2\n")
    code, out, _ = run(capsys, "bits", "--file", str(data), "-f", "bf16")
    assert code == EXIT_OK
    assert [line.split()[-2:] for line in out.splitlines()] == [["0x3fc0", "1.5"],
                                                                ["0xc000", "-2.0"]]


def api_row(x: float, fmt: str) -> list[str]:
    """What the Python API says about x in fmt: the CLI must print the same."""
    f = floatlab.get_format(fmt)
    return [f.name, floatlab.to_hex(x, f), repr(float(floatlab.round(x, f)))]


def test_bits_in_several_formats_one_row_each(capsys):
    code, out, _ = run(capsys, "bits", "0.1", "-f", "fp16,bf16,e4m3fn")
    assert code == EXIT_OK
    rows = [line.split() for line in out.splitlines()]
    assert [[r[0], r[-2], r[-1]] for r in rows] == [
        api_row(0.1, "fp16"), api_row(0.1, "bf16"), api_row(0.1, "e4m3fn")]
    # the columns line up: every hex code starts at the same position
    assert len({line.index(" 0x") for line in out.splitlines()}) == 1


@pytest.mark.filterwarnings("ignore:float8_e8m0fnu cannot hold:RuntimeWarning")  # api_row's
def test_bits_in_all_formats(capsys):
    code, out, _ = run(capsys, "bits", "-f", "all", "-0.1")
    assert code == EXIT_OK
    rows = [line.split() for line in out.splitlines()]
    assert [[r[0], r[-2], r[-1]] for r in rows] == [api_row(-0.1, n) for n in format_names()]


def test_several_values_and_formats_with_a_refusal(capsys):
    code, out, _ = run(capsys, "bits", "1", "nan", "-f", "fp16,e2m1")
    blocks = out.split("\n\n")
    assert blocks[0].splitlines()[0] == "x = 1"
    assert blocks[1].splitlines()[0] == "x = nan"
    assert blocks[1].splitlines()[2].startswith("float4_e2m1fn  refused: float4_e2m1fn has no NaN")
    assert "0x3c00" in blocks[0] and "0x2" in blocks[0]  # e2m1 still shows 1.0
    assert code == EXIT_ERROR  # a refused row is reported in the exit code


@pytest.mark.parametrize("command", ["round", "encode", "decode"])
def test_one_format_commands_refuse_several(capsys, command):
    code, _, err = run(capsys, command, "1", "-f", "fp16,bf16")
    assert code == EXIT_ERROR and "takes one format" in err and "floatlab bits" in err


@pytest.mark.parametrize("command", ["round", "encode", "bits"])
def test_seed_makes_stochastic_rounding_reproducible(capsys, command):
    argv = [command, "0.1", "0.1", "0.1", "0.1", "-f", "bf16", "-r", "sr", "--seed", "7"]
    first, second = run(capsys, *argv)[1], run(capsys, *argv)[1]
    assert first == second
    expected = floatlab.round([0.1] * 4, "bf16", rounding="stochastic", rng=7)
    if command == "round":
        assert [float(line.split()[-1]) for line in first.splitlines()] == list(expected)
    elif command == "encode":
        assert first.split() == list(floatlab.to_hex(expected, "bf16"))
    else:  # bits, hex and value of one row come from one rounding
        rows = [line.split() for line in first.splitlines()]
        assert [float(r[-1]) for r in rows] == list(expected)
        assert [r[-2] for r in rows] == list(floatlab.to_hex(expected, "bf16"))
    assert len(set(first.splitlines())) == 2  # 0.1 lies between two bf16 values: both occur


def test_seed_without_stochastic_rounding_is_refused(capsys):
    code, _, err = run(capsys, "round", "0.1", "-f", "bf16", "--seed", "1")
    assert code == EXIT_ERROR and "--rounding stochastic" in err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        # 1e-5 is a float16 subnormal (below 2**-14): --ftz flushes it.
        (["round", "1e-5", "-f", "fp16"], "1e-5 -> 1.0013580322265625e-05"),
        (["round", "1e-5", "-f", "fp16", "--ftz"], "1e-5 -> 0.0"),
        (["encode", "1e-5", "-f", "fp16", "--ftz"], "0x0000"),
        (["bits", "1e-5", "-f", "fp16", "--ftz"], "float16        0 00000 0000000000  0x0000  0.0"),
        (["round", "1e6", "-f", "fp16", "--saturate"], "1000000.0 -> 65504.0"),
        (["encode", "465", "-f", "e4m3fn", "--saturate"], "0x7e"),
        (["encode", "465", "-f", "e4m3fn"], "0x7f"),
    ],
)
def test_ftz_and_saturate_on_round_encode_and_bits(capsys, argv, expected):
    code, out, _ = run(capsys, *argv)
    assert code == EXIT_OK and out.strip() == expected


@pytest.mark.parametrize(
    ("alias", "mode"),
    [("rne", "nearest_even"), ("rn", "nearest_even"), ("rna", "nearest_away"),
     ("rtz", "toward_zero"), ("rz", "toward_zero"), ("ru", "up"), ("rd", "down"),
     ("rto", "odd"), ("RU", "up"), ("nearest-away", "nearest_away")],
)
def test_rounding_aliases_on_the_command_line_and_in_python(capsys, alias, mode):
    x = [1.0001, -1.0001, 1 + 2**-11]  # inexact, negative, and a tie in fp16
    assert np.array_equal(floatlab.round(x, "fp16", rounding=alias),
                          floatlab.round(x, "fp16", rounding=mode))
    argv = ["round", *map(repr, x), "-f", "fp16"]
    assert run(capsys, *argv, "-r", alias)[1] == run(capsys, *argv, "-r", mode)[1]


def test_unknown_rounding_mode_lists_the_names(capsys):
    code, _, err = run(capsys, "round", "1", "-f", "fp16", "-r", "sideways")
    assert code == EXIT_USAGE and "nearest_even" in err and "rtz" in err


@pytest.mark.parametrize(
    ("text", "message"),
    [("1e400", "beyond float64's range"), ("-1e-400", "below float64's smallest"),
     ("2**10000", "beyond float64's range"), ("2**0.5", "integer exponent"),
     ("0x1p99999", "beyond float64's range"), ("0x1p-1080", "below float64's smallest"),
     ("0.5**20000", "below float64's smallest")],
)
def test_numbers_float64_cannot_hold_are_refused(capsys, text, message):
    """float("1e400") is inf and float("1e-400") is 0 without a word: the CLI refuses them."""
    code, _, err = run(capsys, "round", text, "-f", "fp16")
    assert code == EXIT_ERROR and message in err
    if "float64's" in message:  # the fix, not the old 'floatlab reads values as float64'
        assert "type a value within float64's range" in err and "reads values as" not in err


@pytest.mark.parametrize(
    ("text", "message"),
    [("+-2**2", "not a number"), ("--2**2", "not a number"), ("2/3**2", "not a number"),
     ("inf**2", "not a number"), ("1e-401**1", "below float64's smallest"),
     ("1e401**-1", "below float64's smallest"), ("1e-401**-3", "beyond float64's range")],
)
def test_a_powers_base_is_one_signed_decimal_number(capsys, text, message):
    """The base of a power reads as a value without one does: '+-2**2' gave 4.0 (Python's
    +-2**2 is -4; '+-2' alone is refused), '--2**2' -4.0 (Python: 4) and '2/3**2' 4/9
    (Python: 2/9), silently; a base beyond 10**±400 is out of range for any exponent but 0."""
    code, _, err = run(capsys, "round", "-f", "fp16", "--", text)
    assert code == EXIT_ERROR and message in err
    _, out, _ = run(capsys, "round", "-f", "float64", "-1e999**0", "-2**2")
    assert out.splitlines() == ["-1.0 -> -1.0", "-4.0 -> -4.0"]


def test_a_powers_huge_decimal_exponent_is_refused_at_once():
    """'1e-99999999**1' built 10**99999999 exactly before looking at its size (minutes of
    CPU and gigabytes: a hang); it is refused from the base's decimal exponent, and any
    base to the power 0 is 1 (a subprocess: without the fix these hang)."""
    def run_cli(*values):
        return subprocess.run([sys.executable, "-m", "floatlab", "round", "-f", "fp16",
                               *values], capture_output=True, text=True, timeout=60)

    done = run_cli("1e-99999999**1", "1e99999999**1")
    assert done.returncode == EXIT_ERROR and "below float64's smallest" in done.stderr
    done = run_cli("1e-99999999**0")
    assert done.returncode == EXIT_OK and done.stdout == "1.0 -> 1.0\n"


def test_powers_and_hex_floats_are_exact(capsys):
    _, out, _ = run(capsys, "round", "2**-24", "0x1.8p1", "-2**-25", "-f", "fp16")
    assert out.splitlines() == [f"{2.0**-24!r} -> {2.0**-24!r}", "3.0 -> 3.0",
                                f"{-(2.0**-25)!r} -> -0.0"]
    # a power is computed exactly and rounded once: 0.1**2 is the float64 nearest 1/100
    _, out, _ = run(capsys, "round", "0.1**2", "-f", "float64")
    assert out == "0.1**2 -> 0.01\n" and 0.1**2 != 0.01  # (the echo: no float64 is 0.1**2)


def test_compare_lambda_overflow_is_a_clean_error(capsys):
    code, out, err = run(capsys, "compare", "--lambda", "2**10000", "--steps", "2", "--quiet")
    assert code == EXIT_ERROR and out == ""
    assert "beyond float64's range" in err and "--lambda 2**-16" in err
    code, _, err = run(capsys, "compare", "--lr", "-1", "--steps", "2", "--quiet")
    assert code == EXIT_ERROR and "--lr must be a finite number above 0" in err


@pytest.mark.parametrize(("path", "message"), [("/missing/dir/x.png", "does not exist"),
                                               ("curves.nosuchkind", "end the file name")])
def test_compare_checks_the_plot_path_before_training(capsys, monkeypatch, tmp_path, path,
                                                      message):
    import floatlab.mixed

    def must_not_train(*args, **kwargs):
        raise AssertionError("compare() ran before the --plot path was checked")

    monkeypatch.setattr(floatlab.mixed, "compare", must_not_train)
    target = path if path.startswith("/") else str(tmp_path / path)
    code, _, err = run(capsys, "compare", "--plot", target, "--quiet")
    assert code == EXIT_ERROR and message in err


def test_warnings_become_one_clean_note(capsys):
    code, out, err = run(capsys, "bits", "0", "-f", "e8m0")
    assert code == EXIT_OK and out.split()[-2:] == ["0xff", "nan"]
    assert err.splitlines() == [
        "floatlab bits: note: float8_e8m0fnu cannot hold zeros (the format has no zero): "
        "1 value(s) became NaN"]
    code, _, err = run(capsys, "bits", "0", "-1", "-f", "e8m0,fp16,e8m0")  # e8m0 warns twice
    assert code == EXIT_OK and err.splitlines() == [
        "floatlab bits: note: float8_e8m0fnu cannot hold negative values (the format has no "
        "sign bit) and zeros (the format has no zero): 2 value(s) became NaN"]
    assert ".py" not in err and "RuntimeWarning" not in err


def test_every_argument_has_help():
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in [("floatlab", parser), *subparsers.choices.items()]:
        for action in sub._actions:
            assert action.help and action.help != argparse.SUPPRESS, (name, action.dest)


def test_every_input_example_in_the_help_is_accepted(capsys):
    """A help text's "e.g." values run as typed: quantize's showed -inf, which it refuses (a
    block amax needs finite values)."""
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        action = next((a for a in sub._actions if a.dest == "values"), None)
        if action is None:
            continue
        example = action.help.split("e.g. ", 1)[1].split(" (", 1)[0].split()
        option = ["--scheme", "mxfp8"] if name == "quantize" else ["-f", "fp16"]
        code, _, err = run(capsys, name, *example, *option)
        assert code == EXIT_OK, (name, example, err)


def test_formats_hint_offers_all_only_where_it_works(capsys):
    """The list's closing hint said -f all works "wherever a format is asked for"; only bits
    and explain take several formats (round, finfo, values ... refuse 'all')."""
    _, out, _ = run(capsys, "formats")
    hint = next(line for line in out.splitlines() if line.startswith("Any name works"))
    assert "bits and explain also take several" in hint and hint.endswith("-f all.")
    for command in ("bits", "explain"):
        assert run(capsys, command, "1", "-f", "all")[0] == EXIT_OK
    for argv in (["round", "1", "-f", "all"], ["finfo", "all"], ["values", "all"]):
        assert run(capsys, *argv)[0] == EXIT_ERROR


def test_formats_lists_the_short_names(capsys):
    _, out, _ = run(capsys, "formats")
    lines = out.splitlines()
    column = lines[0].index("short names")
    rows = lines[1:len(format_names()) + 1]
    short = {line.split()[0]: line[column:].split(", ") for line in rows}
    assert list(short) == format_names()
    assert short["float16"] == ["fp16", "half", "f16", "binary16"]
    assert "bf16" in short["bfloat16"] and "e4m3fn" in short["float8_e4m3fn"]
    assert "e2m1" in short["float4_e2m1fn"] and "e8m0" in short["float8_e8m0fnu"]
    for name, aliases in short.items():  # every short name shown names its row's format
        for alias in filter(None, aliases):
            assert floatlab.get_format(alias) == floatlab.get_format(name), alias


def test_formats_points_to_the_p3109_family(capsys):
    from floatlab.cli import main

    assert main(["formats"]) == 0
    out = capsys.readouterr().out
    assert "IEEE P3109" in out and "binary8p3se" in out
    assert main(["finfo", "binary8p3se"]) == 0


@pytest.mark.parametrize("optimizer, label", [("adamw", "AdamW lr"), ("adamw8bit", "AdamW8bit lr")])
def test_compare_takes_adamw(capsys, optimizer, label):
    code, out, _ = run(capsys, "compare", "32-true", "--optimizer", optimizer, "--steps", "2",
                       "--rows", "256", "--quiet")
    assert code == EXIT_OK and label in out.splitlines()[0]
