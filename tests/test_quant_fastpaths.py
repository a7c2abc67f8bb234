"""Fast paths of the quantisation core checked against the general code they replace."""

from __future__ import annotations

import numpy as np
import pytest

import floatlab
from floatlab.quant import scales as scales_mod
from floatlab.quant.delayed import quantize_scaled
from floatlab.quant.scales import block_scales
from floatlab.quant.scheme import get_scheme


def _float32_midpoints(rng, n):
    """float64 values at, just below and just above float32 rounding midpoints."""
    f = rng.standard_normal(n).astype(np.float32).astype(np.float64)
    mid = f * (1 + 2.0**-24)  # halfway to the next float32 (for |significand| in [1, 2))
    return np.abs(np.concatenate([mid, np.nextafter(mid, 0), np.nextafter(mid, np.inf), f]))


@pytest.mark.parametrize("name", ["fp8_rowwise", "fp8_1x128", "fp8_tensorwise", "int8_row"])
def test_float32_scales_cast_equals_floatlab_round(name, monkeypatch):
    rng = np.random.default_rng(0)
    scheme = get_scheme(name)
    element_max = float(scheme.element.max)
    amax = np.concatenate([
        _float32_midpoints(rng, 2000) * element_max,   # raw = amax / max lands on midpoints
        np.array([0.0, 1e-60, 2.0**-126 * element_max, 3e38 * element_max, 1e300]),
        np.abs(rng.standard_normal(500)) * 10.0 ** rng.integers(-40, 40, 500),
    ])[:, None]
    fast = block_scales(amax, scheme)
    monkeypatch.setattr(scales_mod, "_FAST_FLOAT32_SCALES", False)
    slow = block_scales(amax, scheme)
    for f, s in zip(fast, slow, strict=True):
        assert np.array_equal(f, s)
    x = rng.standard_normal((64, 300)).astype(np.float32)
    monkeypatch.setattr(scales_mod, "_FAST_FLOAT32_SCALES", True)
    fast_q = floatlab.fake_quantize(x, scheme)
    monkeypatch.setattr(scales_mod, "_FAST_FLOAT32_SCALES", False)
    assert np.array_equal(fast_q, floatlab.fake_quantize(x, scheme))


def test_saturation_count_skips_inf_and_nan_inputs():
    x = np.array([np.inf, 500.0, np.nan, -1.0, -np.inf, -470.0, 464.0])
    q = quantize_scaled(x, "e4m3fn", scale=1.0)
    assert q.n_saturated == 2          # 500 and -470; 464 ties down to 448; inf / NaN are not
    assert quantize_scaled(x[[0, 2, 3]], "e4m3fn", scale=1.0).n_saturated == 0
    # float64 elements: the threshold is inf; a finite input scaled to inf is counted
    assert quantize_scaled(np.array([1e308, np.inf]), "float64", scale=10.0).n_saturated == 1


@pytest.mark.parametrize("name", ["fp8_1x128", "fp8_128x128", "mxfp8", "nvfp4", "mxfp4",
                                  "nf4_dq", "dynamic8"])
def test_tiles_cut_to_short_axes_equal_padded_tiles(name, monkeypatch):
    """A tile longer than its axis is cut to it (no padding): same scales, codes, values and
    statistics as the padded tile."""
    import importlib

    blocks_mod = importlib.import_module("floatlab.quant.blocks")
    rng = np.random.default_rng(1)
    scheme = get_scheme(name)
    for shape in ((512, 16), (3, 50), (130, 7), (1, 5), (200, 129)):
        x = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        x[rng.random(shape) < 0.1] = 0.0
        results = []
        for clamp in (True, False):
            monkeypatch.setattr(blocks_mod, "_CLAMP_TILES", clamp)
            q = floatlab.quantize(x, scheme)
            results.append((floatlab.fake_quantize(x, scheme), q.dequantize(), q.codes,
                            q.scales, q.scale_codes, q.global_scale, q.nbytes, q.stats,
                            floatlab.dequantize(q.codes, q.scales, scheme, shape=q.shape,
                                                global_scale=q.global_scale)))
        for fast, slow in zip(*results, strict=True):
            if isinstance(fast, np.ndarray):
                assert fast.shape == slow.shape and np.array_equal(fast, slow), (shape, name)
            else:
                assert fast == slow, (shape, name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])  # float64: the column loop; float32
#                                                 rows of 32-128: the halves folded
@pytest.mark.parametrize("shape", [(300, 32), (1024, 16), (4096, 32), (100, 32), (600, 48),
                                   (16384, 16), (3000, 64), (256, 16), (2048, 16), (512, 64),
                                   (512, 128), (600, 96), (512, 32), (1024, 48), (5000, 64),
                                   (4096, 32), (2048, 64), (128, 2), (64, 4), (9, 8), (1, 16),
                                   (512, 256), (40000, 16)])
@pytest.mark.parametrize("fold", [True, False], ids=["fold", "no fold"])
def test_block_amax_paths_equal_the_row_reduction(monkeypatch, shape, dtype, fold):
    """Every path of blocks._amax (the pairwise fold of power-of-two rows up to 2 MiB, or,
    with the fold off, the halves, the transposed copy, the column loop, the reduction)
    against NumPy's row reduction; NaN and inf raise."""
    import importlib

    blocks_mod = importlib.import_module("floatlab.quant.blocks")
    if not fold:
        monkeypatch.setattr(blocks_mod, "_AMAX_FOLD_BYTES", 0)
    rng = np.random.default_rng(2)
    view = (rng.standard_normal(shape) * 10.0 ** rng.integers(-5, 5, (shape[0], 1)))
    view = view.astype(dtype)
    view[::7] = -0.0
    if dtype == np.float32:
        view[1::7, 0] = np.float32(1e-45)
    expected = np.abs(view).max(axis=1, keepdims=True)
    got = blocks_mod._amax(view)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert np.array_equal(got.view(np.uint8), expected.view(np.uint8))
    view[-1, -1] = np.inf
    with pytest.raises(ValueError, match="1 inf"):
        blocks_mod._amax(view)
    view[0, shape[1] // 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        blocks_mod._amax(view)


NVFP4_WEIGHTS = floatlab.Scheme("e2m1", (16, 16), "e4m3fn", "even", global_scale=True)


@pytest.mark.parametrize("name", ["mxfp8", "mxfp8_e5m2", "fp8_rowwise", "fp8_tensorwise",
                                  "fp8_1x128", "fp8_128x128", "nvfp4", "mxfp4", "mxfp6_e2m3",
                                  "int8_row", NVFP4_WEIGHTS])
def test_in_range_element_rounding_equals_the_general_path(name, monkeypatch):
    """The core's element rounding (the in-range kernel, without clipping below max + ulp/2
    when nothing is counted) equals floatlab.round of the clipped values: the general path,
    the counting path (stats=True clips every value beyond max) and quantize agree."""
    import floatlab.rounding as core

    rng = np.random.default_rng(3)
    scheme = get_scheme(name)
    x = rng.standard_normal((96, 256)) * 10.0 ** rng.integers(-6, 6, (96, 1))
    x[rng.random(x.shape) < 0.05] = 0.0
    x[:, :3] = rng.standard_normal((96, 3)) * 1e-30  # far below the block amax: subnormals
    x32 = x.astype(np.float32)
    for data in (x32, x, x32.T, x32[::2, ::3]):  # transposed and strided inputs too
        fast = floatlab.fake_quantize(data, scheme)
        counted, _ = floatlab.fake_quantize(data, scheme, stats=True)
        assert np.array_equal(fast, floatlab.quantize(data, scheme).dequantize())
        with monkeypatch.context() as m:
            m.setattr(core, "_FAST_PATHS", False)
            general = floatlab.fake_quantize(data, scheme)
        for other in (counted, general):
            assert fast.dtype == other.dtype
            assert np.array_equal(fast.view(np.uint8), other.view(np.uint8)), scheme
    for data in (x32, x):  # fake_quantize's stats reuse its result: the same as quantize's
        assert floatlab.fake_quantize(data, scheme, stats=True)[1] == \
            floatlab.quantize(data, scheme).stats


def test_fake_quantize_stats_with_the_hadamard_transform_equal_quantize_stats():
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((64, 128)) * 1e-3).astype(np.float32)
    scheme = get_scheme("nvfp4").replace(hadamard=16)
    out, stats = floatlab.fake_quantize(x, scheme, stats=True)
    q = floatlab.quantize(x, scheme)
    assert np.array_equal(out, q.dequantize()) and stats == q.stats


def test_rowwise_float32_scales_put_amax_above_max():
    """Why the clipping skip matters (and that the test above exercises it): the float32
    scale amax / 448 puts a row's amax / scale a hair above 448 for some rows."""
    amax = np.abs(np.random.default_rng(4).standard_normal((1000, 1))).astype(np.float32) + 0.1
    scale = block_scales(amax, get_scheme("fp8_rowwise"))[3].astype(np.float32)
    peaks = amax / scale
    assert 50 < np.count_nonzero(peaks > 448) and np.all(peaks < 464)


def test_per_tensor_scaling_of_float32_equals_its_float64_widening():
    """Current and delayed scaling take a float32 input's amax before widening it to float64
    (exact and increasing, so the same amax): scales, values, saturation counts and the amax
    history equal those of the widened input, and NaN still raises."""
    from floatlab.quant.scalers import CurrentScaling, DelayedScaling

    rng = np.random.default_rng(4)
    steps = [(rng.standard_normal((64, 48)) * 10.0 ** rng.integers(-6, 3)).astype(np.float32)
             for _ in range(6)]
    steps[3][5, 7] = steps[3].max() * 300  # a spike: the delayed scale saturates it
    for make in (lambda: CurrentScaling("e4m3fn"), lambda: DelayedScaling("e5m2", 3, 1)):
        narrow, wide = make(), make()
        saturated = 0
        for x in steps:
            a, b = narrow.quantize(x), wide.quantize(x.astype(np.float64))
            assert a.scale == b.scale and a.n_saturated == b.n_saturated
            saturated += a.n_saturated
            assert a.values.dtype == b.values.dtype == np.float64
            assert np.array_equal(a.values, b.values)
        if isinstance(narrow, DelayedScaling):
            assert narrow.history == wide.history and saturated > 0
        bad = steps[0].copy()
        bad[0, 0] = np.nan
        with pytest.raises(ValueError, match="1 NaN"):
            narrow.quantize(bad)


@pytest.mark.parametrize("name", ["nvfp4 SR", "nvfp4 SR RHT", "mxfp4 SR", "nf4", "int8 SR"])
@pytest.mark.parametrize("shape", [(512, 64), (64, 512), (20, 37), (3, 5, 48)])
def test_float32_input_amaxes_before_widening(name, shape, monkeypatch):
    """Schemes that work in float64 (stochastic rounding, elements float32 cannot hold) take
    a float32 input's block amaxes before widening it: same codes, scales, values, stats and
    random draws as with the amaxes of the widened array; NaN raises the same message."""
    import importlib

    from floatlab.mixed.recipe import get_recipe

    quantize_mod = importlib.import_module("floatlab.quant.quantize")
    nvfp4 = get_recipe("nvfp4")
    schemes = {"nvfp4 SR": nvfp4.dgrad.a, "nvfp4 SR RHT": nvfp4.wgrad.a,
               "mxfp4 SR": floatlab.get_scheme("mxfp4").replace(rounding="stochastic"),
               "nf4": floatlab.get_scheme("nf4"),
               "int8 SR": floatlab.Scheme("int8", 32, "float32", rounding="stochastic")}
    scheme = schemes[name]
    if scheme.hadamard and shape[-1] % scheme.hadamard:
        pytest.skip("the Hadamard transform needs whole blocks")
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-4, 3, shape)).astype(np.float32)
    x.reshape(-1)[::9] = 0.0
    bad = x.copy()
    bad.reshape(-1)[4] = np.nan
    seed = 11 if scheme.rounding == "stochastic" else None
    results = []
    for narrow in (True, False):
        with monkeypatch.context() as m:
            m.setattr(quantize_mod, "_NARROW_AMAX", narrow)
            q = floatlab.quantize(x, scheme, rng=seed)
            fake = floatlab.fake_quantize(x, scheme, rng=seed)
            with pytest.raises(ValueError, match="1 NaN") as info:
                floatlab.fake_quantize(bad, scheme, rng=seed)
        results.append((q.codes, q.scales, q.scale_codes, q.global_scale, q.stats, fake,
                        str(info.value)))
    for fast, slow in zip(*results, strict=True):
        if isinstance(fast, np.ndarray):
            assert fast.dtype == slow.dtype and np.array_equal(fast, slow)
        else:
            assert fast == slow


@pytest.mark.parametrize("name", ["mxfp8", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp4", "mxint8"])
def test_e8m0_floor_scales_from_exponent_fields_equal_pow2_exponents(name, monkeypatch):
    """MX scales from float32 amaxes' exponent fields equal the general path (frexp, clamp,
    ldexp) on zeros, float32 subnormals, the smallest normal, powers of two and their float32
    neighbours, float32's max and random amaxes over every binade; scales, codes and the
    quantised tensors alike."""
    import importlib

    scales_mod = importlib.import_module("floatlab.quant.scales")
    rng = np.random.default_rng(6)
    f32 = np.float32
    powers = np.ldexp(f32(1), np.arange(-149, 128)).astype(f32)
    amax = np.concatenate([
        [0.0, 1e-45, 3e-39, 2.0**-126, np.finfo(f32).max],
        powers, np.nextafter(powers, f32(0)), np.nextafter(powers, f32(np.inf)),
        np.abs(rng.standard_normal(2000)) * 10.0 ** rng.integers(-44, 38, 2000)])
    amax = np.abs(amax.astype(f32))[np.isfinite(amax.astype(f32))][:, None]
    scheme = get_scheme(name)
    for want_codes in (True, False):
        fast = block_scales(amax, scheme, want_codes=want_codes)
        monkeypatch.setattr(scales_mod, "_FAST_E8M0_FLOOR", False)
        slow = block_scales(amax, scheme, want_codes=want_codes)
        monkeypatch.setattr(scales_mod, "_FAST_E8M0_FLOOR", True)
        for f, s in zip(fast, slow, strict=True):
            if s is None:
                assert f is None
            else:
                assert f.dtype == s.dtype and f.shape == s.shape and f.tobytes() == s.tobytes()
    x = (rng.standard_normal((96, 64)) * 10.0 ** rng.integers(-30, 30, (96, 1))).astype(f32)
    x[3] = 0.0
    fast_q, fast_codes = floatlab.fake_quantize(x, scheme), floatlab.quantize(x, scheme)
    monkeypatch.setattr(scales_mod, "_FAST_E8M0_FLOOR", False)
    assert fast_q.tobytes() == floatlab.fake_quantize(x, scheme).tobytes()
    slow_codes = floatlab.quantize(x, scheme)
    assert fast_codes.codes.tobytes() == slow_codes.codes.tobytes()
    assert fast_codes.scale_codes.tobytes() == slow_codes.scale_codes.tobytes()


@pytest.mark.parametrize("count", [False, True])
@pytest.mark.parametrize("element", ["e4m3fn", "e2m1", "nf4"])
def test_small_arrays_clipped_whole_equal_the_flagged_blocks(element, count, monkeypatch):
    """_clip_blocks clips a small q whole (no block search): the same q afterwards, the same
    saturation count and the same rounded elements as clipping the flagged blocks only;
    peaks on both sides of max and of the overflow threshold, NaN peaks (a zero scale)."""
    import importlib

    elements = importlib.import_module("floatlab.quant.elements")
    from floatlab.quant.scheme import resolve_element

    fmt = resolve_element(element)
    top = float(fmt.max)
    rng = np.random.default_rng(8)
    for trial in range(60):
        q = rng.standard_normal((16, 32)) * top * rng.choice([0.3, 1.0, 1.2], (16, 1))
        q[rng.integers(0, 16), 0] = top * (1 + 2.0**-5)         # between max and threshold
        q = q.astype(np.float32 if trial % 2 else np.float64)
        peak = np.abs(q).max(axis=1, keepdims=True)
        if trial % 7 == 0:
            peak[3] = np.nan
        peak_max = float(peak.max())
        results = []
        for whole in (True, False):
            monkeypatch.setattr(elements, "_CLIP_WHOLE_MAX", 4096 if whole else 0)
            mine = q.copy()
            n = elements._clip_blocks(mine, peak, fmt, count, nearest_even=not count,
                                      peak_max=peak_max)
            rounded = elements._round_elements(mine.copy(), fmt, "nearest_even", None)[0] \
                if not isinstance(fmt, floatlab.quant.codebook.Codebook) else None
            results.append((n, rounded))
        assert results[0][0] == results[1][0]
        if results[0][1] is not None:
            assert results[0][1].tobytes() == results[1][1].tobytes()


def _pow2_row_cases(name, rng, width: int = 512) -> np.ndarray:
    """float32 rows whose power-of-two scale is 2**j (amax = fmax * 2**-j is in the row), so
    x * scale lands on every FP8 value, midpoint (tie) and midpoint +- 1 float32 ulp, the FP8
    subnormals and below; and rows at the edges: float32-subnormal inputs, amax under
    torchao's 1e-12 floor, huge amax (the fused path declines), +-0 and all-zero rows."""
    import ml_dtypes

    fmt = floatlab.get_format(name)
    dtype = {"e4m3fn": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}[name]
    grid = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float32)
    grid = np.unique(np.abs(grid[np.isfinite(grid)]))
    mids = (grid[:-1] + grid[1:]) / np.float32(2)                  # exact in float32
    v = np.concatenate([grid, mids, np.nextafter(mids, np.float32(0)),
                        np.nextafter(mids, np.float32(np.inf)), grid[1:4] / np.float32(3)])
    v = v[v <= np.float32(fmt.max)]
    rows = []
    lowest = fmt.emax + 23 - fmt.man_bits - 127   # the smallest k the fused path takes
    for j in (0, 5, -3, 17, 40, -60, lowest, 30, -30):
        signs = np.where(rng.random(v.size) < 0.5, -1, 1).astype(np.float32)
        row = np.resize(v * signs, width) * np.float32(2.0**-j)
        row[0] = np.float32(fmt.max * 2.0**-j)
        rows.append(row.astype(np.float32))
    tiny = np.float32(2.0**-149) * rng.integers(-2**20, 2**20, width).astype(np.float32)
    rows += [tiny,                                                 # float32 subnormals
             (rng.standard_normal(width) * 1e-14).astype(np.float32),  # amax < 1e-12
             (rng.standard_normal(width) * 1e37).astype(np.float32),   # huge amax
             np.resize(np.array([0.0, -0.0], np.float32), width),
             np.zeros(width, np.float32),
             (rng.standard_normal(width) * np.exp(rng.normal(0, 5, width))).astype(np.float32)]
    return np.stack(rows)


@pytest.mark.parametrize("name", ["e4m3fn", "e5m2"])
def test_fused_pow2_rowwise_equals_scale_round_dequantise(name, monkeypatch):
    """quant.axiswise._round_rows_pow2 (one rounding of x on the per-row scaled FP8 grid) is
    bit-equal to the general fp8(clamp(x * s)) * fl32(1 / s) on ties, +-1 ulp around them,
    FP8 subnormal results, float32-subnormal inputs, +-0, all-zero rows, amax under 1e-12
    and huge amax (where it declines), for C-ordered, transposed and 3-D inputs; and it runs
    on the ordinary rows (not only the general path)."""
    from floatlab.quant import axiswise

    fmt = floatlab.get_format(name)
    rng = np.random.default_rng(11)
    x = _pow2_row_cases(name, rng)
    fused_rows = []
    real = axiswise._round_rows_pow2

    def spy(arr, amax, scales, f):
        out = real(arr, amax, scales, f)
        fused_rows.append(out is not None)
        return out

    monkeypatch.setattr(axiswise, "_round_rows_pow2", spy)
    cases = [x, np.ascontiguousarray(x.T).T, x[:, :48].T, x.reshape(3, -1, 64), x[:-4],
             x[-3:], x[:1].astype(np.float64)]
    for case in cases:
        before = case.copy()
        monkeypatch.setattr(axiswise, "_FAST_ROWS", True)
        fast, n_fast = axiswise.fake_quantize_rowwise(case, fmt, power_of_two=True, count=True)
        monkeypatch.setattr(axiswise, "_FAST_ROWS", False)
        slow, n_slow = axiswise.fake_quantize_rowwise(case, fmt, power_of_two=True, count=True)
        assert fast.tobytes() == slow.tobytes() and n_fast == n_slow == 0
        assert fast.flags.c_contiguous and slow.flags.c_contiguous and fast.dtype == slow.dtype
        assert np.array_equal(case, before, equal_nan=True)
        for fast_rows in (True, False):  # float32 scales: the direct path against _round_scaled
            monkeypatch.setattr(axiswise, "_FAST_ROWS", fast_rows)
            got = axiswise.fake_quantize_rowwise(case, fmt, count=True)
            if fast_rows:
                direct = got
        assert direct[0].tobytes() == got[0].tobytes() and direct[1] == got[1]
        assert direct[0].flags.c_contiguous
    assert fused_rows == [False, False, False, False, True, True, True]  # huge amax declines
    assert np.signbit(fast).any()                                       # -0 kept


@pytest.mark.parametrize("name", ["e4m3fn", "e5m2"])
def test_rowwise_float32_scales_equal_torchaos_float64_division(name):
    """axiswise._row_scales divides in float32 and caps at fl32(fmax / 1e-12): the same
    scales as torchao's float64 quotient of the amax clamped at 1e-12, rounded to float32,
    on amax around 1e-12 (float32 neighbours), 0, float32 subnormals, huge and random."""
    from floatlab.quant.axiswise import TORCHAO_EPS, _row_scales

    fmt = floatlab.get_format(name)
    rng = np.random.default_rng(5)
    eps = np.float32(TORCHAO_EPS)
    around = [eps, np.nextafter(eps, np.float32(0)), np.nextafter(eps, np.float32(1)),
              np.nextafter(np.nextafter(eps, np.float32(0)), np.float32(0))]
    amax = np.concatenate([
        np.array(around + [0.0, 1e-45, 2.0**-126, 3.4e38, 1.0, fmt.max, 1e-12], np.float32),
        (np.abs(rng.standard_normal(20000)) * 10.0 ** rng.uniform(-44, 38, 20000)
         ).astype(np.float32)])[:, None]
    reference = (float(np.float32(fmt.max)) / np.maximum(amax.astype(np.float64), TORCHAO_EPS)
                 ).astype(np.float32)
    assert _row_scales(amax, fmt, False).tobytes() == reference.tobytes()
    pow2 = (reference.view(np.uint32) & np.uint32(0xFF800000)).view(np.float32)
    assert _row_scales(amax, fmt, True).tobytes() == pow2.tobytes()


def test_rowwise_amax_from_bit_patterns_equals_blocks_amax():
    """axiswise._row_amax (the maximum of |x|'s bit patterns, rows of 32 and more) equals
    floatlab.quant.blocks._amax on random, +-0, float32-subnormal and float32-max rows, and
    NaN / inf still raise the same error."""
    from floatlab.quant.axiswise import _row_amax
    from floatlab.quant.blocks import _amax

    rng = np.random.default_rng(6)
    for shape in [(512, 64), (64, 512), (4, 64), (16, 32), (512, 16), (3, 7)]:
        x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-45, 38, shape[:1] + (1,))
             ).astype(np.float32)
        x[0] = -0.0
        x[-1, 0] = -np.finfo(np.float32).max
        x[1 % shape[0], :2] = [np.float32(-2.0**-149), np.float32(0.0)]
        assert _row_amax(x).tobytes() == _amax(x).tobytes()
        for bad in (np.nan, -np.inf):
            y = x.copy()
            y[-1, -1] = bad
            with pytest.raises(ValueError) as ours:
                _row_amax(y)
            with pytest.raises(ValueError) as theirs:
                _amax(y)
            assert str(ours.value) == str(theirs.value)
