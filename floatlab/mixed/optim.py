"""SGD, Adam and AdamW whose arithmetic and state live in the weights' (or a chosen) format.

Each optimizer follows torch's update formulas op by op and rounds every intermediate result
through the lab's hook, so with "16-true" the Adam moments are float16 tensors -- and Adam's
``eps = 1e-8`` rounds to 0 in float16, which is how pure fp16 training goes NaN.

For low-precision weights, the final write ``w + update`` can be rounded stochastically
(``update_rounding="stochastic"``) or made Kahan-compensated (``kahan=True``), the two remedies
of Zamirai et al. (2020) for updates that are too small to change a bf16 weight.

>>> import numpy as np
>>> from floatlab.mixed import SGD, parameter, use_precision
>>> with use_precision("bf16-true"):
...     w = parameter([1.0])
...     opt = SGD([w], lr=1e-3)
...     w.grad = np.array([1.0], np.float32)
...     report = opt.step()
>>> w.data.tolist(), report.lost_fraction        # 1 - 1e-3 rounds back to 1 in bf16
([1.0], 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from floatlab.formats import Format, get_format
from floatlab.mixed import optim_state
from floatlab.mixed.checks import flag, number
from floatlab.mixed.checks import seed as seed_rng
from floatlab.mixed.checks import update_rounding as check_update_rounding
from floatlab.mixed.gemm import _prime_copies
from floatlab.mixed.opmath import axpy, fma32, scale
from floatlab.mixed.optim_args import _betas, _check_ranges, _check_torch_options
from floatlab.mixed.policy import FP32, contains, nbytes, storage_dtype, widest
from floatlab.mixed.scope import _scope
from floatlab.mixed.tensor import Tensor, active_policy, prime_copies, quantize

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "UpdateReport"]

@dataclass(frozen=True)
class UpdateReport:
    """What one optimizer step did to the weights.

    nonzero_grads : gradient entries that were non-zero (and finite).
    lost : of those, entries whose weight did not change (the update rounded away).
    """

    nonzero_grads: int
    lost: int

    @property
    def lost_fraction(self) -> float:
        """``lost / nonzero_grads`` (NaN when every gradient entry was zero)."""
        return self.lost / self.nonzero_grads if self.nonzero_grads else float("nan")


class _Group:
    """Parameters that share a weight format and a state format, updated as one flat vector.

    Updating one concatenated vector costs a dozen NumPy calls per step instead of a dozen per
    parameter; every op is element-wise, so the arithmetic (and its rounding) is unchanged.
    """

    def __init__(self, params: list[Tensor], fmt: Format, state_fmt: Format) -> None:
        self.params, self.fmt, self.state_fmt = params, fmt, state_fmt
        self.sizes = np.array([p.size for p in params])
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)])
        self.steps = np.zeros(len(params), dtype=np.int64)  # per parameter, as torch keeps it
        self.state: dict[str, np.ndarray] = {}

    def gather(self) -> tuple[list[int], np.ndarray | slice, np.ndarray, np.ndarray]:
        """(active parameter indices, their positions, their flat gradient, all flat weights)."""
        active = [i for i, p in enumerate(self.params) if p.grad is not None]
        weights = np.concatenate([p.data.reshape(-1) for p in self.params])
        # in the weights' dtype: a float64 .grad assigned by hand to a float32 parameter made
        # the whole group's update arithmetic float64, silently off torch's float32 (Adam's
        # last bits); its values are cast as a gradient flowing into the parameter is
        grad = np.concatenate([self.params[i].grad.reshape(-1) for i in active],
                              dtype=weights.dtype, casting="same_kind") if active \
            else np.zeros(0, weights.dtype)
        if len(active) == len(self.params):
            return active, slice(None), grad, weights
        where = np.concatenate([np.arange(self.offsets[i], self.offsets[i + 1]) for i in active]
                               or [np.zeros(0, np.int64)])
        return active, where, grad, weights

    def scatter(self, active: list[int], weights: np.ndarray) -> None:
        """Give each updated parameter its slice of ``weights`` (a new array object, so cached
        low-precision copies see the change; parameters without a gradient keep theirs)."""
        for i in active:
            p = self.params[i]
            p.data = weights[self.offsets[i] : self.offsets[i + 1]].reshape(p.shape)


class Optimizer:
    """Base class: parameter groups, the rounded write of updates, state accounting.

    Parameters
    ----------
    params : leaf tensors (e.g. ``model.parameters()``); a frozen one (``requires_grad=False``)
        is accepted and left alone while its ``.grad`` is None, as in torch.optim.
    state_format : format of the optimizer state; default: the active policy's optimizer-state
        format if it names one, else each parameter's own format.
    update_rounding : "nearest_even" or "stochastic" rounding of ``w + update`` (or an alias of
        floatlab.round's, such as "rne" or "sr").
    kahan : keep a compensation buffer (in the weights' format) that carries the part of each
        update the rounding lost into the next step.
    seed : seed of the generator for stochastic updates.
    low_copies : format of the weight copies the next forward's matmuls read, made in one
        rounding right after each step (Apex O2's master-to-model copy); "auto" takes the
        active policy's matmul input format, None leaves the copies to the matmuls' lazy cache.

    Parameters without a gradient are left alone (their state does not advance), as in torch.
    A parameter listed twice is refused (ValueError): torch only warns ("a parameter group with
    duplicate parameters; in future, this will cause an error") and then updates it twice per
    step, which is never what was meant. A set is refused as in torch (its order changes
    between runs); any other iterable, a generator too, is read once.
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        *,
        state_format: str | Format | None = None,
        update_rounding: str = "nearest_even",
        kahan: bool = False,
        seed: int = 0,
        low_copies: str | Format | None = "auto",
        **torch_options: Any,
    ) -> None:
        _check_torch_options(type(self).__name__, torch_options)
        kahan = flag("kahan", kahan)
        if isinstance(params, Tensor) or not isinstance(params, Iterable):
            raise TypeError(f"{type(self).__name__}: params must be an iterable of Tensors such "
                            f"as model.parameters(), got {type(params).__name__}; wrap a single "
                            "tensor in a list: [w]")
        if isinstance(params, (set, frozenset)):  # torch's refusal, in its words
            raise TypeError(f"{type(self).__name__}: optimizer parameters need to be organized "
                            "in ordered collections, but the ordering of tensors in sets will "
                            "change between runs. Please use a list instead (torch's words; "
                            "the order places each value in the stochastic updates' random "
                            "stream)")
        self.params = list(params)
        if not self.params:
            raise ValueError(f"{type(self).__name__}: got no parameters; pass model.parameters()")
        # torch.optim's rule (Optimizer.add_param_group): Tensors, and leaves; requires_grad is
        # not asked, a frozen parameter is kept and skipped while its .grad is None
        for i, p in enumerate(self.params):
            if isinstance(p, dict):  # torch's parameter groups: not offered here
                raise TypeError(f"{type(self).__name__}: parameter groups (dicts such as "
                                "{'params': [...], 'lr': ...}) are not supported; pass one list "
                                "of tensors, and make one optimizer per group of settings")
            if not isinstance(p, Tensor):
                raise TypeError(f"{type(self).__name__}: optimizer can only optimize Tensors "
                                f"(torch's words), but parameter {i} is a "
                                f"{type(p).__name__}; build it with floatlab.mixed.parameter()")
            if p._parents:
                raise ValueError(f"{type(self).__name__}: can't optimize a non-leaf Tensor "
                                 f"(torch's words): parameter {i} is the result of an op "
                                 f"({p._op}), not a leaf tensor; pass the parameters it came "
                                 "from, or t.detach() wrapped by floatlab.mixed.parameter()")
        if len({id(p) for p in self.params}) != len(self.params):
            raise ValueError(f"{type(self).__name__}: a parameter appears twice in params")
        update_rounding = check_update_rounding(update_rounding, kahan)
        policy = active_policy()
        self.state_format = (get_format(state_format) if state_format is not None
                             else policy.optimizer_state)
        self.low_copies = (policy.matmul_inputs if low_copies == "auto"
                           else None if low_copies is None else get_format(low_copies))
        self.update_rounding = update_rounding
        self.kahan = kahan
        self.last_report: UpdateReport | None = None
        self._rng = seed_rng(f"{type(self).__name__}: seed", seed)
        groups: dict[tuple[Format, Format], list[Tensor]] = {}
        for p in self.params:
            groups.setdefault((p.fmt, self.state_format or p.fmt), []).append(p)
        self.groups = [_Group(ps, f, sf) for (f, sf), ps in groups.items()]
        if self.low_copies is not None:
            for group in self.groups:
                prime_copies(group.params, self.low_copies)

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _q(values: Any, fmt: Format) -> np.ndarray:
        return quantize(np.asarray(values), fmt, what="optimizer")

    def _write(self, group: _Group, where: np.ndarray | slice, old: np.ndarray,
               direction: np.ndarray, alpha: float) -> np.ndarray:
        """torch's ``param.add_(direction, alpha=alpha)`` into the weights' format.

        One rounding (see :mod:`.opmath`); stochastic updates round that store stochastically.
        """
        fmt = group.fmt
        if not self.kahan:
            rounding = None if self.update_rounding == "nearest_even" else "stochastic"
            return axpy(old, alpha, direction, fmt, rounding=rounding, rng=self._rng)
        # Kahan: y is the update plus what earlier roundings dropped; (new - old) is exactly
        # what this rounding kept, so the new compensation is what it dropped.
        if "kahan" not in group.state:  # lives in the weights' format, not the state format
            group.state["kahan"] = np.zeros(int(group.offsets[-1]), storage_dtype(fmt))
        c = group.state["kahan"]
        y = self._q(self._q(alpha * direction, fmt) - c[where], fmt)
        new = self._q(old + y, fmt)
        c[where] = self._q(self._q(new - old, fmt) - y, fmt)
        return new

    def _state(self, group: _Group, key: str) -> np.ndarray:
        """A flat state vector of the group, zeros on first use, in the state format."""
        if key not in group.state:
            group.state[key] = np.zeros(int(group.offsets[-1]), storage_dtype(group.state_fmt))
        return group.state[key]

    # ------------------------------------------------------------------ public
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every parameter's gradient (the next backward starts from zero), torch's
        ``zero_grad(set_to_none=True)``; ``set_to_none=False`` gives each existing gradient
        zeros instead (a new array: one assigned by hand is not written to), None stays None."""
        set_to_none = flag("set_to_none", set_to_none)
        for p in self.params:
            p.grad = None if set_to_none or p.grad is None else np.zeros_like(p.grad)

    def step(self) -> UpdateReport:
        """Update every parameter that has a gradient; report how many updates were lost."""
        self._check_grads()
        nonzero = lost = 0
        with np.errstate(all="ignore"):
            for group in self.groups:
                active, where, grad, weights = group.gather()
                if not active:
                    continue
                group.steps[active] += 1
                old = weights[where]
                new = self._new_weights(group, where, grad, old, active)
                moved = (grad != 0) & np.isfinite(grad)
                nonzero += int(np.count_nonzero(moved))
                # lr = 0 (torch allows it) makes no update: none is lost. (getattr: a
                # subclass of Optimizer need not have an lr)
                if getattr(self, "lr", None) != 0:
                    lost += int(np.count_nonzero(moved & (new == old)))
                if isinstance(where, slice):
                    weights = new
                else:
                    weights[where] = new
                group.scatter(active, weights)
                if self.low_copies is not None and not _copies_unread():
                    _prime_copies(group.params, self.low_copies, flat=weights)  # checked
        self.last_report = UpdateReport(nonzero, lost)
        return self.last_report

    def _check_grads(self) -> None:
        """Gradients assigned by hand (``p.grad = ...``) must be arrays of the parameter's shape:
        a list was an AttributeError inside gather(), a wrong shape a broadcasting error (or a
        silent broadcast) inside the update arithmetic."""
        for i, p in enumerate(self.params):
            g = p.grad
            if g is None:
                continue
            if not isinstance(g, (np.ndarray, np.generic)) or g.dtype.kind != "f":
                what = f"an array of dtype {g.dtype}" if hasattr(g, "dtype") else \
                    type(g).__name__
                raise TypeError(f"{type(self).__name__}.step: parameter {i}'s .grad is {what}; "
                                "assign a float array of the parameter's shape, or None")
            if g.shape != p.shape:
                raise ValueError(f"{type(self).__name__}.step: parameter {i}'s .grad has shape "
                                 f"{g.shape}, the parameter has shape {p.shape}")

    def _new_weights(self, group: _Group, where: np.ndarray | slice, grad: np.ndarray,
                     weights: np.ndarray, active: list[int]) -> np.ndarray:
        """The active entries' new weights: ``weights.add_(direction, alpha)`` of the update."""
        direction, alpha = self._update(group, where, grad, weights, active)
        return self._write(group, where, weights, direction, alpha)

    def _update(self, group: _Group, where: np.ndarray | slice, grad: np.ndarray,
                weights: np.ndarray, active: list[int]) -> tuple[np.ndarray, float]:
        """``(direction, alpha)`` of the active entries: the step is
        ``weights.add_(direction, alpha=alpha)`` (subclasses)."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """The state in torch.optim's structure, NumPy copies (see :mod:`.optim_state`)."""
        return optim_state.state_dict(self)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load the ``state_dict()`` of an optimizer built the same way: the run resumes bit
        for bit. Any other dict is refused by name (see :mod:`.optim_state`)."""
        optim_state.load_state_dict(self, state_dict)

    def state_bytes(self) -> dict[str, int]:
        """Bytes of optimizer state per format name (real sizes from the formats' widths)."""
        out: dict[str, int] = {}
        for group in self.groups:
            for key, value in group.state.items():
                fmt = group.fmt if key == "kahan" else group.state_fmt
                out[fmt.name] = out.get(fmt.name, 0) + nbytes(fmt, value.size)
        return out

    def _describe(self) -> str:
        extra = ", kahan" if self.kahan else ""
        if self.update_rounding == "stochastic":
            extra += ", stochastic updates"
        if self.state_format is not None:
            extra += f", state {self.state_format.name}"
        return extra


def _copies_unread() -> bool:
    """Whether the per-step low-precision weight copies would be neither read nor recorded, so
    the optimizer need not make them: under a training recipe the Linear layers' GEMMs quantise
    the weights themselves (:mod:`floatlab.mixed.recipe_gemm`) and read no copy, and without
    telemetry nothing counts the rounding. A product that does read a parameter's copy (a
    user's bmm on a weight) makes the same values lazily (``_matmul_input``: the rounding is
    element-wise, as :func:`~floatlab.mixed.gemm.prime_copies` says), so no value changes."""
    return active_policy().recipe is not None and _scope().stats is None


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, torch's formulas.

    ``buf = momentum * buf + (1 - dampening) * g`` (``buf = g`` on the first step), and
    ``w = w - lr * buf`` (or ``g + momentum * buf`` with Nesterov). Each torch tensor op rounds
    once, as on torch's CPU: ``w.add_(d, alpha=-lr)`` is one fused multiply-add in float32, so
    ``lr * d`` is not rounded on its own (see :mod:`floatlab.mixed.opmath`).

    >>> from floatlab.mixed import parameter
    >>> w = parameter([1.0]); w.grad = np.array([0.5], np.float32)
    >>> _ = SGD([w], lr=0.1).step(); w.data.tolist()
    [0.949999988079071]
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 1e-2,
        momentum: float = 0.0,
        dampening: float = 0.0,
        nesterov: bool = False,
        weight_decay: float = 0.0,
        **options: Any,
    ) -> None:
        lr = number("lr", lr)
        momentum, weight_decay = number("momentum", momentum), number("weight_decay",
                                                                      weight_decay)
        dampening, nesterov = number("dampening", dampening), flag("nesterov", nesterov)
        _check_ranges("SGD", lr=lr, momentum=momentum, weight_decay=weight_decay)
        super().__init__(params, **options)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening "
                             f"(torch's words; got momentum={momentum}, dampening={dampening}): "
                             "pass momentum=0.9, dampening=0.0 with nesterov=True")
        self.lr, self.momentum, self.dampening = lr, momentum, dampening
        self.nesterov, self.weight_decay = nesterov, weight_decay

    def _update(self, group, where, grad, weights, active):
        # torch's single-tensor SGD (its CPU default), each tensor op rounded as torch rounds
        # it (see .opmath): one rounding per add_ / mul_, alpha in the tensor's format.
        fmt, sf = group.fmt, group.state_fmt
        g = grad if not self.weight_decay else axpy(grad, self.weight_decay, weights, fmt)
        if not self.momentum:
            return g, -self.lr
        buf_all = self._state(group, "momentum")
        first = group.steps[active] == 1  # torch starts the buffer at the first gradient
        buf = axpy(scale(buf_all[where], self.momentum, sf), 1 - self.dampening, g, sf)
        if first.any():
            fresh = np.repeat(first, group.sizes[active])
            buf = np.where(fresh, self._q(g, sf), buf)
        buf_all[where] = buf
        d = axpy(g, self.momentum, buf, widest(fmt, sf)) if self.nesterov else buf
        return d, -self.lr

    def __repr__(self) -> str:
        return f"SGD(lr={self.lr:g}, momentum={self.momentum:g}{self._describe()})"


class Adam(Optimizer):
    """Adam (Kingma & Ba) with torch's op order and bias corrections.

    ``m = lerp(m, g, 1 - beta1)``; ``v = beta2 * v + (1 - beta2) * g * g``;
    ``denom = sqrt(v) / sqrt(1 - beta2**t) + eps``; ``w = w - lr / (1 - beta1**t) * m / denom``.
    Every op is rounded to the state format: in float16, ``eps`` itself becomes 0.

    >>> from floatlab.mixed import parameter, use_precision
    >>> with use_precision("16-true"):
    ...     w = parameter([1.0, 1.0]); w.grad = np.array([0.0, 1e-4], np.float32)
    ...     _ = Adam([w]).step()
    >>> w.data.tolist()        # 0 / (0 + 0) and 1e-5 / (0 + 0): the seed article's NaN
    [nan, -inf]

    ``fused=True`` is torch's fused kernel (``torch.optim.Adam(fused=True)``): the same moments,
    stored in the state format, but the update computed in float32 from their unrounded values,
    so ``eps`` survives and pure fp16 does not go NaN -- the NaN is a property of the unfused
    update, not of fp16 itself:

    >>> with use_precision("16-true"):
    ...     w = parameter([1.0, 1.0]); w.grad = np.array([0.0, 1e-4], np.float32)
    ...     _ = Adam([w], fused=True).step()
    >>> w.data.tolist()        # torch 2.13 on CPU: [1.0, 0.9990234375]
    [1.0, 0.9990234375]

    ``decoupled_weight_decay=True`` is AdamW (torch >= 2.6 builds ``AdamW`` this way; see
    :class:`AdamW`): ``param.mul_(1 - lr * weight_decay)`` before the moments, instead of
    ``weight_decay * param`` added to the gradient.
    """

    #: bitsandbytes' kernels decay the weights after the update, not before (Adam8bit).
    _decay_after_update = False

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        *,
        fused: bool = False,
        decoupled_weight_decay: bool = False,
        **options: Any,
    ) -> None:
        who = type(self).__name__
        lr, eps = number("lr", lr), number("eps", eps)
        weight_decay = number("weight_decay", weight_decay)
        b1, b2 = _betas(who, betas)
        _check_ranges(who, lr=lr, eps=eps, beta1=b1, beta2=b2, weight_decay=weight_decay)
        self.fused = flag("fused", fused)
        self.decoupled_weight_decay = flag("decoupled_weight_decay", decoupled_weight_decay)
        if self.fused and options.get("kahan"):
            raise ValueError(f"{who}(fused=True) writes the weights in one rounding inside its "
                             "kernel; kahan=True needs the unfused update (fused=False)")
        super().__init__(params, **options)
        self.lr, self.betas, self.eps, self.weight_decay = lr, (b1, b2), eps, weight_decay

    def _decays(self) -> bool:
        """Whether the weights themselves decay before the update (torch's AdamW)."""
        return bool(self.weight_decay) and self.decoupled_weight_decay and \
            not self._decay_after_update

    def _decay(self, group: _Group, where: np.ndarray | slice, weights: np.ndarray
               ) -> np.ndarray:
        """torch's ``param.mul_(1 - lr * weight_decay)``, a write of the weights: rounded to
        their format (stochastically under stochastic updates); with ``kahan=True`` it is the
        compensated write ``param.add_(param, alpha=-lr * weight_decay)``."""
        if self.kahan:
            return self._write(group, where, weights, weights, -self.lr * self.weight_decay)
        rounding = None if self.update_rounding == "nearest_even" else "stochastic"
        return scale(weights, 1 - self.lr * self.weight_decay, group.fmt, rounding=rounding,
                     rng=self._rng)

    def _corrections(self, group: _Group, active: list[int]) -> tuple[Any, Any]:
        """``(lr / (1 - beta1**t), sqrt(1 - beta2**t))`` in float64, torch's Python scalars
        (an array per element when parameters of the group have different step counts)."""
        b1, b2 = self.betas
        t = group.steps[active]
        if (t == t[0]).all():  # the usual case: one step count, Python-float corrections
            t = int(t[0])
            return self.lr / (1 - b1**t), math.sqrt(1 - b2**t)
        t = np.repeat(t, group.sizes[active])  # parameters that missed steps
        return self.lr / (1 - b1**t), np.sqrt(1 - b2**t)

    def _new_weights(self, group, where, grad, weights, active):
        if not self.fused:
            if self._decays():  # torch's AdamW: the decayed weights take the update
                weights = self._decay(group, where, weights)
            return super()._new_weights(group, where, grad, weights, active)
        # torch's fused CPU kernel (FusedAdamKernel.cpp, vectorised body): every value loaded
        # into opmath (float32; float64 for wider formats), every constant converted to opmath,
        # each op rounded there, three of them fused multiply-adds (weight decay, the lerp of
        # m, the update of v: measured on torch 2.13); the moments are stored in the state
        # format but the update uses their unrounded opmath values; the weight is stored once.
        # So eps = 1e-8 survives in float32 where the unfused update, rounding each op to
        # fp16, loses it.
        b1, b2 = self.betas
        fmt, sf = group.fmt, group.state_fmt
        wide = not (contains(FP32, fmt) and contains(FP32, sf))
        dt = np.dtype(np.float64 if wide else np.float32)
        c = dt.type
        fma = (lambda a, b, s: a * b + s) if wide else fma32  # numpy has no float64 FMA
        p, g = weights.astype(dt), grad.astype(dt)
        if self._decays():  # ADAM_MODE::ADAMW: param * (1 - lr * wd), the factor in double
            p = (p * c(1 - self.lr * self.weight_decay)).astype(dt)
        elif self.weight_decay and not self.decoupled_weight_decay:
            g = fma(p, c(self.weight_decay), g).astype(dt)
        m_all, v_all = self._state(group, "exp_avg"), self._state(group, "exp_avg_sq")
        m, v = m_all[where].astype(dt), v_all[where].astype(dt)
        m = fma(c(1 - b1), g - m, m).astype(dt)  # lerp with weight 1 - beta1 < 0.5
        v = fma(c(1 - b2) * g, g, v * c(b2)).astype(dt)
        self._store_moments(group, where, active, m, v)
        step_size, bc2_sqrt = self._corrections(group, active)
        denom = np.sqrt(v) / np.asarray(bc2_sqrt).astype(dt) + c(self.eps)
        new = p - np.asarray(step_size).astype(dt) * m / denom
        rounding = None if self.update_rounding == "nearest_even" else "stochastic"
        return quantize(new, fmt, what="optimizer", rounding=rounding, rng=self._rng)

    def _store_moments(self, group: _Group, where: np.ndarray | slice, active: list[int],
                       m: np.ndarray, v: np.ndarray) -> None:
        """Store the fused update's moments (rounded to the state format; subclasses quantise
        them another way, see :mod:`floatlab.mixed.optim8bit`)."""
        sf = group.state_fmt
        group.state["exp_avg"][where] = self._q(m, sf)
        group.state["exp_avg_sq"][where] = self._q(v, sf)

    def _update(self, group, where, grad, weights, active):
        b1, b2 = self.betas
        f = group.state_fmt
        coupled = self.weight_decay and not self.decoupled_weight_decay
        g = self._q(grad + self.weight_decay * weights, f) if coupled else grad
        m_all, v_all = self._state(group, "exp_avg"), self._state(group, "exp_avg_sq")
        m = m_all[where] = self._q(m_all[where] + (g - m_all[where]) * (1 - b1), f)  # lerp_
        v = v_all[where] = self._q(self._q(v_all[where] * b2, f) + (1 - b2) * g * g, f)
        # Python floats (as torch's scalars): a NumPy float64 would promote float32 arrays.
        step_size, bc2_sqrt = self._corrections(group, active)
        if not isinstance(step_size, float):
            step_size, bc2_sqrt = step_size.astype(v.dtype), bc2_sqrt.astype(v.dtype)
        denom = self._q(self._q(self._q(np.sqrt(v), f) / bc2_sqrt, f) + self.eps, f)
        return -step_size * (m / denom), 1.0  # addcdiv_: one rounding, in the write

    def __repr__(self) -> str:
        fused = ", fused" if self.fused else ""
        if self.decoupled_weight_decay:  # (the coupled decay was never shown: kept so)
            fused = f", weight_decay={self.weight_decay:g}" + (
                " decoupled" if type(self) is Adam else "") + fused
        return (f"{type(self).__name__}(lr={self.lr:g}, betas={self.betas}, eps={self.eps:g}"
                f"{fused}{self._describe()})")


class AdamW(Adam):
    """torch.optim.AdamW: Adam with decoupled weight decay (Loshchilov & Hutter).

    Each step first decays the weights, ``param.mul_(1 - lr * weight_decay)`` (one rounding
    into the weights' format, as torch's ``mul_``), then takes Adam's step from the decayed
    weights with the gradient unchanged -- torch >= 2.6 defines ``AdamW`` as
    ``Adam(decoupled_weight_decay=True)``, and so does floatlab. torch's default
    ``weight_decay=1e-2``. ``fused=True`` is torch's fused kernel in its AdamW mode (the decay
    computed in float32 with the other ops, the weight stored once).

    >>> from floatlab.mixed import parameter
    >>> w = parameter([2.0]); w.grad = np.array([0.0], np.float32)
    >>> _ = AdamW([w], lr=0.1, weight_decay=0.5).step(); w.data.tolist()   # 2 * (1 - 0.05)
    [1.899999976158142]
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        *,
        fused: bool = False,
        **options: Any,
    ) -> None:
        if "decoupled_weight_decay" in options:  # torch's AdamW has no such argument either
            raise TypeError("AdamW() got an unexpected keyword argument "
                            "'decoupled_weight_decay': AdamW is Adam(decoupled_weight_decay="
                            "True); drop it, or use Adam for the coupled (L2) decay")
        super().__init__(params, lr, betas, eps, weight_decay, fused=fused,
                         decoupled_weight_decay=True, **options)
