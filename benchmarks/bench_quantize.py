"""Throughput of block-scaled quantisation: floatlab.quantize + dequantize per scheme.

    python benchmarks/bench_quantize.py [--n 4194304] [--repeat 5]

Each row quantises the same N float32 N(0,1) values (a 2048-wide matrix) with a preset scheme
and dequantises them back (``q = floatlab.quantize(x, s); q.dequantize()``: block amaxes,
scales, element rounding through floatlab.round, codes, packing, and back). Columns:

* quantize+deq   the issue's figure, in million values per second (best of --repeat)
* fake_quantize  the fast entry without codes (``floatlab.fake_quantize(x, s)``)
* floor          a plain-NumPy lower bound: the passes every scheme needs at least
                 (|x| block max, divide by the scale, multiply back), no rounding at all
* x floor        quantize+deq rate / NumPy floor rate: comparable across machine loads
* target         issue 10's goal for this scheme on a 2-core machine
* small us       microseconds per quantize+dequantize of a 64x64 tensor (per-call overhead,
                 what a training step pays per GEMM operand)
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import floatlab

TARGETS = {"mxfp8": 100, "fp8_rowwise": 100, "nvfp4": 50, "mxfp4": 50, "dynamic8": 30,
           "nf4": 30, "fp8_tensorwise": None, "mxfp6_e2m3": None, "fp8_1x128": None,
           "int8_row": None, "nf4_dq": None}


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def numpy_floor(x: np.ndarray, block: int) -> np.ndarray:
    v = x.reshape(-1, block)
    s = np.abs(v).max(axis=1, keepdims=True) / np.float32(448)
    return (v / s * s).reshape(x.shape)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 22)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.n // 2048, 2048)).astype(np.float32)
    small = rng.standard_normal((64, 64)).astype(np.float32)
    floor = x.size / best_of(lambda: numpy_floor(x, 32), args.repeat) / 1e6
    print(f"quantize + dequantize of {x.size:,} float32 values (Mvalues/s, best of "
          f"{args.repeat}); NumPy floor (blocks of 32): {floor:.0f} Mvalues/s\n")
    print(f"{'scheme':<15}{'quantize+deq':>13}{'fake_quantize':>15}{'x floor':>9}"
          f"{'target':>8}{'status':>8}{'small us':>10}")
    for name, target in TARGETS.items():
        floatlab.quantize(x[:64], name).dequantize()  # warm caches (tables, presets)
        full = best_of(lambda n=name: floatlab.quantize(x, n).dequantize(), args.repeat)
        fake = best_of(lambda n=name: floatlab.fake_quantize(x, n), args.repeat)
        tiny = best_of(lambda n=name: floatlab.quantize(small, n).dequantize(), 20)
        rate = x.size / full / 1e6
        status = "" if target is None else ("ok" if rate >= target else "BELOW")
        print(f"{name:<15}{rate:>13.1f}{x.size / fake / 1e6:>15.1f}{rate / floor:>9.2f}"
              f"{'' if target is None else target:>8}{status:>8}{tiny * 1e6:>10.0f}")


if __name__ == "__main__":
    main()
