"""What every NumPy array function does to a FloatArray, and FloatArray's ndarray methods.

Each public function of ``np`` and ``np.linalg`` that NumPy dispatches to
``__array_function__`` is in exactly one class (a test enumerates them all):

* emulated: :mod:`floatlab.arith_numpy` and ``arith._FUNCTIONS`` (every step rounded to the
  format, every sum through the accumulator);
* moving values: ``arith._SHAPE_FUNCTIONS`` and :data:`SELECTIONS` below (sort, unique, take,
  max, pad with a constant ...): their results are values of the operands, so they keep the
  (promoted) format; plain numbers they bring in (a fill value, an appended list) are
  converted to it as operands are (round to nearest even);
* plain results: :data:`PLAIN` (booleans, indices, counts, shapes, text, files): no float
  arithmetic, computed on the exact values;
* writing into their first argument (:data:`MUTATORS`): refused for a FloatArray target
  (FloatArrays are changed only by ``x[i] = v``);
* everything else is refused with a TypeError naming a spelling that is emulated
  (:data:`REFUSED`; a function NumPy adds later is refused too, never computed in float64).

>>> import numpy as np, floatlab
>>> x = floatlab.array([3.0, 1.0, 2.0], "fp16")
>>> np.max(x), np.sort(x), np.argmax(x)
(FloatArray(float16, 3.0), FloatArray(float16, [1.0, 2.0, 3.0]), np.int64(0))
>>> x.var(), x.max()
(FloatArray(float16, 0.66650390625), FloatArray(float16, 3.0))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from floatlab.arith import (
    _FUNCTIONS,
    FloatArray,
    _leaves,
    _matmul,
    _plain,
    _product_ufunc,
    result_format,
)
from floatlab.arith_numpy import _np_outer, _np_tensordot, _np_trace, _refuse
from floatlab.rounding import round as _round

SELECTIONS = frozenset({
    np.max, np.min, np.amax, np.amin, np.nanmax, np.nanmin, np.partition, np.unique, np.unique_all,
    np.unique_counts, np.unique_inverse, np.unique_values, np.intersect1d, np.union1d,
    np.setdiff1d, np.setxor1d, np.append, np.insert, np.delete, np.extract, np.compress,
    np.choose, np.select, np.take_along_axis, np.diag, np.diagflat, np.diagonal, np.tril,
    np.triu, np.fliplr, np.flipud, np.rot90, np.tile, np.repeat, np.resize, np.trim_zeros,
    np.atleast_3d, np.column_stack, np.dstack, np.block, np.split, np.array_split,
    np.hsplit, np.vsplit, np.dsplit, np.unstack, np.rollaxis, np.matrix_transpose,
    np.broadcast_arrays, np.meshgrid, np.real, np.imag, np.real_if_close, np.zeros_like,
    np.ones_like, np.full_like, np.linalg.diagonal, np.linalg.matrix_transpose, np.pad,
})
"""Functions whose float results are values of their operands (or of numbers they are given,
converted to the format): they keep the format."""

_PAD_SELECTING = ("constant", "edge", "wrap", "reflect", "symmetric")
# (position, name) of the argument whose numbers a selection puts into its result
_BROUGHT_IN = {np.append: (1, "values"), np.insert: (2, "values"), np.full_like: (1, "fill_value"),
               np.pad: (None, "constant_values"), np.select: (2, "default")}

PLAIN = frozenset({
    np.all, np.any, np.allclose, np.isclose, np.array_equal, np.array_equiv, np.argmax,
    np.argmin, np.nanargmax, np.nanargmin, np.argsort, np.argpartition, np.argwhere,
    np.nonzero, np.flatnonzero, np.count_nonzero, np.searchsorted, np.digitize, np.lexsort,
    np.isin, np.isreal, np.iscomplex, np.isrealobj, np.iscomplexobj, np.isneginf,
    np.isposinf, np.shape, np.ndim, np.size, np.result_type, np.can_cast, np.min_scalar_type,
    np.common_type, np.may_share_memory, np.shares_memory, np.array2string, np.array_repr,
    np.array_str, np.save, np.savetxt, np.savez, np.savez_compressed, np.packbits,
    np.unpackbits, np.ravel_multi_index, np.unravel_index, np.diag_indices_from,
    np.tril_indices_from, np.triu_indices_from, np.ix_, np.busday_count, np.busday_offset,
    np.is_busday, np.datetime_as_string, np.einsum_path, np.astype,
})
"""Functions with no float arithmetic in their result (booleans, indices, text, files, and
np.astype's cast to a dtype the caller names): computed on the exact values."""

MUTATORS = frozenset({np.put, np.place, np.putmask, np.copyto, np.fill_diagonal,
                      np.put_along_axis})

_FACTORISE = ("floatlab emulates no factorisation or solver: round a float64 result back "
              "with floatlab.array(result, x.fmt) (one rounding, not the format's arithmetic)")
_OPERATORS = "write it with the operators (+ - * /, @, .sum()), each step rounded once"
REFUSED = {
    np.cov: "write it with the operators: d = x - x.mean(axis=1)[:, None]; "
            "d @ d.T / (n - 1), each step rounded once and the sums through the accumulator",
    np.corrcoef: "write it from np.var / np.std and @ (see np.cov's alternative)",
    np.cross: "write the components with * and - (a[1] * b[2] - a[2] * b[1] ...), each "
              "rounded once",
    np.linalg.cross: "write the components with * and - (a[1] * b[2] - a[2] * b[1] ...)",
    np.gradient: "use (x[2:] - x[:-2]) / 2 inside and np.diff(x) at the ends, each step rounded",
    np.interp: "round its float64 result back with floatlab.array(result, x.fmt) (one "
               "rounding)",
    np.polyval: "use Horner's rule with the operators: r = p[0]; then r = r * x + c for each "
                "later coefficient c",
    np.trapezoid: "use (np.diff(x) * (y[1:] + y[:-1]) / 2).sum()",
    np.bincount: "counts take integers and its weights would be summed in float64: group the "
                 "values and sum them with floatlab.sum",
    np.linalg.vector_norm: "use np.linalg.norm(x, ord, axis) (emulated)",
    np.linalg.matrix_norm: "use np.linalg.norm(x, ord) (emulated)",
    np.linalg.matrix_power: "multiply with @ (each product through the accumulator)",
    np.linalg.multi_dot: "chain @ in the order you choose (the order changes the roundings)",
    np.empty_like: "use np.zeros_like(x) (a FloatArray of the format)",
    **{f: _OPERATORS for f in (
        np.poly, np.polyadd, np.polysub, np.polymul, np.polydiv, np.polyder, np.polyint,
        np.polyfit, np.roots, np.vander, np.sinc, np.i0, np.unwrap, np.angle, np.sort_complex,
        np.linspace, np.logspace, np.geomspace, np.histogram, np.histogram2d, np.histogramdd,
        np.histogram_bin_edges, np.apply_along_axis, np.apply_over_axes, np.piecewise)},
    **{f: _FACTORISE for f in (
        np.linalg.solve, np.linalg.inv, np.linalg.det, np.linalg.slogdet, np.linalg.cholesky,
        np.linalg.eig, np.linalg.eigh, np.linalg.eigvals, np.linalg.eigvalsh, np.linalg.svd,
        np.linalg.svdvals, np.linalg.qr, np.linalg.lstsq, np.linalg.pinv, np.linalg.cond,
        np.linalg.matrix_rank, np.linalg.tensorinv, np.linalg.tensorsolve)},
}
"""Functions refused on a FloatArray, with the spelling to use instead."""


def _select(func, args: tuple, kwargs: dict) -> Any:
    """Run a selecting function on the exact values; its float results take the format (the
    rounding to nearest even is the identity on the operands' values: a cast of plain ones)."""
    arrays = _leaves(args) + _leaves(list(kwargs.values()))
    lead, fmt = arrays[0], result_format(*arrays)
    if kwargs.get("out") is not None or kwargs.get("dtype") is not None:
        raise TypeError(f"np.{func.__name__} on a FloatArray takes no out= / dtype=: the "
                        "result is a new FloatArray of the operands' format; convert it with "
                        ".astype(fmt)")
    if func is np.pad and kwargs.get("mode", args[2] if len(args) > 2 else "constant") \
            not in _PAD_SELECTING:
        _refuse("pad with this mode", "use a mode that copies values (constant, edge, wrap, "
                "reflect, symmetric)")
    if func in _BROUGHT_IN:  # numbers that enter the result: converted (bools, text refused)
        position, name = _BROUGHT_IN[func]
        if name in kwargs:
            kwargs = {**kwargs, name: lead._weak(kwargs[name], fmt)}
        elif position is not None and len(args) > position:
            args = (*args[:position], lead._weak(args[position], fmt), *args[position + 1:])

    def wrap(out):
        if isinstance(out, (list, tuple)):
            parts = [wrap(o) for o in out]
            return type(out)(*parts) if hasattr(out, "_fields") else type(out)(parts)
        if not isinstance(out, (np.ndarray, np.generic, float)) or \
                np.asarray(out).dtype.kind != "f":
            return out
        return lead._new(_round(np.asarray(out, dtype=np.float64), fmt), fmt, exact=True)

    return wrap(func(*_plain(args), **_plain(kwargs)))


def unhandled(func, args: tuple, kwargs: dict) -> Any:
    """``__array_function__`` for the functions neither emulated nor a shape function."""
    if func in SELECTIONS:
        return _select(func, args, kwargs)
    if func in MUTATORS and isinstance(args[0] if args else None, FloatArray):
        raise TypeError(f"np.{func.__name__} writes into its first argument, and a FloatArray "
                        "is not modified in place: assign x[index] = values (rounded into the "
                        "format), or build a new FloatArray")
    if func in PLAIN or func in MUTATORS:
        return func(*_plain(args), **_plain(kwargs))
    name = func.__name__ if func.__module__ in ("numpy", None) else (
        f"{func.__module__.removeprefix('numpy.')}.{func.__name__}")
    _refuse(name, REFUSED.get(func, "compute it with FloatArray operations (emulated)"))


def _linalg_outer(x1, x2, /):
    if np.ndim(x1) != 1 or np.ndim(x2) != 1:
        raise ValueError("np.linalg.outer takes 1-D vectors: pass x.ravel(), or use np.outer")
    return _np_outer(x1, x2)


def _linalg_vecdot(x1, x2, /, *, axis=-1):
    x1, x2 = (np.moveaxis(x, axis, -1) if np.ndim(x) else x for x in (x1, x2))
    return _product_ufunc(np.vecdot, (x1, x2))


def _linalg_trace(x, /, *, offset=0, dtype=None):
    return _np_trace(x, offset, -2, -1, dtype)


_FUNCTIONS.update({
    np.linalg.matmul: lambda x1, x2, /: _matmul(x1, x2),
    np.linalg.tensordot: lambda x1, x2, /, *, axes=2: _np_tensordot(x1, x2, axes),
    np.linalg.outer: _linalg_outer, np.linalg.vecdot: _linalg_vecdot,
    np.linalg.trace: _linalg_trace,
})


# --------------------------------------------------------------------------- methods

def _method(func, name: str, words: str):
    def method(self, *args, **kwargs):
        return func(self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``np.{func.__name__}(x, ...)``: {words}."
    return method


_METHODS = {
    "var": (np.var, "variance, every step rounded, sums through the accumulator"),
    "std": (np.std, "square root of the variance, rounded once"),
    "prod": (np.prod, "products left to right, each rounded"),
    "cumprod": (np.cumprod, "running products, each rounded"),
    "max": (np.max, "the largest value (exact)"), "min": (np.min, "the smallest value (exact)"),
    "argmax": (np.argmax, "index of the largest value"),
    "argmin": (np.argmin, "index of the smallest value"),
    "clip": (np.clip, "values clipped to bounds converted to the format (exact)"),
    "round": (np.round, "rounded to integers (exact)"),
    "trace": (np.trace, "the diagonal's sum through the accumulator"),
    "all": (np.all, "a plain bool"), "any": (np.any, "a plain bool"),
    "squeeze": (np.squeeze, "length-1 axes removed"),
    "swapaxes": (np.swapaxes, "two axes exchanged"),
}
for _name, (_func, _words) in _METHODS.items():
    setattr(FloatArray, _name, _method(_func, _name, _words))


def _flatten(self: FloatArray) -> FloatArray:
    """A 1-D FloatArray of the values (a new array, as every FloatArray result is)."""
    return self.ravel()


def _item(self: FloatArray, *args: Any) -> float:
    """One value as a Python float (``ndarray.item``)."""
    return self.values.item(*args)


def _sort(self: FloatArray, *args: Any, **kwargs: Any) -> None:
    raise TypeError("FloatArray.sort() would sort in place (ndarray.sort does), and a "
                    "FloatArray is not modified in place: use x = np.sort(x) (a new FloatArray)")


def _format(self: FloatArray, spec: str) -> str:
    """``f"{x.sum():.3f}"``: a format spec applies to the values, as for a 0-d ndarray."""
    return format(self.values, spec) if spec else str(self)


FloatArray.flatten, FloatArray.item, FloatArray.sort = _flatten, _item, _sort
FloatArray.__format__ = _format
