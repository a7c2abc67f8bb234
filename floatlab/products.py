"""Products through an Accumulator: :func:`matmul` and :func:`dot`, N-D ones included.

NumPy's shape rules, each output element one accumulation of the 2-D product's terms in the
2-D product's order (inner index 0, 1, ... K-1), so a stack equals its per-slice 2-D
products bit for bit:

* ``matmul(a, b)``: the last two axes are matrices, the leading ones a stack, broadcast
  against each other; a 1-D ``a`` is a row (its axis removed from the result), a 1-D ``b`` a
  column. ``out[..., i, j] = sum_k a[..., i, k] * b[..., k, j]``.
* ``dot(a, b)``: the sum over the last axis of ``a`` and the second-to-last of ``b`` (the
  last if ``b`` is 1-D), every pair of their other indices combined:
  ``out.shape == a.shape[:-1] + b.shape[:-2] + b.shape[-1:]``.

The engines run once per call where they can: a stack whose other operand is one matrix is
one 2-D product of the stacked rows (or columns), and a stack of small distinct pairs runs as
one set of independent sums (:class:`_StackTerms`). Distinct pairs of 1024 outputs or more
run slice by slice through the 2-D engines, whose fast paths then pay more than one call;
so does a stochastic accumulator: its random numbers are then drawn in the order of the
per-slice products, so a seeded stack equals them too.

>>> import numpy as np, floatlab
>>> a = np.ones((2, 1, 4096)); b = np.ones((4096, 1))
>>> floatlab.matmul(a, b, "fp16").tolist()          # each slice: 2048 + 1 == 2048 in fp16
[[[2048.0]], [[2048.0]]]
>>> floatlab.dot(np.ones((2, 3)), np.ones((4, 3, 5)), "fp16").shape
(2, 4, 5)
"""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from floatlab.accumulate import Accumulator, _accumulator, _operand, _ProductTerms, _Terms
from floatlab.formats import Format
from floatlab.rounding import round as _round
from floatlab.sequential import _bits

_SIGNATURE = "(n?,k),(k,m?)->(n?,m?)"
_SLICE_OUTPUTS = 1024  # outputs per slice from which distinct pairs run slice by slice


def matmul_shapes(ashape: tuple, bshape: tuple) -> tuple[tuple, int, int, int]:
    """(stack shape, rows, inner, columns) of ``a @ b`` by NumPy's rules; ValueError as NumPy
    words it (naming the dimensions that do not match) when they do not fit."""
    for i, shape in enumerate((ashape, bshape)):
        if len(shape) == 0:
            raise ValueError(f"matmul: Input operand {i} does not have enough dimensions "
                             f"(has 0, gufunc core with signature {_SIGNATURE} requires 1): "
                             "multiply by a scalar with * instead")
    a2 = (1,) + ashape if len(ashape) == 1 else ashape
    b2 = bshape + (1,) if len(bshape) == 1 else bshape
    if a2[-1] != b2[-2]:
        where = "only dimension" if len(bshape) == 1 else "second-to-last dimension"
        raise ValueError(f"matmul: shapes {ashape} and {bshape} do not align: a's last "
                         f"dimension {a2[-1]} must equal b's {where} {b2[-2]} (NumPy: Input "
                         "operand 1 has a mismatch in its core dimension 0, with gufunc "
                         f"signature {_SIGNATURE} (size {b2[-2]} is different from {a2[-1]}))")
    try:
        lead = np.broadcast_shapes(a2[:-2], b2[:-2])
    except ValueError:
        raise ValueError(f"matmul: the stack dimensions {a2[:-2]} of a (shape {ashape}) and "
                         f"{b2[:-2]} of b (shape {bshape}) cannot be broadcast together: "
                         "each pair of leading dimensions must be equal or 1") from None
    return lead, a2[-2], a2[-1], b2[-1]


def _stack_matmul(av: np.ndarray, bv: np.ndarray, acc: Accumulator,
                  known: tuple) -> np.ndarray:
    """``av @ bv`` (float64, one of them more than 2-D) through ``acc``."""
    lead, m, k, n = matmul_shapes(av.shape, bv.shape)
    a2 = av if av.ndim > 1 else av.reshape(1, k)  # (1-D operands: a row, a column)
    b2 = bv if bv.ndim > 1 else bv.reshape(k, 1)
    s = _count(lead)  # (sizes spelled out: -1 is ambiguous in a reshape when k == 0)
    if s == 0 or m == 0 or n == 0:
        out = np.zeros(lead + (m, n))
    elif acc.rounding == "stochastic" or (m * n >= _SLICE_OUTPUTS
                                          and _count(a2.shape[:-2]) > 1
                                          and _count(b2.shape[:-2]) > 1):
        # per slice: a stochastic stream drawn in per-slice order; or slices large enough for
        # the 2-D engines' fast paths (fp16 magic constants, truncation masks, block-FMA
        # tiles), which beat the per-addition loop on all slices at once (measured 3x at
        # 8 x (128 x 64 @ 64 x 128)); the bits are the same either way
        a_all = np.broadcast_to(a2, lead + (m, k)).reshape(s, m, k)
        b_all = np.broadcast_to(b2, lead + (k, n)).reshape(s, k, n)
        out = np.stack([_product2d(x, y, acc, known) for x, y in zip(a_all, b_all, strict=True)])
    elif _count(b2.shape[:-2]) == 1:  # one matrix b: the stacked rows of a, one 2-D product
        rows = np.broadcast_to(a2, lead + (m, k)).reshape(s * m, k)
        out = _product2d(rows, b2.reshape(k, n), acc, known)
    elif _count(a2.shape[:-2]) == 1:  # one matrix a: b's stacked columns, one 2-D product
        cols = np.broadcast_to(b2, lead + (k, n)).reshape(s, k, n)
        cols = cols.transpose(1, 0, 2).reshape(k, s * n)
        out = _product2d(a2.reshape(m, k), cols, acc, known)
        out = out.reshape(m, s, n).transpose(1, 0, 2)
    else:  # distinct pairs: every output of every slice one independent sum, side by side
        a_all = np.broadcast_to(a2, lead + (m, k)).reshape(s, m, k)
        b_all = np.broadcast_to(b2, lead + (k, n)).reshape(s, k, n)
        out = acc.reduce(_StackTerms(a_all, b_all, None if acc.fused else acc, known))
    out = np.asarray(out, dtype=np.float64).reshape(lead + (m, n))
    if av.ndim == 1:
        out = out[..., 0, :]
    if bv.ndim == 1:
        out = out[..., 0]
    return out


def _nd_dot(av: np.ndarray, bv: np.ndarray, acc: Accumulator) -> np.ndarray:
    """``np.dot(av, bv)`` for operands of more than 2 dimensions (one 2-D product: the rows
    of a against the columns of every matrix of b)."""
    if av.ndim == 0 or bv.ndim == 0:
        raise ValueError(f"dot: shapes {av.shape} and {bv.shape}: a 0-d operand has no axis "
                         "to sum over; multiply by a scalar with * instead")
    k_b = bv.shape[-1] if bv.ndim == 1 else bv.shape[-2]
    if av.shape[-1] != k_b:
        b_axis = bv.ndim - 1 if bv.ndim == 1 else bv.ndim - 2
        raise ValueError(f"shapes {av.shape} and {bv.shape} not aligned: {av.shape[-1]} "
                         f"(dim {av.ndim - 1}) != {k_b} (dim {b_axis}); np.dot sums over a's "
                         "last axis and b's second-to-last (use matmul / @ for stacks of "
                         "matrices)")
    k = av.shape[-1]
    rows = av.reshape(_count(av.shape[:-1]), k)
    if bv.ndim == 1:
        cols, tail = bv.reshape(k, 1), ()
    else:
        cols = np.moveaxis(bv, -2, 0).reshape(k, _count(bv.shape[:-2] + bv.shape[-1:]))
        tail = bv.shape[:-2] + bv.shape[-1:]
    if rows.shape[0] == 0 or cols.shape[1] == 0:
        out = np.zeros((rows.shape[0], cols.shape[1]))
    else:
        out = _product2d(rows, cols, acc, (None, None))
    return np.asarray(out, dtype=np.float64).reshape(av.shape[:-1] + tail)


def dot(a: Any, b: Any, accumulator: Accumulator | str | Format | None = None) -> Any:
    """``np.dot`` through ``accumulator``: the inner product of two vectors, ``matmul`` for 1-D
    and 2-D operands, and for N-D ones the sum over a's last axis and b's second-to-last
    (shape ``a.shape[:-1] + b.shape[:-2] + b.shape[-1:]``, see :mod:`floatlab.products`).

    >>> float(dot([1.0, 1.0, 1.0], [2048.0, 1.0, 1.0], "fp16"))
    2048.0
    """
    av, fa = _operand(a, "a")
    bv, fb = _operand(b, "b")
    if av.ndim == 1 and bv.ndim == 1:
        if av.shape != bv.shape:
            raise ValueError(f"dot: vectors of lengths {av.size} and {bv.size}; they must match")
        out = matmul(_rewrap(av[None, :], fa), _rewrap(bv[:, None], fb), accumulator)
        return out[0, 0] if isinstance(out, np.ndarray) else out.reshape(())
    if av.ndim > 2 or bv.ndim > 2:  # NumPy's N-D dot: a's last axis with b's second-to-last
        acc = _product_accumulator(fa, fb, accumulator)
        return _wrap_product(_nd_dot(av, bv, acc), fa, fb)
    return matmul(a, b, accumulator)


def matmul(a: Any, b: Any, accumulator: Accumulator | str | Format | None = None) -> Any:
    """``a @ b`` with products summed through ``accumulator``, by NumPy's rules: 2-D matrices,
    1-D vectors, and stacks of matrices broadcast over their leading axes (each slice summed
    as its 2-D product, bit for bit; see :mod:`floatlab.products`).

    Products are exact in float64 when both inputs have at most 26 significant bits (every
    format up to float32); ``fused=False`` rounds each to the accumulator format first. All
    outputs are summed at once: one vectorised addition per inner index.

    >>> import numpy as np
    >>> matmul(np.ones((1, 4096)), np.ones((4096, 1)), "fp16").tolist()
    [[2048.0]]
    """
    return _matmul(a, b, accumulator)


def _matmul(a: Any, b: Any, accumulator: Accumulator | str | Format | None = None,
            known: tuple[Format | None, Format | None] = (None, None)) -> Any:
    """:func:`matmul`, for a caller that knows which format's values ``a`` and ``b`` hold
    (``known``; None: not known): the training lab, whose matmul inputs are rounded to its
    policy's ``matmul_inputs`` (``floatlab.mixed.gemm._product``). The engines then read the
    values' significant bits and lowest bit from the formats instead of passes over the
    values (``floatlab.sequential._bits`` / ``_lowest_bit``, whose docstrings say why the
    formats give valid bounds); the bounds only choose among engines that are each exact, so
    the result is the same bits as :func:`matmul`'s (tested). Private: a wrong ``known``
    (values not in the format) would make the bounds wrong, so the public API cannot pass it.
    """
    av, fa = _operand(a, "a")
    bv, fb = _operand(b, "b")
    matmul_shapes(av.shape, bv.shape)  # (NumPy's errors, before the accumulator's)
    acc = _product_accumulator(fa, fb, accumulator)
    if av.ndim <= 2 and bv.ndim <= 2:
        out = _product2d(av if av.ndim == 2 else av[None, :],
                        bv if bv.ndim == 2 else bv[:, None], acc, known)
        out = out[0] if av.ndim == 1 else out
        out = out[..., 0] if bv.ndim == 1 else out
    else:
        out = _stack_matmul(av, bv, acc, known)
    return _wrap_product(out, fa, fb)


def _product_accumulator(fa: Any, fb: Any, accumulator: Any) -> Accumulator:
    """The adder of a product: the one passed, else the first FloatArray operand's."""
    owner = fa if fa is not None else fb
    if accumulator is None and owner is not None:
        return owner.accumulator
    return _accumulator(accumulator, None)


def _wrap_product(out: np.ndarray, fa: Any, fb: Any) -> Any:
    """A product's sums: plain for plain operands, else rounded once to the promoted format."""
    owner = fa if fa is not None else fb
    if owner is None:
        return out
    from floatlab.arith import result_format

    return owner._new(out, result_format(*(f for f in (fa, fb) if f is not None)))


def _product2d(a2: np.ndarray, b2: np.ndarray, acc: Accumulator,
                known: tuple[Format | None, Format | None]) -> np.ndarray:
    """The 2-D product ``a2 @ b2`` (float64 matrices that align) through ``acc``."""
    terms = _ProductTerms(a2, b2, None if acc.fused else acc, known)
    return acc.reduce(terms).reshape(a2.shape[0], b2.shape[1])


def _rewrap(values: np.ndarray, fa: Any) -> Any:
    return values if fa is None else fa._new(values, fa.fmt, exact=True)


class _StackTerms(_Terms):
    """The rank-1 terms of a stack of matrix products ``a[s] @ b[s]``: term k is
    ``a[:, :, k, None] * b[:, None, k, :]``, (s * rows * columns) independent sums; rounded to
    ``round_to``'s format first when unfused. Not a ``_ProductTerms``: the 2-D engines that
    read the operands themselves do not apply, the per-addition ones run on these terms."""

    def __init__(self, a: np.ndarray, b: np.ndarray, round_to: Accumulator | None,
                 known: tuple[Format | None, Format | None]):
        self.a, self.b, self.round_to = a, b, round_to
        self.n = a.shape[2]
        self.m = a.shape[0] * a.shape[1] * b.shape[2]
        self.bits = (round_to.fmt.p if round_to is not None
                     else builtins.sum(_bits(x, f) for x, f in zip((a, b), known, strict=True)))

    def block(self, start: int, stop: int) -> np.ndarray:
        prod = (self.a[:, :, start:stop].transpose(2, 0, 1)[:, :, :, None]
                * self.b[:, start:stop, :].transpose(1, 0, 2)[:, :, None, :])
        prod = prod.reshape(stop - start, self.m)
        if self.round_to is not None:
            acc = self.round_to
            prod = _round(prod, acc.fmt, acc.rounding, rng=acc.rng, random_bits=acc.random_bits)
        return prod


def _count(shape: tuple) -> int:
    return math.prod(shape)
