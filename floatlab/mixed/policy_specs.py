"""The :class:`Policy` itself: where every number of a training step lives, and how its ops route.

A Policy is usually resolved from a precision name by :func:`floatlab.mixed.policy.get_policy`
(Lightning's strings, Apex opt levels, recipes; that module re-exports everything here). This
module holds the dataclass, the lab's op tables and the NumPy storage of a format.

Which ops run where follows torch's autocast lists for :attr:`Policy.device` ("cuda" by default,
the GPU case the mixed-precision papers describe; "cpu" for a CPU run -- the lists differ, see
:mod:`floatlab.mixed.autocast`):

* ``"low"`` ops -- matmul, linear, bmm (the attention products) -- produce
  :attr:`Policy.compute` values from inputs rounded to :attr:`Policy.matmul_inputs`; products
  accumulate in :attr:`Policy.accumulate`.
* ``"safe"`` ops run in :attr:`Policy.safe` (float32 in mixed modes), or wider if an input is
  wider. On CUDA: exp, log, layer_norm, softmax, log_softmax, sum and the losses; on CPU only
  the losses.
* ``"promote"`` ops produce the widest of their inputs' formats: embedding, gelu, dropout,
  masked_fill, add, sub, mul, div, neg, relu, tanh, and mean everywhere; on CPU also exp, log,
  layer_norm, softmax, log_softmax and sum (so a bf16 input gives a bf16 result).

:data:`LAB_OPS` lists every computing op of the lab's tensors, layers and models (the MLP and
the Transformer; attention is bmm + masked_fill + softmax, as torch's math backend computes
it); :data:`STRUCTURAL_OPS` the graph nodes that only move or relabel values, which autocast
does not touch.

>>> Policy.mixed("bf16").op_format("softmax", BF16).name
'float32'
>>> replace(Policy.mixed("bf16"), device="cpu").op_format("softmax", BF16).name
'bfloat16'
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from typing import Any, Literal

import numpy as np

from floatlab.accumulate import Accumulator
from floatlab.formats import Format, get_format
from floatlab.mixed.autocast import DEVICES, op_kind, ops_of_kind
from floatlab.mixed.checks import policy_fields
from floatlab.mixed.recipe import Recipe, get_recipe
from floatlab.promotion import contains, widest

__all__ = [
    "Policy",
    "LAB_OPS",
    "OP_KINDS",
    "STRUCTURAL_OPS",
    "storage_dtype",
    "is_identity",
    "nbytes",
    "accumulate_label",
]

FP64 = get_format("float64")
FP32 = get_format("float32")
FP16 = get_format("float16")
BF16 = get_format("bfloat16")
TF32 = get_format("tensorfloat32")

OpKind = Literal["low", "safe", "promote"]

#: The computing ops of :mod:`floatlab.mixed.tensor`, :mod:`~floatlab.mixed.nn`,
#: :mod:`~floatlab.mixed.layers` and :mod:`~floatlab.mixed.attention` (every op the lab's
#: models call), each with an entry in torch's autocast lists (:data:`AUTOCAST_LISTS`).
LAB_OPS: tuple[str, ...] = (
    "matmul", "linear", "bmm", "embedding", "layer_norm", "gelu", "dropout", "masked_fill",
    "exp", "log", "sum", "mean", "softmax", "log_softmax", "cross_entropy", "mse_loss",
    "add", "sub", "mul", "div", "neg", "relu", "tanh", "reciprocal",
)

#: Graph nodes that move, select or relabel values without computing (views, casts by the
#: policy itself, leaves): autocast has no say over them.
STRUCTURAL_OPS: tuple[str, ...] = (
    "leaf", "reshape", "permute", "transpose", "narrow", "cast", "detach",
)

#: The kind of each lab op per device, ``OP_KINDS[device][op]``, from torch's autocast lists.
OP_KINDS: dict[str, dict[str, OpKind]] = {
    device: {op: op_kind(op, device) for op in LAB_OPS} for device in DEVICES
}

ScalerSpec = Literal["dynamic"] | float | None

def _wrap_ops(label: str, value: str, width: int = 60) -> list[tuple[str, str]]:
    """A long "op, op, ..." row label over several lines, the value on the last."""
    if len(label) <= width or ", " not in label:
        return [(label, value)]
    lines, line = [], ""
    for op in label.split(", "):
        if line and len(line) + len(op) + 2 > width:
            lines.append(line + ",")
            line = op
        else:
            line = f"{line}, {op}" if line else op
    lines.append(line)
    return [(text, "") for text in lines[:-1]] + [(lines[-1], value)]


@cache
def storage_dtype(fmt: Format) -> np.dtype:
    """The NumPy dtype that stores values of ``fmt`` exactly: float32 when it can, else float64.

    float32 is chosen only when the rounding core can also work in float32 for this format
    (its normal range starts inside float32's), so rounding stays on the fast path.

    >>> from floatlab import get_format
    >>> storage_dtype(get_format("bf16")), storage_dtype(get_format("fp64"))
    (dtype('float32'), dtype('float64'))
    """
    fits = contains(FP32, fmt) and fmt.emin >= FP32.emin
    return np.dtype(np.float32 if fits else np.float64)


@cache
def is_identity(fmt: Format, dtype: np.dtype) -> bool:
    """Whether rounding an array of ``dtype`` to ``fmt`` can never change it (fp32 -> fp32)."""
    own = FP32 if dtype == np.float32 else FP64
    return contains(fmt, own)


def nbytes(fmt: Format, numel: int) -> int:
    """Real storage size of ``numel`` values of ``fmt``: ``ceil(numel * bits / 8)`` bytes."""
    return -(-numel * fmt.bits // 8)


# --------------------------------------------------------------------------- the policy

@dataclass(frozen=True)
class Policy:
    """Where every number of a training step lives.

    Parameters
    ----------
    name : the precision string this policy came from (shown in tables).
    weights : format of the parameters the optimizer updates (the *master* weights when they
        differ from ``compute``).
    compute : format of low-precision ops' results (matmul, linear) and of the per-step weight
        copy they read.
    matmul_inputs : format matmul / linear inputs are rounded to before the product (``compute``
        unless a float32 matmul precision of "high" / "medium" asks for TF32 / bf16 inputs).
    accumulate : format the matmul partial sums are kept in (float32 by default; a 16-bit format
        here shows why nobody does that: 2048 + 1 is 2048 in fp16, so long sums stall), or a
        :class:`floatlab.Accumulator` (rounding, chunked promotion, ...). A narrow accumulator
        runs through ``floatlab.matmul``: one vectorised addition per inner index.
    safe : format of exp, log, softmax, reductions and losses (float32 in mixed modes).
    inputs : format the data enters in (the low format in true modes and Apex O2).
    optimizer_state : format of momentum / Adam moments (None: the weights' format).
    scaler : ``"dynamic"`` (a GradScaler), a number (a static loss scale) or None.
    scaler_max : cap on the dynamic scale (Apex's 2**24), or None (torch).
    rounding : rounding mode of every op result ("nearest_even" or "stochastic").
    saturate : op results that overflow become +-max instead of inf / NaN.
    note : one line for tables and reprs.
    device : whose autocast op lists route the ops: "cuda" (default) or "cpu" (they differ:
        on CPU, exp / log / softmax / sum run in their input's format).
    recipe : a low-precision training :class:`~floatlab.mixed.recipe.Recipe` (FP8, MX, NVFP4,
        ...): it decides the quantisation of the Linear layers' three GEMMs; every other op
        follows the fields above (see :meth:`from_recipe`).

    >>> p = Policy.mixed("float8_e5m2")
    >>> p.name, p.master_weights, p.scaler
    ('float8_e5m2-mixed', True, 'dynamic')
    """

    name: str
    weights: Format
    compute: Format
    matmul_inputs: Format
    accumulate: Format | Accumulator
    safe: Format
    inputs: Format
    optimizer_state: Format | None = None
    scaler: ScalerSpec = None
    scaler_max: float | None = None
    rounding: str = "nearest_even"
    saturate: bool = False
    note: str = ""
    device: str = "cuda"
    recipe: Recipe | None = None

    def __post_init__(self) -> None:
        policy_fields(self)  # names resolved, modes and flags checked (a Policy built by hand)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def true(cls, fmt: str | Format, *, name: str | None = None) -> Policy:
        """Everything in ``fmt``: weights, data, activations, gradients, optimizer state.

        Matmuls still accumulate in float32 (as tensor cores do) unless ``fmt`` is wider.

        >>> Policy.true("bf16").weights.name
        'bfloat16'
        """
        f = get_format(fmt)
        return cls(
            name=name or f"{f.name}-true", weights=f, compute=f, matmul_inputs=f,
            accumulate=widest(f, FP32), safe=f, inputs=f, scaler=None,
            note=f"{f.name} everywhere, no scaler",
        )

    @classmethod
    def mixed(
        cls,
        fmt: str | Format,
        *,
        master: str | Format = FP32,
        scaler: ScalerSpec | Literal["auto"] = "auto",
        name: str | None = None,
    ) -> Policy:
        """Master weights in ``master`` (float32), matmuls in ``fmt``, the safe list in float32.

        ``scaler="auto"`` picks a dynamic loss scaler when ``fmt`` has less exponent range than
        float32 (fp16, fp8), and none when it has float32's range (bf16).

        >>> Policy.mixed("fp16").scaler, Policy.mixed("bf16").scaler
        ('dynamic', None)
        """
        f, m = get_format(fmt), get_format(master)
        if scaler == "auto":
            scaler = "dynamic" if f.emin > FP32.emin else None
        return cls(
            name=name or f"{f.name}-mixed", weights=m, compute=f, matmul_inputs=f,
            accumulate=widest(FP32, f), safe=widest(FP32, m), inputs=widest(FP32, m),
            scaler=scaler, note=f"{m.name} masters, {f.name} matmuls, float32 safe list",
        )

    @classmethod
    def from_recipe(cls, recipe: str | Recipe, **options: Any) -> Policy:
        """The mixed policy a recipe runs in: its compute format (bf16 / fp16) for non-GEMM
        results, float32 safe ops, its master and optimizer-state formats, its scaler.

        >>> p = Policy.from_recipe("mxfp8")
        >>> p.name, p.compute.name, p.weights.name, p.recipe.forward.a.name
        ('mxfp8', 'bfloat16', 'float32', 'mxfp8 floor')
        """
        r = get_recipe(recipe, **options)
        base = cls.mixed(r.compute, master=r.master, scaler=r.scaler, name=r.name)
        state = r.state or {}
        moments = set(state.values())
        # A single Format for both moments is the policy's optimizer_state; per-moment formats
        # and Schemes are the optimizer's business (floatlab.mixed.optim8bit.StateAdam).
        single = next(iter(moments)) if len(moments) == 1 and isinstance(
            next(iter(moments)), Format) else None
        return replace(base, recipe=r, optimizer_state=single, note=r.note)

    # ------------------------------------------------------------------ derived
    @property
    def master_weights(self) -> bool:
        """Whether the optimizer updates separate master weights (a low copy is made per step)."""
        return self.weights != self.compute

    @property
    def state_format(self) -> Format:
        """Format of the optimizer's state (momentum, Adam moments)."""
        return self.optimizer_state or self.weights

    @property
    def autocasts(self) -> bool:
        """Whether the op lists matter: some ops run in another format than the compute one."""
        return self.safe != self.compute

    def op_kind(self, op: str) -> OpKind:
        """The kind of ``op`` under this policy's device lists ("low", "safe", "promote")."""
        return op_kind(op, self.device)

    def op_format(self, op: str, *inputs: Format) -> Format:
        """The format ``op`` produces from inputs of formats ``inputs`` on this device.

        >>> from floatlab.mixed import get_policy
        >>> p = get_policy("16-mixed")
        >>> p.op_format("exp", FP16).name, p.op_format("mean", FP16).name
        ('float32', 'float16')
        """
        return self.format_for(self.op_kind(op), *inputs)

    def format_for(self, kind: OpKind, *inputs: Format) -> Format:
        """The format an op of ``kind`` produces from inputs of formats ``inputs``.

        >>> from floatlab.mixed import get_policy
        >>> p = get_policy("16-mixed")
        >>> p.format_for("low").name, p.format_for("safe", FP16).name
        ('float16', 'float32')
        """
        if kind == "low":
            return self.compute
        if kind == "safe":
            # autocast's float32 list only widens: a float64 input stays float64.
            return widest(self.safe, *inputs) if inputs else self.safe
        return widest(*inputs)

    def describe(self) -> str:
        """A short table of where everything lives.

        >>> from floatlab.mixed import get_policy
        >>> print(get_policy("bf16-true").describe().splitlines()[0])
        policy bf16-true: bfloat16 everywhere: weights, activations, gradients, optimizer state
        """
        low_ops = " / ".join(ops_of_kind("low", self.device, LAB_OPS))
        safe_ops = ", ".join(ops_of_kind("safe", self.device, LAB_OPS))
        promote_ops = ", ".join(ops_of_kind("promote", self.device, LAB_OPS))
        rows = [
            ("autocast op lists", f"torch's {self.device.upper()} lists"),
            ("weights updated by the optimizer", self.weights.name),
            ("weight copy read by matmuls", self.compute.name if self.master_weights else "-"),
            (f"{low_ops} inputs", self.matmul_inputs.name),
            ("matmul accumulation", accumulate_label(self.accumulate)),
            (f"{low_ops} results", self.compute.name),
            (safe_ops, self.safe.name),
            (promote_ops, "widest input"),
            ("data enters as", self.inputs.name),
            ("optimizer state", self.state_format.name),
            ("loss scaling", _scaler_text(self.scaler, self.scaler_max)),
        ]
        rows = [part for k, v in rows for part in _wrap_ops(k, v)]
        width = max(len(r[0]) for r in rows)
        lines = [f"policy {self.name}: {self.note}"]
        lines += [f"  {k:<{width}}  {v}".rstrip() for k, v in rows]
        if self.recipe is not None:  # the GEMMs' operands and accumulators
            lines += self.recipe.describe().splitlines()[2:]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()

    def __repr__(self) -> str:
        return f"Policy({self.name!r}: {self.note})"


def _scaler_text(scaler: ScalerSpec, cap: float | None) -> str:
    if scaler is None:
        return "none"
    if scaler == "dynamic":
        return "dynamic GradScaler" + (f" (max {cap:g})" if cap else "")
    return f"static x{scaler:g}"


def accumulate_label(accumulate: Format | Accumulator) -> str:
    """The accumulation format's name, or the Accumulator's settings."""
    if isinstance(accumulate, Accumulator):
        return repr(accumulate).removeprefix("Accumulator(").removesuffix(")")
    return accumulate.name
