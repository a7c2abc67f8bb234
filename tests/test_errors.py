"""error_profile, significant_digits and the error-profile picture.

Bits of error are checked against counts made here from the format's value table (oracles.py),
and the classic examples against the exact values in /work/shared/reference (Herbie checks).
"""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pytest
from oracles import Layout, all_values

import floatlab

matplotlib.use("Agg")


def naive(x):
    return np.sqrt(x + 1) - np.sqrt(x)


def test_cancellation_example_and_bits_counted_on_the_value_table():
    p = floatlab.error_profile(naive, [1000.0], ["fp16", "bf16"])
    assert p.results["bfloat16"].tolist() == [0.0] and p.results["float16"].tolist() == [0.015625]
    exact = math.sqrt(1001) - math.sqrt(1000)
    assert abs(p.reference["float16"][0] - exact) < 1e-15
    for name in ("float16", "bfloat16"):
        table = all_values(Layout.of(floatlab.get_format(name)))
        nearest = table[np.argmin(np.abs(table - exact))]
        between = np.count_nonzero((table > min(nearest, p.results[name][0]))
                                   & (table <= max(nearest, p.results[name][0])))
        assert p.bits[name][0] == pytest.approx(math.log2(1 + between))
    assert p.bits["float16"][0] == pytest.approx(3.70, abs=0.01)   # Herbie: 3.7 bits
    assert p.bits["bfloat16"][0] == pytest.approx(13.92, abs=0.01)  # Herbie: 13.9 bits
    rewritten = floatlab.error_profile(lambda x: 1 / (np.sqrt(x + 1) + np.sqrt(x)), [1000.0],
                                       ["fp16", "bf16"])
    assert rewritten.bits["float16"][0] == 0.0 and rewritten.bits["bfloat16"][0] == 1.0


def test_reference_may_be_a_function_and_specials_count_as_all_bits_wrong():
    def softmax(x):
        return np.exp(x) / np.sum(np.exp(x))

    def stable(x):
        z = np.exp(x - np.max(x))
        return z / z.sum()

    x = np.array([1.0, 5.0, 11.2])
    with np.errstate(invalid="ignore", over="ignore"):  # inf / inf, as NumPy warns
        p = floatlab.error_profile(softmax, x, "fp16", reference=stable)
    assert np.isnan(p.results["float16"][-1])  # exp(11.2) = 73,000 overflows fp16's 65504
    assert p.bits["float16"][-1] == 16 and np.isinf(p.ulps["float16"][-1])
    q = floatlab.error_profile(stable, x, "fp16", reference=stable)
    assert np.all(q.bits["float16"] <= 2)
    assert "float16" in repr(p) and "float16" in str(p)


def test_significant_digits_from_the_spread():
    d = floatlab.significant_digits(naive, [1.0, 1000.0, 30000.0], "fp16", n=40, rng=1)
    assert d[0] > 2.5        # well conditioned: about 3 of fp16's 3.3 digits
    assert d[2] < 1.0        # cancellation: almost nothing left
    assert d.shape == (3,)
    exact = floatlab.significant_digits(lambda x: x * 2, [1.5], "fp16", rng=0)
    assert exact[0] == pytest.approx(11 * math.log10(2))


def test_plot_and_bad_input():
    p = floatlab.error_profile(naive, np.logspace(0, 4, 30), ["fp16", "bf16"])
    ax = floatlab.plots.error_profile(p)
    assert len(ax.lines) == 2 and ax.get_xscale() == "log"
    with pytest.raises(TypeError, match="draws a floatlab.ErrorProfile"):
        floatlab.plots.error_profile([1, 2])
    with pytest.raises(ValueError, match="formats is empty"):
        floatlab.error_profile(naive, [1.0], [])
    with pytest.raises(TypeError, match="f must be a function"):
        floatlab.error_profile("sqrt", [1.0], "fp16")
    with pytest.raises(ValueError, match="need an int >= 2 runs"):
        floatlab.significant_digits(naive, [1.0], "fp16", n=1)
    with pytest.raises(TypeError, match="must hold real numbers"):
        floatlab.error_profile(naive, ["a"], "fp16")


def test_reference_given_as_a_numpy_or_ml_dtypes_type_is_a_format():
    # np.float32 and ml_dtypes.bfloat16 are callable (they convert), but name a format here as
    # in formats=; they were called as the exact-result function (the reference was x itself)
    import ml_dtypes

    for kind, name in ((np.float32, "fp32"), (np.float64, "float64"),
                       (ml_dtypes.bfloat16, "bf16")):
        by_type = floatlab.error_profile(naive, [1000.0], "fp16", reference=kind)
        by_name = floatlab.error_profile(naive, [1000.0], "fp16", reference=name)
        assert by_type.reference["float16"].tolist() == by_name.reference["float16"].tolist()
        assert by_type.bits["float16"].tolist() == by_name.bits["float16"].tolist()


def test_significant_digits_of_one_value_is_a_0d_array():
    # array functions give scalars back as 0-d arrays; np.clip made it a numpy scalar
    for x, f in ((3000.0, naive), (np.array(1.5), lambda t: t * 2), ([1.5], lambda t: t.sum())):
        d = floatlab.significant_digits(f, x, "fp16", n=4, rng=0)
        assert isinstance(d, np.ndarray) and d.shape == ()


def test_a_result_computed_outside_the_format_is_refused():
    # steps on np.asarray(x) run on the exact float64 values, and their plain result was
    # measured as fp16's (0 bits of error, all digits correct)
    steps = (lambda x: np.interp(np.asarray(x), [0.0, 3.0], [0.0, 1.0]),
             lambda x: np.asarray(x) / 3)
    for f in steps:
        with pytest.raises(ValueError, match="not a value of float16: part of f ran outside"):
            floatlab.error_profile(f, [0.5, 2.0], "fp16")
        with pytest.raises(ValueError, match="not a value of float16: part of f ran outside"):
            floatlab.significant_digits(f, [0.5, 2.0], "fp16", n=3, rng=0)
    with pytest.raises(ValueError, match="not a value of bfloat16"):  # reference in bf16
        floatlab.error_profile(steps[1], [0.5, 2.0], "fp64", reference="bf16")
    # plain results that hold values of the format are what f computed: accepted
    kept = (lambda x: np.where(x > 1, x, -x), lambda x: x * 0 + 1.0, lambda x: np.asarray(x))
    for f in kept:
        p = floatlab.error_profile(f, [0.5, 2.0], ["fp16", "bf16"])
        assert p.bits["float16"].tolist() == [0.0, 0.0]
    assert floatlab.significant_digits(lambda x: np.asarray(x) * 0, [0.5], "fp16", n=3,
                                       rng=0).tolist() == [11 * math.log10(2)]
    # the error formula itself, evaluated in float64 outside FloatArray, is still a reference
    p = floatlab.error_profile(naive, [1000.0], "fp16", reference=lambda x: naive(x))
    assert p.bits["float16"][0] == pytest.approx(3.70, abs=0.01)
