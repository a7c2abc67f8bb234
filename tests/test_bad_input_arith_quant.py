"""Bad input to the arithmetic, accumulation and quantisation API (DEVELOPERS.md, "Bad input"):
each case below was a silent wrong answer, a truthy-string surprise or a crash deep inside NumPy
before; each now gets an error naming the argument and the fix. Valid edge input (empty, 0-d,
float16, views) keeps working."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

import floatlab
from floatlab import quant

X = np.linspace(-1, 1, 64)


# --------------------------------------------------------------------------- FloatArray

@pytest.mark.parametrize("call, option", [
    (lambda x: np.add(x, 1, dtype=np.float32), "dtype"),
    (lambda x: np.multiply(x, 2, casting="unsafe"), "casting"),
    (lambda x: np.add.reduce(x, keepdims=True), "keepdims"),
    (lambda x: np.add.reduce(x, dtype=np.float32), "dtype"),
    (lambda x: np.add.reduce(x, initial=5.0), "initial"),
    (lambda x: np.add.reduce(x, where=np.ones(64, bool)), "where"),
    (lambda x: np.add.accumulate(x, dtype=np.float32), "dtype"),
])
def test_ufunc_options_that_would_be_ignored_are_refused(call, option):
    """They were dropped without a word (np.add.reduce(x, initial=5) summed without the 5)."""
    x = floatlab.array(X, "fp16")
    with pytest.raises(TypeError, match=f"on a FloatArray takes no {option}: .*np.asarray"):
        call(x)


def test_neutral_ufunc_options_still_work():
    x = floatlab.array(X, "fp16")
    assert np.add.reduce(x, axis=None, dtype=None, keepdims=False).values == x.sum().values
    assert np.array_equal(np.add(x, 1, casting="same_kind").values, (x + 1).values)
    assert np.array_equal(np.add(x, 1, where=True).values, (x + 1).values)


@pytest.mark.parametrize("axis, error, message", [
    (3, ValueError, "axis 3 is out of range for an array of 2 dimension"),
    (-3, ValueError, "axis -3 is out of range"),
    (0.0, TypeError, "axis must be an int or None, got 0.0"),
    ((0, 1), TypeError, r"axis must be an int or None, got \(0, 1\)"),
])
def test_mean_checks_its_axis(axis, error, message):
    """x.mean(axis=3) raised IndexError: tuple index out of range; np.mean too."""
    x = floatlab.array(np.ones((2, 3)), "fp16")
    with pytest.raises(error, match=message):
        x.mean(axis=axis)
    with pytest.raises(error, match=message):
        np.mean(x, axis=axis)
    assert x.mean(axis=-1).values.tolist() == [1.0, 1.0]


def test_assigning_a_floatarray_of_another_format_casts_it():
    """y[0] = array(0.1, "float32") stored 0.1 in an e4m3fn array: not an e4m3fn value."""
    y = floatlab.array([0.0, 0.0], "e4m3fn")
    y[0] = floatlab.array(0.1, "float32")
    assert y.values.tolist() == [floatlab.round(0.1, "e4m3fn").item(), 0.0]
    z = floatlab.array([0.0, 0.0, 0.0], "fp16")
    z[1:] = floatlab.array([0.1, 70000.0], "float32")
    assert z.values.tolist() == [0.0, floatlab.round(0.1, "fp16").item(), np.inf]
    same = floatlab.array([0.0, 0.0], "fp16")
    same[0] = floatlab.array(0.1, "fp16")
    assert same.values[0] == floatlab.round(0.1, "fp16")


def test_fma_refuses_shapes_that_do_not_broadcast():
    """A numpy 'shape mismatch: objects cannot be broadcast' from deep inside before."""
    with pytest.raises(ValueError, match=r"fma: a, b and c have shapes \(3,\), \(4,\) and \(\)"):
        floatlab.fma(np.ones(3), np.ones(4), 1.0, fmt="fp16")
    a, b = floatlab.array(np.ones(3), "fp16"), floatlab.array(np.ones(4), "fp16")
    with pytest.raises(ValueError, match="do not broadcast together"):
        floatlab.fma(a, b, a)


def test_fma_refuses_a_rounding_or_rng_its_floatarrays_would_ignore():
    """fma(x, x, x, rounding="up") rounded to nearest (the FloatArray's mode), silently."""
    x = floatlab.array([1 + 2.0**-10], "fp16")
    with pytest.raises(ValueError, match="rounding='up', but FloatArray operands round with "
                                         "the first one's mode"):
        floatlab.fma(x, x, x, rounding="up")
    with pytest.raises(ValueError, match="rng= applies to plain operands"):
        floatlab.fma(x, x, x, rng=0)
    assert floatlab.fma(x, x, x, rounding="nearest_even").values == floatlab.fma(x, x, x).values
    up = floatlab.array([1 + 2.0**-10], "fp16", rounding="up")
    assert floatlab.fma(up, up, up, rounding="up").rounding == "up"
    assert float(floatlab.fma(1.0, 3.0, 2.0**-30, fmt="fp16", rounding="up")) == 3.001953125


# --------------------------------------------------------------------------- Accumulator

@pytest.mark.parametrize("bits, error, message", [
    ("3", TypeError, "random_bits must be an int"),
    (3.0, TypeError, "random_bits must be an int"),
    (True, TypeError, "random_bits must be an int"),
    (0, ValueError, "random_bits=0 is out of range: use 1..52"),
    (10**30, ValueError, "out of range: use 1..52"),
])
def test_accumulator_checks_random_bits_when_built(bits, error, message):
    """Accepted by the constructor (repr random_bits='3'), refused only at the first addition."""
    with pytest.raises(error, match=message):
        floatlab.Accumulator("fp16", rounding="stochastic", random_bits=bits)
    acc = floatlab.Accumulator("fp16", rounding="stochastic", random_bits=np.int64(8), rng=0)
    assert acc.random_bits == 8 and type(acc.random_bits) is int


@pytest.mark.parametrize("mode", ["nearest_even", "down", "toward_zero"])
def test_a_chunk_longer_than_the_sum_needs_no_memory_for_its_padding(mode):
    """chunk=2**40 padded a 10-term sum with 2**40 zeros: a MemoryError of 8 TiB."""
    x = np.array([1.0, 2.0**-11, -0.0, 3.0, 2.0**-12] * 2)
    huge = floatlab.Accumulator("fp16", rounding=mode, chunk=2**40)
    small = floatlab.Accumulator("fp16", rounding=mode, chunk=4096)
    assert floatlab.sum(x, huge).tobytes() == floatlab.sum(x, small).tobytes()
    m = x.reshape(2, 5)
    promoted = floatlab.Accumulator("fp16", rounding=mode, chunk=2**40, promote="float32")
    assert floatlab.matmul(m.T, m, promoted).shape == (5, 5)
    assert floatlab.sum(-np.zeros(3), huge).tobytes() == floatlab.sum(-np.zeros(3), small).tobytes()


# --------------------------------------------------------------------------- error profiles

@pytest.mark.parametrize("rng, error, message", [
    ("3", TypeError, "rng must be a numpy.random.Generator, a non-negative int seed"),
    (3.0, TypeError, "rng must be a numpy.random.Generator"),
    (True, TypeError, "rng must be a numpy.random.Generator"),
    (-1, ValueError, "rng seed must be a non-negative int"),
])
def test_significant_digits_checks_its_seed(rng, error, message):
    """rng='3' failed inside numpy's SeedSequence; rng=True was taken as the seed 1."""
    with pytest.raises(error, match=message):
        floatlab.significant_digits(lambda t: t + 1, [1.0], "fp16", rng=rng)
    a = floatlab.significant_digits(lambda t: t + 1, [1.0], "fp16", rng=5)
    b = floatlab.significant_digits(lambda t: t + 1, [1.0], "fp16",
                                    rng=np.random.default_rng(5))
    assert a.tolist() == b.tolist()


def test_significant_digits_checks_n_and_f():
    with pytest.raises(TypeError, match=r"n=30.0: need an int >= 2 runs"):
        floatlab.significant_digits(lambda t: t, [1.0], "fp16", n=30.0)
    with pytest.raises(ValueError, match=r"n=1: need an int >= 2 runs"):
        floatlab.significant_digits(lambda t: t, [1.0], "fp16", n=1)
    with pytest.raises(TypeError, match="f must be a function of one array, got NoneType"):
        floatlab.significant_digits(None, [1.0], "fp16")
    calls = []

    def growing(t):
        calls.append(1)
        return np.ones(len(calls))

    with pytest.raises(ValueError, match=r"f returned shape \(2,\) on run 2 and \(1,\) on run 1"):
        floatlab.significant_digits(growing, [1.0], "fp16", rng=0)


def test_error_profile_needs_one_result_per_input():
    """A result of another shape was broadcast against the reference without a word (or failed
    in np.broadcast_arrays), and the table then indexed past it."""
    with pytest.raises(ValueError, match=r"f returned shape \(5,\) for inputs of shape \(2,\)"):
        floatlab.error_profile(lambda t: np.ones(5), [1.0, 2.0], "fp16")
    with pytest.raises(ValueError, match=r"reference returned shape \(3,\) for inputs of shape"):
        floatlab.error_profile(lambda t: t, [1.0, 2.0], "fp16", reference=lambda t: np.ones(3))
    with pytest.raises(TypeError, match="formats must be a format or a list of them, got None"):
        floatlab.error_profile(lambda t: t, [1.0], None)
    # a numpy type or dtype is one format, as get_format takes it (was refused as 'not a
    # format or a list of them')
    for one in (np.float16, np.dtype(np.float16)):
        assert floatlab.error_profile(lambda t: t * 3, [1.1], one).bits["float16"].tolist() == \
            floatlab.error_profile(lambda t: t * 3, [1.1], "fp16").bits["float16"].tolist()
    p = floatlab.error_profile(lambda t: t * 3, 1.5, ("fp16", "bf16"))  # 0-d in, 0-d out
    assert p.bits["float16"].shape == () and p.results["bfloat16"].shape == ()
    empty = floatlab.error_profile(lambda t: t * 3, np.zeros((0, 2)), "fp16")
    assert empty.ulps["float16"].shape == (0, 2)


# --------------------------------------------------------------------------- quantisation

@pytest.mark.parametrize("call", [
    lambda: floatlab.fake_quantize(X, "mxfp8", stats="False"),
    lambda: quant.quantize_elements(X, "mxfp8", stats="False"),
    lambda: quant.quantize_elements(X, "mxfp8", stats=1),
])
def test_stats_flags_are_real_bools(call):
    """stats='False' returned the stats (a truthy string)."""
    with pytest.raises(TypeError, match="stats must be True or False"):
        call()


def test_dequantize_refuses_codes_it_would_misread():
    """Code 300 of an 8-bit element became NaN, -1 became code 0's value, int8 code 300 wrapped
    to -1, masked codes lost their mask: all silently."""
    one = np.array([1.0])
    for codes, scheme in (([300, 0], "mxfp8"), ([-1, 0], "mxfp8"), ([300, 0], "int8_tensor"),
                          ([2**62], "mxfp8"), ([-3, 0], "nf4")):
        with pytest.raises(ValueError, match=r"codes of .* run from 0 to (255|15), got"):
            floatlab.dequantize(np.array(codes), one, scheme)
    with pytest.raises(TypeError, match="codes is a masked array"):
        floatlab.dequantize(np.ma.array([1, 2], mask=[0, 1]), one, "mxfp8")
    with pytest.raises(ValueError, match="codes is ragged"):
        floatlab.dequantize([[1], [1, 2]], one, "mxfp8")


@pytest.mark.parametrize("shape, error", [("64", TypeError), ((64.0,), TypeError),
                                          ((-1,), ValueError), ((True,), TypeError),
                                          ([None], TypeError)])
def test_dequantize_checks_shape(shape, error):
    """shape='64' failed in np.prod (UFuncTypeError); shape=(-1,) unpacked everything (a
    wrong value: ValueError, as numpy's negative dimensions; it was a TypeError)."""
    q = floatlab.quantize(X, "mxfp4")
    with pytest.raises(error, match="shape must be a tuple of non-negative ints"):
        floatlab.dequantize(q.codes, q.scales, "mxfp4", shape=shape)
    assert floatlab.dequantize(q.codes, q.scales, "mxfp4", shape=64).shape == (64,)
    assert floatlab.dequantize(q.codes, q.scales, "mxfp4", shape=[np.int64(64)]).shape == (64,)


def test_dequantize_checks_scales_and_the_global_scale():
    """NaN / negative float32 scales and a NaN global scale gave NaN or negated values; a
    global_scale for a scheme without one was ignored; string scales failed in float()."""
    codes, f32 = np.array([1, 0]), floatlab.Scheme("e4m3fn", 32, "float32", "even")
    for bad in ([np.nan], [-2.0], [np.inf]):
        with pytest.raises(ValueError, match=r"scales must be finite and >= 0 .* got \["):
            floatlab.dequantize(codes, np.array(bad), f32)
    with pytest.raises(TypeError, match="scales must hold real numbers"):
        floatlab.dequantize(codes, ["a"], f32)
    with pytest.raises(TypeError, match="scales is a masked array"):
        floatlab.dequantize(codes, np.ma.array([1.0], mask=[1]), f32)
    q = floatlab.quantize(np.linspace(-3, 3, 16), "nvfp4")
    for bad, error in ((np.nan, ValueError), (-1.0, ValueError), ("a", TypeError)):
        with pytest.raises(error, match="global_scale must be"):
            floatlab.dequantize(q.codes, q.scales, "nvfp4", shape=q.shape, global_scale=bad)
    with pytest.raises(ValueError, match="has no global scale, so global_scale=2.0 would be "
                                         "ignored"):
        floatlab.dequantize(codes, np.array([1.0]), f32, global_scale=2.0)
    # a Python int beyond float64: a bare OverflowError from math.isfinite before
    with pytest.raises(ValueError, match="global_scale must be finite and >= 0 .*got an "
                                         "integer beyond float64's range"):
        floatlab.dequantize(q.codes, q.scales, "nvfp4", shape=q.shape, global_scale=10**400)
    with pytest.raises(ValueError, match="amax must be finite .*integer beyond float64"):
        floatlab.CurrentScaling("e4m3fn").scale_for(10**400)
    back = floatlab.dequantize(q.codes, q.scales, "nvfp4", shape=q.shape,
                               global_scale=q.global_scale)
    assert np.array_equal(back, q.dequantize())
    dq = floatlab.quantize(np.random.default_rng(0).standard_normal(64 * 300), "nf4_dq")
    assert np.array_equal(floatlab.dequantize(dq.codes, dq.scales, "nf4_dq", shape=dq.shape),
                          dq.dequantize())  # (its approximated scales may be negative)


def test_scheme_fields():
    """name=3 gave repr 'Scheme(3: ...'; margin=2000 failed in 2.0**margin (OverflowError);
    numpy ints were refused in tiles but accepted as a block."""
    with pytest.raises(TypeError, match="name must be a string"):
        floatlab.Scheme("e4m3fn", name=3)
    with pytest.raises(ValueError, match="margin=2000 is beyond float64's exponents"):
        floatlab.Scheme("e4m3fn", 32, "float32", "even", margin=2000)
    tile = floatlab.Scheme("e4m3fn", (np.int64(1), np.int64(128)), "float32", "even")
    assert tile == floatlab.get_scheme("fp8_1x128")
    s = floatlab.Scheme("e4m3fn", margin=np.int64(1), axis=np.int64(0))
    assert s.margin == 1 and type(s.margin) is int and s.axis == 0


def test_codebook_and_fixed_point_inputs():
    """2-D values were flattened, masked codes unmasked, bad seeds failed in numpy, an
    unhashable name failed in functools.cache, saturate='False' was accepted."""
    with pytest.raises(ValueError, match=r"values must be a 1-D list of numbers, got shape"):
        floatlab.Codebook("cb", [[0.0, 1.0], [2.0, 3.0]])
    with pytest.raises(TypeError, match="codes is a masked array"):
        floatlab.Codebook("cb", [0.0, 1.0], codes=np.ma.array([0, 1], mask=[0, 1]))
    with pytest.raises(ValueError, match=r"codes must be one int per value \(2 ints\)"):
        floatlab.Codebook("cb", [0.0, 1.0], codes=[[0, 1]])
    nf4 = floatlab.get_codebook("nf4")
    with pytest.raises(TypeError, match="rng must be a numpy.random.Generator"):
        nf4.round(X, rounding="stochastic", rng="3")
    with pytest.raises(ValueError, match="rng seed must be a non-negative int"):
        nf4.round(X, rounding="stochastic", rng=-1)
    assert np.array_equal(nf4.round(X, rounding="stochastic", rng=3),
                          nf4.round(X, rounding="stochastic", rng=np.random.default_rng(3)))
    with pytest.raises(TypeError, match="codebook name must be a string, got \\['nf4'\\]"):
        floatlab.get_codebook(["nf4"])
    for element in (nf4, floatlab.FixedPoint(8, 2)):
        with pytest.raises(TypeError, match="saturate must be True or False"):
            element.round(X, saturate="False")
    with pytest.raises(TypeError, match="FixedPoint name must be a string"):
        floatlab.FixedPoint(8, 0, name=3)
    assert floatlab.get_codebook("nf4") is nf4  # (still cached)


# --------------------------------------------------------------------------- scaling

@pytest.mark.parametrize("call", [
    lambda flag: floatlab.amax_scale(X, "e4m3fn", power_of_two=flag),
    lambda flag: floatlab.quantize_scaled(X, "e4m3fn", power_of_two=flag),
    lambda flag: floatlab.CurrentScaling("e4m3fn", power_of_two=flag),
    lambda flag: floatlab.DelayedScaling("e4m3fn", power_of_two=flag),
])
@pytest.mark.parametrize("flag", ["False", 1, None])
def test_power_of_two_is_a_real_bool(call, flag):
    """power_of_two='False' rounded the scale to a power of two (256 instead of 448)."""
    with pytest.raises(TypeError, match="power_of_two must be True or False"):
        call(flag)


@pytest.mark.parametrize("amax, error, message", [
    ("3", TypeError, "amax must be a number >= 0"),
    (True, TypeError, "amax must be a number >= 0"),
    (np.array([1.0, 2.0]), TypeError, "amax must be a number >= 0"),
    (None, TypeError, "amax must be a number >= 0"),
    (-1.0, ValueError, r"amax must be finite and >= 0 .* got -1.0"),
    (np.nan, ValueError, "amax must be finite and >= 0"),
])
def test_scale_for_checks_its_amax(amax, error, message):
    """scale_for('3') took the string as 3.0; scale_for(-1.0) gave 1.0 without a word."""
    with pytest.raises(error, match=message):
        floatlab.CurrentScaling("e4m3fn").scale_for(amax)
    assert floatlab.CurrentScaling("e4m3fn").scale_for(np.float32(3.5)) == 128.0


def test_scaling_sizes_and_dtypes():
    """history_len=10**30 failed inside deque (OverflowError); dequantize(np.int32) truncated
    the values to ints; mx_scale([]) failed in np.max of an empty array."""
    with pytest.raises(ValueError, match="history_len=10{30} is more amaxes than a deque"):
        floatlab.DelayedScaling("e4m3fn", history_len=10**30)
    q = floatlab.quantize_scaled([0.3, -1.5], "e4m3fn")
    for dtype in (np.int32, np.float16, bool):
        with pytest.raises(TypeError, match="dtype must be float32 or float64"):
            q.dequantize(dtype)
    assert q.dequantize(np.float32).dtype == np.float32
    assert floatlab.mx_scale([]).shape == (0,)
    assert floatlab.mx_scale(np.zeros((0, 3))).shape == (0, 3)


# --------------------------------------------------------------------------- valid edges

@pytest.mark.parametrize("shapes", [((0, 64), (64, 0)), ((0, 3), (3, 2)), ((3, 2), (2, 0)),
                                    ((2, 0), (0, 3))])
def test_block_fma_matmul_of_empty_operands_keeps_the_shape(shapes):
    """A (0, k) operand divided by zero in the block-FMA tiling (ZeroDivisionError)."""
    acc = floatlab.Accumulator("float32", rounding="toward_zero", block_fma=4)
    a, b = np.ones(shapes[0]), np.ones(shapes[1])
    out = floatlab.matmul(a, b, acc)
    assert out.shape == (shapes[0][0], shapes[1][1]) and not out.any()
    chunked = floatlab.Accumulator("float32", block_fma=4, chunk=8, promote="float32")
    assert floatlab.matmul(a, b, chunked).shape == out.shape


VIEWS = {
    "float32": lambda x: x.astype(np.float32),
    "float16": lambda x: x.astype(np.float16),
    "transposed": lambda x: np.ascontiguousarray(x.T).T,
    "reversed": lambda x: x[:, ::-1],
    "strided": lambda x: np.repeat(x, 2, axis=1)[:, ::2],
    "read-only": lambda x: np.array(x, copy=True).view(),
}


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("call", [
    lambda x: floatlab.sum(x, "fp16", axis=-1),
    lambda x: floatlab.cumsum(x, floatlab.Accumulator("fp16", compensated=True), axis=-1),
    lambda x: floatlab.matmul(x, np.asarray(x).T, "bf16"),
    lambda x: (floatlab.array(x, "fp16") * 3 + x).mean(axis=0).values,
    lambda x: floatlab.fake_quantize(x, "mxfp4"),
    lambda x: floatlab.quantize(x, "nvfp4").dequantize(),
    lambda x: floatlab.mx_quantize(x, "e2m1", 32, 0).dequantize(),
    lambda x: floatlab.CurrentScaling("e4m3fn", float32=True).quantize(x).dequantize(),
    lambda x: floatlab.error_profile(lambda t: t * 3 + 1, x, "fp16").bits["float16"],
])
def test_views_and_narrow_dtypes_give_the_values_of_a_plain_copy(view, call):
    """Transposed, reversed, strided and read-only views give what a contiguous copy of the
    same values gives (float16 what float32 gives: it widens exactly, and quantisation works in
    the input's precision), and are not written to."""
    base = np.random.default_rng(1).standard_normal((4, 64))
    x = VIEWS[view](base)
    if view == "read-only":
        x.setflags(write=False)
    before = np.array(x, copy=True)
    work = np.float32 if view in ("float32", "float16") else np.float64
    expected = call(np.ascontiguousarray(x, dtype=work))
    got = call(x)
    np.testing.assert_array_equal(np.asarray(got, dtype=np.float64),
                                  np.asarray(expected, dtype=np.float64))
    assert np.array_equal(x, before)


def test_joining_a_floatarray_with_numbers_rounds_them_into_its_format():
    """np.concatenate([e2m1 array, [7]]) kept the int 7 (e2m1's max is 6): not a value of the
    format; [True] became 1.0 and ['a'] failed in numpy's float conversion."""
    x = floatlab.array([1.0], "e2m1")
    assert np.concatenate([x, [7]]).values.tolist() == [1.0, 6.0]
    assert np.stack([x, [5]]).values.tolist() == [[1.0], [4.0]]  # 5 ties to even
    for bad, message in (([True], "boolean"), ([np.True_], "bool"), (["a"], "str 'a'")):
        with pytest.raises(TypeError, match=message):
            np.concatenate([x, bad])
    assert np.take(x, [0]).values.tolist() == [1.0]


def test_pairwise_order_with_chunks_is_refused_not_dropped():
    """Accumulator('fp16', order='pairwise', chunk=8) summed each chunk left to right: 1.0
    where the pairwise tree gives 1.0029296875, without a word."""
    with pytest.raises(ValueError, match="order='pairwise' with chunk= is not emulated"):
        floatlab.Accumulator("fp16", order="pairwise", chunk=8)
    x = np.array([1.0] + [2.0**-11] * 7)
    assert float(floatlab.sum(x, floatlab.Accumulator("fp16", order="pairwise"))) == 1.0029296875
    assert float(floatlab.sum(x, floatlab.Accumulator("fp16", order="blocked", chunk=8))) == 1.0


def test_error_profile_table_limit():
    p = floatlab.error_profile(lambda t: t + 1, [1.0, 2.0, 3.0], "fp16")
    for bad in ("a", 2.0, True):
        with pytest.raises(TypeError, match=r"limit must be a whole number \(int\) >= 0"):
            p.table(limit=bad)
    with pytest.raises(ValueError, match="limit must be >= 0, got -1"):
        p.table(limit=-1)
    assert len(p.table(limit=2).splitlines()) == 3


def test_dequantize_refuses_a_code_the_codebook_does_not_use():
    """fp4_bnb has no code 8 (bitsandbytes' -0): it dequantised to NaN without a word."""
    scheme = floatlab.Scheme("fp4_bnb", 32, "float32", "even")
    with pytest.raises(ValueError, match="a code that codebook fp4_bnb does not use"):
        floatlab.dequantize(np.array([8, 1]), np.array([1.0]), scheme)
    q = floatlab.quantize(X, scheme)
    assert np.array_equal(floatlab.dequantize(q.codes, q.scales, scheme, shape=q.shape),
                          q.dequantize())


def test_np_sum_mean_cumsum_take_their_neutral_options():
    """np.sum(x, keepdims=False) was refused as an extra option, though it changes nothing."""
    x = floatlab.array(np.ones((2, 3)), "fp16")
    assert np.sum(x, axis=0, keepdims=False, where=True).values.tolist() == [2.0, 2.0, 2.0]
    assert np.mean(x, keepdims=False).values == 1.0
    with pytest.raises(TypeError, match=r"np.sum on a FloatArray takes axis only"):
        np.sum(x, keepdims=True)


def test_masked_operands_of_floatarray_ops():
    """A masked operand is refused where FloatArray sees it (its mask would be lost); with a
    numpy.ma array on the left of an operator numpy.ma computes the op itself, in float64,
    never calling FloatArray: the documented exception, pinned so a NumPy change shows."""
    fa = floatlab.array([1.0, 2.0, 3.0], "fp16")
    m = np.ma.array([0.1, 0.2, 0.3], mask=[0, 1, 0])
    for op in (lambda: fa * m, lambda: np.multiply(m, fa), lambda: fa + m):
        with pytest.raises(TypeError, match="masked array; floatlab would lose its mask"):
            op()
    left = m * fa
    assert isinstance(left, np.ma.MaskedArray) and not isinstance(left, floatlab.FloatArray)
    assert float(left[2]) == 0.3 * 3.0  # float64, not fp16's 0.89990234375


@pytest.mark.parametrize("order", [">f4", ">f8"])
@pytest.mark.parametrize("scheme", floatlab.scheme_names())
def test_byte_swapped_inputs_quantise_as_native_ones(scheme, order):
    """Big-endian arrays ('>f4' from a file or the network) took the float32 fast paths as
    they were, whose integer views of the bit patterns then read swapped bytes: nvfp4,
    fp8_rowwise, fp8_tensorwise and nf4 gave wrong values, silently. They are now put in the
    machine's byte order first (as_float_array, and quantize's per-step bypass)."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((8, 64)) * 10.0 ** rng.integers(-3, 3, (8, 64)))
    native = x.astype(np.dtype(order).newbyteorder("="))
    swapped = x.astype(order)
    assert not swapped.dtype.isnative
    np.testing.assert_array_equal(floatlab.fake_quantize(swapped, scheme),
                                  floatlab.fake_quantize(native, scheme))
    np.testing.assert_array_equal(floatlab.quantize(swapped, scheme).dequantize(),
                                  floatlab.quantize(native, scheme).dequantize())


def test_byte_swapped_inputs_round_and_sum_as_native_ones():
    rng = np.random.default_rng(4)
    x = rng.standard_normal(300) * 10.0 ** rng.integers(-6, 5, 300)
    for order in (">f4", ">f8"):
        native, swapped = x.astype(np.dtype(order).newbyteorder("=")), x.astype(order)
        for fmt in ("fp16", "bf16", "e4m3fn", "e2m1"):
            np.testing.assert_array_equal(floatlab.round(swapped, fmt), floatlab.round(native, fmt))
            np.testing.assert_array_equal(floatlab.encode(swapped, fmt),
                                          floatlab.encode(native, fmt))
        np.testing.assert_array_equal(floatlab.sum(swapped, "fp16"), floatlab.sum(native, "fp16"))
        m, n = swapped[:256].reshape(16, 16), native[:256].reshape(16, 16)
        np.testing.assert_array_equal(floatlab.matmul(m, m, "fp16"), floatlab.matmul(n, n, "fp16"))


@pytest.mark.parametrize("fmt", ["float16", "bfloat16", "e4m3fn", "e5m2"])
@pytest.mark.parametrize("tail", [1e30, np.inf, np.nan])
def test_a_sum_leaving_the_range_is_not_an_error_of_its_own(fmt, tail):
    # The speculative sequential sum casts a whole block's steps to integers for their last
    # bits; a step past the format's range (inf / NaN) cast with an invalid flag, so
    # fl.sum([1.0] * 10 + [1e30], "fp16") warned "invalid value encountered in cast" (and
    # raised under np.errstate(all="raise")), though its answer, inf, is right. Same values
    # as a step-by-step reference, no warning, no error.
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.random(300), [tail], rng.random(40)])
    want, total = [], 0.0
    with np.errstate(all="ignore"):
        for term in x:
            total = float(floatlab.round(total + term, fmt))
            want.append(total)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            got = floatlab.cumsum(x, fmt), floatlab.sum(x, fmt)
    np.testing.assert_array_equal(got[0], want)
    np.testing.assert_array_equal(got[1], want[-1])


@pytest.mark.parametrize("scheme", ["fp8_tensorwise", "int8_row", "nf4", "dynamic8"])
@pytest.mark.parametrize("exponent", [0, 600, -600])
def test_qsnr_of_very_large_and_very_small_values(scheme, exponent):
    # stats squared x and x - deq in float64 as they were: beyond 2**±511 the squares
    # overflowed or underflowed, so x * 2**600 gave a QSNR of NaN (inf / inf) and x * 2**-600,
    # all flushed to zero, inf dB (an error of 0) instead of 0 dB. Exact reference with
    # Fractions; a tiny value next to ordinary ones is no FloatingPointError either.
    x = np.ldexp(np.random.default_rng(5).standard_normal((4, 64)), exponent)
    q = floatlab.quantize(x, scheme)
    deq = q.dequantize().astype(np.float64)
    assert np.all(np.isfinite(deq))
    pairs = zip(x.flat, deq.flat, strict=True)
    err = sum((Fraction(float(a)) - Fraction(float(b))) ** 2 for a, b in pairs)
    sig = sum(Fraction(float(a)) ** 2 for a in x.flat)
    want = math.inf if err == 0 else 10 * math.log10(sig / err)
    assert q.stats.qsnr_db == pytest.approx(want, rel=1e-12, abs=1e-12)
    tiny = x.copy()
    tiny[0, 0] = np.ldexp(1.0, exponent - 700)
    with np.errstate(all="raise"):
        floatlab.fake_quantize(tiny, scheme, stats=True)


@pytest.mark.parametrize("call", [lambda x: floatlab.quantize(x, "nvfp4").dequantize(),
                                  lambda x: floatlab.fake_quantize(x, "nvfp4")])
def test_nvfp4_global_scale_of_a_tiny_tensor(call):
    # NVFP4's float32 steps round tiny amaxes into float32's subnormals, as torchao's do:
    # under np.errstate(all="raise") that raised "underflow encountered in cast / divide"
    # (same values now). An amax below float32's range was cast to 0, taken for an all-zero
    # tensor (global scale 1) and every value flushed to zero without a word; now refused
    # like one whose global scale underflows to zero.
    x = np.random.default_rng(6).standard_normal((4, 64))
    for exponent in (-140, -130, -125):
        want = call(np.ldexp(x, exponent))
        with np.errstate(all="raise"):
            np.testing.assert_array_equal(call(np.ldexp(x, exponent)), want)
    for exponent in (-150, -600):
        with pytest.raises(ValueError, match="global scale outside"):
            call(np.ldexp(x, exponent))


@pytest.mark.parametrize("scalar", ["bfloat16", "float8_e4m3fn"])
def test_floatarray_ops_take_ml_dtypes_scalars(scalar):
    # ml_dtypes.bfloat16(1.5) (a numpy scalar, not numbers.Real) was refused ("cannot combine
    # a FloatArray with bfloat16 1.5") where its arrays and np.float16(1.5) are taken
    import ml_dtypes

    s = getattr(ml_dtypes, scalar)(1.5)
    a = floatlab.array(X, "bf16")
    for op in (lambda u, v: u * v, lambda u, v: v + u, lambda u, v: u - v, lambda u, v: v / u,
               lambda u, v: np.maximum(u, v)):
        np.testing.assert_array_equal(np.asarray(op(a, s)), np.asarray(op(a, 1.5)))
    b = floatlab.array(X, "bf16")
    b[0] = s
    assert float(np.asarray(b)[0]) == 1.5


@pytest.mark.parametrize("scheme", ["fp8_tensorwise", "fp8_rowwise", "fp8_1x128",
                                    "fp8_128x128", "int8_tensor", "int8_row"])
def test_float64_subnormal_inputs_quantise_under_errstate_raise(scheme):
    # amax / element max underflowed in float64 for inputs such as x * 1e-310 before the
    # clamp to the scale format's smallest normal: a FloatingPointError under
    # np.errstate(all="raise") from floatlab's own scale arithmetic; same values now
    x = np.random.default_rng(7).standard_normal((4, 128)) * 1e-310
    want = floatlab.quantize(x, scheme).dequantize()
    with np.errstate(all="raise"):
        np.testing.assert_array_equal(floatlab.quantize(x, scheme).dequantize(), want)
        floatlab.fake_quantize(x, scheme, stats=True)


def test_error_profile_in_e8m0_warns_only_of_the_users_values():
    # _errors filled non-finite entries with 0.0 placeholders and rounded them: E8M0 has no
    # zero, so an inf or NaN result warned "cannot hold zeros ... became NaN" about a value
    # the user never passed. Same table, no warning.
    x = np.array([4.0, 1e300, np.inf, np.nan])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        profile = floatlab.error_profile(lambda t: t * 1.0, x, "e8m0")
    assert "e8m0" in str(profile)


@pytest.mark.parametrize("scheme", ["nvfp4", "mxfp8", "mxfp4", "fp8_tensorwise"])
def test_dequantize_refuses_scale_codes_for_scale_values(scheme):
    """q.scale_codes (uint8) passed where q.scales go were read as scale values: wrong values,
    silently (found by the unusual-input survey)."""
    q = floatlab.quantize(np.linspace(-3, 3, 64).reshape(2, 32), scheme)
    kwargs = {"shape": q.shape, "global_scale": q.global_scale}
    with pytest.raises(TypeError, match="as QuantizedTensor.scale_codes do.*pass q.scales"):
        floatlab.dequantize(q.codes, q.scale_codes, scheme, **kwargs)
    np.testing.assert_array_equal(floatlab.dequantize(q.codes, q.scales, scheme, **kwargs),
                                  q.dequantize())


@pytest.mark.parametrize("scheme", [n for n in floatlab.scheme_names()
                                    if n not in ("fp8_1x128", "fp8_128x128")])
@pytest.mark.parametrize("shape", [(0,), (0, 64), (3, 0), (2, 0, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_quantize_of_an_empty_tensor_is_empty(scheme, shape, dtype):
    """quantize / fake_quantize / dequantize refused an empty array ("x is empty") where
    mx_quantize (and NumPy, torch) take one: now an empty result of x's shape in the working
    precision, with no scales (the round trip through stored codes too)."""
    x = np.zeros(shape, dtype)
    q = floatlab.quantize(x, scheme)
    assert q.dequantize().shape == shape and q.dequantize().dtype == dtype
    assert q.scales.size == 0 and q.stats.n == 0 and q.stats.clipped_fraction == 0.0
    out, stats = floatlab.fake_quantize(x, scheme, stats=True)
    assert out.shape == shape and out.dtype == dtype and stats.n == 0
    back = floatlab.dequantize(q.codes, q.scales, scheme, global_scale=q.global_scale,
                               shape=q.shape, dtype=dtype)
    assert back.shape == shape and back.dtype == dtype
    rows = quant.axiswise.quantize_rowwise(x, "e4m3fn")
    assert rows.dequantize().shape == shape and rows.scales.shape == shape[:-1] + (1,)


def test_quantize_of_an_empty_tensor_keeps_its_block_structure_errors():
    """A block structure that does not fit the shape is refused as for values (a 2-D tile on
    a vector); a 2-D empty tensor with tiles is empty."""
    with pytest.raises(ValueError, match=r"tile \(1, 128\) needs at least 2 dimensions"):
        floatlab.quantize(np.zeros(0), "fp8_1x128")
    assert floatlab.fake_quantize(np.zeros((0, 256)), "fp8_128x128").shape == (0, 256)
    with pytest.raises(ValueError, match="0-d"):
        floatlab.quantize(np.float64(1.0), "mxfp8")


@pytest.mark.parametrize("shape", [(3, 100), (300, 100), (7, 5, 33), (64,), (1000,)])
def test_dq8_blocks_run_over_the_flattened_tensor_as_bitsandbytes(shape):
    """bitsandbytes' quantize_4bit / quantize_blockwise (QLoRA's nested absmax, floatlab's
    scale="dq8") block A as one flat vector in C order: ceil(A.numel() / blocksize) blocks, the
    last one partial. floatlab blocked each row on its own, so a (3, 100) tensor had 6 padded
    blocks of up to 64 instead of 5 (and the nested absmax blocks of 256 took the grid in a
    shape-dependent order): the codes and scales depended on the shape. Now a tensor gives
    the codes and scales of its flattened values, whatever its shape or memory layout."""
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    flat = floatlab.quantize(x.reshape(-1), "nf4_dq")
    for arr in (x, np.asfortranarray(x), x.T.copy().T):
        q = floatlab.quantize(arr, "nf4_dq")
        assert q.scales.shape == (-(-x.size // 64),) and q.shape == shape
        assert np.array_equal(q.unpack().reshape(-1), flat.unpack())
        assert np.array_equal(q.scales, flat.scales)
        assert np.array_equal(q.dequantize().reshape(-1), flat.dequantize())
        assert np.array_equal(floatlab.fake_quantize(arr, "nf4_dq"), q.dequantize())
        back = floatlab.dequantize(q.codes, q.scales, "nf4_dq", shape=q.shape,
                                   dtype=np.float32)
        assert np.array_equal(back, q.dequantize())
    # the elements are the flat vector's blocks with their exact absmax (nf4, float32 scales)
    assert np.array_equal(flat.unpack(), floatlab.quantize(x.reshape(-1), "nf4").unpack())


def test_dq8_int_blocks_take_no_axis():
    with pytest.raises(ValueError, match="axis=0 does not apply to dq8.*flattened tensor"):
        floatlab.Scheme("nf4", 64, "dq8", "even", axis=0)


@pytest.mark.parametrize("name", ["nf4", "dynamic8", "udynamic8"])
@pytest.mark.parametrize("shape", [(3, 100), (7, 5, 33), (2, 64)])
def test_bitsandbytes_presets_block_the_flattened_tensor(name, shape):
    """bitsandbytes' quantize_4bit (nf4) and quantize_blockwise (the dynamic maps) block A as
    one flat vector in C order: ceil(A.numel() / blocksize) blocks, the last one partial. The
    presets blocked each row along the last axis (a (3, 100) tensor got 6 nf4 blocks, two of
    36 padded values, instead of 5), so their codes and scales depended on the shape. Now a
    tensor gives its flattened values' codes and scales (axis=None: blocks over the flattened
    tensor), as nf4_dq already did."""
    scheme = floatlab.get_scheme(name)
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    if name == "udynamic8":
        x = np.abs(x)
    flat = floatlab.quantize(x.reshape(-1), scheme)
    for arr in (x, np.asfortranarray(x)):
        q = floatlab.quantize(arr, scheme)
        assert q.scales.shape == (-(-x.size // scheme.block),) and q.shape == shape
        assert np.array_equal(q.unpack().reshape(-1), flat.unpack())
        assert np.array_equal(q.scales, flat.scales)
        assert np.array_equal(floatlab.fake_quantize(arr, scheme), q.dequantize())
        assert np.array_equal(q.dequantize().reshape(-1), flat.dequantize())
    assert scheme.axis is None and "over the flattened tensor" in scheme.describe()


def test_axis_none_is_flat_blocks_and_takes_no_hadamard():
    assert floatlab.Scheme("int8", 32, "float32", axis=None) != floatlab.Scheme("int8", 32,
                                                                                "float32")
    with pytest.raises(ValueError, match="hadamard runs along an axis.*axis=-1"):
        floatlab.Scheme("e2m1", 16, "e4m3fn", hadamard=16, axis=None)
    with pytest.raises(TypeError, match=r"axis must be an int, or None.*got 'x'"):
        floatlab.Scheme("e2m1", 16, axis="x")


def test_global_scale_with_elements_too_wide_for_its_float32_divisor():
    """NVFP4's g = amax / (448 * element max) in float32: with bf16 or float32 elements the
    divisor overflowed, g was 0, and every quantize raised "the tensor amax ... gives a global
    scale outside float32's normal range; scale the tensor first", whatever the tensor (no
    scaling helps). The Scheme now refuses it, naming the cause and the fix."""
    for element in ("bf16", "float32"):
        with pytest.raises(ValueError, match=r"448 \* .* overflows float32; use a narrower "
                                             r"element format .* or drop global_scale"):
            floatlab.Scheme(element, 16, "e4m3fn", "even", global_scale=True)
    ok = floatlab.Scheme("float16", 16, "e4m3fn", "even", global_scale=True)
    assert floatlab.quantize(np.array([1.0, -3.0]), ok).global_scale > 0


@pytest.mark.parametrize("scheme", ["mxfp4", "mxfp6", "nvfp4"])
def test_dequantize_reads_unpacked_codes_with_shape_as_one_code_per_value(scheme):
    """dequantize takes one code per value or, with shape=, the packed bytes; q.unpack() with
    shape=q.shape was read as packed bytes (two codes from each byte of one code), the values
    silently scrambled, and packed bytes beyond the shape's were ignored."""
    x = np.array([[0.3, -1.2, 5.0, 0.01, 2.0, 3.0, -4.0, 1.0]])
    q = floatlab.quantize(x, scheme)
    g = {"global_scale": q.global_scale} if q.global_scale is not None else {}
    want = floatlab.dequantize(q.codes, q.scales, scheme, shape=q.shape, **g)
    np.testing.assert_array_equal(want, q.dequantize())
    got = floatlab.dequantize(q.unpack(), q.scales, scheme, shape=q.shape, **g)
    np.testing.assert_array_equal(got, want)
    for bad in (q.unpack().reshape(-1), np.concatenate([q.codes, q.codes])):
        with pytest.raises(ValueError, match="neither one code per value of shape"):
            floatlab.dequantize(bad, q.scales, scheme, shape=q.shape, **g)
