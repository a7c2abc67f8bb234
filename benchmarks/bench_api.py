"""Public functions users call on millions of values, each against its floor.

The floor is the ml_dtypes cast where ml_dtypes has the format (the peer), else the plain
NumPy pass that does the same job (named in each row). Ratios above 5x are marked; the reason
for each is in the function's docstring or in the row's note.

    python benchmarks/bench_api.py            # about a minute
    python benchmarks/bench_api.py --n 200000 # faster, noisier
"""

from __future__ import annotations

import argparse
import time
import warnings

import ml_dtypes
import numpy as np

import floatlab
from floatlab.codec import codes_to_bin

PEERS = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
         "float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2,
         "float4_e2m1fn": ml_dtypes.float4_e2m1fn, "float8_e8m0fnu": ml_dtypes.float8_e8m0fnu}


def timed(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def row(label: str, seconds: float, floor: float, floor_name: str, n: int) -> None:
    ratio = seconds / floor
    mark = "  > 5x" if ratio > 5 else ""
    print(f"  {label:44s} {seconds / n * 1e9:9.1f} ns/value {ratio:7.2f}x  ({floor_name}){mark}")


def rounding(n: int, repeat: int) -> None:
    print(f"1. floatlab.round of {n:,} float32 values, randn (|randn| for e8m0), each mode;"
          " floor: the ml_dtypes / NumPy cast")
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    custom = floatlab.Format(6, 9, name="e6m9")
    for fmt in (*PEERS, custom):
        name = getattr(fmt, "name", fmt)
        data = np.abs(x) if name == "float8_e8m0fnu" else x
        if name in PEERS:
            floor, floor_name = timed(lambda d=data, t=PEERS[name]: d.astype(t), repeat), \
                f"{name} cast"
        else:  # no peer: the bfloat16 cast, the cheapest rounding cast NumPy users have
            floor, floor_name = timed(lambda d=data: d.astype(ml_dtypes.bfloat16), repeat), \
                "bfloat16 cast"
        for mode in floatlab.ROUNDING_MODES:
            options = {"saturate": name == "float4_e2m1fn", "rng": 0}
            seconds = timed(lambda d=data, m=mode, f=fmt, o=options: floatlab.round(d, f, m, **o),
                            repeat)
            row(f"{name} {mode}", seconds, floor, floor_name, n)


def codec(n: int, repeat: int) -> None:
    print(f"\n2. codec on {n:,} float32 values; floor: the cast and an integer view (encode), "
          "the view back and a float64 cast (decode), to_bin for the string functions")
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    for name in ("float16", "bfloat16", "float8_e4m3fn"):
        dtype = PEERS[name]
        uint = np.uint8 if np.dtype(dtype).itemsize == 1 else np.uint16
        codes = floatlab.encode(x, name)
        enc_floor = timed(lambda t=dtype, u=uint: x.astype(t).view(u), repeat)
        dec_floor = timed(lambda c=codes, t=dtype, u=uint: c.astype(u).view(t).astype(np.float64),
                          repeat)
        row(f"{name} encode", timed(lambda f=name: floatlab.encode(x, f), repeat), enc_floor,
            "cast + view", n)
        row(f"{name} decode", timed(lambda c=codes, f=name: floatlab.decode(c, f), repeat),
            dec_floor, "view + float64 cast", n)
        m = min(n, 200_000)
        fmt = floatlab.get_format(name)
        bin_floor = timed(lambda c=codes[:m], f=fmt: codes_to_bin(c, f), repeat)
        bits, hexes = floatlab.to_bin(x[:m], name), floatlab.to_hex(x[:m], name)
        for label, fn in (("to_bin", lambda f=name, m=m: floatlab.to_bin(x[:m], f)),
                          ("to_hex", lambda f=name, m=m: floatlab.to_hex(x[:m], f)),
                          ("from_bin", lambda b=bits, f=name: floatlab.from_bin(b, f)),
                          ("from_hex", lambda h=hexes, f=name: floatlab.from_hex(h, f))):
            row(f"{name} {label}", timed(fn, repeat), bin_floor, "codes_to_bin", m)


def small_calls() -> None:
    print("\n3. single calls (best of 1000); floor: NumPy's own")
    for label, fn, floor_fn, floor_name in (
            ("floatlab.finfo('fp16')", lambda: floatlab.finfo("fp16"),
             lambda: np.finfo(np.float16), "np.finfo"),
            ("floatlab.finfo('e4m3fn').max", lambda: floatlab.finfo("e4m3fn").max,
             lambda: ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max, "ml_dtypes.finfo"),
            ("floatlab.round(1.1, 'fp16'), a 0-d array", lambda: floatlab.round(1.1, "fp16"),
             lambda: np.float16(1.1), "np.float16(1.1)")):
        seconds = min(timed(fn, 1) for _ in range(1000))
        floor = min(timed(floor_fn, 1) for _ in range(1000))
        print(f"  {label:44s} {seconds * 1e6:9.2f} us       {seconds / floor:7.2f}x  "
              f"({floor_name}){'  > 5x' if seconds / floor > 5 else ''}")


def floatarrays(n: int, repeat: int) -> None:
    print(f"\n4. FloatArray ufuncs on {n:,} values, stochastic rounding; floor: floatlab.round"
          " of the float64 values (stochastic)")
    rng = np.random.default_rng(2)
    a64, b64 = rng.standard_normal(n), rng.standard_normal(n) + 3
    for fmt in ("bf16", "fp16", "e4m3fn"):
        floor = timed(lambda f=fmt: floatlab.round(a64, f, "stochastic", rng=0), repeat)
        a = floatlab.array(a64, fmt, "stochastic", rng=0)
        b = floatlab.array(b64, fmt, "stochastic", rng=1)
        for label, fn in (("a + b", lambda a=a, b=b: a + b),
                          ("a * b", lambda a=a, b=b: a * b),
                          ("a / b", lambda a=a, b=b: a / b),
                          ("sqrt(|b|)", lambda b=b: np.sqrt(abs(b))),
                          ("exp(a)", lambda a=a: np.exp(a))):
            row(f"{fmt} stochastic {label}", timed(fn, repeat), floor, "round", n)


def sums(n: int) -> None:
    print(f"\n5. np.sum of a FloatArray of {n:,} normal values per Accumulator order (one run);"
          " floor: np.add.accumulate")
    x = np.random.default_rng(3).standard_normal(n)
    floor = timed(lambda: np.add.accumulate(x), 3)
    for fmt in ("fp16", "bf16", "e4m3fn"):
        for label, acc in (("sequential", floatlab.Accumulator(fmt)),
                           ("pairwise", floatlab.Accumulator(fmt, order="pairwise")),
                           ("blocked 128", floatlab.Accumulator(fmt, order="blocked", chunk=128)),
                           ("chunk 32 -> float32", floatlab.Accumulator(
                               fmt, order="blocked", chunk=32, promote="fp32"))):
            values = floatlab.array(x, fmt, accumulator=acc)
            row(f"{fmt} {label}", timed(lambda v=values: np.sum(v), 1), floor,
                "add.accumulate", n)


def schemes(n: int, repeat: int) -> None:
    print(f"\n6. floatlab.quantize of {n:,} float32 values (256 columns); floor: one NumPy pass "
          "of block amaxes and a divide")
    x = np.random.default_rng(4).standard_normal((n // 256, 256)).astype(np.float32)

    def floor_pass():
        blocks = x.reshape(-1, 32)
        return blocks / np.abs(blocks).max(axis=1, keepdims=True)

    floor = timed(floor_pass, repeat)
    for scheme in ("mxfp8_e4m3", "nvfp4", "nf4", "int8_row"):
        row(f"quantize {scheme}", timed(lambda s=scheme: floatlab.quantize(x, s), repeat),
            floor, "amax + divide", x.size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="values per row")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    rounding(args.n, args.repeat)
    codec(args.n, args.repeat)
    small_calls()
    floatarrays(args.n, args.repeat)
    sums(args.n)
    schemes(args.n, args.repeat)


if __name__ == "__main__":
    main()
