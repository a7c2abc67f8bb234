"""Attention's pieces against torch's definitions: masked_fill's broadcasting gradient, the
causal mask's alignment, and rows with no key to attend (torch >= 2.5's math path gives zero),
checked with float64 finite differences and a float64 NumPy reference."""

from __future__ import annotations

import numpy as np
from gradcheck import assert_gradients_match_finite_differences

from floatlab.mixed import Tensor
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
