"""Phenomenon 4 of issue 11, fast: why NVFP4 needs SR on gradients (a loud block flushes the
quiet values under round-to-nearest, every time) and where the RHT lowers the wgrad operands'
error in actual training (the Transformer's activations and its head's gradient).
The training-length versions are in notebook 08 and benchmarks/exp_nvfp4_sr_rht.py."""

from __future__ import annotations

import numpy as np

from floatlab.mixed import Trainer, Transformer, char_lm
from floatlab.mixed.recipe import get_recipe
from floatlab.quant.quantize import fake_quantize


def test_a_loud_value_in_every_block_flushes_the_quiet_ones_under_rn_but_not_on_average_sr():
    rn, sr = (get_recipe("nvfp4", stochastic_rounding=s).dgrad.a for s in (False, True))
    rng = np.random.default_rng(0)
    # output-layer dgrad operand: three quiet residuals and a loud ±32 per row (one block)
    g = np.hstack([rng.normal(0, 0.5, (256, 3)), 32 * np.sign(rng.standard_normal((256, 1)))])
    passed = lambda q: float(np.sum(q[:, :3] * g[:, :3]) / np.sum(g[:, :3] ** 2))  # noqa: E731
    q_rn = fake_quantize(g, rn)
    flushed = np.mean(q_rn[:, :3] == 0)
    assert flushed > 0.97 and passed(q_rn) < 0.25  # 99% flushed; 14-19% of the signal passes
    np.testing.assert_allclose(q_rn[:, 3], g[:, 3], rtol=1e-6)  # the loud one: the amax, kept
    mean_sr = np.mean([passed(fake_quantize(g, sr, rng=s)) for s in range(100)])
    assert abs(mean_sr - 1) < 0.1                             # unbiased on average


def test_rht_raises_the_transformers_wgrad_activation_qsnr_in_training():
    """Transformer Engine's RHT on the wgrad operands of a small Transformer (the rotated
    operands' QSNR, with RHT minus without, mean over 8 steps): every activation gains."""
    data = char_lm(context=16, max_chars=5000)
    gain = {}
    for hadamard in (True, False):
        model = Transformer(data.vocab, 32, 2, 1, data.context, seed=0)
        t = Trainer(get_recipe("nvfp4", hadamard=hadamard), model=model, batch_size=16,
                    progress=False, eval_every=10**9)
        t.fit(data, 8)
        for key in t.recipe_run.history:
            if ".wgrad." in key:
                q = float(np.mean(t.recipe_run.series(key, "qsnr_db")))
                gain[key] = gain.get(key, 0.0) + (q if hadamard else -q)
    acts = [v for k, v in gain.items() if k.endswith(".b")]
    assert len(acts) == 5 and min(acts) > 0                   # seed 0: +0.18 .. +0.55 dB
    head = max(gain, key=lambda k: int(k.split(".")[0][6:]))  # the tied output head
    # its gradient loses with Transformer Engine's random signs (-2.2 dB); a Hadamard matrix
    # whose signs only flipped its outputs (the lab's before) gained +1.0 dB: not random
    assert gain[head.replace(".b", ".a")] < -0.5
