"""The lab's fp16 matrix products: ``a @ b`` summed in an fp16 round-to-nearest-even accumulator,
one addition (one rounding) per inner index, vectorised over all outputs.

:func:`_float16_products` is the entry (``Accumulator("fp16")`` / ``accumulate="fp16"`` on
products of at most 40 bits, see :func:`_float16_cast_adds`). Where a cheap bound rules out
overflow (:mod:`floatlab.fp16_bound`) it runs :func:`_float16_magic`: float64 passes that
round each running sum with a magic constant built from its exponent bits, scaled by 2**-1009
where float64's subnormal range then provides fp16's (:func:`_float16_scale_applies`); the
products come from one broadcast multiply per inner index where output rows are long
(``fp16_plan._outer_blocks``), from BLAS a few inner indices at a time where they are short
(:func:`_product_blocks`), or, where a cost model says it pays (:func:`_float16_plan`), each
row's zero products (ReLU's) are left out and the others gathered (:func:`_compact_blocks`, in
the order ``fp16_plan._nonzeros_in_order`` finds).
Elsewhere NumPy's float64 -> float16 cast rounds each addition (:func:`_float16_cast_products`).
Every fast path has a switch and is tested bit for bit against the emulated per-step path
(``tests/test_sequential_fp16.py``). The lab passes its operands' format (``known``, see
``floatlab.accumulate._matmul``): the bounds that choose among these exact engines then come
from the format, not from passes over the values (``tests/test_fp16_known_formats.py``).
"""

from __future__ import annotations

import builtins
from contextlib import nullcontext
from typing import TYPE_CHECKING

import numpy as np

from floatlab.fp16_bound import _float16_magic_applies
from floatlab.fp16_plan import (
    _CALL_US,
    _OUTER_BUFSIZE,
    _PASS_NS,
    _compact_blocks,
    _count_nonzero,
    _float16_plan,
    _outer_blocks,
    _outer_takes,
    _product_blocks,
    _scratch,
    _ufunc_buffer,
)
from floatlab.sequential import _bits, _lowest_bit

if TYPE_CHECKING:  # the Accumulator calls these engines; they only read its fields
    from floatlab.accumulate import Accumulator, _Terms
    from floatlab.formats import Format


def _float16_products(a: np.ndarray, b: np.ndarray, bits: tuple[int, int] | None = None,
                      known: tuple[Format | None, Format | None] = (None, None)) -> np.ndarray:
    """``a @ b`` summed in an fp16 round-to-nearest accumulator, one inner index at a time.

    Where :func:`_float16_magic_applies` says so, :func:`_float16_magic` (float64 passes, no
    float16 cast); else three in-place passes over the (M, N) outputs per inner index (outer
    product, float64 sum, cast back to float16), in buffers that stay in cache; see
    :func:`_float16_cast_adds`. ``bits``: a's and b's (:func:`_bits`), when the caller has
    them; ``known``: the formats a's and b's values are known to be in, or None (see
    ``floatlab.accumulate._matmul``).
    """
    if _float16_magic_takes(a, b):
        return _float16_magic(a, b, bits=bits, known=known)
    return _float16_cast_products(a, b)


def _float16_magic_takes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether :func:`_float16_products` runs :func:`_float16_magic` on these operands."""
    # six calls per inner index against one: worth it where the passes, not the calls, cost
    # (about a thousand outputs and more, measured on the lab's shapes)
    return _FAST_MAGIC and a.shape[0] * b.shape[1] >= 1024 and _float16_magic_applies(a, b)


def _float16_cast_products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`_float16_products` by NumPy's float64 -> float16 cast (any values).

    The products of a block of inner indices are made in one call; each addition is then one
    ``np.add(total, product, out=total, casting="unsafe")``: NumPy's type resolution picks the
    float64 loop for float16 + float64, and the float64 sum is cast to the float16 output once
    (round to nearest even), exactly as ``total[...] = total + product`` would.
    """
    n, k = a.shape
    m = b.shape[1]
    if m < n:  # same sums, longer inner loops (see _float16_magic)
        return _float16_cast_products(b.T, a.T).T
    a_columns = np.ascontiguousarray(a.T)
    total = np.zeros((n, m), dtype=np.float16)
    block = builtins.max(1, builtins.min(k, _PRODUCT_BLOCK // builtins.max(1, n * m)))
    products = np.empty((block, n, m))
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        for start in range(0, k, block):
            stop = builtins.min(k, start + block)
            work = products[: stop - start]
            # exact products of values of <= 40 bits in all (see _float16_cast_adds)
            np.multiply(a_columns[start:stop, :, None], b[start:stop, None, :], out=work)
            for product in work:
                np.add(total, product, out=total, casting="unsafe")
    return total.astype(np.float64)


_PRODUCT_BLOCK = 1 << 15  # products made at once (256 KiB of float64)
_FAST_MAGIC = True  # switch for the tests, which check the magic path equal to the cast path
_TILE_OUTPUTS = 32768  # running sums per tile: 256 KiB per buffer, in L2 (a few % over 16K)
_FP16_EXPONENT = np.uint64(0x7FF0000000000000)
_FP16_MAGIC = np.uint64((42 << 52) + (1 << 51))  # exponent field of 2**e -> 1.5 * 2**(e + 42)
_NEGATE_SHIFT = np.uint64((1 << 63) + (42 << 52))  # bits of w -> bits of -w * 2**42 (scaled loop)
_FP16_SUBNORMAL_MAGIC = 1.5 * 2.0**28  # M of the subnormal binade: 1.5 * 2**52 * 2**-24


def _float16_magic(a: np.ndarray, b: np.ndarray, tile: int = _TILE_OUTPUTS,
                   bits: tuple[int, int] | None = None,
                   known: tuple[Format | None, Format | None] = (None, None)) -> np.ndarray:
    """``a @ b`` in an fp16 round-to-nearest-even accumulator, on float64 values only.

    Each addition: v = fl(t + x) (float64; rounding v to fp16 is rounding the exact t + x, see
    :func:`_float16_cast_adds`), then fp16's rounding of v as ``(v + M) - M``: with E the
    exponent of v (its float64 exponent field, read by a mask; at least -14, fp16's smallest
    normal binade, whose quantum 2**-24 is also the subnormals'), fp16's quantum is
    U = 2**(E - 10) and M = 1.5 * 2**52 * U (built from the field by one integer addition and
    clamped by a maximum: M is a positive normal float64, so the float maximum of the patterns
    read as floats is their integer maximum; the float one is the faster loop).
    |v| < 2**(E+1) <= 2**51 U, so v + M lies in [2**52 U, 2**53 U), where float64's ulp is
    U: float64's rounding to nearest even rounds v to a multiple of U, ties to an even
    multiple (M / U is even), and subtracting M is exact (Sterbenz). That is fp16's rounding
    of v: no overflow (the caller's bound), a carry to 2**(E+1) is an fp16 value too.
    Where :func:`_float16_scale_applies` says so, the sums run scaled by 2**-1009, where one
    integer addition on the bits of v makes a magic constant that needs neither the mask nor
    the clamp (four passes per addition instead of six; see :func:`_float16_scale_applies`).
    Zeros: (v + M) - M gives +0 where the float16 cast gives -0 for a tiny negative v, so the
    running sum t is never -0 and t + x never reads the sign of a zero product x (t + 0 = t
    for t != 0, +0 + (+-0) = +0). A zero's sign changes no later value (only a sum of two
    zeros reads it), so it only shows in a zero total: those outputs are redone on the cast
    path (:func:`_float16_cast_dots`). Outputs are computed in tiles of rows that stay in
    cache, transposed where that is cheaper (each output's sum has the same terms in the same
    order); the products come from :func:`_outer_blocks` (long rows) or
    :func:`_product_blocks`, or from :func:`_compact_blocks` where the zero products of a's
    rows are worth leaving out (:func:`_float16_plan`).
    """
    counts: dict[bool, np.ndarray] = {}  # the plan's counts of nonzeros, reused
    compact, transpose = _float16_plan(a, b, tile, counts)
    bits = bits or (_bits(a, known[0]), _bits(b, known[1]))  # (the caller's, if it has them)
    if compact and transpose not in counts:
        counts[transpose] = _count_nonzero(b, 0) if transpose else _count_nonzero(a, 1)
    rows = counts[transpose] if compact else None
    # (the scaled loop computes in float64's subnormals by design, and a product or sum may
    # underflow there: floatlab's rounding, not an error, so np.errstate(under="raise") or
    # np.seterr(all="raise") in the caller must not turn it into one)
    with np.errstate(under="ignore"):
        if transpose:
            return _float16_magic_rows(b.T, a.T, tile, rows, bits[::-1], known[::-1]).T
        return _float16_magic_rows(a, b, tile, rows, bits, known)


def _float16_magic_rows(a: np.ndarray, b: np.ndarray, tile: int, counts: np.ndarray | None,
                        bits: tuple[int, int], known: tuple[Format | None, Format | None]
                        ) -> np.ndarray:
    """:func:`_float16_magic` in the orientation it chose. With ``counts``, each row of a's
    count of nonzeros: leave out the zero products of each row (:func:`_compact_blocks`);
    ``bits``: a's and b's (:func:`_bits`); ``known``: their formats, if known."""
    n, k = a.shape
    m = b.shape[1]
    compact = counts is not None
    outer = not compact and _outer_takes(builtins.min(n, builtins.max(1, tile // m)), m)
    scaled = _float16_scaled(a, b, tile, bits, known)
    a_run, b_run = a, b
    if scaled:  # exact (see there; the compact loop scales the values it gathers from a)
        b_run = np.multiply(b, _SCALE_B, out=_scratch("b_run", b.shape))
        if not compact and not outer:  # (_outer_blocks scales the columns it copies)
            a_run = np.multiply(a, _SCALE_A, out=_scratch("a_run", a.shape))
    if compact:  # rows by falling count of nonzeros: each step's active rows are a prefix
        # (a stable sort of 16-bit keys is a radix sort: 2-3x faster than of -counts)
        keys = k - counts
        perm = np.argsort(keys.astype(np.uint16) if k < 1 << 16 else keys, kind="stable")
        starts = (np.cumsum(counts) - counts)[perm]  # each row's first entry among a's nonzeros
        counts = counts[perm]
        a_run = np.ascontiguousarray(a)  # (once, not per tile)
        nonzero = a_run != 0  # (and a's nonzeros listed once, for every tile)
        flat = np.flatnonzero(nonzero)  # (row-major: ``starts`` index into it)
    # the running sums, a tile of rows at a time (fresh memory: measured faster in the step
    # than a work buffer, which other products have pushed out of the caches)
    out = np.zeros((n, m))
    rows = builtins.max(1, tile // m)
    shape = (builtins.min(rows, n), m)
    magic = _scratch("magic", shape)
    magic_bits = magic.view(np.uint64)
    out_bits = out.view(np.uint64)  # (views made once: a view costs a microsecond, a slice less,
    # and the compact loop's active rows change at nearly every step)
    # constants as arrays: NumPy converts a scalar operand on every call, and its maximum
    # loop is faster with two arrays than with an array and a scalar
    exponent, offset = np.array(_FP16_EXPONENT), np.array(_FP16_MAGIC)
    negate_shift = np.array(_NEGATE_SHIFT)
    floor = np.full((1, 1) if scaled else shape, _FP16_SUBNORMAL_MAGIC)  # (scaled: unused)
    add, subtract, bitwise_and, maximum = np.add, np.subtract, np.bitwise_and, np.maximum
    # (a small ufunc buffer for _outer_blocks' multiplies; the passes are unaffected)
    with _ufunc_buffer(_OUTER_BUFSIZE) if outer else nullcontext():
        for start in range(0, n, rows):
            stop = builtins.min(n, start + rows)
            size = stop - start
            if compact:
                blocks = _compact_blocks(a_run, b_run, counts[start:stop], perm[start:stop],
                                         _SCALE_A if scaled else None, starts[start:stop],
                                         nonzero, flat)
            elif outer:  # each step's products made straight into the magic buffer
                blocks = _outer_blocks(a[start:stop], b_run, magic[:size],
                                       _SCALE_A if scaled else None)
            else:
                blocks = ((size, block) for block in _product_blocks(a_run[start:stop], b_run))
            active = -1
            for r, block in blocks:  # the first r rows of the tile take part in these steps
                if r != active:
                    active = r
                    t, mg, mb = out[start : start + r], magic[:r], magic_bits[:r]
                    tb, low = out_bits[start : start + r], floor[:r]
                if scaled:
                    for product in block:  # (local names, positional out: a few %, narrow outputs)
                        add(t, product, t)  # w = v * 2**-1009
                        add(tb, negate_shift, mb)  # M = -w * 2**42 (see _float16_scale_applies)
                        add(t, mg, t)
                        subtract(t, mg, t)  # fp16's rounding of v, times 2**-1009
                    continue
                for product in block:
                    add(t, product, t)  # v
                    bitwise_and(tb, exponent, mb)
                    add(mb, offset, mb)
                    maximum(mg, low, out=mg)  # (positional out is deprecated here)
                    add(t, mg, t)
                    subtract(t, mg, t)  # fp16's rounding of v
    if compact:  # back to a's order: a gather by the inverse permutation (one pass)
        inverse = np.empty_like(perm)
        inverse[perm] = np.arange(n)
        out = np.take(out, inverse, axis=0)
    if scaled:
        out *= _UNSCALE  # exact: multiples of 2**-1033 below 2**-993
    zero = out == 0
    if zero.any():  # the sign of a zero total: from the cast path, for those outputs only
        rows, cols = np.nonzero(zero)  # (any() first: nonzero costs 15x more on 32K outputs)
        out[rows, cols] = _float16_cast_dots(a[rows], b[:, cols])
    return out


_FAST_SCALE = True  # switch for the tests (the scaled loop without the clamp, else the clamp)
_SCALE_A, _SCALE_B, _UNSCALE = 2.0**-505, 2.0**-504, 2.0**1009
_SCALE_LOWEST_BIT = -65  # the products' lowest set bit must be at least 2**-65 (see below)


def _float16_scaled(a: np.ndarray, b: np.ndarray, tile: int, bits: tuple[int, int] | None = None,
                    known: tuple[Format | None, Format | None] = (None, None)) -> bool:
    """Whether :func:`_float16_magic_rows` runs the scaled loop on ``a @ b`` (in the
    orientation it runs): it pays (:func:`_float16_scale_pays`) and is exact
    (:func:`_float16_scale_applies`; ``bits`` and ``known`` as there)."""
    return (_float16_scale_pays(a, b, tile, None not in known)
            and _float16_scale_applies(a, b, bits, known))


def _float16_scale_pays(a: np.ndarray, b: np.ndarray, tile: int, known: bool = False) -> bool:
    """Whether the scaled loop's saving (two passes and two calls per addition) outweighs what
    it adds (its check, scaling the operands and the result; measured, microseconds).
    ``known``: both operands' formats are known, so the check makes no passes over them (5 us
    less: dgrad 3 then scales, 343 -> 321 us)."""
    n, k = a.shape
    m = b.shape[1]
    tiles = -(-n // builtins.max(1, tile // m))
    saving = 2 * k * (tiles * _CALL_US + n * m * _PASS_NS / 5 * 1e-3)
    return saving > (3.0 if known else 8.0) + (a.size + b.size) * 1.5e-3 + n * m * 0.5e-3


def _float16_scale_applies(a: np.ndarray, b: np.ndarray, bits: tuple[int, int] | None = None,
                           known: tuple[Format | None, Format | None] = (None, None)) -> bool:
    """Whether :func:`_float16_magic` may run its sums scaled by 2**-1009, where float64's own
    subnormal range makes the clamp of M to fp16's subnormal quantum unnecessary.

    Scaled by 2**-1009, fp16's binade [2**-14, 2**-13) is [2**-1023, 2**-1022), float64's top
    subnormal binade, and every |v| < 2**-13 is a float64 subnormal (exponent field 0); fp16's
    quantum 2**-24 is 2**-1033 scaled, and its quantum in binade E >= -13 is U = 2**(E - 1019).
    The scaled loop rounds the scaled sum w = v * 2**-1009 as (w + M) - M with
    M = -w * 2**42 for a normal w (one integer addition on w's bits: 42 to the exponent field,
    2**63 flips the sign bit; no carry, the field stays below 2047), and for a subnormal w
    (field 0, fraction m, w = m * 2**-1074) the same addition gives
    M = -sign(w) * (2**-981 + m * 2**-1033). Why (w + M) - M is fp16's rounding of w, ties
    to even (take w > 0; w < 0 is its mirror, w = +-0 gives +0 -- the zero totals' rule above):

    * w normal, w = s * 2**(e - 52) with s a 53-bit integer: M = -s * U (U = 2**(e - 10), the
      fp16 quantum), a multiple of U, and |w + M| = w * (2**42 - 1). Where that lies in
      [2**(e + 42), 2**(e + 43)), float64's ulp is U, so fl(w + M) = M + RN_U(w) (M is on
      the grid; at a tie w = (n + 1/2) U, s = (2n + 1) * 2**41 is even, so the even multiple of
      U for w + M is the even one for w), and subtracting M is exact (Sterbenz: the same sign,
      within a factor 2). Below 2**(e + 42) -- only for w < 2**e * (1 + 1 / (2**42 - 1)), i.e.
      w within 2**(e - 42) of 2**e -- the ulp is U / 2 and the result is RN_{U/2}(w) = 2**e =
      RN_U(w). It never reaches 2**(e + 43): w * (2**42 - 1) < 2**(e + 1) * 2**42. (With +w
      instead of -w, w + M = w * (2**42 + 1) crosses into the binade above for w within
      2**(e - 41) of 2**(e + 1), where the rounding to 2U is wrong when s is odd: 32 - 2**-48
      would round to 32 - 2**-6.)
    * w subnormal: |w + M| = 2**-981 + |w| * (2**41 - 1) stays in [2**-981, 2**-980), whose
      ulp 2**-1033 is fp16's quantum there; M is a multiple of it and at a tie m is even, so
      the same argument applies: fp16's subnormals and its binade -14 need no clamp.

    The rest of the proof holds scaled if every scaled value is the unscaled one times
    2**-1009, exactly:

    * the operands: a * 2**-505 and b * 2**-504 are exact when every nonzero |a|, |b| is at
      least 2**-500 (normal results), which the lowest-bit bound below also checks;
    * the products: the unscaled ones are exact (<= 40 bits, the caller's condition); scaled,
      those of magnitude >= 2**-13 stay normal (exact), and the smaller ones are float64
      subnormals, exact when they are multiples of 2**-1074, i.e. multiples of 2**-65
      unscaled: checked by a lower bound on every product's lowest set bit (:func:`_lowest_bit`
      of each operand, from :func:`_bits`), at least -65. BLAS's products
      (:func:`_product_blocks`) are single exact products plus zeros, subnormal or not;
    * the sums: a float64 sum whose result is normal rounds the same scaled or not (the same
      significands); one whose scaled result is subnormal is exact (both addends are multiples
      of 2**-1074), and so is the unscaled one (a multiple of 2**-65 below 2**-13: <= 52 bits);
    * the roundings: (w + M) - M as above, with |M| >= 2**-981 normal; the result times
      2**1009 is exact (fp16 values are multiples of 2**-24).

    Float64 subnormals must be computed, not flushed: a process can switch on flush-to-zero /
    denormals-are-zero (some libraries built with -ffast-math do), so that is checked on every
    call, on the ufuncs and on a matrix product (:func:`_subnormals_computed`). Operand and
    product subnormals are rare on real data (fp16 products below 2**-13); on this CPU a
    subnormal result costs a microcode assist, which is why the operands are not scaled more.
    """
    if not _FAST_SCALE or a.size == 0 or b.size == 0:
        return False
    bits_a, bits_b = (_bits(a, known[0]), _bits(b, known[1])) if bits is None else bits
    low_a, low_b = _lowest_bit(a, bits_a, known[0]), _lowest_bit(b, bits_b, known[1])
    if low_a + low_b < _SCALE_LOWEST_BIT and known != (None, None):  # (bf16's formats bound
        low_a, low_b = _lowest_bit(a, bits_a), _lowest_bit(b, bits_b)  # is looser: the values')
    return (low_a >= -500 and low_b >= -500 and low_a + low_b >= _SCALE_LOWEST_BIT
            and _subnormals_computed())


def _subnormals_computed() -> bool:
    """Whether float64 subnormals are computed exactly here (no flush-to-zero, no
    denormals-are-zero): a product, a sum and a BLAS product with subnormal inputs and results."""
    x = np.array([2.0**-1073, 2.0**-1060])
    ok = (np.array_equal(x * np.array([0.5, 2.0**-4]), [2.0**-1074, 2.0**-1064])
          and np.array_equal(x + x, [2.0**-1072, 2.0**-1059]))
    product = np.array([[2.0**-500, 0.0]]) @ np.array([[2.0**-560], [1.0]])
    return ok and float(product[0, 0]) == 2.0**-1060


def _float16_cast_dots(a_rows: np.ndarray, b_cols: np.ndarray) -> np.ndarray:
    """The sums ``sum_k a_rows[i, k] * b_cols[k, i]`` (one per i), each in an fp16
    round-to-nearest accumulator by NumPy's float64 -> float16 cast: the additions of
    :func:`_float16_cast_products` for a few chosen outputs (the magic engine's zero totals,
    whose sign only a per-step replay knows: ReLU's dead units make whole columns of them).
    """
    products = a_rows.T * b_cols  # exact, as in _float16_cast_products
    out = np.zeros(products.shape[1])
    # A sum whose products are all zeros (a dead unit's) is +0: it starts at +0, and
    # +0 + (+-0) = +0. Only the others are replayed, one addition per inner index.
    live = np.flatnonzero(products.any(axis=0))
    if live.size:
        products = products[:, live]
        total = np.zeros(live.size, dtype=np.float16)
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            for product in products:
                np.add(total, product, out=total, casting="unsafe")
        out[live] = total
    return out


def _float16_cast_adds(acc: Accumulator, terms: _Terms, bits: int | None = None) -> bool:
    """Whether ``float16(float64(acc + term))`` is this adder: a fast path for fp16 RN.

    NumPy's float64 -> float16 cast rounds once to nearest even (subnormals and overflow to inf
    included). The float64 sum x of an fp16 running sum and a term of t <= 40 significant bits
    is rounded once more, but never across or onto a midpoint m of the fp16 grid: x - m, when
    nonzero, is a multiple of the smaller of the two addends' last bits. If the term is the
    smaller addend and inexact in float64, it lies below 2**(e - 53 + t) <= 2**(e - 13), far
    from any midpoint distance (>= 2**(e - 12)) an fp16 sum has. If the sum is the smaller one,
    its last bit is >= 2**-24 and the term's >= 2**(e - t); both exceed half a float64 ulp
    2**(e - 54) for every e below fp16's overflow (e <= 16). So the double rounding is
    innocuous; tests check this path equal to the emulated one. (``bits``: the terms', when
    the caller has them.)
    """
    return (acc.rounding == "nearest_even" and acc.fmt.name == "float16"
            and not acc.compensated and (terms.bits if bits is None else bits) <= 40)
