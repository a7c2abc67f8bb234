"""Engines for sequential sums: one rounding per addition, as fast as NumPy allows.

A sequential sum is one vectorised pass per term index across all independent sums (matmul
outputs, rows). A single long sum has one output, so it is
run speculatively in blocks: while the running sum stays in one binade [2**E, 2**(E+1)) of the
accumulator, its quantum U is fixed, so each addition adds ``round(c + x) - c`` for a reference
point c in that binade, independent of the running sum -- except for the ties of
round-to-nearest-even and round-to-odd, which depend on the parity of the running sum's last
bit; that parity is a two-state recurrence solved by a prefix scan. The block is checked
afterwards (every exact partial sum in the binade, nothing overflowing) and cut at the first
step that leaves it; from there a stretch of a thousand terms or more runs one rounding at
a time in Python floats (:mod:`floatlab.sequential_scalar`, in the formats its rounding
template covers; elsewhere one step at a time): zero-mean fp8 / fp4 sums cross binades
every few terms, 1M of them in about 0.3 s instead of 12-34 s, and 0.2-0.3 s instead of
about 60 s with stochastic rounding, whose stretches draw the per-step path's numbers.
The fast paths for float16 / bfloat16 / float32 / float64 round-to-nearest sequential sums
of values already in the format use NumPy's and ml_dtypes' ``add.accumulate``: they add in
float32 (or the type itself) and round once, which is correctly rounded because float32's
24 bits are at least 2p + 2 for p <= 11 (Figueroa's double-rounding theorem), and tests
check them equal to the emulated path.
An fp16 round-to-nearest matrix product (the lab's ``accumulate="fp16"``) adds one rank-1
term per inner index to all outputs: :mod:`floatlab.fp16_matmul`.
A long Kahan (compensated) sum has a state no scan can split: a few of them run step by step
in Python floats (:mod:`floatlab.kahan_scalar`: every mode, up to 128 sums at once, in
every signed format with a zero), about a microsecond per step instead of floatlab.round calls
on 0-d arrays.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

import numpy as np

from floatlab.formats import Format
from floatlab.sequential_scalar import run as _scalar_run
from floatlab.sequential_scalar import scalar_steps

if TYPE_CHECKING:  # the Accumulator calls these engines; they only read its fields
    from floatlab.accumulate import Accumulator


def _bits(values: np.ndarray, fmt: Format | None = None) -> int:
    """An upper bound on the significant bits of the values: 11 if the low 42 bits of every
    float64 fraction are zero (every float16 value), 24 if the low 29 are (every float32
    value), else 53. NaN anywhere gives 53, the bound that always holds.

    Two integer passes on the bit patterns (a view: any strides) instead of casts to float32
    and float16 (NumPy's float16 casts cost several nanoseconds per value). ``fmt``: the
    caller knows every value is one of ``fmt``'s (the lab's matmul inputs, see
    ``floatlab.accumulate._matmul``); a finite value of a format has at most ``fmt.p``
    significant bits, so ``fmt.p`` is a bound too (a tighter one than the passes can prove
    for bf16 or fp8), without the passes; NaN still gives 53 (one pass).
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return 11
    if fmt is not None:
        bits = builtins.min(fmt.p, 53)
    else:
        low = np.bitwise_and(values.view(np.uint64), np.uint64((1 << 42) - 1))
        if not low.any():
            bits = 11
        elif not np.bitwise_and(low, np.uint64((1 << 29) - 1)).any():
            bits = 24
        else:
            return 53
    return 53 if np.isnan(values).any() else bits


def _native_dtype(acc: Accumulator) -> np.dtype | None:
    """The NumPy / ml_dtypes type whose add.accumulate *is* this adder, if any (see module doc).

    Round to nearest even only; float16 / bfloat16 add in float32 and round once (correct for
    p <= 11 by Figueroa's theorem), float32 / float64 are native IEEE additions.
    """
    if acc.rounding != "nearest_even":
        return None
    name = acc.fmt.name
    if name in ("float16", "float32", "float64"):
        return np.dtype(name)
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return None


def _cast_keeps(typed: np.ndarray, values: np.ndarray) -> bool:
    """Whether every float64 value equals its cast ``typed`` (NaN counted equal to NaN).

    Equal bit patterns are equal values, so an integer comparison of the patterns (one pass,
    where ``array_equal(..., equal_nan=True)`` makes six) decides every array without NaNs
    and every NaN the cast keeps bit for bit; only when the patterns differ somewhere does the
    value comparison decide (+-0 keep their signs through the cast, so only a NaN whose
    payload the cast changed can differ in bits and not in value).
    """
    back = typed.astype(np.float64)
    if values.dtype == np.float64 and np.array_equal(back.view(np.uint64),
                                                     values.view(np.uint64)):
        return True
    return bool(np.array_equal(back, values, equal_nan=True))


def _native_accumulate(values: np.ndarray, dtype: np.dtype, keep: bool,
                       known: bool = False) -> np.ndarray | None:
    """Running sums (keep) or totals by ``np.add.accumulate`` on ``dtype``; None unless every
    value is a value of the dtype (``known``, or checked: a value equal to its cast is one)."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        typed = values.astype(dtype)
        if not known and not _cast_keeps(typed, values):
            return None
        if typed.shape[0]:  # the running sum starts at +0, as the per-step path's: a -0 first
            typed[0] += 0  # term gives +0 (x + 0 == x otherwise); typed is our own copy
        if keep:
            return np.add.accumulate(typed, axis=0).astype(np.float64)
        if typed.shape[0] == 0:
            return np.zeros(typed.shape[1:])
        # reduce() would be pairwise: take the last running sum of the sequential scan.
        return np.add.accumulate(typed, axis=0)[-1].astype(np.float64)


def _speculative_column(x: np.ndarray, acc: Accumulator) -> np.ndarray:
    """All running sums of one sequential sum, computed a binade at a time (see module doc)."""
    n = x.shape[0]
    out = np.empty(n)
    fmt, mode = acc.fmt, acc.rounding
    parity_matters = mode in ("nearest_even", "odd")
    total = np.zeros(1)
    i, size, still = 0, 256, _SCALAR_MIN
    scalar = scalar_steps(fmt, mode, acc.rng, acc.random_bits)  # (stretches in Python floats)
    if scalar is not None:
        x = np.ascontiguousarray(x, dtype=np.float64)
    while i < n:
        a = float(total[0])
        binade = _binade(a, fmt)
        if binade is None:  # zero, a subnormal, inf / NaN, or a 1-2 bit format: exact steps
            i, total, still = _exact_steps(x, i, total, acc, out, still, scalar, True)
            continue
        e, quantum = binade
        sign = 1.0 if a > 0 else -1.0
        lower, upper = 2.0**e, 2.0**(e + 1)
        block = x[i : i + size]
        # Reference points with even and odd last bits, 1.5 and 1.5 + quantum (<= 1.75) times
        # 2**E: c + x stays inside the binade for |x| < 2**E / 4.
        c_even = sign * 1.5 * lower
        r_even = acc._add(np.full(block.shape, c_even), block) - c_even
        if parity_matters:
            c_odd = c_even + sign * quantum
            r_odd = acc._add(np.full(block.shape, c_odd), block) - c_odd
            steps = _choose_by_parity(r_even, r_odd, quantum, int(abs(a) / quantum) & 1)
        else:
            steps = r_even
        with np.errstate(invalid="ignore", over="ignore"):
            sums = a + np.cumsum(steps)
            before = np.concatenate([[a], sums[:-1]])
            exact = (before + block) * sign  # within 2**-53 relative of the exact running sum
            ok = ((np.abs(block) < 0.25 * lower) & (exact >= lower * (1 + 2.0**-50))
                  & (exact <= upper * (1 - 2.0**-50)) & (np.abs(sums) <= fmt.max))
        bad = np.flatnonzero(~ok)
        good = bad[0] if bad.size else block.size
        out[i : i + good] = sums[:good]
        if good:
            total = sums[good - 1 : good].copy()
        i += good
        size = builtins.min(size * 2, 1 << 16) if good == block.size else builtins.max(
            64, 2 * good)
        if good < block.size:  # the step that leaves the binade, on its own (and any after
            #                    it that stay near)
            i, total, still = _exact_steps(x, i, total, acc, out, still, scalar,
                                           good < block.size // 2)
    return out


def _exact_steps(x: np.ndarray, i: int, total: np.ndarray, acc: Accumulator,
                 out: np.ndarray, still: int, steps, cut_early: bool
                 ) -> tuple[int, np.ndarray, int]:
    """Steps one rounding each from x[i]: (next index, new running sum, next length).

    Where the loop applies (``steps``): ``still`` terms through
    :mod:`floatlab.sequential_scalar`'s loop (about 0.3 us a term; a block that fails costs
    about as much as a thousand of them; stochastic rounding draws one number per term, as
    the per-step path does), twice as many next time after a block cut early (zero-mean data
    in small formats cross binades every few terms), half as many (at least _SCALAR_MIN)
    otherwise. Elsewhere (the formats the loop does not cover: p = 52, unsigned, no zero,
    p < 2): one step, ``acc._add`` itself.
    """
    if steps is None:
        total = acc._add(total, x[i : i + 1])
        out[i] = total[0]
        return i + 1, total, still
    stop = builtins.min(x.shape[0], i + still)
    total = _scalar_run(steps, x, i, stop, total, out)
    still = builtins.min(2 * still, _SCALAR_MAX) if cut_early else builtins.max(
        _SCALAR_MIN, still // 2)
    return stop, total, still


_SCALAR_MIN, _SCALAR_MAX = 1024, 1 << 16


def _binade(a: float, fmt: Format) -> tuple[int, float] | None:
    """(E, quantum) of the normal binade [2**E, 2**(E+1)) that holds |a|, if any."""
    if fmt.man_bits < 2 or a == 0 or not np.isfinite(a):
        return None
    _, exp = np.frexp(abs(a))
    e = int(exp) - 1
    if e < fmt.emin or e >= fmt.emax:  # the top binade is cut short by max: exact steps there
        return None
    return e, 2.0 ** (e - fmt.man_bits)


def _choose_by_parity(r_even, r_odd, quantum, parity0: int) -> np.ndarray:
    """Steps chosen by the running parity: a two-state recurrence solved by a prefix scan.

    Step j adds r_even[j] when the running sum's last bit is even, r_odd[j] when odd; the new
    parity is old XOR (step / quantum odd). Where both choices give the same new parity the
    state resets; elsewhere it flips or not independently of the state.
    """
    # A step that leaves the format's range (inf / NaN) casts to an arbitrary integer: it and
    # every step after it are refused by the caller's range check, and the recurrence only
    # looks back, so its parity is never used; the cast's invalid flag is not an error
    # (np.errstate(invalid="raise") or a RuntimeWarning for fl.sum([1.0] * 10 + [1e30])).
    with np.errstate(invalid="ignore"):
        d_even = (np.rint(r_even / quantum).astype(np.int64) & 1).astype(bool)
        d_odd = (np.rint(r_odd / quantum).astype(np.int64) & 1).astype(bool)
    next_if_even, next_if_odd = d_even, ~d_odd
    reset = next_if_even == next_if_odd
    n = r_even.size
    # parity after step j = value at the last reset r <= j (or parity0), XOR flips in (r, j].
    flips = np.cumsum(~reset & d_even)
    index = np.where(reset, np.arange(n), -1)
    last = np.maximum.accumulate(index) if n else index
    base = np.where(last >= 0, next_if_even[np.maximum(last, 0)], parity0).astype(np.int64)
    flips_before = np.where(last >= 0, flips[np.maximum(last, 0)], 0)
    after = (base + flips - flips_before) & 1
    before = np.concatenate([[parity0], after[:-1]]).astype(bool)
    return np.where(before, r_odd, r_even)


# --------------------------------------------------------------------------- truncating adders

def _truncating_products_apply(acc: Accumulator, a: np.ndarray, b: np.ndarray,
                               bits_a: int, bits_b: int) -> bool:
    """Whether :func:`_truncating_products` is this adder on the products ``a[:, k] * b[k, :]``.

    Round toward zero (DeepSeek-V3's ~14-bit e8m13 tensor-core accumulator, any other binary
    format with zero, subnormals and a normal range), fused products, and two conditions
    checked here once for the whole product, which keep every running sum where a mask of the
    float64 bits is the truncation (see :func:`_truncating_products`):

    * no overflow: ``|a| @ |b|`` (computed in float64, whose relative error is below 2**-40 for
      these sizes) stays below the format's max; every running sum is at most the sum of the
      |products| it has seen, since truncation never grows a magnitude;
    * a common quantum: every product is a multiple of the format's subnormal quantum
      ``2**(emin - man_bits)``. A value v with |v| in [2**(E-1), 2**E) (frexp's E) and at
      most ``b`` significant bits (``bits_a`` / ``bits_b``, from :func:`_bits`) is a multiple
      of ``2**(E - b)``; so ``min(E over a) - bits_a`` plus the same for b bounds the lowest
      set bit of every product from below (a float64 product is exact or rounded to a coarser
      grid, a multiple either way).
    """
    fmt = acc.fmt
    if (acc.rounding != "toward_zero" or acc.compensated or not acc.fused
            or not (fmt.signed and fmt.has_zero and fmt.subnormals and fmt.has_normals)
            or not 1 <= fmt.man_bits <= 50 or fmt.emin - fmt.man_bits < -1000
            or a.size == 0 or b.size == 0):
        return False
    with np.errstate(over="ignore", invalid="ignore"):
        peak = float((np.abs(a) @ np.abs(b)).max(initial=0.0))
    if not peak <= fmt.max * (1 - 2.0**-30):  # also refuses NaN / inf
        return False
    return _lowest_bit(a, bits_a) + _lowest_bit(b, bits_b) >= fmt.emin - fmt.man_bits


def _lowest_bit(values: np.ndarray, bits: int, fmt: Format | None = None) -> int:
    """A lower bound on the exponent of the lowest set bit of every nonzero value (finite),
    given that every value has at most ``bits`` significant bits (see :func:`_bits`).
    ``fmt``: every value is one of ``fmt``'s (see :func:`_bits`), so every finite nonzero
    one is a multiple of its smallest quantum ``2**(emin - man_bits)`` (the subnormals'; a
    format without subnormals has no smaller one), and that exponent is a bound, read from
    the format instead of a pass over the values."""
    if fmt is not None:
        return fmt.emin - fmt.man_bits
    exponents = np.frexp(values)[1]  # |v| < 2**E; zeros give 0, which only lowers the bound
    return int(exponents.min()) - bits


def _truncating_products(a: np.ndarray, b: np.ndarray, fmt: Format, chunk: int | None
                         ) -> np.ndarray:
    """Sums of ``a[:, k] * b[k, :]`` added one k at a time, each addition rounded toward zero
    to ``fmt``: (blocks, M * N) partial sums of consecutive blocks of ``chunk`` inner indices
    (one block of all of them when chunk is None). Only where
    :func:`_truncating_products_apply` says so.

    Each addition of a product x to the running sum t (a value of fmt, in float64) is eleven
    in-place passes on float64 buffers, instead of the general TwoSum, round to odd and
    floatlab.round (whose temporaries cost more than its arithmetic on these sizes):

    1. ``s = fl(t + x)`` and its exact error ``e`` (Knuth's TwoSum): ``t + x == s + e``.
    2. Truncating the exact sum X to p = man_bits + 1 bits is masking the low 52 - man_bits
       bits of s, after one step of s toward zero (its bit pattern minus one: the patterns of
       float64 magnitudes are monotone) where X lies strictly closer to zero than s
       (``e * s < 0``). Proof, for |X| >= 2**emin (normal results, fmt's grid there being the
       float64 values with man_bits fraction bits): the grid points around X are float64
       values g1 <= X < g2 (magnitudes); if s is not on the grid, |s - X| <= ulp(s) / 2 puts
       both s and the float64 value next to it toward zero strictly between g1 and g2, so
       both truncate to g1; if s is on the grid it is g1 when |X| >= |s|, else X lies in
       (prev(s), s) and the value one ulp below s truncates to the grid point before s.
    3. Below 2**emin: t and x are multiples of the subnormal quantum q (checked by the caller
       for the exact products; a float64 rounding of a multiple of q is one too; fmt's values
       all are), so X is one, below 2**emin: a value of fmt, exact in float64 (s = X, e = 0,
       nothing to mask).
    4. ``e * s`` neither underflows nor overflows: both are multiples of q (e is the
       difference of two such values) below fmt.max.
    5. Zero: s is +0 for every exact cancellation (float64 addition), t starts at +0 and no
       -0 product survives an addition to +0, as floatlab.round of the odd sum gives.
    Blocks are summed side by side (one pass per inner index for all of them); a ragged last
    block is padded with zero products, which leave a sum unchanged (s = t, e = 0).
    """
    n, k = a.shape
    m = b.shape[1]
    if m < n:  # the transposed product sums the same products in the same order; a long
        #        last axis keeps the outer products' broadcasting loops long
        partial = _truncating_products(b.T, a.T, fmt, chunk)
        return partial.reshape(-1, m, n).transpose(0, 2, 1).reshape(-1, n * m)
    size = k if chunk is None else builtins.min(chunk, k)  # one short block: no padding
    blocks = -(-k // size)
    a_cols = np.zeros((blocks * size, n))
    a_cols[:k] = a.T
    b_rows = np.zeros((blocks * size, m))
    b_rows[:k] = b
    a_cols = a_cols.reshape(blocks, size, n).transpose(1, 0, 2)  # [i] -> (blocks, n)
    b_rows = b_rows.reshape(blocks, size, m).transpose(1, 0, 2)  # [i] -> (blocks, m)
    total = np.empty((blocks, n, m))
    # Rows of a in tiles whose five work buffers stay in a core's L2 cache.
    rows = builtins.max(1, _TILE // (blocks * m))
    keep = ~np.uint64((1 << (52 - fmt.man_bits)) - 1)
    for start in range(0, n, rows):
        stop = builtins.min(n, start + rows)
        total[:, start:stop] = _truncating_tile(a_cols[:, :, start:stop], b_rows, keep)
    return total.reshape(blocks, n * m)


_TILE = 8192  # elements per work buffer (five float64 buffers: 320 KiB)


def _truncating_tile(a_cols: np.ndarray, b_rows: np.ndarray, keep: np.uint64) -> np.ndarray:
    """The loop of :func:`_truncating_products` on one tile of rows: (blocks, rows, m)."""
    shape = (a_cols.shape[1], a_cols.shape[2], b_rows.shape[2])
    total = np.zeros(shape)
    x, s, z, e = (np.empty(shape) for _ in range(4))
    closer = np.empty(shape, dtype=bool)
    s_bits, total_bits = s.view(np.uint64), total.view(np.uint64)
    for a_col, b_row in zip(a_cols, b_rows, strict=True):
        np.multiply(a_col[:, :, None], b_row[:, None, :], out=x)  # as _ProductTerms does
        np.add(total, x, out=s)
        np.subtract(s, total, out=z)      # the part of x that made it into s
        np.subtract(s, z, out=e)          # the part of t that made it into s
        np.subtract(total, e, out=e)      # t's lost part
        np.subtract(x, z, out=z)          # x's lost part
        np.add(e, z, out=e)               # e: s + e == t + x exactly
        np.multiply(e, s, out=e)
        np.less(e, 0.0, out=closer)       # X strictly closer to zero than s
        np.subtract(s_bits, closer, out=total_bits, casting="unsafe")
        np.bitwise_and(total_bits, keep, out=total_bits)
    return total


# The scalar Kahan engine lives in floatlab.kahan_scalar (re-exported for floatlab.accumulate).
from floatlab.kahan_scalar import (  # noqa: E402, F401
    _kahan_engine,
    _scalar_kahan,
    _scalar_kahan_applies,
)
