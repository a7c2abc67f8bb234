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
an error-free transformation (TwoSum: s + e == a + b exactly, see floatlab.eft), s is rounded to
odd in float64 (nudged one float64 ulp toward e when inexact and even), and that value is
rounded once to the accumulator's format. Round-to-odd at 53 bits followed by any rounding to
p <= 51 bits equals that rounding of the exact sum (Boldo & Melquiond), in every mode;
stochastic rounding picks between the same two neighbours with probabilities exact to
2**(p - 53) (see floatlab.arith). A float64 accumulator adds natively (round to nearest even
only). Sequential sums run one vectorised addition per term index across all independent sums;
single long sums, the native fast paths and the truncating (round-toward-zero) matmul path are
in :mod:`floatlab.sequential`.
"""

from __future__ import annotations

import builtins
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from floatlab import blockfma as _blockfma
from floatlab._rounding_kernels import _check_random_bits
from floatlab._validate import resolve_rng
from floatlab.eft import sum_for_52, sum_to_round, two_sum, zero_sum_sign
from floatlab.formats import Format, get_format
from floatlab.fp16_matmul import (
    _float16_cast_adds,
    _float16_magic,
    _float16_magic_takes,
    _float16_products,
)
from floatlab.promotion import contains
from floatlab.rounding import _resolve_mode, as_float_array
from floatlab.rounding import round as _round
from floatlab.sequential import (
    _bits,
    _kahan_engine,
    _native_accumulate,
    _native_dtype,
    _speculative_column,
    _truncating_products,
    _truncating_products_apply,
)

__all__ = ["Accumulator", "sum", "cumsum", "dot", "matmul", "exact_add"]

_FLOAT64 = get_format("float64")  # the one p = 53 format whose own sum needs no rounding

Order = Literal["sequential", "pairwise", "blocked"]
ORDERS = ("sequential", "pairwise", "blocked")


# --------------------------------------------------------------------------- one addition

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
    fmt, mode = get_format(fmt), _resolve_mode(rounding)
    _check_native(fmt, mode, "exact_add")  # (it ignored the mode: 1 + -1 gave +0 in "down")
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return _add(a, b, fmt, mode, rng, random_bits)


def _check_native(fmt: Format, mode: str, who: str) -> None:
    """Modes the adder cannot emulate exactly: every mode but nearest even of float64 itself
    (it adds natively). p = 52 (e11m51) is exact from TwoSum's error in every mode
    (:func:`floatlab.eft.sum_for_52`, :func:`_stochastic_52`). Other p = 53 formats add in
    float64 and round that sum into their range: exact in their normal range (float64's
    grid), double rounded where their subnormals are coarser than float64's grid."""
    if fmt.p > 52 and mode != "nearest_even":
        raise ValueError(f"{who} in {fmt.name} adds natively in float64 (round to nearest even "
                         "only): use a narrower format (p <= 52) or rounding='nearest_even'")


def _add(a, b, fmt: Format, mode: str, rng, random_bits) -> np.ndarray:
    if fmt.p == 52 and mode == "stochastic":
        return _stochastic_52(a, b, fmt, rng, random_bits)
    with np.errstate(over="ignore", invalid="ignore"):
        s = sum_to_round(a, b, fmt.p, mode)  # (modes it cannot do: refused by _check_native)
    if fmt.p > 52 and fmt == _FLOAT64:  # float64 itself: its own sum is the rounded one
        return s
    # Other p = 53 formats (e8m52, e10m52b500fn ...): float64's sum rounded into their range
    # (overflow, FTZ, no inf); it returned float64's, 2e300 in e8m52 whose max is 3.4e38.
    return _round(s, fmt, mode, rng=rng, random_bits=random_bits)


def _stochastic_52(a, b, fmt: Format, rng, random_bits) -> np.ndarray:
    """Stochastic rounding of the exact ``a + b`` to a format of p = 52 (e11m51), whose values
    are the float64 numbers with a clear last bit: one float64 rounding keeps only one bit
    beyond them, so the probability is read from TwoSum's s + e instead. t, the toward-zero
    neighbour, is exact (eft.sum_for_52); the step q to the next value away from zero is two
    float64 ulps of |t| (the smallest subnormal at 0, inf past max); the distance
    |x - t| = |(s - t) + e| (s - t exact: s and t are within two ulps) is exact to 2**-53
    relative, and rounds away with probability |x - t| / q (truncated to k bits with
    ``random_bits``, as ``floatlab.round`` does): one uniform draw per sum."""
    rng = resolve_rng(rng, True, "stochastic")  # (exact_add's: a Generator, seed or None)
    s, e = two_sum(a, b)
    with np.errstate(over="ignore", invalid="ignore"):
        t = _round(sum_for_52(a, b, "toward_zero"), fmt, "toward_zero")
        mag = np.abs(t)
        q = 2 * (np.nextafter(mag, np.inf) - mag)
        fraction = np.abs((s - t) + e) / q
        away = np.copysign(mag + q, t)
    if random_bits is not None:
        fraction = np.ldexp(np.floor(np.ldexp(fraction, random_bits)), -random_bits)
    up = rng.random(np.shape(s)) < fraction
    out = np.where(up & np.isfinite(s), away, t)
    return np.where(np.isfinite(s), out, s)  # inf, NaN: as float64's sum


# --------------------------------------------------------------------------- the Accumulator

@dataclass(frozen=True)
class Accumulator:
    """The adder a reduction runs in.

    Parameters
    ----------
    fmt : format of the running sum ("float32", "fp16", "e8m13", a Format ...).
    rounding : rounding mode of each addition: any floatlab mode, including "toward_zero"
        (a truncating adder) and "stochastic". The running sum starts at +0 in every order, and
        an exact zero sum is -0 in "down" unless both addends are +0, else +0 (IEEE 754 6.3).
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
    block_fma : a tensor core's block FMA (:mod:`floatlab.blockfma`): each step adds this many
        exact products and the running value, aligned to their largest exponent with the bits
        below ``fmt``'s precision truncated, then rounds the exact sum once with ``rounding``.
        None (the default): one rounding per addition.
    align_bits : extra alignment bits a block FMA keeps below ``fmt``'s precision (default 0).

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
    block_fma: int | None = None
    align_bits: int = 0

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
        if self.order == "pairwise" and self.chunk is not None:
            # (the chunks were summed left to right, the pairwise order silently dropped)
            raise ValueError("order='pairwise' with chunk= is not emulated: chunks are summed "
                             "left to right (that is order='blocked'); use order='blocked', or "
                             "drop chunk / promote for one pairwise tree")
        if self.promote is not None:
            promote = get_format(self.promote)
            if self.chunk is None:
                raise ValueError("promote needs chunk=<terms between promotions>, e.g. "
                                 "chunk=128 (DeepSeek-V3 promotes every 128)")
            if not contains(promote, self.fmt):
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
        # One Generator for the accumulator's life; a deterministic mode keeps none (and says
        # so once, here, rather than on every addition).
        set_(self, "rng", resolve_rng(self.rng, self.rounding == "stochastic", self.rounding))
        if self.rounding != "stochastic" and self.random_bits is not None:
            raise ValueError("random_bits applies to rounding='stochastic' only")
        if self.random_bits is not None:  # checked now, not at the first stochastic addition
            set_(self, "random_bits", _check_random_bits(self.random_bits))
        _check_native(self.fmt, self.rounding, "an Accumulator")
        _blockfma.check_block_fma(self)

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
        if self.block_fma is not None:
            parts.append(f"block_fma={self.block_fma}"
                         + (f", align_bits={self.align_bits}" if self.align_bits else ""))
        return f"Accumulator({', '.join(parts)})"

    # ------------------------------------------------------------------ running it
    def reduce(self, terms: _Terms) -> np.ndarray:
        """Sum ``terms`` (n terms of m independent sums) into an (m,) float64 array."""
        if self.block_fma is not None:
            return _blockfma.reduce(terms, self)
        if self.order != "pairwise" and _truncating(terms, self):
            partial = _truncating_products(terms.a, terms.b, self.fmt, self.chunk)
            return self._outer().reduce(_ArrayTerms(partial)) if self.chunk else partial[0]
        if self.chunk is not None:
            return self._chunked(terms)
        if self.order == "pairwise":
            return self._pairwise(terms.block(0, terms.n))
        if self.compensated:
            return self._kahan(terms, keep=False)
        return _sequential(terms, self, keep=False)

    def partials(self, terms: _Terms) -> np.ndarray:
        """Every running sum, (n, m): the cumulative sum as this adder produces it."""
        if self.block_fma is not None:
            raise ValueError("cumsum needs one running sum per addition; a block_fma "
                             "accumulator has one per block: use floatlab.sum / matmul")
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
        if values.shape[0] == 1:  # round(+0 + x): every order starts from +0
            return self._add(np.zeros_like(values[0]), values[0])
        # ... so the tree's first leaf is +0 + x[0], exact: only a zero's sign can change, by
        # the adders' rule (-0 becomes +0 but in "down"; [-0, -0] gave -0, sequential +0)
        first = zero_sum_sign(values[0] + 0.0, 0.0, values[0], self.rounding)
        level = values
        if np.any(np.signbit(first) != np.signbit(values[0])):
            level = values.copy()  # (the caller's array is never modified)
            level[0] = first
        while level.shape[0] > 1:
            half = level.shape[0] // 2
            summed = self._add(level[: 2 * half : 2], level[1 : 2 * half : 2])
            level = summed if level.shape[0] % 2 == 0 else np.concatenate([summed, level[-1:]])
        return level[0]

    def _chunked(self, terms: _Terms) -> np.ndarray:
        """Sequential inside blocks of ``chunk`` terms, then the block sums."""
        n, m, c = terms.n, terms.m, self.chunk
        blocks = -(-n // c)
        values = terms.block(0, n)
        if blocks == 1 and c > n + 1 and self.rounding != "stochastic":
            # One block (a chunk longer than the sum, up to chunk=2**40): one zero of padding
            # gives the bits of many, since (s + 0) + 0 == s + 0 in every deterministic mode
            # (only a -0 sum can change, and then once). Stochastic rounding keeps its full
            # padding: its draws per addition are part of its random stream.
            c = n + 1
        if blocks * c != n:  # pad with zeros after the real terms: acc + 0 == acc exactly
            values = np.concatenate([values, np.zeros((blocks * c - n, m))])
        # (blocks, c, m) -> (c, blocks * m): each block is an independent sequential sum.
        inner = values.reshape(blocks, c, m).transpose(1, 0, 2).reshape(c, blocks * m)
        inner_acc = Accumulator(self.fmt, self.rounding, "sequential", fused=True,
                                rng=self.rng, random_bits=self.random_bits)
        partial = inner_acc.reduce(_ArrayTerms(inner)).reshape(blocks, m)
        return self._outer(inner_acc).reduce(_ArrayTerms(partial))

    def _outer(self, inner: Accumulator | None = None) -> Accumulator:
        """The adder of the block sums: the promoted register (CUDA-core FP32 registers round
        to nearest even), else the accumulator itself in sequential order."""
        if self.promote is not None:
            return Accumulator(self.promote, "nearest_even")
        return inner or Accumulator(self.fmt, self.rounding, "sequential", fused=True,
                                    rng=self.rng, random_bits=self.random_bits)

    def _kahan(self, terms: _Terms, keep: bool) -> np.ndarray:
        """Kahan summation with every operation rounded to the accumulator format."""
        n, m = terms.n, terms.m
        engine = _kahan_engine(self, m) if isinstance(terms, _ArrayTerms) and n >= 4 * m else None
        if engine is not None:  # a few long sums (<= 128): Python floats, column by column
            return engine(terms.values, self, keep)
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


# --------------------------------------------------------------------------- terms

class _Terms:
    """n terms of m independent sums, produced in blocks of rows (never all at once for matmul)."""

    n: int
    m: int
    bits: int = 53  # at most this many significant bits in any term

    def block(self, start: int, stop: int) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError


class _ArrayTerms(_Terms):
    def __init__(self, values: np.ndarray, fmt: Format | None = None):
        self.values, self.fmt = values, fmt
        self.n, self.m = values.shape
        self.bits = fmt.p if fmt is not None else 53

    def block(self, start: int, stop: int) -> np.ndarray:
        return self.values[start:stop]


class _ProductTerms(_Terms):
    """The rank-1 terms a[:, k] * b[k, :] of a matrix product (exact in float64 when the inputs
    have at most 26 significant bits), optionally rounded to ``fmt`` first (unfused)."""

    def __init__(self, a: np.ndarray, b: np.ndarray, round_to: Accumulator | None,
                 known: tuple[Format | None, Format | None] = (None, None)):
        self.a, self.b, self.round_to = a, b, round_to
        self.n = a.shape[1]
        self.m = a.shape[0] * b.shape[1]
        # the formats a's and b's values are known to be in (else None: read from the values)
        self.known = known
        self._operand_bits: tuple[int, int] | None = None

    @property
    def operand_bits(self) -> tuple[int, int]:
        """Significant bits of a's and b's values (11, 24 or 53; or the known formats' p, 53
        with a NaN): bound the products' bits. Computed when first asked for."""
        if self._operand_bits is None:
            self._operand_bits = (_bits(self.a, self.known[0]), _bits(self.b, self.known[1]))
        return self._operand_bits

    @property
    def bits(self) -> int:  # type: ignore[override]
        return self.round_to.fmt.p if self.round_to is not None else builtins.sum(self.operand_bits)

    def finite_bits(self) -> tuple[int, int] | None:
        """:attr:`operand_bits` without its pass that looks for NaN, for a caller that knows a
        and b are finite (the fp16 engines' overflow bound refuses NaN and inf): the known
        formats' p, which is what ``_bits`` gives for finite values of them; None unless
        both formats are known (and the products are not rounded first)."""
        fa, fb = self.known
        if fa is None or fb is None or self.round_to is not None:
            return None
        return builtins.min(fa.p, 53), builtins.min(fb.p, 53)

    def block(self, start: int, stop: int) -> np.ndarray:
        prod = self.a[:, start:stop].T[:, :, None] * self.b[start:stop, None, :]
        prod = prod.reshape(stop - start, self.m)
        if self.round_to is not None:
            acc = self.round_to
            prod = _round(prod, acc.fmt, acc.rounding, rng=acc.rng, random_bits=acc.random_bits)
        return prod


# --------------------------------------------------------------------------- sequential

def _sequential(terms: _Terms, acc: Accumulator, keep: bool, fast: bool = True) -> np.ndarray:
    """Left-to-right sums, one rounding per addition; (m,) totals or (n, m) partials."""
    n, m = terms.n, terms.m
    if fast and isinstance(terms, _ArrayTerms):
        native = _native_dtype(acc)
        if native is not None:
            known = terms.fmt is not None and contains(acc.fmt, terms.fmt)
            summed = _native_accumulate(terms.values, native, keep, known)
            if summed is not None:
                return summed
    if fast and m <= _SPECULATIVE_MAX_COLUMNS and n >= 4 * m and isinstance(terms, _ArrayTerms):
        columns = [_speculative_column(terms.values[:, j], acc) for j in range(m)]
        partial = np.stack(columns, axis=1) if columns else np.zeros((n, 0))
        return partial if keep else (partial[-1] if n else np.zeros(m))
    if fast and not keep and isinstance(terms, _ProductTerms) and terms.round_to is None:
        finite = terms.finite_bits()  # (operands of known formats: the lab's)
        if finite is not None and _float16_cast_adds(acc, terms, finite[0] + finite[1]) \
                and _float16_magic_takes(terms.a, terms.b):  # (its bound refuses NaN, inf)
            # a and b are finite, so ``finite`` are their operand_bits, without that pass
            return _float16_magic(terms.a, terms.b, bits=finite, known=terms.known).reshape(-1)
        if _float16_cast_adds(acc, terms):
            return _float16_products(terms.a, terms.b, terms.operand_bits,
                                     terms.known).reshape(-1)
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


_SPECULATIVE_MAX_COLUMNS = 8

# Switch for the tests, which check the truncating fast path equal to the general one.
_FAST_TRUNCATION = True


def _truncating(terms: _Terms, acc: Accumulator) -> bool:
    """Whether the products of ``terms`` take floatlab.sequential's truncating fast path."""
    return (_FAST_TRUNCATION and isinstance(terms, _ProductTerms) and terms.round_to is None
            and acc.rounding == "toward_zero"  # (first: the operands' bits may cost a pass)
            and _truncating_products_apply(acc, terms.a, terms.b, *terms.operand_bits))


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
    typed = _own_native_array(x, acc)
    if typed is not None:  # an ndarray of the adder's own dtype: no conversion at all
        moved, shape = _as_columns(typed, axis)
        return _native_accumulate(moved, typed.dtype, keep=False, known=True).reshape(shape)
    moved, shape = _as_columns(values, axis)
    result = acc.reduce(_ArrayTerms(moved, fa.fmt if fa is not None else None)).reshape(shape)
    return _wrap(result, fa)


def _own_native_array(x: Any, acc: Accumulator) -> np.ndarray | None:
    """``x`` itself when it is an ndarray whose dtype is the adder (see floatlab.sequential)."""
    if not isinstance(x, np.ndarray) or acc.order != "sequential" or acc.chunk is not None \
            or acc.compensated:
        return None
    native = _native_dtype(acc)
    return x if native is not None and x.dtype == native else None


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
    return math.prod(shape)


# The products run the Accumulator above (floatlab.products imports this module).
from floatlab.products import _matmul, dot, matmul  # noqa: E402, F401
