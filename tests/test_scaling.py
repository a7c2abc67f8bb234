"""Per-tensor scales, delayed scaling and MX block quantisation against exact references.

The references are built here without floatlab.scaling: block exponents from the integer bit
lengths of ``fractions.Fraction`` amaxes, power-of-two scales from exact rational comparisons,
element rounding from the Fraction-exact ``oracles.reference_round`` (which does not use
floatlab's rounding core).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from oracles import assert_same, reference_round

import floatlab
from floatlab import FormatNameError, get_format
from floatlab.scaling import (
    DelayedScaling,
    MXTensor,
    ScaledTensor,
    amax_scale,
    mx_quantize,
    mx_scale,
    quantize_scaled,
)

MX_ELEMENTS = {"e2m1": 2, "e2m3": 2, "e3m2": 4, "e4m3fn": 8, "e5m2": 15}  # name: emax (OCP)
SCALED_FORMATS = ["e4m3fn", "e5m2", "e2m1", "e2m3", "e3m2", "fp16", "bf16", "e4m3fnuz"]


# ==================================================================================== references

def floor_log2(value: Fraction) -> int:
    """floor(log2(value)) of a positive rational, exactly (no floating point)."""
    e = value.numerator.bit_length() - value.denominator.bit_length()
    if Fraction(2) ** e > value:
        e -= 1
    assert Fraction(2) ** e <= value < Fraction(2) ** (e + 1)
    return e


def reference_pow2_scale(amax: float, fmax: float, margin: int) -> float:
    """Largest power of two s with amax * s <= fmax / 2**margin, by exact comparison."""
    k = floor_log2(Fraction(fmax) / Fraction(amax)) - margin
    return math.ldexp(1.0, k)


def reference_mx(x: np.ndarray, name: str, block_size: int, mode: str = "nearest_even"):
    """Per-block scales and elements of a 1-d x, block by block, from exact rationals."""
    fmt = get_format(name)
    scales, quotients = [], []
    for start in range(0, x.size, block_size):
        block = x[start : start + block_size]
        amax = max(Fraction(abs(float(v))) for v in block)
        k = -127 if amax == 0 else max(floor_log2(amax) - MX_ELEMENTS[name], -127)
        assert k <= 127
        scale = Fraction(2) ** k
        for v in block.tolist():
            q = Fraction(v) / scale
            assert Fraction(float(q)) == q  # the float below is the exact quotient
            quotients.append(float(q))
        scales.append(float(scale))
    elements = reference_round(np.array(quotients), fmt, (mode,), saturate=True)[mode]
    return np.array(scales), elements


def block_data(rng: np.random.Generator, n_blocks: int, block_size: int, emax: int) -> np.ndarray:
    """Blocks whose amax sits on every kind of edge, over a huge range of magnitudes."""
    blocks = rng.standard_normal((n_blocks, block_size))
    blocks *= 2.0 ** rng.integers(-140, 120, (n_blocks, 1))
    top = np.argmax(np.abs(blocks), axis=1)
    rows = np.arange(n_blocks)
    kind = rows % 6
    k = rng.integers(-150, 100 + emax, n_blocks).astype(float)
    # amax exactly a power of two, just below one (log2 rounds it up), just above one
    blocks[rows[kind == 1], top[kind == 1]] = 2.0 ** k[kind == 1]
    blocks[rows[kind == 2], top[kind == 2]] = -np.nextafter(2.0 ** k[kind == 2], 0)
    blocks[rows[kind == 3], top[kind == 3]] = np.nextafter(2.0 ** k[kind == 3], np.inf)
    blocks[kind == 4] = 0.0  # all-zero blocks
    blocks[kind == 5] *= 2.0**-900  # far below E8M0's 2**-127: the scale clamps
    blocks[-2] = 0.0
    blocks[-2, 0] = 2.0 ** (127 + emax) * 1.9  # the largest amax E8M0 can scale
    return blocks


# ==================================================================================== per-tensor

@pytest.mark.parametrize("name", SCALED_FORMATS)
def test_amax_maps_to_max_over_two_to_the_margin(name):
    fmt = get_format(name)
    rng = np.random.default_rng(1)
    for margin in range(4):
        for _ in range(40):
            x = rng.standard_normal(50) * 2.0 ** rng.uniform(-30, 30)
            amax = float(np.max(np.abs(x)))
            scale = amax_scale(x, name, margin)
            assert scale == fmt.max / amax / 2**margin  # Transformer Engine's exact form
            assert amax_scale(amax, name, margin) == scale == amax_scale(-amax, name, margin)
            q = quantize_scaled(x, name, margin=margin)
            assert q.scale == scale and q.n_saturated == 0 and q.fmt == fmt
            target = fmt.max / 2**margin
            if target >= fmt.smallest_normal:  # a value of the format: amax lands on it
                assert np.max(np.abs(q.values)) == target
            assert_same(q.values, floatlab.round(x * scale, fmt, saturate=True), x, name)
            assert_same(q.dequantize(), q.values / scale, x, name)


@pytest.mark.parametrize("name", SCALED_FORMATS)
def test_power_of_two_scale_against_exact_reference(name):
    fmt = get_format(name)
    rng = np.random.default_rng(2)
    amaxes = [fmt.max / 2.0**j for j in range(-5, 20)]  # the ratio is exactly a power of two
    amaxes += [np.nextafter(a, np.inf) for a in amaxes] + [np.nextafter(a, 0) for a in amaxes]
    amaxes += list(np.abs(rng.standard_normal(100)) * 2.0 ** rng.integers(-40, 40, 100))
    naive_wrong = 0
    for amax in amaxes:
        for margin in (0, 1, 5):
            got = amax_scale(amax, name, margin, power_of_two=True)
            assert got == reference_pow2_scale(amax, fmt.max, margin), (amax, margin)
            # the scaled amax lies in (max / 2**(margin + 1), max / 2**margin], exactly
            scaled = Fraction(amax) * Fraction(got)
            assert Fraction(fmt.max) / 2 ** (margin + 1) < scaled <= Fraction(fmt.max) / 2**margin
            naive = 2.0 ** np.floor(np.log2(fmt.max / amax / 2**margin))
            naive_wrong += naive != got
    assert naive_wrong > 0  # log2 of a rounded ratio gets the edges wrong: the test can fail


@pytest.mark.parametrize("name", ["e4m3fn", "e5m2", "e2m1", "e3m2", "e4m3fnuz"])
@pytest.mark.parametrize("mode", ["nearest_even", "toward_zero", "up"])
def test_power_of_two_scaling_is_exact(name, mode):
    """dequantize(quantize(x)) == round(x * s) / s, with x * s the exact product."""
    fmt = get_format(name)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(400) * np.exp(rng.normal(0, 3, 400)) * 1e-7
    q = quantize_scaled(x, name, margin=1, power_of_two=True, rounding=mode)
    s = q.scale
    assert s == 2.0 ** math.frexp(s)[1] / 2  # a power of two
    products = x * s
    assert all(Fraction(p) == Fraction(v) * Fraction(s) for p, v in zip(products, x, strict=True))
    expected = reference_round(products, fmt, (mode,), saturate=True)[mode]
    assert_same(q.values, expected, x, f"{name} {mode}")
    deq = q.dequantize()
    assert all(Fraction(d) == Fraction(e) / Fraction(s) for d, e in zip(deq, expected, strict=True))


def test_quantize_with_an_explicit_scale_saturation_and_specials():
    x = np.array([1.0, -2.0, 4.0, 500.0])
    q = quantize_scaled(x, "e4m3fn", scale=1.0)
    assert q.values.tolist() == [1.0, -2.0, 4.0, 448.0] and q.n_saturated == 1
    assert np.isnan(quantize_scaled(x, "e4m3fn", scale=1.0, saturate=False).values[3])
    assert quantize_scaled(x * 200, "e5m2", scale=1.0, saturate=False).values[3] == np.inf
    # NaN and inf with an explicit scale follow floatlab.round
    specials = np.array([np.nan, np.inf, -np.inf, 1.0])
    q = quantize_scaled(specials, "e4m3fn", scale=2.0)
    assert np.isnan(q.values[0]) and q.values[1:].tolist() == [448.0, -448.0, 2.0]
    assert q.n_saturated == 0  # only finite entries count
    with pytest.raises(ValueError, match="NaN"):
        quantize_scaled(specials, "e2m1", scale=2.0)  # FP4 has no NaN
    # amax 0: scale 1.0; 0-d in, 0-d out; float32 input is scaled in float64
    assert quantize_scaled(np.zeros(3), "e4m3fn").scale == 1.0
    assert amax_scale(0.0, "e2m1") == 1.0
    assert quantize_scaled(3.0, "e4m3fn").values.shape == ()
    x32 = np.float32([0.1, 0.2, 0.3])
    assert_same(quantize_scaled(x32, "e4m3fn").values,
                quantize_scaled(x32.astype(np.float64), "e4m3fn").values, x32)
    # values are read-only, the repr is short
    q = quantize_scaled([1.0, 2.0], "e4m3fn")
    with pytest.raises(ValueError):
        q.values[0] = 0.0
    assert repr(q) == "ScaledTensor(float8_e4m3fn, shape (2,), scale 224, 0 saturated)"
    assert isinstance(q, ScaledTensor)


@pytest.mark.parametrize("name", ["e4m3fn", "e5m2", "fp16", "e4m3fnuz"])
def test_saturated_count_is_what_nearest_rounding_overflows(name):
    fmt = get_format(name)
    ulp_top = 2.0 ** (fmt.emax - fmt.man_bits)
    edges = fmt.max + ulp_top * np.array([0.25, 0.5, 0.5 + 2**-20, 1, 3])
    x = np.concatenate([edges, -edges, np.linspace(-fmt.max, fmt.max, 101)])
    q = quantize_scaled(x, name, scale=1.0)
    overflowed = ~np.isfinite(quantize_scaled(x, name, scale=1.0, saturate=False).values)
    assert q.n_saturated == np.count_nonzero(overflowed) >= 6
    assert (np.abs(q.values[overflowed]) == fmt.max).all()


def test_saturated_count_on_the_tie_and_for_formats_without_nan():
    assert quantize_scaled([450.0, 464.0, 465.0], "e4m3fn", scale=1.0).n_saturated == 1
    assert quantize_scaled([6.5, 7.0, -7.0, 8.0], "e2m1", scale=1.0).n_saturated == 3
    x = np.random.default_rng(0).standard_normal(1000)
    for name in SCALED_FORMATS:  # the amax entry a float64 ulp above max is not saturated
        assert quantize_scaled(x * 3.7, name, margin=0).n_saturated == 0


def test_stochastic_rounding_is_seeded():
    x = np.random.default_rng(4).standard_normal(1000)
    a = quantize_scaled(x, "e2m1", rounding="stochastic", rng=7)
    b = quantize_scaled(x, "e2m1", rounding="stochastic", rng=7)
    assert_same(a.values, b.values, x)
    assert np.isin(a.values, floatlab.values("e2m1")).all()
    m1 = mx_quantize(x, "e2m1", rounding="stochastic", rng=7)
    m2 = mx_quantize(x, "e2m1", rounding="stochastic", rng=7)
    assert_same(m1.elements, m2.elements, x)
    assert not np.array_equal(m1.elements, mx_quantize(x, "e2m1").elements)


# ==================================================================================== delayed

def growing_tensors(steps=40, spike_at=30):
    """The notebook's run: a tensor growing 2% per step, one 5x spike."""
    r = np.random.default_rng(1)
    for t in range(steps):
        yield t, r.standard_normal(4096) * (1.0 + 0.02 * t) * (5.0 if t == spike_at else 1.0)


def test_delayed_scaling_uses_the_history_before_x():
    ds = DelayedScaling("e4m3fn", history_len=3)
    assert ds.scale is None and ds.history == ()
    amaxes = [2.0, 8.0, 1.0, 0.5, 0.25, 4.0]
    for i, amax in enumerate(amaxes):
        x = np.array([amax, -amax / 3])
        window = amaxes[max(0, i - 3) : i] or [amax]  # first call: its own amax
        expected = 448.0 / max(window)
        assert ds.scale == (None if i == 0 else expected)
        q = ds.quantize(x)
        assert q.scale == expected
        assert_same(q.values, floatlab.round(x * expected, "e4m3fn", saturate=True), x)
        assert ds.history == tuple(amaxes[max(0, i - 2) : i + 1])
    assert repr(ds) == "DelayedScaling(float8_e4m3fn, history_len=3, margin=0, 3 amaxes recorded)"


def test_delayed_scaling_margin_absorbs_a_spike():
    results = {}
    for margin in (0, 3):
        ds = DelayedScaling("e4m3fn", history_len=16, margin=margin)
        sat, err = {}, {}
        for t, x in growing_tensors():
            q = ds.quantize(x)
            sat[t] = q.n_saturated / x.size
            err[t] = np.linalg.norm(q.dequantize() - x) / np.linalg.norm(x)
        results[margin] = sat, err
    _, spike = list(growing_tensors())[30]
    exact = quantize_scaled(spike, "e4m3fn")
    exact_err = np.linalg.norm(exact.dequantize() - spike) / np.linalg.norm(spike)
    (sat0, err0), (sat3, err3) = results[0], results[3]
    assert sat0[30] > 0.2 and err0[30] > 10 * exact_err  # margin 0: the spike saturates
    assert sat3[30] == 0 and err3[30] < 2 * exact_err  # 2**3 headroom absorbs a 5x spike
    assert max(sat0[t] for t in range(30)) > 0  # growth alone clips a few entries at margin 0
    assert all(sat3[t] == 0 for t in range(40))


def test_delayed_scaling_bad_steps_leave_the_history_alone():
    ds = DelayedScaling("e5m2", history_len=4, margin=1, power_of_two=True)
    ds.quantize([3.0, -1.0])
    assert ds.scale == amax_scale(3.0, "e5m2", 1, power_of_two=True) == 2.0**13
    for bad in ([1.0, np.nan], [np.inf], []):
        with pytest.raises(ValueError, match="NaN|empty"):
            ds.quantize(bad)
        assert ds.history == (3.0,)
    zeros = DelayedScaling("e4m3fn")
    zeros.quantize(np.zeros(4))
    assert zeros.scale == 1.0
    with pytest.raises(ValueError, match="history_len must be >= 1"):
        DelayedScaling("e4m3fn", history_len=0)
    with pytest.raises(TypeError, match="history_len must be an int"):
        DelayedScaling("e4m3fn", history_len=2.0)


# ==================================================================================== MX

@pytest.mark.parametrize("name", list(MX_ELEMENTS))
def test_mx_against_exact_block_reference(name):
    fmt = get_format(name)
    assert fmt.emax == MX_ELEMENTS[name]  # the OCP spec's emax_elem
    rng = np.random.default_rng(5)
    x = block_data(rng, 120, 32, fmt.emax).ravel()
    x = np.concatenate([x, rng.standard_normal(13)])  # a partial last block
    mx = mx_quantize(x, name)
    ref_scales, ref_elements = reference_mx(x, name, 32)
    assert_same(mx.scales, ref_scales, ref_scales, f"{name} scales")
    assert_same(mx.elements, ref_elements, x, f"{name} elements")
    deq = mx.dequantize()
    expanded = np.repeat(ref_scales, 32)[: x.size]
    assert all(Fraction(d) == Fraction(e) * Fraction(s)
               for d, e, s in zip(deq, ref_elements, expanded, strict=True))  # dequantize is exact


@pytest.mark.parametrize("mode", ["toward_zero", "up", "nearest_away"])
def test_mx_directed_rounding_against_reference(mode):
    x = block_data(np.random.default_rng(6), 60, 16, 4).ravel()
    mx = mx_quantize(x, "e3m2", block_size=16, rounding=mode)
    ref_scales, ref_elements = reference_mx(x, "e3m2", 16, mode)
    assert_same(mx.scales, ref_scales, ref_scales, mode)
    assert_same(mx.elements, ref_elements, x, mode)


@pytest.mark.parametrize("name", list(MX_ELEMENTS))
def test_mx_scales_are_e8m0_and_elements_are_format_values(name):
    x = block_data(np.random.default_rng(7), 200, 32, MX_ELEMENTS[name])
    mx = mx_quantize(x, name)
    assert mx.scales.shape == (200, 1) and mx.elements.shape == x.shape
    assert_same(floatlab.round(mx.scales, "e8m0"), mx.scales, mx.scales, "E8M0")
    mant, exp = np.frexp(mx.scales)
    assert (mant == 0.5).all() and exp.min() - 1 >= -127 and exp.max() - 1 <= 127
    assert_same(2.0**mx.scale_exponents, mx.scales, mx.scales)
    assert np.isin(mx.elements, floatlab.values(name)).all()
    # every non-zero block's largest element sits in the element format's top binade (or
    # lower when the scale was clamped at 2**-127)
    top = np.max(np.abs(mx.elements), axis=1)
    unclamped = (mx.scales[:, 0] > 2.0**-127) & (top > 0)
    assert (top[unclamped] >= 2.0 ** get_format(name).emax).all()


def test_mx_scale_edges_and_the_log2_trap():
    assert mx_scale([0.3, 1.0, 6.0, 8.0], "e2m1").tolist() == [2.0**-4, 0.25, 1.0, 2.0]
    below = np.nextafter(8.0, 0)
    assert np.floor(np.log2(below)) == 3  # log2 rounds up just below a power of two ...
    assert float(mx_scale(below, "e2m1")) == 1.0  # ... frexp does not: floor(log2) is 2
    assert float(mx_scale(0.0, "e2m1")) == 2.0**-127
    assert float(mx_scale(2.0**-200, "e4m3fn")) == 2.0**-127
    assert float(mx_scale(2.0**135 * 1.99, "e4m3fn")) == 2.0**127
    with pytest.raises(ValueError, match=r"above 2\*\*127.*below 2\*\*136"):
        mx_scale(2.0**136, "e4m3fn")
    with pytest.raises(ValueError, match="above 2"):
        mx_quantize(np.full(32, 1e300), "e2m1")
    with pytest.raises(ValueError, match=">= 0"):
        mx_scale(-1.0, "e2m1")
    with pytest.raises(ValueError, match="NaN"):
        mx_scale([1.0, np.nan], "e2m1")


def test_mx_beats_one_per_tensor_scale_on_a_wide_range():
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((64, 32)) * 2.0 ** rng.uniform(-8, 8, (64, 1))).ravel()

    def block_error(x_hat):
        d, r = (x_hat - x).reshape(-1, 32), x.reshape(-1, 32)
        return np.mean(np.linalg.norm(d, axis=1) / np.linalg.norm(r, axis=1))

    per_tensor = block_error(quantize_scaled(x, "e2m1").dequantize())
    mxfp4 = block_error(mx_quantize(x, "e2m1").dequantize())
    assert per_tensor > 0.5 and mxfp4 < 0.2 * per_tensor
    assert block_error(mx_quantize(x, "e2m3").dequantize()) < block_error(
        quantize_scaled(x, "e4m3fn").dequantize()
    )


def test_mx_partial_last_block_and_block_sizes():
    x = np.random.default_rng(9).standard_normal(70) * np.geomspace(1e-3, 1e3, 70)
    mx = mx_quantize(x, "e4m3fn")
    assert mx.scales.shape == (3,)  # 32 + 32 + 6
    tail = mx_quantize(x[64:], "e4m3fn")  # the short block is scaled by its own amax
    assert mx.scales[2] == tail.scales[0] == float(mx_scale(np.abs(x[64:]).max(), "e4m3fn"))
    assert_same(mx.elements[64:], tail.elements, x[64:])
    for start in (0, 32):
        part = mx_quantize(x[start : start + 32], "e4m3fn")
        assert_same(mx.elements[start : start + 32], part.elements, x[start : start + 32])
    one = mx_quantize(x, "e4m3fn", block_size=100)  # longer than the axis: one block
    assert one.scales.shape == (1,)
    assert one.scales[0] == float(mx_scale(np.abs(x).max(), "e4m3fn"))
    each = mx_quantize(x, "e2m1", block_size=1)  # a scale per element: all in [4, 6]
    assert each.scales.shape == x.shape
    assert set(np.abs(each.elements).tolist()) <= {4.0, 6.0}
    assert mx.expanded_scales().shape == x.shape
    assert repr(mx) == "MXTensor(float8_e4m3fn, shape (70,), 3 blocks of 32 along axis 0)"
    assert isinstance(mx, MXTensor) and mx.shape == (70,)


def test_mx_axis_handling():
    x = np.random.default_rng(10).standard_normal((3, 40, 5)) * np.geomspace(1e-4, 1e4, 5)
    for axis in (0, 1, 2, -1, -2):
        mx = mx_quantize(x, "e2m1", block_size=16, axis=axis)
        ax = axis % 3
        ref = mx_quantize(np.moveaxis(x, ax, -1), "e2m1", block_size=16)
        assert mx.axis == ax and mx.elements.shape == x.shape
        expected_shape = list(x.shape)
        expected_shape[ax] = -(-x.shape[ax] // 16)
        assert mx.scales.shape == tuple(expected_shape)
        assert_same(mx.elements, np.moveaxis(ref.elements, -1, ax), x, f"axis {axis}")
        assert_same(mx.scales, np.moveaxis(ref.scales, -1, ax), mx.scales, f"axis {axis}")
        assert_same(mx.dequantize(), np.moveaxis(ref.dequantize(), -1, ax), x, f"axis {axis}")
    # every line along the axis is blocked on its own: one line against the 1-d call
    mx = mx_quantize(x, "e2m1", block_size=16, axis=1)
    line = x[2, :, 4]
    assert_same(mx.elements[2, :, 4], mx_quantize(line, "e2m1", 16).elements, line)
    assert_same(mx.scales[2, :, 4], mx_quantize(line, "e2m1", 16).scales, line[:3])


def test_mx_input_types_and_empty_arrays():
    x = np.random.default_rng(11).standard_normal(64)
    x32 = x.astype(np.float32)
    assert_same(mx_quantize(x32, "e2m1").elements, mx_quantize(x32.astype(float), "e2m1").elements,
                x32)
    import ml_dtypes

    xb = x.astype(ml_dtypes.bfloat16)
    assert_same(mx_quantize(xb, "e4m3fn").elements,
                mx_quantize(xb.astype(np.float64), "e4m3fn").elements, x)
    assert mx_quantize(list(x[:5]), "e2m1").elements.shape == (5,)
    empty = mx_quantize(np.zeros((4, 0)), "e2m1")
    assert empty.elements.shape == (4, 0) and empty.scales.shape == (4, 0)
    rows = mx_quantize(np.zeros((0, 40)), "e2m1")
    assert rows.elements.shape == (0, 40) and rows.scales.shape == (0, 2)
    assert empty.dequantize().shape == (4, 0)
    mx = mx_quantize(x, "e2m1")
    with pytest.raises(ValueError):
        mx.elements[0] = 1.0
    with pytest.raises(ValueError):
        mx.scales[0] = 1.0


# ==================================================================================== bad input

def test_inputs_are_never_mutated():
    x = np.random.default_rng(12).standard_normal((4, 33))
    x[0, 0] = 0.0
    before = x.copy()
    x.setflags(write=False)  # a read-only input works, too
    quantize_scaled(x, "e4m3fn")
    quantize_scaled(x, "e4m3fn", scale=3.0)
    quantize_scaled(x, "e4m3fn", margin=2, power_of_two=True)
    amax_scale(x, "e5m2", 2)
    mx_quantize(x, "e2m1", block_size=8, axis=0)
    DelayedScaling("e4m3fn").quantize(x)
    assert_same(x, before, before)


def test_bad_format_names():
    with pytest.raises(FormatNameError, match="Did you mean"):
        quantize_scaled([1.0], "e4m3fm")
    with pytest.raises(FormatNameError, match="ambiguous.*448"):
        amax_scale([1.0], "e4m3")
    with pytest.raises(FormatNameError, match="ambiguous"):
        mx_quantize(np.ones(32), "fp6")
    with pytest.raises(FormatNameError):
        DelayedScaling("fp7")
    for call in (lambda: mx_quantize(np.ones(32), "e8m0"), lambda: amax_scale(1.0, "e8m0")):
        with pytest.raises(ValueError, match="no sign bit or no zero.*'e2m1'"):
            call()


def test_bad_block_sizes_axes_and_shapes():
    x = np.ones((2, 32))
    for bad in (0, -1):
        with pytest.raises(ValueError, match="block_size must be >= 1.*32"):
            mx_quantize(x, block_size=bad)
    for bad in (2.5, True, "32", None):
        with pytest.raises(TypeError, match="block_size must be an int"):
            mx_quantize(x, block_size=bad)
    with pytest.raises(ValueError, match="axis 2 is out of range for an array of shape"):
        mx_quantize(x, axis=2)
    with pytest.raises(ValueError, match="axis -3 is out of range"):
        mx_quantize(x, axis=-3)
    with pytest.raises(TypeError, match="axis must be an int"):
        mx_quantize(x, axis=1.0)
    with pytest.raises(ValueError, match="0-d.*atleast_1d"):
        mx_quantize(3.0)


def test_nonfinite_and_empty_inputs_name_the_problem():
    for name in ("e4m3fn", "e2m1"):
        with pytest.raises(ValueError, match="1 NaN and 0 inf values.*nan_to_num"):
            amax_scale([1.0, np.nan], name)
        with pytest.raises(ValueError, match="0 NaN and 2 inf"):
            quantize_scaled([np.inf, -np.inf, 1.0], name)
        with pytest.raises(ValueError, match="0 NaN and 1 inf"):
            mx_quantize(np.r_[np.ones(40), np.inf], name)
    with pytest.raises(ValueError, match="empty.*explicit"):
        amax_scale([], "e4m3fn")
    with pytest.raises(ValueError, match="empty"):
        quantize_scaled(np.zeros((3, 0)), "e4m3fn")
    empty = quantize_scaled(np.zeros((3, 0)), "e4m3fn", scale=2.0)  # with a scale: shape kept
    assert empty.values.shape == (3, 0) and empty.n_saturated == 0


def test_bad_scales_margins_and_dtypes():
    for bad in (0.0, -1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="scale must be positive and finite"):
            quantize_scaled([1.0], "e4m3fn", scale=bad)
    for bad in ("2", True, np.array([1.0, 2.0]), [2.0]):
        with pytest.raises(TypeError, match="scale must be a positive number.*mx_quantize"):
            quantize_scaled([1.0], "e4m3fn", scale=bad)
    with pytest.raises(ValueError, match="either scale=... or margin"):
        quantize_scaled([1.0], "e4m3fn", scale=2.0, margin=1)
    with pytest.raises(ValueError, match="either scale=... or margin"):
        quantize_scaled([1.0], "e4m3fn", scale=2.0, power_of_two=True)
    with pytest.raises(ValueError, match="margin must be >= 0"):
        amax_scale([1.0], "e4m3fn", margin=-1)
    with pytest.raises(TypeError, match="margin must be an int"):
        quantize_scaled([1.0], "e4m3fn", margin=1.5)
    with pytest.raises(TypeError, match="boolean"):
        quantize_scaled(np.array([True, False]), "e4m3fn")
    with pytest.raises(TypeError, match="complex"):
        mx_quantize(np.ones(4, dtype=complex))
    with pytest.raises(TypeError, match="real numbers"):
        amax_scale(["a"], "e4m3fn")
    # a scale float64 cannot hold
    with pytest.raises(ValueError, match="not a positive float64.*too small"):
        amax_scale(5e-324, "e4m3fn")
    with pytest.raises(ValueError, match="not a positive float64"):
        amax_scale(5e-324, "e4m3fn", power_of_two=True)
    with pytest.raises(ValueError, match="not a positive float64"):
        amax_scale(1e300, "e2m1", margin=1100)


# ============================================================ one core: the multiply convention

@pytest.mark.parametrize("name", ["e4m3fn", "e5m2", "e2m1", "e3m2", "fp16", "e4m3fnuz"])
def test_quantize_scaled_through_the_core_against_exact_reference(name, monkeypatch):
    """quantize_scaled / CurrentScaling / DelayedScaling run the quantisation core's step with
    Transformer Engine's multiply convention: values = round(fl64(x * scale)), saturating,
    dequantised as values / scale. Reference: the float64 product checked against the exact
    Fraction product (within half an ulp, so it is the IEEE product), rounded by the
    Fraction-exact oracles.reference_round; stochastic rounding against floatlab.round's
    general path with the same seed (same values, same draws)."""
    import floatlab.rounding as core
    from floatlab.quant.scalers import CurrentScaling

    fmt = get_format(name)
    rng = np.random.default_rng(11)
    x = rng.standard_normal(300) * np.exp(rng.normal(0, 2, 300))
    x[:20] = 0.0
    x[20:40] *= 1e-6  # far below the amax: subnormal and flushed elements
    modes = ("nearest_even", "toward_zero", "up", "down", "nearest_away")
    for scale in (amax_scale(x, name), amax_scale(x, name) * 3.7, 0.3 * fmt.max):
        products = x * scale
        for p, v in zip(products[:50].tolist(), x[:50].tolist(), strict=True):
            exact = Fraction(v) * Fraction(scale)
            assert abs(Fraction(p) - exact) <= Fraction(math.ulp(p)) / 2
        expected = reference_round(products, fmt, modes, saturate=True)
        threshold = fmt.max + math.ldexp(1.0, fmt.emax - fmt.man_bits - 1)
        beyond = np.abs(products) > threshold
        if fmt.max_code & 1:
            beyond |= np.abs(products) == threshold
        for mode in modes:
            q = quantize_scaled(x, name, scale=scale, rounding=mode)
            assert_same(q.values, expected[mode], x, f"{name} {mode} {scale}")
            assert q.n_saturated == int(np.count_nonzero(beyond))
            assert np.array_equal(q.dequantize(), q.values / scale)
        got = quantize_scaled(x, name, scale=scale, rounding="stochastic", rng=7)
        with monkeypatch.context() as m:
            m.setattr(core, "_FAST_PATHS", False)
            general = floatlab.round(products, fmt, rounding="stochastic", saturate=True,
                                     rng=7)
        assert np.array_equal(got.values.view(np.uint64), general.view(np.uint64))
    current = CurrentScaling(name).quantize(x)
    assert_same(current.values, reference_round(x * amax_scale(x, name), fmt,
                                                ("nearest_even",), saturate=True)["nearest_even"],
                x, name)
    delayed = DelayedScaling(name, history_len=2)
    delayed.quantize(x * 0.5)
    second = delayed.quantize(x)  # the history's scale: 0.5 amax, so x saturates
    assert second.scale == amax_scale(x * 0.5, name) and second.n_saturated > 0
    assert_same(second.values, reference_round(x * second.scale, fmt, ("nearest_even",),
                                               saturate=True)["nearest_even"], x, name)


def test_one_nonfinite_error_helper():
    import importlib

    from floatlab.quant import blocks, delayed

    quantize_mod = importlib.import_module("floatlab.quant.quantize")  # not the function
    for module in (delayed, quantize_mod):
        assert not hasattr(module, "_raise_nonfinite")
    assert quantize_mod.raise_nonfinite is delayed.raise_nonfinite is blocks.raise_nonfinite
    with pytest.raises(ValueError, match="1 NaN and 0 inf values.*amax is undefined.*scale"):
        blocks.raise_nonfinite(np.array([np.nan]), "amax", "its amax is undefined", "Pass a "
                               "scale.")


# ============================================================ Transformer Engine's float32 order

def fraction_to_float32(value: Fraction) -> float:
    """value rounded to float32, nearest even, exactly (Fractions; finite results only)."""
    if value == 0:
        return 0.0
    sign, mag = (-1, -value) if value < 0 else (1, value)
    quantum = Fraction(2) ** (max(floor_log2(mag), -126) - 23)
    n = mag / quantum
    whole = n.numerator // n.denominator
    rest = n - whole
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and whole % 2):
        whole += 1
    return sign * float(whole * quantum)


def _te_reference(x32: np.ndarray, fmt, scale: float):
    """TE's quantise / dequantise from the definition, exactly: p = fl32(x * scale), values =
    fp8(p) saturating (oracles.reference_round), scale_inv = fl32(1 / scale), dequantised =
    fl32(values * scale_inv); plus how many |p| lie beyond the overflow threshold."""
    s = Fraction(scale)  # positive: every product keeps the sign of v (zeros included)
    p = np.array([math.copysign(fraction_to_float32(Fraction(v) * s), v)
                  for v in x32.tolist()])
    values = reference_round(p, fmt, ("nearest_even",), saturate=True)["nearest_even"]
    inv = Fraction(fraction_to_float32(1 / s))
    deq = np.array([math.copysign(fraction_to_float32(Fraction(v) * inv), v)
                    for v in values.tolist()])
    threshold = fmt.max + math.ldexp(1.0, fmt.emax - fmt.man_bits - 1)
    beyond = np.abs(p) > threshold
    if fmt.max_code & 1:
        beyond |= np.abs(p) == threshold
    return values, deq, int(np.count_nonzero(beyond))


def _adversarial_float32(fmt, scale: float, rng) -> np.ndarray:
    """float32 inputs whose products with ``scale`` land on and around the format's midpoints
    (ties), at and beyond max (saturation), among its subnormals, on zeros of both signs, plus
    random values over many binades."""
    from floatlab.codec import decode

    grid = np.unique(np.abs(decode(np.arange(1 << fmt.bits), fmt)))
    grid = grid[np.isfinite(grid)]
    mids = (grid[:-1] + grid[1:]) / 2
    targets = np.concatenate([grid, mids, [fmt.max * 1.03, fmt.max * 4, grid[1] / 3]])
    near = (targets / scale).astype(np.float32)
    up, down = np.nextafter(near, np.float32(np.inf)), np.nextafter(near, np.float32(0))
    rand = (rng.standard_normal(400) * np.exp(rng.normal(0, 3, 400))).astype(np.float32)
    x = np.concatenate([near, up, down, rand, [0.0, -0.0]]).astype(np.float32)
    signs = np.where(rng.random(x.size) < 0.5, -1, 1).astype(np.float32)
    return x * signs


@pytest.mark.parametrize("name", ["e4m3fn", "e5m2"])
def test_te_float32_order_against_exact_reference(name):
    """float32=True follows Transformer Engine's order exactly: the scale is the float32
    quotient fl32(fmax * 2**-margin / amax), the element is fp8(fl32(x * scale)) saturating
    (a double rounding on purpose), dequantised as fl32(fp8 * fl32(1 / scale)); the saturation
    count is taken on the float32 products. Current and delayed scaling, margins, explicit
    scales (rounded to float32) and TE's pow2 scales (mantissa bits cleared)."""
    from floatlab.quant.scalers import CurrentScaling

    fmt = get_format(name)
    rng = np.random.default_rng(5)
    for amax in (3.0, 0.7, 1e-3, 2.5e4, 0.1):
        for margin in (0, 1, 3):
            x = _adversarial_float32(fmt, fmt.max / amax, rng)
            x[0] = np.float32(amax)  # this amax (the adversarial values stay below it)
            x = np.where(np.abs(x) <= np.float32(amax), x, np.float32(0.0)).astype(np.float32)
            a32 = Fraction(float(np.max(np.abs(x))))
            scale = fraction_to_float32(Fraction(fmt.max) / 2**margin / a32)
            q = CurrentScaling(name, margin, float32=True).quantize(x)
            assert q.scale == scale and q.float32
            values, deq, n = _te_reference(x, fmt, scale)
            assert_same(q.values, values, x, f"{name} amax {amax} margin {margin}")
            assert q.values.dtype == np.float32 and q.n_saturated == n
            assert_same(q.dequantize(np.float32), deq, x, "dequantised")
            assert_same(q.dequantize(), deq, x, "dequantised, float64")
            pow2 = CurrentScaling(name, margin, power_of_two=True, float32=True).scale_for(amax)
            assert pow2 == 2.0 ** floor_log2(Fraction(scale))
    # explicit scales, saturating ones included: the scale is rounded to float32 first
    for scale in (3.0, 0.1, 448 / 3.5 * 8, 1e-3):
        x = _adversarial_float32(fmt, scale, rng)
        q = quantize_scaled(x, name, scale=scale, float32=True)
        scale32 = float(np.float32(scale))
        assert q.scale == scale32
        values, deq, n = _te_reference(x, fmt, scale32)
        assert_same(q.values, values, x, f"{name} scale {scale}")
        assert q.n_saturated == n > 0          # the inputs reach 4x max: saturation
        assert_same(q.dequantize(np.float32), deq, x, "dequantised")
    # delayed scaling: the history's float32 scale, a spike saturating
    ds = DelayedScaling(name, history_len=2, float32=True)
    base = rng.standard_normal(300).astype(np.float32)
    for factor in (1.0, 0.5, 8.0):
        x = base * np.float32(factor)
        expected = ds.scale if ds.scale is not None else fraction_to_float32(
            Fraction(fmt.max) / Fraction(float(np.max(np.abs(x)))))
        q = ds.quantize(x)
        assert q.scale == expected
        values, deq, n = _te_reference(x, fmt, expected)
        assert_same(q.values, values, x, f"{name} delayed x{factor}")
        assert q.n_saturated == n and (n > 0) == (factor == 8.0)


def test_te_float32_order_rounds_twice_on_purpose():
    """The float32 product lands on an E4M3 midpoint that the exact product is above: TE's
    order ties to the even 256, the float64 order rounds the exact product up to 288."""
    x = np.nextafter(np.float32(272 / 3), np.float32(np.inf))
    assert Fraction(float(x)) * 3 > 272 and np.float32(x) * np.float32(3) == np.float32(272)
    assert quantize_scaled([x], "e4m3fn", scale=3.0, float32=True).values.tolist() == [256.0]
    assert quantize_scaled([x], "e4m3fn", scale=3.0).values.tolist() == [288.0]


def test_te_float32_scale_edges():
    """amax 0 gives scale 1 (TE's initial scale); an amax so small that the float32 quotient
    overflows gives float32's max (TE's value for inf); epsilon floors amax; float64 inputs
    are rounded to float32 first; formats float32 cannot hold and huge margins are refused."""
    from floatlab.quant.scalers import CurrentScaling

    assert CurrentScaling("e4m3fn", float32=True).scale_for(0.0) == 1.0
    f32max = float(np.finfo(np.float32).max)
    assert CurrentScaling("e4m3fn", float32=True).scale_for(1e-44) == f32max
    assert CurrentScaling("e4m3fn", amax_epsilon=0.5, float32=True).scale_for(1e-3) == 896.0
    q = quantize_scaled(np.array([0.1, 1.0 + 2.0**-30]), "e4m3fn", float32=True)
    assert q.scale == 448.0 and q.values.dtype == np.float32       # 1 + 2**-30 -> 1.0 first
    with pytest.raises(ValueError, match="beyond float32's range"):
        quantize_scaled(np.array([1e39, 1.0]), "e4m3fn", scale=1e-40, float32=True)
    with pytest.raises(ValueError, match="does not fit in float32"):
        quantize_scaled([1.0], "float64", scale=1.0, float32=True)
    with pytest.raises(ValueError, match="normal float32"):
        CurrentScaling("e4m3fn", margin=200, float32=True).scale_for(1.0)
    with pytest.raises(TypeError, match="float32"):
        CurrentScaling("e4m3fn", float32="yes")


@pytest.mark.parametrize("power_of_two", [False, True])
def test_te_float32_scale_of_an_amax_below_float32s_subnormals(power_of_two):
    """TE's amax is a float32: a float64 amax that rounds to 0 there (1e-300, 1e-50, an
    amax_epsilon of 1e-50) is TE's amax 0, scale 1.0 -- it was a ZeroDivisionError in the
    float32 division; the values, float32(x) = 0, quantise to 0."""
    from floatlab.quant.scalers import CurrentScaling, DelayedScaling

    cs = CurrentScaling("e4m3fn", power_of_two=power_of_two, float32=True)
    assert cs.scale_for(1e-300) == cs.scale_for(2.0**-151) == 1.0
    q = cs.quantize([1e-300, -5e-301])
    assert q.scale == 1.0 and q.values.tolist() == [0.0, -0.0]
    eps = CurrentScaling("e4m3fn", amax_epsilon=1e-50, float32=True)
    assert eps.quantize([0.0]).scale == 1.0
    ds = DelayedScaling("e4m3fn", history_len=1, power_of_two=power_of_two, float32=True)
    ds.quantize([1e-300])
    assert ds.scale == 1.0 and ds.quantize([0.5]).values.tolist() == [0.5]
    # the smallest float32 subnormal stays an amax: float32's max, as test_te_float32_scale_edges
    assert cs.scale_for(2.0**-149) == (2.0**127 if power_of_two else
                                       float(np.finfo(np.float32).max))
    assert "float32" in repr(DelayedScaling("e5m2", float32=True))
    assert repr(q).endswith("0 saturated, float32)")


@pytest.mark.parametrize("power_of_two", [False, True])
@pytest.mark.parametrize("name", ["e4m3fn", "e5m2"])
def test_rowwise_float32_order_against_exact_reference(name, power_of_two):
    """floatlab.quant.axiswise follows torchao's order exactly, row by row: scale =
    fl32(fmax / max(amax, 1e-12)) (power_of_two: 2**floor(log2(scale)), exactly), element =
    fp8(clamp(fl32(x * scale))), dequantised fl32(fp8 * fl32(1 / scale)). Rows of midpoints
    (ties), values one float32 ulp around them, subnormals of the format, signed zeros, an
    all-zero row; inputs unchanged."""
    from floatlab.quant.axiswise import quantize_rowwise

    fmt = get_format(name)
    rng = np.random.default_rng(9)
    rows = []
    for amax in (3.0, 0.7, 1e-3, 2.5e4, 0.1, 1e-30):
        x = _adversarial_float32(fmt, fmt.max / amax, rng)
        x = np.where(np.abs(x) <= np.float32(amax), x, np.float32(0.0))
        x[0] = np.float32(amax)
        rows.append(x.astype(np.float32))
    rows.append(np.array([0.0, -0.0] * (rows[0].size // 2), np.float32))
    x = np.stack(rows)
    before = x.copy()
    q = quantize_rowwise(x, name, power_of_two=power_of_two, count=True)
    assert np.array_equal(x, before)
    for i, row in enumerate(x):
        amax = Fraction(max(float(np.max(np.abs(row))), 1e-12))
        scale = fraction_to_float32(Fraction(fmt.max) / amax)
        if power_of_two:
            scale = 2.0 ** floor_log2(Fraction(scale))
        assert float(q.scales[i, 0]) == scale
        values, deq, n = _te_reference(row, fmt, scale)
        assert_same(q.values[i], values, row, f"{name} row {i}")
        assert_same(q.dequantize()[i], deq, row, f"{name} row {i} dequantised")
        assert n == 0        # a row's own amax never lands beyond the overflow threshold
    assert q.n_saturated == 0 and q.values.dtype == np.float32
    with pytest.raises(ValueError, match="NaN"):
        quantize_rowwise(np.array([[1.0, np.nan]]), name)
    with pytest.raises(ValueError, match="cannot take rowwise"):
        quantize_rowwise(np.ones((2, 2)), "float64")


def test_rfloor_scale_rule_is_msamps_and_equals_rceil_for_fp8():
    """"rfloor" (MS-AMP's ScalingMeta, TE's force_pow_2_scales): s = 2**-j with 2**j the
    float32 quotient fmax / amax rounded down to a power of two, against the exact Fraction
    definition; for E4M3 and E5M2 it equals "rceil" on every float32 amax of a binade (the
    rules are invariant under powers of two away from the range ends), for float16 it
    differs on one amax per binade (where fl32(65504 / amax) rounds up to a power of two)."""
    from floatlab.quant.scales import pow2_exponents

    rng = np.random.default_rng(2)
    amax = np.concatenate([(rng.standard_normal(300) * np.exp(rng.normal(0, 8, 300))),
                           [448.0, 224.0, 1.0, 3.0, 57344.0, 65504.0, 2.0**-126, 1e-40]])
    amax = np.abs(amax).astype(np.float32)
    for name in ("e4m3fn", "e5m2", "float16"):
        fmt = get_format(name)
        k = pow2_exponents(amax, fmt, "rfloor")
        for a, got in zip(amax.tolist(), k.tolist(), strict=True):
            q = fraction_to_float32(Fraction(fmt.max) / Fraction(a)) if a else math.inf
            if q > float(np.finfo(np.float32).max):  # float32's quotient overflows: the
                # float32 significand, exponent unbounded (a * 2**64 and the quotient exact)
                q = fraction_to_float32(Fraction(fmt.max) / (Fraction(a) * 2**64))
                assert got == -floor_log2(Fraction(q)) - 64, (name, a)
            else:
                assert got == -floor_log2(Fraction(q)), (name, a)
        binade = np.arange(0x3F800000, 0x40000000, dtype=np.uint32).view(np.float32)
        differ = np.count_nonzero(pow2_exponents(binade, fmt, "rfloor")
                                  != pow2_exponents(binade, fmt, "rceil"))
        assert differ == (1 if name == "float16" else 0)
    assert pow2_exponents(np.float32([0.0]), get_format("e4m3fn"), "rfloor")[0] < -1000


@pytest.mark.parametrize("algo, length", [("max", 1), ("most_recent", 4)])
@pytest.mark.parametrize("float32", [False, True])
def test_delayed_scaling_keeps_its_scale_when_the_reduced_amax_is_zero(algo, length, float32):
    """Transformer Engine's delayed update keeps the previous scale when the reduced amax is 0
    (delayed_scaling.cu: 'isfinite(amax) && amax > 0' or the old scale); floatlab reset it to
    1.0, so after an all-zero gradient the next E5M2 tensor of 1e-5's was flushed to zero."""
    from floatlab.quant.scalers import DelayedScaling

    ds = DelayedScaling("e5m2", history_len=length, amax_compute_algo=algo, float32=float32)
    first = ds.quantize([1e-5, -2e-5]).scale           # its own amax: 57344 / 2e-5
    assert ds.quantize(np.zeros(3)).scale == first     # the history's scale
    assert ds.scale == first                           # reduced amax 0: kept, not 1.0
    kept = ds.quantize([1e-5, 2e-5])
    assert kept.scale == first and np.count_nonzero(kept.dequantize()) == 2
    fresh = DelayedScaling("e5m2", history_len=length, amax_compute_algo=algo)
    fresh.quantize(np.zeros(2))
    assert fresh.scale == 1.0                          # no scale before: TE's initial 1.0


@pytest.mark.parametrize("algo", ["max", "most_recent"])
@pytest.mark.parametrize("float32", [False, True])
def test_delayed_scaling_records_a_nonfinite_amax_and_keeps_its_scale_when_asked(algo, float32):
    """nonfinite="record" is Transformer Engine's delayed update (delayed_scaling.cu: 'amax ==
    inf or amax == nan: set scale to the previous scale (or 1)'; amax kernels reduce fmaxf from
    0, so NaN entries are ignored). The default still refuses NaN / inf, with its message."""
    from floatlab.quant.scalers import DelayedScaling

    with pytest.raises(ValueError, match="0 NaN and 1 inf values.*amax is undefined"):
        DelayedScaling("e5m2", float32=float32).quantize([np.inf, 1.0])
    ds = DelayedScaling("e5m2", history_len=2, amax_compute_algo=algo, float32=float32,
                        nonfinite="record")
    x = np.array([np.inf, np.nan, -1.0, 0.5])
    before = x.copy()
    first = ds.quantize([2.0, -1.0]).scale                # 57344 / 2
    q = ds.quantize(x)
    assert_same(x, before, before)                        # the input is not written to
    assert q.scale == first and ds.history == (2.0, math.inf)
    assert q.values[0] == np.inf and np.isnan(q.values[1]) and q.values[2] == -first
    assert ds.scale == first                              # the inf keeps the scale
    # "max": the inf holds the scale until it leaves the history; "most_recent": the next amax
    after = ds.quantize([4.0]).scale
    assert after == first and ds.history == (math.inf, 4.0)
    assert ds.scale == (first if algo == "max" else ds._scale_of(4.0))
    ds.quantize([4.0])
    assert ds.scale == ds._scale_of(4.0)                  # the inf is gone: 57344 / 4
    # NaN entries are left out of the amax (an all-NaN tensor: 0), as TE's fmaxf
    ds.quantize([np.nan, -8.0])
    assert ds.history[-1] == 8.0
    ds.quantize([np.nan])
    assert ds.history[-1] == 0.0
    # a first call on an inf: TE's initial scale 1.0; an unknown mode is refused
    fresh = DelayedScaling("e4m3fn", nonfinite="record")
    assert fresh.quantize([np.inf, 1.0]).scale == 1.0 and fresh.scale == 1.0
    assert "nonfinite='record'" in repr(fresh)
    with pytest.raises(ValueError, match="nonfinite must be 'raise'.*or 'record'"):
        DelayedScaling("e4m3fn", nonfinite="skip")
