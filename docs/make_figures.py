"""Regenerate the pictures the README shows:  python docs/make_figures.py [OUTDIR]

Each figure is a function here; FIGURES maps its file name to the function. tests/test_readme.py
checks that every picture the README links is listed here and that the script runs, so the
README and the pictures stay in step.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from floatlab import plots  # noqa: E402

HERE = Path(__file__).resolve().parent


def dynamic_range_figure(path: Path) -> None:
    """BF16 keeps FP32's range, FP16 keeps more precision: the bars and the bit layouts."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6.5), height_ratios=[1, 1.3])
    plots.bit_layout(["float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2"], ax=top)
    plots.dynamic_range(["float32", "bfloat16", "float16", "float8_e5m2", "float8_e4m3fn"],
                        ax=bottom)
    fig.tight_layout()
    fig.savefig(path, dpi=80, metadata={"Software": None})
    plt.close(fig)


def number_line_figure(path: Path) -> None:
    """Every value of E4M3FN, with the subnormals marked."""
    fig, ax = plt.subplots(figsize=(9, 2.6))
    plots.number_line("float8_e4m3fn", ax=ax)
    fig.tight_layout()
    fig.savefig(path, dpi=80, metadata={"Software": None})
    plt.close(fig)


def loss_scaling_figure(path: Path) -> None:
    """The loss-scaling experiment: at lambda = 2**-16, unscaled fp16 gradients underflow."""
    from floatlab.mixed import compare, teacher_gaussians

    runs = [
        "32-true",
        {"precision": "16-mixed", "scaler": None, "label": "16-mixed, no scaler"},
        "16-mixed",
        "bf16-mixed",
    ]
    result = compare(runs, steps=300, progress=False, data=teacher_gaussians(),
                     loss_multiplier=2.0**-16)
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    plots.training_curves(result.histories, metric="accuracy", ax=axes[0])
    plots.underflow_over_time(result.histories, ax=axes[1])
    fig.suptitle("Loss x 2^-16 (a stand-in for a deep network): fp16 needs loss scaling, "
                 "bf16 does not", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80, metadata={"Software": None})
    plt.close(fig)


FIGURES = {
    "formats.png": dynamic_range_figure,
    "e4m3fn_number_line.png": number_line_figure,
    "loss_scaling.png": loss_scaling_figure,
}


def main(outdir: str | Path = HERE) -> list[Path]:
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in FIGURES.items():
        make(outdir / name)
        written.append(outdir / name)
    return written


if __name__ == "__main__":
    for path in main(*sys.argv[1:]):
        print(path)
