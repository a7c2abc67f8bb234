"""DeepSeek-FP8 with and without promotion of the 14-bit accumulator, in training (issue 11, 5).

The recipe "deepseek-fp8" sums every GEMM in an ``e8m13`` accumulator that truncates (what
DeepSeek-V3 measured on the H800's FP8 tensor cores) and copies the partial sum to float32 every
128 products; ``recipe_options={"promote_every": None}`` keeps the whole sum in ``e8m13``. The
issue asks whether the unpromoted recipe loses accuracy on long inner dimensions (K >= 1024).
The emulated accumulator runs one inner index at a time, so a training run with K >= 1024 takes
minutes: too slow for notebook 08, which shows the effect on one GEMM and quotes this table.

Two parts:

1. GEMM error: the relative error (Frobenius) of one product with K = 1024 and 4096 under each
   accumulator, against the exact float64 product. Operands: ReLU activations times Gaussian
   weights (a forward GEMM), and positive terms (a sum that only grows, notebook 08's case).
2. Training: the reference MLP 16-64-64-4 on teacher-labelled Gaussians (8192 rows, half for
   testing), Adam lr 1e-3, batches of 1024 rows, so that each layer's wgrad GEMM (xᵀ·g, summed
   over the batch) has K = 1024; bf16-mixed against deepseek-fp8 promoted every 128 and never
   promoted, seeds 0..N-1; test accuracy and the mean training loss of the last 20 steps.

    python benchmarks/exp_deepseek_promotion.py               # 150 steps, seeds 0-2 (~15 min)
    python benchmarks/exp_deepseek_promotion.py --steps 50 --seeds 1
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import floatlab  # noqa: E402
from floatlab import Accumulator  # noqa: E402
from floatlab.mixed import Trainer, teacher_gaussians  # noqa: E402
from floatlab.mixed.recipe import get_recipe  # noqa: E402

PROMOTED = Accumulator("e8m13", "toward_zero", chunk=128, promote="float32")
PLAIN = Accumulator("e8m13", "toward_zero")


def gemm_errors() -> None:
    rng = np.random.default_rng(0)
    print("relative error of one GEMM (16 x K times K x 8) against the exact product")
    print(f"{'operands':<28}{'K':>6}{'promoted every 128':>20}{'never promoted':>16}")
    for k in (1024, 4096):
        cases = {"ReLU x times Gaussian w": (np.maximum(rng.standard_normal((16, k)), 0),
                                             rng.standard_normal((k, 8))),
                 "positive terms": (rng.random((16, k)), rng.random((k, 8)))}
        for name, (a, b) in cases.items():
            exact = a @ b
            err = [np.linalg.norm(floatlab.matmul(a, b, acc) - exact) / np.linalg.norm(exact)
                   for acc in (PROMOTED, PLAIN)]
            print(f"{name:<28}{k:>6}{err[0]:>20.2e}{err[1]:>16.2e}")


def training(steps: int, seeds: int, batch: int) -> None:
    data = teacher_gaussians(n=8192)
    runs = {"bf16-mixed": "bf16-mixed",
            "deepseek-fp8 (promote 128)": get_recipe("deepseek-fp8"),
            "deepseek-fp8 (no promotion)": get_recipe("deepseek-fp8", promote_every=None)}
    print(f"\nMLP 16-64-64-4, batch {batch} (wgrad K = {batch}), Adam lr 1e-3, {steps} steps")
    print(f"{'seed':<6}{'precision':<30}{'test acc':>9}{'last-20 loss':>14}{'time':>8}")
    for seed in range(seeds):
        for label, precision in runs.items():
            start = time.perf_counter()
            h = Trainer(precision, seed=seed, batch_size=batch, progress=False,
                        telemetry=False, eval_every=10**9).fit(data, steps)
            print(f"{seed:<6}{label:<30}{h.final_test_accuracy:>9.3f}"
                  f"{float(np.mean(h['loss'][-20:])):>14.4f}"
                  f"{time.perf_counter() - start:>7.0f}s", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--no-training", action="store_true", help="only the GEMM errors")
    args = parser.parse_args()
    gemm_errors()
    if not args.no_training:
        training(args.steps, args.seeds, args.batch)
