"""Exact models of torch's CPU arithmetic, written from the definitions for the lab's tests.

Nothing here calls floatlab or a NumPy cast: values are ``fractions.Fraction`` and every
rounding is :func:`round_binary` (IEEE round-to-nearest-even with subnormals, overflow to inf).
Each model was checked against torch 2.13 (CPU) while it was written; the facts it encodes are
stated in the docstrings, so a reader can check them without torch.
"""

from __future__ import annotations

import math
from fractions import Fraction

#: (significand bits including the hidden one, minimum normal exponent, maximum exponent)
BINARY = {"float64": (53, -1022, 1023), "float32": (24, -126, 127), "float16": (11, -14, 15),
          "bfloat16": (8, -126, 127)}


def round_binary(x: Fraction | float, fmt: str) -> float:
    """``x`` rounded to nearest-even in an IEEE-style binary format, returned as a float."""
    p, emin, emax = BINARY[fmt]
    x = Fraction(x)
    if x == 0:
        return 0.0
    sign, a = (-1 if x < 0 else 1), abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()  # 2**e <= a < 2**(e+2)
    if Fraction(2) ** e > a:
        e -= 1
    if Fraction(2) ** (e + 1) <= a:
        e += 1
    quantum = Fraction(2) ** (max(e, emin) - p + 1)
    n, rest = divmod(a / quantum, 1)
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2 == 1):
        n += 1
    value = n * quantum
    if value >= Fraction(2) ** (emax + 1):
        return sign * math.inf
    return sign * float(value)


def scaler_times(scale: float, factor: float) -> float:
    """torch's ``_amp_update_scale_`` on CPU: ``float_scale * double_factor`` is a C++ double
    product (exact product rounded to float64), stored into the float32 scale."""
    return round_binary(round_binary(Fraction(scale) * Fraction(factor), "float64"), "float32")


def axpy(x: float, alpha: float, y: float, fmt: str) -> float:
    """torch's ``x.add_(y, alpha=alpha)`` for tensors of ``fmt`` on CPU (vectorised path).

    alpha is converted to the tensor's dtype; the opmath kernel computes ``x + alpha * y`` with
    one fused multiply-add in float32 (float64 for float64 tensors), then the result is stored
    in ``fmt``.
    """
    opmath = "float64" if fmt == "float64" else "float32"
    a = Fraction(round_binary(alpha, fmt))
    wide = round_binary(Fraction(x) + a * Fraction(y), opmath)
    return round_binary(wide, fmt)


def scale(x: float, s: float, fmt: str) -> float:
    """torch's ``x.mul_(s)`` for a Python number ``s``: s becomes the opmath scalar (float32 for
    16-bit and float32 tensors), the product is rounded to opmath, then stored in ``fmt``."""
    opmath = "float64" if fmt == "float64" else "float32"
    wide = round_binary(Fraction(x) * Fraction(round_binary(s, opmath)), opmath)
    return round_binary(wide, fmt)


def sgd(w: list[float], grads: list[list[float]], fmt: str, lr: float, momentum: float = 0.0,
        dampening: float = 0.0, nesterov: bool = False, weight_decay: float = 0.0) -> list[float]:
    """torch.optim.SGD (single-tensor, the CPU default), element by element, several steps."""
    out = []
    for i, w_i in enumerate(w):
        buf = None
        for step_grads in grads:
            g = step_grads[i]
            if weight_decay:
                g = axpy(g, weight_decay, w_i, fmt)          # grad.add(param, alpha=wd)
            if momentum:
                if buf is None:
                    buf = g                                  # clone(grad)
                else:                                        # buf.mul_(m).add_(g, alpha=1-d)
                    buf = axpy(scale(buf, momentum, fmt), 1 - dampening, g, fmt)
                g = axpy(g, momentum, buf, fmt) if nesterov else buf
            w_i = axpy(w_i, -lr, g, fmt)                     # param.add_(grad, alpha=-lr)
        out.append(w_i)
    return out
