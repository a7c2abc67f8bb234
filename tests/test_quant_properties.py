"""Property-based checks of quantize / fake_quantize / dequantize on custom schemes.

Hypothesis draws schemes through the public ``Scheme`` constructor (element formats, scale
formats, block sizes and axes, scale rules, margins, global scales) and tensors (zeros-only
blocks, single nonzeros, subnormal and huge amaxes, empty axes, 1-3 dimensions); an exact
reference written here from the definitions (the scales module's docstring: OCP MX's floor
rule, torchao's ceil / even / rceil, MS-AMP's rfloor, NVFP4's two float32 levels; the quantize
module's working precision) checks every block scale and every element, the round trips
(fake_quantize, dequantize from the stored codes and scales, packing) and the stats.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import reference_round

import floatlab
from floatlab import FixedPoint, Scheme, dequantize, fake_quantize, quantize
from floatlab.quant.packing import pack_codes, unpack_codes

SETTINGS = settings(max_examples=700, deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


# ======================================================================= exact helpers

def floor_log2(v: Fraction) -> int:
    e = v.numerator.bit_length() - v.denominator.bit_length()
    if Fraction(2) ** e > v:
        e -= 1
    return e


def to_float(v: Fraction, p: int, emin: int) -> Fraction:
    """v rounded to nearest-even with p significand bits and exponents >= emin (unbounded)."""
    if v == 0:
        return Fraction(0)
    a = abs(v)
    quantum = Fraction(2) ** (max(floor_log2(a), emin) - p + 1)
    n, r = divmod(a, quantum)
    if r > quantum / 2 or (r == quantum / 2 and n % 2):
        n += 1
    return (1 if v > 0 else -1) * n * quantum


def f32(v) -> Fraction:
    return to_float(Fraction(v), 24, -126)


def f64(v) -> Fraction:
    return to_float(Fraction(v), 53, -1022)


def round_to(v: Fraction, fmt, mode: str) -> Fraction:
    assert Fraction(float(v)) == v
    return Fraction(float(reference_round(np.array([float(v)]), fmt, (mode,))[mode][0]))


def ref_pow2_k(amax: Fraction, element, rule: str) -> int | None:
    """k of the scale 2**k, before margin and clamping; None for amax = 0."""
    emax = element.emax if isinstance(element, floatlab.Format) else floor_log2(
        Fraction(element.max))
    if amax == 0:
        return None
    e = floor_log2(amax)
    if rule == "floor":
        return e - emax
    if rule == "ceil":
        return e + (amax != Fraction(2) ** e) - emax
    if rule == "even":
        m = element.man_bits
        rounded = math.floor(amax / Fraction(2) ** e * 2**m + Fraction(1, 2))
        return e + (rounded == 2 ** (m + 1)) - emax
    a32 = f32(amax)
    if rule == "rceil":
        descale = f32(a32 * f32(1 / f32(element.max)))
        if descale == 0:
            return None
        d = floor_log2(descale)
        return d + (descale != Fraction(2) ** d)
    assert rule == "rfloor"
    # float32 steps with an unbounded exponent (the scales module pre-scales tiny and huge
    # amaxes by 2**64 so that no step overflows or rounds into float32's subnormals)
    wide = lambda v: to_float(Fraction(v), 24, -10**6)  # noqa: E731
    return -floor_log2(wide(wide(element.max) / wide(amax)))


def ref_element(q: Fraction, element, mode: str) -> Fraction:
    """q rounded to the element, saturating at +-max (symmetric for fixed point)."""
    top = Fraction(element.max)
    if isinstance(element, floatlab.Format):
        return round_to(min(max(q, -top), top), element, mode)
    if isinstance(element, FixedPoint):
        step = Fraction(element.quantum)
        n, r = divmod(q, step)
        if mode == "nearest_even":
            n += r > step / 2 or (r == step / 2 and n % 2)
        elif mode == "nearest_away":
            n += r > step / 2 or (r == step / 2 and q > 0)
        elif mode == "up":
            n += r != 0
        elif mode == "toward_zero":
            n += r != 0 and q < 0
        return min(max(n * step, -top), top)
    # codebooks: the entries, saturating at both ends; exact midpoints go to the lower entry
    values = sorted(Fraction(float(v)) for v in element.values())
    q = min(max(q, values[0]), values[-1])
    if mode == "toward_zero":
        mode = "down" if q >= 0 else "up"
    if mode == "up":
        return min(v for v in values if v >= q)
    if mode == "down":
        return max(v for v in values if v <= q)
    return min(values, key=lambda v: (abs(v - q), v))


def block_ids(shape, scheme):
    """{index: block index in the scales grid} and the grid's shape, from the definitions."""
    b, ndim = scheme.block, len(shape)
    if isinstance(b, int) and scheme.axis is None:
        n = math.prod(shape)
        grid = (-(-n // b),)
        return {idx: (i // b,) for i, idx in enumerate(np.ndindex(shape))}, grid
    if b == "tensor":
        tile = shape
    elif b == "row":
        tile = (1,) * (ndim - 1) + shape[-1:]
    elif b == "column":
        tile = shape[:-1] + (1,)
    elif isinstance(b, int):
        tile = [1] * ndim
        tile[scheme.axis % ndim] = b
    else:
        tile = (1,) * (ndim - 2) + b
    tile = tuple(max(t, 1) for t in tile)
    grid = tuple(-(-n // t) for n, t in zip(shape, tile, strict=True))
    return {idx: tuple(i // t for i, t in zip(idx, tile, strict=True))
            for idx in np.ndindex(shape)}, grid


def reference(x: np.ndarray, scheme: Scheme):
    """(effective scale per block, block scale per block, global scale, working dtype)."""
    element = scheme.element
    ids, grid = block_ids(x.shape, scheme)
    fx = {idx: Fraction(float(x[idx])) for idx in ids}
    amax = {}
    for idx, blk in ids.items():
        amax[blk] = max(amax.get(blk, Fraction(0)), abs(fx[idx]))
    g = None
    if scheme.global_scale:
        tmax = max(amax.values(), default=Fraction(0))
        g = f32(f32(tmax) / f32(Fraction(scheme.scale_format.max) * Fraction(element.max))) \
            if tmax else Fraction(1)
    scale, effective = {}, {}
    for blk, a in amax.items():
        if scheme.scale in ("e8m0", "pow2"):
            k = ref_pow2_k(a, element, scheme.scale_rounding)
            low = -127 if scheme.scale == "e8m0" else -149
            k = low if k is None else max(k + scheme.margin, low)
            s = eff = Fraction(2) ** k
        else:
            fmt = scheme.scale_format
            mode = {"even": "nearest_even", "floor": "down"}.get(scheme.scale_rounding, "up")
            lo, hi = Fraction(fmt.smallest_normal), Fraction(fmt.max)
            if g is not None:
                b = f32(f32(a) / f32(element.max))
                if scheme.margin:
                    b = f32(b * 2**scheme.margin)
                s = round_to(min(max(f32(b / g), lo), hi), fmt, mode)
                eff = f32(g * s)
            else:
                raw = min(max(f64(f64(a / Fraction(element.max)) * 2**scheme.margin), lo), hi)
                s = eff = round_to(raw, fmt, mode)
        scale[blk], effective[blk] = s, eff
    return ids, grid, scale, effective, g


def working_dtype(x, scheme):
    ok = scheme.element.float32_exact if not isinstance(scheme.element, floatlab.Format) else (
        scheme.element.man_bits <= 23 and scheme.element.emax <= 127
        and scheme.element.emin >= -126)
    if x.dtype == np.float32 and scheme.rounding in ("nearest_even", "nearest_away") and ok:
        return np.float32
    return np.float64


# ======================================================================= strategies

FLOAT_ELEMENTS = ["e2m1", "e2m3", "e3m2", "e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz", "e3m4",
                  "e1m2", "e5m3", "float16", "bf16", "float32"]
OTHER_ELEMENTS = ["int8", "int4", "mxint8", FixedPoint(6, 3), FixedPoint(5, -2), "nf4",
                  "fp4_bnb", "dynamic8"]
SCALES = ["e8m0", "pow2", "float32", "bf16", "e4m3fn"]
RULES = ["floor", "ceil", "even", "rceil", "rfloor"]
MODES = ["nearest_even", "nearest_away", "down", "up", "toward_zero"]


@st.composite
def schemes(draw):
    element = draw(st.sampled_from(FLOAT_ELEMENTS + OTHER_ELEMENTS))
    block = draw(st.one_of(st.sampled_from([1, 2, 3, 5, 16, 32, 128, 1000]),
                           st.sampled_from(["tensor", "row", "column"]),
                           st.tuples(st.sampled_from([1, 2, 3, 128]),
                                     st.sampled_from([1, 2, 4, 128]))))
    scale = draw(st.sampled_from(SCALES))
    rule = draw(st.sampled_from(RULES))
    is_float = element in FLOAT_ELEMENTS
    if rule == "even" and scale in ("e8m0", "pow2") and not is_float:
        rule = "floor"
    if draw(st.integers(0, 5)) == 0:  # a custom codebook, 2..40 float32 entries
        entries = draw(st.lists(st.floats(-8, 8, width=32), min_size=2, max_size=40,
                                unique=True))
        if len(set(np.float32(entries).tolist())) == len(entries) and \
                max(abs(v) for v in entries) > 0:
            element, is_float = floatlab.Codebook("custom", np.sort(np.float32(entries))), False
            if rule == "even" and scale in ("e8m0", "pow2"):
                rule = "floor"
    rounding = draw(st.sampled_from(MODES))
    global_scale = scale == "e4m3fn" and element not in ("bf16", "float32") and draw(st.booleans())
    axis = draw(st.sampled_from([-1, 0, 1, None])) if isinstance(block, int) else -1
    margin = draw(st.sampled_from([0, 0, 1, 3]))
    return Scheme(element, block, scale, rule, rounding, global_scale=global_scale,
                  margin=margin, axis=axis)


@st.composite
def tensors(draw, scheme):
    ndim = draw(st.integers(1, 3))
    if isinstance(scheme.block, tuple) or scheme.block == "column":
        ndim = max(ndim, 2)
    dims = st.one_of(st.integers(1, 9), st.just(0)) if draw(st.integers(0, 9)) == 0 else \
        st.integers(1, 9)
    shape = list(draw(st.lists(dims, min_size=ndim, max_size=ndim)))
    if isinstance(scheme.block, int) and scheme.axis is not None and \
            scheme.axis % 4 >= ndim and scheme.axis >= 0:
        shape += [draw(st.integers(1, 4))] * (scheme.axis + 1 - ndim)
    shape = tuple(shape)
    n = math.prod(shape)
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    kind = draw(st.sampled_from(["normal", "zeros", "single", "tiny", "huge", "ints", "edge",
                                 "binades"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "zeros":
        x = np.zeros(n)
    elif kind == "single":
        x = np.zeros(n)
        if n:
            x[draw(st.integers(0, n - 1))] = draw(st.sampled_from(
                [1.0, -3.0, 2.0**-130, 448.0, 1e30, -0.1]))
    elif kind == "edge":  # amaxes at and around the element max and powers of two
        top = float(scheme.element.max)
        x = rng.choice([top, -top, 2.0 ** math.floor(math.log2(top)), 1.0, 0.0, top * 0.99,
                        top * (1 + 2.0**-4), np.nextafter(top, 0)], n)
        x = x * 2.0 ** draw(st.integers(-150, 127))
    elif kind == "binades":  # one binade per value: every scale exponent in one tensor
        x = rng.choice([-1.0, 1.0], n) * rng.uniform(1, 2, n) * 2.0 ** rng.integers(
            -160, 140, n)
        if dtype == np.float64 and draw(st.booleans()):
            x = x * 2.0 ** draw(st.sampled_from([-1000, -900, 600, 860]))
    elif kind == "ints":
        x = rng.integers(-300, 300, n).astype(np.float64)
    else:
        x = rng.standard_normal(n) * 2.0 ** rng.integers(-6, 6, n)
        x[rng.random(n) < 0.3] = 0.0
        if kind == "tiny":
            x *= 2.0 ** draw(st.sampled_from([-126, -135, -140, -149, -1030, -1070]))
        elif kind == "huge":
            x *= 2.0 ** draw(st.sampled_from([100, 110, 120, 126, 200, 1000]))
    with np.errstate(over="ignore", under="ignore"):
        x = x.astype(dtype)  # float32: underflow to subnormals / zero is part of the data
    x[~np.isfinite(x)] = 0.0
    x = x.astype(dtype)  # float32: underflow to subnormals / zero is part of the data
    return x.reshape(shape)


# ======================================================================= the properties

def check_against_reference(x, scheme):
    x_before = x.copy()
    try:
        q = quantize(x, scheme)
    except ValueError as e:
        # allowed: a scale beyond the format (pow2 / e8m0 above 2**127), a global scale out
        # of float32's range
        assert "scale" in str(e), e
        with pytest.raises(ValueError):
            fake_quantize(x, scheme)
        return
    assert np.array_equal(x, x_before, equal_nan=True) and x.dtype == x_before.dtype
    ids, grid, scale, effective, g = reference(x, scheme)
    work = working_dtype(x, scheme)
    assert q.dtype == work
    assert q.scales.shape == grid, (q.scales.shape, grid)
    for blk, s in scale.items():
        assert Fraction(float(q.scales[blk])) == s, (blk, float(q.scales[blk]), float(s))
    if g is not None:
        assert Fraction(q.global_scale) == g
    deq = q.dequantize()
    assert deq.shape == x.shape and deq.dtype == work
    elements = unpacked_values(q)
    wround = f32 if work == np.float32 else f64
    n_clipped = 0
    for idx, blk in ids.items():
        eff = Fraction(float(np.asarray(effective[blk], dtype=work)))
        if eff == 0:  # an effective scale underflowed (a float32-subnormal global scale)
            xv = Fraction(float(x[idx]))
            top = Fraction(scheme.element.max)
            qv = Fraction(0) if xv == 0 else (4 * top if xv > 0 else -4 * top)  # (+-inf)
        else:
            qv = wround(Fraction(float(x[idx])) / eff)
        n_clipped += abs(qv) > Fraction(scheme.element.max)
        want = ref_element(qv, scheme.element, scheme.rounding)
        got = Fraction(float(elements[idx]))
        assert got == want, (idx, float(x[idx]), float(qv), float(got), float(want))
        if work == np.float32:  # (got * eff is exact in float64: two 24-bit significands)
            with np.errstate(over="ignore"):  # an element rounded up past float32's max: inf
                want_deq = np.float32(float(got * eff))
        else:
            want_deq = float(wround(got * eff))
        assert deq[idx] == want_deq, (idx, deq[idx], want_deq)
    # the scale codes decode to the scales
    if q.scales.size:
        from floatlab.codec import decode

        if scheme.scale == "pow2":
            decoded = q.scale_codes.view(np.float32).astype(np.float64)
        else:
            decoded = decode(q.scale_codes, scheme.scale_format)
        assert np.array_equal(decoded, q.scales)
    # the elements and block scales unmultiplied
    values, grid_scales, _, _ = floatlab.quant.quantize_elements(x, scheme)
    assert np.array_equal(values, elements.astype(work))
    for blk in effective:
        assert Fraction(float(grid_scales[blk])) == Fraction(
            float(np.asarray(effective[blk], dtype=work)))
    # the round trips
    fq = fake_quantize(x, scheme)
    assert fq.dtype == deq.dtype and np.array_equal(fq, deq), scheme
    back = dequantize(q.codes, q.scales, scheme, shape=q.shape, global_scale=q.global_scale,
                      dtype=q.dtype)
    assert np.array_equal(back, deq)
    if scheme.element.bits in (4, 6):
        flat = q.unpack().reshape(-1)
        assert np.array_equal(unpack_codes(pack_codes(flat, scheme.element.bits),
                                           scheme.element.bits, flat.size), flat)
        assert q.codes.size == -(-flat.size * scheme.element.bits // 8)
    # the stats, from their formulas
    stats = q.stats
    fq2, stats2 = fake_quantize(x, scheme, stats=True)
    assert np.array_equal(fq2, deq) and stats2 == stats
    n = x.size
    assert stats.n == n
    assert stats.clipped_fraction == (n_clipped / n if n else 0.0)
    xf = [Fraction(float(v)) for v in x.reshape(-1)]
    nonzero = [i for i, v in enumerate(xf) if v != 0]
    flushed = sum(deq.reshape(-1)[i] == 0 for i in nonzero)
    assert stats.flushed_fraction == (flushed / len(nonzero) if nonzero else 0.0)
    assert stats.qsnr_db == pytest.approx(ref_qsnr(x, deq), rel=1e-9, abs=1e-9)
    effs = [Fraction(float(np.asarray(effective[b], dtype=work))) for b in effective]
    hist = {}
    for e in effs:
        if e > 0:
            hist[floor_log2(e)] = hist.get(floor_log2(e), 0) + 1
    assert stats.scale_histogram == hist
    # the same numbers from a strided view, a byte-swapped copy and a Python list
    strided = np.repeat(x, 2, axis=-1)[..., ::2]
    swapped = x.astype(x.dtype.newbyteorder(">"))
    for variant in (strided, swapped, np.asfortranarray(x)):
        assert np.array_equal(fake_quantize(variant, scheme), deq)
    if x.dtype == np.float64 and x.size:
        assert np.array_equal(fake_quantize(x.tolist(), scheme), deq)
    assert np.array_equal(x, x_before, equal_nan=True)


def ref_qsnr(x, deq) -> float:
    """10 log10(sum x**2 / sum (x - deq)**2), exactly; -inf for an infinite deq (a float32
    product past float32's max)."""
    if np.isinf(deq).any():
        return -math.inf
    xf = [Fraction(float(v)) for v in x.reshape(-1)]
    df = [Fraction(float(v)) for v in deq.reshape(-1)]
    err = sum((a - b) ** 2 for a, b in zip(xf, df, strict=True))
    sig = sum(a * a for a in xf)
    if err == 0:
        return math.inf
    if sig == 0:
        return -math.inf
    return 10 * (math.log10(sig.numerator) - math.log10(sig.denominator)
                 - math.log10(err.numerator) + math.log10(err.denominator))


def unpacked_values(q):
    from floatlab.quant.elements import _element_values

    codes = q.unpack().astype(np.intp)
    return _element_values(codes, q.scheme.element, np.float64).reshape(q.shape)


@SETTINGS
@given(st.data())
def test_custom_schemes_against_exact_reference(data):
    scheme = data.draw(schemes(), label="scheme")
    x = data.draw(tensors(scheme), label="x")
    check_against_reference(x, scheme)


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_nonfinite_and_0d_are_refused(data):
    scheme = data.draw(schemes(), label="scheme")
    x = np.ones((2, 4)) * data.draw(st.sampled_from([1.0, -2.0]))
    x[1, data.draw(st.integers(0, 3))] = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    before = x.copy()
    for f in (quantize, fake_quantize):
        with pytest.raises(ValueError, match="NaN"):
            f(x, scheme)
    assert np.array_equal(x, before, equal_nan=True)
    with pytest.raises(ValueError, match="0-d"):
        quantize(np.float64(1.0), scheme)


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_stochastic_hadamard_and_dq8_round_trips(data):
    """Stochastic elements (exact, or with k random bits) are one of the two neighbours of
    the reference quotient; with Hadamard transforms and dq8's nested scales, fake_quantize
    is dequantize(quantize) with the same seed, and the stats agree."""
    import warnings

    base = data.draw(schemes(), label="scheme")
    extra = data.draw(st.sampled_from(["stochastic", "random_bits", "hadamard", "dq8"]))
    try:
        if extra == "stochastic":
            scheme = base.replace(rounding="stochastic")
        elif extra == "random_bits":
            scheme = base.replace(rounding="stochastic", random_bits=data.draw(
                st.integers(1, 16)))
        elif extra == "hadamard":
            scheme = base.replace(hadamard=data.draw(st.sampled_from([2, 4, 16])),
                                  axis=-1 if base.axis is None else base.axis)
        else:
            scheme = base.replace(scale="dq8", global_scale=False, scale_rounding="even")
    except ValueError:
        return  # a combination the Scheme refuses (random_bits on a codebook, ...)
    x = data.draw(tensors(scheme), label="x")
    before = x.copy()
    seed = data.draw(st.integers(0, 99))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (rng with a deterministic rounding)
        try:
            q = quantize(x, scheme, rng=seed)
        except ValueError as e:  # a scale out of range, an axis hadamard does not divide
            assert "scale" in str(e) or "hadamard" in str(e), e
            return
        deq = q.dequantize()
        fq, stats = fake_quantize(x, scheme, rng=seed, stats=True)
    assert np.array_equal(fq, deq) and stats == q.stats
    assert np.array_equal(x, before)
    if scheme.scale != "dq8":
        back = dequantize(q.codes, q.scales, scheme, shape=q.shape,
                          global_scale=q.global_scale, dtype=q.dtype)
        assert np.array_equal(back, deq)
    if extra in ("stochastic", "random_bits"):
        ids, _, _, effective, _ = reference(x, scheme)
        work = np.float32 if x.dtype == np.float32 and extra == "random_bits" else np.float64
        wround = f32 if work == np.float32 else f64
        elements = unpacked_values(q)
        for idx, blk in ids.items():
            eff = Fraction(float(np.asarray(effective[blk], dtype=work)))
            if eff == 0:
                continue
            qv = wround(Fraction(float(x[idx])) / eff)
            got = Fraction(float(elements[idx]))
            assert got in (ref_element(qv, scheme.element, "down"),
                           ref_element(qv, scheme.element, "up")), (idx, float(qv))
