"""Training language models with the :class:`~floatlab.mixed.Trainer`: the sequence loop.

``Trainer(model="transformer").fit(char_lm())`` comes here: batches of token windows, the
masked next-token loss, and evaluation by validation loss (and perplexity, its exponential)
besides next-token accuracy. The step itself -- loss scaling, optimizer, telemetry -- is the
Trainer's, shared with the MLP.

>>> from floatlab.mixed import Trainer, digit_reversal
>>> h = Trainer("bf16-mixed", model="transformer", progress=False).fit(
...     digit_reversal(n=256, digits=3), steps=3)
>>> len(h), bool(h.final_val_loss > 0), bool(h.final_val_perplexity > 1)
(3, True, True)
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import numpy as np

from floatlab.mixed.accounting import bytes_held
from floatlab.mixed.autograd import Tensor
from floatlab.mixed.history import History
from floatlab.mixed.layers import sequence_loss
from floatlab.mixed.models import Transformer
from floatlab.mixed.nn import Module
from floatlab.mixed.progress import Progress
from floatlab.mixed.recipe_gemm import recipe_run
from floatlab.mixed.scope import no_grad, use_precision
from floatlab.mixed.telemetry import StepStats
from floatlab.mixed.textdata import SequenceDataset

if TYPE_CHECKING:  # pragma: no cover
    from floatlab.mixed.trainer import Trainer

__all__ = ["fit_sequences", "sequence_metrics", "token_accuracy", "check_model_fits"]

#: Validation tokens scored at each evaluation (the same windows every time).
EVAL_TOKENS = 4096


def token_accuracy(logits: Tensor | np.ndarray, targets: np.ndarray,
                   mask: np.ndarray | None = None) -> float:
    """Fraction of (masked) positions whose largest logit is the target token."""
    z = np.asarray(logits.data if isinstance(logits, Tensor) else logits)
    ok = z.argmax(axis=-1) == np.asarray(targets)
    if mask is not None:
        ok = ok[np.asarray(mask, bool)]
    return float(ok.mean()) if ok.size else float("nan")


def check_model_fits(model: Module, data: SequenceDataset) -> None:
    """Refuse a model whose vocabulary or context does not match the data."""
    if not isinstance(model, Transformer):
        raise TypeError(f"{data.name} is token sequences: train a Transformer on it "
                        f"(model='transformer' or a Transformer object), not "
                        f"{type(model).__name__}")
    if model.vocab_size != data.vocab_size or (
            model.tokens is not None and tuple(model.tokens) != tuple(data.vocab)):
        raise ValueError(f"vocabulary mismatch: the model has {model.vocab_size} tokens, "
                         f"{data.name} uses {data.vocab_size} ({data.vocab[:20]!r}...); build "
                         f"the model with Transformer(data.vocab, ...)")
    if data.context > model.context:
        raise ValueError(f"{data.name} has sequences of {data.context} tokens but the model's "
                         f"context is {model.context}; build it with context >= "
                         f"{data.context}")


def sequence_metrics(model: Transformer, data: SequenceDataset, split: str = "valid",
                     max_tokens: int = EVAL_TOKENS) -> tuple[float, float]:
    """(mean loss, next-token accuracy) over fixed windows of ``split``, without a graph and
    with dropout off, under the active policy."""
    was_training, total, correct, count = model.training, 0.0, 0.0, 0
    model.eval()
    try:
        with no_grad():
            for x, y, mask in data.evaluation_batches(max_tokens=max_tokens, split=split):
                logits = model(x)
                n = int(mask.sum())
                total += sequence_loss(logits, y, mask).item() * n
                correct += token_accuracy(logits, y, mask) * n
                count += n
    finally:
        model.train(was_training)
    return total / count, correct / count


def fit_sequences(trainer: Trainer, data: SequenceDataset, steps: int) -> History:
    """The Trainer's fit() for sequence data (see the module docstring)."""
    history = History(trainer.policy.name, {"policy": trainer.policy,
                                            "device": trainer.policy.device,
                                            "experiment": trainer.describe(data, steps)})
    bar = Progress(steps, desc=trainer.policy.name, enabled=trainer.progress)
    rng = np.random.default_rng(trainer.seed)
    start = time.perf_counter()
    # A recipe's per-run state (delayed-scaling histories, the stochastic-rounding generator,
    # per-operand telemetry) is opened here as in the MLP's loop, so runs do not share it.
    run_context = (recipe_run(trainer.seed, trainer.telemetry) if trainer.policy.recipe
                   else nullcontext())
    with use_precision(trainer.policy, rng=trainer.seed), run_context as run:
        trainer.recipe_run = run
        trainer.model = model = trainer._build_model(data)
        trainer.optimizer = opt = trainer._build_optimizer(model)
        trainer.scaler = scaler = trainer._build_scaler()
        for step in range(steps):
            x, y, mask = data.batch(rng, trainer.batch_size)
            stats = StepStats(count_flushed=False) if trainer.telemetry else None
            row: dict[str, Any] = trainer._step(model, opt, scaler, (x, mask), y, stats)
            if run is not None:
                row.update(run.end_step())
            if (step + 1) % trainer.eval_every == 0 or step == steps - 1:
                row["val_loss"], row["test_accuracy"] = sequence_metrics(model, data)
            held = bytes_held(model, opt, trainer.policy, stats, run) if stats else None
            history._append(step=step, bytes_held=held, **row)
            bar.update(loss=row["loss"], scale=row["scale"])
        if run is not None:  # per-operand telemetry: {"linear0.forward.a": [stats...]}
            history.info["operands"] = run.history
        history.final_train_accuracy = sequence_metrics(model, data, "train")[1]
        history.final_test_accuracy = history["test_accuracy"][-1]
        history.final_val_loss = float(history["val_loss"][-1])
    bar.close()
    history.wall_time = time.perf_counter() - start
    trainer.history = history
    return history


def batch_loss(model: Module, xb: Any, yb: np.ndarray) -> tuple[Tensor, Tensor, float]:
    """(logits, loss, accuracy) of a sequence batch ``xb = (ids, mask)``."""
    ids, mask = xb
    logits = model(ids)
    return logits, sequence_loss(logits, yb, mask), token_accuracy(logits, yb, mask)


#: The optimizer names of the experiment lines (describe()), by Trainer(optimizer=...).
OPTIMIZER_LABELS = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW", "adam8bit": "Adam8bit",
                    "adamw8bit": "AdamW8bit"}


def optimizer_label(trainer: Trainer) -> str:
    """The optimizer's name in the experiment line: one table for MLPs and sequences (the
    sequence line called Adam8bit "Adam")."""
    name = OPTIMIZER_LABELS[trainer.optimizer_name]
    return f"{name} (fused)" if trainer.fused else name


def describe_sequences(trainer: Trainer, data: SequenceDataset, steps: int | None,
                       opt: str) -> list[str]:
    """The parts of the Trainer's describe() line for sequence data; ``opt`` is its optimizer
    label."""
    model = trainer._model_in if isinstance(trainer._model_in, Module) else None
    net = repr(model) if model is not None else (
        f"Transformer(vocab={data.vocab_size}, d_model=64, heads=4, layers=2, "
        f"context={data.context})")
    run = [f"{steps} steps of {trainer.batch_size} sequences"] if steps else []
    lam = "λ = 1" if trainer.loss_multiplier == 1 else f"λ = {trainer.loss_multiplier:g}"
    lists = f"torch's {trainer.policy.device.upper()} autocast op lists"
    return [repr(data), net, opt, *run, lam, lists]

