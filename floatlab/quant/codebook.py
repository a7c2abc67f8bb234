"""Codebook element formats: a sorted table of values, rounding to the nearest entry.

Presets (``get_codebook(name)``), each derived from its definition, not copied as a table:

* ``"nf4"``: QLoRA's 16 NormalFloat values (Dettmers et al. 2023), computed the way
  bitsandbytes' ``create_normal_map(offset=0.9677083)`` computes them: 8 positive values at the
  standard normal quantiles of ``linspace(offset, 0.5, 9)[:-1]``, 7 negative ones at
  ``linspace(offset, 0.5, 8)[:-1]``, and 0, divided by the largest (so -1 and 1 are both in);
  the probabilities are float32 (torch.linspace), the quantiles float64 (here
  ``statistics.NormalDist().inv_cdf``), the table float32.
* ``"dynamic8"`` / ``"udynamic8"``: bitsandbytes' 8-bit dynamic maps (``create_dynamic_map``,
  Dettmers 2015), the maps of its 8-bit optimizers: for ``i = 0..6`` a group of
  ``10**(i - 6) * m`` where ``m`` runs over the midpoints of ``linspace(0.1, 1, F + 1)`` with
  ``F = 2**i`` (signed, both signs) or ``2**(i + 1)`` (unsigned); plus 0 and 1; 256 values.
  Everything in float32 as torch computes it (:func:`_torch_linspace32` says how), so the
  values equal bitsandbytes' map bit for bit.
* ``"fp4_bnb"``: bitsandbytes' FP4: E2M1's values divided by 6, except that its smallest
  nonzero magnitude is 1/192 (E2M1's subnormal 0.5 / 6 would be 1/12), with bitsandbytes' codes
  (magnitude codes 0..7 = 0, 1/192, 2/3, 1, 1/3, 1/2, 1/6, 1/4; bit 3 is the sign).

Integer elements ("int8", "int4") and MXINT8's element are :class:`~floatlab.FixedPoint`
formats (``get_codebook("int8")`` returns ``FixedPoint(8, 0)``): they round through
floatlab.round, whose ties-to-even a table lookup cannot give.

**Rounding to a codebook** (``Codebook.round``): nearest entry by ``np.searchsorted`` on the
midpoints between neighbours; an input exactly on a midpoint goes to the *lower* entry (toward
-inf), and inputs beyond the ends saturate to the first / last entry. Directed modes ("up",
"down", "toward_zero") take the neighbour on that side and "stochastic" rounds up with
probability ``(x - lower) / (upper - lower)``. The midpoints are exact in float64 (the entries
are float32 values), except between neighbours more than 2**29 apart in magnitude, whose
midpoint is stored rounded down (:func:`_midpoints`): the same decisions. bitsandbytes'
kernels search the same table; whether they send exact midpoints up or down is not claimed
here.

>>> import floatlab
>>> nf4 = floatlab.get_codebook("nf4")
>>> nf4
Codebook('nf4': 16 values in [-1, 1], 4 bits)
>>> floatlab.round([0.5, -0.01, 2.0], nf4)          # 0.5 is below the midpoint 0.5017
array([0.44070983, 0.        , 1.        ])
>>> floatlab.encode([0.5, -0.01], nf4), floatlab.decode([15, 0], nf4)
(array([12,  7], dtype=uint8), array([ 1., -1.]))
"""

from __future__ import annotations

import difflib
import statistics
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from floatlab._validate import as_array, check_flag, resolve_rng
from floatlab.quant.fixed import FixedPoint
from floatlab.rounding import _resolve_mode, as_float_array

__all__ = [
    "gather", "Codebook", "get_codebook", "codebook_names", "ElementExplanation", "dynamic_map",
    "normal_float_map",
]

NF4_OFFSET = 0.9677083  # QLoRA's quantile offset for the outermost bins


_GATHER_CHUNK = 1 << 16


def gather(table: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``table[index]`` for a small table and a big index array of any integer dtype.

    NumPy's fancy indexing and ``take`` are several times slower with non-intp indices than
    with intp ones (they convert the whole index array first); converting cache-sized chunks
    and taking with ``mode="clip"`` (the indices are in range by construction) is the fast
    way. The result is the same array.
    """
    if index.dtype == np.intp:
        return np.take(table, index, mode="clip")
    flat = index.reshape(-1)
    out = np.empty(flat.size, dtype=table.dtype)
    for start in range(0, flat.size, _GATHER_CHUNK):
        part = slice(start, start + _GATHER_CHUNK)
        np.take(table, flat[part].astype(np.intp), out=out[part], mode="clip")
    return out.reshape(index.shape)


def _midpoints(arr: np.ndarray) -> np.ndarray:
    """The midpoints between neighbouring float32 entries, for ``searchsorted(side="left")``:
    exact in float64 unless the two differ by more than 2**29 in magnitude (their sum then
    rounds: [-5e-37, 1] has the midpoint 0.5 - 2.5e-37, stored as 0.5, and 0.5 went to the
    lower entry). An inexact midpoint m* is stored rounded down, to m: no float64 lies
    strictly between m and m* < next(m), so ``x > m`` iff ``x > m*`` for every float64 x, and
    none ties. (The sum's error from TwoSum; halving it is exact.)"""
    a, b = arr[:-1], arr[1:]
    total = a + b
    b_part = total - a
    error = (a - (total - b_part)) + (b - b_part)   # a + b = total + error, exactly
    mid = total / 2
    return np.where(error < 0, np.nextafter(mid, -np.inf), mid)


class Codebook:
    """An element format given by its values: ``Codebook(name, values, codes=None)``.

    ``values`` are sorted and must be distinct finite numbers, exactly float32 (so the midpoints
    are exact in float64). ``codes`` (optional) gives each sorted value's stored code; the
    default is its index. Codes live in ``bits = ceil(log2(len(values)))`` bits.

    >>> cb = Codebook("thirds", np.float32([-1, -1/3, 0, 1/3, 1]))
    >>> cb.round([0.1, 0.2, -2.0]).tolist()
    [0.0, 0.3333333432674408, -1.0]
    """

    is_element_format = True  # floatlab.round / encode / decode / values / explain dispatch on it

    def __init__(self, name: str, values: Any, codes: Any = None):
        if not isinstance(name, str) or not name:
            raise TypeError(f"Codebook name must be a non-empty string, got {name!r}")
        arr = as_float_array(values, name="values").astype(np.float64)
        if arr.ndim != 1:  # (was flattened without a word)
            raise ValueError(f"Codebook values must be a 1-D list of numbers, got shape "
                             f"{arr.shape}")
        if arr.size < 2:
            raise ValueError("a Codebook needs at least two values")
        if not np.all(np.isfinite(arr)):
            raise ValueError("Codebook values must be finite")
        as32 = arr.astype(np.float32).astype(np.float64)
        arr = np.where(arr == 0, 0.0, as32) if np.array_equal(as32, arr) else None
        if arr is None:
            raise ValueError(
                "Codebook values must be float32 numbers (round them with "
                "np.float32(values)); their midpoints are then exact in float64, or nearly"
            )
        order = np.argsort(arr, kind="stable")
        arr = arr[order]
        if np.any(np.diff(arr) == 0):
            raise ValueError("Codebook values must be distinct")
        self.name = name
        self.bits = max(1, int(np.ceil(np.log2(arr.size))))
        if codes is None:
            code_arr = np.arange(arr.size)
        else:
            code_arr = as_array(codes, "codes")
            if code_arr.dtype.kind not in "iu" or code_arr.shape != arr.shape:
                raise ValueError(f"codes must be one int per value ({arr.size} ints), got "
                                 f"{code_arr.dtype} of shape {code_arr.shape}")
            code_arr = code_arr[order]
            if np.unique(code_arr).size != code_arr.size or code_arr.min() < 0 \
                    or code_arr.max() >= 1 << self.bits:
                raise ValueError(f"codes must be distinct ints in 0..{(1 << self.bits) - 1}")
        self._values = arr
        self._values32 = arr.astype(np.float32)
        self._midpoints = _midpoints(arr)
        self._midpoints32 = self._midpoints.astype(np.float32)
        self._midpoints32_exact = bool(np.array_equal(self._midpoints32, self._midpoints))
        self._codes = code_arr.astype(self.code_dtype)
        table = np.full(1 << self.bits, np.nan)
        table[code_arr] = arr
        self._decode_table = table
        self._index_of_code = np.full(1 << self.bits, -1, dtype=np.int64)
        self._index_of_code[code_arr] = np.arange(arr.size)
        self._values.setflags(write=False)

    # ------------------------------------------------------------------ limits
    @property
    def values_array(self) -> np.ndarray:
        return self._values

    @property
    def max(self) -> float:
        """The largest magnitude: the scale reference (absmax maps to it)."""
        return float(max(abs(self._values[0]), abs(self._values[-1])))

    @property
    def min(self) -> float:
        return float(self._values[0])

    @property
    def signed(self) -> bool:
        return bool(self._values[0] < 0)

    @property
    def code_dtype(self) -> np.dtype:
        return np.dtype(np.uint8 if self.bits <= 8 else np.uint16)

    float32_exact = True

    def __repr__(self) -> str:
        return (f"Codebook({self.name!r}: {self._values.size} values in "
                f"[{self._values[0]:g}, {self._values[-1]:g}], {self.bits} bits)")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Codebook) and np.array_equal(self._values, other._values) \
            and np.array_equal(self._codes, other._codes)

    def __hash__(self) -> int:
        return hash(("Codebook", self._values.tobytes()))

    # ------------------------------------------------------------------ rounding
    def indices(self, x: Any, rounding: str = "nearest_even", rng: Any = None, *,
                finite: bool = False) -> np.ndarray:
        """Index of the chosen entry for every element of ``x`` (see the module docstring).

        ``finite=True`` skips the NaN check (for callers that already checked)."""
        mode = _resolve_mode(rounding)
        arr = as_float_array(x)
        if not finite and arr.size and np.isnan(arr).any():
            raise ValueError(f"codebook {self.name} has no NaN, and the input holds NaN: "
                             "replace NaNs first (np.nan_to_num)")
        if mode in ("nearest_even", "nearest_away"):
            if arr.dtype == np.float32 and arr.size >= 4096:
                return self._nearest_float32(arr)
            return np.searchsorted(self._midpoints, arr, side="left")
        if mode in ("odd",):
            raise ValueError("round-to-odd has no meaning for a codebook; use nearest_even, "
                             "up, down, toward_zero or stochastic")
        n = self._values.size
        # lower = largest entry <= x (clipped into the table)
        lower = np.clip(np.searchsorted(self._values, arr, side="right") - 1, 0, n - 1)
        exact = self._values[lower] == arr
        upper = np.where(exact | (arr < self._values[0]), lower, np.minimum(lower + 1, n - 1))
        if mode == "up":
            return upper
        if mode == "down":
            return np.where(arr < self._values[0], 0, lower)
        if mode == "toward_zero":
            return np.where(arr >= 0, np.where(arr < self._values[0], 0, lower), upper)
        gen = resolve_rng(rng, True, mode)  # (a bad seed failed inside numpy before)
        lo_v, hi_v = self._values[lower], self._values[upper]
        span = np.where(hi_v > lo_v, hi_v - lo_v, 1.0)
        p = np.clip((arr - lo_v) / span, 0.0, 1.0)
        return np.where(gen.random(arr.shape) < p, upper, lower)

    def _nearest_float32(self, arr: np.ndarray) -> np.ndarray:
        """``np.searchsorted(midpoints, arr, side="left")`` for float32 arrays, faster.

        The top 16 bits of a float32 (sign, exponent, 7 mantissa bits) pick a bucket of
        values; a table gives ``c`` = the number of midpoints below the bucket. Where a bucket
        holds at most one midpoint the answer is ``c + (midpoint[c] < x)``, exactly what
        searchsorted counts; inputs in the (rare) buckets with two or more midpoints fall back
        to searchsorted. Tests check the two equal on every bucket edge.
        """
        counts, ambiguous, mids = self._bucket_table()
        flat = arr.reshape(-1)
        idx = np.empty(flat.size, dtype=np.intp)
        for start in range(0, flat.size, _GATHER_CHUNK):  # cache-sized pieces
            part = slice(start, start + _GATHER_CHUNK)
            x = flat[part]
            c = np.take(counts, (x.view(np.uint32) >> np.uint32(16)).astype(np.intp),
                        mode="clip")
            np.add(c, np.take(mids, c, mode="clip") < x, out=idx[part])
        idx = idx.reshape(arr.shape)
        key = None
        if ambiguous is not None:
            key = arr.view(np.uint32) >> np.uint32(16)
            fix = np.flatnonzero(ambiguous[key])
            if fix.size:
                flat = idx.reshape(-1)
                flat[fix] = np.searchsorted(self._midpoints, arr.reshape(-1)[fix], side="left")
        return idx

    def _bucket_table(self):
        table = getattr(self, "_buckets", None)
        if table is None:
            keys = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
            with np.errstate(invalid="ignore"):
                a = keys.view(np.float32).astype(np.float64)
                b = (keys | np.uint32(0xFFFF)).view(np.float32).astype(np.float64)
            lo, hi = np.fmin(a, b), np.fmax(a, b)
            finite = np.isfinite(lo) & np.isfinite(hi)
            lo, hi = np.where(finite, lo, 0.0), np.where(finite, hi, 0.0)
            c_lo = np.searchsorted(self._midpoints, lo, side="left")
            c_hi = np.searchsorted(self._midpoints, hi, side="left")
            ambiguous = (c_hi - c_lo) > 1
            counts = c_lo.astype(np.intp)
            # x > m  <=>  x > (m rounded down to float32), for float32 x: compare in float32
            m32 = self._midpoints.astype(np.float32)
            m32 = np.where(m32.astype(np.float64) > self._midpoints,
                           np.nextafter(m32, np.float32(-np.inf)), m32)
            mids = np.append(m32, np.float32(np.inf))
            table = self._buckets = (counts, ambiguous if ambiguous.any() else None, mids)
        return table

    def round(self, x: Any, rounding: str = "nearest_even", saturate: bool = True,
              subnormals: bool = True, rng: Any = None, dtype: Any = None) -> np.ndarray:
        """The nearest entries (float64, or float32 with ``dtype=np.float32``); saturating
        (``saturate`` and ``subnormals`` are taken for floatlab.round's signature; they must be
        bools, and a table has no other choice)."""
        check_flag(saturate, "saturate")
        check_flag(subnormals, "subnormals")
        idx = self.indices(x, rounding=rounding, rng=rng)
        table = self._values32 if dtype is not None and np.dtype(dtype) == np.float32 \
            else self._values
        return np.take(table, idx, mode="clip")

    def encode(self, x: Any, **rounding_options: Any) -> np.ndarray:
        rounding_options.pop("saturate", None)
        rounding_options.pop("subnormals", None)
        return self._codes[self.indices(x, **rounding_options)]

    def codes_of_indices(self, idx: np.ndarray) -> np.ndarray:
        return np.take(self._codes, idx, mode="clip")

    def codes_of_values(self, values: np.ndarray) -> np.ndarray:
        return self._codes[np.searchsorted(self._values, values)]

    def decode(self, codes: Any) -> np.ndarray:
        arr = np.asarray(codes)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"codes must be integers, got dtype {arr.dtype}")
        if arr.size and (arr.min() < 0 or arr.max() >= 1 << self.bits
                         or np.any(self._index_of_code[arr] < 0)):
            raise ValueError(f"codes out of range for codebook {self.name}")
        return self._decode_table[arr]

    def values(self) -> np.ndarray:
        return self._values.copy()

    def explain(self, x: Any, rounding: str = "nearest_even", rng: Any = None):
        """How one value is stored: the chosen entry, its neighbours, its code."""
        if np.ndim(x) != 0:
            raise TypeError(f"explain takes one value, got an array of shape {np.shape(x)}: "
                            f"pass one element, or use floatlab.round / encode for arrays")
        x64 = float(as_float_array(x).astype(np.float64))
        i = int(self.indices(x64, rounding=rounding, rng=rng))
        value = float(self._values[i])
        code = int(self._codes[i])
        below = float(self._values[i - 1]) if i > 0 else None
        above = float(self._values[i + 1]) if i + 1 < self._values.size else None
        lines = [
            f"{self.name}({x64!r}) = {value!r}   [entry {i} of {self._values.size}, code "
            f"{code:#04x}]",
            f"  format      {self!r}",
            f"  neighbours  {below!r} below, {above!r} above",
            "  rule        nearest entry; midpoints go to the lower entry; beyond the ends "
            "saturate",
            f"  bits        {code:0{self.bits}b}",
            f"  error       {value - x64:.6g}",
        ]
        return ElementExplanation(x64, value, code, self.name, "\n".join(lines))


@dataclass(frozen=True)
class ElementExplanation:
    """``explain()`` of a value in a FixedPoint or Codebook format (text and HTML)."""

    x: float
    value: float
    code: int
    format_name: str
    text: str

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"ElementExplanation({self.format_name}: {self.x!r} -> {self.value!r})"

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(self.text)}</pre>"


# ====================================================================== presets

def _torch_linspace32(start: float, end: float, steps: int) -> np.ndarray:
    """torch.linspace(start, end, steps) in float32, bit for bit.

    torch's CPU kernel computes ``start + step * i`` for the first half and
    ``end - step * (steps - 1 - i)`` for the second, with ``step = (end - start) / (steps - 1)``
    in float32, and the compiler contracts each into one fused multiply-add: one rounding of
    the exact value. float64 holds those exact values (24-bit times <= 8-bit products plus a
    float32), so computing them in float64 and rounding once to float32 is the same.
    """
    s, e = np.float32(start), np.float32(end)
    step = (e - s) / np.float32(steps - 1)
    i = np.arange(steps)
    low = np.float64(s) + np.float64(step) * i
    high = np.float64(e) - np.float64(step) * (steps - 1 - i)
    return np.where(i < steps // 2, low, high).astype(np.float32)


def dynamic_map(signed: bool = True) -> np.ndarray:
    """bitsandbytes' 8-bit dynamic map (256 float32 values, sorted); see the module docstring.

    >>> m = dynamic_map()
    >>> m.dtype, m.size, float(m[0]), float(m[127]), float(m[128]), float(m[-1])
    (dtype('float32'), 256, -0.992968738079071, 0.0, 5.500000384017767e-07, 1.0)
    """
    groups = [np.float32([0.0, 1.0])]
    for i in range(7):
        fractions = 2**i if signed else 2 ** (i + 1)
        bounds = _torch_linspace32(0.1, 1.0, fractions + 1)
        means = (bounds[:-1] + bounds[1:]) / np.float32(2)
        # torch multiplies a float32 tensor by the Python float 10**(i-6) in float32
        group = np.float32(10.0 ** (i - 6)) * means
        groups.append(group)
        if signed:
            groups.append(-group)
    return np.sort(np.concatenate(groups)).astype(np.float32)


def normal_float_map(offset: float = NF4_OFFSET) -> np.ndarray:
    """QLoRA's NF4 values (16, float32, sorted); see the module docstring."""
    inv_cdf = statistics.NormalDist().inv_cdf
    positive = [inv_cdf(float(p)) for p in _torch_linspace32(offset, 0.5, 9)[:-1]]
    negative = [-inv_cdf(float(p)) for p in _torch_linspace32(offset, 0.5, 8)[:-1]]
    table = np.sort(np.float32(positive + [0.0] + negative))
    return table / table.max()  # float32 division, as torch's in-place values /= values.max()


def _fp4_bnb() -> Codebook:
    e2m1_over_6 = np.float32([0.0, 1 / 192, 4 / 6, 1.0, 2 / 6, 3 / 6, 1 / 6, 1.5 / 6])
    values = np.concatenate([e2m1_over_6, -e2m1_over_6[1:]])
    codes = np.concatenate([np.arange(8), np.arange(9, 16)])
    return Codebook("fp4_bnb", values, codes=codes)


_BUILDERS = {
    "nf4": lambda: Codebook("nf4", normal_float_map()),
    "fp4_bnb": _fp4_bnb,
    "dynamic8": lambda: Codebook("dynamic8", dynamic_map(signed=True)),
    "udynamic8": lambda: Codebook("udynamic8", dynamic_map(signed=False)),
    "int8": lambda: FixedPoint(8, 0, name="int8"),
    "int4": lambda: FixedPoint(4, 0, name="int4"),
    "mxint8": lambda: FixedPoint(8, 6, name="mxint8"),
}


def codebook_names() -> list[str]:
    """Names accepted by :func:`get_codebook`.

    >>> codebook_names()
    ['nf4', 'fp4_bnb', 'dynamic8', 'udynamic8', 'int8', 'int4', 'mxint8']
    """
    return list(_BUILDERS)


def get_codebook(name: str) -> Codebook | FixedPoint:
    """A preset codebook (or the integer FixedPoint elements int8 / int4 / mxint8) by name.

    >>> get_codebook("int8")
    FixedPoint('int8': 8 bits two's complement, 0 fraction bits, range [-128, 127], step 1)
    """
    if not isinstance(name, str):  # (before the cache, which fails on unhashable names)
        raise TypeError(f"codebook name must be a string, got {name!r}")
    return _get_codebook(name)


@cache
def _get_codebook(name: str) -> Codebook | FixedPoint:
    key = name.strip().lower().replace("-", "_")
    if key not in _BUILDERS:
        close = difflib.get_close_matches(key, list(_BUILDERS), n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(f"unknown codebook {name!r}.{hint} Known: {', '.join(_BUILDERS)}")
    return _BUILDERS[key]()
