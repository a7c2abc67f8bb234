"""What a training run holds in memory: bytes per category and format (the Trainer's
``bytes_held`` column; moved out of :mod:`.trainer`, which re-exports it).

>>> from floatlab.mixed import Trainer, teacher_gaussians
>>> t = Trainer("16-mixed", progress=False)
>>> _ = t.fit(teacher_gaussians(n=256), steps=1)
>>> sorted(bytes_held(t.model, t.optimizer, t.policy, None))
['activations', 'gradients', 'master weights', 'optimizer state', 'weights']
"""

from __future__ import annotations

from typing import Any

from floatlab.formats import Format
from floatlab.mixed.autograd import Tensor
from floatlab.mixed.nn import Module
from floatlab.mixed.optim import Optimizer
from floatlab.mixed.policy import Policy, nbytes
from floatlab.mixed.recipe_gemm import RecipeRun
from floatlab.mixed.telemetry import StepStats

__all__ = ["bytes_held"]


def bytes_held(
    model: Module, optimizer: Optimizer, policy: Policy, stats: StepStats | None,
    run: RecipeRun | None = None,
) -> dict[str, dict[str, int]]:
    """Bytes per category and format, from the formats' widths (``ceil(n * bits / 8)``).

    weights: the values the forward pass reads (the per-step low copy when the policy keeps
    master weights); master weights: the copies the optimizer updates, when separate;
    gradients: the parameters' ``.grad``; optimizer state: moments, momentum, Kahan buffers;
    activations: every forward result held for backward (counted by the rounding hook).

    Under a recipe, the weights of its GEMMs (the parameters ``run``'s Linear layers read as
    weights) are counted with the recipe's weight spec, codes and scales, and their gradients
    with its weight-gradient spec; other parameters (a Transformer's position embedding, layer
    norms) in their storage formats. Without ``run`` every 2-D parameter is taken for a GEMM
    weight (an MLP's case).
    """
    for name, value, kind in (("model", model, Module), ("optimizer", optimizer, Optimizer),
                              ("policy", policy, Policy)):
        if not isinstance(value, kind):  # AttributeErrors deep in the accounting before
            raise TypeError(f"bytes_held: {name} must be a floatlab.mixed {kind.__name__}, got "
                            f"{type(value).__name__}")
    if stats is not None and not isinstance(stats, StepStats):
        raise TypeError(f"bytes_held: stats must be a StepStats or None, got "
                        f"{type(stats).__name__}")
    held: dict[str, dict[str, int]] = {"weights": {}, "master weights": {}, "gradients": {},
                                       "optimizer state": optimizer.state_bytes(),
                                       "activations": dict(stats.activation_bytes) if stats
                                       else {}}

    def add(cat: str, fmt: Format, n: int) -> None:
        held[cat][fmt.name] = held[cat].get(fmt.name, 0) + nbytes(fmt, n)

    gemm_weights = policy.recipe.forward.b if policy.recipe is not None else None
    for p in model.parameters():
        gemm = gemm_weights is not None and _is_gemm_weight(p, run)
        if gemm:  # the recipe's quantised weight copy
            label, n = _operand_bytes(gemm_weights, p.shape, policy.compute)
            held["weights"][label] = held["weights"].get(label, 0) + n
            add("master weights", p.fmt, p.size)
        elif policy.master_weights:
            add("weights", policy.compute, p.size)
            add("master weights", p.fmt, p.size)
        else:
            add("weights", p.fmt, p.size)
        grad_spec = policy.recipe.weight_grad if policy.recipe is not None else None
        if p.grad is not None and grad_spec is not None and gemm:  # MS-AMP FP8 grads
            label, n = _operand_bytes(grad_spec, p.shape, p.fmt)
            held["gradients"][label] = held["gradients"].get(label, 0) + n
        elif p.grad is not None:
            add("gradients", p.fmt, p.size)
    return held


def _is_gemm_weight(p: Tensor, run: RecipeRun | None) -> bool:
    """Whether the recipe's GEMMs read ``p`` as a weight (``run`` saw it in a Linear layer)."""
    if run is None:
        return p.ndim == 2
    hit = run.layers.get(id(p))
    return hit is not None and hit[0] is p


def _operand_bytes(spec: Any, shape: tuple[int, ...], compute: Format) -> tuple[str, int]:
    """(label, bytes) of a tensor of ``shape`` stored under a recipe operand spec: the codes
    and every scale (see :func:`floatlab.mixed.recipe_storage.operand_nbytes`)."""
    from floatlab.mixed.recipe_storage import operand_nbytes

    return operand_nbytes(spec, shape, compute)
