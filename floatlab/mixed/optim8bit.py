"""Adam with quantised moments: per-moment state formats, bitsandbytes' 8-bit Adam, COAT.

:class:`StateAdam` is Adam (torch's fused arithmetic: the update uses the new moments in float32)
whose two moments are *stored* per parameter tensor in a format or a block-scaled
:class:`floatlab.Scheme` -- the stored (dequantised) values are what the next step reads.
:class:`Adam8bit` is bitsandbytes' ``bnb.optim.Adam8bit``: both moments block-wise quantised
with the dynamic maps (signed ``dynamic8`` for the first moment, unsigned ``udynamic8`` for
the second), one float32 absmax per block of 256, nearest map entry; parameter tensors with
fewer than ``min_8bit_size = 4096`` values keep float32 moments, as bitsandbytes does. The lab's
layers are small: most of a default MLP's parameters sit in tensors below 4096 values, so pass
``min_8bit_size=0`` to quantise them all (the lab's experiments do, and say so).
:class:`AdamW8bit` is ``bnb.optim.AdamW8bit``: the same optimizer with ``weight_decay=1e-2``;
bitsandbytes' kernels (8-bit blockwise and 32-bit alike) decay the weights *after* the update,
``p = p * (1 - lr * weight_decay)`` in float32, where torch's AdamW decays them before it.

Ablations (Dettmers et al., 2021): ``block=None`` (one absmax per tensor) and
``map="linear"`` (256 evenly spaced codes instead of the dynamic map).

COAT's dynamic range expansion (``expand=True`` on an FP8 Scheme): each group stores
``sign(x)·|x|**k`` with ``k`` chosen so the group's ratio max/min fills the format's range, and
reads back ``sign(y)·|y|**(1/k)``.

>>> import numpy as np
>>> from floatlab.mixed import parameter
>>> w = parameter(np.ones(5000, np.float32))
>>> opt = Adam8bit([w], lr=1e-3, betas=(0.9, 0.995))
>>> w.grad = np.linspace(-1, 1, 5000).astype(np.float32); _ = opt.step()
>>> opt.state_bytes()          # 5000 codes + 20 float32 absmax values, per moment
{'dynamic8': 5080, 'udynamic8': 5080}
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from floatlab.formats import Format, get_format
from floatlab.mixed.checks import flag, whole
from floatlab.mixed.opmath import scale
from floatlab.mixed.optim import Adam
from floatlab.mixed.policy import FP32, nbytes
from floatlab.mixed.tensor import Tensor
from floatlab.quant.codebook import Codebook
from floatlab.quant.elements import _round_scaled, _work_dtype
from floatlab.quant.quantize import fake_quantize
from floatlab.quant.scales import block_scales
from floatlab.quant.scheme import Scheme, format_or_scheme, get_scheme

__all__ = ["StateAdam", "Adam8bit", "AdamW8bit", "MOMENTS", "linear_codebook", "expand_range"]

MOMENTS = ("exp_avg", "exp_avg_sq")
BNB_BLOCK = 256
BNB_MIN_8BIT_SIZE = 4096


def linear_codebook(signed: bool) -> Codebook:
    """The linear-map ablation: 256 evenly spaced values on [-1, 1] (signed) or [0, 1].

    >>> linear_codebook(True).values_array[[0, 255]].tolist()
    [-1.0, 1.0]
    """
    lo = -1.0 if signed else 0.0
    return Codebook("linear8" if signed else "ulinear8",
                    np.linspace(lo, 1.0, 256).astype(np.float32))


def expand_range(x: np.ndarray, fmt: Format, group: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """COAT's dynamic range expansion: per group of ``group`` values, ``k`` such that the
    group's max / min ratio becomes the format's max / min-normal ratio; returns
    ``(sign(x)·|x|**k, k)``. Groups with one distinct magnitude get ``k = 1``.

    >>> y, k = expand_range(np.array([1e-3, 1e-2]), get_format("e4m3fn"), group=2)
    >>> round(float(k[0]), 3)                 # log(448 / 2**-6) / log(10)
    4.457
    """
    flat = np.asarray(x, np.float64).reshape(-1)
    pad = (-flat.size) % group
    g = np.concatenate([flat, np.zeros(pad)]).reshape(-1, group)
    mag = np.abs(g)
    hi = mag.max(axis=1)
    lo = np.where(mag > 0, mag, np.inf).min(axis=1)
    ratio = np.where((hi > 0) & np.isfinite(lo) & (hi > lo), hi / np.where(np.isfinite(lo), lo,
                                                                          1), 1.0)
    target = math.log(float(fmt.max) / 2.0**fmt.emin)
    k = np.where(ratio > 1, target / np.log(np.maximum(ratio, 1 + 1e-12)), 1.0)
    y = np.sign(g) * mag ** k[:, None]
    return y.reshape(-1)[: flat.size].reshape(np.shape(x)), k


class StateAdam(Adam):
    """Adam whose moments are stored per parameter in a Format or a Scheme each.

    Parameters (besides Adam's lr, betas, eps)
    ------------------------------------------
    state : ``{"exp_avg": spec, "exp_avg_sq": spec}``; a spec is a Format (name or object),
        a :class:`floatlab.Scheme` (name or object) or None (float32). Each parameter's moment
        is quantised as one flat vector, so a Scheme needs int blocks along axis -1, 'row' or
        'tensor' scales (2-D tiles and per-column scales are refused at construction).
    min_8bit_size : parameter tensors with fewer values keep float32 moments.
    expand : COAT's dynamic range expansion before a Scheme's quantisation (group 128); a
        plain Format spec has no scale to take the expanded values, so it is refused then.

    The update is Adam's fused float32 arithmetic (``Adam(fused=True)``); only the storage of
    the moments differs. ``weight_decay`` is the fused kernel's: added to the gradient, or with
    ``decoupled_weight_decay=True`` torch's AdamW decay. The low-precision remedies are not
    offered.

    >>> from floatlab.mixed import parameter
    >>> w = parameter(np.zeros(3, np.float32))
    >>> opt = StateAdam([w], state={"exp_avg": "e4m3fn", "exp_avg_sq": "fp16"})
    >>> w.grad = np.array([1e-3, 2e-3, 3e-3], np.float32); _ = opt.step()
    >>> opt.state_bytes()
    {'float8_e4m3fn': 3, 'float16': 6}
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, *, decoupled_weight_decay: bool = False,
                 state: dict[str, Any] | None = None, min_8bit_size: int = 0,
                 expand: bool = False, seed: int = 0) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         fused=True, decoupled_weight_decay=decoupled_weight_decay, seed=seed,
                         low_copies="auto")
        state = {} if state is None else state
        if not isinstance(state, dict) or set(state) - set(MOMENTS):
            raise ValueError(f"state must be a dict with keys among {MOMENTS}, e.g. "
                             f"{{'exp_avg': 'e4m3fn', 'exp_avg_sq': 'fp16'}}, got {state!r}")
        self.specs = {k: _spec(state.get(k), k) for k in MOMENTS}
        self.min_8bit_size = whole("min_8bit_size", min_8bit_size, minimum=0)  # NumPy ints too
        self.expand = flag("expand", expand)  # np.bool_ as well as bool
        for group in self.groups:
            if group.state_fmt != group.fmt or group.fmt not in _MASTER_FORMATS:
                raise ValueError(f"{type(self).__name__} keeps float32 (or MS-AMP O3's "
                                 f"float16) master weights and chooses its moment storage "
                                 f"itself; got weights in {group.fmt.name} (use a mixed "
                                 "precision such as 'bf16-mixed')")
        for key, spec in self.specs.items():
            if isinstance(spec, Format) and self.expand:  # it was ignored without a word
                raise ValueError(
                    f"{type(self).__name__}: expand=True (COAT) expands each group's range "
                    f"before a block-scaled quantisation, whose scales bring the expanded "
                    f"values back into range; state[{key!r}] = {spec.name} is a plain format "
                    "with no scale, so it would not be expanded; give it a Scheme such as "
                    "'fp8_tensorwise' or 'mxfp8_e4m3', or pass expand=False")
            if isinstance(spec, Scheme):
                _check_flat_scheme(type(self).__name__, key, spec, self.expand,
                                   [p.size for p in self.params if self._quantized(p)])

    def _state(self, group, key: str) -> np.ndarray:
        # The moments hold the dequantised values of their codes (an FP8 code times a float32
        # scale is a float32 number), so they live in float32 whatever the masters' format.
        if key not in group.state:
            group.state[key] = np.zeros(int(group.offsets[-1]), np.float32)
        return group.state[key]

    def _quantized(self, param: Tensor) -> bool:
        # an empty parameter has no moments to quantise (and a Scheme refuses an empty array)
        return param.size >= self.min_8bit_size and param.size > 0

    def _store_moments(self, group, where, active, m, v) -> None:
        sizes = group.sizes[active]
        quantized = [self._quantized(group.params[i]) for i in active]
        stored = {}
        for key, values in (("exp_avg", m), ("exp_avg_sq", v)):
            spec = self.specs[key]
            if spec is None or not any(quantized):
                stored[key] = values
            elif all(quantized) and not self.expand and _whole_group_path(spec) and \
                    np.isfinite(values).all():
                # one call for every tensor of the group instead of one per tensor
                stored[key] = self._store(values, spec) if isinstance(spec, Format) else \
                    _fake_quantize_each(values, sizes, spec)
            else:
                stored[key] = self._store_each(values, sizes, quantized, spec)
        group.state["exp_avg"][where] = stored["exp_avg"]
        group.state["exp_avg_sq"][where] = stored["exp_avg_sq"]

    def _store_each(self, values: np.ndarray, sizes: np.ndarray, quantized: list[bool],
                    spec: Format | Scheme) -> np.ndarray:
        """bitsandbytes quantises each parameter tensor on its own: one call per tensor."""
        out = np.empty_like(values, dtype=np.float32)
        start = 0
        for size, q in zip(sizes, quantized, strict=True):
            part = values[start : start + size]
            out[start : start + size] = self._store(part, spec) if q else part
            start += size
        return out

    def _store(self, values: np.ndarray, spec: Format | Scheme) -> np.ndarray:
        if isinstance(spec, Format):
            return self._q(values, spec).astype(np.float32)
        bad = ~np.isfinite(values)
        if bad.any():  # a diverged run: keep inf / NaN (the loss shows it), quantise the rest
            out = self._store(np.where(bad, np.float32(0), values), spec)
            out[bad] = values[bad]
            return out
        # a stochastic scheme draws from the optimizer's seeded generator (None: fresh entropy,
        # so runs with the same seed differed); deterministic ones take none
        rng = self._rng if spec.rounding == "stochastic" else None
        if self.expand:  # (a float element: _check_flat_scheme refused others at construction)
            y, k = expand_range(values, spec.element)
            yq = fake_quantize(y, spec, rng).astype(np.float64)
            pad = (-values.size) % 128
            kk = np.repeat(k, 128)[: values.size + pad][: values.size]
            return (np.sign(yq) * np.abs(yq) ** (1 / kk)).astype(np.float32)
        return fake_quantize(values.astype(np.float32), spec, rng).astype(np.float32)

    def state_bytes(self) -> dict[str, int]:
        """Real storage: per moment and parameter, the codes plus the block scales (a Scheme),
        the format's bytes (a Format), or float32 (unquantised)."""
        out: dict[str, int] = {}
        for group in self.groups:
            if "exp_avg" not in group.state:
                continue
            for p in group.params:
                if p.size == 0:  # no moments: no bytes, no label
                    continue
                for key in MOMENTS:
                    spec = self.specs[key]
                    if spec is None or not self._quantized(p):
                        label, n = FP32.name, nbytes(FP32, p.size)
                    elif isinstance(spec, Format):
                        label, n = spec.name, nbytes(spec, p.size)
                    else:
                        label, n = _scheme_label(spec), _scheme_bytes(spec, p.size)
                    out[label] = out.get(label, 0) + n
        return out

    def __repr__(self) -> str:
        specs = ", ".join(f"{k} {_spec_label(s)}" for k, s in self.specs.items())
        wd = f", weight_decay={self.weight_decay:g}" if self.weight_decay else ""
        return f"{type(self).__name__}(lr={self.lr:g}, betas={self.betas}{wd}, {specs})"


class Adam8bit(StateAdam):
    """bitsandbytes' 8-bit Adam (``bnb.optim.Adam8bit``): block-wise dynamic quantisation.

    ``block`` (256) values share a float32 absmax; ``block=None`` uses one per tensor.
    ``map="dynamic"`` (bitsandbytes) or ``"linear"`` (the ablation). ``min_8bit_size`` (4096,
    bitsandbytes' default): smaller tensors keep float32 moments. ``weight_decay`` (0, as
    bitsandbytes' Adam8bit) is bitsandbytes' decoupled decay, applied after the update (see
    :class:`AdamW8bit`).

    >>> from floatlab.mixed import parameter
    >>> opt = Adam8bit([parameter(np.zeros(4096, np.float32))], block=None, map="linear")
    >>> opt.specs["exp_avg"].name, opt.specs["exp_avg"].block
    ('linear8 per tensor', 'tensor')
    """

    _decay_after_update = True  # Adam's fused path leaves the decay to _new_weights

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, *,
                 block: int | None = BNB_BLOCK, map: str = "dynamic",  # noqa: A002 - bnb's word
                 min_8bit_size: int = BNB_MIN_8BIT_SIZE, seed: int = 0) -> None:
        if map not in ("dynamic", "linear"):
            raise ValueError(f"map={map!r}: use 'dynamic' (bitsandbytes) or 'linear' (the "
                             "ablation)")
        if block is not None:  # None: one absmax per tensor
            block = whole("block", block)  # NumPy ints are ints
        self.block, self.map = block, map
        state = {k: _moment_scheme(signed, block, map)
                 for k, signed in (("exp_avg", True), ("exp_avg_sq", False))}
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         decoupled_weight_decay=True, state=state,
                         min_8bit_size=min_8bit_size, seed=seed)

    def _new_weights(self, group, where, grad, weights, active):
        new = super()._new_weights(group, where, grad, weights, active)
        if not self.weight_decay:
            return new
        # bitsandbytes (kOptimizer32bit2State, kOptimizerStatic8bit2StateBlockwise): after the
        # update is stored, p = p * (1.0f - lr * weight_decay), every operand and op float32
        f32 = np.float32
        factor = f32(f32(1) - f32(f32(self.lr) * f32(self.weight_decay)))
        return scale(new, float(factor), group.fmt)


class AdamW8bit(Adam8bit):
    """bitsandbytes' ``bnb.optim.AdamW8bit``: :class:`Adam8bit` with ``weight_decay=1e-2``.

    bitsandbytes decays the weights after Adam's update, in float32:
    ``p = (p + update) * (1 - lr * weight_decay)``, where ``torch.optim.AdamW`` decays them
    first (:class:`~floatlab.mixed.AdamW`).

    >>> from floatlab.mixed import parameter
    >>> w = parameter(np.full(3, 2.0, np.float32)); w.grad = np.zeros(3, np.float32)
    >>> opt = AdamW8bit([w], lr=0.1, weight_decay=0.5); _ = opt.step()
    >>> w.data.tolist(), opt                   # 2 * (1 - 0.05); 3 values: float32 moments
    ([1.899999976158142, 1.899999976158142, 1.899999976158142], AdamW8bit(lr=0.1, \
betas=(0.9, 0.999), weight_decay=0.5, exp_avg dynamic8, exp_avg_sq udynamic8))
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, *,
                 block: int | None = BNB_BLOCK, map: str = "dynamic",  # noqa: A002 - bnb's word
                 min_8bit_size: int = BNB_MIN_8BIT_SIZE, seed: int = 0) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, block=block, map=map,
                         min_8bit_size=min_8bit_size, seed=seed)


def _check_flat_scheme(who: str, key: str, spec: Scheme, expand: bool, sizes: list[int]
                       ) -> None:
    """Refuse, at construction, a Scheme that cannot store a moment: each parameter's moment
    is quantised as one flat vector (as bitsandbytes does), so 2-D tiles, per-column scales and
    blocks along another axis have no meaning there, and a Hadamard transform needs whole
    blocks; they failed only at the first step, deep inside the quantiser."""
    label = f"{who}: state[{key!r}] = {_scheme_label(spec)}"
    fix = ("use a scheme with int blocks, 'row' or 'tensor' scales, e.g. 'dynamic8', "
           "'mxfp8_e4m3' or 'fp8_tensorwise'")
    if isinstance(spec.block, tuple) or spec.block == "column":
        what = f"{spec.block[0]}x{spec.block[1]} tiles" if isinstance(spec.block, tuple) \
            else "per-column scales"
        raise ValueError(f"{label} has {what}, which need a 2-D tensor, but each parameter's "
                         f"moment is stored as one flat vector; {fix}")
    if (isinstance(spec.block, int) or spec.hadamard) and spec.axis not in (0, -1, None):
        raise ValueError(f"{label} runs along axis {spec.axis}, but each parameter's moment is "
                         "stored as one flat vector (axis -1); use axis=-1")
    if spec.hadamard:
        bad = [n for n in sizes if n % spec.hadamard]
        if bad:
            raise ValueError(f"{label} has a Hadamard transform over blocks of "
                             f"{spec.hadamard}, but a parameter has {bad[0]} values (not a "
                             "multiple); drop hadamard for the moments, or raise "
                             "min_8bit_size to keep such tensors in float32")
    if expand and not isinstance(spec.element, Format):
        raise ValueError(f"{label}: expand=True (COAT) needs a float element format such as "
                         f"'e4m3fn', not {spec.element.name}; pass expand=False for it")


def _whole_group_path(spec: Format | Scheme) -> bool:
    """Whether a group's moments can be stored in one call: a Format rounds element by
    element; a per-tensor power-of-two Scheme (MS-AMP's) by :func:`_fake_quantize_each`."""
    return isinstance(spec, Format) or (
        spec.block == "tensor" and spec.scale == "pow2" and isinstance(spec.element, Format)
        and spec.rounding == "nearest_even" and not spec.hadamard and not spec.global_scale)


def _fake_quantize_each(values: np.ndarray, sizes: np.ndarray, spec: Scheme) -> np.ndarray:
    """``fake_quantize`` of each of the consecutive tensors of ``sizes`` in ``values`` with its
    own per-tensor power-of-two scale, in one pass (finite values only).

    Same result as one ``fake_quantize(part, spec)`` per tensor, because it takes the same
    steps on each element: the quantiser's working precision (:func:`~floatlab.quant.elements.
    _work_dtype`: float32 for float32 moments), each tensor's amax in it (a maximum: exact),
    :func:`~floatlab.quant.scales.block_scales` of those amaxes, and the core's scale-clip-
    round step :func:`~floatlab.quant.elements._round_scaled` with each element's tensor scale
    and amax (element-wise: the same quotient, clipping and rounding), then the same product
    with the scale. ``tests/test_mixed_state_adam.py`` checks it bit for bit.

    >>> from floatlab.mixed.recipe import msamp_scheme
    >>> x = np.array([0.3, -1.1, 1e-3, 2e-3, 5e-3], np.float32)
    >>> _fake_quantize_each(x, np.array([2, 3]), msamp_scheme()).tolist()
    [0.3125, -1.125, 0.0009765625, 0.001953125, 0.0048828125]
    """
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    arr = values.astype(_work_dtype(values.dtype, spec), copy=False)
    amax = np.maximum.reduceat(np.abs(arr), starts)
    scales = np.repeat(block_scales(amax, spec, want_codes=False)[3].astype(arr.dtype), sizes)
    elements = _round_scaled(arr, scales, np.repeat(amax, sizes), spec.element, spec.rounding,
                             None)[0]
    return np.multiply(elements, scales, out=elements).astype(np.float32, copy=False)


def _moment_scheme(signed: bool, block: int | None, map_: str) -> Scheme:
    base = get_scheme("dynamic8" if signed else "udynamic8")
    element = base.element if map_ == "dynamic" else linear_codebook(signed)
    where = "tensor" if block is None else block
    name = f"{element.name}" + (" per tensor" if block is None else
                                "" if block == BNB_BLOCK else f" block {block}")
    return base.replace(element=element, block=where, name=name)


def _spec(spec: Any, key: str) -> Format | Scheme | None:
    if spec is None or isinstance(spec, (Format, Scheme)):
        return spec
    if isinstance(spec, str):
        return format_or_scheme(spec, f"state[{key!r}]")
    raise TypeError(f"state[{key!r}] must be a Format, a Scheme, a name or None, got {spec!r}")


_MASTER_FORMATS = (FP32, get_format("float16"))


def _scheme_label(spec: Scheme) -> str:
    return spec.name or spec.describe()


def _spec_label(spec: Format | Scheme | None) -> str:
    if isinstance(spec, Scheme):
        return _scheme_label(spec)
    return spec.name if spec is not None else "float32"


def _scheme_bytes(spec: Scheme, n: int) -> int:
    """Codes plus every scale of a flat moment of ``n`` values (the lab quantises each
    parameter's moment as one flat vector, as bitsandbytes does)."""
    from floatlab.mixed.recipe_storage import operand_nbytes

    return operand_nbytes(spec, (n,))[1]
