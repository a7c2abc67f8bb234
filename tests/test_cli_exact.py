"""The command line rounds a typed decimal ONCE, exactly, to the target format: checked against
an exact Fraction reference on the format's ties and values +- 1e-30 relative, in every
deterministic mode, for narrow (fp16, bf16, e5m2, tf32, fp32) and wide (float64, e11m51)
formats. Reading the decimal as the nearest float64 first rounded twice:
``round -f fp16 1.00048828125000000000000000001`` printed 1.0 (the answer is 1.0009765625).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from floatlab.cli import main
from floatlab.codec import decode
from floatlab.formats import get_format

MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd")
EPS = Fraction(1, 10**30)
FORMATS = ("fp16", "bf16", "e5m2", "tf32", "fp32", "float64", "e11m51")


def reference(q: Fraction, fmt, mode: str) -> float:
    """q rounded once to an IEEE-style format (with subnormals and inf), exactly."""
    if q == 0:
        return 0.0
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    e = e if Fraction(2) ** e <= a else e - 1
    e = max(e, fmt.emin)
    quantum = Fraction(2) ** (e - fmt.man_bits)
    k = math.floor(a / quantum)
    lo, hi = k * quantum, (k + 1) * quantum
    if lo == a:
        pick = lo
    else:
        negative = q < 0
        mid = (lo + hi) / 2
        pick = {
            "nearest_even": lo if a < mid or (a == mid and k % 2 == 0) else hi,
            "nearest_away": lo if a < mid else hi,
            "toward_zero": lo,
            "up": lo if negative else hi,
            "down": hi if negative else lo,
            "odd": lo if k % 2 else hi,
        }[mode]
    if pick > Fraction(fmt.max):  # IEEE 754 overflow: inf, or max where the mode goes to 0
        to_inf = mode.startswith("nearest") or mode == ("down" if q < 0 else "up")
        pick = math.inf if to_inf else Fraction(fmt.max)
    return math.copysign(float(pick), q)


def decimal_text(q: Fraction) -> str:
    """The exact decimal of a Fraction whose denominator is 2**i * 5**j."""
    d, n = q.denominator, 0
    while d != 1:
        d //= 2 if d % 2 == 0 else 5
        n += 1
    return f"{q.numerator * 10**n // q.denominator}e-{n}"


def cases(fmt) -> list[Fraction]:
    """Ties and values of fmt, each exact and +- 1e-30 relative, across its range."""
    points = []
    for e in (0, 1, -3, fmt.emin, fmt.emin - 2, fmt.emax - 1, fmt.emax):  # (emin - 2: subnormals)
        quantum = Fraction(2) ** (max(e, fmt.emin) - fmt.man_bits)
        base = Fraction(2) ** e if e >= fmt.emin else quantum * 3
        for k in (0, 1, 5):
            for point in (base + k * quantum, base + k * quantum + quantum / 2):
                points += [point, point * (1 + EPS), point * (1 - EPS)]
    top = Fraction(fmt.max) + Fraction(2) ** (fmt.emax - fmt.man_bits) / 2  # the overflow tie
    points += [top * (1 - EPS)]
    return [sign * p for sign in (1, -1) for p in points]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), err
    return out


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("mode", MODES)
def test_round_and_encode_round_typed_decimals_once(capsys, name, mode):
    fmt = get_format(name)
    qs = [q for q in cases(fmt) if abs(q) < Fraction(np.finfo(np.float64).max)]
    texts = [decimal_text(q) for q in qs]
    expected = [reference(q, fmt, mode) for q in qs]
    out = run(capsys, "round", "-f", name, "-r", mode, *texts).splitlines()
    got = [float(line.rpartition(" -> ")[2]) for line in out]
    bad = [(t, g, x) for t, g, x in zip(texts, got, expected, strict=True) if g != x]
    assert not bad, bad[:5]
    codes = run(capsys, "encode", "-f", name, "-r", mode, *texts).split()
    decoded = decode(np.array([int(c, 16) for c in codes], dtype=np.uint64), fmt)
    assert [float(v) for v in decoded] == expected


def test_the_reported_double_rounding(capsys):
    """1 + 2**-11 + 1e-29 lies above fp16's tie: it rounds up once; via float64 it became
    the tie itself and then 1.0."""
    assert run(capsys, "round", "-f", "fp16", "1.00048828125000000000000000001") == \
        "1.00048828125000000000000000001 -> 1.0009765625\n"
    out = run(capsys, "bits", "-f", "fp16,bf16", "1.00048828125000000000000000001")
    assert "0x3c01  1.0009765625" in out
    out = run(capsys, "explain", "-f", "fp16", "1.00048828125000000000000000001")
    assert out.startswith("float16(1.00048828125000000000000000001) = 1.0009765625")
    assert "no float64 is x: the nearest is 1.00048828125" in out
    # a hex float with more digits than float64's 53 bits: also exact
    assert run(capsys, "round", "-f", "fp16", "0x1.00400000000001p0") == \
        "0x1.00400000000001p0 -> 1.0009765625\n"


def test_explain_tells_the_exact_error_and_offset_of_the_typed_value(capsys):
    out = run(capsys, "explain", "-f", "fp16", "0.1")
    assert "(|x| - 0.0625) / 0.00006103515625 = 614.4..." in out  # not the carrier's 614.3999
    out = run(capsys, "explain", "-f", "fp16", "1.0000000000000000000000000001")
    assert "stored - x = -1e-28" in out  # (the carrier's error is -2.2e-16)
    out = run(capsys, "explain", "-f", "float64", "-r", "up", "0.1")
    assert out.startswith("float64(0.1) = 0.1   [rounded;")
    assert "rounding up (toward +inf) picks\n              bucket 2702159776422298" in out


def test_wide_formats_overflow_and_saturate_between_max_and_the_float64_tie(capsys):
    """max < x < max + ulp/2 is read (its nearest float64 is max): float64 rounds it up to inf,
    or to max with --saturate, and e11m51 (max below float64's) overflows to nearest."""
    x = decimal_text(Fraction(np.finfo(np.float64).max) + 1)
    assert run(capsys, "round", "-f", "float64", "-r", "up", x) == f"{x} -> inf\n"
    assert run(capsys, "round", "-f", "float64", "-r", "up", "--saturate", x) == \
        f"{x} -> 1.7976931348623157e+308\n"
    assert run(capsys, "round", "-f", "float64", x) == f"{x} -> 1.7976931348623157e+308\n"
    assert run(capsys, "round", "-f", "e11m51", x) == f"{x} -> inf\n"
    assert run(capsys, "round", "-f", "fp16", "-r", "rtz", x) == f"{x} -> 65504.0\n"


def test_stochastic_rounding_of_a_typed_decimal_stays_between_its_neighbours(capsys):
    for name, lo, hi in (("fp16", 1.0, 1.0009765625), ("float64", 0.1, math.nextafter(0.1, 1))):
        x = "1.00048828125000000000000000001" if name == "fp16" else "0.1000000000000000065"
        seen = {float(line.rpartition(" -> ")[2]) for line in
                run(capsys, "round", "-f", name, "-r", "sr", *[x] * 200).splitlines()}
        assert seen == {lo, hi}
        same = run(capsys, "round", "-f", name, "-r", "sr", "--seed", "3", x, x)
        assert same == run(capsys, "round", "-f", name, "-r", "sr", "--seed", "3", x, x)


def test_quantize_rounds_a_typed_decimal_once(capsys):
    """Above e4m3's tie 1 + 2**-4 by 1e-29: MXFP8 (a power-of-two scale) stores 1.125."""
    out = run(capsys, "quantize", "-s", "mxfp8", "1.06250000000000000000000000001", "4")
    assert out.splitlines()[2].split()[-1] == "1.125"


@pytest.mark.parametrize(
    ("text", "exact"),
    [("1.0001**10001", Fraction(10001, 10000) ** 10001),
     ("0.9999**-20000", Fraction(9999, 10000) ** -20000),
     ("2**-1074", Fraction(2) ** -1074), ("-0.5**1074", -(Fraction(1, 2) ** 1074)),
     ("1.5**1750", Fraction(3, 2) ** 1750)],
)
def test_a_power_is_limited_by_its_size_not_its_exponent(capsys, text, exact):
    """1.0001**10001 = 2.718... was refused as 'beyond float64's range' (any exponent above
    10_000 was); the limit is now the result's size, log10|base| * exponent."""
    out = run(capsys, "round", "-f", "float64", "--", text)
    assert out.split(" -> ")[1] == f"{float(exact)!r}\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [("10**10**10", "one power only"), ("10**10000000000", "beyond float64's range"),
     ("1.0001**-100000000000", "below float64's smallest"), ("1.5**1751", "beyond float64"),
     ("1.0000000001**1000000000", "too many digits")],
)
def test_big_exponents_are_clear_errors_at_once(capsys, text, message):
    code = main(["round", "-f", "fp16", "--", text])
    _, err = capsys.readouterr()
    assert code == 1 and message in err and "Traceback" not in err


def test_a_negated_zero_power_is_negative_zero(capsys):
    """-0**3 is -(0**3), as in Python: -0.0 (it gave +0.0: the sign went into an exact 0)."""
    assert run(capsys, "round", "-f", "fp16", "-0**3", "0**3", "-0") == \
        "-0.0 -> -0.0\n0.0 -> 0.0\n-0.0 -> -0.0\n"
    assert run(capsys, "encode", "-f", "bf16", "-0.0**5") == "0x8000\n"


def test_explain_of_a_tiny_typed_value_rounded_up_has_an_infinite_relative_error(capsys):
    """The relative error of 2.5e-324 rounded up to fp16's 2**-24 is beyond float64's range:
    it reads inf (as explain's own), not an OverflowError."""
    out = run(capsys, "explain", "-f", "fp16", "-r", "up", "2.5e-324")
    assert "stored - x = 5.96046e-08 (+1 ulp); relative inf" in out


def test_explain_of_a_wide_format_tells_the_window_of_the_typed_value(capsys):
    """Just below 0.125, rounded up to float64: x lies in [0.0625, 0.125) and the result
    carries into the next window (the steps told x's window from the result 0.125)."""
    out = run(capsys, "explain", "-f", "float64", "-r", "up", "0.12499999999999999999999")
    assert "2^-4 <= |x| < 2^-3, so e = -4: x lies in the window [0.0625, 0.125)" in out
    assert "(|x| - 0.0625) / 1.38778e-17 = 4503599627370495.999999..." in out
    assert "(a carry)" in out
