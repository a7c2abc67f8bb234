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

All outputs of a matrix product are computed at once: one vectorised pass per block of products
(``n`` times fewer passes than a per-addition model).
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

import numpy as np

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
    n, m = terms.n, terms.m
    if acc.chunk is None:
        return _blocks(terms, 0, n, m, acc)
    from floatlab.accumulate import _ArrayTerms

    c = acc.chunk
    chunks = -(-n // c)
    values = terms.block(0, n)
    if chunks * c != n:  # zeros after the real terms: they change no block's exponent or sum
        values = np.concatenate([values, np.zeros((chunks * c - n, m))])
    # (chunks, c, m) -> (c, chunks * m): every chunk restarts from zero, so the chunks are
    # independent sums run side by side.
    inner = values.reshape(chunks, c, m).transpose(1, 0, 2).reshape(c, chunks * m)
    partial = _blocks(_ArrayTerms(inner), 0, c, chunks * m, acc).reshape(chunks, m)
    return acc._outer().reduce(_ArrayTerms(partial))


def _blocks(terms: _Terms, start: int, stop: int, m: int, acc: Accumulator) -> np.ndarray:
    """The running value after the fused blocks of terms[start:stop], starting from zero."""
    fmt, block = acc.fmt, acc.block_fma
    low = fmt.man_bits + acc.align_bits  # q = 2**(E - low)
    c = np.zeros(m)
    with np.errstate(over="ignore", invalid="ignore"):
        for first in range(start, stop, block):
            x = terms.block(first, builtins.min(stop, first + block))
            peak = np.maximum(np.abs(x).max(axis=0), np.abs(c))
            # frexp: peak in [2**(E'-1), 2**E'), so floor(log2 peak) = E' - 1 (zeros give E' = 0,
            # clipped to emin); NaN / inf peaks give a finite q and propagate through the sum.
            exponent = np.maximum(np.frexp(peak)[1] - 1, fmt.emin)
            q = np.ldexp(1.0, exponent - low)
            # x / q and c / q are exact (power-of-two scaling, no overflow since |v| < 2**(E+1));
            # trunc drops the shifted-out bits; the integer sum is exact (checked bound 2**53).
            total = np.trunc(x / q).sum(axis=0) + np.trunc(c / q)
            c = _round(total * q, fmt, acc.rounding, rng=acc.rng, random_bits=acc.random_bits)
    return c
