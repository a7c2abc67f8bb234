"""torch's autocast op lists, per device: which ops run in the low format, which in float32.

torch.autocast has one list per device type, and they differ. :data:`AUTOCAST_LISTS` records
torch 2.13's cast policy for each op the lab has or will have, keyed ``[device][op]``:

``"lower_precision_fp"``
    inputs cast to the low format (fp16 / bf16): matmuls, linear, attention.
``"fp32"``
    inputs cast to float32, output float32 (exp, log, norms, losses on CUDA; losses on CPU).
``"fp32_set_opt_dtype"``
    run with ``dtype=torch.float32``: output float32 (softmax, log_softmax, sum on CUDA).
``"promote"``
    inputs cast to the widest input format (cat, stack on CPU; addcmul, dot on CUDA).
``"none"``
    not on any list: the op runs in its inputs' format (a bf16 input gives a bf16 result) with
    ordinary type promotion. On CPU this is where exp, log, softmax, log_softmax, sum and mean
    live; on CUDA, mean, gelu, relu, tanh, dropout, embedding, masked_fill and the arithmetic
    operators.

Sources: ``aten/src/ATen/autocast_mode.h`` of torch 2.13 (the lists CUDA uses) and
``aten/src/ATen/autocast_mode.cpp`` (the CPU lists); every CPU entry was checked by running the
op under ``torch.autocast("cpu", dtype=torch.bfloat16)`` and ``float16`` with float32 and
16-bit inputs. Ops that are not aten ops of their own on one device (``cross_entropy`` on CUDA
is ``log_softmax`` + ``nll_loss``, both float32) carry the policy of what runs, with a note in
:data:`NOTES`.

>>> AUTOCAST_LISTS["cuda"]["softmax"], AUTOCAST_LISTS["cpu"]["softmax"]
('fp32_set_opt_dtype', 'none')
>>> op_kind("mean", "cuda"), op_kind("exp", "cuda"), op_kind("exp", "cpu")
('promote', 'safe', 'promote')
"""

from __future__ import annotations

from typing import Literal

__all__ = ["AUTOCAST_LISTS", "DEVICES", "NOTES", "cast_policy", "op_kind", "ops_of_kind",
           "check_device"]

Device = Literal["cuda", "cpu"]
CastPolicy = Literal["lower_precision_fp", "fp32", "fp32_set_opt_dtype", "promote", "none"]
OpKind = Literal["low", "safe", "promote"]

#: The devices whose autocast lists floatlab knows (torch's device types).
DEVICES: tuple[str, ...] = ("cuda", "cpu")

_LOW, _FP32, _FP32_OPT, _PROMOTE, _NONE = ("lower_precision_fp", "fp32", "fp32_set_opt_dtype",
                                           "promote", "none")

#: torch 2.13's autocast cast policy of each op, per device: ``AUTOCAST_LISTS[device][op]``.
AUTOCAST_LISTS: dict[str, dict[str, CastPolicy]] = {
    "cuda": {
        # lower_precision_fp
        "matmul": _LOW, "linear": _LOW, "mm": _LOW, "bmm": _LOW, "addmm": _LOW,
        "baddbmm": _LOW, "einsum": _LOW, "conv1d": _LOW, "conv2d": _LOW,
        "scaled_dot_product_attention": _LOW,
        # fp32
        "exp": _FP32, "log": _FP32, "log1p": _FP32, "expm1": _FP32, "rsqrt": _FP32,
        "reciprocal": _FP32, "pow": _FP32, "softplus": _FP32, "layer_norm": _FP32,
        "rms_norm": _FP32, "group_norm": _FP32, "logsumexp": _FP32,
        "cross_entropy": _FP32, "nll_loss": _FP32, "mse_loss": _FP32, "l1_loss": _FP32,
        "smooth_l1_loss": _FP32, "kl_div": _FP32, "binary_cross_entropy_with_logits": _FP32,
        "cosine_similarity": _FP32,
        # fp32_set_opt_dtype
        "sum": _FP32_OPT, "softmax": _FP32_OPT, "log_softmax": _FP32_OPT, "cumsum": _FP32_OPT,
        "prod": _FP32_OPT,
        # promote
        "addcmul": _PROMOTE, "addcdiv": _PROMOTE, "dot": _PROMOTE,
        # on no list
        "mean": _NONE, "add": _NONE, "sub": _NONE, "mul": _NONE, "div": _NONE, "neg": _NONE,
        "relu": _NONE, "tanh": _NONE, "gelu": _NONE, "silu": _NONE, "sigmoid": _NONE,
        "sqrt": _NONE, "embedding": _NONE, "dropout": _NONE, "batch_norm": _NONE,
        "cat": _NONE, "stack": _NONE, "max": _NONE, "var": _NONE, "masked_fill": _NONE,
    },
    "cpu": {
        # lower_precision_fp
        "matmul": _LOW, "linear": _LOW, "mm": _LOW, "bmm": _LOW, "addmm": _LOW,
        "baddbmm": _LOW, "conv1d": _LOW, "conv2d": _LOW, "scaled_dot_product_attention": _LOW,
        # fp32
        "cross_entropy": _FP32, "nll_loss": _FP32, "mse_loss": _FP32, "l1_loss": _FP32,
        "smooth_l1_loss": _FP32, "kl_div": _FP32, "binary_cross_entropy_with_logits": _FP32,
        "prod": _FP32,
        # promote
        "cat": _PROMOTE, "stack": _PROMOTE,
        # on no list: these run in the low format when their input is low
        "exp": _NONE, "log": _NONE, "log1p": _NONE, "expm1": _NONE, "rsqrt": _NONE,
        "reciprocal": _NONE, "pow": _NONE, "softplus": _NONE, "layer_norm": _NONE,
        "rms_norm": _NONE, "group_norm": _NONE, "logsumexp": _NONE, "sum": _NONE,
        "softmax": _NONE, "log_softmax": _NONE, "cumsum": _NONE, "mean": _NONE,
        "cosine_similarity": _NONE, "einsum": _NONE,
        "add": _NONE, "sub": _NONE, "mul": _NONE, "div": _NONE, "neg": _NONE, "relu": _NONE,
        "tanh": _NONE, "gelu": _NONE, "silu": _NONE, "sigmoid": _NONE, "sqrt": _NONE,
        "embedding": _NONE, "dropout": _NONE, "batch_norm": _NONE, "max": _NONE, "var": _NONE,
        "addcmul": _NONE, "addcdiv": _NONE, "dot": _NONE, "masked_fill": _NONE,
    },
}

#: Entries that need a word of explanation.
NOTES: dict[tuple[str, str], str] = {
    ("cuda", "cross_entropy"): "not listed itself; it runs log_softmax (fp32_set_opt_dtype) "
                               "and nll_loss (fp32), so its result is float32",
    ("cpu", "cross_entropy"): "listed as cross_entropy_loss (fp32)",
    ("cuda", "layer_norm"): "listed with native_layer_norm (fp32)",
    ("cpu", "einsum"): "not listed on CPU; the matmuls it calls (bmm) are lower_precision_fp",
}

# The lab's three op kinds (see floatlab.mixed.policy): "low" ops produce the compute format,
# "safe" ops the policy's safe format (float32 in mixed modes), "promote" ops the widest input.
_KIND: dict[str, OpKind] = {_LOW: "low", _FP32: "safe", _FP32_OPT: "safe", _PROMOTE: "promote",
                            _NONE: "promote"}


def check_device(device: object) -> str:
    """``device`` if it is a known device type, else a ValueError naming the choices.

    >>> check_device("cpu")
    'cpu'
    """
    if not isinstance(device, str) or device not in DEVICES:
        raise ValueError(f"device={device!r}: use 'cuda' (torch's GPU autocast lists, the "
                         f"default) or 'cpu' (torch's CPU autocast lists)")
    return device


def cast_policy(op: str, device: str = "cuda") -> CastPolicy:
    """torch's autocast policy for ``op`` on ``device`` (a KeyError lists the known ops).

    >>> cast_policy("mse_loss", "cpu")
    'fp32'
    """
    table = AUTOCAST_LISTS[check_device(device)]
    try:
        return table[op]
    except KeyError:
        raise KeyError(f"no autocast entry for op {op!r}; known ops: "
                       f"{', '.join(sorted(table))}") from None


def op_kind(op: str, device: str = "cuda") -> OpKind:
    """The lab's op kind ("low", "safe", "promote") for ``op`` under ``device``'s lists."""
    return _KIND[cast_policy(op, device)]


def ops_of_kind(kind: OpKind, device: str = "cuda", ops: tuple[str, ...] | None = None
                ) -> list[str]:
    """The ops (of ``ops``, default all known) that are of ``kind`` on ``device``.

    >>> ops_of_kind("safe", "cpu", ("exp", "softmax", "cross_entropy", "mse_loss"))
    ['cross_entropy', 'mse_loss']
    """
    names = AUTOCAST_LISTS[check_device(device)] if ops is None else ops
    return [op for op in names if op_kind(op, device) == kind]
