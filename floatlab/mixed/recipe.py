"""Low-precision training recipes: the precision of each operand of each GEMM.

A Linear layer makes three matrix products per step: forward ``y = x·Wᵀ``, the input gradient
(dgrad) ``dx = g·W`` and the weight gradient (wgrad) ``dW = gᵀ·x``. A :class:`Recipe` gives each
product a :class:`Gemm`: how its two operands are quantised (an :class:`Operand` spec) and
which :class:`floatlab.Accumulator` sums the products. Everything else -- activations between
layers, softmax and the loss, the master weights, the optimizer -- stays in the policy's
formats (bf16 results, float32 masters and safe ops), so a recipe is composed into a
:class:`~floatlab.mixed.Policy` (``policy.recipe``) and the 16-bit modes keep their own path.

Operand specs (the ``a`` / ``b`` fields of a :class:`Gemm`):

* a :class:`floatlab.Scheme` -- block scaling (MX, NVFP4, rowwise, DeepSeek tiles), applied with
  :func:`floatlab.fake_quantize` to the operand laid out with the *inner* (reduced) dimension
  last, so blocks run along K as the kernels need;
* :class:`TensorScaling` -- Transformer Engine's per-tensor FP8 scaling, current or delayed
  (amax history, margin, amax_compute_algo), from :mod:`floatlab.quant.delayed`;
* a :class:`floatlab.Format` -- a plain cast without any scale (how "E4M3 gradients without
  scaling" fail);
* None -- the operand as it is (the policy's compute copy: high precision).

Gradients flow through quantised operands as straight-through estimators: backward uses the
quantised operands of the forward product as if quantisation were the identity, as every FP8
/ FP4 training recipe does.

>>> from floatlab.mixed.recipe import get_recipe, recipe_names
>>> r = get_recipe("fp8-delayed")
>>> r.forward.a
TensorScaling(float8_e4m3fn, delayed, history 16, margin 0, max)
>>> r.dgrad.a.fmt.name                                   # HYBRID: E5M2 gradients
'float8_e5m2'
>>> get_recipe("mxfp8", scale_rounding="rceil").forward.a.scale_rounding
'rceil'
>>> get_recipe("fp8-delayd")                             # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: unknown recipe 'fp8-delayd'. Did you mean 'fp8-delayed'...
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from floatlab.accumulate import Accumulator
from floatlab.formats import Format, get_format
from floatlab.mixed.checks import flag
from floatlab.mixed.recipe_specs import (  # (the specs are re-exported: users import them here)
    BF16,
    FP32,
    Gemm,
    Operand,
    Recipe,
    RowScaling,
    TensorScaling,
    is_tensorwise,
)
from floatlab.quant.scheme import Scheme, get_scheme

__all__ = ["Recipe", "Gemm", "TensorScaling", "RowScaling", "Operand", "get_recipe", "recipe_names",
           "RECIPES", "is_tensorwise", "msamp_scheme"]

FP16 = get_format("float16")
E4M3 = get_format("float8_e4m3fn")
E5M2 = get_format("float8_e5m2")


# --------------------------------------------------------------------------- the recipes

def _hybrid(delayed: bool, forward_fmt: Format, backward_fmt: Format, history_len: int = 16,
            margin: int = 0, amax_compute_algo: str = "max") -> dict[str, Gemm]:
    f = TensorScaling(forward_fmt, delayed, history_len, margin, amax_compute_algo)
    b = TensorScaling(backward_fmt, delayed, history_len, margin, amax_compute_algo)
    return {"forward": Gemm(f, f), "dgrad": Gemm(b, f), "wgrad": Gemm(b, f)}


def _te(name: str, *, delayed: bool, fp8_format: str = "HYBRID", history_len: int = 16,
        margin: int = 0, amax_compute_algo: str = "max", compute: Format = BF16,
        note: str = "") -> Recipe:
    if fp8_format not in ("HYBRID", "E4M3"):
        raise ValueError(f"fp8_format={fp8_format!r}: use 'HYBRID' (E4M3 forward, E5M2 "
                         "gradients) or 'E4M3' (E4M3 everywhere), Transformer Engine's Format")
    backward = E5M2 if fp8_format == "HYBRID" else E4M3
    gemms = _hybrid(delayed, E4M3, backward, history_len, margin, amax_compute_algo)
    return Recipe(name, **gemms, compute=compute,
                  scaler="dynamic" if compute == FP16 else None,
                  options=dict(fp8_format=fp8_format, history_len=history_len, margin=margin,
                               amax_compute_algo=amax_compute_algo), note=note)


def _fp8_delayed(*, fp8_format: str = "HYBRID", history_len: int = 16, margin: int = 0,
                 amax_compute_algo: str = "max") -> Recipe:
    return _te("fp8-delayed", delayed=True, fp8_format=fp8_format, history_len=history_len,
               margin=margin, amax_compute_algo=amax_compute_algo,
               note="TE DelayedScaling: E4M3 forward / E5M2 gradients, per-tensor scales from "
                    "an amax history")


def _fp8_current(*, fp8_format: str = "HYBRID", margin: int = 0) -> Recipe:
    return _te("fp8-current", delayed=False, fp8_format=fp8_format, margin=margin,
               note="TE Float8CurrentScaling: E4M3 forward / E5M2 gradients, each tensor's own "
                    "amax")


def _fp8_e4m3(*, fp8_format: str = "E4M3", history_len: int = 16, margin: int = 0,
              amax_compute_algo: str = "max") -> Recipe:
    return _te("fp8-e4m3", delayed=True, fp8_format=fp8_format, history_len=history_len,
               margin=margin, amax_compute_algo=amax_compute_algo,
               note="TE DelayedScaling with Format.E4M3: E4M3 for gradients too")


def _transformer_engine(*, fp8_format: str = "HYBRID", history_len: int = 16, margin: int = 0,
                        amax_compute_algo: str = "max", lightning: bool = False) -> Recipe:
    r = _fp8_delayed(fp8_format=fp8_format, history_len=history_len, margin=margin,
                     amax_compute_algo=amax_compute_algo)
    r = replace(r, name="transformer-engine",
                note="fp8-delayed inside torch's bf16 autocast: bf16 elsewhere, float32 masters")
    return _lightning_weights(r, lightning)


def _transformer_engine_fp16(*, fp8_format: str = "HYBRID", history_len: int = 16,
                             margin: int = 0, amax_compute_algo: str = "max",
                             lightning: bool = False) -> Recipe:
    r = _te("transformer-engine-float16", delayed=True, compute=FP16, fp8_format=fp8_format,
            history_len=history_len, margin=margin, amax_compute_algo=amax_compute_algo,
            note="fp8-delayed inside torch's fp16 autocast: fp16 elsewhere, float32 masters, "
                 "GradScaler")
    return _lightning_weights(r, lightning)


def _lightning_weights(recipe: Recipe, lightning: bool) -> Recipe:
    """The "transformer-engine*" recipes as torch's AMP runs TE's FP8 (``te.fp8_autocast``
    inside ``torch.autocast``, float32 parameters, as TE's own AMP tests do; fp16 adds torch's
    GradScaler, as torch's AMP recipe for fp16 does), or with ``lightning=True`` as Lightning's
    ``TransformerEnginePrecision`` runs them: its connectors pass
    ``weights_dtype=torch.bfloat16`` / ``torch.float16`` for the two precision strings, and
    the plugin casts the whole module to that dtype (``module.to(dtype=weights_dtype)``:
    the optimizer updates bf16 / fp16 weights, no float32 master copy) and trains without a
    loss scaler (it has none; its fallback ``torch.autocast`` uses the same dtype, so the
    float32 list still runs in float32). Lightning also converts the inputs to that dtype and
    swaps only ``nn.Linear`` layers whose in / out features are multiples of 8 / 16 for TE's
    (the others run without FP8); the lab quantises every Linear layer's GEMMs and reads its
    inputs in float32 either way.
    """
    lightning = flag("lightning", lightning)  # lightning="False" would be truthy
    options = {**recipe.options, "lightning": lightning}
    if not lightning:
        return replace(recipe, options=options)
    how = "bf16 weights" if recipe.compute == BF16 else "fp16 weights, no loss scaler"
    return replace(recipe, master=recipe.compute, scaler=None, options=options,
                   note=f"Lightning's {recipe.name!r}: fp8-delayed, {how} (module cast to "
                        f"{recipe.compute.name}, no float32 masters)")


def _rowwise(gw_hp: bool = False) -> Callable[..., Recipe]:
    def build() -> Recipe:
        # torchao's Float8LinearRecipeName.ROWWISE: every operand axiswise E4M3 with
        # power-of-two scales; ROWWISE_WITH_GW_HP: float32 scales, the dgrad GEMM's weight
        # tensorwise (current scaling), the wgrad GEMM unquantised (here: bf16).
        row = RowScaling(E4M3, power_of_two=not gw_hp)
        if gw_hp:
            return Recipe("fp8-rowwise-gw-hp", Gemm(row, row),
                          Gemm(row, TensorScaling(E4M3)), Gemm(BF16, BF16),
                          note="torchao rowwise_with_gw_hp: axiswise E4M3 (float32 scales), "
                               "tensorwise weight for dgrad, weight gradient GEMM in bf16")
        gemm = Gemm(row, row)
        return Recipe("fp8-rowwise", gemm, gemm, gemm,
                      note="torchao rowwise: E4M3 with one power-of-two float32 scale per "
                           "row / column along the inner dimension")
    return build


def _deepseek(*, promote_every: int | None = 128, accumulator_bits: int | None = 13,
              block_fma: int | None = 32) -> Recipe:
    acts = get_scheme("fp8_1x128")
    weights = get_scheme("fp8_128x128")
    # H800's FP8 tensor cores keep about 14 bits (e8m13, truncating) in the accumulator;
    # DeepSeek-V3 copies the partial sums to float32 CUDA cores every 128 products. The
    # tensor core adds block_fma = 32 products per fused step (floatlab.blockfma: aligned to
    # the largest exponent, truncated, one truncation per step); None rounds after every product.
    # accumulator_bits=None: float32 sums (BLAS), the fast approximation of a promoted run.
    # Promoted every 128 (one scale tile along K), the accumulator sums the products of the
    # E4M3 codes and the scales are applied at promotion, as DeepGEMM does (Gemm.codes); any
    # other promotion interval (or none) sums products of the dequantised values, since a
    # partial sum spanning tiles of different scales has no one scale to apply.
    codes = False
    if accumulator_bits is None:
        acc, how = None, "float32 accumulation"
    else:
        if isinstance(accumulator_bits, bool) or not isinstance(accumulator_bits, int) \
                or not 1 <= accumulator_bits <= 22:
            raise ValueError(f"accumulator_bits={accumulator_bits!r}: the accumulator's "
                             "mantissa bits, an int in 1..22 (13: e8m13), or None for float32")
        chunk = dict(chunk=promote_every, promote="float32") if promote_every is not None else {}
        acc = Accumulator(f"e8m{accumulator_bits}", "toward_zero", block_fma=block_fma, **chunk)
        codes = promote_every == acts.block[1] == weights.block[1]
        how = ("no promotion" if promote_every is None else
               f"promoted to float32 every {promote_every}") + (
            ", E4M3 codes summed, scales applied at promotion" if codes else
            ", products of dequantised values") + (
            f", {block_fma}-product block FMA" if block_fma else ", per-product truncation")
    state = {"exp_avg": BF16, "exp_avg_sq": BF16}
    note = f"DeepSeek-V3: E4M3, 1x128 activation / 128x128 weight tiles, {how}, bf16 moments"
    return Recipe("deepseek-fp8", Gemm(acts, weights, acc, codes),
                  Gemm(acts, weights, acc, codes), Gemm(acts, acts, acc, codes), state=state,
                  options=dict(promote_every=promote_every, accumulator_bits=accumulator_bits,
                               block_fma=block_fma),
                  note=note)


def _mxfp8(*, scale_rounding: str = "floor") -> Recipe:
    s = get_scheme("mxfp8").replace(scale_rounding=scale_rounding)
    scale_rounding = s.scale_rounding  # (its canonical name: "RCEIL" reads as "rceil")
    s = s.replace(name=f"mxfp8 {scale_rounding}")
    g = Gemm(s, s)
    return Recipe("mxfp8", g, g, g, options=dict(scale_rounding=scale_rounding),
                  note=f"MXFP8 E4M3, blocks of 32 along K, E8M0 scales ({scale_rounding})")


def _mxfp4(*, backward: str = "mxfp8", scale_rounding: str = "floor") -> Recipe:
    if backward not in ("mxfp8", "bf16"):
        raise ValueError(f"backward={backward!r}: MXFP4 training runs its backward in 'mxfp8' "
                         "or 'bf16'")
    fwd = get_scheme("mxfp4").replace(scale_rounding=scale_rounding, name="mxfp4")
    scale_rounding = fwd.scale_rounding  # (its canonical name: "RCEIL" reads as "rceil")
    back: Operand = BF16 if backward == "bf16" else get_scheme("mxfp8").replace(
        scale_rounding=scale_rounding, name="mxfp8")
    return Recipe("mxfp4", Gemm(fwd, fwd), Gemm(back, back), Gemm(back, back),
                  options=dict(backward=backward, scale_rounding=scale_rounding),
                  note=f"MXFP4 forward, {backward} backward")


def _nvfp4(*, stochastic_rounding: bool = True, hadamard: bool = True,
           two_d_weights: bool = True) -> Recipe:
    base = get_scheme("nvfp4")
    acts = base.replace(name="nvfp4 1x16")
    weights = base.replace(block=(16, 16), name="nvfp4 16x16") if two_d_weights else acts
    # Stochastic rounding as the hardware does it: 8 random bits per value. PTX's
    # cvt.rs.satfinite.e2m1x4.f32 takes one 32-bit rbits operand for its four E2M1 results,
    # 8 bits each (PTX ISA, cvt: "rbits"), and Transformer Engine feeds it one Philox word
    # per 4 values (transformer_engine/common/cast/nvfp4/core_nvfp4.cuh, get_rbits), on the
    # float32 scaled values: Scheme(random_bits=8) (the round-up probability truncated to 8
    # bits, a bias toward zero below 2**-8 of a quantum).
    grads = base.replace(rounding="stochastic", random_bits=8, name="nvfp4 SR") \
        if stochastic_rounding else acts
    # The random Hadamard transform (16-point, fixed seed) goes on both wgrad operands, along
    # the reduced (batch) dimension -- where outliers of activations and gradients meet.
    wg_a = grads.replace(hadamard=16, name=grads.name + " RHT") if hadamard else grads
    wg_b = acts.replace(hadamard=16, name="nvfp4 RHT") if hadamard else acts
    off = [n for n, on in (("SR", stochastic_rounding), ("RHT", hadamard),
                           ("2D", two_d_weights)) if not on]
    note = "NVFP4: 16-blocks, E4M3 scales + tensor scale; 16x16 weights, SR gradients, RHT wgrad"
    if off:
        note += f" (without {', '.join(off)})"
    return Recipe("nvfp4", Gemm(acts, weights), Gemm(grads, weights), Gemm(wg_a, wg_b),
                  options=dict(stochastic_rounding=stochastic_rounding, hadamard=hadamard,
                               two_d_weights=two_d_weights), note=note)


def msamp_scheme(element: str | Format = "e4m3fn") -> Scheme:
    """MS-AMP's ScalingTensor as a Scheme: one power-of-two float32 scale per tensor, from the
    tensor's own amax (``ScalingMeta`` with ``window_size=1``), so that ``amax / scale`` lands
    in ``(fmax / 2, fmax]``: MS-AMP's ``2**(floor(log2(fmax / amax)) - margin)`` multiplier
    (margin 0, the quotient in float32) is the reciprocal of the "rfloor" power-of-two scale,
    and its cast ``fp8(float32(x) * multiplier)`` is exact up to the element rounding, as the
    lab's division by that power of two is. MS-AMP uses it for FP8
    weights and weight gradients (E4M3), the FP8 first moment and the FP16 second moment and
    masters ("float16": fmax 65504, so small moments stay in fp16's normal range).

    >>> s = msamp_scheme()
    >>> s.name, s.block, s.scale, s.scale_rounding
    ('msamp e4m3fn', 'tensor', 'pow2', 'rfloor')
    >>> import numpy as np; from floatlab.quant.quantize import fake_quantize
    >>> fake_quantize(np.array([150.0, 1.0]), s).tolist()   # scale 2**-1: 300 -> 288 -> 144
    [144.0, 1.0]
    """
    fmt = get_format(element)
    short = {"float8_e4m3fn": "e4m3fn", "float8_e5m2": "e5m2", "float16": "fp16"}
    return get_scheme("fp8_tensorwise").replace(
        element=fmt, scale="pow2", scale_rounding="rfloor",
        name=f"msamp {short.get(fmt.name, fmt.name)}")


def _msamp(level: int) -> Callable[..., Recipe]:
    """MS-AMP's opt levels (``msamp.initialize``, O3 through its DeepSpeed ZeRO optimizer).

    Where the lab's model differs from MS-AMP's source (the GEMMs, their scales and the
    optimizer's moments follow it):

    * Parameters other than Linear weights. MS-AMP's ``LinearReplacer`` turns only each
      ``nn.Linear``'s weight into an FP16 ScalingTensor; the bias keeps the Linear's dtype
      (``FP8Linear(bias_type=linear.bias.dtype)``) and every other parameter (LayerNorm,
      embeddings) stays as the model built it, float32 in MS-AMP's examples; ``LBAdamW``
      updates those in place in float32, and O3's ZeRO optimizer leaves them to DeepSpeed's
      own 16-bit groups with float32 masters. The lab holds every parameter in the recipe's
      ``master`` format, FP16 (biases and LayerNorm too, so their updates round to FP16).
    * The FP16 weights. MS-AMP's are ScalingTensors: ``fp16(w * 2**k)`` with one power-of-two
      scale per tensor from its amax (``msamp_scheme("float16")``), recast after each update;
      the lab's are plain FP16. They differ only on entries below FP16's normal range
      (``2**-14``), which MS-AMP's scale keeps normal.
    * The weight gradients. MS-AMP keeps each as a ScalingTensor (E4M3 codes and a float32
      scale, window 1) and its optimizer reads ``grad.float()``; the lab quantises the wgrad
      result the same way (``weight_grad``) and delivers it to the FP16 parameter rounded to
      FP16: exact for every entry from ``2**-21`` (four significant bits above FP16's
      ``2**-24`` quantum) up to 65504 (the default 25-step runs deliver every entry exactly),
      but smaller entries (tiny gradients without a loss scaler) can lose bits or flush to 0,
      and larger ones overflow, where MS-AMP's keep their E4M3 value.
    """
    def build() -> Recipe:
        # MS-AMP's FP8Linear (msamp/nn/linear.py): input E4M3 with an amax window of 16,
        # output gradient E5M2 with a window of 16, the weight cast with its own amax; every
        # ScalingMeta scale is 2**floor(log2(fp_max / amax)) (meta.py), and the cast is TE's
        # fp8(float32(x) * scale) (cast.py), exact for a power-of-two scale.
        inputs = TensorScaling(E4M3, delayed=True, history_len=16, power_of_two=True)
        grads = TensorScaling(E5M2, delayed=True, history_len=16, power_of_two=True)
        e4m3 = msamp_scheme("e4m3fn")
        gemms = {"forward": Gemm(inputs, e4m3), "dgrad": Gemm(grads, e4m3),
                 "wgrad": Gemm(grads, inputs)}
        # The optimizer updates FP16 weights at every level (MS-AMP's table: O1 / O2 weights
        # FP16 without a master copy; O3 FP16 masters behind FP8 weights), Adam's moments FP32
        # (O1) or FP8 m + FP16 v (O2, O3: msamp.optim.LBAdamW's exp_avg uint8 / float16).
        state: dict[str, Format | Scheme] = {"exp_avg": FP32, "exp_avg_sq": FP32}
        if level >= 2:
            state = {"exp_avg": e4m3, "exp_avg_sq": msamp_scheme("float16")}
        notes = {1: "MS-AMP O1: FP8 GEMMs, FP8 weight gradients, FP16 weights",
                 2: "MS-AMP O2: O1 + FP8 first moment, FP16 second moment",
                 3: "MS-AMP O3: O2 + FP8 weights held between steps, FP16 masters"}
        return Recipe(f"msamp-O{level}", **gemms, master=FP16,
                      scaler=None, state=state, weight_grad=e4m3,
                      weights=e4m3 if level == 3 else None, note=notes[level])
    return build


#: Recipe names and their builders (keyword options per recipe: see each builder).
RECIPES: dict[str, Callable[..., Recipe]] = {
    "fp8-delayed": _fp8_delayed,
    "fp8-current": _fp8_current,
    "fp8-e4m3": _fp8_e4m3,
    "transformer-engine": _transformer_engine,
    "transformer-engine-float16": _transformer_engine_fp16,
    "fp8-rowwise": _rowwise(False),
    "fp8-rowwise-gw-hp": _rowwise(True),
    "deepseek-fp8": _deepseek,
    "mxfp8": _mxfp8,
    "mxfp4": _mxfp4,
    "nvfp4": _nvfp4,
    "msamp-O1": _msamp(1),
    "msamp-O2": _msamp(2),
    "msamp-O3": _msamp(3),
}

# What a misplaced option is for, beyond the recipes that take it (read from their builders).
_OPTION_NOTES = {"scale_rounding": " (MX: E8M0 block scales; per-tensor FP8 scales are float32)"}


def _option_home(option: str) -> str:
    homes = [k for k, b in RECIPES.items() if option in inspect.signature(b).parameters]
    if not homes:
        return "not an option of any recipe"
    return f"an option of {', '.join(map(repr, homes))}{_OPTION_NOTES.get(option, '')}"


def recipe_names() -> list[str]:
    """The recipe names, as users type them.

    >>> recipe_names()[:3]
    ['fp8-delayed', 'fp8-current', 'fp8-e4m3']
    """
    return list(RECIPES)


def recipe_key(name: str) -> str | None:
    """The registered recipe ``name`` spells (any case, '_' for '-', as format and scheme
    names), or None: ``recipe_key("FP8_Delayed")`` is 'fp8-delayed'."""
    key = name.strip().lower().replace("_", "-")
    return next((k for k in RECIPES if k.lower() == key), None)


def get_recipe(name: str | Recipe, **options: Any) -> Recipe:
    """The recipe called ``name`` with its options (a Recipe passes through unchanged).

    Options: "fp8-delayed" / "fp8-e4m3" / "transformer-engine*": ``history_len`` (16),
    ``margin`` (0), ``amax_compute_algo`` ("max" / "most_recent"), ``fp8_format`` ("HYBRID" /
    "E4M3"); "transformer-engine*" also ``lightning`` (False: float32 masters, and a GradScaler
    for fp16, as torch's AMP runs TE; True: the weights themselves in bf16 / fp16 and no loss
    scaler, as Lightning's ``TransformerEnginePrecision`` runs them); "fp8-current": ``margin``,
    ``fp8_format``; "mxfp8": ``scale_rounding`` ("floor", OCP's and torchao's default, or
    "rceil", the hardware's); "mxfp4": ``backward`` ("mxfp8" / "bf16"), ``scale_rounding``;
    "nvfp4": ``stochastic_rounding``, ``hadamard``, ``two_d_weights`` (all True);
    "deepseek-fp8": ``promote_every`` (128, None for none; at 128, the tile length, the
    accumulator sums the E4M3 codes' products and the tile scales apply at promotion, as
    DeepSeek-V3's kernel does; otherwise it sums products of dequantised values),
    ``accumulator_bits`` (13; None sums in float32), ``block_fma`` (32; None truncates after
    every product).

    >>> get_recipe("nvfp4", hadamard=False).note.endswith("(without RHT)")
    True
    >>> get_recipe("fp8-current", scale_rounding="rceil")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: scale_rounding does not apply to recipe 'fp8-current': it is an option of 'mx...
    """
    if isinstance(name, Recipe):
        if options:
            raise ValueError("options go with a recipe name, e.g. get_recipe('mxfp8', "
                             "scale_rounding='rceil'); this Recipe is already built")
        return name
    if not isinstance(name, str):
        raise TypeError(f"recipe must be a name such as 'fp8-delayed' or a Recipe, got {name!r}")
    key = name.strip()
    builder = RECIPES.get(recipe_key(key) or "")
    if builder is None:
        close = difflib.get_close_matches(key, list(RECIPES), n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(f"unknown recipe {name!r}.{hint} Recipes: {', '.join(RECIPES)}")
    accepted = set(inspect.signature(builder).parameters)
    for option in options:
        if option not in accepted:
            why = _option_home(option)
            takes = ", ".join(sorted(accepted)) or "no options"
            raise ValueError(f"{option} does not apply to recipe {key!r}: it is {why}. "
                             f"{key!r} takes {takes}")
    try:
        return builder(**options)
    except TypeError as err:
        raise ValueError(f"recipe {key!r}: {err}") from None
