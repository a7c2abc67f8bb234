"""Bad input to the training lab (floatlab.mixed): each case gets an error that names the
argument and the fix (DEVELOPERS.md, "Bad input"), never a crash inside NumPy, a truthy string
or a silently wrong answer; and valid edge cases (0-d, empty) work.

Found by the h-audit-mixed fuzz pass: every case here failed before its fix.
"""

from __future__ import annotations

import numpy as np
import pytest

import floatlab.mixed as fm
from floatlab.mixed import Tensor


def _t(*shape: int, **kw) -> Tensor:
    return Tensor(np.ones(shape, np.float32), **kw)


# --------------------------------------------------------------------------- Tensor, autograd

@pytest.mark.parametrize("value", ["False", 0, None])
def test_tensor_requires_grad_is_a_real_flag(value):
    with pytest.raises(TypeError, match="requires_grad must be True or False, got"):
        Tensor([1.0], requires_grad=value)


def test_backward_retain_graph_is_a_real_flag():
    y = (_t(2, requires_grad=True) * 2).sum()
    with pytest.raises(TypeError, match="retain_graph must be True or False, got 'no'"):
        y.backward(retain_graph="no")


def test_len_of_a_0d_tensor_says_what_to_use():
    with pytest.raises(TypeError, match=r"0-d tensor; use \.item\(\)"):
        len(Tensor(2.0))


@pytest.mark.parametrize("op", ["sum", "mean", "softmax", "log_softmax"])
@pytest.mark.parametrize("axis, error, match", [
    (5, ValueError, r"axis 5 is out of range for a tensor of 2 dimension\(s\); use an axis in "
                    r"\[-2, 2\)"),
    (-3, ValueError, "axis -3 is out of range"),
    (1.5, TypeError, "axis must be an int, a tuple of ints or None, got 1.5"),
    ("0", TypeError, "axis must be an int, a tuple of ints or None, got '0'"),
    (True, TypeError, "axis must be an int, a tuple of ints or None, got True"),
    ((0, -2), ValueError, r"axis \(0, -2\) names axis 0 twice; list each axis once"),
])
def test_reduction_axis_is_checked(op, axis, error, match):
    with pytest.raises(error, match=f"{op}: {match}"):
        if op == "sum":
            _t(2, 3).sum(axis=axis)
        else:
            getattr(fm, op)(_t(2, 3), axis=axis)


@pytest.mark.parametrize("op", ["sum", "mean"])
def test_reduction_keepdims_is_a_real_flag(op):
    with pytest.raises(TypeError, match=f"{op}: keepdims must be True or False, got 'False'"):
        getattr(_t(2, 3), op)(axis=0, keepdims="False")


def test_reductions_take_an_axis_list_like_a_tuple():
    x = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert x.sum(axis=[0, 1]).item() == x.sum(axis=(0, 1)).item() == 15.0


def test_softmax_and_log_softmax_of_0d_are_0d():
    # torch: softmax of a single value is 1, log_softmax 0; their gradients are 0
    for op, value in ((fm.softmax, 1.0), (fm.log_softmax, 0.0)):
        for x in (Tensor(3.0, requires_grad=True), Tensor(np.float32(3.0), requires_grad=True)):
            y = op(x)
            assert y.shape == () and y.item() == value
            y.backward()
            assert x.grad.shape == () and x.grad == 0.0
    x = Tensor(np.float32(3.0), requires_grad=True)
    x.mean(axis=-1).backward()  # axis 0 / -1 of a 0-d tensor, as torch's dim
    assert x.grad == 1.0


@pytest.mark.parametrize("op", [fm.softmax, fm.log_softmax])
def test_softmax_over_an_empty_axis_is_empty(op):
    x = Tensor(np.zeros((2, 0), np.float32), requires_grad=True)
    y = op(x)
    assert y.shape == (2, 0)
    y.sum().backward()
    assert x.grad.shape == (2, 0)
