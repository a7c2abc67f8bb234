"""What a recipe stores: the bytes of quantised tensors and MS-AMP O3's FP8 weights.

:func:`operand_nbytes` is the real storage of ``shape`` values under a recipe operand spec --
element codes plus *every* scale the scheme keeps (one float32 per row for rowwise, one E8M0
per 32 for MX, one E4M3 per 16 plus the float32 tensor scale for NVFP4, ...). It is the
``nbytes`` of the :class:`floatlab.quant.quantize.QuantizedTensor` that
:func:`floatlab.quant.quantize.quantize` builds for that shape, so the count can never drift
from the storage the quantiser makes (the sizes depend on the shape only; they are cached).

:func:`held_weights` keeps MS-AMP O3's weights: after each optimizer update the FP16 master is
cast once to per-tensor scaled E4M3 (codes plus one power-of-two scale, as MS-AMP's
``lp.copy_(hp.cast(lp.qtype))`` after its optimizer step; :func:`held_tensor` shows them as a
:class:`~floatlab.quant.quantize.QuantizedTensor`), and the forward and dgrad GEMMs read that
stored copy until the next update.

>>> from floatlab.quant.scheme import get_scheme
>>> operand_nbytes(get_scheme("fp8_rowwise"), (64, 32))     # 64 * 32 codes + 64 float32 scales
('fp8_rowwise', 2304)
>>> operand_nbytes(get_scheme("nvfp4"), (64, 32))           # 4 bits + E4M3 per 16 + 4
('nvfp4', 1156)
"""

from __future__ import annotations

import math
import weakref
from functools import lru_cache
from typing import Any

import numpy as np

from floatlab.formats import Format
from floatlab.mixed.policy import nbytes
from floatlab.mixed.recipe import Operand, RowScaling, TensorScaling
from floatlab.quant.quantize import QuantizedTensor, fake_quantize, quantize
from floatlab.quant.scheme import Scheme

__all__ = ["operand_nbytes", "held_weights", "held_tensor", "record_saved_activation",
           "spec_label"]


def spec_label(spec: Operand, compute: Format) -> str:
    """The name a spec's bytes are filed under in ``bytes_held``."""
    if spec is None:
        return compute.name
    if isinstance(spec, Scheme):
        return spec.name or spec.describe()
    return spec.fmt.name if isinstance(spec, TensorScaling) else spec.name  # RowScaling too


@lru_cache(maxsize=512)
def _scheme_nbytes(spec: Scheme, shape: tuple[int, ...]) -> int:
    # The storage does not depend on the values: quantise zeros of the shape once. Stochastic
    # rounding needs a generator but changes no size, so measure the nearest-even twin (with
    # no random_bits, which only stochastic rounding takes: NVFP4's SR gradients have 8).
    probe = spec if spec.rounding != "stochastic" else spec.replace(rounding="nearest_even",
                                                                   random_bits=None)
    return int(quantize(np.zeros(shape, np.float32), probe).nbytes)


def operand_nbytes(spec: Operand, shape: tuple[int, ...], compute: Format | None = None
                   ) -> tuple[str, int]:
    """``(label, bytes)`` of a tensor of ``shape`` (inner dimension last) stored under
    ``spec``: a Scheme's codes and all its scales; a TensorScaling's FP8 codes plus one float32
    scale; a Format's values; None: the values in ``compute`` (the policy's compute format).

    >>> from floatlab import get_format
    >>> operand_nbytes(TensorScaling("e4m3fn"), (8, 4))
    ('float8_e4m3fn', 36)
    >>> operand_nbytes(None, (8, 4), get_format("bf16"))
    ('bfloat16', 64)
    """
    shape = tuple(int(n) for n in np.atleast_1d(shape)) if not isinstance(shape, tuple) \
        else tuple(int(n) for n in shape)
    n = math.prod(shape)
    if spec is None and compute is None:
        raise ValueError("operand_nbytes(None, shape) needs compute=: the format the "
                         "unquantised operand is held in")
    if spec is not None and not isinstance(spec, (Scheme, TensorScaling, RowScaling, Format)):
        raise TypeError(f"an operand spec is a Scheme, a TensorScaling, a RowScaling, a Format "
                        f"or None, got {spec!r}")
    label = spec_label(spec, compute)
    if isinstance(spec, Scheme):
        return label, _scheme_nbytes(spec, shape)
    if isinstance(spec, TensorScaling):
        return label, nbytes(spec.fmt, n) + 4
    if isinstance(spec, RowScaling):  # the codes and one float32 scale per row
        return label, nbytes(spec.fmt, n) + 4 * (n // shape[-1] if shape[-1] else 0)
    if isinstance(spec, Format):
        return label, nbytes(spec, n)
    return label, nbytes(compute, n)


# One store per RecipeRun (weak: a finished run takes its weights with it):
# key -> (the parameter's data array, its values inner-last, the stored values, the spec).
_HELD: weakref.WeakKeyDictionary[Any, dict[str, tuple[Any, ...]]] = weakref.WeakKeyDictionary()


def held_weights(w: Any, w_rows: np.ndarray, spec: Scheme, run: Any, key: str) -> np.ndarray:
    """The stored low-precision weights of parameter ``w`` (``w_rows``: its values with the
    inner dimension last), as the GEMMs read them.

    A new copy is made when ``w.data`` is a new array (the optimizers assign a new array to
    every parameter they update), i.e. once per update, and its telemetry is recorded under
    ``key``; until then every GEMM reads the same stored values. They are the dequantised codes
    of ``quantize(w_rows, spec)`` (:func:`held_tensor` gives the codes and the scale).

    >>> from floatlab.mixed import parameter
    >>> from floatlab.mixed.recipe import msamp_scheme
    >>> from floatlab.mixed.recipe_gemm import RecipeRun
    >>> run, w = RecipeRun(), parameter(np.array([[0.3, -1.1]], np.float32))
    >>> held_weights(w, w.data, msamp_scheme(), run, "linear0.weights").tolist()  # scale 2**-8
    [[0.3125, -1.125]]
    >>> held_tensor(run, "linear0.weights").codes.tolist()      # E4M3 codes of 80 and -288
    [[106, 249]]
    """
    from floatlab.mixed.recipe_gemm import OperandStats, quantize_operand

    store = _HELD.setdefault(run, {})
    hit = store.get(key)
    if hit is not None and hit[0] is w.data:
        return hit[2]
    if run.telemetry:
        try:
            values, st = fake_quantize(w_rows, spec, stats=True)
        except ValueError:  # inf / NaN weights: quantize_operand's NaN (or its error)
            values = quantize_operand(w_rows, spec, run, key)
        else:
            amax = float(np.max(np.abs(w_rows))) if w_rows.size else 0.0
            scale = _tensor_scale(amax, spec)
            run.record(key, OperandStats(amax, scale, st.clipped_fraction, st.flushed_fraction,
                                         st.qsnr_db, False, w_rows.size))
    elif spec.rounding != "stochastic":  # the same values by the operands' fast paths
        values = quantize_operand(w_rows, spec, run, key)  # (O3: 53 -> 34 us, 64 x 64)
    else:
        values = fake_quantize(w_rows, spec)
    store[key] = (w.data, w_rows, values, spec)
    return values


def held_tensor(run: Any, key: str) -> QuantizedTensor:
    """The stored weights of ``key`` in ``run`` as codes and scale (a QuantizedTensor whose
    dequantised values are exactly what :func:`held_weights` hands the GEMMs)."""
    hit = _HELD.get(run, {}).get(key)
    if hit is None:
        raise KeyError(f"no stored weights {key!r} in this run; the recipe's weights are made "
                       "on the first GEMM after each update")
    return quantize(hit[1], hit[3])


def _tensor_scale(amax: float, spec: Scheme) -> float:
    if spec.block != "tensor":
        return math.nan
    from floatlab.quant.scales import block_scales

    return float(block_scales(np.array([amax]), spec, want_codes=False)[3][0])


def record_saved_activation(spec: Operand, shape: tuple[int, ...], compute: Format) -> None:
    """Count a GEMM input kept for the backward pass (the copy the wgrad GEMM reads) in the
    step's activation bytes, with its scales, when a training step is being recorded."""
    from floatlab.mixed.tensor import _scope

    scope = _scope()
    if scope.stats is None or not scope.grad_enabled:
        return
    label, n = operand_nbytes(spec, tuple(shape), compute)
    scope.stats.activation_bytes[label] += n
