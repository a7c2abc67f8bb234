"""The float64 finite-difference gradient check shared by the autograd tests.

``fn`` maps Tensors to a Tensor; the check weights its output by a fixed random array, sums,
and compares each input's gradient with central differences (h = 1e-6) element by element."""

from __future__ import annotations

import numpy as np

from floatlab.mixed import Tensor, use_precision


def _objective(fn, arrays, weights, requires_grad):
    tensors = [Tensor(a, "fp64", requires_grad=requires_grad) for a in arrays]
    out = fn(*tensors)
    return (out * Tensor(weights, "fp64")).sum(), tensors


def assert_gradients_match_finite_differences(name, fn, arrays, rng, h=1e-6):
    with use_precision("64-true"):
        out_shape = fn(*[Tensor(a, "fp64") for a in arrays]).shape
        weights = rng.standard_normal(out_shape)
        loss, tensors = _objective(fn, arrays, weights, requires_grad=True)
        loss.backward()
        for i, (arr, t) in enumerate(zip(arrays, tensors, strict=True)):
            numeric = np.zeros_like(arr)
            for idx in np.ndindex(arr.shape):  # element loop: building an exact reference
                plus, minus = [a.copy() for a in arrays], [a.copy() for a in arrays]
                plus[i][idx] += h
                minus[i][idx] -= h
                numeric[idx] = (_objective(fn, plus, weights, False)[0].item()
                                - _objective(fn, minus, weights, False)[0].item()) / (2 * h)
            assert t.grad is not None and t.grad.dtype == np.float64
            np.testing.assert_allclose(t.grad, numeric, rtol=1e-6, atol=1e-8,
                                       err_msg=f"{name}: input {i}")
