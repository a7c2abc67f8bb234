"""floatlab: a pure-NumPy laboratory for floating-point formats."""
from floatlab.formats import PRESETS, Format, FormatNameError, format_names, get_format
from floatlab.rounding import ROUNDING_MODES, round

__version__ = "0.1.0"
__all__ = ["PRESETS", "ROUNDING_MODES", "Format", "FormatNameError", "format_names", "get_format", "round"]
