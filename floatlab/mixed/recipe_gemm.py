"""Running a recipe's GEMMs in the lab: quantised operands, accumulators, per-operand telemetry.

:func:`recipe_linear` is what :func:`floatlab.mixed.linear` calls when the active policy carries
a :class:`~floatlab.mixed.recipe.Recipe`. State that lives across steps -- delayed-scaling amax
histories per layer and operand, the generator of stochastic rounding, the telemetry -- sits in
a :class:`RecipeRun`; the Trainer opens one per run (:func:`recipe_run`), code outside a Trainer
gets a fresh one per policy block.

Each operand's record per step (:class:`OperandStats`): amax, the scale used, the fractions of
values clipped (saturated) and flushed to zero, the QSNR, and for delayed scaling whether the
scale lagged (``amax * scale`` beyond the format's max: the history's scale was too large for
this step's amax).

>>> import numpy as np
>>> from floatlab.mixed import Tensor, parameter, linear, use_precision
>>> with use_precision("fp8-current"), recipe_run() as run:
...     w = parameter(np.eye(2, dtype=np.float32))
...     y = linear(Tensor([[1.0, 0.3]]), w)
>>> y.data.tolist()     # 0.3 * 448 = 134.4 rounds to E4M3's 128: 128 / 448, then bf16
[[1.0, 0.28515625]]
>>> run.end_step()                       # the Trainer closes each step so
{'clipped': 0.0, 'flushed': 0.0, 'lag_events': 0.0}
>>> sorted(run.last_step)
['linear0.forward.a', 'linear0.forward.b']
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from floatlab.accumulate import Accumulator
from floatlab.accumulate import matmul as accumulate_matmul
from floatlab.formats import Format
from floatlab.mixed.checks import flag
from floatlab.mixed.checks import seed as seed_rng
from floatlab.mixed.pow2_tensor import (
    _TWIN_LIMIT,
    _pow2_tensor_fake_quantize,
    _pow2_tensor_twin,
)
from floatlab.mixed.promoted_gemm import TiledOperand, promoted_matmul, tiled_operand
from floatlab.mixed.recipe import Gemm, Operand, Recipe, RowScaling, TensorScaling, is_tensorwise
from floatlab.quant.axiswise import fake_quantize_rowwise
from floatlab.quant.elements import _format_fits_float32
from floatlab.quant.nvfp4_fast import fake_quantize_nvfp4
from floatlab.quant.quantize import fake_quantize, qsnr_db
from floatlab.quant.scalers import CurrentScaling, DelayedScaling
from floatlab.quant.scheme import Scheme
from floatlab.rounding import round as round_to_format

__all__ = ["RecipeRun", "OperandStats", "recipe_run", "current_run", "recipe_linear",
           "quantize_operand", "gemm"]


@dataclass(frozen=True)
class OperandStats:
    """What quantising one GEMM operand did in one step (see the module docstring). ``amax``
    is Transformer Engine's (NaN entries ignored, an inf kept: see :func:`_te_amax`)."""

    amax: float
    scale: float
    clipped: float
    flushed: float
    qsnr_db: float
    lag: bool
    n: int
    limit: float = math.nan  # the largest amax the scale allows (fmt.max / scale), per-tensor


class RecipeRun:
    """Per-run state of a recipe: scaling histories, the rng, telemetry.

    ``history[key]`` lists the :class:`OperandStats` of operand ``key`` ("linear0.forward.a")
    per recorded step; :meth:`end_step` closes a step and returns its summary.
    """

    def __init__(self, seed: int = 0, telemetry: bool = True) -> None:
        self.rng = seed_rng("RecipeRun: seed", seed)
        self.telemetry = flag("RecipeRun: telemetry", telemetry)  # "False" is truthy
        self.layers: dict[int, tuple[Any, str]] = {}  # id(weight) -> (weight, name)
        self.scalers: dict[str, CurrentScaling | DelayedScaling] = {}
        self.history: dict[str, list[OperandStats]] = {}
        self.last_step: dict[str, OperandStats] = {}
        self._pending: dict[str, OperandStats] = {}

    def layer(self, weight: Any) -> str:
        hit = self.layers.get(id(weight))
        if hit is None or hit[0] is not weight:
            hit = self.layers[id(weight)] = (weight, f"linear{len(self.layers)}")
        return hit[1]

    def record(self, key: str, stats: OperandStats) -> None:
        if self.telemetry:
            self._pending[key] = stats

    def end_step(self) -> dict[str, float]:
        """Close the step: append its records to ``history``; return the mean clipped and
        flushed fractions over the step's operands (weighted by size) and the lag events."""
        step, self._pending = self._pending, {}
        self.last_step = step
        for key, s in step.items():
            self.history.setdefault(key, []).append(s)
        n = sum(s.n for s in step.values())
        if not n:
            return {}
        return {"clipped": sum(s.clipped * s.n for s in step.values()) / n,
                "flushed": sum(s.flushed * s.n for s in step.values()) / n,
                "lag_events": float(sum(s.lag for s in step.values()))}

    def series(self, key: str, field: str) -> np.ndarray:
        """One field of one operand over the recorded steps, e.g. ``series("linear0.dgrad.a",
        "qsnr_db")``."""
        if key not in self.history:
            raise KeyError(f"no operand {key!r}; recorded: {', '.join(self.history)}")
        return np.array([getattr(s, field) for s in self.history[key]])


_RUN: ContextVar[RecipeRun | None] = ContextVar("floatlab_recipe_run", default=None)


@contextmanager
def recipe_run(seed: int = 0, telemetry: bool = True, *, run: RecipeRun | None = None
               ) -> Iterator[RecipeRun]:
    """Open a new :class:`RecipeRun` for the ops inside the block, or resume ``run`` (a user's
    own training loop enters its run once per step, so histories carry over)."""
    if run is not None and not isinstance(run, RecipeRun):
        raise TypeError(f"run must be a RecipeRun, got {type(run).__name__}")
    run = run if run is not None else RecipeRun(seed, telemetry)
    token = _RUN.set(run)
    try:
        yield run
    finally:
        _RUN.reset(token)


_FALLBACK: dict[int, RecipeRun] = {}


def current_run(recipe: Recipe) -> RecipeRun:
    """The open run, else one per recipe object (kept for the process: outside a Trainer the
    delayed-scaling histories carry over between blocks using the same recipe)."""
    run = _RUN.get()
    if run is None:
        run = _FALLBACK.get(id(recipe))
        if run is None:
            run = _FALLBACK[id(recipe)] = RecipeRun()
            run._recipe = recipe  # keeps id(recipe) from being reused
    return run


# --------------------------------------------------------------------------- operands

def _flushed(x: np.ndarray, q: np.ndarray) -> float:
    nonzero = x != 0
    n = int(np.count_nonzero(nonzero))
    return int(np.count_nonzero(nonzero & (q == 0))) / n if n else 0.0


def quantize_operand(values: np.ndarray, spec: Operand, run: RecipeRun, key: str, *,
                     blas: bool = False, rotated: bool = False, codes: bool = False
                     ) -> np.ndarray | TiledOperand:
    """``values`` (inner dimension last) as the GEMM reads them under ``spec``: the dequantised
    values of the quantised operand (float64, or float32 for float32 block-scheme inputs).

    ``rotated=True``: a Scheme with a Hadamard transform gives its values in the rotated basis
    (:func:`~floatlab.quant.quantize.fake_quantize`'s ``rotated``), for a GEMM whose other
    operand is rotated by the same matrix (NVFP4's wgrad); the telemetry's QSNR and flushed
    fraction then compare the rotated operand with the rotated input.

    A :class:`TensorScaling` operand follows Transformer Engine's float32 order
    (:mod:`floatlab.quant.delayed`, ``float32=True``), so its dequantised values are float32
    numbers: ``x_fp8 * float32(1 / scale)``.

    ``blas=True``: the caller only feeds the result to float32 BLAS products (:func:`gemm`
    with no Accumulator), which read ``values.astype(float32)``; a per-tensor operand is then
    given as those float32 values directly (:meth:`ScaledTensor.dequantize`): the same
    numbers, without the widened copy. (Only without telemetry, which compares float64 values.)

    ``codes=True`` (a Scheme; :class:`~floatlab.mixed.recipe.Gemm` ``codes``): the element
    values and the tile scales unmultiplied, a
    :class:`~floatlab.mixed.promoted_gemm.TiledOperand` for :func:`gemm`'s promoted path; the
    telemetry records the same statistics (of the same dequantised values).

    >>> run = RecipeRun()
    >>> quantize_operand(np.array([[0.3, -2.0]]), TensorScaling("e4m3fn"), run, "x").tolist()
    [[0.2857142984867096, -2.0]]
    >>> run._pending["x"].scale, run._pending["x"].clipped
    (224.0, 0.0)

    An operand holding inf or NaN (a diverging or overflowing step) has no amax to scale
    from. Delayed scaling records it and keeps its scale, as Transformer Engine and MS-AMP do
    (:class:`~floatlab.quant.scalers.DelayedScaling` ``nonfinite="record"``); every other
    spec's quantiser refuses it, and the operand is then given as NaN throughout (a NaN
    scale, as OCP's reference code gives a block holding NaN or inf; Transformer Engine's
    current scaling would take scale 1.0 instead, a difference in a step that is lost either
    way): the product carries the NaN, so a GradScaler skips the step, or the History
    records the NaN, as for the precisions without a recipe.

    >>> from floatlab.mixed.recipe import msamp_scheme
    >>> bad = quantize_operand(np.array([[np.inf, 1.0]]), msamp_scheme(), run, "y")
    >>> bad.tolist(), run._pending["y"].amax
    ([[nan, nan]], inf)

    The amax recorded is Transformer Engine's: NaN entries are ignored, an inf is kept.

    >>> _ = quantize_operand(np.array([[np.nan, -3.0]]), msamp_scheme(), run, "y")
    >>> run._pending["y"].amax
    3.0
    """
    if spec is None:
        return values
    try:
        return _quantize_operand(values, spec, run, key, blas=blas, rotated=rotated,
                                 codes=codes)
    except ValueError:
        x = np.asarray(values)
        if x.dtype.kind != "f" or np.isfinite(x).all():
            raise
    # (the quantisers raise before they record or draw random numbers)
    if run.telemetry:
        run.record(key, OperandStats(_te_amax(x), math.nan, 0.0, 0.0, math.nan, False, x.size))
    return np.full(x.shape, np.nan, np.float32 if blas else np.float64)


def _te_amax(x: np.ndarray) -> float:
    """The amax Transformer Engine records for ``x`` (the telemetry's): its amax kernels reduce
    ``fmaxf(|x|, max)`` from 0, so NaN entries are ignored (an all-NaN operand records 0) and
    an inf gives inf; max|x| for a finite ``x``. It is what a delayed scaler's history holds
    (:func:`floatlab.quant.delayed._as_float_with_te_amax`); NumPy's max gave NaN instead."""
    peak = float(np.max(np.abs(x)))
    return peak if peak == peak else float(np.fmax.reduce(np.abs(x), axis=None, initial=0.0))


def _quantize_operand(values: np.ndarray, spec: Operand, run: RecipeRun, key: str, *,
                      blas: bool, rotated: bool, codes: bool) -> np.ndarray | TiledOperand:
    """:func:`quantize_operand` for finite values (a non-finite operand raises ValueError
    unless its spec is delayed scaling)."""
    x = np.asarray(values)
    # amax feeds the telemetry (and its lag flag) only: not computed when telemetry is off.
    amax = _te_amax(x) if x.size and run.telemetry else 0.0
    lag = False
    if isinstance(spec, Format):
        if blas and not run.telemetry and _format_fits_float32(spec):
            # BLAS reads float32 copies of q: round straight to float32 (the same numbers, as
            # the format's values are float32 numbers) and skip the clipped count, which only
            # the telemetry reads; the saturation below changes non-finite values only
            q = round_to_format(x, spec, dtype=np.float32)
            if np.isfinite(q).all():
                return q
            return np.where(np.isfinite(q), q, np.sign(x) * spec.max).astype(np.float32)
        q = round_to_format(x, spec, dtype=np.float64)
        scale = 1.0
        clipped = float(np.count_nonzero(~np.isfinite(q) | (np.abs(x) > spec.max))) / x.size
        q = np.where(np.isfinite(q), q, np.sign(x) * spec.max) if clipped else q
    elif isinstance(spec, TensorScaling):
        # Transformer Engine's float32 order (floatlab.quant.delayed): float32 scale, float32
        # product x * scale rounded to FP8, dequantised as x_fp8 * float32(1 / scale).
        scaler = run.scalers.get(key)
        if scaler is None:
            scaler = run.scalers[key] = (
                DelayedScaling(spec.fmt, spec.history_len, spec.margin,
                               power_of_two=spec.power_of_two,
                               amax_compute_algo=spec.amax_compute_algo, float32=True,
                               nonfinite="record")
                if spec.delayed else CurrentScaling(spec.fmt, spec.margin, float32=True,
                                                    power_of_two=spec.power_of_two))
        if blas and not run.telemetry:
            fused = _pow2_tensor_fake_quantize(scaler, x)
            if fused is not None:
                return fused
        st = scaler.quantize(x)
        if blas and not run.telemetry:
            return st.dequantize(np.float32)
        q, scale = st.dequantize(), st.scale
        clipped = st.n_saturated / x.size
        # the scaled amax in the quantiser's float32 arithmetic beyond max: the history's
        # scale was too large for this step (it saturates the amax element)
        lag = spec.delayed and float(np.float32(amax) * np.float32(scale)) > spec.fmt.max
    elif isinstance(spec, RowScaling):  # torchao's float32 order (floatlab.quant.axiswise)
        q, n = fake_quantize_rowwise(x, spec.fmt, power_of_two=spec.power_of_two,
                                     count=run.telemetry)
        if not run.telemetry:
            return q
        q, scale, clipped = q.astype(np.float64), math.nan, n / x.size
    elif isinstance(spec, Scheme):
        rng = run.rng if spec.rounding == "stochastic" else None
        if codes:
            q, st = tiled_operand(x, spec, rng, stats=run.telemetry)
        elif not run.telemetry:
            # NVFP4's operands: the fused path (proved equal; None where it does not apply)
            fused = fake_quantize_nvfp4(x, spec, rng, rotated=rotated, float32=blas)
            if fused is not None:
                return fused
            twin = _pow2_tensor_twin(spec) if x.dtype == np.float32 else None
            if twin is not None:  # MS-AMP's per-tensor operands: the same values, faster
                fused = _pow2_tensor_fake_quantize(twin, x)
                if fused is not None:
                    return fused
                st = twin.quantize(x)
                if st.scale != _TWIN_LIMIT:
                    return st.dequantize(np.float32)
            return fake_quantize(x, spec, rng, rotated=rotated)
        else:
            q, st = fake_quantize(x, spec, rng, stats=True, rotated=rotated)
        if run.telemetry:  # the stats of the same dequantised values, codes or not
            run.record(key, OperandStats(amax, math.nan, st.clipped_fraction,
                                         st.flushed_fraction, st.qsnr_db, False, x.size))
        return q
    else:  # pragma: no cover - Gemm checks the spec types
        raise TypeError(f"unknown operand spec {spec!r}")
    if run.telemetry:
        limit = float(spec.fmt.max / scale) if isinstance(spec, TensorScaling) else math.nan
        run.record(key, OperandStats(amax, float(scale), clipped, _flushed(x, q), qsnr_db(x, q),
                                     bool(lag), x.size, limit))
    return q


def gemm(a: np.ndarray | TiledOperand, b_rows: np.ndarray | TiledOperand,
         accumulate: Accumulator | None) -> np.ndarray:
    """``a @ b_rows.T``.

    * :class:`~floatlab.mixed.promoted_gemm.TiledOperand` operands (``Gemm(codes=True)``,
      deepseek-fp8): DeepSeek-V3's kernel, :func:`~floatlab.mixed.promoted_gemm.promoted_matmul`
      -- ``accumulate`` sums the products of the E4M3 codes per 128-tile along K, and each
      partial sum is scaled by the two tiles' float32 scales as it is promoted into float32.
    * dequantised operands, ``accumulate`` None: float32 BLAS (a tensor core's float32
      accumulator);
    * dequantised operands and an Accumulator: :func:`floatlab.matmul` (exact float64 products
      of the dequantised values, each sum rounded by the accumulator).

    Dequantised operands are a simplification where the kernels multiply codes and scale the
    sums: exact for power-of-two scales (MX, E8M0) on the float64 path; with float32 scales
    (per-tensor, rowwise, NVFP4) the float32 path adds one float32 rounding (2**-24 relative)
    per operand value, far below the 8- and 4-bit elements' own error, and a float32 tensor
    core accumulator is modelled as BLAS. It is not harmless for a narrow truncating
    accumulator, whose truncations then fall on the bits of the scaled products; that is why
    deepseek-fp8 takes the codes path."""
    if isinstance(a, TiledOperand) and isinstance(b_rows, TiledOperand):
        return promoted_matmul(a, b_rows, accumulate)
    if isinstance(a, TiledOperand) or isinstance(b_rows, TiledOperand):
        # one operand is the NaN of a non-finite input (quantize_operand): so is the product
        rows = [op.elements.shape[0] if isinstance(op, TiledOperand) else op.shape[0]
                for op in (a, b_rows)]
        nan = np.full(rows, np.nan, np.float32)
        return nan if accumulate is None else nan.astype(np.float64)
    if accumulate is None:
        return a.astype(np.float32, copy=False) @ b_rows.T.astype(np.float32, copy=False)
    return accumulate_matmul(np.asarray(a, np.float64), np.asarray(b_rows, np.float64).T,
                             accumulate)


# --------------------------------------------------------------------------- the layer

def recipe_linear(x: Any, w: Any, bias: Any, transpose_w: bool, policy: Any) -> Any:
    """``x·Wᵀ + bias`` (``transpose_w``; else ``x·W``) under ``policy.recipe``: the three
    GEMMs of the recipe, results rounded to the policy's compute format, gradients as
    straight-through estimators (backward reads the quantised operands)."""
    from floatlab.mixed.recipe_storage import held_weights, record_saved_activation
    from floatlab.mixed.tensor import _result, _scope, _send, quantize

    recipe: Recipe = policy.recipe
    run = current_run(recipe)
    layer = run.layer(w)
    fwd, dgr, wgr = recipe.forward, recipe.dgrad, recipe.wgrad
    fmt = policy.compute
    xv = x.data
    w_rows = w.data if transpose_w else w.data.T            # (N, K): inner dimension last
    # Whether each operand quantised once is read by float32 BLAS products only (see
    # quantize_operand's blas): x by forward (and wgrad when reused), W by forward (and dgrad),
    # g by dgrad (and wgrad).
    x_blas, w_blas, g_blas = (
        first.accumulate is None and (not _same(a, b) or second.accumulate is None)
        for first, second, a, b in ((fwd, wgr, fwd.a, wgr.b), (fwd, dgr, fwd.b, dgr.b),
                                    (dgr, wgr, dgr.a, wgr.a)))
    xq = quantize_operand(xv, fwd.a, run, f"{layer}.forward.a", blas=x_blas, codes=fwd.codes)
    if recipe.weights is not None:  # MS-AMP O3: the FP8 weights stored after each update
        wq = held_weights(w, w_rows, recipe.weights, run, f"{layer}.weights")
    else:
        wq = quantize_operand(w_rows, fwd.b, run, f"{layer}.forward.b", blas=w_blas,
                              codes=fwd.codes)
    if w.requires_grad and _scope().grad_enabled:  # the backward's wgrad will run
        _check_wgrad_hadamard(wgr, xv.shape[0], recipe.name)
    # the input copy the wgrad GEMM reads, with its scales, in the step's activation bytes
    record_saved_activation(*((fwd.a, xv.shape) if _same(fwd.a, wgr.b) else
                              (wgr.b, xv.shape[::-1])), fmt)
    values = gemm(xq, wq, fwd.accumulate)
    if bias is not None:  # into the GEMM's fresh result when the sum keeps its dtype
        b = bias.data
        values = np.add(values, b, out=values) if np.result_type(values, b) == values.dtype \
            else values + b
    out = quantize(values, fmt)
    parents = (x, w) if bias is None else (x, w, bias)
    grad_fmt = policy.weights

    def backward(g: np.ndarray) -> None:
        # The first layer's input needs no gradient, so its dgrad GEMM is not run; its g copy is
        # still made when wgrad reads it, or telemetry records a deterministic one (see
        # _unread_copy_skippable).
        gq = None if not x.requires_grad and _unread_copy_skippable(dgr.a, wgr.a, run) else \
            quantize_operand(g, dgr.a, run, f"{layer}.dgrad.a", blas=g_blas, codes=dgr.codes)
        if x.requires_grad:
            if _reads_copy(fwd, fwd.b, dgr, dgr.b):
                wt = wq.T
            elif not run.telemetry and recipe.weights is None and fwd.codes == dgr.codes \
                    and _tiles_transpose(fwd.b, dgr.b):
                # the same values (codes and tile scales), laid out as before
                wt = wq.T if fwd.codes else np.ascontiguousarray(wq.T)
            else:
                wt = quantize_operand(w_rows.T, dgr.b, run, f"{layer}.dgrad.b",
                                      blas=dgr.accumulate is None, codes=dgr.codes)
            _send(x, gemm(gq, wt, dgr.accumulate), fmt)
        if w.requires_grad:
            blas = wgr.accumulate is None
            # NVFP4's RHT: both operands rotated along the batch axis by the same matrix and
            # multiplied as they are, as the hardware does (see _wgrad_rotated)
            rotated = _wgrad_rotated(wgr.a, wgr.b)
            gt = gq.T if _reads_copy(dgr, dgr.a, wgr, wgr.a) else quantize_operand(
                transposed(g), wgr.a, run, f"{layer}.wgrad.a", blas=blas, rotated=rotated,
                codes=wgr.codes)
            xt = xq.T if _reads_copy(fwd, fwd.a, wgr, wgr.b) else quantize_operand(
                transposed(xv), wgr.b, run, f"{layer}.wgrad.b", blas=blas, rotated=rotated,
                codes=wgr.codes)
            dw = gemm(gt, xt, wgr.accumulate)                 # (N, K)
            if recipe.weight_grad is not None:
                dw = quantize_operand(dw, recipe.weight_grad, run, f"{layer}.weight_grad")
            _send(w, dw if transpose_w else dw.T, grad_fmt)
        if bias is not None and bias.requires_grad:
            _send(bias, g.sum(axis=0), grad_fmt)

    return _result(out, fmt, parents, backward, "linear" if transpose_w else "matmul")


def transposed(a: np.ndarray) -> np.ndarray:
    """``np.ascontiguousarray(a.T)``: the wgrad operands' columnwise copies (inner dimension,
    the batch, last). A 2-D copy from rows wider than a few cache lines is made in blocks of
    rows of about 32 KiB (each block's transpose reads and writes within the L1 cache; NumPy's
    own transposed copy strides over all of ``a`` for every output row): 3x faster on the
    lab's 512 x 64 float32 activations. The same values in the same layout (a copy is a
    copy; tests/test_mixed_recipe_fastpaths.py checks it).
    """
    if a.ndim != 2 or not a.flags.c_contiguous or a.size == 0:
        return np.ascontiguousarray(a.T)
    rows, cols = a.shape
    step = max(_TRANSPOSE_BLOCK_BYTES // (cols * a.itemsize), 8)
    if rows <= step:
        return np.ascontiguousarray(a.T)
    out = np.empty((cols, rows), a.dtype)
    for start in range(0, rows, step):
        out[:, start:start + step] = a[start:start + step].T
    return out


_TRANSPOSE_BLOCK_BYTES = 1 << 15


def _wgrad_rotated(a: Operand, b: Operand) -> bool:
    """Whether the wgrad GEMM multiplies its operands in the Hadamard-rotated basis.

    NVFP4 training (Transformer Engine's NVFP4BlockScaling, NVIDIA's NVFP4 recipe) rotates the
    columnwise copies of the input and of the output gradient, blocks of 16 along the batch
    axis (the wgrad GEMM's inner dimension), by one fixed matrix R shared by every operand and
    layer, quantises the rotated tensors and feeds their codes to the GEMM: ``(gᵀR)(xᵀR)ᵀ =
    gᵀ R Rᵀ x = gᵀ x`` because R is orthogonal, so nothing is inverted. The lab multiplies the
    rotated dequantised operands the same way. That needs the same transform on both (the
    block size along the inner axis, the last of the 2-D operands; the lab's R is one fixed
    matrix per size); with only one operand rotated, or different sizes, each operand is
    turned back instead.
    """
    return (isinstance(a, Scheme) and isinstance(b, Scheme) and bool(a.hadamard)
            and a.hadamard == b.hadamard and a.axis in (-1, 1) and b.axis in (-1, 1))


def _check_wgrad_hadamard(wgrad: Gemm, rows: int, name: str) -> None:
    """A Hadamard transform on a wgrad operand runs along the batch axis (the GEMM's inner
    dimension) in blocks of its size: refuse a batch it does not divide, naming the batch and
    the ways out, before the transform's own shape error deep inside the backward."""
    sizes = {s.hadamard for s in (wgrad.a, wgrad.b) if isinstance(s, Scheme) and s.hadamard}
    for h in sizes:
        if rows % h:
            raise ValueError(
                f"recipe {name!r}: the weight-gradient GEMM applies a {h}-point Hadamard "
                f"transform along the batch axis, but this batch has {rows} rows (not a "
                f"multiple of {h}); use a batch size that is a multiple of {h} (e.g. "
                f"{max(h, rows // h * h)}) or turn the transform off: "
                f"get_recipe('nvfp4', hadamard=False), or recipe_options={{'hadamard': False}} "
                f"for a Trainer")


def _unread_copy_skippable(dgrad_a: Operand, wgrad_a: Operand, run: RecipeRun) -> bool:
    """Whether the dgrad copy of g is left out when the dgrad GEMM does not run.

    The copy is read by the dgrad GEMM and, when wgrad reads the same quantised tensor
    (``_same``), by wgrad; with neither, no product reads it. Its other effects:

    * a Format, a RowScaling (a function of each row's values) or a deterministic Scheme is a
      pure function of g: leaving it out changes nothing but the telemetry's record of it, so
      it is still made when telemetry is on;
    * a stochastic Scheme (NVFP4's SR gradients) draws random numbers from the run's
      generator: leaving it out changes the stream the later draws see, so training results
      differ (by design: the copy only advanced the stream). It is left out with telemetry
      on too, so that telemetry never changes results, and then has no record;
    * a TensorScaling keeps a scaler's state (an amax history): always made.

    Tests check training with and without the shortcut: bit for bit where nothing is drawn,
    and without telemetry equal to with it (tests/test_mixed_recipe_fastpaths.py).
    """
    if _same(dgrad_a, wgrad_a) or not _SKIP_UNREAD_COPIES:
        return False
    if isinstance(dgrad_a, Scheme) and dgrad_a.rounding == "stochastic":
        return True
    return not run.telemetry and isinstance(dgrad_a, (Format, RowScaling, Scheme))


_SKIP_UNREAD_COPIES = True  # switch for the tests (off: every copy made, the old random stream)


def _tiles_transpose(first: Operand, second: Operand) -> bool:
    """Whether quantising Wᵀ with ``second`` gives exactly the transpose of W quantised with
    ``first`` (a shortcut only: the recipe still quantises both, e.g. NVFP4's and DeepSeek's
    square weight tiles, but without telemetry the second is the first transposed).

    Proof, for one Scheme with square 2-D tiles (t, t), deterministic rounding and no Hadamard
    transform, on a 2-D W: the tiles of Wᵀ are the transposes of the tiles of W (both grids
    start at index 0 on each axis; a tile clamped to a short axis, min(t, n) on each axis, and
    zero padding of a ragged edge transpose alike), so each tile holds the same values, with
    the same amax; the tensor amax is the same; the scales are functions of those amaxes; and
    the element rounding is element-wise and deterministic. Tests check it
    (tests/test_mixed_recipe_fastpaths.py).
    """
    if not isinstance(first, Scheme):
        return False
    block = first.block
    # (DQ8's nested blocks run over the scales in row-major order, which transposing changes.)
    return (isinstance(block, tuple) and len(block) == 2 and block[0] == block[1]
            and first.rounding != "stochastic" and not first.hadamard and first.scale != "dq8"
            and (first is second or first == second))


def _same(first: Operand, second: Operand) -> bool:
    """The second product reads the same quantised tensor (transposed) as the first."""
    # The cheap test first: comparing two Schemes field by field costs more than a check.
    return is_tensorwise(first) and (first is second or first == second)


def _reads_copy(first: Gemm, a: Operand, second: Gemm, b: Operand) -> bool:
    """GEMM ``second`` reads operand ``b`` as GEMM ``first``'s copy of ``a`` (transposed): the
    same quantised tensor (:func:`_same`) in the same form, codes or dequantised values."""
    return _same(a, b) and first.codes == second.codes

