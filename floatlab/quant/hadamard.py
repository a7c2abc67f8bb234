"""The random Hadamard transform NVFP4 training applies to blocks of 16 (``Scheme(hadamard=16)``).

The 16-point matrix is the one of NVIDIA's NVFP4 recipe (Transformer Engine's
``NVFP4BlockScaling``, RHT on the wgrad operands): ``R = diag(s) H_16 / 4`` with Sylvester's
Hadamard matrix ``H_16`` and Transformer Engine's fixed sign vector ``s``
(:data:`WGRAD_SIGNS`), one matrix shared by every operand and layer. A block ``v`` of 16
values (a row vector) becomes ``v R``: each value's sign flipped by ``s``, then the Hadamard
transform. Because one R rotates both operands of a GEMM along its inner dimension,
``(aR)(bR)ᵀ = a R Rᵀ bᵀ = a bᵀ``: the GEMM may multiply the rotated operands directly (the wgrad
GEMM does; see :mod:`floatlab.mixed.recipe_gemm`). Other sizes use signs drawn once from
``np.random.default_rng(HADAMARD_SEED)``.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["hadamard_matrix", "HADAMARD_SEED", "WGRAD_SIGNS", "apply_hadamard"]

HADAMARD_SEED = 0x5EED  # the fixed seed of the sign vector for sizes other than 16

# Transformer Engine's hard-coded random signs for the 16-point wgrad RHT
# (transformer_engine/pytorch/tensor/nvfp4_tensor.py, get_wgrad_sign_vector).
WGRAD_SIGNS = (1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1)


@lru_cache(maxsize=16)
def hadamard_matrix(n: int, dtype: Any = np.float64) -> np.ndarray:
    """The orthogonal random Hadamard matrix ``diag(signs) @ H_n / sqrt(n)`` (read-only).

    ``H_n`` is Sylvester's Hadamard matrix; the signs are :data:`WGRAD_SIGNS` for n = 16 (the
    matrix of NVIDIA's NVFP4 recipe), else a fixed vector drawn from
    ``np.random.default_rng(HADAMARD_SEED)``. Blocks ``v`` of n values become ``v @ R``; the
    inverse is ``w @ R.T``. For n = 4**k the entries are exact powers of two (±1/4 for 16), so
    ``R @ R.T`` is exactly the identity.

    >>> R = hadamard_matrix(16)
    >>> bool(np.array_equal(R @ R.T, np.eye(16))), R[0, :4].tolist()
    (True, [0.25, 0.25, 0.25, 0.25])
    """
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    signs = np.array(WGRAD_SIGNS, dtype=np.float64) if n == len(WGRAD_SIGNS) else \
        np.random.default_rng(HADAMARD_SEED).choice([-1.0, 1.0], size=n)
    out = (signs[:, None] * h / math.sqrt(n)).astype(dtype)
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
    with np.errstate(under="ignore"):  # tiny float32 values: the transform's own rounding
        out = (blocks @ (R.T if inverse else R)).reshape(moved.shape)
    return out if last else np.moveaxis(out, -1, axis)
