"""floatlab as an oracle for your own casts and kernels.

:func:`check_encoder` feeds an encoder (float array in, integer codes out) every value of a
format, every rounding midpoint and the float32 / float64 values one ulp either side of it,
and the overflow, subnormal, zero, inf and NaN edges, and compares each answer with
:func:`floatlab.encode`. :func:`check_decoder` feeds a decoder every code (a structured sample
for formats wider than 16 bits) and compares with :func:`floatlab.decode`. Both return a
:class:`CheckReport` listing the mismatches (input, expected, got, as hex codes and values);
:func:`assert_encoder` / :func:`assert_decoder` raise AssertionError with that report, for
pytest.

>>> import numpy as np
>>> truncating = lambda x: (x.view(np.uint32) >> 16).astype(np.uint16)   # no rounding at all
>>> report = check_encoder(truncating, "bf16")
>>> report.ok, report.counts["midpoint"] > 0
(False, True)
>>> print(str(report).splitlines()[0])          # doctest: +ELLIPSIS
check_encoder(bfloat16, float32 inputs, nearest_even): ... of ... inputs wrong
>>> check_decoder(lambda c: c.view(np.float16).astype(np.float32), "fp16").ok
True
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from floatlab._interop import as_numpy
from floatlab._validate import check_flag
from floatlab.codec import decode, encode
from floatlab.formats import Format, get_format
from floatlab.grid import nextafter, ulp
from floatlab.rounding import _check_out_dtype, _resolve_mode, as_float_array

__all__ = [
    "CheckReport",
    "Mismatch",
    "assert_decoder",
    "assert_encoder",
    "check_decoder",
    "check_encoder",
]

_LISTED_BITS = 16  # every code up to this width; a structured sample above it


@dataclass(frozen=True)
class Mismatch:
    """One wrong answer: the input (a value or a code), what floatlab gives, what fn gave."""

    category: str
    input: float | int
    expected: int | float
    got: int | float


@dataclass
class CheckReport:
    """The outcome of :func:`check_encoder` / :func:`check_decoder`.

    ``ok`` is True when nothing differed; ``mismatches`` lists every wrong answer,
    ``counts`` counts them per category (``"value"``, ``"midpoint"``, ``"midpoint-1ulp"``,
    ``"midpoint+1ulp"``, ``"overflow"``, ``"subnormal"``, ``"zero"``, ``"inf"``, ``"nan"``
    for encoders; ``"code"`` and the code's class for decoders), ``checked`` counts the
    inputs per category. ``str()`` is a readable table (the first ``limit`` mismatches).
    """

    kind: str
    fmt: Format
    input_dtype: np.dtype | None
    setting: str
    checked: Counter = field(default_factory=Counter)
    mismatches: list[Mismatch] = field(default_factory=list)
    limit: int = 20

    @property
    def ok(self) -> bool:
        return not self.mismatches

    @property
    def counts(self) -> Counter:
        return Counter(m.category for m in self.mismatches)

    def _show_input(self, value: float | int) -> str:
        if self.kind == "decoder":
            return self._code(int(value))
        bits = np.asarray(value, dtype=self.input_dtype).view(
            np.uint32 if self.input_dtype == np.float32 else np.uint64)
        width = 8 if self.input_dtype == np.float32 else 16
        return f"{float(value)!r} (0x{int(bits):0{width}x})"

    def _code(self, code: int) -> str:
        value = float(decode(code, self.fmt))
        return f"0x{code:0{(self.fmt.bits + 3) // 4}x} ({value!r})"

    def _show_output(self, value: float | int) -> str:
        if self.kind == "encoder":
            if isinstance(value, (int, np.integer)) and 0 <= value < 1 << self.fmt.bits:
                return self._code(int(value))
            return repr(value)
        return repr(float(value))

    def __str__(self) -> str:
        total = sum(self.checked.values())
        inputs = f", {self.input_dtype} inputs" if self.input_dtype is not None else ""
        head = (f"check_{self.kind}({self.fmt.name}{inputs}, {self.setting}): "
                f"{len(self.mismatches)} of {total} inputs wrong")
        if self.ok:
            return head.replace("0 of", "none of") + " (all match floatlab)"
        per = ", ".join(f"{cat} {n}/{self.checked[cat]}" for cat, n in self.counts.items())
        lines = [head, f"  wrong per category: {per}"]
        rows = [("category", "input", "expected (floatlab)", "got")]
        rows += [(m.category, self._show_input(m.input), self._show_output(m.expected),
                  self._show_output(m.got)) for m in self.mismatches[: self.limit]]
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                  for r in rows]
        if len(self.mismatches) > self.limit:
            lines.append(f"  ... and {len(self.mismatches) - self.limit} more")
        return "\n".join(lines)

    __repr__ = __str__


# =========================================================================== encoders

def check_encoder(
    fn: Callable[[np.ndarray], Any],
    fmt: str | Format | Any,
    *,
    dtype: Any = np.float32,
    rounding: str = "nearest_even",
    saturate: bool = False,
    subnormals: bool = True,
    any_nan_code: bool = True,
    limit: int = 20,
) -> CheckReport:
    """Compare ``fn`` (a 1-D ``dtype`` array in, codes out) with :func:`floatlab.encode`.

    Inputs: every value of ``fmt`` (a sample of every exponent for formats over 16 bits), both
    signs; every midpoint between neighbouring values (including 0 / smallest subnormal and
    max / the first value past it, the overflow threshold) and the ``dtype`` values one ulp
    either side of each; the extremes of ``dtype``; +-0, +-inf and NaN where the format can
    hold them. Inputs ``dtype`` cannot hold exactly are left out. With ``any_nan_code`` any
    NaN code of the format is accepted for a NaN result (kernels rarely agree on the payload).
    The options are those of :func:`floatlab.round`.
    """
    _check_fn_and_limit(fn, "encoder", limit)
    fmt = get_format(fmt)
    try:  # numpy's own "data type 'x' not understood" named no argument
        dtype = _check_out_dtype(dtype)  # None is float64, as np.dtype(None)
    except TypeError:
        raise TypeError(f"dtype must be float32 or float64 (the input fn takes), got "
                        f"{dtype!r}") from None
    any_nan_code = check_flag(any_nan_code, "any_nan_code")
    mode = _resolve_mode(rounding)
    options = dict(rounding=mode, saturate=check_flag(saturate, "saturate"),
                   subnormals=check_flag(subnormals, "subnormals"))
    inputs, categories = _encoder_inputs(fmt, dtype, options["saturate"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # E8M0: 0 and negatives become NaN
        expected = encode(inputs, fmt, **options, rng=None)
    got = _call(fn, inputs.copy(), "encoder", inputs.shape)
    if got.dtype.kind not in "iu":
        raise TypeError(
            f"the encoder returned dtype {got.dtype}; it must return integer codes (e.g. "
            "x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))"
        )
    got = got.astype(np.int64 if got.dtype.kind == "i" else np.uint64)
    same = got == expected.astype(got.dtype)
    if any_nan_code and fmt.has_nan:
        expected_nan = np.isnan(decode(expected, fmt))
        in_range = (got >= 0) & (got < (1 << fmt.bits))
        got_nan = np.zeros(got.shape, dtype=bool)
        got_nan[in_range] = np.isnan(decode(got[in_range].astype(np.uint64), fmt))
        same |= expected_nan & got_nan
    setting = _setting(mode, options)
    report = CheckReport("encoder", fmt, dtype, setting, Counter(categories.tolist()), limit=limit)
    for i in np.flatnonzero(~same):
        report.mismatches.append(Mismatch(str(categories[i]), inputs[i].item(),
                                          int(expected[i]), int(got[i])))
    return report


def _check_fn_and_limit(fn: Any, what: str, limit: Any) -> None:
    """Up front, before thousands of inputs are built: a non-callable fn failed only when
    first called, a bad limit only when the report was printed."""
    if not callable(fn):
        raise TypeError(f"fn must be the {what} to check (a function of one array), got "
                        f"{fn!r} ({type(fn).__name__})")
    wrong_type = isinstance(limit, (bool, np.bool_)) or not isinstance(limit, (int, np.integer))
    if wrong_type or limit < 0:  # TypeError for 1.5, ValueError for -1 (the house's split)
        raise (TypeError if wrong_type else ValueError)(
            f"limit must be a whole number >= 0 (how many mismatches str() lists), got "
            f"{limit!r}")


def _setting(mode: str, options: dict[str, Any]) -> str:
    extras = [name for name in ("saturate",) if options[name]]
    if not options["subnormals"]:
        extras.append("subnormals=False")
    return ", ".join([mode] + extras)


def _call(fn: Callable, arg: np.ndarray, what: str, shape: tuple[int, ...]) -> np.ndarray:
    result = np.asarray(as_numpy(fn(arg)))  # torch / JAX results are fine too
    if result.shape != shape:
        raise ValueError(
            f"the {what} returned shape {result.shape} for an input of shape {shape}: it must "
            "answer element by element"
        )
    return result


def _sample_codes(fmt: Format) -> np.ndarray:
    """Every code of a format up to 16 bits; above that every exponent field with a spread of
    mantissas (0, 1, 2, a middle one, the top three) and both signs."""
    if fmt.bits <= _LISTED_BITS:
        return np.arange(1 << fmt.bits, dtype=np.uint64)
    M = fmt.man_bits
    top = (1 << M) - 1
    mantissas = np.unique(np.array([0, 1, 2, 1 << (M - 1), top - 2, top - 1, top],
                                   dtype=np.uint64) & np.uint64(top))
    exponents = np.arange(fmt.exp_field_max + 1, dtype=np.uint64)
    codes = (exponents[:, None] << np.uint64(M)) | mantissas[None, :]
    signs = [np.uint64(0), np.uint64(fmt.sign_mask)] if fmt.signed else [np.uint64(0)]
    return np.concatenate([(codes | s).reshape(-1) for s in signs])


def _encoder_inputs(fmt: Format, dtype: np.dtype, saturate: bool) -> tuple[np.ndarray,
                                                                             np.ndarray]:
    values = decode(_sample_codes(fmt), fmt)
    positive = np.unique(np.abs(values[np.isfinite(values)]))  # ascending, zero first
    with np.errstate(over="ignore"):
        beyond = float(positive[-1]) + float(ulp(positive[-1], fmt))  # the first value past max
        successors = positive[1:]
        if fmt.bits > _LISTED_BITS:  # sampled values: the true neighbour of each
            successors = nextafter(positive[:-1], np.inf, fmt)
        # Halfway between neighbours (0 and the smallest subnormal included), and halfway
        # between max and the first value past it: the overflow threshold.
        midpoints = np.concatenate([(positive[:-1] + successors) / 2,
                                    [(positive[-1] + beyond) / 2]])

    groups: list[tuple[str, np.ndarray]] = [("value", positive)]
    exact_mid = midpoints[_exact_in(midpoints, dtype)].astype(dtype)
    groups.append(("midpoint", exact_mid))
    groups.append(("midpoint-1ulp", np.nextafter(exact_mid, dtype.type(0))))
    groups.append(("midpoint+1ulp", np.nextafter(exact_mid, dtype.type(np.inf))))
    finfo = np.finfo(dtype)
    top = float(positive[-1])
    overflow = np.array([top * 2, float(finfo.max), beyond], dtype=np.float64)
    groups.append(("overflow", overflow[np.isfinite(overflow)]))
    smallest = float(positive[1] if positive[0] == 0 else positive[0])
    groups.append(("subnormal", np.array([float(finfo.smallest_subnormal),
                                          float(finfo.smallest_normal), smallest / 4,
                                          smallest * 0.75, smallest * 1.25])))
    groups.append(("zero", np.array([0.0])))
    if fmt.has_inf or saturate or fmt.has_nan:
        groups.append(("inf", np.array([np.inf])))
    if fmt.has_nan:
        groups.append(("nan", np.array([np.nan])))

    inputs, categories = [], []
    for name, group in groups:
        group = np.asarray(group, dtype=np.float64)
        keep = _exact_in(group, dtype) & (np.isnan(group) | (np.abs(group) <= finfo.max))
        kept = group[keep].astype(dtype)
        signed = np.concatenate([kept, -kept]) if name != "nan" else kept
        inputs.append(signed)
        categories.append(np.full(signed.size, name))
    return np.concatenate(inputs), np.concatenate(categories)


def _exact_in(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Which float64 values ``dtype`` holds exactly (NaN and inf count as held)."""
    with np.errstate(over="ignore"):
        cast = values.astype(dtype).astype(np.float64)
    return (cast == values) | np.isnan(values)


def assert_encoder(fn: Callable[[np.ndarray], Any], fmt: str | Format | Any,
                   **options: Any) -> None:
    """Raise AssertionError with the :func:`check_encoder` report unless ``fn`` matches."""
    report = check_encoder(fn, fmt, **options)
    if not report.ok:
        raise AssertionError("\n" + str(report))


# =========================================================================== decoders

def check_decoder(
    fn: Callable[[np.ndarray], Any], fmt: str | Format | Any, *, limit: int = 20
) -> CheckReport:
    """Compare ``fn`` (codes of ``fmt.code_dtype`` in, values out) with :func:`floatlab.decode`.

    Every code for formats up to 16 bits, for wider ones every exponent field with a spread of
    mantissas and both signs. Values must be equal, with the same sign of zero; NaN must be
    NaN. ``fn`` may return float16 / bfloat16 / float32 / float64 (compared exactly).
    """
    _check_fn_and_limit(fn, "decoder", limit)
    fmt = get_format(fmt)
    codes = _sample_codes(fmt).astype(fmt.code_dtype)
    expected = decode(codes, fmt)
    with np.errstate(invalid="ignore"):  # signalling-NaN patterns stay NaN
        got = as_float_array(_call(fn, codes.copy(), "decoder", codes.shape),
                             name="the decoder's result").astype(np.float64)
    same = ((got == expected) & (np.signbit(got) == np.signbit(expected))) | (
        np.isnan(got) & np.isnan(expected))
    kinds = _code_classes(codes, expected, fmt)
    report = CheckReport("decoder", fmt, None, "every code" if fmt.bits <= _LISTED_BITS
                         else "every exponent, sampled mantissas", Counter(kinds.tolist()),
                         limit=limit)
    for i in np.flatnonzero(~same):
        report.mismatches.append(Mismatch(str(kinds[i]), int(codes[i]), float(expected[i]),
                                          float(got[i])))
    return report


def _code_classes(codes: np.ndarray, values: np.ndarray, fmt: Format) -> np.ndarray:
    exponent = (codes.astype(np.uint64) >> np.uint64(fmt.man_bits)) & np.uint64(
        fmt.exp_field_max)
    return np.select(
        [np.isnan(values), np.isinf(values), values == 0, (exponent == 0) & fmt.has_zero],
        ["nan", "inf", "zero", "subnormal"], default="normal")


def assert_decoder(fn: Callable[[np.ndarray], Any], fmt: str | Format | Any,
                   **options: Any) -> None:
    """Raise AssertionError with the :func:`check_decoder` report unless ``fn`` matches."""
    report = check_decoder(fn, fmt, **options)
    if not report.ok:
        raise AssertionError("\n" + str(report))
