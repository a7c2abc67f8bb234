"""Accumulation as hardware does it: long sums that round once per addition.

An :class:`Accumulator` describes the adder a reduction runs in: its format, rounding mode,
order of additions (sequential, pairwise, blocked), chunked promotion to a wider register
(DeepSeek-V3's tensor-core accumulator promoted to float32 every 128 additions), Kahan
compensation, and whether products enter exactly (a fused multiply-accumulate) or rounded
first. :func:`sum`, :func:`cumsum`, :func:`dot` and :func:`matmul` run it on plain arrays (their
values are taken exactly) or on FloatArrays.

>>> import numpy as np, floatlab
>>> x = np.full(4096, 1.0)
>>> float(floatlab.sum(x, floatlab.Accumulator("fp16")))      # 2048 + 1 == 2048 in fp16
2048.0
>>> float(floatlab.sum(x, floatlab.Accumulator("fp16", chunk=256, promote="fp32")))
4096.0

Every addition is ``floatlab.round`` of the exact sum: the two addends are added in float64 with
an error-free transformation (TwoSum: s + e == a + b exactly), s is rounded to odd in float64
(nudged one float64 ulp toward e when inexact and even), and that value is rounded once to the
accumulator's format. Round-to-odd at 53 bits followed by any rounding to p <= 51 bits equals
that rounding of the exact sum (Boldo & Melquiond), in every mode; stochastic rounding picks
between the same two neighbours with probabilities exact to 2**(p - 53) (see floatlab.arith).
A float64 accumulator adds natively (round to nearest even only).

How the sequential model is fast: a sequential sum is one vectorised pass per term index
across all independent sums (matmul outputs, rows). A single long sum has one output, so it is
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
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from floatlab.formats import Format, get_format
from floatlab.rounding import _resolve_mode, as_float_array
from floatlab.rounding import round as _round

__all__ = ["Accumulator", "sum", "cumsum", "dot", "matmul", "exact_add"]

Order = Literal["sequential", "pairwise", "blocked"]
ORDERS = ("sequential", "pairwise", "blocked")
_NEAREST = ("nearest_even", "nearest_away")


# --------------------------------------------------------------------------- one addition

def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Knuth's TwoSum: ``s = fl(a + b)`` and the exact error ``e``, ``s + e == a + b``.

    >>> s, e = two_sum(np.array([1.0]), np.array([2.0**-60]))
    >>> float(s[0]), float(e[0])
    (1.0, 8.673617379884035e-19)
    """
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def round_to_odd(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """The float64 round-to-odd of ``s + e`` (``s = fl(s + e)``, ``e`` its exact error).

    Where e != 0 and the last bit of s is even, step one float64 ulp toward e. The result then
    lies strictly between the same two p-bit neighbours as the exact value for any p <= 51, so
    one more rounding to p bits in any mode equals that rounding of the exact value.

    >>> float(round_to_odd(np.array([1.0]), np.array([-1e-30]))[0]) == 1 - 2.0**-53
    True
    """
    with np.errstate(invalid="ignore"):
        fix = (e != 0) & ((s.view(np.int64) & 1) == 0)
    if not fix.any():
        return s
    s, e = np.array(s, dtype=np.float64), np.asarray(e)  # a copy (0-d arrays too)
    s[fix] = np.nextafter(s[fix], np.where(e[fix] > 0, np.inf, -np.inf))
    return s


def exact_add(
    a: Any,
    b: Any,
    fmt: str | Format,
    rounding: str = "nearest_even",
    rng: np.random.Generator | None = None,
    random_bits: int | None = None,
) -> np.ndarray:
    """``round(a + b)`` to ``fmt``: one rounding of the exact sum of two float64 values.

    >>> float(exact_add(1.0, -2.0**-60, "fp32", rounding="down"))  # just below 1 in float32
    0.9999999403953552
    """
    fmt = get_format(fmt)
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return _add(a, b, fmt, _resolve_mode(rounding), rng, random_bits)


def _add(a, b, fmt: Format, mode: str, rng, random_bits) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        if fmt.p > 51:  # float64 itself (or p = 52): native addition, round to nearest even
            return a + b
        s = round_to_odd(*two_sum(a, b))
    return _round(s, fmt, mode, rng=rng, random_bits=random_bits)


# --------------------------------------------------------------------------- the Accumulator

@dataclass(frozen=True)
class Accumulator:
    """The adder a reduction runs in.

    Parameters
    ----------
    fmt : format of the running sum ("float32", "fp16", "e8m13", a Format ...).
    rounding : rounding mode of each addition: any floatlab mode, including "toward_zero"
        (a truncating adder) and "stochastic".
    order : "sequential" (left to right, one rounding per addition), "pairwise" (a balanced
        binary tree; NumPy's own sum unrolls 8 ways in blocks of 128, so its order differs) or
        "blocked" (sequential inside blocks of ``chunk`` terms, then the block sums in order).
    chunk : terms per block / per promotion interval.
    promote : every ``chunk`` terms the partial sum is added (round to nearest even) into a
        running sum of this wider format and restarted from zero (needs ``chunk``).
    compensated : Kahan summation, every operation rounded in ``fmt`` (sequential order).
    fused : products enter exactly (an FMA / MAC unit) or rounded first to ``fmt``.
    rng : generator (or seed) for stochastic rounding.
    random_bits : stochastic rounding with k random bits (see ``floatlab.round``).

    >>> Accumulator("e8m13", rounding="toward_zero", chunk=128, promote="float32")
    Accumulator(e8m13, toward_zero, sequential, chunk=128, promote=float32)
    """

    fmt: Format | str = "float32"
    rounding: str = "nearest_even"
    order: Order = "sequential"
    chunk: int | None = None
    promote: Format | str | None = None
    compensated: bool = False
    fused: bool = True
    rng: Any = field(default=None, compare=False)
    random_bits: int | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "fmt", get_format(self.fmt))
        set_(self, "rounding", _resolve_mode(self.rounding))
        if self.order not in ORDERS:
            raise ValueError(f"unknown order {self.order!r}; use one of {', '.join(ORDERS)}")
        if self.chunk is not None:
            if isinstance(self.chunk, bool) or not isinstance(self.chunk, (int, np.integer)):
                raise TypeError(f"chunk must be a positive int, got {self.chunk!r}")
            if self.chunk <= 0:
                raise ValueError(f"chunk={self.chunk} must be a positive number of terms, "
                                 "e.g. chunk=128")
            set_(self, "chunk", int(self.chunk))
        if self.order == "blocked" and self.chunk is None:
            raise ValueError("order='blocked' needs chunk=<terms per block>, e.g. chunk=128")
        if self.promote is not None:
            promote = get_format(self.promote)
            if self.chunk is None:
                raise ValueError("promote needs chunk=<terms between promotions>, e.g. "
                                 "chunk=128 (DeepSeek-V3 promotes every 128)")
            if not _contains(promote, self.fmt):
                raise ValueError(f"promote={promote.name} is narrower than the accumulator "
                                 f"format {self.fmt.name}: promote to a format that holds it "
                                 "(e.g. 'float32')")
            set_(self, "promote", promote)
        for name in ("compensated", "fused"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.compensated and (self.order != "sequential" or self.chunk is not None):
            raise ValueError("compensated=True is Kahan summation in sequential order: "
                             "drop order / chunk / promote, or compensated")
        if self.rounding == "stochastic":
            rng = self.rng
            set_(self, "rng", rng if isinstance(rng, np.random.Generator)
                 else np.random.default_rng(rng))
        elif self.random_bits is not None:
            raise ValueError("random_bits applies to rounding='stochastic' only")
        if self.fmt.p > 51 and self.rounding != "nearest_even":
            raise ValueError(f"a {self.fmt.name} accumulator adds natively in float64, which "
                             "rounds to nearest even only; use a narrower format or "
                             "rounding='nearest_even'")

    def __repr__(self) -> str:
        parts = [self.fmt.name, self.rounding, self.order]
        if self.chunk is not None:
            parts.append(f"chunk={self.chunk}")
        if self.promote is not None:
            parts.append(f"promote={self.promote.name}")
        if self.compensated:
            parts.append("compensated")
        if not self.fused:
            parts.append("unfused")
        if self.random_bits is not None:
            parts.append(f"random_bits={self.random_bits}")
        return f"Accumulator({', '.join(parts)})"

    # ------------------------------------------------------------------ running it
    def reduce(self, terms: _Terms) -> np.ndarray:
        """Sum ``terms`` (n terms of m independent sums) into an (m,) float64 array."""
        if self.chunk is not None:
            return self._chunked(terms)
        if self.order == "pairwise":
            return self._pairwise(terms.block(0, terms.n))
        if self.compensated:
            return self._kahan(terms, keep=False)
        return _sequential(terms, self, keep=False)

    def partials(self, terms: _Terms) -> np.ndarray:
        """Every running sum, (n, m): the cumulative sum as this adder produces it."""
        if self.order != "sequential" or self.chunk is not None:
            raise ValueError("cumsum runs in sequential order; use an Accumulator without "
                             "order / chunk / promote")
        if self.compensated:
            return self._kahan(terms, keep=True)
        return _sequential(terms, self, keep=True)

    def _add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _add(a, b, self.fmt, self.rounding, self.rng, self.random_bits)

    def _pairwise(self, values: np.ndarray) -> np.ndarray:
        if values.shape[0] == 0:
            return np.zeros(values.shape[1:])
        level = self._add(np.zeros_like(values[:1]), values[:1]) if values.shape[0] == 1 \
            else values
        if values.shape[0] == 1:
            return level[0]
        while level.shape[0] > 1:
            half = level.shape[0] // 2
            summed = self._add(level[: 2 * half : 2], level[1 : 2 * half : 2])
            level = summed if level.shape[0] % 2 == 0 else np.concatenate([summed, level[-1:]])
        return level[0]

    def _chunked(self, terms: _Terms) -> np.ndarray:
        """Sequential (or pairwise) inside blocks of ``chunk`` terms, then the block sums."""
        n, m, c = terms.n, terms.m, self.chunk
        blocks = -(-n // c)
        values = terms.block(0, n)
        if blocks * c != n:  # pad with zeros after the real terms: acc + 0 == acc exactly
            values = np.concatenate([values, np.zeros((blocks * c - n, m))])
        # (blocks, c, m) -> (c, blocks * m): each block is an independent sequential sum.
        inner = values.reshape(blocks, c, m).transpose(1, 0, 2).reshape(c, blocks * m)
        inner_acc = Accumulator(self.fmt, self.rounding, "sequential", fused=True,
                                rng=self.rng, random_bits=self.random_bits)
        partial = inner_acc.reduce(_ArrayTerms(inner)).reshape(blocks, m)
        if self.promote is None:
            outer = inner_acc
        else:  # CUDA-core FP32 registers: round to nearest even
            outer = Accumulator(self.promote, "nearest_even")
        return outer.reduce(_ArrayTerms(partial))

    def _kahan(self, terms: _Terms, keep: bool) -> np.ndarray:
        """Kahan summation with every operation rounded to the accumulator format."""
        n, m = terms.n, terms.m
        total, comp = np.zeros(m), np.zeros(m)
        out = np.empty((n, m)) if keep else None
        for start in range(0, n, _BLOCK):
            block = terms.block(start, builtins.min(n, start + _BLOCK))
            for j, x in enumerate(block):
                y = self._add(x, -comp)
                t = self._add(total, y)
                comp = self._add(self._add(t, -total), -y)
                total = t
                if keep:
                    out[start + j] = total
        return out if keep else total


_BLOCK = 1024


def _contains(wide: Format, narrow: Format) -> bool:
    from floatlab.mixed.policy import contains  # torch's promotion rules live there (one copy)

    return contains(wide, narrow)


# --------------------------------------------------------------------------- terms

class _Terms:
    """n terms of m independent sums, produced in blocks of rows (never all at once for matmul).
    """

    n: int
    m: int
    bits: int = 53  # at most this many significant bits in any term

    def block(self, start: int, stop: int) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def in_format(self, fmt: Format) -> bool:
        return False


class _ArrayTerms(_Terms):
    def __init__(self, values: np.ndarray, fmt: Format | None = None):
        self.values, self.fmt = values, fmt
        self.n, self.m = values.shape
        self.bits = fmt.p if fmt is not None else 53

    def block(self, start: int, stop: int) -> np.ndarray:
        return self.values[start:stop]

    def in_format(self, fmt: Format) -> bool:
        """Whether every term is a value of ``fmt`` (known, or checked by a round trip)."""
        if self.fmt is not None and _contains(fmt, self.fmt):
            return True
        with np.errstate(invalid="ignore"):
            return bool(np.array_equal(_round(self.values, fmt), self.values, equal_nan=True))


class _ProductTerms(_Terms):
    """The rank-1 terms a[:, k] * b[k, :] of a matrix product (exact in float64 when the inputs
    have at most 26 significant bits), optionally rounded to ``fmt`` first (unfused)."""

    def __init__(self, a: np.ndarray, b: np.ndarray, round_to: Accumulator | None):
        self.a, self.b, self.round_to = a, b, round_to
        self.n = a.shape[1]
        self.m = a.shape[0] * b.shape[1]
        self.bits = round_to.fmt.p if round_to is not None else _bits(a) + _bits(b)

    def block(self, start: int, stop: int) -> np.ndarray:
        prod = self.a[:, start:stop].T[:, :, None] * self.b[start:stop, None, :]
        prod = prod.reshape(stop - start, self.m)
        if self.round_to is not None:
            acc = self.round_to
            prod = _round(prod, acc.fmt, acc.rounding, rng=acc.rng, random_bits=acc.random_bits)
        return prod


def _bits(values: np.ndarray) -> int:
    """An upper bound on the significant bits of the values: 11 if they are all float16 values,
    24 if float32 values, else 53 (a value equal to its cast is representable, whatever the cast's
    rounding; so the check is exact)."""
    with np.errstate(over="ignore", invalid="ignore"):
        for dtype, bits in ((np.float16, 11), (np.float32, 24)):
            if np.array_equal(values.astype(dtype), values, equal_nan=True):
                return bits
    return 53


# --------------------------------------------------------------------------- sequential

def _sequential(terms: _Terms, acc: Accumulator, keep: bool, fast: bool = True) -> np.ndarray:
    """Left-to-right sums, one rounding per addition; (m,) totals or (n, m) partials."""
    n, m = terms.n, terms.m
    if fast and isinstance(terms, _ArrayTerms):
        native = _native_dtype(acc)
        if native is not None and terms.in_format(acc.fmt):
            return _native_accumulate(terms.values, native, keep)
    if fast and m <= _SPECULATIVE_MAX_COLUMNS and n >= 4 * m and isinstance(terms, _ArrayTerms):
        columns = [_speculative_column(terms.values[:, j], acc) for j in range(m)]
        partial = np.stack(columns, axis=1) if columns else np.zeros((n, 0))
        return partial if keep else (partial[-1] if n else np.zeros(m))
    total = np.zeros(m)
    add = acc._add
    if fast and _float16_cast_adds(acc, terms):
        total = np.zeros(m, dtype=np.float16)

        def add(total, x):
            return (total + x).astype(np.float16)  # float64 sum, one RNE cast (see below)

    out = np.empty((n, m)) if keep else None
    for start in range(0, n, _BLOCK):
        block = terms.block(start, builtins.min(n, start + _BLOCK))
        for j, x in enumerate(block):
            total = add(total, x)
            if keep:
                out[start + j] = total
    return out if keep else total.astype(np.float64)


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


_SPECULATIVE_MAX_COLUMNS = 8


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


def _native_accumulate(values: np.ndarray, dtype: np.dtype, keep: bool) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        typed = values.astype(dtype)
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


# --------------------------------------------------------------------------- the functions

def _accumulator(accumulator: Accumulator | str | Format | None, default: Format | None):
    if isinstance(accumulator, Accumulator):
        return accumulator
    if accumulator is None:
        if default is None:
            raise TypeError("pass an accumulator: an Accumulator or a format name such as "
                            "'float32'")
        return Accumulator(default)
    return Accumulator(accumulator)


def _operand(x: Any, name: str) -> tuple[np.ndarray, Any]:
    """(exact float64 values, FloatArray or None) of an input."""
    from floatlab.arith import FloatArray

    if isinstance(x, FloatArray):
        return x.values, x
    return np.asarray(as_float_array(x, name=name), dtype=np.float64), None


def sum(  # noqa: A001 - floatlab.sum mirrors np.sum
    x: Any, accumulator: Accumulator | str | Format | None = None, axis: int | None = None
) -> Any:
    """Sum ``x`` with ``accumulator`` (an Accumulator or a format name) along ``axis``.

    Plain inputs are taken exactly and the result is the accumulator's value as float64 (a 0-d
    array for axis=None); a FloatArray defaults to its own accumulator and gives a FloatArray of
    its format (the accumulator's value rounded once, as torch rounds a float32-accumulated
    sum back to the tensor's dtype).

    >>> import numpy as np
    >>> float(sum(np.full(3000, 1.0), "fp16"))
    2048.0
    """
    values, fa = _operand(x, "x")
    acc = fa.accumulator if (fa is not None and accumulator is None) else _accumulator(
        accumulator, None)
    moved, shape = _as_columns(values, axis)
    result = acc.reduce(_ArrayTerms(moved, fa.fmt if fa is not None else None)).reshape(shape)
    return _wrap(result, fa)


def cumsum(
    x: Any, accumulator: Accumulator | str | Format | None = None, axis: int | None = None
) -> Any:
    """Running sums of ``x`` as ``accumulator`` produces them (sequential order).

    >>> cumsum([1.0, 2.0**-11, 2.0**-11], "fp16").tolist()
    [1.0, 1.0, 1.0]
    """
    values, fa = _operand(x, "x")
    acc = fa.accumulator if (fa is not None and accumulator is None) else _accumulator(
        accumulator, None)
    if axis is None:
        values, axis = values.reshape(-1), 0
    axis = _check_axis(axis, values.ndim)
    moved = np.moveaxis(values, axis, 0)
    terms = _ArrayTerms(moved.reshape(moved.shape[0], _count(moved.shape[1:])),
                        fa.fmt if fa is not None else None)
    out = acc.partials(terms).reshape(moved.shape)
    return _wrap(np.moveaxis(out, 0, axis), fa)


def dot(a: Any, b: Any, accumulator: Accumulator | str | Format | None = None) -> Any:
    """Inner product of two vectors (or ``matmul`` for 2-D operands) through ``accumulator``.

    >>> float(dot([1.0, 1.0, 1.0], [2048.0, 1.0, 1.0], "fp16"))
    2048.0
    """
    av, fa = _operand(a, "a")
    bv, fb = _operand(b, "b")
    if av.ndim == 1 and bv.ndim == 1:
        if av.shape != bv.shape:
            raise ValueError(f"dot: vectors of lengths {av.size} and {bv.size}; they must match")
        out = matmul(_rewrap(av[None, :], fa), _rewrap(bv[:, None], fb), accumulator)
        return out[0, 0] if isinstance(out, np.ndarray) else out.reshape(())
    return matmul(a, b, accumulator)


def matmul(a: Any, b: Any, accumulator: Accumulator | str | Format | None = None) -> Any:
    """``a @ b`` (2-D, or 1-D vectors as in NumPy) with products summed through ``accumulator``.

    Products are exact in float64 when both inputs have at most 26 significant bits (every
    format up to float32); ``fused=False`` rounds each to the accumulator format first. All
    outputs are summed at once: one vectorised addition per inner index.

    >>> import numpy as np
    >>> matmul(np.ones((1, 4096)), np.ones((4096, 1)), "fp16").tolist()
    [[2048.0]]
    """
    av, fa = _operand(a, "a")
    bv, fb = _operand(b, "b")
    if av.ndim == 0 or bv.ndim == 0 or av.ndim > 2 or bv.ndim > 2:
        raise ValueError(f"matmul: needs 1-D or 2-D operands, got shapes {av.shape} and "
                         f"{bv.shape}")
    a2 = av[None, :] if av.ndim == 1 else av
    b2 = bv[:, None] if bv.ndim == 1 else bv
    if a2.shape[1] != b2.shape[0]:
        raise ValueError(f"matmul: shapes {av.shape} and {bv.shape} do not align: the inner "
                         f"dimensions {a2.shape[1]} and {b2.shape[0]} must be equal")
    owner = fa if fa is not None else fb
    if accumulator is None and owner is not None:
        acc = owner.accumulator
    else:
        acc = _accumulator(accumulator, None)
    terms = _ProductTerms(a2, b2, None if acc.fused else acc)
    out = acc.reduce(terms).reshape(a2.shape[0], b2.shape[1])
    if av.ndim == 1:
        out = out[0]
    if bv.ndim == 1:
        out = out[..., 0]
    if owner is None:
        return out
    from floatlab.arith import result_format

    fmt = result_format(*(f for f in (fa, fb) if f is not None))
    return owner._new(out, fmt)


def _rewrap(values: np.ndarray, fa: Any) -> Any:
    return values if fa is None else fa._new(values, fa.fmt, exact=True)


def _wrap(result: np.ndarray, fa: Any) -> Any:
    return result if fa is None else fa._new(result, fa.fmt)


def _check_axis(axis: Any, ndim: int) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"axis must be an int or None, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for an array of {ndim} dimension(s)")
    return int(axis) % ndim


def _as_columns(values: np.ndarray, axis: Any) -> tuple[np.ndarray, tuple[int, ...]]:
    """(n, m) terms along ``axis`` and the shape of the result."""
    if axis is None:
        return values.reshape(-1, 1), ()
    axis = _check_axis(axis, values.ndim)
    moved = np.moveaxis(values, axis, 0)
    return moved.reshape(moved.shape[0], _count(moved.shape[1:])), moved.shape[1:]


def _count(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64))
