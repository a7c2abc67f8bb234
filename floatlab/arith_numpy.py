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

import math
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
        return math.prod(shape[i] for i in axes)

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


def _median_function(name: str):
    numpy_function = getattr(np, name)

    def handler(a, axis=None, **kwargs):
        """The middle value, or the two middle values' mean rounded once (correctly rounded
        for the formats of :func:`~floatlab.arith.correctly_rounded`, as ``+`` and ``/``
        are); nanmedian: of the values that are not NaN."""
        _no_extra_kwargs(name, kwargs)
        return a._new(numpy_function(a.values, axis=axis), a.fmt)

    return handler


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


def _np_diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    """``n`` rounds of ``x[1:] - x[:-1]`` along ``axis``, each difference rounded once (the
    ``prepend`` / ``append`` values converted to the format first, as operands are)."""
    lead = _lead(a, prepend, append)
    a = _fa(a, lead)
    if a.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional: pass a 1-D "
                         "FloatArray")
    axis = _check_axis(axis, a.ndim)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"np.diff's n is the number of differences, an int: got {n!r}")
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n!r}: pass n=1, 2, ...")
    parts = []
    for extra in (prepend, a, append):
        if extra is np._NoValue:
            continue
        extra = _fa(extra, a)
        if extra.ndim == 0:
            shape = list(a.shape)
            shape[axis] = 1
            extra = extra._new(np.broadcast_to(extra.values, shape), extra.fmt, exact=True)
        parts.append(extra)
    if len(parts) > 1:
        a = np.concatenate(parts, axis=axis)
    for _ in range(n):
        a = np.take(a, range(1, a.shape[axis]), axis) - np.take(a, range(a.shape[axis] - 1), axis)
    return a


def _np_ediff1d(ary, to_end=None, to_begin=None):
    """np.diff of the flattened array, ``to_begin`` / ``to_end`` (converted) around it."""
    lead = _lead(ary, to_end, to_begin)
    parts = [_fa(np.ravel(np.asarray(v)), lead) for v in (to_begin,) if v is not None]
    parts.append(_np_diff(_fa(ary, lead).ravel()))
    parts += [_fa(np.ravel(np.asarray(v)), lead) for v in (to_end,) if v is not None]
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def _np_vdot(a, b):
    """The flattened arrays' inner product through the accumulator (real: no conjugate)."""
    lead = _lead(a, b)
    a, b = _fa(a, lead), _fa(b, lead)
    if a.size != b.size:
        raise ValueError(f"vdot: vectors have different lengths ({a.size} and {b.size}): "
                         "pass arrays of the same size")
    return _dot(a.ravel(), b.ravel())


def _np_convolve(a, v, mode="full", late=False):
    """Each output ``sum_k a[n - k] * v[k]`` one dot product through the accumulator (k
    ascending); the terms past the ends are exact zeros, which change no nonzero sum.
    ``late``: mode 'same' centred as np.correlate centres it for a v longer than a."""
    lead = _lead(a, v)
    a, v = (_fa(x, lead).reshape(-1) if np.ndim(x) == 0 else _fa(x, lead) for x in (a, v))
    plain = np.convolve(np.zeros(a.shape), np.zeros(v.shape), mode)  # NumPy's checks, length
    m, k = a.size, v.size
    padded = np.concatenate([np.zeros(k - 1), a.values, np.zeros(k - 1)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, k)[:, ::-1]  # a[n - k]
    short = min(m, k) - 1
    start = {"full": 0, "same": short - short // 2 if late else short // 2, "valid": short}[mode]
    windows = windows[start:start + plain.size]
    from floatlab.accumulate import matmul

    return matmul(a._new(windows, a.fmt, exact=True), v).reshape(plain.shape)


def _np_correlate(a, v, mode="valid"):
    """``sum_n a[n + k] * v[n]`` through the accumulator: np.convolve with v reversed."""
    lead = _lead(a, v)
    a, v = _fa(a, lead), _fa(v, lead)
    if v.ndim == 1:
        v = v[::-1]
    return _np_convolve(a, v, mode, late=v.size > a.size)


def _nan_filled(a: FloatArray, fill: float) -> FloatArray:
    """``a`` with its NaNs replaced by ``fill`` (NumPy's nansum / nanprod rule)."""
    return a._new(np.where(np.isnan(a.values), fill, a.values), a.fmt, exact=True)


def _np_nansum(a, axis=None, **kwargs):
    _no_extra_kwargs("nansum", kwargs)
    return _sum(_nan_filled(a, 0.0), axis=axis)


def _np_nancumsum(a, axis=None, **kwargs):
    _no_extra_kwargs("nancumsum", kwargs)
    from floatlab.accumulate import cumsum

    return cumsum(_nan_filled(a, 0.0), axis=axis)


def _np_nanprod(a, axis=None, **kwargs):
    _no_extra_kwargs("nanprod", kwargs)
    return _products(_nan_filled(a, 1.0), axis, keep=False)


def _np_nancumprod(a, axis=None, **kwargs):
    _no_extra_kwargs("nancumprod", kwargs)
    return _products(_nan_filled(a, 1.0), axis, keep=True)


def _np_nanmean(a, axis=None, **kwargs):
    """nansum through the accumulator divided by the count of non-NaN values, rounded once
    (NaN, with NumPy's RuntimeWarning, where there is none)."""
    _no_extra_kwargs("nanmean", kwargs)
    total = _sum(_nan_filled(a, 0.0), axis=axis)
    count = np.sum(~np.isnan(a.values), axis=None if axis is None else _check_axis(axis, a.ndim))
    if np.any(count == 0):
        import warnings

        warnings.warn("Mean of empty slice", RuntimeWarning, stacklevel=3)
    with np.errstate(divide="ignore", invalid="ignore"):
        return a._new(np.asarray(total.values) / count, a.fmt)


def _np_nanvar(a, axis=None, ddof=0, **kwargs):
    """np.var's steps on the values that are not NaN (NumPy's nanvar): their nanmean, the
    rounded deviations and squares, summed through the accumulator with NaNs as +0, one
    division by (count - ddof)."""
    _no_extra_kwargs("nanvar", kwargs)
    mean = _np_nanmean(a, axis=axis)
    if axis is not None:
        mean = np.expand_dims(mean, _check_axis(axis, a.ndim))
    d = a - mean
    total = _sum(_nan_filled(d * d, 0.0), axis=axis)
    count = np.sum(~np.isnan(a.values), axis=None if axis is None else _check_axis(axis, a.ndim))
    with np.errstate(divide="ignore", invalid="ignore"):  # count - ddof <= 0: inf / NaN
        return a._new(np.asarray(total.values) / np.maximum(count - ddof, 0), a.fmt)


def _np_nanstd(a, axis=None, ddof=0, **kwargs):
    return np.sqrt(_np_nanvar(a, axis=axis, ddof=ddof, **kwargs))


def _np_cumulative(name: str):
    def handler(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        _no_out(name, out, dtype)
        if x.ndim == 0:
            raise ValueError(f"np.{name} of a 0-d FloatArray: it needs an array of at least "
                             "one dimension (x.reshape(1))")
        if axis is None:
            if x.ndim != 1:
                raise ValueError(f"np.{name} of a {x.ndim}-D FloatArray needs axis=: pass "
                                 "the axis to run along")
            axis = 0
        axis = _check_axis(axis, x.ndim)
        if name == "cumulative_sum":
            from floatlab.accumulate import cumsum

            running = cumsum(x, axis=axis)
        else:
            running = _products(x, axis, keep=True)
        if include_initial is not True:
            return running
        shape = list(x.shape)
        shape[axis] = 1
        first = x._new(np.full(shape, 0.0 if name == "cumulative_sum" else 1.0), x.fmt)
        return np.concatenate([first, running], axis=axis)

    return handler


def _np_nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NaN to ``nan``, +-inf to the format's largest finite values (NumPy: the dtype's), or
    to ``posinf`` / ``neginf``; the replacements converted to the format."""
    big = x.fmt.max
    values = x.values
    filled = np.where(np.isnan(values), x._weak(nan, x.fmt), values)
    filled = np.where(values == np.inf, big if posinf is None else x._weak(posinf, x.fmt),
                      filled)
    low = -big if x.fmt.signed else x.fmt.min
    filled = np.where(values == -np.inf, low if neginf is None else x._weak(neginf, x.fmt),
                      filled)
    return x._new(filled, x.fmt, exact=True)


def _np_fix(x, out=None):
    _no_out("fix", out)
    return np.trunc(x)  # an integer of the format's range is a value of it: exact


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
    np.around: _np_round, np.where: _np_where, np.ptp: _np_ptp,
    np.median: _median_function("median"),
    np.percentile: _quantile_function("percentile"), np.quantile: _quantile_function("quantile"),
    np.einsum: _np_einsum, np.linalg.norm: _np_norm,
    np.diff: _np_diff, np.ediff1d: _np_ediff1d, np.vdot: _np_vdot, np.convolve: _np_convolve,
    np.correlate: _np_correlate, np.nansum: _np_nansum, np.nancumsum: _np_nancumsum,
    np.nanprod: _np_nanprod, np.nancumprod: _np_nancumprod, np.nanmean: _np_nanmean,
    np.nanmedian: _median_function("nanmedian"), np.nanvar: _np_nanvar, np.nanstd: _np_nanstd,
    np.nanpercentile: _quantile_function("nanpercentile"),
    np.nanquantile: _quantile_function("nanquantile"),
    np.cumulative_sum: _np_cumulative("cumulative_sum"),
    np.cumulative_prod: _np_cumulative("cumulative_prod"),
    np.nan_to_num: _np_nan_to_num, np.fix: _np_fix,
}
