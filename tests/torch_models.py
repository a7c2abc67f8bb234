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


def fused_adam(w: list[float], grads: list[list[float]], fmt: str, lr: float = 1e-3,
               betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
               weight_decay: float = 0.0, decoupled: bool = False
               ) -> tuple[list[float], list[float], list[float]]:
    """torch.optim.Adam(fused=True) on CPU (FusedAdamKernel.cpp, vectorised body), element by
    element: (weights, exp_avg, exp_avg_sq) after the steps.

    Values are loaded into float32 ("opmath"), the double constants (1 - beta1, beta2,
    1 - beta2, eps, the bias corrections lr / (1 - beta1**t) and sqrt(1 - beta2**t), all
    computed in double) are converted to float32, and every operation rounds to float32; the
    compiler fuses three multiply-adds (one rounding each): the weight decay g + p * wd, the
    lerp m + (1 - beta1) * (g - m) and v * beta2 + ((1 - beta2) * g) * g. The moments are
    stored in ``fmt`` but the update uses their float32 values. ``decoupled=True`` is the
    kernel's ADAM_MODE::ADAMW (torch.optim.AdamW(fused=True)), written from FusedAdamKernel.cpp
    and not measured: the weight is first multiplied by float32(1 - lr * wd) (the factor in
    double), one float32 rounding, and the gradient is left alone. sqrt is Python's
    correctly rounded double sqrt rounded to float32: that double rounding is innocuous
    (53 >= 2 * 24 + 2), so it is the correctly rounded float32 sqrt.
    """
    def f(x: Fraction | float) -> Fraction:  # one float32 operation
        return Fraction(round_binary(Fraction(x), "float32"))

    b1, b2 = betas
    c1, cb2, c2, ceps, cwd = f(1 - b1), f(b2), f(1 - b2), f(eps), f(weight_decay)
    out_w, out_m, out_v = [], [], []
    for i, w_i in enumerate(w):
        p, m_s, v_s = Fraction(w_i), Fraction(0), Fraction(0)
        for t, step_grads in enumerate(grads, start=1):
            g = Fraction(step_grads[i])
            if weight_decay and decoupled:
                p = f(p * f(1 - lr * weight_decay))
            elif weight_decay:
                g = f(g + p * cwd)
            m = f(m_s + c1 * f(g - m_s))
            v = f(f(v_s * cb2) + f(c2 * g) * g)
            m_s, v_s = Fraction(round_binary(m, fmt)), Fraction(round_binary(v, fmt))
            step_size, bc2_sqrt = f(lr / (1 - b1**t)), f(math.sqrt(1 - b2**t))
            denom = f(f(Fraction(round_binary(math.sqrt(v), "float32")) / bc2_sqrt) + ceps)
            p = Fraction(round_binary(f(p - f(f(step_size * m) / denom)), fmt))
        out_w.append(float(p))
        out_m.append(float(m_s))
        out_v.append(float(v_s))
    return out_w, out_m, out_v


def e4m3fn_code(x: float) -> int:
    """torch's CPU cast of a float32 to float8_e4m3fn (c10 ``fp8e4m3fn_from_fp32_value``), as a
    code: every |x| >= 480 (the first value past max 448 on the unbounded grid), inf and NaN
    give the NaN code 0x7f with x's sign bit; there is no saturation. Below 480 it is
    round-to-nearest-even on the E4M3FN grid (quantum 2**(e - 3), subnormal quantum 2**-9)."""
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    if math.isnan(x) or abs(x) >= 480:
        return sign | 0x7F
    a = abs(Fraction(x))
    e = max(math.frexp(float(a))[1] - 1, -6) if a else -6
    q = Fraction(2) ** (e - 3)
    k, rem = divmod(a, q)
    k = int(k) + (1 if rem > q / 2 or (rem == q / 2 and int(k) % 2) else 0)
    value = k * q
    if value == 0:
        return sign
    e = max(math.frexp(float(value))[1] - 1, -6)
    if value < Fraction(2) ** -6:
        return sign | int(value / Fraction(2) ** -9)
    return sign | ((e + 7) << 3) | int(value / Fraction(2) ** (e - 3)) - 8
