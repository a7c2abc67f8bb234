"""Block-scaled quantisation: schemes, codebooks, fixed point, quantize / dequantize.

One core for every recipe (per-tensor FP8, rowwise, DeepSeek tiles, MX, NVFP4, int8, NF4, the
8-bit optimizer maps): see :mod:`floatlab.quant.scheme`, :mod:`floatlab.quant.scales` and
:mod:`floatlab.quant.quantize`.
"""

from floatlab.quant.codebook import Codebook, codebook_names, get_codebook
from floatlab.quant.fixed import FixedPoint
from floatlab.quant.quantize import (
    QuantizedTensor,
    QuantStats,
    dequantize,
    fake_quantize,
    quantize,
    quantize_elements,
)
from floatlab.quant.scheme import Scheme, get_scheme, scheme_names

__all__ = [
    "Codebook", "FixedPoint", "QuantStats", "QuantizedTensor", "Scheme", "codebook_names",
    "dequantize", "fake_quantize", "get_codebook", "get_scheme", "quantize", "quantize_elements",
    "scheme_names",
]
