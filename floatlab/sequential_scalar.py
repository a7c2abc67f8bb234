"""Stretches of one long sequential sum step by step in Python floats (deterministic modes).

:func:`floatlab.sequential._speculative_column` adds a block of terms at once while the running
sum stays in one binade. Zero-mean data defeat that in small formats: fp8's running sum of
normal values random-walks across binades of 8 values every few terms, fp4 / fp6 (and
mantissas of 1 bit) have no block steps at all, and bfloat16 in a directed mode drifts back
to small sums where the terms are not small against the binade. There the sum runs here, one
rounding per term in a loop compiled from :mod:`floatlab.kahan_general`'s rounding template
(about 0.3 us a step, where a vectorised call costs about 70 us), until the column's engine
tries a block again.

Proof that it equals the per-step path: that path computes each running sum as
``floatlab.round(odd_sum(s, x), fmt, mode)`` (floatlab.accumulate._add), and the template's
rounding of ``s + x``, for any float64 s and x, computes exactly that in every deterministic
mode and every format :func:`scalar_steps` accepts (the proof is
:mod:`floatlab.kahan_general`'s docstring; its tests check the template against
``floatlab.round`` at and around every breakpoint, and the Kahan loops, whose first operation
``v - c`` rounds an arbitrary float64 term the same way, against the per-step path). Each step
starts from the previous step's result, so by induction every running sum is the per-step
path's, bit for bit (signed zeros by the template's ``zero``, NaN and inf by ``special``, as
floatlab.round treats them). Stochastic rounding is not taken: the column engine's blocks
draw per block, an order a per-step loop would not keep.
"""

from __future__ import annotations

import textwrap
from functools import lru_cache
from math import nan

import numpy as np

from floatlab.formats import Format
from floatlab.kahan_general import _constants, _rounding, _wide

_DETERMINISTIC = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd")

_LOOP = """\
def steps(values, s, out, S=S, qmin=qmin, qmax=qmax, M1=M1, top=top, smallest=smallest,
          over_pos=over_pos, over_neg=over_neg, special=special, ulp=ulp, frexp=frexp,
          nextafter=nextafter, inf=inf, ninf=ninf, copysign=copysign, round=round):
    append = out.append
    for v in values:
{body}
        s = t
        append(s)
    return s
"""

# Switch for the tests, which check the loop equal to the column engine without it.
_SCALAR_STEPS = True


def scalar_steps(fmt: Format, mode: str):
    """The compiled loop ``steps(values, s, out) -> s`` adding ``values`` (a memoryview of
    float64) to the running sum s one rounding at a time, appending each running sum to the
    list ``out``; None where it does not apply: stochastic rounding, and the formats the
    template does not cover (unsigned, no zero, p < 2 or p > 51, FTZ with float64's emin)."""
    if not (_SCALAR_STEPS and mode in _DETERMINISTIC and fmt.signed and fmt.has_zero
            and 2 <= fmt.p <= 51 and (fmt.subnormals or fmt.emin > -1022)):
        return None
    return _compiled(fmt, mode)


@lru_cache(maxsize=64)
def _compiled(fmt: Format, mode: str):
    namespace = _constants(fmt, mode)
    namespace["round"] = round
    namespace["special"] = _special(fmt, namespace["special"])
    body = _rounding("s", "+", "v", "u", "t", mode, _wide(fmt), fmt.has_negative_zero)
    source = _LOOP.format(body=textwrap.indent(body, " " * 8))
    exec(compile(source, f"<floatlab.sequential_scalar: {fmt.name} {mode}>", "exec"),
         namespace)
    return namespace["steps"]


def _special(fmt: Format, special):
    """The template's handler of NaN / inf sums, with the per-step path's NaN: floatlab.round
    gives the one positive quiet NaN for every NaN sum, where float64's own addition keeps an
    operand's sign (x86 makes inf - inf a negative NaN)."""
    def per_step(o: float) -> float:
        if o != o and fmt.has_nan:
            return nan
        return special(o)

    return per_step


def run(steps, x: np.ndarray, start: int, stop: int, total: np.ndarray,
        out: np.ndarray) -> np.ndarray:
    """Terms ``x[start:stop]`` (x contiguous float64) added to ``total`` (a 1-element array)
    by ``steps``: writes the running sums into ``out[start:stop]``, returns the last one as
    a 1-element array."""
    sums: list[float] = []
    s = steps(memoryview(x[start:stop]), float(total[0]), sums)
    out[start:stop] = sums
    return np.array([s])
