"""Interactive explorers for Jupyter (JupyterLab, Notebook 7, VS Code, marimo): anywidgets.

- :class:`FloatToy` -- click the bits of any format, type a value, pick the rounding.
- :class:`FormatCompare` -- one value in several formats side by side.

They need the optional extra: ``pip install "floatlab[widgets]"`` (anywidget). Every number is
computed in Python by floatlab; the browser only draws and reports clicks.

>>> from floatlab.widgets import FloatToy
>>> FloatToy("bf16", 3.141)
FloatToy(bfloat16, 3.141 -> 0x4049 = 3.140625)
"""

try:
    import anywidget  # noqa: F401  (checked here so the message names the extra)
except ImportError as err:  # pragma: no cover - tested by hiding anywidget
    raise ImportError(
        "floatlab.widgets needs the optional package anywidget: install it with "
        "pip install \"floatlab[widgets]\" (or pip install anywidget), then restart the kernel"
    ) from err

from floatlab.widgets.compare import FormatCompare
from floatlab.widgets.parse import parse_value
from floatlab.widgets.toy import FloatToy

__all__ = ["FloatToy", "FormatCompare", "parse_value"]
