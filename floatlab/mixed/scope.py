"""The active precision scope and the single rounding hook every op of the lab goes through.

A scope holds the :class:`~floatlab.mixed.Policy` ops use, the generator for stochastic
rounding, the telemetry counters being filled and whether a graph is built. :func:`quantize`
is the one place emulation happens: every op result and gradient is rounded there, to the
format the active policy assigns, and counted by the active :class:`StepStats`.

>>> import numpy as np
>>> with use_precision("bf16-mixed") as p:
...     quantize(np.array([1 / 3], np.float32), p.compute).tolist()
[0.333984375]
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from floatlab._validate import as_float_array
from floatlab.formats import Format, get_format
from floatlab.mixed.checks import seed as seed_rng
from floatlab.mixed.policy import Policy, get_policy, is_identity, storage_dtype
from floatlab.mixed.telemetry import StepStats
from floatlab.rounding import _resolve_mode
from floatlab.rounding import round as _round

__all__ = ["quantize", "use_precision", "no_grad", "recording", "active_policy"]


# --------------------------------------------------------------------------- the active scope

@dataclass(frozen=True)
class _Scope:
    policy: Policy
    rng: np.random.Generator | None = None
    stats: StepStats | None = None
    grad_enabled: bool = True
    pending: list | None = None  # parameter gradients waiting to be rounded (in backward)


_DEFAULT_SCOPE = _Scope(get_policy())
_SCOPE: ContextVar[_Scope] = ContextVar("floatlab_mixed_scope")


def _scope() -> _Scope:
    return _SCOPE.get(_DEFAULT_SCOPE)


def active_policy() -> Policy:
    """The policy ops use right now ("32-true" outside any :func:`use_precision` block)."""
    return _scope().policy


@contextmanager
def _pushed(**changes: Any) -> Iterator[_Scope]:
    token = _SCOPE.set(replace(_scope(), **changes))
    try:
        yield _scope()
    finally:
        _SCOPE.reset(token)


@contextmanager
def use_precision(
    precision: Any = "32-true", *, rng: np.random.Generator | int | None = None, **overrides: Any
) -> Iterator[Policy]:
    """Run the ops inside the block under a precision policy; yields the :class:`Policy`.

    ``precision`` and ``overrides`` go to :func:`~floatlab.mixed.get_policy`. ``rng`` (a
    Generator or seed, default 0) drives stochastic rounding when the policy asks for it.

    >>> with use_precision("bf16-true") as p:
    ...     quantize(np.array([1.0 + 2**-9], np.float32), p.compute).tolist(), p.name
    ([1.0], 'bf16-true')
    """
    policy = get_policy(precision, **overrides)
    if not isinstance(rng, np.random.Generator) and (rng is not None
                                                     or policy.rounding == "stochastic"):
        rng = seed_rng("use_precision: rng", 0 if rng is None else rng)
    # Overflow and NaN are what the lab studies: telemetry counts them, so NumPy's warnings
    # about them are silenced inside a policy block (one errstate here, none per op).
    with _pushed(policy=policy, rng=rng), np.errstate(all="ignore"):
        yield policy


@contextmanager
def no_grad() -> Iterator[None]:
    """Ops inside the block build no graph (for evaluation)."""
    with _pushed(grad_enabled=False):
        yield


@contextmanager
def recording(stats: StepStats) -> Iterator[StepStats]:
    """Let the hook count what it rounds into ``stats`` (see :mod:`floatlab.mixed.telemetry`)."""
    if not isinstance(stats, StepStats):  # else every op of the block fails in the hook
        raise TypeError(f"recording: stats must be a floatlab.mixed.StepStats, got "
                        f"{type(stats).__name__}; e.g. recording(StepStats())")
    with _pushed(stats=stats):
        yield stats


# --------------------------------------------------------------------------- the single hook

_DT32, _DT64 = np.dtype(np.float32), np.dtype(np.float64)
_FALLBACK_RNG = np.random.default_rng(0)  # stochastic rounding outside a seeded scope
_PLANS: dict[int, tuple[Format, np.dtype, bool, bool]] = {}


def _plan(fmt: Format) -> tuple[Format, np.dtype, bool, bool]:
    """(fmt, storage dtype, float32 input is already exact, float64 input is already exact),
    memoised by identity: the hook runs a few dozen times per step and hashing a Format
    dataclass would cost more than the lookup."""
    plan = _PLANS.get(id(fmt))
    if plan is None or plan[0] is not fmt:
        plan = (fmt, storage_dtype(fmt), is_identity(fmt, _DT32), is_identity(fmt, _DT64))
        _PLANS[id(fmt)] = plan
    return plan


def quantize(
    values: np.ndarray,
    fmt: Format,
    *,
    what: str = "activations",
    exact: bool = False,
    rounding: str | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Round ``values`` to ``fmt`` under the active policy: the one place emulation happens.

    Returns an array of ``fmt``'s storage dtype (float32 when the format fits, else float64).
    Roundings that cannot change anything (float32 values to float32, any format to a wider
    one, or ``exact=True``: the caller knows the values are already in ``fmt``) are skipped.
    ``what`` labels the values for telemetry: "activations", "grads", "weights", "optimizer",
    "inputs" (transient matmul-input roundings, not held), or "partial" (matmul partial sums,
    not counted at all). ``rounding`` / ``rng`` override the policy's rounding mode and the
    scope's generator (the optimizers' stochastic updates use them).

    >>> import numpy as np; from floatlab import get_format
    >>> quantize(np.array([1 / 3], np.float32), get_format("bf16")).tolist()
    [0.333984375]
    """
    scope = _scope()
    if not isinstance(fmt, Format):  # the ops pass Formats; a name is resolved (or refused)
        fmt = get_format(fmt)
    if rounding is not None:  # an alias ("sr") is the mode it names, "" is refused
        rounding = _resolve_mode(rounding)
    if not hasattr(values, "dtype"):  # lists, numbers: checked as every array input is
        values = as_float_array(values, name="quantize: values")
    _, dtype, exact32, exact64 = _plan(fmt)
    vdtype = values.dtype
    if exact or (exact32 if vdtype is _DT32 else exact64 if vdtype is _DT64 else False):
        out = values if vdtype is dtype else values.astype(dtype)
    else:
        policy = scope.policy
        rounding = policy.rounding if rounding is None else rounding
        if rounding == "stochastic" and rng is None:
            rng = scope.rng or _FALLBACK_RNG
        # floatlab.round warns about an rng passed with a deterministic mode: only hand it on
        # when it is used (the optimizer threads its Generator through every write).
        try:
            out = _round(values, fmt, rounding=rounding, saturate=policy.saturate,
                         rng=rng if rounding == "stochastic" else None, dtype=dtype)
        except ValueError as err:  # the rounding's advice (nan_to_num, saturate=) is not the
            # lab's: say which values, and that a run in such a format cannot go on
            if fmt.has_nan or np.isfinite(values).all():
                raise
            held = "NaN" if np.isnan(values).any() else "inf"
            raise ValueError(
                f"policy {policy.name!r}: values rounded to {fmt.name} ({what}) hold {held}, "
                f"which {fmt.name} cannot store. A run in a format without NaN / inf stops at "
                "its first NaN or infinity (a diverged step, Adam's eps rounded to 0, an "
                "attention mask's -inf); use a format that has them, e.g. "
                "'float8_e5m2-mixed' or 'bf16-true'") from err
    if scope.stats is not None and what != "partial":
        scope.stats.observe(values, out, fmt, what)
    return out
