"""FloatArray: NumPy arithmetic in any format, every operation rounded once.

>>> import numpy as np, floatlab
>>> x = floatlab.array([0.1, 1000.0], "bf16")
>>> x
FloatArray(bfloat16, [0.10009765625, 1000.0])
>>> np.sqrt(x + 1) - np.sqrt(x)          # cancellation: bf16 returns 0 at x = 1000
FloatArray(bfloat16, [0.73046875, 0.0])
>>> x + floatlab.array([1.0, 1.0], "fp16")   # fp16 with bf16 promotes to float32, as in torch
FloatArray(float32, [1.10009765625, 1001.0])

Semantics
---------
* Every ufunc result is rounded once to the format with the array's rounding mode (and rng /
  random_bits for stochastic rounding). Comparisons and predicates return plain bool arrays.
* An exact zero sum or difference (``x + (-x)``, ``x - x``, ``+0 + -0``, and ``fma``'s
  ``a*b + c``) is +0 in every mode but ``"down"``, where it is -0, and ``x + x`` keeps the sign
  of x (IEEE 754 6.3; a nonzero result that rounds to zero keeps its own sign).
* Python and NumPy scalars and plain arrays are *weak*: they are first converted to the
  array's format (round to nearest even, as NumPy's NEP 50 converts a Python float to an
  array's float16), then the operation runs. Two FloatArrays of different formats promote to
  the one that holds the other, else to float32, else float64 (torch's rule: fp16 + bf16 ->
  float32); the result takes the rounding mode, rng and accumulator of the first FloatArray.
* Reductions (``sum``, ``mean``, ``cumsum``, ``dot``, ``@`` / ``np.matmul`` on stacks too,
  ``np.vecdot`` / ``matvec`` / ``vecmat``, ``np.inner``, ``np.tensordot``, ``np.trace``,
  ``np.var`` / ``np.std`` (with ``ddof``), ``np.average`` (with ``weights``),
  ``np.linalg.norm`` of ord None / 2 / 1 / +-inf / 'fro') run through the array's
  :class:`~floatlab.Accumulator` (default: its own format and rounding, sequential: a naive
  loop in that format), every other step rounded once. The result is a FloatArray of the
  array's format. ``np.prod`` / ``np.cumprod`` multiply left to right, each product rounded;
  ``np.outer`` / ``np.kron`` round each product; ``np.clip``, ``np.where``, ``np.round``
  (decimals=0), ``np.ptp``, ``np.median`` and ``np.percentile`` / ``np.quantile`` with a
  selecting method select exact values or round once (:mod:`floatlab.arith_numpy`).
  ``np.diff`` rounds each difference; ``np.vdot`` / ``np.convolve`` / ``np.correlate`` and the
  nan-reductions (NaNs replaced as NumPy does) run through the accumulator. ``np.einsum``,
  ``np.round`` with decimals, interpolating percentiles, solvers and factorisations are
  refused with a supported spelling (:mod:`floatlab.arith_coverage` classifies every NumPy
  array function: emulated, refused, or exact).
* Functions that only move or select values (reshape, concatenate, sort, unique, take,
  ``np.max`` ...) and slicing keep the format; ``np.allclose``, ``np.argsort`` ... give plain
  bools and indices. Methods (``x.var()``, ``x.max()`` ...) call the matching np function.
* Indexing, slicing, ``.T`` and reshaping give new FloatArrays that share nothing with the
  original (NumPy and torch give views): ``x[i] = v`` rounds ``v`` into ``x`` only, so a
  chained ``m[0][1] = v`` or ``m.T[0] = v`` leaves ``m`` unchanged; index once, ``m[0, 1] = v``.

Why float64 intermediates give correctly rounded ``+ - * / sqrt`` for formats of p <= 25 bits
(and at most 8-or-so exponent bits, so that products and quotients never leave float64's normal
range; every preset but float64 qualifies, see :func:`correctly_rounded`):

* ``*``: the product of two p-bit significands has at most 2p <= 50 bits: exact in float64,
  then rounded once.
* ``/`` and ``sqrt``: the exact result is either a p-bit number (then float64 holds it exactly)
  or at a distance of at least 2**(e - 2p - 1) from every (p+1)-bit number (a grid point or a
  midpoint of the p-bit grid): for a / b, |a - g b| is a nonzero multiple of ulp(g) ulp(b), and
  for sqrt(a), |a - g**2| is a nonzero multiple of ulp(g)**2. For p <= 25 that distance exceeds
  half a float64 ulp, 2**(e - 53), so float64's round-to-nearest lands strictly on the same side
  of every grid point and midpoint as the exact result: rounding it in any mode gives the
  rounding of the exact result.
* ``+ -``: the float64 sum is exact unless the exponents are far apart; then the small operand
  lies below half a float64 ulp of the large one, the float64 sum is the large operand itself,
  and round to nearest still gives it (Figueroa: q = 53 >= 2p + 2). Directed and stochastic
  modes need the lost sign of the small operand: the sum is computed with TwoSum (exact error)
  and rounded to odd in float64 before the final rounding. That adder (``eft.sum_to_round``,
  the Accumulator's too) also serves nearest beyond p = 25, so ``+ -`` are correctly rounded
  for every format of p <= 51 bits in every mode, and of p = 52 too (its stochastic rounding
  from TwoSum's s + e, ``accumulate._stochastic_52``), whatever its exponent range
  (:func:`correctly_rounded` answers for all six operations).
* ``fma(a, b, c)`` (:mod:`floatlab.fused_multiply_add`): a*b is exact, but a*b + c can sit
  arbitrarily close to a midpoint, so one float64 addition is not enough in any mode. TwoSum
  gives s + e == a*b + c exactly, s is rounded to odd in float64 (one ulp toward e when inexact
  and even), and round-to-odd at 53 >= p + 2 bits followed by one rounding to p bits equals that
  rounding of the exact value in every mode (Boldo & Melquiond, "When double rounding is odd").
* Stochastic rounding picks between the same two neighbours as the exact result; its
  probability of rounding up is computed from the float64 value, which differs from the exact
  one by less than a float64 ulp: the probability is exact to 2**(p - 53) <= 2**-28.

Transcendentals (exp, log, tanh, sin, power ...) go through float64 libm and one rounding:
faithful (error below one ulp of the format), correctly rounded except in rare hard cases where
libm's float64 result falls on the other side of a midpoint; directed modes are not guaranteed
for them. Formats outside the range above (float64 itself, p > 25, very wide exponents) compute
in float64 and round once: not guaranteed correctly rounded.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from floatlab._validate import _is_real_number, resolve_rng
from floatlab.accumulate import Accumulator, _check_axis, _stochastic_52
from floatlab.accumulate import cumsum as _cumsum
from floatlab.accumulate import dot as _dot
from floatlab.accumulate import matmul as _matmul
from floatlab.accumulate import sum as _sum
from floatlab.eft import sum_to_round
from floatlab.formats import Format, get_format
from floatlab.grid import nextafter
from floatlab.promotion import widest
from floatlab.rounding import _resolve_mode, as_float_array
from floatlab.rounding import round as _round

__all__ = ["FloatArray", "array", "correctly_rounded", "result_format"]

_NEAREST = ("nearest_even", "nearest_away")
# ufuncs whose finite inputs give inf / NaN (x / 0): FloatArray._round_few_specials
_MAKE_SPECIALS = (np.divide, np.reciprocal)
# Results that are a plain selection or sign change of an operand: exact, rounding is a no-op
# (still applied, for -0 in FNUZ formats and uniformity).
_PREDICATES = frozenset({np.isnan, np.isinf, np.isfinite, np.signbit})


def correctly_rounded(fmt: str | Format) -> bool:
    """Whether ``+ - * / sqrt fma`` on ``fmt`` are correctly rounded in every mode (see above).

    >>> correctly_rounded("float32"), correctly_rounded("float64")
    (True, False)
    """
    fmt = get_format(fmt)
    return fmt.p <= 25 and fmt.emax <= 500 and fmt.emin - fmt.man_bits >= -500


def result_format(*arrays: FloatArray | Format) -> Format:
    """The format of an operation on FloatArrays of these formats (torch's promotion).

    >>> result_format(get_format("fp16"), get_format("bf16")).name
    'float32'
    """
    fmts = [a if isinstance(a, Format) else a.fmt for a in arrays]
    return widest(*fmts)


class FloatArray(np.lib.mixins.NDArrayOperatorsMixin):
    """An array of values of one format; NumPy operations on it round to that format.

    Build one with :func:`floatlab.array`. ``values`` (or ``np.asarray``) gives the exact values
    as a read-only float64 array.

    Masked arrays are refused (their mask would be lost), with one case NumPy keeps out of
    reach: a ``numpy.ma`` array on the *left* of an operator (``m * fa``) is computed by
    numpy.ma itself, which reads ``np.asarray(fa)`` and never calls FloatArray, so the result
    is an unrounded float64 masked array. ``fa * m`` and ``np.multiply(m, fa)`` raise instead.

    >>> x = array([1.0, 2048.0], "fp16")
    >>> x + 1                                  # 2048 + 1 is a tie in fp16: to even
    FloatArray(float16, [2.0, 2048.0])
    """

    __array_priority__ = 100

    def __init__(self, values: np.ndarray, fmt: Format, rounding: str, rng: Any,
                 accumulator: Accumulator | None, random_bits: int | None,
                 owned: bool = False):
        if not (owned and values.dtype == np.float64):
            values = np.array(values, dtype=np.float64)  # our own copy
        values.setflags(write=False)  # (arrays we made, or read-only views of them)
        self._values, self.fmt, self.rounding = values, fmt, rounding
        self.rng, self.random_bits = rng, random_bits
        self._accumulator = accumulator

    # ------------------------------------------------------------------ basics
    @property
    def values(self) -> np.ndarray:
        """The exact values (read-only float64)."""
        return self._values

    @property
    def accumulator(self) -> Accumulator:
        """The Accumulator reductions run in (default: own format and rounding, sequential)."""
        if self._accumulator is None:
            self._accumulator = Accumulator(self.fmt, self.rounding, rng=self.rng,
                                            random_bits=self.random_bits)
        return self._accumulator

    shape = property(lambda self: self._values.shape)
    ndim = property(lambda self: self._values.ndim)
    size = property(lambda self: self._values.size)
    T = property(lambda self: self._new(self._values.T, self.fmt, exact=True))

    def __len__(self) -> int:
        return len(self._values)

    def __bool__(self) -> bool:
        # (without it Python took len(): A([0.0]) was True, A([1.0, 2.0]) True, 0-d a TypeError)
        if self.size != 1:
            raise ValueError(f"the truth value of a FloatArray of {self.size} elements is "
                             "ambiguous: use np.any(x) or np.all(x) (or x.size > 0)")
        return bool(self._values.reshape(()))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if copy:
            return np.array(self._values, dtype=dtype)
        if copy is False and dtype is not None:  # (NumPy 2's protocol: never a silent copy)
            if np.dtype(dtype) == np.float64:
                return self._values
            raise ValueError(f"np.asarray(x, dtype={np.dtype(dtype)}, copy=False) of a "
                             "FloatArray needs a copy (its values are float64): drop copy=False")
        return self._values if dtype is None else self._values.astype(dtype)

    def __float__(self) -> float:
        return float(self._values)

    def __repr__(self) -> str:
        text = np.array2string(self._values, separator=", ", threshold=12, edgeitems=3,
                               max_line_width=100,
                               formatter={"float_kind": lambda v: repr(float(v))})
        mode = "" if self.rounding == "nearest_even" else f"{self.rounding}, "
        return f"FloatArray({self.fmt.name}, {mode}{text})"

    def __getitem__(self, key: Any) -> FloatArray:
        return self._new(self._values[key], self.fmt, exact=True)

    def __setitem__(self, key: Any, value: Any) -> None:
        values = self._values.copy()
        incoming = self._weak(value, self.fmt)
        if isinstance(value, FloatArray) and value.fmt != self.fmt:
            # A FloatArray of another format is cast into this one (round to nearest even, as
            # torch's t[i] = other casts): its raw values would not be values of this format.
            incoming = _round(incoming, self.fmt)
        values[key] = incoming
        values.setflags(write=False)
        self._values = values

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def _new(self, values: np.ndarray, fmt: Format, exact: bool = False) -> FloatArray:
        """A FloatArray with this one's settings; ``values`` rounded to ``fmt`` unless exact."""
        if not exact:
            values = _round(values, fmt, self.rounding, rng=self.rng,
                            random_bits=self.random_bits)
        own = self._accumulator is None or fmt != self.fmt
        return FloatArray(np.asarray(values), fmt, self.rounding, self.rng,
                          None if own else self._accumulator, self.random_bits, owned=True)

    def _weak(self, x: Any, fmt: Format) -> np.ndarray:
        """A non-FloatArray operand converted to ``fmt`` (round to nearest even, as a cast)."""
        if isinstance(x, FloatArray):
            return x._values
        refused = isinstance(x, (str, bytes)) or (
            isinstance(x, np.ndarray) and x.dtype.kind in "OUS")
        if refused or not (isinstance(x, (numbers.Real, np.ndarray, list, tuple))
                           or _is_real_number(x)):  # ml_dtypes' scalars are not Real
            raise TypeError(f"cannot combine a FloatArray with {type(x).__name__} {x!r:.40}: "
                            "pass numbers, numeric arrays or FloatArrays")
        return _round(as_float_array(x, name="operand"), fmt)

    # ------------------------------------------------------------------ NumPy protocols
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any):
        out = kwargs.get("out")
        if out is not None:
            if isinstance(out, tuple) and len(out) == 1 and out[0] is inputs[0]:
                # x += y reaches here as np.add(x, y, out=(x,)): say so, not "out="
                raise TypeError(f"in-place np.{ufunc.__name__} (x += y, x *= y ...) with a "
                                "FloatArray is not emulated: write x = x + y (a new "
                                "FloatArray, rounded once), or assign with x[...] = value")
            raise TypeError("FloatArray operations do not write into out=: assign the result")
        if method == "__call__" or ufunc is np.add:
            _refuse_ufunc_options(ufunc, method, kwargs)
        if method == "reduce" and ufunc is np.add:
            return _sum(inputs[0], axis=kwargs.get("axis", 0))
        if method == "accumulate" and ufunc is np.add:
            return _cumsum(inputs[0], axis=kwargs.get("axis", 0))
        if method == "__call__" and not _same(kwargs.get("where", True), True):
            raise TypeError(f"np.{ufunc.__name__}(..., where=mask) is not emulated for "
                            "FloatArray: compute it everywhere and assign the part you want "
                            "(r = x.copy(); r[mask] = (x + y)[mask]), or call it on "
                            "np.asarray(x) to compute on the exact float64 values")
        if method != "__call__":
            raise TypeError(f"np.{ufunc.__name__}.{method} is not emulated for FloatArray; call "
                            "it on np.asarray(x) to compute on the exact float64 values")
        if ufunc is np.matmul:
            return _matmul(*inputs)
        if ufunc is np.ldexp:
            return _ldexp(*inputs)
        if ufunc.signature is not None:  # np.vecdot, np.matvec, np.vecmat (NumPy 2)
            return _product_ufunc(ufunc, inputs)
        arrays = [x for x in inputs if isinstance(x, FloatArray)]
        lead = arrays[0]
        fmt = result_format(*arrays)
        args = [lead._weak(x, fmt) for x in inputs]
        return lead._apply(ufunc, args, fmt)

    def _apply(self, ufunc: np.ufunc, args: list[np.ndarray], fmt: Format) -> Any:
        mode = self.rounding
        if ufunc in (np.add, np.subtract) and (mode not in _NEAREST or fmt.p > 25):
            # (x - y is x + (-y)): the adders' sum (round to odd where float64's own sum is
            # not enough: directed modes, and nearest beyond p = 25, where it would be a
            # second rounding); "down" gives its exact zero sums -0 (see zero_sum_sign)
            b = args[1] if ufunc is np.add else -args[1]
            if fmt.p == 52 and mode == "stochastic":  # (the probability needs TwoSum's error)
                return self._new(_stochastic_52(args[0], b, fmt, self.rng, self.random_bits),
                                 fmt, exact=True)
            exact = sum_to_round(args[0], b, fmt.p, mode)
        elif ufunc in (np.nextafter, np.spacing):
            exact = _grid_step(ufunc, args, fmt)
        elif ufunc in _MAKE_SPECIALS:
            # x / 0 is inf or NaN by IEEE 754, which the rounding then maps into the format
            # (as torch returns inf without a warning): nothing to warn the user about.
            with np.errstate(divide="ignore", invalid="ignore"):
                exact = ufunc(*args)
        else:
            exact = ufunc(*args)
        if isinstance(exact, tuple):  # modf, frexp, divmod: each float output rounded
            return tuple(self._wrap_result(part, fmt) for part in exact)
        if ufunc in _MAKE_SPECIALS and mode != "stochastic":
            return self._new(self._round_few_specials(exact, fmt), fmt, exact=True)
        return self._wrap_result(exact, fmt)

    def _round_few_specials(self, exact: np.ndarray, fmt: Format) -> np.ndarray:
        """``floatlab.round(exact)`` for results of finite inputs with a few inf / NaN (x / 0).

        floatlab.round takes several whole-array passes as soon as one input is inf or NaN; here
        those few are set aside (the array is a fresh ufunc result, ours to modify), the rest is
        rounded on the all-finite path and the few are rounded on their own. The rounding is
        element-wise in every deterministic mode, so the result is the same, errors included
        (a format without NaN still refuses a NaN, with the same message). Stochastic rounding
        is left whole: rounding a piece separately would draw its random numbers in a different
        order.
        """
        flat = np.asarray(exact, dtype=np.float64).reshape(-1)  # 0-d results come as scalars
        finite = np.isfinite(flat)
        if finite.all():  # one cheap pass: the common case
            return self._rounded(exact, fmt)
        bad = np.flatnonzero(~finite)
        specials = flat[bad]
        flat[bad] = 0.0
        out = np.asarray(self._rounded(flat, fmt), dtype=np.float64)
        out[bad] = self._rounded(specials, fmt)
        return out.reshape(np.shape(exact))

    def _rounded(self, values: np.ndarray, fmt: Format) -> np.ndarray:
        return _round(values, fmt, self.rounding, rng=self.rng, random_bits=self.random_bits)

    def _wrap_result(self, result: np.ndarray, fmt: Format) -> Any:
        result = np.asarray(result)
        if result.dtype.kind != "f":  # comparisons, predicates, integer outputs: no rounding
            return result
        return self._new(result, fmt)

    def __array_function__(self, func, types, args, kwargs):
        handler = _FUNCTIONS.get(func)
        if handler is not None:
            return handler(*args, **kwargs)
        if func in _SHAPE_FUNCTIONS:
            return _shape_function(func, args, kwargs)
        return _unhandled(func, args, kwargs)  # selections, plain results, or refused

    # ------------------------------------------------------------------ methods
    def sum(self, axis: int | None = None, **kwargs: Any) -> FloatArray:
        """Sum through the array's accumulator (a FloatArray of its format)."""
        return _np_sum(self, axis, **kwargs)

    def mean(self, axis: int | None = None, **kwargs: Any) -> FloatArray:
        """The accumulator's sum divided by the count, rounded once (faithful)."""
        _no_extra_kwargs("mean", kwargs)
        # (checked here: self.shape[axis] would raise IndexError for an axis out of range)
        count = self.size if axis is None else self.shape[_check_axis(axis, self.ndim)]
        total = _sum(self, self.accumulator, axis=axis)
        return self._new(np.asarray(total.values) / count, self.fmt)

    def cumsum(self, axis: int | None = None, **kwargs: Any) -> FloatArray:
        """Running sums through the array's accumulator."""
        return _np_cumsum(self, axis, **kwargs)

    def dot(self, other: Any) -> FloatArray:
        """Inner / matrix product through the array's accumulator (a scalar: the product)."""
        return _np_dot(self, other)

    def reshape(self, *shape: Any) -> FloatArray:
        return self._new(self._values.reshape(*shape), self.fmt, exact=True)

    def transpose(self, *axes: Any) -> FloatArray:
        return self._new(self._values.transpose(*axes), self.fmt, exact=True)

    def ravel(self) -> FloatArray:
        return self._new(self._values.ravel(), self.fmt, exact=True)

    def copy(self) -> FloatArray:
        return self._new(self._values, self.fmt, exact=True)

    def astype(self, fmt: str | Format) -> FloatArray:
        """The values rounded to another format (with this array's rounding mode)."""
        return self._new(self._values, get_format(fmt))

    def tolist(self) -> Any:
        return self._values.tolist()


# What a ufunc option means when it changes nothing (numpy passes only the options given).
_NEUTRAL_OPTIONS = {"where": True, "keepdims": False, "dtype": None, "initial": np._NoValue,
                    "casting": "same_kind", "order": "K", "subok": True, "signature": None}


def _refuse_ufunc_options(ufunc: np.ufunc, method: str, kwargs: dict) -> None:
    """Options the emulation would otherwise drop without a word (``dtype=``, ``keepdims=``,
    ``initial=``, ``where=`` of a reduction ...): refused, since the result's format is the
    operands' and its rounding the array's, whatever the option asked for."""
    # (where= of a call has its own message in __array_ufunc__)
    allowed = {"out", "axis"} if method in ("reduce", "accumulate") else {"out", "where"}
    extra = sorted(k for k, v in kwargs.items() if k not in allowed
                   and not (k in _NEUTRAL_OPTIONS and _same(v, _NEUTRAL_OPTIONS[k])))
    if not extra:
        return
    name = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
    raise TypeError(f"np.{name} on a FloatArray takes no {', '.join(extra)}: the result's "
                    "format is the operands' (promoted) and its rounding the array's; convert "
                    "with .astype(fmt) afterwards, or call it on np.asarray(x) to compute on "
                    "the exact float64 values")


def _same(value: Any, neutral: Any) -> bool:
    if neutral is None or neutral is np._NoValue or isinstance(neutral, bool):
        return value is neutral or (isinstance(neutral, bool) and isinstance(value, np.bool_)
                                    and bool(value) is neutral)
    return isinstance(value, str) and value == neutral


def _grid_step(ufunc: np.ufunc, args: list[np.ndarray], fmt: Format) -> np.ndarray:
    """np.nextafter / np.spacing in the format's grid (float64's steps round back to x: the
    neighbour of 1.0 in fp16 came out as 1.0 and its spacing as 0). spacing keeps NumPy's
    conventions: the sign of x, +smallest positive at +-0, inf past max, NaN at inf."""
    if ufunc is np.nextafter:
        return nextafter(args[0], args[1], fmt)
    x = args[0]
    outward = np.where(np.signbit(x) & (x != 0), -np.inf, np.inf)
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, as np.spacing(inf)
        return nextafter(x, outward, fmt) - x


def _product_ufunc(ufunc: np.ufunc, inputs: tuple) -> FloatArray:
    """np.vecdot / matvec / vecmat through the accumulator, as ``@`` (they summed in float64
    and rounded once, bypassing it): a matmul of the vectors made rows / columns, stacks
    broadcast as NumPy's gufuncs broadcast them."""
    name = ufunc.__name__
    x, y = (v if isinstance(v, FloatArray) else np.asarray(v) for v in inputs)
    need = {"vecdot": (1, 1), "matvec": (2, 1), "vecmat": (1, 2)}[name]
    for i, (v, d) in enumerate(zip((x, y), need, strict=True)):
        if np.ndim(v) < d:
            raise ValueError(f"{name}: Input operand {i} does not have enough dimensions (has "
                             f"{np.ndim(v)}, needs {d}): pass a {'vector' if d == 1 else 'matrix'}")
    if name == "vecdot":
        return _matmul(x[..., None, :], y[..., :, None])[..., 0, 0]
    if name == "matvec":
        return _matmul(x, y[..., :, None])[..., 0]
    return _matmul(x[..., None, :], y)[..., 0, :]


def _ldexp(x: Any, n: Any) -> FloatArray:
    """``x * 2**n`` rounded once: n stays the integer array NumPy's ldexp needs (converted to
    x's format like other operands, it made NumPy refuse the float exponents)."""
    n = np.asarray(n)
    if not isinstance(x, FloatArray) or n.dtype.kind not in "iu":
        raise TypeError("np.ldexp(x, n) takes a FloatArray x and integer exponents n (e.g. "
                        f"np.ldexp(x, 3)), got {type(x).__name__} and {n.dtype} exponents")
    if not correctly_rounded(x.fmt):
        return x._new(np.ldexp(x.values, n), x.fmt)
    # The exponent clipped so that float64 neither overflows nor underflows: beyond 2**+-1000
    # the value is far outside the format either way, so every mode rounds it the same.
    mant, exp = np.frexp(x.values)
    total = np.clip(exp + np.clip(n, -5000, 5000).astype(np.int64), -1020, 1000)
    return x._new(np.ldexp(mant, total), x.fmt)


def _plain(obj: Any) -> Any:
    if isinstance(obj, FloatArray):
        return obj.values
    if isinstance(obj, (list, tuple)):
        return type(obj)(_plain(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


def _leaves(obj: Any) -> list[FloatArray]:
    if isinstance(obj, FloatArray):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [leaf for o in obj for leaf in _leaves(o)]
    return []


def _shape_function(func, args, kwargs) -> FloatArray:
    """Functions that only move or join values: the result keeps the (promoted) format."""
    arrays = _leaves(args)
    lead, fmt = arrays[0], result_format(*arrays)
    if kwargs.get("out") is not None:  # (the caller's array became the result, read-only)
        raise TypeError("FloatArray operations do not write into out=: assign the result")
    if kwargs.get("dtype") is not None:  # (NumPy cast the format's values into it)
        raise TypeError(f"np.{func.__name__} on FloatArrays takes no dtype: the result's "
                        "format is the operands' (promoted); convert with .astype(fmt) "
                        "afterwards, or call it on np.asarray(x) for a plain array")

    def convert(obj):  # the data argument: every number in it becomes a value of fmt
        if isinstance(obj, FloatArray):
            return obj.values
        if isinstance(obj, (list, tuple)):
            return type(obj)(convert(o) for o in obj)
        # (ints too: np.concatenate([e2m1 array, [7]]) kept 7, above e2m1's max 6; bools and
        # strings go to _weak's refusal instead of becoming 1.0 or a numpy conversion error)
        return lead._weak(obj, fmt)

    first, rest = convert(args[0]), args[1:]
    out = func(first, *rest, **kwargs)
    return lead._new(out, fmt, exact=True)


_SHAPE_FUNCTIONS = frozenset({
    np.reshape, np.transpose, np.ravel, np.squeeze, np.expand_dims, np.swapaxes, np.moveaxis,
    np.flip, np.concatenate, np.stack, np.hstack, np.vstack, np.atleast_1d, np.atleast_2d,
    np.copy, np.broadcast_to, np.roll, np.sort, np.take,
})


def _np_sum(a, axis=None, **kwargs):
    _no_extra_kwargs("sum", kwargs)
    return _sum(a, axis=axis)


def _np_mean(a, axis=None, **kwargs):
    return a.mean(axis, **kwargs)  # (the method checks the options)


def _np_cumsum(a, axis=None, **kwargs):
    _no_extra_kwargs("cumsum", kwargs)
    return _cumsum(a, axis=axis)


def _np_dot(a, b, out=None):
    if out is not None:
        raise TypeError("FloatArray operations do not write into out=: assign the result")
    if np.ndim(a) == 0 or np.ndim(b) == 0:  # NumPy: dot with a scalar is multiply (no sum)
        return np.multiply(a, b)
    return _dot(a, b)


def _no_extra_kwargs(name: str, kwargs: dict) -> None:
    # (keepdims=False and where=True change nothing: accepted, as the ufunc path accepts them)
    extra = {k: v for k, v in kwargs.items() if v is not None and v is not np._NoValue
             and not (k in _NEUTRAL_OPTIONS and _same(v, _NEUTRAL_OPTIONS[k]))}
    if extra:
        raise TypeError(f"np.{name} on a FloatArray takes axis only, got {sorted(extra)}: the "
                        "result's format is the array's, its adder the array's accumulator")


_FUNCTIONS = {
    np.sum: _np_sum, np.mean: _np_mean, np.cumsum: _np_cumsum, np.dot: _np_dot,
}


# --------------------------------------------------------------------------- constructors

def array(
    x: Any,
    fmt: str | Format,
    rounding: str = "nearest_even",
    rng: np.random.Generator | int | None = None,
    accumulator: Accumulator | str | Format | None = None,
    random_bits: int | None = None,
) -> FloatArray:
    """Round ``x`` to ``fmt`` and return a :class:`FloatArray` (``x`` is never modified).

    Parameters
    ----------
    x : numbers, a list, an array, or a FloatArray (re-rounded into ``fmt``).
    fmt : the format every operation rounds to.
    rounding : rounding mode of every operation (and of this first conversion).
    rng : generator or seed for stochastic rounding (one stream, shared by results).
    accumulator : the adder of reductions (an Accumulator or a format name); default: ``fmt``
        with this rounding mode, sequential.
    random_bits : stochastic rounding with k random bits (see ``floatlab.round``).

    >>> array([1.0, 2.0**-11], "fp16").sum()       # 1 + 2**-11 is a tie: stays 1 in fp16
    FloatArray(float16, 1.0)
    """
    fmt = get_format(fmt)
    mode = _resolve_mode(rounding)
    rng = resolve_rng(rng, mode == "stochastic", mode)  # once, for every op of the array
    values = x.values if isinstance(x, FloatArray) else as_float_array(x)
    if accumulator is not None and not isinstance(accumulator, Accumulator):
        accumulator = Accumulator(accumulator)
    rounded = _round(values, fmt, mode, rng=rng, random_bits=random_bits)
    return FloatArray(rounded, fmt, mode, rng, accumulator, random_bits, owned=True)


def __getattr__(name: str) -> Any:
    """``from floatlab.arith import fma`` keeps working: fma moved to
    :mod:`floatlab.fused_multiply_add` (which imports this module, hence the lazy import)."""
    if name == "fma":
        from floatlab.fused_multiply_add import fma

        return fma
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# norm, inner, outer, prod, var, clip, where, median ... (floatlab.arith_numpy imports this)
from floatlab.arith_numpy import FUNCTIONS as _MORE_FUNCTIONS  # noqa: E402

_FUNCTIONS.update(_MORE_FUNCTIONS)
# every other NumPy function: kept format, plain result or refused; and the ndarray methods
from floatlab.arith_coverage import unhandled as _unhandled  # noqa: E402
