"""Which format holds which: exact containment and torch's type promotion between formats.

One implementation, used by the emulated arithmetic (:mod:`floatlab.arith`,
:mod:`floatlab.accumulate`) and by the mixed-precision lab's policies.

>>> from floatlab import get_format
>>> widest(get_format("fp16"), get_format("bf16")).name   # neither holds the other
'float32'
"""

from __future__ import annotations

from floatlab.formats import Format, get_format

__all__ = ["contains", "widest"]

FP32 = get_format("float32")
FP64 = get_format("float64")

_CONTAINS: dict[tuple[int, int], tuple[Format, Format, bool]] = {}


def contains(wide: Format, narrow: Format) -> bool:
    """Whether every finite value of ``narrow`` is also a value of ``wide``.

    Used to skip roundings that cannot change anything (fp16 -> fp32 is exact) and to pick the
    widest input format of an element-wise op.

    >>> from floatlab import get_format
    >>> fp32, fp16, bf16 = get_format("fp32"), get_format("fp16"), get_format("bf16")
    >>> contains(fp32, bf16), contains(fp16, bf16)
    (True, False)
    """
    # Memoised by identity (hashing a Format dataclass costs more than the answer); the entry
    # keeps both formats alive so their ids cannot be reused.
    hit = _CONTAINS.get((id(wide), id(narrow)))
    if hit is None:
        hit = _CONTAINS[id(wide), id(narrow)] = (wide, narrow, _contains(wide, narrow))
    return hit[2]


def _contains(wide: Format, narrow: Format) -> bool:
    if wide == narrow:
        return True
    if (narrow.signed and not wide.signed) or (narrow.has_zero and not wide.has_zero):
        return False
    if wide.man_bits < narrow.man_bits or wide.max < narrow.max:
        return False
    # The finest quantum narrow uses is 2**(narrow.emin - narrow.man_bits) (at its lowest normal
    # binade, and across its subnormals); wide must resolve it where narrow's values live.
    finest = narrow.emin - narrow.man_bits
    if wide.subnormals:
        return max(narrow.emin, wide.emin) - wide.man_bits <= finest
    lowest = finest if narrow.subnormals else narrow.emin  # narrow's smallest positive exponent
    return wide.emin <= lowest and max(narrow.emin, wide.emin) - wide.man_bits <= finest


def widest(*fmts: Format) -> Format:
    """The format that holds all of ``fmts`` (one of them, else float32, else float64).

    This is torch's type promotion for element-wise ops: fp16 + fp32 -> fp32, and
    fp16 + bf16 -> fp32 because neither holds the other.

    >>> from floatlab import get_format
    >>> widest(get_format("fp16"), get_format("bf16")).name
    'float32'
    """
    best = fmts[0]
    for f in fmts[1:]:
        if contains(best, f):
            continue
        if contains(f, best):
            best = f
        else:
            best = FP32 if contains(FP32, best) and contains(FP32, f) else FP64
    return best
