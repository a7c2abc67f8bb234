"""Attention's pieces against torch's definitions: masked_fill's broadcasting gradient, the
causal mask's alignment, and rows with no key to attend (torch >= 2.5's math path gives zero),
checked with float64 finite differences and a float64 NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import assert_gradients_match_finite_differences

from floatlab.mixed import Tensor, use_precision
from floatlab.mixed import attention as A

RNG = np.random.default_rng(2468)


def test_masked_fill_gradient_sums_over_the_axes_the_mask_broadcast():
    """A mask that broadcasts x to a larger shape (torch's out-of-place masked_fill expands
    both) gave x a gradient of the result's shape: (2, 3) for x of shape (1, 3)."""
    x = Tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    y = A.masked_fill(x, np.array([[True], [False]]), -1.0)
    assert y.shape == (2, 3)
    y.backward(grad=np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32))
    assert x.grad.shape == (1, 3) and x.grad.tolist() == [[4.0, 5.0, 6.0]]
    mask = np.array([[[True, False, False]], [[False, False, True]]])  # (2, 1, 3) against (4, 3)
    assert_gradients_match_finite_differences(
        "masked_fill broadcast", lambda t: A.masked_fill(t, mask, 0.5), [RNG.normal(size=(4, 3))],
        RNG)


def _reference(q, k, v, scale):
    """torch's sdpa with attn_mask=causal_lower_right(L, S) on its math path, in float64:
    tril(ones(L, S), diagonal=S - L) marks the keys each query may see; a row that sees none
    gets weights 0 (torch >= 2.5's _safe_softmax) instead of NaN."""
    L, S = q.shape[-2], k.shape[-2]
    allowed = np.tril(np.ones((L, S), bool), S - L)
    s = np.where(allowed, q @ np.swapaxes(k, -1, -2) * scale, -np.inf)
    m = np.max(s, axis=-1, keepdims=True, initial=-np.inf)
    e = np.exp(s - np.where(np.isfinite(m), m, 0))
    total = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return w @ v


@pytest.mark.parametrize("t_q, t_k", [(4, 4), (2, 5), (5, 2), (3, 1), (1, 3)])
def test_causal_mask_is_torchs_causal_lower_right(t_q, t_k):
    """The documented alignment: bottom-right (torch's causal_lower_right), which is torch's
    is_causal=True (top-left, tril of ones) only for t_q == t_k."""
    lower_right = np.tril(np.ones((t_q, t_k), bool), t_k - t_q)
    assert np.array_equal(A.causal_mask(t_q, t_k), ~lower_right)
    upper_left = np.tril(np.ones((t_q, t_k), bool))
    assert np.array_equal(A.causal_mask(t_q, t_k), ~upper_left) == (t_q == t_k)


@pytest.mark.parametrize("t_q, t_k", [(4, 4), (2, 5), (5, 2), (3, 1)])
@pytest.mark.parametrize("subtract_max", [True, False])
def test_causal_attention_matches_torchs_math_path_in_float64(t_q, t_k, subtract_max):
    """More queries than keys gave NaN in the first t_q - t_k rows (softmax of a row of -inf):
    torch >= 2.5 gives zeros there, and so does this, with finite (zero) gradients."""
    q, k, v = (RNG.normal(size=(2, t, 3)) for t in (t_q, t_k, t_k))
    with use_precision("64-true"):
        out = A.scaled_dot_product_attention(
            Tensor(q, "fp64"), Tensor(k, "fp64"), Tensor(v, "fp64"), subtract_max=subtract_max)
    np.testing.assert_allclose(out.data, _reference(q, k, v, 1 / np.sqrt(3)), rtol=1e-12,
                               atol=1e-14)
    assert_gradients_match_finite_differences(
        f"attention t_q={t_q} t_k={t_k}",
        lambda a, b, c: A.scaled_dot_product_attention(a, b, c, subtract_max=subtract_max),
        [q, k, v], RNG)


def test_rows_with_no_key_are_zero_in_low_precision_and_send_no_nan():
    q = Tensor(RNG.normal(size=(1, 2, 5, 4)), "bf16", requires_grad=True)
    k = Tensor(RNG.normal(size=(1, 2, 3, 4)), "bf16", requires_grad=True)
    with use_precision("bf16-mixed"):
        out = A.scaled_dot_product_attention(q, k, k)
    assert np.all(out.data[..., :2, :] == 0) and np.all(np.isfinite(out.data))
    out.sum().backward()
    assert np.all(q.grad[..., :2, :] == 0) and np.all(np.isfinite(k.grad))


def test_values_may_have_their_own_width_as_in_torch():
    """torch's sdpa takes v of shape (..., S, E_v) and returns (..., L, E_v); this refused any
    v whose shape differed from k's."""
    q, k, v = RNG.normal(size=(2, 3, 4)), RNG.normal(size=(2, 5, 4)), RNG.normal(size=(2, 5, 6))
    with use_precision("64-true"):
        out = A.scaled_dot_product_attention(Tensor(q, "fp64"), Tensor(k, "fp64"),
                                             Tensor(v, "fp64"))
    assert out.shape == (2, 3, 6)
    np.testing.assert_allclose(out.data, _reference(q, k, v, 0.5), rtol=1e-12, atol=1e-14)
    assert_gradients_match_finite_differences(
        "attention E_v != E", lambda a, b, c: A.scaled_dot_product_attention(a, b, c), [q, k, v],
        RNG)
    with pytest.raises(ValueError, match="k, v of one length T"):
        A.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v[:, :4]))
