"""The mixed-precision lab: train small networks with every number in an emulated format.

Everything rounds through one hook (:func:`quantize`) under a precision :class:`Policy` named
the way Lightning, Apex and torch name them, so the classic phenomena can be reproduced and
measured on a CPU in seconds: fp16 gradients underflowing without loss scaling, the dynamic
GradScaler calibrating, pure fp16 + Adam going NaN, bf16 weights losing small updates.

>>> from floatlab.mixed import compare, teacher_gaussians
>>> result = compare(["32-true", "bf16-mixed"], steps=30, progress=False,
...                  data=teacher_gaussians(n=2048))
>>> [name for name in result.histories]
['32-true', 'bf16-mixed']

Layout: ``policy`` (which format where), ``autocast`` (torch's op lists per device),
``tensor`` (the autograd's names in one import path: ``scope`` holds the active policy and the
hook, ``autograd`` the Tensor and its graph, ``elementwise``, ``reductions`` and ``gemm`` the
ops), ``nn`` (layers, losses), ``optim`` (SGD, Adam, AdamW; ``optim_args`` their argument checks),
``opmath`` (torch's in-place update arithmetic), ``scaler`` (GradScaler, StaticScaler),
``telemetry`` (per-step counters), ``recipe`` (FP8 / MX / NVFP4 training recipes: per-GEMM
operand schemes and accumulators), ``recipe_gemm`` (running them, per-operand telemetry),
``promoted_gemm`` (DeepSeek-V3's FP8 GEMM), ``pow2_tensor`` (MS-AMP's power-of-two operands),
``recipe_storage`` (the bytes recipes store), ``recipe_plots`` (their pictures),
``optim8bit`` (Adam with quantised moments, bitsandbytes' Adam8bit), ``history`` (History,
Comparison), ``trainer`` (Trainer, compare), ``checks`` (argument validation), ``data``,
``progress``; for transformers: ``layers`` (embedding, layer norm, GELU, dropout, shape ops,
the sequence loss), ``attention`` (batched matmul, causal mask, scaled dot-product attention),
``models`` (Transformer), ``textdata`` (char_lm, digit_reversal), ``seqtrain`` (the Trainer's
loop for token sequences).
"""

from floatlab.mixed.attention import bmm, scaled_dot_product_attention
from floatlab.mixed.autocast import AUTOCAST_LISTS
from floatlab.mixed.data import Dataset, digits, spirals, teacher_gaussians
from floatlab.mixed.history import BYTE_CATEGORIES, Comparison, History
from floatlab.mixed.layers import dropout, embedding, gelu, layer_norm, sequence_loss
from floatlab.mixed.models import LayerNorm, Transformer
from floatlab.mixed.nn import MLP, Linear, Module, accuracy, mse_loss, parameter
from floatlab.mixed.optim import SGD, Adam, AdamW, Optimizer, UpdateReport
from floatlab.mixed.optim8bit import Adam8bit, AdamW8bit, StateAdam
from floatlab.mixed.policy import (
    LAB_OPS,
    LEGACY_ALIASES,
    MATMUL_PRECISIONS,
    OP_KINDS,
    PRECISIONS,
    Policy,
    get_policy,
)
from floatlab.mixed.recipe import (
    RECIPES,
    Gemm,
    Recipe,
    RowScaling,
    TensorScaling,
    get_recipe,
    recipe_names,
)
from floatlab.mixed.recipe_gemm import RecipeRun, recipe_run
from floatlab.mixed.scaler import GradScaler, GradScalerError, GradScalerValueError, StaticScaler
from floatlab.mixed.telemetry import StepStats, log2_histogram
from floatlab.mixed.tensor import (
    Tensor,
    active_policy,
    add,
    cast,
    cross_entropy,
    div,
    exp,
    linear,
    log,
    log_softmax,
    matmul,
    mean,
    mul,
    neg,
    no_grad,
    prime_copies,
    quantize,
    reciprocal,
    recording,
    relu,
    softmax,
    sub,
    sum,  # noqa: F401 - torch's name; kept out of __all__
    tanh,
    use_precision,
)
from floatlab.mixed.textdata import SequenceDataset, char_lm, digit_reversal
from floatlab.mixed.trainer import DEFAULT_PRECISIONS, Trainer, bytes_held, compare

__all__ = [
    # policies
    "Policy", "get_policy", "PRECISIONS", "LEGACY_ALIASES", "MATMUL_PRECISIONS", "OP_KINDS",
    "LAB_OPS", "AUTOCAST_LISTS",
    # autograd
    "Tensor", "quantize", "use_precision", "no_grad", "recording", "active_policy",
    "prime_copies",
    # ("sum" is reachable as floatlab.mixed.sum but not star-exported: it would shadow the builtin)
    "matmul", "linear", "add", "sub", "mul", "div", "neg", "relu", "tanh", "exp", "log", "mean",
    "reciprocal", "softmax", "log_softmax", "cross_entropy", "cast",
    # transformer ops
    "embedding", "layer_norm", "gelu", "bmm", "scaled_dot_product_attention", "dropout",
    "sequence_loss",
    # networks and training
    "Module", "Linear", "MLP", "Transformer", "LayerNorm", "parameter", "mse_loss", "accuracy",
    "Optimizer", "SGD", "Adam", "AdamW", "UpdateReport", "GradScaler", "StaticScaler",
    "GradScalerError", "GradScalerValueError",
    "Trainer", "compare", "DEFAULT_PRECISIONS", "History", "Comparison", "StepStats",
    "BYTE_CATEGORIES", "bytes_held", "log2_histogram",
    # training recipes (FP8, MX, NVFP4, DeepSeek, MS-AMP) and 8-bit optimizer states
    "Recipe", "Gemm", "TensorScaling", "RowScaling", "get_recipe", "recipe_names", "RECIPES",
    "RecipeRun", "recipe_run", "Adam8bit", "AdamW8bit", "StateAdam",
    # data
    "Dataset", "teacher_gaussians", "spirals", "digits",
    "SequenceDataset", "char_lm", "digit_reversal",
]
