"""Per-step counters filled by the rounding hook: what the formats did to the numbers.

The hook (:func:`floatlab.mixed.scope.quantize`) calls :meth:`StepStats.observe` on every value it
rounds while a :class:`StepStats` is active, so the statistics cover exactly what the emulation
touched. Counting is vectorised (a few passes of NumPy reductions per op result).

>>> import numpy as np
>>> from floatlab import get_format
>>> s = StepStats()
>>> s.observe(np.array([1e-30, 0.0, 1.0], np.float32), np.array([0.0, 0.0, 1.0], np.float32),
...           get_format("fp16"), "activations")
>>> s.values, s.flushed, s.subnormal
(3, 1, 0)
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from floatlab._validate import as_float_array
from floatlab.formats import Format, get_format
from floatlab.mixed.checks import whole
from floatlab.mixed.policy import nbytes

__all__ = ["StepStats", "log2_histogram"]


@dataclass
class StepStats:
    """Counters for one training step.

    values : how many values the hook produced (forward, backward and optimizer).
    subnormal : how many of them lie in their format's subnormal range (0 < |v| < smallest normal).
    flushed : how many were non-zero before rounding and zero after.
    overflow : how many were finite before rounding and inf / NaN after.
    nonfinite_results : how many op results held at least one inf or NaN.
    relus : ReLU backward calls seen (the model has ReLUs: the underflow measure is theirs).
    relu_passed / relu_zero_grads : entries a ReLU lets through in backward, and how many of those
        carry an exactly-zero gradient. In exact arithmetic such a zero has probability 0, so
        these are underflows (here or upstream) -- the measure of the mixed-precision paper.
    param_grads / param_zero_grads : entries of the parameters' finished gradients that exact
        arithmetic makes non-zero (all but an embedding's unpicked rows), and the zero ones:
        the same measure on the parameters, for models without ReLUs (the Transformer).
    activation_bytes : forward results held for backward, per format name.
    count_flushed : whether to count ``flushed`` (a pass over the unrounded values of every
        rounding that produced a zero). The Trainer turns it off: its History does not record
        it.
    """

    values: int = 0
    subnormal: int = 0
    flushed: int = 0
    overflow: int = 0
    nonfinite_results: int = 0
    relus: int = 0
    relu_passed: int = 0
    relu_zero_grads: int = 0
    param_grads: int = 0
    param_zero_grads: int = 0
    activation_bytes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    count_flushed: bool = True

    def observe(self, before: np.ndarray, after: np.ndarray, fmt: Format, what: str) -> None:
        """Count one rounding of ``before`` to ``after`` in ``fmt``.

        The counts come from a few passes that each read the values once: ``|after|`` and its
        maximum (inf and NaN propagate through max, so one test finds non-finite results), the
        comparison with the normal threshold (zeros and subnormals), and -- only when that
        finds any -- the zero tests of ``after`` and (with ``count_flushed``) ``before``.
        Everything is counted through boolean arrays, which NumPy counts several times faster
        than the non-zeros of floats.
        """
        n = after.size
        self.values += n
        if what == "activations":
            self.activation_bytes[fmt.name] += nbytes(fmt, n)
        if not n:
            return
        mag = np.abs(after)
        if not np.isfinite(mag.max()):  # NaN propagates through max, so one test catches both
            bad = ~np.isfinite(after)
            self.nonfinite_results += 1
            self.overflow += int(np.count_nonzero(bad & np.isfinite(before)))
        tiny = int(np.count_nonzero(mag < fmt.normal_threshold))  # zeros and subnormals
        if not tiny:  # no zero after rounding, so none before: nothing flushed
            return
        zeros_after = n - int(np.count_nonzero(after != 0))
        self.subnormal += tiny - zeros_after
        # rounding never turns a zero into a non-zero: the new zeros are the flushed values
        if self.count_flushed and before is not after and zeros_after:
            self.flushed += zeros_after - (before.size - int(np.count_nonzero(before != 0)))

    def observe_relu(self, passed: np.ndarray, grad: np.ndarray) -> None:
        """Count gradient entries at positions a ReLU lets through, and the zero ones."""
        self.relus += 1
        self.relu_passed += int(np.count_nonzero(passed))
        self.relu_zero_grads += int(np.count_nonzero(passed & (grad == 0)))

    def observe_parameter_grad(self, grad: np.ndarray, support: np.ndarray | None) -> None:
        """Count a parameter's gradient entries inside ``support`` (a boolean array that
        broadcasts to ``grad``; None: all of them) and the zero ones among them."""
        nonzero = grad != 0  # inf and NaN are not underflows (the overflow counters see them)
        if support is None:
            self.param_grads += grad.size
            self.param_zero_grads += grad.size - int(np.count_nonzero(nonzero))
            return
        inside = np.broadcast_to(support, grad.shape)
        passed = int(np.count_nonzero(inside))
        self.param_grads += passed
        self.param_zero_grads += passed - int(np.count_nonzero(nonzero & inside))

    @property
    def underflow_fraction(self) -> float:
        """Fraction of gradient entries that are zero where exact arithmetic makes them non-zero:
        the activation gradients ReLUs let through (the paper's measure) when the model has
        ReLUs, else the parameters' gradients (the Transformer); NaN if neither was seen.

        >>> s = StepStats(relus=2, relu_passed=4, relu_zero_grads=1, param_grads=10,
        ...               param_zero_grads=5)
        >>> s.underflow_fraction, StepStats(param_grads=10, param_zero_grads=5).underflow_fraction
        (0.25, 0.5)
        """
        if self.relus:  # the model has ReLUs: theirs is the measure (NaN if none let one through)
            return self.relu_zero_grads / self.relu_passed if self.relu_passed else float("nan")
        return self.param_zero_grads / self.param_grads if self.param_grads else float("nan")

    @property
    def subnormal_fraction(self) -> float:
        """Fraction of the hook's values that lie in their format's subnormal range."""
        return self.subnormal / self.values if self.values else float("nan")


#: Exponents beyond every float64 binade (2**-1074 ... 2**1023): log2_histogram's lo / hi bound.
_EXPONENT_SPAN = 1100


def log2_histogram(values: np.ndarray, fmt: Format, lo: int = -40, hi: int = 10) -> dict:
    """Histogram of ``log2 |values|`` with the format's zones marked (the paper's Figure 3).

    Returns ``edges`` (integer exponents ``lo..hi``), ``counts`` per binade ``[2**e, 2**(e+1))``
    (values outside go to the end bins), ``zeros`` (exact zeros), and the zone boundaries of
    ``fmt``: ``normal_min`` = log2 of the smallest normal, ``subnormal_min`` = log2 of the
    smallest subnormal (None without subnormals) and ``max``: below ``subnormal_min - 1`` a
    value flushes to zero, between that and ``normal_min`` it keeps fewer bits.

    >>> from floatlab import get_format
    >>> h = log2_histogram(np.array([0.0, 2.0**-26, 2.0**-20, 3.0]), get_format("fp16"), -30, 5)
    >>> h["zeros"], h["normal_min"], h["subnormal_min"], int(h["counts"].sum())
    (1, -14, -24, 3)
    """
    # as_float_array: None, strings, bools, complex and masked arrays are refused (None was an
    # empty histogram, a masked array lost its mask); float64 for log2 at the binade edges
    data = values.data if hasattr(values, "fmt") and hasattr(values, "data") else values
    v = np.abs(np.asarray(as_float_array(data, name="log2_histogram: values"),
                          dtype=np.float64)).reshape(-1)
    if not isinstance(fmt, Format):
        fmt = get_format(fmt)
    lo, hi = (whole(f"log2_histogram: {k}", e, minimum=-_EXPONENT_SPAN)
              for k, e in (("lo", lo), ("hi", hi)))
    if not lo < hi <= _EXPONENT_SPAN:
        raise ValueError(f"log2_histogram: need lo < hi <= {_EXPONENT_SPAN} (binade exponents), "
                         f"got lo={lo}, hi={hi}; e.g. lo=-40, hi=10")
    finite = v[np.isfinite(v)]
    nonzero = finite[finite > 0]
    exponents = np.clip(np.floor(np.log2(nonzero)), lo, hi - 1).astype(np.int64)
    sub = fmt.smallest_subnormal
    return {
        "edges": np.arange(lo, hi + 1),
        "counts": np.bincount(exponents - lo, minlength=hi - lo),
        "zeros": int(finite.size - nonzero.size),
        "normal_min": fmt.emin,
        "subnormal_min": None if sub is None else int(np.log2(sub)),
        "max": float(np.log2(fmt.max)),
        "format": fmt.name,
    }
