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
14-bit truncating tensor-core accumulator on the E4M3 codes' products, one 32-product block
FMA at a time in float32 passes, and is timed with few repeats; a line after the table
measures why 6x is out of reach for it: the model's six NumPy passes over the step's 7.7M
products cost several times what a 6x step leaves),
and compare() of bf16-mixed + 5 recipes x 500 steps serially and with workers=2 (targets:
under 30 s serially, about half with two workers on two free cores).

The Transformer section (``--transformer only`` runs just it) times the same way a GPT-style
Transformer (d_model 64, 4 heads, 2 layers, context 64, batch 32 of the character data) against
the same model written in plain NumPy float32; targets: 32-true at most 2x the floor, 16-mixed /
bf16-mixed at most 4x; 500 steps of the character model under 60 s (the Trainer's default,
telemetry on; the table's last columns show what the telemetry adds to a step).

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
_parser.add_argument("--recipes", default="", help="comma-separated recipes to time (default: "
                     "all): only their rows, e.g. --recipes nvfp4,mxfp8 --no-compare")
_parser.add_argument("--blas-threads", default="1", help="BLAS threads ('auto': leave as is)")
_parser.add_argument("--transformer", choices=("also", "only", "no"), default="also",
                     help="time the Transformer section too, only, or not")
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
    Trainer,
    Transformer,
    char_lm,
    compare,
    cross_entropy,
    get_policy,
    recipe_run,
    recording,
    sequence_loss,
    teacher_gaussians,
    use_precision,
)
from floatlab.mixed.optim8bit import StateAdam  # noqa: E402
from floatlab.mixed.seqtrain import EVAL_TOKENS  # noqa: E402

SIZES = (16, 64, 64, 4)
BATCH = 512
PRECISIONS = ("32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true")
RECIPES = {"fp8-delayed": 6, "fp8-current": 6, "fp8-rowwise": 6, "fp8-rowwise-gw-hp": 6,
           "msamp-O2": 6, "msamp-O3": 6,
           "mxfp8": 8, "mxfp4": 8, "nvfp4": 8, "deepseek-fp8": 6}  # name: target ratio to the floor
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
    recipe_state = policy.recipe.state if policy.recipe is not None and \
        policy.optimizer_state is None else None
    with use_precision(policy):
        model = MLP(SIZES, seed=0)
        # the optimizer the Trainer builds: per-moment state formats (MS-AMP O2 / O3's FP8 m
        # and FP16 v) are stored by StateAdam; one format for both (DeepSeek's bf16) by Adam
        opt = StateAdam(model.parameters(), lr=1e-3, state=recipe_state) if recipe_state \
            else Adam(model.parameters(), lr=1e-3)
    scaler = (GradScaler() if policy.scaler == "dynamic"
              else StaticScaler(policy.scaler) if policy.scaler else None)

    state = RecipeRun(telemetry=telemetry) if policy.recipe else None
    return _step(policy, opt, scaler, lambda: cross_entropy(model(Tensor(X)), y), full,
                 telemetry, state)


def _step(policy, opt, scaler, loss_of, full: bool, telemetry: bool, state=None):
    """The step a user's loop runs: zero the gradients, ``loss_of()``, backward (scaled when
    the policy has a scaler) and, with ``full``, the optimizer step; ``telemetry`` counts it
    in a StepStats as the Trainer does, ``state`` is the recipe's RecipeRun."""

    def step() -> None:
        stats = StepStats(count_flushed=False) if telemetry else None
        run = recipe_run(run=state) if state is not None else _Null()
        with use_precision(policy), (recording(stats) if stats else _Null()), run:
            opt.zero_grad()
            loss = loss_of()
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



# --------------------------------------------------------------------------- the transformer

T_SHAPE = dict(d_model=64, heads=4, layers=2, context=64)
T_BATCH = 32
T_PRECISIONS = ("32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true")


def numpy_transformer_floor(state, ids, targets, heads, full=True, lr=1e-3):
    """Plain NumPy float32 forward + backward (+ Adam with ``full``) of the Transformer whose
    weights are ``state`` (the lab's state_dict): nanoGPT's model written directly, with the
    same tanh GELU, float32 layer norms and tied embeddings."""
    P = {k: np.array(v, np.float32) for k, v in state.items() if k != "lm_head.weight"}
    names = list(P)
    moments = {k: (np.zeros_like(v), np.zeros_like(v)) for k, v in P.items()}
    layers = len({k.split(".")[2] for k in P if k.startswith("transformer.h.")})
    B, T = ids.shape
    d = P["transformer.wte.weight"].shape[1]
    hd = d // heads
    scale = np.float32(1 / np.sqrt(hd))
    mask = np.triu(np.ones((T, T), bool), 1)
    c, a = np.float32(np.sqrt(2 / np.pi)), np.float32(0.044715)
    flat_ids, flat_y = ids.reshape(-1), targets.reshape(-1)
    rows = np.arange(B * T)
    step_no = [0]

    def ln_fwd(x, w, b):
        mu = x.mean(-1, keepdims=True)
        xc = x - mu
        rstd = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True) + np.float32(1e-5))
        xhat = xc * rstd
        return xhat * w + b, (xhat, rstd, w)

    def ln_bwd(g, cache):
        xhat, rstd, w = cache
        gw, gb = (g * xhat).sum(0), g.sum(0)
        gx = g * w
        gx = rstd * (gx - gx.mean(-1, keepdims=True) - xhat * (gx * xhat).mean(-1, keepdims=True))
        return gx, gw, gb

    def step():
        G = {k: None for k in names}
        wte = P["transformer.wte.weight"]
        x = (wte[ids] + P["transformer.wpe.weight"][:T]).reshape(B * T, d)
        caches = []
        for i in range(layers):
            p = f"transformer.h.{i}."
            h, c1 = ln_fwd(x, P[p + "ln_1.weight"], P[p + "ln_1.bias"])
            qkv = h @ P[p + "attn.c_attn.weight"].T + P[p + "attn.c_attn.bias"]
            q, k, v = (qkv[:, j * d:(j + 1) * d].reshape(B, T, heads, hd).transpose(0, 2, 1, 3)
                       for j in range(3))
            s = (q @ k.transpose(0, 1, 3, 2)) * scale
            s[..., mask] = -np.inf
            e = np.exp(s - s.max(-1, keepdims=True))
            pr = e / e.sum(-1, keepdims=True)
            y = (pr @ v).transpose(0, 2, 1, 3).reshape(B * T, d)
            x = x + y @ P[p + "attn.c_proj.weight"].T + P[p + "attn.c_proj.bias"]
            h2, c2 = ln_fwd(x, P[p + "ln_2.weight"], P[p + "ln_2.bias"])
            f = h2 @ P[p + "mlp.c_fc.weight"].T + P[p + "mlp.c_fc.bias"]
            t = np.tanh(c * (f + a * f * f * f))
            gl = np.float32(0.5) * f * (1 + t)
            x = x + gl @ P[p + "mlp.c_proj.weight"].T + P[p + "mlp.c_proj.bias"]
            caches.append((h, c1, q, k, v, pr, y, h2, c2, f, t, gl))
        hf, cf = ln_fwd(x, P["transformer.ln_f.weight"], P["transformer.ln_f.bias"])
        z = hf @ wte.T
        e = np.exp(z - z.max(1, keepdims=True))
        pz = e / e.sum(1, keepdims=True)
        loss = -np.log(pz[rows, flat_y]).mean()
        # backward
        gz = pz
        gz[rows, flat_y] -= 1
        gz /= B * T
        gwte = gz.T @ hf
        gx, G["transformer.ln_f.weight"], G["transformer.ln_f.bias"] = ln_bwd(gz @ wte, cf)
        for i in reversed(range(layers)):
            p = f"transformer.h.{i}."
            h, c1, q, k, v, pr, y, h2, c2, f, t, gl = caches[i]
            G[p + "mlp.c_proj.weight"], G[p + "mlp.c_proj.bias"] = gx.T @ gl, gx.sum(0)
            ggl = gx @ P[p + "mlp.c_proj.weight"]
            half = np.float32(0.5)
            gf = ggl * (half * (1 + t) + half * f * (1 - t * t) * c * (1 + 3 * a * f * f))
            G[p + "mlp.c_fc.weight"], G[p + "mlp.c_fc.bias"] = gf.T @ h2, gf.sum(0)
            gh2, G[p + "ln_2.weight"], G[p + "ln_2.bias"] = ln_bwd(
                gf @ P[p + "mlp.c_fc.weight"], c2)
            gx = gx + gh2
            G[p + "attn.c_proj.weight"], G[p + "attn.c_proj.bias"] = gx.T @ y, gx.sum(0)
            gy = (gx @ P[p + "attn.c_proj.weight"]).reshape(B, T, heads, hd).transpose(0, 2, 1, 3)
            gpr = gy @ v.transpose(0, 1, 3, 2)
            gv = pr.transpose(0, 1, 3, 2) @ gy
            gs = pr * (gpr - (gpr * pr).sum(-1, keepdims=True)) * scale
            gq, gk = gs @ k, gs.transpose(0, 1, 3, 2) @ q
            gqkv = np.concatenate([g.transpose(0, 2, 1, 3).reshape(B * T, d)
                                   for g in (gq, gk, gv)], 1)
            G[p + "attn.c_attn.weight"], G[p + "attn.c_attn.bias"] = gqkv.T @ h, gqkv.sum(0)
            gh, G[p + "ln_1.weight"], G[p + "ln_1.bias"] = ln_bwd(
                gqkv @ P[p + "attn.c_attn.weight"], c1)
            gx = gx + gh
        gx3 = gx.reshape(B, T, d)
        G["transformer.wpe.weight"] = np.zeros_like(P["transformer.wpe.weight"])
        G["transformer.wpe.weight"][:T] = gx3.sum(0)
        np.add.at(gwte, flat_ids, gx)
        G["transformer.wte.weight"] = gwte
        if full:
            step_no[0] += 1
            c1_, c2_ = 1 - 0.9 ** step_no[0], (1 - 0.999 ** step_no[0]) ** 0.5
            for k in names:
                m, vv = moments[k]
                g = G[k]
                m += (g - m) * np.float32(0.1)
                vv *= np.float32(0.999)
                vv += np.float32(0.001) * g * g
                P[k] -= np.float32(lr / c1_) * m / (np.sqrt(vv) / np.float32(c2_)
                                                     + np.float32(1e-8))
        return loss, G
    return step


def emulated_transformer(precision: str, data, ids, targets, full: bool, telemetry: bool = False):
    """One floatlab training step of the Transformer with the public API (with ``telemetry``:
    counted by a StepStats, as the Trainer does by default)."""
    policy = get_policy(precision)
    with use_precision(policy):
        model = Transformer(data.vocab, seed=0, **T_SHAPE)
        opt = Adam(model.parameters(), lr=1e-3)
    scaler = GradScaler() if policy.scaler == "dynamic" else None
    return _step(policy, opt, scaler, lambda: sequence_loss(model(ids), targets), full,
                 telemetry)


def transformer_section(repeats: int) -> None:
    """The issue's targets: a 32-true step at most 2x the NumPy floor, 16-mixed / bf16-mixed at
    most 4x; 500 steps of the character model under 60 s."""
    data = char_lm(context=T_SHAPE["context"])
    ids, targets, _ = data.batch(np.random.default_rng(0), T_BATCH)
    state = Transformer(data.vocab, seed=0, **T_SHAPE).state_dict()
    fns = {("numpy", "fb"): numpy_transformer_floor(state, ids, targets, T_SHAPE["heads"],
                                                    full=False),
           ("numpy", "step"): numpy_transformer_floor(state, ids, targets, T_SHAPE["heads"])}
    for p in T_PRECISIONS:
        fns[p, "fb"] = emulated_transformer(p, data, ids, targets, full=False)
        fns[p, "step"] = emulated_transformer(p, data, ids, targets, full=True)
        fns[p, "tel"] = emulated_transformer(p, data, ids, targets, full=True, telemetry=True)
    t = timed_interleaved(fns, repeats, warmup=3)
    print(f"Transformer d_model {T_SHAPE['d_model']}, {T_SHAPE['heads']} heads, "
          f"{T_SHAPE['layers']} layers, context {T_SHAPE['context']}, batch {T_BATCH}, vocab "
          f"{len(data.vocab)}, Adam; median of {repeats} calls in interleaved rounds")
    print()
    head = ("run", "fwd+bwd ms", "x floor", "step ms", "x floor", "target",
            "step+telemetry ms", "telemetry")
    fb0, st0 = t["numpy", "fb"], t["numpy", "step"]
    rows = [("numpy float32 (the floor)", f"{fb0 * 1e3:.1f}", "1.00x", f"{st0 * 1e3:.1f}",
             "1.00x", "", "-", "")]
    for p in T_PRECISIONS:
        fb, st, tel = t[p, "fb"], t[p, "step"], t[p, "tel"]
        target = {"32-true": "<= 2x", "16-mixed": "<= 4x", "bf16-mixed": "<= 4x"}.get(p, "")
        rows.append((f"floatlab {p}", f"{fb * 1e3:.1f}", f"{fb / fb0:.2f}x", f"{st * 1e3:.1f}",
                     f"{st / st0:.2f}x", target, f"{tel * 1e3:.1f}", f"+{tel / st - 1:.0%}"))
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, tuple("-" * w for w in widths), *rows]:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    print()
    for precision in ("32-true", "bf16-mixed"):
        for telemetry in (False, True):
            start, cpu = time.perf_counter(), time.process_time()
            h = Trainer(precision, model="transformer", progress=False, telemetry=telemetry,
                        eval_every=100).fit(data, steps=500)
            total, cpu = time.perf_counter() - start, time.process_time() - cpu
            # CPU seconds are what the run costs when it has a core to itself (BLAS runs on one
            # thread); wall seconds include waiting for a core when the machine is busy.
            print(f"500 steps of the character model, {precision}, telemetry "
                  f"{'on ' if telemetry else 'off'}: {total:.1f} s wall, {cpu:.1f} s CPU "
                  f"(target < 60 s; 5 evaluations of {EVAL_TOKENS} validation tokens "
                  f"included), validation loss {h.final_val_loss:.3f}, perplexity "
                  f"{h.final_val_perplexity:.2f}")


def main() -> int:
    if ARGS.transformer == "only":
        transformer_section(max(ARGS.repeats // 10, 5))
        return 0
    data = teacher_gaussians()
    X, y = data.X_train[:BATCH], data.y_train[:BATCH]
    if ARGS.recipes:  # only the chosen recipes' rows (then compare() of COMPARE_RECIPES,
        #              the fixed set, unless --no-compare)
        recipes(data, X, y)
        return 0
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
    if ARGS.transformer == "also":
        print()
        transformer_section(max(n // 10, 5))
    return 0


def recipes(data, X: np.ndarray, y: np.ndarray) -> None:
    """Recipe step times against the floor, and the recipes' compare() serial vs workers=2."""
    n = ARGS.recipe_repeats
    floor_step = numpy_floor(np.array(X), y, full=True)
    head = ("recipe", "step ms", "floor ms", "x floor", "target")
    rows = []
    chosen = [r.strip() for r in ARGS.recipes.split(",") if r.strip()] or list(RECIPES)
    unknown = [r for r in chosen if r not in RECIPES]
    if unknown:
        raise SystemExit(f"--recipes: unknown {unknown}; timed recipes: {', '.join(RECIPES)}")
    for name in chosen:
        target = RECIPES[name]
        reps = max(n // 10, 3) if name == "deepseek-fp8" else n
        # The floor is timed in the same interleaved rounds as each recipe (its own column), so
        # that load from other processes moves both: a floor timed once varies 0.35-0.55 ms.
        t = timed_interleaved({"floor": floor_step, name: emulated(
            name, X, y, full=True, telemetry=False)}, reps, warmup=2)
        st, floor = t[name], t["floor"]
        ok = "ok" if st / floor <= target else "MISSED"
        rows.append((name, f"{st * 1e3:.2f}", f"{floor * 1e3:.2f}", f"{st / floor:.2f}x",
                     f"<= {target}x {ok}"))
    print(f"\ntraining recipes: full step (fwd + bwd + Adam, no telemetry), median of {n} "
          f"calls (deepseek-fp8: {max(n // 10, 3)}), each against the floor timed in its rounds")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, tuple("-" * w for w in widths), *rows]:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    if "deepseek-fp8" in chosen:  # the bound explains that row; RECIPES always holds it
        deepseek_lower_bound(floor_step, n)
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


def step_gemm_shapes() -> list[tuple[int, int, int]]:
    """(m, k, n) of every matrix product in one training step of the reference MLP: forward and
    weight gradient of each layer, input gradient of every layer but the first (nothing reads
    the first layer's)."""
    shapes = []
    for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:], strict=True)):
        shapes += [(BATCH, a, b), (a, BATCH, b)]  # x @ W, x.T @ g
        if i:
            shapes.append((BATCH, b, a))  # g @ W.T
    return shapes


def deepseek_lower_bound(floor_step, repeats: int) -> None:
    """Why deepseek-fp8 cannot reach 6x by exact emulation in NumPy: the least work any
    per-product accumulator model must do against the budget a 6x step leaves.

    A narrow accumulator (the block FMA's alignment truncation, or a per-addition rounding)
    changes each product according to its output's running value, so no BLAS call computes the
    sums: NumPy touches every product at least once, and the block-FMA model needs about six
    passes per product (see floatlab.blockfma). The cheapest NumPy pass is one multiply of two
    cache-resident arrays (32768 values), timed here in float64 (exact products of dequantised
    values) and float32 (the products of the E4M3 codes, which deepseek-fp8 sums: its passes),
    then charged once per product of the step's matrix products."""
    total = sum(m * k * n for m, k, n in step_gemm_shapes())
    size = 32768
    rng = np.random.default_rng(0)

    def one_pass(dtype, calls: int = 64):
        a, b = rng.random(size).astype(dtype), rng.random(size).astype(dtype)
        out = np.empty(size, dtype)

        def run() -> None:
            for _ in range(calls):
                np.multiply(a, b, out=out)
        return run, calls * size

    f64, n64 = one_pass(np.float64)
    f32, n32 = one_pass(np.float32)
    t = timed_interleaved({"floor": floor_step, "float64": f64, "float32": f32}, repeats,
                          warmup=2)
    floor = t["floor"]
    per64, per32 = t["float64"] / n64, t["float32"] / n32
    budget = 5 * floor / total  # what a 6x step leaves per product beyond the floor itself
    print(f"deepseek-fp8 lower bound: {total / 1e6:.2f}M products per step; the cheapest NumPy "
          f"pass (in cache) costs {per64 * 1e9:.2f} ns a value in float64, "
          f"{per32 * 1e9:.2f} ns in float32, so ONE pass over the products is "
          f"{total * per64 / floor:.1f}x / {total * per32 / floor:.1f}x the floor step by "
          f"itself; a 6x step leaves {budget * 1e9:.2f} ns per product, and the block-FMA model "
          f"needs about six float32 passes")


if __name__ == "__main__":
    sys.exit(main())
