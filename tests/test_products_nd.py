"""N-D matmul and dot through an Accumulator (floatlab.products): NumPy's shapes, per-slice bits.

* Every stack equals its per-slice 2-D products bit for bit, for every kind of accumulator
  (the three vectorised paths: one matrix b, one matrix a, distinct pairs), and against the
  exact Fraction loop of tests/test_accumulate.py element by element on small cases.
* A seeded stochastic accumulator runs slice by slice: the stack equals the per-slice
  products made with the same seed, and every sum of positive terms lies between the exact
  "down" and "up" loops.
* np.dot's N-D rule (a's last axis with b's second-to-last) and its shape errors; FloatArray's
  ``@``, np.matmul and np.dot reach the same code.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from exact_arith import round_fraction
from test_accumulate import _reference

import floatlab
from floatlab import Accumulator

ACCUMULATORS = [
    dict(fmt="fp16"),
    dict(fmt="fp16", order="pairwise"),
    dict(fmt="fp16", chunk=3, promote="float32"),
    dict(fmt="e8m13", rounding="toward_zero"),
    dict(fmt="bf16", fused=False),
    dict(fmt="fp16", compensated=True),
    dict(fmt="e8m13", rounding="toward_zero", block_fma=4, chunk=8, promote="float32"),
]
SHAPES = [((3, 4, 5), (3, 5, 2)), ((2, 1, 4, 5), (3, 5, 2)), ((3, 4, 5), (5, 2)),
          ((4, 5), (3, 5, 2)), ((5,), (2, 5, 3)), ((2, 3, 5), (5,)), ((1, 4, 5), (2, 5, 3)),
          ((2, 1, 2, 7), (1, 3, 7, 2)), ((0, 2, 3), (3, 4)), ((2, 2, 0), (2, 0, 3)),
          ((2, 32, 6), (2, 6, 32))]  # (the last: 1024 outputs a slice, run slice by slice)


def _operands(sa, sb, seed=0, fmt="fp16"):
    rng = np.random.default_rng(seed)
    return (floatlab.round(rng.standard_normal(sa) * 3, fmt),
            floatlab.round(rng.standard_normal(sb) * 3, fmt))


def _per_slice(a, b, acc):
    """np.matmul's definition: broadcast the stacks, one 2-D product per slice."""
    a2 = a if a.ndim > 1 else a[None, :]
    b2 = b if b.ndim > 1 else b[:, None]
    lead = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    count = int(np.prod(lead))
    a3 = np.broadcast_to(a2, lead + a2.shape[-2:]).reshape((count,) + a2.shape[-2:])
    b3 = np.broadcast_to(b2, lead + b2.shape[-2:]).reshape((count,) + b2.shape[-2:])
    out = np.array([floatlab.matmul(x, y, acc) for x, y in zip(a3, b3, strict=True)])
    out = out.reshape(lead + (a2.shape[-2], b2.shape[-1]))
    out = out[..., 0, :] if a.ndim == 1 else out
    return out[..., 0] if b.ndim == 1 else out


@pytest.mark.parametrize("case", ACCUMULATORS, ids=lambda c: "-".join(map(str, c.values())))
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_stack_equals_per_slice_products_bit_for_bit(case, shapes):
    a, b = _operands(*shapes)
    acc = Accumulator(**case)
    got = floatlab.matmul(a, b, acc)
    want = _per_slice(a, b, acc)
    assert got.shape == np.matmul(a, b).shape
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("case", ACCUMULATORS[:5], ids=lambda c: "-".join(map(str, c.values())))
def test_stack_against_exact_loop(case):
    acc = Accumulator(**case)
    a, b = _operands((2, 3, 9), (2, 9, 2), seed=1, fmt="e4m3fn")
    for a_op, b_op in ((a, b), (a, b[0]), (a[0], b)):  # the three vectorised paths
        got = floatlab.matmul(a_op, b_op, acc)
        a3 = np.broadcast_to(a_op, got.shape[:1] + a_op.shape[-2:])
        b3 = np.broadcast_to(b_op, got.shape[:1] + b_op.shape[-2:])
        for s, i, j in np.ndindex(got.shape):
            prods = [Fraction(float(p)) for p in a3[s, i] * b3[s, :, j]]
            if not acc.fused:
                prods = [round_fraction(p, acc.fmt, acc.rounding) for p in prods]
            assert got[s, i, j] == float(_reference([float(p) for p in prods], acc)), (s, i, j)


def test_stochastic_stack_is_its_seeded_slices_and_between_down_and_up():
    rng = np.random.default_rng(2)
    a = floatlab.round(rng.random((3, 2, 30)) + 0.1, "bf16")
    b = floatlab.round(rng.random((3, 30, 2)) + 0.1, "bf16")
    for bb in (b, b[0]):
        got = floatlab.matmul(a, bb, Accumulator("bf16", "stochastic", rng=7))
        want = _per_slice(a, bb, Accumulator("bf16", "stochastic", rng=7))
        np.testing.assert_array_equal(got, want)
    down, up = Accumulator("bf16", "down"), Accumulator("bf16", "up")
    for s, i, j in np.ndindex(got.shape):
        prods = [float(p) for p in a[s, i] * b[0, :, j]]
        assert _reference(prods, down) <= Fraction(got[s, i, j]) <= _reference(prods, up)


def test_distinct_pairs_run_as_one_engine_call(monkeypatch):
    calls = []
    reduce = Accumulator.reduce
    monkeypatch.setattr(Accumulator, "reduce", lambda self, t: calls.append(t) or reduce(self, t))
    a, b = _operands((4, 3, 5), (4, 5, 2))
    for bb in (b, b[0]):
        calls.clear()
        floatlab.matmul(a, bb, "fp16")
        assert len(calls) == 1


@pytest.mark.parametrize("shapes", [((2, 3, 4), (5, 4, 6)), ((3, 4), (2, 4, 5)),
                                    ((2, 3, 4), (4, 5)), ((2, 3, 4), (4,)), ((4,), (2, 4, 3)),
                                    ((2, 1, 3, 4), (3, 4, 2))], ids=str)
def test_nd_dot_is_numpys_rule_summed_per_element(shapes):
    a, b = _operands(*shapes, seed=3)
    acc = Accumulator("fp16")
    got = floatlab.dot(a, b, acc)
    assert got.shape == np.dot(a, b).shape
    b_axis = 0 if b.ndim == 1 else b.ndim - 2
    for index in np.ndindex(got.shape):
        ia = index[: a.ndim - 1]
        rest = index[a.ndim - 1:]
        column = b if b.ndim == 1 else b[rest[:-1] + (slice(None), rest[-1])]
        assert np.moveaxis(b, b_axis, -1).shape[-1] == a.shape[-1]
        want = floatlab.dot(a[ia], column, acc)
        assert float(got[index]) == float(want), index


def test_floatarray_operators_and_numpy_functions_reach_the_stack():
    a, b = _operands((2, 3, 5), (2, 5, 4), seed=4)
    fa, fb = floatlab.array(a, "fp16"), floatlab.array(b, "fp16")
    want = floatlab.matmul(a, b, "fp16")
    for got in (fa @ fb, np.matmul(fa, fb), fa @ b, a @ fb):
        assert isinstance(got, floatlab.FloatArray) and got.fmt.name == "float16"
        np.testing.assert_array_equal(got.values, want)
    np.testing.assert_array_equal(np.dot(fa, fb).values, floatlab.dot(a, b, "fp16"))
    np.testing.assert_array_equal(fa.dot(fb).values, floatlab.dot(a, b, "fp16"))
    assert np.dot(fa, fb).shape == (2, 3, 2, 4)


@pytest.mark.parametrize("sa, sb, words", [
    ((2, 3, 4), (2, 5, 6), r"mismatch in its core dimension 0.*size 5 is different from 4"),
    ((2, 3, 4), (3, 4, 6), r"stack dimensions \(2,\) .* and \(3,\) .* cannot be broadcast"),
    ((), (3, 4), "does not have enough dimensions"),
    ((4,), (2, 5, 3), r"size 5 is different from 4"),
])
def test_matmul_shape_errors_read_like_numpys(sa, sb, words):
    a, b = np.ones(sa), np.ones(sb)
    with pytest.raises(ValueError, match=words):
        floatlab.matmul(a, b, "fp16")
    with pytest.raises(ValueError, match=words):
        floatlab.array(a, "fp16") @ floatlab.array(b, "fp16")
    with pytest.raises(ValueError):  # (NumPy refuses them too)
        np.matmul(a, b)


def test_nd_dot_shape_error_names_the_dimensions():
    with pytest.raises(ValueError, match=r"not aligned: 4 \(dim 2\) != 5 \(dim 1\)"):
        floatlab.dot(np.ones((2, 3, 4)), np.ones((2, 5, 6)), "fp16")
    with pytest.raises(ValueError, match=r"not aligned"):
        np.dot(np.ones((2, 3, 4)), np.ones((2, 5, 6)))


def test_inputs_are_not_modified():
    a, b = _operands((2, 3, 5), (2, 5, 4))
    a0, b0 = a.copy(), b.copy()
    floatlab.matmul(a, b, Accumulator("bf16", fused=False))
    floatlab.dot(a, b, "fp16")
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)
