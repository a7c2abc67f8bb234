"""Reductions and the softmax family: sum, mean, softmax, log_softmax, cross_entropy.

Each accumulates in float32 (float64 for wider formats) and rounds its result once to the
format of its autocast list on the policy's device (CUDA's float32 list for sum, softmax,
log_softmax and cross_entropy in mixed modes; on CPU only the losses are on it).

>>> from floatlab.mixed import Tensor
>>> round(cross_entropy(Tensor([[0.0, 0.0]]), [1]).item(), 6)   # log 2
0.693147
"""

from __future__ import annotations

from typing import Any

import numpy as np

from floatlab._validate import as_array
from floatlab.mixed import elementwise as _elementwise
from floatlab.mixed.autograd import Tensor, _operand, _result, _send, _work
from floatlab.mixed.checks import IndexRangeError, axes, flag
from floatlab.mixed.scope import active_policy, quantize

__all__ = ["sum", "mean", "softmax", "log_softmax", "cross_entropy"]


# --------------------------------------------------------------------------- reductions

def _expand(g: np.ndarray, axis: Any, keepdims: bool, shape: tuple[int, ...]) -> np.ndarray:
    if axis is not None and not keepdims:
        g = np.expand_dims(g, axis)
    return np.broadcast_to(g, shape)


def _count(shape: tuple[int, ...], axis: Any) -> int:
    if axis is None:
        return int(np.prod(shape))
    picked = (axis,) if isinstance(axis, int) else axis
    return int(np.prod([shape[a] for a in picked]))


def sum(  # noqa: A001 - torch's name
    x: Any, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
) -> Tensor:
    """Sum over ``axis`` (all axes by default), accumulated in float32 (or wider); the result is
    float32 in mixed modes on CUDA, in the input's format on CPU. ``axis=()`` reduces over no
    axis, as numpy's does; torch's ``dim=()`` reduces over all of them (pytorch issue 29137).

    >>> Tensor([[1.0, 2.0], [3.0, 4.0]]).sum(axis=0).data.tolist()
    [4.0, 6.0]
    """
    x = _operand(x, "sum: x")
    axis, keepdims = axes("sum", axis, x.ndim), flag("sum: keepdims", keepdims)
    fmt = active_policy().op_format("sum", x.fmt)
    out = quantize(np.asarray(_work(x, fmt).sum(axis=axis, keepdims=keepdims)), fmt)

    def backward(g: np.ndarray) -> None:
        _send(x, _expand(g, axis, keepdims, x.shape), fmt, exact=True)

    return _result(out, fmt, (x,), backward, "sum")


def mean(x: Any, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor:
    """Mean over ``axis`` (all axes by default), accumulated in float32 (or wider) and rounded
    to the input's format: autocast lists mean on neither device. ``axis=()`` reduces over no
    axis, as numpy's does (torch's ``dim=()`` reduces over all: see :func:`sum`)."""
    x = _operand(x, "mean: x")
    axis, keepdims = axes("mean", axis, x.ndim), flag("mean: keepdims", keepdims)
    fmt = active_policy().op_format("mean", x.fmt)
    n = _count(x.shape, axis)
    out = quantize(np.asarray(_work(x, fmt).mean(axis=axis, keepdims=keepdims)), fmt)

    def backward(g: np.ndarray) -> None:
        _send(x, _expand(g / n, axis, keepdims, x.shape), fmt)

    return _result(out, fmt, (x,), backward, "mean")


def softmax(x: Any, axis: int = -1, *, subtract_max: bool = True) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``axis``, in the format of softmax's autocast list (CUDA's
    float32 list; on CPU, on no list: the input's format).

    ``subtract_max=True`` is the stable form every library uses: ``exp(x - max)`` cannot
    overflow, and the result is computed in float32 (float64 for wider formats) and rounded
    once; backward is torch's ``_softmax_backward_data``, ``(g - sum(g y)) y``.
    ``subtract_max=False`` is the textbook formula written by hand in the op's format, with
    the lab's :func:`~floatlab.mixed.exp`, :func:`sum` and :func:`~floatlab.mixed.div`:
    ``exp(x)``, the sum and the quotient are each rounded to it, so in float16 a logit above
    log(65504) ~ 11.09 gives inf and the row becomes NaN; backward runs through the three ops,
    as torch's autograd does for a softmax written by hand.

    >>> from floatlab.mixed import use_precision
    >>> with use_precision("16-true"):
    ...     row = Tensor([[12.0, 0.0]])
    ...     softmax(row).data.tolist(), softmax(row, subtract_max=False).data.tolist()
    ([[1.0, 6.139278411865234e-06]], [[nan, 0.0]])
    """
    x = _operand(x, "softmax: x")
    subtract_max = flag("softmax: subtract_max", subtract_max)
    axis = axes("softmax", axis, x.ndim)
    if not subtract_max:
        # Written by hand, it is three ops, and torch's autograd differentiates those three
        # (exp's grad * result, sum's expand, div's two gradients), not softmax's fused
        # formula: so it is built from the lab's ops. Each op's format is softmax's on every
        # policy and device (exp, sum and softmax share CUDA's float32 list and no CPU list).
        e = _elementwise.exp(x)
        return _elementwise.div(e, sum(e, axis=axis, keepdims=True))
    fmt = active_policy().op_format("softmax", x.fmt)
    z = _work(x, fmt)
    if z.size == 0:  # an empty axis has no max (numpy raises); torch gives an empty result
        return _result(z.copy(), fmt, (x,), lambda g: _send(x, g, fmt), "softmax")
    # an array even for 0-d input (numpy gives a scalar, which np.exp(out=) refuses)
    e = np.asarray(z - z.max(axis=axis, keepdims=True))  # in place below: attention's scores
    # exp of the shifted scores underflows to zero far below the max: the stable formula's
    # own rounding, no FloatingPointError under a caller's np.errstate(under="raise")
    with np.errstate(under="ignore"):
        e = np.exp(e, out=e)  # are a step's largest array
        e /= e.sum(axis=axis, keepdims=True)
    y = quantize(e, fmt)

    def backward(g: np.ndarray) -> None:
        gx = np.asarray(g * y)  # y * (g - sum(g * y)), in place (an array even when 0-d)
        np.subtract(g, gx.sum(axis=axis, keepdims=True), out=gx)
        gx *= y
        _send(x, gx, fmt)

    return _result(y, fmt, (x,), backward, "softmax")


def log_softmax(x: Any, axis: int = -1) -> Tensor:
    """``x - log(sum(exp(x)))`` along ``axis``, computed stably; on CUDA's float32 list, in the
    input's format on CPU."""
    x = _operand(x, "log_softmax: x")
    axis = axes("log_softmax", axis, x.ndim)
    fmt = active_policy().op_format("log_softmax", x.fmt)
    z = _work(x, fmt)
    if z.size == 0:  # an empty axis has no max (numpy raises); torch gives an empty result
        return _result(z.copy(), fmt, (x,), lambda g: _send(x, g, fmt), "log_softmax")
    shifted = z - z.max(axis=axis, keepdims=True)
    with np.errstate(under="ignore"):  # terms far below the max: negligible, not an error
        lse = np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
    y = quantize(shifted - lse, fmt)

    def backward(g: np.ndarray) -> None:
        _send(x, _log_softmax_grad(g, y, axis), fmt)

    return _result(y, fmt, (x,), backward, "log_softmax")


def _log_softmax_grad(g: np.ndarray, out: np.ndarray, axis: int) -> np.ndarray:
    """torch's ``_log_softmax_backward_data``: ``g - exp(out) * sum(g)`` along ``axis``, each
    step in ``out``'s dtype (``out``: log_softmax's output)."""
    return g - np.exp(out) * g.sum(axis=axis, keepdims=True)


def _check_targets(targets: Any, batch: int, classes: int,
                   what: str = "cross_entropy") -> np.ndarray:
    """One class index in [0, classes) per row, or an error naming ``what`` (the caller)."""
    # as_array: a masked array would lose its mask (its hidden labels counted)
    t = as_array(targets.data if isinstance(targets, Tensor) else targets, f"{what}: targets")
    if t.dtype.kind not in "iu":
        if t.dtype.kind == "f" and np.all(t == np.round(t)):  # [] is float64: no rows
            t = t.astype(np.int64)
        else:
            raise TypeError(f"{what}: targets must be integer class indices, got dtype "
                            f"{t.dtype}; pass e.g. y.astype(np.int64)")
    if t.shape != (batch,):
        raise ValueError(f"{what}: targets have shape {t.shape} but the logits have "
                         f"{batch} rows: pass one class index per row, shape ({batch},)")
    if t.size and (t.min() < 0 or t.max() >= classes):
        raise IndexRangeError(f"{what}: targets must lie in [0, {classes}) for {classes} "
                              f"classes, got values from {t.min()} to {t.max()}")
    return t


def cross_entropy(logits: Tensor, targets: Any, reduction: str = "mean") -> Tensor:
    """Softmax cross-entropy of ``logits`` (batch, classes) against class indices, in float32
    in mixed modes (autocast's float32 list on CUDA and CPU).

    Where it differs from torch's ``cross_entropy``: ``targets`` may be class indices of any
    integer dtype (torch wants int64) or floats holding whole numbers, read as indices (torch
    reads float targets as class probabilities, of the logits' shape, which this does not
    take); an index outside [0, classes) is an IndexError, as torch's. Only 2-D logits, and
    no ``weight``, ``ignore_index`` or ``label_smoothing`` (``reduction`` is torch's: "mean",
    "sum", "none"; the mean of an empty batch is NaN, as torch's).

    >>> round(cross_entropy(Tensor([[0.0, 0.0]]), [1]).item(), 6)   # log 2
    0.693147
    """
    logits = _operand(logits, "cross_entropy: logits")
    if logits.ndim != 2:
        raise ValueError(f"cross_entropy: logits must be (batch, classes), got shape "
                         f"{logits.shape}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"cross_entropy: reduction={reduction!r}; use 'mean', 'sum' or 'none'")
    batch, classes = logits.shape
    y = _check_targets(targets, batch, classes)
    rows = np.arange(batch)
    fmt = active_policy().op_format("cross_entropy", logits.fmt)
    z = _work(logits, fmt)
    shifted = z - z.max(axis=1, keepdims=True)
    with np.errstate(under="ignore"):  # terms far below the max: negligible, not an error
        lse = np.log(np.exp(shifted).sum(axis=1))
    per_row = lse - shifted[rows, y]
    values = {"mean": lambda: per_row.mean(), "sum": lambda: per_row.sum(),
              "none": lambda: per_row}[reduction]()
    out = quantize(np.asarray(values, dtype=z.dtype), fmt)

    def backward(g: np.ndarray) -> None:
        # torch's composition, each step in the op's dtype: nll_loss's backward puts -w at
        # each row's target (w = g / batch for the mean, else g), then log_softmax's backward:
        # fl(-w - fl(p * -w)) at the target, not fl(fl(p - 1) * w), which is the same number
        # only when w is a power of two (and differs in zero signs)
        nll = np.zeros_like(shifted)
        nll[rows, y] = -(g / batch if reduction == "mean" else g)
        _send(logits, _log_softmax_grad(nll, shifted - lse[:, None], 1), fmt)

    return _result(out, fmt, (logits,), backward, "cross_entropy")
