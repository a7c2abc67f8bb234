"""The blocks of a block-scaled scheme: tiles, padding, the blocked view, block amaxes.

:func:`_blocked` lays an array out so that each block's values are contiguous along the last
axis (1-D blocks, rows, tensors: an ``(N, b)`` view) or interleaved ``(g0, t0, g1, t1, ...)``
(2-D tiles); :func:`_amax` reduces each block to its largest magnitude. Ragged edges are padded
with zeros, which change no amax and are dropped after rounding. The layout of each input
shape is memoised on the scheme (a training step quantises the same shapes every step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from floatlab.quant.scheme import Scheme

__all__ = ["raise_nonfinite"]


def raise_nonfinite(arr: np.ndarray, what: str = "x", consequence: str = "a block amax is "
                    "undefined", fix: str = "(OCP's reference code would give such a block "
                    "the NaN scale.)") -> None:
    """The one error for NaN / inf where an amax is needed: counts them and says the fix.

    >>> raise_nonfinite(np.array([1.0, np.nan, np.inf]))
    Traceback (most recent call last):
    ...
    ValueError: x holds 1 NaN and 1 inf values, so a block amax is undefined; remove or \
replace them first (e.g. np.nan_to_num). (OCP's reference code would give such a block the NaN \
scale.)
    """
    n_nan = int(np.count_nonzero(np.isnan(arr)))
    n_inf = int(np.count_nonzero(np.isinf(arr)))
    raise ValueError(
        f"{what} holds {n_nan} NaN and {n_inf} inf values, so {consequence}; remove or "
        f"replace them first (e.g. np.nan_to_num). {fix}"
    )


def _tile(shape: tuple[int, ...], scheme: Scheme) -> tuple[int, ...]:
    """Tile size per axis for this array shape (padded axes are rounded up later).

    A tile longer than its axis is cut to the axis: the one block along it holds the same
    values either way (padding adds zeros, which change no amax and are dropped after
    rounding), so quantising the real values alone gives the same scales and elements without
    rounding the padding (DeepSeek's 1x128 tiles on 16 features: 8x fewer values).
    """
    return _clamped(_tile_of_block(shape, scheme), shape)


def _clamped(tile: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    # (an empty axis gets a tile of at least 1 and so 0 blocks; a tile of 0 divided by zero)
    tile = tuple(t or 1 for t in tile)
    if not _CLAMP_TILES:
        return tile
    return tuple(min(t, n) or 1 for t, n in zip(tile, shape, strict=True))


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
    if _over_flat(scheme):  # blocks over the flattened tensor (C order): a vector's blocks
        shape = (math.prod(shape),)
        tile = _clamped((scheme.block,), shape)
    else:
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


def _over_flat(scheme: Scheme) -> bool:
    """Whether the scheme's blocks run over the flattened tensor, as bitsandbytes'
    ``quantize_4bit`` / ``quantize_blockwise`` block ``A``: one flat vector in C order
    (``n = A.numel()``, ``ceil(n / blocksize)`` blocks, the last one partial), whatever A's
    shape. Int blocks with ``axis=None`` (the ``nf4`` / ``dynamic8`` / ``udynamic8``
    presets) do, and so does QLoRA's double quantisation (``scale="dq8"``) with int blocks.
    Blocks along an axis instead made the element blocks (rows padded on their own) and the
    order of the nested absmax blocks depend on the shape and the axis."""
    return isinstance(scheme.block, int) and (scheme.scale == "dq8" or scheme.axis is None)


def _blocked(arr: np.ndarray, scheme: Scheme) -> _Blocked:
    shape = arr.shape
    lay = _layout(shape, scheme)
    if len(lay.padded) != len(shape):  # blocks over the flattened tensor (C order)
        arr = arr.reshape(-1)
    if lay.pad is not None:  # ragged edge: zeros never change an amax
        arr = np.pad(arr, lay.pad)
    if lay.rows is not None:  # blocks run along the (contiguous) last axis
        view = np.ascontiguousarray(arr).reshape(-1, lay.rows)
    else:
        view = arr.reshape(lay.view_shape)
    return _Blocked(view, lay.grid, shape, lay.padded)


def _amax(view: np.ndarray) -> np.ndarray:
    """Block amaxes, shaped to broadcast against ``view``."""
    return _amax_and_max(view)[0]


def _amax_and_max(view: np.ndarray) -> tuple[np.ndarray, float]:
    """(block amaxes shaped to broadcast against ``view``, the largest of them): the finiteness
    check reduces them to their maximum anyway, and two-level schemes need it (the tensor
    amax)."""
    rows, width = view.shape if view.ndim == 2 else (0, 0)
    narrow = view.itemsize <= 4  # float32 (measured: float64 gains up to 64 wide, 64K values)
    if 2 <= width <= 256 and not width & (width - 1) and view.flags.c_contiguous \
            and view.nbytes <= _AMAX_FOLD_BYTES:
        amax = _amax_fold(view)[:, None]
    elif rows >= 512 and width % 16 == 0 and 16 < width <= (128 if narrow else 64) and \
            view.size <= (_AMAX_TRANSPOSE_MAX if narrow else _AMAX_TRANSPOSE_MAX // 2):
        # Rows of 48-128 that the fold above leaves (not a power of two: rowwise FP8 of a
        # 48- or 96-wide layer): fold each row's halves with one maximum until 16 remain,
        # then one transposed maximum (max is exact and associative, NaN propagates: the same
        # values; 20-40% faster than the paths below, which reduce short rows one by one or
        # transpose all of |x|).
        mag = np.abs(view)
        while width > 16 and width % 2 == 0:
            width //= 2
            mag = np.maximum(mag[:, :width], mag[:, width:])
        amax = np.ascontiguousarray(mag.T).max(axis=0)[:, None]
    elif rows >= 256 and width <= 32 and view.size <= _AMAX_TRANSPOSE_MAX and (
            view.dtype.itemsize == 4 or view.nbytes <= _AMAX_TRANSPOSE_BYTES):
        # Up to 128K values: |x| transposed once, then one vectorised maximum down its
        # columns instead of a reduction per short row (same values: max is exact). Not for
        # float64 arrays past 128 KiB: their transposed copies are fresh pages for the
        # allocator, and the page faults cost ~6x the copy (the column loop below has none).
        amax = np.ascontiguousarray(np.abs(view).T).max(axis=0)[:, None]
    elif rows >= 256 and width <= 64 and (rows >= _AMAX_CHUNK or width <= 32):
        amax = _amax_short_rows(view)[:, None]
    else:
        axes = tuple(range(1, view.ndim, 2)) if view.ndim > 2 else (1,)
        amax = np.abs(view).max(axis=axes, keepdims=True)
    largest = float(amax.max()) if amax.size else 0.0  # an empty tensor: no blocks
    if not largest < np.inf:  # NaN (max propagates it) or inf
        raise_nonfinite(view)
    return amax, largest


_AMAX_FOLD_BYTES = 1 << 21  # up to here the pairwise fold beats the paths below (measured)
_AMAX_CHUNK = 2048  # rows per pass: a chunk of |x| stays in the L2 cache
_AMAX_TRANSPOSE_MAX = 1 << 17  # up to here one transposed copy of |x| beats the column loop
_AMAX_TRANSPOSE_BYTES = 1 << 17  # float64 views above this take the column loop


def _amax_fold(view: np.ndarray) -> np.ndarray:
    """max |row| of a C-contiguous (N, b) array, b a power of two (NVFP4's 16, MX's 32):
    |x| flattened, then the maximum of neighbouring pairs log2(b) times, each one strided
    pass over the whole array (NumPy's row reduction pays ~100 ns per short row, the
    transposed copy of the paths below a strided copy). After i folds, entry j is the
    maximum of the 2**i values j * 2**i ... (j + 1) * 2**i - 1, so after log2(b) folds, of
    row j. The same values as any other order: max is exact, associative and commutative,
    and np.maximum propagates NaN (the caller's finiteness check sees it).
    """
    m = np.abs(view.reshape(-1))
    for _ in range(view.shape[1].bit_length() - 1):
        m = np.maximum(m[0::2], m[1::2])
    return m


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


def _scale_view_shape(b: _Blocked) -> tuple[int, ...]:
    if b.view.ndim == 2:
        return (b.view.shape[0], 1)
    return tuple(v for g in b.grid for v in (g, 1))


def _unblock(blocked: np.ndarray, padded: tuple[int, ...], shape: tuple[int, ...]
             ) -> np.ndarray:
    out = blocked.reshape(padded)
    if len(padded) != len(shape):  # blocks over the flattened tensor: its first values
        return np.ascontiguousarray(out[: math.prod(shape)]).reshape(shape)
    if padded != shape:
        out = np.ascontiguousarray(out[tuple(slice(0, n) for n in shape)])
    return out


def _grid_shape(a: np.ndarray, grid: tuple[int, ...]) -> np.ndarray:
    """Per-block array (broadcastable against the blocked view) -> blocks-per-axis shape."""
    return np.ascontiguousarray(a).reshape(grid)
