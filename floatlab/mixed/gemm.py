"""Matrix products: matmul, linear, and the low-precision copies of their inputs.

Inputs are rounded to the policy's matmul input format (a parameter's copy is cached once per
optimizer step, as autocast's weight cache does), products are accumulated in the policy's
accumulation format or :class:`~floatlab.Accumulator`, and the result is rounded once to its
compute format. A policy with a training recipe (FP8, MX, NVFP4) hands the three GEMMs of a
layer to :mod:`floatlab.mixed.recipe_gemm`.

>>> from floatlab.mixed import Tensor, use_precision
>>> with use_precision("16-mixed"):
...     (Tensor([[1.0, 1.0]]) @ Tensor([[1.0], [2.0**-12]])).data.tolist()  # 1 + 2**-12
[[1.0]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from floatlab.accumulate import Accumulator
from floatlab.accumulate import _matmul as accumulate_matmul
from floatlab.formats import Format, get_format
from floatlab.mixed.autograd import Tensor, _operand, _result, _send, _work
from floatlab.mixed.checks import tensor
from floatlab.mixed.policy import FP32, FP64, Policy, contains
from floatlab.mixed.scope import _FALLBACK_RNG, _scope, active_policy, quantize

__all__ = ["matmul", "linear", "prime_copies"]


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
        if (cached is not None and cached[0] is t.data and (cached[1] is fmt or cached[1] == fmt)
                and _same_bits(cached[3], t.data)):
            return cached[2]
        values = quantize(t.data, fmt, what="weights")
        t._copy = (t.data, fmt, values, t.data.copy())
        return values
    held = fmt == active_policy().compute  # an autocast copy, kept for backward
    return quantize(t.data, fmt, what="activations" if held else "inputs")


def _same_bits(snapshot: np.ndarray, data: np.ndarray) -> bool:
    """Whether ``data`` still holds the bits ``snapshot`` recorded when its copy was made.

    The array's identity alone is not enough: ``w.data[...] = new`` or ``w.data *= 0.5`` (a
    load by hand, torch's ``with no_grad(): w.copy_(...)``) keeps the array object, and its
    stale copy was read by every later matmul, in any later precision scope (torch's cache
    lives only until the autocast region exits). Compared as unsigned integers: NaN equals
    itself and -0 differs from +0, as their roundings do (about 6 us per 4096 float32 values).
    """
    if snapshot.shape != data.shape or snapshot.dtype != data.dtype:
        return False
    bits = np.dtype(f"u{data.dtype.itemsize}")
    # (one comparison and one all(): np.array_equal's checks and conversions cost as much on
    # these small arrays)
    return bool(np.equal(snapshot.view(bits), data.view(bits)).all())


def prime_copies(params: list[Tensor], fmt: Format, flat: np.ndarray | None = None) -> None:
    """Make the per-step low-precision copies of ``params`` in one rounding.

    The same values a matmul's lazy per-parameter cast would make (rounding is element-wise),
    made at once -- the master-to-model copy of Apex O2. ``flat`` is the parameters' values
    concatenated, when the caller has them (the optimizer does, right after its step).

    >>> from floatlab import get_format
    >>> from floatlab.mixed import parameter
    >>> w = parameter([1 / 3]); prime_copies([w], get_format("bf16"))
    >>> w._copy[2].tolist()
    [0.333984375]
    """
    if not isinstance(fmt, Format):
        fmt = get_format(fmt)
    iterable = hasattr(params, "__iter__") and not isinstance(params, Tensor)
    params = list(params) if iterable else [None]  # a generator is read once
    if not all(isinstance(p, Tensor) for p in params):
        raise TypeError("prime_copies: params must be a list of parameter Tensors, e.g. "
                        "model.parameters()")
    _prime_copies(params, fmt, flat)


def _prime_copies(params: list[Tensor], fmt: Format, flat: np.ndarray | None = None) -> None:
    """:func:`prime_copies` of checked arguments: the optimizer's call after every step (its
    own list of parameters and a Format), which need not pay for the checks again."""
    todo = [p for p in params if not contains(fmt, p.fmt)]
    if not todo:
        return
    if flat is None or len(todo) != len(params):
        flat = np.concatenate([p.data.reshape(-1) for p in todo])  # a new array: the snapshot
    else:
        flat = flat.copy()  # the caller's weights, which the parameters' data may view
    low = quantize(flat, fmt, what="weights")
    start = 0
    for p in todo:
        stop = start + p.size
        p._copy = (p.data, fmt, low[start:stop].reshape(p.shape), flat[start:stop].reshape(p.shape))
        start = stop


def _product(a: np.ndarray, b: np.ndarray, policy: Policy,
             known: tuple[Format | None, Format | None] = (None, None)) -> np.ndarray:
    """``a @ b`` (2-D, or batched over leading axes) with the policy's accumulation format or
    Accumulator.

    float32 accumulation is BLAS sgemm (products of 16-bit inputs are exact in float32, sums
    round in float32): the tensor-core behaviour. A narrower accumulator, or any Accumulator,
    runs through ``floatlab.matmul`` -- the same code a user calls -- which adds one rank-1
    term per inner index to all outputs at once and rounds the running sums each time: what
    makes low-precision accumulation lose small terms ("swamping"). ``known``: the formats
    whose values a and b are known to hold (the policy's matmul inputs, where the caller
    rounded them there), which spares the engines passes over them (see
    ``floatlab.accumulate._matmul``); None where not known.
    """
    acc = policy.accumulate
    if not isinstance(acc, Accumulator):
        if contains(acc, FP64):
            return a.astype(np.float64, copy=False) @ b.astype(np.float64, copy=False)
        if contains(acc, FP32):
            return a.astype(np.float32, copy=False) @ b.astype(np.float32, copy=False)
        rng = (_scope().rng or _FALLBACK_RNG) if policy.rounding == "stochastic" else None
        acc = Accumulator(acc, policy.rounding, rng=rng)
    a64, b64 = a.astype(np.float64, copy=False), b.astype(np.float64, copy=False)
    # (batched attention products too: floatlab.matmul sums each batch entry as its 2-D
    # product, bit for bit, in one engine call where it can)
    return accumulate_matmul(a64, b64, acc, known)


def _float64_operands(policy: Policy) -> bool:
    """Whether :func:`_product` reads its operands as float64 under ``policy`` (every path but
    float32 BLAS): then :func:`_linear_op` converts each of x, w and the gradient once, for
    the two products that read it, instead of once per product (float32 -> float64 is exact,
    so the values are the same; about 12 us per 512 x 64 operand)."""
    acc = policy.accumulate
    return isinstance(acc, Accumulator) or contains(acc, FP64) or not contains(acc, FP32)


_FAST_EXACT_GRADS = True  # switch for the tests (gradient products rounded to fmt, else not)


def _products_in(policy: Policy, fmt: Format) -> bool:
    """Whether every value :func:`_product` returns under ``policy`` is already a value of
    ``fmt`` that rounding to ``fmt`` keeps, bits included, but for the sign and payload of a
    NaN (see :func:`_canonical_nan`): then the backward's products for tensors that are not
    leaves skip that rounding (``quantize(..., exact=True)``, 0.24 ms per 512 x 64 gradient;
    the telemetry sees the same values in the same calls: a leaf's gradient keeps its place
    in :func:`~floatlab.mixed.autograd._flush`'s one rounding per format).

    A sequential Accumulator of ``fmt`` itself (no chunked promotion, no Kahan, no block FMA)
    rounds every running sum to ``fmt`` -- ``Accumulator("fp16")`` / ``accumulate="fp16"``
    under 16-mixed -- so its totals are values of fmt, +-0 and +-inf included, and rounding a
    value of the format to the format returns it in every deterministic mode (the saturating
    policy's +-inf -> +-max is excluded). A stochastic policy is excluded too: its rounding
    draws random numbers even for values it keeps, and skipping it would move the stream.
    """
    if policy.rounding == "stochastic" or policy.saturate:
        return False
    acc = policy.accumulate
    if not isinstance(acc, Accumulator):  # a format: a sequential Accumulator of it
        return acc == fmt and not contains(acc, FP32)  # (else BLAS results, to be rounded)
    return (acc.fmt == fmt and acc.order == "sequential" and acc.chunk is None
            and not acc.compensated and acc.block_fma is None)


def _canonical_nan(values: np.ndarray, exact: bool) -> np.ndarray:
    """``values`` with every NaN made the positive quiet NaN that floatlab's rounding returns
    (an fp16 accumulator's inf + -inf is a negative NaN on x86), when the rounding is skipped
    (``exact``); else ``values`` unchanged. Not in place: the product is the caller's."""
    if exact and np.isnan(values).any():
        return np.where(np.isnan(values), np.nan, values)
    return values


def matmul(a: Any, b: Any) -> Tensor:
    """``a @ b`` for 2-D tensors: inputs rounded to the policy's matmul input format, products
    accumulated in its accumulation format, the result rounded once to its compute format.

    >>> from floatlab.mixed import use_precision
    >>> with use_precision("16-mixed"):
    ...     (Tensor([[1.0, 1.0]]) @ Tensor([[1.0], [2.0**-12]])).data.tolist()  # 1 + 2**-12
    [[1.0]]
    """
    a, b = _operand(a, "matmul: a"), _operand(b, "matmul: b")
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
    x = _operand(x, "linear: x")
    weight = tensor("linear: weight", weight)  # an array would fail deep in the matmul
    bias = tensor("linear: bias", bias, optional=True)
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
    wide = _float64_operands(policy)
    if wide:
        xi, wm = xi.astype(np.float64), wm.astype(np.float64)
    known = (fin, fin)  # (xi and wm hold fin's values: _matmul_input rounded them there)
    values = _product(xi, wm, policy, known)
    if bias is not None:
        values = values + _matmul_input(bias, fin)
    out = quantize(values, fmt)
    parents = (x, w) if bias is None else (x, w, bias)

    def backward(g: np.ndarray) -> None:
        rounded = not contains(fin, fmt)
        gi = quantize(g, fin, what="grads") if rounded else g
        gi = gi.astype(np.float64, copy=False) if wide else gi
        # gi's values are fin's (rounded here) or else g's, which are fmt's: backward hands each
        # op its output's gradient, which autograd._deliver keeps in the output's format (fmt)
        known_g = fin if rounded else fmt
        # (leaves' gradients wait for _flush, which rounds them in one call per format:
        # skipping theirs would split that call, and the telemetry counts calls)
        exact = _FAST_EXACT_GRADS and _products_in(policy, fmt)
        if x.requires_grad:
            exact_x = exact and x._op != "leaf"
            dx = _product(gi, wm.T, policy, (known_g, fin))
            _send(x, _canonical_nan(dx, exact_x), fmt, exact=exact_x)
        if w.requires_grad:
            # linear: dW = g^T x, (out, in); matmul: dB = a^T g
            gw = (_product(gi.T, xi, policy, (known_g, fin)) if transpose_w
                  else _product(xi.T, gi, policy, (fin, known_g)))
            exact_w = exact and w._op != "leaf"
            _send(w, _canonical_nan(gw, exact_w), fmt, exact=exact_w)
        if bias is not None and bias.requires_grad:
            _send(bias, g.sum(axis=0), fmt)

    return _result(out, fmt, parents, backward, op)
