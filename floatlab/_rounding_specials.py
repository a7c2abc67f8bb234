"""The rounding core's edges: overflow, flush-to-zero, inf / NaN inputs, unrepresentable values.

:func:`floatlab.round` rounds magnitudes first (``floatlab._rounding_kernels``) and then applies
these passes, which only run when something can overflow, is non-finite, or the format lacks
subnormals, a zero, a sign or -0 (the conventions are listed in ``floatlab.rounding``'s
docstring).
"""

from __future__ import annotations

import warnings

import numpy as np


def _apply_overflow(out, overflow, negative, mode, saturate, fmt) -> None:
    """Replace overflowed results by +-max or by the overflow value (inf, or NaN without inf).

    Only the overflowed elements are touched (a masked write into ``out``, which we own).
    """
    where = np.flatnonzero(overflow)
    neg = negative[where]
    if saturate or not fmt.has_nan or mode in ("toward_zero", "odd"):
        to_max = np.ones(where.size, dtype=bool)  # NaN-less formats can only saturate
    elif mode == "up":
        to_max = neg
    elif mode == "down":
        to_max = ~neg
    else:
        to_max = np.zeros(where.size, dtype=bool)
    magnitude = np.where(to_max, fmt.max, np.inf if fmt.has_inf else np.nan)
    out[where] = np.where(neg, -magnitude, magnitude)


def _flush_or_clamp_tiny(out, work, fmt, finite_in) -> np.ndarray:
    """Below the smallest normal: flush to zero, or (formats without zero) clamp up to it.

    ``finite_in`` None: every input is finite."""
    tiny = np.abs(out) < fmt.normal_threshold
    if finite_in is not None:
        tiny &= finite_in
    if fmt.has_zero:
        return np.where(tiny, np.copysign(0.0, out), out)
    return np.where(tiny & (work != 0), np.copysign(fmt.smallest_normal, out), out)


def _apply_specials(out, work, fmt, saturate, finite_in, negative) -> np.ndarray:
    """inf / NaN inputs, -0 in FNUZ formats, and inputs a format cannot hold at all.

    ``finite_in`` None: every input is finite."""
    if finite_in is not None and not finite_in.all():
        is_nan = np.isnan(work)
        is_inf = ~finite_in & ~is_nan
        if is_nan.any() and not fmt.has_nan:
            raise ValueError(
                f"{fmt.name} has no NaN, and the input holds NaN: replace NaNs before rounding "
                "(e.g. np.nan_to_num(x, nan=0.0)) or use a format with NaN"
            )
        if is_inf.any():
            if fmt.has_inf:
                inf_value = np.inf
            elif saturate or not fmt.has_nan:
                if not saturate:
                    raise ValueError(
                        f"{fmt.name} has no inf and no NaN, and the input holds +-inf: pass "
                        f"saturate=True to clamp it to +-{fmt.max:g}, or remove the infinities"
                    )
                inf_value = fmt.max
            else:
                inf_value = np.nan
            out = np.where(is_inf, np.where(negative, -inf_value, inf_value), out)
        out = np.where(is_nan, np.nan, out)
    if not fmt.has_negative_zero and fmt.has_zero:
        out = out + 0.0  # -0.0 + 0.0 == +0.0: FNUZ and unsigned formats have no -0
    if not fmt.signed or not fmt.has_zero:
        out = _unrepresentable_to_nan(out, work, fmt)
    return out


def _unrepresentable_to_nan(out, work, fmt) -> np.ndarray:
    """Unsigned formats cannot hold negatives; zero-less formats cannot hold 0."""
    bad = np.zeros(out.shape, dtype=bool)
    reasons = []
    if not fmt.signed:
        negative = work < 0
        bad |= negative
        if negative.any():
            reasons.append("negative values (the format has no sign bit)")
    if not fmt.has_zero:
        zero = work == 0
        bad |= zero
        if zero.any():
            reasons.append("zeros (the format has no zero)")
    if not bad.any():
        return out
    if not fmt.has_nan:
        raise ValueError(f"{fmt.name} cannot hold {' and '.join(reasons)}, and has no NaN")
    warnings.warn(
        f"{fmt.name} cannot hold {' and '.join(reasons)}: {int(bad.sum())} value(s) became NaN",
        RuntimeWarning,
        stacklevel=5,  # round() -> _round_bits -> _apply_specials -> here: point at the caller
    )
    return np.where(bad, np.nan, out)
