"""quantize / dequantize: one core for every block-scaled scheme.

``quantize(x, scheme)`` splits ``x`` into the scheme's blocks, computes each block's amax and
scale (:mod:`floatlab.quant.scales`), divides, and rounds the elements with
:func:`floatlab.round` (codebooks: nearest entry), saturating at the element's max. It returns a
:class:`QuantizedTensor` with the codes (4- and 6-bit codes packed), the scales and their
codes, and the statistics. :func:`fake_quantize` is the plain-array fast entry (the dequantised
array, optionally with the stats) for code that quantises every step.

Arithmetic (the choices a reader should know):

* The working precision is the input's: float32 inputs (and narrower: bf16, fp16) are scaled in
  float32 as the kernels do, float64 inputs in float64. ``x / s`` is exact for power-of-two
  scales; for other scales it is one rounding in the working precision, then the element
  rounding (torchao divides in float32 too). Dequantising multiplies ``e * s`` in the working
  precision (exact for power-of-two scales unless the product underflows).
* Non-nearest element modes (stochastic, directed) on float32 inputs work in float64, so a
  quotient below float32's normal range keeps its exact value; except the hardware's
  stochastic rounding (``Scheme(random_bits=k)``, NVFP4's gradients), which rounds the
  float32 quotient with k random bits per value, as the kernels do
  (:func:`floatlab.quant.elements.round_random_bits`).
* NaN / inf anywhere: ValueError (the amax of a block is undefined). The OCP reference code
  instead gives such a block the NaN scale (all its elements NaN); floatlab refuses so that a
  NaN never hides inside a quantised tensor.
* An empty tensor has no blocks: its result is empty, x's shape, in the working precision, with
  0 scales (as mx_quantize, NumPy and torch take empty arrays; a two-level scheme's global
  scale is an all-zero tensor's). Block structures that do not fit the shape still raise (a
  2-D tile on a vector). 0-d arrays: ValueError (no blocks to scale); integer inputs beyond
  2**53: ValueError. Inputs are never modified.

>>> import numpy as np, floatlab
>>> q = floatlab.quantize(np.linspace(-1, 1, 64, dtype=np.float32), "mxfp8")
>>> q
QuantizedTensor(mxfp8_e4m3, shape (64,), 2 scales, 8.25 bits/value, QSNR 32.0 dB)
>>> q.scales, q.scale_codes
(array([0.00390625, 0.00390625]), array([119, 119], dtype=uint8))
>>> float(np.max(np.abs(q.dequantize() - np.linspace(-1, 1, 64)))) < 2**-5
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from floatlab._validate import as_array, check_flag, resolve_rng
from floatlab.formats import Format
from floatlab.quant.blocks import (
    _amax_and_max,
    _blocked,
    _grid_shape,
    _scale_view_shape,
    _unblock,
    raise_nonfinite,
)
from floatlab.quant.codebook import Codebook
from floatlab.quant.elements import (
    _FLOAT_TYPES,
    _codes_of_values,
    _element_values,
    _round_scaled,
    _work_dtype,
)
from floatlab.quant.hadamard import apply_hadamard, hadamard_matrix
from floatlab.quant.packing import pack_codes, unpack_codes
from floatlab.quant.scales import block_scales
from floatlab.quant.scheme import DQ8_BLOCK, Scheme, get_scheme
from floatlab.rounding import as_float_array

__all__ = ["quantize", "dequantize", "fake_quantize", "quantize_elements", "QuantizedTensor",
           "QuantStats", "pack_codes", "unpack_codes", "hadamard_matrix"]

def _as_input(x: Any) -> np.ndarray:
    # A float32 / float64 ndarray in the machine's byte order is what as_float_array returns
    # unchanged (it is not masked: its type is exactly ndarray); skip its checks for the
    # per-step callers.
    arr = (x if type(x) is np.ndarray and x.dtype.type in _FLOAT_TYPES and x.dtype.isnative
           else as_float_array(x))
    if arr.ndim == 0:
        raise ValueError("x is 0-d, but quantisation works on blocks of a tensor; pass "
                         "np.atleast_1d(x)")
    return arr


def _check_shape(shape: Any) -> tuple[int, ...] | None:
    """dequantize's ``shape``: None, an int or a tuple of non-negative ints (as numpy takes)."""
    if shape is None:
        return None
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    if not isinstance(dims, (tuple, list)) or not all(
            isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_))
            for n in dims):
        raise TypeError(f"shape must be a tuple of non-negative ints such as q.shape, got "
                        f"{shape!r}")
    if any(n < 0 for n in dims):  # a wrong value, as numpy's "negative dimensions"
        raise ValueError(f"shape must be a tuple of non-negative ints such as q.shape, got "
                         f"{shape!r}")
    return tuple(int(n) for n in dims)


def _hadamard(arr: np.ndarray, scheme: Scheme, inverse: bool = False) -> np.ndarray:
    return apply_hadamard(arr, scheme.hadamard, scheme.axis, inverse=inverse)


# =============================================================================== results

@dataclass(frozen=True)
class QuantStats:
    """What quantisation did to a tensor.

    qsnr_db : ``10 log10(sum x**2 / sum (x - dequantised)**2)`` (inf when exact).
    clipped_fraction : share of elements whose scaled value ``|x / s|`` (in the working
        precision) exceeded the element's max, so saturation clipped them to it. (A block's amax
        element that lands a rounding above max with a float32 scale counts, too.)
    flushed_fraction : share of the *nonzero* elements of x that became 0.
    scale_histogram : {log2 of the scale: number of blocks}, for power-of-two scales; for other
        scales {floor(log2 scale): count} (zero scales are left out).
    """

    qsnr_db: float
    clipped_fraction: float
    flushed_fraction: float
    scale_histogram: dict[int, int]
    n: int

    def __str__(self) -> str:
        return (f"QSNR {self.qsnr_db:.2f} dB, clipped {100 * self.clipped_fraction:.3f}%, "
                f"flushed to zero {100 * self.flushed_fraction:.3f}% of {self.n} values")


class QuantizedTensor:
    """The result of :func:`quantize`: codes, scales, and what it cost (see attributes).

    Attributes: ``codes`` (uint8; 4-/6-bit codes packed, :meth:`unpack` gives one per value),
    ``scales`` (float64 values, one per block, shaped blocks-per-axis), ``scale_codes``,
    ``global_scale`` (float or None), ``scheme``, ``shape``, ``dtype`` (the working precision),
    ``nbytes`` (codes + scale codes + global scale), ``bits_per_value``, ``stats``.

    >>> import numpy as np
    >>> q = quantize(np.linspace(-1, 1, 64), "mxfp8")
    >>> q
    QuantizedTensor(mxfp8_e4m3, shape (64,), 2 scales, 8.25 bits/value, QSNR 32.0 dB)
    >>> q.scales, q.scale_codes, q.nbytes                   # 2**-8 each, E8M0 code 119
    (array([0.00390625, 0.00390625]), array([119, 119], dtype=uint8), 66)
    """

    def __init__(self, *, codes, scales, scale_codes, global_scale, scheme, shape, dtype,
                 elements, effective, source, transformed, clipped, padded, extra_bytes=0):
        self.codes = codes
        self.scales = scales
        self.scale_codes = scale_codes
        self.global_scale = global_scale
        self.scheme = scheme
        self.shape = shape
        self.dtype = dtype
        self._padded = padded
        self._elements = elements      # padded-blocked element values (working dtype)
        self._effective = effective    # per-block dequantisation multipliers (working dtype)
        self._source = source          # x as passed (read for stats only)
        self._transformed = transformed
        self._clipped = clipped
        self._extra_bytes = extra_bytes
        self._dequantized = None       # fake_quantize's result, when it has one (for stats)
        for a in (codes, scales, scale_codes):
            a.setflags(write=False)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def unpack(self) -> np.ndarray:
        """The element codes, one per value, in x's shape."""
        bits = self.scheme.element.bits
        if bits in (4, 6):
            return unpack_codes(self.codes, bits, self.size).reshape(self.shape)
        return self.codes

    def dequantize(self) -> np.ndarray:
        """``element * scale`` per block, in the working precision, x's shape."""
        with np.errstate(under="ignore", over="ignore"):  # (the product's rounding: _DEQ_NOTE)
            out = _unblock(self._elements * self._effective, self._padded, self.shape)
        if self.scheme.hadamard:
            out = _hadamard(out, self.scheme, inverse=True)
        return out

    @property
    def nbytes(self) -> int:
        """Bytes of the packed storage: element codes + scale codes (+ 4 for a global scale)."""
        total = self.codes.nbytes + self.scale_codes.nbytes + self._extra_bytes
        return total + (4 if self.global_scale is not None else 0)

    @property
    def bits_per_value(self) -> float:
        return 8.0 * self.nbytes / self.size if self.size else math.nan  # (no values)

    @cached_property
    def stats(self) -> QuantStats:
        """Computed on first access, from x as it was passed (do not modify x before)."""
        x = np.asarray(self._source, dtype=np.float64)
        deq = self._dequantized if self._dequantized is not None else self.dequantize()
        deq = deq.astype(np.float64, copy=False)
        qsnr = qsnr_db(x, deq)
        nonzero = x != 0
        n_nonzero = int(np.count_nonzero(nonzero))
        flushed = int(np.count_nonzero(nonzero & (deq == 0)))
        scales = np.asarray(self._effective, dtype=np.float64).reshape(-1)
        scales = scales[scales > 0]
        exps = np.frexp(scales)[1] - 1
        keys, counts = np.unique(exps, return_counts=True)
        return QuantStats(
            qsnr_db=qsnr,
            clipped_fraction=self._clipped / self.size if self.size else 0.0,
            flushed_fraction=flushed / n_nonzero if n_nonzero else 0.0,
            scale_histogram={int(k): int(c) for k, c in zip(keys, counts, strict=True)},
            n=self.size,
        )

    def __repr__(self) -> str:
        label = self.scheme.name or self.scheme.describe()
        return (f"QuantizedTensor({label}, shape {self.shape}, {self.scales.size} scale"
                f"{'s' * (self.scales.size != 1)}, {self.bits_per_value:.6g} bits/value, "
                f"QSNR {self.stats.qsnr_db:.1f} dB)")


def qsnr_db(x: np.ndarray, deq: np.ndarray) -> float:
    """``10 log10(sum x**2 / sum (x - deq)**2)`` in float64, at any magnitude of ``x`` and
    ``deq`` (see :func:`_squared_sums`): inf when exact, -inf when x is all zeros and deq is
    not, or when the error is infinite (a float32 dequantisation that overflowed to inf: see
    _DEQ_NOTE)."""
    x, deq = np.asarray(x, dtype=np.float64), np.asarray(deq, dtype=np.float64)
    err, sig, shift = _squared_sums(x, deq)
    if err == 0:
        return math.inf
    if not err < math.inf:
        return -math.inf
    top = _top_exponent(x)
    if top is not None and top + shift < -480:
        # x lies so far below deq (a float64-subnormal block given E8M0's smallest scale,
        # 2**-127) that its squares lose their precision or underflow at deq's scale: sum
        # x**2 at x's own scale, and the two scales' ratio added in the log
        sig_own, own_shift = _squared_sums(x, np.zeros_like(x))[1:]
        return 10 * math.log10(sig_own / err) + 20 * (shift - own_shift) * math.log10(2)
    return 10 * math.log10(sig / err) if sig > 0 else -math.inf


def _top_exponent(a: np.ndarray) -> int | None:
    """The exponent E (frexp's) of the largest finite |a|; None when there is none > 0."""
    finite = np.abs(a[np.isfinite(a)])
    top = float(finite.max()) if finite.size else 0.0
    return int(np.frexp(top)[1]) if top > 0 else None


def _squared_sums(x: np.ndarray, deq: np.ndarray) -> tuple[float, float, int]:
    """``sum((x - deq)**2)`` and ``sum(x**2)``, both times the same power of two
    ``2**(2 * shift)``, and ``shift``: their ratio (the QSNR) for any magnitude of ``x``.

    Squared as they are, values beyond 2**±511 (1e±154) overflowed to inf / underflowed to 0:
    x * 1e170 gave a QSNR of NaN (inf / inf) and x * 1e-170 of inf dB (an error of 0), where
    the values were all flushed to zero (0 dB). ``x`` and ``deq`` are scaled by 2**-E, E the
    exponent of the largest finite |x| or |deq|: exact, so the ratio is unchanged for
    ordinary data, and the few squares that still underflow are negligible terms (not an
    error, so no flag under np.errstate(under="raise")). (E from x alone overflowed the
    squares when deq is far larger than x: a float64-subnormal block rounded up to an element
    times E8M0's smallest scale 2**-127 gave an infinite error, -inf dB and a RuntimeWarning.)
    """
    tops = [e for e in (_top_exponent(x), _top_exponent(deq)) if e is not None]
    shift = -max(tops) if tops else 0
    with np.errstate(under="ignore"):
        xs, ds = np.ldexp(x, shift), np.ldexp(deq, shift)
        return float(np.sum((xs - ds) ** 2)), float(np.sum(xs**2)), shift


# =============================================================================== the core

def _core(x: Any, scheme: Scheme, rng: Any, want_codes: bool):
    arr = _as_input(x)
    source = arr
    transformed = None
    if scheme.hadamard:
        if not np.all(np.isfinite(arr)):
            raise_nonfinite(arr)
        arr = transformed = _hadamard(arr, scheme)
    work = _work_dtype(arr.dtype, scheme)
    if _NARROW_AMAX and arr.dtype == np.float32 and work is np.float64:
        # Block amaxes of the float32 values, then widened: the same values as those of the
        # widened array (float32 -> float64 is exact and increasing; NaN / inf raise alike),
        # from half the bytes (stochastic rounding works in float64).
        amax, largest = _amax_and_max(_blocked(arr, scheme).view)
        amax = amax.astype(np.float64)
        arr = arr.astype(work)
        b = _blocked(arr, scheme)
    else:
        arr = arr.astype(work, copy=False)
        b = _blocked(arr, scheme)
        amax, largest = _amax_and_max(b.view)  # finite (NaN / inf raise)
    tensor_amax = largest if scheme.global_scale else None
    if arr.size:
        scales, scale_codes, g, effective = block_scales(amax, scheme, tensor_amax, want_codes)
    else:  # no blocks: the scales' dtypes (and a global scale) as an all-zero tensor gets
        one = block_scales(np.zeros((1,) * amax.ndim, amax.dtype), scheme, tensor_amax,
                           want_codes)
        scales, scale_codes, effective = (None if a is None else np.zeros(amax.shape, a.dtype)
                                          for a in (one[0], one[1], one[3]))
        g = one[2]
    eff = effective.astype(work)
    rng = resolve_rng(rng, scheme.rounding == "stochastic", scheme.rounding)
    if not arr.size:  # an empty tensor: no blocks, no elements (as numpy and torch, no error)
        elements, codes, clipped = b.view.copy(), None, 0
    else:
        elements, codes, clipped, _ = _round_scaled(b.view, eff, amax, scheme.element,
                                                    scheme.rounding, rng, count=want_codes,
                                                    random_bits=scheme.random_bits)
    elements = elements.astype(work, copy=False)
    extra = 0
    if scheme.scale == "dq8" and scales.size:
        scales, scale_codes, eff, extra = _double_quantize(scales, work)
    return source, transformed, b, elements, codes, scales, scale_codes, g, eff, clipped, extra


# _DEQ_NOTE: dequantising multiplies element * scale in the working precision; a small scale
# (one clamped to the scale format's smallest normal, a tiny float32 block) puts the product in
# float32's subnormals, or below them: that rounding is the emulation's result (the kernels'
# float32 product), not a FloatingPointError under a caller's np.errstate(under="raise").
# At the top, a block whose amax is near float32's max (3e38) can round an element up past it
# (E2M1 with "ceil" scales: 3e38 / 2**126 = 3.53 rounds to 4, and 4 * 2**126 = 2**128): the
# float32 product is inf, as the exact value rounded to float32 is (and the kernels' product
# gives), so that overflow is the result too, not a NumPy RuntimeWarning of floatlab's own.

_NARROW_AMAX = True  # switch for the tests, which check it against the widened array's amaxes


def _double_quantize(absmax: np.ndarray, work: Any):
    """QLoRA's double quantisation of the float32 absmax values (as bitsandbytes does it).

    The elements were quantised with the exact absmax; the stored absmax are ``offset +
    dynamic8-blockwise(absmax - offset)`` with ``offset = mean(absmax)`` (float32) and blocks of
    256, so dequantising uses the approximated absmax.
    """
    flat = absmax.reshape(-1).astype(np.float32)  # (float32 scales: exact)
    with np.errstate(over="ignore"):  # (overflow: refused below, with its cause)
        offset = np.float32(flat.mean(dtype=np.float32))
    if not np.isfinite(offset):
        # (the nested quantisation then saw inf and blamed x for holding inf values)
        raise ValueError(f"dq8 scales store the block absmaxes and their mean in float32, as "
                         f"bitsandbytes does; these (the largest {float(flat.max()):g}) are so "
                         "large that their float32 sum for the mean (the offset) overflows; "
                         "scale the tensor down first, or use scale='float32'")
    nested = quantize(flat - offset, get_scheme("dynamic8").replace(block=DQ8_BLOCK))
    approx = (nested.dequantize().astype(np.float32) + offset).astype(np.float64)
    extra = nested.scale_codes.nbytes + 4  # the nested float32 absmax values + the offset
    return (approx.reshape(absmax.shape), nested.codes.reshape(absmax.shape).copy(),
            approx.reshape(absmax.shape).astype(work), extra)


def quantize(x: Any, scheme: str | Scheme, rng: np.random.Generator | int | None = None
             ) -> QuantizedTensor:
    """Quantise ``x`` with a :class:`Scheme` (or a preset name); see the module docstring.

    >>> import numpy as np
    >>> q = quantize(np.array([[0.3, -1.2, 5.0, 0.01]]), "nvfp4")
    >>> q.scales.tolist(), q.global_scale, q.unpack().tolist()
    ([[448.0]], 0.0018601190531626344, [[1, 11, 7, 0]])
    >>> q.dequantize()                  # the block scale g * 448 is a float32 product
    array([[ 0.41666666, -1.24999997,  4.99999988,  0.        ]])
    """
    scheme = get_scheme(scheme)
    source, transformed, b, elements, codes, scales, scale_codes, g, eff, clipped, extra = \
        _core(x, scheme, rng, want_codes=True)
    element = scheme.element
    if codes is None:
        codes = _codes_of_values(elements, element)
    codes = _unblock(codes, b.padded, b.shape)
    if element.bits in (4, 6):
        codes = pack_codes(codes, element.bits)
    return QuantizedTensor(
        codes=codes, scales=_grid_shape(scales, b.grid),
        scale_codes=_grid_shape(scale_codes, b.grid), global_scale=g,
        scheme=scheme, shape=b.shape, dtype=elements.dtype, elements=elements, effective=eff,
        source=source, transformed=transformed, clipped=clipped, padded=b.padded, extra_bytes=extra)


def fake_quantize(x: Any, scheme: str | Scheme, rng: np.random.Generator | int | None = None,
                  *, stats: bool = False, rotated: bool = False):
    """The dequantised array ``dequantize(quantize(x, scheme))`` without codes: the fast entry
    for code that quantises operands every step. ``stats=True`` also returns the QuantStats.

    ``rotated=True`` (schemes with ``hadamard``; ignored without): the dequantised values are
    left in the rotated basis, ``q(x R)`` per block instead of ``q(x R) Rᵀ``. That is what a
    GEMM reads when both its operands were rotated by the same ``R`` along the inner dimension
    (NVFP4's wgrad: ``(gᵀR)(xᵀR)ᵀ = gᵀ R Rᵀ x = gᵀx``, since R is orthogonal), so no inverse
    transform is computed. The stats then compare the rotated input ``x R`` with these values:
    the error the 4-bit codes make (the same QSNR as in the original basis up to the rounding
    of the transforms, since R preserves sums of squares), and the share of the rotated
    input's non-zero values flushed to 0.

    >>> fake_quantize(np.array([0.3, 1.0, -2.5, 7.0]), "mxfp4")    # scale 2**(2 - 2)
    array([ 0.5,  1. , -2. ,  6. ])
    """
    scheme = get_scheme(scheme)
    check_flag(rotated, "rotated")
    stats = check_flag(stats, "stats")
    parts = _core(x, scheme, rng, want_codes=stats)
    source, transformed, b, elements, _, _, _, _, eff, _, _ = parts
    # Without stats the elements are scratch of this call: dequantise them in place.
    with np.errstate(under="ignore", over="ignore"):  # (the product's rounding: _DEQ_NOTE)
        deq = elements * eff if stats else np.multiply(elements, eff, out=elements)
    out = _unblock(deq, b.padded, b.shape)
    rotated = rotated and bool(scheme.hadamard)
    if scheme.hadamard and not rotated:
        out = _hadamard(out, scheme, inverse=True)
    if not stats:
        return out
    # the values dequantize() would recompute (Hadamard inverted), or with rotated=True the
    # rotated ones, compared with the rotated source
    return out, _stats_without_codes(scheme, parts, transformed if rotated else source, out)


def _stats_without_codes(scheme: Scheme, parts: tuple, source: np.ndarray,
                         dequantized: np.ndarray | None) -> QuantStats:
    """The QuantStats of ``_core``'s ``parts`` when no codes were made (fake_quantize,
    quantize_elements): those of a QuantizedTensor holding no codes, comparing ``source`` with
    ``dequantized`` (None: the tensor's own dequantize())."""
    _, transformed, b, elements, _, scales, scale_codes, g, eff, clipped, extra = parts
    qt = QuantizedTensor(
        codes=np.zeros(0, np.uint8), scales=_grid_shape(scales, b.grid).copy(),
        scale_codes=_grid_shape(scale_codes, b.grid).copy(), global_scale=g, scheme=scheme,
        shape=b.shape, dtype=elements.dtype, elements=elements, effective=eff,
        source=source, transformed=transformed, clipped=clipped, padded=b.padded,
        extra_bytes=extra)
    qt._dequantized = dequantized
    return qt.stats


def quantize_elements(x: Any, scheme: str | Scheme, rng: np.random.Generator | int | None = None,
                      *, stats: bool = False):
    """The two factors of the dequantised values, unmultiplied: ``(elements, scales, block,
    stats)``, what a scaled GEMM kernel reads (DeepSeek-V3 / DeepGEMM multiply the E4M3 codes
    and apply the block scales to the sums: :mod:`floatlab.mixed.promoted_gemm`).

    ``elements`` : the element values (the codes' values), x's shape, the working precision;
    ``scales`` : the per-block dequantisation multipliers, one per block (the blocks-per-axis
    grid), the working precision; ``block`` : the tile each scale covers, per axis (cut to a
    shorter axis, as the quantiser does); ``stats`` : the QuantStats with ``stats=True``, else
    None. ``fake_quantize(x, scheme)`` is ``elements * scales`` per block in the working
    precision: the same numbers (tests/test_promoted_gemm.py). Schemes with a Hadamard transform
    or DQ8's nested scales are refused (their values are not one element times one scale).

    >>> e, s, block, _ = quantize_elements(np.array([[0.3, -1.0, 2.0, 8.0]]), "fp8_1x128")
    >>> e.tolist(), s.tolist(), block          # the scale 8 / 448, a float32 number
    ([[16.0, -56.0, 112.0, 448.0]], [[0.01785714365541935]], (1, 4))
    """
    scheme = get_scheme(scheme)
    if scheme.hadamard or scheme.scale == "dq8":
        raise ValueError(f"quantize_elements: {scheme.name or scheme.describe()} is not one "
                         "element times one block scale (Hadamard / nested scales); use "
                         "fake_quantize")
    stats = check_flag(stats, "stats")
    parts = _core(x, scheme, rng, want_codes=stats)
    source, _, b, elements, _, _, _, _, eff, _, _ = parts
    grid_scales = _grid_shape(eff, b.grid)
    # (an empty axis has no blocks: its tile is 1, as blocks._clamped cuts it)
    block = tuple(p // n if n else 1 for p, n in zip(b.padded, b.grid, strict=True))
    values = _unblock(elements, b.padded, b.shape)
    if not stats:
        return values, grid_scales, block, None
    return values, grid_scales, block, _stats_without_codes(scheme, parts, source, None)


def dequantize(codes: Any, scales: Any, scheme: str | Scheme, *,
               global_scale: float | None = None, shape: tuple[int, ...] | None = None,
               dtype: Any = np.float64) -> np.ndarray:
    """Values from stored codes and block scales: ``element(code) * scale`` per block.

    ``codes``: one code per value (x's shape), or the packed bytes of 4-/6-bit elements with
    ``shape`` given. ``scales``: the block scale values (``QuantizedTensor.scales``);
    ``global_scale`` is required for two-level schemes (NVFP4). ``dtype`` is the precision of
    the product: float64 by default, so for scales that are not powers of two (rowwise,
    per-tensor) pass ``dtype=np.float32`` to match a float32 input's ``q.dequantize()``.

    >>> q = quantize(np.array([0.3, -1.2, 5.0, 0.01]), "mxfp4")
    >>> dequantize(q.codes, q.scales, "mxfp4", shape=q.shape).tolist()   # 5 ties to 4
    [0.5, -1.0, 4.0, 0.0]
    """
    scheme = get_scheme(scheme)
    element = scheme.element
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype must be float32 or float64, got {dtype}")
    arr = as_array(codes, "codes")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"codes must be unsigned integer codes, got dtype {arr.dtype}")
    shape = _check_shape(shape)
    packed_size = -(-math.prod(shape) * element.bits // 8) if shape is not None else None
    if element.bits in (4, 6) and arr.dtype == np.uint8 and shape is not None and not (
            arr.shape == shape and arr.size != packed_size):  # (one code per value: as is)
        # (unpacked codes, q.unpack(), with shape=q.shape were read as packed bytes: pairs of
        # codes from each byte, the values silently scrambled; extra bytes were ignored)
        if arr.size != packed_size:
            raise ValueError(f"codes hold {arr.size} values, neither one code per value of "
                             f"shape {shape} nor its {packed_size} packed bytes; pass q.codes "
                             "(packed) or q.unpack() (one code per value)")
        arr = unpack_codes(arr, element.bits, math.prod(shape)).reshape(shape)
    elif shape is not None and shape != arr.shape:
        raise ValueError(f"codes have shape {arr.shape}, not {shape}")
    low, high = (int(arr.min()), int(arr.max())) if arr.size else (0, 0)  # (one pass each)
    if element.bits in (4, 6) and high >= 1 << element.bits:
        raise ValueError(f"codes exceed {element.bits} bits: pass packed codes with shape=... "
                         "or one code per value")
    if low < 0 or high >= 1 << element.bits:
        # (a code beyond the table was read as NaN, a negative one clipped to code 0)
        raise ValueError(f"codes of {element.name} run from 0 to {(1 << element.bits) - 1}, "
                         f"got {low if low < 0 else high}; pass the "
                         "codes quantize() stored (QuantizedTensor.codes)")
    if arr.ndim == 0:  # (empty codes are an empty tensor's: they give an empty array)
        raise ValueError("codes must be an array with at least one dimension (0-d codes have "
                         "no blocks); pass QuantizedTensor.codes")
    if isinstance(element, Codebook) and np.any(element._index_of_code[arr] < 0):
        # (a code no entry has, fp4_bnb's 8: its table slot is NaN)
        raise ValueError(f"codes hold a code that codebook {element.name} does not use; pass "
                         "the codes quantize() stored (QuantizedTensor.codes)")
    if isinstance(scales, np.ndarray) and scales.dtype.kind == "u":
        # (q.scale_codes' dtypes, uint8 or uint32 bit patterns, never scale values': read as
        # values, the codes were dequantised silently wrong)
        raise TypeError(f"scales has dtype {scales.dtype}, as QuantizedTensor.scale_codes do: "
                        "dequantize takes the scale values; pass q.scales")
    # (64-bit formats' codes stay unsigned: float64 patterns of negative values pass 2**63)
    wide = element.bits > 16 and isinstance(element, Format)
    values = _element_values(arr if wide else arr.astype(np.intp), element, dtype)
    b = _blocked(values, scheme)
    sc = np.asarray(as_float_array(scales, name="scales"), dtype=np.float64)
    if sc.shape != b.grid:
        raise ValueError(f"scales have shape {sc.shape}; {scheme.name or 'this scheme'} on "
                         f"shape {arr.shape} has {b.grid} blocks")
    # (dq8's stored scales are approximations, which may dip below 0: only finite there)
    bad = ~np.isfinite(sc) if scheme.scale == "dq8" else ~(np.isfinite(sc) & (sc >= 0))
    if bad.any():
        raise ValueError(f"scales must be finite{'' if scheme.scale == 'dq8' else ' and >= 0'}"
                         f" (block amaxes over the element's max), got {sc[bad][:3].tolist()}; "
                         "pass QuantizedTensor.scales")
    if scheme.scale in ("e8m0", "pow2"):
        low, high = (-127, 127) if scheme.scale == "e8m0" else (-149, 127)
        mant, exp = np.frexp(sc)
        bad = (mant != 0.5) | (exp - 1 < low) | (exp - 1 > high)
        if np.any(bad):
            raise ValueError(f"scales of a {scheme.scale} scheme are powers of two in "
                             f"[2**{low}, 2**{high}]; got {sc[bad].reshape(-1)[:3].tolist()}")
    if scheme.global_scale:
        if global_scale is None:
            raise ValueError("this scheme has a global (per-tensor) scale: pass "
                             "global_scale=q.global_scale")
        if isinstance(global_scale, (bool, np.bool_)) or not isinstance(
                global_scale, (int, float, np.integer, np.floating)):
            raise TypeError(f"global_scale must be a number (q.global_scale), got "
                            f"{global_scale!r}")
        try:
            finite, shown = math.isfinite(global_scale), repr(global_scale)
        except OverflowError:  # a Python int beyond float64 (10**400)
            finite, shown = False, "an integer beyond float64's range"
        if not (finite and global_scale >= 0):
            raise ValueError(f"global_scale must be finite and >= 0 (q.global_scale), got "
                             f"{shown}")
        sc = (np.float32(global_scale) * sc.astype(np.float32)).astype(np.float64)
    elif global_scale is not None:
        raise ValueError(f"{scheme.name or 'this scheme'} has no global scale, so global_scale="
                         f"{global_scale!r} would be ignored; drop it (only two-level schemes "
                         "such as nvfp4 take one)")
    with np.errstate(under="ignore", over="ignore"):  # (the product's rounding: _DEQ_NOTE)
        out = _unblock(b.view * sc.reshape(_scale_view_shape(b)).astype(dtype), b.padded,
                       b.shape)
    if scheme.hadamard:
        out = _hadamard(out, scheme, inverse=True)
    return out
