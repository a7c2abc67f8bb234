"""Attention, written the unfused way: batched matmuls, a scale, a causal mask, softmax.

Each piece rounds through the policy's hook like every other op of the lab, in the format its
autocast list gives it on the policy's ``device`` (see :mod:`floatlab.mixed.autocast`):
:func:`bmm` is on the lower-precision list on both devices; :func:`masked_fill` is on no list
(the input's format); :func:`~floatlab.mixed.softmax` is on CUDA's float32 list but on no CPU
list. torch's fused ``scaled_dot_product_attention`` is itself on the lower-precision list; the
lab's :func:`scaled_dot_product_attention` is the composition its "math" path and nanoGPT's
manual path run, so the formats of the parts can be seen.

>>> import numpy as np
>>> from floatlab.mixed import Tensor, use_precision
>>> q = Tensor(np.ones((1, 2, 4)))
>>> with use_precision("bf16-mixed"):
...     scaled_dot_product_attention(q, q, q).fmt.name
'bfloat16'
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from floatlab._validate import as_array
from floatlab.formats import Format
from floatlab.mixed.autograd import Tensor, _operand, _result, _send
from floatlab.mixed.checks import flag, number
from floatlab.mixed.elementwise import _unbroadcast, mul
from floatlab.mixed.gemm import _matmul_input, _product
from floatlab.mixed.layers import permute
from floatlab.mixed.policy import contains
from floatlab.mixed.reductions import softmax
from floatlab.mixed.scope import active_policy, quantize

__all__ = ["bmm", "masked_fill", "causal_mask", "scaled_dot_product_attention", "MaskError",
           "MaskShapeError"]


def bmm(a: Any, b: Any) -> Tensor:
    """Batched ``a @ b`` for (..., n, k) and (..., k, m) tensors, like torch.matmul on 3-D/4-D
    inputs: inputs rounded to the policy's matmul input format, products accumulated in its
    accumulation format, the result rounded once to its compute format.

    >>> bmm(Tensor(np.ones((2, 1, 3))), Tensor(np.ones((2, 3, 1)))).data.ravel().tolist()
    [3.0, 3.0]
    """
    a, b = _operand(a, "bmm: a"), _operand(b, "bmm: b")
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"bmm: shapes {a.shape} and {b.shape} do not align: need (..., n, k) "
                         "and (..., k, m)")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"bmm: batch shapes {a.shape[:-2]} and {b.shape[:-2]} do not "
                         "broadcast") from None
    policy = active_policy()
    fin, fmt = policy.matmul_inputs, policy.op_format("bmm")
    ai, bi = _matmul_input(a, fin), _matmul_input(b, fin)
    out = quantize(_product(ai, bi, policy), fmt)

    def backward(g: np.ndarray) -> None:
        gi = g if contains(fin, fmt) else quantize(g, fin, what="grads")
        if a.requires_grad:
            _send(a, _batch_sum(_product(gi, np.swapaxes(bi, -1, -2), policy), a.shape, fmt), fmt)
        if b.requires_grad:
            _send(b, _batch_sum(_product(np.swapaxes(ai, -1, -2), gi, policy), b.shape, fmt), fmt)

    return _result(out, fmt, (a, b), backward, "bmm")


def _batch_sum(grad: np.ndarray, shape: tuple[int, ...], fmt: Format) -> np.ndarray:
    """The gradient of an operand whose batch axes were broadcast. torch.matmul expands a 3-D
    or 4-D operand and runs bmm, whose per-batch gradients are results in the op's format; the
    expand's backward then sums them (sum_to_size: accumulated in float32, rounded once). So
    each batch entry's product is rounded to ``fmt`` first, as :func:`_binary
    <floatlab.mixed.elementwise._binary>` does for element-wise broadcasting. A 2-D operand
    is folded into one matrix product instead (its gradient is one GEMM over all batch rows,
    rounded once), so its float32 sum is not rounded per batch entry."""
    if grad.shape == shape:
        return grad
    if len(shape) >= 3:
        grad = quantize(grad, fmt, what="grads")
    return _unbroadcast(grad, shape)[0]


class MaskError(TypeError, RuntimeError):
    """A mask that is not boolean. Also a RuntimeError: torch raises one there ("masked_fill_
    only supports boolean masks, but got mask with dtype float"), so ``except RuntimeError``
    written against torch keeps catching it."""


class MaskShapeError(ValueError, RuntimeError):
    """A mask whose shape does not broadcast with the tensor's. Also a RuntimeError, as torch's
    ("The size of tensor a (2) must match the size of tensor b (3) at non-singleton
    dimension 1")."""


def _bool_mask(mask: Any, shape: tuple[int, ...], what: str) -> np.ndarray:
    """``mask`` as a boolean array that broadcasts with ``shape``, or a clear error. torch's
    masked_fill takes boolean masks only: an integer or float mask was read as "nonzero is
    filled" here, so 0.5 or 2 filled silently where torch refuses."""
    m = as_array(mask.data if isinstance(mask, Tensor) else mask, f"{what}: mask")
    if m.dtype.kind != "b":
        raise MaskError(f"{what}: mask must be a boolean array (torch's masked_fill only "
                        f"supports boolean masks), got dtype {m.dtype}; pass mask.astype(bool) "
                        "if nonzero means filled, or e.g. mask == 1")
    try:
        np.broadcast_shapes(m.shape, shape)
    except ValueError:
        raise MaskShapeError(f"{what}: mask of shape {m.shape} does not broadcast with the "
                             f"tensor's shape {shape} (trailing dimensions must be equal or 1); "
                             "reshape the mask") from None
    return m


def masked_fill(x: Any, mask: Any, value: float) -> Tensor:
    """``x`` with the entries where ``mask`` is true replaced by ``value`` (exact when ``value``
    is representable, as -inf is); no gradient flows to the replaced entries.

    As torch's ``masked_fill``: ``mask`` must be boolean (anything else is a :class:`MaskError`,
    also a RuntimeError as torch's) and broadcast with ``x`` (else a :class:`MaskShapeError`);
    the result has the broadcast shape, and where the mask broadcast ``x`` to it, the gradient
    is summed back to ``x``'s shape.

    >>> masked_fill(Tensor([[1.0, 2.0]]), np.array([[False, True]]), -np.inf).data.tolist()
    [[1.0, -inf]]
    """
    x = _operand(x, "masked_fill: x")
    mask = _bool_mask(mask, x.shape, "masked_fill")
    if isinstance(value, Tensor) and value.ndim == 0:  # torch takes a 0-d tensor too
        value = value.item()
    value = number("masked_fill: value", value, finite=False)
    fmt = active_policy().op_format("masked_fill", x.fmt)
    fill = quantize(np.asarray(value, x.data.dtype), fmt)
    out = np.where(mask, fill, x.data)

    def backward(g: np.ndarray) -> None:
        # torch's masked_fill(grad, mask, 0), then (autograd's own step) summed back over the
        # axes the mask broadcast x along: a gradient of x's shape, not the result's
        _send(x, _unbroadcast(np.where(mask, 0, g), x.shape)[0], fmt, exact=g.shape == x.shape)

    return _result(out, fmt, (x,), backward, "masked_fill")


def causal_mask(t_q: int, t_k: int) -> np.ndarray:
    """True above the diagonal: position i may not look at positions after i. The diagonal is
    aligned to the bottom-right corner: the queries are the *last* ``t_q`` of the ``t_k``
    positions (a decoding step with a key cache). That is torch's ``causal_lower_right(t_q,
    t_k)`` (and flash-attn >= 2.1's causal), not its ``is_causal=True``, which is
    ``causal_upper_left``: ``tril`` of a (t_q, t_k) ones matrix, the queries being the *first*
    positions. The two agree when ``t_q == t_k``. With ``t_q > t_k`` the first ``t_q - t_k``
    rows are all True (no key to attend).

    >>> causal_mask(2, 2).tolist()
    [[False, True], [False, False]]
    >>> causal_mask(1, 3).tolist(), causal_mask(3, 2).tolist()
    ([[False, False, False]], [[True, True], [False, True], [False, False]])
    """
    return np.triu(np.ones((t_q, t_k), bool), k=1 + t_k - t_q)


def scaled_dot_product_attention(
    q: Any,
    k: Any,
    v: Any,
    *,
    causal: bool = True,
    scale: float | None = None,
    scale_queries: bool = False,
    subtract_max: bool = True,
) -> Tensor:
    """``softmax(q k^T * scale + mask) v`` over the last two axes of (..., heads, T, head_dim)
    tensors (``v``'s last axis may differ from q's and k's, as torch's E_v), written the
    unfused way (nanoGPT's "manual" path): ``bmm`` for the scores, the scale, the causal mask
    (``-inf`` above the diagonal), :func:`softmax`, ``bmm`` with ``v``.

    ``scale`` defaults to ``1 / sqrt(head_dim)``. With ``scale_queries=True`` the queries are
    multiplied by it *before* the product, so the scores are born small: in float16 ``q k^T``
    can exceed 65504 and become inf although the scaled scores would be modest. (torch's math
    path multiplies both q and k^T by ``sqrt(scale)`` instead, and adds the mask rather than
    filling it: the same numbers when ``sqrt(scale)`` is a power of two, as for head_dim 16,
    but not bit for bit for head_dim 64.)

    ``causal=True`` applies :func:`causal_mask`, aligned to the bottom-right corner: it is
    torch's ``scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(t_q, t_k))``,
    and equals torch's ``is_causal=True`` (top-left: ``tril(ones(t_q, t_k))``) only when
    ``t_q == t_k``, as in :class:`~floatlab.mixed.Transformer`. (Deliberately: with a key
    cache, ``t_q < t_k``, the last queries must see every earlier key.) A query row with no
    key to attend (``t_q > t_k``: the first ``t_q - t_k`` rows) gives zeros, not NaN, as
    torch >= 2.5's math path does (its ``_safe_softmax`` sets a fully masked row's weights to
    0), and sends no gradient to q, k or v (the row is a constant).

    >>> q = Tensor(np.ones((1, 2, 4)))
    >>> scaled_dot_product_attention(q, q, q).shape
    (1, 2, 4)
    """
    q, k, v = (_operand(t, f"scaled_dot_product_attention: {name}")
               for t, name in ((q, "q"), (k, "k"), (v, "v")))
    causal = flag("scaled_dot_product_attention: causal", causal)
    scale_queries = flag("scaled_dot_product_attention: scale_queries", scale_queries)
    # v may have its own last axis (torch's E_v): the output is (..., t_q, E_v)
    if q.ndim < 2 or k.shape[:-1] != v.shape[:-1] or q.shape[-1] != k.shape[-1] \
            or q.shape[:-2] != k.shape[:-2] or q.shape[-1] == 0:
        raise ValueError(f"scaled_dot_product_attention: q {q.shape}, k {k.shape}, v {v.shape} "
                         "must be (..., T, head_dim) with equal batch/head axes, head_dim >= 1 "
                         "for q and k, and k, v of one length T (v's last axis may differ)")
    # a number: float("0.1") would take a string, float(True) a flag, and NaN / inf would
    # turn every score into NaN
    s = (1 / math.sqrt(q.shape[-1]) if scale is None
         else number("scaled_dot_product_attention: scale", scale))
    kt = permute(k, tuple(range(k.ndim - 2)) + (k.ndim - 1, k.ndim - 2))
    if scale_queries:
        scores = bmm(mul(q, s), kt)
    else:
        scores = mul(bmm(q, kt), s)
    if not causal:
        return bmm(softmax(scores, axis=-1, subtract_max=subtract_max), v)
    mask = causal_mask(q.shape[-2], k.shape[-2])
    dead = mask.all(axis=-1, keepdims=True)  # rows with no key: only when t_q > t_k
    if not dead.any():
        scores = masked_fill(scores, mask, -np.inf)
        return bmm(softmax(scores, axis=-1, subtract_max=subtract_max), v)
    # torch's _safe_softmax: a fully masked row's weights are 0. Its scores are set to 0 first
    # (not -inf), so the softmax stays finite there and its backward sends 0, not NaN
    scores = masked_fill(masked_fill(scores, dead, 0.0), mask & ~dead, -np.inf)
    weights = masked_fill(softmax(scores, axis=-1, subtract_max=subtract_max), dead, 0.0)
    return bmm(weights, v)
