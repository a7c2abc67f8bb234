"""Issue 11, phenomenon 5 on one GEMM (notebook 08, section 5): what promotion every 128 buys
under the recipe's accumulator (a 32-product block FMA in e8m13, truncating).

The error of a GEMM of E4M3 operands splits into the operands' quantisation (exact sums of the
quantised products against the exact product) and the accumulator's own error (against the
exact sum of the quantised products; the float64 products are exact and the float64 sums' own
error, about 1e-16 relative, is far below the tolerances here).
"""

from __future__ import annotations

import numpy as np
import pytest

import floatlab
from floatlab.mixed.recipe import get_recipe
from floatlab.quant.quantize import fake_quantize


def _split(a, b, accumulators):
    qa, qb = fake_quantize(a, "fp8_1x128"), fake_quantize(b.T, "fp8_1x128").T
    exact, quantised = a @ b, qa @ qb

    def rel(y, ref):
        return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))

    return rel(quantised, exact), [rel(floatlab.matmul(qa, qb, acc), quantised)
                                   for acc in accumulators]


def test_promotion_matters_for_coherent_sums_not_for_random_signs():
    promoted = get_recipe("deepseek-fp8").wgrad.accumulate
    never = get_recipe("deepseek-fp8", promote_every=None).wgrad.accumulate
    assert promoted.block_fma == never.block_fma == 32 and never.promote is None
    rng = np.random.default_rng(1)
    k = 1024
    # random signs (a forward GEMM with zero-mean weights): hidden under E4M3's own error
    quant, (err_promoted, err_never) = _split(
        rng.standard_normal((16, k)), rng.standard_normal((k, 8)) / np.sqrt(k),
        (promoted, never))
    assert err_never < quant / 10 and err_promoted < err_never
    # one sign (a coherent sum): the truncation drifts unless promoted
    quant, (err_promoted, err_never) = _split(rng.random((16, k)), rng.random((k, 8)),
                                              (promoted, never))
    assert err_promoted < 3e-3 and err_never > 5 * max(quant, err_promoted)
    per_product = get_recipe("deepseek-fp8", promote_every=None, block_fma=None)
    assert per_product.wgrad.accumulate == floatlab.Accumulator("e8m13", "toward_zero")


def test_deepseek_accumulator_options():
    assert get_recipe("deepseek-fp8", accumulator_bits=None).forward.accumulate is None
    assert "float32 accumulation" in get_recipe("deepseek-fp8", accumulator_bits=None).note
    assert "32-product block FMA" in get_recipe("deepseek-fp8").note
    for bad in (0, 23, True, 13.0, "13"):
        with pytest.raises(ValueError, match="an int in 1..22"):
            get_recipe("deepseek-fp8", accumulator_bits=bad)
    with pytest.raises(ValueError, match="block_fma=0 must be a positive int"):
        get_recipe("deepseek-fp8", block_fma=0)
