"""The telemetry counters against their definitions, element by element."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from floatlab import get_format
from floatlab.mixed import StepStats, quantize, recording, use_precision


def _special_values(rng: np.random.Generator, n: int) -> np.ndarray:
    """float32 values spread over every zone of the lab's formats: zeros of both signs, float32
    subnormals, fp16 / fp8 subnormal ranges, values that flush, overflow, inf and NaN."""
    exponents = rng.integers(-150, 130, n).astype(np.float64)
    v = np.ldexp(rng.uniform(1, 2, n), exponents.astype(int)) * rng.choice([-1.0, 1.0], n)
    with np.errstate(over="ignore"):
        v = v.astype(np.float32)  # huge exponents become inf, tiny ones zero or subnormal
    v[rng.random(n) < 0.1] = 0.0
    v[rng.random(n) < 0.02] = -0.0
    v[rng.random(n) < 0.02] = np.nan
    v[rng.random(n) < 0.02] = np.inf
    return v


def _reference(before: np.ndarray, after: np.ndarray, fmt) -> dict:
    """The counters from their definitions (float64 magnitudes, one element at a time)."""
    b = [float(x) for x in before.reshape(-1)]
    a = [float(x) for x in after.reshape(-1)]
    thr = fmt.normal_threshold
    return {
        "values": len(a),
        "subnormal": sum(0 < abs(x) < thr for x in a),
        "flushed": sum(x != 0 and y == 0 for x, y in zip(b, a, strict=True)),
        "overflow": sum(np.isfinite(x) and not np.isfinite(y) for x, y in zip(b, a, strict=True)),
        "nonfinite_results": int(any(not np.isfinite(y) for y in a)),
    }


@pytest.mark.parametrize("name", ["fp16", "bf16", "float32", "e4m3fn", "e5m2", "e3m2", "e8m0",
                                  "float64"])
@pytest.mark.parametrize("shape", [(0,), (), (7,), (64, 33)])
def test_observe_counts_what_the_definitions_say(name, shape):
    fmt = get_format(name)
    rng = np.random.default_rng(sum(map(ord, name)) + len(shape))
    before = _special_values(rng, int(np.prod(shape))).reshape(shape)
    if name == "float64":
        before = before.astype(np.float64)
    if not fmt.has_nan:  # such formats refuse NaN (and inf, with nowhere to go): keep the rest
        before = np.where(np.isfinite(before), before, np.float32(1e30))
    stats = StepStats()
    with warnings.catch_warnings(), use_precision("32-true"):
        warnings.simplefilter("ignore", RuntimeWarning)  # e8m0: zero and negatives become NaN
        with recording(stats):
            after = quantize(before, fmt, what="grads")
    want = _reference(before, after, fmt)
    got = {k: getattr(stats, k) for k in want}
    assert got == want


def test_observe_of_an_exact_rounding_counts_the_values_once_more():
    """An exact rounding (the same array out) flushes nothing but still counts its values."""
    fmt = get_format("bf16")
    values = np.array([0.0, 2.0**-130, 1.0, -np.inf], np.float32)
    stats = StepStats()
    stats.observe(values, values, fmt, "grads")
    assert (stats.values, stats.subnormal, stats.flushed, stats.overflow,
            stats.nonfinite_results) == (4, 1, 0, 0, 1)


def test_count_flushed_off_changes_nothing_else():
    rng = np.random.default_rng(5)
    before = _special_values(rng, 4000)
    counts = []
    for count_flushed in (True, False):
        stats = StepStats(count_flushed=count_flushed)
        with use_precision("32-true"), recording(stats):
            quantize(before, get_format("fp16"), what="grads")
        counts.append(stats)
    on, off = counts
    assert on.flushed > 0 and off.flushed == 0
    for name in ("values", "subnormal", "overflow", "nonfinite_results"):
        assert getattr(on, name) == getattr(off, name)
