"""The carry-only fast path (float32 -> bfloat16 / tf32 / e8mX, nearest-even) is identical to
the general rounding path, bit for bit: every midpoint +-1 ulp of float32, every exponent,
every special, and a large random sample of patterns. (A full sweep of all 2**32 float32
patterns was run by hand for bfloat16; see the issue 8 report.)"""

from __future__ import annotations

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
