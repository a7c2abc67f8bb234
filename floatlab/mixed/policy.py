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

The :class:`Policy` dataclass, the op tables (:data:`LAB_OPS`, :data:`OP_KINDS`,
:data:`STRUCTURAL_OPS`: which op runs in which format, after torch's autocast lists) and the
storage helpers live in :mod:`floatlab.mixed.policy_specs`; this module turns precision names
into policies and re-exports them, so ``from floatlab.mixed.policy import Policy`` keeps working.

>>> get_policy("bf16-mixed").op_format("softmax", BF16).name
'float32'
>>> get_policy("bf16-mixed", device="cpu").op_format("softmax", BF16).name
'bfloat16'
"""

from __future__ import annotations

import difflib
import warnings
from dataclasses import replace
from typing import Any

import numpy as np

from floatlab.accumulate import Accumulator
from floatlab.formats import Format, FormatNameError, get_format
from floatlab.mixed.autocast import check_device
from floatlab.mixed.policy_specs import (  # noqa: F401 - re-exported: callers import them here
    BF16,
    FP16,
    FP32,
    FP64,
    LAB_OPS,
    OP_KINDS,
    STRUCTURAL_OPS,
    TF32,
    OpKind,
    Policy,
    ScalerSpec,
    _scaler_text,
    _wrap_ops,
    accumulate_label,
    is_identity,
    nbytes,
    storage_dtype,
)
from floatlab.mixed.recipe import RECIPES, Recipe, recipe_key
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


def takes_loss_scaler(recipe: Recipe | None) -> bool:
    """Whether a bf16 recipe's peer trains it with a user's loss scaler: MS-AMP's does. Its
    usage guide and examples (docs/user-tutorial/usage.md, examples/mnist.py) wrap
    ``msamp.initialize(model, optimizer, opt_level="O1" / "O2")`` in torch's ``GradScaler``,
    whose unscaling MS-AMP overrides for its FP8 weight gradients
    (``torch._amp_foreach_non_finite_check_and_unscale_``, msamp/common/tensor/tensor.py), and
    its DeepSpeed configs run O3 with dynamic loss scaling. Transformer Engine's bf16 recipes
    run without one (Lightning's ``TransformerEnginePrecision`` takes no scaler), as do the
    other recipes (bf16 outside their GEMMs, whose operands scale themselves)."""
    return recipe is not None and recipe.name.startswith("msamp-")


def refuse_scaler_for_bf16_mixed(policy: Policy, scaler: Any) -> None:
    """Lightning's rule: "bf16-mixed" takes no loss scaler (bfloat16 has float32's range); nor
    do the bf16 recipes, but MS-AMP's (see :func:`takes_loss_scaler`)."""
    if scaler is not None and scaler is not False and policy.recipe is not None and \
            policy.compute == BF16 and not takes_loss_scaler(policy.recipe):
        raise ValueError(f"recipe {policy.name!r} keeps bf16 outside its GEMMs and scales its "
                         f"low-precision tensors itself: it takes no loss scaler, found "
                         f"{scaler!r}, as its peers train it without one (bfloat16 has "
                         "float32's range; Lightning's TransformerEnginePrecision takes no "
                         "scaler). Pass scaler=None (or use 'transformer-engine-float16' for "
                         "fp16 with a GradScaler, or an 'msamp-O*' recipe: MS-AMP's examples "
                         "use one)")
    if scaler is not None and scaler is not False and policy.name == "bf16-mixed":
        raise ValueError(
            f"precision='bf16-mixed' does not use a scaler (bfloat16 has float32's range), "
            f"found {scaler!r}. Pass scaler=None, or build "
            "Policy.mixed('bf16', scaler='dynamic') to experiment."
        )


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


def _scaler_spec(scaler: Any) -> ScalerSpec:
    if scaler is None or scaler is False:
        return None
    if scaler is True or scaler == "dynamic":
        return "dynamic"
    if isinstance(scaler, (int, float)) and not isinstance(scaler, bool) and scaler > 0:
        return float(scaler)
    raise ValueError(f"scaler={scaler!r}: use None, 'dynamic' or a positive static factor "
                     "such as 8.0 (pass scaler objects to the Trainer)")
