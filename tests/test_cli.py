"""The command line, through main(argv) and once through the installed `floatlab` script."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from floatlab.cli import EXIT_ERROR, EXIT_OK, EXIT_USAGE, main


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
    assert len([line for line in lines if line[:1].isalpha() and "  " in line]) == 1 + 16
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
        (["bits", "abc"], EXIT_USAGE, "invalid float value"),
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


def test_compare_lambda_and_bad_precision(capsys):
    code, out, _ = run(capsys, "compare", "16-mixed", "--steps", "2", "--rows", "1024",
                       "--quiet", "--lambda", "2**-16")
    assert code == EXIT_OK and "teaching device" in out
    code, _, err = run(capsys, "compare", "17-mixed", "--steps", "2")
    assert code == EXIT_ERROR and "16-mixed" in err  # the error lists the valid names
    code, _, err = run(capsys, "compare", "--lambda", "two", "--steps", "2")
    assert code == EXIT_ERROR and "not a number" in err
