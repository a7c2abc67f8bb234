"""Packing 4- and 6-bit element codes into bytes (and back)."""

from __future__ import annotations

import numpy as np

__all__ = ["pack_codes", "unpack_codes"]


def pack_codes(codes: np.ndarray, bits: int) -> np.ndarray:
    """Pack codes of ``bits`` (4 or 6) bits into bytes.

    4-bit: two codes per byte, the first in the *low* nibble, as PyTorch's
    ``float4_e2m1fn_x2`` and torchao's MX kernels (``pack_uint4``) store FP4 pairs. 6-bit:
    floatlab's own layout, a big-endian bit stream, four codes per three bytes. The last byte
    is zero-padded: ``ceil(n * bits / 8)`` bytes in all.

    >>> pack_codes(np.array([1, 2, 15], dtype=np.uint8), 4)
    array([33, 15], dtype=uint8)
    >>> unpack_codes(pack_codes(np.arange(5, dtype=np.uint8), 6), 6, 5)
    array([0, 1, 2, 3, 4], dtype=uint8)
    """
    flat = np.ascontiguousarray(codes, dtype=np.uint8).reshape(-1)
    if bits == 4:
        if flat.size % 2:
            flat = np.append(flat, np.uint8(0))
        return flat[0::2] | (flat[1::2] << 4)
    if bits == 6:
        n_bytes = -(-flat.size * 6 // 8)
        pad = (-flat.size) % 4
        if pad:
            flat = np.concatenate([flat, np.zeros(pad, np.uint8)])
        g = flat.reshape(-1, 4).astype(np.uint32)
        word = (g[:, 0] << 18) | (g[:, 1] << 12) | (g[:, 2] << 6) | g[:, 3]
        out = np.empty((g.shape[0], 3), np.uint8)
        out[:, 0] = word >> 16
        out[:, 1] = (word >> 8) & 0xFF
        out[:, 2] = word & 0xFF
        return out.reshape(-1)[:n_bytes]
    raise ValueError(f"pack_codes packs 4- or 6-bit codes, not {bits}-bit")


def unpack_codes(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The first ``count`` codes of :func:`pack_codes` output (flat uint8)."""
    packed = np.asarray(packed, dtype=np.uint8).reshape(-1)
    if bits == 4:
        out = np.empty(packed.size * 2, np.uint8)
        out[0::2] = packed & 0x0F
        out[1::2] = packed >> 4
    elif bits == 6:
        if packed.size % 3:
            packed = np.concatenate([packed, np.zeros(3 - packed.size % 3, np.uint8)])
        b = packed.reshape(-1, 3).astype(np.uint32)
        word = (b[:, 0] << 16) | (b[:, 1] << 8) | b[:, 2]
        out = np.stack([(word >> s) & 0x3F for s in (18, 12, 6, 0)], axis=1).astype(np.uint8)
        out = out.reshape(-1)
    else:
        raise ValueError(f"unpack_codes unpacks 4- or 6-bit codes, not {bits}-bit")
    if out.size < count:
        raise ValueError(f"{packed.size} packed bytes hold {out.size} codes, fewer than {count}")
    return out[:count]
