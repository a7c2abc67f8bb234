"""Property tests on CUSTOM formats (hypothesis): formats drawn from the whole space that
``Format(...)`` and the spec grammar of ``get_format`` accept (exponent 0..11, mantissa 0..52,
any bias that fits float64, ieee / fn / fnuz / none / p3109, unsigned, FTZ, no zero), checked
against exact ``fractions.Fraction`` references written here from the seven encoding fields
alone (no floatlab limit, no floatlab rounding):

* ``floatlab.round`` in every mode on values at and around codes, midpoints, max, the overflow
  threshold, the smallest subnormal and half of it, and zeros; stochastic rounding's two
  candidates and its probability;
* the codec: decode of every code of formats up to 12 bits, encode / bit-string round trips;
* ``finfo`` fields against their definitions;
* FloatArray + - * / sqrt and fma, and Accumulator sums, against Fraction arithmetic.

Registered formats had exhaustive sweeps (tests/test_rounding_exact.py and friends); these
tests are for the formats nobody registered. Deterministic (derandomize=True) and small.
"""

from __future__ import annotations

import math
import os
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import floatlab
from floatlab import Format

_EXPLORE = os.environ.get("HYPOTHESIS_PROFILE") == "dev"  # many random examples, by hand
SETTINGS = settings(max_examples=1500 if _EXPLORE else 60, derandomize=not _EXPLORE,
                    deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
DETERMINISTIC = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd")
MIRROR = {"up": "down", "down": "up"}


# --------------------------------------------------------------------------- formats

def _default_bias(e: int, special: str) -> int:
    if e == 0:
        return 0
    return (1 << (e - 1)) - (0 if special in ("fnuz", "p3109") else 1)


@st.composite
def formats(draw, max_bits: int = 64, spec_names: bool = True):
    """A custom Format: built with Format(...) or parsed from a spec name by get_format."""
    special = draw(st.sampled_from(["ieee", "fn", "fnuz", "none", "p3109"]))
    e = draw(st.integers(0, 11))
    m = draw(st.integers(0, 52))
    if 1 + e + m > max_bits:
        m = max(0, max_bits - 1 - e)
    signed = draw(st.booleans()) if special != "fnuz" else True
    variant = draw(st.sampled_from(["plain", "plain", "ftz", "nozero"]))
    subnormals, has_zero = {"plain": (True, True), "ftz": (False, True),
                            "nozero": (False, False)}[variant]
    bias = _default_bias(e, special) + draw(st.sampled_from([0, 0, 1, -1, 3, -5, 200]))
    kwargs = dict(exp_bits=e, man_bits=m, bias=bias, signed=signed, special=special,
                  subnormals=subnormals, has_zero=has_zero)
    try:
        fmt = Format(**kwargs)
    except ValueError:
        assume(False)
    if spec_names and draw(st.booleans()):  # the same format through its spec name
        again = floatlab.get_format(fmt.name)
        assert again == fmt, (fmt.name, again, fmt)
        fmt = again
    return fmt


NAMED_SPECS = ["e2m1", "e3m0fn_nonan", "e2m1_ieee", "e3m0fn", "e8m23", "e11m51", "e11m52",
               "e5m2b10", "e4m3b-2fn", "e3m2fnuz", "e4m3_p3109", "e5m2fn_nonan", "e4m0fnu",
               "e3m3_ftz", "e6m1_unsigned", "e4m3fn_unsigned_nozero", "e8m7", "e1m6fn", "e0m5fn"]


# --------------------------------------------------------------------------- exact reference

class Ref:
    """A format read from its seven encoding fields; values as Fractions."""

    def __init__(self, fmt: Format):
        self.E, self.M, self.bias = fmt.exp_bits, fmt.man_bits, fmt.bias
        self.signed, self.special = fmt.signed, fmt.special
        self.sub, self.hz = fmt.subnormals, fmt.has_zero
        self.bits = int(self.signed) + self.E + self.M
        self.emin = (1 if self.hz else 0) - self.bias
        top = (1 << (self.E + self.M)) - 1
        start = (((1 << self.E) - 1) << self.M) - 1 if self.special == "ieee" else top
        self.max_code = next(c for c in range(start, -1, -1) if self.finite(self.decode(c)))
        self.max = self.decode(self.max_code)
        self.has_inf = self.special in ("ieee", "p3109")
        self.has_nan = self.special != "none"
        self.neg_zero = self.signed and self.hz and self.special not in ("fnuz", "p3109")

    @staticmethod
    def finite(v) -> bool:
        return isinstance(v, Fraction)

    def decode(self, code: int):
        """Fraction, 'inf', '-inf', 'nan', '-0' or None (unused code)."""
        E, M = self.E, self.M
        sign = (code >> (E + M)) & 1 if self.signed else 0
        mag = code & ((1 << (E + M)) - 1)
        field, mant = mag >> M, mag & ((1 << M) - 1)
        ones_f, ones = (1 << E) - 1, (1 << (E + M)) - 1
        if self.special == "ieee" and field == ones_f:
            return ("-inf" if sign else "inf") if mant == 0 else "nan"
        if self.special == "fn" and mag == ones:
            return "nan"
        if self.special == "fnuz" and sign and mag == 0:
            return "nan"
        if self.special == "p3109":
            if (self.signed and sign and mag == 0) or (not self.signed and mag == ones):
                return "nan"
            if mag == ones - (0 if self.signed else 1):
                return "-inf" if sign else "inf"
        if self.hz and field == 0:
            if mant == 0:
                return "-0" if sign else Fraction(0)
            if not self.sub:
                return None
            value = Fraction(mant) * Fraction(2) ** (self.emin - M)
        else:
            value = Fraction((1 << M) | mant) * Fraction(2) ** (field - self.bias - M)
        return -value if sign else value

    def smallest_positive(self) -> Fraction:
        if self.hz and self.sub and self.M > 0:
            return Fraction(2) ** (self.emin - self.M)
        return Fraction(2) ** self.emin

    def overflow(self, negative: bool, mode: str, saturate: bool) -> float:
        big = float(self.max)
        if saturate or self.special == "none" or mode in ("toward_zero", "odd") or \
                (mode == "up" and negative) or (mode == "down" and not negative):
            return -big if negative else big
        if self.has_inf:
            return -math.inf if negative else math.inf
        return math.nan

    def candidates(self, x: Fraction, ftz: bool = False) -> tuple[Fraction, Fraction, int]:
        """For x > 0: (lo, hi, n_lo) on the grid with exponent unbounded above (and below
        when there are no subnormals), hi = lo + quantum; n_lo the integer significand."""
        e = x.numerator.bit_length() - x.denominator.bit_length()
        if Fraction(2) ** e > x:
            e -= 1
        if self.hz and self.sub and not ftz:  # FTZ rounds on the unbounded grid, then flushes
            e = max(e, self.emin)
        q = Fraction(2) ** (e - self.M)
        n = math.floor(x / q)
        return n * q, (n + 1) * q, n

    def round(self, xf: float, mode: str, saturate: bool = False, ftz: bool = False) -> float:
        """The correctly rounded float64 value of xf (NaN as nan, -0 as -0.0)."""
        if math.isnan(xf):
            return math.nan
        if math.isinf(xf):
            if self.has_inf:
                return xf
            if saturate or not self.has_nan:
                return -float(self.max) if xf < 0 else float(self.max)
            return math.nan
        if not self.signed and (xf < 0 or (xf == 0 and math.copysign(1, xf) < 0)):
            raise AssertionError("unsigned formats are fed non-negative values here")
        return self.round_exact(Fraction(xf), mode, saturate, ftz,
                                negative=math.copysign(1.0, xf) < 0)

    def round_exact(self, value: Fraction, mode: str, saturate: bool = False,
                    ftz: bool = False, negative: bool | None = None) -> float:
        """Round an exact rational (``negative`` gives the sign of a zero)."""
        if negative is None:
            negative = value < 0
        x = abs(value)
        if x == 0:
            if not self.hz:
                return math.nan
            return -0.0 if negative and self.neg_zero else 0.0
        m = MIRROR.get(mode, mode) if negative else mode
        lo, hi, n = self.candidates(x, ftz)
        if lo == x:
            r = lo
        elif m == "nearest_even" or m == "nearest_away":
            mid = (lo + hi) / 2
            if x != mid:
                r = hi if x > mid else lo
            else:
                r = hi if m == "nearest_away" or n % 2 else lo
        elif m in ("toward_zero", "down"):
            r = lo
        elif m == "up":
            r = hi
        elif m == "odd":
            r = lo if n % 2 else hi
        else:
            raise AssertionError(m)
        tiny = Fraction(2) ** self.emin
        if not self.hz and r < tiny:
            r = tiny  # no zero (E8M0): clamp up to the smallest value
        if r > self.max:
            return self.overflow(negative, mode, saturate)
        if self.hz and (ftz or not self.sub) and 0 < r < tiny:
            r = Fraction(0)
        result = float(r)
        assert Fraction(result) == r
        if negative:
            return -result if (result or self.neg_zero) else 0.0
        return result


def same(a, b) -> bool:
    """Equal as floats, NaN == NaN, and zeros must agree in sign."""
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


# --------------------------------------------------------------------------- edge values

def _f(v: Fraction) -> float:
    return float(v)


@st.composite
def edge_values(draw, fmt: Format):
    """A float64 at or around an edge of fmt: a code's value, a midpoint, max, max + half an
    ulp, the smallest subnormal, its half, 0 / -0; nudged by a few float64 ulps."""
    ref = Ref(fmt)
    kind = draw(st.sampled_from(["code", "mid", "max", "overflow", "tiny", "halftiny",
                                 "zero", "scaled"]))
    top = ref.max_code
    if kind in ("code", "mid"):
        c = draw(st.integers(0, top))
        v = ref.decode(c)
        assume(ref.finite(v))
        if kind == "mid":
            w = ref.decode(c + 1) if c < top else None
            if not ref.finite(w):
                lo, hi, _ = ref.candidates(v) if v > 0 else (0, ref.smallest_positive(), 0)
                w = hi
            v = (v + w) / 2
        x = _f(v)
    elif kind == "max":
        x = _f(ref.max)
    elif kind == "overflow":
        _, hi, _ = ref.candidates(ref.max + Fraction(1, 10**400))  # the next grid point
        assume((ref.max + hi) / 2 <= Fraction(np.finfo(np.float64).max))
        x = _f((ref.max + hi) / 2)
    elif kind == "tiny":
        x = _f(ref.smallest_positive())
    elif kind == "halftiny":
        x = _f(ref.smallest_positive() / draw(st.sampled_from([2, 4, Fraction(4, 3)])))
    elif kind == "zero":
        x = 0.0
    else:
        lo_e = max(ref.emin - ref.M - 3, -1074)
        hi_e = min(int(math.log2(float(ref.max))) + 2, 1023)
        x = math.ldexp(draw(st.floats(1.0, 2.0, exclude_max=True)), draw(st.integers(lo_e, hi_e)))
    nudge = draw(st.sampled_from([0, 0, 0, 1, -1, 2, -3]))
    for _ in range(abs(nudge)):
        with np.errstate(over="ignore"):  # max of e11m52 nudged up: inf, then assumed away
            x = float(np.nextafter(x, math.inf if nudge > 0 else -math.inf))
    assume(math.isfinite(x))
    assume(x != 0 or fmt.has_zero)  # zero into a format without zero: its own test
    if not fmt.signed:
        x = abs(x)
    elif draw(st.booleans()):
        x = -x
    return x


def _ftz_unsupported(fmt: Format, ftz: bool) -> bool:
    return (ftz or not fmt.subnormals) and fmt.has_zero and fmt.emin == -1022 and fmt.man_bits < 52


# --------------------------------------------------------------------------- rounding

@SETTINGS
@given(st.data())
def test_round_every_mode_matches_fraction_reference(data):
    fmt = data.draw(formats())
    ref = Ref(fmt)
    xs = [data.draw(edge_values(fmt)) for _ in range(8)]
    saturate = data.draw(st.booleans())
    ftz = data.draw(st.booleans())
    assume(not _ftz_unsupported(fmt, ftz))
    assume(not ftz or fmt.has_normals)  # FTZ without a normal value would flush everything
    for mode in DETERMINISTIC:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got = floatlab.round(np.array(xs), fmt, rounding=mode, saturate=saturate,
                                 subnormals=not ftz)
        for x, g in zip(xs, got, strict=True):
            want = ref.round(x, mode, saturate=saturate, ftz=ftz)
            assert same(g, want), (fmt, mode, saturate, ftz, x.hex(), float(g), want)


@SETTINGS
@given(st.data())
def test_round_named_specs(data):
    fmt = floatlab.get_format(data.draw(st.sampled_from(NAMED_SPECS)))
    ref = Ref(fmt)
    xs = [data.draw(edge_values(fmt)) for _ in range(8)]
    for mode in DETERMINISTIC:
        got = floatlab.round(np.array(xs), fmt, rounding=mode)
        for x, g in zip(xs, got, strict=True):
            assert same(g, ref.round(x, mode)), (fmt, mode, x.hex(), float(g))


@SETTINGS
@given(st.data())
def test_round_inf_and_nan_per_flags(data):
    fmt = data.draw(formats())
    assume(not _ftz_unsupported(fmt, False))  # refused with a clear error
    ref = Ref(fmt)
    saturate = data.draw(st.booleans())
    mode = data.draw(st.sampled_from(DETERMINISTIC))
    for x in (math.inf, -math.inf, math.nan):
        if not fmt.signed and x == -math.inf:
            continue
        if not fmt.has_nan and not (saturate and math.isinf(x)):
            with pytest.raises(ValueError):
                floatlab.round(x, fmt, rounding=mode, saturate=saturate)
            continue
        got = floatlab.round(x, fmt, rounding=mode, saturate=saturate)
        assert same(got, ref.round(x, mode, saturate=saturate)), (fmt, x, mode, saturate)


@settings(max_examples=25, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_stochastic_candidates_and_probability(data):
    fmt = data.draw(formats())
    ref = Ref(fmt)
    x = data.draw(edge_values(fmt))
    assume(x != 0 and abs(Fraction(x)) < ref.max)
    assume(not (not fmt.has_zero and abs(Fraction(x)) < 2 ** Fraction(fmt.emin)))
    n = 4000
    got = floatlab.round(np.full(n, x), fmt, rounding="stochastic", rng=7)
    toward = ref.round(x, "toward_zero")
    away = ref.round(x, "up" if x > 0 else "down")
    assert set(np.unique(got).tolist()) <= {toward, away}, (fmt, x.hex(), np.unique(got))
    lo, hi, _ = ref.candidates(abs(Fraction(x)))
    if lo == abs(Fraction(x)) or toward == away:
        return
    p = float((abs(Fraction(x)) - lo) / (hi - lo))  # probability of rounding away from zero
    share = float(np.mean(got == away))
    assert abs(share - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12, (fmt, x.hex(), share, p)


# --------------------------------------------------------------------------- codec

@SETTINGS
@given(formats(max_bits=12))
def test_codec_every_code_round_trips(fmt):
    assume(not _ftz_unsupported(fmt, False))  # encode refuses those, with a clear error
    ref = Ref(fmt)
    codes = np.arange(1 << fmt.bits)
    got = floatlab.decode(codes, fmt)
    values = []
    for code, g in zip(codes.tolist(), got, strict=True):
        want = ref.decode(code)
        if want is None:  # exponent field 0 of a format without subnormals: unused
            continue
        shown = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan, "-0": -0.0}.get(want, want)
        assert same(g, float(shown)), (fmt, hex(code), float(g), want)
        values.append((code, float(shown)))
    finite = [(c, v) for c, v in values if not math.isnan(v)]
    again = floatlab.encode(np.array([v for _, v in finite]), fmt)
    assert again.tolist() == [c for c, _ in finite], fmt
    if fmt.has_nan:
        assert int(floatlab.encode(math.nan, fmt)) == fmt.nan_code
        assert ref.decode(fmt.nan_code) == "nan"
    bits = floatlab.to_bin(np.array([v for _, v in finite]), fmt)
    assert all(len(b) == fmt.bits for b in bits)
    assert [int(b, 2) for b in bits] == [c for c, _ in finite]
    back = floatlab.from_bin(bits, fmt)
    assert all(same(b, v) for b, (_, v) in zip(back, finite, strict=True))
    hexes = floatlab.to_hex(np.array([v for _, v in finite]), fmt)
    assert [int(h, 16) for h in hexes] == [c for c, _ in finite]
    assert all(same(b, v) for b, (_, v) in
               zip(floatlab.from_hex(hexes, fmt), finite, strict=True))


@SETTINGS
@given(formats(max_bits=64))
def test_codec_wide_formats_edges(fmt):
    assume(not _ftz_unsupported(fmt, False))  # encode refuses those, with a clear error
    ref = Ref(fmt)
    top = ref.max_code
    picks = sorted({0, 1, 2, top, top - 1, top // 2, top // 3, ref.max_code >> 1})
    codes = [c for c in picks if 0 <= c <= top and ref.finite(ref.decode(c))]
    if fmt.signed:
        codes += [c | fmt.sign_mask for c in codes if ref.finite(ref.decode(c | fmt.sign_mask))]
    arr = np.array(codes, dtype=fmt.code_dtype)
    got = floatlab.decode(arr, fmt)
    for code, g in zip(codes, got, strict=True):
        assert Fraction(float(g)) == ref.decode(code), (fmt, hex(code), float(g))
    assert floatlab.encode(got, fmt).tolist() == codes


# --------------------------------------------------------------------------- finfo

@SETTINGS
@given(formats())
def test_finfo_fields_from_definitions(fmt):
    ref = Ref(fmt)
    fi = floatlab.finfo(fmt)
    assert (fi.bits, fi.nexp, fi.nmant, fi.iexp, fi.bias, fi.p) == (
        int(fmt.signed) + fmt.exp_bits + fmt.man_bits, fmt.exp_bits, fmt.man_bits,
        fmt.exp_bits, fmt.bias, fmt.man_bits + 1)
    assert Fraction(fi.max) == ref.max
    assert fi.min == (-fi.max if fmt.signed else (0.0 if fmt.has_zero else fi.smallest_subnormal))
    emin = (1 if fmt.has_zero else 0) - fmt.bias
    assert fi.emin == fi.minexp == emin
    # the smallest positive value, of any kind
    first = (1 if fmt.subnormals and fmt.man_bits else 1 << fmt.man_bits) if fmt.has_zero else 0
    smallest = ref.decode(first)
    assert Fraction(fi.smallest_subnormal) == smallest
    # smallest normal: the code with exponent field 1 (0 without zero), if it is finite
    normal_code = (1 if fmt.has_zero else 0) << fmt.man_bits
    normal = ref.decode(normal_code) if normal_code <= ref.max_code else None
    if ref.finite(normal) and fmt.exp_bits > 0:
        assert Fraction(fi.tiny) == Fraction(fi.smallest_normal) == normal == Fraction(2) ** emin
    else:
        assert fi.tiny is None and fi.smallest_normal is None
    # emax = floor(log2(max)), maxexp = emax + 1
    e = ref.max.numerator.bit_length() - ref.max.denominator.bit_length()
    e -= Fraction(2) ** e > ref.max
    assert fi.emax == e and fi.maxexp == e + 1
    # precision / resolution
    digits = math.floor((fmt.man_bits) * math.log10(2) + 1e-12)
    assert fi.precision == digits and fi.resolution == float(f"1e-{digits}")
    # eps: the grid step at 1.0 going up, epsneg going down (rounding's grid, exponent
    # unbounded above)
    if not (fmt.has_zero and fmt.subnormals) and emin > 0:
        return  # 1.0 lies below the normal range of a format without subnormals
    lo, hi, _ = ref.candidates(Fraction(1))
    assert Fraction(fi.eps) == hi - lo, (fmt, fi.eps)
    assert fi.eps == 2.0 ** fi.machep and fi.epsneg == 2.0 ** fi.negep



# --------------------------------------------------------------------------- arithmetic

def _operands(data, fmt: Format, n: int) -> np.ndarray:
    """n values of fmt (finite), from the edge values rounded in."""
    xs = [data.draw(edge_values(fmt)) for _ in range(n)]
    vals = floatlab.round(np.array(xs), fmt, saturate=True)
    assume(np.isfinite(vals).all())
    return vals


def _isqrt_cmp(a: Fraction):
    """A comparator for sqrt(a): sign(sqrt(a) - v) through squares."""
    def cmp(v: Fraction) -> int:
        return (a > v * v) - (a < v * v) if v >= 0 else 1
    return cmp


def _sqrt_round(ref: Ref, a: Fraction, mode: str) -> float:
    """Round sqrt(a) exactly: bracket it between grid points by bisection on squares."""
    if a == 0:
        return 0.0
    approx = Fraction(math.sqrt(float(a)))
    lo, hi, _ = ref.candidates(approx)
    while hi * hi <= a:  # move the bracket until lo <= sqrt(a) < hi
        lo, hi, _ = ref.candidates(hi)
    while lo * lo > a:
        lo, hi, _ = ref.candidates(lo - (hi - lo) / 2)
    if lo * lo == a:
        return ref.round_exact(lo, mode)
    # sqrt(a) is irrational or off the grid: any point strictly between lo and hi on the
    # same side of the midpoint rounds the same way (never a tie)
    mid = (lo + hi) / 2
    side = (a > mid * mid) - (a < mid * mid)
    if side == 0:  # a tie on a coarse grid (sqrt(64) = 8 between 0 and 16 in e2m0b-3fnuz)
        return ref.round_exact(mid, mode)
    stand_in = (mid + hi) / 2 if side > 0 else (lo + mid) / 2
    return ref.round_exact(stand_in, mode)


@SETTINGS
@given(st.data())
def test_floatarray_ops_correctly_rounded(data):
    fmt = data.draw(formats())
    assume(fmt.signed and fmt.has_zero)  # differences of unsigned / zero-less formats: NaN
    assume(not _ftz_unsupported(fmt, False))  # refused with a clear error
    mode = data.draw(st.sampled_from(DETERMINISTIC))
    ref = Ref(fmt)
    a_vals, b_vals = _operands(data, fmt, 4), _operands(data, fmt, 4)
    a = floatlab.array(a_vals, fmt, rounding=mode)
    ops = {"+": (np.add, lambda x, y: x + y), "-": (np.subtract, lambda x, y: x - y)}
    if floatlab.arith.correctly_rounded(fmt):
        ops["*"] = (np.multiply, lambda x, y: x * y)
        ops["/"] = (np.divide, lambda x, y: x / y if y else None)
    elif fmt.p > 52:
        return  # float64 adds natively: not claimed correctly rounded
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for name, (ufunc, exact) in ops.items():
            ys = b_vals
            if name == "/" and not fmt.has_nan:  # x / 0 is refused there (no inf, no NaN)
                ys = np.where(b_vals == 0, float(ref.max), b_vals)
            got = ufunc(a, floatlab.array(ys, fmt, rounding=mode)).values
            for x, y, g in zip(a_vals, ys, got, strict=True):
                value = exact(Fraction(x), Fraction(y))
                if value is None:
                    continue
                want = ref.round_exact(value, mode)
                if value == 0:
                    assert float(g) == 0.0, (fmt, name, x, y, g)
                    continue
                assert same(g, want), (fmt, mode, name, x.hex(), y.hex(), float(g), want)
        if floatlab.arith.correctly_rounded(fmt):
            got = np.sqrt(abs(a)).values
            for x, g in zip(a_vals, got, strict=True):
                want = _sqrt_round(ref, abs(Fraction(x)), mode)
                assert same(g, want) or (want == 0 and g == 0), (fmt, mode, x.hex(), g, want)
            c_vals = _operands(data, fmt, 4)
            got = floatlab.fma(a_vals, b_vals, c_vals, fmt=fmt, rounding=mode)
            for x, y, z, g in zip(a_vals, b_vals, c_vals, got, strict=True):
                value = Fraction(x) * Fraction(y) + Fraction(z)
                want = ref.round_exact(value, mode)
                if value == 0:
                    assert float(g) == 0.0
                    continue
                assert same(g, want), (fmt, mode, "fma", x.hex(), y.hex(), z.hex(), float(g))


# --------------------------------------------------------------------------- accumulator

@SETTINGS
@given(st.data())
def test_accumulator_sum_matches_fraction_loop(data):
    fmt = data.draw(formats())
    mode = data.draw(st.sampled_from(DETERMINISTIC))
    assume(fmt.p <= 52 or mode == "nearest_even")
    assume(fmt.signed and fmt.has_zero)  # differences of unsigned / zero-less formats: NaN
    assume(not _ftz_unsupported(fmt, False))  # refused with a clear error
    ref = Ref(fmt)
    n = data.draw(st.integers(1, 12))
    terms = [data.draw(edge_values(fmt)) for _ in range(n)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        acc = floatlab.Accumulator(fmt, rounding=mode)
        partials = floatlab.cumsum(np.array(terms), acc)
        total = floatlab.sum(np.array(terms), acc)
    s = 0.0 if fmt.has_zero else None
    for t, got in zip(terms, partials, strict=True):
        if s is None:
            s = ref.round(t, mode)
        else:
            value = Fraction(s) + Fraction(t)
            s = ref.round_exact(value, mode)
            if value == 0:
                assert float(got) == 0.0
                s = float(got)
                continue
        assert same(got, s), (fmt, mode, [x.hex() for x in terms], float(got), s)
        if not math.isfinite(s):
            return
    assert same(total, s)


# --------------------------------------------------------------------------- regressions

def test_accumulator_in_a_custom_p53_format_keeps_its_range():
    # Who is right: the format. An Accumulator in e8m52 (p = 53 as float64, float32's
    # exponent range) returned float64's own sum: 2e300 where e8m52's max is 3.4e38, and
    # float64 subnormals in an FTZ format. float64's sum is now rounded into the format.
    e8m52 = Format(8, 52)
    assert float(floatlab.sum([1e300, 1e300], floatlab.Accumulator(e8m52))) == math.inf
    assert float(floatlab.sum([2.0**-1074, 0.0], floatlab.Accumulator(e8m52))) == 0.0
    ftz = Format(8, 52, subnormals=False)
    assert float(floatlab.sum([2.0**-130, 0.0], floatlab.Accumulator(ftz))) == 0.0
    fn = Format(10, 52, bias=500, special="fn")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert math.isnan(float(floatlab.sum([1e300, 1e300], floatlab.Accumulator(fn))))
    # float64 itself still adds natively
    assert float(floatlab.sum([1e308, 1e308], "float64")) == math.inf
    assert float(floatlab.sum([1.0, 2.0**-53, 2.0**-53], "float64")) == 1.0


def test_fma_of_plain_values_of_a_wide_custom_format():
    # Who is right: floatlab's own claim (fma is correctly rounded for correctly_rounded
    # formats). Plain operands were checked by a float32 round trip, so e9m1's 1.5 * 2**255
    # (2 significant bits) was refused as having "more than 24 significant bits".
    fmt = Format(9, 1)
    assert floatlab.arith.correctly_rounded(fmt)
    a, b, c = 1.5 * 2.0**255, 2.0**-300, 2.0**-45
    assert float(floatlab.fma(a, b, c, fmt=fmt)) == float(
        Ref(fmt).round_exact(Fraction(a) * Fraction(b) + Fraction(c), "nearest_even"))
    e1m24 = Format(1, 24, special="fnuz")  # p = 25: 25-bit operands, exact products
    a = b = 2 - 2.0**-24
    assert float(floatlab.fma(a, b, -4.0, fmt=e1m24)) == float(
        Ref(e1m24).round_exact(Fraction(a) * Fraction(b) - 4, "nearest_even"))
    for bad in (1 + 2.0**-30, 2.0**-600):  # really inexact products: still refused
        with pytest.raises(ValueError, match="more than 26 significant bits"):
            floatlab.fma(bad, 1.0, 0.0, fmt="fp32")
