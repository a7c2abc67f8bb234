"""The backward's gradient products skip their rounding to the compute format where they are
already values of it (an fp16 accumulator under 16-mixed: ``floatlab.mixed.gemm._products_in``)
and give the same bits as rounding them: inf, NaN of either sign (made the positive quiet NaN
the rounding returns), signed zeros, subnormals; policies where the rounding can change
something (or draws random numbers) keep it."""

from __future__ import annotations

import numpy as np
import pytest

import floatlab
from floatlab import get_format
from floatlab.mixed import Tensor, gemm, get_policy, linear, use_precision


def _grads(policy, x_values, w_values, g_values, leaf_x):
    with use_precision(policy):
        w = Tensor(w_values, requires_grad=True)
        x0 = Tensor(x_values, requires_grad=True)
        x = x0 if leaf_x else x0 * 1.0  # a leaf's gradient waits for the end of backward
        out = linear(x, w)
        out.backward(g_values)
    return x0.grad, w.grad


def _operands(rng):
    fp16 = lambda v: np.asarray(v, dtype=np.float64).astype(np.float16).astype(np.float64)  # noqa: E731
    x = fp16(rng.standard_normal((48, 24)))
    w = fp16(rng.standard_normal((20, 24)))
    g = fp16(rng.standard_normal((48, 20)))
    g[0] = 60000.0  # dgrad row 0: running sums overflow to +inf and -inf
    w[:, 1] = np.where(np.arange(20) < 10, 1.0, -1.0)
    w[:, 2] = -1.0
    g[4, :2] = np.inf  # an upstream overflow: inf products of both signs, inf - inf = NaN
    w[0, 6], w[1, 6] = 1.0, -1.0
    g[1] = 2.0**-14  # subnormal sums
    w[:, 3] = 2.0**-10
    g[2] = 0.0  # zero totals: +0 / -0 from the sign of the products
    g[3] = -(2.0**-24)  # tiny negative sums rounding to -0
    x[:, 5] = -(2.0**-20)
    return x, w, g


@pytest.mark.parametrize("leaf_x", [True, False], ids=["leaf", "non-leaf"])
@pytest.mark.parametrize("acc", ["fp16", floatlab.Accumulator("fp16")], ids=str)
def test_skipped_rounding_gives_the_rounded_bits(acc, leaf_x, monkeypatch):
    rng = np.random.default_rng(23)
    x, w, g = _operands(rng)
    policy = get_policy("16-mixed", accumulate=acc)
    assert gemm._products_in(policy, policy.compute)
    fast = _grads(policy, x, w, g, leaf_x)
    monkeypatch.setattr(gemm, "_FAST_EXACT_GRADS", False)
    slow = _grads(policy, x, w, g, leaf_x)
    for f, s in zip(fast, slow, strict=True):
        assert f.dtype == s.dtype
        np.testing.assert_array_equal(f.view(np.uint32), s.view(np.uint32))
    dx = slow[0]
    assert np.isposinf(dx[0]).any() and np.isneginf(dx[0]).any()
    assert np.isnan(dx[4, 6]) and np.isnan(slow[1]).any()
    assert (dx == 0).any() and np.signbit(dx[dx == 0]).any()


def test_rounding_kept_where_it_can_change_bits_or_draw():
    fp16 = get_format("fp16")
    kept = [get_policy("16-mixed"),  # BLAS float32 sums
            get_policy("16-mixed", accumulate="float32"),
            get_policy("16-mixed", accumulate=floatlab.Accumulator("float32")),
            get_policy("bf16-mixed", accumulate="fp16"),  # fp16 sums, bf16 compute
            get_policy("16-mixed", accumulate=floatlab.Accumulator(
                "e8m13", "toward_zero", chunk=128, promote="float32")),
            get_policy("16-mixed", accumulate=floatlab.Accumulator("fp16", chunk=64,
                                                                   promote="float32")),
            get_policy("16-mixed", accumulate=floatlab.Accumulator("fp16", compensated=True)),
            get_policy("16-mixed", accumulate=floatlab.Accumulator("fp16", order="pairwise")),
            get_policy("16-mixed", accumulate="fp16", rounding="stochastic")]
    for policy in kept:
        assert not gemm._products_in(policy, policy.compute), policy
    assert not gemm._products_in(get_policy("16-mixed", accumulate="fp16"), get_format("bf16"))
    assert gemm._products_in(get_policy("16-mixed", accumulate="fp16"), fp16)


def test_training_with_overflowing_gradients_is_unchanged(monkeypatch):
    # a loss scale of 2**40 overflows every step: inf / NaN gradients, telemetry counting
    # the non-finite roundings per call; the History and the parameters are those of the
    # rounded path, byte for byte
    from floatlab.mixed import Trainer, teacher_gaussians

    data = teacher_gaussians(n=2048)
    runs = []
    for fast in (True, False):
        monkeypatch.setattr(gemm, "_FAST_EXACT_GRADS", fast)
        trainer = Trainer("16-mixed", accumulate=floatlab.Accumulator("fp16"), progress=False,
                          scaler=2.0**40)
        history = trainer.fit(data, steps=4)
        rows = {k: np.asarray(v, dtype=float) for k, v in history._rows.items()}
        runs.append((rows, [p.data.copy() for p in trainer.model.parameters()]))
    (rows, params), (want_rows, want_params) = runs
    assert rows.keys() == want_rows.keys() and rows["nonfinite"].max() > 0
    for key in rows:
        np.testing.assert_array_equal(rows[key].view(np.uint64), want_rows[key].view(np.uint64))
    for p, q in zip(params, want_params, strict=True):
        np.testing.assert_array_equal(p.view(np.uint32), q.view(np.uint32))
