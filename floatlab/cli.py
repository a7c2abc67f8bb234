"""The ``floatlab`` command line: ``floatlab --help`` lists the subcommands.

Every subcommand is a small function that prints and returns an exit code; ``main(argv)``
parses and dispatches, so tests call it directly.

>>> main(["bits", "3.141", "--format", "fp16"])
float16        0 10000 1001001000  0x4248  3.140625
0
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

from floatlab.codec import codes_to_bin, decode, encode, to_bin, to_hex
from floatlab.explain import explain
from floatlab.finfo import compare_formats, finfo
from floatlab.formats import FormatNameError, format_names, get_format
from floatlab.grid import values
from floatlab.rounding import ROUNDING_MODES
from floatlab.rounding import round as round_to_format

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
TOUR_VALUES = (3.141, 1 / 3, 65504.0, 1e6, 1e-8)
TOUR_FORMATS = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")


def _format_value(value: float) -> str:
    return repr(float(value))


def cmd_tour(args: argparse.Namespace) -> int:
    """A short tour: a few values' bits in several formats."""
    print("floatlab: how numbers are stored. Each row: format, sign|exponent|mantissa, hex, value.")
    for x in TOUR_VALUES:
        print(f"\n{x!r}")
        for name in TOUR_FORMATS:
            _print_bits(x, get_format(name))
    print(
        "\nTry: floatlab bits 3.141 --format bf16   |   python -c \"import floatlab; "
        "print(floatlab.float16_to_bin(3.141))\""
    )
    return EXIT_OK


def _print_bits(x: float, fmt, **rounding) -> None:
    bits = to_bin(x, fmt, sep=" ", **rounding)
    hexcode = to_hex(x, fmt, **rounding)
    value = round_to_format(x, fmt, **rounding)
    print(f"{fmt.name:<14} {bits:<{fmt.bits + 2}}  {hexcode}  {_format_value(value)}")


def cmd_bits(args: argparse.Namespace) -> int:
    fmt = get_format(args.format)
    for x in args.values:
        _print_bits(x, fmt, rounding=args.rounding, saturate=args.saturate)
    return EXIT_OK


def cmd_round(args: argparse.Namespace) -> int:
    fmt = get_format(args.format)
    values = _read_numbers(args.values, args.file)
    rounded = round_to_format(values, fmt, rounding=args.rounding, saturate=args.saturate)
    for x, r in zip(values, rounded, strict=True):
        print(f"{_format_value(x)} -> {_format_value(r)}")
    return EXIT_OK


def cmd_encode(args: argparse.Namespace) -> int:
    fmt = get_format(args.format)
    values = _read_numbers(args.values, args.file)
    codes = encode(values, fmt, rounding=args.rounding, saturate=args.saturate)
    digits = (fmt.bits + 3) // 4
    for code in codes:
        print(f"0x{int(code):0{digits}x}")
    return EXIT_OK


def cmd_decode(args: argparse.Namespace) -> int:
    fmt = get_format(args.format)
    words = _read_words(args.codes, args.file)
    codes = []
    for word in words:
        try:
            codes.append(int(word, 0))
        except ValueError:
            raise ValueError(
                f"{word!r} is not an integer code: give decimal (72), hex (0x48) or binary "
                "(0b01001000)"
            ) from None
    for word, value in zip(words, decode(np.array(codes, dtype=np.uint64), fmt), strict=True):
        print(f"{word} -> {_format_value(value)}")
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    print(explain(args.value, args.format, rounding=args.rounding, saturate=args.saturate,
                  subnormals=not args.ftz))
    return EXIT_OK


def cmd_finfo(args: argparse.Namespace) -> int:
    info = finfo(args.format)
    print(repr(info) if args.oneline else str(info))
    return EXIT_OK


def cmd_formats(args: argparse.Namespace) -> int:
    if args.names:
        print(compare_formats(args.names))
        return EXIT_OK
    print(f"{'name':<20}{'bits':>5}{'E':>4}{'M':>4}{'bias':>6}  {'special':<8}{'max':>13}"
          f"{'smallest > 0':>14}")
    for name in format_names():
        f = get_format(name)
        print(f"{name:<20}{f.bits:>5}{f.exp_bits:>4}{f.man_bits:>4}{f.bias:>6}  "
              f"{f.special:<8}{f.max:>13.6g}{f.smallest_positive:>14.6g}")
    print("\nCompare a few side by side: floatlab formats fp32 bf16 fp16 e4m3fn e5m2")
    return EXIT_OK


def cmd_values(args: argparse.Namespace) -> int:
    fmt = get_format(args.format)
    finite = values(fmt)
    if finite.size > args.limit:
        raise ValueError(
            f"{fmt.name} has {finite.size} finite values; pass --limit {finite.size} to print "
            "them all, or pick a smaller format (e4m3fn, e5m2, e2m1, ...)"
        )
    codes = encode(finite, fmt)
    bits = codes_to_bin(codes, fmt, sep=" ")
    digits = (fmt.bits + 3) // 4
    print(f"{finite.size} finite values of {fmt.name}, ascending (code, bits, value):")
    for code, pattern, value in zip(codes, bits, finite, strict=True):
        print(f"0x{int(code):0{digits}x}  {pattern}  {_format_value(value)}")
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    from floatlab.mixed import compare, get_policy, teacher_gaussians

    for name in args.precisions:
        get_policy(_precision_arg(name))  # fail early, with the list of valid names
    data = teacher_gaussians(n=args.rows, seed=args.seed)
    lam = _parse_number(args.loss_multiplier)
    if lam != 1:
        print(f"loss multiplier lambda = {args.loss_multiplier}: a teaching device that slides "
              "the gradients down as a deep network would (see the README)")
    result = compare([_precision_arg(p) for p in args.precisions], steps=args.steps,
                     progress=not args.quiet, data=data, loss_multiplier=lam, seed=args.seed,
                     optimizer=args.optimizer, lr=args.lr)
    print(result)
    if args.plot:
        _save_training_plot(result, args.plot)
        print(f"curves saved to {args.plot}")
    return EXIT_OK


def _precision_arg(text: str):
    """Lightning's legacy integer aliases arrive as strings on a command line: 16 -> 16."""
    return int(text) if text.isdigit() else text


def _parse_number(text: str) -> float:
    """A number such as 1e-4, 0.5 or 2**-16 (powers of two are how lambda is usually given)."""
    cleaned = text.replace(" ", "")
    try:
        if "**" in cleaned:
            base, exponent = cleaned.split("**", 1)
            return float(base) ** float(exponent)
        return float(cleaned)
    except ValueError:
        raise ValueError(f"{text!r} is not a number (try 1, 0.001 or 2**-16)") from None


def _save_training_plot(result, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from floatlab import plots

    histories = dict(result.histories)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    plots.training_curves(histories, metric="loss", ax=axes[0])
    plots.training_curves(histories, metric="accuracy", ax=axes[1])
    plots.underflow_over_time(histories, ax=axes[2])
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _read_words(words: Sequence[str], path: str | None) -> list[str]:
    words = list(words)
    if path:
        text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
        words += text.replace(",", " ").split()
    if not words:
        raise ValueError("no input: give values as arguments or --file PATH (- for stdin)")
    return words


def _read_numbers(words: Sequence[str], path: str | None) -> np.ndarray:
    out = []
    for word in _read_words(words, path):
        try:
            out.append(float(word))
        except ValueError:
            raise ValueError(f"{word!r} is not a number (try 3.141, 1e-8, inf or nan)") from None
    return np.array(out, dtype=np.float64)


def _add_rounding_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rounding", "-r", default="nearest_even", choices=ROUNDING_MODES)
    p.add_argument("--saturate", action="store_true", help="overflow gives +-max")



# ---------------------------------------------------------------- quantize / schemes (issue 10)

def cmd_quantize(args: argparse.Namespace) -> int:
    """Quantise values with a scheme; print codes, scales and the statistics."""
    from floatlab.quant import get_scheme, quantize

    scheme = get_scheme(args.scheme)
    x = _read_numbers(args.values, args.file)
    if args.rows:
        if x.size % args.rows:
            raise ValueError(f"{x.size} values do not fill {args.rows} rows")
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


def _add_quant_parsers(sub) -> None:
    p = sub.add_parser("quantize", help="block-scaled quantisation of values with a scheme",
                       description="Quantise values with a scheme (floatlab schemes lists "
                       "them): codes, scales, QSNR, clipped and flushed fractions.")
    p.add_argument("values", nargs="*", metavar="VALUE")
    p.add_argument("--scheme", "-s", required=True, help="e.g. mxfp8, nvfp4, nf4, fp8_rowwise")
    p.add_argument("--file", help="read more values from a file (- for stdin)")
    p.add_argument("--rows", type=int, default=0,
                   help="reshape the values into this many rows (for row / tile schemes)")
    p.add_argument("--limit", type=int, default=64, help="print at most this many rows")
    p.set_defaults(func=cmd_quantize)
    p = sub.add_parser("schemes", help="list the quantisation presets and bits per value")
    p.set_defaults(func=cmd_schemes)

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="floatlab",
        description="See how numbers are stored in floating-point formats.",
        epilog="Run a subcommand with --help for its options. No subcommand: a short tour.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("tour", help="a short tour (the default)").set_defaults(func=cmd_tour)

    p = sub.add_parser(
        "compare", help="train the same MLP under several precisions and compare",
        description="The mixed-precision experiment: an MLP 16-64-64-4 with Adam on "
        "teacher-labelled Gaussians, trained under each precision with every low-precision op "
        "emulated; prints accuracy, time, bytes held, skipped steps, underflow, lost updates "
        "and NaN per precision.")
    p.add_argument("precisions", nargs="*", metavar="PRECISION",
                   default=["32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true"],
                   help="Lightning-style precision strings (default: 32-true 16-mixed "
                   "bf16-mixed 16-true bf16-true), Apex O0..O3, or a format name + '-mixed'")
    p.add_argument("--steps", type=int, default=500, help="training steps (default 500)")
    p.add_argument("--loss-multiplier", "--lambda", default="1", metavar="LAMBDA",
                   help="multiply the loss by LAMBDA, e.g. 2**-16, to push gradients down "
                   "toward fp16's underflow as a deep network does (default 1)")
    p.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    p.add_argument("--lr", type=float, default=None, help="learning rate (default: optimizer's)")
    p.add_argument("--rows", type=int, default=8192, help="dataset rows, half for testing")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", metavar="PNG", help="save loss/accuracy/underflow curves here")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("bits", help="bits of values in a format",
                       description="Print sign | exponent | mantissa, hex and stored value.")
    p.add_argument("values", nargs="+", type=float, metavar="VALUE")
    p.add_argument("--format", "-f", default="float16", help="format name (default float16)")
    _add_rounding_options(p)
    p.set_defaults(func=cmd_bits)

    for name, func, help_text in (
        ("round", cmd_round, "round values to a format"),
        ("encode", cmd_encode, "values -> hex codes"),
    ):
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("values", nargs="*", metavar="VALUE")
        p.add_argument("--format", "-f", required=True, help="format name, e.g. fp16, e4m3fn")
        p.add_argument("--file", help="read more values from a file (- for stdin)")
        _add_rounding_options(p)
        p.set_defaults(func=func)

    p = sub.add_parser("decode", help="codes -> values",
                       description="Decode integer codes (decimal, 0x hex or 0b binary).")
    p.add_argument("codes", nargs="*", metavar="CODE")
    p.add_argument("--format", "-f", required=True)
    p.add_argument("--file", help="read more codes from a file (- for stdin)")
    p.set_defaults(func=cmd_decode)

    p = sub.add_parser("explain", help="step-by-step derivation of one value",
                       description="Explain how one value is stored: sign, window, bucket, "
                       "exponent and mantissa fields, exact value, error, neighbours.")
    p.add_argument("value", type=float)
    p.add_argument("--format", "-f", default="float16", help="format name (default float16)")
    _add_rounding_options(p)
    p.add_argument("--ftz", action="store_true", help="flush subnormal results to zero")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("finfo", help="limits of a format (numpy/torch finfo fields)",
                       description="Print the limits of a format, derived from its encoding.")
    p.add_argument("format", help="format name, e.g. bf16")
    p.add_argument("--oneline", action="store_true", help="torch.finfo-style one-line repr")
    p.set_defaults(func=cmd_finfo)

    p = sub.add_parser("formats", help="list the formats, or compare a few side by side")
    p.add_argument("names", nargs="*", metavar="FORMAT",
                   help="formats to compare side by side (none: list every preset)")
    p.set_defaults(func=cmd_formats)

    p = sub.add_parser("values", help="every finite value of a small format",
                       description="List every finite value of a format with its code and bits.")
    p.add_argument("format", help="format name, e.g. e4m3fn or e2m1")
    p.add_argument("--limit", type=int, default=1024,
                   help="refuse to print more values than this (default 1024)")
    p.set_defaults(func=cmd_values)
    _add_quant_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (0 ok, 1 bad input, 2 usage error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse exits on --help (0) and on usage errors (2)
        return int(exit_.code or 0)
    func = getattr(args, "func", cmd_tour)
    try:
        return func(args)
    except BrokenPipeError:  # e.g. `floatlab values float16 | head`: not an error
        return EXIT_OK
    except (FormatNameError, ValueError, TypeError, OSError) as error:
        print(f"floatlab {args.command or ''}: error: {error}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
