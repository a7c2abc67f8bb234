"""Precision policies: which format each weight, op, gradient and optimizer state uses.

A :class:`Policy` answers every "in which format?" question the lab asks. It is resolved from
the names users already type: Lightning's precision strings, Apex opt levels, and a
``torch.set_float32_matmul_precision``-style setting for 32-bit runs. A custom policy can name
any floatlab format.

>>> from floatlab.mixed import get_policy
>>> p = get_policy("16-mixed")
>>> p.weights.name, p.compute.name, p.safe.name, p.scaler
('float32', 'float16', 'float32', 'dynamic')
>>> get_policy("32-true", matmul_precision="medium").matmul_inputs.name
'bfloat16'
>>> get_policy("float8_e5m2-mixed").compute.name     # push past what the hardware names
'float8_e5m2'

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

>>> get_policy("bf16-mixed").op_format("softmax", BF16).name
'float32'
>>> get_policy("bf16-mixed", device="cpu").op_format("softmax", BF16).name
'bfloat16'
"""

from __future__ import annotations

import difflib
import warnings
from dataclasses import dataclass, replace
from functools import cache
from typing import Any, Literal

import numpy as np

from floatlab.accumulate import Accumulator
from floatlab.formats import Format, FormatNameError, get_format
from floatlab.mixed.autocast import DEVICES, check_device, op_kind, ops_of_kind
from floatlab.mixed.checks import policy_fields
from floatlab.mixed.recipe import RECIPES, Recipe, get_recipe, recipe_key
from floatlab.promotion import contains, widest  # noqa: F401 - re-exported (policy API)

__all__ = [
    "Policy",
    "get_policy",
    "PRECISIONS",
    "LEGACY_ALIASES",
    "MATMUL_PRECISIONS",
    "OP_KINDS",
    "LAB_OPS",
    "STRUCTURAL_OPS",
    "contains",
    "widest",
    "storage_dtype",
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

#: The precision strings floatlab understands, with one line each (Lightning's, then Apex's).
PRECISIONS: dict[str, str] = {
    "64-true": "float64 weights and compute",
    "32-true": "float32 weights and compute (Lightning's default)",
    "16-mixed": "float32 master weights, float16 matmuls, float32 softmax/losses, GradScaler",
    "bf16-mixed": "float32 master weights, bfloat16 matmuls, float32 softmax/losses, no scaler",
    "16-true": "float16 everywhere: weights, activations, gradients, optimizer state",
    "bf16-true": "bfloat16 everywhere: weights, activations, gradients, optimizer state",
    "O0": "Apex O0: pure float32, loss scale 1",
    "O1": "Apex O1: float32 weights, float16 whitelist ops, float32 blacklist ops, dynamic scale",
    "O2": "Apex O2: float16 model and inputs, float32 master weights, dynamic scale",
    "O3": "Apex O3: pure float16, loss scale 1",
}

#: Lightning's legacy aliases (still accepted by Lightning, which warns for 16 and "bf16" only).
LEGACY_ALIASES: dict[Any, str] = {
    64: "64-true", 32: "32-true", 16: "16-mixed",
    "64": "64-true", "32": "32-true", "16": "16-mixed", "bf16": "bf16-mixed",
}

#: torch.set_float32_matmul_precision settings: the format float32 matmul inputs are rounded to.
MATMUL_PRECISIONS: dict[str, Format] = {"highest": FP32, "high": TF32, "medium": BF16}

# Apex's dynamic scaler caps the scale at 2**24 (max_loss_scale); torch's has no cap.
_APEX_MAX_SCALE = 2.0**24


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


def refuse_scaler_for_bf16_mixed(policy: Policy, scaler: Any) -> None:
    """Lightning's rule: "bf16-mixed" takes no loss scaler (bfloat16 has float32's range)."""
    if scaler is not None and scaler is not False and policy.recipe is not None and \
            policy.compute == BF16:
        raise ValueError(f"recipe {policy.name!r} keeps bf16 outside its GEMMs and scales its "
                         f"low-precision tensors itself: it takes no loss scaler, found "
                         f"{scaler!r}. Pass scaler=None (or use 'transformer-engine-float16' "
                         "for fp16 with a GradScaler)")
    if scaler is not None and scaler is not False and policy.name == "bf16-mixed":
        raise ValueError(
            f"precision='bf16-mixed' does not use a scaler (bfloat16 has float32's range), "
            f"found {scaler!r}. Pass scaler=None, or build "
            "Policy.mixed('bf16', scaler='dynamic') to experiment."
        )


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

        >>> p = get_policy("16-mixed")
        >>> p.op_format("exp", FP16).name, p.op_format("mean", FP16).name
        ('float32', 'float16')
        """
        return self.format_for(self.op_kind(op), *inputs)

    def format_for(self, kind: OpKind, *inputs: Format) -> Format:
        """The format an op of ``kind`` produces from inputs of formats ``inputs``.

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


def _builtin(name: str) -> Policy:
    if name == "64-true":
        return replace(Policy.true(FP64, name=name), note=PRECISIONS[name])
    if name in ("32-true", "O0"):
        return replace(Policy.true(FP32, name=name), note=PRECISIONS[name])
    if name in ("16-true", "O3"):
        return replace(Policy.true(FP16, name=name), note=PRECISIONS[name])
    if name == "bf16-true":
        return replace(Policy.true(BF16, name=name), note=PRECISIONS[name])
    if name == "16-mixed":
        return replace(Policy.mixed(FP16, name=name), note=PRECISIONS[name])
    if name == "bf16-mixed":
        return replace(Policy.mixed(BF16, name=name), note=PRECISIONS[name])
    if name == "O1":
        return replace(Policy.mixed(FP16, name=name), scaler_max=_APEX_MAX_SCALE,
                       note=PRECISIONS[name])
    if name == "O2":  # the whole model runs in fp16 (no float32 list); masters stay float32
        return replace(Policy.mixed(FP16, name=name), safe=FP16, inputs=FP16,
                       scaler_max=_APEX_MAX_SCALE, note=PRECISIONS[name])
    raise AssertionError(name)


def _valid_list() -> str:
    legacy = ", ".join(repr(k) for k in LEGACY_ALIASES)
    return (
        f"use one of {', '.join(repr(k) for k in PRECISIONS)}; the legacy aliases {legacy}; "
        "or '<format>-mixed' / '<format>-true' with any floatlab format "
        "(e.g. 'float8_e5m2-mixed'); a training recipe (" + ", ".join(map(repr, RECIPES)) + "); "
        "or a floatlab.mixed.Policy"
    )


def _resolve_name(precision: Any) -> Policy:
    if isinstance(precision, Policy):
        return precision
    if isinstance(precision, Recipe):
        return Policy.from_recipe(precision)
    if isinstance(precision, str) and (recipe := recipe_key(precision)) is not None:
        return Policy.from_recipe(recipe)
    if isinstance(precision, np.integer):  # Lightning's `precision in (..., 16)` takes them
        precision = int(precision)
    if isinstance(precision, bool) or not isinstance(precision, (str, int)):
        raise TypeError(f"precision must be a string such as '16-mixed' or a Policy, "
                        f"got {precision!r}; {_valid_list()}")
    # case-insensitive, as recipe, Apex and format names are: "16-Mixed" is "16-mixed"
    lookup = precision.strip().lower() if isinstance(precision, str) else precision
    if lookup in LEGACY_ALIASES:
        target = LEGACY_ALIASES[lookup]
        if target not in ("32-true", "64-true"):  # Lightning warns for 16 and bf16 only
            warnings.warn(
                f"precision={precision!r} is a legacy alias (Lightning still accepts it but "
                f"discourages it); it means {target!r}: write that instead",
                UserWarning, stacklevel=3,
            )
        return _builtin(target)
    if isinstance(precision, int):
        raise ValueError(f"precision={precision!r} is not a known bit width; {_valid_list()}")
    key = precision.strip()
    if lookup in PRECISIONS:
        return _builtin(lookup)
    if key.upper() in ("O0", "O1", "O2", "O3"):
        return _builtin(key.upper())
    if key in ("00", "01", "02", "03"):
        raise ValueError(f"precision={precision!r}: Apex opt levels start with the letter O "
                         f"('O{key[1]}'), not zero")
    for suffix, build in (("-mixed", Policy.mixed), ("-true", Policy.true)):
        if lookup.endswith(suffix):
            try:
                return build(key[: -len(suffix)])
            except FormatNameError as err:
                raise ValueError(f"unknown precision {precision!r}: {err} Valid precisions: "
                                 f"{_valid_list()}") from None
    try:
        fmt = get_format(key)
    except (FormatNameError, ValueError, TypeError):
        fmt = None
    if fmt is not None:  # a format where a precision belongs: say which precisions use it
        if fmt == FP16:
            options = "'16-mixed' (float32 master weights, float16 matmuls, a GradScaler) or " \
                      "'16-true' (float16 everywhere)"
        elif fmt == BF16:
            options = "'bf16-mixed' or 'bf16-true'"
        elif fmt in (FP32, FP64):
            options = f"'{fmt.bits}-true'"
        else:
            options = f"'{fmt.name}-mixed' or '{fmt.name}-true'"
        raise ValueError(f"precision={precision!r} names a format, not a precision: use "
                         f"{options}")
    close = difflib.get_close_matches(key, [*PRECISIONS, *RECIPES], n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(f"unknown precision {precision!r}.{hint} Valid: {_valid_list()}")


def get_policy(
    precision: Any = "32-true",
    *,
    matmul_precision: str | None = None,
    accumulate: str | Format | Accumulator | None = None,
    scaler: Any = "auto",
    optimizer_state: str | Format | None = None,
    rounding: str | None = None,
    device: str | None = None,
    recipe_options: dict[str, Any] | None = None,
) -> Policy:
    """Resolve a precision name (or Policy) and optional overrides to a :class:`Policy`.

    Parameters
    ----------
    precision : "64-true", "32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true",
        the legacy aliases 64 / 32 / 16 / "bf16", Apex "O0".."O3", "<format>-mixed" /
        "<format>-true", or a Policy.
    matmul_precision : "highest" / "high" / "medium", as ``torch.set_float32_matmul_precision``:
        float32 matmuls get float32 / TF32 / bf16 inputs. No effect on 16-bit or float64 matmuls.
    accumulate : format of matmul partial sums (e.g. "fp16" to see why nobody accumulates there)
        or an Accumulator, e.g. ``Accumulator("e8m13", "toward_zero", chunk=128,
        promote="float32")``.
    scaler : "auto" keeps the policy's choice; None, "dynamic" or a static factor override it.
        "bf16-mixed" refuses a scaler, as Lightning does.
    optimizer_state : format of the optimizer state (default: the weights' format).
    rounding : rounding mode of every op result ("nearest_even" or "stochastic").
    device : "cuda" or "cpu": whose autocast op lists route the ops (None keeps the policy's,
        "cuda" for the named precisions). The name of a mixed policy says "cpu autocast".
    recipe_options : options of a training recipe (see
        :func:`floatlab.mixed.recipe.get_recipe`), e.g. ``{"scale_rounding": "rceil"}`` with
        "mxfp8"; the policy's name lists them.

    >>> get_policy("16-mixed", scaler=None).name
    '16-mixed (no scaler)'
    >>> get_policy("bf16-mixed", device="cpu").name
    'bf16-mixed (cpu autocast)'
    >>> get_policy("bf16-mixed", scaler="dynamic")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: precision='bf16-mixed' does not use a scaler (bfloat16 has float32's range), ...
    """
    if recipe_options is not None and not isinstance(recipe_options, dict):  # [] was ignored
        raise TypeError(f"recipe_options must be a dict such as {{'scale_rounding': "
                        f"'rceil'}}, got {recipe_options!r}")
    if recipe_options:
        recipe = recipe_key(precision) if isinstance(precision, str) else None
        if recipe is None:
            raise ValueError(f"recipe_options={recipe_options!r} need a recipe name as the "
                             f"precision ({', '.join(map(repr, RECIPES))}), got {precision!r}")
        policy = Policy.from_recipe(recipe, **recipe_options)
        shown = ", ".join(f"{k}={v}" for k, v in recipe_options.items())
        policy = replace(policy, name=f"{policy.name} ({shown})")
    else:
        policy = _resolve_name(precision)
    base = policy.name
    suffix: list[str] = []
    if matmul_precision is not None:
        if matmul_precision not in MATMUL_PRECISIONS:
            raise ValueError(f"matmul_precision={matmul_precision!r}: use one of "
                             f"{', '.join(repr(k) for k in MATMUL_PRECISIONS)} "
                             "(as torch.set_float32_matmul_precision)")
        # Like torch, the setting touches float32 matmuls only.
        if policy.compute == FP32 and matmul_precision != "highest":
            policy = replace(policy, matmul_inputs=MATMUL_PRECISIONS[matmul_precision])
            suffix.append(f"matmul {matmul_precision}")
    if accumulate is not None:
        if not isinstance(accumulate, Accumulator):
            accumulate = get_format(accumulate)
        policy = replace(policy, accumulate=accumulate)
        suffix.append(f"accumulate {accumulate_label(accumulate)}")
    if scaler != "auto":
        refuse_scaler_for_bf16_mixed(policy, scaler)
        spec = _scaler_spec(scaler)
        if spec != policy.scaler:
            policy = replace(policy, scaler=spec)
            suffix.append("no scaler" if spec is None else
                          "dynamic scaler" if spec == "dynamic" else f"static scale {spec:g}")
    if optimizer_state is not None:
        policy = replace(policy, optimizer_state=get_format(optimizer_state))
        suffix.append(f"state {policy.state_format.name}")
    if rounding is not None:  # resolved by Policy (an alias such as "sr" -> "stochastic")
        policy = replace(policy, rounding=rounding)
        suffix.append(f"{policy.rounding} rounding")
    if device is not None and check_device(device) != policy.device:
        if base in ("O1", "O2"):
            raise ValueError(f"device={device!r}: Apex {base} has its own op lists "
                             "and runs on CUDA only; use '16-mixed' or 'bf16-mixed' for a CPU "
                             "run")
        policy = replace(policy, device=device)
        if policy.autocasts:
            suffix.append(f"{device} autocast")
            if device == "cpu":  # the notes describe the CUDA lists
                policy = replace(policy, note=f"{policy.note}; torch's CPU lists: only the "
                                              "losses in float32, softmax / exp / log / sums in "
                                              "their input's format")
    if suffix:
        policy = replace(policy, name=f"{policy.name} ({', '.join(suffix)})")
    return policy


def accumulate_label(accumulate: Format | Accumulator) -> str:
    """The accumulation format's name, or the Accumulator's settings."""
    if isinstance(accumulate, Accumulator):
        return repr(accumulate).removeprefix("Accumulator(").removesuffix(")")
    return accumulate.name


def _scaler_spec(scaler: Any) -> ScalerSpec:
    if scaler is None or scaler is False:
        return None
    if scaler is True or scaler == "dynamic":
        return "dynamic"
    if isinstance(scaler, (int, float)) and not isinstance(scaler, bool) and scaler > 0:
        return float(scaler)
    raise ValueError(f"scaler={scaler!r}: use None, 'dynamic' or a positive static factor "
                     "such as 8.0 (pass scaler objects to the Trainer)")
