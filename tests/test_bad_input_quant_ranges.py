"""Quantisation at the ends of the float ranges: tiny and huge tensors under a caller's
np.errstate, and scales that float32 cannot hold (found by the unusual-input survey)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import floatlab
from floatlab.quant.quantize import quantize_elements


def _calls(scheme):
    rng = 0 if floatlab.get_scheme(scheme).rounding == "stochastic" else None

    def dequantize(x):
        q = floatlab.quantize(x, scheme, rng)
        return floatlab.dequantize(q.codes, q.scales, scheme, shape=q.shape, dtype=x.dtype,
                                   global_scale=q.global_scale)

    return [lambda x: floatlab.quantize(x, scheme, rng).dequantize(),
            lambda x: floatlab.fake_quantize(x, scheme, rng),
            lambda x: floatlab.fake_quantize(x, scheme, rng, stats=True)[0],
            lambda x: floatlab.fake_quantize(x, scheme, rng, rotated=True),
            lambda x: quantize_elements(x, scheme, rng)[0] if not (
                floatlab.get_scheme(scheme).hadamard or scheme == "nf4_dq") else x,
            dequantize]


@pytest.mark.parametrize("scheme", ["nf4", "nf4_dq", "dynamic8", "int8_row",
                                    floatlab.get_scheme("nvfp4").replace(hadamard=16)])
@pytest.mark.parametrize("exponent", [-140, -130, -125])
def test_tiny_float32_tensors_quantise_under_errstate_raise(scheme, exponent):
    # The dequantising product element * scale in float32 (a scale clamped to float32's
    # smallest normal) and the Hadamard transform of tiny float32 values round into float32's
    # subnormals: the emulation's own rounding, which a caller's np.errstate(all="raise")
    # turned into "FloatingPointError: underflow encountered in multiply / matmul". Same
    # values now, no error.
    x = np.ldexp(np.random.default_rng(0).standard_normal((4, 64)), exponent).astype(np.float32)
    for call in _calls(scheme):
        want = call(x)
        with np.errstate(all="raise"):
            np.testing.assert_array_equal(call(x), want)
    with np.errstate(all="raise"):
        assert floatlab.quantize(x, scheme).stats.n == x.size


def test_nvfp4_tensor_beyond_float32_is_refused_without_an_overflow_first():
    # A float64 tensor amax beyond float32's range overflowed the cast to float32 first: a
    # RuntimeWarning before the ValueError, and under np.errstate(all="raise") a
    # FloatingPointError instead of the error that names the problem.
    x = np.array([[1e300, -2.0, 3.0, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="global scale outside float32"):
            floatlab.quantize(x, "nvfp4")
        with np.errstate(all="raise"), pytest.raises(ValueError, match="global scale outside"):
            floatlab.fake_quantize(x, "nvfp4")


@pytest.mark.parametrize("exponent, dtype", [(125, np.float32), (125, np.float64),
                                             (130, np.float64)])
def test_dq8_absmaxes_whose_float32_mean_overflows_name_the_cause(exponent, dtype):
    # nf4_dq stores the block absmaxes and their float32 mean (bitsandbytes' offset): a finite
    # tensor whose absmaxes' float32 sum overflows (float64 absmaxes beyond float32's range are
    # clamped to its max, as every float32 scale is) was refused as "x holds 0 NaN and 4 inf
    # values", x holding none.
    x = np.ldexp(np.random.default_rng(0).standard_normal((4, 64)), exponent).astype(dtype)
    for call in (lambda: floatlab.quantize(x, "nf4_dq"),
                 lambda: floatlab.fake_quantize(x, "nf4_dq")):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(ValueError, match="dq8 scales store.*float32 sum for the mean"
                               ".*scale the tensor down"):
                call()
    small = floatlab.quantize(np.ldexp(x, -10), "nf4_dq")  # 2**-10 of it: no overflow
    assert np.isfinite(small.dequantize()).all()


def test_scheme_takes_numpy_ints_for_random_bits_and_hadamard():
    # margin, axis and block took np.int64 (a value read from an array or a config), but
    # random_bits=np.int64(8) was refused as "must be None or an int in 1..16 ..., got
    # np.int64(8)" and hadamard=np.int64(16) as "a power of two >= 2 ..., got np.int64(16)":
    # errors claiming the value breaks the rule it keeps. Taken now, as Python ints.
    nvfp4 = floatlab.get_scheme("nvfp4")
    s = nvfp4.replace(rounding="stochastic", random_bits=np.int64(8), hadamard=np.int32(16))
    assert s == nvfp4.replace(rounding="stochastic", random_bits=8, hadamard=16)
    assert type(s.random_bits) is int and type(s.hadamard) is int
    x = np.random.default_rng(0).standard_normal((2, 32)).astype(np.float32)
    np.testing.assert_array_equal(
        floatlab.fake_quantize(x, s, 0),
        floatlab.fake_quantize(x, nvfp4.replace(rounding="stochastic", random_bits=8,
                                                hadamard=16), 0))
    for label, bad in (("random_bits", np.bool_(True)), ("hadamard", np.bool_(True)),
                       ("random_bits", np.int64(17)), ("hadamard", np.int64(12))):
        with pytest.raises(ValueError, match=label):
            nvfp4.replace(rounding="stochastic", **{label: bad})


@pytest.mark.parametrize("scheme, shape, block", [
    ("mxfp8", (0,), (1,)), ("fp8_rowwise", (3, 0), (1, 1)), ("fp8_1x128", (0, 200), (1, 128)),
    ("fp8_128x128", (4, 0, 5), (1, 1, 5)), ("nvfp4", (2, 0), (1, 1))])
def test_quantize_elements_of_an_empty_tensor(scheme, shape, block):
    # quantize and fake_quantize take empty tensors (shape kept, no scales), but
    # quantize_elements divided the padded shape by a block grid of 0: ZeroDivisionError.
    x = np.zeros(shape, np.float32)
    values, scales, got_block, stats = quantize_elements(x, scheme, stats=True)
    assert values.shape == shape and values.dtype == np.float32 and scales.size == 0
    assert got_block == block and stats.n == 0
    assert floatlab.fake_quantize(x, scheme).shape == shape


@pytest.mark.parametrize("power_of_two", [False, True])
def test_rowwise_float32_cast_of_float64_input_at_the_range_ends(power_of_two):
    # torchao's rowwise scaling reads x as float32. A finite float64 x beyond float32's range
    # cast to inf and was refused as "x holds 0 NaN and 128 inf values", x holding none; a
    # float64 x in float32's underflow range (1e-310) raised "underflow encountered in cast"
    # under np.errstate(all="raise"), the cast's own rounding.
    from floatlab.quant.axiswise import fake_quantize_rowwise, quantize_rowwise

    x = np.random.default_rng(0).standard_normal((4, 32))
    for call in (lambda v: quantize_rowwise(v, "e4m3fn", power_of_two=power_of_two),
                 lambda v: fake_quantize_rowwise(v, "e4m3fn", power_of_two=power_of_two)):
        with pytest.raises(ValueError, match="finite values beyond float32's range.*scale x "
                           "down"):
            call(x * 1e300)
        huge_and_nan = x * 1e300
        huge_and_nan[1, 3] = np.nan
        with pytest.raises(ValueError, match="1 NaN and 0 inf"):  # x's own, not the cast's
            call(huge_and_nan)
        tiny = x * 1e-310
        want = call(tiny)
        with np.errstate(all="raise"):
            got = call(tiny)
        if isinstance(want, tuple):  # fake_quantize_rowwise: (values, n_saturated)
            np.testing.assert_array_equal(got[0], want[0])
        else:
            np.testing.assert_array_equal(got.dequantize(), want.dequantize())


@pytest.mark.parametrize("float32", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_quantize_scaled_of_tiny_tensors_under_errstate_raise(float32, dtype):
    # Transformer Engine's per-tensor scaling of a tiny tensor: dequantising (values / scale,
    # or float32(1 / scale) and the float32 product) and float32=True's cast of float64
    # subnormals land in float32's subnormals, the emulation's own rounding; under
    # np.errstate(all="raise") that was "underflow encountered in divide / cast".
    from floatlab.quant.delayed import quantize_scaled

    x0 = np.random.default_rng(0).standard_normal((4, 32))
    for exponent in (-149, -140, -126, -120):
        x = np.ldexp(x0, exponent).astype(dtype)
        for out in (np.float32, np.float64):
            want = quantize_scaled(x, "e4m3fn", float32=float32).dequantize(out)
            with np.errstate(all="raise"):
                got = quantize_scaled(x, "e4m3fn", float32=float32).dequantize(out)
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("scale", ["float32", "bf16", "e8m0", "pow2", "dq8"])
def test_global_scale_needs_e4m3_block_scales(scale):
    # Scheme took global_scale=True with float32 / bf16 block scales, but their max times the
    # element's max overflows float32, so every quantize of every tensor (amax 3.1) raised
    # "the tensor amax 3.10634 gives a global scale outside float32's normal range; scale the
    # tensor first". The scheme is refused when built, naming the fix.
    with pytest.raises(ValueError, match="global_scale is NVFP4's second level for E4M3.*"
                       "use scale='e4m3fn' or drop global_scale"):
        floatlab.Scheme("e2m1", 16, scale, "floor", global_scale=True)
    s = floatlab.Scheme("e2m1", 16, "e4m3fn", "even", global_scale=True)
    assert s == floatlab.get_scheme("nvfp4")
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    assert floatlab.quantize(x, s).global_scale > 0


@pytest.mark.parametrize("element", ["int8", "e4m3fn", "dynamic8"])
def test_two_level_scales_of_tiny_tensors_under_errstate_raise(element):
    # Two-level schemes off the fused NVFP4 path: the effective scale, the float32 product
    # g * block scale (torchao's total scale), lands in float32's subnormals for tiny tensors;
    # under np.errstate(all="raise") that was "underflow encountered in multiply".
    s = floatlab.Scheme(element, 16, "e4m3fn", "even", global_scale=True)
    x = np.ldexp(np.random.default_rng(3).standard_normal((4, 32)), -112)  # g near 2**-125
    x[:, 16:] = 0.0  # all-zero blocks: the smallest block scale, 2**-6, times g
    for dtype in (np.float32, np.float64):
        xd = x.astype(dtype)
        want = floatlab.fake_quantize(xd, s)
        with np.errstate(all="raise"):
            np.testing.assert_array_equal(floatlab.fake_quantize(xd, s), want)
            np.testing.assert_array_equal(floatlab.quantize(xd, s).dequantize(), want)


@pytest.mark.parametrize("float32", [False, True])
@pytest.mark.parametrize("fast_rows", [True, False])
def test_per_tensor_and_rowwise_dequantising_near_float32_max_is_inf_silently(float32,
                                                                           fast_rows):
    # Power-of-two scales on a float32 tensor whose amax is near float32's max: 3.4e38 * 2**-120
    # = 255.8 rounds to E4M3's 256, and the float32 product 256 * 2**120 = 2**128 is inf (the
    # exact value rounded to float32), but NumPy's "overflow encountered in multiply / divide"
    # RuntimeWarning leaked from ScaledTensor.dequantize(np.float32) and fake_quantize_rowwise.
    from oracles import reference_round

    from floatlab.quant import axiswise
    from floatlab.quant.scalers import CurrentScaling, DelayedScaling

    x = np.array([3.4e38, -3.3e38, 3e38, 1e38, 1.0, -0.0], np.float32)
    e4m3, fp32 = floatlab.get_format("e4m3fn"), floatlab.get_format("float32")
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        tensors = [s.quantize(x) for s in (CurrentScaling(e4m3, power_of_two=True,
                                                          float32=float32),
                                           DelayedScaling(e4m3, power_of_two=True,
                                                          float32=float32))]
        outs = [t.dequantize(np.float32) for t in tensors]
        old, axiswise._FAST_ROWS = axiswise._FAST_ROWS, fast_rows
        try:
            rows, _ = axiswise.fake_quantize_rowwise(x[None], e4m3, power_of_two=True)
        finally:
            axiswise._FAST_ROWS = old
    scale = tensors[0].scale
    assert scale == 2.0**-120 and tensors[1].scale == scale
    exact = reference_round(x.astype(np.float64) * scale, e4m3, ["nearest_even"],
                            saturate=True)["nearest_even"] / scale
    want = reference_round(exact, fp32, ["nearest_even"])["nearest_even"]
    assert np.isinf(want[:2]).all()
    for out in [*outs, rows[0]]:
        assert out.dtype == np.float32
        np.testing.assert_array_equal(out.astype(np.float64), want)
