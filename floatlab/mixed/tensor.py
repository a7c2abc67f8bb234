"""A small reverse-mode autograd whose every result is rounded by the active precision policy.

A :class:`Tensor` holds a float32 or float64 array whose values are exactly representable in
the tensor's :class:`~floatlab.Format` (``tensor.fmt``). Each op computes in float32 (float64
for wider formats), as torch's "opmath" does for 16-bit types, and then rounds its result once
through :func:`quantize` -- the single hook where emulation happens -- to the format the active
:class:`~floatlab.mixed.Policy` assigns to that op. Backward closures sit next to their forward
(micrograd style) and round the gradients they produce the same way: first to the op's format,
then, like the backward of an autocast cast, to the format of the input they flow into.

>>> import numpy as np
>>> from floatlab.mixed import Tensor, use_precision
>>> with use_precision("16-mixed"):
...     x = Tensor(np.full((1, 2), 1e-3, np.float32))        # data enters in float32
...     w = Tensor(np.ones((1, 2), np.float32), requires_grad=True)
...     h = x @ w.T                                           # matmul in fp16
...     y = h.sum()                                           # sum in fp32
...     y.backward()
>>> x.fmt.name, h.fmt.name, y.fmt.name, w.grad.tolist()
('float32', 'float16', 'float32', [[0.0010004043579101562, 0.0010004043579101562]])

The gradient of ``w`` is ``x`` rounded to fp16 (the matmul read an fp16 copy of ``x``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from floatlab.accumulate import Accumulator
from floatlab.accumulate import matmul as accumulate_matmul
from floatlab.formats import Format, get_format
from floatlab.mixed.checks import flag
from floatlab.mixed.policy import (
    FP32,
    FP64,
    Policy,
    contains,
    get_policy,
    is_identity,
    storage_dtype,
)
from floatlab.mixed.telemetry import StepStats
from floatlab.rounding import as_float_array
from floatlab.rounding import round as _round

__all__ = [
    "Tensor", "quantize", "use_precision", "no_grad", "recording", "active_policy",
    "matmul", "linear", "add", "sub", "mul", "div", "neg", "relu", "tanh", "exp", "log",
    "sum", "mean", "softmax", "log_softmax", "cross_entropy", "cast", "prime_copies",
]


# --------------------------------------------------------------------------- the active scope

@dataclass(frozen=True)
class _Scope:
    policy: Policy
    rng: np.random.Generator | None = None
    stats: StepStats | None = None
    grad_enabled: bool = True
    pending: list | None = None  # parameter gradients waiting to be rounded (in backward)


_DEFAULT_SCOPE = _Scope(get_policy())
_SCOPE: ContextVar[_Scope] = ContextVar("floatlab_mixed_scope")


def _scope() -> _Scope:
    return _SCOPE.get(_DEFAULT_SCOPE)


def active_policy() -> Policy:
    """The policy ops use right now ("32-true" outside any :func:`use_precision` block)."""
    return _scope().policy


@contextmanager
def _pushed(**changes: Any) -> Iterator[_Scope]:
    token = _SCOPE.set(replace(_scope(), **changes))
    try:
        yield _scope()
    finally:
        _SCOPE.reset(token)


@contextmanager
def use_precision(
    precision: Any = "32-true", *, rng: np.random.Generator | int | None = None, **overrides: Any
) -> Iterator[Policy]:
    """Run the ops inside the block under a precision policy; yields the :class:`Policy`.

    ``precision`` and ``overrides`` go to :func:`~floatlab.mixed.get_policy`. ``rng`` (a
    Generator or seed, default 0) drives stochastic rounding when the policy asks for it.

    >>> with use_precision("bf16-true") as p:
    ...     Tensor([1.0 + 2**-9]).data.tolist(), p.name
    ([1.0], 'bf16-true')
    """
    policy = get_policy(precision, **overrides)
    if not isinstance(rng, np.random.Generator) and (rng is not None
                                                     or policy.rounding == "stochastic"):
        rng = np.random.default_rng(rng or 0)
    # Overflow and NaN are what the lab studies: telemetry counts them, so NumPy's warnings
    # about them are silenced inside a policy block (one errstate here, none per op).
    with _pushed(policy=policy, rng=rng), np.errstate(all="ignore"):
        yield policy


@contextmanager
def no_grad() -> Iterator[None]:
    """Ops inside the block build no graph (for evaluation)."""
    with _pushed(grad_enabled=False):
        yield


@contextmanager
def recording(stats: StepStats) -> Iterator[StepStats]:
    """Let the hook count what it rounds into ``stats`` (see :mod:`floatlab.mixed.telemetry`)."""
    with _pushed(stats=stats):
        yield stats


# --------------------------------------------------------------------------- the single hook

_DT32, _DT64 = np.dtype(np.float32), np.dtype(np.float64)
_FALLBACK_RNG = np.random.default_rng(0)  # stochastic rounding outside a seeded scope
_PLANS: dict[int, tuple[Format, np.dtype, bool, bool]] = {}


def _plan(fmt: Format) -> tuple[Format, np.dtype, bool, bool]:
    """(fmt, storage dtype, float32 input is already exact, float64 input is already exact),
    memoised by identity: the hook runs a few dozen times per step and hashing a Format
    dataclass would cost more than the lookup."""
    plan = _PLANS.get(id(fmt))
    if plan is None or plan[0] is not fmt:
        plan = (fmt, storage_dtype(fmt), is_identity(fmt, _DT32), is_identity(fmt, _DT64))
        _PLANS[id(fmt)] = plan
    return plan


def quantize(
    values: np.ndarray,
    fmt: Format,
    *,
    what: str = "activations",
    exact: bool = False,
    rounding: str | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Round ``values`` to ``fmt`` under the active policy: the one place emulation happens.

    Returns an array of ``fmt``'s storage dtype (float32 when the format fits, else float64).
    Roundings that cannot change anything (float32 values to float32, any format to a wider
    one, or ``exact=True``: the caller knows the values are already in ``fmt``) are skipped.
    ``what`` labels the values for telemetry: "activations", "grads", "weights", "optimizer",
    "inputs" (transient matmul-input roundings, not held), or "partial" (matmul partial sums,
    not counted at all). ``rounding`` / ``rng`` override the policy's rounding mode and the
    scope's generator (the optimizers' stochastic updates use them).

    >>> import numpy as np; from floatlab import get_format
    >>> quantize(np.array([1 / 3], np.float32), get_format("bf16")).tolist()
    [0.333984375]
    """
    scope = _scope()
    _, dtype, exact32, exact64 = _plan(fmt)
    vdtype = values.dtype
    if exact or (exact32 if vdtype is _DT32 else exact64 if vdtype is _DT64 else False):
        out = values if vdtype is dtype else values.astype(dtype)
    else:
        policy = scope.policy
        rounding = rounding or policy.rounding
        if rounding == "stochastic" and rng is None:
            rng = scope.rng or _FALLBACK_RNG
        # floatlab.round warns about an rng passed with a deterministic mode: only hand it on
        # when it is used (the optimizer threads its Generator through every write).
        out = _round(values, fmt, rounding=rounding, saturate=policy.saturate,
                     rng=rng if rounding == "stochastic" else None, dtype=dtype)
    if scope.stats is not None and what != "partial":
        scope.stats.observe(values, out, fmt, what)
    return out


# --------------------------------------------------------------------------- Tensor

Backward = Callable[[np.ndarray], None]


class Tensor:
    """An array of values in one floatlab format, with an optional gradient and graph node.

    Parameters
    ----------
    data : numbers or an array; rounded to ``fmt`` (never modified; the tensor keeps a copy).
    fmt : the values' format; default: the active policy's format for incoming data.
    requires_grad : make this a leaf whose ``.grad`` backward() fills (a parameter).
    name : an optional label for reprs.

    >>> t = Tensor([1.0, 2.0], requires_grad=True)
    >>> (t * t).sum().backward(); t.grad.tolist()
    [2.0, 4.0]
    """

    __slots__ = ("data", "fmt", "grad", "requires_grad", "name", "_op", "_parents",
                 "_backward", "_copy")
    __array_priority__ = 1000  # ndarray (op) Tensor defers to Tensor's reflected operators

    def __init__(
        self,
        data: Any,
        fmt: str | Format | None = None,
        *,
        requires_grad: bool = False,
        name: str | None = None,
    ) -> None:
        fmt = active_policy().inputs if fmt is None else get_format(fmt)
        arr = as_float_array(data.data if isinstance(data, Tensor) else data, name="data")
        values = quantize(arr, fmt)
        self.data = values.copy() if values is arr or values.base is not None else values
        self.fmt = fmt
        self.grad: np.ndarray | None = None
        self.requires_grad = bool(requires_grad)
        self.name = name
        self._op = "leaf"
        self._parents: tuple[Tensor, ...] = ()
        self._backward: Backward | None = None
        self._copy: tuple[np.ndarray, Format, np.ndarray] | None = None

    # ------------------------------------------------------------------ basics
    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> int:
        return self.data.size

    @property
    def T(self) -> Tensor:
        """The transpose (2-D tensors), as an exact op."""
        return _transpose(self)

    def numpy(self) -> np.ndarray:
        """A copy of the values (float32 or float64 storage)."""
        return self.data.copy()

    def item(self) -> float:
        """The value of a one-element tensor as a Python float."""
        if self.data.size != 1:
            raise ValueError(f"item() needs a one-element tensor, this one has shape {self.shape}")
        return float(self.data.reshape(-1)[0])

    def detach(self) -> Tensor:
        """The same values with no graph and no gradient."""
        return _result(self.data, self.fmt, (), None, "detach")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.data.astype(dtype) if dtype is not None else self.data.copy()

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        grad = f", grad_fn={self._op}" if self._parents else ""
        req = ", requires_grad=True" if self.requires_grad and not self._parents else ""
        name = f"{self.name!r}, " if self.name else ""
        body = np.array2string(self.data, precision=5, threshold=6, edgeitems=2)
        return f"Tensor({name}{body}, {self.fmt.name}{req}{grad})"

    # ------------------------------------------------------------------ operators
    def __add__(self, other: Any) -> Tensor:
        return add(self, other)

    def __radd__(self, other: Any) -> Tensor:
        return add(other, self)

    def __sub__(self, other: Any) -> Tensor:
        return sub(self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return sub(other, self)

    def __mul__(self, other: Any) -> Tensor:
        return mul(self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return mul(other, self)

    def __truediv__(self, other: Any) -> Tensor:
        return div(self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return div(other, self)

    def __neg__(self) -> Tensor:
        return neg(self)

    def __matmul__(self, other: Any) -> Tensor:
        return matmul(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        return matmul(other, self)

    def relu(self) -> Tensor:
        return relu(self)

    def tanh(self) -> Tensor:
        return tanh(self)

    def exp(self) -> Tensor:
        return exp(self)

    def log(self) -> Tensor:
        return log(self)

    def sum(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor:
        return sum(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor:
        return mean(self, axis=axis, keepdims=keepdims)

    def softmax(self, axis: int = -1, *, subtract_max: bool = True) -> Tensor:
        return softmax(self, axis=axis, subtract_max=subtract_max)

    def log_softmax(self, axis: int = -1) -> Tensor:
        return log_softmax(self, axis=axis)

    # ------------------------------------------------------------------ autograd
    def backward(self, grad: Any = None, *, retain_graph: bool = False) -> None:
        """Fill ``.grad`` of every tensor this one depends on (accumulating into leaves).

        ``grad`` is the gradient of some scalar with respect to this tensor (default 1 for a
        one-element tensor). The graph's closures are freed afterwards unless ``retain_graph``.
        """
        if not self.requires_grad:
            raise RuntimeError("backward(): this tensor does not require grad -- none of its "
                               "inputs was created with requires_grad=True")
        if self._op == "freed":
            raise RuntimeError("backward() through a graph a second time: its closures were "
                               "freed by the first call; pass retain_graph=True to that call")
        if grad is None:
            if self.data.size != 1:
                raise RuntimeError(f"backward() without grad= needs a one-element tensor; this "
                                   f"one has shape {self.shape}: pass grad= of that shape")
            seed = np.ones(self.shape, storage_dtype(self.fmt))
        else:
            seed = as_float_array(grad.data if isinstance(grad, Tensor) else grad, name="grad")
            if seed.shape != self.shape:
                raise ValueError(f"backward(grad=...): grad has shape {seed.shape}, the tensor "
                                 f"has shape {self.shape}; they must match")
        order = _topological(self)
        for node in order:  # only leaves accumulate across backward calls (as in torch)
            if node._parents:
                node.grad = None
        # inf / NaN gradients are expected events (the scaler skips them, telemetry counts them)
        pending: list[tuple[Tensor, np.ndarray, Format, bool]] = []
        with np.errstate(all="ignore"):
            with _pushed(pending=pending):
                _send(self, seed, self.fmt)
                for node in reversed(order):
                    if node._backward is not None and node.grad is not None:
                        node._backward(node.grad)
            _flush(pending)
        if not retain_graph:
            for node in order:
                if node._parents:
                    node._parents, node._backward, node._op = (), None, "freed"


def _topological(root: Tensor) -> list[Tensor]:
    """Nodes that need a gradient, each after all of its inputs (iterative: deep graphs work)."""
    order: list[Tensor] = []
    seen: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((p, False) for p in node._parents if p.requires_grad and id(p) not in seen)
    return order


def _result(
    data: np.ndarray, fmt: Format, parents: tuple[Tensor, ...], backward: Backward | None, op: str
) -> Tensor:
    t = Tensor.__new__(Tensor)
    t.data, t.fmt, t.grad, t.name, t._copy = data, fmt, None, None, None
    if backward is not None and _scope().grad_enabled and any(
        p.requires_grad for p in parents
    ):
        t.requires_grad, t._parents, t._backward, t._op = True, parents, backward, op
    else:
        t.requires_grad, t._parents, t._backward, t._op = False, (), None, op
    return t


def _send(t: Tensor, g: np.ndarray, op_fmt: Format, *, exact: bool = False) -> None:
    """Deliver gradient ``g`` (computed by an op of format ``op_fmt``) to ``t``.

    The gradient is rounded to the op's format, then -- as the backward of an autocast cast
    does -- to ``t``'s format, and summed into ``t.grad`` in ``t``'s format (reused nodes).
    Gradients of leaves (parameters) wait until the end of backward, to be rounded together.
    """
    if not t.requires_grad:
        return
    pending = _scope().pending
    if pending is not None and t._op == "leaf":
        pending.append((t, g, op_fmt, exact))
        return
    _deliver(t, quantize(g, op_fmt, what="grads", exact=exact), op_fmt)


def _deliver(t: Tensor, g: np.ndarray, op_fmt: Format) -> None:
    """Add ``g`` (already in ``op_fmt``) to ``t.grad``, cast to and summed in ``t``'s format."""
    if t.fmt != op_fmt:
        g = quantize(g, t.fmt, what="grads")
    t.grad = g if t.grad is None else quantize(t.grad + g, t.fmt, what="grads")


def _flush(pending: list[tuple[Tensor, np.ndarray, Format, bool]]) -> None:
    """Round the parameters' gradients with one call per format instead of one per gradient.

    Rounding is element-wise, so the values are those of separate calls; what is saved is the
    rounding core's fixed cost per call (several per layer: weight and bias gradients).
    """
    rounded: list[np.ndarray | None] = [None] * len(pending)
    batches: dict[tuple[int, bool], list[int]] = {}
    for i, (_, _, fmt, exact) in enumerate(pending):
        batches.setdefault((id(fmt), exact), []).append(i)
    for (_, exact), idx in batches.items():
        fmt = pending[idx[0]][2]
        if len(idx) == 1 or exact:
            for i in idx:
                rounded[i] = quantize(pending[i][1], fmt, what="grads", exact=exact)
            continue
        grads = [pending[i][1] for i in idx]
        flat = quantize(np.concatenate([g.reshape(-1) for g in grads]), fmt, what="grads")
        parts = np.split(flat, np.cumsum([g.size for g in grads])[:-1])
        for i, g, part in zip(idx, grads, parts, strict=True):
            rounded[i] = part.reshape(g.shape)
    for (t, _, fmt, _), g in zip(pending, rounded, strict=True):  # in arrival order
        _deliver(t, g, fmt)


def _is_scalar(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _operand(x: Any) -> Tensor:
    if isinstance(x, Tensor):
        return x
    return Tensor(x)  # a constant in the policy's input format


def _work(t: Tensor, fmt: Format) -> np.ndarray:
    """``t``'s values in ``fmt``'s storage dtype (for ops whose format is at least ``t.fmt``)."""
    dtype = storage_dtype(fmt)
    return t.data if t.data.dtype == dtype else t.data.astype(dtype)


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


def _binary(op: str, a: Any, b: Any, fn: Callable, grads: Callable) -> Tensor:
    """An element-wise op of two operands; Python numbers are 'weak' (take the tensor's format).

    ``grads(g, x, y, r)`` returns the two element-wise gradients; ``r`` rounds an intermediate
    result to the op's format, for formulas of several torch ops (div). Backward follows
    torch's order: the element-wise gradient is rounded to the op's format first, then summed
    over the broadcast axes (``sum_to_size``: accumulated in float32, or float64 for wider
    formats, and rounded once), then cast to the input's format.
    """
    if _is_scalar(a) or _is_scalar(b):
        t, s, t_first = (b, float(a), False) if _is_scalar(a) else (a, float(b), True)
        t = _operand(t)
        fmt = t.fmt
        out = quantize(fn(t.data, s) if t_first else fn(s, t.data), fmt)

        def backward_scalar(g: np.ndarray) -> None:
            r = _rounder(fmt)
            ga, gb = grads(g, t.data, s, r) if t_first else grads(g, s, t.data, r)
            _send(t, ga if t_first else gb, fmt)

        return _result(out, fmt, (t,), backward_scalar, op)
    a, b = _operand(a), _operand(b)
    fmt = active_policy().op_format(op, a.fmt, b.fmt)
    try:
        out = quantize(fn(_work(a, fmt), _work(b, fmt)), fmt)
    except ValueError:
        raise _broadcast_error(op, a, b) from None

    def backward(g: np.ndarray) -> None:
        ga, gb = grads(g, _work(a, fmt), _work(b, fmt), _rounder(fmt))
        for t, gt in ((a, ga), (b, gb)):
            if t.requires_grad:
                gt = np.broadcast_to(gt, g.shape)
                if gt.shape != t.shape:  # torch: round the element-wise gradient, then reduce
                    gt, _ = _unbroadcast(quantize(gt, fmt, what="grads"), t.shape)
                _send(t, gt, fmt)

    return _result(out, fmt, (a, b), backward, op)


def _rounder(fmt: Format) -> Callable[[np.ndarray], np.ndarray]:
    """Rounds an intermediate of a gradient formula (transient: not counted by telemetry)."""
    return lambda v: quantize(np.asarray(v), fmt, what="partial")


def add(a: Any, b: Any) -> Tensor:
    """``a + b`` with broadcasting; the result takes the wider input format.

    >>> (Tensor([[1.0, 2.0]]) + Tensor([10.0])).data.tolist()
    [[11.0, 12.0]]
    """
    return _binary("add", a, b, np.add, lambda g, x, y, r: (g, g))


def sub(a: Any, b: Any) -> Tensor:
    """``a - b`` with broadcasting (one rounding, not add + neg)."""
    return _binary("sub", a, b, np.subtract, lambda g, x, y, r: (g, -g))


def mul(a: Any, b: Any) -> Tensor:
    """``a * b`` with broadcasting; the result takes the wider input format.

    >>> with use_precision("16-true"):
    ...     (Tensor([2.0**-13]) * Tensor([2.0**-13])).data.tolist()   # below fp16's subnormals
    [0.0]
    """
    return _binary("mul", a, b, np.multiply, lambda g, x, y, r: (g * y, g * x))


def div(a: Any, b: Any) -> Tensor:
    """``a / b`` with broadcasting; the result takes the wider input format.

    Backward is torch's: ``g / b`` for ``a`` and ``-g * ((a / b) / b)`` for ``b``, each op
    rounded to the op's format.

    >>> x, y = Tensor([[3.0], [5.0]], requires_grad=True), Tensor([2.0], requires_grad=True)
    >>> (x / y).sum().backward(); x.grad.tolist(), y.grad.tolist()
    ([[0.5], [0.5]], [-2.0])
    """
    return _binary("div", a, b, np.divide,
                   lambda g, x, y, r: (g / y, -(g * r(r(x / y) / y))))


def neg(a: Tensor) -> Tensor:
    """``-a`` (exact in every signed format)."""
    a = _operand(a)
    out = quantize(-a.data, a.fmt, exact=True)
    return _result(out, a.fmt, (a,), lambda g: _send(a, -g, a.fmt, exact=True), "neg")


def _transpose(a: Tensor) -> Tensor:
    if a.ndim != 2:
        raise ValueError(f"T: transposes 2-D tensors, this one has shape {a.shape}")
    return _result(a.data.T, a.fmt, (a,), lambda g: _send(a, g.T, a.fmt, exact=True), "transpose")


def relu(x: Tensor) -> Tensor:
    """``max(x, 0)``: exact, so nothing is rounded; backward counts the telemetry's underflow.

    In backward the gradient entries at positions the ReLU lets through are counted, and the
    zero ones among them: in exact arithmetic those zeros do not happen, so they measure how
    many activation gradients underflowed (the paper's statistic).
    """
    x = _operand(x)
    out = quantize(np.maximum(x.data, x.data.dtype.type(0)), x.fmt, exact=True)

    def backward(g: np.ndarray) -> None:
        passed = x.data > 0
        stats = _scope().stats
        if stats is not None:
            stats.observe_relu(passed, g)
        masked = g * passed  # 4x faster than np.where, and equal while g is finite...
        if not np.isfinite(masked.sum()):  # ...else inf * 0 = NaN: use torch's where()
            masked = np.where(passed, g, g.dtype.type(0))
        _send(x, masked, x.fmt, exact=True)

    return _result(out, x.fmt, (x,), backward, "relu")


def tanh(x: Tensor) -> Tensor:
    """``tanh(x)`` in the input's format."""
    x = _operand(x)
    y = quantize(np.tanh(x.data), x.fmt)
    return _result(y, x.fmt, (x,), lambda g: _send(x, g * (1 - y * y), x.fmt), "tanh")


def _safe_unary(op: str, x: Any, fn: Callable, dfn: Callable) -> Tensor:
    x = _operand(x)
    fmt = active_policy().op_format(op, x.fmt)
    xin = _work(x, fmt)
    y = quantize(fn(xin), fmt)

    def backward(g: np.ndarray) -> None:
        _send(x, dfn(g, xin, y), fmt)

    return _result(y, fmt, (x,), backward, op)


def exp(x: Any) -> Tensor:
    """``exp(x)``: on CUDA's float32 list in mixed modes; in its input's format on CPU.

    >>> with use_precision("16-mixed"):
    ...     exp(Tensor([12.0], "fp16")).fmt.name      # e**12 > 65504 would overflow fp16
    'float32'
    """
    return _safe_unary("exp", x, np.exp, lambda g, x, y: g * y)


def log(x: Any) -> Tensor:
    """``log(x)``: on CUDA's float32 list in mixed modes; in its input's format on CPU."""
    return _safe_unary("log", x, np.log, lambda g, x, y: g / x)


# --------------------------------------------------------------------------- reductions

def _expand(g: np.ndarray, axis: Any, keepdims: bool, shape: tuple[int, ...]) -> np.ndarray:
    if axis is not None and not keepdims:
        g = np.expand_dims(g, axis)
    return np.broadcast_to(g, shape)


def _count(shape: tuple[int, ...], axis: Any) -> int:
    if axis is None:
        return int(np.prod(shape))
    axes = (axis,) if isinstance(axis, int) else axis
    return int(np.prod([shape[a] for a in axes]))


def sum(  # noqa: A001 - torch's name
    x: Any, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
) -> Tensor:
    """Sum over ``axis`` (all axes by default), accumulated in float32 (or wider); the result is
    float32 in mixed modes on CUDA, in the input's format on CPU.

    >>> Tensor([[1.0, 2.0], [3.0, 4.0]]).sum(axis=0).data.tolist()
    [4.0, 6.0]
    """
    x = _operand(x)
    fmt = active_policy().op_format("sum", x.fmt)
    out = quantize(np.asarray(_work(x, fmt).sum(axis=axis, keepdims=keepdims)), fmt)

    def backward(g: np.ndarray) -> None:
        _send(x, _expand(g, axis, keepdims, x.shape), fmt, exact=True)

    return _result(out, fmt, (x,), backward, "sum")


def mean(x: Any, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor:
    """Mean over ``axis`` (all axes by default), accumulated in float32 (or wider) and rounded
    to the input's format: autocast lists mean on neither device."""
    x = _operand(x)
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
    once. ``subtract_max=False`` is the textbook formula written by hand in the op's format:
    ``exp(x)``, the sum and the quotient are each rounded to it, so in float16 a logit above
    log(65504) ~ 11.09 gives inf and the row becomes NaN.

    >>> with use_precision("16-true"):
    ...     row = Tensor([[12.0, 0.0]])
    ...     softmax(row).data.tolist(), softmax(row, subtract_max=False).data.tolist()
    ([[1.0, 6.139278411865234e-06]], [[nan, 0.0]])
    """
    x = _operand(x)
    subtract_max = flag("softmax: subtract_max", subtract_max)
    fmt = active_policy().op_format("softmax", x.fmt)
    z = _work(x, fmt)
    if subtract_max:  # in place: attention's score tensors are the largest of a step
        e = z - z.max(axis=axis, keepdims=True)
        e = np.exp(e, out=e)
        e /= e.sum(axis=axis, keepdims=True)
        y = quantize(e, fmt)
    else:
        e = quantize(np.exp(z), fmt)
        total = quantize(e.sum(axis=axis, keepdims=True), fmt)
        y = quantize(e / total, fmt)

    def backward(g: np.ndarray) -> None:
        gx = g * y  # y * (g - sum(g * y)), in place
        np.subtract(g, gx.sum(axis=axis, keepdims=True), out=gx)
        gx *= y
        _send(x, gx, fmt)

    return _result(y, fmt, (x,), backward, "softmax")


def log_softmax(x: Any, axis: int = -1) -> Tensor:
    """``x - log(sum(exp(x)))`` along ``axis``, computed stably; on CUDA's float32 list, in the
    input's format on CPU."""
    x = _operand(x)
    fmt = active_policy().op_format("log_softmax", x.fmt)
    z = _work(x, fmt)
    shifted = z - z.max(axis=axis, keepdims=True)
    y = quantize(shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True)), fmt)

    def backward(g: np.ndarray) -> None:
        _send(x, g - np.exp(y) * g.sum(axis=axis, keepdims=True), fmt)

    return _result(y, fmt, (x,), backward, "log_softmax")


def _check_targets(targets: Any, batch: int, classes: int) -> np.ndarray:
    t = np.asarray(targets.data if isinstance(targets, Tensor) else targets)
    if t.dtype.kind not in "iu":
        if t.dtype.kind == "f" and t.size and np.all(t == np.round(t)):
            t = t.astype(np.int64)
        else:
            raise TypeError(f"cross_entropy: targets must be integer class indices, got dtype "
                            f"{t.dtype}; pass e.g. y.astype(np.int64)")
    if t.shape != (batch,):
        raise ValueError(f"cross_entropy: targets have shape {t.shape} but the logits have "
                         f"{batch} rows: pass one class index per row, shape ({batch},)")
    if t.size and (t.min() < 0 or t.max() >= classes):
        raise ValueError(f"cross_entropy: targets must lie in [0, {classes}) for {classes} "
                         f"classes, got values from {t.min()} to {t.max()}")
    return t


def cross_entropy(logits: Tensor, targets: Any, reduction: str = "mean") -> Tensor:
    """Softmax cross-entropy of ``logits`` (batch, classes) against class indices, in float32
    in mixed modes (autocast's float32 list on CUDA and CPU).

    >>> round(cross_entropy(Tensor([[0.0, 0.0]]), [1]).item(), 6)   # log 2
    0.693147
    """
    logits = _operand(logits)
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
    lse = np.log(np.exp(shifted).sum(axis=1))
    per_row = lse - shifted[rows, y]
    values = {"mean": lambda: per_row.mean(), "sum": lambda: per_row.sum(),
              "none": lambda: per_row}[reduction]()
    out = quantize(np.asarray(values, dtype=z.dtype), fmt)

    def backward(g: np.ndarray) -> None:
        d = np.exp(shifted - lse[:, None])
        d[rows, y] -= 1
        if reduction == "none":
            d *= g[:, None]
        else:
            d *= g / batch if reduction == "mean" else g
        _send(logits, d, fmt)

    return _result(out, fmt, (logits,), backward, "cross_entropy")


def cast(x: Any, fmt: str | Format) -> Tensor:
    """``x`` converted to ``fmt`` (autocast's cast); its backward rounds the gradient back to
    ``x``'s format.

    >>> cast(Tensor([0.1]), "bf16").data.tolist()
    [0.10009765625]
    """
    x = _operand(x)
    fmt = get_format(fmt)
    out = quantize(x.data, fmt)
    return _result(out, fmt, (x,), lambda g: _send(x, g, fmt, exact=True), "cast")


# --------------------------------------------------------------------------- matmul / linear

def _is_parameter(t: Tensor) -> bool:
    return t.requires_grad and not t._parents and t._op == "leaf"


def _matmul_input(t: Tensor, fmt: Format) -> np.ndarray:
    """``t``'s values rounded to the matmul input format (autocast's cast of an input).

    A leaf parameter's copy is cached until its values change, so the low-precision copy of a
    weight is made once per optimizer step, as autocast's weight cache does. When the matmul
    rounds its inputs internally (TF32 / bf16 inputs of a float32 matmul) no copy is held, so
    the rounded values are not counted as held activations.
    """
    if contains(fmt, t.fmt):
        return _work(t, fmt)
    if t._op == "transpose" and t._parents and _is_parameter(t._parents[0]):
        return _matmul_input(t._parents[0], fmt).T  # w.T reads the parameter's cached copy
    if _is_parameter(t):
        cached = t._copy
        if cached is not None and cached[0] is t.data and (cached[1] is fmt or cached[1] == fmt):
            return cached[2]
        values = quantize(t.data, fmt, what="weights")
        t._copy = (t.data, fmt, values)
        return values
    held = fmt == active_policy().compute  # an autocast copy, kept for backward
    return quantize(t.data, fmt, what="activations" if held else "inputs")


def prime_copies(params: list[Tensor], fmt: Format, flat: np.ndarray | None = None) -> None:
    """Make the per-step low-precision copies of ``params`` in one rounding.

    The same values a matmul's lazy per-parameter cast would make (rounding is element-wise),
    made at once -- the master-to-model copy of Apex O2. ``flat`` is the parameters' values
    concatenated, when the caller has them (the optimizer does, right after its step).

    >>> from floatlab.mixed import parameter
    >>> w = parameter([1 / 3]); prime_copies([w], get_format("bf16"))
    >>> w._copy[2].tolist()
    [0.333984375]
    """
    todo = [p for p in params if not contains(fmt, p.fmt)]
    if not todo:
        return
    if flat is None or len(todo) != len(params):
        flat = np.concatenate([p.data.reshape(-1) for p in todo])
    low = quantize(flat, fmt, what="weights")
    start = 0
    for p in todo:
        p._copy = (p.data, fmt, low[start : start + p.size].reshape(p.shape))
        start += p.size


def _product(a: np.ndarray, b: np.ndarray, policy: Policy) -> np.ndarray:
    """``a @ b`` (2-D, or batched over leading axes) with the policy's accumulation format or
    Accumulator.

    float32 accumulation is BLAS sgemm (products of 16-bit inputs are exact in float32, sums
    round in float32): the tensor-core behaviour. A narrower accumulator, or any Accumulator,
    runs through ``floatlab.matmul`` -- the same code a user calls -- which adds one rank-1
    term per inner index to all outputs at once and rounds the running sums each time: what
    makes low-precision accumulation lose small terms ("swamping").
    """
    acc = policy.accumulate
    if not isinstance(acc, Accumulator):
        if contains(acc, FP64):
            return a.astype(np.float64) @ b.astype(np.float64)
        if contains(acc, FP32):
            return a.astype(np.float32, copy=False) @ b.astype(np.float32, copy=False)
        rng = (_scope().rng or _FALLBACK_RNG) if policy.rounding == "stochastic" else None
        acc = Accumulator(acc, policy.rounding, rng=rng)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if a.ndim == 2 and b.ndim == 2:
        return accumulate_matmul(a64, b64, acc)
    # Batched (attention) products: floatlab.matmul is 2-D, so run it per batch entry.
    lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a64 = np.broadcast_to(a64, lead + a.shape[-2:]).reshape((-1,) + a.shape[-2:])
    b64 = np.broadcast_to(b64, lead + b.shape[-2:]).reshape((-1,) + b.shape[-2:])
    out = np.stack([accumulate_matmul(x, y, acc) for x, y in zip(a64, b64, strict=True)])
    return out.reshape(lead + out.shape[-2:])


def matmul(a: Any, b: Any) -> Tensor:
    """``a @ b`` for 2-D tensors: inputs rounded to the policy's matmul input format, products
    accumulated in its accumulation format, the result rounded once to its compute format.

    >>> with use_precision("16-mixed"):
    ...     (Tensor([[1.0, 1.0]]) @ Tensor([[1.0], [2.0**-12]])).data.tolist()  # 1 + 2**-12
    [[1.0]]
    """
    a, b = _operand(a), _operand(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"matmul: needs 2-D tensors, got shapes {a.shape} and {b.shape}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not align: the inner "
                         f"dimensions {a.shape[1]} and {b.shape[0]} must be equal")
    return _linear_op("matmul", a, b, None, transpose_w=False)


def linear(x: Any, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ weight.T + bias`` (torch's layout: weight is (out_features, in_features)), rounded
    once on output, like a tensor-core GEMM with the bias in its float32 accumulator.

    >>> linear(Tensor([[1.0, 2.0]]), Tensor([[3.0, 4.0]]), Tensor([0.5])).data.tolist()
    [[11.5]]
    """
    x = _operand(x)
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be (out_features, in_features), got shape "
                         f"{weight.shape}")
    if x.ndim != 2 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"linear: x has shape {x.shape} but the weight {weight.shape} expects "
                         f"(batch, {weight.shape[1]}) inputs; reshape x or build the layer with "
                         f"in_features={x.shape[-1]}")
    if bias is not None and bias.shape != (weight.shape[0],):
        raise ValueError(f"linear: bias has shape {bias.shape}, expected ({weight.shape[0]},)")
    return _linear_op("linear", x, weight, bias, transpose_w=True)


def _linear_op(op: str, x: Tensor, w: Tensor, bias: Tensor | None, transpose_w: bool) -> Tensor:
    policy = active_policy()
    if policy.recipe is not None:  # FP8 / MX / NVFP4: the recipe quantises the three GEMMs
        from floatlab.mixed.recipe_gemm import recipe_linear

        return recipe_linear(x, w, bias, transpose_w, policy)
    fin, fmt = policy.matmul_inputs, policy.compute
    xi, wi = _matmul_input(x, fin), _matmul_input(w, fin)
    wm = wi.T if transpose_w else wi
    values = _product(xi, wm, policy)
    if bias is not None:
        values = values + _matmul_input(bias, fin)
    out = quantize(values, fmt)
    parents = (x, w) if bias is None else (x, w, bias)

    def backward(g: np.ndarray) -> None:
        gi = g if contains(fin, fmt) else quantize(g, fin, what="grads")
        if x.requires_grad:
            _send(x, _product(gi, wm.T, policy), fmt)
        if w.requires_grad:
            # linear: dW = g^T x, (out, in); matmul: dB = a^T g
            gw = _product(gi.T, xi, policy) if transpose_w else _product(xi.T, gi, policy)
            _send(w, gw, fmt)
        if bias is not None and bias.requires_grad:
            _send(bias, g.sum(axis=0), fmt)

    return _result(out, fmt, parents, backward, op)
