"""Throughput of rounding float32 arrays to low-precision formats, floatlab against its peers.

    python benchmarks/bench_rounding.py [--n 4000000] [--repeat 5]

Each row rounds the same N float32 values and returns them as float32, for two data sets:
``spread`` (|x| log-uniform over 2**-30 .. 2**30, so every format sees underflow, subnormals,
normals and overflow: a quarter to a half of the values fall below the smallest normal of
fp16 / fp8, a quarter to a third above max) and ``randn`` (N(0,1), like weights):

* floatlab      ``floatlab.round(x, fmt, dtype=np.float32)`` (emulated in NumPy, exact)
* floatlab f64  ``floatlab.round(x, fmt)`` (float64 output, the default)
* ml_dtypes     ``x.astype(fmt_dtype).astype(np.float32)`` (C++ cast there and back; numpy's
                own cast for float16)
* gfloat        ``gfloat.round_ndarray(format_info, x)`` (if gfloat is installed)

Times are the best of ``--repeat`` runs. "vs" columns are peer time / floatlab time (> 1 means
floatlab is faster). Results are checked equal before timing (gfloat's saturation and NaN
conventions differ for E4M3FN, so it is compared on NaN-ness and finite values only).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

import floatlab

FORMATS = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
GFLOAT_FORMATS = {
    "float16": "format_info_binary16",
    "bfloat16": "format_info_bfloat16",
    "float8_e4m3fn": "format_info_ocp_e4m3",
    "float8_e5m2": "format_info_ocp_e5m2",
}


def make_data(n: int, seed: int = 0, kind: str = "spread") -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "randn":
        return rng.standard_normal(n, dtype=np.float32)
    signs = rng.choice(np.array([-1.0, 1.0]), n)
    return (signs * rng.uniform(1, 2, n) * np.exp2(rng.integers(-30, 31, n))).astype(np.float32)


def best_time(func: Callable[[], object], repeat: int) -> float:
    func()  # warm-up (tables, caches)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


def peers(fmt_name: str, x: np.ndarray) -> dict[str, Callable[[], np.ndarray]]:
    fmt = floatlab.get_format(fmt_name)
    dtype = fmt.to_ml_dtype()
    runs: dict[str, Callable[[], np.ndarray]] = {
        "ml_dtypes": lambda: x.astype(dtype).astype(np.float32),
    }
    try:
        import gfloat
        import gfloat.formats
    except ImportError:
        return runs
    info = getattr(gfloat.formats, GFLOAT_FORMATS[fmt_name])
    runs["gfloat"] = lambda: gfloat.round_ndarray(info, x)
    return runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--gfloat-n", type=int, default=None,
                        help="time gfloat on fewer values and scale per value (default: all)")
    parser.add_argument("--runs", type=int, default=3, help="runs of the bfloat16 ratio")
    parser.add_argument("--data", choices=("spread", "randn", "both"), default="both")
    args = parser.parse_args(argv)
    gfloat_n = args.gfloat_n or args.n

    print(f"rounding {args.n:,} float32 values to each format; "
          "throughput in millions of values per second (Mval/s)")
    header = (f"{'format':<15}{'data':<8}{'floatlab':>10}{'fl f64out':>11}{'ml_dtypes':>11}"
              f"{'gfloat':>10}{'vs ml':>8}{'vs gfloat':>11}")
    print(header)
    print("-" * len(header))
    kinds = ("spread", "randn") if args.data == "both" else (args.data,)
    for kind in kinds:
        x = make_data(args.n, kind=kind)
        table_rows(x, kind, gfloat_n, args)
    print("\nTargets: >= 1x ml_dtypes for float16 and both fp8 formats, >= 0.67x for bfloat16 "
          "(the carry-only fast path), >= 5x gfloat.")
    bfloat16_ratio_runs(make_data(args.n), args.runs)


def table_rows(x: np.ndarray, kind: str, gfloat_n: int, args: argparse.Namespace) -> None:
    """One row per format for the data set ``x``."""
    x_small = x[:gfloat_n]
    with np.errstate(over="ignore", invalid="ignore"):
        for name in FORMATS:
            fmt = floatlab.get_format(name)
            ours = floatlab.round(x, fmt, dtype=np.float32)
            runs = peers(name, x)
            assert same(ours, runs["ml_dtypes"]()), f"floatlab and ml_dtypes differ on {name}"
            t_fl = best_time(lambda fmt=fmt: floatlab.round(x, fmt, dtype=np.float32), args.repeat)
            t_fl64 = best_time(lambda fmt=fmt: floatlab.round(x, fmt), args.repeat)
            t_ml = best_time(runs["ml_dtypes"], args.repeat)
            t_gf = float("nan")
            if "gfloat" in runs:
                import gfloat
                import gfloat.formats

                info = getattr(gfloat.formats, GFLOAT_FORMATS[name])
                g = np.asarray(gfloat.round_ndarray(info, x_small), np.float64)
                finite = np.isfinite(g)
                assert same(g[finite], ours[:gfloat_n][finite]), f"gfloat differs on {name}"
                small = best_time(lambda info=info: gfloat.round_ndarray(info, x_small), 2)
                t_gf = small * args.n / gfloat_n
            rate = lambda t: args.n / t / 1e6  # noqa: E731
            print(f"{name:<15}{kind:<8}{rate(t_fl):>10.1f}{rate(t_fl64):>11.1f}"
                  f"{rate(t_ml):>11.1f}{rate(t_gf):>10.1f}{t_ml / t_fl:>7.2f}x"
                  f"{t_gf / t_fl:>10.1f}x")


def bfloat16_ratio_runs(x: np.ndarray, runs: int, tries: int = 15) -> None:
    """bfloat16 from float32 against ml_dtypes' C++ cast, run by run: the two are timed in
    alternation (best of ``tries`` each) so that load from other processes hits both alike."""
    import ml_dtypes

    def once(func: Callable[[], object]) -> float:
        start = time.perf_counter()
        func()
        return time.perf_counter() - start

    def ours() -> np.ndarray:
        return floatlab.round(x, "bfloat16", dtype=np.float32)

    def theirs() -> np.ndarray:
        return x.astype(ml_dtypes.bfloat16).astype(np.float32)

    print(f"\nbfloat16 from float32, {runs} runs of best-of-{tries} (alternating):")
    print(f"{'run':<5}{'floatlab ms':>13}{'ml_dtypes ms':>14}{'ratio':>8}")
    for run in range(1, runs + 1):
        t_ours, t_theirs = [], []
        for _ in range(tries):
            t_ours.append(once(ours))
            t_theirs.append(once(theirs))
        fl, ml = min(t_ours), min(t_theirs)
        print(f"{run:<5}{fl * 1e3:>13.2f}{ml * 1e3:>14.2f}{ml / fl:>7.2f}x")


if __name__ == "__main__":
    main()
