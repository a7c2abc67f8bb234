"""The Trainer, History and Comparison on valid but unusual use: empty or hand-built data,
sequence models, telemetry off, fitting twice."""

import numpy as np
import pytest

import floatlab.mixed as fm


def _xy(n=37, features=5, classes=3):
    X = np.random.default_rng(0).standard_normal((n, features))
    return X, np.arange(n) % classes


@pytest.mark.parametrize("split", ["train", "test"])
def test_a_dataset_with_an_empty_split_is_refused_when_built(split):
    """An empty test split was a ZeroDivisionError at the end of fit(), an empty training split
    NumPy's 'Mean of empty slice' warning and a NaN loss."""
    X, y = _xy()
    parts = {"train": (X[:0], y[:0], X, y), "test": (X, y, X[:0], y[:0])}[split]
    with pytest.raises(ValueError, match=f"Dataset: X_{split} has no rows; the Trainer"):
        fm.Dataset("h", *parts, classes=3)
