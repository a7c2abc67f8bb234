"""Bad input to the arithmetic, accumulation and quantisation API (DEVELOPERS.md, "Bad input"):
each case below was a silent wrong answer, a truthy-string surprise or a crash deep inside NumPy
before; each now gets an error naming the argument and the fix. Valid edge input (empty, 0-d,
float16, views) keeps working."""

from __future__ import annotations

import numpy as np
import pytest

import floatlab

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
    p = floatlab.error_profile(lambda t: t * 3, 1.5, ("fp16", "bf16"))  # 0-d in, 0-d out
    assert p.bits["float16"].shape == () and p.results["bfloat16"].shape == ()
    empty = floatlab.error_profile(lambda t: t * 3, np.zeros((0, 2)), "fp16")
    assert empty.ulps["float16"].shape == (0, 2)
