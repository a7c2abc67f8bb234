"""The fused NVFP4 path (floatlab.quant.nvfp4_fast) against the general core, bit for bit."""

import numpy as np
import pytest

import floatlab
from floatlab.mixed import Trainer, recipe_gemm, teacher_gaussians
from floatlab.mixed.recipe import get_recipe
from floatlab.quant import nvfp4_fast
from floatlab.quant.nvfp4_fast import fake_quantize_nvfp4, nvfp4_fast_applies
from floatlab.rounding import _CHUNK

_R = get_recipe("nvfp4")
SCHEMES = {
    "1x16": _R.forward.a,
    "16x16": _R.forward.b,
    "SR": _R.dgrad.a,                                            # 8 random bits
    "SR RHT": _R.wgrad.a,
    "SR exact": floatlab.get_scheme("nvfp4").replace(rounding="stochastic"),
    "SR exact RHT": floatlab.get_scheme("nvfp4").replace(rounding="stochastic", hadamard=16),
    "RHT": _R.wgrad.b,
    "preset": floatlab.get_scheme("nvfp4"),
}
E2M1_POINTS = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6.0])
E2M1_MIDPOINTS = (E2M1_POINTS[:-1] + E2M1_POINTS[1:]) / 2


def _general(x, scheme, seed, rotated, float32):
    """The general core's values as the recipe's float32 GEMM (or float64 caller) reads them."""
    rng = np.random.default_rng(seed) if scheme.rounding == "stochastic" else None
    out = floatlab.fake_quantize(x, scheme, rng, rotated=rotated)
    if float32:
        out = out.astype(np.float32)
    return out, rng


def _check(x, scheme, *, rotated=True, float32=True, seed=7):
    rng = np.random.default_rng(seed) if scheme.rounding == "stochastic" else None
    fused = fake_quantize_nvfp4(x, scheme, rng, rotated=rotated, float32=float32)
    assert fused is not None, "the fused path did not apply"
    general, general_rng = _general(x, scheme, seed, rotated, float32)
    assert fused.dtype == general.dtype and fused.shape == general.shape
    assert np.array_equal(fused.view(np.uint8), general.view(np.uint8))
    if rng is not None:  # the same draws: the generators end in the same state
        assert rng.bit_generator.state == general_rng.bit_generator.state


def _adversarial(rng, rows: int = 64, cols: int = 64) -> np.ndarray:
    """float32 blocks that test every step: ties at every E2M1 midpoint (and one float32 ulp
    either side) under exact power-of-two effective scales, all-zero blocks, -0, blocks whose
    E4M3 scale is the largest (448) or clamped at the smallest normal, float32 subnormals."""
    # tensor amax 2.625 makes g = 2.625 / 2688 = 2**-10 exactly; a block with amax 6 * 2**-10 *
    # s (s an E4M3 value) has scale s, effective scale s * 2**-10, and m * eff is exact.
    x = np.zeros((rows, cols), np.float32)
    x[0, 0] = 2.625
    e4m3 = np.array([448.0, 1.0, 0.875, 2.0**-6, 2.0**-9 * 3, 26.0, 104.0], np.float32)
    r = 1
    for s in e4m3:
        eff = np.float32(s) * np.float32(2.0**-10)
        for mids in (E2M1_MIDPOINTS, E2M1_POINTS[1:]):
            for nudge in (0, 1, -1):
                if r >= rows:
                    break
                vals = (mids * eff).astype(np.float32)
                if nudge:
                    vals = np.nextafter(vals, np.float32(nudge * np.inf))
                block = np.concatenate([[6 * eff], vals, -vals[:3], [-0.0]]).astype(np.float32)
                x[r, :block.size] = block[: cols]
                r += 1
    x[r:r + 2] = -0.0                                              # all-zero (negative) rows
    x[r + 2, :16] = rng.standard_normal(16) * 1e-9                 # scale clamped at 2**-6
    x[r + 3, :16] = np.float32(1e-45) * np.arange(16)              # float32 subnormals
    fill = rows - (r + 4)
    if fill > 0:
        x[r + 4:] = rng.standard_normal((fill, cols)) * 10.0 ** rng.integers(-6, 1, (fill, 1))
    return x


@pytest.mark.parametrize("name", SCHEMES)
@pytest.mark.parametrize("shape", [(64, 64), (64, 512), (512, 64), (4, 64), (512, 4),
                                   (64, 16), (16, 512), (1, 16), (3, 20), (2, 4)])
def test_fused_equals_the_general_core_on_random_data(name, shape):
    scheme = SCHEMES[name]
    rng = np.random.default_rng(shape[0] * 7 + shape[1])
    if scheme.hadamard and shape[1] % 16:
        with pytest.raises(ValueError, match="multiple of 16"):
            fake_quantize_nvfp4(np.ones(shape, np.float32), scheme, rng, rotated=True)
        return
    for x in (rng.standard_normal(shape),
              rng.standard_cauchy(shape) * 1e-3,                    # heavy tails: clipping
              rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 4, shape),
              np.abs(rng.standard_normal(shape)) * 3):               # > 25% below 2**emin
        _check(x.astype(np.float32), scheme, seed=shape[0])
        _check(x.astype(np.float32), scheme, seed=shape[1], float32=False)


@pytest.mark.parametrize("name", SCHEMES)
def test_fused_equals_the_general_core_on_adversarial_blocks(name):
    scheme = SCHEMES[name]
    rng = np.random.default_rng(3)
    x = _adversarial(rng)
    _check(x, scheme)
    _check(-x, scheme, float32=False)
    _check(np.ascontiguousarray(x.T), scheme, seed=11)
    _check(x.T, scheme, seed=12)                                      # a strided view
    _check(x[:, :32] * np.float32(1e30), scheme)                      # a huge tensor amax


def test_stochastic_draws_both_ways_for_values_below_two_to_emin():
    """round_in_range_stochastic redraws the values in (0, 1) when they are at most a quarter
    of the chunk, else reuses the chunk's draws: both cases, and the generator's end state."""
    scheme = SCHEMES["SR exact"]
    base = np.full((64, 64), 5.0, np.float32)
    base[:, 0] = 6.0
    for share in (0.0, 0.1, 0.25, 0.26, 0.9):
        x = base.copy()
        count = int(share * x.size)
        x.reshape(-1)[np.arange(count) * (x.size // max(count, 1)) + 1] = 0.3
        _check(x, scheme)


@pytest.mark.parametrize("name", SCHEMES)
def test_bad_input_raises_the_general_core_errors(name):
    scheme = SCHEMES[name]
    stochastic = scheme.rounding == "stochastic"
    mixed = np.ones((3, 32), np.float32)
    mixed[2, 17], mixed[1, 3] = np.inf, -np.inf                      # one inf per block
    opposite = np.ones((1, 32), np.float32)
    opposite[0, 16:18] = np.inf, -np.inf                             # inf - inf in a block
    for x in (np.array([[1.0, np.nan] * 8], np.float32), np.array([[np.inf] * 16], np.float32),
              mixed, opposite, np.full((2, 16), 1e-45, np.float32),  # g underflows to 0
              np.full((2, 16), 3e38, np.float32)):                   # the transform overflows
        try:
            with np.errstate(over="ignore"):
                floatlab.fake_quantize(x, scheme, np.random.default_rng(0) if stochastic
                                       else None, rotated=True)
        except ValueError as general:
            with pytest.raises(ValueError) as fused, np.errstate(over="ignore"):
                fake_quantize_nvfp4(x, scheme, np.random.default_rng(0), rotated=True)
            assert str(fused.value) == str(general)
        else:  # the Hadamard transform flushed the subnormals (an all-zero tensor, g = 1),
            #    or without a transform the huge values are fine
            assert scheme.hadamard if x[0, 0] < 1 else not scheme.hadamard
            _check(x, scheme)


def test_where_the_fused_path_does_not_apply():
    x = np.ones((4, 16), np.float32)
    rng = np.random.default_rng(0)
    assert fake_quantize_nvfp4(x.astype(np.float64), SCHEMES["1x16"], None) is None
    assert fake_quantize_nvfp4(x[0], SCHEMES["1x16"], None) is None           # 1-D
    assert fake_quantize_nvfp4(x, SCHEMES["RHT"], None, rotated=False) is None
    assert fake_quantize_nvfp4(x, SCHEMES["SR"], None) is None                # no Generator
    big = np.ones((_CHUNK // 16 + 1, 16), np.float32)                         # two chunks
    state = rng.bit_generator.state
    assert fake_quantize_nvfp4(big, SCHEMES["SR exact"], rng) is None
    assert rng.bit_generator.state == state                                   # nothing drawn
    for other in (floatlab.get_scheme("mxfp4"), SCHEMES["1x16"].replace(margin=1),
                  SCHEMES["1x16"].replace(scale_rounding="ceil"),
                  SCHEMES["1x16"].replace(block=32), SCHEMES["1x16"].replace(hadamard=32),
                  SCHEMES["1x16"].replace(element="e2m3"),
                  SCHEMES["1x16"].replace(rounding="toward_zero"),
                  SCHEMES["SR"].replace(random_bits=7)):
        assert not nvfp4_fast_applies(other)
        assert fake_quantize_nvfp4(x, other, rng) is None
    assert all(nvfp4_fast_applies(s) for s in SCHEMES.values())


@pytest.mark.parametrize("options", [{}, {"stochastic_rounding": False}, {"hadamard": False},
                                     {"two_d_weights": False}],
                         ids=["nvfp4", "no SR", "no RHT", "no 2D"])
def test_training_bit_identical_with_and_without_the_fused_path(monkeypatch, options):
    """40 steps of the nvfp4 recipe and its three ablations, without telemetry (where the
    fused path runs): the same History and parameters with the fused path switched off; with
    telemetry (the general core) the same parameters again."""
    data = teacher_gaussians(n=1024)
    calls = []
    fused = recipe_gemm.fake_quantize_nvfp4

    def counting(*args, **kwargs):
        out = fused(*args, **kwargs)
        calls.append(out is not None)
        return out

    def fit(fast: bool, telemetry: bool = False):
        with monkeypatch.context() as m:
            m.setattr(nvfp4_fast, "_FAST_NVFP4", fast)
            m.setattr(recipe_gemm, "fake_quantize_nvfp4", counting)
            t = Trainer(floatlab.mixed.get_policy("nvfp4", recipe_options=options), seed=0,
                        telemetry=telemetry, progress=False, batch_size=256)
            history = t.fit(data, steps=40)
        return history, [np.array(p.data) for p in t.model.parameters()]

    (h_fast, p_fast), (h_slow, p_slow) = fit(True), fit(False)
    assert calls and any(calls)
    for column in h_fast.columns:
        a, b = np.asarray(h_fast[column]), np.asarray(h_slow[column])
        assert a.tobytes() == b.tobytes(), column
    for a, b in zip(p_fast, p_slow, strict=True):
        assert a.tobytes() == b.tobytes()
    _, p_telemetry = fit(True, telemetry=True)
    for a, b in zip(p_fast, p_telemetry, strict=True):
        assert a.tobytes() == b.tobytes()


# ----------------------------------------------------------------- hardware SR (random_bits)

def _hw_sr_reference(v: float, fmt, bits: int, r: int) -> float:
    """The rule of round_random_bits from its definition, in exact rationals: add r at the
    top ``bits`` discarded bits of |v|, carry rounds up."""
    from fractions import Fraction

    a = abs(Fraction(v))
    e = fmt.emin
    while a >= Fraction(2) ** (e + 1):
        e += 1
    quantum = Fraction(2) ** (e - fmt.man_bits)
    lo = a // quantum
    f = a / quantum - lo
    up = r < int(f * 2**bits)          # floor(f * 2**k)
    return float(np.copysign(float((lo + up) * quantum), v))


def _hw_sr_values(fmt) -> np.ndarray:
    """Grid points, midpoints, quarter points and one float32 ulp either side, subnormals of
    the format and of float32, signed zeros, max."""
    grid = np.unique(np.abs(floatlab.round(np.linspace(0, fmt.max, 4001), fmt)))
    pts = np.concatenate([grid, (grid[:-1] + grid[1:]) / 2, grid[:-1] * 0.75 + grid[1:] * 0.25,
                          grid[:-1] + (grid[1:] - grid[:-1]) * (255 / 256)])
    pts = pts.astype(np.float32)
    pts = np.concatenate([pts, np.nextafter(pts, np.float32(np.inf)),
                          np.nextafter(pts, np.float32(0)), [1e-45, 3e-39, 0.0]])
    pts = pts[(pts >= 0) & (pts <= fmt.max)]
    return np.concatenate([pts, -pts]).astype(np.float32)


def _kernels(v, fmt, bits, seed):
    """The float32 carry kernel where it applies, on the lanes round_random_bits would draw."""
    from floatlab.quant import elements

    r = elements.random_lanes(np.random.default_rng(seed), v.size, bits).reshape(v.shape)
    out = {}
    if elements._random_bits_carry_ok(fmt, bits):
        out["carry"] = elements._round_random_bits_carry(v, fmt, bits, r)
    return out


@pytest.mark.parametrize("fmt", ["e2m1", "e4m3fn", "e5m2", "e3m2"])
@pytest.mark.parametrize("bits", [1, 3, 8, 9, 13, 16])
def test_random_bits_float32_kernels_equal_the_float64_definition(fmt, bits):
    from floatlab.quant import elements

    fmt = floatlab.get_format(fmt)
    assert elements._random_bits_carry_ok(fmt, bits) == (fmt.man_bits + bits <= 11)
    v = _hw_sr_values(fmt)
    rng = np.random.default_rng(bits)
    v = np.concatenate([v, np.clip(rng.standard_normal(5000).astype(np.float32) * fmt.max / 4,
                                   -fmt.max, fmt.max)])
    for seed in range(3):
        slow = elements.round_random_bits(v.astype(np.float64), fmt, bits,
                                          np.random.default_rng(seed)).astype(np.float32)
        fast = elements.round_random_bits(v, fmt, bits, np.random.default_rng(seed))
        assert fast.dtype == np.float32
        assert np.array_equal(fast.view(np.uint32), slow.view(np.uint32))
        for name, out in _kernels(v, fmt, bits, seed).items():
            assert np.array_equal(out.view(np.uint32), slow.view(np.uint32)), name


def _carry_edge_values(fmt, bits: int) -> np.ndarray:
    """float32 values at and around every decision threshold of k random bits: (n + j / 2**k)
    quanta for every grid point n (of the lowest and highest binades) and every j, and 1-4
    float32 ulps either side; the values around 2**(emin - 23 + M + k), where the carry
    kernel's offset sum stops being exact (below it, all-ones fractions that round up into
    the decision bits); float32 subnormals, signed zeros and max. Both signs."""
    grid = np.unique(np.abs(floatlab.round(np.linspace(0, fmt.max, 4001), fmt)))
    # the subnormal range, the two lowest binades and the top one (the others repeat these)
    grid = grid[(grid <= 2.0 ** (fmt.emin + 2)) | (grid >= 2.0**fmt.emax)]
    steps = np.diff(grid)
    frac = np.arange(2**bits) / 2**bits
    pts = (grid[:-1, None] + steps[:, None] * frac[None, :]).reshape(-1).astype(np.float32)
    near = [pts]
    for direction in (np.inf, 0.0):
        p = pts
        for _ in range(4):
            p = np.nextafter(p, np.float32(direction))
            near.append(p)
    edge = fmt.emin - 23 + fmt.man_bits + bits
    tiny = [np.float32(2.0**e) * np.float32(m) for e in range(edge - 3, edge + 3)
            for m in (1.0, 1.5, 2.0 - 2.0**-23, 1.0 + 2.0**-23)]
    quantum_k = 2.0 ** (fmt.emin - fmt.man_bits - bits)   # the decision grid below 2**emin
    tiny += [np.nextafter(np.float32(quantum_k * m), np.float32(0)) for m in (1, 2, 3)]
    v = np.concatenate(near + [np.array(tiny, np.float32),
                               np.array([0.0, 1e-45, 2e-45, 1.17e-38, fmt.max], np.float32)])
    v = np.unique(v[(v >= 0) & (v <= fmt.max)])
    return np.concatenate([v, -v]).astype(np.float32)


@pytest.mark.parametrize("fmt, bits", [("e2m1", 8), ("e2m1", 1), ("e2m1", 10), ("e4m3fn", 8),
                                       ("e5m2", 4), ("e3m2", 9)])
def test_carry_kernel_on_every_threshold_for_every_random_value(fmt, bits):
    """The carry kernel against the float64 definition: every value
    of _carry_edge_values with every r in [0, 2**k) (for k > 8 the extreme r and 30 random
    ones: all of them would make arrays of 10**8 values)."""
    from floatlab.quant import elements

    fmt = floatlab.get_format(fmt)
    assert elements._random_bits_carry_ok(fmt, bits)
    v = _carry_edge_values(fmt, bits)
    lane = np.uint8 if bits <= 8 else np.uint16
    r = np.arange(2**bits, dtype=lane)
    if bits > 8:
        r = np.unique(np.concatenate([r[:2], r[2**(bits - 1) - 1:2**(bits - 1) + 1], r[-2:],
                                      np.random.default_rng(bits).choice(r, 30)]))
    for part in np.array_split(r, -(-r.size // 32)):   # 32 values of r at a time (memory)
        v2 = np.repeat(v, part.size).reshape(v.size, part.size)
        r2 = np.broadcast_to(part, v2.shape)
        carry = elements._round_random_bits_carry(v2, fmt, bits, r2)
        # the float64 definition (round_random_bits' own lines) on the same lanes
        a = np.abs(v2).astype(np.float64)
        e = np.frexp(np.maximum(a, 2.0**fmt.emin))[1] - 1
        quantum = np.ldexp(1.0, e - fmt.man_bits)
        n = np.floor(a / quantum * 2.0**bits)
        lo = np.floor(n / 2.0**bits)
        want = np.copysign((lo + (r2 < n - lo * 2.0**bits)) * quantum, v2).astype(np.float32)
        assert np.array_equal(carry.view(np.uint32), want.view(np.uint32))
    assert carry.dtype == np.float32 and not np.shares_memory(carry, v2)


@pytest.mark.parametrize("fmt", ["e2m1", "e4m3fn", "e5m2"])
@pytest.mark.parametrize("carry", [True, False], ids=["carry", "no carry"])
def test_random_bits_saturate_equals_clipping_first(monkeypatch, fmt, carry):
    """round_random_bits(saturate=True) on values beyond max (a hair above, the next grid
    points of the extended grid and their midpoints, the next binades, float32's max) and
    within range equals rounding the clipped values, for every r."""
    from floatlab.quant import elements

    monkeypatch.setattr(elements, "_CARRY_KERNEL", carry)
    fmt = floatlab.get_format(fmt)
    top = np.float32(fmt.max)
    q = 2.0 ** (fmt.emax - fmt.man_bits)
    above = np.array([np.nextafter(top, np.float32(np.inf)), top * (1 + 2.0**-20), top + q / 2,
                      top + q / 256, top + q, top + 1.5 * q, 2.0 ** (fmt.emax + 1),
                      2.0 ** (fmt.emax + 1) * 1.7, 2.0**100, 3.4e38, 6.0000005], np.float32)
    v = np.concatenate([above, _hw_sr_values(fmt)]).astype(np.float32)
    v = np.concatenate([v, -v])
    for r in range(256):
        monkeypatch.setattr(elements, "random_lanes",
                            lambda rng, n, bits, r=r: np.full(n, r, np.uint8))
        got = elements.round_random_bits(v, fmt, 8, None, saturate=True)
        want = elements.round_random_bits(np.clip(v, -fmt.max, fmt.max), fmt, 8, None)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), r


def test_carry_kernel_switch(monkeypatch):
    from floatlab.quant import elements

    fmt = floatlab.get_format("e2m1")
    v = _hw_sr_values(fmt)
    calls = []
    kernel = elements._round_random_bits_carry
    monkeypatch.setattr(elements, "_round_random_bits_carry",
                        lambda *a: calls.append(1) or kernel(*a))
    on = elements.round_random_bits(v, fmt, 8, np.random.default_rng(3))
    monkeypatch.setattr(elements, "_CARRY_KERNEL", False)
    off = elements.round_random_bits(v, fmt, 8, np.random.default_rng(3))
    assert calls == [1] and np.array_equal(on.view(np.uint32), off.view(np.uint32))


@pytest.mark.parametrize("fmt", ["e2m1", "e4m3fn"])
def test_random_bits_rule_against_exact_rationals(monkeypatch, fmt):
    """Every value with chosen random bits (0, 1, the threshold either side, the largest)
    against the definition in Fractions."""
    from floatlab.quant import elements

    fmt = floatlab.get_format(fmt)
    v = _hw_sr_values(fmt)[::3]
    for r in (0, 1, 63, 64, 127, 128, 191, 192, 254, 255):
        monkeypatch.setattr(elements, "random_lanes",
                            lambda rng, n, bits, r=r: np.full(n, r, np.uint8))
        got = elements.round_random_bits(v, fmt, 8, None)
        want = np.array([_hw_sr_reference(float(x), fmt, 8, r) for x in v], np.float32)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), r


def test_random_lanes_are_the_little_endian_pieces_of_64_bit_words():
    from floatlab.quant.elements import random_lanes

    words = np.random.default_rng(5).integers(0, 2**64, 3, dtype=np.uint64)
    lanes = random_lanes(np.random.default_rng(5), 20, 8)
    assert lanes.tolist() == [(int(w) >> (8 * i)) & 255 for w in words for i in range(8)][:20]
    halves = random_lanes(np.random.default_rng(5), 9, 13)
    assert halves.tolist() == [((int(w) >> (16 * i)) & 0xFFFF) >> 3
                               for w in words for i in range(4)][:9]
    rng = np.random.default_rng(5)
    random_lanes(rng, 20, 8)                         # 3 words drawn, the rest of one unused
    assert rng.bit_generator.state == np.random.default_rng(5).bit_generator.advance(3).state
    # the same bytes as 32-bit words, low half first (how numpy splits the 64-bit outputs)
    words32 = np.random.default_rng(5).integers(0, 2**32, 6, dtype=np.uint32)
    assert lanes[:8].tolist() == [(int(w) >> (8 * i)) & 255 for w in words32[:2]
                                  for i in range(4)]


def _same_state(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    return np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b


@pytest.mark.parametrize("bit_generator", [np.random.PCG64, np.random.PCG64DXSM,
                                           np.random.Philox, np.random.SFC64,
                                           np.random.MT19937])
def test_random_lanes_raw_words_equal_integers_words(monkeypatch, bit_generator):
    """random_lanes takes bit_generator.random_raw for the generators whose raw output is
    their next_uint64: the same lanes and generator end state as rng.integers(0, 2**64,
    uint64), also after an odd number of 32-bit draws (PCG64's buffered half word) and for
    the later draws; MT19937 (32-bit raw output) keeps integers."""
    from floatlab.quant import elements

    assert (bit_generator in elements._RAW_IS_UINT64) == (bit_generator is not np.random.MT19937)
    raw = bit_generator(3).random_raw(4)
    full = np.random.Generator(bit_generator(3)).integers(0, 2**64, 4, dtype=np.uint64)
    assert np.array_equal(raw, full) == (bit_generator is not np.random.MT19937)
    for n, bits in ((0, 8), (1, 8), (7, 8), (8, 8), (1000, 8), (33, 13), (4096, 16)):
        lanes, rngs = [], []
        for use_raw in (True, False):
            monkeypatch.setattr(elements, "_RAW_WORDS", use_raw)
            rng = np.random.Generator(bit_generator(n))
            rng.integers(0, 2**32, 3, dtype=np.uint32)
            lanes.append(elements.random_lanes(rng, n, bits))
            rngs.append(rng)
        assert lanes[0].dtype == lanes[1].dtype and np.array_equal(lanes[0], lanes[1])
        assert _same_state(rngs[0].bit_generator.state, rngs[1].bit_generator.state)
        assert np.array_equal(rngs[0].random(3), rngs[1].random(3))


def test_random_bits_probability_is_truncated_to_k_bits():
    """A value a fraction 0.3 of a quantum above the grid rounds up with probability
    floor(0.3 * 256) / 256 = 76 / 256 (the hardware's bias), not 0.3."""
    from floatlab.quant.elements import round_random_bits

    fmt = floatlab.get_format("e2m1")
    v = np.full(200_000, 2.3, np.float32)                   # quantum 1 between 2 and 3
    up = np.mean(round_random_bits(v, fmt, 8, np.random.default_rng(0)) == 3.0)
    f = float(np.float32(2.3)) - 2
    assert abs(up - int(f * 256) / 256) < 5 * np.sqrt(0.25 / v.size)


def test_scheme_random_bits_checks():
    s = floatlab.get_scheme("nvfp4")
    assert s.replace(rounding="stochastic", random_bits=8).random_bits == 8
    for bad in (0, 17, 8.0, True):
        with pytest.raises(ValueError, match="random_bits"):
            s.replace(rounding="stochastic", random_bits=bad)
    with pytest.raises(ValueError, match="rounding='stochastic'"):
        s.replace(random_bits=8)
    with pytest.raises(ValueError, match="float element format"):
        floatlab.get_scheme("nf4").replace(rounding="stochastic", random_bits=8)
    assert "8 random bits" in repr(_R.dgrad.a)
