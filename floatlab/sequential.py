"""Engines for sequential sums: one rounding per addition, as fast as NumPy allows.

A sequential sum is one vectorised pass per term index across all independent sums (matmul
outputs, rows). A single long sum has one output, so it is
run speculatively in blocks: while the running sum stays in one binade [2**E, 2**(E+1)) of the
accumulator, its quantum U is fixed, so each addition adds ``round(c + x) - c`` for a reference
point c in that binade, independent of the running sum -- except for the ties of
round-to-nearest-even and round-to-odd, which depend on the parity of the running sum's last
bit; that parity is a two-state recurrence solved by a prefix scan. The block is checked
afterwards (every exact partial sum in the binade, nothing overflowing) and cut at the first
step that leaves it; that step is done on its own. The fast paths for float16 / bfloat16 /
float32 / float64 round-to-nearest sequential sums of values already in the format use NumPy's
and ml_dtypes' ``add.accumulate``: they add in float32 (or the type itself) and round once,
which is correctly rounded because float32's 24 bits are at least 2p + 2 for p <= 11
(Figueroa's double-rounding theorem), and tests check them equal to the emulated path.
An fp16 round-to-nearest matrix product (the lab's ``accumulate="fp16"``) adds one rank-1
term per inner index to all outputs and rounds with a magic constant built from each sum's
exponent bits (:func:`_float16_magic`: six in-place float64 passes, no float16 cast, the
products made by BLAS a few inner indices at a time) where a cheap bound rules out overflow,
else with NumPy's float64 -> float16 cast.
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

if TYPE_CHECKING:  # the Accumulator calls these engines; they only read its fields
    from floatlab.accumulate import Accumulator, _Terms


def _bits(values: np.ndarray) -> int:
    """An upper bound on the significant bits of the values: 11 if the low 42 bits of every
    float64 fraction are zero (every float16 value), 24 if the low 29 are (every float32
    value), else 53. NaN anywhere gives 53, the bound that always holds.

    Two integer passes on the bit patterns (a view: any strides) instead of casts to float32
    and float16 (NumPy's float16 casts cost several nanoseconds per value).
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return 11
    low = np.bitwise_and(values.view(np.uint64), np.uint64((1 << 42) - 1))
    if not low.any():
        bits = 11
    elif not np.bitwise_and(low, np.uint64((1 << 29) - 1)).any():
        bits = 24
    else:
        return 53
    return 53 if np.isnan(values).any() else bits


def _float16_products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` summed in an fp16 round-to-nearest accumulator, one inner index at a time.

    Where :func:`_float16_magic_applies` says so, :func:`_float16_magic` (float64 passes, no
    float16 cast); else three in-place passes over the (M, N) outputs per inner index (outer
    product, float64 sum, cast back to float16), in buffers that stay in cache; see
    :func:`_float16_cast_adds`.
    """
    if _float16_magic_takes(a, b):
        return _float16_magic(a, b)
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
    with np.errstate(over="ignore", invalid="ignore"):
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
_FP16_EXPONENT = np.uint64(0x7FF0000000000000)
_FP16_MAGIC = np.uint64((42 << 52) + (1 << 51))  # exponent field of 2**e -> 1.5 * 2**(e + 42)
_FP16_SUBNORMAL_MAGIC = 1.5 * 2.0**28  # M of the subnormal binade: 1.5 * 2**52 * 2**-24


def _float16_magic_applies(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether no running sum of ``a @ b`` in fp16 can reach the overflow threshold (then
    :func:`_float16_magic` needs no overflow handling). Every entry of |a| @ |b| is at most
    (largest row sum of |a|) * max |b| and max |a| * (largest column sum of |b|) (float64 sums,
    relative error far below 2**-30 for these sizes); times the growth (1 + 2**-11)**K that K
    roundings to nearest can add, that bounds every running sum. Two passes per operand, no
    BLAS; refuses inf / NaN (the bound is then not finite)."""
    if a.size == 0 or b.size == 0:
        return False
    with np.errstate(over="ignore", invalid="ignore"):
        abs_a, abs_b = np.abs(a), np.abs(b)
        peak = builtins.min(float(abs_a.sum(axis=1).max()) * float(abs_b.max()),
                            float(abs_a.max()) * float(abs_b.sum(axis=0).max()))
    growth = (1 + 2.0**-11) ** a.shape[1] * (1 + 2.0**-30)
    return peak * growth < 65504.0  # (NaN compares false)


def _float16_magic(a: np.ndarray, b: np.ndarray, tile: int = 16384) -> np.ndarray:
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
    Where :func:`_float16_scale_applies` says so, the sums run scaled by 2**-1009 and the clamp
    is not needed (five passes per addition instead of six; see :func:`_float16_scale_applies`).
    Zeros: (v + M) - M gives +0 where the float16 cast gives -0 for a tiny negative v, so the
    running sum t is never -0 and t + x never reads the sign of a zero product x (t + 0 = t
    for t != 0, +0 + (+-0) = +0). A zero's sign changes no later value (only a sum of two
    zeros reads it), so it only shows in a zero total: those outputs are redone on the cast
    path (:func:`_float16_cast_dots`). Outputs are computed transposed when that makes the
    last axis longer (each output's sum has the same terms in the same order), in tiles that
    stay in cache; the products come from :func:`_product_blocks`.
    """
    n, k = a.shape
    m = b.shape[1]
    if m < n:
        return _float16_magic(b.T, a.T, tile).T
    scaled = _float16_scale_applies(a, b)
    a_run, b_run = (a * _SCALE_A, b * _SCALE_B) if scaled else (a, b)  # exact (see there)
    out = np.zeros((n, m))  # the running sums, a tile of rows at a time
    rows = builtins.max(1, tile // m)
    shape = (builtins.min(rows, n), m)
    magic = np.empty(shape)
    magic_bits = magic.view(np.uint64)
    # constants as arrays: NumPy converts a scalar operand on every call, and its maximum
    # loop is faster with two arrays than with an array and a scalar
    exponent, offset = np.array(_FP16_EXPONENT), np.array(_FP16_MAGIC)
    floor = np.full(shape, _FP16_SUBNORMAL_MAGIC)
    add, subtract, bitwise_and, maximum = np.add, np.subtract, np.bitwise_and, np.maximum
    for start in range(0, n, rows):
        stop = builtins.min(n, start + rows)
        size = stop - start
        t, mg, mb, low = out[start:stop], magic[:size], magic_bits[:size], floor[:size]
        tb = t.view(np.uint64)
        blocks = _product_blocks(a_run[start:stop], b_run)
        if scaled:
            for block in blocks:
                for product in block:  # (local names, positional out: a few % on narrow outputs)
                    add(t, product, t)  # v * 2**-1009
                    bitwise_and(tb, exponent, mb)
                    add(mb, offset, mb)  # M * 2**-1009 (the subnormal field 0 gives the floor)
                    add(t, mg, t)
                    subtract(t, mg, t)  # fp16's rounding of v, times 2**-1009
            continue
        for block in blocks:
            for product in block:
                add(t, product, t)  # v
                bitwise_and(tb, exponent, mb)
                add(mb, offset, mb)
                maximum(mg, low, out=mg)  # (positional out is deprecated here)
                add(t, mg, t)
                subtract(t, mg, t)  # fp16's rounding of v
    if scaled:
        out *= _UNSCALE  # exact: multiples of 2**-1033 below 2**-993
    rows, cols = np.nonzero(out == 0)
    if rows.size:  # the sign of a zero total: from the cast path, for those outputs only
        out[rows, cols] = _float16_cast_dots(a[rows], b[:, cols])
    return out


_FAST_SCALE = True  # switch for the tests (the scaled loop without the clamp, else the clamp)
_SCALE_A, _SCALE_B, _UNSCALE = 2.0**-505, 2.0**-504, 2.0**1009
_SCALE_LOWEST_BIT = -65  # the products' lowest set bit must be at least 2**-65 (see below)


def _float16_scale_applies(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether :func:`_float16_magic` may run its sums scaled by 2**-1009, where float64's own
    subnormal range makes the clamp of M to fp16's subnormal quantum unnecessary.

    Scaled by 2**-1009, fp16's binade [2**-14, 2**-13) is [2**-1023, 2**-1022), float64's top
    subnormal binade, and every |v| < 2**-13 is a float64 subnormal (exponent field 0). The
    mask and the integer addition of :func:`_float16_magic` turn field f into
    M = 1.5 * 2**(f + 42 - 1023): for f >= 1 (|v| >= 2**-13) that is 1.5 * 2**52 * U with U the
    scaled fp16 quantum 2**(E - 10 - 1009), as unscaled; for f = 0 it is 1.5 * 2**52 * 2**-1033,
    and 2**-1033 is fp16's quantum 2**-24 scaled, the right one for all of |v| < 2**-13 (fp16's
    subnormals and its binade -14). So the maximum with the floor is not needed. The rest of
    the proof holds scaled if every scaled value is the unscaled one times 2**-1009, exactly:

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
    * the roundings: (v + M) - M as in :func:`_float16_magic`, with M >= 1.5 * 2**-981 normal;
      the result times 2**1009 is exact (fp16 values are multiples of 2**-24).

    Float64 subnormals must be computed, not flushed: a process can switch on flush-to-zero /
    denormals-are-zero (some libraries built with -ffast-math do), so that is checked on every
    call, on the ufuncs and on a matrix product (:func:`_subnormals_computed`). Operand and
    product subnormals are rare on real data (fp16 products below 2**-13); on this CPU a
    subnormal result costs a microcode assist, which is why the operands are not scaled more.
    """
    if not _FAST_SCALE or a.size == 0 or b.size == 0:
        return False
    low_a, low_b = _lowest_bit(a, _bits(a)), _lowest_bit(b, _bits(b))
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
        with np.errstate(over="ignore", invalid="ignore"):
            for product in products:
                np.add(total, product, out=total, casting="unsafe")
        out[live] = total
    return out


_FAST_BLAS_PRODUCTS = True  # switch for the tests (products by BLAS, else by broadcasting)
_PRODUCT_BLOCK_INDICES = 4  # inner indices per BLAS call (wastes 3/4 of its flops, and is
#                             still the fastest way NumPy has to make outer products)


def _product_blocks(a: np.ndarray, b: np.ndarray):
    """The rank-1 terms ``a[:, k, None] * b[k]`` in order, as (g, n, m) blocks of g inner
    indices (valid until the next block is asked for).

    NumPy's broadcast multiply of a column by a row runs one short inner loop per row (about
    0.8 ns a product on the lab's shapes); a matrix product makes g of them at once in about
    0.4 ns: ``D @ b[k:k+g]`` with D the (g * n, g) block diagonal matrix whose block r is the
    column ``a[:, k + r]``. Each entry of D @ B is a sum of g terms D[i, r] * B[r, j], of which
    at most one is not an exact zero (0 * finite = +-0; the caller's bound has refused
    infinities and NaN): whatever the order of the additions and whether they are fused, the
    sum is the float64 product ``a[i, k] * b[k, j]`` (adding a zero is exact) but for the sign
    of a zero product, which :func:`_float16_magic` never reads. This holds for every BLAS that
    computes the classical sum of products (OpenBLAS, MKL, BLIS, Accelerate); the switch
    ``_FAST_BLAS_PRODUCTS`` turns it off and the tests check both ways equal.
    """
    n, k = a.shape
    m = b.shape[1]
    if not _FAST_BLAS_PRODUCTS:
        a_cols = np.ascontiguousarray(a.T)
        work = np.empty((1, n, m))
        for col, row in zip(a_cols, b, strict=True):
            np.multiply(col[:, None], row, out=work[0])
            yield work
        return
    g = _PRODUCT_BLOCK_INDICES
    blocks = -(-k // g)
    diagonal = np.zeros((blocks, g, n, g))  # [block, r, i, r] = a[i, block * g + r]
    a_cols = np.zeros((blocks * g, n))
    a_cols[:k] = a.T
    a_cols = a_cols.reshape(blocks, g, n)
    for r in range(g):
        diagonal[:, r, :, r] = a_cols[:, r]
    diagonal = diagonal.reshape(blocks, g * n, g)
    b_rows = np.zeros((blocks * g, m))
    b_rows[:k] = b
    work = np.empty((g * n, m))
    for block in range(blocks):
        np.matmul(diagonal[block], b_rows[block * g : (block + 1) * g], out=work)
        yield work.reshape(g, n, m)[: builtins.min(g, k - block * g)]


def _float16_cast_adds(acc: Accumulator, terms: _Terms) -> bool:
    """Whether ``float16(float64(acc + term))`` is this adder: a fast path for fp16 RN.

    NumPy's float64 -> float16 cast rounds once to nearest even (subnormals and overflow to inf
    included). The float64 sum x of an fp16 running sum and a term of t <= 40 significant bits
    is rounded once more, but never across or onto a midpoint m of the fp16 grid: x - m, when
    nonzero, is a multiple of the smaller of the two addends' last bits. If the term is the
    smaller addend and inexact in float64, it lies below 2**(e - 53 + t) <= 2**(e - 13), far
    from any midpoint distance (>= 2**(e - 12)) an fp16 sum has. If the sum is the smaller one,
    its last bit is >= 2**-24 and the term's >= 2**(e - t); both exceed half a float64 ulp
    2**(e - 54) for every e below fp16's overflow (e <= 16). So the double rounding is
    innocuous; tests check this path equal to the emulated one.
    """
    return (acc.rounding == "nearest_even" and acc.fmt.name == "float16"
            and not acc.compensated and terms.bits <= 40)


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


def _native_accumulate(values: np.ndarray, dtype: np.dtype, keep: bool,
                       known: bool = False) -> np.ndarray | None:
    """Running sums (keep) or totals by ``np.add.accumulate`` on ``dtype``; None unless every
    value is a value of the dtype (``known``, or checked: a value equal to its cast is one)."""
    with np.errstate(over="ignore", invalid="ignore"):
        typed = values.astype(dtype)
        if not known and not np.array_equal(typed.astype(np.float64), values, equal_nan=True):
            return None
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
    i, size = 0, 256
    while i < n:
        a = float(total[0])
        binade = _binade(a, fmt)
        if binade is None:  # zero, a subnormal, inf / NaN, or a 1-2 bit format: one exact step
            total = acc._add(total, x[i : i + 1])
            out[i] = total[0]
            i += 1
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
        if good < block.size:  # the step that leaves the binade, on its own
            total = acc._add(total, x[i : i + 1])
            out[i] = total[0]
            i += 1
    return out


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


def _lowest_bit(values: np.ndarray, bits: int) -> int:
    """A lower bound on the exponent of the lowest set bit of every nonzero value (finite),
    given that every value has at most ``bits`` significant bits (see :func:`_bits`)."""
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
