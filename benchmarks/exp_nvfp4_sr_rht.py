"""NVFP4: what stochastic rounding and the random Hadamard transform buy (issue 11, 4).

Prints the tables notebook 08 (section 4) quotes, over seeds 0..N-1:

1. **SR, the stall.** Regression with four outputs: three learnable targets (a random tanh
   teacher, values about 0.5) and a fourth that is a random sign times ``--loud`` (32), which no
   model can learn. MLP 16-64-64-4, Adam lr 1e-3, batches of ``--batch`` (128), ``--steps`` (600)
   steps; test
   MSE on the learnable targets for: bf16-mixed with the hidden layers frozen (only the output
   layer trains: random features), bf16-mixed, nvfp4 (SR on gradients, the hardware's 8
   random bits per value), nvfp4 without SR.
   Every row of the output layer's dgrad operand holds the loud residual (about 32) with the
   three quiet ones, so the block's amax is 32 and round-to-nearest flushes everything below
   32 / 24 -- every quiet residual, on every step: the hidden layers never see the learnable
   targets. ``share`` = (frozen - run) / (frozen - bf16): the part of bf16's hidden-layer
   learning a run achieves.
2. **RHT, in training.** Per-layer QSNR of the wgrad operands from the recipe telemetry (mean
   over the last three quarters of the run; with the RHT, the rotated operand the GEMM
   multiplies against the rotated input), NVFP4 with and without the 16-point RHT
   (Transformer Engine's matrix): the lab's
   Transformer on char_lm (context 32, 20k characters, batch 16, 40 steps) and, with
   scikit-learn, the MLP 64-64-64-10 on digits() (batch 256, 200 steps); with SR on gradients
   (the recipe) and without.
3. QSNR of NVFP4 and MXFP4 on synthetic operands (64 x 1024, blocks along the last axis) with
   and without the RHT.
4. (``--all``) classification on teacher Gaussians, where SR and RN agree within noise.

    python benchmarks/exp_nvfp4_sr_rht.py                  # seeds 0-2, about 4 minutes
    python benchmarks/exp_nvfp4_sr_rht.py --seeds 1 --loud 64 --all
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
    char_lm,
    get_policy,
    mse_loss,
    teacher_gaussians,
    use_precision,
)
from floatlab.mixed.recipe import get_recipe  # noqa: E402
from floatlab.mixed.recipe_gemm import recipe_run  # noqa: E402
from floatlab.quant.quantize import fake_quantize  # noqa: E402

NO_SR = {"stochastic_rounding": False}


def loud_regression(precision: str, seed: int, loud: float, steps: int,
                    options: dict | None = None, frozen: bool = False, batch: int = 128) -> float:
    """Test MSE of the three learnable targets (see the module docstring, table 1)."""
    rng = np.random.default_rng(0)
    w1, w2 = rng.normal(0, 0.25, (16, 32)), rng.normal(0, 32**-0.5, (32, 3))
    x = rng.standard_normal((4096, 16)).astype(np.float32)
    y = (np.tanh(x @ w1) @ w2).astype(np.float32)
    r = np.random.default_rng(seed)
    with use_precision(get_policy(precision, recipe_options=options)), recipe_run(seed) as run:
        model = MLP((16, 64, 64, 4), seed=seed)
        params = model.parameters()[-2:] if frozen else model.parameters()  # output layer
        opt = Adam(params, lr=1e-3)
        for _ in range(steps):
            idx = r.integers(0, 2048, batch)
            target = np.hstack([y[idx], loud * np.sign(r.standard_normal((batch, 1)))])
            opt.zero_grad()
            mse_loss(model(Tensor(x[idx])), Tensor(target.astype(np.float32))).backward()
            opt.step()
            run.end_step()
        return float(np.mean((model(Tensor(x[2048:])).data[:, :3] - y[2048:]) ** 2))


def sr_stall(seeds: int, loud: float, steps: int, batch: int) -> None:
    print(f"1. loud output (random sign x {loud:g}), {steps} steps of {batch}: test MSE of the "
          "learnable targets; share = (frozen - run) / (frozen - bf16)")
    print(f"{'seed':<6}{'frozen':>8}{'bf16':>8}{'nvfp4':>8}{'no SR':>8}{'share SR':>10}"
          f"{'share RN':>10}")
    for seed in range(seeds):
        frozen = loud_regression("bf16-mixed", seed, loud, steps, frozen=True, batch=batch)
        bf16 = loud_regression("bf16-mixed", seed, loud, steps, batch=batch)
        sr = loud_regression("nvfp4", seed, loud, steps, batch=batch)
        rn = loud_regression("nvfp4", seed, loud, steps, NO_SR, batch=batch)
        gain = frozen - bf16
        print(f"{seed:<6}{frozen:>8.4f}{bf16:>8.4f}{sr:>8.4f}{rn:>8.4f}"
              f"{(frozen - sr) / gain:>10.2f}{(frozen - rn) / gain:>10.2f}", flush=True)


def wgrad_qsnr(model: str, seed: int, options: dict, steps: int) -> dict[str, float]:
    """Mean QSNR per wgrad operand over the last three quarters of an NVFP4 run."""
    if model == "transformer":
        data = char_lm(context=32, max_chars=20000)
        trainer = Trainer(get_recipe("nvfp4", **options), model="transformer", batch_size=16,
                          seed=seed, progress=False, eval_every=10**9)
    else:
        from floatlab.mixed import digits

        data = digits()
        trainer = Trainer(get_recipe("nvfp4", **options), hidden=(64, 64), batch_size=256,
                          seed=seed, progress=False, eval_every=10**9)
    trainer.fit(data, steps)
    run = trainer.recipe_run
    return {k: float(np.mean(run.series(k, "qsnr_db")[steps // 4:]))
            for k in run.history if ".wgrad." in k}


def rht_in_training(seeds: int) -> None:
    print("\n2. RHT gain in dB (QSNR with RHT - without) of the wgrad operands, per layer "
          "(linear0 first)")
    models = [("transformer", 40)]
    try:
        import sklearn  # noqa: F401

        models.append(("digits MLP", 200))
    except ImportError:
        print("   (scikit-learn not installed: the digits MLP rows are skipped)")
    for model, steps in models:
        for sr in (True, False):
            for seed in range(seeds):
                opts = {} if sr else dict(NO_SR)
                on = wgrad_qsnr(model, seed, opts, steps)
                off = wgrad_qsnr(model, seed, {**opts, "hadamard": False}, steps)
                keys = sorted(on, key=lambda k: (int(k.split(".")[0][6:]), k))
                acts = [on[k] - off[k] for k in keys if k.endswith(".b")]
                grads = [on[k] - off[k] for k in keys if k.endswith(".a")]
                print(f"{model:<12}{'SR' if sr else 'RN':<3} seed {seed}  activations (x) "
                      + " ".join(f"{g:+.2f}" for g in acts) + "  | gradients (g) "
                      + " ".join(f"{g:+.2f}" for g in grads), flush=True)


def hadamard_qsnr(seeds: int) -> None:
    def qsnr(x: np.ndarray, scheme) -> float:
        return float(10 * np.log10(np.sum(x**2) / np.sum((x - fake_quantize(x, scheme)) ** 2)))

    print("\n3. QSNR (dB) of synthetic operands, mean over seeds; RHT = 16-point random "
          "Hadamard transform along the blocks")
    print(f"{'operand':<34}{'nvfp4':>8}{'+RHT':>7}{'mxfp4':>8}{'+RHT':>7}")
    shape = (64, 1024)
    for name in ("Gaussian", "Student-t, 3 dof", "1% outliers x20", "per-token scales",
                 "ReLU of Gaussian", "correlated neighbours (AR1 0.95)"):
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
            elif name.startswith("ReLU"):
                x = np.maximum(x, 0)
            elif name.startswith("correlated"):
                for j in range(1, shape[1]):  # x_j = 0.95 x_{j-1} + noise: smooth along blocks
                    x[:, j] = 0.95 * x[:, j - 1] + np.sqrt(1 - 0.95**2) * x[:, j]
            rows.append([qsnr(x, s) for f in ("nvfp4", "mxfp4")
                         for s in (get_scheme(f), get_scheme(f).replace(hadamard=16))])
        m = np.mean(rows, axis=0)
        print(f"{name:<34}{m[0]:>8.2f}{m[1]:>7.2f}{m[2]:>8.2f}{m[3]:>7.2f}")


def classification(seeds: int) -> None:
    data = teacher_gaussians(n=4096)
    print("\n4. classification (teacher Gaussians, 300 steps): test accuracy")
    print(f"{'seed':<6}{'bf16-mixed':>12}{'nvfp4':>8}{'nvfp4 RN':>10}")
    for seed in range(seeds):
        acc = [Trainer(p, seed=seed, batch_size=256, progress=False, telemetry=False,
                       eval_every=10**9).fit(data, 300).final_test_accuracy
               for p in ("bf16-mixed", get_recipe("nvfp4"), get_recipe("nvfp4", **NO_SR))]
        print(f"{seed:<6}{acc[0]:>12.3f}{acc[1]:>8.3f}{acc[2]:>10.3f}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--loud", type=float, default=32.0)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--all", action="store_true", help="also the classification table")
    args = parser.parse_args()
    sr_stall(args.seeds, args.loud, args.steps, args.batch)
    rht_in_training(args.seeds)
    hadamard_qsnr(args.seeds)
    if args.all:
        classification(args.seeds)
