"""Codebooks, fixed point and the per-tensor recipes (current / delayed scaling).

Oracles: NF4 against QLoRA's published values; the dynamic maps against a SHA-256 of the 256
float32 values that bitsandbytes' create_dynamic_map returns (computed once with torch, pinned
here) and against their definition re-derived in exact arithmetic; codebook rounding against
brute-force nearest entries; fixed point against exact integer rounding.
"""

from __future__ import annotations

import hashlib
import statistics
from fractions import Fraction

import numpy as np
import pytest

import floatlab
from floatlab import Codebook, FixedPoint, get_codebook
from floatlab.quant.codebook import _torch_linspace32, dynamic_map, normal_float_map
from floatlab.quant.scalers import CurrentScaling, DelayedScaling
from floatlab.scaling import quantize_scaled

QLORA_NF4 = [-1, -0.6961928, -0.5250731, -0.3949175, -0.2844414, -0.1847734, -0.0910500, 0,
             0.0795803, 0.1609302, 0.2461123, 0.3379152, 0.4407098, 0.5626170, 0.7229568, 1]

# sha256 of np.float32 bytes of bitsandbytes.functional.create_dynamic_map(signed=...) as its
# source computes it with torch (torch 2.13 CPU, checked while writing floatlab.quant).
BNB_DYNAMIC_SHA256 = {
    True: "e732639a65f497b4ad684bb166a4467708255edd5207757de8b8f0c7e1fda89c",
    False: "305f002cc11278fb769d13b25b9fd0c7c83c8402c40a878fe086f4039fde6398",
}


# ======================================================================= codebook values

def test_nf4_is_the_qlora_table_derived_from_normal_quantiles():
    nf4 = normal_float_map()
    assert nf4.dtype == np.float32 and nf4.size == 16
    np.testing.assert_allclose(nf4, QLORA_NF4, atol=5e-8)
    assert nf4[0] == -1 and nf4[-1] == 1 and nf4[7] == 0   # 7 negative, 0, 8 positive
    # the second-largest value is the quantile at the second probability of the 9 positive
    # ones, divided by the largest quantile (offset 0.9677083)
    p = np.linspace(0.9677083, 0.5, 9)
    inv = statistics.NormalDist().inv_cdf
    assert abs(nf4[-2] - inv(p[1]) / inv(p[0])) < 3e-7   # float32 probabilities and table


@pytest.mark.parametrize("signed", [True, False])
def test_dynamic_maps_equal_bitsandbytes_bit_for_bit(signed):
    m = dynamic_map(signed)
    assert m.size == 256 and m.dtype == np.float32
    assert hashlib.sha256(m.tobytes()).hexdigest() == BNB_DYNAMIC_SHA256[signed]


@pytest.mark.parametrize("signed", [True, False])
def test_dynamic_maps_follow_their_definition(signed):
    m = dynamic_map(signed).astype(np.float64)
    # group i: 10**(i-6) times the F midpoints of linspace(0.1, 1, F + 1), F = 2**i (signed,
    # both signs) or 2**(i+1); plus 0 and 1. Exact midpoints are within float32 rounding.
    expected = [Fraction(0), Fraction(1)]
    for i in range(7):
        f = 2**i if signed else 2 ** (i + 1)
        for j in range(f):
            mid = Fraction(1, 10) + Fraction(9, 10) * Fraction(2 * j + 1, 2 * f)
            v = Fraction(10) ** (i - 6) * mid
            expected += [v, -v] if signed else [v]
    expected = sorted(expected)
    assert len(expected) == 256
    rel = [abs(Fraction(float(a)) - b) / abs(b)
           for a, b in zip(m, expected, strict=True) if b]
    assert max(rel) < 2**-21   # a few float32 roundings away from the exact definition


def test_torch_linspace_is_one_rounding_of_the_exact_point():
    pts = _torch_linspace32(0.1, 1.0, 65).astype(np.float64)
    start, end = np.float32(0.1), np.float32(1.0)
    step = (end - start) / np.float32(64)
    for i, v in enumerate(pts):  # fused multiply-add: one rounding of start + step * i
        exact = (Fraction(float(start)) + Fraction(float(step)) * i) if i < 32 else (
            Fraction(float(end)) - Fraction(float(step)) * (64 - i))
        assert Fraction(float(np.float32(float(exact)))) == Fraction(v) or \
            abs(Fraction(v) - exact) <= Fraction(float(np.spacing(np.float32(v)))) / 2


def test_fp4_bnb_differs_from_e2m1_only_in_the_smallest_magnitude():
    cb = get_codebook("fp4_bnb")
    mags = sorted(set(np.abs(cb.values()).tolist()))
    e2m1 = sorted(set((np.abs(floatlab.values("e2m1")) / 6).astype(np.float32).tolist()))
    assert mags[2:] == [float(v) for v in e2m1[2:]]
    assert mags[1] == float(np.float32(1 / 192)) and e2m1[1] == float(np.float32(1 / 12))
    assert floatlab.encode([1.0, -1.0, 1 / 192], cb).tolist() == [3, 11, 1]


# ======================================================================= codebook rounding

@pytest.mark.parametrize("name", ["nf4", "dynamic8", "udynamic8", "fp4_bnb"])
def test_codebook_rounding_is_the_nearest_entry_ties_to_the_lower(name):
    cb = get_codebook(name)
    v = cb.values()
    mids = (v[:-1] + v[1:]) / 2
    rng = np.random.default_rng(0)
    x = np.concatenate([v, mids, np.nextafter(mids, 2), np.nextafter(mids, -2),
                        rng.uniform(-1.2, 1.2, 2000), [-5.0, 5.0]])
    got = floatlab.round(x, cb)
    for xi, gi in zip(x, got, strict=True):
        d = np.abs(v - xi)
        best = v[np.flatnonzero(d == d.min())[0]]   # the lower one on a tie
        assert gi == best, (xi, gi, best)


@pytest.mark.parametrize("name", ["nf4", "dynamic8", "udynamic8", "fp4_bnb"])
def test_the_float32_bucket_lookup_equals_searchsorted_on_every_bucket_edge(name):
    cb = get_codebook(name)
    keys = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
    edges = np.concatenate([keys, keys | np.uint32(0xFFFF), keys | np.uint32(0x8000)])
    x = edges.view(np.float32)
    x = x[np.isfinite(x)]
    mids32 = np.float32(cb._midpoints)
    x = np.concatenate([x, mids32, np.nextafter(mids32, np.float32(2)),
                        np.nextafter(mids32, np.float32(-2))])
    np.testing.assert_array_equal(cb._nearest_float32(x),
                                  np.searchsorted(cb._midpoints, x.astype(np.float64)))


def test_codebook_directed_and_stochastic_modes():
    cb = Codebook("steps", np.float32([-1, 0, 0.5, 1]))
    x = [0.2, -0.3, 0.75, 2.0]
    assert floatlab.round(x, cb, rounding="up").tolist() == [0.5, 0.0, 1.0, 1.0]
    assert floatlab.round(x, cb, rounding="down").tolist() == [0.0, -1.0, 0.5, 1.0]
    assert floatlab.round(x, cb, rounding="toward_zero").tolist() == [0.0, 0.0, 0.5, 1.0]
    sr = floatlab.round(np.full(20000, 0.2), cb, rounding="stochastic", rng=0)
    assert abs(sr.mean() - 0.2) < 0.01 and set(sr.tolist()) == {0.0, 0.5}
    with pytest.raises(ValueError, match="round-to-odd has no meaning"):
        floatlab.round(x, cb, rounding="odd")
    with pytest.raises(ValueError, match="has no NaN"):
        floatlab.round([np.nan], cb)


def test_codebooks_in_values_explain_encode_decode():
    nf4 = get_codebook("nf4")
    np.testing.assert_array_equal(floatlab.values(nf4), normal_float_map())
    codes = floatlab.encode(floatlab.values(nf4), nf4)
    assert codes.tolist() == list(range(16))
    np.testing.assert_array_equal(floatlab.decode(codes, nf4), normal_float_map())
    text = str(floatlab.explain(0.3, nf4))
    assert "entry 11 of 16" in text and "0.337915" in text
    with pytest.raises(ValueError, match="codes out of range"):
        floatlab.decode([16], nf4)
    with pytest.raises(TypeError, match="explain takes one value"):
        floatlab.explain([0.1, 0.2], nf4)
    with pytest.raises(TypeError, match="explain takes one value"):
        floatlab.explain([0.1, 0.2], FixedPoint(8, 4))


def test_codebook_construction_errors():
    with pytest.raises(ValueError, match="float32 numbers"):
        Codebook("bad", [0.1, 0.2])
    with pytest.raises(ValueError, match="distinct"):
        Codebook("bad", np.float32([0.5, 0.5]))
    with pytest.raises(ValueError, match="at least two"):
        Codebook("bad", [1.0])
    with pytest.raises(ValueError, match="unknown codebook 'nf5'.*nf4"):
        get_codebook("nf5")


# ======================================================================= fixed point

def fixed_reference(x: float, fp: FixedPoint, mode: str) -> float:
    q = Fraction(x) / Fraction(fp.quantum)
    lo = q.numerator // q.denominator
    frac = q - lo
    if frac == 0:
        n = lo
    elif mode == "nearest_even":
        n = lo + (frac > Fraction(1, 2) or (frac == Fraction(1, 2) and lo % 2))
    elif mode == "nearest_away":
        n = lo + (frac >= Fraction(1, 2)) if x >= 0 else lo + (frac > Fraction(1, 2))
    elif mode == "toward_zero":
        n = lo if x >= 0 else lo + 1
    elif mode == "up":
        n = lo + 1
    elif mode == "down":
        n = lo
    else:  # odd: truncate, then force the last bit to 1 if inexact
        t = lo if x >= 0 else lo + 1
        n = t if t % 2 else (t + (1 if x >= 0 else -1))
        if abs(n * fp.quantum) > abs(x) + fp.quantum:  # stay adjacent
            n = t
    lo_code = -(1 << (fp.word_bits - 1)) if fp.signed else 0
    hi_code = (1 << (fp.word_bits - 1)) - 1 if fp.signed else (1 << fp.word_bits) - 1
    return float(min(max(n, lo_code), hi_code) * Fraction(fp.quantum))


@pytest.mark.parametrize("fp", [FixedPoint(8, 6), FixedPoint(4, 0), FixedPoint(6, 2,
                                                                            signed=False),
                                FixedPoint(16, 20)])
@pytest.mark.parametrize("mode", ["nearest_even", "nearest_away", "toward_zero", "up", "down"])
def test_fixed_point_rounding_in_every_mode(fp, mode):
    grid = fp.values()
    if grid.size > 512:  # a sample of the 16-bit grid, with both ends
        grid = np.concatenate([grid[:8], np.random.default_rng(0).choice(grid, 496), grid[-8:]])
    step = fp.quantum
    x = np.concatenate([grid, grid + step / 2, grid + step / 4, grid - step / 3,
                        [fp.max + 10 * step, fp.min - 10 * step, 1e9, -1e9]])
    got = floatlab.round(x, fp, rounding=mode)
    expected = [fixed_reference(float(v), fp, mode) for v in x]
    np.testing.assert_array_equal(got, expected)


def test_fixed_point_codes_values_explain():
    q = FixedPoint(8, 6)
    codes = np.arange(256)
    vals = floatlab.decode(codes, q)
    np.testing.assert_array_equal(floatlab.encode(vals, q), codes)
    assert vals[127] == 127 / 64 and vals[128] == -2.0
    np.testing.assert_array_equal(floatlab.values(q), np.sort(vals))
    assert floatlab.round(np.inf, q) == q.max and floatlab.round(-np.inf, q) == q.min
    with pytest.raises(ValueError, match="no NaN"):
        floatlab.round([np.nan], q)
    assert "k = 19" in str(floatlab.explain(0.3, q))
    sr = floatlab.round(np.full(20000, 0.3), q, rounding="stochastic", rng=1)
    assert abs(sr.mean() - 0.3) < 0.001
    with pytest.raises(ValueError, match="word_bits=1 is out of range"):
        FixedPoint(1, 0)
    with pytest.raises(TypeError, match="frac_bits must be an int"):
        FixedPoint(8, 1.5)


# ======================================================================= per-tensor recipes

def test_current_scaling_floors_amax_with_epsilon():
    cs = CurrentScaling("e4m3fn", amax_epsilon=2.0**-10)
    assert cs.quantize([1.0, -2.0]).scale == 224.0
    assert cs.quantize([0.0, 2.0**-20]).scale == 448.0 * 2**10   # amax floored at 2**-10
    assert CurrentScaling("e4m3fn").quantize([0.0]).scale == 1.0  # amax 0, no epsilon
    with pytest.raises(ValueError, match="amax_epsilon must be finite and >= 0"):
        CurrentScaling("e4m3fn", amax_epsilon=-1.0)
    with pytest.raises(ValueError, match="NaN"):
        cs.quantize([np.nan])


def test_delayed_scaling_amax_compute_algo_and_epsilon():
    mx = DelayedScaling("e4m3fn", history_len=4)
    last = DelayedScaling("e4m3fn", history_len=4, amax_compute_algo="most_recent")
    for x in ([8.0], [2.0], [1.0]):
        mx.quantize(x)
        last.quantize(x)
    assert mx.scale == 448 / 8 and last.scale == 448 / 1
    eps = DelayedScaling("e4m3fn", amax_epsilon=0.5)
    eps.quantize([0.0])
    assert eps.scale == 448 / 0.5
    with pytest.raises(ValueError, match="amax_compute_algo must be one of"):
        DelayedScaling("e4m3fn", amax_compute_algo="mean")


def test_infinities_stay_infinite_where_the_format_has_them():
    # the documented rule in floatlab.scaling (issue 8, section 6)
    assert quantize_scaled([np.inf], "e5m2", scale=1.0).values.tolist() == [np.inf]
    assert quantize_scaled([np.inf], "e4m3fn", scale=1.0).values.tolist() == [448.0]
    assert np.isnan(quantize_scaled([np.inf], "e4m3fn", scale=1.0, saturate=False).values[0])
    with pytest.raises(ValueError, match="no inf and no NaN"):
        quantize_scaled([np.inf], "e2m1", scale=1.0, saturate=False)


def test_codebook_midpoints_between_entries_of_far_apart_magnitudes():
    """Neighbours more than 2**29 apart in magnitude have a midpoint float64 cannot hold
    ([-5e-37, 1]: 0.5 - 2.5e-37, stored as 0.5), so 0.5, nearer to 1, went to the lower entry
    (a tie at the stored midpoint). Reference: the nearest entry by exact Fractions, exact
    midpoints (none here) to the lower one; both the searchsorted and the float32 bucket paths."""
    from fractions import Fraction

    import floatlab

    for entries in ([-5.004744415776467e-37, 1.0], [1e-30, 3.0, 3e20], [-2.0, -1e-38, 0.0]):
        cb = floatlab.Codebook("far", np.float32(entries))
        vals = [Fraction(float(v)) for v in cb.values()]
        mids = [(a + b) / 2 for a, b in zip(vals[:-1], vals[1:], strict=True)]
        xs = sorted({float(m) for m in mids} | {float(np.nextafter(float(m), s)) for m in mids
                                                 for s in (-np.inf, np.inf)})
        for x in xs:
            fx = Fraction(x)
            want = min(vals, key=lambda v: (abs(v - fx), v))
            assert Fraction(float(cb.round(x))) == want, (entries, x)
        x32 = np.repeat(np.float32(xs), 1000)  # the float32 bucket path (>= 4096 values)
        want32 = [min(vals, key=lambda v: (abs(v - Fraction(float(x))), v)) for x in x32[::1000]]
        got32 = cb.round(x32)[::1000]
        assert [Fraction(float(g)) for g in got32] == want32, entries
