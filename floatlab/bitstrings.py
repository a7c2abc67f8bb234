"""Bit and hex strings of a format's codes: rendering codes as strings (``to_bin``, ``to_hex``,
vectorised, written straight into the string buffers), parsing them back (``from_bin``,
``from_hex``, with errors that say which character or length is wrong), and the tutorial names
``float16_to_bin`` & friends. Codes come from, and go to, :mod:`floatlab.codec`, which
re-exports every name here.

>>> to_bin(3.141, "fp16", sep=" "), to_hex(3.141, "fp16")
('0 10000 1001001000', '0x4248')
>>> from_bin("0100001001001000", "fp16")
3.140625
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from floatlab._interop import as_numpy
from floatlab._validate import as_array, as_float_array
from floatlab.codec import decode, encode
from floatlab.formats import Format, get_format

__all__ = [
    "codes_to_bin",
    "codes_to_hex",
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
    """Hex strings of codes, ``'0x'`` plus one digit per 4 bits of the format (vectorised).

    The characters are written straight into the result's UTF-32 buffer, chunk by chunk: for
    formats of up to 4 digits from a table of every string (one gather), else digit by digit.
    A code is shown by its low ``4 * digits`` bits (the table is indexed by them), as the
    digit-by-digit path's masks of each nibble show it.
    """
    codes = np.asarray(codes, dtype=np.uint64)
    digits = (fmt.bits + 3) // 4
    flat = codes.reshape(-1)
    out = np.empty(flat.size, dtype=f"U{digits + 2}")
    chars = out.view(np.uint32).reshape(flat.size, digits + 2)
    table = _hex_table(digits) if digits <= 4 else None
    for start in range(0, flat.size, _STRING_CHUNK):
        piece = flat[start : start + _STRING_CHUNK]
        if table is not None:
            low = (piece & np.uint64((1 << 4 * digits) - 1)).astype(np.intp)
            np.take(table, low, axis=0, out=chars[start : start + _STRING_CHUNK], mode="clip")
        else:
            chars[start : start + _STRING_CHUNK] = _hex_chars(piece, digits)
    return out.reshape(codes.shape)


def _hex_chars(codes: np.ndarray, digits: int) -> np.ndarray:
    """'0x' and the digits of each code as UTF-32 code points, shape (codes, digits + 2)."""
    shifts = np.arange(4 * (digits - 1), -1, -4, dtype=np.uint64)
    nibbles = (codes[..., None] >> shifts) & np.uint64(0xF)
    chars = np.empty(codes.shape + (digits + 2,), dtype=np.uint32)
    chars[..., 0], chars[..., 1] = ord("0"), ord("x")
    chars[..., 2:] = _HEX_DIGITS[nibbles.astype(np.intp)]
    return chars


@lru_cache(maxsize=4)
def _hex_table(digits: int) -> np.ndarray:
    return _hex_chars(np.arange(1 << 4 * digits, dtype=np.uint64), digits)


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


_HEX_CHARS = frozenset("0123456789abcdefABCDEF")


def _parse_hex(text: Any, fmt: Format) -> int:
    digits = _clean(text, "0x", "hex")
    # Checked by hand: int(..., 16) also takes a sign, a second 0x and non-ASCII digits
    # ('+3c00', '0x0x3c00', '-0x1' and the Arabic-Indic '٣' were read as codes).
    bad = next((c for c in digits if c not in _HEX_CHARS), None)
    if bad is not None:
        raise ValueError(
            f"hex string {text!r} has {bad!r} at digit {digits.index(bad)}, which is not a "
            "hex digit (0-9, a-f; spaces, _ or | between digits and a 0x prefix are fine)"
        )
    code = int(digits, 16)
    if code >= 1 << fmt.bits:
        raise ValueError(
            f"hex code {text!r} does not fit in the {fmt.bits} bits of {fmt.name} "
            f"(largest code {(1 << fmt.bits) - 1:#x})"
        )
    return code


def _decode_strings(strings: Any, fmt: Format, parse) -> float | np.ndarray:
    if isinstance(strings, str):
        return float(decode(parse(strings, fmt), fmt))
    if _FAST_STRINGS and type(strings) is np.ndarray and strings.dtype.kind == "U":
        codes = _parse_unicode_array(strings, fmt, 16 if parse is _parse_hex else 2)
        if codes is not None:
            return decode(codes.reshape(strings.shape), fmt)
    arr = as_array(strings, "strings", dtype=object)
    codes = np.array([parse(s, fmt) for s in arr.reshape(-1)], dtype=np.uint64)
    return decode(codes.reshape(arr.shape), fmt)


_FAST_STRINGS = True  # the test switches it off to compare with the per-string parsers
_SEP, _BAD = -2, -1
# per base: each ASCII code point's digit value, _SEP for ' ', '_', '|', _BAD for the rest
_CHAR_VALUE = {}
for _base, _digits in ((2, "01"), (16, "0123456789abcdef")):
    _CHAR_VALUE[_base] = np.full(128, _BAD, dtype=np.int8)
    _CHAR_VALUE[_base][[ord(c) for c in " _|"]] = _SEP
    for _value, _char in enumerate(_digits):
        _CHAR_VALUE[_base][[ord(_char), ord(_char.upper())]] = _value


def _parse_unicode_array(strings: np.ndarray, fmt: Format, base: int) -> np.ndarray | None:
    """The codes of a NumPy str array (what to_bin / to_hex return) in whole-array passes,
    or None when any string is not of the plain form below (the per-string parser then
    gives every answer and every error, as before).

    Plain form, checked for every string: every character is a digit of ``base`` ('0'/'1';
    hex digits in either case) or a separator ' ', '_' or '|', except that a hex string may
    start with '0x' / '0X' (then all do); no string is shorter than the array's width (a NumPy
    str array pads shorter strings with NUL, which is not allowed); the digits sit in the same
    columns in every string (as to_bin / to_hex write them); a bit string has exactly
    ``fmt.bits`` digits; a hex string has at least one digit, at most 16 (so no uint64 wraps)
    and a code below ``2**fmt.bits``.

    Proof that this is what ``_parse_bin`` / ``_parse_hex`` return for such a string:
    ``_clean``'s ``strip()`` removes only leading / trailing whitespace, of which the form
    allows only ' ', and the ``replace`` calls that follow remove every ' ', '_' and '|' (a
    superset of what strip removed), so the cleaned text is the digits in order after the
    prefix; the prefix test (``[:2].lower() == '0x'``) can only match a string whose first two
    characters are '0' and 'x'/'X', since no separator or other 'x' is allowed (and '0b' can
    never match: 'b' is not a bit). The digit loop then finds no bad character and the length
    / size checks pass by the conditions above; ``int(digits, base)`` is the sum of each digit
    times ``base**k`` (k digits to its right) computed here, exact in uint64: every term and
    the sum are at most the code, below ``2**64``.
    """
    if not strings.dtype.isnative or strings.size == 0:
        return None
    width = strings.dtype.itemsize // 4
    if width == 0:
        return None
    flat = np.ascontiguousarray(strings.reshape(-1))
    chars = flat.view(np.uint32).reshape(flat.size, width)
    codes = np.empty(flat.size, dtype=np.uint64)
    for start in range(0, flat.size, _STRING_CHUNK):
        piece = chars[start : start + _STRING_CHUNK]
        code = _plain_codes(piece, fmt, base)
        if code is None:
            return None
        codes[start : start + _STRING_CHUNK] = code
    return codes


def _plain_codes(chars: np.ndarray, fmt: Format, base: int) -> np.ndarray | None:
    first = 0
    if base == 16 and chars.shape[1] >= 2:
        prefixed = (chars[:, 0] == ord("0")) & ((chars[:, 1] == ord("x"))
                                                | (chars[:, 1] == ord("X")))
        if prefixed.all():
            first = 2
        elif prefixed.any():
            return None
    body = chars[:, first:]
    if body.shape[1] == 0 or body.max() > 127:
        return None
    value = np.take(_CHAR_VALUE[base], body.astype(np.uint8))  # digit value, _SEP or _BAD
    digit = value >= 0
    if (value == _BAD).any() or not (digit == digit[0]).all():
        return None  # (every string with the digits in the same columns, as to_bin writes)
    count = int(digit[0].sum())
    if count != fmt.bits if base == 2 else not 1 <= count <= 16:
        return None
    digits = value if count == value.shape[1] else value[:, digit[0]]
    if base**count <= 2**53:  # digit k from the right weighs base**k: exact float64 sums
        weight = float(base) ** np.arange(count - 1, -1, -1)
        code = (digits.astype(np.float64) @ weight).astype(np.uint64)
    else:  # Horner's rule in uint64 (float64's codes, 14 to 16 hex digits)
        code = np.zeros(chars.shape[0], dtype=np.uint64)
        for column in range(count):
            code = code * np.uint64(base) + digits[:, column].astype(np.uint64)
    if base == 16 and fmt.bits < 64 and (code >= np.uint64(1 << fmt.bits)).any():
        return None
    return code


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

def _num(num: Any) -> np.ndarray:
    """``num`` checked under its own name (to_bin's errors would call it x)."""
    return as_float_array(as_numpy(num), name="num")


def float16_to_bin(num: Any) -> str | np.ndarray:
    """The 16-bit pattern of ``num`` as float16.

    >>> float16_to_bin(3.141)
    '0100001001001000'
    """
    return to_bin(_num(num), "float16")


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
    return to_bin(_num(num), "bfloat16")


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
    return to_bin(_num(num), "float32")


def bin_to_float32(bits: str | Any) -> float | np.ndarray:
    """The float32 value of a 32-bit string.

    >>> bin_to_float32('00111111100000000000000000000000')
    1.0
    """
    return from_bin(bits, "float32")
