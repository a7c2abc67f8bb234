"""A small GPT-style transformer whose every number lives in the policy's formats.

:class:`Transformer` is pre-LN (layer norm before attention and before the MLP), uses a GELU
MLP of width ``4 * d_model``, learned positional embeddings and an output layer tied to the token
embedding. Its parameters are named and shaped like nanoGPT's torch modules
(``transformer.wte.weight``, ``transformer.h.0.attn.c_attn.weight`` of shape
(3 d_model, d_model), ...), so ``state_dict()`` / ``load_state_dict()`` carry weights between
the lab and torch. (The MLP classifier lives in :mod:`floatlab.mixed.nn`.)

>>> import numpy as np
>>> from floatlab.mixed import Transformer, use_precision
>>> with use_precision("bf16-mixed"):
...     model = Transformer(vocab=11, d_model=16, heads=2, layers=1, context=8)
...     logits = model(np.zeros((2, 5), np.int64))
>>> logits.shape, logits.fmt.name, model.num_parameters()
((2, 5, 11), 'bfloat16', 3616)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from floatlab.mixed.attention import scaled_dot_product_attention
from floatlab.mixed.autograd import Tensor
from floatlab.mixed.checks import number, sizes_fit, whole
from floatlab.mixed.elementwise import add
from floatlab.mixed.gemm import linear
from floatlab.mixed.layers import (
    LAYER_NORM_STATS,
    _token_ids,
    dropout,
    embedding,
    gelu,
    layer_norm,
    narrow,
    permute,
    reshape,
)
from floatlab.mixed.nn import Linear, Module, parameter

__all__ = ["Embedding", "LayerNorm", "CausalSelfAttention", "FeedForward", "Block",
           "Transformer"]


def _normal_linear(n_in: int, n_out: int, std: float, rng: np.random.Generator) -> Linear:
    layer = Linear(n_in, n_out, seed=rng)
    layer.weight = parameter(rng.normal(0.0, std, (n_out, n_in)), name="weight")
    return layer


class Embedding(Module):
    """A table of ``num`` vectors of size ``dim`` (torch.nn.Embedding: ``weight`` (num, dim))."""

    def __init__(self, num: int, dim: int, *, std: float = 0.02,
                 seed: int | np.random.Generator = 0) -> None:
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        self.weight = parameter(rng.normal(0.0, std, (num, dim)), name="weight")

    def __call__(self, ids: Any) -> Tensor:
        return embedding(ids, self.weight)


class LayerNorm(Module):
    """torch.nn.LayerNorm over the last axis: ``weight`` (ones) and ``bias`` (zeros), eps 1e-5.

    ``stats`` chooses how mean and variance are computed (see
    :data:`~floatlab.mixed.layers.LAYER_NORM_STATS`).
    """

    @sizes_fit
    def __init__(self, dim: int, *, eps: float = 1e-5, stats: str = "float32") -> None:
        dim = whole("LayerNorm: dim", dim, minimum=0)  # torch allows LayerNorm(0)
        eps = number("LayerNorm: eps", eps, nonnegative=True)  # refused here, not at a call
        if not isinstance(stats, str) or stats not in LAYER_NORM_STATS:
            raise ValueError(f"LayerNorm: stats={stats!r}; use one of "
                             f"{', '.join(LAYER_NORM_STATS)}")
        self.weight = parameter(np.ones(dim), name="weight")
        self.bias = parameter(np.zeros(dim), name="bias")
        self.eps, self.stats = eps, stats

    def forward(self, x: Tensor) -> Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps, stats=self.stats)


class CausalSelfAttention(Module):
    """Multi-head causal self-attention on (batch * T, d_model) rows: ``c_attn`` makes q, k, v
    (weight (3 d_model, d_model)), :func:`~floatlab.mixed.attention.scaled_dot_product_attention`
    mixes positions, ``c_proj`` projects back."""

    def __init__(self, d_model: int, heads: int, *, proj_std: float, dropout: float,
                 scale_queries: bool, rng: np.random.Generator) -> None:
        self.c_attn = _normal_linear(d_model, 3 * d_model, 0.02, rng)
        self.c_proj = _normal_linear(d_model, d_model, proj_std, rng)
        self.d_model, self.heads = d_model, heads
        self.dropout, self.scale_queries = dropout, scale_queries

    def attend(self, x: Tensor, batch: int, t: int, rng: np.random.Generator,
               training: bool) -> Tensor:
        d, h = self.d_model, self.heads
        qkv = self.c_attn(x)

        def heads_of(i: int) -> Tensor:  # (batch, heads, T, head_dim)
            part = reshape(narrow(qkv, 1, i * d, d), (batch, t, h, d // h))
            return permute(part, (0, 2, 1, 3))

        y = scaled_dot_product_attention(heads_of(0), heads_of(1), heads_of(2), causal=True,
                                         scale_queries=self.scale_queries)
        y = reshape(permute(y, (0, 2, 1, 3)), (batch * t, d))
        return dropout(self.c_proj(y), self.dropout, rng, training)


class FeedForward(Module):
    """``c_fc`` (4 d_model outputs), GELU, ``c_proj`` back to d_model (nanoGPT's ``mlp``)."""

    def __init__(self, d_model: int, *, proj_std: float, dropout: float, approximate: str,
                 rng: np.random.Generator) -> None:
        self.c_fc = _normal_linear(d_model, 4 * d_model, 0.02, rng)
        self.c_proj = _normal_linear(4 * d_model, d_model, proj_std, rng)
        self.dropout, self.approximate = dropout, approximate

    def apply(self, x: Tensor, rng: np.random.Generator, training: bool) -> Tensor:
        hidden = gelu(self.c_fc(x), approximate=self.approximate)
        return dropout(self.c_proj(hidden), self.dropout, rng, training)


class Block(Module):
    """Pre-LN residual block: ``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))``."""

    def __init__(self, d_model: int, heads: int, *, proj_std: float, dropout: float,
                 approximate: str, stats: str, scale_queries: bool,
                 rng: np.random.Generator) -> None:
        self.ln_1 = LayerNorm(d_model, stats=stats)
        self.attn = CausalSelfAttention(d_model, heads, proj_std=proj_std, dropout=dropout,
                                        scale_queries=scale_queries, rng=rng)
        self.ln_2 = LayerNorm(d_model, stats=stats)
        self.mlp = FeedForward(d_model, proj_std=proj_std, dropout=dropout,
                               approximate=approximate, rng=rng)

    def apply(self, x: Tensor, batch: int, t: int, rng: np.random.Generator,
              training: bool) -> Tensor:
        x = add(x, self.attn.attend(self.ln_1(x), batch, t, rng, training))
        return add(x, self.mlp.apply(self.ln_2(x), rng, training))


class _Trunk(Module):
    """nanoGPT's ``transformer`` ModuleDict: wte, wpe, h (the blocks), ln_f."""

    def __init__(self, vocab: int, d_model: int, heads: int, layers: int, context: int,
                 **block: Any) -> None:
        rng = block["rng"]
        self.wte = Embedding(vocab, d_model, seed=rng)
        self.wpe = Embedding(context, d_model, seed=rng)
        self.h = [Block(d_model, heads, **block) for _ in range(layers)]
        self.ln_f = LayerNorm(d_model, stats=block["stats"])


def _repeated(tokens: tuple[Any, ...]) -> list[Any]:
    """The tokens listed more than once, sorted by repr. Counted by hash (one pass: a word-level
    vocabulary of 50K tokens took half a minute with tokens.count per token); unhashable tokens
    (lists) are compared pairwise, as equality is all they offer."""
    try:
        return sorted((t for t, k in Counter(tokens).items() if k > 1), key=repr)
    except TypeError:  # unhashable tokens
        return [t for i, t in enumerate(tokens) if t in tokens[:i]][:1]


class Transformer(Module):
    """A decoder-only, pre-LN transformer language model with tied input/output embeddings.

    Parameters
    ----------
    vocab : vocabulary size, or the vocabulary itself (a string of characters or a sequence of
        tokens: then the model remembers it, and the Trainer refuses data encoded differently).
    d_model, heads, layers, context : width, attention heads (must divide d_model), blocks,
        and the longest sequence the model accepts.
    dropout : dropout probability after the embeddings, attention and MLP (masks from a
        generator seeded by ``seed``; off when ``training`` is False).
    gelu : "tanh" (GPT-2's approximation, the default) or "none" (exact, with erf).
    layer_norm_stats : how layer norms compute mean and variance (default "float32", as torch).
    scale_queries : multiply q by 1/sqrt(head_dim) before q k^T (as fused kernels do) instead of
        scaling the scores after it.
    seed : initial weights: N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 layers)),
        biases 0, layer norms 1 and 0 (GPT-2's scheme).

    Call it on a (batch, T) array of token ids to get (batch, T, vocab) logits.
    """

    @sizes_fit
    def __init__(
        self,
        vocab: int | str | Sequence[Any],
        d_model: int = 64,
        heads: int = 4,
        layers: int = 2,
        context: int = 64,
        *,
        dropout: float = 0.0,
        gelu: str = "tanh",
        layer_norm_stats: str = "float32",
        scale_queries: bool = False,
        seed: int = 0,
    ) -> None:
        tokens = None
        if not isinstance(vocab, (int, np.integer)) or isinstance(vocab, bool):
            if not isinstance(vocab, (str, Sequence)):
                raise TypeError(f"Transformer: vocab must be a size or a sequence of tokens, "
                                f"got {vocab!r}")
            tokens = tuple(vocab)
            vocab = len(tokens)
            twice = _repeated(tokens)
            if twice:  # two ids for one token: encoding would be ambiguous
                raise ValueError(f"Transformer: vocab lists {twice[0]!r} more than once; pass "
                                 "each token once, e.g. sorted(set(text))")
        sizes = {"vocab": vocab, "d_model": d_model, "heads": heads, "layers": layers,
                 "context": context}
        for name, value in sizes.items():  # TypeError for 2.5 or "4", ValueError for 0
            whole(f"Transformer: {name}", value)
        if d_model % heads:
            raise ValueError(f"Transformer: heads={heads} must divide d_model={d_model}")
        if gelu not in ("tanh", "none"):
            raise ValueError(f"Transformer: gelu={gelu!r}; use 'tanh' or 'none'")
        if not isinstance(scale_queries, bool):
            raise TypeError(f"Transformer: scale_queries must be True or False, got "
                            f"{scale_queries!r}")
        dropout = number("Transformer: dropout", dropout, finite=False)  # its range below
        if not 0 <= dropout < 1:
            raise ValueError(f"Transformer: dropout must be in [0, 1), got {dropout!r}")
        # an int: the dropout stream is seeded with [seed, 1]
        seed = whole("Transformer: seed", seed, minimum=0)
        rng = np.random.default_rng(seed)
        self.vocab_size, self.tokens = int(vocab), tokens
        self.d_model, self.heads, self.layers, self.context = d_model, heads, layers, context
        self.dropout, self.gelu, self.training = dropout, gelu, True
        self.transformer = _Trunk(vocab, d_model, heads, layers, context,
                                  proj_std=0.02 / math.sqrt(2 * layers), dropout=dropout,
                                  approximate=gelu, stats=layer_norm_stats,
                                  scale_queries=scale_queries, rng=rng)
        self._dropout_rng = np.random.default_rng([seed, 1])

    def tied_parameters(self) -> dict[str, str]:
        return {"lm_head.weight": "transformer.wte.weight"}

    def train(self, mode: bool = True) -> Transformer:
        """Switch dropout on (``mode=True``) or off; returns the model, as torch does."""
        self.training = bool(mode)
        return self

    def eval(self) -> Transformer:
        return self.train(False)

    def __call__(self, ids: Any) -> Tensor:
        return self.forward(ids)

    def forward(self, ids: Any) -> Tensor:  # type: ignore[override]
        idx = _token_ids(ids, self.vocab_size, "Transformer")
        if idx.ndim != 2:
            raise ValueError(f"Transformer: token ids must be (batch, T), got shape {idx.shape}; "
                             "wrap a single sequence as ids[None, :]")
        batch, t = idx.shape
        if t == 0:  # (the message below said "pass at most 8 tokens" to 0 tokens)
            raise ValueError("Transformer: sequences of 0 tokens (ids of shape "
                             f"{idx.shape}); pass at least one token per sequence")
        if t > self.context:
            raise ValueError(f"Transformer: sequences of {t} tokens, but the model's context is "
                             f"{self.context}; pass at most {self.context} tokens (crop "
                             "ids[:, -context:]) or build the model with a larger context")
        body, rng, training = self.transformer, self._dropout_rng, self.training
        x = add(embedding(idx, body.wte.weight), embedding(np.arange(t), body.wpe.weight))
        x = reshape(dropout(x, self.dropout, rng, training), (batch * t, self.d_model))
        for block in body.h:
            x = block.apply(x, batch, t, rng, training)
        logits = linear(body.ln_f(x), body.wte.weight)  # the tied output layer
        return reshape(logits, (batch, t, self.vocab_size))

    def __repr__(self) -> str:
        return (f"Transformer(vocab={self.vocab_size}, d_model={self.d_model}, "
                f"heads={self.heads}, layers={self.layers}, context={self.context})")
