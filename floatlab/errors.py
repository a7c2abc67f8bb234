"""How wrong is a formula in a format? Error profiles and Monte Carlo significant digits.

:func:`error_profile` evaluates a Python function written with NumPy operations on FloatArrays
of each format (every operation rounded there) and compares it, input by input, with a
reference evaluation at the same (rounded) inputs: the error in ulps of the format and the
*bits of error* (Herbie's measure: log2 of 1 + the number of format values between the
computed result and the correctly rounded exact one; 0 means correctly rounded, the format's
precision means nothing is right).

>>> import numpy as np, floatlab
>>> naive = lambda x: np.sqrt(x + 1) - np.sqrt(x)
>>> p = floatlab.error_profile(naive, [1000.0], ["fp16", "bf16"])
>>> p.results["bfloat16"].tolist(), round(float(p.bits["bfloat16"][0]), 1)
([0.0], 13.9)
>>> rewritten = lambda x: 1 / (np.sqrt(x + 1) + np.sqrt(x))
>>> floatlab.error_profile(rewritten, [1000.0], ["bf16"]).bits["bfloat16"].tolist()  # 1 ulp
[1.0]

The classic examples (notebooks/06_sums_and_accumulation.ipynb draws them):

* ``sqrt(x + 1) - sqrt(x)`` against ``1 / (sqrt(x + 1) + sqrt(x))``: bf16 returns 0 at x = 1000.
* ``(1 - cos(x)) / x**2`` against ``2 * sin(x / 2)**2 / x**2``: 0 instead of 1/2 at x = 0.01 in
  fp16 and bf16.
* naive softmax ``exp(x) / sum(exp(x))`` against the max-subtracted one: fp16 overflows for
  x above ln(65504) = 11.09 and returns NaN.
* naive variance ``E[x**2] - E[x]**2`` against Welford's update: with mean 100 and variance 1,
  bf16 returns a negative variance (why layer norm keeps float32 statistics).

:func:`significant_digits` is the statistical companion (the Monte Carlo arithmetic of
Verificarlo and CADNA): run the function n times with stochastic rounding and read the number of
correct decimal digits from the spread, s = -log10(sigma / |mu|).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from floatlab._validate import resolve_rng
from floatlab.arith import FloatArray, array
from floatlab.codec import encode
from floatlab.formats import Format, get_format
from floatlab.formats.resolve import _one_format
from floatlab.mixed.checks import whole
from floatlab.rounding import as_float_array
from floatlab.rounding import round as _round

__all__ = ["ErrorProfile", "error_profile", "significant_digits"]


@dataclass
class ErrorProfile:
    """Per-format results of :func:`error_profile`, each an array shaped like the inputs.

    >>> import numpy as np
    >>> print(error_profile(lambda x: np.sqrt(x + 1) - np.sqrt(x), [1000.0], ["fp16", "bf16"]))
                 x                 float16                bfloat16
              1000      0.015625   3.7b             0  13.9b"""

    x: np.ndarray
    formats: list[Format]
    inputs: dict[str, np.ndarray]
    results: dict[str, np.ndarray]
    reference: dict[str, np.ndarray]
    ulps: dict[str, np.ndarray]
    bits: dict[str, np.ndarray]

    def table(self, limit: int = 12) -> str:
        """A text table: input, then result / bits of error per format."""
        limit = whole("limit", limit, minimum=0)  # rows to show
        head = f"{'x':>14}" + "".join(f"  {f.name:>22}" for f in self.formats)
        rows = [head]
        for i, value in enumerate(self.x.reshape(-1)[:limit].tolist()):
            cells = "".join(
                f"  {self.results[f.name].reshape(-1)[i]:>12.6g} "
                f"{self.bits[f.name].reshape(-1)[i]:>5.1f}b"
                for f in self.formats
            )
            rows.append(f"{value:>14.6g}{cells}")
        return "\n".join(rows)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        worst = ", ".join(f"{f.name}: {np.nanmax(self.bits[f.name], initial=0):.1f}"
                          for f in self.formats)
        return f"ErrorProfile({self.x.size} inputs; worst bits of error {worst})"


def error_profile(
    f: Callable[[Any], Any],
    x: Any,
    formats: str | Format | Iterable[str | Format],
    reference: str | Format | Callable[[np.ndarray], Any] = "float64",
    rounding: str = "nearest_even",
) -> ErrorProfile:
    """Evaluate ``f`` in each format and measure its error against ``reference``.

    Parameters
    ----------
    f : a function of one array written with NumPy operations (it receives FloatArrays).
    x : the inputs (rounded to each format before ``f`` runs: the profile measures the formula,
        not the representation of its input).
    formats : a format or several.
    reference : a format to evaluate ``f`` in (default float64, faithful to about 2**-50 for
        well-behaved formulas) or a function of float64 arrays giving the exact result (e.g. a
        rewritten, stable formula evaluated in float64).
    rounding : the rounding mode of every operation.

    Results that are inf or NaN where the reference is finite count as all bits wrong.

    >>> import numpy as np
    >>> p = error_profile(lambda x: np.sqrt(x + 1) - np.sqrt(x), [1000.0], ["fp16", "bf16"])
    >>> p.results["bfloat16"], p.bits["bfloat16"].round(1)    # cancellation: bf16 returns 0
    (array([0.]), array([13.9]))
    """
    xs = np.asarray(as_float_array(x), dtype=np.float64)
    if _one_format(formats):  # (np.float16 or a dtype: get_format takes them)
        fmts = [get_format(formats)]
    elif isinstance(formats, Iterable):
        fmts = [get_format(fmt) for fmt in formats]
    else:
        if formats is not None:
            get_format(formats)  # (its error says what a format is: a FixedPoint is not one)
        raise TypeError(f"formats must be a format or a list of them, got {formats!r}; e.g. "
                        "formats=['fp16', 'bf16']")
    if not fmts:
        raise ValueError("formats is empty: pass a format name or a list of them")
    if not callable(f):
        raise TypeError(f"f must be a function of one array, got {type(f).__name__}")
    # numpy / ml_dtypes scalar types are callable (np.float32(x) converts), but as a reference
    # they name a format, as they do in formats=: not a function giving the exact result
    by_function = callable(reference) and not _one_format(reference)
    out = ErrorProfile(xs, fmts, {}, {}, {}, {}, {})
    for fmt in fmts:
        inputs = array(xs, fmt, rounding="nearest_even")
        run = array(inputs.values, fmt, rounding=rounding)
        result = _shaped(_computed(f(run), fmt), xs.shape, "f")
        if by_function:
            exact = _values(reference(inputs.values.copy()), "reference")
        else:
            exact = _computed(f(array(inputs.values, reference)), get_format(reference))
        exact = _shaped(exact, xs.shape, "reference" if by_function else "f")
        out.inputs[fmt.name], out.results[fmt.name] = inputs.values, result
        out.reference[fmt.name] = exact
        out.ulps[fmt.name], out.bits[fmt.name] = _errors(result, exact, fmt)
    return out


def _values(result: Any, what: str) -> np.ndarray:
    if isinstance(result, FloatArray):
        return np.array(result.values)
    try:
        return np.asarray(as_float_array(result, name=what), dtype=np.float64)
    except TypeError as err:
        raise TypeError(f"{what} must return numbers or a FloatArray: {err}") from None


def _computed(result: Any, fmt: Format) -> np.ndarray:
    """f's result as float64 values, refused if it left ``fmt`` without saying so.

    A FloatArray (of any format) is what f computed. A plain array or number is what f's
    operations gave outside FloatArray: np.asarray(x) (or a function called on it) computes on
    the exact float64 values (NumPy functions FloatArray does not emulate are refused). Where
    that gives values ``fmt`` cannot hold, measuring them would report the error of a float64
    computation rounded once (0 bits of error) as the format's.
    """
    values = _values(result, "f")
    if isinstance(result, FloatArray):
        return values
    finite = values[np.isfinite(values)]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (E8M0 warns of zeros: they are not its values)
        kept = _round(finite, fmt, saturate=True) == finite
    if not kept.all():
        example = float(finite[~kept][0])
        raise ValueError(
            f"f returned a plain {type(result).__name__} holding {example!r}, which is not a "
            f"value of {fmt.name}: part of f ran outside the format (np.asarray(x) and "
            "functions called on it compute on the exact float64 values), so its error "
            f"would not be {fmt.name}'s. Write f with FloatArray operations, or round such a "
            "step back with floatlab.array(value, x.fmt)")
    return values


def _shaped(result: np.ndarray, shape: tuple[int, ...], what: str) -> np.ndarray:
    """``result`` if it has the inputs' shape: the profile compares input by input, so a
    result of another shape (a reduction, a stray broadcast) has no input to pair with."""
    if result.shape != shape:
        raise ValueError(f"{what} returned shape {result.shape} for inputs of shape {shape}; "
                         "error_profile compares results input by input, so it needs an "
                         "element-wise formula (one result per input)")
    return result


def _ordinal(values: np.ndarray, fmt: Format) -> np.ndarray:
    """Position of each value on the format's number line (codes are monotone per sign)."""
    codes = encode(values, fmt).astype(np.int64)
    if not fmt.signed:
        return codes
    sign = 1 << (fmt.bits - 1)
    return np.where(codes >= sign, -(codes - sign), codes)


def _errors(result: np.ndarray, exact: np.ndarray, fmt: Format) -> tuple[np.ndarray, ...]:
    from floatlab.grid import ulp

    result, exact = np.broadcast_arrays(result, exact)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        finite = np.isfinite(result) & np.isfinite(exact)
        # placeholders where not finite (overwritten below): a value of the format, so that
        # E8M0 (no zero) warns of no NaN made from an input the user never passed
        fill = 0.0 if fmt.has_zero else fmt.max
        safe_r, safe_e = np.where(finite, result, fill), np.where(finite, exact, fill)
        ulps = np.abs(safe_r - safe_e) / ulp(safe_e, fmt)
        nearest = _round(safe_e, fmt, saturate=True)
        steps = np.abs(_ordinal(safe_r, fmt) - _ordinal(nearest, fmt))
        bits = np.log2(1.0 + steps)
        both_special = ~finite & ((result == exact) | (np.isnan(result) & np.isnan(exact)))
        ulps = np.where(finite, ulps, np.where(both_special, 0.0, np.inf))
        bits = np.where(finite, bits, np.where(both_special, 0.0, float(fmt.bits)))
    return ulps, bits


def significant_digits(
    f: Callable[[Any], Any],
    x: Any,
    fmt: str | Format,
    n: int = 30,
    rng: np.random.Generator | int | None = None,
) -> np.ndarray:
    """Correct decimal digits of ``f(x)`` in ``fmt``, estimated from n stochastic runs.

    Each run evaluates ``f`` on a FloatArray whose every operation rounds stochastically (the
    inputs are rounded to nearest once); the digits are s = -log10(sigma / |mu|) per output,
    clipped to [0, p log10 2] (p log10 2 when all runs agree). A statistical estimate: with
    n = 30 it is good to about half a digit.

    >>> import numpy as np
    >>> d = significant_digits(lambda x: (x + 1) - x, [1.0, 3000.0], "fp16", rng=0)
    >>> [round(float(v), 1) for v in d]
    [3.3, 0.0]
    """
    fmt = get_format(fmt)
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"n={n!r}: need an int >= 2 runs to measure a spread, e.g. n=30")
    if n < 2:
        raise ValueError(f"n={n!r}: need an int >= 2 runs to measure a spread, e.g. n=30")
    if not callable(f):
        raise TypeError(f"f must be a function of one array, got {type(f).__name__}")
    generator = resolve_rng(rng, True, "stochastic")
    inputs = array(x, fmt).values
    runs = []
    for _ in range(int(n)):
        run = _computed(f(array(inputs, fmt, rounding="stochastic", rng=generator)), fmt)
        if runs and run.shape != runs[0].shape:
            raise ValueError(f"f returned shape {run.shape} on run {len(runs) + 1} and "
                             f"{runs[0].shape} on run 1; the spread needs one shape every run")
        runs.append(run)
    runs = np.stack(runs)
    top = fmt.p * np.log10(2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean, spread = runs.mean(axis=0), runs.std(axis=0, ddof=1)
        digits = -np.log10(spread / np.abs(mean))
    digits = np.where(spread == 0, top, digits)
    digits = np.where(np.isnan(digits), 0.0, digits)
    return np.asarray(np.clip(digits, 0.0, top))  # (np.clip gives a 0-d input a scalar)
