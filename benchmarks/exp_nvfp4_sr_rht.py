"""NVFP4: what stochastic rounding and the random Hadamard transform buy (issue 11, 4).

Prints the tables notebook 08 (section 4) quotes, over seeds 0..N-1:

1. Classification (teacher-labelled Gaussians, 4096 rows, MLP 16-64-64-4, Adam lr 1e-3, batch
   256, 300 steps): test accuracy of bf16-mixed, nvfp4 and nvfp4 without SR on gradients. Here
   the two NVFP4 runs agree within noise.
2. Regression with a loud, unlearnable output (three targets from a random tanh teacher plus a
   fourth that is Gaussian noise of size ``--loud``; same MLP with 4 outputs, MSE, 300 steps):
   test MSE on the three learnable targets. The loud residual sets every dgrad block's scale,
   round-to-nearest flushes the quiet residuals, stochastic rounding keeps them on average.
3. QSNR of NVFP4 and MXFP4 operands with and without the 16-point RHT, for Gaussian,
   Student-t (3 dof), 1%-outlier and per-token-scaled operands (64 x 1024).

    python benchmarks/exp_nvfp4_sr_rht.py                  # seeds 0-2, about 2 minutes
    python benchmarks/exp_nvfp4_sr_rht.py --seeds 1 --loud 1000
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from floatlab import get_scheme  # noqa: E402
from floatlab.mixed import (  # noqa: E402
    MLP,
    Adam,
    Tensor,
    Trainer,
    get_policy,
    mse_loss,
    teacher_gaussians,
    use_precision,
)
from floatlab.mixed.recipe import get_recipe  # noqa: E402
from floatlab.mixed.recipe_gemm import recipe_run  # noqa: E402
from floatlab.quant.quantize import fake_quantize  # noqa: E402

NO_SR = {"stochastic_rounding": False}


def classification(seeds: int) -> None:
    data = teacher_gaussians(n=4096)
    print("classification: test accuracy")
    print(f"{'seed':<6}{'bf16-mixed':>12}{'nvfp4':>8}{'nvfp4 RN':>10}")
    for seed in range(seeds):
        acc = [Trainer(p, seed=seed, batch_size=256, progress=False, telemetry=False,
                       eval_every=10**9).fit(data, 300).final_test_accuracy
               for p in ("bf16-mixed", get_recipe("nvfp4"), get_recipe("nvfp4", **NO_SR))]
        print(f"{seed:<6}{acc[0]:>12.3f}{acc[1]:>8.3f}{acc[2]:>10.3f}", flush=True)


def regression(seeds: int, loud: float, steps: int) -> None:
    rng = np.random.default_rng(0)
    w1, w2 = rng.normal(0, 0.25, (16, 32)), rng.normal(0, 32**-0.5, (32, 3))
    x = rng.standard_normal((4096, 16)).astype(np.float32)
    y = (np.tanh(x @ w1) @ w2).astype(np.float32)

    def run(precision: str, seed: int, options: dict | None = None) -> float:
        r = np.random.default_rng(seed)
        with use_precision(get_policy(precision, recipe_options=options)), recipe_run(seed) as rr:
            model = MLP((16, 64, 64, 4), seed=seed)
            opt = Adam(model.parameters(), lr=1e-3)
            for _ in range(steps):
                idx = r.integers(0, 2048, 256)
                target = np.hstack([y[idx], loud * r.standard_normal((256, 1))])
                opt.zero_grad()
                mse_loss(model(Tensor(x[idx])), Tensor(target.astype(np.float32))).backward()
                opt.step()
                if rr is not None:
                    rr.end_step()
            return float(np.mean((model(Tensor(x[2048:])).data[:, :3] - y[2048:]) ** 2))

    print(f"\nregression with a loud output of size {loud:g}, {steps} steps: test MSE of the "
          "learnable targets")
    print(f"{'seed':<6}{'bf16-mixed':>12}{'nvfp4':>8}{'nvfp4 RN':>10}{'RN / SR':>9}")
    for seed in range(seeds):
        mse = [run("bf16-mixed", seed), run("nvfp4", seed), run("nvfp4", seed, NO_SR)]
        print(f"{seed:<6}{mse[0]:>12.4f}{mse[1]:>8.4f}{mse[2]:>10.4f}{mse[2] / mse[1]:>9.2f}",
              flush=True)


def hadamard_qsnr(seeds: int) -> None:
    def qsnr(x: np.ndarray, scheme) -> float:
        return float(10 * np.log10(np.sum(x**2) / np.sum((x - fake_quantize(x, scheme)) ** 2)))

    print("\nQSNR (dB), mean over seeds; RHT = 16-point random Hadamard transform")
    print(f"{'operand':<27}{'nvfp4':>8}{'+RHT':>7}{'mxfp4':>8}{'+RHT':>7}")
    shape = (64, 1024)
    for name in ("Gaussian", "Student-t, 3 dof", "1% outliers x20", "per-token scales"):
        rows = []
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            x = rng.standard_normal(shape)
            if name.startswith("Student"):
                x = rng.standard_t(3, shape)
            elif name.startswith("1%"):
                x[rng.random(shape) < 0.01] *= 20
            elif name.startswith("per-token"):
                x *= np.exp(rng.standard_normal(shape[1]))
            rows.append([qsnr(x, s) for f in ("nvfp4", "mxfp4")
                         for s in (get_scheme(f), get_scheme(f).replace(hadamard=16))])
        m = np.mean(rows, axis=0)
        print(f"{name:<27}{m[0]:>8.2f}{m[1]:>7.2f}{m[2]:>8.2f}{m[3]:>7.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--loud", type=float, default=100.0)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    hadamard_qsnr(args.seeds)
    regression(args.seeds, args.loud, args.steps)
    classification(args.seeds)
