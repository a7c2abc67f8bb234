"""DeepSeek-V3's FP8 GEMM: the tensor core sums products of the E4M3 codes, the CUDA cores
apply the tile scales when they promote.

DeepSeek-V3 (2024, section 3.3) quantises activations per 1x128 tile and weights per 128x128
block (along the inner dimension K) to E4M3 with float32 scales. The Hopper tensor core (WGMMA,
K = 32 per instruction) multiplies the *codes* and adds the products in its narrow truncating
accumulator ("around 14 bits"; the lab's e8m13, a 32-product block FMA,
:mod:`floatlab.blockfma`); after every N_C = 128 products -- one scale tile along K -- the
partial sum is copied to float32 registers on the CUDA cores, multiplied by the two scales and
added to the float32 accumulator. DeepGEMM's kernel (``fp8_gemm.cuh``) writes the promotion as
``scale = scale_a * scale_b`` (a float32 product, rounded) and ``final_accum += scale * accum``
with ``final_accum`` starting at 0; nvcc contracts that multiply-add into one FFMA by default,
so the lab rounds it once: ``acc = fl32(fl32(s_a * s_b) * P + acc)`` (:func:`floatlab.fma`).
Each tile's sum restarts from zero (WGMMA's first instruction of a tile does not read the
accumulator). The output is rounded once more to the result format by the caller (bf16).

Why it matters: products of 4-bit significands have at most 8 bits, so within a tile many
additions of the narrow accumulator are exact; summing the products of *dequantised* values
(code * float32 scale: up to 24 bits) instead truncates bits the kernel never had, and
overstates the accumulator's error (about 4x at K = 4096 per tensor, e8m14, per-addition
truncation: 5.0e-2 against 1.29e-2; notebook 06, section 4).

Inner dimensions that are not a multiple of 128: DeepGEMM asserts ``k % 128 == 0`` (its
``gemm_fp8_fp8_bf16_nt``), so the kernel never sees a short tile. The lab's MLP has K = 4, 16
and 64 (and 512): the quantiser cuts a tile to a shorter axis (:mod:`floatlab.quant.blocks`),
and the lab sums a short last tile as its own chunk -- what zero padding to 128 would give,
since zero products change neither a block's largest exponent nor its sum.

Speed: the codes' products are exact in float32, so the block FMA runs in float32 passes
(:func:`float32_exact` proves when; ``_FLOAT32_PASSES`` is the switch, tests check it bit-equal
to the float64 definition).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from floatlab.accumulate import Accumulator
from floatlab.accumulate import matmul as accumulate_matmul
from floatlab.blockfma import _product_chunks
from floatlab.formats import Format, get_format
from floatlab.fused_multiply_add import _nearest_fma, fma
from floatlab.quant.quantize import quantize_elements
from floatlab.quant.scheme import Scheme

__all__ = ["TiledOperand", "tiled_operand", "promoted_matmul", "float32_exact"]

_FLOAT32 = get_format("float32")


@dataclass(frozen=True)
class TiledOperand:
    """One GEMM operand as the scaled kernel reads it (inner dimension K last).

    elements : (rows, K) the element values (the codes' values, e.g. E4M3's), float32;
    scales : (row tiles, K tiles) the float32 dequantisation scale of each tile;
    block : (rows per tile, K per tile), cut to the operand's shape as the quantiser cuts it;
    element : the element Format.
    """

    elements: np.ndarray
    scales: np.ndarray
    block: tuple[int, int]
    element: Format

    @property
    def T(self) -> TiledOperand:  # noqa: N802 - numpy's name for the transpose
        """The transposed operand: the same tiles, transposed (for square 2-D tiles, what
        quantising the transpose gives: :func:`floatlab.mixed.recipe_gemm._tiles_transpose`)."""
        return TiledOperand(np.ascontiguousarray(self.elements.T),
                            np.ascontiguousarray(self.scales.T), self.block[::-1], self.element)

    def row_scales(self) -> np.ndarray:
        """(rows, K tiles): the scale of each row's tile along K."""
        rows = self.elements.shape[0]
        return np.repeat(self.scales, self.block[0], axis=0)[:rows]

    def dequantize(self) -> np.ndarray:
        """``element * scale`` per tile in float32: the values ``fake_quantize`` gives."""
        scale = np.repeat(self.row_scales(), self.block[1], axis=1)[:, : self.elements.shape[1]]
        return self.elements * scale


def tiled_operand(x: np.ndarray, scheme: Scheme, rng: Any = None, *, stats: bool = False
                  ) -> tuple[TiledOperand, Any]:
    """Quantise the 2-D ``x`` (inner dimension last) with ``scheme`` into a
    :class:`TiledOperand` (and the QuantStats with ``stats=True``, else None)."""
    if x.ndim != 2 or not isinstance(scheme.element, Format) or scheme.global_scale:
        raise ValueError("tiled_operand: a 2-D operand and a Scheme of Format elements with one "
                         f"scale per tile, got shape {x.shape} and {scheme!r}")
    elements, scales, block, st = quantize_elements(x, scheme, rng, stats=stats)
    if scales.dtype != np.float32 and not np.array_equal(scales.astype(np.float32), scales):
        raise ValueError("tiled_operand: the kernel's scales are float32 numbers; these are not")
    return TiledOperand(elements.astype(np.float32, copy=False),
                        scales.astype(np.float32, copy=False), block,
                        scheme.element), st


def promoted_matmul(a: TiledOperand, b: TiledOperand, acc: Accumulator) -> np.ndarray:
    """``a @ b.T`` as DeepSeek-V3's kernel computes it (module docstring): per tile of
    ``acc.chunk`` inner indices, the products of the codes summed from zero by ``acc`` without
    its promotion (e.g. the e8m13 32-product block FMA, toward zero), then
    ``out = fl32(fl32(s_a * s_b) * partial + out)`` from ``out = +0``. Returns float64 values
    that are float32 numbers, (rows of a, rows of b).

    ``acc`` needs ``chunk`` (the tile length along K) and ``promote="float32"``; each
    operand's tiles along K must be a multiple of ``acc.chunk`` long, or cover the whole K (a
    per-tensor or per-row scale applies at every promotion alike), so that no partial sum
    spans two scales.
    """
    if not (isinstance(a, TiledOperand) and isinstance(b, TiledOperand)):
        raise TypeError("promoted_matmul multiplies two TiledOperands (tiled_operand), got "
                        f"{type(a).__name__} and {type(b).__name__}")
    k = a.elements.shape[1]
    if b.elements.shape[1] != k:
        raise ValueError(f"promoted_matmul: inner dimensions {k} and {b.elements.shape[1]} "
                         "differ")
    chunk = acc.chunk
    if chunk is None or acc.promote != _FLOAT32:
        raise ValueError("promoted_matmul: the Accumulator must promote into float32 every "
                         f"chunk (one scale tile), e.g. chunk=128, promote='float32'; got {acc!r}")
    for operand, name in ((a, "a"), (b, "b")):
        if operand.block[1] < k and operand.block[1] % chunk:
            raise ValueError(f"promoted_matmul: {name}'s scale tiles are {operand.block[1]} long "
                             f"along K, but the accumulator promotes every {chunk}: the scales "
                             "apply at promotion, so a tile must hold whole chunks")
    if acc.fmt.p > 24:
        raise ValueError(f"promoted_matmul: the tile sums of {acc.fmt.name} are not float32 "
                         "numbers; a tensor core's narrow accumulator is (e.g. 'e8m13')")
    inner = Accumulator(acc.fmt, acc.rounding, block_fma=acc.block_fma,
                        align_bits=acc.align_bits, rng=acc.rng, random_bits=acc.random_bits)
    partial = _partials(a, b, inner, chunk)
    scale_a, scale_b = a.row_scales(), b.row_scales()
    out = None  # +0 everywhere: DeepGEMM's final_accum starts at 0
    for j in range(partial.shape[0]):
        # DeepGEMM: scale = scale_a * scale_b in float32, then one FFMA into the float32 sum
        ta, tb = j * chunk // a.block[1], j * chunk // b.block[1]  # the tiles chunk j lies in
        scale = scale_a[:, ta, None] * scale_b[None, :, tb]
        out = _fma32(scale, partial[j], out)
    return out.astype(np.float64)


def _fma32(scale: np.ndarray, partial: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """``floatlab.fma(scale, partial, out, fmt="float32")`` as float32 (the tests check it bit
    for bit), without its per-call checks and general rounding: ``scale`` is a float32
    number (24 bits) and ``partial`` a value of the narrow accumulator (at most 24 bits:
    :func:`promoted_matmul`'s accumulators fit float32), so their product is exact in float64
    (at most 48 bits), which is what ``_nearest_fma`` needs; its float64 result rounds to
    nearest even in float32 as the exact ``scale * partial + out`` does, and NumPy's cast to
    float32 is that IEEE rounding (subnormals and overflow to inf included), which is what
    floatlab.round to float32 in "nearest_even" gives.

    ``out=None`` is +0 (the first promotion): ``scale * partial + 0`` is then exact in float64
    (the exact product; + 0 turns a -0 product into +0, as the FMA's exact sum does), so one
    cast rounds it -- no midpoint can be mis-rounded."""
    if not _FAST_FMA:
        zero = np.zeros(np.broadcast_shapes(scale.shape, partial.shape))
        return fma(scale, partial, zero if out is None else out, fmt=_FLOAT32
                   ).astype(np.float32)
    with np.errstate(over="ignore"):  # beyond float32's range: inf, as the FFMA gives
        if out is None:
            return (scale.astype(np.float64) * partial + 0.0).astype(np.float32)
        return _nearest_fma(scale.astype(np.float64), partial.astype(np.float64),
                            out.astype(np.float64), _FLOAT32).astype(np.float32)


_FAST_FMA = True  # switch for the tests: floatlab.fma itself for the promotion


def _partials(a: TiledOperand, b: TiledOperand, inner: Accumulator, chunk: int) -> np.ndarray:
    """(tiles, rows of a, rows of b): each tile's sum of the codes' products by ``inner``."""
    if _FAST and inner.block_fma is not None:
        dtype = np.float32 if _FLOAT32_PASSES and float32_exact(
            inner, a.element, b.element, chunk) else np.float64
        return _product_chunks(a.elements, b.elements.T, chunk, inner, dtype)
    # the general path: floatlab.matmul of each tile's codes (float64, exact products)
    k = a.elements.shape[1]
    return np.stack([accumulate_matmul(a.elements[:, s:s + chunk].astype(np.float64),
                                       b.elements[:, s:s + chunk].T.astype(np.float64), inner)
                     for s in range(0, k, chunk)])


_FAST = True            # switch for the tests: tiles side by side in blockfma._product_chunks
_FLOAT32_PASSES = True  # switch for the tests: float32 passes where float32_exact proves them


def float32_exact(acc: Accumulator, fa: Format, fb: Format, chunk: int) -> bool:
    """Whether the block FMA of ``acc`` on products of values of ``fa`` and ``fb``, sums of at
    most ``chunk`` products from zero, gives in float32 passes exactly its float64 values
    (:func:`floatlab.blockfma._product_chunks` with ``dtype=float32``).

    Proof. Let lo = log2 of the product of the quanta of fa's and fb's smallest binades (every
    value of a format is a multiple of 2**(emin - man_bits), with or without subnormals), p =
    the accumulator's mantissa bits plus align_bits. Conditions: (1) the products' significands
    have at most 24 bits, lo >= -126 and chunk * fa.max * fb.max <= 2**100, so every product
    is a float32 number and ``einsum`` forms it exactly; (2) every product is a multiple of
    2**lo, and so is every running value: a truncated addend is a multiple of q or, if q <
    2**lo, unchanged; a sum of multiples of 2**lo truncated to the accumulator's grid is a
    multiple of its grid step, or unchanged when that step is below 2**lo -- so a nonzero peak
    is >= 2**lo, the block exponent E >= lo, and 1 / q = 2**(p - E) <= 2**(p - lo) <= 2**126
    (condition lo - p >= -126) is a float32 number; (3) x / q is exact (power of two), its
    truncation exact, and the block's integer sum below 2**(p + 1) * (block + 1) <= 2**24
    (condition), exact in float32 in any order; (4) the sum times q is a multiple of 2**lo
    with at most 24 bits, >= 2**-126: exact; (5) the truncation to the accumulator's format
    (p' <= 24 bits, emin >= -126, max within float32) clears the same bits of the same value
    in float32 as in float64 (:func:`floatlab.blockfma._round_sums`); |running value| <= the
    sum of the chunk's |products| <= 2**100, so nothing overflows. Every step then has the
    float64 path's value. "toward_zero" only (the hardware's; the masked truncation).
    """
    fmt, block = acc.fmt, acc.block_fma
    if block is None or acc.rounding != "toward_zero":
        return False
    if not all(isinstance(f, Format) and f.has_zero for f in (fa, fb)):
        return False
    p = fmt.man_bits + acc.align_bits
    lo = (fa.emin - fa.man_bits) + (fb.emin - fb.man_bits)
    return bool(fa.p + fb.p <= 24 and lo >= -126 and lo - p >= -126
                and chunk * fa.max * fb.max <= 2.0**100
                and p + 1 + int(block + 1).bit_length() <= 24
                and fmt.man_bits <= 23 and fmt.emin >= -126 and fmt.max <= _FLOAT32.max)
