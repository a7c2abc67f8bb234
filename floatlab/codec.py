"""Bit-level codec: values <-> unsigned integer codes <-> bit and hex strings.

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

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from floatlab._interop import as_numpy, caller_type
from floatlab._rounding_fast import select_bits
from floatlab._validate import as_array, check_flag, resolve_rng
from floatlab.formats import PRESETS, Format, get_format
from floatlab.rounding import _CHUNK as _ROUND_CHUNK
from floatlab.rounding import _F32, _F64, _bits_of, _fits_float32, _resolve_mode, as_float_array
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
    rng). Works in chunks: beyond the codes it returns, memory stays a few bytes per element.

    >>> encode([1.0, -2.0, float("nan")], "e4m3fn")
    array([ 56, 192, 127], dtype=uint8)
    """
    back = caller_type(x)  # torch in, torch out
    if getattr(fmt, "is_element_format", False):  # FixedPoint / Codebook (floatlab.quant)
        return back(fmt.encode(x, **rounding_options))
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
    unknown = set(rounding_options) - {"rounding", "saturate", "subnormals", "rng"}
    if unknown:
        raise TypeError(
            f"unknown option(s) {', '.join(sorted(unknown))}; the rounding options are "
            "rounding, saturate, subnormals and rng (those of floatlab.round)"
        )
    options = dict(rounding_options)
    mode = _resolve_mode(options.get("rounding", "nearest_even"))
    options["rounding"] = mode
    for flag in ("saturate", "subnormals"):  # checked even when there is nothing to round
        if flag in options:
            options[flag] = check_flag(options[flag], flag)
    options["rng"] = resolve_rng(options.get("rng"), mode == "stochastic", mode)
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
        return back(fmt.decode(codes))
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
    arr = as_array(codes, "codes")
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
    arr = as_array(codes_or_values, "codes_or_values")
    if arr.dtype.kind in "iu":
        codes = _as_codes(arr, fmt).astype(fmt.code_dtype)
    else:
        codes = encode(arr, fmt, **rounding_options)
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


# --------------------------------------------------------------------------- strings

def _scalar_or_array(strings: np.ndarray) -> str | np.ndarray:
    return str(strings) if strings.ndim == 0 else strings


def codes_to_bin(codes: np.ndarray, fmt: Format, sep: str = "") -> np.ndarray:
    """Bit strings of codes, most significant bit first, with ``sep`` between the fields.

    The characters are written straight into the result's UTF-32 buffer from lookup tables
    (every code of a format up to 16 bits, or every byte), chunk by chunk.
    """
    sep = _check_sep(sep)
    codes = np.asarray(codes)
    plan = _bin_plan(fmt, sep)
    flat = codes.reshape(-1)
    out = np.empty(flat.size, dtype=f"U{plan.width}")
    chars = out.view(np.uint32).reshape(flat.size, plan.width)
    for start in range(0, flat.size, _STRING_CHUNK):
        piece = slice(start, start + _STRING_CHUNK)
        plan.write(flat[piece], chars[piece])
    return out.reshape(codes.shape)


_STRING_CHUNK = 1 << 15


def _check_sep(sep: Any) -> str:
    if not isinstance(sep, str):
        raise TypeError(
            f"sep must be a string put between the fields, such as ' ' or '_', got {sep!r} "
            f"({type(sep).__name__})"
        )
    return sep


# '0'/'1' as UTF-32 code points for every byte, most significant bit first.
_BYTE_CHARS = (
    ((np.arange(256)[:, None] >> np.arange(7, -1, -1)) & 1) + ord("0")
).astype(np.uint32)


class _BinPlan:
    """Where each bit's character and each separator go in a format's bit strings."""

    def __init__(self, fmt: Format, sep: str):
        widths = [w for w in ([1] if fmt.signed else []) + [fmt.exp_bits, fmt.man_bits] if w]
        boundaries = np.cumsum(widths)[:-1]  # bit positions (from the left) after which a sep
        self.bits, self.sep = fmt.bits, np.array([ord(c) for c in sep], dtype=np.uint32)
        position = np.arange(fmt.bits)  # 0 = most significant bit
        self.column = position + len(sep) * np.searchsorted(boundaries, position, side="right")
        self.width = fmt.bits + len(sep) * len(boundaries)
        self.sep_columns = np.setdiff1d(np.arange(self.width), self.column)
        self.table = None
        if fmt.bits <= 16:  # one row per code: a single gather writes whole strings
            every = np.arange(1 << fmt.bits, dtype=np.uint64)
            self.table = np.empty((every.size, self.width), dtype=np.uint32)
            self._write_bytes(every, self.table)

    def write(self, codes: np.ndarray, chars: np.ndarray) -> None:
        if self.table is not None:
            # mode="clip": codes are in range (encode made them), and numpy's default "raise"
            # mode buffers the whole output, several times slower.
            np.take(self.table, codes.astype(np.intp), axis=0, out=chars, mode="clip")
        else:
            self._write_bytes(codes.astype(np.uint64), chars)

    def _write_bytes(self, codes: np.ndarray, chars: np.ndarray) -> None:
        if self.sep.size:
            chars[:, self.sep_columns] = np.tile(self.sep, len(self.sep_columns) // self.sep.size)
        for k in range((self.bits + 7) // 8):  # byte k holds bits 8k .. 8k+7 (0 = least)
            byte = ((codes >> np.uint64(8 * k)) & np.uint64(0xFF)).astype(np.intp)
            bit_index = 8 * k + np.arange(7, -1, -1)  # of each of the byte's 8 characters
            keep = bit_index < self.bits
            columns = self.column[self.bits - 1 - bit_index[keep]]
            if keep.all() and columns[-1] - columns[0] == 7:  # contiguous: a plain slice
                chars[:, columns[0] : columns[0] + 8] = _BYTE_CHARS[byte]
            else:
                chars[:, columns] = _BYTE_CHARS[byte][:, keep]


@lru_cache(maxsize=16)
def _bin_plan(fmt: Format, sep: str) -> _BinPlan:
    return _BinPlan(fmt, sep)


def to_bin(x: Any, fmt: str | Format | Any, sep: str = "", **rounding_options: Any):
    """The bit string of ``x`` rounded to ``fmt`` (sign | exponent | mantissa).

    Returns a str for a scalar, an array of str otherwise.

    >>> to_bin(-1.5, "bf16", sep="_")
    '1_01111111_1000000'
    """
    fmt = get_format(fmt)
    sep = _check_sep(sep)  # before the rounding work
    codes = encode(as_numpy(x), fmt, **rounding_options)  # strings: numpy whatever came in
    return _scalar_or_array(codes_to_bin(codes, fmt, sep))


def to_hex(x: Any, fmt: str | Format | Any, **rounding_options: Any):
    """The hex code of ``x`` rounded to ``fmt``, e.g. ``'0x4248'`` (str for scalars).

    >>> to_hex([1.0, 448.0], "e4m3fn").tolist()
    ['0x38', '0x7e']
    """
    fmt = get_format(fmt)
    return _scalar_or_array(codes_to_hex(encode(as_numpy(x), fmt, **rounding_options), fmt))


_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def codes_to_hex(codes: np.ndarray, fmt: Format) -> np.ndarray:
    """Hex strings of codes, ``'0x'`` plus one digit per 4 bits of the format (vectorised)."""
    codes = np.asarray(codes, dtype=np.uint64)
    digits = (fmt.bits + 3) // 4
    shifts = np.arange(4 * (digits - 1), -1, -4, dtype=np.uint64)
    nibbles = (codes[..., None] >> shifts) & np.uint64(0xF)
    chars = np.empty(codes.shape + (digits + 2,), dtype=np.uint8)
    chars[..., 0], chars[..., 1] = ord("0"), ord("x")
    chars[..., 2:] = _HEX_DIGITS[nibbles.astype(np.intp)]
    return chars.view(f"S{digits + 2}")[..., 0].astype(f"U{digits + 2}")


def _clean(text: Any, prefix: str, what: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"expected a {what} string, got {type(text).__name__} {text!r}")
    cleaned = text.strip()
    if cleaned[:2].lower() == prefix:
        cleaned = cleaned[2:]
    cleaned = cleaned.replace("_", "").replace(" ", "").replace("|", "")
    if not cleaned:
        raise ValueError(f"empty {what} string {text!r}: give the digits, e.g. '{prefix}...'")
    return cleaned


def _parse_bin(text: Any, fmt: Format) -> int:
    digits = _clean(text, "0b", "bit")
    for position, char in enumerate(digits):
        if char not in "01":
            raise ValueError(
                f"bit string {text!r} has {char!r} at digit {position}: use only 0 and 1 "
                "(spaces, _ or | between fields and a 0b prefix are fine)"
            )
    if len(digits) != fmt.bits:
        layout = f"{'1 sign + ' if fmt.signed else ''}{fmt.exp_bits} exponent + {fmt.man_bits}"
        raise ValueError(
            f"bit string {text!r} has {len(digits)} bits but {fmt.name} needs {fmt.bits} "
            f"({layout} mantissa)"
        )
    return int(digits, 2)


def _parse_hex(text: Any, fmt: Format) -> int:
    digits = _clean(text, "0x", "hex")
    try:
        code = int(digits, 16)
    except ValueError:
        bad = next(c for c in digits if c.lower() not in "0123456789abcdef")
        raise ValueError(
            f"hex string {text!r} has {bad!r}, which is not a hex digit (0-9, a-f)"
        ) from None
    if code >= 1 << fmt.bits:
        raise ValueError(
            f"hex code {text!r} does not fit in the {fmt.bits} bits of {fmt.name} "
            f"(largest code {(1 << fmt.bits) - 1:#x})"
        )
    return code


def _decode_strings(strings: Any, fmt: Format, parse) -> float | np.ndarray:
    if isinstance(strings, str):
        return float(decode(parse(strings, fmt), fmt))
    arr = as_array(strings, "strings", dtype=object)
    codes = np.array([parse(s, fmt) for s in arr.reshape(-1)], dtype=np.uint64)
    return decode(codes.reshape(arr.shape), fmt)


def from_bin(bits: str | Any, fmt: str | Format | Any) -> float | np.ndarray:
    """The value of a bit string (a float), or of a list of them (an array).

    >>> from_bin("0 10000 1001001000", "fp16")
    3.140625
    >>> from_bin("0b0_1111_111", "e4m3fn")
    nan
    """
    return _decode_strings(bits, get_format(fmt), _parse_bin)


def from_hex(text: str | Any, fmt: str | Format | Any) -> float | np.ndarray:
    """The value of a hex code string such as ``'0x4248'`` (a float), or of a list of them.

    >>> from_hex("0x7bff", "fp16")
    65504.0
    """
    return _decode_strings(text, get_format(fmt), _parse_hex)


# --------------------------------------------------------------------------- tutorial names

def float16_to_bin(num: Any) -> str | np.ndarray:
    """The 16-bit pattern of ``num`` as float16.

    >>> float16_to_bin(3.141)
    '0100001001001000'
    """
    return to_bin(num, "float16")


def bin_to_float16(bits: str | Any) -> float | np.ndarray:
    """The float16 value of a 16-bit string.

    >>> bin_to_float16('0100001001001000')
    3.140625
    """
    return from_bin(bits, "float16")


def bfloat16_to_bin(num: Any) -> str | np.ndarray:
    """The 16-bit pattern of ``num`` as bfloat16.

    >>> bfloat16_to_bin(3.141)
    '0100000001001001'
    """
    return to_bin(num, "bfloat16")


def bin_to_bfloat16(bits: str | Any) -> float | np.ndarray:
    """The bfloat16 value of a 16-bit string.

    >>> bin_to_bfloat16('0100000001001001')
    3.140625
    """
    return from_bin(bits, "bfloat16")


def float32_to_bin(num: Any) -> str | np.ndarray:
    """The 32-bit pattern of ``num`` as float32.

    >>> float32_to_bin(1.0)
    '00111111100000000000000000000000'
    """
    return to_bin(num, "float32")


def bin_to_float32(bits: str | Any) -> float | np.ndarray:
    """The float32 value of a 32-bit string.

    >>> bin_to_float32('00111111100000000000000000000000')
    1.0
    """
    return from_bin(bits, "float32")
