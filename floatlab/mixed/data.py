"""Small deterministic datasets for the lab: teacher-labelled Gaussians, 2-D spirals, and
scikit-learn's bundled 8x8 digits (the optional ``data`` extra).

Arrays are float32 (exact in every storage the lab uses), labels int64, and all arrays are
read-only so no experiment can change another's data.

>>> d = teacher_gaussians()
>>> d.X_train.shape, d.X_test.shape, d.classes
((4096, 16), (4096, 16), 4)
>>> s = spirals(n=300, classes=3)
>>> s.X_train.shape[1], sorted(set(s.y_train.tolist()))
(2, [0, 1, 2])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from floatlab._validate import _is_ml_float, as_array
from floatlab.mixed.checks import fraction, number, sizes_fit, whole
from floatlab.mixed.checks import seed as seed_rng

__all__ = ["Dataset", "teacher_gaussians", "spirals", "digits"]


@dataclass(frozen=True)
class Dataset:
    """Train and test splits of a classification problem."""

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    classes: int
    description: str = ""

    def __post_init__(self) -> None:
        _check_dataset(self)

    @property
    def features(self) -> int:
        return self.X_train.shape[1]

    def __repr__(self) -> str:
        return (f"Dataset({self.name!r}: {len(self.X_train)} train / {len(self.X_test)} test, "
                f"{self.features} features, {self.classes} classes)")

    @classmethod
    def from_arrays(cls, X: Any, y: Any, *, test_fraction: float = 0.5, seed: int = 0,
                    name: str = "arrays") -> Dataset:
        """A Dataset from features ``X`` (n, features) and integer labels ``y`` (n,): the rows
        are shuffled with ``seed`` and ``test_fraction`` of them kept for testing. The arrays
        are copied (as read-only float32 / int64), never modified.

        >>> import numpy as np
        >>> d = Dataset.from_arrays(np.zeros((10, 3)), np.arange(10) % 2)
        >>> d
        Dataset('arrays': 5 train / 5 test, 3 features, 2 classes)
        """
        # as_array: a ragged list is explained, a masked array refused (its mask would be lost)
        X = as_array(X, "Dataset.from_arrays: X")
        y = as_array(y, "Dataset.from_arrays: y")
        if not _real_dtype(X.dtype) or X.ndim != 2:
            raise TypeError(f"X must be a 2-D array of real numbers (rows, features), got "
                            f"dtype {X.dtype} and shape {X.shape}")
        if y.dtype.kind == "f" and y.size and np.all(y == np.round(y)):
            y = y.astype(np.int64)
        if y.dtype.kind not in "iu" or y.shape != (len(X),):
            raise TypeError(f"y must hold one integer class label per row of X, shape "
                            f"({len(X)},); got dtype {y.dtype} and shape {y.shape}")
        if len(X) < 2 or (y.size and y.min() < 0):
            raise ValueError("need at least 2 rows and labels >= 0")
        test_fraction = fraction("Dataset.from_arrays: test_fraction", test_fraction)
        order = seed_rng("Dataset.from_arrays: seed", seed).permutation(len(X))
        n_train = max(1, min(len(X) - 1, round(len(X) * (1 - test_fraction))))
        return _split(name, X[order].astype(np.float32), y[order].astype(np.int64),
                      int(y.max()) + 1, n_train, f"{len(X)} rows given as arrays")


def _real_dtype(dtype: np.dtype) -> bool:
    """Integers and floats, ml_dtypes' too (bfloat16, float8_*: features as the rest of
    floatlab takes them, which read as dtype kind 'V' and were refused)."""
    return dtype.kind in "iuf" or (dtype.kind == "V" and _is_ml_float(dtype))


def _check_dataset(d: Dataset) -> None:
    """A Dataset built by hand must hold what training reads: 2-D real features with one
    integer label in [0, classes) per row and at least one row, train and test alike (strings,
    ragged or masked arrays, labels beyond ``classes`` and empty splits failed, or scored
    wrongly, in the first step)."""
    classes = whole("Dataset: classes", d.classes)
    features = None
    for split in ("train", "test"):
        X = as_array(getattr(d, f"X_{split}"), f"Dataset: X_{split}")
        y = as_array(getattr(d, f"y_{split}"), f"Dataset: y_{split}")
        if not _real_dtype(X.dtype) or X.ndim != 2 or X.shape[1] != (features or X.shape[1]):
            raise TypeError(f"Dataset: X_{split} must be a 2-D array of real numbers (rows, "
                            f"features), got dtype {X.dtype} and shape {X.shape}")
        features = X.shape[1]
        if y.dtype.kind not in "iu" or y.shape != (len(X),):
            raise TypeError(f"Dataset: y_{split} must hold one integer label per row of "
                            f"X_{split}, shape ({len(X)},); got dtype {y.dtype} and shape "
                            f"{y.shape}")
        if not len(X):  # training divided by zero rows (a ZeroDivisionError, NumPy's warning)
            raise ValueError(f"Dataset: X_{split} has no rows; the Trainer "
                             f"{'trains on' if split == 'train' else 'scores'} it: give each "
                             "split at least one row (Dataset.from_arrays(X, y) splits one "
                             "array for you)")
        if y.size and (y.min() < 0 or y.max() >= classes):
            raise ValueError(f"Dataset: y_{split} holds labels from {y.min()} to {y.max()}, "
                             f"outside [0, {classes}) for classes={classes}")
        # keep the checked arrays (the same objects for arrays; lists become arrays, which
        # .features and training read: a Dataset of lists passed the check, then failed there)
        object.__setattr__(d, f"X_{split}", X)
        object.__setattr__(d, f"y_{split}", y)


def _split(name: str, X: np.ndarray, y: np.ndarray, classes: int, n_train: int,
           description: str) -> Dataset:
    arrays = [X[:n_train], y[:n_train], X[n_train:], y[n_train:]]
    frozen = []
    for a in arrays:
        a = np.ascontiguousarray(a)
        a.flags.writeable = False
        frozen.append(a)
    return Dataset(name, *frozen, classes=classes, description=description)


def _train_rows(who: str, n: int, train_fraction: Any) -> int:
    """The number of training rows, ``int(n * train_fraction)``, checked to leave at least one
    row in each split (an empty split used to come back without a word)."""
    f = fraction(f"{who}: train_fraction", train_fraction)
    n_train = int(n * f)
    if not 0 < n_train < n:
        raise ValueError(f"{who}: train_fraction={train_fraction!r} of n={n} rows leaves an empty "
                         f"{'training' if n_train == 0 else 'test'} split; pass a fraction "
                         f"between {1 / n:.3g} and {1 - 1 / n:.3g}, or more rows")
    return n_train


@sizes_fit
def teacher_gaussians(
    n: int = 8192,
    dim: int = 16,
    hidden: int = 32,
    classes: int = 4,
    train_fraction: float = 0.5,
    seed: int = 0,
) -> Dataset:
    """Gaussian inputs labelled by a random teacher network (the reference experiment).

    ``X ~ N(0, I_dim)``; ``y = argmax(tanh(X W1) W2)`` with ``W1 ~ N(0, 1/dim)`` (dim x hidden)
    and ``W2 ~ N(0, 1/hidden)`` (hidden x classes). A student MLP can learn it well but not
    perfectly from half the rows, so train and test accuracy both mean something.

    >>> teacher_gaussians(n=100, seed=1).y_train[:8].tolist()
    [1, 0, 0, 0, 2, 0, 2, 3]
    """
    n = whole("teacher_gaussians: n", n, minimum=2)
    dim, hidden = whole("teacher_gaussians: dim", dim), whole("teacher_gaussians: hidden", hidden)
    classes = whole("teacher_gaussians: classes", classes)
    n_train = _train_rows("teacher_gaussians", n, train_fraction)
    rng = seed_rng("teacher_gaussians: seed", seed)
    X = rng.standard_normal((n, dim))
    W1 = rng.normal(0.0, np.sqrt(1.0 / dim), (dim, hidden))
    W2 = rng.normal(0.0, np.sqrt(1.0 / hidden), (hidden, classes))
    X = X.astype(np.float32)
    y = np.argmax(np.tanh(X.astype(np.float64) @ W1) @ W2, axis=1).astype(np.int64)
    return _split("teacher_gaussians", X, y, classes, n_train,
                  f"N(0, I_{dim}) inputs labelled by a random {dim}-{hidden}-{classes} tanh "
                  "teacher")


@sizes_fit
def spirals(
    n: int = 1500,
    classes: int = 3,
    turns: float = 1.0,
    noise: float = 0.1,
    train_fraction: float = 0.5,
    seed: int = 0,
) -> Dataset:
    """Interleaved 2-D spiral arms, one class per arm (good for decision-boundary plots).

    Radius grows from 0 to 1 along each arm while the angle turns ``turns`` times; Gaussian
    angle noise of ``noise`` radians blurs the arms. Rows are shuffled before the split.

    >>> spirals(n=60, classes=2, seed=3).X_train.dtype
    dtype('float32')
    """
    n, classes = whole("spirals: n", n, minimum=2), whole("spirals: classes", classes, minimum=2)
    if n < classes:
        raise ValueError(f"spirals: need n >= classes (one point per arm at least), got n={n}, "
                         f"classes={classes}")
    turns = number("spirals: turns", turns)
    noise = number("spirals: noise", noise, nonnegative=True)  # a standard deviation
    n_train = _train_rows("spirals", n, train_fraction)  # was unchecked: 0 or 1 gave no test rows
    rng = seed_rng("spirals: seed", seed)
    y = np.arange(n) % classes
    t = rng.random(n)
    angle = 2 * np.pi * (y / classes + turns * t) + rng.normal(0.0, noise, n)
    X = np.stack([t * np.cos(angle), t * np.sin(angle)], axis=1).astype(np.float32)
    order = rng.permutation(n)
    return _split("spirals", X[order], y[order].astype(np.int64), classes,
                  n_train, f"{classes} spiral arms, {turns} turns, noise {noise}")


def digits(train_fraction: float = 0.7, seed: int = 0) -> Dataset:
    """The 1797 8x8 handwritten digits bundled with scikit-learn (real data for the MLP).

    Pixels (0..16) are divided by 16, so inputs lie in [0, 1]; rows are shuffled with ``seed``
    before the split. Needs scikit-learn: ``pip install floatlab[data]``.

    >>> d = digits()                                  # doctest: +SKIP
    >>> d.features, d.classes, len(d.X_train)         # doctest: +SKIP
    (64, 10, 1257)
    """
    fraction("digits: train_fraction", train_fraction)  # before the import (and its error)
    rng = seed_rng("digits: seed", seed)
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError("floatlab.mixed.digits() reads the 8x8 digits bundled with "
                          "scikit-learn, which is not installed: pip install floatlab[data] "
                          "(the 'data' extra), or pip install scikit-learn") from None
    bunch = load_digits()
    X = (np.asarray(bunch.data, np.float64) / 16).astype(np.float32)
    y = np.asarray(bunch.target, np.int64)
    order = rng.permutation(len(y))
    return _split("digits", X[order], y[order], 10, _train_rows("digits", len(y), train_fraction),
                  "scikit-learn's 8x8 handwritten digits, pixels / 16")
