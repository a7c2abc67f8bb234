"""DeepSeek-V3's scaled FP8 GEMM (floatlab.mixed.promoted_gemm): the codes' products summed per
128-tile by the narrow accumulator, the tile scales applied at promotion into float32.

The reference is written from the definition with exact rationals: each tile's block-FMA sum
of the codes' products (test_blockfma.reference), then ``out = round32(round32(s_a * s_b) * P
+ out)`` from 0 (DeepGEMM's float32 scale product and FFMA). The float32 passes are checked
bit-equal to the float64 definition on every pair of E4M3 values and on adversarial sums.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from exact_arith import round_fraction
from test_blockfma import reference as block_reference

import floatlab
from floatlab import Accumulator, blockfma, get_format, get_scheme
from floatlab.blockfma import _product_chunks
from floatlab.mixed import promoted_gemm as pg
from floatlab.mixed.promoted_gemm import TiledOperand, float32_exact, promoted_matmul
from floatlab.mixed.recipe import Gemm, get_recipe
from floatlab.quant.quantize import fake_quantize, quantize_elements

E4M3 = get_format("e4m3fn")
FP32 = get_format("float32")
ACC = Accumulator("e8m13", "toward_zero", block_fma=32, chunk=128, promote="float32")


def _e4m3_values() -> np.ndarray:
    """Every finite E4M3 value, from the 256 codes (0x7F / 0xFF are NaN), -0 included."""
    values = floatlab.decode(np.arange(256, dtype=np.uint8), E4M3)
    return values[np.isfinite(values)]


def exact_promoted(a: TiledOperand, b: TiledOperand, acc: Accumulator) -> np.ndarray:
    inner = Accumulator(acc.fmt, acc.rounding, block_fma=acc.block_fma,
                        align_bits=acc.align_bits)
    k, chunk = a.elements.shape[1], acc.chunk
    sa, sb = a.row_scales(), b.row_scales()
    out = np.zeros((a.elements.shape[0], b.elements.shape[0]))
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            total = Fraction(0)
            for start in range(0, k, chunk):
                products = (a.elements[i, start:start + chunk].astype(np.float64)
                            * b.elements[j, start:start + chunk])   # exact (8-bit significands)
                partial = block_reference(products, inner)
                ta, tb = start // a.block[1], start // b.block[1]     # the tiles it lies in
                scale = round_fraction(Fraction(float(sa[i, ta])) * Fraction(float(sb[j, tb])),
                                       FP32, "nearest_even")
                total = round_fraction(scale * partial + total, FP32, "nearest_even")
            out[i, j] = float(total)
    return out


@pytest.mark.parametrize("m,k,n,schemes", [
    (3, 300, 5, ("fp8_1x128", "fp8_128x128")), (4, 16, 3, ("fp8_1x128", "fp8_128x128")),
    (2, 128, 6, ("fp8_1x128", "fp8_128x128")), (5, 64, 130, ("fp8_1x128", "fp8_128x128")),
    (3, 300, 4, ("fp8_tensorwise", "fp8_rowwise")),       # one scale over every chunk
    (2, 300, 3, ("fp8_1x128", "fp8_rowwise"))])
def test_promoted_matmul_matches_the_exact_model(m, k, n, schemes):
    rng = np.random.default_rng(k)
    x = (rng.standard_normal((m, k)) * np.exp(rng.normal(0, 2, (m, k)))).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    x[0, : k // 3] = 0.0                           # zero products, and a row of tiny values
    x[-1] *= np.float32(2.0**-20)
    a, _ = pg.tiled_operand(x, get_scheme(schemes[0]))
    b, _ = pg.tiled_operand(w, get_scheme(schemes[1]))
    expected = exact_promoted(a, b, ACC)
    np.testing.assert_array_equal(promoted_matmul(a, b, ACC), expected)
    per_product = Accumulator("e8m13", "toward_zero", chunk=128, promote="float32")
    np.testing.assert_array_equal(promoted_matmul(a, b, per_product),
                                  _per_product_reference(a, b, per_product))


def _per_product_reference(a, b, acc):
    """The per-addition truncating accumulator on the codes (floatlab.matmul per tile), scaled
    at promotion with floatlab.fma: the general path written out."""
    inner = Accumulator(acc.fmt, acc.rounding)
    out = np.zeros((a.elements.shape[0], b.elements.shape[0]))
    sa, sb = a.row_scales(), b.row_scales()
    for s in range(0, a.elements.shape[1], acc.chunk):
        part = floatlab.matmul(a.elements[:, s:s + acc.chunk].astype(np.float64),
                               b.elements[:, s:s + acc.chunk].T.astype(np.float64), inner)
        ta, tb = s // a.block[1], s // b.block[1]
        out = floatlab.fma(sa[:, ta, None] * sb[None, :, tb], part, out, fmt="float32")
    return out


def test_scale_product_rounds_then_one_fma():
    """s_a * s_b rounds to float32 first; the multiply-add rounds once (an FFMA): a case where
    rounding the product s * P separately would differ."""
    one = np.ones((1, 1), np.float32)
    sa = np.float32(1 + 2.0**-12)
    a = TiledOperand(one * 3, np.array([[sa]], np.float32), (1, 1), E4M3)
    b = TiledOperand(one, np.array([[sa]], np.float32), (1, 1), E4M3)
    acc = Accumulator("e8m13", "toward_zero", block_fma=32, chunk=1, promote="float32")
    s = np.float32(sa * sa)                                   # 1 + 2**-11 (2**-24 dropped)
    assert float(s) == 1 + 2.0**-11
    assert float(promoted_matmul(a, b, acc)[0, 0]) == float(np.float32(3 * float(s)))
    two = TiledOperand(np.full((1, 2), 3, np.float32), np.array([[sa, sa]], np.float32),
                       (1, 1), E4M3)
    once = promoted_matmul(two, TiledOperand(np.ones((1, 2), np.float32), two.scales, (1, 1),
                                             E4M3), acc)
    first = np.float32(3 * float(s))
    fused = float(np.float32(Fraction(float(s)) * 3 + Fraction(float(first))))
    assert float(once[0, 0]) == fused


@pytest.mark.parametrize("scheme,shape", [("fp8_1x128", (7, 300)), ("fp8_1x128", (5, 16)),
                                          ("fp8_128x128", (130, 260)), ("fp8_128x128", (64, 16)),
                                          ("mxfp8", (3, 96)), ("fp8_rowwise", (4, 40))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_quantize_elements_are_the_factors_of_fake_quantize(scheme, shape, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    before = x.copy()
    elements, scales, block, stats = quantize_elements(x, scheme, stats=True)
    np.testing.assert_array_equal(x, before)
    assert elements.shape == x.shape and elements.dtype == dtype
    grid = tuple(-(-n // t) for n, t in zip(shape, block, strict=True))
    assert scales.shape == grid
    full = np.repeat(np.repeat(scales, block[0], 0), block[1], 1)[: shape[0], : shape[1]]
    expected, expected_stats = fake_quantize(x, scheme, stats=True)
    np.testing.assert_array_equal(elements * full, expected)
    assert stats == expected_stats
    if dtype == np.float32 and get_scheme(scheme).block in ((1, 128), (128, 128)):
        # (float64 inputs dequantise in float64; the kernel's operands are float32 numbers)
        tiled, _ = pg.tiled_operand(x, get_scheme(scheme))
        np.testing.assert_array_equal(tiled.dequantize(), fake_quantize(x, scheme))


def test_quantize_elements_refuses_rotations():
    with pytest.raises(ValueError, match="Hadamard"):
        quantize_elements(np.ones((2, 16)), get_scheme("nvfp4").replace(hadamard=16))


def test_transposed_square_tiles_are_the_tiles_of_the_transpose():
    w = np.random.default_rng(1).standard_normal((200, 130)).astype(np.float32)
    scheme = get_scheme("fp8_128x128")
    t = pg.tiled_operand(w, scheme)[0].T
    direct = pg.tiled_operand(np.ascontiguousarray(w.T), scheme)[0]
    np.testing.assert_array_equal(t.elements, direct.elements)
    np.testing.assert_array_equal(t.scales, direct.scales)
    assert t.block == direct.block


# ------------------------------------------------------------------ float32 passes

def _paths(a, b, acc, chunk):
    """The tiles' partial sums: float32 passes, float64 passes, and the general float64 path
    (blockfma._blocks through floatlab.matmul, one call per tile)."""
    inner = Accumulator(acc.fmt, acc.rounding, block_fma=acc.block_fma,
                        align_bits=acc.align_bits)
    assert float32_exact(inner, E4M3, E4M3, chunk)
    f32 = _product_chunks(a, b, chunk, inner, np.float32)
    f64 = _product_chunks(a, b, chunk, inner, np.float64)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(blockfma, "_FAST_PRODUCTS", False)   # blockfma._blocks of the products
        general = [floatlab.matmul(a[:, s:s + chunk].astype(np.float64),
                                   b[s:s + chunk].astype(np.float64), inner)
                   for s in range(0, a.shape[1], chunk)]
    assert f32.dtype == np.float32
    return f32, f64, np.stack(general)


def _assert_same_bits(f32, f64, general):
    np.testing.assert_array_equal(f32.astype(np.float64), general)
    np.testing.assert_array_equal(f64, general)
    # signs of zeros too
    assert np.array_equal(np.signbit(f32), np.signbit(general))


def test_float32_passes_on_every_pair_of_e4m3_values():
    """One product per sum (every ordered pair of the 254 finite values: the truncation of
    single products, subnormals and zeros of both signs), then two, then sums of 32-products
    blocks of every value against every value in rotation (every pair meets inside blocks)."""
    v = _e4m3_values().astype(np.float32)
    _assert_same_bits(*_paths(v[:, None], v[None, :], ACC, 128))
    n = v.size
    # two products per sum: v_i * v_j + v_j * v_(j+1 mod n), all i, j
    a = np.stack([v, np.roll(v, 7)], axis=1)
    b = np.stack([v, np.roll(v, -1)], axis=0)
    _assert_same_bits(*_paths(a, b, ACC, 128))
    # K = 256 (two tiles): row i holds v rotated by i, column j by 3j
    idx = np.arange(256) % n
    a = v[(idx[None, :] + np.arange(n)[:, None]) % n]
    b = v[(3 * np.arange(n)[None, :] + idx[:, None]) % n]
    _assert_same_bits(*_paths(a, b, ACC, 128))


@pytest.mark.parametrize("acc", [ACC,
                                 Accumulator("e8m14", "toward_zero", block_fma=32, chunk=128,
                                             promote="float32"),
                                 Accumulator("e8m13", "toward_zero", block_fma=16, chunk=128,
                                             promote="float32", align_bits=3),
                                 Accumulator("e8m10", "toward_zero", block_fma=4, chunk=40,
                                             promote="float32")], ids=repr)
def test_float32_passes_on_adversarial_sums(acc):
    rng = np.random.default_rng(5)
    v = _e4m3_values()
    tiny = v[np.abs(v) < 2.0**-6]                             # E4M3 subnormals and zeros
    m, k, n = 40, 300, 36
    a = rng.choice(v, (m, k))
    b = rng.choice(v, (k, n))
    a[:5] = rng.choice(tiny, (5, k))                          # subnormal codes only
    a[5:10] = 448.0 * np.sign(rng.standard_normal((5, k)))    # the peak at every block
    b[:, :4] = 2.0**-9                                        # tiny products under big ones
    a[10:12] = -a[12:14]                                      # exact cancellations (-0 / +0)
    b[:, 4:6] = np.abs(b[:, 6:8]) * np.where(rng.random((k, 2)) < 0.5, 1, -1)
    # alignment edges: products exactly at, just above, just below a power of two
    a[14, :] = 1.0
    b[:, 8] = np.tile([2.0, 1.875, 2.25, -2.0, 0.001953125, -0.0], k // 6)[:k]
    a[15:20] = np.abs(a[15:20])                               # one-sign (drifting) sums
    b[:, 9:12] = np.abs(b[:, 9:12])
    _assert_same_bits(*_paths(a.astype(np.float32), b.astype(np.float32), acc, acc.chunk))


def test_recipe_training_the_same_without_float32_passes(monkeypatch):
    from floatlab.mixed import Trainer, teacher_gaussians

    data = teacher_gaussians(n=512)

    def run():
        t = Trainer("deepseek-fp8", hidden=(16, 16), batch_size=256, progress=False,
                    telemetry=False)
        t.fit(data, 3)
        return [p.data.copy() for p in t.model.parameters()]

    fast = run()
    monkeypatch.setattr(pg, "_FLOAT32_PASSES", False)
    wide = run()
    monkeypatch.setattr(pg, "_FAST", False)
    general = run()
    for f, w_, g in zip(fast, wide, general, strict=True):
        np.testing.assert_array_equal(f, w_)
        np.testing.assert_array_equal(f, g)


def test_float32_exact_conditions():
    inner = Accumulator("e8m13", "toward_zero", block_fma=32)
    assert float32_exact(inner, E4M3, E4M3, 128)
    assert float32_exact(inner, get_format("e5m2"), E4M3, 128)
    assert not float32_exact(inner, get_format("bf16"), E4M3, 128)   # 2**-133: below float32
    assert not float32_exact(inner, get_format("float32"), E4M3, 128)
    assert not float32_exact(Accumulator("e8m22", "toward_zero", block_fma=32), E4M3, E4M3, 128)
    assert not float32_exact(Accumulator("e8m13", "nearest_even", block_fma=32), E4M3, E4M3, 128)


def test_bad_promoted_operands():
    x = np.ones((2, 256), np.float32)
    a, _ = pg.tiled_operand(x, get_scheme("fp8_1x128"))
    b, _ = pg.tiled_operand(x, get_scheme("mxfp8"))
    with pytest.raises(ValueError, match="a tile must hold whole chunks"):
        promoted_matmul(a, b, ACC)
    with pytest.raises(ValueError, match="promote into float32"):
        promoted_matmul(a, a, Accumulator("e8m13", "toward_zero", block_fma=32))
    with pytest.raises(ValueError, match="inner dimensions"):
        promoted_matmul(a, pg.tiled_operand(x[:, :128], get_scheme("fp8_1x128"))[0], ACC)
    with pytest.raises(ValueError, match="codes=True"):
        Gemm(get_scheme("fp8_1x128"), get_scheme("fp8_1x128"),
             Accumulator("e8m13", "toward_zero", block_fma=32), codes=True)
    with pytest.raises(ValueError, match="codes=True"):
        Gemm(get_scheme("nvfp4"), get_scheme("nvfp4"), ACC, codes=True)   # a tensor scale
    with pytest.raises(ValueError, match="codes=True"):
        Gemm(get_scheme("nf4"), get_scheme("fp8_1x128"), ACC, codes=True)  # a codebook
    with pytest.raises(TypeError, match="codes must be True or False"):
        Gemm(codes=1)
    with pytest.raises(TypeError, match="two TiledOperands"):
        promoted_matmul(a, a.dequantize(), ACC)
    import dataclasses

    with pytest.raises(ValueError, match="cannot take codes=True"):
        dataclasses.replace(get_recipe("deepseek-fp8"), weights=get_scheme("fp8_128x128"))


# ------------------------------------------------------------------ the recipe

def test_deepseek_recipe_sums_codes_only_when_promoted_per_tile():
    assert all(g.codes for g in get_recipe("deepseek-fp8").gemms.values())
    assert not get_recipe("deepseek-fp8", promote_every=None).forward.codes
    assert not get_recipe("deepseek-fp8", promote_every=256).forward.codes
    assert not get_recipe("deepseek-fp8", accumulator_bits=None).forward.codes
    assert "E4M3 codes summed" in get_recipe("deepseek-fp8").note


def test_codes_reproduce_deepseeks_numbers_where_dequantised_products_overstate():
    """The lead's measurement (32 x 32 outputs of N(0, 1) matrices, E4M3 per tensor, K = 4096,
    a per-addition truncating e8m14 accumulator, normwise relative error against the exact
    product of the quantised operands): codes 1.3e-2 as quantization.md reports, dequantised
    products 5.0e-2; promoted every 128 on the codes 1.6e-4, as quantization.md reports."""
    rng = np.random.default_rng(0)
    k = 4096
    x = rng.standard_normal((32, k)).astype(np.float32)
    w = rng.standard_normal((32, k)).astype(np.float32)
    scheme = get_scheme("fp8_tensorwise")
    a, b = pg.tiled_operand(x, scheme)[0], pg.tiled_operand(w, scheme)[0]
    exact = a.dequantize().astype(np.float64) @ b.dequantize().astype(np.float64).T
    acc = Accumulator("e8m14", "toward_zero")
    codes = floatlab.matmul(a.elements.astype(np.float64), b.elements.T.astype(np.float64), acc)
    codes = codes * (float(a.scales[0, 0]) * float(b.scales[0, 0]))
    deq = floatlab.matmul(a.dequantize().astype(np.float64),
                          b.dequantize().T.astype(np.float64), acc)
    promoted = promoted_matmul(a, b, Accumulator("e8m14", "toward_zero", chunk=128,
                                                 promote="float32"))

    def rel(y):
        return float(np.linalg.norm(y - exact) / np.linalg.norm(exact))

    assert 1.1e-2 < rel(codes) < 1.5e-2 and 4.5e-2 < rel(deq) < 5.5e-2   # 1.28e-2, 5.0e-2
    assert 1.3e-4 < rel(promoted) < 2e-4                                  # 1.62e-4


def test_fast_promotion_fma_is_floatlab_fma():
    """pg._fma32 against floatlab.fma (and exact rationals) where a double rounding would bite:
    s * P exactly half an ulp of out (ties), just above / below, subnormal and overflowing
    results, zeros of both signs."""
    rng = np.random.default_rng(2)
    n = 4000
    out = (rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)).astype(np.float32)
    ulp = np.spacing(np.abs(out)).astype(np.float64)
    partial = floatlab.round(rng.integers(1, 2**14, n) * 2.0 ** rng.integers(-20, 8, n),
                             "e8m13", "toward_zero")
    nudge = rng.choice([1.0, 1 + 2.0**-23, 1 - 2.0**-24, 3.0, 0.5], n)
    scale = (ulp / 2 / partial * nudge).astype(np.float32)
    scale *= np.where(rng.random(n) < 0.5, -1, 1).astype(np.float32)
    # extremes: subnormal sums, overflow, zeros
    scale[:50], out[:50] = np.float32(2.0**-140), np.float32(2.0**-139)
    scale[50:100], out[50:100] = np.float32(2.0**110), np.float32(3.4e38)
    partial[100:120], out[120:140] = -0.0, -0.0
    with np.errstate(over="ignore"):
        fast = pg._fma32(scale, partial, out)
        slow = floatlab.fma(scale.astype(np.float64), partial, out.astype(np.float64),
                            fmt="float32").astype(np.float32)
    np.testing.assert_array_equal(fast, slow)
    assert np.array_equal(np.signbit(fast), np.signbit(slow))
    # the first promotion (out = +0): one cast of the exact product, -0 products become +0
    first = pg._fma32(scale, partial, None)
    with np.errstate(over="ignore"):
        expected = floatlab.fma(scale.astype(np.float64), partial, np.zeros(n), fmt="float32")
    np.testing.assert_array_equal(first, expected.astype(np.float32))
    assert np.array_equal(np.signbit(first), np.signbit(expected))
    assert not np.signbit(first[100:120]).any()
    for i in range(0, n, 97):
        if np.isfinite(fast[i]):
            exact = Fraction(float(scale[i])) * Fraction(float(partial[i])) + Fraction(
                float(out[i]))
            assert float(fast[i]) == float(round_fraction(exact, FP32, "nearest_even"))


def test_training_the_same_with_floatlab_fma_promotion(monkeypatch):
    from floatlab.mixed import Trainer, teacher_gaussians

    data = teacher_gaussians(n=512)

    def run():
        t = Trainer("deepseek-fp8", hidden=(16, 16), batch_size=256, progress=False)
        t.fit(data, 3)
        return [p.data.copy() for p in t.model.parameters()]

    fast = run()
    monkeypatch.setattr(pg, "_FAST_FMA", False)
    for f, s in zip(fast, run(), strict=True):
        np.testing.assert_array_equal(f, s)


def test_deepseek_training_the_same_with_telemetry_and_records_every_operand():
    """Telemetry reads the same quantised values (the quantiser's stats of the codes times
    their scales) and never changes results; every GEMM operand of every layer is recorded."""
    from floatlab.mixed import Trainer, teacher_gaussians

    data = teacher_gaussians(n=512)
    runs = {}
    for telemetry in (True, False):
        t = Trainer("deepseek-fp8", hidden=(16, 16), batch_size=256, progress=False,
                    telemetry=telemetry)
        h = t.fit(data, 3)
        runs[telemetry] = ([p.data.copy() for p in t.model.parameters()], h)
    for a, b in zip(runs[True][0], runs[False][0], strict=True):
        assert a.tobytes() == b.tobytes()
    operands = runs[True][1].info["operands"]
    assert {"linear1.forward.a", "linear1.forward.b", "linear1.dgrad.a", "linear1.dgrad.b",
            "linear1.wgrad.a", "linear1.wgrad.b"} <= set(operands)
