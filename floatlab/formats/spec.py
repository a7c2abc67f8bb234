"""Spec names, the grammar that names any :class:`~floatlab.formats.Format` field by field
(``e<E>m<M> [b<bias>] [kind] [_unsigned] [_nozero] [_ftz]``, described in
:func:`~floatlab.formats.get_format`): written for a Format's default name, parsed back here.

>>> f = _from_spec("e5m3b16fn_unsigned")
>>> f.bias, f.signed, _spec_name(f, explicit_kind=False)
(16, False, 'e5m3b16fn_unsigned')
"""

from __future__ import annotations

import re
from typing import Any

from floatlab.formats.format import Format, _default_bias

_KIND_TOKEN = {"ieee": "", "fn": "fn", "fnuz": "fnuz", "none": "fn_nonan", "p3109": "_p3109"}
_EXPLICIT_KIND_TOKEN = {**_KIND_TOKEN, "ieee": "_ieee", "fn": "fn_nan"}
_TOKEN_KIND = {
    "": "ieee", "ieee": "ieee", "fn": "fn", "fn_nan": "fn", "fnu": "fn", "fnuz": "fnuz",
    "fn_nonan": "none", "p3109": "p3109",
}
_SPEC = re.compile(
    r"^e(?P<e>\d+)m(?P<m>\d+)(?:b(?P<bias>_?\d+))?"
    r"(?:_?(?P<kind>ieee|fnuz|fnu|fn_nonan|fn_nan|fn|p3109))?"
    r"(?P<flags>(?:_(?:unsigned|nozero|ftz))*)$",
    re.ASCII,  # digits 0-9 only: 'e\uff14m3' (a fullwidth 4) slipped past the ambiguous 'e4m3'
)
# Longer digit strings are out of range anyway; refused before int() (Python refuses strings
# over 4300 digits) and before 1 << (E - 1) (an OverflowError for E of 30 digits).
_MAX_DIGITS = 6


def _spec_name(fmt: Format, explicit_kind: bool) -> str:
    bias = "" if fmt.bias == _default_bias(fmt.exp_bits, fmt.special) else f"b{fmt.bias}"
    if fmt.special == "fn" and not fmt.signed and not fmt.has_zero:
        return f"e{fmt.exp_bits}m{fmt.man_bits}{bias}fnu"  # ml_dtypes' E8M0 spelling
    kind = (_EXPLICIT_KIND_TOKEN if explicit_kind else _KIND_TOKEN)[fmt.special]
    flags = "".join(
        f"_{flag}"
        for flag, present in (
            ("unsigned", not fmt.signed),
            ("nozero", not fmt.has_zero),
            ("ftz", fmt.has_zero and not fmt.subnormals),
        )
        if present
    )
    return f"e{fmt.exp_bits}m{fmt.man_bits}{bias}{kind}{flags}"


def _from_spec(spec: str) -> Format | None:
    """Parse a spec name (grammar in :func:`get_format`) into a Format; None if it is none."""
    match = _SPEC.match(spec)
    if match is None:
        return None
    for field, limit in (("e", "exp_bits: use 0..11"), ("m", "man_bits: use 0..52"),
                         ("bias", "bias: float64's exponents are -1022..1023")):
        if match[field] is not None and len(match[field].lstrip("_")) > _MAX_DIGITS:
            shown = spec if len(spec) <= 40 else spec[:40] + "..."
            raise ValueError(f"spec {shown!r} has a {len(match[field])}-digit {limit}")
    e, m = int(match["e"]), int(match["m"])
    token = match["kind"] or ""
    special = _TOKEN_KIND[token]
    flags = match["flags"]
    kwargs: dict[str, Any] = {"special": special}
    if token == "fnu" or "_unsigned" in flags:
        kwargs["signed"] = False
    if token == "fnu" or "_nozero" in flags:
        kwargs.update(has_zero=False, subnormals=False)
    if "_ftz" in flags:
        kwargs["subnormals"] = False
    bias = match["bias"]
    if bias is not None:
        kwargs["bias"] = -int(bias[1:]) if bias.startswith("_") else int(bias)
    else:
        kwargs["bias"] = _default_bias(e, special)
    return Format(exp_bits=e, man_bits=m, **kwargs)
