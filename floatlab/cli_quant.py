"""The ``quantize`` and ``schemes`` subcommands: block-scaled quantisation from the shell.

Kept beside :mod:`floatlab.cli` (which registers them in its ``_SUBCOMMANDS``) so each module
stays small; input is read with the same helpers as every other value command.

>>> from floatlab.cli import main
>>> main(["quantize", "-s", "mxfp8", "1", "2", "448", "--limit", "2"])  # doctest: +ELLIPSIS
Scheme(...
0
"""

from __future__ import annotations

import argparse

import numpy as np

from floatlab.cli_exact import round_to_odd_f64
from floatlab.cli_input import add_input_arguments, positive_int, read_typed

EXIT_OK = 0


def cmd_quantize(args: argparse.Namespace) -> int:
    """Quantise values with a scheme; print codes, scales and the statistics."""
    from floatlab.quant import get_scheme, quantize

    scheme = get_scheme(args.scheme)
    # A typed decimal that is no float64 goes in rounded to odd (floatlab.cli_exact): the
    # elements (at most 24 bits) then round once, exactly, after a power-of-two scale (MX).
    x = np.array([t.nearest if t.is_float64 else round_to_odd_f64(t.exact)
                  for t in read_typed(args)], dtype=np.float64)
    if args.rows:
        if x.size % args.rows:
            raise ValueError(f"{x.size} values do not fill {args.rows} rows: give a multiple "
                             f"of {args.rows} values, or another --rows")
        x = x.reshape(args.rows, -1)
    q = quantize(x, scheme)
    print(repr(scheme))
    codes = q.unpack().reshape(-1)
    deq = q.dequantize().reshape(-1)
    width = (scheme.element.bits + 3) // 4
    shown = min(x.size, args.limit)
    print(f"{'value':>14}  {'code':>6}  {'stored':>14}")
    for v, c, d in zip(x.reshape(-1)[:shown], codes[:shown], deq[:shown], strict=True):
        print(f"{v:>14.7g}  0x{int(c):0{width}x}{'':>{4 - width}}  {d:>14.7g}")
    if x.size > shown:
        print(f"... {x.size - shown} more (use --limit)")
    scales = q.scales.reshape(-1)
    print(f"scales ({scheme.scale}, {scales.size}): "
          + " ".join(f"{s:.6g}" for s in scales[: args.limit]))
    if q.global_scale is not None:
        print(f"global scale (float32): {q.global_scale:.9g}")
    print(f"{q.stats}; {q.bits_per_value:.4g} bits/value, {q.nbytes} bytes")
    return EXIT_OK


def cmd_schemes(args: argparse.Namespace) -> int:
    """List the quantisation presets with their storage cost."""
    from floatlab.quant import get_scheme, scheme_names

    print(f"{'scheme':<15} {'bits/value':>10}  description")
    for name in scheme_names():
        s = get_scheme(name)
        print(f"{name:<15} {s.bits_per_value:>10.4g}  {s.describe()}")
    print("aliases: mxfp8 = mxfp8_e4m3, mxfp6 = mxfp6_e2m3. Per-tensor / per-row / per-column "
          "scales add 32 bits per tensor / row / column.")
    return EXIT_OK


def add_quantize_parser(sub) -> None:
    p = sub.add_parser("quantize", help="block-scaled quantisation of values with a scheme",
                       description="Quantise values with a scheme (floatlab schemes lists "
                       "them): codes, scales, QSNR, clipped and flushed fractions.")
    add_input_arguments(p, example="3.141 -1e-8 2**-24 448")  # finite: amax needs them
    p.add_argument("--scheme", "-s", required=True,
                   help="a preset such as mxfp8, nvfp4, nf4, fp8_rowwise (floatlab schemes)")
    p.add_argument("--rows", type=positive_int, default=None,
                   help="reshape the values into this many rows (for row / tile schemes)")
    p.add_argument("--limit", type=positive_int, default=64,
                   help="print at most this many values and scales (default 64)")
    p.set_defaults(func=cmd_quantize)


def add_schemes_parser(sub) -> None:
    p = sub.add_parser("schemes", help="list the quantisation presets and bits per value",
                       description="Every block-scaling preset get_scheme knows, with its "
                       "storage cost in bits per value.")
    p.set_defaults(func=cmd_schemes)
