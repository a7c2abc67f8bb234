"""Arrays from other libraries: torch tensors, JAX arrays, anything with ``__dlpack__`` or
``__array__``.

Input: such objects become numpy arrays (zero-copy through DLPack where possible; tensors on
another device, or of a dtype numpy lacks such as torch.bfloat16, are copied to the host and
widened exactly to float32 first). Output: when the input's library offers ``from_numpy`` at
its top level (torch does; JAX and CuPy do not), :func:`floatlab.round`, ``encode``,
``decode``, ``ulp`` and ``nextafter`` give their result back through it, moved to the input's
device (a round trip through host memory). Everything else gets numpy arrays.

Nothing here imports torch or JAX: a tensor is recognised by what it offers (duck typing), so
floatlab works, and is tested, without them.

>>> import numpy as np
>>> class Wrapped:                      # any object with __array__ works as input
...     def __array__(self, dtype=None, copy=None):
...         return np.array([1.0, 1 / 3])
>>> as_numpy(Wrapped())
array([1.        , 0.33333333])
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["as_numpy", "caller_type", "is_foreign_array"]

_NATIVE = (np.ndarray, np.generic, int, float, list, tuple, str, bytes, type(None))


def is_foreign_array(x: Any) -> bool:
    """Whether ``x`` is another library's array (has ``__dlpack__`` / ``__array__``)."""
    if isinstance(x, _NATIVE):
        return False
    return hasattr(x, "__dlpack__") or hasattr(x, "__array__")


def as_numpy(x: Any) -> Any:
    """``x`` as a numpy array if it is another library's array, else ``x`` unchanged."""
    if not is_foreign_array(x):
        return x
    if callable(getattr(x, "detach", None)):  # torch: no autograd graph through numpy
        x = x.detach()
    if hasattr(x, "__dlpack__"):
        try:
            return np.from_dlpack(x)  # zero-copy for host memory and dtypes numpy has
        except (BufferError, TypeError, ValueError, RuntimeError, NotImplementedError):
            pass
        host = x.cpu() if callable(getattr(x, "cpu", None)) else x
        is_float = getattr(host, "is_floating_point", None)
        if callable(is_float) and is_float() and callable(getattr(host, "float", None)):
            try:  # bfloat16 / float8 tensors: widen exactly to float32 (numpy has no bf16)
                return np.from_dlpack(host.float() if _lacks_numpy_dtype(host) else host)
            except (BufferError, TypeError, ValueError, RuntimeError, NotImplementedError):
                pass
        if host is not x and hasattr(host, "__array__"):
            return np.asarray(host)
    return np.asarray(x)  # __array__: JAX hands over ml_dtypes arrays for bfloat16


def _lacks_numpy_dtype(tensor: Any) -> bool:
    name = str(getattr(tensor, "dtype", "")).rpartition(".")[2]
    return name not in ("float16", "float32", "float64", "half", "float", "double")


def caller_type(x: Any) -> Callable[[Any], Any]:
    """A function that turns a numpy result into the type of the input ``x`` (identity unless
    ``x`` comes from a library with a top-level ``from_numpy``, such as torch)."""
    if not is_foreign_array(x):
        return _same
    library = sys.modules.get(type(x).__module__.partition(".")[0])
    from_numpy = getattr(library, "from_numpy", None)
    if not callable(from_numpy):
        return _same
    device = getattr(x, "device", None)

    def back(result: Any) -> Any:
        if not isinstance(result, np.ndarray) or result.dtype.kind not in "fiub":
            return result
        if not result.flags.c_contiguous:  # (np.ascontiguousarray would make 0-d into 1-d)
            result = result.copy(order="C")
        out = from_numpy(result)
        if device is not None and str(device) != "cpu" and callable(getattr(out, "to", None)):
            out = out.to(device)
        return out

    return back


def _same(result: Any) -> Any:
    return result
