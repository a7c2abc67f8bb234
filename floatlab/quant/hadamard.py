"""The random Hadamard transform NVFP4 training applies to blocks of 16 (``Scheme(hadamard=16)``).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["hadamard_matrix", "HADAMARD_SEED", "apply_hadamard"]

HADAMARD_SEED = 0x5EED  # the fixed seed of the random sign vector (documented, reproducible)


@lru_cache(maxsize=16)
def hadamard_matrix(n: int, dtype: Any = np.float64) -> np.ndarray:
    """The orthogonal random Hadamard matrix ``H_n @ diag(signs) / sqrt(n)`` (read-only).

    ``H_n`` is Sylvester's Hadamard matrix; the signs are a fixed vector drawn from
    ``np.random.default_rng(HADAMARD_SEED)``. Blocks ``v`` of n values become ``v @ R``; the
    inverse is ``w @ R.T``.

    >>> R = hadamard_matrix(16)
    >>> bool(np.allclose(R @ R.T, np.eye(16)))
    True
    """
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    signs = np.random.default_rng(HADAMARD_SEED).choice([-1.0, 1.0], size=n)
    out = (h * signs[None, :] / math.sqrt(n)).astype(dtype)
    out.setflags(write=False)
    return out


def apply_hadamard(arr: np.ndarray, h: int, axis: int, inverse: bool = False) -> np.ndarray:
    """``v @ R`` (or ``v @ R.T``) on every block of ``h`` values along ``axis``."""
    if not -arr.ndim <= axis < arr.ndim:
        raise ValueError(f"axis {axis} is out of range for an array of shape {arr.shape}")
    axis %= arr.ndim
    if arr.shape[axis] % h:
        raise ValueError(f"hadamard={h} needs the length of axis {axis} ({arr.shape[axis]}) to "
                         f"be a multiple of {h}; pad the tensor")
    last = axis == arr.ndim - 1  # the usual case: no axis moves (their checks cost per call)
    moved = arr if last else np.moveaxis(arr, axis, -1)
    R = hadamard_matrix(h, arr.dtype)
    blocks = moved.reshape(-1, h)
    out = (blocks @ (R.T if inverse else R)).reshape(moved.shape)
    return out if last else np.moveaxis(out, -1, axis)
