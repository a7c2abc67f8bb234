"""Engines for sequential sums: one rounding per addition, as fast as NumPy allows.

A sequential sum is one vectorised pass per term index across all independent sums (matmul
outputs, rows). A single long sum has one output, so it is
run speculatively in blocks: while the running sum stays in one binade [2**E, 2**(E+1)) of the
accumulator, its quantum U is fixed, so each addition adds ``round(c + x) - c`` for a reference
point c in that binade, independent of the running sum -- except for the ties of
round-to-nearest-even and round-to-odd, which depend on the parity of the running sum's last
bit; that parity is a two-state recurrence solved by a prefix scan. The block is checked
afterwards (every exact partial sum in the binade, nothing overflowing) and cut at the first
step that leaves it; that step is done on its own. The fast paths for float16 / bfloat16 /
float32 / float64 round-to-nearest sequential sums of values already in the format use NumPy's
and ml_dtypes' ``add.accumulate``: they add in float32 (or the type itself) and round once,
which is correctly rounded because float32's 24 bits are at least 2p + 2 for p <= 11
(Figueroa's double-rounding theorem), and tests check them equal to the emulated path.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

import numpy as np

from floatlab.formats import Format

if TYPE_CHECKING:  # the Accumulator calls these engines; they only read its fields
    from floatlab.accumulate import Accumulator, _Terms


def _bits(values: np.ndarray) -> int:
    """An upper bound on the significant bits of the values: 11 if they are all float16 values,
    24 if float32 values, else 53 (a value equal to its cast is representable, whatever the cast's
    rounding; so the check is exact)."""
    with np.errstate(over="ignore", invalid="ignore"):
        for dtype, bits in ((np.float16, 11), (np.float32, 24)):
            if np.array_equal(values.astype(dtype), values, equal_nan=True):
                return bits
    return 53


def _float16_products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` summed in an fp16 round-to-nearest accumulator, one inner index at a time.

    Three in-place passes over the (M, N) outputs per inner index (outer product, float64 sum,
    cast back to float16), in buffers that stay in cache; see :func:`_float16_cast_adds`.
    """
    a_columns = np.ascontiguousarray(a.T)
    total = np.zeros((a.shape[0], b.shape[1]), dtype=np.float16)
    work = np.empty(total.shape)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(a.shape[1]):
            np.multiply(a_columns[k][:, None], b[k], out=work)  # exact: <= 22 + 24 bits
            np.add(total, work, out=work)
            total[...] = work  # NumPy's float64 -> float16 cast: one rounding to nearest even
    return total.astype(np.float64)


def _float16_cast_adds(acc: Accumulator, terms: _Terms) -> bool:
    """Whether ``float16(float64(acc + term))`` is this adder: a fast path for fp16 RN.

    NumPy's float64 -> float16 cast rounds once to nearest even (subnormals and overflow to inf
    included). The float64 sum x of an fp16 running sum and a term of t <= 40 significant bits
    is rounded once more, but never across or onto a midpoint m of the fp16 grid: x - m, when
    nonzero, is a multiple of the smaller of the two addends' last bits. If the term is the
    smaller addend and inexact in float64, it lies below 2**(e - 53 + t) <= 2**(e - 13), far
    from any midpoint distance (>= 2**(e - 12)) an fp16 sum has. If the sum is the smaller one,
    its last bit is >= 2**-24 and the term's >= 2**(e - t); both exceed half a float64 ulp
    2**(e - 54) for every e below fp16's overflow (e <= 16). So the double rounding is
    innocuous; tests check this path equal to the emulated one.
    """
    return (acc.rounding == "nearest_even" and acc.fmt.name == "float16"
            and not acc.compensated and terms.bits <= 40)


def _native_dtype(acc: Accumulator) -> np.dtype | None:
    """The NumPy / ml_dtypes type whose add.accumulate *is* this adder, if any (see module doc).

    Round to nearest even only; float16 / bfloat16 add in float32 and round once (correct for
    p <= 11 by Figueroa's theorem), float32 / float64 are native IEEE additions.
    """
    if acc.rounding != "nearest_even":
        return None
    name = acc.fmt.name
    if name in ("float16", "float32", "float64"):
        return np.dtype(name)
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return None


def _native_accumulate(values: np.ndarray, dtype: np.dtype, keep: bool,
                       known: bool = False) -> np.ndarray | None:
    """Running sums (keep) or totals by ``np.add.accumulate`` on ``dtype``; None unless every
    value is a value of the dtype (``known``, or checked: a value equal to its cast is one)."""
    with np.errstate(over="ignore", invalid="ignore"):
        typed = values.astype(dtype)
        if not known and not np.array_equal(typed.astype(np.float64), values, equal_nan=True):
            return None
        if keep:
            return np.add.accumulate(typed, axis=0).astype(np.float64)
        if typed.shape[0] == 0:
            return np.zeros(typed.shape[1:])
        # reduce() would be pairwise: take the last running sum of the sequential scan.
        return np.add.accumulate(typed, axis=0)[-1].astype(np.float64)


def _speculative_column(x: np.ndarray, acc: Accumulator) -> np.ndarray:
    """All running sums of one sequential sum, computed a binade at a time (see module doc)."""
    n = x.shape[0]
    out = np.empty(n)
    fmt, mode = acc.fmt, acc.rounding
    parity_matters = mode in ("nearest_even", "odd")
    total = np.zeros(1)
    i, size = 0, 256
    while i < n:
        a = float(total[0])
        binade = _binade(a, fmt)
        if binade is None:  # zero, a subnormal, inf / NaN, or a 1-2 bit format: one exact step
            total = acc._add(total, x[i : i + 1])
            out[i] = total[0]
            i += 1
            continue
        e, quantum = binade
        sign = 1.0 if a > 0 else -1.0
        lower, upper = 2.0**e, 2.0**(e + 1)
        block = x[i : i + size]
        # Reference points with even and odd last bits, 1.5 and 1.5 + quantum (<= 1.75) times
        # 2**E: c + x stays inside the binade for |x| < 2**E / 4.
        c_even = sign * 1.5 * lower
        r_even = acc._add(np.full(block.shape, c_even), block) - c_even
        if parity_matters:
            c_odd = c_even + sign * quantum
            r_odd = acc._add(np.full(block.shape, c_odd), block) - c_odd
            steps = _choose_by_parity(r_even, r_odd, quantum, int(abs(a) / quantum) & 1)
        else:
            steps = r_even
        with np.errstate(invalid="ignore", over="ignore"):
            sums = a + np.cumsum(steps)
            before = np.concatenate([[a], sums[:-1]])
            exact = (before + block) * sign  # within 2**-53 relative of the exact running sum
            ok = ((np.abs(block) < 0.25 * lower) & (exact >= lower * (1 + 2.0**-50))
                  & (exact <= upper * (1 - 2.0**-50)) & (np.abs(sums) <= fmt.max))
        bad = np.flatnonzero(~ok)
        good = bad[0] if bad.size else block.size
        out[i : i + good] = sums[:good]
        if good:
            total = sums[good - 1 : good].copy()
        i += good
        size = builtins.min(size * 2, 1 << 16) if good == block.size else builtins.max(
            64, 2 * good)
        if good < block.size:  # the step that leaves the binade, on its own
            total = acc._add(total, x[i : i + 1])
            out[i] = total[0]
            i += 1
    return out


def _binade(a: float, fmt: Format) -> tuple[int, float] | None:
    """(E, quantum) of the normal binade [2**E, 2**(E+1)) that holds |a|, if any."""
    if fmt.man_bits < 2 or a == 0 or not np.isfinite(a):
        return None
    _, exp = np.frexp(abs(a))
    e = int(exp) - 1
    if e < fmt.emin or e >= fmt.emax:  # the top binade is cut short by max: exact steps there
        return None
    return e, 2.0 ** (e - fmt.man_bits)


def _choose_by_parity(r_even, r_odd, quantum, parity0: int) -> np.ndarray:
    """Steps chosen by the running parity: a two-state recurrence solved by a prefix scan.

    Step j adds r_even[j] when the running sum's last bit is even, r_odd[j] when odd; the new
    parity is old XOR (step / quantum odd). Where both choices give the same new parity the
    state resets; elsewhere it flips or not independently of the state.
    """
    d_even = (np.rint(r_even / quantum).astype(np.int64) & 1).astype(bool)
    d_odd = (np.rint(r_odd / quantum).astype(np.int64) & 1).astype(bool)
    next_if_even, next_if_odd = d_even, ~d_odd
    reset = next_if_even == next_if_odd
    n = r_even.size
    # parity after step j = value at the last reset r <= j (or parity0), XOR flips in (r, j].
    flips = np.cumsum(~reset & d_even)
    index = np.where(reset, np.arange(n), -1)
    last = np.maximum.accumulate(index) if n else index
    base = np.where(last >= 0, next_if_even[np.maximum(last, 0)], parity0).astype(np.int64)
    flips_before = np.where(last >= 0, flips[np.maximum(last, 0)], 0)
    after = (base + flips - flips_before) & 1
    before = np.concatenate([[parity0], after[:-1]]).astype(bool)
    return np.where(before, r_odd, r_even)
