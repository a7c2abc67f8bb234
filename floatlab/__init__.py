"""floatlab: a pure-NumPy laboratory for floating-point formats.

>>> import floatlab
>>> floatlab.float16_to_bin(3.141)
'0100001001001000'
>>> float(floatlab.round(1 + 2**-4 + 2**-30, "e4m3fn"))
1.125
"""

from floatlab import mixed
from floatlab.accumulate import Accumulator, cumsum, dot, matmul, sum
from floatlab.arith import FloatArray, array
from floatlab.codec import (
    Fields,
    bfloat16_to_bin,
    bin_to_bfloat16,
    bin_to_float16,
    bin_to_float32,
    decode,
    encode,
    fields,
    float16_to_bin,
    float32_to_bin,
    from_bin,
    from_hex,
    to_bin,
    to_hex,
)
from floatlab.errors import ErrorProfile, error_profile, significant_digits
from floatlab.explain import Explanation, explain
from floatlab.finfo import FInfo, FormatComparison, compare_formats, finfo
from floatlab.formats import PRESETS, Format, FormatNameError, format_names, get_format
from floatlab.fused_multiply_add import fma
from floatlab.grid import exact_decimal, nextafter, ulp, values
from floatlab.mixed import GradScaler
from floatlab.p3109 import P3109, p3109_format
from floatlab.quant import (
    Codebook,
    FixedPoint,
    QuantizedTensor,
    Scheme,
    dequantize,
    fake_quantize,
    get_codebook,
    get_scheme,
    quantize,
    scheme_names,
)
from floatlab.rounding import ROUNDING_MODES, round
from floatlab.scaling import (
    CurrentScaling,
    DelayedScaling,
    MXTensor,
    ScaledTensor,
    amax_scale,
    mx_quantize,
    mx_scale,
    quantize_scaled,
)

__version__ = "0.1.0"

__all__ = [
    "Codebook",
    "CurrentScaling",
    "FixedPoint",
    "QuantizedTensor",
    "Scheme",
    "dequantize",
    "fake_quantize",
    "get_codebook",
    "get_scheme",
    "quantize",
    "scheme_names",
    "Accumulator",
    "ErrorProfile",
    "error_profile",
    "significant_digits",
    "FloatArray",
    "array",
    "cumsum",
    "dot",
    "fma",
    "matmul",
    "sum",
    "DelayedScaling",
    "MXTensor",
    "ScaledTensor",
    "amax_scale",
    "mx_quantize",
    "mx_scale",
    "quantize_scaled",
    "GradScaler",
    "mixed",
    "Explanation",
    "FInfo",
    "FormatComparison",
    "compare_formats",
    "exact_decimal",
    "explain",
    "finfo",
    "nextafter",
    "plots",
    "ulp",
    "values",
    "PRESETS",
    "P3109",
    "p3109_format",
    "ROUNDING_MODES",
    "Fields",
    "Format",
    "FormatNameError",
    "bfloat16_to_bin",
    "bin_to_bfloat16",
    "bin_to_float16",
    "bin_to_float32",
    "decode",
    "encode",
    "fields",
    "float16_to_bin",
    "float32_to_bin",
    "format_names",
    "from_bin",
    "from_hex",
    "get_format",
    "round",
    "to_bin",
    "to_hex",
]


def __getattr__(name: str):
    # matplotlib is heavy and optional at import time: load floatlab.plots on first use;
    # floatlab.widgets needs the optional anywidget (its ImportError names the extra).
    if name in ("plots", "widgets"):
        import importlib

        return importlib.import_module(f"floatlab.{name}")
    raise AttributeError(f"module 'floatlab' has no attribute {name!r}")
