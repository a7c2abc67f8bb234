"""quantize / dequantize: one core for every block-scaled scheme.

``quantize(x, scheme)`` splits ``x`` into the scheme's blocks, computes each block's amax and
scale (:mod:`floatlab.quant.scales`), divides, and rounds the elements with
:func:`floatlab.round` (codebooks: nearest entry), saturating at the element's max. It returns a
:class:`QuantizedTensor` with the codes (4- and 6-bit codes packed), the scales and their
codes, and the statistics. :func:`fake_quantize` is the plain-array fast entry (the dequantised
array, optionally with the stats) for code that quantises every step.

Arithmetic (the choices a reader should know):

* The working precision is the input's: float32 inputs (and narrower: bf16, fp16) are scaled in
  float32 as the kernels do, float64 inputs in float64. ``x / s`` is exact for power-of-two
  scales; for other scales it is one rounding in the working precision, then the element
  rounding (torchao divides in float32 too). Dequantising multiplies ``e * s`` in the working
  precision (exact for power-of-two scales unless the product underflows).
* Non-nearest element modes (stochastic, directed) on float32 inputs work in float64, so a
  quotient below float32's normal range keeps its exact value.
* NaN / inf anywhere: ValueError (the amax of a block is undefined). The OCP reference code
  instead gives such a block the NaN scale (all its elements NaN); floatlab refuses so that a
  NaN never hides inside a quantised tensor.
* Empty tensors and 0-d arrays: ValueError (no blocks to scale); integer inputs beyond 2**53:
  ValueError. Inputs are never modified.

>>> import numpy as np, floatlab
>>> q = floatlab.quantize(np.linspace(-1, 1, 64, dtype=np.float32), "mxfp8")
>>> q
QuantizedTensor(mxfp8_e4m3, shape (64,), 2 scales, 8.25 bits/value, QSNR 32.0 dB)
>>> q.scales, q.scale_codes
(array([0.00390625, 0.00390625]), array([119, 119], dtype=uint8))
>>> float(np.max(np.abs(q.dequantize() - np.linspace(-1, 1, 64)))) < 2**-5
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from floatlab._validate import resolve_rng
from floatlab.formats import Format
from floatlab.quant.codebook import Codebook, gather
from floatlab.quant.fixed import FixedPoint
from floatlab.quant.hadamard import apply_hadamard, hadamard_matrix
from floatlab.quant.packing import pack_codes, unpack_codes
from floatlab.quant.scales import block_scales
from floatlab.quant.scheme import DQ8_BLOCK, Scheme, element_max, get_scheme
from floatlab.rounding import as_float_array, overflow_threshold, round_finite_in_range
from floatlab.rounding import round as round_to_format

__all__ = ["quantize", "dequantize", "fake_quantize", "QuantizedTensor", "QuantStats",
           "pack_codes", "unpack_codes", "hadamard_matrix"]

# =============================================================================== blocks

def _tile(shape: tuple[int, ...], scheme: Scheme) -> tuple[int, ...]:
    """Tile size per axis for this array shape (padded axes are rounded up later).

    A tile longer than its axis is cut to the axis: the one block along it holds the same
    values either way (padding adds zeros, which change no amax and are dropped after
    rounding), so quantising the real values alone gives the same scales and elements without
    rounding the padding (DeepSeek's 1x128 tiles on 16 features: 8x fewer values).
    """
    tile = _tile_of_block(shape, scheme)
    if not _CLAMP_TILES:
        return tile
    return tuple(min(t, n) for t, n in zip(tile, shape, strict=True))


_CLAMP_TILES = True  # switch for the tests, which check clamped tiles equal to padded ones


def _tile_of_block(shape: tuple[int, ...], scheme: Scheme) -> tuple[int, ...]:
    block, ndim = scheme.block, len(shape)
    if block == "tensor":
        return shape
    if block == "row":
        return (1,) * (ndim - 1) + (shape[-1],)
    if block == "column":
        if ndim < 2:
            raise ValueError(f"block='column' needs at least 2 dimensions, got shape {shape}; "
                             "use block='tensor' or an int for a vector")
        return shape[:-1] + (1,)
    if isinstance(block, int):
        axis = _axis(scheme.axis, ndim, shape)
        tile = [1] * ndim
        tile[axis] = block
        return tuple(tile)
    if ndim < 2:
        raise ValueError(f"the 2-D tile {block} needs at least 2 dimensions, got shape {shape}"
                         "; reshape the tensor (e.g. x.reshape(1, -1)) or use an int block")
    return (1,) * (ndim - 2) + block


def _axis(axis: int, ndim: int, shape: tuple[int, ...]) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for an array of shape {shape}")
    return axis % ndim


def _as_input(x: Any) -> np.ndarray:
    # A float32 / float64 ndarray is what as_float_array returns unchanged (it is not masked:
    # its type is exactly ndarray); skip its checks for the per-step callers.
    arr = x if type(x) is np.ndarray and x.dtype.type in _FLOAT_TYPES else as_float_array(x)
    if arr.ndim == 0:
        raise ValueError("x is 0-d, but quantisation works on blocks of a tensor; pass "
                         "np.atleast_1d(x)")
    if arr.size == 0:
        raise ValueError(f"x is empty (shape {arr.shape}): there is no block amax to compute a "
                         "scale from; pass a non-empty array")
    return arr


def _hadamard(arr: np.ndarray, scheme: Scheme, inverse: bool = False) -> np.ndarray:
    return apply_hadamard(arr, scheme.hadamard, scheme.axis, inverse=inverse)


def _raise_nonfinite(arr: np.ndarray) -> None:
    n_nan = int(np.count_nonzero(np.isnan(arr)))
    n_inf = int(np.count_nonzero(np.isinf(arr)))
    raise ValueError(
        f"x holds {n_nan} NaN and {n_inf} inf values, so a block amax is undefined; remove or "
        "replace them first (e.g. np.nan_to_num). (OCP's reference code would give such a "
        "block the NaN scale.)"
    )


@dataclass
class _Blocked:
    view: np.ndarray          # padded x: (N, b) for blocks along the last axis, else
    #                           interleaved (g0, t0, g1, t1, ...)
    grid: tuple[int, ...]     # blocks per axis
    shape: tuple[int, ...]    # x's shape
    padded: tuple[int, ...]   # padded shape


@dataclass(frozen=True)
class _Layout:
    """What a scheme's blocks look like on one input shape (cached per scheme and shape)."""

    grid: tuple[int, ...]
    padded: tuple[int, ...]
    pad: list | None             # np.pad widths for a ragged edge, or None
    rows: int | None             # blocks run along the contiguous last axis: their length
    view_shape: tuple[int, ...]  # the interleaved (g0, t0, g1, t1, ...) shape otherwise


def _layout(shape: tuple[int, ...], scheme: Scheme) -> _Layout:
    """The block layout of ``shape``, memoised on the scheme (a training step quantises the
    same few shapes with the same schemes thousands of times)."""
    key = (shape, _CLAMP_TILES)
    plans = scheme._plans
    hit = plans.get(key)
    if hit is not None:
        return hit
    tile = _tile(shape, scheme)
    grid = tuple(-(-n // t) for n, t in zip(shape, tile, strict=True))
    padded = tuple(g * t for g, t in zip(grid, tile, strict=True))
    pad = [(0, p - n) for n, p in zip(shape, padded, strict=True)] if padded != shape else None
    rows = tile[-1] if all(t == 1 for t in tile[:-1]) else None
    view_shape = tuple(v for pair in zip(grid, tile, strict=True) for v in pair)
    if len(plans) >= 64:  # a bound, for code that feeds ever new shapes
        plans.clear()
    plans[key] = layout = _Layout(grid, padded, pad, rows, view_shape)
    return layout


def _blocked(arr: np.ndarray, scheme: Scheme) -> _Blocked:
    shape = arr.shape
    lay = _layout(shape, scheme)
    if lay.pad is not None:  # ragged edge: zeros never change an amax
        arr = np.pad(arr, lay.pad)
    if lay.rows is not None:  # blocks run along the (contiguous) last axis
        view = np.ascontiguousarray(arr).reshape(-1, lay.rows)
    else:
        view = arr.reshape(lay.view_shape)
    return _Blocked(view, lay.grid, shape, lay.padded)


def _amax(view: np.ndarray) -> np.ndarray:
    """Block amaxes, shaped to broadcast against ``view``."""
    if view.ndim == 2 and view.shape[1] <= 64 and view.shape[0] >= _AMAX_CHUNK:
        amax = _amax_short_rows(view)[:, None]
    elif view.ndim == 2 and view.shape[1] <= 32 and view.shape[0] >= 256:
        # Fewer rows than a chunk: |x| transposed once, then one vectorised maximum down its
        # columns instead of a reduction per short row (same values: max is exact).
        amax = np.ascontiguousarray(np.abs(view).T).max(axis=0)[:, None]
    else:
        axes = tuple(range(1, view.ndim, 2)) if view.ndim > 2 else (1,)
        amax = np.abs(view).max(axis=axes, keepdims=True)
    if not amax.max() < np.inf:  # NaN (max propagates it) or inf
        _raise_nonfinite(view)
    return amax


_AMAX_CHUNK = 2048  # rows per pass: a chunk of |x| stays in the L2 cache


def _amax_short_rows(view: np.ndarray) -> np.ndarray:
    """max |row| of an (N, b) array with short rows (MX / NVFP4 blocks).

    NumPy's row reduction pays ~100 ns per row; taking the maximum column by column over a
    cache-sized chunk of rows runs long vectorised loops instead (same result: max is exact).
    """
    n, b = view.shape
    out = np.empty(n, dtype=view.dtype)
    scratch = np.empty((min(n, _AMAX_CHUNK), b), dtype=view.dtype)
    for start in range(0, n, _AMAX_CHUNK):
        rows = view[start:start + _AMAX_CHUNK]
        mag = np.abs(rows, out=scratch[: rows.shape[0]])
        m = out[start:start + rows.shape[0]]
        m[...] = mag[:, 0]
        for j in range(1, b):
            np.maximum(m, mag[:, j], out=m)
    return out


# =============================================================================== elements

def _round_elements(q: np.ndarray, element: Any, rounding: str, rng: Any,
                    in_range: bool = False):
    """(elements, codes or None) of the scaled values q, saturating at the element's max.

    q is clipped to [-max, max] first: for finite q, rounding the clipped value with
    ``saturate=True`` gives the same result in every mode (anything beyond max saturates to
    max, and max rounds to itself), and it keeps floatlab.round on its fast path.
    ``in_range``: the caller knows q is finite and clipped, so nearest-even and stochastic
    rounding into Format elements take :func:`floatlab.rounding.round_finite_in_range` (the
    same values and random draws, fewer passes).
    Codebooks return their codes too (they come from the same table lookup). Fixed-point
    elements saturate symmetrically at +-max, as symmetric absmax quantisation does: the most
    negative two's-complement code (-2**(w-1) quanta) is never produced.
    """
    if in_range and rounding in ("nearest_even", "stochastic") and isinstance(element, Format):
        return round_finite_in_range(q, element, in_place=True, rounding=rounding,
                                     rng=rng), None  # q is our scratch
    out_dtype = q.dtype if q.dtype == np.float32 and _float32_ok(element) else np.float64
    if isinstance(element, Codebook):
        idx = element.indices(q, rounding=rounding, rng=rng, finite=True)
        table = element._values32 if out_dtype == np.float32 else element._values
        return np.take(table, idx, mode="clip"), element.codes_of_indices(idx)
    if isinstance(element, Format):
        return round_to_format(q, element, rounding=rounding, saturate=True, rng=rng,
                               dtype=out_dtype), None
    return element.round(q, rounding=rounding, rng=rng, dtype=out_dtype), None


def _clip_blocks(q: np.ndarray, block_peak: np.ndarray, element: Any, count: bool,
                 nearest_even: bool = False, peak_max: float = math.nan) -> int:
    """Clip q to [-max, max] in place (not for codebooks, whose lookup saturates by itself);
    return how many elements exceeded max when ``count``.

    ``block_peak`` is each block's amax / scale in the working precision, the largest |q| of
    the block (division by a positive scale is monotone), so only the blocks whose peak
    exceeds max are touched. Clipping before rounding is the saturating rounding itself: for
    finite q, anything beyond max rounds (saturate=True) to max, as max does; it keeps
    floatlab.round on its fast path. Without counting, nearest-even rounding into a Format
    needs no clipping below the overflow threshold ``max + ulp(max) / 2`` (such values round
    to max or below either way): a float32 scale that puts a row's amax a hair above max
    (rowwise, per-tensor) then costs no clipping pass.
    """
    emax = element_max(element)
    limit = overflow_threshold(element) if nearest_even and not count and \
        isinstance(element, Format) else None
    # ``peak_max`` (the largest block peak, when the caller has it) settles the usual case,
    # nothing to clip, without a pass over the blocks.
    if peak_max <= emax or (limit is not None and peak_max < limit):
        return 0
    flagged = block_peak > emax if limit is None else block_peak >= limit
    if not flagged.any():
        return 0
    clip = not isinstance(element, Codebook)
    if q.ndim == 2 and np.count_nonzero(flagged) * 16 < flagged.size:  # few flagged rows
        rows = np.flatnonzero(flagged.reshape(-1))
        sub = q[rows]
        n = int(np.count_nonzero(np.abs(sub) > emax)) if count else 0
        if clip:
            q[rows] = np.clip(sub, -emax, emax)
        return n
    n = int(np.count_nonzero(q > emax) + np.count_nonzero(q < -emax)) if count else 0
    if clip:
        np.clip(q, -emax, emax, out=q)
    return n


_FLOAT_TYPES = (np.float32, np.float64)


def _work_dtype(dtype: np.dtype, scheme: Scheme) -> type:
    """float32 for float32 inputs rounded to nearest into an element float32 holds (as the
    kernels do); float64 otherwise (stochastic / directed modes keep tiny quotients exact)."""
    if dtype == np.float32 and scheme.rounding in ("nearest_even", "nearest_away") \
            and _float32_ok(scheme.element):
        return np.float32
    return np.float64


def _float32_ok(element: Any) -> bool:
    if isinstance(element, Format):
        return _format_fits_float32(element)
    return bool(element.float32_exact)


@lru_cache(maxsize=64)
def _format_fits_float32(element: Format) -> bool:
    """Cached: Format.emax is a computed property, and this runs on every quantisation."""
    return element.man_bits <= 23 and element.emax <= 127 and element.emin >= -126


@lru_cache(maxsize=64)
def _code_lut(element: Format):
    """(shift, table): codes of a Format's values from their float32 bits.

    Every value of a format with at most 7 mantissa bits that fits in float32 is a float32
    whose bits below ``23 - man_bits`` are zero (subnormals of the format are float32 normals
    with fewer significant bits), so ``bits >> (23 - man_bits)`` tells the values apart; the
    table maps that key to the code (NaN codes left out). Tests check it against
    floatlab.encode.
    """
    if not (_float32_ok(element) and element.man_bits <= 7 and element.bits <= 8):
        return None
    from floatlab.codec import decode

    shift = 23 - element.man_bits
    codes = np.arange(1 << element.bits)
    values = decode(codes, element)
    ok = ~np.isnan(values)
    keys = values[ok].astype(np.float32).view(np.uint32) >> np.uint32(shift)
    table = np.zeros(1 << (32 - shift), dtype=np.uint8)
    table[keys] = codes[ok]
    return np.uint32(shift), table


def _codes_of_values(values: np.ndarray, element: Any) -> np.ndarray:
    """Element codes of values already in the element format (see _code_lut)."""
    if isinstance(element, Format):
        lut = _code_lut(element)
        if lut is not None:
            shift, table = lut
            return gather(table, values.astype(np.float32, copy=False).view(np.uint32) >> shift)
        from floatlab.codec import _codes_of_values as encode_values

        return encode_values(np.asarray(values, dtype=np.float64), element)
    return element.codes_of_values(values)


@lru_cache(maxsize=64)
def _decode_table(element: Any, dtype: Any) -> np.ndarray:
    from floatlab.codec import decode

    if isinstance(element, Format):
        table = decode(np.arange(1 << element.bits), element)
    else:
        table = element.decode(np.arange(1 << element.bits)) if isinstance(element, FixedPoint) \
            else element._decode_table
    return np.asarray(table, dtype=dtype)


def _element_values(codes: np.ndarray, element: Any, dtype: Any) -> np.ndarray:
    if element.bits > 16:
        return element.decode(codes).astype(dtype)
    return gather(_decode_table(element, np.dtype(dtype)), codes)


# =============================================================================== results

@dataclass(frozen=True)
class QuantStats:
    """What quantisation did to a tensor.

    qsnr_db : ``10 log10(sum x**2 / sum (x - dequantised)**2)`` (inf when exact).
    clipped_fraction : share of elements whose scaled value ``|x / s|`` (in the working
        precision) exceeded the element's max, so saturation clipped them to it. (A block's amax
        element that lands a rounding above max with a float32 scale counts, too.)
    flushed_fraction : share of the *nonzero* elements of x that became 0.
    scale_histogram : {log2 of the scale: number of blocks}, for power-of-two scales; for other
        scales {floor(log2 scale): count} (zero scales are left out).
    """

    qsnr_db: float
    clipped_fraction: float
    flushed_fraction: float
    scale_histogram: dict[int, int]
    n: int

    def __str__(self) -> str:
        return (f"QSNR {self.qsnr_db:.2f} dB, clipped {100 * self.clipped_fraction:.3f}%, "
                f"flushed to zero {100 * self.flushed_fraction:.3f}% of {self.n} values")


class QuantizedTensor:
    """The result of :func:`quantize`: codes, scales, and what it cost (see attributes).

    Attributes: ``codes`` (uint8; 4-/6-bit codes packed, :meth:`unpack` gives one per value),
    ``scales`` (float64 values, one per block, shaped blocks-per-axis), ``scale_codes``,
    ``global_scale`` (float or None), ``scheme``, ``shape``, ``dtype`` (the working precision),
    ``nbytes`` (codes + scale codes + global scale), ``bits_per_value``, ``stats``.
    """

    def __init__(self, *, codes, scales, scale_codes, global_scale, scheme, shape, dtype,
                 elements, effective, source, transformed, clipped, padded, extra_bytes=0):
        self.codes = codes
        self.scales = scales
        self.scale_codes = scale_codes
        self.global_scale = global_scale
        self.scheme = scheme
        self.shape = shape
        self.dtype = dtype
        self._padded = padded
        self._elements = elements      # padded-blocked element values (working dtype)
        self._effective = effective    # per-block dequantisation multipliers (working dtype)
        self._source = source          # x as passed (read for stats only)
        self._transformed = transformed
        self._clipped = clipped
        self._extra_bytes = extra_bytes
        for a in (codes, scales, scale_codes):
            a.setflags(write=False)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def unpack(self) -> np.ndarray:
        """The element codes, one per value, in x's shape."""
        bits = self.scheme.element.bits
        if bits in (4, 6):
            return unpack_codes(self.codes, bits, self.size).reshape(self.shape)
        return self.codes

    def dequantize(self) -> np.ndarray:
        """``element * scale`` per block, in the working precision, x's shape."""
        out = _unblock(self._elements * self._effective, self._padded, self.shape)
        if self.scheme.hadamard:
            out = _hadamard(out, self.scheme, inverse=True)
        return out

    @property
    def nbytes(self) -> int:
        """Bytes of the packed storage: element codes + scale codes (+ 4 for a global scale)."""
        total = self.codes.nbytes + self.scale_codes.nbytes + self._extra_bytes
        return total + (4 if self.global_scale is not None else 0)

    @property
    def bits_per_value(self) -> float:
        return 8.0 * self.nbytes / self.size

    @cached_property
    def stats(self) -> QuantStats:
        """Computed on first access, from x as it was passed (do not modify x before)."""
        x = np.asarray(self._source, dtype=np.float64)
        deq = self.dequantize().astype(np.float64)
        err = float(np.sum((x - deq) ** 2))
        sig = float(np.sum(x**2))
        qsnr = math.inf if err == 0 else (10 * math.log10(sig / err) if sig > 0 else -math.inf)
        nonzero = x != 0
        n_nonzero = int(np.count_nonzero(nonzero))
        flushed = int(np.count_nonzero(nonzero & (deq == 0)))
        scales = np.asarray(self._effective, dtype=np.float64).reshape(-1)
        scales = scales[scales > 0]
        exps = np.frexp(scales)[1] - 1
        keys, counts = np.unique(exps, return_counts=True)
        return QuantStats(
            qsnr_db=qsnr,
            clipped_fraction=self._clipped / self.size,
            flushed_fraction=flushed / n_nonzero if n_nonzero else 0.0,
            scale_histogram={int(k): int(c) for k, c in zip(keys, counts, strict=True)},
            n=self.size,
        )

    def __repr__(self) -> str:
        label = self.scheme.name or self.scheme.describe()
        return (f"QuantizedTensor({label}, shape {self.shape}, {self.scales.size} scale"
                f"{'s' * (self.scales.size != 1)}, {self.bits_per_value:.6g} bits/value, "
                f"QSNR {self.stats.qsnr_db:.1f} dB)")


def _scale_view_shape(b: _Blocked) -> tuple[int, ...]:
    if b.view.ndim == 2:
        return (b.view.shape[0], 1)
    return tuple(v for g in b.grid for v in (g, 1))


def _unblock(blocked: np.ndarray, padded: tuple[int, ...], shape: tuple[int, ...]
             ) -> np.ndarray:
    out = blocked.reshape(padded)
    if padded != shape:
        out = np.ascontiguousarray(out[tuple(slice(0, n) for n in shape)])
    return out


def _grid_shape(a: np.ndarray, grid: tuple[int, ...]) -> np.ndarray:
    """Per-block array (broadcastable against the blocked view) -> blocks-per-axis shape."""
    return np.ascontiguousarray(a).reshape(grid)


# =============================================================================== the core

def _core(x: Any, scheme: Scheme, rng: Any, want_codes: bool):
    arr = _as_input(x)
    source = arr
    transformed = None
    if scheme.hadamard:
        if not np.all(np.isfinite(arr)):
            _raise_nonfinite(arr)
        arr = transformed = _hadamard(arr, scheme)
    work = _work_dtype(arr.dtype, scheme)
    arr = arr.astype(work, copy=False)
    b = _blocked(arr, scheme)
    amax = _amax(b.view)
    tensor_amax = float(amax.max()) if scheme.global_scale else None
    scales, scale_codes, g, effective = block_scales(amax, scheme, tensor_amax, want_codes)
    eff = effective.astype(work)
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        q = b.view / eff
        peak = amax.astype(work, copy=False) / eff  # each block's largest |q| (monotone)
    peak_max = float(peak.max())  # NaN when a zero scale made 0 / 0
    clipped = _clip_blocks(q, peak, scheme.element, count=want_codes,
                           nearest_even=scheme.rounding == "nearest_even", peak_max=peak_max)
    # Finite peaks: q is finite and, once clipped, within +-max (a zero scale, 0 / 0, is not).
    in_range = peak_max < math.inf
    rng = resolve_rng(rng, scheme.rounding == "stochastic", scheme.rounding)
    elements, codes = _round_elements(q, scheme.element, scheme.rounding, rng, in_range)
    elements = elements.astype(work, copy=False)
    extra = 0
    if scheme.scale == "dq8":
        scales, scale_codes, eff, extra = _double_quantize(scales, work)
    return source, transformed, b, elements, codes, scales, scale_codes, g, eff, clipped, extra


def _double_quantize(absmax: np.ndarray, work: Any):
    """QLoRA's double quantisation of the float32 absmax values (as bitsandbytes does it).

    The elements were quantised with the exact absmax; the stored absmax are ``offset +
    dynamic8-blockwise(absmax - offset)`` with ``offset = mean(absmax)`` (float32) and blocks of
    256, so dequantising uses the approximated absmax.
    """
    flat = absmax.reshape(-1).astype(np.float32)
    offset = np.float32(flat.mean(dtype=np.float32))
    nested = quantize(flat - offset, get_scheme("dynamic8").replace(block=DQ8_BLOCK))
    approx = (nested.dequantize().astype(np.float32) + offset).astype(np.float64)
    extra = nested.scale_codes.nbytes + 4  # the nested float32 absmax values + the offset
    return (approx.reshape(absmax.shape), nested.codes.reshape(absmax.shape).copy(),
            approx.reshape(absmax.shape).astype(work), extra)


def quantize(x: Any, scheme: str | Scheme, rng: np.random.Generator | int | None = None
             ) -> QuantizedTensor:
    """Quantise ``x`` with a :class:`Scheme` (or a preset name); see the module docstring.

    >>> import numpy as np
    >>> q = quantize(np.array([[0.3, -1.2, 5.0, 0.01]]), "nvfp4")
    >>> q.scales.tolist(), q.global_scale, q.unpack().tolist()
    ([[448.0]], 0.0018601190531626344, [[1, 11, 7, 0]])
    >>> q.dequantize()                  # the block scale g * 448 is a float32 product
    array([[ 0.41666666, -1.24999997,  4.99999988,  0.        ]])
    """
    scheme = get_scheme(scheme)
    source, transformed, b, elements, codes, scales, scale_codes, g, eff, clipped, extra = \
        _core(x, scheme, rng, want_codes=True)
    element = scheme.element
    if codes is None:
        codes = _codes_of_values(elements, element)
    codes = _unblock(codes, b.padded, b.shape)
    if element.bits in (4, 6):
        codes = pack_codes(codes, element.bits)
    return QuantizedTensor(
        codes=codes, scales=_grid_shape(scales, b.grid),
        scale_codes=_grid_shape(scale_codes, b.grid), global_scale=g,
        scheme=scheme, shape=b.shape, dtype=elements.dtype, elements=elements, effective=eff,
        source=source, transformed=transformed, clipped=clipped, padded=b.padded, extra_bytes=extra)


def fake_quantize(x: Any, scheme: str | Scheme, rng: np.random.Generator | int | None = None,
                  *, stats: bool = False):
    """The dequantised array ``dequantize(quantize(x, scheme))`` without codes: the fast entry
    for code that quantises operands every step. ``stats=True`` also returns the QuantStats.

    >>> fake_quantize(np.array([0.3, 1.0, -2.5, 7.0]), "mxfp4")    # scale 2**(2 - 2)
    array([ 0.5,  1. , -2. ,  6. ])
    """
    scheme = get_scheme(scheme)
    source, transformed, b, elements, _, scales, scale_codes, g, eff, clipped, extra = _core(
        x, scheme, rng, want_codes=stats)
    out = _unblock(elements * eff, b.padded, b.shape)
    if scheme.hadamard:
        out = _hadamard(out, scheme, inverse=True)
    if not stats:
        return out
    qt = QuantizedTensor(
        codes=np.zeros(0, np.uint8), scales=_grid_shape(scales, b.grid).copy(),
        scale_codes=_grid_shape(scale_codes, b.grid).copy(), global_scale=g, scheme=scheme,
        shape=b.shape, dtype=elements.dtype, elements=elements, effective=eff, source=source,
        transformed=transformed, clipped=clipped, padded=b.padded, extra_bytes=extra)
    return out, qt.stats


def dequantize(codes: Any, scales: Any, scheme: str | Scheme, *,
               global_scale: float | None = None, shape: tuple[int, ...] | None = None,
               dtype: Any = np.float64) -> np.ndarray:
    """Values from stored codes and block scales: ``element(code) * scale`` per block.

    ``codes``: one code per value (x's shape), or the packed bytes of 4-/6-bit elements with
    ``shape`` given. ``scales``: the block scale values (``QuantizedTensor.scales``);
    ``global_scale`` is required for two-level schemes (NVFP4).

    >>> q = quantize(np.array([0.3, -1.2, 5.0, 0.01]), "mxfp4")
    >>> dequantize(q.codes, q.scales, "mxfp4", shape=q.shape).tolist()   # 5 ties to 4
    [0.5, -1.0, 4.0, 0.0]
    """
    scheme = get_scheme(scheme)
    element = scheme.element
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype must be float32 or float64, got {dtype}")
    arr = np.asarray(codes)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"codes must be unsigned integer codes, got dtype {arr.dtype}")
    if element.bits in (4, 6) and arr.dtype == np.uint8 and shape is not None:
        count = int(np.prod(shape))
        arr = unpack_codes(arr, element.bits, count).reshape(shape)
    elif shape is not None and tuple(shape) != arr.shape:
        raise ValueError(f"codes have shape {arr.shape}, not {tuple(shape)}")
    if element.bits in (4, 6) and arr.size and arr.max() >= 1 << element.bits:
        raise ValueError(f"codes exceed {element.bits} bits: pass packed codes with shape=... "
                         "or one code per value")
    if arr.ndim == 0 or arr.size == 0:
        raise ValueError("codes must be a non-empty array with at least one dimension")
    values = _element_values(arr.astype(np.intp), element, dtype)
    b = _blocked(values, scheme)
    sc = np.asarray(scales, dtype=np.float64)
    if sc.shape != b.grid:
        raise ValueError(f"scales have shape {sc.shape}; {scheme.name or 'this scheme'} on "
                         f"shape {arr.shape} has {b.grid} blocks")
    if scheme.scale in ("e8m0", "pow2"):
        low, high = (-127, 127) if scheme.scale == "e8m0" else (-149, 127)
        mant, exp = np.frexp(sc)
        bad = (mant != 0.5) | (exp - 1 < low) | (exp - 1 > high)
        if np.any(bad):
            raise ValueError(f"scales of a {scheme.scale} scheme are powers of two in "
                             f"[2**{low}, 2**{high}]; got {sc[bad].reshape(-1)[:3].tolist()}")
    if scheme.global_scale:
        if global_scale is None:
            raise ValueError("this scheme has a global (per-tensor) scale: pass "
                             "global_scale=q.global_scale")
        sc = (np.float32(global_scale) * sc.astype(np.float32)).astype(np.float64)
    out = _unblock(b.view * sc.reshape(_scale_view_shape(b)).astype(dtype), b.padded, b.shape)
    if scheme.hadamard:
        out = _hadamard(out, scheme, inverse=True)
    return out
