"""The overflow bound that lets the lab's fp16 engines (:mod:`floatlab.fp16_matmul`) run the
magic-constant loop without overflow handling: no running sum of ``a @ b`` in an fp16
round-to-nearest accumulator can reach fp16's overflow threshold.

It only chooses between exact engines (the magic loop where it holds, NumPy's float16 cast
elsewhere), so a sufficient bound that is cheaper to compute changes speed, never results.
"""

from __future__ import annotations

import builtins

import numpy as np

_FAST_BOUND_SUMS = True  # switch for the tests (BLAS sums in the bound, else NumPy's sum)
_FAST_BOUND_MAX = True  # switch for the tests (the cheap K * max|a| * max|b| stage first)


def _float16_magic_applies(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether no running sum of ``a @ b`` in fp16 can reach the overflow threshold (then
    :func:`floatlab.fp16_matmul._float16_magic` needs no overflow handling).

    Every entry of |a| @ |b| is at most each of three bounds, tried from the cheapest:
    K * max |a| * max |b| (two reductions per operand, no temporary: enough for the lab's
    forward and input-gradient products), max |a| * (largest column sum of |b|), and
    (largest row sum of |a|) * max |b| (one |x| and one matrix-vector product each). Times the
    growth (1 + 2**-11)**K that K roundings to nearest can add, each bounds every running sum,
    so any one below 65504 suffices; the margin (1 + 2**-30) covers the float64 roundings of
    the bounds (three products, and the sums' relative error below K * 2**-53).
    The row and column sums are BLAS matrix-vector products with a vector of ones (three times
    faster than NumPy's reductions along an axis on the lab's shapes): each is a float64 sum of
    the same nonnegative terms (times 1: exact) in some order, with or without FMA, so its
    relative error is below K * 2**-53 whatever the order, as NumPy's pairwise sums' is
    (switch ``_FAST_BOUND_SUMS``). Refuses inf / NaN at every stage: a NaN makes the maximum
    and the minimum NaN, an inf makes the bound inf, and 0 * inf (a zero operand against an
    inf) is NaN; NaN compares false. The stages only decide sooner (switch
    ``_FAST_BOUND_MAX``: without the first stage, as before; the tests check both ways).
    """
    if a.size == 0 or b.size == 0:
        return False
    growth = (1 + 2.0**-11) ** a.shape[1] * (1 + 2.0**-30)
    with np.errstate(over="ignore", invalid="ignore"):
        # max |x| as max(max x, -min x): no |x| temporary (any NaN makes both NaN)
        max_a = builtins.max(float(a.max()), -float(a.min()))
        max_b = builtins.max(float(b.max()), -float(b.min()))
        if _FAST_BOUND_MAX and a.shape[1] * max_a * max_b * growth < 65504.0:
            return True
        abs_b = np.abs(b)
        cols_b = np.ones(b.shape[0]) @ abs_b if _FAST_BOUND_SUMS else abs_b.sum(axis=0)
        if max_a * float(cols_b.max()) * growth < 65504.0:
            return True
        abs_a = np.abs(a)
        rows_a = abs_a @ np.ones(a.shape[1]) if _FAST_BOUND_SUMS else abs_a.sum(axis=1)
        return float(rows_a.max()) * max_b * growth < 65504.0  # (NaN compares false)
