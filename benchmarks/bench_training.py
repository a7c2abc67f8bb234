"""Time one training step of the reference MLP under floatlab's emulated precisions.

The network is the reference experiment's: MLP 16-64-64-4 (ReLU), batch 512, Adam, cross-entropy.
The floor is the same network written in plain NumPy float32: forward + backward, and a full
step (+ a NumPy Adam update). Emulated rows time the same two things (the full step includes the
loss scaler where the policy has one), without telemetry, and the full step with telemetry;
ratios are to the matching floor. Rows are timed in interleaved rounds, so that load from other
processes spreads over all of them. Then the whole reference compare() (5 precisions, 500
steps) is timed.

Targets (from the issue): a mixed step at most 3x the floor; compare() under 30 s.

Training recipes (issue 11; --no-recipes skips them): the full step of each recipe against the
same floor (targets: FP8 recipes at most 6x, MX / NVFP4 at most 8x; deepseek-fp8 emulates a
14-bit truncating accumulator one inner index at a time and is timed with few repeats), and
compare() of bf16-mixed + 5 recipes x 500 steps serially and with workers=2 (targets: under
30 s serially, about half with two workers on two free cores).

    python benchmarks/bench_training.py                 # everything
    python benchmarks/bench_training.py --repeats 50 --no-compare

BLAS threads: the matrices are tiny (512 x 64), where OpenBLAS threads only add wake-up latency
and, when other processes compete for the cores, make a matmul 10-100x slower. The script pins
BLAS to one thread unless --blas-threads says otherwise (the setting applies to the floor and the
emulation alike, and must happen before NumPy is imported). Trainer.fit and compare() pin one
BLAS thread themselves (threadpoolctl, restored afterwards), whatever this script sets.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
_parser.add_argument("--repeats", type=int, default=200, help="timed steps per row")
_parser.add_argument("--no-compare", action="store_true", help="skip timing compare()")
_parser.add_argument("--no-recipes", action="store_true", help="skip the training recipes")
_parser.add_argument("--recipe-repeats", type=int, default=30, help="timed steps per recipe")
_parser.add_argument("--blas-threads", default="1", help="BLAS threads ('auto': leave as is)")
ARGS = _parser.parse_args() if __name__ == "__main__" else _parser.parse_args([])
if ARGS.blas_threads != "auto":
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, ARGS.blas_threads)

import numpy as np  # noqa: E402 - after the BLAS thread setting

import floatlab  # noqa: E402
from floatlab.mixed import (  # noqa: E402
    MLP,
    Adam,
    GradScaler,
    RecipeRun,
    StaticScaler,
    StepStats,
    Tensor,
    compare,
    cross_entropy,
    get_policy,
    recipe_run,
    recording,
    teacher_gaussians,
    use_precision,
)

SIZES = (16, 64, 64, 4)
BATCH = 512
PRECISIONS = ("32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true")
RECIPES = {"fp8-delayed": 6, "fp8-current": 6, "fp8-rowwise": 6, "msamp-O2": 6, "mxfp8": 8,
           "mxfp4": 8, "nvfp4": 8, "deepseek-fp8": 6}  # name: target ratio to the floor
COMPARE_RECIPES = ("bf16-mixed", "fp8-delayed", "fp8-current", "mxfp8", "mxfp4", "nvfp4")


def timed(fn, repeats: int, warmup: int = 10) -> float:
    """Median seconds per call."""
    return timed_interleaved({"f": fn}, repeats, warmup)["f"]


def timed_interleaved(fns: dict, repeats: int, warmup: int = 10, rounds: int = 5) -> dict:
    """Median seconds per call of each function, timed round-robin in ``rounds`` rounds."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict = {name: [] for name in fns}
    per_round = max(repeats // rounds, 1)
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(per_round):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


# --------------------------------------------------------------------------- the floor

def numpy_floor(X: np.ndarray, y: np.ndarray, full: bool):
    """Plain NumPy float32 forward + backward of the same MLP (He init, zero biases), and with
    ``full`` an Adam update (lr 1e-3, torch's formula) of the six parameter arrays."""
    rng = np.random.default_rng(0)
    Ws = [rng.normal(0, np.sqrt(2 / a), (a, b)).astype(np.float32)
          for a, b in zip(SIZES[:-1], SIZES[1:], strict=True)]
    bs = [np.zeros(b, np.float32) for b in SIZES[1:]]
    params = Ws + bs
    moments = [(np.zeros_like(p), np.zeros_like(p)) for p in params]
    rows = np.arange(len(y))
    t = [0]

    def adam(grads: list) -> None:
        t[0] += 1
        c1, c2 = 1 - 0.9 ** t[0], (1 - 0.999 ** t[0]) ** 0.5
        for p, (m, v), g in zip(params, moments, grads, strict=True):
            m += (g - m) * 0.1
            v *= 0.999
            v += 0.001 * g * g
            p -= (1e-3 / c1) * m / (np.sqrt(v) / c2 + 1e-8)

    def step() -> None:
        acts, pre = [X], []
        for i, (W, b) in enumerate(zip(Ws, bs, strict=True)):
            z = acts[-1] @ W + b
            pre.append(z)
            acts.append(np.maximum(z, 0) if i < len(Ws) - 1 else z)
        z = acts[-1]
        e = np.exp(z - z.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
        _loss = -np.log(p[rows, y]).mean()
        g = p
        g[rows, y] -= 1
        g /= len(y)
        gWs, gbs = [None] * len(Ws), [None] * len(Ws)
        for i in reversed(range(len(Ws))):
            gWs[i], gbs[i] = acts[i].T @ g, g.sum(axis=0)
            if i:
                g = (g @ Ws[i].T) * (pre[i - 1] > 0)
        if full:
            adam(gWs + gbs)

    return step


# --------------------------------------------------------------------------- emulated steps

def emulated(precision: str, X: np.ndarray, y: np.ndarray, full: bool, telemetry: bool):
    """One floatlab training step written with the public API, as a user's own loop would."""
    policy = get_policy(precision)
    with use_precision(policy):
        model = MLP(SIZES, seed=0)
        opt = Adam(model.parameters(), lr=1e-3)
    scaler = (GradScaler() if policy.scaler == "dynamic"
              else StaticScaler(policy.scaler) if policy.scaler else None)

    state = RecipeRun(telemetry=telemetry) if policy.recipe else None

    def step() -> None:
        stats = StepStats() if telemetry else None
        run = recipe_run(run=state) if state is not None else _Null()
        with use_precision(policy), (recording(stats) if stats else _Null()), run:
            opt.zero_grad()
            loss = cross_entropy(model(Tensor(X)), y)
            if scaler is not None:
                scaler.scale(loss).backward()
                if full:
                    scaler.step(opt)
                    scaler.update()
            else:
                loss.backward()
                if full:
                    opt.step()

    return step


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def rounding_microbench(repeats: int) -> list[tuple[str, float]]:
    x = np.random.default_rng(0).standard_normal(32768).astype(np.float32)
    return [(f, timed(lambda f=f: floatlab.round(x, f, dtype=np.float32), repeats) * 1e6)
            for f in ("fp16", "bf16", "float8_e5m2")]


def main() -> int:
    data = teacher_gaussians()
    X, y = data.X_train[:BATCH], data.y_train[:BATCH]
    n = ARGS.repeats
    fns = {("numpy", "fb"): numpy_floor(np.array(X), y, full=False),
           ("numpy", "step"): numpy_floor(np.array(X), y, full=True)}
    for p in PRECISIONS:
        fns[p, "fb"] = emulated(p, X, y, full=False, telemetry=False)
        fns[p, "step"] = emulated(p, X, y, full=True, telemetry=False)
        fns[p, "tel"] = emulated(p, X, y, full=True, telemetry=True)
    t = timed_interleaved(fns, n)
    print(f"MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, Adam; median of {n} calls in "
          f"interleaved rounds; BLAS threads: "
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'default')}; {os.cpu_count()} CPUs; "
          f"numpy {np.__version__}")
    print()
    head = ("run", "fwd+bwd ms", "x floor", "step ms", "x floor", "step+telemetry ms")
    fb0, st0 = t["numpy", "fb"], t["numpy", "step"]
    rows = [("numpy float32 (the floor)", f"{fb0 * 1e3:.2f}", "1.00x", f"{st0 * 1e3:.2f}",
             "1.00x", "-")]
    for p in PRECISIONS:
        fb, st, tel = t[p, "fb"], t[p, "step"], t[p, "tel"]
        rows.append((f"floatlab {p}", f"{fb * 1e3:.2f}", f"{fb / fb0:.2f}x",
                     f"{st * 1e3:.2f}", f"{st / st0:.2f}x", f"{tel * 1e3:.2f}"))
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, tuple("-" * w for w in widths), *rows]:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    print()
    print("rounding core, 32768 float32 values -> format, dtype=float32 out: "
          + ", ".join(f"{f} {us:.0f} us" for f, us in rounding_microbench(max(n // 2, 10))))
    if not ARGS.no_compare:
        print()
        start = time.perf_counter()
        result = compare(PRECISIONS, steps=500, progress=False, data=data)
        total = time.perf_counter() - start
        print(result)
        print(f"\ncompare() of {len(PRECISIONS)} precisions x 500 steps (telemetry on): "
              f"{total:.1f} s (target < 30 s)")
    if not ARGS.no_recipes:
        recipes(data, X, y)
    return 0


def recipes(data, X: np.ndarray, y: np.ndarray) -> None:
    """Recipe step times against the floor, and the recipes' compare() serial vs workers=2."""
    n = ARGS.recipe_repeats
    floor = timed(numpy_floor(np.array(X), y, full=True), 200)
    print(f"\ntraining recipes: full step (fwd + bwd + Adam, no telemetry), median of {n} "
          f"calls (deepseek-fp8: {max(n // 10, 3)}); floor {floor * 1e3:.2f} ms")
    head = ("recipe", "step ms", "x floor", "target")
    rows = []
    for name, target in RECIPES.items():
        reps = max(n // 10, 3) if name == "deepseek-fp8" else n
        st = timed(emulated(name, X, y, full=True, telemetry=False), reps, warmup=2)
        ok = "ok" if st / floor <= target else "MISSED"
        rows.append((name, f"{st * 1e3:.2f}", f"{st / floor:.2f}x", f"<= {target}x {ok}"))
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, tuple("-" * w for w in widths), *rows]:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    if ARGS.no_compare:
        return
    times = {}
    for workers in (1, 2):
        start = time.perf_counter()
        result = compare(COMPARE_RECIPES, steps=500, progress=False, data=data, workers=workers)
        times[workers] = time.perf_counter() - start
    print()
    print(result)
    print(f"\ncompare() of {', '.join(COMPARE_RECIPES)} x 500 steps (telemetry on): serial "
          f"{times[1]:.1f} s (target < 30 s), workers=2 {times[2]:.1f} s "
          f"({times[1] / times[2]:.2f}x faster)")


if __name__ == "__main__":
    sys.exit(main())
