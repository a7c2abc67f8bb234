"""A tiny progress bar: one carriage-return line on a stream, an updating line in Jupyter.

No dependency: in a terminal (or any text stream) the bar rewrites one line with ``\\r`` and
ends it with a newline; in a Jupyter kernel it updates one display handle. Redraws are limited
to a few per second so the bar costs nothing measurable. ``enabled=False`` writes nothing.

>>> import io
>>> out = io.StringIO()
>>> bar = Progress(4, desc="demo", stream=out, min_interval=0)
>>> for _ in range(4):
...     bar.update(loss=0.5)
>>> bar.close()
>>> out.getvalue().rsplit("\\r", 1)[-1].split("|")[0]
'demo '
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

__all__ = ["Progress"]


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    try:
        ip = shell.get_ipython()
    except AttributeError:
        return False
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


class Progress:
    """A progress bar over ``total`` steps.

    Parameters
    ----------
    total : number of steps.
    desc : a label in front of the bar.
    enabled : False makes every method a no-op.
    stream : where to draw (default ``sys.stderr``); ignored in Jupyter unless given.
    width : bar width in characters.
    min_interval : seconds between redraws (the last step is always drawn).
    """

    def __init__(
        self,
        total: int,
        desc: str = "",
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
        width: int = 24,
        min_interval: float = 0.1,
    ) -> None:
        self.total, self.desc, self.enabled = max(int(total), 1), desc, enabled
        self.width, self.min_interval = width, min_interval
        self.n = 0
        self._start = time.perf_counter()
        self._last_draw = -float("inf")
        self._stream = stream
        self._handle: Any = None
        if enabled and stream is None and _in_notebook():
            from IPython.display import display

            self._handle = display(self._line(), display_id=True)
        elif enabled and stream is None:
            self._stream = sys.stderr
        isatty = getattr(self._stream, "isatty", None)
        self._interactive = self._handle is not None or bool(isatty and isatty())
        self._drawn = 0

    def _line(self, postfix: dict[str, Any] | None = None) -> str:
        frac = min(self.n / self.total, 1.0)
        done = int(frac * self.width)
        bar = "#" * done + "-" * (self.width - done)
        elapsed = time.perf_counter() - self._start
        extra = "".join(f" {k} {v:.4g}" if isinstance(v, float) else f" {k} {v}"
                        for k, v in (postfix or {}).items())
        label = f"{self.desc} " if self.desc else ""
        return f"{label}|{bar}| {self.n}/{self.total} [{elapsed:.1f}s]{extra}"

    def update(self, n: int = 1, **postfix: Any) -> None:
        """Advance by ``n`` steps; keyword arguments are shown after the bar (e.g. loss=...)."""
        if not self.enabled:
            return
        self.n += n
        now = time.perf_counter()
        if now - self._last_draw < self.min_interval and self.n < self.total:
            return
        if not self._interactive and self.n < self.total:
            return  # a log file or CI: one final line, not hundreds of carriage returns
        self._last_draw = now
        line = self._line(postfix)
        if self._handle is not None:
            self._handle.update(line)
        elif self._stream is not None:
            # Pad with spaces so a shorter line fully covers the previous one.
            self._stream.write("\r" + line.ljust(self._drawn))
            self._drawn = len(line)
            self._stream.flush()

    def close(self) -> None:
        """Finish the line."""
        if self.enabled and self._handle is None and self._stream is not None:
            self._stream.write("\n")
            self._stream.flush()
