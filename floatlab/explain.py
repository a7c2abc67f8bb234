"""One value, every step: how a number is stored in a format, and what that costs.

:func:`explain` follows one number into a format the way a learner would on paper: the sign,
the power-of-two *window* the number falls in (the exponent), which of the window's ``2**M``
equal *buckets* it lands in (the mantissa), the exact value stored, the rounding error, the ulp,
the neighbours, and -- when it happens -- why it overflows or underflows:

>>> e = explain(3.141, "fp16")
>>> e
float16(0x4248) 3.140625
>>> e.bits, e.value, e.previous, e.next
('0100001001001000', 3.140625, 3.138671875, 3.142578125)
>>> explain(10**6, "fp16").outcome
'overflow'

The neighbours, ulps and exact decimals come from :mod:`floatlab.grid`; rounding itself is
always done by :func:`floatlab.round`, decoding by :mod:`floatlab.codec`; floatlab only
reads and narrates their results. This module is the entry point (it checks the input and has
the core round it); :mod:`floatlab.explain_steps` writes the derivation,
:mod:`floatlab.explanation` holds the result and its text, :mod:`floatlab.explain_html` its
HTML.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from floatlab._validate import as_array, check_flag, resolve_rng
from floatlab.explain_html import FIELD_COLOURS  # noqa: F401 - widgets import it from here
from floatlab.explain_steps import (
    _Derivation,
    result_grid,  # noqa: F401 - widgets import it from here
)
from floatlab.explanation import Explanation
from floatlab.formats import Format, get_format
from floatlab.grid import _as_float64
from floatlab.rounding import _resolve_mode
from floatlab.rounding import round as round_to_format

__all__ = ["explain", "Explanation"]


def explain(
    x: Any,
    fmt: str | Format | Any,
    rounding: str = "nearest_even",
    saturate: bool = False,
    subnormals: bool = True,
    rng: np.random.Generator | int | None = None,
) -> Explanation:
    """Explain, step by step, how the single value ``x`` is stored in ``fmt``.

    The options are those of :func:`floatlab.round` (which does the rounding): ``rounding``
    mode, ``saturate`` overflow to +-max, ``subnormals=False`` to flush subnormal results to
    zero, ``rng`` for stochastic rounding. Warnings the rounding raises (E8M0 cannot hold 0 or
    negatives) become part of the explanation instead.

    >>> print(explain(1/3, "fp16"))  # doctest: +ELLIPSIS
    float16(0.3333333333333333) = 0.333251953125   [rounded; code 0x3555]
    ...
      value       (-1)^0 × 2^(13 - 15) × (1 + 341/1024) = 0.333251953125 exactly
    ...
    >>> explain(-0.0, "e4m3fnuz").bits      # FNUZ has no -0: the code 0x80 is its NaN
    '00000000'
    """
    if getattr(fmt, "is_element_format", False):  # FixedPoint / Codebook (floatlab.quant)
        # They always saturate and have no subnormals to flush, but a bad flag is still bad.
        check_flag(saturate, "saturate")
        check_flag(subnormals, "subnormals")
        return fmt.explain(x, rounding=rounding, rng=rng)
    fmt = get_format(fmt)
    mode = _resolve_mode(rounding)
    arr = as_array(x, "x")
    if arr.ndim != 0:
        index = ", ".join(["0"] * arr.ndim)  # x[0] of a 2-d x is still an array
        raise TypeError(
            f"explain takes one value, got an array of shape {arr.shape}: pass one element "
            f"(e.g. explain(x[{index}], {fmt.name!r})), or use floatlab.round / floatlab.to_bin "
            "for whole arrays"
        )
    x64 = float(_as_float64(x, "x"))
    rng = resolve_rng(rng, mode == "stochastic", mode)  # warns here, not inside the notes
    options = dict(rounding=mode, saturate=saturate, subnormals=subnormals, rng=rng)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = float(round_to_format(x64, fmt, **options))
    notes = [str(w.message) for w in caught]
    return _Derivation(x, x64, value, fmt, mode, saturate, subnormals, notes).build()
