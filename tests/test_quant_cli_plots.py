"""The quantize / schemes subcommands and the quantisation plots."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import floatlab  # noqa: E402
from floatlab.cli import main  # noqa: E402


def test_cli_quantize_prints_codes_scales_and_stats(tmp_path, capsys):
    path = tmp_path / "values.txt"
    path.write_text("0.3 -1.2 5.0 0.01\n100 2e-3 -7 0.5\n")
    assert main(["quantize", "--scheme", "mxfp8", "--file", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Scheme('mxfp8_e4m3'" in out
    assert "0x3a" in out and "0.3125" in out          # 0.3 / 0.25 = 1.2 -> 1.25 (code 0x3a)
    assert "scales (e8m0, 1): 0.25" in out            # amax 100: 2**(6 - 8)
    assert "QSNR" in out and "clipped" in out and "flushed" in out


def test_cli_quantize_nvfp4_rows_and_errors(capsys):
    assert main(["quantize", "--scheme", "nvfp4", "--rows", "2", "1", "2", "3", "4"]) == 0
    assert "global scale (float32)" in capsys.readouterr().out
    assert main(["quantize", "--scheme", "mxfp9", "1"]) == 1
    assert "Did you mean 'mxfp8'" in capsys.readouterr().err
    assert main(["quantize", "--scheme", "nf4", "--rows", "3", "1", "2"]) == 1
    assert "do not fill 3 rows" in capsys.readouterr().err


def test_cli_schemes_lists_every_preset_with_bits(capsys):
    assert main(["schemes"]) == 0
    out = capsys.readouterr().out
    for name in floatlab.scheme_names():
        assert name in out
    assert "8.25" in out and "4.5" in out and "4.127" in out


def test_quantisation_plots_draw():
    x = np.random.default_rng(0).standard_normal((8, 128))
    ax = floatlab.plots.qsnr_by_scheme(x, ["mxfp8", "nvfp4"])
    assert len(ax.patches) == 2
    ax = floatlab.plots.scale_exponents(floatlab.quantize(x, "mxfp8"))
    assert sum(p.get_height() for p in ax.patches) == 32
    ax = floatlab.plots.block_before_after(x, "mxfp8", block=3)
    assert len(ax.lines[0].get_xdata()) == 32
    with pytest.raises(ValueError, match="out of range"):
        floatlab.plots.block_before_after(x, "mxfp8", block=99)
    with pytest.raises(ValueError, match="int block"):
        floatlab.plots.block_before_after(x, "fp8_rowwise")
    ax = floatlab.plots.element_grids(["nf4", "dynamic8", floatlab.FixedPoint(8, 6)])
    assert len(ax.collections) == 3
    assert len(ax.collections[0].get_segments()) == 16
