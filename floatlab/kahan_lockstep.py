"""Four to 128 stochastic Kahan sums at once in Python floats, in lockstep: the per-step
path's draws reproduced where they depend on the columns' values.

floatlab.accumulate's per-step Kahan path rounds each operation of a row for all m columns in
one floatlab.round call. For m <= 3 that call draws exactly m uniform doubles, element j the
j-th, so :func:`floatlab.kahan_general.general_kahan` runs the columns one after the other.
For m >= 4 the count depends on the values (floatlab.rounding._round_bits): with ``count``
of the m odd sums o_j nonzero and below 2**emin ("tiny"; the check runs for formats with
emin > -1022, or FTZ) and 1 <= count <= m // 4, the pattern kernel first draws m numbers (one
per element; a tiny element's result from it is overwritten) and the tiny elements are then
re-rounded with ``count`` more draws, in index order (the gathered path of
_round_tiny_on_grid, or _round_significand on the gathered elements); with count == 0 or
count > m // 4 each element takes its own draw, m in all. So this engine runs the m columns
row by row, each operation for every column with draw P + j, counts the tiny odd sums, and
where 1 <= count <= m // 4 rounds the tiny columns again with draws P + m, P + m + 1, ...;
it then moves on by m or m + count draws.

Tininess of o from the loop's s = fl(a + b): o = s, or s's odd neighbour; 2**emin is an even
float64 number, so o and s lie on the same side of it unless s = +-2**emin itself and o is
nudged toward zero (TwoSum, only there: :func:`_inward`). A nudged o is computed exactly
where the loop nudges it.

Draws are made as the per-step path makes them, never more: every row consumes at least 4 m,
so the engine draws ahead at most 4 m per remaining row, and the extra draws on demand; the
generator ends in the per-step path's state (tests check it, with tiny values in some columns
and not others).
"""

from __future__ import annotations

import textwrap
from functools import lru_cache

import numpy as np

from floatlab.formats import Format
from floatlab.kahan_general import (
    _compiled_rounder,
    _constants,
    _rounding,
    _thresholds,
    _wide,
)

_LOOP = """\
def kahan(rows, left, draw, add, inward, out, {constants}):
    append = out.append
    U, P = [], 0  # the draws on hand, the next unused one
    for {values} in rows:
        if len(U) - P < {per_row}:  # each remaining row takes at least {per_row} draws
            U = U[P:] + draw(min(left * {per_row}, {ahead}) - (len(U) - P))
            P = 0
        left -= 1
{body}
{append}
    return out if {keep} else [({sums},)]
"""

# (a, op, b, out): Kahan's four operations, as the per-step path orders them
_STEPS = (("v", "-", "c", "y"), ("s", "+", "y", "t"), ("t", "-", "s", "w"), ("w", "-", "y", "c"))


def _lockstep_source(m: int, mode: str, wide: bool, signed_zero: bool, keep: bool) -> str:
    """The generated loop over rows for m columns (names v0.., s0.., c0..; see the module's
    docstring). Each operation: m inlined roundings with draw U[P + j], each followed by its
    tininess flag k<j>; then the re-rounding of the tiny columns where 1 <= count <= m // 4."""
    body: list[str] = []
    for step, (a, op, b, out) in enumerate(_STEPS):
        for j in range(m):
            body.append(_rounding(f"{a}{j}", op, f"{b}{j}", f"U[P + {j}]", f"{out}{j}", mode,
                                  wide, signed_zero))
            # (x is the last rounding's where o is not finite: the finite test comes second)
            body.append(f"k{j} = x <= tmin and x > 0.0 and ninf < o < inf and (x < tmin or "
                        f"inward({a}{j}, {'-' if op == '-' else ''}{b}{j}))")
        flags = " + ".join(f"k{j}" for j in range(m))
        fix = [f"count = {flags}", f"if count and count <= {m // 4}:",
               f"    if len(U) < P + {m} + count:  # the extra draws, on demand",
               f"        U = U + draw(P + {m} + count - len(U))",
               f"    extra = P + {m}"]
        for j in range(m):
            fix += [f"    if k{j}:",
                    f"        {out}{j} = add({a}{j}, {'-' if op == '-' else ''}{b}{j}, U[extra])",
                    "        extra += 1"]
        rest = m * (len(_STEPS) - 1 - step)  # at least the row's remaining operations' draws
        fix += ["    P = extra"]
        if rest:
            fix += [f"    if len(U) < P + {rest}:", f"        U = U + draw(P + {rest} - len(U))"]
        fix += ["else:", f"    P += {m}"]
        body.append("\n".join(fix))
    body.append("\n".join(f"s{j} = t{j}" for j in range(m)))
    names = ", ".join(f"v{j}" for j in range(m))
    init = "\n".join(f"s{j} = c{j} = 0.0" for j in range(m))
    source = _LOOP.format(
        constants=", ".join(f"{name}={name}" for name in _CONSTANT_NAMES),
        values=f"({names})", per_row=4 * m, ahead=max(4 * m, _DRAWS_AHEAD),
        body=textwrap.indent("\n".join(body), " " * 8), keep=keep,
        append=f"        append(({', '.join(f's{j}' for j in range(m))},))" if keep else "",
        sums=", ".join(f"s{j}" for j in range(m)))
    return source.replace("    append = out.append\n",
                          "    append = out.append\n" + textwrap.indent(init, "    ") + "\n")


_CONSTANT_NAMES = ("S", "qmin", "qmax", "M1", "top", "smallest", "over_pos", "over_neg",
                   "special", "ulp", "frexp", "nextafter", "inf", "ninf", "copysign", "D", "nD",
                   "E", "tmin", "round")
_DRAWS_AHEAD = 1 << 16  # draws made at once (at most, but at least a row's)


@lru_cache(maxsize=32)
def _lockstep_loop(fmt: Format, m: int, mode: str, keep: bool):
    """The compiled lockstep loop and the single rounding ``add(a, b, u)`` it re-rounds tiny
    columns with, for ``fmt``, m columns and ``mode`` ("stochastic" or "stochastic_bits")."""
    namespace = _constants(fmt, "stochastic")
    namespace.update(tmin=fmt.normal_threshold, round=round)
    wide = _wide(fmt)
    source = _lockstep_source(m, mode, wide, fmt.has_negative_zero, keep)
    exec(compile(source, f"<floatlab.kahan_lockstep: {fmt.name} {m} columns>", "exec"),
         namespace)
    return namespace["kahan"], _compiled_rounder(fmt, mode)


def _inward(a: float, b: float) -> bool:
    """Whether round to odd moves s = fl(a + b) toward zero: the exact sum is inexact and on
    the zero side of s (s = +-2**emin is even, so it is nudged wherever err != 0)."""
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    return err != 0.0 and (err > 0.0) != (s > 0.0)


def lockstep_kahan(values: np.ndarray, fmt: Format, rng, random_bits: int | None,
                   keep: bool) -> np.ndarray:
    """Stochastic Kahan sums of the m columns of ``values`` (n, m) in lockstep (see the module's
    docstring): the totals (m,) or the running sums (n, m), float64."""
    n, m = values.shape
    mode = "stochastic_bits" if random_bits is not None else "stochastic"
    loop, add = _lockstep_loop(fmt, m, mode, keep)

    def draw(count: int) -> list[float]:
        drawn = rng.random(count)
        return (_thresholds(drawn, random_bits) if random_bits is not None else drawn).tolist()

    # the rows as m-tuples from a memoryview (floats made as they are read, not listed first)
    flat = iter(memoryview(np.ascontiguousarray(values, dtype=np.float64).reshape(-1)))
    rows = zip(*(flat,) * m, strict=True)  # (one iterator m times: n * m values, n rows)
    sums = loop(rows, n, draw, add, _inward, [])  # every row's sums, or the last row's
    return np.array(sums, dtype=np.float64).reshape(n if keep else 1, m)[slice(None) if keep
                                                                         else 0]
