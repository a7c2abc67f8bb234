"""The lab's matmul inputs with their format known (``floatlab.accumulate._matmul(known=...)``).

The lab rounds every matmul input to its policy's ``matmul_inputs`` format, so it passes that
format and the engines read the values' significant bits (``fmt.p``) and lowest bit
(``fmt.emin - fmt.man_bits``) from it instead of passes over the values. Those bounds only
choose among engines that are each exact (cast or magic, scaled or clamped), so a hinted call
must give the bits of the plain public call on every input: ties, subnormals (where the
hint's looser lowest-bit bound picks the scaled loop and the values' own bound does not),
-0 and zero totals, overflow, NaN / inf (bits 53: the general path), and formats whose p is
below the 11 / 24 / 53 classes the passes can prove (bf16). The hint is private: the public
``floatlab.matmul`` has no way to pass it.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from test_sequential_fp16 import _same_bits

import floatlab
from floatlab import accumulate, fp16_matmul, get_format, sequential
from floatlab.mixed import gemm

FP16, BF16 = get_format("fp16"), get_format("bf16")
ACCUMULATORS = {
    "fp16": floatlab.Accumulator("fp16"),
    "e8m13-truncating": floatlab.Accumulator("e8m13", "toward_zero", chunk=128,
                                             promote="float32"),
    "bf16": floatlab.Accumulator("bf16"),
}


def _in(fmt, x):
    return floatlab.round(np.asarray(x, dtype=np.float64), fmt)


def _cases(rng, fmt):
    relu = np.maximum(rng.standard_normal((512, 64)), 0)
    yield "lab-fwd", _in(fmt, relu * 3), _in(fmt, rng.standard_normal((64, 64)) * 0.2)
    grads = rng.standard_normal((512, 16)) * rng.choice([2.0**-10, 1.0, 40.0], (512, 16))
    yield "lab-wgrad", _in(fmt, relu[:, :64].T), _in(fmt, grads)
    ties = rng.integers(-40, 41, (96, 40)) * 2.0 ** rng.integers(-4, 1, (96, 40))
    yield "ties", _in(fmt, ties), _in(fmt, ties.T[:, :48])
    # fp16 subnormals (multiples of 2**-24): the values' own bound is about 2**-34 per
    # operand, too low for the scaled loop; the format's 2**-24 lets it run
    sub = rng.integers(-1023, 1024, (96, 40)) * 2.0**-24
    yield "subnormal", _in(fmt, sub), _in(fmt, rng.standard_normal((40, 64)) * 2.0**-6)
    zeros = _in(fmt, relu[:96, :40])
    zeros[:, 2] = -0.0
    zeros[9] = -zeros[9]
    b = _in(fmt, rng.standard_normal((40, 64)))
    b[:, 4] = np.where(rng.random(40) < 0.5, -0.0, 0.0)
    b[:, 6] = -(2.0**-20)
    yield "signed-zeros", zeros, b
    yield "overflow", _in(fmt, rng.standard_normal((96, 40)) * 300), \
        _in(fmt, rng.standard_normal((40, 64)) * 300)
    special = _in(fmt, rng.standard_normal((96, 40)))
    special[3, 5], special[7, 1], special[8, 2] = np.nan, np.inf, -np.inf
    yield "nan-inf", special, _in(fmt, rng.standard_normal((40, 64)))
    yield "small", _in(fmt, rng.standard_normal((3, 5))), _in(fmt, rng.standard_normal((5, 7)))


@pytest.mark.parametrize("acc", sorted(ACCUMULATORS))
@pytest.mark.parametrize("fmt", [FP16, BF16], ids=["fp16-values", "bf16-values"])
def test_known_formats_give_the_public_calls_bits(fmt, acc):
    rng = np.random.default_rng(7)
    for name, a, b in _cases(rng, fmt):
        a_copy, b_copy = a.copy(), b.copy()
        want = floatlab.matmul(a, b, ACCUMULATORS[acc])
        for known in ((fmt, fmt), (fmt, None), (None, fmt)):
            got = accumulate._matmul(a, b, ACCUMULATORS[acc], known)
            _same_bits(got, want), name
        _same_bits(a, a_copy)  # inputs never mutated
        _same_bits(b, b_copy)


def test_the_hint_picks_the_scaled_loop_on_subnormal_operands(monkeypatch):
    # the case where the hinted and plain calls run different engines, and agree
    rng = np.random.default_rng(3)
    a = rng.integers(-1023, 1024, (96, 40)) * 2.0**-24
    b = _in(FP16, rng.standard_normal((40, 64)) * 2.0**-6)
    assert not fp16_matmul._float16_scale_applies(a, b)
    assert fp16_matmul._float16_scale_applies(a, b, known=(FP16, FP16))
    monkeypatch.setattr(fp16_matmul, "_float16_scale_pays", lambda *args: True)
    _same_bits(accumulate._matmul(a, b, ACCUMULATORS["fp16"], (FP16, FP16)),
               floatlab.matmul(a, b, ACCUMULATORS["fp16"]))


def test_a_loose_format_bound_falls_back_to_the_values_own():
    # bf16's subnormal quantum (2**-133) is too low for the scaled loop; values that allow it
    # keep it, as without the hint
    rng = np.random.default_rng(4)
    a = _in(BF16, np.maximum(rng.standard_normal((96, 40)), 0))
    b = _in(BF16, rng.standard_normal((40, 64)))
    assert fp16_matmul._float16_scale_applies(a, b)
    assert fp16_matmul._float16_scale_applies(a, b, known=(BF16, BF16))


def test_known_bounds_hold_for_every_value_of_the_format():
    # every finite fp16 value has <= 11 significant bits and its lowest set bit at or above
    # 2**-24; NaN anywhere still gives 53 (the general path), as without the hint
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float64)
    finite = every[np.isfinite(every) & (every != 0)]
    mantissa, exponent = np.frexp(finite)
    odd = (mantissa * 2.0**53).astype(np.int64)
    trailing = np.log2((odd & -odd).astype(np.float64)).astype(int)
    lowest = exponent - 53 + trailing  # exponent of the lowest set bit
    significant = exponent - lowest  # bits from the leading one to the lowest set one
    assert significant.max() <= sequential._bits(finite, FP16) == 11
    assert lowest.min() >= sequential._lowest_bit(finite, 11, FP16) == -24
    assert sequential._bits(every, FP16) == 53  # (every fp16 code includes NaNs)
    assert sequential._bits(_in(BF16, [1.0, 3.0]), BF16) == 8


def test_the_public_matmul_cannot_pass_a_format():
    assert list(inspect.signature(floatlab.matmul).parameters) == ["a", "b", "accumulator"]
    with pytest.raises(TypeError):
        floatlab.matmul(np.ones((2, 2)), np.ones((2, 2)), "fp16", (FP16, FP16))


def test_the_lab_passes_its_matmul_input_format_and_trains_the_same_bits(monkeypatch):
    from floatlab.mixed import Trainer, teacher_gaussians

    data = teacher_gaussians(n=1024)
    runs, seen = [], []
    real = gemm.accumulate_matmul
    for hint in (True, False):
        def call(a, b, acc, known, hint=hint):
            seen.append(known)
            return real(a, b, acc, known if hint else (None, None))

        monkeypatch.setattr(gemm, "accumulate_matmul", call)
        trainer = Trainer("16-mixed", accumulate=floatlab.Accumulator("fp16"), progress=False)
        history = trainer.fit(data, steps=6)
        rows = {k: np.asarray(v, dtype=float) for k, v in history._rows.items()}
        runs.append((rows, [p.data.copy() for p in trainer.model.parameters()]))
    assert {k for pair in seen for k in pair} == {FP16}  # 16-mixed: every operand known
    (rows, params), (want_rows, want_params) = runs
    for key in want_rows:
        _same_bits(rows[key], want_rows[key])
    for p, q in zip(params, want_params, strict=True):
        np.testing.assert_array_equal(p.view(np.uint32), q.view(np.uint32))


def test_known_finite_operands_take_no_pass_for_their_bits(monkeypatch):
    # the lab's products: the overflow bound already rules out NaN / inf, so the known formats'
    # p are the operands' bits without _bits' NaN pass; with a NaN the pass runs (bits 53)
    rng = np.random.default_rng(11)
    a = _in(FP16, np.maximum(rng.standard_normal((256, 64)), 0))
    b = _in(FP16, rng.standard_normal((64, 64)))
    want = floatlab.matmul(a, b, ACCUMULATORS["fp16"])
    calls = []
    real_bits = accumulate._bits
    monkeypatch.setattr(accumulate, "_bits", lambda *args: calls.append(1) or real_bits(*args))
    _same_bits(accumulate._matmul(a, b, ACCUMULATORS["fp16"], (FP16, FP16)), want)
    assert not calls
    a[3, 4] = np.nan
    want = floatlab.matmul(a, b, ACCUMULATORS["fp16"])
    _same_bits(accumulate._matmul(a, b, ACCUMULATORS["fp16"], (FP16, FP16)), want)
    assert calls
