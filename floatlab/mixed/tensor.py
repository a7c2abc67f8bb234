"""A small reverse-mode autograd whose every result is rounded by the active precision policy.

A :class:`Tensor` holds a float32 or float64 array whose values are exactly representable in
the tensor's :class:`~floatlab.Format` (``tensor.fmt``). Each op computes in float32 (float64
for wider formats), as torch's "opmath" does for 16-bit types, and then rounds its result once
through :func:`quantize` -- the single hook where emulation happens -- to the format the active
:class:`~floatlab.mixed.Policy` assigns to that op. Backward closures sit next to their forward
(micrograd style) and round the gradients they produce the same way: first to the op's format,
then, like the backward of an autocast cast, to the format of the input they flow into.

>>> import numpy as np
>>> from floatlab.mixed import Tensor, use_precision
>>> with use_precision("16-mixed"):
...     x = Tensor(np.full((1, 2), 1e-3, np.float32))        # data enters in float32
...     w = Tensor(np.ones((1, 2), np.float32), requires_grad=True)
...     h = x @ w.T                                           # matmul in fp16
...     y = h.sum()                                           # sum in fp32
...     y.backward()
>>> x.fmt.name, h.fmt.name, y.fmt.name, w.grad.tolist()
('float32', 'float16', 'float32', [[0.0010004043579101562, 0.0010004043579101562]])

The gradient of ``w`` is ``x`` rounded to fp16 (the matmul read an fp16 copy of ``x``).

This module gathers the autograd's names in one import path; the code lives in
:mod:`~floatlab.mixed.scope` (the active policy, the hook :func:`quantize`),
:mod:`~floatlab.mixed.autograd` (:class:`Tensor`, the graph, gradient delivery),
:mod:`~floatlab.mixed.elementwise` (add ... log, cast), :mod:`~floatlab.mixed.reductions`
(sum, mean, softmax, log_softmax, cross_entropy) and :mod:`~floatlab.mixed.gemm` (matmul,
linear, the inputs' low-precision copies).
"""

from __future__ import annotations

from floatlab.mixed.autograd import (  # noqa: F401 - the op modules' shared helpers
    Tensor,
    _deliver,
    _flush,
    _operand,
    _result,
    _send,
    _topological,
    _transpose,
    _work,
)
from floatlab.mixed.elementwise import (  # noqa: F401
    _binary,
    _unbroadcast,
    add,
    cast,
    div,
    exp,
    log,
    mul,
    neg,
    reciprocal,
    relu,
    sub,
    tanh,
)
from floatlab.mixed.gemm import (  # noqa: F401
    _is_parameter,
    _linear_op,
    _matmul_input,
    _product,
    linear,
    matmul,
    prime_copies,
)
from floatlab.mixed.reductions import cross_entropy, log_softmax, mean, softmax, sum
from floatlab.mixed.scope import (  # noqa: F401
    _FALLBACK_RNG,
    _pushed,
    _scope,
    active_policy,
    no_grad,
    quantize,
    recording,
    use_precision,
)

__all__ = [
    "Tensor", "quantize", "use_precision", "no_grad", "recording", "active_policy",
    "matmul", "linear", "add", "sub", "mul", "div", "neg", "relu", "tanh", "exp", "log",
    "reciprocal", "sum", "mean", "softmax", "log_softmax", "cross_entropy", "cast", "prime_copies",
]
