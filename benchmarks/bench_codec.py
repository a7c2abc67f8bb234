"""Speed and memory of encode / to_bin / round(dtype=float32) on float32 input.

    python benchmarks/bench_codec.py [--n 50000000] [--bin-n 4000000] [--repeat 3]

For each format and two data sets -- ``randn`` (standard normal, like weights and activations)
and ``spread`` (|x| log-uniform over 2**-30 .. 2**30, so narrow formats see many subnormals,
underflows and overflows) -- the table gives the throughput in millions of values per second
(best of ``--repeat``) and the peak memory the call allocates *beyond its own output*, in bytes
per element, measured with tracemalloc (which sees numpy's allocations). The "floor" column is
ml_dtypes' C++ cast ``x.astype(dtype).view(uint)`` (codes only, no emulation) for scale.

Targets (issue 8): encode >= 100 Mvalues/s with <= 12 bytes/element beyond its output;
to_bin >= 20 Mvalues/s; round(..., dtype=np.float32) keeps ~4 bytes/element (its output).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

import floatlab

FORMATS = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")


def make_data(kind: str, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "randn":
        return rng.standard_normal(n, dtype=np.float32)
    signs = rng.choice(np.array([-1.0, 1.0], dtype=np.float32), n)
    mags = rng.uniform(1, 2, n).astype(np.float32) * np.exp2(rng.integers(-30, 31, n)).astype(
        np.float32)
    return signs * mags


def best_time(func: Callable[[], object], repeat: int) -> float:
    func()  # warm-up: tables, caches, scratch buffers
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def extra_bytes_per_element(func: Callable[[], np.ndarray], n: int) -> float:
    """Peak bytes allocated during ``func()`` beyond the array it returns, per element."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    out = func()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return (peak - np.asarray(out).nbytes) / n


def row(name: str, kind: str, x: np.ndarray, xb: np.ndarray, repeat: int) -> str:
    """One table row: encode, the ml_dtypes floor, round(dtype=float32), to_bin."""
    fmt = floatlab.get_format(name)
    ml, code = fmt.to_ml_dtype(), fmt.code_dtype
    n, nb = x.size, xb.size

    def encode() -> np.ndarray:
        return floatlab.encode(x, fmt)

    def floor() -> np.ndarray:
        return x.astype(ml).view(code)

    def round32() -> np.ndarray:
        return floatlab.round(x, fmt, dtype=np.float32)

    def to_bin() -> np.ndarray:
        return floatlab.to_bin(xb, fmt)

    with np.errstate(over="ignore", invalid="ignore"):
        ours, theirs = floatlab.encode(xb, fmt), xb.astype(ml).view(code)
        assert np.array_equal(floatlab.decode(ours, fmt), floatlab.decode(theirs, fmt),
                              equal_nan=True), name  # NaN codes may differ in sign
        t_enc, m_enc = best_time(encode, repeat), extra_bytes_per_element(encode, n)
        t_floor = best_time(floor, repeat)
        t_round, m_round = best_time(round32, repeat), extra_bytes_per_element(round32, n)
        t_bin, m_bin = best_time(to_bin, repeat), extra_bytes_per_element(to_bin, nb)
    return (f"{name:<15}{kind:<8}{n / t_enc / 1e6:>9.1f}{m_enc:>7.1f}{n / t_floor / 1e6:>8.1f}"
            f"{n / t_round / 1e6:>11.1f}{m_round:>7.1f}{nb / t_bin / 1e6:>9.1f}{m_bin:>7.1f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50_000_000, help="values for encode / round")
    parser.add_argument("--bin-n", type=int, default=4_000_000, help="values for to_bin")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    n, nb = args.n, args.bin_n

    print(f"encode / round on {n:,} float32 values, to_bin on {nb:,}; Mval/s = millions of "
          "values per second; B/el = peak bytes per element allocated beyond the output")
    header = (f"{'format':<15}{'data':<8}{'encode':>9}{'B/el':>7}{'floor':>8}"
              f"{'round f32':>11}{'B/el':>7}{'to_bin':>9}{'B/el':>7}")
    print(header)
    print("-" * len(header))
    for kind in ("randn", "spread"):
        x = make_data(kind, n)
        for name in FORMATS:
            print(row(name, kind, x, x[:nb], args.repeat))
    print("\nround f32 B/el counts beyond its float32 output (4 B/el); to_bin's output itself is "
          "4 bytes per character (numpy str).")


if __name__ == "__main__":
    main()
