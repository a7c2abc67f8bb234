"""floatlab.quantize against a slow exact reference written here from the definitions.

The reference walks the blocks one by one with ``fractions.Fraction``: block amaxes, the four
scale rules (torchao's ScaleCalculationMode definitions), float-scale rounding, NVFP4's float32
steps, the division in the working precision and the element rounding
(``oracles.reference_round`` for float formats, brute-force nearest entries for codebooks,
integer rounding for fixed point). It uses nothing from floatlab.quant.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from oracles import reference_round

import floatlab
from floatlab import Codebook, FixedPoint, Scheme, get_format, get_scheme, quantize
from floatlab.mixed.recipe import get_recipe

# ======================================================================= exact helpers

def floor_log2(v: Fraction) -> int:
    e = v.numerator.bit_length() - v.denominator.bit_length()
    if Fraction(2) ** e > v:
        e -= 1
    return e


def to_float(v: Fraction, p: int, emin: int) -> float:
    """v rounded to nearest-even with p significand bits and normal exponent >= emin."""
    if v == 0:
        return 0.0
    sign = -1 if v < 0 else 1
    a = abs(v)
    e = max(floor_log2(a), emin)
    quantum = Fraction(2) ** (e - p + 1)
    n, r = divmod(a, quantum)
    if r > quantum / 2 or (r == quantum / 2 and n % 2):
        n += 1
    return sign * float(n * quantum)


def f32(v) -> Fraction:
    return Fraction(to_float(Fraction(v), 24, -126))


def f64(v) -> Fraction:
    return Fraction(to_float(Fraction(v), 53, -1022))


def ref_round_fraction_to_format(v: Fraction, fmt, mode: str) -> Fraction:
    """One value, exactly representable in float64 (the caller checks), through the oracle."""
    assert Fraction(float(v)) == v
    return Fraction(float(reference_round(np.array([float(v)]), fmt, (mode,))[mode][0]))


def ref_pow2_k(amax: Fraction, element, rule: str) -> int:
    emax = element.emax if isinstance(element, floatlab.Format) else floor_log2(
        Fraction(element.max))
    if amax == 0:
        return -10**6
    e = floor_log2(amax)
    if rule == "floor":
        return e - emax
    if rule == "ceil":
        return e + (amax != Fraction(2) ** e) - emax
    if rule == "even":  # round amax half-up to the element's mantissa width, then floor
        m = element.man_bits
        significand = amax / Fraction(2) ** e
        rounded = math.floor(significand * 2**m + Fraction(1, 2))
        return e + (rounded == 2 ** (m + 1)) - emax
    assert rule == "rceil"  # float32: amax * (1/max), then E8M0 round-up
    descale = f32(f32(amax) * f32(1 / f32(element.max)))
    if descale == 0:
        return -10**6
    d = floor_log2(descale)
    return d + (descale != Fraction(2) ** d)


def ref_element(q: Fraction, element, mode: str = "nearest_even") -> Fraction:
    if isinstance(element, floatlab.Format):
        qq = min(max(q, Fraction(-element.max)), Fraction(element.max))
        return ref_round_fraction_to_format(qq, element, mode)
    if isinstance(element, FixedPoint):
        step = Fraction(element.quantum)
        n, r = divmod(q, step)
        if r > step / 2 or (r == step / 2 and n % 2):
            n += 1
        # schemes saturate symmetrically at +-max: -2**(w-1) is never produced
        return min(max(n * step, -Fraction(element.max)), Fraction(element.max))
    values = [Fraction(float(v)) for v in element.values()]
    best = min(values, key=lambda v: (abs(v - q), v))  # ties: the lower entry
    return best


def blocks_of(shape, scheme):
    """Index lists of every block, from the block definition (ragged edges included)."""
    rows, cols = shape
    b = scheme.block
    if isinstance(b, int) and (scheme.axis is None or scheme.scale == "dq8"):
        # bitsandbytes' blocks: the flattened tensor in C order, the last block partial
        flat = [(r, c) for r in range(rows) for c in range(cols)]
        return [flat[i : i + b] for i in range(0, len(flat), b)]
    if b == "tensor":
        tiles = (rows, cols)
    elif b == "row":
        tiles = (1, cols)
    elif b == "column":
        tiles = (rows, 1)
    elif isinstance(b, int):
        tiles = (1, b) if scheme.axis in (-1, 1) else (b, 1)
    else:
        tiles = b
    out = []
    for r0 in range(0, rows, tiles[0]):
        for c0 in range(0, cols, tiles[1]):
            out.append([(r, c) for r in range(r0, min(r0 + tiles[0], rows))
                        for c in range(c0, min(c0 + tiles[1], cols))])
    return out


def reference(x: np.ndarray, scheme: Scheme):
    """(dequantised values, element values, effective scale per element) as Fractions."""
    element = scheme.element
    fx = {idx: Fraction(float(x[idx])) for idx in np.ndindex(x.shape)}
    working_f32 = x.dtype == np.float32
    wround = f32 if working_f32 else f64
    emax_value = Fraction(element.max)
    blocks = blocks_of(x.shape, scheme)
    amaxes = [max(abs(fx[i]) for i in blk) for blk in blocks]
    if scheme.global_scale:
        fmt = scheme.scale_format
        tensor_amax = max(amaxes)
        g = f32(f32(tensor_amax) / f32(Fraction(fmt.max) * emax_value)) if tensor_amax else 1
    effective = {}
    for blk, amax in zip(blocks, amaxes, strict=True):
        if scheme.scale in ("e8m0", "pow2"):
            k = ref_pow2_k(amax, element, scheme.scale_rounding) + scheme.margin
            k = max(k, -127 if scheme.scale == "e8m0" else -149)
            s = Fraction(2) ** k
        else:
            fmt = scheme.scale_format
            mode = {"even": "nearest_even", "floor": "down"}.get(scheme.scale_rounding, "up")
            lo, hi = Fraction(fmt.smallest_normal), Fraction(fmt.max)
            if scheme.global_scale:
                b = f32(f32(amax) / emax_value)
                ratio = min(max(f32(b / g), lo), hi)
                s = f32(g * ref_round_fraction_to_format(ratio, fmt, mode))
            else:
                raw = min(max(f64(amax / emax_value * 2**scheme.margin), lo), hi)
                s = ref_round_fraction_to_format(raw, fmt, mode)
        for i in blk:
            effective[i] = s
    elements = {i: ref_element(wround(fx[i] / effective[i]), element, scheme.rounding)
                for i in fx}
    deq = {i: wround(elements[i] * effective[i]) for i in fx}
    as_array = lambda d: np.array([float(d[i]) for i in np.ndindex(x.shape)]).reshape(x.shape)  # noqa: E731
    return as_array(deq), as_array(elements), as_array(effective)


def hard_data(rng, shape, dtype, block=32):
    """Zeros, all-zero blocks, subnormal-range blocks, amax at powers of two, huge ranges."""
    x = rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 20, (shape[0], 1))
    x[rng.random(shape) < 0.1] = 0.0
    x[0, :block] = 0.0                                    # an all-zero block
    if shape[0] > 1:
        tiny = 2.0**-135 if dtype == np.float64 else 2.0**-128
        x[1, :] *= tiny                                   # float32-subnormal / tiny rows
    if shape[0] > 2:
        x[2, 3] = 2.0**5                                  # amax exactly a power of two
        x[2, :] = np.clip(x[2, :], -31, 31)
        x[2, 3] = 2.0**5
    if shape[0] > 3:
        x[3, :] = rng.choice([-1, 1], shape[1]) * rng.uniform(0.88, 0.999, shape[1])  # crowd max
    return x.astype(dtype)


CUSTOM = [
    Scheme("e4m3fn", 32, "e8m0", "ceil"),
    Scheme("e4m3fn", 32, "e8m0", "even"),
    Scheme("e4m3fn", 32, "e8m0", "rceil"),
    Scheme("e2m1", 16, "e8m0", "rceil"),
    Scheme("e5m2", 8, "pow2", "floor", margin=1),
    Scheme("e3m2", (2, 8), "e8m0", "even"),
    Scheme("e4m3fn", "column", "float32", "even"),
    Scheme("e4m3fn", 16, "bf16", "ceil"),
    Scheme("e4m3fn", 16, "float32", "floor"),
    Scheme("e2m1", 16, "e4m3fn", "even"),                      # NVFP4 without the global scale
    Scheme("int4", 8, "float32", "even", axis=0),
    Scheme(FixedPoint(6, 3), 8, "e8m0", "floor"),
]
PRESETS = [n for n in floatlab.scheme_names() if n not in ("nf4_dq", "fp8_128x128")]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("scheme", PRESETS + CUSTOM, ids=lambda s: getattr(s, "name", s) or
                         repr(s)[7:40])
def test_quantize_matches_the_exact_reference(scheme, dtype):
    scheme = get_scheme(scheme)
    rng = np.random.default_rng(abs(hash(repr(scheme))) % 2**32)
    x = hard_data(rng, (5, 70), dtype)                    # 70: ragged against 32, 16, 64 ...
    if scheme.element.name == "udynamic8":
        x = np.abs(x)
    x_before = x.copy()
    q = quantize(x, scheme)
    deq, elements, effective = reference(x, scheme)
    got_elements = q._elements.reshape(-1)[: x.size].reshape(x.shape) if len(q._padded) == 1 \
        else q._elements.reshape(q._padded)[: x.shape[0], : x.shape[1]]  # (flat blocks)
    np.testing.assert_array_equal(got_elements, elements)
    np.testing.assert_array_equal(q.dequantize(), deq)
    assert q.dequantize().dtype == dtype
    np.testing.assert_array_equal(x, x_before)            # never mutated
    # the stored codes are the element format's codes of those values (-0 keeps its sign:
    # compare with floatlab.encode of the values themselves, which proves the fast code path)
    if not isinstance(scheme.element, Codebook):
        np.testing.assert_array_equal(q.unpack(), floatlab.encode(got_elements, scheme.element))
    else:
        np.testing.assert_array_equal(floatlab.decode(q.unpack(), scheme.element), elements)
    # codes + scales alone give the same tensor back
    back = floatlab.dequantize(q.codes, q.scales, scheme, global_scale=q.global_scale,
                               shape=q.shape, dtype=dtype)
    np.testing.assert_array_equal(back, q.dequantize())
    # the plain-array fast entry gives the same tensor and the same statistics
    fake, stats = floatlab.fake_quantize(x, scheme, stats=True)
    np.testing.assert_array_equal(fake, q.dequantize())
    assert stats == q.stats
    # storage: packed codes + one scale code per block (+ 4 bytes of global scale)
    n_blocks = q.scales.size
    code_bytes = math.ceil(x.size * scheme.element.bits / 8)
    assert q.codes.nbytes == code_bytes
    assert q.nbytes == code_bytes + n_blocks * scheme.scale_bits // 8 + 4 * scheme.global_scale


def test_the_128x128_weight_blocks_on_a_ragged_matrix():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((130, 133)).astype(np.float32)
    x[:128, :128] *= 100
    scheme = get_scheme("fp8_128x128")
    q = quantize(x, scheme)
    assert q.scales.shape == (2, 2)
    deq, _, _ = reference(x, scheme)
    np.testing.assert_array_equal(q.dequantize(), deq)


# ======================================================================= the four scale rules

@pytest.mark.parametrize("amax, expected", [
    # amax 150 = 1.171875 * 2**7, E4M3 (emax 8): floor 7-8; ceil 8-8; even keeps 1.171875;
    # rceil: 150 * (1/448) = 0.3348 = 1.339 * 2**-2, rounded up to 2**-1.
    (150.0, {"floor": 126, "ceil": 127, "even": 126, "rceil": 126}),
    # 1.96875 * 2**7 = 252: even rounds the significand to 2 (3 mantissa bits, half up) -> 2**8
    (252.0, {"floor": 126, "ceil": 127, "even": 127, "rceil": 127}),
    (1.9375 * 128, {"floor": 126, "ceil": 127, "even": 127, "rceil": 127}),  # exactly half: up
    (1.90625 * 128, {"floor": 126, "ceil": 127, "even": 126, "rceil": 127}),
    (256.0, {"floor": 127, "ceil": 127, "even": 127, "rceil": 127}),  # a power of two
    (448.0, {"floor": 127, "ceil": 128, "even": 127, "rceil": 127}),  # rceil: 448 * fl(1/448)
    (0.0, {"floor": 0, "ceil": 0, "even": 0, "rceil": 0}),             # all-zero block: 2**-127
])
def test_the_four_scale_rules_on_hand_worked_blocks(amax, expected):
    block = np.zeros(32, dtype=np.float32)
    block[5] = -amax
    block[6] = amax / 3
    for rule, code in expected.items():
        q = quantize(block, Scheme("e4m3fn", 32, "e8m0", rule))
        assert int(q.scale_codes[0]) == code, rule
        k = ref_pow2_k(Fraction(amax), get_format("e4m3fn"), rule)
        assert code == max(k, -127) + 127, rule
        assert q.stats.clipped_fraction == (1 / 32 if amax / 2.0 ** (code - 127) > 448 else 0)


@pytest.mark.parametrize("rule", ["rceil", "rfloor"])
def test_float32_rules_on_float64_amaxes_beyond_float32s_range(rule):
    """rceil / rfloor compute in float32; a float64 amax beyond float32's range keeps their
    float32 significand roundings with the exponent range unbounded (k = 122 for 2**130 with
    E4M3, as floor gives), where the float32 cast's inf gave k = 0 (rceil) and the underflowed
    quotient k = 1 (rfloor): every value clipped to 448, silently. Past any E8M0 scale it
    raises, as floor does."""
    r32 = Fraction(float(np.float32(1 / np.float32(448))))

    def unbounded24(v):  # float32's significand, no exponent bounds
        return Fraction(to_float(Fraction(v), 24, -10**6))

    rng = np.random.default_rng(5)
    amaxes = [2.0**128, 2.0**130, 2.0**130 * 448 / 256, float(np.finfo(np.float32).max) * 1.5]
    amaxes += list(np.ldexp(1 + rng.random(40), rng.integers(128, 134, 40)))
    amaxes += [np.nextafter(2.0**133 * 448 / 256, 0), np.nextafter(2.0**133 * 1.75, np.inf)]
    for amax in map(float, amaxes):
        a = unbounded24(amax)
        if rule == "rceil":
            d = unbounded24(a * r32)
            k = floor_log2(d) + (d != Fraction(2) ** floor_log2(d))
        else:
            k = -floor_log2(unbounded24(Fraction(448) / a))
        x = np.array([amax, -amax / 3, 0.0])
        scheme = Scheme("e4m3fn", 32, "e8m0", rule)
        if k > 127:
            with pytest.raises(ValueError, match="needs a scale above 2\\*\\*127"):
                quantize(x, scheme)
            continue
        q = quantize(x, scheme)
        assert int(q.scale_codes[0]) == k + 127, (amax, rule)
        assert q.stats.clipped_fraction == (1 / 3 if amax / 2.0**k > 448 else 0)
    for amax in (2.0**200, 1e300):
        with pytest.raises(ValueError, match="needs a scale above"):
            quantize(np.array([amax, 1.0]), Scheme("e4m3fn", 32, "e8m0", rule))


def test_rfloor_pow2_scales_of_float32_subnormal_amaxes():
    """rfloor's float32 quotient 448 / amax overflows for subnormal amaxes: it took an
    all-zero block's k, so pow2 scales (down to 2**-149) were 2**-149 where the rule gives
    e.g. 2**-143, and the block was clipped to 448. Reference: the quotient with float32's
    significand and an unbounded exponent; no clipping."""
    rng = np.random.default_rng(8)
    amaxes = np.float32(np.ldexp(1 + rng.random(60), rng.integers(-149, -120, 60)))
    amaxes = np.concatenate([amaxes, np.float32([2.0**-149, 2.0**-126, 1e-36, 1e-30])])
    _check_rfloor_pow2(("e4m3fn", "e5m2", "e2m1"), amaxes)


def _check_rfloor_pow2(elements, amaxes):
    """Each amax's pow2 "rfloor" scale against the reference (float32's significand, an
    unbounded exponent) and no clipping."""
    for el in elements:
        fmt = get_format(el)
        for amax in amaxes:
            q = Fraction(to_float(Fraction(float(fmt.max)) / Fraction(float(amax)), 24, -10**6))
            k = max(-floor_log2(q), -149)
            x = np.array([amax, -amax / 3, 0.0], np.float32)
            got = quantize(x, Scheme(el, 32, "pow2", "rfloor"))
            assert got.scales[0] == 2.0**k, (el, float(amax))
            assert got.stats.clipped_fraction == 0, (el, float(amax))


def test_rfloor_pow2_scales_with_wide_elements():
    """With bf16 or float32 elements (max ~2**128) the float32 quotient max / amax
    overflowed for every amax below ~1, not only for subnormal ones: the pow2 scale became
    2**-149 and every value clipped to max (0.5 -> 4.7e-7, 100% clipped). Reference as above:
    float32's significand, an unbounded exponent."""
    amaxes = np.float32([0.5, 0.00206414, 1.0, 3.0, 1e-20, 2.0**-100, 1e6])
    _check_rfloor_pow2(("bf16", "float32", "float16"), amaxes)


def test_448_times_the_float32_reciprocal_is_exactly_one():
    # the rceil row above relies on this float32 fact: 448 * fl32(1/448) rounds to 1.0
    assert np.float32(448) * np.float32(1 / np.float32(448)) == np.float32(1.0)


def test_floor_clips_the_block_max_and_rceil_never_does():
    x = np.random.default_rng(0).standard_normal((512, 32)).astype(np.float32)
    floor = quantize(x, "mxfp8").stats
    rceil = quantize(x, get_scheme("mxfp8").replace(scale_rounding="rceil")).stats
    assert 0.004 < floor.clipped_fraction < 0.012
    assert rceil.clipped_fraction == 0
    assert rceil.qsnr_db > floor.qsnr_db


# ======================================================================= properties

# Not idempotent, by design: nf4_dq dequantises with the compressed absmax; bitsandbytes'
# signed dynamic map holds 1.0 but not -1.0, so a block whose amax is negative comes back
# with a smaller absmax.
@pytest.mark.parametrize("name", [n for n in floatlab.scheme_names()
                                  if n not in ("nf4_dq", "dynamic8")])
def test_dequantize_of_quantize_is_idempotent_in_float64(name):
    x = hard_data(np.random.default_rng(1), (4, 96), np.float64)
    if name == "udynamic8":
        x = np.abs(x)
    once = quantize(x, name).dequantize()
    twice = quantize(once, name).dequantize()
    np.testing.assert_array_equal(twice, once)


@pytest.mark.parametrize("name", ["mxfp8", "mxfp4", "mxfp6_e3m2", "mxint8"])
def test_power_of_two_schemes_are_idempotent_in_float32(name):
    x = hard_data(np.random.default_rng(2), (4, 96), np.float32)
    once = quantize(x, name).dequantize()
    np.testing.assert_array_equal(quantize(once, name).dequantize(), once)


def test_nf4_double_quantisation_dequantises_with_the_compressed_absmax():
    x = np.random.default_rng(3).standard_normal((8, 4096)).astype(np.float32)
    dq, plain = quantize(x, "nf4_dq"), quantize(x, "nf4")
    np.testing.assert_array_equal(dq.unpack(), plain.unpack())  # same elements (exact absmax)
    plain_scales = plain.scales.reshape(-1)  # dq8's blocks run over the flattened tensor
    assert dq.scales.shape == (8 * 4096 // 64,)
    assert not np.array_equal(dq.scales, plain_scales)          # stored absmax approximated
    assert np.max(np.abs(dq.scales - plain_scales) / plain_scales) < 0.02
    assert abs(dq.stats.qsnr_db - plain.stats.qsnr_db) < 0.2
    assert plain.bits_per_value == 4.5
    assert dq.bits_per_value == pytest.approx(4 + 8 / 64 + 32 / 64 / 256, abs=2e-3)


def test_bits_per_value_is_the_real_storage_cost():
    x = np.ones((64, 256), dtype=np.float32)
    assert quantize(x, "mxfp8").bits_per_value == 8.25
    assert quantize(x, "mxfp4").bits_per_value == 4.25
    assert quantize(x, "mxfp6_e2m3").bits_per_value == 6.25
    assert quantize(x, "nvfp4").bits_per_value == 4.5 + 32 / x.size
    assert quantize(x, "fp8_rowwise").bits_per_value == 8 + 32 / 256
    assert get_scheme("nvfp4").bits_per_value == 4.5
    assert get_scheme("mxfp8").bits_per_value == 8.25


def test_packing_round_trips_and_puts_the_first_fp4_code_low():
    from floatlab.quant.quantize import pack_codes, unpack_codes

    rng = np.random.default_rng(4)
    for bits, n in ((4, 9), (4, 10), (6, 7), (6, 8)):
        codes = rng.integers(0, 1 << bits, n).astype(np.uint8)
        packed = pack_codes(codes, bits)
        assert packed.size == math.ceil(n * bits / 8)
        np.testing.assert_array_equal(unpack_codes(packed, bits, n), codes)
    assert pack_codes(np.array([0xA, 0x5], np.uint8), 4).tolist() == [0x5A]  # float4_e2m1fn_x2
    assert pack_codes(np.array([1, 2, 3, 4], np.uint8), 6).tolist() == [0b00000100, 0b00100000,
                                                                         0b11000100]


def test_hadamard_rotates_blocks_and_dequantize_inverts_it():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((8, 64))
    x[:, 5] *= 40  # an outlier column: the rotation spreads it over its block of 16
    plain = get_scheme("nvfp4")
    rotated = plain.replace(hadamard=16)
    from floatlab.quant.quantize import hadamard_matrix

    R = hadamard_matrix(16)
    np.testing.assert_allclose(R @ R.T, np.eye(16), atol=1e-15)
    q = quantize(x, rotated)
    expected = quantize((x.reshape(-1, 16) @ R).reshape(x.shape), plain).dequantize()
    np.testing.assert_allclose(q.dequantize(), (expected.reshape(-1, 16) @ R.T).reshape(x.shape),
                               rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="multiple of 16"):
        quantize(np.ones((2, 20)), rotated)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rounding", ["nearest_even", "stochastic"])
def test_fake_quantize_rotated_keeps_the_rotated_basis(dtype, rounding):
    """rotated=True: the values a GEMM of two rotated operands reads, q(x R), without the
    inverse transform; bit-equal to rotating by hand and quantising without the transform
    (E2M1 midpoints, zeros, subnormal-small and saturating blocks included), with the same
    random draws; its stats compare x R with them; without a transform it changes nothing."""
    from floatlab.quant.quantize import fake_quantize, hadamard_matrix

    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 64)) * 10.0 ** rng.integers(-6, 3, (8, 64))
    x[0, :16] = 0.0
    x[1] = np.tile([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.0], 8)  # E2M1 midpoints
    x[2, :16] *= 1e-300 if dtype is np.float64 else 1e-35
    x = x.astype(dtype)
    seed = 3 if rounding == "stochastic" else None
    plain = get_scheme("nvfp4").replace(rounding=rounding)
    rot = plain.replace(hadamard=16)
    by_hand = (x.reshape(-1, 16) @ hadamard_matrix(16, dtype)).reshape(x.shape)
    expected = fake_quantize(by_hand, plain, rng=seed)
    got, stats = fake_quantize(x, rot, rng=seed, stats=True, rotated=True)
    assert got.dtype == expected.dtype   # (stochastic rounding works in float64)
    assert got.tobytes() == expected.tobytes()
    assert np.array_equal(fake_quantize(x, rot, rng=seed, rotated=True), expected)
    assert stats == fake_quantize(by_hand, plain, rng=seed, stats=True)[1]
    # the default turns the values back: the same codes times Rᵀ
    back = fake_quantize(x, rot, rng=seed)
    np.testing.assert_allclose(back, (expected.reshape(-1, 16) @ hadamard_matrix(16, dtype).T)
                               .reshape(x.shape), rtol=0, atol=0)
    assert np.array_equal(fake_quantize(x, plain, seed, rotated=True),
                          fake_quantize(x, plain, seed))
    with pytest.raises(TypeError, match="rotated"):
        fake_quantize(x, rot, rotated="yes")


def test_stochastic_element_rounding_is_reproducible_and_unbiased():
    x = np.full((64, 32), 0.3)
    s = get_scheme("mxfp4").replace(rounding="stochastic")
    a, b = quantize(x, s, rng=1).dequantize(), quantize(x, s, rng=1).dequantize()
    np.testing.assert_array_equal(a, b)
    assert set(np.unique(a)) == {0.25, 0.375}  # neighbours of 0.3 at scale 2**-3
    assert abs(a.mean() - 0.3) < 0.005


def test_stats_count_flushed_clipped_and_the_scale_histogram():
    x = np.array([[1e-6, 1.0, 0.0, 448.0, 460.0, 470.0]])
    q = quantize(x, Scheme("e4m3fn", "tensor", "pow2", "floor"))
    st = q.stats
    assert st.flushed_fraction == 1 / 5            # 1e-6 became 0 (the 0 is not counted)
    assert q.scales.tolist() == [[1.0]]            # amax 470: 2**(floor(log2 470) - 8)
    assert st.clipped_fraction == 2 / 6            # 460 and 470 exceed 448
    assert st.scale_histogram == {int(np.log2(q.scales[0, 0])): 1}
    assert math.isfinite(st.qsnr_db)


# ======================================================================= bad input

def test_bad_input_gets_clear_errors():
    with pytest.raises(ValueError, match="unknown scheme 'mxfp9'.*Did you mean"):
        quantize([1.0], "mxfp9")
    with pytest.raises(ValueError, match="unknown scale format 'e8m1'.*e8m0"):
        Scheme("e4m3fn", 32, "e8m1")
    with pytest.raises(ValueError, match="unknown scale_rounding"):
        Scheme("e4m3fn", 32, "e8m0", "nearest")
    with pytest.raises(ValueError, match="column.*at least 2 dimensions"):
        quantize(np.ones(8), Scheme("e4m3fn", "column", "float32"))
    with pytest.raises(ValueError, match=r"tile \(1, 128\) needs at least 2 dimensions"):
        quantize(np.ones(8), "fp8_1x128")
    with pytest.raises(ValueError, match="axis 1 is out of range"):
        quantize(np.ones(8), Scheme("e4m3fn", 4, "e8m0", axis=1))
    with pytest.raises(ValueError, match="powers of two"):
        floatlab.dequantize(np.zeros(32, np.uint8), [0.3], "mxfp8")
    with pytest.raises(ValueError, match="0-d"):
        quantize(1.0, "mxfp8")
    with pytest.raises(ValueError, match="float64 cannot hold exactly"):
        quantize(np.array([2**53 + 1, 1], dtype=np.int64), "fp8_tensorwise")
    with pytest.raises(TypeError, match="boolean"):
        quantize(np.ones(4, bool), "mxfp8")
    with pytest.raises(ValueError, match="1 NaN and 1 inf.*nan_to_num"):
        quantize([1.0, np.nan, np.inf], "mxfp8")
    with pytest.raises(ValueError, match="above 2\\*\\*127"):
        quantize([1e300], Scheme("e4m3fn", 32, "e8m0"))
    with pytest.raises(ValueError, match="global_scale.*e8m0"):
        Scheme("e2m1", 16, "e8m0", global_scale=True)
    with pytest.raises(ValueError, match="'even'.*float element"):
        Scheme("nf4", 64, "e8m0", "even")
    with pytest.raises(ValueError, match="hadamard must be None or a power of two"):
        Scheme("e2m1", 16, "e4m3fn", hadamard=12)
    with pytest.raises(ValueError, match="no sign bit or no zero"):
        Scheme("e8m0", 32)
    with pytest.raises(TypeError, match="block must be"):
        Scheme("e4m3fn", 2.5)
    with pytest.raises(ValueError, match="global_scale=q.global_scale"):
        q = quantize(np.ones(16), "nvfp4")
        floatlab.dequantize(q.codes, q.scales, "nvfp4", shape=q.shape)
    with pytest.raises(ValueError, match="scales have shape"):
        floatlab.dequantize(np.zeros(64, np.uint8), np.ones(3), "mxfp8")
    with pytest.raises(TypeError, match="integer codes"):
        floatlab.dequantize(np.zeros(32), np.ones(1), "mxfp8")


def test_integer_inputs_up_to_2_53_are_exact():
    x = np.array([2**53, -(2**52), 7], dtype=np.int64)
    assert quantize(x, "fp8_tensorwise").scales.shape == (1,)


@pytest.mark.parametrize("spelling, key", [
    ("E8M0", "e8m0"), ("float8_e8m0fnu", "e8m0"), (get_format("e8m0"), "e8m0"),
    ("fp32", "float32"), (np.float32, "float32"), (np.dtype("float32"), "float32"),
    ("bfloat16", "bf16"), ("float8_e4m3fn", "e4m3fn"), ("POW2", "pow2")])
def test_scheme_scale_takes_every_name_of_its_formats(spelling, key):
    # the scale formats are formats: "fp32", "E8M0", a Format or np.float32 were refused as
    # "unknown scale format" while every other format argument takes them
    scheme = Scheme("e4m3fn", scale=spelling)
    assert scheme.scale == key and scheme == Scheme("e4m3fn", scale=key)


@pytest.mark.parametrize("spelling, key", [("CEIL", "ceil"), (" RCeil ", "rceil"),
                                           ("Floor", "floor"), ("rfloor", "rfloor")])
def test_scheme_scale_rounding_takes_any_case(spelling, key):
    # scale_rounding names were case-sensitive ("CEIL" refused as unknown) while format,
    # rounding and scheme names are read in any case
    scheme = Scheme("e4m3fn", 32, "e8m0", spelling)
    assert scheme.scale_rounding == key and scheme == Scheme("e4m3fn", 32, "e8m0", key)
    recipe = get_recipe("mxfp8", scale_rounding=spelling)
    assert recipe.options["scale_rounding"] == key and recipe.forward.a.name == f"mxfp8 {key}"


@pytest.mark.parametrize("rule, error, match", [
    ("ciel", ValueError, r"unknown scale_rounding 'ciel'\. Did you mean 'ceil', 'rceil'\? Use "
                         r"one of floor, ceil, even, rceil, rfloor"),
    ("nearest", ValueError, r"unknown scale_rounding 'nearest'\. Use one of floor"),
    (None, TypeError, r"scale_rounding must be a string, one of floor.*got None \(NoneType\)")])
def test_scheme_scale_rounding_refuses_unknown_names(rule, error, match):
    with pytest.raises(error, match=match):
        Scheme("e4m3fn", 32, "e8m0", rule)


@pytest.mark.parametrize("scale, match", [
    ("fp16", r"unknown scale format 'fp16'\. Did you mean 'bf16'\? Use one of float32, "
             r"pow2, e8m0, e4m3fn, bf16, dq8"),
    ("e4m3", r"unknown scale format 'e4m3'\. Did you mean 'e4m3fn'"),
    (None, r"unknown scale format None\. Use one of")])
def test_scheme_scale_refuses_other_formats_by_name(scale, match):
    with pytest.raises(ValueError, match=match):
        Scheme("e4m3fn", scale=scale)


@pytest.mark.parametrize("rule", ["ceil", "rceil", "rfloor", "even", "floor"])
@pytest.mark.parametrize("element", ["e2m1", "e5m2", "e4m3fn"])
def test_dequantising_near_float32_max_overflows_silently_to_the_exact_result(rule, element):
    # A float32 block whose amax is near float32's max: E2M1 with "ceil" scales rounds
    # 3e38 / 2**126 = 3.53 up to 4, and the float32 product 4 * 2**126 = 2**128 is inf.
    # That inf is the result (the exact value rounded to float32); the product leaked
    # NumPy's "overflow encountered in multiply" RuntimeWarning from dequantize,
    # fake_quantize, QuantizedTensor.dequantize and .stats.
    x = np.array([3e38, -3.3e38, 2.9e38, 1.7e38, 1.0, -0.0], dtype=np.float32)
    scheme = Scheme(element, "tensor", "pow2", rule)
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        q = quantize(x, scheme)
        outs = [q.dequantize(), floatlab.fake_quantize(x, scheme),
                floatlab.dequantize(q.codes, q.scales, scheme, shape=q.shape, dtype=np.float32)]
        q.stats  # noqa: B018 - computing them must not warn either
    s = float(q.scales[0])
    assert math.log2(s).is_integer()
    fmt = get_format(element)
    elements = reference_round(x.astype(np.float64) / s, fmt, ["nearest_even"],
                               saturate=True)["nearest_even"]
    exact = elements * s  # exact in float64 (a few-bit element times a power of two)
    want = reference_round(exact, get_format("float32"), ["nearest_even"])["nearest_even"]
    for out in outs:
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out.astype(np.float64), want)
    if element == "e2m1" and rule != "floor":
        assert np.isinf(want).any()  # the case in point: an element rounded past float32's max


def test_qsnr_of_an_infinite_error_is_minus_inf():
    # a float32 dequantisation that overflowed to inf (see the test above) made the error
    # sum inf, and 10 * log10(sig / inf) = log10(0) raised "math domain error" from q.stats
    from floatlab.quant.quantize import qsnr_db
    x = np.array([3e38, 1.0], dtype=np.float32)
    assert qsnr_db(x, np.array([np.inf, 1.0], np.float32)) == -math.inf
    assert qsnr_db(x, x) == math.inf and qsnr_db([0.0], [1.0]) == -math.inf
    q = quantize(x, Scheme("e2m1", "tensor", "pow2", "ceil"))
    with np.errstate(over="ignore"):
        assert q.stats.qsnr_db == -math.inf


def test_qsnr_when_deq_is_far_larger_than_x():
    """A float64-subnormal block rounded up (rounding='down' of a negative value) to an
    element times E8M0's smallest scale 2**-127: deq ~1e-39 while x ~1e-313. The squares were
    scaled by x's exponent alone, so deq's overflowed: -inf dB and a RuntimeWarning. The exact
    value: 10 log10(sum x**2 / sum (x - deq)**2)."""
    import warnings

    x = np.array([0.0, -1.79408617e-313])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q = quantize(x, Scheme("e2m1", 1, "e8m0", "floor", "down"))
        deq = q.dequantize()
        got = q.stats.qsnr_db
    assert deq[1] == -0.5 * 2.0**-127
    fx, fd = (Fraction(float(v)) for v in (x[1], deq[1]))
    want = 10 * (math.log10((fx * fx).numerator) - math.log10((fx * fx).denominator)
                 - math.log10(((fx - fd) ** 2).numerator)
                 + math.log10(((fx - fd) ** 2).denominator))
    assert got == pytest.approx(want, rel=1e-12)
    from floatlab.quant.quantize import qsnr_db
    assert qsnr_db(x, deq) == pytest.approx(want, rel=1e-12)
    assert qsnr_db([1e-170, 0.0], [0.0, 0.0]) == pytest.approx(0.0)  # all flushed: 0 dB


@pytest.mark.parametrize("element", ["float32", "float64"])
def test_dequantize_stored_codes_of_elements_wider_than_16_bits(element):
    """Elements past 16 bits have no decode table: dequantize called element.decode, a method
    Formats do not have (AttributeError from deep inside), and cast float64 codes to intp, so
    the patterns of negative values (>= 2**63) wrapped negative."""
    x = np.array([[0.3, -1.2, 5.0, -0.01], [1e-3, -7.0, 2.5, 0.0]])
    s = Scheme(element, 4, "e8m0", "floor")
    q = quantize(x, s)
    got = floatlab.dequantize(q.codes, q.scales, s, shape=q.shape)
    np.testing.assert_array_equal(got, q.dequantize())
    np.testing.assert_array_equal(got, floatlab.fake_quantize(x, s))
    assert got[0, 1] < 0 and got[1, 1] < 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nvfp4_zero_block_of_a_tensor_with_a_subnormal_global_scale(dtype):
    """A tensor of amax ~3.8e-42 gets a float32-subnormal global scale g; an all-zero block's
    scale (clamped to E4M3's 2**-6) times g underflows to 0, and its zeros were divided 0 / 0:
    quantize and fake_quantize raised "float4_e2m1fn has no NaN, and the input holds NaN", x
    holding none. Those zeros are the element 0; the nonzero block keeps its values."""
    x = np.zeros((2, 32), dtype)
    x[0, 0], x[0, 1] = 3.793e-42, 1e-44
    x = x.astype(np.float32).astype(dtype)  # (float32 subnormals, in either dtype)
    q = quantize(x, "nvfp4")
    assert q.global_scale > 0 and np.float32(q.global_scale) * np.float32(2.0**-6) == 0
    deq = q.dequantize()
    np.testing.assert_array_equal(deq, floatlab.fake_quantize(x, "nvfp4"))
    assert deq[0, 0] == np.float32(np.float32(q.global_scale) * np.float32(448)) * 6
    assert not deq[1].any() and not q.unpack()[1].any()
    assert q.stats.flushed_fraction == 0.5  # 1e-44, a 448th of the amax, rounds to 0


def test_qsnr_when_x_squares_are_subnormal_at_deq_scale():
    """The follow-up of the test above: x ~1e-240 against deq ~5e-79 scaled x's squares
    into float64's subnormals without zeroing them (-3225.28 dB instead of -3225.65)."""
    x = np.array([-2.34310155e-252, -1.92311066e-304, 3.98282951e-240, 6.69312934e-285])
    q = quantize(x, Scheme("bf16", 1, "e8m0", "floor", "down"))
    deq = q.dequantize()
    fx = [Fraction(float(v)) for v in x]
    fd = [Fraction(float(v)) for v in deq]
    sig = sum(v * v for v in fx)
    err = sum((a - b) ** 2 for a, b in zip(fx, fd, strict=True))
    want = 10 * (math.log10(sig.numerator) - math.log10(sig.denominator)
                 - math.log10(err.numerator) + math.log10(err.denominator))
    assert q.stats.qsnr_db == pytest.approx(want, rel=1e-12)
