"""DeepSeek-FP8 with and without promotion of the 14-bit accumulator, in training (issue 11, 5).

The recipe "deepseek-fp8" sums every GEMM in a truncating ``e8m13`` accumulator (what
DeepSeek-V3 measured on the H800's FP8 tensor cores) and copies the partial sum to float32 every
128 products; as DeepSeek-V3's kernel, it sums the products of the E4M3 *codes* and multiplies
each 128-tile's sum by its two scales at promotion (floatlab.mixed.promoted_gemm). Unpromoted
variants sum products of dequantised values (no one scale spans tiles). By default the
accumulator is a tensor core's 32-product block FMA (``Accumulator(..., block_fma=32)``, see
floatlab.blockfma): each step aligns 32 exact products
and the running value to their largest exponent, truncates the shifted-out bits and truncates
the exact sum once. ``recipe_options={"promote_every": None}`` never promotes;
``block_fma=None`` truncates after every product (the older, more pessimistic model).

Two parts:

1. GEMM errors, split in two: the error E4M3 quantisation of the operands (1x128 tiles) causes
   (exact sums of the quantised products, against the exact product of the originals), and the
   error each accumulator adds (against the exact sum of the quantised products). Three kinds of
   sums: a forward GEMM (N(0,1) inputs times N(0, 1/K) weights), a weight gradient (ReLU
   activations times random-sign gradients, K = the batch), and positive terms (every product
   of one sign: a coherent sum).
2. Training: a wide first layer (teacher Gaussians with 1024 inputs, so the forward GEMM of
   layer 1 has K = 1024; 8192 rows, half for testing), MLP 1024-64-64-4, Adam lr 1e-3, batch
   128; bf16-mixed against deepseek-fp8 promoted every 128, never promoted (block FMA), and never
   promoted with per-product truncation; seeds 0..N-1; test accuracy and the mean training loss
   of the last 20 steps. Random-sign sums: no run loses accuracy.
3. Swamping (``--massive``): where no promotion does lose accuracy. A *massive activation*
   (Sun et al. 2024; Dettmers et al. 2022's outlier features) sits first in the inner dimension:
   input feature 0 is the constant 4096 (the 1x128 activation tile's amax, so E4M3 holds it
   exactly), the other 1023 features are N(0, 1), the informative ones at 128..1023. A frozen
   first layer 1024 -> 32 (a pretrained feature layer; frozen so the outlier's huge product is a
   fixed term its bias cancels, as massive activations act as biases -- a trainable weight on a
   4096 input would get a 4096x effective Adam step) feeds a trained linear head. The outlier's
   product is 4096 * 0.25 = 1024 = 2**10 in every hidden unit; an e8m13 accumulator holding it
   has an ulp (its truncation quantum) of 2**(10 - 13) = 0.125, while the other products
   |x w| have a median of 0.017: without promotion 97% of them are truncated away (swamped)
   for the rest of the sum. Promoted every 128, only the first chunk (the outlier's own) is
   swamped, and it holds no information. The same task without the outlier is the control.

    python benchmarks/exp_deepseek_promotion.py               # 150 steps, seeds 0-2 (~5 min)
    python benchmarks/exp_deepseek_promotion.py --steps 50 --seeds 1 --no-training
    python benchmarks/exp_deepseek_promotion.py --massive     # part 3 only (~1 min)
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import floatlab  # noqa: E402
from floatlab import Accumulator  # noqa: E402
from floatlab.mixed import MLP, Dataset, Tensor, Trainer, linear, relu, teacher_gaussians  # noqa: E402
from floatlab.mixed.nn import Module  # noqa: E402
from floatlab.mixed.promoted_gemm import promoted_matmul, tiled_operand  # noqa: E402
from floatlab.mixed.recipe import get_recipe  # noqa: E402
from floatlab.quant.quantize import fake_quantize  # noqa: E402
from floatlab.quant.scheme import get_scheme  # noqa: E402

ACCUMULATORS = {
    "block, promoted": Accumulator("e8m13", "toward_zero", block_fma=32, chunk=128,
                                   promote="float32"),
    "block, never": Accumulator("e8m13", "toward_zero", block_fma=32),
    "per-add, promoted": Accumulator("e8m13", "toward_zero", chunk=128, promote="float32"),
    "per-add, never": Accumulator("e8m13", "toward_zero"),
}


def _rel(y: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))


def gemm_cases(k: int, rng: np.random.Generator) -> dict:
    """The three kinds of sums, as (a, b) with inner dimension k."""
    return {"forward: x . W": (rng.standard_normal((64, k)),
                               rng.standard_normal((k, 32)) / np.sqrt(k)),
            "wgrad: ReLU(x)^T . g": (np.maximum(rng.standard_normal((64, k)), 0),
                                     rng.standard_normal((k, 32))),
            "positive terms": (rng.random((64, k)), rng.random((k, 32)))}


CODES = "codes, promoted"  # the recipe's kernel: E4M3 codes summed, tile scales at promotion


def gemm_errors(k: int, a: np.ndarray, b: np.ndarray, accumulators=ACCUMULATORS) -> dict:
    """{"E4M3 operands": ..., accumulator label: ...}: the two parts of one GEMM's error.

    The accumulators sum products of the dequantised values; CODES is what the deepseek-fp8
    recipe computes (floatlab.mixed.promoted_gemm: the block FMA on the codes' products per
    128-tile, each tile's sum scaled into float32), against the same exact sum."""
    qa = fake_quantize(a, "fp8_1x128")            # 1x128 tiles along K, as the recipe does
    qb = fake_quantize(b.T, "fp8_1x128").T
    exact, quantised = a @ b, qa @ qb             # float64: far more precise than the errors
    out = {"E4M3 operands": _rel(quantised, exact)}
    out.update({label: _rel(floatlab.matmul(qa, qb, acc), quantised)
                for label, acc in accumulators.items()})
    scheme = get_scheme("fp8_1x128")
    ta, tb = tiled_operand(a, scheme)[0], tiled_operand(np.ascontiguousarray(b.T), scheme)[0]
    out[CODES] = _rel(promoted_matmul(ta, tb, accumulators["block, promoted"]), quantised)
    return out


def print_gemm_errors() -> None:
    rng = np.random.default_rng(0)
    print("normwise relative error of one GEMM (64 x K times K x 32): E4M3 operand quantisation "
          "and each e8m13 accumulator's own error")
    head = ["E4M3 operands", *ACCUMULATORS, CODES]
    print(f"{'sum':<24}{'K':>6}" + "".join(f"{h:>19}" for h in head))
    for k in (1024, 4096):
        for name, (a, b) in gemm_cases(k, rng).items():
            errs = gemm_errors(k, a, b)
            print(f"{name:<24}{k:>6}" + "".join(f"{errs[h]:>19.1e}" for h in head), flush=True)


def training(steps: int, seeds: int, batch: int) -> None:
    data = teacher_gaussians(n=8192, dim=1024)
    runs = {"bf16-mixed": "bf16-mixed",
            "deepseek-fp8 (promote 128)": get_recipe("deepseek-fp8"),
            "deepseek-fp8 (never)": get_recipe("deepseek-fp8", promote_every=None),
            "deepseek-fp8 (never, per-add)": get_recipe("deepseek-fp8", promote_every=None,
                                                        block_fma=None)}
    print(f"\nMLP 1024-64-64-4 (layer 1 forward K = 1024), batch {batch}, Adam lr 1e-3, "
          f"{steps} steps")
    print(f"{'seed':<6}{'precision':<32}{'test acc':>9}{'last-20 loss':>14}{'time':>8}")
    for seed in range(seeds):
        for label, precision in runs.items():
            start = time.perf_counter()
            h = Trainer(precision, seed=seed, batch_size=batch, progress=False,
                        telemetry=False, eval_every=10**9).fit(data, steps)
            print(f"{seed:<6}{label:<32}{h.final_test_accuracy:>9.4f}"
                  f"{float(np.mean(h['loss'][-20:])):>14.4f}"
                  f"{time.perf_counter() - start:>7.0f}s", flush=True)


MASSIVE, OUTLIER_WEIGHT = 4096.0, 0.25  # their product 1024 = 2**10: e8m13's quantum 0.125


def massive_task(seed: int, massive: float = MASSIVE, dim: int = 1024, hidden: int = 32,
                 start: int = 128, n: int = 2048, classes: int = 4):
    """(data, model factory) of part 3: feature 0 is the constant ``massive`` (0: the control),
    features ``start``.. are read by a frozen ReLU layer whose bias cancels the outlier's term;
    the labels are a random linear teacher on that layer's output (a linear head can learn it)."""
    rng = np.random.default_rng(seed)
    w = np.zeros((hidden, dim))
    w[:, start:] = rng.normal(0.0, np.sqrt(2.0 / (dim - start)), (hidden, dim - start))
    sign = np.where(np.arange(hidden) % 2 == 0, 1.0, -1.0)
    w[:, 0] = OUTLIER_WEIGHT * sign
    bias = -massive * OUTLIER_WEIGHT * sign     # exact in bf16 and float32 (a power of two)
    x = rng.standard_normal((n, dim))
    x[:, 0] = 0.0
    teacher = rng.normal(0.0, np.sqrt(1.0 / hidden), (hidden, classes))
    y = np.argmax(np.maximum(x @ w.T, 0.0) @ teacher, axis=1)
    x[:, 0] = massive
    data = Dataset.from_arrays(x, y, seed=seed, name="massive activation")
    return data, lambda: FrozenFeatures(w, bias, classes, seed)


class FrozenFeatures(Module):
    """A frozen Linear + ReLU (plain Tensors: no gradients) under a trained linear head."""

    def __init__(self, w: np.ndarray, bias: np.ndarray, classes: int, seed: int) -> None:
        self.w1, self.b1 = Tensor(w), Tensor(bias)
        self.head = MLP((w.shape[0], classes), seed=seed)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(relu(linear(x, self.w1, self.b1)))


MASSIVE_RUNS = {"bf16-mixed": "bf16-mixed",
                "promoted every 128": get_recipe("deepseek-fp8"),
                "never (block FMA)": get_recipe("deepseek-fp8", promote_every=None),
                "never (per product)": get_recipe("deepseek-fp8", promote_every=None,
                                                  block_fma=None)}


def massive_run(precision, seed: int, massive: float = MASSIVE, steps: int = 100, **task):
    data, model = massive_task(seed, massive, **task)
    return Trainer(precision, model=model(), seed=seed, batch_size=64, lr=1e-2, progress=False,
                   telemetry=False, eval_every=10**9).fit(data, steps)


def swamped_fraction(seed: int = 0) -> float:
    """The share of the non-outlier products below e8m13's quantum at 2**10 (lost entirely)."""
    data, model = massive_task(seed)
    w = model().w1.data
    products = np.abs(data.X_train[:64, 128:, None] * w.T[None, 128:, :])
    return float(np.mean(products < 2.0 ** (10 - 13)))


def massive_table(seeds: int, steps: int) -> None:
    print(f"\nswamping: massive activation {MASSIVE:g} first in K = 1024 (frozen layer 1024-32, "
          f"linear head trained, batch 64, Adam lr 1e-2, {steps} steps); the outlier's product "
          f"2**10 sets e8m13's quantum to 0.125; {swamped_fraction():.0%} of the other products "
          "lie below it")
    print("test accuracy (mean training loss of the last 10 steps)")
    print(f"{'run':<34}" + "".join(f"{'seed ' + str(s):>17}" for s in range(seeds)))
    for massive in (MASSIVE, 0.0):
        for label, precision in MASSIVE_RUNS.items():
            cells = []
            for seed in range(seeds):
                h = massive_run(precision, seed, massive, steps)
                cells.append(f"{h.final_test_accuracy:.1%} ({np.mean(h['loss'][-10:]):.3f})")
            name = label if massive else f"{label}, no outlier"
            print(f"{name:<34}" + "".join(f"{c:>17}" for c in cells), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--no-training", action="store_true", help="only the GEMM errors")
    parser.add_argument("--massive", action="store_true", help="only part 3 (swamping)")
    args = parser.parse_args()
    if args.massive:
        massive_table(args.seeds, 100)
        raise SystemExit
    print_gemm_errors()
    if not args.no_training:
        training(args.steps, args.seeds, args.batch)
    massive_table(args.seeds, 100)
