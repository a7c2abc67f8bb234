"""The parts of a training recipe: :class:`Recipe` (the three GEMMs of a Linear layer), each
:class:`Gemm` (its two operand specs and its accumulator) and the per-tensor / per-row FP8
operand specs (:class:`TensorScaling`, :class:`RowScaling`). The named recipes that are built
from them live in :mod:`floatlab.mixed.recipe`, whose docstring explains the operand specs.

>>> TensorScaling("e4m3fn", delayed=True)
TensorScaling(float8_e4m3fn, delayed, history 16, margin 0, max)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

from floatlab.accumulate import Accumulator
from floatlab.formats import Format, get_format
from floatlab.mixed.checks import recipe_fields
from floatlab.quant.delayed import AMAX_COMPUTE_ALGOS
from floatlab.quant.scheme import Scheme, format_or_scheme

__all__ = ["Recipe", "Gemm", "TensorScaling", "RowScaling", "Operand", "is_tensorwise"]

FP32 = get_format("float32")
BF16 = get_format("bfloat16")


@dataclass(frozen=True)
class TensorScaling:
    """Per-tensor FP8 scaling, Transformer Engine's convention (``round(x * scale)``).

    fmt : the FP8 format (E4M3 or E5M2).
    delayed : False -- current scaling (the tensor's own amax, TE's Float8CurrentScaling);
        True -- delayed scaling from the last ``history_len`` amaxes (TE's DelayedScaling; TE's
        default history is 1024, the lab's 16 so a spike's effect fits in a short run).
    margin : the scale is divided by ``2**margin`` (headroom).
    amax_compute_algo : "max" or "most_recent" (delayed only).
    power_of_two : round the float32 scale down to a power of two (TE's ``force_pow_2_scales``:
        the quotient's mantissa bits cleared), which is MS-AMP's ``ScalingMeta`` scale
        ``2**floor(log2(fp8_max / amax))`` with its float32 quotient.

    The lab quantises in Transformer Engine's float32 order (:mod:`floatlab.quant.delayed`,
    ``float32=True``).

    >>> TensorScaling("e5m2")
    TensorScaling(float8_e5m2, current, margin 0)
    """

    fmt: Any
    delayed: bool = False
    history_len: int = 16
    margin: int = 0
    amax_compute_algo: str = "max"
    power_of_two: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "fmt", get_format(self.fmt))
        if not isinstance(self.delayed, bool):  # delayed="False" was delayed scaling
            raise TypeError(f"delayed must be True or False, got {self.delayed!r}")
        if self.amax_compute_algo not in AMAX_COMPUTE_ALGOS:
            raise ValueError(f"amax_compute_algo must be one of {AMAX_COMPUTE_ALGOS}, got "
                             f"{self.amax_compute_algo!r}")
        for name in ("history_len", "margin"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (name ==
                                                                                  "history_len"):
                raise ValueError(f"{name} must be an int >= {int(name == 'history_len')}, got "
                                 f"{value!r}")
        if not isinstance(self.power_of_two, bool):
            raise TypeError(f"power_of_two must be True or False, got {self.power_of_two!r}")

    def __repr__(self) -> str:
        pow2 = ", power-of-two" if self.power_of_two else ""
        if self.delayed:
            return (f"TensorScaling({self.fmt.name}, delayed, history {self.history_len}, "
                    f"margin {self.margin}, {self.amax_compute_algo}{pow2})")
        return f"TensorScaling({self.fmt.name}, current, margin {self.margin}{pow2})"


@dataclass(frozen=True)
class RowScaling:
    """torchao's axiswise ("rowwise") float8 scaling, in torchao's float32 order
    (:mod:`floatlab.quant.axiswise`): one float32 multiplier ``fp8_max / amax`` per row along
    the inner dimension, ``fp8(clamp(float32(x) * scale))``, dequantised with
    ``float32(1 / scale)``.

    fmt : the FP8 format (torchao's rowwise recipes use E4M3 for every operand).
    power_of_two : round each scale down to a power of two (torchao's "rowwise" recipe sets
        ``round_scales_to_power_of_2=True``; "rowwise_with_gw_hp" does not).
    name : the label of its bytes in ``bytes_held`` (the storage of the "fp8_rowwise" scheme:
        the codes plus one float32 scale per row).

    >>> RowScaling("e4m3fn", power_of_two=True)
    RowScaling(float8_e4m3fn, power-of-two scales)
    """

    fmt: Any
    power_of_two: bool = False
    name: str = field(default="fp8_rowwise", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fmt", get_format(self.fmt))
        if not isinstance(self.power_of_two, bool):
            raise TypeError(f"power_of_two must be True or False, got {self.power_of_two!r}")
        if not isinstance(self.name, str):  # a key of bytes_held's table
            raise TypeError(f"RowScaling: name must be a str, got {self.name!r}")

    def __repr__(self) -> str:
        how = "power-of-two scales" if self.power_of_two else "float32 scales"
        return f"RowScaling({self.fmt.name}, {how})"


#: How one GEMM operand is quantised (see the module docstring).
Operand = Union[Scheme, TensorScaling, RowScaling, Format, None]  # noqa: UP007 - runtime alias


def is_tensorwise(spec: Operand) -> bool:
    """Whether ``spec`` quantises element-wise with one scale for the whole tensor, so the
    quantised values of a tensor and of its transpose are the same (TE reuses the forward's
    FP8 copy of x for wgrad and of W for dgrad; block schemes quantise the transpose anew).

    >>> from floatlab.quant.scheme import get_scheme
    >>> is_tensorwise(TensorScaling("e4m3fn")), is_tensorwise(get_scheme("mxfp8"))
    (True, False)
    """
    if spec is None or isinstance(spec, (TensorScaling, Format)):
        return True
    return isinstance(spec, Scheme) and spec.block == "tensor" and not spec.hadamard


def _check_operand(spec: Any, where: str) -> Operand:
    if spec is None or isinstance(spec, (Scheme, TensorScaling, RowScaling, Format)):
        return spec
    if isinstance(spec, (str, type, np.dtype)):  # 'e4m3fn', np.float16, 'mxfp8'
        return format_or_scheme(spec, where)
    raise TypeError(f"{where}: an operand is a floatlab.Scheme, a TensorScaling, a RowScaling, "
                    f"a Format or None (high precision), got {spec!r}")


@dataclass(frozen=True)
class Gemm:
    """One matrix product ``A·Bᵀ``: how A and B are quantised (each laid out with the inner
    dimension last) and the Accumulator of the sums (None: float32, as tensor cores do).

    ``codes=True`` (DeepSeek-V3's kernel, :mod:`floatlab.mixed.promoted_gemm`): the accumulator
    sums the products of the element *codes* over each scale tile along K, and the two tiles'
    scales are applied when the partial sum is promoted into float32 (needs Scheme operands
    and an Accumulator with ``chunk`` = the tile length and ``promote="float32"``). False:
    the accumulator sums products of the dequantised values (code * scale).

    >>> Gemm(TensorScaling("e4m3fn"), TensorScaling("e4m3fn")).accumulate is None
    True
    """

    a: Operand = None
    b: Operand = None
    accumulate: Accumulator | None = None
    codes: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "a", _check_operand(self.a, "Gemm.a"))
        object.__setattr__(self, "b", _check_operand(self.b, "Gemm.b"))
        if self.accumulate is not None and not isinstance(self.accumulate, Accumulator):
            raise TypeError(f"Gemm.accumulate must be a floatlab.Accumulator or None, got "
                            f"{self.accumulate!r}")
        if not isinstance(self.codes, bool):
            raise TypeError(f"Gemm.codes must be True or False, got {self.codes!r}")
        acc = self.accumulate
        if self.codes and not (all(isinstance(s, Scheme) and isinstance(s.element, Format)
                                   and not s.hadamard and not s.global_scale
                                   and s.scale != "dq8" for s in (self.a, self.b))
                               and acc is not None and acc.chunk is not None
                               and acc.promote == FP32):
            raise ValueError("Gemm(codes=True) applies the tile scales at each promotion: it "
                             "needs Scheme operands of Format elements with one scale per tile "
                             "(no Hadamard transform, tensor scale or nested scales) and an "
                             "Accumulator with chunk=<tile length> and promote='float32'")


@dataclass(frozen=True)
class Recipe:
    """A training recipe: the three GEMMs of every Linear layer and what stays high.

    Parameters
    ----------
    name : the name users type ("fp8-delayed", "mxfp8", ...).
    forward, dgrad, wgrad : the :class:`Gemm` of ``x·Wᵀ`` (a = x, b = W), ``g·W`` (a = g,
        b = Wᵀ) and ``gᵀ·x`` (a = gᵀ, b = xᵀ).
    compute : format of every non-GEMM result (activations, their gradients): bf16 / fp16.
    master : format of the weights the optimizer updates.
    scaler : the loss scaler the recipe needs ("dynamic" for fp16 compute, else None).
    state : optimizer moment formats, ``{"exp_avg": ..., "exp_avg_sq": ...}`` (a Format or a
        Scheme each); None keeps the master format.
    weight_grad : how weight gradients are stored after wgrad (MS-AMP's FP8 gradients); None:
        the master format.
    weights : how the weights themselves are held between steps (MS-AMP O3's FP8 weights): a
        spec the optimizer's result is cast to once per update; the forward and dgrad GEMMs
        read that stored copy (:func:`floatlab.mixed.recipe_storage.held_weights`) instead of
        quantising the master anew. None: the GEMMs quantise the master weights themselves.
    options : the switches this recipe accepts in :func:`get_recipe` (documented per recipe).
    note : one line for tables.
    """

    name: str
    forward: Gemm
    dgrad: Gemm
    wgrad: Gemm
    compute: Format = BF16
    master: Format = FP32
    scaler: str | None = None
    state: dict[str, Format | Scheme] | None = None
    weight_grad: Operand = None
    weights: Operand = None
    options: dict[str, Any] = field(default_factory=dict, compare=False)
    note: str = ""

    def __post_init__(self) -> None:
        recipe_fields(self)  # types and names of a Recipe built by hand
        if self.weights is not None and (self.forward.codes or self.dgrad.codes):
            raise ValueError("Recipe: weights held between steps (weights=...) are stored "
                             "dequantised, so a GEMM that reads them cannot take codes=True")

    @property
    def gemms(self) -> dict[str, Gemm]:
        return {"forward": self.forward, "dgrad": self.dgrad, "wgrad": self.wgrad}

    def describe(self) -> str:
        """One line per GEMM operand.

        >>> from floatlab.mixed.recipe import get_recipe
        >>> print(get_recipe("fp8-rowwise-gw-hp").describe().splitlines()[4])
          wgrad    a=bfloat16 (cast)  b=bfloat16 (cast)  accumulate float32
        """
        lines = [f"recipe {self.name}: {self.note}",
                 f"  compute {self.compute.name}, master weights {self.master.name}"]
        for label, gemm in self.gemms.items():
            acc = "float32" if gemm.accumulate is None else repr(gemm.accumulate)
            acc += " on the codes, scaled at promotion" if gemm.codes else ""
            lines.append(f"  {label:<8} a={_label(gemm.a)}  b={_label(gemm.b)}  accumulate {acc}")
        if self.state:
            lines.append("  optimizer state " + ", ".join(f"{k} {_label(v)}"
                                                         for k, v in self.state.items()))
        if self.weight_grad is not None:
            lines.append(f"  weight gradients {_label(self.weight_grad)}")
        if self.weights is not None:
            lines.append(f"  weights held as {_label(self.weights)}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Recipe({self.name!r}: {self.note})"


def _label(spec: Any) -> str:
    if spec is None:
        return "high"
    if isinstance(spec, Format):
        return f"{spec.name} (cast)"
    if isinstance(spec, Scheme):
        return spec.name or spec.describe()
    return repr(spec)
