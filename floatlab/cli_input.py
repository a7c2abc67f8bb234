"""Reading what people type on the ``floatlab`` command line: numbers, codes, format lists,
rounding options, and values from arguments, files or a pipe (see floatlab.cli).

>>> parse_number("-2**-24"), parse_number("0x1.8p1")
(-5.960464477539063e-08, 3.0)
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from decimal import Decimal, InvalidOperation, localcontext
from fractions import Fraction

import numpy as np

from floatlab.formats import Format, format_names, get_format
from floatlab.rounding import _resolve_mode

__all__ = [
    "parse_number", "parse_code", "positive_int", "nonnegative_int", "rounding_mode",
    "positive_number", "stdin_is_piped", "read_words", "read_numbers", "format_list",
    "one_format", "rounding_options", "read_typed", "carriers",
]


# --------------------------------------------------------------------------- parsing numbers

def parse_number(text: str) -> float:
    """A float64 from what people type: ``3.141``, ``-1e-8``, ``-inf``, ``nan``, a hex float
    (``0x1.8p1``, as ``float.hex`` writes) or a power with an integer exponent (``2**-24``).

    Numbers float64 cannot hold (``1e400``, ``1e-400``, ``2**10000``) are refused rather than
    silently turned into inf or 0. This is the float64 nearest to the text; the commands that
    round keep the exact value (:mod:`floatlab.cli_exact`) so that they round only once.

    >>> parse_number("2**-24"), parse_number("-0x1.8p1"), parse_number("-inf")
    (5.960464477539063e-08, -3.0, -inf)
    """
    return _parse_exact(text)[0]


def _parse_exact(text: str) -> tuple[float, Fraction | None]:
    """The float64 nearest to ``text`` and its exact value (None for inf and nan)."""
    cleaned = text.strip().replace(" ", "")
    if "**" in cleaned:
        return _parse_power(text, cleaned)
    try:
        value = float(cleaned)
    except ValueError:
        parsed = _parse_hex_float(text, cleaned)
        if parsed is None:
            raise ValueError(
                f"{text!r} is not a number (try 3.141, -1e-8, inf, nan, 0x1.8p1 or 2**-24)"
            ) from None
        return parsed
    _check_decimal_fits(text, cleaned, value)
    if not math.isfinite(value) or value == 0:  # (a zero's digits may have any exponent)
        return value, None if value else Fraction(0)
    try:  # finite: Decimal's exponent is within float64's range plus the digits typed
        return value, Fraction(Decimal(cleaned))
    except InvalidOperation:  # float() and Decimal() read the same numbers; just in case
        raise ValueError(f"{text!r} is not a decimal number floatlab can read exactly "
                         "(try 3.141, -1e-8 or 0x1.8p1)") from None


# The command line reads each value exactly (not rounded to float64), within float64's range.
_WITHIN = "type a value within float64's range (read exactly, not rounded to float64)"
_TOO_BIG = f"is beyond float64's range (max about 1.8e308 = 2**1024): {_WITHIN}"
_TOO_SMALL = f"is below float64's smallest positive value (about 4.9e-324 = 2**-1074): {_WITHIN}"
_HEX = re.compile(r"([+-]?)0x([0-9a-f]*)\.?([0-9a-f]*)(?:p([+-]?[0-9]+))?")


def _parse_hex_float(text: str, cleaned: str) -> tuple[float, Fraction] | None:
    if "0x" not in cleaned.lower():
        return None
    try:
        value = float.fromhex(cleaned)
    except OverflowError:
        raise ValueError(f"{text!r} {_TOO_BIG}") from None
    except ValueError:
        return None
    digits = cleaned.lower().split("0x", 1)[1].split("p", 1)[0]
    if value == 0 and digits.strip("0.") != "":  # fromhex rounds 0x1p-1080 to 0 silently
        raise ValueError(f"{text!r} {_TOO_SMALL}")
    # fromhex rounds digits beyond float64's 53 bits: the exact value is the digits' own
    match = _HEX.fullmatch(cleaned.lower())
    if match is None or value == 0:
        return value, Fraction(0) if value == 0 else Fraction(value)
    sign, whole, fraction, exponent = match.groups()
    exact = Fraction(int(whole + fraction or "0", 16)) * Fraction(2) ** (
        int(exponent or 0) - 4 * len(fraction))  # value is finite and nonzero: a small power
    return value, -exact if sign == "-" else exact
def _check_decimal_fits(text: str, cleaned: str, value: float) -> None:
    """float() turns 1e400 into inf and 1e-400 into 0 without a word: refuse both."""
    if math.isfinite(value) and value != 0:
        return
    try:
        exact = Decimal(cleaned)
        nonzero = exact.is_finite() and exact != 0
    except InvalidOperation:
        # Decimal refuses exponents beyond about 10**18 ('1e-99999999999999999999') that
        # float() turns into 0 or inf: the value is nonzero when its digits are.
        nonzero = any(c.isdecimal() and int(c) for c in re.split("[eE]", cleaned)[0])
    if nonzero:
        raise ValueError(f"{text!r} {_TOO_BIG if value else _TOO_SMALL}")


_POWER_BITS = 1 << 23  # the largest exact power built: about 2.5 million digits, under 1 s


def _parse_power(text: str, cleaned: str) -> tuple[float, Fraction]:
    """``base**exponent`` computed exactly (returned with its nearest float64, so 0.1**2 is
    the float64 nearest 1/100, not Python's 0.1**2 = 0.010000000000000002).

    Refused: a result beyond float64's range, told from its size log10|base| * exponent
    before the exact number is built (so 10**10000000000 is refused at once, and
    1.0001**10001 = 2.7 is fine), and an exact power too long to build quickly."""
    base_text, _, exponent_text = cleaned.partition("**")
    sign = -1 if base_text.startswith("-") else 1  # as in Python, -2**-24 is -(2**-24)
    if "**" in exponent_text:
        raise ValueError(f"{text!r}: one power only (a**b**c would be a**(b**c)); write the "
                         "exponent as an integer, e.g. 10**100 or 2**-24")
    # The base is one optional sign and a decimal number, as a value without a power:
    # Fraction also read '+-2' as 2 (+-2**2 gave 4, Python's -4) and '2/3' as a fraction
    # (2/3**2 gave 4/9, Python's 2/9), and turned '1e-99999999' into a 10**99999999 (a hang).
    unsigned = base_text[1:] if base_text[:1] in "+-" else base_text
    try:
        if unsigned[:1] in "+-":
            raise ValueError
        decimal, exponent = Decimal(unsigned), int(exponent_text)
        if not decimal.is_finite():
            raise ValueError
    except (ValueError, InvalidOperation):
        raise ValueError(
            f"{text!r} is not a number: powers need a number and an integer exponent, "
            "e.g. 2**-16 or 10**3"
        ) from None
    if decimal == 0 and exponent < 0:
        raise ValueError(f"{text!r} divides by zero")
    if exponent != 0 and decimal not in (0, 1):
        # float64 spans 10**-323.3 .. 10**308.3; a margin leaves the edges to the exact test
        if abs(decimal.adjusted()) > 400:
            size = decimal.adjusted() * exponent
        else:
            with localcontext() as context:
                context.prec = 40
                size = abs(decimal).log10() * exponent
        if size > 310 or size < -326:
            raise ValueError(f"{text!r} {_TOO_BIG if size > 0 else _TOO_SMALL}")
        base = Fraction(decimal)
        if abs(exponent) * (base.numerator.bit_length() + base.denominator.bit_length()) \
                > _POWER_BITS:
            raise ValueError(f"{text!r}: the exact power has too many digits to compute "
                             f"(about {abs(exponent)} times those of {unsigned}); use a base "
                             "with fewer digits or a smaller exponent")
    exact = sign * (Fraction(decimal) ** exponent if exponent else Fraction(1))  # x**0 = 1
    try:
        value = float(exact)
    except OverflowError:
        raise ValueError(f"{text!r} {_TOO_BIG}") from None
    if value == 0 and exact != 0:
        raise ValueError(f"{text!r} {_TOO_SMALL}")
    return math.copysign(value, sign) if exact == 0 else value, exact  # -0**3 is -(0**3): -0.0


def parse_code(text: str, fmt: Format) -> int:
    """An integer code of ``fmt`` in decimal, 0x hex, 0b binary or 0o octal.

    >>> parse_code("0x3c00", get_format("fp16"))
    15360
    """
    try:
        code = int(text.strip(), 0)
    except ValueError:
        raise ValueError(
            f"{text!r} is not an integer code: give decimal (72), hex (0x48) or binary "
            "(0b01001000)"
        ) from None
    limit = 1 << fmt.bits
    if code < 0:
        raise ValueError(
            f"{text!r} is negative, but codes are the unsigned bit patterns 0..{limit - 1:#x} of "
            f"{fmt.name}; for the code of the value {text}, run: floatlab encode -f {fmt.name} "
            f"{text}"
        )
    if code >= limit:
        raise ValueError(
            f"code {text} does not fit in the {fmt.bits} bits of {fmt.name}: valid codes are "
            f"0..{limit - 1:#x}"
        )
    return code


# argparse ``type=`` functions: their ArgumentTypeError is a usage error (exit 2).

def positive_int(text: str) -> int:
    """1, 2, 3, ... (steps, rows, limits)."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (e.g. 500)") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return number


def nonnegative_int(text: str) -> int:
    """0, 1, 2, ... (seeds)."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (e.g. 0)") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative: give 0, 1, 2, ...")
    return number


def rounding_mode(text: str) -> str:
    """A rounding mode or alias, resolved by floatlab.round's own table (rtz -> toward_zero)."""
    try:
        return _resolve_mode(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{error} (or an alias such as rne, rtz, sr)") from None


def positive_number(text: str, option: str, example: str) -> float:
    """A finite number above 0 for a compare option (a bad one is bad input: exit 1)."""
    try:
        value = parse_number(text)
    except ValueError as error:
        raise ValueError(f"{option} {text}: {error}; try e.g. {option} {example}") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{option} must be a finite number above 0, got {text}; try e.g. "
                         f"{option} {example}")
    return value


# --------------------------------------------------------------------------- reading input

def stdin_is_piped() -> bool:
    """Read stdin only when something is piped or redirected into it, never from a terminal."""
    return sys.stdin is not None and not sys.stdin.isatty()


def read_words(args: argparse.Namespace, what: str = "values") -> list[str]:
    """The words of the positional arguments, then of --file (``-``: stdin); with neither, of
    a piped stdin."""
    words = list(args.values)
    path = args.file
    if path is None and not words and stdin_is_piped():
        path = "-"
    if path == "-":
        words += sys.stdin.read().replace(",", " ").split()
    elif path:
        with open(path, encoding="utf-8") as handle:
            words += handle.read().replace(",", " ").split()
    if not words:
        raise ValueError(
            f"no input: give {what} as arguments, --file PATH (- for stdin), or pipe them in "
            f"(echo 3.141 | floatlab {args.command} -f fp16)"
        )
    return words


def add_input_arguments(p: argparse.ArgumentParser, what: str = "values",
                        example: str | None = None) -> None:
    if example is None:  # (a command that refuses some of these passes its own example)
        example = "0x4248 0b0011110000000000 72" if what == "codes" else "3.141 -1e-8 -inf 2**-24"
    p.add_argument("values", nargs="*", metavar=what[:-1].upper(),
                   help=f"{what}, e.g. {example} (none: read them from --file or a pipe)")
    p.add_argument("--file", metavar="PATH",
                   help=f"read (more) {what} from a file, separated by spaces, commas or lines "
                   "(- for stdin)")


def read_numbers(args: argparse.Namespace) -> tuple[list[str], np.ndarray]:
    """The words as typed and their nearest float64 values."""
    words = read_words(args)
    return words, np.array([parse_number(w) for w in words], dtype=np.float64)


def read_typed(args: argparse.Namespace) -> list:
    """The words as :class:`floatlab.cli_exact.Typed` numbers: exact values, rounded once."""
    from floatlab.cli_exact import typed

    return [typed(word) for word in read_words(args)]


def carriers(numbers: list, fmt: Format, options: dict) -> np.ndarray:
    """The float64s that ``floatlab.round(., fmt, **options)`` rounds as it rounds the typed
    values (floatlab.cli_exact): the typed decimal is rounded once, not via float64."""
    rng = None
    if options["rounding"] == "stochastic":  # only the wide formats' (float64's) draw uses it
        rng = np.random.default_rng(options["rng"])
    return np.array([t.carrier(fmt, options["rounding"], options["saturate"], rng)
                     for t in numbers], dtype=np.float64)


# --------------------------------------------------------------------------- formats

def format_list(text: str) -> list[Format]:
    """``fp16``, a comma list ``fp16,bf16,e4m3fn`` or ``all`` (every preset)."""
    names = format_names() if text.strip().lower() == "all" else text.split(",")
    names = [n for n in names if n.strip()]
    if not names:
        raise ValueError("no format given: try -f fp16, -f fp16,bf16 or -f all")
    return [get_format(name) for name in names]


def one_format(text: str, command: str) -> Format:
    """The single format of a command that takes one (round, encode, decode)."""
    formats = format_list(text)
    if len(formats) != 1:
        raise ValueError(
            f"{command} takes one format, got {text!r}; to see values in several formats use "
            f"floatlab bits VALUE -f {text}"
        )
    return formats[0]


def rounding_options(args: argparse.Namespace) -> dict:
    """The keyword arguments of floatlab.round that the options describe."""
    if args.seed is not None and args.rounding != "stochastic":
        raise ValueError(
            f"--seed only affects stochastic rounding, but --rounding is {args.rounding}: "
            "add --rounding stochastic (or sr), or drop --seed"
        )
    return dict(rounding=args.rounding, saturate=args.saturate, subnormals=not args.ftz,
                rng=args.seed)
