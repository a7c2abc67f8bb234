"""The ``floatlab`` command line: ``floatlab --help`` lists the subcommands.

Every subcommand is a small function that prints and returns an exit code, and every
subcommand's parser is built by its own ``_add_<name>_parser`` function (register a new one in
``_SUBCOMMANDS``); ``main(argv)`` parses and dispatches, so tests call it directly.

Values are numbers as people type them: ``-1e-8``, ``-inf``, ``nan``, hex floats
(``-0x1.8p1``) and powers (``2**-24``); negative values need no ``--``. Without values and with
a pipe on stdin, the values are read from stdin (``echo 3.141 | floatlab round -f fp16``).

>>> main(["bits", "3.141", "--format", "fp16"])
float16        0 10000 1001001000  0x4248  3.140625
0
>>> main(["round", "-f", "bf16", "-1e-8"])  # echoed as typed: no float64 is -1e-8
-1e-8 -> -1.0011717677116394e-08
0
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import warnings
from collections.abc import Sequence

import numpy as np

from floatlab.cli_exact import explain_typed
from floatlab.cli_input import (
    add_input_arguments,
    carriers,
    format_list,
    nonnegative_int,
    one_format,
    parse_code,
    positive_int,
    positive_number,
    read_typed,
    read_words,
    rounding_mode,
    rounding_options,
)
from floatlab.cli_quant import add_quantize_parser, add_schemes_parser
from floatlab.codec import codes_to_bin, codes_to_hex, decode, encode
from floatlab.finfo import compare_formats, finfo
from floatlab.formats import Format, FormatNameError, format_aliases, format_names, get_format
from floatlab.grid import values
from floatlab.rounding import ROUNDING_MODES
from floatlab.rounding import round as round_to_format

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
TOUR_VALUES = (3.141, 1 / 3, 65504.0, 1e6, 1e-8)
TOUR_FORMATS = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")


def _format_value(value: float) -> str:
    return repr(float(value))


# --------------------------------------------------------------------------- bits tables

def _bits_rows(x: np.ndarray, fmt: Format, options: dict) -> list[tuple[str, ...]]:
    """One row (name, bits, hex, value) per value: rounded once, so that the bits, the code and
    the value agree even under stochastic rounding."""
    rounded = round_to_format(x, fmt, **options)
    codes = encode(rounded, fmt)  # exact: every rounded value is a value of fmt
    bits = codes_to_bin(codes, fmt, sep=" ").reshape(-1)
    hexes = codes_to_hex(codes, fmt).reshape(-1)
    return [(fmt.name, str(b), str(h), _format_value(v))
            for b, h, v in zip(bits, hexes, rounded.reshape(-1), strict=True)]


def _bits_rows_or_refusals(x: np.ndarray, fmt: Format, options: dict) -> list[tuple[str, ...]]:
    """With several formats, a format that refuses a value says why in that value's row."""
    try:
        return _bits_rows(x, fmt, options)
    except ValueError:
        rows = []
        for value in x:
            try:
                rows += _bits_rows(np.array([value]), fmt, options)
            except ValueError as error:
                rows.append((fmt.name, f"refused: {error}"))
        return rows


def _print_table(rows: Sequence[tuple[str, ...]], formats: Sequence[Format]) -> None:
    name_width = max([14] + [len(f.name) for f in formats])
    bits_width = max(f.bits + 2 for f in formats)
    hex_width = max((len(r[2]) for r in rows if len(r) == 4), default=0)
    for row in rows:
        if len(row) == 2:
            print(f"{row[0]:<{name_width}} {row[1]}")
        else:
            name, bits, hexcode, value = row
            print(f"{name:<{name_width}} {bits:<{bits_width}}  {hexcode:<{hex_width}}  {value}")


# --------------------------------------------------------------------------- commands

def cmd_tour(args: argparse.Namespace) -> int:
    """A short tour: a few values' bits in several formats."""
    print("floatlab: how numbers are stored. Each row: format, sign|exponent|mantissa, hex, value.")
    for x in TOUR_VALUES:
        print(f"\n{x!r}")
        for name in TOUR_FORMATS:
            fmt = get_format(name)
            _print_table(_bits_rows(np.array([x]), fmt, {}), [fmt])
    print(
        "\nTry: floatlab bits 3.141 --format bf16   |   python -c \"import floatlab; "
        "print(floatlab.float16_to_bin(3.141))\""
    )
    return EXIT_OK


def cmd_bits(args: argparse.Namespace) -> int:
    formats = format_list(args.format)
    numbers = read_typed(args)
    words = [t.text for t in numbers]
    options = rounding_options(args)
    if len(formats) == 1:
        x = carriers(numbers, formats[0], options)
        _print_table(_bits_rows(x, formats[0], options), formats)
        return EXIT_OK
    per_format = [_bits_rows_or_refusals(carriers(numbers, fmt, options), fmt, options)
                  for fmt in formats]
    for i, word in enumerate(words):
        if len(words) > 1:  # one block per value, a blank line between blocks
            print(f"\nx = {word}" if i else f"x = {word}")
        _print_table([rows[i] for rows in per_format], formats)
    refused = any(len(rows[i]) == 2 for rows in per_format for i in range(len(words)))
    return EXIT_ERROR if refused else EXIT_OK


def cmd_round(args: argparse.Namespace) -> int:
    fmt = one_format(args.format, "round")
    numbers, options = read_typed(args), rounding_options(args)
    rounded = round_to_format(carriers(numbers, fmt, options), fmt, **options)
    for number, r in zip(numbers, rounded, strict=True):
        print(f"{number.echo} -> {_format_value(r)}")  # x as typed, if no float64 is x
    return EXIT_OK


def cmd_encode(args: argparse.Namespace) -> int:
    fmt = one_format(args.format, "encode")
    numbers, options = read_typed(args), rounding_options(args)
    codes = encode(carriers(numbers, fmt, options), fmt, **options)
    for code in codes_to_hex(codes, fmt).reshape(-1):
        print(code)
    return EXIT_OK


def cmd_decode(args: argparse.Namespace) -> int:
    fmt = one_format(args.format, "decode")
    words = read_words(args, what="codes")
    codes = np.array([parse_code(word, fmt) for word in words], dtype=np.uint64)
    for word, value in zip(words, decode(codes, fmt), strict=True):
        print(f"{word} -> {_format_value(value)}")
    return EXIT_OK


def cmd_explain(args: argparse.Namespace) -> int:
    formats = format_list(args.format)
    numbers, options = read_typed(args), rounding_options(args)
    texts = [explain_typed(number, fmt, options) for number in numbers for fmt in formats]
    print("\n\n".join(texts))
    return EXIT_OK


def cmd_finfo(args: argparse.Namespace) -> int:
    info = finfo(args.format)
    print(repr(info) if args.oneline else str(info))
    return EXIT_OK


def cmd_formats(args: argparse.Namespace) -> int:
    if args.names:
        print(compare_formats(args.names))
        return EXIT_OK
    aliases = format_aliases()
    print(f"{'name':<20}{'bits':>5}{'E':>4}{'M':>4}{'bias':>6}  {'special':<8}{'max':>13}"
          f"{'smallest > 0':>14}  short names")
    for name in format_names():
        f = get_format(name)
        print(f"{name:<20}{f.bits:>5}{f.exp_bits:>4}{f.man_bits:>4}{f.bias:>6}  "
              f"{f.special:<8}{f.max:>13.6g}{f.smallest_positive:>14.6g}  "
              f"{', '.join(aliases.get(name, []))}")
    print("\nIEEE P3109: 32 binary8 formats, p3109_k8p<P><s|u><e|f> for precision P = 1..8, "
          "signed or unsigned, Extended (+-inf) or Finite (aliases binary8p3se ...): "
          "floatlab finfo binary8p3se")
    print("Any name works wherever a format is asked for (-f fp16, -f e4m3fn); bits and "
          "explain also take several (-f fp16,bf16,e4m3fn) or -f all.")
    print("Compare a few side by side: floatlab formats fp32 bf16 fp16 e4m3fn e5m2")
    return EXIT_OK


def cmd_values(args: argparse.Namespace) -> int:
    fmt = get_format(args.format)
    finite = values(fmt)
    if finite.size > args.limit:
        # Suggest only smaller formats that fit under the limit (never the format itself).
        smaller = [name for name in ("e4m3fn", "e5m2", "e2m1")
                   if values(name).size <= args.limit and get_format(name) != fmt]
        pick = f", or pick a smaller format ({', '.join(smaller)}, ...)" if smaller else ""
        raise ValueError(f"{fmt.name} has {finite.size} finite values; pass --limit "
                         f"{finite.size} to print them all{pick}")
    codes = encode(finite, fmt)
    bits = codes_to_bin(codes, fmt, sep=" ")
    digits = (fmt.bits + 3) // 4
    print(f"{finite.size} finite values of {fmt.name}, ascending (code, bits, value):")
    for code, pattern, value in zip(codes, bits, finite, strict=True):
        print(f"0x{int(code):0{digits}x}  {pattern}  {_format_value(value)}")
    return EXIT_OK


def cmd_compare(args: argparse.Namespace) -> int:
    from floatlab.mixed import compare, get_policy, teacher_gaussians

    precisions = [_precision_arg(p) for p in args.precisions]
    for precision in precisions:
        get_policy(precision)  # fail early, with the list of valid names
    if args.plot:
        _check_plot_path(args.plot)  # before the run, not after it
    lam = positive_number(args.loss_multiplier, "--lambda", "2**-16")
    lr = None if args.lr is None else positive_number(args.lr, "--lr", "1e-3")
    if lam != 1:
        print(f"loss multiplier lambda = {args.loss_multiplier}: a teaching device that slides "
              "the gradients down as a deep network would (see the README)")
    data = teacher_gaussians(n=args.rows, seed=args.seed)
    result = compare(precisions, steps=args.steps, progress=not args.quiet, data=data,
                     loss_multiplier=lam, seed=args.seed, optimizer=args.optimizer, lr=lr,
                     workers=args.workers)
    print(result)
    if args.plot:
        _save_training_plot(result, args.plot)
        print(f"curves saved to {args.plot}")
    return EXIT_OK


def _precision_arg(text: str):
    """Lightning's legacy integer aliases arrive as strings on a command line: 16 -> 16."""
    return int(text) if text.isdigit() else text


def _check_plot_path(path: str) -> None:
    """Refuse a --plot path that cannot be written, before minutes of training."""
    from matplotlib.figure import Figure

    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):  # savefig would fail only after the training
        raise ValueError(f"--plot {path} is a folder: give a file name, e.g. "
                         f"{os.path.join(path, 'curves.png')}")
    if not os.path.isdir(folder):
        raise ValueError(f"--plot {path}: the folder {folder} does not exist; create it first "
                         "or pick another path")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"--plot {path}: the folder {folder} is not writable; pick another path")
    kinds = Figure().canvas.get_supported_filetypes()
    suffix = os.path.splitext(path)[1].lstrip(".").lower()
    if suffix not in kinds:
        raise ValueError(f"--plot {path}: end the file name with one of "
                         f"{', '.join('.' + k for k in sorted(kinds))} (e.g. curves.png)")


def _save_training_plot(result, path: str) -> None:
    # A Figure of its own, not pyplot: main() may run inside a notebook or a test, whose
    # backend matplotlib.use("Agg") would switch for the rest of the session.
    from matplotlib.figure import Figure

    from floatlab import plots

    histories = dict(result.histories)
    fig = Figure(figsize=(15, 4))
    axes = fig.subplots(1, 3)
    plots.training_curves(histories, metric="loss", ax=axes[0])
    plots.training_curves(histories, metric="accuracy", ax=axes[1])
    plots.underflow_over_time(histories, ax=axes[2])
    fig.tight_layout()
    fig.savefig(path, dpi=90)


# --------------------------------------------------------------------------- the parser

# argparse takes "-1e-8", "-inf" or "-nan" for options: its default test for "a negative number,
# so a value" matches only -1 and -1.5. Anything that starts like a number is a value here (no
# option of floatlab starts with a digit, '.', 'i' or 'n'; a test guards that), and
# parse_number then accepts it or says why not.
_LOOKS_LIKE_A_NUMBER = re.compile(r"^-(?:\d|\.\d|inf|nan)", re.IGNORECASE)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose negative-number test is ``_LOOKS_LIKE_A_NUMBER`` (argparse reads
    it from ``_negative_number_matcher``; subparsers are created with the same class)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _LOOKS_LIKE_A_NUMBER


def _add_format_option(p: argparse.ArgumentParser, several: bool, default: str | None) -> None:
    text = "format name, e.g. fp16, bf16, e4m3fn (floatlab formats lists them)"
    if several:
        text += "; several: fp16,bf16,e4m3fn, or all"
    if default:
        text += f" (default {default})"
    p.add_argument("--format", "-f", default=default, required=default is None, help=text)


def _add_rounding_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rounding", "-r", default="nearest_even", type=rounding_mode,
                   metavar="MODE",
                   help=f"{', '.join(ROUNDING_MODES)} or an alias: rne, rna, rtz/rz, ru, rd, "
                   "rto, sr (default nearest_even)")
    p.add_argument("--saturate", action="store_true",
                   help="finite overflow gives +-max instead of inf / NaN (+-inf stays +-inf "
                   "in formats that have inf)")
    p.add_argument("--ftz", action="store_true", help="flush subnormal results to zero")
    p.add_argument("--seed", type=nonnegative_int, default=None,
                   help="seed for --rounding stochastic (default: a fresh random stream)")


def _add_tour_parser(sub) -> None:
    sub.add_parser("tour", help="a short tour (the default)",
                   description="A few values' bits in five formats.").set_defaults(func=cmd_tour)


def _add_bits_parser(sub) -> None:
    p = sub.add_parser("bits", help="bits of values in one or more formats",
                       description="Print sign | exponent | mantissa, hex and stored value; one "
                       "row per format with -f fp16,bf16 or -f all.")
    add_input_arguments(p)
    _add_format_option(p, several=True, default="float16")
    _add_rounding_options(p)
    p.set_defaults(func=cmd_bits)


def _add_round_parser(sub) -> None:
    p = sub.add_parser("round", help="round values to a format",
                       description="Round values to a format: one 'x -> stored' line each.")
    add_input_arguments(p)
    _add_format_option(p, several=False, default=None)
    _add_rounding_options(p)
    p.set_defaults(func=cmd_round)


def _add_encode_parser(sub) -> None:
    p = sub.add_parser("encode", help="values -> hex codes",
                       description="Round values to a format and print their codes in hex.")
    add_input_arguments(p)
    _add_format_option(p, several=False, default=None)
    _add_rounding_options(p)
    p.set_defaults(func=cmd_encode)


def _add_decode_parser(sub) -> None:
    p = sub.add_parser("decode", help="codes -> values",
                       description="Decode integer codes (decimal, 0x hex or 0b binary).")
    add_input_arguments(p, what="codes")
    _add_format_option(p, several=False, default=None)
    p.set_defaults(func=cmd_decode)


def _add_explain_parser(sub) -> None:
    p = sub.add_parser("explain", help="step-by-step derivation of values",
                       description="Explain how each value is stored: sign, window, bucket, "
                       "exponent and mantissa fields, exact value, error, neighbours.")
    add_input_arguments(p)
    _add_format_option(p, several=True, default="float16")
    _add_rounding_options(p)
    p.set_defaults(func=cmd_explain)


def _add_finfo_parser(sub) -> None:
    p = sub.add_parser("finfo", help="limits of a format (numpy/torch finfo fields)",
                       description="Print the limits of a format, derived from its encoding.")
    p.add_argument("format", help="format name, e.g. bf16")
    p.add_argument("--oneline", action="store_true", help="torch.finfo-style one-line repr")
    p.set_defaults(func=cmd_finfo)


def _add_formats_parser(sub) -> None:
    p = sub.add_parser("formats", help="list the formats, or compare a few side by side",
                       description="Every preset with its short names, or a side-by-side "
                       "comparison of the formats given.")
    p.add_argument("names", nargs="*", metavar="FORMAT",
                   help="formats to compare side by side (none: list every preset)")
    p.set_defaults(func=cmd_formats)


def _add_values_parser(sub) -> None:
    p = sub.add_parser("values", help="every finite value of a small format",
                       description="List every finite value of a format with its code and bits.")
    p.add_argument("format", help="format name, e.g. e4m3fn or e2m1")
    p.add_argument("--limit", type=positive_int, default=1024,
                   help="refuse to print more values than this (default 1024)")
    p.set_defaults(func=cmd_values)


def _add_compare_parser(sub) -> None:
    p = sub.add_parser(
        "compare", help="train the same MLP under several precisions and compare",
        description="The mixed-precision experiment: an MLP 16-64-64-4 with Adam on "
        "teacher-labelled Gaussians, trained under each precision with every low-precision op "
        "emulated; prints accuracy, time, bytes held, skipped steps, underflow, lost updates "
        "and NaN per precision.")
    p.add_argument("precisions", nargs="*", metavar="PRECISION",
                   default=["32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true"],
                   help="Lightning-style precision strings (default: 32-true 16-mixed "
                   "bf16-mixed 16-true bf16-true), Apex O0..O3, a format name + '-mixed', or a "
                   "training recipe: fp8-delayed, fp8-current, mxfp8, mxfp4, nvfp4, "
                   "deepseek-fp8, msamp-O1..O3, ...")
    p.add_argument("--steps", type=positive_int, default=500,
                   help="training steps (default 500)")
    p.add_argument("--loss-multiplier", "--lambda", default="1", metavar="LAMBDA",
                   help="multiply the loss by LAMBDA, e.g. 2**-16, to push gradients down "
                   "toward fp16's underflow as a deep network does (default 1)")
    p.add_argument("--optimizer", choices=["adam", "adamw", "sgd", "adam8bit", "adamw8bit"],
                   default="adam",
                   help="adam, adamw (torch's AdamW, weight decay 1e-2), sgd, adam8bit or "
                   "adamw8bit (bitsandbytes' 8-bit Adam / AdamW; default adam)")
    p.add_argument("--workers", type=positive_int, default=1,
                   help="run the precisions in this many processes (same results; default 1)")
    p.add_argument("--lr", default=None,
                   help="learning rate, e.g. 1e-3 or 2**-10 (default: the optimizer's)")
    p.add_argument("--rows", type=positive_int, default=8192,
                   help="dataset rows, half for testing (default 8192)")
    p.add_argument("--seed", type=nonnegative_int, default=0,
                   help="seed of the data and the initial weights (default 0)")
    p.add_argument("--plot", metavar="PNG", help="save loss/accuracy/underflow curves here")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_compare)


# One function per subcommand, in the order `floatlab --help` lists them.
_SUBCOMMANDS = (
    _add_tour_parser, _add_compare_parser, _add_bits_parser, _add_round_parser,
    _add_encode_parser, _add_decode_parser, _add_explain_parser, _add_finfo_parser,
    _add_formats_parser, _add_values_parser,
    add_quantize_parser, add_schemes_parser,
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("floatlab")
    except PackageNotFoundError:
        ours = "(not installed: pip install -e .)"
    import ml_dtypes

    return (f"floatlab {ours} (numpy {np.__version__}, ml_dtypes {ml_dtypes.__version__}, "
            f"Python {sys.version.split()[0]})")


class _VersionAction(argparse.Action):
    """Like argparse's "version" action, but looks the versions up only when asked."""

    def __init__(self, option_strings, dest, help=None):  # noqa: A002 - argparse's name
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="floatlab",
        description="See how numbers are stored in floating-point formats.",
        epilog="Run a subcommand with --help for its options. No subcommand: a short tour.",
    )
    parser.add_argument("--version", action=_VersionAction,
                        help="show floatlab's, numpy's, ml_dtypes' and Python's versions")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND",
                                help="one of these (none: the tour)")
    for add_parser in _SUBCOMMANDS:
        add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (0 ok, 1 bad input, 2 usage error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse exits on --help (0) and on usage errors (2)
        return int(exit_.code or 0)
    func = getattr(args, "func", cmd_tour)
    prefix = f"floatlab {args.command or ''}".strip()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return func(args)
        except BrokenPipeError:  # e.g. `floatlab values float16 | head`: not an error
            return EXIT_OK
        except (FormatNameError, ValueError, TypeError, OSError) as error:
            print(f"{prefix}: error: {error}", file=sys.stderr)
            return EXIT_ERROR
        except MemoryError as error:  # a silly size (compare --rows 10**15): one line, no trace
            print(f"{prefix}: error: not enough memory ({error or 'MemoryError'}); ask for "
                  "less: fewer values, rows or steps", file=sys.stderr)
            return EXIT_ERROR
        finally:
            _print_notes(caught, prefix)


def _print_notes(caught: Sequence[warnings.WarningMessage], prefix: str) -> None:
    """Warnings (E8M0 cannot hold 0, ...) as one short note each, without file paths."""
    for message in dict.fromkeys(str(w.message) for w in caught):
        print(f"{prefix}: note: {message}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
