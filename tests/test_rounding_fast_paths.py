"""The carry-only fast path (float32 -> bfloat16 / tf32 / e8mX, nearest-even) is identical to
the general rounding path, bit for bit: every midpoint +-1 ulp of float32, every exponent,
every special, and a large random sample of patterns. (A full sweep of all 2**32 float32
patterns was run by hand for bfloat16; see the issue 8 report.)"""

from __future__ import annotations

import math
import warnings

import ml_dtypes
import numpy as np
import pytest

import floatlab
import floatlab.rounding as core

CARRY_FORMATS = ["bf16", "tf32", floatlab.Format(8, 3, bias=127)]


def _general(x, fmt, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(core, "_FAST_PATHS", False)
        return floatlab.round(x, fmt, dtype=np.float32)


def _patterns(fmt) -> np.ndarray:
    """Every midpoint of ``fmt`` (all sign/exponent/kept-mantissa combinations) and the float32
    values one ulp either side, the specials, and 2**21 random patterns."""
    fmt = floatlab.get_format(fmt)
    shift = 23 - fmt.man_bits
    kept = np.arange(1 << (32 - shift), dtype=np.uint64).astype(np.uint32) << np.uint32(shift)
    half = np.uint32(1 << (shift - 1))
    around = [kept | half, (kept | half) - np.uint32(1), (kept | half) + np.uint32(1), kept]
    specials = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7F7FFFFF, 0xFF7FFFFF,
                         0x7F800001, 0x7FC00000, 0x7FFFFFFF, 0xFFFFFFFF, 0xFF800001, 1,
                         0x80000001, 0x007FFFFF, 0x00800000], dtype=np.uint32)
    rng = np.random.default_rng(8)
    random = rng.integers(0, 2**32, 1 << 21, dtype=np.uint64).astype(np.uint32)
    return np.concatenate(around + [specials, random]).view(np.float32)


@pytest.mark.parametrize("fmt", CARRY_FORMATS, ids=lambda f: getattr(f, "name", f))
def test_carry_only_path_equals_general_path(fmt, monkeypatch):
    assert core._carry_is_the_whole_rounding(floatlab.get_format(fmt))
    x = _patterns(fmt)
    fast = floatlab.round(x, fmt, dtype=np.float32)
    general = _general(x, fmt, monkeypatch)
    assert np.array_equal(fast.view(np.uint32), general.view(np.uint32))


def test_nan_chunks_fall_back_and_nan_free_chunks_stay_fast(monkeypatch):
    """A NaN anywhere (here in the second fast chunk) must not carry into the sign or become
    inf, and the other chunks are unaffected."""
    x = np.full(3 * core._FAST_CHUNK, 1.0 + 2.0**-9, dtype=np.float32)
    x[core._FAST_CHUNK + 5] = np.uint32(0x7FFFFFFF).view(np.float32)  # carries into the sign
    x[core._FAST_CHUNK + 6] = np.uint32(0x7F800001).view(np.float32)  # would become inf
    out = floatlab.round(x, "bf16", dtype=np.float32)
    assert np.isnan(out[core._FAST_CHUNK + 5]) and np.isnan(out[core._FAST_CHUNK + 6])
    assert np.isnan(out).sum() == 2
    assert np.array_equal(out.view(np.uint32), _general(x, "bf16", monkeypatch).view(np.uint32))


def test_carry_only_path_matches_ml_dtypes_on_non_nan():
    x = _patterns("bf16")
    x = x[~np.isnan(x)]
    ours = floatlab.round(x, "bf16", dtype=np.float32)
    assert np.array_equal(ours.view(np.uint32),
                          x.astype(ml_dtypes.bfloat16).astype(np.float32).view(np.uint32))


def test_fast_path_is_only_taken_where_proved():
    for name in ("fp16", "e4m3fn", "e5m2", "e8m0", "fp32"):
        fmt = floatlab.get_format(name)
        assert core._carry_is_the_whole_rounding(fmt) == (name == "fp32"), name
    assert not core._carry_is_the_whole_rounding(floatlab.Format(8, 7, bias=127, special="fn"))
    assert not core._carry_is_the_whole_rounding(floatlab.Format(8, 7, bias=126))


# ------------------------------------------------------------------ below 2**emin, and overflow
# The uniform-grid kernel (inputs below the smallest normal) and the overflow replacement are
# proved equal to the general path in floatlab/_rounding_fast.py; these tests check the proof
# on every subnormal-range value and midpoint of every format, each +-1 ulp, the FTZ grid, the
# overflow boundary and the specials, in every mode, both working precisions, and at the three
# densities of tiny inputs that choose between the kernel's forms (whole chunk or gathered;
# shared or fresh random draws).

P3109_FORMATS = [floatlab.P3109[name] for name in sorted(floatlab.P3109)]
CUSTOM_FORMATS = [
    floatlab.Format(3, 4),
    floatlab.Format(5, 2, special="fn"),
    floatlab.Format(4, 3, subnormals=False),
    floatlab.Format(3, 2, special="fnuz", bias=4),
    floatlab.Format(2, 2, special="none"),
    floatlab.Format(5, 4, bias=3),
    floatlab.Format(6, 5),
    floatlab.Format(5, 3, has_zero=False, subnormals=False, special="fn"),
    floatlab.Format(5, 3, bias=16, signed=False, special="fn"),
    floatlab.Format(4, 3, bias=-5),  # emin 6 > M: no uniform-grid kernel (general path)
    floatlab.Format(2, 6, bias=-1),  # emin 2, M 6
    floatlab.Format(8, 12),  # float32 working precision, 2**12 subnormals
    floatlab.Format(10, 20, special="fn"),  # emin -510: float64 working precision
    floatlab.Format(8, 20, bias=125),  # emin -124: 2**k needs k = 144 > 127 in float32
]
ALL_FORMATS = list(floatlab.PRESETS.values()) + P3109_FORMATS + CUSTOM_FORMATS


def _fmt_id(fmt) -> str:
    return fmt.name


def _edge_inputs(fmt) -> np.ndarray:
    """Non-negative float64 inputs: every multiple of q/4 up to 2**emin (q the subnormal
    quantum: the values, the midpoints, and the FTZ grid's midpoints in the binade below
    2**emin) -- a sample of 3000 when there are more -- each +-1 float64 and float32 ulp;
    around the smallest normal and max; random magnitudes over the range; the specials."""
    rng = np.random.default_rng(fmt.bits * 64 + fmt.man_bits)
    M, emin = fmt.man_bits, fmt.emin
    quarter = math.ldexp(1.0, emin - M - 2)
    count = 4 << M
    n = np.arange(count + 1, dtype=np.float64) if count <= 3000 else np.unique(
        np.r_[rng.integers(0, count + 1, 3000), :16, count - 16:count + 1].astype(np.float64))
    grid = n * quarter
    grid32 = grid.astype(np.float32)
    with np.errstate(over="ignore"):
        near = [grid, np.nextafter(grid, np.inf), np.nextafter(grid, 0),
                np.nextafter(grid32, np.float32(np.inf)).astype(np.float64),
                np.nextafter(grid32, np.float32(0)).astype(np.float64)]
        top = fmt.max
        limits = np.array([top, top * (1 + 2.0**-M / 2), top * (1 + 2.0**-M), 2 * top,
                           fmt.normal_threshold, 1e300, 2.0**-1074, 2.0**-149, 2.0**-126,
                           2.0**-1022, 1.0])
        limits = np.r_[limits, np.nextafter(limits, np.inf), np.nextafter(limits, 0)]
        spread = np.ldexp(1 + rng.random(2000), rng.integers(emin - M - 6, fmt.emax + 3, 2000))
    x = np.concatenate(near + [limits, spread])
    return np.unique(np.abs(x[np.isfinite(x)]))


def _with_signs_and_specials(fmt, x: np.ndarray, saturate: bool) -> np.ndarray:
    x = np.concatenate([x, -x, [0.0, -0.0, np.inf, -np.inf, np.nan]])
    if not fmt.has_nan:
        x = x[~np.isnan(x)]
        if not saturate:
            x = x[~np.isinf(x)]
    return x


def _diluted(x: np.ndarray, fraction: float, fmt, seed: int) -> np.ndarray:
    """x mixed into values at or above the smallest normal, so that about ``fraction`` of the
    elements are x's (the share of tiny inputs chooses the kernel's form)."""
    rng = np.random.default_rng(seed)
    n_fill = int(x.size * (1 - fraction) / fraction)
    fill = np.ldexp(1 + rng.random(n_fill), rng.integers(fmt.emin, max(fmt.emin, fmt.emax) + 1,
                                                         n_fill))
    fill = np.minimum(fill, fmt.max) * rng.choice([-1.0, 1.0], n_fill)
    mixed = np.concatenate([x, fill])
    return mixed[rng.permutation(mixed.size)]


def _both_paths(x, fmt, monkeypatch, **options):
    """(fast, general) results as uint64 bit patterns (NaN signs and -0 included)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # unsigned / zero-less formats
        fast = floatlab.round(x, fmt, **options)
        with monkeypatch.context() as m:
            m.setattr(core, "_FAST_PATHS", False)
            general = floatlab.round(x, fmt, **options)
    return fast.view(np.uint64), general.view(np.uint64)


def _check_all_modes(fmt, x, monkeypatch, what, seed=5):
    for saturate in (False, True):
        for subnormals in (True, False):
            xs = _with_signs_and_specials(fmt, x, saturate)
            for dtype in (np.float64, np.float32):
                if dtype is np.float32 and not core._fits_float32(fmt):
                    continue
                with np.errstate(over="ignore"):
                    inputs = xs.astype(dtype)  # 1e300 -> inf in float32
                if not fmt.has_nan and not saturate:
                    inputs = inputs[~np.isinf(inputs)]  # refused: test_rounding checks that
                for mode in floatlab.ROUNDING_MODES:
                    options = dict(rounding=mode, saturate=saturate, subnormals=subnormals)
                    if mode == "stochastic":
                        options["rng"] = seed
                    try:
                        fast, general = _both_paths(inputs, fmt, monkeypatch, **options)
                    except ValueError as error:  # FTZ refused for emin = -1022 formats
                        assert "subnormals=False is not supported" in str(error)
                        break
                    bad = np.flatnonzero(fast != general)
                    assert bad.size == 0, (
                        f"{fmt.name} {what} {mode} saturate={saturate} subnormals={subnormals} "
                        f"{np.dtype(dtype).name}: {bad.size} differ, e.g. x={inputs[bad[:4]]!r}")


@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=_fmt_id)
def test_subnormal_and_overflow_fast_paths_equal_general_path(fmt, monkeypatch):
    """Every mode, saturate and FTZ, float32 and float64 inputs, on the edge inputs alone
    (mostly tiny: the whole-chunk kernel, stochastic draws shared with the pattern path)."""
    _check_all_modes(fmt, _edge_inputs(fmt), monkeypatch, "edges")


@pytest.mark.parametrize("fraction", [0.2, 0.05], ids=["20%", "5%"])
@pytest.mark.parametrize(
    "fmt", [floatlab.get_format(n) for n in ("fp16", "e4m3fn", "e5m2", "e2m1", "e3m2",
                                             "e4m3fnuz", "p3109_k8p3se", "p3109_k8p8uf")]
    + [CUSTOM_FORMATS[2], CUSTOM_FORMATS[7], CUSTOM_FORMATS[11]], ids=_fmt_id)
def test_fast_paths_with_fewer_tiny_inputs_equal_general_path(fmt, fraction, monkeypatch):
    """20% tiny: whole-chunk kernel, but stochastic draws its own numbers (gathered); 5%: the
    gathered kernel in every mode."""
    x = _diluted(_edge_inputs(fmt), fraction, fmt, seed=int(fraction * 100))
    _check_all_modes(fmt, x, monkeypatch, f"{fraction:.0%} tiny")


@pytest.mark.parametrize("name", ["fp16", "e4m3fn", "e5m2", "e2m1"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fast_paths_on_large_spread_samples_equal_general_path(name, dtype, monkeypatch):
    """2**19 values log-uniform over 2**-30 .. 2**30 (several chunks of each size; a quarter
    to a half of them below the smallest normal, many above max), every mode, random_bits."""
    rng = np.random.default_rng(19)
    n = 1 << 19
    x = (rng.choice([-1.0, 1.0], n) * np.ldexp(1 + rng.random(n), rng.integers(-30, 31, n)))
    x = x.astype(dtype)
    for mode in floatlab.ROUNDING_MODES:
        for saturate in (False, True):
            options = dict(rounding=mode, saturate=saturate)
            if mode == "stochastic":
                options["rng"] = 3
            fast, general = _both_paths(x, name, monkeypatch, **options)
            assert np.array_equal(fast, general), (name, mode, saturate)
    for bits in (1, 4, 23):
        fast, general = _both_paths(x, name, monkeypatch, rounding="stochastic", rng=9,
                                    random_bits=bits)
        assert np.array_equal(fast, general), (name, bits)


@pytest.mark.parametrize("name", ["fp16", "e4m3fn", "e2m1", "e3m2"])
def test_stochastic_random_bits_on_subnormal_edges_equal_general_path(name, monkeypatch):
    fmt = floatlab.get_format(name)
    x = _with_signs_and_specials(fmt, _edge_inputs(fmt), saturate=True)
    for fraction in (1.0, 0.2, 0.05):
        mixed = x if fraction == 1.0 else _diluted(x, fraction, fmt, seed=1)
        for bits in (1, 3, 8):
            for dtype in (np.float32, np.float64):
                with np.errstate(over="ignore"):
                    inputs = mixed.astype(dtype)
                fast, general = _both_paths(inputs, fmt, monkeypatch,
                                            rounding="stochastic", rng=4, random_bits=bits,
                                            saturate=True)
                assert np.array_equal(fast, general), (name, fraction, bits, dtype)


def test_stochastic_draws_are_consumed_as_before(monkeypatch):
    """A generator passed on is left where the general path leaves it (same draw count)."""
    x = np.ldexp(1.0 + np.arange(3000) / 3000, np.arange(3000) % 40 - 30).astype(np.float32)
    for fraction in (1.0, 0.2, 0.05):
        mixed = x if fraction == 1.0 else _diluted(x, fraction, floatlab.get_format("fp16"), 2)
        states = []
        for fast in (True, False):
            gen = np.random.default_rng(8)
            with monkeypatch.context() as m:
                m.setattr(core, "_FAST_PATHS", fast)
                floatlab.round(mixed, "fp16", "stochastic", rng=gen)
            states.append(gen.random())
        assert states[0] == states[1], fraction


def test_uniform_grid_kernel_is_taken_where_proved():
    f32, f64 = core._F32, core._F64
    assert core._uniform_grid_k(floatlab.get_format("fp16"), f32, False) == 24
    assert core._uniform_grid_k(floatlab.get_format("fp16"), f32, True) == 25
    assert core._uniform_grid_k(floatlab.get_format("e4m3fn"), f32, False) == 9
    assert core._uniform_grid_k(floatlab.get_format("e2m1"), f32, False) == 1
    assert core._uniform_grid_k(floatlab.get_format("e2m1"), f64, True) == 2
    assert core._uniform_grid_k(floatlab.get_format("e8m0"), f32, True) is None  # p = 1
    assert core._uniform_grid_k(floatlab.get_format("fp64"), f64, True) is None  # 2**1075
    assert core._uniform_grid_k(CUSTOM_FORMATS[9], f64, False) is None  # k < 0
    assert core._uniform_grid_k(CUSTOM_FORMATS[13], f32, False) is None  # 2**144 in float32
    assert core._uniform_grid_k(CUSTOM_FORMATS[13], f64, False) == 144


@pytest.mark.parametrize("name", ["fp16", "e4m3fn", "e2m1", "e3m2", "p3109_k8p3se"])
def test_subnormal_edges_match_the_exact_reference(name):
    """The fast path against the Fraction oracle (tests/oracles.py) on the edge inputs, every
    deterministic mode, with and without subnormals."""
    from oracles import MODES, assert_same, float32_exact, reference_round

    fmt = floatlab.get_format(name)
    x = _edge_inputs(fmt)
    x = np.concatenate([x, -x])
    for subnormals in (True, False):
        expected = reference_round(x, fmt, MODES, subnormals=subnormals)
        for mode in MODES:
            for dtype in (np.float64, np.float32):
                keep = float32_exact(x) if dtype is np.float32 else np.isfinite(x)
                got = floatlab.round(x[keep].astype(dtype), fmt, rounding=mode,
                                     subnormals=subnormals)
                assert_same(got, expected[mode][keep], x[keep],
                            f"{name} {mode} subnormals={subnormals} {np.dtype(dtype).name}")


@pytest.mark.parametrize("fmt", [f for f in ALL_FORMATS if f.bits <= 16], ids=_fmt_id)
def test_encode_of_every_value_gives_its_code(fmt):
    """The codec's branch-free code map (subnormals lifted by 2**emin, inf / NaN codes
    selected without masked writes): every code's value, as float64 and float32, shuffled among
    -NaN / +NaN, encodes back to that code (NaN to the canonical NaN code; formats without
    subnormals to a code of the same value, the value map being many-to-one there)."""
    codes = np.arange(1 << fmt.bits, dtype=np.uint64).astype(fmt.code_dtype)
    values = floatlab.decode(codes, fmt)
    keep = ~np.isnan(values)
    values, codes = values[keep], codes[keep]
    if fmt.has_nan:
        values = np.concatenate([values, [np.nan, -np.nan]])
        codes = np.concatenate([codes, np.full(2, fmt.nan_code, dtype=fmt.code_dtype)])
    order = np.random.default_rng(fmt.bits).permutation(values.size)
    values, codes = values[order], codes[order]
    # Diluted among many copies of max, the few subnormal values take the gathered form.
    many = 64 * values.size
    _check_codes(fmt, values, codes)
    _check_codes(fmt, np.r_[values, np.full(many, fmt.max)],
                 np.r_[codes, np.full(many, fmt.max_code, dtype=fmt.code_dtype)])


def _check_codes(fmt, values, codes):
    for dtype in (np.float64, np.float32):
        if dtype is np.float32 and not core._fits_float32(fmt):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # NaN into unsigned formats
            got = floatlab.encode(values.astype(dtype), fmt)
        if fmt.subnormals:
            same = got == codes
        else:
            back = floatlab.decode(got, fmt)
            same = (back.view(np.uint64) == values.view(np.uint64)) | (
                np.isnan(values) & (got == codes))
        bad = np.flatnonzero(~same)
        assert bad.size == 0, (fmt.name, np.dtype(dtype).name, values[bad[:4]], got[bad[:4]])


# ------------------------------------------------------------------ finite inputs within +-max
# round_finite_in_range (the quantisation core's element rounding: its inputs are clipped to
# +-max and finite) takes a seven-pass kernel on float32, proved in floatlab/_rounding_fast.py.

IN_RANGE_FORMATS = [f for f in ALL_FORMATS if f.bits <= 16
                    and floatlab._rounding_fast.in_range_kernel_applies(f)]


def _in_range_inputs(fmt) -> np.ndarray:
    """float32 inputs below the overflow threshold (max + ulp(max) / 2): for M <= 7 every
    pattern of sign, exponent and kept mantissa with the discarded bits 0, 1, half - 1, half,
    half + 1 and all ones; the edge inputs (subnormal grid, midpoints, +-1 ulp); 2**18 random
    patterns; +-0."""
    shift = 23 - fmt.man_bits
    parts = []
    if fmt.man_bits <= 7:
        kept = np.arange(1 << (32 - shift), dtype=np.uint64).astype(np.uint32) << np.uint32(shift)
        half = 1 << (shift - 1)
        parts += [kept | np.uint32(low) for low in (0, 1, half - 1, half, half + 1,
                                                     (1 << shift) - 1)]
    with np.errstate(over="ignore"):  # edges beyond float32 become inf, dropped below
        edges = _edge_inputs(fmt).astype(np.float32)
    parts += [edges.view(np.uint32), (-edges).view(np.uint32)]
    rng = np.random.default_rng(fmt.man_bits)
    parts.append(rng.integers(0, 2**32, 1 << 18, dtype=np.uint64).astype(np.uint32))
    x = np.concatenate(parts + [np.array([0, 0x80000000], np.uint32)]).view(np.float32)
    return x[np.isfinite(x) & (np.abs(x) < core.overflow_threshold(fmt))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt", IN_RANGE_FORMATS, ids=_fmt_id)
def test_in_range_kernel_equals_general_path(fmt, dtype, monkeypatch):
    x = _in_range_inputs(fmt)
    if dtype is np.float64:  # float64 inputs between the float32 ones, and float64 subnormals
        x64 = x.astype(np.float64)
        mid = x64 * (1 + 2.0**-30)
        x = np.concatenate([x64, mid[np.abs(mid) < core.overflow_threshold(fmt)],
                            [5e-324, -2.5e-310, 2.0**-1022]])
    keep = x.copy()
    fast = core.round_finite_in_range(x, fmt)
    in_place = x.copy()
    assert core.round_finite_in_range(in_place, fmt, in_place=True) is in_place
    with monkeypatch.context() as m:
        m.setattr(core, "_FAST_PATHS", False)
        general = floatlab.round(x, fmt, saturate=True, dtype=dtype)
        fallback = core.round_finite_in_range(x, fmt)
    uint = np.uint32 if dtype is np.float32 else np.uint64
    assert fast.dtype == dtype
    for other in (general, fallback, in_place):
        assert np.array_equal(fast.view(uint), other.view(uint)), fmt.name
    assert np.array_equal(x.view(uint), keep.view(uint))  # input untouched
    # operands of at most _IN_RANGE_SMALL values take the kernel's small path: same values
    # (in place too), on the tail (float64 subnormals, +-0) and random picks of the inputs
    small_size = floatlab._rounding_fast._IN_RANGE_SMALL
    picks = np.random.default_rng(3).choice(x.size, small_size)
    for index in (picks, np.arange(x.size - 3001, x.size), np.arange(7, 8)):
        small = x[index]
        assert np.array_equal(core.round_finite_in_range(small, fmt).view(uint),
                              fast[index].view(uint)), fmt.name
        assert core.round_finite_in_range(small, fmt, in_place=True) is small
        assert np.array_equal(small.view(uint), fast[index].view(uint)), fmt.name
    # positive_normal=True (clamped block scales): the inputs at least 2**emin, in small
    # pieces (its path) and whole (the general passes), copies and in place
    normal = np.flatnonzero(x >= 2.0**fmt.emin)
    for index in (normal[:small_size], normal[-small_size:], normal[:1], normal):
        pos = x[index]
        got = core.round_finite_in_range(pos, fmt, positive_normal=True)
        assert np.array_equal(got.view(uint), fast[index].view(uint)), fmt.name
        assert core.round_finite_in_range(pos, fmt, in_place=True, positive_normal=True) is pos
        assert np.array_equal(pos.view(uint), fast[index].view(uint)), fmt.name


def test_in_range_kernel_covers_the_element_formats():
    names = {f.name for f in IN_RANGE_FORMATS}
    for element in ("float8_e4m3fn", "float8_e5m2", "float6_e2m3fn", "float6_e3m2fn",
                    "float4_e2m1fn", "float16"):
        assert element in names
    kernel = floatlab._rounding_fast.in_range_kernel_applies
    assert not kernel(floatlab.get_format("bf16"))       # emax + 23 - M = 143 > 127
    assert not kernel(floatlab.get_format("e4m3fnuz"))   # no -0
    assert not kernel(floatlab.get_format("e8m0"))       # M = 0
    assert not kernel(floatlab.Format(4, 3, subnormals=False))


SR_FORMATS = [f for f in IN_RANGE_FORMATS if floatlab._rounding_fast.stochastic_kernel_applies(f)]


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.2, 0.5, 0.9])
@pytest.mark.parametrize("fmt", SR_FORMATS, ids=_fmt_id)
def test_in_range_stochastic_kernel_equals_general_path(fmt, fraction, monkeypatch):
    """Same values and the same random stream as round(): inputs within +-max (edges,
    midpoints, +-1 ulp, every shape of tiny-input density that changes how the general path
    draws, zeros), in float64, over several chunks."""
    rng = np.random.default_rng(int(fraction * 10) + fmt.bits)
    edges = _edge_inputs(fmt)
    edges = edges[edges <= fmt.max]
    tiny = edges[(edges > 0) & (edges < fmt.normal_threshold)]
    big = edges[edges >= fmt.normal_threshold]
    n = 3000
    n_tiny = int(n * fraction)
    x = np.concatenate([rng.choice(tiny, n_tiny), rng.choice(big, n - n_tiny),
                        np.zeros(40)]) * rng.choice([-1.0, 1.0], n + 40)
    x = x[rng.permutation(x.size)]
    for chunk, piece in ((x.size, 1 << 15), (700, 1 << 15), (x.size, 256), (700, 300)):
        with monkeypatch.context() as m:
            m.setattr(core, "_CHUNK", chunk)
            # the kernel's arithmetic runs on pieces of a chunk, after all its draws
            m.setattr(floatlab._rounding_fast, "_STOCHASTIC_SUB", piece)
            fast_rng, general_rng = np.random.default_rng(5), np.random.default_rng(5)
            fast = core.round_finite_in_range(x, fmt, rounding="stochastic", rng=fast_rng)
            in_place = x.copy()
            core.round_finite_in_range(in_place, fmt, rounding="stochastic", in_place=True,
                                       rng=np.random.default_rng(5))
            m.setattr(core, "_FAST_PATHS", False)
            general = floatlab.round(x, fmt, rounding="stochastic", saturate=True,
                                     rng=general_rng)
        assert np.array_equal(fast.view(np.uint64), general.view(np.uint64)), fmt.name
        assert np.array_equal(in_place.view(np.uint64), general.view(np.uint64)), fmt.name
        assert fast_rng.random() == general_rng.random()  # the same number of draws


class _HalfDraws(np.random.Generator):
    """Every uniform draw is 0.5: a midpoint (f = 0.5) then rounds down (u < f is false)."""

    def random(self, size=None, dtype=np.float64, out=None):
        if out is not None:
            out[...] = 0.5
            return out
        return np.full(size, 0.5)


@pytest.mark.parametrize("fmt", SR_FORMATS[:4], ids=_fmt_id)
def test_in_range_stochastic_kernel_rounds_up_only_below_the_draw(fmt, monkeypatch):
    """u < f, strictly, as the general path: with every draw 0.5, midpoints round down and
    values just above them round up."""
    x = _edge_inputs(fmt)
    x = np.concatenate([x, -x])
    x = x[np.abs(x) <= fmt.max]
    fast = core.round_finite_in_range(x, fmt, rounding="stochastic",
                                      rng=_HalfDraws(np.random.PCG64(0)))
    with monkeypatch.context() as m:
        m.setattr(core, "_FAST_PATHS", False)
        general = floatlab.round(x, fmt, rounding="stochastic", saturate=True,
                                 rng=_HalfDraws(np.random.PCG64(0)))
    assert np.array_equal(fast.view(np.uint64), general.view(np.uint64))
    assert not np.array_equal(general, floatlab.round(x, fmt, rounding="toward_zero"))


@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=_fmt_id)
def test_few_inputs_above_max_rounded_alone_equal_general_path(fmt, monkeypatch):
    """A few inputs above max (overflow, inf, NaN) among many in range: core._round_bits
    re-rounds just those (deterministic modes, chunks of at least _FEW_BIG_MIN_SIZE values,
    at most 1/64 of them above max). Every mode, saturate and FTZ, both input dtypes."""
    edges = _edge_inputs(fmt)
    big = edges[edges > fmt.max]
    if big.size == 0:
        pytest.skip("no finite input above this format's max")
    big = np.resize(big, 60)  # 60 of them (repeated where a format has fewer edges above max)
    x = _diluted(big, 1 / 300, fmt, seed=3)
    assert x.size >= core._FEW_BIG_MIN_SIZE
    _check_all_modes(fmt, x, monkeypatch, "few above max")
    # the path is taken: the count of inputs above max decides, not the values
    calls = []
    real = core._round_bits
    monkeypatch.setattr(core, "_round_bits", lambda w, *a: (calls.append(w.size), real(w, *a)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        floatlab.round(x, fmt)
    plain = fmt.subnormals and fmt.has_zero and fmt.has_negative_zero  # no FTZ pass to run
    assert (big.size in calls) == plain, (calls, big.size)
