"""The README stays true: its REPL tour runs, its pictures come from docs/make_figures.py, and
.ci/run runs exactly the test command it gives."""

from __future__ import annotations

import argparse
import doctest
import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

import floatlab

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def load_figure_script():
    spec = importlib.util.spec_from_file_location("make_figures", ROOT / "docs" / "make_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_repl_examples_produce_their_shown_output():
    parser = doctest.DocTestParser()
    test = parser.get_doctest(README, {}, "README.md", str(ROOT / "README.md"), 0)
    assert len(test.examples) >= 8, "the tour lost its examples"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0, "a README example no longer prints what the README shows"


# Pictures that are not plots: screenshots made by a test, not by make_figures.py.
SCREENSHOTS = {"floattoy.png": "tests/test_widgets_browser.py with FLOATLAB_DOCS_SCREENSHOT=1"}


def test_readme_pictures_are_made_by_the_script(tmp_path):
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.png)\)", README))
    assert linked, "the README should show at least one picture"
    script = load_figure_script()
    assert linked - set(SCREENSHOTS) <= set(script.FIGURES), \
        "a linked picture has no generator in make_figures.py"
    for name in linked:
        assert (ROOT / "docs" / name).is_file(), f"docs/{name} is missing: run the script"
    written = script.main(tmp_path)
    assert {p.name for p in written} == set(script.FIGURES)
    assert all(p.stat().st_size > 5_000 for p in written)


def bash_lines() -> list[str]:
    """Every command line of the README's ```bash blocks, in order."""
    blocks = re.findall(r"```bash\n(.*?)\n```", README, flags=re.DOTALL)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_ci_runs_the_readme_test_command():
    test_commands = [line for line in bash_lines() if "pytest" in line]
    assert len(test_commands) == 1
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert test_commands[0] in ci.splitlines()


def test_fresh_machine_commands_start_in_a_virtual_environment():
    """Stock Debian / Ubuntu Pythons refuse pip outside a venv (PEP 668): create and activate
    one before the first pip install, as .ci/run does."""
    lines = bash_lines()
    first_pip = next(i for i, line in enumerate(lines) if "pip install" in line)
    venv = [i for i, line in enumerate(lines) if re.search(r"python3 -m venv (\S+)", line)]
    assert venv and venv[0] < first_pip, "create the virtual environment before pip install"
    folder = re.search(r"python3 -m venv (\S+)", lines[venv[0]])[1]
    assert f". {folder}/bin/activate" in lines[venv[0]], "activate the venv it creates"
    assert "python3 -m venv" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_readme_says_how_to_get_jupyter():
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"]
    assert any(dep.startswith("jupyter") for dep in extras["notebooks"])
    assert 'pip install -e\n".[notebooks]"' in README or 'pip install -e ".[notebooks]"' in README


def test_readme_command_table_names_every_subcommand_and_option():
    from floatlab.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    section = README.split("## Command line", 1)[1].split("\n## ", 1)[0]
    assert "--version" in section
    for name, sub in subparsers.choices.items():
        assert f"floatlab {name}" in section or f"/ {name}" in section, name
        if name in ("compare", "finfo", "values", "formats", "tour"):
            continue  # their options are in their --help; the table shows the main ones
        for action in sub._actions:
            for option in action.option_strings:
                if option.startswith("--") and option != "--help":
                    assert option in section, f"floatlab {name} {option} is not in the README"
    assert "-f all" in section and "fp16,bf16" in section


def test_readme_peer_differences_are_true():
    """The conventions say what gfloat does differently at overflow; keep that true."""
    gfloat = pytest.importorskip("gfloat")
    from gfloat.formats import format_info_binary16

    inf = float("inf")
    assert gfloat.round_float(format_info_binary16, inf, sat=True) == 65504.0
    assert floatlab.round(inf, "fp16", saturate=True) == inf
    assert floatlab.round(-inf, "e5m2", saturate=True) == -inf
    assert floatlab.round(inf, "e4m3fn", saturate=True) == 448.0  # no inf in E4M3FN
    assert floatlab.round(70000.0, "fp16", rounding="odd") == 65504.0
    if hasattr(gfloat.RoundMode, "ToOdd"):  # newer than gfloat 0.5.2
        assert gfloat.round_float(format_info_binary16, 70000.0, gfloat.RoundMode.ToOdd) == inf


def notebook_markdown(name: str) -> str:
    import json

    cells = json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def test_notebooks_do_not_say_torch_casts_saturate():
    """torch's own float32 -> float8_e4m3fn cast (c10/util/Float8_e4m3fn.h) does not saturate:
    every |x| >= 480 becomes the NaN code 0x7f, and the tie above 448 rounds to it too (torchao's
    to_fp8_saturated says so and clamps first). Lessons 01 and 03 said PyTorch's casts saturate."""
    for name in ("01_bits_of_a_float.ipynb", "03_overflow_and_underflow.ipynb"):
        text = " ".join(notebook_markdown(name).split())
        assert "PyTorch's FP8 casts do" not in text and "PyTorch's cast *saturates*" not in text
        assert "PyTorch's" in text and ("gives NaN" in text or "give NaN" in text)
    # the README says the same, and floatlab's default is that cast's
    assert "maps every |x| >= 480 to NaN" in " ".join(README.split())
    assert np.isnan(floatlab.round(470.0, "e4m3fn")) and np.isnan(floatlab.round(480.0, "e4m3fn"))


def test_lesson_09_says_where_attention_logits_overflow():
    """With q, k ~ N(0, s^2) in 64 dimensions the largest |q.k| of lesson 09's 8 x 8 scores is
    about 16 s^2, so fp16 overflows past s = 64 (its table: finite at 64, NaN at 96; the
    notebook asserts that); the text said 64 s^2 and s = 32."""
    text = " ".join(notebook_markdown("09_transformer_precision.ipynb").split())
    assert r"past $s \approx 64$" in text and r"$s \approx 32$" not in text
    rng = np.random.default_rng(0)  # the notebook's q and k
    q, k = (rng.standard_normal((8, 64)) for _ in range(2))
    largest = np.abs(q @ k.T).max()
    assert 64**2 * largest < floatlab.finfo("fp16").max < 96**2 * largest


def test_lesson_07_says_what_nvfp4_buys_over_mxfp4():
    """On lesson 07's N(0, 1) tensor NVFP4 beats MXFP4 by 1.65 dB (20.44 against 18.79; the
    reference's 20.4 / 18.8), not 'several dB' as the text said."""
    text = " ".join(notebook_markdown("07_block_scaling.ipynb").split())
    assert "buy several dB" not in text and "buy about 1.7 dB" in text
    x = np.random.default_rng(0).standard_normal((4096, 256)).astype(np.float32)
    gain = floatlab.quantize(x, "nvfp4").stats.qsnr_db - floatlab.quantize(x, "mxfp4").stats.qsnr_db
    assert round(gain, 1) in (1.6, 1.7)


def test_lesson_07_does_not_say_fixed_point_works_wherever_a_format_does():
    """FixedPoint and Codebook work in round / encode / decode / values / explain and in a
    Scheme; finfo, ulp and FloatArray refuse them (TypeError). Lesson 07 said 'wherever a format
    does', the claim the README dropped for the same reason."""
    text = " ".join(notebook_markdown("07_block_scaling.ipynb").split())
    assert "work wherever a format does" not in text
    fixed = floatlab.FixedPoint(8, 6)
    for name in ("round", "encode", "decode", "values", "explain"):
        assert f"`{name}`" in text
    assert float(floatlab.round(0.3, fixed)) == 19 / 64
    assert "`finfo`" in text and "`ulp`" in text and "`floatlab.array`" in text
    for call in (floatlab.finfo, lambda f: floatlab.ulp(0.3, f),
                 lambda f: floatlab.array([0.3], f)):
        with pytest.raises(TypeError, match="not a floating-point Format"):
            call(fixed)


def test_lesson_06_block_fma_factor_is_the_measured_one():
    """Lesson 06 prints 'per addition / block FMA = 25' at K = 4096 (and asserts 20-30); its text
    said 'about 20 times'."""
    text = " ".join(notebook_markdown("06_sums_and_accumulation.ipynb").split())
    assert "about 25 times less error again" in text and "about 20 times less" not in text
