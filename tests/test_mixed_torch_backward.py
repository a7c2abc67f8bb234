"""The lab's backward formulas against torch's, bit for bit, on the values where two formulas
that agree on ordinary numbers part: signed zeros, inf and NaN inputs and gradients, 0 * inf,
masked and dropped positions, subnormals, overflow.

Each expected gradient is torch's derivative formula (tools/autograd/derivatives.yaml and
FunctionsManual.cpp) written in NumPy, evaluated as torch's CPU kernels do: in float32 for
float32 and float16 tensors, each torch op's result stored in the tensor's dtype (``store``).
ReLU's test sits in test_mixed_tensor.py; tanh-GELU's in test_mixed_layers.py.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import floatlab
import floatlab.mixed as fm
from floatlab.mixed import Tensor, use_precision
from floatlab.mixed import attention as A
from floatlab.mixed import layers as L

F32 = np.float32
ADVERSARIAL = [0.0, -0.0, 1.0, -1.0, 3.0, -2.5, 0.5, 0.1, np.inf, -np.inf, np.nan]
EXTRA = {  # subnormals and values near the top of each format
    "32-true": [1e-45, -1e-45, 1e-30, 3.4e38, -3.4e38],
    "16-true": [6e-8, -6e-8, 1e-4, 300.0, 65504.0, -65504.0],
}
STORE = {  # torch's store of a float32 opmath result into the tensor's dtype
    "32-true": lambda v: np.asarray(v, F32),
    "16-true": lambda v: np.asarray(v, F32).astype(np.float16).astype(F32),
}


def _values(precision: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every ordered pair of adversarial values, and a gradient of such values for each."""
    v = STORE[precision](np.array(ADVERSARIAL + EXTRA[precision], F32))
    pairs = np.array(list(itertools.product(v, v)), F32)
    g = np.resize(v[::-1], len(pairs)).astype(F32)
    return pairs[:, 0].copy(), pairs[:, 1].copy(), g


def _grads(precision: str, fn, *arrays: np.ndarray, g: np.ndarray):
    fmt = "fp16" if precision == "16-true" else "fp32"
    with use_precision(precision):
        ts = [Tensor(a, fmt, requires_grad=True) for a in arrays]
        out = fn(*ts)
        out.backward(grad=g)
    return [t.grad for t in ts], out.data


def _assert_same_bits(got: np.ndarray, expected: np.ndarray, what: str) -> None:
    got, expected = np.asarray(got, F32), np.broadcast_to(np.asarray(expected, F32), got.shape)
    same = (np.isnan(got) & np.isnan(expected)) | (got.view(np.uint32) == expected.view(np.uint32))
    bad = np.flatnonzero(~same)
    assert bad.size == 0, (what, [(got.flat[i], expected.flat[i]) for i in bad[:5]])


@pytest.mark.parametrize("precision", ["32-true", "16-true"])
def test_elementwise_backward_is_torchs_formula_bit_for_bit(precision):
    s = STORE[precision]
    a, b, g = _values(precision)
    with np.errstate(all="ignore"):
        cases = [  # (name, lab op, torch's gradient of each input)
            ("add", lambda x, y: x + y, lambda: (g, g)),
            ("sub", lambda x, y: x - y, lambda: (g, -g)),
            ("mul", lambda x, y: x * y, lambda: (s(g * b), s(g * a))),
            # div_tensor_other_backward: -grad * ((self / other) / other), each op stored
            ("div", lambda x, y: x / y, lambda: (s(g / b), s(s(-g) * s(s(a / b) / b)))),
        ]
        for name, op, expected in cases:
            (ga, gb), _ = _grads(precision, op, a, b, g=g)
            want_a, want_b = expected()
            _assert_same_bits(ga, want_a, f"{name} a")
            _assert_same_bits(gb, want_b, f"{name} b")
        unary = [  # (name, lab op, torch's gradient given the op's result y)
            ("neg", lambda x: -x, lambda y: -g),
            ("mul by a number", lambda x: x * 0.1, lambda y: s(g * F32(0.1))),
            ("div by a number", lambda x: x / 3.0, lambda y: s(g / F32(3.0))),
            ("rsub", lambda x: 1.0 - x, lambda y: -g),
            ("tanh", fm.tanh, lambda y: s(g * (1 - y * y))),           # tanh_backward(grad, y)
            ("exp", fm.exp, lambda y: s(g * y)),                        # grad * result
            ("log", fm.log, lambda y: s(g / a)),                        # grad / self
            ("cast", lambda x: fm.cast(x, "fp32"), lambda y: g),
        ]
        for name, op, expected in unary:
            (ga,), y = _grads(precision, op, a, g=g)
            _assert_same_bits(ga, expected(y), name)


@pytest.mark.parametrize("precision", ["32-true", "16-true"])
def test_reduction_and_masking_backward_is_torchs_formula_bit_for_bit(precision):
    s = STORE[precision]
    a, _, g = _values(precision)
    n = len(a) // 2 * 2
    x, gx = a[:n].reshape(-1, 2), g[:n].reshape(-1, 2)  # rows of 2: any summation order agrees
    rows = x.shape[0]
    with np.errstate(all="ignore"):
        (ga,), _ = _grads(precision, lambda t: fm.sum(t, axis=1), x, g=gx[:, 0])
        _assert_same_bits(ga, gx[:, :1], "sum")                         # grad.expand
        (ga,), _ = _grads(precision, lambda t: fm.mean(t, axis=1), x, g=gx[:, 0])
        _assert_same_bits(ga, s(gx[:, :1] / F32(2)), "mean")            # expand, / numel
        (ga,), y = _grads(precision, fm.softmax, x, g=gx)
        # _softmax_backward_data: (grad - sum(grad * y)) * y
        _assert_same_bits(ga, s((gx - (gx * y).sum(1, keepdims=True)) * y), "softmax")
        (ga,), y = _grads(precision, fm.log_softmax, x, g=gx)
        # _log_softmax_backward_data: grad - exp(y) * sum(grad)
        _assert_same_bits(ga, s(gx - np.exp(y) * gx.sum(1, keepdims=True)), "log_softmax")
        mask = np.resize([True, False, False], x.shape)
        (ga,), _ = _grads(precision, lambda t: A.masked_fill(t, mask, -np.inf), x, g=gx)
        _assert_same_bits(ga, np.where(mask, F32(0), gx), "masked_fill")  # masked_fill(m, 0)
        keep = (np.random.default_rng(7).random(x.shape) >= 0.3).astype(F32)
        (ga,), _ = _grads(precision, lambda t: L.dropout(t, 0.3, rng=7), x, g=gx)
        # native_dropout_backward: grad * mask * scale (-0 and NaN where a dropped g is -x or inf)
        _assert_same_bits(ga, s(s(gx * keep) * F32(1 / 0.7)), "dropout")
        (ga,), _ = _grads(precision, lambda t: L.narrow(t, 1, 1, 1), x, g=gx[:, :1])
        _assert_same_bits(ga, np.concatenate([np.zeros((rows, 1), F32), gx[:, :1]], 1),
                          "narrow")                                      # zeros, then copy
        (ga,), _ = _grads(precision, lambda t: L.permute(t, (1, 0)), x, g=gx.T.copy())
        _assert_same_bits(ga, gx, "permute")
        # broadcasting: each element's gradient stored first, then summed (sum_to_size)
        xa, gb = x[:5], gx[:5]
        yb = x[5:6]
        (_, g_y), _ = _grads(precision, lambda p, q: p * q, xa, yb, g=gb)
        _assert_same_bits(g_y, s(s(gb * xa).sum(0, keepdims=True)), "mul, broadcast operand")
        # a reused tensor accumulates its two gradients in its dtype (x * x: g x + g x)
        (ga,), _ = _grads(precision, lambda t: t * t, a, g=g)
        _assert_same_bits(ga, s(s(g * a) + s(g * a)), "x * x")


def test_embedding_and_bias_gradients_are_torchs_sums():
    """embedding_dense_backward adds each row's gradient into a +0 row in index order;
    a bias gradient is a sum from +0 (so a column of -0 gives +0)."""
    weight = np.arange(12, dtype=F32).reshape(4, 3)
    ids = np.array([1, 3, 1, 1, 0])
    g = np.array([[1e8, -0.0, np.inf], [1, 2, 3], [1, -0.0, -np.inf], [-1e8, -0.0, 5],
                  [-0.0, -0.0, 0.1]], F32)
    with use_precision("32-true"), np.errstate(invalid="ignore"):
        w = Tensor(weight, requires_grad=True)
        L.embedding(ids, w).backward(grad=g)
        expected = np.zeros_like(weight)
        for i, row in zip(ids, g, strict=True):
            expected[i] = expected[i] + row
        _assert_same_bits(w.grad, expected, "embedding")
        x = Tensor(np.ones((3, 2), F32))
        wt, bias = Tensor(np.ones((2, 2), F32), requires_grad=True), Tensor(
            np.zeros(2, F32), requires_grad=True)
        fm.linear(x, wt, bias).backward(grad=np.array([[-0.0, 1], [-0.0, -1], [-0.0, 0]], F32))
    _assert_same_bits(bias.grad, np.array([0.0, 0.0], F32), "bias")


@pytest.mark.parametrize("precision", ["16-mixed", "bf16-mixed"])
def test_bmm_gradient_of_a_broadcast_operand_is_stored_per_batch_then_summed(precision):
    """torch.matmul of (B, n, k) and (1, k, m) expands the second operand and runs bmm: its
    gradient is B products stored in the op's format, then summed by sum_to_size (float32,
    stored once). Summing the float32 products and rounding once differs in the last bit."""
    fmt = {"16-mixed": "fp16", "bf16-mixed": "bf16"}[precision]
    rng = np.random.default_rng(11)
    store = lambda v: floatlab.round(np.asarray(v, np.float64), fmt)  # noqa: E731
    a = store(rng.normal(0, 1, (6, 2, 3)))      # n = 2: each product sums two exact terms
    b = store(rng.normal(0, 1, (1, 3, 4)))
    g = store(rng.normal(0, 1, (6, 2, 4)))
    with use_precision(precision):
        ta, tb = Tensor(a, fmt, requires_grad=True), Tensor(b, fmt, requires_grad=True)
        A.bmm(ta, tb).backward(grad=g)
    per_batch = store(np.swapaxes(a, -1, -2).astype(F32) @ g.astype(F32))  # bmm, stored
    expected = store(per_batch.astype(F32).sum(0, keepdims=True))         # sum_to_size
    np.testing.assert_array_equal(tb.grad.astype(np.float64), expected.astype(np.float64))
    # the other operand is not broadcast: its gradient is bmm's own
    np.testing.assert_array_equal(ta.grad, store(g.astype(F32) @ np.swapaxes(b[0], 0, 1)
                                                 .astype(F32)))


def test_bmm_gradient_of_a_2d_operand_is_one_folded_product():
    """torch.matmul folds (B, n, k) @ (k, m) into one (B n, k) @ (k, m) product: the 2-D
    operand's gradient is a single GEMM rounded once, not B rounded products. Integers keep
    every float32 sum exact while the per-batch sums need more bits than fp16 holds."""
    rng = np.random.default_rng(12)
    a = rng.integers(-60, 61, (16, 2, 3)).astype(np.float64)
    b = rng.integers(-60, 61, (3, 4)).astype(np.float64)
    g = rng.integers(-60, 61, (16, 2, 4)).astype(np.float64)
    with use_precision("16-mixed"):
        ta, tb = Tensor(a, "fp16", requires_grad=True), Tensor(b, "fp16", requires_grad=True)
        A.bmm(ta, tb).backward(grad=g)
    exact = a.reshape(-1, 3).T @ g.reshape(-1, 4)              # every sum exact in float32
    np.testing.assert_array_equal(tb.grad, floatlab.round(exact, "fp16"))
    assert not np.array_equal(tb.grad, floatlab.round(
        floatlab.round(np.swapaxes(a, 1, 2) @ g, "fp16").sum(0), "fp16"))  # per batch: not


@pytest.mark.parametrize("precision", ["32-true", "16-true"])
def test_softmax_written_by_hand_backpropagates_through_its_three_ops(precision):
    """softmax(subtract_max=False) is exp(x) / sum(exp(x)) written by hand: torch's autograd
    differentiates exp (grad * result), sum (expand) and div (grad / t; -grad * ((e / t) / t),
    stored, then summed over the broadcast axis), and e's two gradients add up in its dtype."""
    s = STORE[precision]
    a, _, g = _values(precision)
    n = len(a) // 2 * 2
    x, gx = a[:n].reshape(-1, 2), g[:n].reshape(-1, 2)  # rows of 2: any summation order agrees
    with np.errstate(all="ignore"):
        (ga,), y = _grads(precision, lambda t: fm.softmax(t, subtract_max=False), x, g=gx)
        e = s(np.exp(x))
        total = s(e.sum(1, keepdims=True))
        _assert_same_bits(y, s(e / total), "forward")
        g_e = s(gx / total)                                               # div, self
        g_total = s(s(s(-gx) * s(s(e / total) / total)).sum(1, keepdims=True))  # div, other
        g_e = s(g_e + g_total)                                            # + sum's expand
        _assert_same_bits(ga, s(g_e * e), "backward")                     # exp: grad * result


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("precision", ["32-true", "16-mixed"])
def test_cross_entropy_backward_is_log_softmax_after_nll_loss(precision, reduction):
    """torch's cross_entropy is nll_loss(log_softmax(x)): nll_loss's backward puts -w at each
    target (w = g / N for the mean), log_softmax's is gO - exp(out) * sum(gO), each result
    stored in float32 (cross_entropy is on autocast's float32 list). Odd batches and
    gradients that are not powers of two show the rounding order; zero and negative
    gradients the signs of zeros."""
    rng = np.random.default_rng(5)
    batch, classes = 5, 4
    logits = rng.standard_normal((batch, classes)).astype(F32) * 4
    logits[0, 1] = -120.0  # exp underflows to 0 there
    targets = np.array([1, 0, 3, 2, 1])
    upstream = ([F32(1.0), F32(0.3), F32(-0.7), F32(0.0), F32(-0.0), F32(65536.0)]
                if reduction != "none" else
                [np.array([1.0, 0.3, -0.7, 0.0, -0.0], F32)])
    for g in upstream:
        with use_precision(precision):
            x = Tensor(logits, requires_grad=True)
            fm.cross_entropy(x, targets, reduction=reduction).backward(grad=g)
        z = logits.astype(F32)
        shifted = z - z.max(axis=1, keepdims=True)
        out = shifted - np.log(np.exp(shifted).sum(axis=1))[:, None]  # log_softmax
        w = np.broadcast_to(g / F32(batch) if reduction == "mean" else g, (batch,)).astype(F32)
        go = np.zeros((batch, classes), F32)
        go[np.arange(batch), targets] = -w  # nll_loss backward
        row_sum = np.zeros(batch, F32)
        for j in range(classes):  # a row's sum, from +0, in float32
            row_sum = row_sum + go[:, j]
        expected = go - np.exp(out) * row_sum[:, None]  # log_softmax backward
        got = x.grad
        assert np.array_equal(got.view(np.uint32), expected.astype(F32).view(np.uint32)), (
            precision, reduction, g, got, expected)


@pytest.mark.parametrize("precision", ["32-true", "16-true"])
def test_number_over_tensor_is_reciprocal_then_mul_as_in_torch(precision):
    """torch's Tensor.__rtruediv__ is ``self.reciprocal() * other``: two roundings forward, and
    backward through both ops: mul's grad * 3 stored, then reciprocal's
    -grad * (result * result) with the product stored. ``reciprocal`` itself: the same
    formula."""
    s = STORE[precision]
    a, _, g = _values(precision)
    with np.errstate(all="ignore"):
        r = s(F32(1) / a)
        (ga,), y = _grads(precision, lambda x: 3.0 / x, a, g=g)
        _assert_same_bits(y, s(r * F32(3)), "3 / x forward")
        _assert_same_bits(ga, s(-s(g * F32(3)) * s(r * r)), "3 / x backward")
        (ga,), y = _grads(precision, fm.reciprocal, a, g=g)
        _assert_same_bits(y, r, "reciprocal forward")
        _assert_same_bits(ga, s(-g * s(r * r)), "reciprocal backward")


def test_number_over_tensor_takes_reciprocals_autocast_format():
    """reciprocal is on CUDA autocast's float32 list and on none of CPU's: ``1 / t`` of an
    fp16 tensor is float32 under 16-mixed on CUDA and float16 on CPU, as in torch."""
    x = np.array([3.0, 7.0, 0.1])
    with use_precision("16-mixed"):
        y = 1.0 / Tensor(x, "fp16")
    assert y.fmt.name == "float32"
    with use_precision(floatlab.mixed.get_policy("16-mixed", device="cpu")):
        y = 1.0 / Tensor(x, "fp16")
    assert y.fmt.name == "float16"
