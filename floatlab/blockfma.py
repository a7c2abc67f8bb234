"""Block fused multiply-add: how tensor cores add a group of products in one step.

A tensor core does not round after every product. Fasi, Higham, Mikaitis & Pranesh (2021,
"Numerical behavior of NVIDIA tensor cores", PeerJ CS 7:e330) showed on V100 / T4 / A100 that
each step adds a *block* of ``n`` exact products and the accumulator ``c`` in one fused
operation (a "block FMA", Blanchard et al. 2020): the significands are aligned to the largest
exponent among them, the bits shifted out below the accumulator's precision are dropped
(truncated), the aligned values are added exactly, and the sum is normalised and truncated once
to the output format. Khattak & Mikaitis (2025, "Accurate models of NVIDIA tensor cores",
arXiv:2512.07004) give bit-accurate models of this kind for V100, A100, H100 and B200 in 8-,
16- and 19-bit inputs, and public probes of H100's FP8 ``wgmma`` find a 13-bit (e8m13)
truncating result: "a multi-term summation followed by a single final rounding toward zero".
DeepSeek-V3 (2024) measured "around 14 bits" of accumulation precision on H800 and promotes the
partial sums to float32 every 128 products (4 WGMMA instructions of K = 32 each).

The model, with ``p = fmt.man_bits`` and ``g = align_bits``, one step per block of ``n`` products
``x_1 .. x_n`` (the last block of a sum may be shorter) and the running value ``c`` (a value of
``fmt``, zero at the start and after each promotion):

1. ``E = max(floor(log2 max(|c|, |x_1|, .., |x_n|)), fmt.emin)``: the exponent of the largest
   magnitude (zeros ignored), never below the format's smallest normal exponent;
2. every addend ``v`` in ``{c, x_1, .., x_n}`` is truncated toward zero to a multiple of the
   alignment quantum ``q = 2**(E - p - g)``: it keeps the bits down to ``g`` places below the
   last bit of a ``fmt`` value in ``c``'s largest binade (``g = 0``: exactly ``fmt``'s
   precision at exponent E, as Fasi et al. found for the binary32 accumulator of V100);
3. the truncated addends are summed exactly (enough carry bits: the sum may exceed ``2**(E+1)``);
4. the sum is normalised and rounded once to ``fmt`` with the accumulator's rounding mode
   ("toward_zero" on NVIDIA hardware).

Worked example (e8m3 for brevity: p = 3, g = 0; one block of n = 3 products, c = 0):
x = (1.5, 0.3125, -0.0859375). E = 0 (1.5 is the largest), q = 2**-3 = 0.125: 1.5 stays,
0.3125 -> 0.25 (its 0.0625 bit is shifted out), -0.0859375 -> 0 (all its bits are below q); the
exact sum 1.75 is a value of e8m3, so the block gives 1.75. A truncating e8m3 adder that rounds
after every product gives trunc(1.5 + 0.3125) = 1.75, then trunc(1.75 - 0.0859375) = 1.625:

>>> import floatlab
>>> x = [1.5, 0.3125, -0.0859375]
>>> float(floatlab.sum(x, floatlab.Accumulator("e8m3", "toward_zero", block_fma=3)))
1.75
>>> float(floatlab.sum(x, floatlab.Accumulator("e8m3", "toward_zero")))
1.625

Why it matters: a per-addition truncating adder pushes every running sum toward zero, a bias of
about half an ulp per product that grows like K; in the block model the alignment truncations
are toward zero *per addend*, so they carry the products' signs and mostly cancel, and the biased
final truncation happens once per block of n, not once per product.

Cost. All outputs of a matrix product are computed at once, a block of products at a time (``n``
times fewer rounding steps than a per-addition model), but every product still takes six NumPy
passes: it is made, scanned twice for its block's largest magnitude (max and min), scaled to its
output's quantum, truncated and summed, plus each block's per-output work (exponent, quantum,
rounding). In float64, the definition, that is about 1.5 ns per product on the machine the
benchmarks ran on; products of dequantised operands (codes times float32 scales: up to 24
significant bits each) are exact only there. The deepseek-fp8 recipe sums the products of the
E4M3 *codes* instead and applies the tile scales when it promotes, as DeepSeek-V3's kernel does
(:mod:`floatlab.mixed.promoted_gemm`): those products have at most 8 bits, and every step of the
model is then exact in float32 (the proof in ``promoted_gemm.float32_exact``), so the same six
passes run on half the bytes (``_product_chunks(dtype=float32)``, tested bit-equal to float64).
The step of the reference MLP makes about 7.7M products; six float32 passes over them are
still several times the whole float32 step of the plain NumPy floor, so deepseek-fp8 stays far
above the recipes whose GEMMs are BLAS calls (benchmarks/bench_training.py prints the bound).
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

import numpy as np

from floatlab.rounding import _F32, _F64, _bits_of
from floatlab.rounding import round as _round

if TYPE_CHECKING:  # the Accumulator calls these; they only read its fields
    from floatlab.accumulate import Accumulator, _Terms

__all__: list[str] = []


def check_block_fma(acc: Accumulator) -> None:
    """Validate the block-FMA fields of an Accumulator (clear errors for what does not apply)."""
    block, align = acc.block_fma, acc.align_bits
    if isinstance(align, bool) or not isinstance(align, (int, np.integer)) or align < 0:
        raise ValueError(f"align_bits={align!r} must be a non-negative int (extra alignment "
                         "bits kept below the accumulator's precision, e.g. 0)")
    if block is None:
        if align != 0:
            raise ValueError("align_bits applies to a block FMA: pass block_fma=<products per "
                             "step>, e.g. block_fma=32")
        return
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block <= 0:
        raise ValueError(f"block_fma={block!r} must be a positive int: the number of products "
                         "a tensor core adds in one fused step, e.g. block_fma=32")
    fmt = acc.fmt
    if acc.order != "sequential" or acc.compensated:
        raise ValueError("block_fma models a tensor core's sequence of fused block additions: "
                         "use order='sequential' without compensated=True")
    if acc.chunk is not None and acc.promote is None:
        raise ValueError("block_fma with chunk needs promote=<wider format> (e.g. chunk=128, "
                         "promote='float32'): the chunk sums are promoted out of the tensor core")
    if not (fmt.has_zero and fmt.signed and fmt.has_normals) or fmt.p > 51:
        raise ValueError(f"block_fma needs a signed binary accumulator format with zero and "
                         f"normals, at most 51 significand bits (e.g. 'e8m13'), not {fmt.name}")
    # The aligned addends are integers below 2**(p + g + 1) in units of q; their exact sum must
    # stay exact in float64 (below 2**53), and q must not underflow float64.
    if fmt.man_bits + int(align) + 1 + int(block + 1).bit_length() > 53:
        raise ValueError(f"block_fma={block} with align_bits={align} and {fmt.name} needs more "
                         "than float64's 53 bits for the exact block sum; use fewer of them")
    if fmt.emin - fmt.man_bits - align < -1000:
        raise ValueError(f"{fmt.name}'s exponent range is too wide for the block-FMA model")


def reduce(terms: _Terms, acc: Accumulator) -> np.ndarray:
    """Sum ``terms`` (n terms of m sums) with the block-FMA model of ``acc``: (m,) float64."""
    from floatlab.accumulate import _ArrayTerms, _ProductTerms

    n, m = terms.n, terms.m
    if m == 0:  # no outputs (a (0, k) or (k, 0) operand): the tiling below would divide by 0
        return np.zeros(0)
    products = _FAST_PRODUCTS and isinstance(terms, _ProductTerms) and terms.round_to is None
    if products:  # products made in cache-sized tiles, block by block, all chunks side by side
        partial = _product_chunks(terms.a, terms.b, acc.chunk or builtins.max(n, 1), acc)
        partial = partial.reshape(-1, m)
        if acc.chunk is None:
            return partial[0] if len(partial) else np.zeros(m)
        if len(partial) == 1:  # one chunk: +0 + v in the promote format, which holds v, is v
            return partial[0] + 0.0  # (and -0 becomes +0, as that addition makes it)
        return acc._outer().reduce(_ArrayTerms(partial))
    if acc.chunk is None:
        return _blocks(terms, 0, n, m, acc)
    c = acc.chunk
    chunks = -(-n // c)
    values = terms.block(0, n)
    if chunks * c != n:  # zeros after the real terms: they change no block's exponent or sum
        values = np.concatenate([values, np.zeros((chunks * c - n, m))])
    # (chunks, c, m) -> (c, chunks * m): every chunk restarts from zero, so the chunks of a few
    # long sums are independent sums run side by side.
    inner = values.reshape(chunks, c, m).transpose(1, 0, 2).reshape(c, chunks * m)
    partial = _blocks(_ArrayTerms(inner), 0, c, chunks * m, acc).reshape(chunks, m)
    return acc._outer().reduce(_ArrayTerms(partial))


# Switches for the tests, which check each fast path bit-equal to the general one.
_FAST_PRODUCTS = True     # matrix products through _product_chunks (else _blocks of the terms)
_FAST_TRUNCATION = True   # "toward_zero" block sums by bit mask (else floatlab.round)

_TILE = 65536  # products per work buffer (512 KiB; measured faster than 32K and 128K here)


def _product_chunks(a: np.ndarray, b: np.ndarray, chunk: int, acc: Accumulator,
                    dtype: type = np.float64) -> np.ndarray:
    """(chunks, M, N): the running value of every output at the end of each chunk of ``chunk``
    inner indices (the last may be shorter), each chunk from zero, after the fused blocks of
    the products ``a[:, k] * b[k, :]``: the same values as :func:`_blocks` of those products
    (the general path; the tests check the two bit for bit), in fewer NumPy passes.

    Chunks restart from zero, so the full chunks are independent sums run side by side (one
    NumPy call covers the same block of every chunk: fewer, longer calls when M x N is small,
    as in a weight gradient); a shorter last chunk runs on its own. Products are made in tiles,
    a block at a time, and all outputs are rounded once per block. Why each shortcut gives the
    general path's bits:

    - ``einsum("kr,kn->krn")`` makes each product with one multiplication, correctly rounded
      (exact for inputs of <= 26 bits), as ``a * b`` does, in about 60% of the time of the
      broadcast multiply; but it adds the product to a zeroed output, so an exact zero product
      comes out +0 where ``a * b`` gives -0. Signs of zero products never reach a result: they
      do not change the peak (|-0| = |+0|), and NumPy's sum starts from add's identity +0, so a
      block's sum of truncated products is +0 when every one is a zero, whatever their signs
      (and an exact cancellation of nonzero ones is +0 too). A test pins this on a running
      value of -0 followed by -0 products.
    - The first block starts from c = +0: |c| does not change the peak (max(p, 0) = p for the
      peak p >= 0, NaN stays NaN) and adding trunc(+0 * inv) = +0 to a sum that is never -0
      (above) changes nothing, so its terms are skipped.
    - The rounding of the block sums: :func:`_round_sums`, in place on the fresh quotient.

    ``dtype``: the working precision of every pass (``a`` and ``b`` are cast to it). float64
    is the definition; float32 halves the bytes and is only for callers that have proved every
    step exact in float32 for their inputs (:func:`floatlab.mixed.promoted_gemm.float32_exact`:
    products of E4M3 codes), where each step then gives the float64 path's value.
    """
    if b.shape[1] < a.shape[0]:  # the transposed product sums the same products in the same
        #                         order; a long last axis keeps the broadcasting loops long
        return _product_chunks(b.T, a.T, chunk, acc, dtype).transpose(0, 2, 1)
    n, m_rows, n_cols = a.shape[1], a.shape[0], b.shape[1]
    a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    full = n // chunk
    parts = []
    if full:  # (chunk, chunks, M) and (chunk, chunks, N): index k of every chunk together
        parts.append(_chunk_blocks(
            np.ascontiguousarray(a[:, : full * chunk].T.reshape(full, chunk, m_rows)
                                 .transpose(1, 0, 2)),
            np.ascontiguousarray(b[: full * chunk].reshape(full, chunk, n_cols)
                                 .transpose(1, 0, 2)), acc))
    if full * chunk < n:
        parts.append(_chunk_blocks(np.ascontiguousarray(a[:, full * chunk:].T)[:, None],
                                   np.ascontiguousarray(b[full * chunk:])[:, None], acc))
    if not parts:
        return np.zeros((0, m_rows, n_cols), dtype)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _chunk_blocks(a_cols: np.ndarray, b_rows: np.ndarray, acc: Accumulator) -> np.ndarray:
    """The (G, M, N) running values after the fused blocks of the G sums of products
    ``a_cols[k, g, :, None] * b_rows[k, g, None, :]`` over k, each from zero."""
    fmt, block = acc.fmt, acc.block_fma
    low = fmt.man_bits + acc.align_bits
    length, groups, m_rows = a_cols.shape
    n_cols = b_rows.shape[2]
    depth = builtins.min(block, length)
    dtype = a_cols.dtype  # float64, or float32 where the caller proved it exact
    tile = _TILE * 8 // dtype.itemsize  # the same 512 KiB buffer in float32 (measured faster)
    rows = builtins.max(1, tile // builtins.max(1, depth * n_cols))
    per_tile = builtins.max(1, rows // m_rows)   # whole groups per tile when M is small
    rows = builtins.min(rows, m_rows)
    buffer = np.empty((depth, builtins.min(per_tile, groups), rows, n_cols), dtype)
    c = np.zeros((groups, m_rows, n_cols), dtype)
    total, inverse = np.empty_like(c), np.empty_like(c)
    first_block = True
    with np.errstate(over="ignore", invalid="ignore"):
        for first in range(0, length, block):
            last = builtins.min(length, first + block)
            for g0 in range(0, groups, per_tile):
                g1 = builtins.min(groups, g0 + per_tile)
                for r0 in range(0, m_rows, rows):
                    r1 = builtins.min(m_rows, r0 + rows)
                    x = buffer[: last - first, : g1 - g0, : r1 - r0]
                    np.einsum("kgr,kgn->kgrn", a_cols[first:last, g0:g1, r0:r1],
                              b_rows[first:last, g0:g1], out=x)
                    running = None if first_block else c[g0:g1, r0:r1]
                    inv = _truncate_block(x, running, fmt.emin, low)
                    part = np.add.reduce(x, axis=0, out=total[g0:g1, r0:r1])
                    if running is not None:
                        part += np.trunc(running * inv)
                    inverse[g0:g1, r0:r1] = inv
            np.divide(total, inverse, out=total)
            c = _round_sums(total, acc, in_place=True)
            total = np.empty_like(c) if c is total else total
            first_block = False
    return c


def _truncate_block(x: np.ndarray, c: np.ndarray | None, emin: int, low: int) -> np.ndarray:
    """Scale the block ``x`` (b, ...) in place to units of its alignment quantum q and drop the
    shifted-out bits; return 1 / q (a power of two per sum). ``c`` is the running value (None:
    +0, which does not change the peak)."""
    peak = x.max(axis=0, initial=0.0)
    np.maximum(peak, np.negative(x.min(axis=0, initial=0.0)), out=peak)
    if c is not None:
        np.maximum(peak, np.abs(c), out=peak)
    # frexp: peak in [2**(E'-1), 2**E'), so floor(log2 peak) = E' - 1 (a zero peak gives
    # E = -1: every addend is then zero, and any q leaves them so); NaN / inf peaks give a
    # finite q and propagate through the sum.
    exponent = np.maximum(np.frexp(peak)[1] - 1, emin)
    inverse = np.ldexp(x.dtype.type(1), low - exponent)  # in x's precision
    # x / q is exact (power-of-two scaling, no overflow since |x| < 2**(E+1)); trunc drops the
    # shifted-out bits; the caller's integer sum is exact (check_block_fma bounds it by 2**53;
    # in float32, promoted_gemm.float32_exact by 2**24).
    np.multiply(x, inverse, out=x)
    np.trunc(x, out=x)
    return inverse


def _blocks(terms: _Terms, start: int, stop: int, m: int, acc: Accumulator) -> np.ndarray:
    """The running values after the fused blocks of terms[start:stop], starting from zero."""
    fmt, block = acc.fmt, acc.block_fma
    c = np.zeros(m)
    with np.errstate(over="ignore", invalid="ignore"):
        for first in range(start, stop, block):
            x = terms.block(first, builtins.min(stop, first + block)).copy()  # never the input
            inverse = _truncate_block(x, c, fmt.emin, fmt.man_bits + acc.align_bits)
            total = x.sum(axis=0) + np.trunc(c * inverse)
            c = _round_sums(total / inverse, acc)
    return c


def _round_sums(values: np.ndarray, acc: Accumulator, in_place: bool = False) -> np.ndarray:
    """``floatlab.round(values, acc.fmt, acc.rounding)`` of the exact block sums (float64).

    Fast path for "toward_zero" (the hardware's mode), where one floatlab.round call per block
    would cost more than the block's arithmetic: for |v| in [2**emin, fmt.max] the format's
    values in v's binade [2**e, 2**(e+1)) are the multiples of 2**(e - man_bits), which are the
    float64 values whose low 52 - man_bits fraction bits are zero; float64 bit patterns of one
    sign are monotone in magnitude, so clearing those bits is truncation toward zero onto that
    grid (and keeps the sign, -0 included). Zeros are already values; every other element
    (below 2**emin, beyond max, inf, NaN) goes through floatlab.round. A test checks the two
    paths bit for bit.

    Whether any element is "other" is read from two reductions: the largest magnitude (NaN
    fails the comparison) and the smallest of ``bits(|v|) - 1`` as unsigned integers, where
    a zero wraps around to the largest value and every other magnitude keeps its order, so it
    is below ``bits(2**emin) - 1`` exactly when some nonzero |v| is below 2**emin.
    ``in_place``: ``values`` is a scratch array the caller gives up (the result may be it).

    float32 ``values`` (the float32 block FMA of :func:`_product_chunks`) take the same steps
    on float32's bit pattern (23 fraction bits), which is the same truncation for a format
    whose values are float32 numbers (p <= 24, emin >= -126, max below float32's); the result
    keeps the dtype (floatlab.round's float64 values of such a format are float32 numbers).
    """
    fmt = acc.fmt
    if not (_FAST_TRUNCATION and acc.rounding == "toward_zero"):
        out = _round(values, fmt, acc.rounding, rng=acc.rng, random_bits=acc.random_bits)
        return out.astype(values.dtype, copy=False)
    L = _F32 if values.dtype == np.float32 else _F64  # values' bit layout
    uint = L.uint.type
    magnitude = np.abs(values)
    shifted = magnitude.view(uint) - uint(1)
    smallest_normal = _bits_of(2.0**fmt.emin, L) - uint(1)
    inside = magnitude.size == 0 or (magnitude.max() <= fmt.max
                                     and shifted.min() >= smallest_normal)
    other = None if inside else (~((magnitude >= 2.0**fmt.emin) & (magnitude <= fmt.max))
                                 & (magnitude != 0))
    rest = None if other is None else _round(values[other], fmt, "toward_zero")
    out = values if in_place else values.copy()
    bits = out.view(uint)
    np.bitwise_and(bits, ~uint((1 << (L.man_bits - fmt.man_bits)) - 1), out=bits)
    if other is not None:
        out[other] = rest
    return out
