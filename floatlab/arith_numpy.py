"""NumPy functions on FloatArrays beyond the ufuncs: emulated, or refused with a way that is.

Each function here either computes the emulated result -- every arithmetic operation rounded
once to the format (as the ufuncs are), every sum through the array's Accumulator -- or
refuses with a TypeError naming a supported spelling. Selections (clip, where, max, sort,
median of an odd count, percentile's selecting methods) are exact.

>>> import numpy as np, floatlab
>>> x = floatlab.array([1.0, 2.0, 3.0], "fp16")
>>> np.inner(x, x), np.trace(np.outer(x, x))
(FloatArray(float16, 14.0), FloatArray(float16, 14.0))
>>> np.cumprod(floatlab.array([3.0, 3.0, 3.0], "e4m3fn"))  # 27 is a tie in e4m3fn: to 28
FloatArray(float8_e4m3fn, [3.0, 9.0, 28.0])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from floatlab.accumulate import _check_axis
from floatlab.accumulate import dot as _dot
from floatlab.accumulate import sum as _sum
from floatlab.arith import FloatArray, _no_extra_kwargs, result_format


def _lead(*xs: Any) -> FloatArray:
    return next(x for x in xs if isinstance(x, FloatArray))


def _fa(x: Any, like: FloatArray) -> FloatArray:
    """``x`` as a FloatArray (a plain operand converted to ``like``'s format, as ufuncs do)."""
    return x if isinstance(x, FloatArray) else like._new(like._weak(x, like.fmt), like.fmt,
                                                         exact=True)


def _refuse(name: str, instead: str) -> None:
    raise TypeError(f"np.{name} on a FloatArray is not emulated (its arithmetic would run in "
                    f"float64, unrounded): {instead}, or call it on np.asarray(x) to compute on "
                    "the exact float64 values")


def _np_inner(a, b):
    """Sums over the last axes of both: np.dot with b's last two axes swapped."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return np.multiply(a, b)
    lead = _lead(a, b)
    b = _fa(b, lead)
    return _dot(a, b if b.ndim == 1 else np.swapaxes(b, -1, -2))


def _np_outer(a, b, out=None):
    _no_out("outer", out)
    lead = _lead(a, b)
    return _fa(a, lead).ravel()[:, None] * _fa(b, lead).ravel()[None, :]


def _np_kron(a, b):
    lead = _lead(a, b)
    a, b = _fa(a, lead), _fa(b, lead)
    fmt = result_format(a, b)
    return lead._new(np.kron(a.values, b.values), fmt)  # each element one product, rounded


def _np_tensordot(a, b, axes=2):
    """NumPy's rule (move the summed axes together, flatten them): one 2-D product."""
    lead = _lead(a, b)
    a, b = _fa(a, lead), _fa(b, lead)
    plain = np.tensordot(np.zeros(a.shape), np.zeros(b.shape), axes)  # NumPy's checks, shape
    if isinstance(axes, (int, np.integer)):
        axes_a, axes_b = list(range(a.ndim - axes, a.ndim)), list(range(axes))
    else:
        axes_a, axes_b = (list(np.atleast_1d(ax)) for ax in axes)
    axes_a = [int(ax) % a.ndim for ax in axes_a]
    axes_b = [int(ax) % b.ndim for ax in axes_b]
    keep_a = [i for i in range(a.ndim) if i not in axes_a]
    keep_b = [i for i in range(b.ndim) if i not in axes_b]
    def size(shape, axes):
        return int(np.prod([shape[i] for i in axes], dtype=np.int64))

    k = size(a.shape, axes_a)  # (sizes spelled out: -1 is ambiguous in an empty reshape)
    a2 = a.transpose(keep_a + axes_a).reshape(size(a.shape, keep_a), k)
    b2 = b.transpose(axes_b + keep_b).reshape(k, size(b.shape, keep_b))
    from floatlab.accumulate import matmul

    return matmul(a2, b2).reshape(plain.shape)


def _np_trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    _no_out("trace", out, dtype)
    diagonal = a._new(np.diagonal(a.values, offset, axis1, axis2), a.fmt, exact=True)
    return _sum(diagonal, axis=-1)


def _products(x: FloatArray, axis: Any, keep: bool) -> FloatArray:
    """Left-to-right products along ``axis``, each rounded once (a multiplier: no
    accumulator); ``keep``: every running product (cumprod)."""
    if axis is None:
        x, axis = x.ravel(), 0
    axis = _check_axis(axis, x.ndim)
    moved = x.values if x.ndim == 0 else np.moveaxis(x.values, axis, 0)
    total = x._new(np.ones(moved.shape[1:]), x.fmt, exact=True)
    running = []
    for row in moved:
        total = total * x._new(row, x.fmt, exact=True)
        running.append(total.values)
    if not keep:
        return total
    out = np.stack(running) if running else np.ones(moved.shape)
    return x._new(np.moveaxis(out, 0, axis), x.fmt, exact=True)


def _np_prod(a, axis=None, **kwargs):
    _no_extra_kwargs("prod", kwargs)
    return _products(a, axis, keep=False)


def _np_cumprod(a, axis=None, **kwargs):
    _no_extra_kwargs("cumprod", kwargs)
    return _products(a, axis, keep=True)


def _np_var(a, axis=None, ddof=0, **kwargs):
    """Two passes, every step the array's: the mean, the rounded deviations, their squares
    summed through the accumulator, one division by (n - ddof)."""
    _no_extra_kwargs("var", kwargs)
    n = a.size if axis is None else a.shape[_check_axis(axis, a.ndim)]
    mean = a.mean(axis=axis)
    if axis is not None:
        mean = np.expand_dims(mean, _check_axis(axis, a.ndim))
    d = a - mean
    total = _sum(d * d, axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):  # n - ddof <= 0: inf / NaN, as NumPy
        return a._new(np.asarray(total.values) / max(n - ddof, 0), a.fmt)


def _np_std(a, axis=None, ddof=0, **kwargs):
    return np.sqrt(_np_var(a, axis=axis, ddof=ddof, **kwargs))


def _np_average(a, axis=None, weights=None, returned=False, keepdims=np._NoValue):
    if returned or keepdims not in (False, np._NoValue):
        _refuse("average with returned= / keepdims=", "use np.average(x, axis, weights)")
    a = _fa(a, _lead(a, weights))
    if weights is None:
        return a.mean(axis=axis)
    w = _fa(weights, a)
    if w.shape != a.shape:
        if axis is None or w.ndim != 1 or w.shape[0] != a.shape[_check_axis(axis, a.ndim)]:
            raise TypeError("np.average(x, weights=w) on a FloatArray: w must have x's shape, or "
                            "be 1-D along an int axis (NumPy's rule)")
        shape = [1] * a.ndim
        shape[_check_axis(axis, a.ndim)] = -1
        w = w.reshape(shape)
        w = w._new(np.broadcast_to(w.values, a.shape), w.fmt, exact=True)
    scale = _sum(w, axis=axis)
    if np.any(np.asarray(scale.values) == 0):
        raise ZeroDivisionError("Weights sum to zero, can't be normalized")
    return _sum(a * w, axis=axis) / scale


def _np_clip(a, a_min=None, a_max=None, out=None, **kwargs):
    _no_out("clip", out)
    lo = kwargs.pop("min", a_min)
    hi = kwargs.pop("max", a_max)
    _no_extra_kwargs("clip", kwargs)
    result = a
    if lo is not None:
        result = np.maximum(result, lo)   # bounds converted to the format, then exact
    if hi is not None:
        result = np.minimum(result, hi)
    return result


def _np_round(a, decimals=0, out=None):
    _no_out("round", out)
    if decimals == 0:
        return np.rint(a)  # an integer of the format's range is a value of it: exact
    _refuse(f"round(x, decimals={decimals})", "round to the format's grid with .astype(fmt), "
            "or use np.round(x) (decimals=0, exact)")


def _np_where(condition, *xy):
    if len(xy) != 2 or not any(isinstance(v, FloatArray) for v in xy):
        return np.where(np.asarray(condition), *xy)  # indices, or plain choices
    lead = _lead(*xy)
    fmt = result_format(*(x for x in xy if isinstance(x, FloatArray)))
    x, y = (lead._weak(v, fmt) for v in xy)
    return lead._new(np.where(np.asarray(condition), x, y), fmt, exact=True)


def _np_ptp(a, axis=None, **kwargs):
    _no_extra_kwargs("ptp", kwargs)
    return a._new(np.max(a.values, axis=axis), a.fmt, exact=True) - a._new(
        np.min(a.values, axis=axis), a.fmt, exact=True)


def _np_median(a, axis=None, **kwargs):
    """The middle value, or the two middle values' mean rounded once (correctly rounded for
    the formats of :func:`~floatlab.arith.correctly_rounded`, as ``+`` and ``/`` are)."""
    _no_extra_kwargs("median", kwargs)
    return a._new(np.median(a.values, axis=axis), a.fmt)


_SELECTING = ("inverted_cdf", "closest_observation", "lower", "higher", "nearest")


def _quantile_function(name: str):
    numpy_function = getattr(np, name)

    def handler(a, q, axis=None, out=None, overwrite_input=False, method="linear", **kwargs):
        _no_out(name, out)
        _no_extra_kwargs(name, kwargs)
        if method not in _SELECTING:
            _refuse(f"{name}(x, method={method!r})", "use a method that selects a value "
                    "(method='lower', 'higher', 'nearest', 'inverted_cdf'), which is exact")
        return a._new(numpy_function(a.values, q, axis=axis, method=method), a.fmt, exact=True)

    return handler


_VECTOR_ORDS = (None, 2, 1, np.inf, -np.inf)
_MATRIX_ORDS = (None, "fro", 1, -1, np.inf, -np.inf)


def _np_norm(x, ord=None, axis=None, keepdims=False):  # noqa: A002 - numpy's name
    """Vector norms 2 / 1 / +-inf and matrix norms 'fro' / +-1 / +-inf: sums through the
    accumulator, square roots and squares rounded once, maxima and minima exact."""
    if not isinstance(x, FloatArray):
        return np.linalg.norm(np.asarray(x), ord=ord, axis=axis, keepdims=keepdims)
    if keepdims:
        raise TypeError("np.linalg.norm on a FloatArray takes no keepdims: the result has the "
                        "reduced shape; add the axis back with np.expand_dims")
    vector = axis is not None or x.ndim == 1
    if isinstance(axis, tuple) or (not vector and x.ndim != 2) or (
            ord not in (_VECTOR_ORDS if vector else _MATRIX_ORDS)):
        if ord is None and axis is None:
            return np.sqrt(_sum(x * x))
        # (NumPy: ord=2 of a matrix is its largest singular value, and ord=2 of N-D or 'fro'
        # of a vector an error; the sum of squares gave the Frobenius norm for each)
        raise TypeError(f"np.linalg.norm(x, ord={ord!r}) of a {x.ndim}-D FloatArray with "
                        f"axis={axis!r} is not emulated (NumPy's ord=2 of a matrix is its "
                        "largest singular value): use ord=None for the square root of the sum "
                        "of squares, ord=1 / np.inf / -np.inf, or ord=2 with an int axis for "
                        "vector norms")
    if ord in (None, 2, "fro"):
        return np.sqrt(_sum(x * x, axis=axis))
    if vector:
        if ord == 1:
            return _sum(np.abs(x), axis=axis)
        pick = np.max if ord > 0 else np.min
        return x._new(pick(np.abs(x.values), axis=axis), x.fmt, exact=True)
    sums = _sum(np.abs(x), axis=0 if abs(ord) == 1 else 1)
    pick = np.max if ord > 0 else np.min
    return x._new(pick(sums.values), x.fmt, exact=True)


def _np_einsum(*args, **kwargs):
    _refuse("einsum", "write it with @ / floatlab.matmul, np.tensordot, np.inner, np.outer or "
            ".sum(axis), which run through the accumulator")


def _no_out(name: str, out: Any, dtype: Any = None) -> None:
    if out is not None or dtype is not None:
        raise TypeError(f"np.{name} on a FloatArray takes no out= / dtype=: the result is a new "
                        "FloatArray of the operands' format; convert it with .astype(fmt)")


FUNCTIONS = {
    np.inner: _np_inner, np.outer: _np_outer, np.kron: _np_kron, np.tensordot: _np_tensordot,
    np.trace: _np_trace, np.prod: _np_prod, np.cumprod: _np_cumprod, np.var: _np_var,
    np.std: _np_std, np.average: _np_average, np.clip: _np_clip, np.round: _np_round,
    np.around: _np_round, np.where: _np_where, np.ptp: _np_ptp, np.median: _np_median,
    np.percentile: _quantile_function("percentile"), np.quantile: _quantile_function("quantile"),
    np.einsum: _np_einsum, np.linalg.norm: _np_norm,
}
