"""The :class:`Tensor` and its reverse-mode graph: leaves, results, and gradient delivery.

Backward closures sit next to their forward (micrograd style, in the op modules
:mod:`~floatlab.mixed.elementwise`, :mod:`~floatlab.mixed.reductions`,
:mod:`~floatlab.mixed.gemm`, :mod:`~floatlab.mixed.layers`, :mod:`~floatlab.mixed.attention`);
this module holds what they share: :func:`_result` makes an op's output node, :func:`_send`
rounds a gradient to the op's format and then, like the backward of an autocast cast, to the
format of the input it flows into; parameter gradients wait until the end of backward and are
rounded together (:func:`_flush`).

>>> t = Tensor([1.0, 2.0], requires_grad=True)
>>> (t * t).sum().backward(); t.grad.tolist()
[2.0, 4.0]
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import numpy as np

from floatlab.formats import Format, get_format
from floatlab.mixed.checks import flag
from floatlab.mixed.policy import storage_dtype
from floatlab.mixed.scope import _pushed, _scope, active_policy, quantize
from floatlab.rounding import as_float_array

__all__ = ["Tensor"]


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
                 "_backward", "_copy", "_made")
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
        self.requires_grad = flag("Tensor: requires_grad", requires_grad)  # "False" is truthy
        if name is not None and not isinstance(name, str):
            raise TypeError(f"Tensor: name must be a str or None, got {name!r}")
        self.name = name
        self._op = "leaf"
        self._parents: tuple[Tensor, ...] = ()
        self._backward: Backward | None = None
        # a parameter's matmul-input copy: (data it was made from, format, copy, data's bits)
        self._copy: tuple[np.ndarray, Format, np.ndarray, np.ndarray] | None = None
        self._made: _Made | None = None  # a result's (policy, rng): its backward's rounding

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

    def __bool__(self) -> bool:
        # torch's rule: the truth of one value; more (or none) is ambiguous. Without it, len()
        # made every non-empty tensor true, so `if loss > 0` style code read any tensor as True.
        # RuntimeError, as torch's is_nonzero raises (its TORCH_CHECK), so `except` clauses
        # written against torch catch it
        if self.data.size != 1:
            what = "no values" if self.data.size == 0 else "more than one value"
            raise RuntimeError(f"Boolean value of Tensor with {what} is ambiguous (torch's "
                             f"words); shape {self.shape}: use .item() on one value, or "
                             "reduce first, e.g. bool((t.numpy() > 0).all())")
        return bool(self.data.reshape(-1)[0])

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
        # A result's backward closures are not copied (functions copy by reference): they kept
        # delivering to the original graph, so a copy's backward() left the parameters' .grad
        # untouched, silently. torch refuses the same: only leaves deep-copy.
        if self._parents:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) "
                               "support the deepcopy protocol at the moment (torch's words); "
                               "deep-copy t.detach(), or the parameters it came from")
        new = Tensor.__new__(Tensor)
        memo[id(self)] = new
        for slot in Tensor.__slots__:
            setattr(new, slot, copy.deepcopy(getattr(self, slot), memo))
        return new

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        # pickle (and copy.copy): a result's graph holds backward closures, which do not
        # pickle ("Can't pickle local object '_binary.<locals>.backward_scalar'"). torch
        # pickles a non-leaf tensor as its values and requires_grad (_rebuild_tensor_v2):
        # it loads as a leaf, no graph and no .grad; so does this.
        state = {slot: getattr(self, slot) for slot in Tensor.__slots__}
        if self._parents:
            state.update(grad=None, _op="leaf", _parents=(), _backward=None, _copy=None,
                         _made=None)
        return None, state

    def __len__(self) -> int:
        if self.data.ndim == 0:  # numpy's "len() of unsized object" does not say what to do
            raise TypeError("len() of a 0-d tensor; use .item() for its value, .shape or .size")
        return len(self.data)

    def __repr__(self) -> str:
        grad = f", grad_fn={self._op}" if self._parents else ""
        req = ", requires_grad=True" if self.requires_grad and not self._parents else ""
        name = f"{self.name!r}, " if self.name else ""
        body = np.array2string(self.data, precision=5, threshold=6, edgeitems=2)
        return f"Tensor({name}{body}, {self.fmt.name}{req}{grad})"

    # ------------------------------------------------------------------ operators
    def __add__(self, other: Any) -> Tensor:
        return _elementwise.add(self, other)

    def __radd__(self, other: Any) -> Tensor:
        return _elementwise.add(other, self)

    def __sub__(self, other: Any) -> Tensor:
        return _elementwise.sub(self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return _elementwise.sub(other, self)

    def __mul__(self, other: Any) -> Tensor:
        return _elementwise.mul(self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return _elementwise.mul(other, self)

    def __truediv__(self, other: Any) -> Tensor:
        return _elementwise.div(self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        # torch's: reciprocal(self) * other (two ops, two roundings), not one division
        return _elementwise.mul(_elementwise.reciprocal(self), other)

    def __neg__(self) -> Tensor:
        return _elementwise.neg(self)

    def __matmul__(self, other: Any) -> Tensor:
        return _gemm.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        return _gemm.matmul(other, self)

    def relu(self) -> Tensor:
        return _elementwise.relu(self)

    def tanh(self) -> Tensor:
        return _elementwise.tanh(self)

    def exp(self) -> Tensor:
        return _elementwise.exp(self)

    def log(self) -> Tensor:
        return _elementwise.log(self)

    def reciprocal(self) -> Tensor:
        return _elementwise.reciprocal(self)

    def sum(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor:
        return _reductions.sum(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: int | tuple[int, ...] | None = None, keepdims: bool = False) -> Tensor:
        return _reductions.mean(self, axis=axis, keepdims=keepdims)

    def softmax(self, axis: int = -1, *, subtract_max: bool = True) -> Tensor:
        return _reductions.softmax(self, axis=axis, subtract_max=subtract_max)

    def log_softmax(self, axis: int = -1) -> Tensor:
        return _reductions.log_softmax(self, axis=axis)

    # ------------------------------------------------------------------ autograd
    def backward(self, grad: Any = None, *, retain_graph: bool = False) -> None:
        """Fill ``.grad`` of every tensor this one depends on (accumulating into leaves).

        ``grad`` is the gradient of some scalar with respect to this tensor (default 1 for a
        one-element tensor). The graph's closures are freed afterwards unless ``retain_graph``.
        """
        retain_graph = flag("backward: retain_graph", retain_graph)
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
            # as_float_array may hand back the caller's own array: the gradients that flow
            # unchanged (a leaf's own, through a transpose or an add) would alias it, so an
            # in-place edit of .grad changed the caller's array (or a Tensor's data) and back
            seed = seed.copy()
            if seed.shape != self.shape:
                raise ValueError(f"backward(grad=...): grad has shape {seed.shape}, the tensor "
                                 f"has shape {self.shape}; they must match")
        order = _topological(self)
        # A freed node further up (an intermediate of an earlier backward reused in a new
        # expression) would otherwise pass for a leaf: the gradient stopped there, silently
        # piled up in its .grad, and never reached the parameters. torch raises here too.
        if any(node._op == "freed" for node in order):
            raise RuntimeError("backward() through a graph a second time: an intermediate "
                               "result of this expression had its graph freed by an earlier "
                               "backward(); pass retain_graph=True to that call, or recompute it")
        for node in order:  # only leaves accumulate across backward calls (as in torch)
            if node._parents:
                node.grad = None
        # inf / NaN gradients are expected events (the scaler skips them, telemetry counts them)
        pending: list[_Pending] = []
        with np.errstate(all="ignore"):
            with _pushed(pending=pending):
                scope = _scope()
                here = (scope.policy, scope.rng)  # (one lookup: most nodes were made here)
                with _under(self._made, here):
                    _send(self, seed, self.fmt)
                for node in reversed(order):
                    if node._backward is not None and node.grad is not None:
                        with _under(node._made, here):
                            node._backward(node.grad)
            _flush(pending)
        if not retain_graph:
            for node in order:
                if node._parents:
                    node._parents, node._backward, node._op = (), None, "freed"


#: The policy and stochastic-rounding generator of the scope an op ran in.
_Made = tuple[Any, "np.random.Generator | None"]


def _under(made: _Made | None, here: _Made | None = None) -> Any:
    """The scope in which to round an op's gradients: the policy (rounding mode, saturation)
    and generator its forward ran under, as its formats are. torch's advice is to call
    backward() outside the autocast region; done so here, a stochastic-rounding policy's
    gradients were rounded to nearest, silently. A no-op when the scope is already that one
    (``here``: the current (policy, rng), when the caller has it)."""
    if here is None:
        scope = _scope()
        here = (scope.policy, scope.rng)
    if made is None or (made[0] is here[0] and made[1] is here[1]):
        return nullcontext()
    return _pushed(policy=made[0], rng=made[1])


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
    t.data, t.fmt, t.grad, t.name, t._copy, t._made = data, fmt, None, None, None, None
    scope = _scope()
    if backward is not None and scope.grad_enabled and any(
        p.requires_grad for p in parents
    ):
        t.requires_grad, t._parents, t._backward, t._op = True, parents, backward, op
        t._made = (scope.policy, scope.rng)
    else:
        t.requires_grad, t._parents, t._backward, t._op = False, (), None, op
    return t


#: A parameter's gradient waiting for the end of backward: (tensor, gradient, op format,
#: exact, support: where exact arithmetic makes the gradient non-zero; None: everywhere,
#: the (policy, rng) of the op that sent it).
_Pending = tuple[Tensor, np.ndarray, Format, bool, "np.ndarray | None", _Made]


def _send(
    t: Tensor, g: np.ndarray, op_fmt: Format, *, exact: bool = False,
    support: np.ndarray | None = None,
) -> None:
    """Deliver gradient ``g`` (computed by an op of format ``op_fmt``) to ``t``.

    The gradient is rounded to the op's format, then -- as the backward of an autocast cast
    does -- to ``t``'s format, and summed into ``t.grad`` in ``t``'s format (reused nodes).
    Gradients of leaves (parameters) wait until the end of backward, to be rounded together.
    ``support`` (a boolean array that broadcasts to ``g``) marks the entries of a parameter's
    gradient that exact arithmetic makes non-zero when some are zero by construction (the
    rows of an embedding that no id picked); the telemetry's underflow count skips the others.
    """
    if not t.requires_grad:
        return
    scope = _scope()
    pending = scope.pending
    if pending is not None and t._op == "leaf":
        pending.append((t, g, op_fmt, exact, support, (scope.policy, scope.rng)))
        return
    _deliver(t, quantize(g, op_fmt, what="grads", exact=exact), op_fmt)


def _deliver(t: Tensor, g: np.ndarray, op_fmt: Format) -> None:
    """Add ``g`` (already in ``op_fmt``) to ``t.grad``, cast to and summed in ``t``'s format."""
    if t.fmt != op_fmt:
        g = quantize(g, t.fmt, what="grads")
    g = g if t.grad is None else quantize(t.grad + g, t.fmt, what="grads")
    # numpy arithmetic on 0-d arrays gives scalars: .grad is an array whatever the shape
    g = g if isinstance(g, np.ndarray) else np.asarray(g)
    if not g.flags.writeable and t._op == "leaf":
        # a leaf's .grad is the user's to edit in place (torch's clip_grad_norm_ does
        # p.grad.mul_(c)): a read-only broadcast view (the gradient of a sum) made
        # `w.grad *= 0.5` a ValueError deep in NumPy
        g = g.copy()
    t.grad = g


def _flush(pending: list[_Pending]) -> None:
    """Round the parameters' gradients with one call per format instead of one per gradient.

    Rounding is element-wise, so the values are those of separate calls; what is saved is the
    rounding core's fixed cost per call (several per layer: weight and bias gradients). With
    telemetry on, the parameters' finished gradients are then counted for underflow.
    """
    rounded: list[np.ndarray | None] = [None] * len(pending)
    scope = _scope()
    here = (scope.policy, scope.rng)  # (one lookup for every _under below)
    batches: dict[tuple[int, bool, int, int], list[int]] = {}
    for i, (_, _, fmt, exact, _, made) in enumerate(pending):  # rounded under their op's scope
        batches.setdefault((id(fmt), exact, id(made[0]), id(made[1])), []).append(i)
    for (_, exact, _, _), idx in batches.items():
        fmt, made = pending[idx[0]][2], pending[idx[0]][5]
        with _under(made, here):
            if len(idx) == 1 or exact:
                for i in idx:
                    rounded[i] = quantize(pending[i][1], fmt, what="grads", exact=exact)
                continue
            grads = [pending[i][1] for i in idx]
            flat = quantize(np.concatenate([g.reshape(-1) for g in grads]), fmt, what="grads")
        parts = np.split(flat, np.cumsum([g.size for g in grads])[:-1])
        for i, g, part in zip(idx, grads, parts, strict=True):
            rounded[i] = part.reshape(g.shape)
    for (t, _, fmt, _, _, made), g in zip(pending, rounded, strict=True):  # in arrival order
        with _under(made, here):
            _deliver(t, g, fmt)
    stats = scope.stats
    if stats is not None:
        _count_parameter_underflow(pending, stats)


def _count_parameter_underflow(pending: list[_Pending], stats: Any) -> None:
    """Count each parameter's gradient entries that exact arithmetic makes non-zero (the union
    of its contributions' supports) and the zero ones among them: underflows, here or upstream.
    """
    supports: dict[int, tuple[Tensor, np.ndarray | None]] = {}
    for t, _, _, _, support, _ in pending:
        if id(t) in supports:
            seen = supports[id(t)][1]
            support = None if seen is None or support is None else seen | support
        supports[id(t)] = (t, support)
    for t, support in supports.values():
        stats.observe_parameter_grad(t.grad, support)


def _operand(x: Any, name: str = "data") -> Tensor:
    """``x`` as a Tensor: a constant in the policy's input format unless it is one. ``name``
    ("add: b") is what an error about unusable data names, rather than Tensor's "data"."""
    if isinstance(x, Tensor):
        return x
    return Tensor(as_float_array(x, name=name))


def _work(t: Tensor, fmt: Format) -> np.ndarray:
    """``t``'s values in ``fmt``'s storage dtype (for ops whose format is at least ``t.fmt``)."""
    dtype = storage_dtype(fmt)
    return t.data if t.data.dtype == dtype else t.data.astype(dtype)


def _transpose(a: Tensor) -> Tensor:
    if a.ndim != 2:
        raise ValueError(f"T: transposes 2-D tensors, this one has shape {a.shape}")
    return _result(a.data.T, a.fmt, (a,), lambda g: _send(a, g.T, a.fmt, exact=True), "transpose")


# The operator methods above call the op modules, which import Tensor from here: they are bound
# once this module is complete (the methods look them up when called).
from floatlab.mixed import elementwise as _elementwise  # noqa: E402
from floatlab.mixed import gemm as _gemm  # noqa: E402
from floatlab.mixed import reductions as _reductions  # noqa: E402
