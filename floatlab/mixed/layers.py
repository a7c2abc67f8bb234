"""The operations a small transformer needs, each rounded through the policy's hook.

Every op here is built like the ones in :mod:`floatlab.mixed.tensor`: it computes in float32
(float64 for wider formats), rounds its result once through :func:`~floatlab.mixed.quantize`
to the format :meth:`Policy.op_format <floatlab.mixed.Policy.op_format>` gives it, and its
backward rounds the gradients it sends the same way. Which autocast list an op is on depends on
the policy's ``device`` (see :mod:`floatlab.mixed.autocast`): layer norm is on CUDA's float32
list but on no CPU list, so on a CPU it runs in its input's format.

>>> import numpy as np
>>> from floatlab.mixed import Tensor, use_precision
>>> from floatlab.mixed.layers import layer_norm
>>> x = np.array([[0.0, 0.3]], np.float32)
>>> with use_precision("bf16-mixed"):
...     cuda = layer_norm(Tensor(x, "bf16"))
>>> with use_precision("bf16-mixed", device="cpu"):
...     cpu = layer_norm(Tensor(x, "bf16"))
>>> cuda.fmt.name, cpu.fmt.name
('float32', 'bfloat16')

Ops: :func:`embedding`, :func:`layer_norm`, :func:`gelu`, :func:`dropout` (seeded mask), the
shape ops :func:`reshape`, :func:`permute`, :func:`narrow`, and :func:`sequence_loss`.
Attention (:func:`~floatlab.mixed.attention.scaled_dot_product_attention`, ``bmm``, the causal
mask) lives in :mod:`floatlab.mixed.attention`; softmax (with or without max subtraction) is
:func:`floatlab.mixed.softmax`. The residual add is :func:`~floatlab.mixed.add` (its backward
sums the two paths' gradients); weight tying is one parameter read by two ops (see
:class:`~floatlab.mixed.Transformer`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from floatlab._validate import as_array, resolve_rng
from floatlab.formats import Format
from floatlab.mixed.autograd import Tensor, _operand, _result, _send
from floatlab.mixed.checks import IndexRangeError, flag, number, tensor, whole
from floatlab.mixed.checks import axes as check_axes
from floatlab.mixed.elementwise import mul
from floatlab.mixed.policy import storage_dtype
from floatlab.mixed.reductions import cross_entropy
from floatlab.mixed.reductions import sum as tsum
from floatlab.mixed.scope import active_policy, quantize

__all__ = [
    "embedding", "layer_norm", "LAYER_NORM_STATS", "gelu", "dropout", "reshape", "permute",
    "narrow", "sequence_loss", "erf",
]

# --------------------------------------------------------------------------- shape ops (exact)

def reshape(x: Any, shape: Sequence[int]) -> Tensor:
    """``x`` with a new shape (exact: nothing is rounded).

    >>> reshape(Tensor([1.0, 2.0, 3.0, 4.0]), (2, 2)).shape
    (2, 2)
    """
    x = _operand(x, "reshape: x")
    try:
        out = x.data.reshape(tuple(shape))
    except ValueError:
        raise ValueError(f"reshape: cannot reshape {x.shape} ({x.size} values) to "
                         f"{tuple(shape)}") from None
    return _result(out, x.fmt, (x,), lambda g: _send(x, g.reshape(x.shape), x.fmt, exact=True),
                   "reshape")


def permute(x: Any, axes: Sequence[int]) -> Tensor:
    """``x`` with its axes reordered (torch's ``permute``; exact). As torch's, an axis may be
    negative (counted from the end).

    >>> permute(Tensor(np.zeros((2, 3, 4))), (2, 0, 1)).shape
    (4, 2, 3)
    >>> permute(Tensor(np.zeros((2, 3, 4))), (-1, 0, 1)).shape
    (4, 2, 3)
    """
    x = _operand(x, "permute: x")
    axes = tuple(axes)
    if len(axes) != x.ndim:
        raise ValueError(f"permute: axes {axes} are not a permutation of {x.ndim} axes")
    # ints in [-ndim, ndim), each axis once (torch's negative axes; a float axis, or 0.0 == 0,
    # was a TypeError from inside np.transpose)
    axes = tuple(a % x.ndim for a in check_axes("permute", axes, x.ndim) or ())
    inverse = tuple(np.argsort(axes))
    return _result(np.transpose(x.data, axes), x.fmt, (x,),
                   lambda g: _send(x, np.transpose(g, inverse), x.fmt, exact=True), "permute")


def narrow(x: Any, axis: int, start: int, length: int) -> Tensor:
    """The slice ``start : start + length`` of ``x`` along ``axis`` (torch's ``narrow``; exact).
    As torch's, ``axis`` lies in [-ndim, ndim) and a negative ``start`` counts from the end.

    >>> narrow(Tensor([[1.0, 2.0, 3.0]]), 1, 1, 2).data.tolist()
    [[2.0, 3.0]]
    >>> narrow(Tensor([[1.0, 2.0, 3.0]]), -1, -1, 1).data.tolist()
    [[3.0]]
    """
    x = _operand(x, "narrow: x")
    if x.ndim == 0:  # torch: "narrow() cannot be applied to a 0-dim tensor"
        raise ValueError("narrow: x is 0-d and has no axis to slice; pass at least a 1-D tensor")
    if isinstance(axis, (tuple, list)):
        raise TypeError(f"narrow: axis must be one int, got {axis!r}")
    # checked, not taken modulo ndim: axis 5 of a 2-D tensor silently sliced axis 1
    axis = check_axes("narrow", axis, x.ndim) % x.ndim
    size = x.shape[axis]
    start = whole("narrow: start", start, minimum=-size)
    start = start + size if start < 0 else start  # torch: a negative start counts from the end
    length = whole("narrow: length", length, minimum=0)
    if not start + length <= size:
        raise ValueError(f"narrow: [{start}, {start + length}) is outside axis {axis} of "
                         f"size {x.shape[axis]}")
    key = (slice(None),) * axis + (slice(start, start + length),)

    def backward(g: np.ndarray) -> None:
        full = np.zeros(x.shape, g.dtype)
        full[key] = g
        _send(x, full, x.fmt, exact=True)

    return _result(x.data[key], x.fmt, (x,), backward, "narrow")


# --------------------------------------------------------------------------- embedding

def _token_ids(ids: Any, vocab: int, what: str = "embedding") -> np.ndarray:
    """Integer token ids in [0, vocab), or a clear error."""
    # as_array: a masked array would lose its mask (every id counted), a ragged list is named
    arr = as_array(ids.data if isinstance(ids, Tensor) else ids, f"{what}: token ids")
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and arr.size and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        elif arr.dtype.kind == "b" or arr.size:
            raise TypeError(f"{what}: token ids must be integers, got dtype {arr.dtype}; pass "
                            "e.g. ids.astype(np.int64)")
        else:
            arr = arr.astype(np.int64)
    if arr.size and (arr.min() < 0 or arr.max() >= vocab):
        bad = arr[(arr < 0) | (arr >= vocab)]
        raise IndexRangeError(f"{what}: token ids must lie in [0, {vocab}) for a vocabulary of "
                              f"{vocab}, got {bad.size} outside it (e.g. {int(bad.flat[0])}); "
                              "check that the data was encoded with the model's vocabulary")
    return arr


def embedding(ids: Any, weight: Tensor) -> Tensor:
    """Rows of ``weight`` (vocab, dim) picked by integer ``ids``: shape ``ids.shape + (dim,)``.

    Exact (a lookup rounds nothing) and on no autocast list, so the result has the weight's
    format: float32 master weights give float32 embeddings under "16-mixed", as in torch.
    Backward adds each position's gradient into its row (sums in float32, or float64 for wider
    formats), then rounds the row sums once.

    >>> w = Tensor([[0.0, 1.0], [2.0, 3.0]], requires_grad=True)
    >>> e = embedding([1, 1, 0], w); e.data.tolist()
    [[2.0, 3.0], [2.0, 3.0], [0.0, 1.0]]
    >>> e.sum().backward(); w.grad.tolist()
    [[1.0, 1.0], [2.0, 2.0]]
    """
    weight = tensor("embedding: weight", weight)  # an array: TypeError, pointing to parameter()
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be a 2-D Tensor (vocab, dim), got shape "
                         f"{weight.shape}")
    vocab, dim = weight.shape
    idx = _token_ids(ids, vocab)
    fmt = active_policy().op_format("embedding", weight.fmt)
    out = quantize(weight.data[idx], fmt, exact=True)

    def backward(g: np.ndarray) -> None:
        rows = np.zeros((vocab, dim), storage_dtype(fmt))
        np.add.at(rows, idx.reshape(-1), g.reshape(-1, dim))
        picked = np.zeros((vocab, 1), bool)  # the other rows' gradient is zero by construction
        picked[idx.reshape(-1)] = True
        _send(weight, rows, fmt, support=picked)

    return _result(out, fmt, (weight,), backward, "embedding")


# --------------------------------------------------------------------------- layer norm

#: How :func:`layer_norm` computes its mean and variance.
LAYER_NORM_STATS = {
    "float32": "two-pass mean and variance accumulated in float32 (float64 for wider formats), "
               "whatever the op's format: the precision torch's kernels use (and autocast, "
               "which puts layer_norm on CUDA's float32 list); their algorithm is Welford's "
               "(RowwiseMoments on CPU), so the last bits can differ from these sums",
    "format": "two-pass mean and variance with every square, sum and quotient rounded to the "
              "op's format (a layer norm written by hand in that format)",
    "one_pass": "E[x^2] - E[x]^2 with every intermediate rounded to the op's format",
    "welford": "Welford's running mean and sum of squared deviations, every update rounded to "
               "the op's format",
}


def _tree_sum(v: np.ndarray, fmt: Format) -> np.ndarray:
    """Sum over the last axis pairwise (a tree, as a GPU block reduction adds), rounding every
    level's sums to ``fmt``. Each pair is added exactly enough: the storage dtype (float32 for
    16-bit formats) has at least 2p + 2 significand bits, so rounding its sum to ``fmt`` is the
    correctly rounded sum in ``fmt`` (double rounding is innocuous for one addition)."""
    while v.shape[-1] > 1:
        if v.shape[-1] % 2:
            v = np.concatenate([v, np.zeros(v.shape[:-1] + (1,), v.dtype)], axis=-1)
        v = quantize(v[..., 0::2] + v[..., 1::2], fmt, what="partial")
    return v[..., 0]


def _stats_in_format(x: np.ndarray, fmt: Format, stats: str) -> tuple[np.ndarray, np.ndarray]:
    """Mean and (biased) variance over the last axis, every intermediate rounded to ``fmt``."""
    def q(v: np.ndarray) -> np.ndarray:
        return quantize(np.asarray(v), fmt, what="partial")

    n = x.shape[-1]
    if stats == "welford":
        mean = np.zeros(x.shape[:-1], x.dtype)
        m2 = np.zeros(x.shape[:-1], x.dtype)
        for k in range(n):
            delta = q(x[..., k] - mean)
            mean = q(mean + q(delta / (k + 1)))
            m2 = q(m2 + q(delta * q(x[..., k] - mean)))
        return mean, q(m2 / n)
    mean = q(_tree_sum(x, fmt) / n)
    if stats == "one_pass":
        return mean, q(q(_tree_sum(q(x * x), fmt) / n) - q(mean * mean))
    d = q(x - mean[..., None])
    return mean, q(_tree_sum(q(d * d), fmt) / n)


def layer_norm(
    x: Any,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    *,
    stats: str = "float32",
) -> Tensor:
    """Normalise over the last axis: ``(x - mean) / sqrt(var + eps) * weight + bias``.

    The op's format comes from its autocast list (float32 on CUDA in mixed modes; the input's
    format on a CPU, or in a "-true" policy). ``stats`` says how mean and variance are computed
    (see :data:`LAYER_NORM_STATS`): "float32" as torch does, or rounded in the op's format
    ("format", "one_pass", "welford") to see why nobody does that in fp16. The output is rounded
    once. The backward is the exact layer norm's, evaluated in float32 (float64) at the
    statistics the forward computed.

    >>> y = layer_norm(Tensor([[1.0, 3.0]]))
    >>> [round(v, 4) for v in y.data[0].tolist()]
    [-1.0, 1.0]
    """
    x = _operand(x, "layer_norm: x")
    if not isinstance(stats, str) or stats not in LAYER_NORM_STATS:
        raise ValueError(f"layer_norm: stats={stats!r}; use one of {', '.join(LAYER_NORM_STATS)}")
    if x.ndim == 0:  # torch: normalized_shape must match the input's last axes
        raise ValueError("layer_norm: x is 0-d; it normalises over the last axis (the features): "
                         "pass at least a 1-D tensor, e.g. floatlab.mixed.layers.reshape(x, (1,)) "
                         "(a Tensor has no .reshape method)")
    n = x.shape[-1]
    for name, p in (("weight", weight), ("bias", bias)):
        p = tensor(f"layer_norm: {name}", p, optional=True)
        if p is not None and p.shape != (n,):
            raise ValueError(f"layer_norm: {name} has shape {p.shape}, expected ({n},) for "
                             f"inputs of shape {x.shape}")
    eps = number("layer_norm: eps", eps, finite=False)  # a real number; its range below
    if not (eps >= 0 and math.isfinite(eps)):
        raise ValueError(f"layer_norm: eps must be finite and >= 0, got {eps}")
    fmt = active_policy().op_format("layer_norm", x.fmt)
    dt = storage_dtype(fmt)
    xw = x.data.astype(dt, copy=False)
    if stats == "float32":
        mean = xw.mean(axis=-1, dtype=dt)
        d = xw - mean[..., None]
        var = np.mean(d * d, axis=-1, dtype=dt)
        rstd = (1 / np.sqrt(var + dt.type(eps))).astype(dt)
        xhat = d * rstd[..., None]
    else:
        def q(v: np.ndarray) -> np.ndarray:
            return quantize(np.asarray(v), fmt, what="partial")

        mean, var = _stats_in_format(xw, fmt, stats)
        rstd = q(1 / q(np.sqrt(q(var + dt.type(eps)))))
        xhat = q(q(xw - mean[..., None]) * rstd[..., None])
    y = xhat
    if weight is not None:
        y = y * weight.data.astype(dt, copy=False)
    if bias is not None:
        y = y + bias.data.astype(dt, copy=False)
    out = quantize(y, fmt)
    parents = tuple(p for p in (x, weight, bias) if p is not None)

    def backward(g: np.ndarray) -> None:
        g = g.astype(dt, copy=False)
        rows = tuple(range(g.ndim - 1))
        if weight is not None and weight.requires_grad:
            _send(weight, (g * xhat).sum(axis=rows), fmt)
        if bias is not None and bias.requires_grad:
            _send(bias, g.sum(axis=rows), fmt)
        if x.requires_grad:
            gx = g * weight.data.astype(dt, copy=False) if weight is not None else g
            gx = rstd[..., None] * (gx - gx.mean(axis=-1, keepdims=True)
                                    - xhat * (gx * xhat).mean(axis=-1, keepdims=True))
            _send(x, gx, fmt)

    return _result(out, fmt, parents, backward, "layer_norm")


# --------------------------------------------------------------------------- GELU

_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_ERF = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function in float64, element-wise (the C library's ``erf``, within 1 ulp).

    >>> float(erf(np.array([0.5]))[0]) == math.erf(0.5)
    True
    """
    # np.asarray: frompyfunc gives a Python float, not an array, for a 0-d input
    return np.asarray(_ERF(np.asarray(x, np.float64))).astype(np.float64)


def gelu(x: Any, approximate: str = "none") -> Tensor:
    """GELU, ``x * Phi(x)``: exact (``approximate="none"``, with erf) or torch's "tanh" form
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``.

    On no autocast list: the result takes the input's format. Like torch's kernels, the tanh
    form is evaluated in float32 (float64 for wider formats) and rounded once; the exact form is
    evaluated in float64 (the C library's erf) and rounded once.

    >>> gelu(Tensor([1.0])).data.tolist()
    [0.8413447737693787]
    """
    x = _operand(x, "gelu: x")
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate={approximate!r}; use 'none' or 'tanh' (torch's)")
    fmt = active_policy().op_format("gelu", x.fmt)
    if approximate == "tanh":
        # 0.5 (1 + tanh(u)) is the logistic sigmoid of 2u: x / (1 + exp(-2u)) is the same
        # function without the cancellation of 1 + tanh(u) for negative x (where torch's
        # float32 evaluation loses digits).
        # at least 1-D: the in-place steps below need arrays, and numpy makes scalars of 0-d
        z = np.atleast_1d(x.data.astype(storage_dtype(fmt), copy=False))
        c, a = (z.dtype.type(v) for v in (2 * _SQRT_2_OVER_PI, 0.044715))
        e = z * z  # in place from here: large temporaries cost more than the arithmetic
        e *= a
        e += 1
        e *= z
        e *= -c
        # exp(-2u) overflows to inf for x below about -10 (float32) and the sigmoid is then
        # 0: the formula's design, so no RuntimeWarning, nor a FloatingPointError under a
        # caller's np.errstate(all="raise")
        with np.errstate(over="ignore", under="ignore"):
            e = np.exp(e, out=e)  # exp(-2u)
            sig = e + 1
            sig = np.reciprocal(sig, out=sig)
        y = z * sig
    else:
        z = np.atleast_1d(x.data.astype(np.float64))
        cdf = 0.5 * (1 + erf(z * (1 / math.sqrt(2))))
        y = z * cdf
    out = quantize(y.reshape(x.shape), fmt)  # a 0-d input gives a 0-d result

    def backward(g: np.ndarray) -> None:
        if approximate == "tanh":  # sig + z sig (1 - sig) 2u', with 1 - sig = exp(-2u) sig
            dy = z * z
            dy *= 3 * a
            dy += 1
            dy *= c
            dy *= z
            dy *= e
            dy *= sig
            dy += 1
            dy *= sig
            # all finite iff min and max are (NaN propagates through both): two reductions
            # without a temporary array; the repair runs only where it is needed (an empty
            # batch has no min: numpy's "zero-size array to reduction operation")
            if dy.size and not (np.isfinite(dy.min()) and np.isfinite(dy.max())):
                _tanh_gelu_grad_far_left(z, dy, c, a)
        else:
            dy = cdf + z * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
        _send(x, (g * dy).reshape(x.shape), fmt)

    return _result(out, fmt, (x,), backward, "gelu")


def _tanh_gelu_grad_far_left(z: np.ndarray, dy: np.ndarray, c: Any, a: Any) -> None:
    """Recompute, in place, the entries of tanh-GELU's derivative ``dy`` that the product
    chain of :func:`gelu`'s backward left inf or NaN at a finite ``z``.

    The chain multiplies by exp(-2u) before sig = 1 / (1 + exp(-2u)). Below x ~ -10 (float32;
    ~ -20 in float64) exp(-2u) overflows, and for |x| above ~1e13 (float32) the factor
    z 2u' does: the chain gave -inf or NaN (inf * 0) where the derivative is a tiny number
    (|d| < 3e-36) or 1, and torch's tanh form gives +-0 or 1. Here the same derivative,
    sig + (sig (1 - sig) z) 2u', is written with w = exp(-|2u|), which cannot overflow: sig =
    w / (1 + w), 1 - sig = 1 / (1 + w) for negative z, the other way round for positive z;
    multiplying sig (1 - sig) by z before 2u' keeps a zero zero (+0 in the end, as torch's)
    until x**2 itself overflows. NaN stays where torch's gradient is NaN: x = +-inf, NaN, or
    x**2 overflowing (there 2u' is inf and sig (1 - sig) is 0). Entries the chain got finite
    are not touched, so ordinary gradients keep their bits.
    """
    bad = ~np.isfinite(dy)
    zb = z[bad]
    with np.errstate(all="ignore"):
        w = np.exp(-np.abs(c * zb * (1 + a * zb * zb)))  # exp(-|2u|) <= 1
        one = 1 / (1 + w)
        neg = zb < 0
        sig, one_minus_sig = np.where(neg, w * one, one), np.where(neg, one, w * one)
        dy[bad] = sig + ((sig * one_minus_sig) * zb) * (c * (1 + 3 * a * zb * zb))


# --------------------------------------------------------------------------- dropout

def dropout(x: Any, p: float, rng: np.random.Generator | int | None,
            training: bool = True) -> Tensor:
    """Zero each entry with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    The mask comes from ``rng`` (a Generator, or a seed), so a run is reproducible. The
    product is computed in float32 and rounded once to the input's format (on no autocast
    list). With ``training=False`` or ``p == 0`` the input is returned unchanged; ``p == 1``
    gives ``x * 0`` with no mask drawn, as torch's dropout does (NaN and inf entries give NaN,
    negative ones -0).

    >>> dropout(Tensor([1.0, 1.0, 1.0, 1.0]), 0.5, rng=0).data.tolist()
    [2.0, 0.0, 0.0, 0.0]
    """
    x = _operand(x, "dropout: x")
    training = flag("dropout: training", training)
    p = number("dropout: p", p, finite=False)  # a real number (NumPy's too); its range below
    if not 0 <= p <= 1:  # (torch's range, and its words: "has to be between 0 and 1")
        raise ValueError(f"dropout: p must be a probability between 0 and 1, got {p!r}")
    if not training or p == 0:
        return x
    if p == 1:  # torch: input * zeros({}) -- every entry dropped, the product still rounded
        fmt = active_policy().op_format("dropout", x.fmt)
        dt = storage_dtype(fmt)
        zero = dt.type(0)
        out = quantize(x.data.astype(dt, copy=False) * zero, fmt)
        return _result(out, fmt, (x,), lambda g: _send(x, g * zero, fmt), "dropout")
    if rng is None:
        raise ValueError("dropout: pass rng= (a numpy Generator or a seed): the mask must "
                         "be reproducible")
    rng = resolve_rng(rng, True, "dropout")  # a Generator, or a non-negative int seed
    fmt = active_policy().op_format("dropout", x.fmt)
    dt = storage_dtype(fmt)
    keep = (rng.random(x.shape) >= p).astype(dt) * dt.type(1 / (1 - p))
    out = quantize(x.data.astype(dt, copy=False) * keep, fmt)
    return _result(out, fmt, (x,), lambda g: _send(x, g * keep, fmt), "dropout")


# --------------------------------------------------------------------------- the loss

def sequence_loss(logits: Tensor, targets: Any, mask: Any = None) -> Tensor:
    """Mean cross-entropy of (batch, T, vocab) logits against (batch, T) target ids, over the
    positions where ``mask`` is true (all by default), in float32 in mixed modes.

    >>> round(sequence_loss(Tensor(np.zeros((1, 2, 4))), [[1, 3]]).item(), 6)   # log 4
    1.386294
    """
    logits = _operand(logits, "sequence_loss: logits")
    if logits.ndim != 3:
        raise ValueError(f"sequence_loss: logits must be (batch, T, vocab), got {logits.shape}")
    batch, t, vocab = logits.shape
    y = _token_ids(targets, vocab, "sequence_loss")
    if y.shape != (batch, t):
        raise ValueError(f"sequence_loss: targets have shape {y.shape}, expected {(batch, t)}")
    flat = reshape(logits, (batch * t, vocab))
    if mask is None:
        return cross_entropy(flat, y.reshape(-1))
    m = _position_mask(mask)
    if m.shape != (batch, t):
        raise ValueError(f"sequence_loss: mask has shape {m.shape}, expected {(batch, t)}")
    count = int(m.sum())
    if count == 0:
        raise ValueError("sequence_loss: the mask selects no position")
    per_token = cross_entropy(flat, y.reshape(-1), reduction="none")
    weights = Tensor(m.reshape(-1).astype(np.float32), per_token.fmt)
    return tsum(mul(per_token, weights)) / count


def _position_mask(mask: Any) -> np.ndarray:
    """``mask`` as booleans: bools, or numbers that are all 0 or 1. Anything else was read as
    "nonzero counts" (0.5, 2, NaN and every string counted), and a masked array lost its mask."""
    m = as_array(mask, "sequence_loss: mask")
    if m.dtype.kind == "b":
        return m
    numeric = m.dtype.kind in "iuf"
    if numeric and np.all((m == 0) | (m == 1)):
        return m.astype(bool)
    error = ValueError if numeric else TypeError
    raise error(f"sequence_loss: mask must hold booleans (True where the loss counts) or 0 / 1, "
                f"got dtype {m.dtype} with values such as {m.reshape(-1)[:3].tolist()}; pass "
                "mask.astype(bool) if nonzero means counted")
