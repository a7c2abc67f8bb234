"""Token-sequence datasets that ship with Python: no download, no extra dependency.

* :func:`char_lm` -- character-level language modelling on CPython's own documentation text
  (``pydoc_data.topics``, the help() topics installed with every standard Python), split
  deterministically into a training part and a validation part (the last tenth of the text).
* :func:`digit_reversal` -- a synthetic task for quick runs: ``"40213>31204"``; the loss counts
  only the answer digits, so a model must attend back across the ``>``.

Token ids are small integers (the index of a character in ``vocab``); arrays are read-only.

>>> data = digit_reversal(n=100, digits=4, seed=0)
>>> data.decode(data.train[0]), data.context, data.vocab
('4001>1004', 8, '0123456789>')
>>> x, y, mask = data.batch(np.random.default_rng(0), 2)
>>> x.shape, y.shape, mask[0].tolist()
((2, 8), (2, 8), [False, False, False, False, True, True, True, True])
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from floatlab._validate import resolve_rng
from floatlab.mixed.checks import number, sizes_fit, whole
from floatlab.mixed.checks import seed as seed_rng
from floatlab.mixed.layers import _token_ids

__all__ = ["SequenceDataset", "char_lm", "digit_reversal", "python_docs_text"]


@dataclass(frozen=True)
class SequenceDataset:
    """Token sequences for a language model: a token stream or fixed-length examples.

    ``train`` / ``valid`` are either one long 1-D stream of token ids (language modelling:
    windows of ``context + 1`` tokens are cut from it) or 2-D arrays of examples of
    ``context + 1`` tokens each. For examples, only targets at positions ``answer_from`` to
    ``answer_to - 1`` (of the ``context`` predictions) count in the loss.
    """

    name: str
    vocab: str
    train: np.ndarray
    valid: np.ndarray
    context: int
    answer_from: int = 0
    answer_to: int | None = None
    description: str = ""

    def __post_init__(self) -> None:
        # built by hand: ids outside the vocabulary failed (or decoded wrongly) in training
        if not isinstance(self.vocab, str) or not self.vocab:
            raise TypeError(f"SequenceDataset: vocab must be a non-empty str of the tokens, got "
                            f"{self.vocab!r}")
        repeated = sorted({c for c in self.vocab if self.vocab.count(c) > 1})
        if repeated:  # (encode then never gave the first copy's id)
            raise ValueError(f"SequenceDataset: vocab lists {repeated[:10]} more than once; each "
                             "token must appear once (its position is its id)")
        context = whole("SequenceDataset: context", self.context)
        # the loss positions: a Python slice of the context predictions (-1 counted the last)
        start = whole("SequenceDataset: answer_from", self.answer_from, minimum=0)
        stop = context if self.answer_to is None else whole("SequenceDataset: answer_to",
                                                            self.answer_to)
        if not start < stop <= context:
            raise ValueError(f"SequenceDataset: answer_from={start} and answer_to="
                             f"{self.answer_to} select no position of the context's {context} "
                             "predictions; pass 0 <= answer_from < answer_to <= context")
        for split in ("train", "valid"):
            ids = _token_ids(getattr(self, split), len(self.vocab), f"SequenceDataset: {split}")
            if ids.ndim not in (1, 2) or (ids.ndim == 2 and ids.shape[1] != context + 1):
                raise ValueError(f"SequenceDataset: {split} must be a 1-D token stream or 2-D "
                                 f"examples of context + 1 = {context + 1} tokens, got shape "
                                 f"{ids.shape}")
            if len(ids) < (context + 1 if ids.ndim == 1 else 1):  # (crashed inside NumPy)
                what = f"{context + 1} tokens (one window)" if ids.ndim == 1 else "one example"
                raise ValueError(f"SequenceDataset: {split} holds {len(ids)} "
                                 f"{'tokens' if ids.ndim == 1 else 'examples'}, fewer than "
                                 f"{what} of context {context}; give it more data or a "
                                 "shorter context")
            # keep the checked ids (arrays as given; a list or tuple passed the check, then
            # .language_model and batch() read its .ndim: an AttributeError)
            object.__setattr__(self, split, ids)

    @property
    def language_model(self) -> bool:
        """Whether the data is one stream (loss on every position) rather than examples."""
        return self.train.ndim == 1

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> np.ndarray:
        """Token ids of ``text`` (every character must be in the vocabulary)."""
        if not isinstance(text, str):  # an int was "'int' object is not iterable"
            raise TypeError(f"encode: text must be a str, got {type(text).__name__}")
        table = {c: i for i, c in enumerate(self.vocab)}
        unknown = sorted({c for c in text if c not in table})
        if unknown:
            raise ValueError(f"encode: characters {unknown[:10]} are not in the {self.name} "
                             f"vocabulary of {len(self.vocab)} characters")
        return np.array([table[c] for c in text], np.int64)

    def decode(self, ids: np.ndarray) -> str:
        """The text of token ids."""
        ids = _token_ids(ids, len(self.vocab), "decode")  # not an IndexError, not int(0.5)
        return "".join(self.vocab[i] for i in ids.ravel().tolist())

    def _mask(self, n: int) -> np.ndarray:
        mask = np.zeros((n, self.context), bool)
        mask[:, self.answer_from : self.answer_to] = True
        return mask

    def batch(self, rng: np.random.Generator, size: int,
              split: str = "train") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A random batch ``(x, y, mask)``: inputs, next-token targets (both (size, context)
        int64) and the positions whose loss counts. ``rng``: a Generator, or a seed."""
        rng = seed_rng("batch: rng", rng)  # an int seed was an AttributeError
        size = whole("batch: size", size, minimum=0)
        source = self._split(split)
        if self.language_model:
            starts = rng.integers(0, len(source) - self.context, size)
            windows = source[starts[:, None] + np.arange(self.context + 1)]
            mask = np.ones((size, self.context), bool)
        else:
            windows = source[rng.integers(0, len(source), size)]
            mask = self._mask(size)
        windows = windows.astype(np.int64)
        return windows[:, :-1], windows[:, 1:], mask

    def evaluation_batches(self, size: int = 64, max_tokens: int = 16384,
                           split: str = "valid") -> Iterator[tuple[np.ndarray, ...]]:
        """Fixed batches covering the split from its start (non-overlapping windows for a
        stream), up to about ``max_tokens`` predicted tokens: the same every call. Bad
        arguments fail here, not at the first batch."""
        source = self._split(split)
        size = whole("evaluation_batches: size", size)
        max_tokens = whole("evaluation_batches: max_tokens", max_tokens)
        return self._windows(source, size, max_tokens)

    def _windows(self, source: np.ndarray, size: int,
                 max_tokens: int) -> Iterator[tuple[np.ndarray, ...]]:
        if self.language_model:
            n = min((len(source) - 1) // self.context, max(max_tokens // self.context, 1))
            windows = np.stack([source[i * self.context : (i + 1) * self.context + 1]
                                for i in range(n)])
        else:
            windows = source[: max(max_tokens // self.context, 1)]
        windows = windows.astype(np.int64)
        for i in range(0, len(windows), size):
            w = windows[i : i + size]
            mask = (np.ones((len(w), self.context), bool) if self.language_model
                    else self._mask(len(w)))
            yield w[:, :-1], w[:, 1:], mask

    def _split(self, split: str) -> np.ndarray:
        if not isinstance(split, str) or split not in ("train", "valid"):
            raise ValueError(f"split={split!r}: use 'train' or 'valid'")
        return self.train if split == "train" else self.valid

    def __repr__(self) -> str:
        what = (f"{len(self.train)} train / {len(self.valid)} validation tokens"
                if self.language_model else
                f"{len(self.train)} train / {len(self.valid)} validation examples")
        return (f"SequenceDataset({self.name!r}: {what}, vocabulary {len(self.vocab)}, "
                f"context {self.context})")


def _fraction(who: str, value: Any) -> float:
    value = number(f"{who}: valid_fraction", value)
    if not 0 < value < 1:
        raise ValueError(f"{who}: valid_fraction must be in (0, 1), e.g. 0.1, got {value!r}")
    return value


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


@cache
def python_docs_text() -> str:
    """The text of CPython's help() topics (``pydoc_data.topics``), topics in sorted order.

    It differs a little between Python versions (the documentation is revised), but is fixed
    for a given installation.
    """
    try:
        from pydoc_data.topics import topics
    except ImportError as err:  # pragma: no cover - stripped-down Python builds
        raise ImportError("char_lm() needs the standard library's pydoc_data package, which "
                          "this Python installation lacks; use digit_reversal() instead") from err
    return "\n\n".join(topics[key] for key in sorted(topics))


def char_lm(context: int = 64, valid_fraction: float = 0.1,
            max_chars: int | None = None) -> SequenceDataset:
    """Character-level language modelling on CPython's documentation text.

    The vocabulary is the sorted set of characters of the whole text; the last
    ``valid_fraction`` of the text (from a line start) is the validation split. ``max_chars``
    keeps only the first that many characters (for quick experiments).

    >>> d = char_lm(context=32)
    >>> d.language_model, d.context, len(d.vocab) > 90
    (True, 32, True)
    """
    context = whole("char_lm: context", context)
    valid_fraction = _fraction("char_lm", valid_fraction)
    text = python_docs_text()
    if max_chars is not None:
        text = text[:whole("char_lm: max_chars", max_chars)]
    vocab = "".join(sorted(set(python_docs_text())))
    cut = text.rfind("\n", 0, int(len(text) * (1 - valid_fraction))) + 1 or int(
        len(text) * (1 - valid_fraction))
    lookup = np.zeros(max(map(ord, vocab)) + 1, np.uint8)
    lookup[[ord(c) for c in vocab]] = np.arange(len(vocab))
    ids = lookup[np.frombuffer(text.encode("utf-32-le"), np.uint32)]
    train, valid = ids[:cut], ids[cut:]
    if min(len(train), len(valid)) <= context:
        raise ValueError(f"char_lm: {len(text)} characters leave a split shorter than the "
                         f"context {context}; raise max_chars or lower context")
    return SequenceDataset("char_lm", vocab, _frozen(train), _frozen(valid), context,
                           description=f"characters of CPython's help() topics "
                                       f"({len(text)} characters, {len(vocab)} distinct)")


@sizes_fit
def digit_reversal(n: int = 20000, digits: int = 8, valid_fraction: float = 0.1,
                   seed: int = 0) -> SequenceDataset:
    """Strings ``d1..dk>dk..d1``: after the ``>`` the model must write the digits reversed.

    Each example has ``2 digits + 1`` tokens (context ``2 digits``); the loss counts the
    ``digits`` answer positions.

    >>> d = digit_reversal(n=10, digits=3)
    >>> d.decode(d.valid[0])
    '865>568'
    """
    n, digits = whole("digit_reversal: n", n, minimum=2), whole("digit_reversal: digits", digits)
    valid_fraction = _fraction("digit_reversal", valid_fraction)
    rng = resolve_rng(seed, True, "digit_reversal")
    numbers = rng.integers(0, 10, (n, digits))
    examples = np.concatenate([numbers, np.full((n, 1), 10), numbers[:, ::-1]], axis=1)
    n_valid = max(int(n * valid_fraction), 1)
    return SequenceDataset(
        "digit_reversal", "0123456789>", _frozen(examples[n_valid:].astype(np.uint8)),
        _frozen(examples[:n_valid].astype(np.uint8)), context=2 * digits,
        answer_from=digits, answer_to=2 * digits,
        description=f"reverse {digits} random digits written after '>'")
