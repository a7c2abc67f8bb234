"""Stretches of one long sequential sum step by step in Python floats (every mode).

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
rounding of ``s + x``, for any float64 s and x, computes exactly that in every mode and every
format :func:`scalar_steps` accepts (the proof is :mod:`floatlab.kahan_general`'s docstring;
its tests check the template against ``floatlab.round`` at and around every breakpoint, and
the Kahan loops, whose first operation ``v - c`` rounds an arbitrary float64 term the same
way, against the per-step path). Each step starts from the previous step's result, so by
induction every running sum is the per-step path's, bit for bit (signed zeros by the
template's ``zero``, NaN and inf by ``special``, as floatlab.round treats them).

Stochastic rounding: the template decides with the same uniform draw u as floatlab.round
(up where u < f, f the discarded fraction; with ``random_bits`` = k, up where u < floor(f
2**k) / 2**k, which the template reads as f >= w, w = (floor(u 2**k) + 1) / 2**k from
:func:`floatlab.kahan_general._thresholds`), so it remains to show that a stretch draws the
per-step path's numbers. The per-step path adds one term at a time, ``acc._add(total,
x[i:i+1])``: one floatlab.round call on one element (p <= 51, so not the 52-bit
``_stochastic_52``), which draws exactly one uniform double from the accumulator's generator,
whatever the value (NaN, inf, zero and exact sums included): its only chunk rounds either by
the bit-pattern kernel, which draws one per element, or, where its one input lies below
2**emin (``count`` = 1 > size // 4 = 0: "mostly tiny"), by the significand kernel or the
uniform-grid kernel with draws shared with the pattern kernel, one per element either way
(floatlab.rounding._round_bits; ``random_bits`` truncates the probability, not the draws).
A stretch of n terms draws ``rng.random(n)`` from the same generator and gives term j the
j-th number: a NumPy Generator's ``random(n)`` yields the doubles of n calls of
``random(1)`` in order and leaves the same state (each double takes a fixed number of the
bit generator's outputs, nothing is buffered between calls; a test checks PCG64, MT19937,
Philox and SFC64). So a stretch is bit for bit those n steps run one ``acc._add`` at a time
from the same generator state, and ends in the same state. (Where a format without NaN or
inf meets one, both raise; the generator may then have run ahead here.) Only which steps run
here changes: a speculative block draws one number per term of the block, including the terms
after the step where it is cut, so a stochastic sum's bits (not its distribution) depend on
where the engine cuts blocks and runs stretches.
"""

from __future__ import annotations

import textwrap
from functools import lru_cache
from math import nan

import numpy as np

from floatlab.formats import Format
from floatlab.kahan_general import _constants, _rounding, _thresholds, _wide

_MODES = ("nearest_even", "nearest_away", "toward_zero", "up", "down", "odd", "stochastic")

_LOOP = """\
def steps(values, draws, s, out, S=S, qmin=qmin, qmax=qmax, M1=M1, top=top,
          smallest=smallest, over_pos=over_pos, over_neg=over_neg, special=special, ulp=ulp,
          frexp=frexp, nextafter=nextafter, inf=inf, ninf=ninf, copysign=copysign,
          round=round, D=D, nD=nD, E=E):
    append = out.append
    {header}
{body}
        s = t
        append(s)
    return s
"""

# Switch for the tests, which check the loop equal to the column engine without it.
_SCALAR_STEPS = True


def scalar_steps(fmt: Format, mode: str, rng: np.random.Generator | None = None,
                 random_bits: int | None = None):
    """The loop ``steps(values, s, out) -> s`` adding ``values`` (a memoryview of float64) to
    the running sum s one rounding at a time, appending each running sum to the list ``out``;
    None where it does not apply: the formats the template does not cover (unsigned, no
    zero, p < 2 or p > 51, FTZ with float64's emin). Stochastic rounding (``rng`` the
    accumulator's Generator, ``random_bits`` its own) draws ``rng.random(len(values))``
    first, one uniform double per term, as the per-step path does (see the module doc)."""
    if not (_SCALAR_STEPS and mode in _MODES and fmt.signed and fmt.has_zero
            and 2 <= fmt.p <= 51 and (fmt.subnormals or fmt.emin > -1022)):
        return None
    if mode != "stochastic":
        loop = _compiled(fmt, mode)
        return lambda values, s, out: loop(values, None, s, out)
    if rng is None:
        raise ValueError("stochastic steps draw from the accumulator's generator: pass rng")
    loop = _compiled(fmt, "stochastic" if random_bits is None else "stochastic_bits")

    def stochastic(values, s: float, out: list) -> float:
        draws = rng.random(len(values))
        if random_bits is not None:  # floatlab.round's k-bit probability, as a threshold
            draws = _thresholds(draws, random_bits)
        return loop(values, memoryview(draws), s, out)

    return stochastic


@lru_cache(maxsize=64)
def _compiled(fmt: Format, mode: str):
    """The loop for ``mode`` ("stochastic_bits": stochastic with ``random_bits``, reading
    the thresholds w of :func:`floatlab.kahan_general._thresholds` instead of the draws)."""
    namespace = _constants(fmt, mode)
    namespace["round"] = round
    namespace["special"] = _special(fmt, namespace["special"])
    body = _rounding("s", "+", "v", "u", "t", mode, _wide(fmt), fmt.has_negative_zero)
    header = ("for v, u in zip(values, draws):" if mode.startswith("stochastic")
              else "for v in values:")
    source = _LOOP.format(header=header, body=textwrap.indent(body, " " * 8))
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
