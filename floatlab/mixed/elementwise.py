"""Element-wise ops (add, sub, mul, div with broadcasting; neg, relu, tanh, exp, log) and cast.

Each computes in float32 (float64 for wider formats), as torch's "opmath" does for 16-bit
types, and rounds its result once through :func:`~floatlab.mixed.quantize` to the format the
active policy assigns to the op; its backward rounds the gradients it sends the same way.

>>> from floatlab.mixed import Tensor, use_precision
>>> with use_precision("16-true"):
...     mul(Tensor([2.0**-13]), Tensor([2.0**-13])).data.tolist()   # below fp16's subnormals
[0.0]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from floatlab._validate import _is_real_number
from floatlab.formats import Format, get_format
from floatlab.mixed.autograd import Tensor, _operand, _result, _send, _work
from floatlab.mixed.policy import storage_dtype
from floatlab.mixed.scope import _scope, active_policy, quantize
from floatlab.promotion import contains

__all__ = ["add", "sub", "mul", "div", "neg", "relu", "tanh", "exp", "log", "reciprocal",
           "cast"]


# --------------------------------------------------------------------------- element-wise ops

def _unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, bool]:
    """Sum ``g`` down to ``shape`` (the backward of broadcasting); report whether it summed."""
    if g.shape == shape:
        return g, False
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1
    )
    return g.sum(axis=axes, keepdims=True).reshape(shape), True


def _broadcast_error(op: str, a: Tensor, b: Tensor) -> ValueError:
    return ValueError(f"{op}: shapes {a.shape} and {b.shape} do not broadcast (trailing "
                      "dimensions must be equal or 1); reshape one of them")


def _binary(op: str, a: Any, b: Any, fn: Callable, grads: tuple[Callable, Callable], *,
            both: bool = False) -> Tensor:
    """An element-wise op of two operands; Python numbers are 'weak' (take the tensor's format).

    ``grads`` holds the element-wise gradient of each operand as a function ``(g, x, y, r)``;
    ``r`` rounds an intermediate result to the op's format, for formulas of several torch ops
    (div). Only the gradients an operand needs are computed, unless ``both``: a formula that
    rounds intermediates draws random numbers under stochastic rounding, so it runs whether
    or not its operand needs it, and a run's random stream does not depend on that. Backward
    follows torch's order: the element-wise gradient is rounded to the op's format first, then
    summed over the broadcast axes (``sum_to_size``: accumulated in float32, or float64 for
    wider formats, and rounded once), then cast to the input's format.
    """
    da, db = grads
    # a number, ml_dtypes' scalars too (bfloat16(1.5) is one, not a float32 tensor)
    if _is_real_number(a) or _is_real_number(b):
        t, s, t_first = (b, float(a), False) if _is_real_number(a) else (a, float(b), True)
        t = _operand(t, f"{op}: {'a' if t_first else 'b'}")
        fmt = t.fmt
        out = quantize(fn(t.data, s) if t_first else fn(s, t.data), fmt)

        def backward_scalar(g: np.ndarray) -> None:
            r = _rounder(fmt)
            x, y = (t.data, s) if t_first else (s, t.data)
            if both:  # the other gradient too: its roundings draw random numbers (see above)
                (db if t_first else da)(g, x, y, r)
            _send(t, da(g, x, y, r) if t_first else db(g, x, y, r), fmt)

        return _result(out, fmt, (t,), backward_scalar, op)
    a, b = _operand(a, f"{op}: a"), _operand(b, f"{op}: b")
    fmt = active_policy().op_format(op, *_promoted(a, b))
    try:
        out = quantize(fn(_cast_in(a, fmt), _cast_in(b, fmt)), fmt)
    except ValueError:
        raise _broadcast_error(op, a, b) from None

    def backward(g: np.ndarray) -> None:
        x, y, r = _cast_in(a, fmt), _cast_in(b, fmt), _rounder(fmt)
        ga = da(g, x, y, r) if a.requires_grad or both else None
        gb = db(g, x, y, r) if b.requires_grad or both else None
        for t, gt in ((a, ga), (b, gb)):
            if t.requires_grad:
                gt = np.broadcast_to(gt, g.shape)
                if gt.shape != t.shape:  # torch: round the element-wise gradient, then reduce
                    gt, _ = _unbroadcast(quantize(gt, fmt, what="grads"), t.shape)
                _send(t, gt, fmt)

    return _result(out, fmt, (a, b), backward, op)


def _promoted(a: Tensor, b: Tensor) -> tuple[Format, ...]:
    """The formats that decide a binary op's result format, as torch's type promotion: a 0-d
    operand with a dimensioned one is weak, like a Python number (torch ranks dimensioned
    tensors above zero-dim ones within a category, and every format here is a float): a bf16
    vector times a 0-d float32 tensor is bf16. Otherwise both (the wider one wins)."""
    if (a.ndim == 0) != (b.ndim == 0):
        return (b.fmt,) if a.ndim == 0 else (a.fmt,)
    return a.fmt, b.fmt


def _cast_in(t: Tensor, fmt: Format) -> np.ndarray:
    """``t``'s values as the op of format ``fmt`` reads them: as they are where ``fmt`` holds
    them, else cast to ``fmt`` (a weak 0-d operand wider than the result, see
    :func:`_promoted`: torch's TensorIterator casts every input to the common dtype)."""
    if contains(fmt, t.fmt):
        return _work(t, fmt)
    return quantize(t.data, fmt, what="partial").astype(storage_dtype(fmt), copy=False)


def _rounder(fmt: Format) -> Callable[[np.ndarray], np.ndarray]:
    """Rounds an intermediate of a gradient formula (transient: not counted by telemetry)."""
    return lambda v: quantize(np.asarray(v), fmt, what="partial")


def add(a: Any, b: Any) -> Tensor:
    """``a + b`` with broadcasting; the result takes the wider input format.

    >>> (Tensor([[1.0, 2.0]]) + Tensor([10.0])).data.tolist()
    [[11.0, 12.0]]
    """
    return _binary("add", a, b, np.add, (lambda g, x, y, r: g, lambda g, x, y, r: g))


def sub(a: Any, b: Any) -> Tensor:
    """``a - b`` with broadcasting (one rounding, not add + neg)."""
    return _binary("sub", a, b, np.subtract, (lambda g, x, y, r: g, lambda g, x, y, r: -g))


def mul(a: Any, b: Any) -> Tensor:
    """``a * b`` with broadcasting; the result takes the wider input format.

    >>> from floatlab.mixed import use_precision
    >>> with use_precision("16-true"):
    ...     (Tensor([2.0**-13]) * Tensor([2.0**-13])).data.tolist()   # below fp16's subnormals
    [0.0]
    """
    return _binary("mul", a, b, np.multiply,
                   (lambda g, x, y, r: g * y, lambda g, x, y, r: g * x))


def div(a: Any, b: Any) -> Tensor:
    """``a / b`` with broadcasting; the result takes the wider input format.

    Backward is torch's: ``g / b`` for ``a`` and ``-g * ((a / b) / b)`` for ``b``, each op
    rounded to the op's format.

    >>> x, y = Tensor([[3.0], [5.0]], requires_grad=True), Tensor([2.0], requires_grad=True)
    >>> (x / y).sum().backward(); x.grad.tolist(), y.grad.tolist()
    ([[0.5], [0.5]], [-2.0])
    """
    return _binary("div", a, b, np.divide,
                   (lambda g, x, y, r: g / y, lambda g, x, y, r: -(g * r(r(x / y) / y))),
                   both=True)


def neg(a: Tensor) -> Tensor:
    """``-a`` (exact in every signed format)."""
    a = _operand(a, "neg: a")
    out = quantize(-a.data, a.fmt, exact=True)
    return _result(out, a.fmt, (a,), lambda g: _send(a, -g, a.fmt, exact=True), "neg")



def relu(x: Tensor) -> Tensor:
    """``max(x, 0)``: exact, so nothing is rounded; backward counts the telemetry's underflow.

    Backward is torch's, bit for bit: ``threshold_backward(grad, result, 0)``, the gradient
    where the output is not <= 0 and +0 elsewhere (so a NaN input passes its gradient, as in
    torch). The gradient entries at positions the ReLU lets through are counted, and the
    zero ones among them: in exact arithmetic those zeros do not happen, so they measure how
    many activation gradients underflowed (the paper's statistic).

    >>> from floatlab.mixed import Tensor
    >>> x = Tensor([2.0, -1.0, 0.0], requires_grad=True)
    >>> relu(x).backward(grad=[-3.0, -3.0, float("inf")]); x.grad.tolist()
    [-3.0, 0.0, 0.0]
    """
    x = _operand(x, "relu: x")
    out = quantize(np.maximum(x.data, x.data.dtype.type(0)), x.fmt, exact=True)

    def backward(g: np.ndarray) -> None:
        # torch's relu backward is threshold_backward(grad, result, 0), i.e. where(result <= 0,
        # 0, grad): +0 wherever the ReLU blocks (whatever g is there: negative, inf or NaN)
        # and g itself where it passes, a NaN input included (NaN <= 0 is false). A plain
        # g * mask would give -0 for a negative g and NaN for an infinite one; clearing every
        # bit of the blocked entries gives where()'s bits, in a fifth of np.where's time.
        passed = np.asarray(~(x.data <= 0))  # an array even for 0-d x (np.negative(out=))
        stats = _scope().stats
        if stats is not None:
            stats.observe_relu(passed, g)
        bits = np.dtype(f"u{g.dtype.itemsize}")
        keep = passed.astype(bits)
        np.negative(keep, out=keep)  # all ones where the ReLU passes, zeros where it blocks
        masked = np.bitwise_and(g.view(bits), keep).view(g.dtype)
        _send(x, masked, x.fmt, exact=True)

    return _result(out, x.fmt, (x,), backward, "relu")


def tanh(x: Tensor) -> Tensor:
    """``tanh(x)`` in the input's format."""
    x = _operand(x, "tanh: x")
    y = quantize(np.tanh(x.data), x.fmt)
    return _result(y, x.fmt, (x,), lambda g: _send(x, g * (1 - y * y), x.fmt), "tanh")


def _safe_unary(op: str, x: Any, fn: Callable, dfn: Callable) -> Tensor:
    x = _operand(x, f"{op}: x")
    fmt = active_policy().op_format(op, x.fmt)
    xin = _work(x, fmt)
    y = quantize(fn(xin), fmt)

    def backward(g: np.ndarray) -> None:
        _send(x, dfn(g, xin, y), fmt)

    return _result(y, fmt, (x,), backward, op)


def exp(x: Any) -> Tensor:
    """``exp(x)``: on CUDA's float32 list in mixed modes; in its input's format on CPU.

    >>> from floatlab.mixed import use_precision
    >>> with use_precision("16-mixed"):
    ...     exp(Tensor([12.0], "fp16")).fmt.name      # e**12 > 65504 would overflow fp16
    'float32'
    """
    return _safe_unary("exp", x, np.exp, lambda g, x, y: g * y)


def log(x: Any) -> Tensor:
    """``log(x)``: on CUDA's float32 list in mixed modes; in its input's format on CPU."""
    return _safe_unary("log", x, np.log, lambda g, x, y: g / x)


def reciprocal(x: Any) -> Tensor:
    """``1 / x``, torch's ``reciprocal``: on CUDA's float32 list in mixed modes, in its input's
    format on CPU. Backward is torch's ``-grad * (result * result)``, each product in the op's
    format. It is also what ``number / tensor`` runs, as in torch, whose ``__rtruediv__`` is
    ``reciprocal(tensor) * number`` (two roundings, not one division).

    >>> from floatlab.mixed import use_precision
    >>> with use_precision("16-mixed"):
    ...     y = 3.0 / Tensor([7.0], "fp16")
    >>> y.fmt.name, y.data.tolist() == [np.float32(np.float32(1 / 7) * 3)]
    ('float32', True)
    """
    x = _operand(x, "reciprocal: x")
    fmt = active_policy().op_format("reciprocal", x.fmt)
    xin = _work(x, fmt)
    y = quantize(np.reciprocal(xin), fmt)
    r = _rounder(fmt)
    return _result(y, fmt, (x,), lambda g: _send(x, -(g * r(y * y)), fmt), "reciprocal")


def cast(x: Any, fmt: str | Format) -> Tensor:
    """``x`` converted to ``fmt`` (autocast's cast); its backward rounds the gradient back to
    ``x``'s format.

    >>> cast(Tensor([0.1]), "bf16").data.tolist()
    [0.10009765625]
    """
    x = _operand(x, "cast: x")
    fmt = get_format(fmt)
    out = quantize(x.data, fmt)
    return _result(out, fmt, (x,), lambda g: _send(x, g, fmt, exact=True), "cast")
