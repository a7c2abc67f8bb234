"""The training loop, its telemetry, and compare() across precisions.

>>> from floatlab.mixed import Trainer, teacher_gaussians
>>> data = teacher_gaussians(n=1024)
>>> h = Trainer("16-true", progress=False).fit(data, steps=3)
>>> h.went_nan, h.first_nonfinite_step          # Adam's eps is 0 in float16
(True, 1)

The loss multiplier λ (``loss_multiplier``) multiplies the loss, and so every gradient, by a
constant. It is a teaching device, not part of real training: a tiny MLP's gradients sit around
2**-17..2**-8, far above where a deep network's do, and λ = 2**-14 or 2**-16 slides them down
to where fp16's underflow bites. Always compare with λ = 1.
"""

from __future__ import annotations

import copy
import math
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np

from floatlab._validate import as_array, as_float_array
from floatlab.accumulate import Accumulator
from floatlab.formats import Format
from floatlab.mixed.accounting import bytes_held
from floatlab.mixed.autograd import Tensor
from floatlab.mixed.checks import flag, number, whole
from floatlab.mixed.checks import update_rounding as check_update_rounding
from floatlab.mixed.data import Dataset, teacher_gaussians
from floatlab.mixed.history import Comparison, History, shared_description, unique_run_name
from floatlab.mixed.models import Transformer
from floatlab.mixed.nn import MLP, Module, _fraction_correct, accuracy
from floatlab.mixed.optim import SGD, Adam, AdamW, Optimizer
from floatlab.mixed.optim8bit import Adam8bit, AdamW8bit, StateAdam
from floatlab.mixed.policy import (
    FP16,
    Policy,
    get_policy,
    refuse_scaler_for_bf16_mixed,
    takes_loss_scaler,
)
from floatlab.mixed.progress import Progress
from floatlab.mixed.recipe_gemm import recipe_run
from floatlab.mixed.reductions import cross_entropy
from floatlab.mixed.scaler import GradScaler, StaticScaler, _LossScaler, _MSAMPGradScaler
from floatlab.mixed.scope import no_grad, quantize, recording, use_precision
from floatlab.mixed.seqtrain import (
    OPTIMIZER_LABELS,
    batch_loss,
    check_model_fits,
    describe_sequences,
    fit_sequences,
    optimizer_label,
)
from floatlab.mixed.telemetry import StepStats
from floatlab.mixed.textdata import SequenceDataset

__all__ = ["Trainer", "compare", "DEFAULT_PRECISIONS", "bytes_held"]

#: Trainer(optimizer=...): torch's SGD, Adam, AdamW; bitsandbytes' Adam8bit, AdamW8bit.
_OPTIMIZERS = tuple(OPTIMIZER_LABELS)  # the names Trainer(optimizer=...) takes

#: The reference experiment's five precisions.
DEFAULT_PRECISIONS = ("32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true")


def _batches(n: int, batch_size: int, seed: int) -> Iterator[np.ndarray]:
    """Index batches from a fresh seeded permutation each epoch (last partial batch dropped;
    a batch_size above ``n`` gives batches of all ``n`` rows)."""
    rng = np.random.default_rng(seed)
    per_epoch = max(n // batch_size, 1)
    while True:
        order = rng.permutation(n)
        for b in range(per_epoch):
            yield order[b * batch_size : (b + 1) * batch_size]


def _pow2(x: float) -> str:
    e = math.log2(x) if x > 0 else float("nan")
    return f"2^{int(e)}" if e == int(e) else f"{x:g}"


def _fp16_weights_refuse_grad_scaler(policy: Policy) -> str:
    """Why torch's GradScaler cannot train this policy's float16 weights, and what to do."""
    if policy.recipe is not None and policy.recipe.options.get("lightning"):
        return (f"{policy.name!r} trains float16 weights without a loss scaler, as Lightning's "
                "TransformerEnginePrecision does (it has none), and torch's GradScaler refuses "
                "them ('Attempting to unscale FP16 gradients'). Drop scaler=, pass a static "
                "scale (scaler=1024.0), or leave out lightning=True for float32 master weights "
                "and a GradScaler")
    return (f"a GradScaler cannot be used with {policy.name!r}: its weights are float16 and "
            "torch refuses with 'Attempting to unscale FP16 gradients'. Use '16-mixed', or a "
            "StaticScaler.")


class Trainer:
    """Train an MLP classifier under a precision policy, recording what the formats do.

    Parameters
    ----------
    precision : a precision string ("32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true",
        "64-true", Apex "O0".."O3", "<format>-mixed" / "<format>-true", legacy 16 / 32 / 64 /
        "bf16") or a :class:`~floatlab.mixed.Policy`.
    optimizer : "adam", "adamw" (torch's AdamW), "sgd", "adam8bit" or "adamw8bit"
        (bitsandbytes' Adam8bit / AdamW8bit, see :mod:`floatlab.mixed.optim8bit`;
        ``optimizer_options`` go to them, e.g. ``{"min_8bit_size": 0, "block": None}``);
        ``lr`` defaults to 1e-3 (the Adams) or 1e-2 (SGD); lr = 0 is valid, as in torch.optim.
    weight_decay : the optimizer's; default 0, or 1e-2 for "adamw" / "adamw8bit" (torch's and
        bitsandbytes' default). Adam and SGD add it to the gradient (L2), AdamW decays the
        weights before the update and AdamW8bit / Adam8bit after it.
        A recipe with per-moment state formats (deepseek-fp8, msamp-O2/O3), or
        ``optimizer_options={"state": {"exp_avg": ..., "exp_avg_sq": ...}}`` (a format or a
        Scheme each; ``"expand": True`` adds COAT's dynamic range expansion), stores Adam's
        moments that way (:class:`~floatlab.mixed.optim8bit.StateAdam`).
    scaler : "auto" (the policy's: a GradScaler for "16-mixed"), None, "dynamic", a number
        (static scale), or a GradScaler / StaticScaler object, copied for each run (every fit
        starts from its state; the run's copy is ``trainer.scaler``). "bf16-mixed" refuses
        one, and so do the bf16 recipes but MS-AMP's ("dynamic": torch's GradScaler with
        MS-AMP's unscaling of FP8 weight gradients; see ``policy.takes_loss_scaler``).
    loss_multiplier : λ, multiplies the loss (see the module docstring: a stand-in for a deep
        network's small gradients, not part of real training).
    hidden, activation : the MLP's hidden widths and activation (when ``model`` is None).
    model : a Module to train instead (deep-copied; its parameters are rounded to the policy),
        or "transformer": a :class:`~floatlab.mixed.Transformer` (d_model 64, 4 heads, 2
        layers) sized to a :class:`~floatlab.mixed.SequenceDataset`'s vocabulary and context.
        Sequence data reports validation loss and perplexity (see :mod:`.seqtrain`).
    batch_size, seed : batches of a seeded per-epoch permutation; the seed also fixes the
        initial weights and stochastic rounding. Default 512 rows, or 32 sequences.
    progress : draw a progress bar (stderr, or an updating line in Jupyter).
    telemetry : record underflow / subnormal / overflow / bytes (costs a few NumPy passes per op).
    eval_every : evaluate test accuracy every this many steps (and at the end).
    matmul_precision, accumulate, optimizer_state, rounding : passed to
        :func:`~floatlab.mixed.get_policy`.
    device : "cuda" (default) or "cpu": whose autocast op lists the policy follows (torch's
        CPU lists run exp, log, softmax and sums in the low format; see
        :mod:`floatlab.mixed.autocast`). None keeps a Policy object's own.
    fused : Adam only: torch's ``Adam(fused=True)`` (the update in float32; no NaN in fp16).
    update_rounding, kahan : remedies for low-precision weights (see :mod:`.optim`).

    The runs use one BLAS thread (set with threadpoolctl and restored afterwards): the lab's
    matrices are tiny, and a second thread only doubles the CPU time.

    >>> from floatlab.mixed import teacher_gaussians
    >>> h = Trainer("bf16-mixed", progress=False).fit(teacher_gaussians(n=1024), steps=20)
    >>> len(h), h.skipped_steps, sorted(h.bytes_held["master weights"])
    (20, 0, ['float32'])
    """

    def __init__(
        self,
        precision: Any = "32-true",
        *,
        optimizer: str = "adam",
        lr: float | None = None,
        momentum: float = 0.0,
        weight_decay: float | None = None,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        scaler: Any = "auto",
        loss_multiplier: float = 1.0,
        hidden: Sequence[int] = (64, 64),
        activation: str = "relu",
        model: Module | str | None = None,
        batch_size: int | None = None,
        seed: int = 0,
        progress: bool = True,
        telemetry: bool = True,
        eval_every: int = 50,
        matmul_precision: str | None = None,
        accumulate: str | Format | Accumulator | None = None,
        optimizer_state: str | Format | None = None,
        rounding: str | None = None,
        update_rounding: str = "nearest_even",
        kahan: bool = False,
        device: str | None = None,
        fused: bool = False,
        recipe_options: dict[str, Any] | None = None,
        optimizer_options: dict[str, Any] | None = None,
    ) -> None:
        scaler_object = scaler if isinstance(scaler, _LossScaler) else None
        spec = "auto" if scaler_object is not None else scaler
        if device is None and not isinstance(precision, Policy):
            device = "cuda"
        self.policy = get_policy(precision, matmul_precision=matmul_precision,
                                 accumulate=accumulate, scaler=spec,
                                 optimizer_state=optimizer_state, rounding=rounding,
                                 device=device, recipe_options=recipe_options)
        if scaler_object is not None:
            refuse_scaler_for_bf16_mixed(self.policy, scaler_object)
            if isinstance(scaler_object, GradScaler) and self.policy.weights == FP16 and \
                    not isinstance(scaler_object, _MSAMPGradScaler):
                if takes_loss_scaler(self.policy.recipe):
                    raise ValueError(f"{self.policy.name!r} unscales its FP8 weight gradients "
                                     "as MS-AMP does (through their scales, not as FP16 "
                                     "tensors); pass scaler='dynamic' for torch's GradScaler "
                                     "with MS-AMP's unscaling")
                raise ValueError(_fp16_weights_refuse_grad_scaler(self.policy))
        elif self.policy.scaler == "dynamic" and self.policy.weights == FP16 and \
                not takes_loss_scaler(self.policy.recipe):  # (it raised in fit's first step)
            raise ValueError(_fp16_weights_refuse_grad_scaler(self.policy))
        if optimizer not in _OPTIMIZERS:
            raise ValueError(f"optimizer={optimizer!r}: use 'adam', 'adamw', 'sgd', 'adam8bit' "
                             "or 'adamw8bit'")
        if optimizer_options is not None and not isinstance(optimizer_options, dict):
            raise TypeError(f"optimizer_options must be a dict, got {optimizer_options!r}")
        self.optimizer_options = dict(optimizer_options or {})
        if "weight_decay" in self.optimizer_options:  # two values for one argument
            raise ValueError("optimizer_options: pass weight_decay to the Trainer "
                             "(Trainer(weight_decay=...)), not in optimizer_options")
        lr = None if lr is None else number("lr", lr, nonnegative=True)
        loss_multiplier = number("loss_multiplier", loss_multiplier, positive=True)
        if isinstance(model, str) and model != "transformer":
            raise ValueError(f"model={model!r}: pass None (an MLP), 'transformer', or a Module")
        if batch_size is None:
            batch_size = 32 if model == "transformer" or isinstance(model, Transformer) else 512
        batch_size, eval_every = whole("batch_size", batch_size), whole("eval_every", eval_every)
        seed = whole("seed", seed, minimum=0)
        momentum = number("momentum", momentum, nonnegative=True)
        if momentum and optimizer != "sgd":  # it was dropped without a word
            raise ValueError(f"momentum={momentum:g} is SGD's argument (optimizer='sgd'); "
                             f"optimizer={optimizer!r} takes no momentum: its first moment "
                             "decays by betas[0], e.g. betas=(0.9, 0.999)")
        if weight_decay is None:  # torch's AdamW and bitsandbytes' AdamW8bit: 1e-2
            weight_decay = 1e-2 if optimizer in ("adamw", "adamw8bit") else 0.0
        weight_decay = number("weight_decay", weight_decay, nonnegative=True)
        eps = number("eps", eps, nonnegative=True)
        self.hidden = _widths(hidden)
        if activation not in ("relu", "tanh"):
            raise ValueError(f"activation={activation!r}: use 'relu' or 'tanh'")
        if model is not None and not isinstance(model, (Module, str)):
            raise TypeError(f"model must be a floatlab.mixed Module (e.g. MLP((16, 64, 4))) or "
                            f"'transformer', got {type(model).__name__}")
        if fused and optimizer not in ("adam", "adamw"):
            raise ValueError("fused=True is an option of Adam and AdamW (torch.optim.Adam("
                             "fused=True)); use optimizer='adam' or 'adamw'")
        self.fused = flag("fused", fused)
        progress, telemetry = flag("progress", progress), flag("telemetry", telemetry)
        kahan = flag("kahan", kahan)
        update_rounding = check_update_rounding(update_rounding, kahan)
        self.optimizer_name = optimizer
        self.lr = lr if lr is not None else (1e-2 if optimizer == "sgd" else 1e-3)
        self.momentum, self.weight_decay, self.betas, self.eps = momentum, weight_decay, betas, eps
        self._scaler_object = scaler_object
        self.loss_multiplier = float(loss_multiplier)
        self.activation, self._model_in = activation, model
        self.batch_size, self.seed, self.progress = batch_size, seed, progress
        self.telemetry, self.eval_every = telemetry, eval_every
        self.update_rounding, self.kahan = update_rounding, kahan
        self.model: Module | None = None
        self.optimizer: Optimizer | None = None
        self.scaler: _LossScaler | None = None
        self.history: History | None = None
        self.recipe_run = None  # the RecipeRun of the last fit (recipes only)

    # ------------------------------------------------------------------ building
    def _build_model(self, data: Dataset | SequenceDataset) -> Module:
        if isinstance(data, SequenceDataset):
            if self._model_in == "transformer":
                return Transformer(data.vocab, 64, 4, 2, data.context, seed=self.seed)
            check_model_fits(self._model_in, data)
        elif self._model_in == "transformer" or isinstance(self._model_in, Transformer):
            raise TypeError(f"a Transformer trains on token sequences (char_lm(), "
                            f"digit_reversal()), not on the classification data {data.name!r}")
        if self._model_in is None:
            sizes = (data.features, *self.hidden, data.classes)
            return MLP(sizes, activation=self.activation, seed=self.seed)
        model = copy.deepcopy(self._model_in)
        for p in model.parameters():  # adopt the policy's weight format
            p.data = quantize(p.data, self.policy.weights, what="weights")
            p.fmt, p.grad, p._copy = self.policy.weights, None, None
        return model

    def _build_optimizer(self, model: Module) -> Optimizer:
        options = dict(update_rounding=self.update_rounding, kahan=self.kahan, seed=self.seed)
        recipe = self.policy.recipe
        name = self.optimizer_name
        if name in ("adam8bit", "adamw8bit"):  # (weight_decay was dropped without a word)
            cls8 = Adam8bit if name == "adam8bit" else AdamW8bit
            return cls8(model.parameters(), lr=self.lr, betas=self.betas, eps=self.eps,
                        weight_decay=self.weight_decay, seed=self.seed,
                        **self.optimizer_options)
        per_moment = "state" in self.optimizer_options or (
            recipe is not None and recipe.state and self.policy.optimizer_state is None)
        if name in ("adam", "adamw") and per_moment:
            extra = dict(self.optimizer_options)
            state = extra.pop("state", recipe.state if recipe is not None else None)
            return StateAdam(model.parameters(), lr=self.lr, betas=self.betas, eps=self.eps,
                             weight_decay=self.weight_decay, state=state, seed=self.seed,
                             decoupled_weight_decay=name == "adamw", **extra)
        if self.optimizer_options:
            raise ValueError("optimizer_options are for optimizer='adam8bit' / 'adamw8bit' "
                             "(and recipes with per-moment state formats)")
        if name in ("adam", "adamw"):
            return (Adam if name == "adam" else AdamW)(
                model.parameters(), lr=self.lr, betas=self.betas, eps=self.eps,
                weight_decay=self.weight_decay, fused=self.fused, **options)
        return SGD(model.parameters(), lr=self.lr, momentum=self.momentum,
                   weight_decay=self.weight_decay, **options)

    def _build_scaler(self) -> _LossScaler | None:
        if self._scaler_object is not None:  # a copy: the caller's object (shared by every
            # compare() entry, reused by a second fit) kept the last run's scale and tracker
            return copy.deepcopy(self._scaler_object)
        spec = self.policy.scaler
        if spec is None:
            return None
        if spec == "dynamic":
            if takes_loss_scaler(self.policy.recipe):  # MS-AMP's unscaling of FP8 gradients
                return _MSAMPGradScaler(max_scale=self.policy.scaler_max)
            return GradScaler(max_scale=self.policy.scaler_max)
        return StaticScaler(float(spec))

    def describe(self, data: Dataset | None = None, steps: int | None = None) -> str:
        """One line describing the experiment (compare()'s header: the parts every entry
        shares)."""
        return ", ".join(self._describe_parts(data, steps))

    def _describe_parts(self, data: Dataset | None, steps: int | None) -> list[str]:
        data = None if data is None else _dataset(data)  # a Dataset, or a clear TypeError
        steps = None if steps is None else whole("describe: steps", steps)
        opt = self._optimizer_label()
        if isinstance(data, SequenceDataset):
            return describe_sequences(self, data, steps, opt)
        # model= is described by itself (the widths of hidden= were shown for it)
        net = (repr(self._model_in) if isinstance(self._model_in, Module)
               else "Transformer (d_model 64, 4 heads, 2 layers)"
               if self._model_in == "transformer" else "MLP " + "-".join(
                   map(str, ((data.features,) if data else ()) + self.hidden
                       + ((data.classes,) if data else ()))))
        lam = (f"loss multiplier λ = {_pow2(self.loss_multiplier)} (slides gradients down as a "
               "deep network would; a teaching device, not part of real training)"
               if self.loss_multiplier != 1 else "λ = 1")
        where = [f"{data.name} ({len(data.X_train)} train / {len(data.X_test)} test)"] \
            if data else []
        rows = self.batch_size
        if data and rows > len(data.X_train):  # each batch is every training row
            rows = f"{len(data.X_train)} (every training row; batch_size {self.batch_size})"
        run = [f"{steps} steps of {rows}"] if steps else []
        lists = f"torch's {self.policy.device.upper()} autocast op lists"
        return [*where, net, opt, *run, lam, lists]

    def _optimizer_label(self) -> str:
        """The optimizer and its learning rate, as the experiment line shows them."""
        return f"{optimizer_label(self)} lr {self.lr:g}"

    # ------------------------------------------------------------------ running
    def evaluate(self, X: np.ndarray, y: np.ndarray, chunk: int = 2048) -> float:
        """Accuracy of the trained classifier on (X, y), computed under the run's policy
        (a sequence model's validation metrics are in its History)."""
        if self.model is None:
            raise RuntimeError("evaluate(): call fit() first")
        if isinstance(self.model, Transformer):  # (X read as float features: "token ids must
            # be integers, got dtype float32")
            raise TypeError("evaluate(X, y) scores a classifier; this Trainer trained a "
                            "Transformer on token sequences: its History holds the validation "
                            "loss and next-token accuracy (final_val_loss, "
                            "final_test_accuracy, history['val_loss'])")
        chunk = whole("evaluate: chunk", chunk)
        X = as_float_array(X, name="evaluate: X")
        y = as_array(y, "evaluate: y")
        if y.shape != (len(X),):  # else each chunk's accuracy() names a chunk, not the call
            raise ValueError(f"evaluate: y has shape {y.shape}; pass one label per row of X, "
                             f"shape ({len(X)},)")
        if not len(X):
            return float("nan")  # no rows: accuracy() of an empty batch (was a ZeroDivision)
        with use_precision(self.policy, rng=self.seed), no_grad():
            return self._accuracy(X, y, chunk)

    def _accuracy(self, X: np.ndarray, y: np.ndarray, chunk: int = 2048) -> float:
        correct = 0.0
        with no_grad():
            for i in range(0, len(X), chunk):
                correct += accuracy(self.model(Tensor(X[i : i + chunk])), y[i : i + chunk]) * len(
                    X[i : i + chunk])
        return correct / len(X)

    def fit(self, data: Dataset | None = None, steps: int = 500) -> History:
        """Train for ``steps`` batches and return the :class:`History` (also ``self.history``).

        ``data`` defaults to :func:`~floatlab.mixed.teacher_gaussians` (seed 0). The run uses
        one BLAS thread; the previous limits are restored afterwards.

        Every call is a new run from the seed: a fresh model (a new copy of ``model=``),
        optimizer, scaler and batch order, so fitting twice repeats the run rather than
        continuing it; fit once with more steps to train longer. (Lightning's ``Trainer.fit``
        trains the module it is given in place and keeps its step counter, so a second call
        starts from the trained weights, and after ``max_steps`` trains no further.)

        >>> t = Trainer(progress=False)
        >>> data = teacher_gaussians(n=256)
        >>> t.fit(data, steps=2)["loss"].tolist() == t.fit(data, steps=2)["loss"].tolist()
        True
        """
        data = _dataset(data)
        steps = whole("steps", steps)
        # (imported here: only training needs it, so formats, rounding and the codec import
        # with NumPy alone)
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            if isinstance(data, SequenceDataset):
                return fit_sequences(self, data, steps)
            return self._fit(data, steps)

    def _fit(self, data: Dataset, steps: int) -> History:
        history = History(self.policy.name, {"policy": self.policy, "device": self.policy.device,
                                             "experiment": self.describe(data, steps)})
        bar = Progress(steps, desc=self.policy.name, enabled=self.progress)
        start = time.perf_counter()
        run_context = recipe_run(self.seed, self.telemetry) if self.policy.recipe else nullcontext()
        with use_precision(self.policy, rng=self.seed), run_context as run:
            self.recipe_run = run
            self.model = model = self._build_model(data)
            self.optimizer = opt = self._build_optimizer(model)
            self.scaler = scaler = self._build_scaler()
            batches = _batches(len(data.X_train), self.batch_size, self.seed)
            for step in range(steps):
                idx = next(batches)
                stats = StepStats(count_flushed=False) if self.telemetry else None
                row = self._step(model, opt, scaler, data.X_train[idx], data.y_train[idx], stats)
                if run is not None:
                    row.update(run.end_step())
                if (step + 1) % self.eval_every == 0 or step == steps - 1:
                    row["test_accuracy"] = self._accuracy(data.X_test, data.y_test)
                held = bytes_held(model, opt, self.policy, stats, run) if stats else None
                history._append(step=step, bytes_held=held, **row)
                bar.update(loss=row["loss"], scale=row["scale"])
            if run is not None:  # per-operand telemetry: {"linear0.forward.a": [stats...]}
                history.info["operands"] = run.history
            history.final_train_accuracy = self._accuracy(data.X_train, data.y_train)
            history.final_test_accuracy = history["test_accuracy"][-1]
        bar.close()
        history.wall_time = time.perf_counter() - start
        self.history = history
        return history

    def _step(self, model: Module, opt: Optimizer, scaler: _LossScaler | None,
              xb: np.ndarray, yb: np.ndarray, stats: StepStats | None) -> dict[str, Any]:
        opt.zero_grad()
        scale = scaler.get_scale() if scaler is not None else 1.0
        with recording(stats) if stats is not None else nullcontext():
            if isinstance(xb, tuple):  # token sequences: (ids, loss mask)
                logits, loss, batch_accuracy = batch_loss(model, xb, yb)
            else:
                logits = model(Tensor(xb))
                loss = cross_entropy(logits, yb)
                batch_accuracy = _fraction_correct(logits.data, yb)  # yb checked just above
            objective = loss * self.loss_multiplier if self.loss_multiplier != 1 else loss
            (scaler.scale(objective) if scaler is not None else objective).backward()
            if scaler is not None:
                report = scaler.step(opt)
                scaler.update()
            else:
                report = opt.step()
        row = {"loss": loss.item(), "accuracy": batch_accuracy, "scale": scale,
               "skipped": report is None,
               "lost_updates": report.lost_fraction if report is not None else math.nan}
        if stats is not None:
            row.update(nonfinite=stats.nonfinite_results, overflow=stats.overflow,
                       underflow=stats.underflow_fraction, subnormal=stats.subnormal_fraction)
        return row


def _widths(hidden: Any) -> tuple[int, ...]:
    if isinstance(hidden, (str, bytes)) or not isinstance(hidden, Sequence):
        raise TypeError(f"hidden must be a sequence of layer widths such as (64, 64), got "
                        f"{hidden!r}; for one hidden layer of 64 write hidden=(64,)")
    return tuple(whole(f"hidden[{i}]", h) for i, h in enumerate(hidden))


def _dataset(data: Any) -> Dataset | SequenceDataset:
    """``data`` if it is a Dataset or SequenceDataset (None: the default teacher_gaussians()),
    else a clear error."""
    if data is None:
        return teacher_gaussians()
    if isinstance(data, (Dataset, SequenceDataset)):
        return data
    if isinstance(data, (tuple, list)) and len(data) == 2:
        raise TypeError("data=(X, y): wrap the arrays in a Dataset, which also holds a test "
                        "split: Dataset.from_arrays(X, y) (keeps a seeded half for testing) or "
                        "Dataset(name, X_train, y_train, X_test, y_test, classes)")
    raise TypeError(f"data must be a floatlab.mixed.Dataset (e.g. teacher_gaussians(), "
                    f"spirals() or Dataset.from_arrays(X, y)) or a SequenceDataset (char_lm(), "
                    f"digit_reversal()), got {type(data).__name__}")


def _entries(precisions: Any) -> list[Any]:
    """compare()'s precisions as a list: one precision (a string, Policy or dict) is a list of
    one; strings that are formats, not precisions, get the precision they probably mean."""
    if isinstance(precisions, (str, int, Policy, dict)) and not isinstance(precisions, bool):
        return [precisions]
    if not isinstance(precisions, Sequence):
        raise TypeError(f"precisions must be a list such as ['32-true', '16-mixed'] (or one "
                        f"precision), got {type(precisions).__name__}")
    entries = list(precisions)
    if not entries:
        raise ValueError("precisions is empty: name at least one, e.g. ['32-true', '16-mixed']")
    return entries


def _run_one(options: dict[str, Any], data: Dataset, steps: int) -> tuple[History, list[str]]:
    """One compare() run (module level, so worker processes can pickle it)."""
    trainer = Trainer(**options)
    return trainer.fit(data, steps), trainer._describe_parts(data, steps)


def compare(
    precisions: Sequence[Any] = DEFAULT_PRECISIONS,
    steps: int = 500,
    progress: bool = True,
    data: Dataset | None = None,
    workers: int | None = None,
    **trainer_options: Any,
) -> Comparison:
    """Run the same experiment under several precisions; ``str(result)`` is the table.

    Each entry of ``precisions`` is a precision string, a Policy, or a dict of Trainer
    arguments with a "precision" key (and an optional "label"); a single entry (e.g.
    ``compare("16-mixed")``) is one run. Example of a dict entry:
    ``{"precision": "16-mixed", "scaler": None, "label": "fp16 mixed, no scaler"}``.
    ``trainer_options`` go to every :class:`Trainer` (e.g. ``loss_multiplier=2**-16``).
    ``workers=N`` runs the entries in N processes (concurrent.futures); every run is seeded
    and single-threaded, so the results equal the serial run's (only wall times differ).

    >>> from floatlab.mixed import teacher_gaussians
    >>> r = compare(["32-true", "16-true"], steps=5, progress=False,
    ...             data=teacher_gaussians(n=1024))
    >>> [h.went_nan for h in r]
    [False, True]
    """
    data = _dataset(data)
    steps = whole("steps", steps)
    progress = flag("progress", progress)  # "False" would show the bars (a truthy string)
    entries = _entries(precisions)
    workers = 1 if workers is None else whole("workers", workers)
    jobs = []
    for entry in entries:
        options = dict(trainer_options)
        label = None
        if isinstance(entry, dict):
            entry = dict(entry)
            label = entry.pop("label", None)
            options.update(entry)
        else:
            options["precision"] = entry
        options.setdefault("progress", progress and workers == 1)
        jobs.append((options, label))
    # Build every entry's Trainer first (checks only: cheap), so a typo in the last entry's
    # precision or options fails before the first run; each run builds its own.
    with warnings.catch_warnings():  # legacy-alias warnings come once, from the run
        warnings.simplefilter("ignore")
        for options, _ in jobs:
            Trainer(**options)
    if workers > 1 and len(jobs) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
            results = list(pool.map(_run_one, [o for o, _ in jobs], [data] * len(jobs),
                                    [steps] * len(jobs)))
    else:
        results = [_run_one(o, data, steps) for o, _ in jobs]
    # The header says what every entry shares; what an entry sets apart (another optimizer,
    # lr, model) is its row's "settings" (the first entry's line headed every row before).
    header, settings = shared_description([parts for _, parts in results])
    histories = []
    for (history, _), (_, label) in zip(results, jobs, strict=True):
        if label:
            history.precision = label
        # Two entries may resolve to the same name (e.g. 16 and "16-mixed"): keep both rows.
        history.precision = unique_run_name(history.precision, {h.precision for h in histories})
        histories.append(history)
    return Comparison(histories, header, settings=settings)
