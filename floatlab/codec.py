"""Bit-level codec: values <-> unsigned integer codes, and the fields of codes.

The bit and hex strings of codes (``to_bin``, ``from_hex``, ``float16_to_bin``, ...) live
in :mod:`floatlab.bitstrings` and are re-exported here.

>>> import floatlab
>>> int(floatlab.encode(3.141, "fp16"))
16968
>>> floatlab.to_hex(3.141, "fp16"), floatlab.to_bin(3.141, "fp16", sep=" ")
('0x4248', '0 10000 1001001000')
>>> floatlab.float16_to_bin(3.141)
'0100001001001000'
>>> floatlab.bin_to_float16('0100001001001000')
3.140625

Codes are the format's bit patterns as unsigned integers in the smallest dtype that holds them
(uint8 for 8 bits and fewer, uint16, uint32, uint64). FP64 / FP32 / FP16 codes are exactly the
IEEE patterns numpy uses. NaN encodes to the format's canonical NaN code (``Format.nan_code``:
fp16 0x7e00, bf16 0x7fc0, fp32 0x7fc00000, E4M3FN 0x7f, FNUZ formats 0x80, E8M0 0xff); any NaN
code decodes to NaN.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from floatlab._interop import caller_type
from floatlab._rounding_fast import select_bits
from floatlab._validate import as_array, check_flag, resolve_rng
from floatlab.formats import PRESETS, Format, get_format
from floatlab.rounding import _CHUNK as _ROUND_CHUNK
from floatlab.rounding import (
    _F32,
    _F64,
    _bits_of,
    _check_random_bits,
    _fits_float32,
    _resolve_mode,
    as_float_array,
)
from floatlab.rounding import round as round_to_format

__all__ = [
    "encode",
    "decode",
    "fields",
    "Fields",
    "to_bin",
    "from_bin",
    "to_hex",
    "from_hex",
    "float16_to_bin",
    "bin_to_float16",
    "bfloat16_to_bin",
    "bin_to_bfloat16",
    "float32_to_bin",
    "bin_to_float32",
]

CLASSES = ("zero", "subnormal", "normal", "inf", "nan")


# --------------------------------------------------------------------------- encode

def encode(x: Any, fmt: str | Format | Any, **rounding_options: Any) -> np.ndarray:
    """Round ``x`` to ``fmt`` and return the codes (unsigned ints; 0-d for scalars).

    ``rounding_options`` are those of :func:`floatlab.round` (rounding, saturate, subnormals,
    rng, random_bits). Works in chunks: beyond the codes it returns, memory stays a few bytes
    per element.

    >>> encode([1.0, -2.0, float("nan")], "e4m3fn")
    array([ 56, 192, 127], dtype=uint8)
    """
    back = caller_type(x)  # torch in, torch out
    if getattr(fmt, "is_element_format", False):  # FixedPoint / Codebook (floatlab.quant)
        _check_options(rounding_options)  # they used to pass unchecked ('no', unknown names)
        if rounding_options.pop("random_bits", None) is not None:  # as round says it
            raise ValueError(f"random_bits: {type(fmt).__name__} rounds without it; drop "
                             "random_bits, or encode to a floatlab format")
        return back(np.asarray(fmt.encode(x, **rounding_options)))
    fmt = get_format(fmt)
    arr = as_float_array(x)
    options = _resolved_options(rounding_options)
    # The rounded values come back in the narrowest IEEE type that holds them exactly, whose
    # bit patterns then give the codes (see _codes_from_rounded).
    work = np.float32 if _fits_float32(fmt) else np.float64
    flat = arr.reshape(-1)
    codes = np.empty(flat.size, dtype=fmt.code_dtype)
    # Chunks are a multiple of the core's own, so a seeded stochastic rounding draws the same
    # random numbers as one floatlab.round call on the whole array.
    for start in range(0, flat.size, _ENCODE_CHUNK):
        piece = slice(start, start + _ENCODE_CHUNK)
        rounded = round_to_format(flat[piece], fmt, dtype=work, **options)
        _codes_from_rounded(rounded, fmt, codes[piece])
    return back(codes.reshape(arr.shape))


_ENCODE_CHUNK = 4 * _ROUND_CHUNK  # a multiple of the core's chunk (see encode)


def _resolved_options(rounding_options: dict[str, Any]) -> dict[str, Any]:
    """Check the options once for the whole array and fix the random stream (a seed becomes
    one Generator) so that rounding chunk by chunk equals rounding the whole."""
    options = _check_options(rounding_options)
    mode = options["rounding"]
    options["rng"] = resolve_rng(options.get("rng"), mode == "stochastic", mode)
    return options


def _check_options(rounding_options: dict[str, Any]) -> dict[str, Any]:
    """The option names, the mode and the flags checked; the mode resolved (rtz ->
    toward_zero), the rng left as given."""
    unknown = set(rounding_options) - {"rounding", "saturate", "subnormals", "rng",
                                       "random_bits"}
    if unknown:
        raise TypeError(
            f"unknown option(s) {', '.join(sorted(unknown))}; the rounding options are "
            "rounding, saturate, subnormals, rng and random_bits (those of floatlab.round)"
        )
    options = dict(rounding_options)
    options["rounding"] = _resolve_mode(options.get("rounding", "nearest_even"))
    if options.get("random_bits") is not None:  # checked even when there is nothing to round
        _check_random_bits(options["random_bits"])
        if options["rounding"] != "stochastic":
            raise ValueError(f"random_bits={options['random_bits']!r} applies to "
                             f"rounding='stochastic' only; drop it for "
                             f"rounding={options['rounding']!r}")
    for flag in ("saturate", "subnormals"):  # checked even when there is nothing to round
        if flag in options:
            options[flag] = check_flag(options[flag], flag)
    return options


def _codes_of_values(values: np.ndarray, fmt: Format) -> np.ndarray:
    """Codes of values that are already exactly values of ``fmt`` (nothing is rounded).

    The block-scaling core uses it for element and scale codes it has just rounded itself.
    """
    work = np.float32 if _fits_float32(fmt) else np.float64
    flat = np.asarray(values, dtype=work).reshape(-1)  # exact: fmt's values fit ``work``
    codes = np.empty(flat.size, dtype=fmt.code_dtype)
    _codes_from_rounded(flat, fmt, codes)
    return codes.reshape(np.shape(values))


def _codes_from_rounded(values: np.ndarray, fmt: Format, out: np.ndarray) -> None:
    """Codes of values already rounded to ``fmt`` (float32 or float64), written to ``out``.

    For a normal value of the format, the code's magnitude is the IEEE pattern shifted right by
    the mantissa bits the format lacks, minus the difference of the biases in the exponent
    field: both layouts are "exponent field, then mantissa", so the map is linear. Values below
    the format's smallest normal are integer multiples of its subnormal quantum 2**(emin - M),
    and that multiple is the code. inf and NaN take the format's codes.
    """
    L = _F32 if values.dtype == np.float32 else _F64
    uint = L.uint.type
    M = fmt.man_bits
    bits = values.view(L.uint)
    mag = bits & L.abs_mask
    offset = ((L.bias - fmt.bias) << M) % (1 << L.width)  # the subtraction wraps, exactly
    tiny = mag < _bits_of(fmt.normal_threshold, L) if fmt.has_zero else None
    n_tiny = 0 if tiny is None else np.count_nonzero(tiny)
    if 0 < n_tiny <= mag.size // 64:  # a few (N(0,1) data): gather them
        code = mag >> uint(L.man_bits - M)
        code -= uint(offset)
        where = np.flatnonzero(tiny)
        multiple = np.ldexp(np.abs(values[where]).astype(np.float64), M - fmt.emin)
        code[where] = multiple.astype(L.uint)
    elif n_tiny:
        # A magnitude below 2**emin is n * 2**(emin - M), 0 <= n < 2**M; plus 2**emin (exact:
        # the sum is the normal value 2**emin * (1 + n / 2**M) of the format) its code is
        # 2**M + n by the linear map. Branch-free whole-array passes; 0 gives 0 too.
        lift = np.multiply(tiny, L.dtype.type(fmt.normal_threshold), dtype=L.dtype)
        lift += mag.view(L.dtype)
        code = lift.view(L.uint) >> uint(L.man_bits - M)
        code -= uint(offset)
        code -= np.left_shift(tiny, M, dtype=L.uint)
    else:
        code = mag >> uint(L.man_bits - M)
        code -= uint(offset)
    inf_bits = uint(L.exp_all_ones << L.man_bits)
    peak = mag.max(initial=0)
    if peak >= inf_bits:  # branch-free: masked writes cost ns per element here
        is_nan = mag > inf_bits
        top = _code_above_max(fmt, L)
        if top is not None:  # inf (or, without inf, NaN) takes the code right above max
            np.minimum(code, uint(top), out=code)
        elif fmt.inf_code is not None:
            select_bits(code, np.full_like(code, fmt.inf_code), mag == inf_bits)
        if fmt.nan_code is not None and fmt.nan_code != top and is_nan.any():
            select_bits(code, np.full_like(code, fmt.nan_code), is_nan)
    if fmt.signed:
        negative = bits >> uint(L.width - 1)
        if peak >= inf_bits:
            negative &= ~is_nan  # NaN has one code, whatever its sign
        code |= negative << uint(fmt.bits - 1)
    out[...] = code


@lru_cache(maxsize=256)
def _code_above_max(fmt: Format, L: Any) -> int | None:
    """The code that ``minimum(code, top)`` gives inf (formats with inf) or NaN (without inf)
    in _codes_from_rounded, or None where that does not hold.

    Holds when that code is ``max_code + 1`` (IEEE and P3109 inf; the all-ones NaN of FN
    formats) and the linear map sends the working inf pattern, without wrapping, to at least
    it: the map is increasing in the magnitude pattern, so every inf / NaN pattern then lands
    at or above ``top`` and every finite value (at most max) below it.
    """
    top = fmt.inf_code if fmt.inf_code is not None else fmt.nan_code
    if top is None or top != fmt.max_code + 1:
        return None
    inf_linear = (L.exp_all_ones << fmt.man_bits) - ((L.bias - fmt.bias) << fmt.man_bits)
    return top if top <= inf_linear < 1 << L.width else None


# --------------------------------------------------------------------------- decode

def decode(codes: Any, fmt: str | Format | Any) -> np.ndarray:
    """Values (float64, exact) of the codes of ``fmt``; 0-d for a scalar code.

    >>> decode([0x3c00, 0x7bff, 0x0001, 0x7c00], "fp16")
    array([1.00000000e+00, 6.55040000e+04, 5.96046448e-08,            inf])
    >>> decode(0x80, "float8_e4m3fnuz")   # FNUZ: the negative-zero code is the NaN
    array(nan)
    """
    back = caller_type(codes)  # torch in, torch out
    if getattr(fmt, "is_element_format", False):  # FixedPoint / Codebook (floatlab.quant)
        return back(np.asarray(fmt.decode(codes)))  # an array, as for Formats (0-d for one)
    fmt = get_format(fmt)
    arr = _as_codes(codes, fmt)
    native = _NATIVE_DTYPES.get(fmt)  # same encoding as a numpy dtype, whatever its name
    if native is not None:
        with np.errstate(invalid="ignore"):  # signalling-NaN patterns stay NaN
            return back(arr.astype(fmt.code_dtype).view(native).astype(np.float64))
    if fmt.bits <= 16:
        return back(np.asarray(_decode_table(fmt)[arr.astype(np.intp)]))
    return back(_decode_arithmetic(arr.astype(np.uint64), fmt))


# Formats numpy already stores: decoding them is a view of the codes (tested equal to the
# arithmetic decoder). Format equality compares encodings, not names.
_NATIVE_DTYPES = {
    PRESETS["float64"]: np.dtype(np.float64),
    PRESETS["float32"]: np.dtype(np.float32),
}


def _as_codes(codes: Any, fmt: Format) -> np.ndarray:
    """Integer codes as an integer array, each checked to fit in the format's bits.

    Python ints of any size are checked before numpy sees them (2**64 or -1 in an object
    array would otherwise end in a bare OverflowError, and [-1, 2**63] would become float64).
    """
    arr = as_array(codes, "codes")  # (refuses [1, True], which would decode the code 1 twice)
    if arr.size == 0 and arr.dtype.kind in "fO" and not isinstance(codes, np.ndarray):
        # [] (numpy reads it as float64) holds no code to refuse: no values, shape kept.
        return np.zeros(arr.shape, dtype=np.uint64)
    if arr.dtype.kind in "fO" and not isinstance(codes, np.ndarray):
        arr = as_array(codes, "codes", dtype=object)  # keep Python ints exact
    if arr.dtype.kind == "O" and arr.size and all(_is_int(c) for c in arr.flat):
        ints = [int(c) for c in arr.flat]
        _check_code_range(min(ints), max(ints), fmt)
        return np.array(ints, dtype=np.uint64).reshape(arr.shape)
    if arr.dtype.kind not in "iu":
        what = f"dtype {arr.dtype}"
        if arr.dtype.kind == "O":
            bad = next((c for c in arr.flat if not _is_int(c)), None)
            what = f"{bad!r} ({type(bad).__name__})"
        raise TypeError(
            f"decode expects integer codes, got {what}; to turn values into "
            "codes use floatlab.encode, to read a bit string use floatlab.from_bin"
        )
    if arr.size:
        _check_code_range(int(arr.min()), int(arr.max()), fmt)
    return arr


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check_code_range(low: int, high: int, fmt: Format) -> None:
    limit = 1 << fmt.bits
    if low < 0 or high >= limit:
        bad = low if low < 0 else high
        raise ValueError(
            f"code {bad:#x} ({bad}) does not fit in the {fmt.bits} bits of {fmt.name}: "
            f"valid codes are 0..{limit - 1:#x}"
        )


@lru_cache(maxsize=64)
def _decode_table(fmt: Format) -> np.ndarray:
    """Every code's value, for formats up to 16 bits (a 64K-entry lookup table)."""
    table = _decode_arithmetic(np.arange(1 << fmt.bits, dtype=np.uint64), fmt)
    table.setflags(write=False)
    return table


def _decode_arithmetic(codes: np.ndarray, fmt: Format) -> np.ndarray:
    M = fmt.man_bits
    mantissa = (codes & np.uint64((1 << M) - 1)).astype(np.float64)
    exp_field = ((codes >> np.uint64(M)) & np.uint64(fmt.exp_field_max)).astype(np.int64)
    negative = (codes & np.uint64(fmt.sign_mask)) != 0  # sign_mask is 0 for unsigned formats

    subnormal_or_zero = (exp_field == 0) & fmt.has_zero
    with np.errstate(over="ignore"):  # inf / NaN codes overflow here; they are replaced below
        magnitude = np.where(
            subnormal_or_zero,
            np.ldexp(mantissa, fmt.emin - M),
            np.ldexp(mantissa + 2.0**M, (exp_field - fmt.bias - M).astype(np.int32)),
        )
    magnitude = np.where((exp_field == 0) & fmt.has_zero & ~fmt.subnormals, 0.0, magnitude)
    value = np.where(negative, -magnitude, magnitude)

    magnitude_code = codes & np.uint64((1 << (fmt.exp_bits + M)) - 1)
    if fmt.special == "ieee":
        top = exp_field == fmt.exp_field_max
        value = np.where(top & (mantissa == 0), np.where(negative, -np.inf, np.inf), value)
        value = np.where(top & (mantissa != 0), np.nan, value)
    elif fmt.special == "fn":
        value = np.where(magnitude_code == np.uint64(fmt.nan_code), np.nan, value)
    elif fmt.special == "fnuz":
        value = np.where(codes == np.uint64(fmt.nan_code), np.nan, value)
    elif fmt.special == "p3109":  # +-inf at the top code of each sign, one NaN
        is_inf = magnitude_code == np.uint64(fmt.inf_code)
        value = np.where(is_inf, np.where(negative, -np.inf, np.inf), value)
        value = np.where(codes == np.uint64(fmt.nan_code), np.nan, value)
    return value


# --------------------------------------------------------------------------- fields

@dataclass(frozen=True)
class Fields:
    """The fields of one or many codes: sign bit, biased exponent field, mantissa field,
    the unbiased exponent the field stands for, and the class of each code.

    For zero and subnormals the unbiased exponent is ``emin`` (the exponent a subnormal's
    ``0.mmm`` significand is scaled by), not ``0 - bias``.

    >>> f = fields([0x3C00, 0x0001], "fp16")          # 1.0 and the smallest subnormal
    >>> f
    Fields(float16, 2 codes, kinds ['normal' 'subnormal'])
    >>> f.exponent.tolist(), f.unbiased_exponent.tolist(), f.mantissa.tolist()
    ([15, 0], [0, -14], [0, 1])
    """

    fmt: Format
    code: np.ndarray
    sign: np.ndarray
    exponent: np.ndarray
    mantissa: np.ndarray
    unbiased_exponent: np.ndarray
    kind: np.ndarray

    def __repr__(self) -> str:
        if self.code.ndim == 0:
            return (
                f"Fields({self.fmt.name} code={int(self.code):#0{2 + (self.fmt.bits + 3) // 4}x}: "
                f"sign={int(self.sign)}, exponent={int(self.exponent):0{self.fmt.exp_bits}b} "
                f"(unbiased {int(self.unbiased_exponent)}), mantissa="
                f"{int(self.mantissa):0{self.fmt.man_bits}b}"
                f"{'' if self.fmt.man_bits else '-'}, {self.kind})"
            )
        return f"Fields({self.fmt.name}, {self.code.size} codes, kinds {np.unique(self.kind)})"


def fields(codes_or_values: Any, fmt: str | Format | Any, **rounding_options: Any) -> Fields:
    """Split codes (integer input) or values (float input, rounded first) into their fields.

    >>> f = fields(3.141, "fp16")
    >>> int(f.sign), int(f.exponent), int(f.unbiased_exponent), int(f.mantissa), str(f.kind)
    (0, 16, 1, 584, 'normal')
    """
    fmt = get_format(fmt)
    arr = as_array(codes_or_values, "codes_or_values")  # (refuses [1.5, True]: True as 1.0)
    # (Python ints beyond int64, [2**64], are codes too: _as_codes checks them)
    if arr.dtype.kind in "iu" or (
            arr.dtype.kind == "O" and arr.size and all(_is_int(c) for c in arr.flat)):
        codes = _as_codes(arr, fmt).astype(fmt.code_dtype)
        if rounding_options:  # nothing is rounded: check them anyway, and say so
            _resolved_options(rounding_options)
            warnings.warn(
                f"{', '.join(sorted(rounding_options))} ignored: fields read integer input as "
                "codes, which are not rounded; pass float values to round them first",
                UserWarning, stacklevel=2,
            )
    else:
        # Checked here so that a bad value is named as this function's argument.
        codes = encode(as_float_array(arr, name="codes_or_values"), fmt, **rounding_options)
    c = codes.astype(np.uint64)
    M = fmt.man_bits
    mantissa = c & np.uint64((1 << M) - 1)
    exponent = (c >> np.uint64(M)) & np.uint64(fmt.exp_field_max)
    sign = (c >> np.uint64(fmt.exp_bits + M)) & np.uint64(1) if fmt.signed else np.zeros_like(c)
    values = decode(codes, fmt)
    low_field = (exponent == 0) & fmt.has_zero
    unbiased = np.where(low_field, fmt.emin, exponent.astype(np.int64) - fmt.bias)
    kind = np.select(
        [np.isnan(values), np.isinf(values), values == 0, low_field],
        ["nan", "inf", "zero", "subnormal"],
        default="normal",
    )
    return Fields(
        fmt=fmt,
        code=codes,
        sign=sign.astype(np.uint8),
        exponent=exponent.astype(fmt.code_dtype),
        mantissa=mantissa.astype(fmt.code_dtype),
        unbiased_exponent=unbiased.astype(np.int64),
        kind=kind,
    )


# The bit / hex strings are built on encode / decode above: imported last, so that
# floatlab.codec.to_bin & co. keep working (floatlab.bitstrings imports this module first).
from floatlab.bitstrings import (  # noqa: E402,F401
    bfloat16_to_bin,
    bin_to_bfloat16,
    bin_to_float16,
    bin_to_float32,
    codes_to_bin,
    codes_to_hex,
    float16_to_bin,
    float32_to_bin,
    from_bin,
    from_hex,
    to_bin,
    to_hex,
)
