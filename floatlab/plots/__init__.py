"""Pictures of floating-point formats: bits, values, range, rounding error, and real data.

Every drawing function draws into ``ax`` (a new figure when ``ax`` is None) and returns the
Axes, so figures compose: ``fig, axs = plt.subplots(1, 2); bit_layout("fp16", ax=axs[0])``.
:func:`zone_fractions` draws nothing: it returns the numbers that :func:`zones` draws.
matplotlib is imported when this module is imported, never by ``import floatlab``; pyplot
itself only when a function has to make a new figure (so ``matplotlib.use(...)`` still works).

Colours mean the same thing everywhere: :data:`FIELD_COLORS` for sign / exponent / mantissa,
:data:`ZONE_COLORS` for the overflow / normal / subnormal / flushed ranges. Axes that span many
binades are drawn in log2 coordinates and labelled ``2^k``.

This package only gathers the pictures, one module per family: :mod:`~floatlab.plots.bits`
(bit layouts, one value's bits), :mod:`~floatlab.plots.ranges` (number line, dynamic range,
the zones every range picture shades), :mod:`~floatlab.plots.errors` (rounding error,
error profiles), :mod:`~floatlab.plots.data` (real data against the zones, gradients and loss
scaling), :mod:`~floatlab.plots.training` (training runs), and floatlab/quant/plots.py
(block-scaled quantisation, loaded on first use); ``_common`` holds what they share.

>>> ax = dynamic_range(["fp32", "bf16", "fp16"])   # BF16 keeps FP32's range, FP16 precision
>>> zone_fractions([0.0, 1.0, 1e-6, 1e6], "fp16")["overflow"]
0.25
"""

# The _private names were floatlab.plots._name before the split (tests reach for them there):
# kept importable from here.
# error_profile was never in __all__: it stays out, as before.
from floatlab.plots._common import FIELD_COLORS, ZONE_COLORS, ZONES, _axes, _percent  # noqa: F401
from floatlab.plots.bits import bit_layout, value_bits
from floatlab.plots.data import _ZONE_TITLES, gradient_histogram, zone_fractions, zones  # noqa: F401
from floatlab.plots.errors import error_profile, rounding_error  # noqa: F401
from floatlab.plots.ranges import _zone_spans, dynamic_range, number_line  # noqa: F401
from floatlab.plots.training import loss_scale, training_curves, underflow_over_time

__all__ = [
    "FIELD_COLORS",
    "ZONE_COLORS",
    "ZONES",
    "bit_layout",
    "value_bits",
    "number_line",
    "dynamic_range",
    "rounding_error",
    "zone_fractions",
    "zones",
    "gradient_histogram",
    "training_curves",
    "loss_scale",
    "underflow_over_time",
]

# Block-scaled quantisation pictures live in floatlab/quant/plots.py; re-exported lazily here
# so that floatlab.plots.qsnr_by_scheme & co. work without importing them at module load.
_QUANT_PLOTS = ("qsnr_by_scheme", "scale_exponents", "block_before_after", "element_grids")
__all__ += list(_QUANT_PLOTS)


def __getattr__(name: str):
    if name in _QUANT_PLOTS:
        from floatlab.quant import plots as quant_plots

        return getattr(quant_plots, name)
    raise AttributeError(f"module 'floatlab.plots' has no attribute {name!r}")
