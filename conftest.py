"""Setup for every test pytest collects here, the doctests under floatlab/ included (tests/
has its own conftest.py for the test suite's imports and hypothesis profile)."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture(autouse=True)
def _close_figures():
    """Close the figures a test or doctest made: the plotting examples return axes and leave
    their figures open, and pyplot warns once more than 20 are alive."""
    yield
    plt = sys.modules.get("matplotlib.pyplot")  # (only if something imported it)
    if plt is not None:
        plt.close("all")
