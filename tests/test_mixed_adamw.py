"""AdamW (torch.optim.AdamW: Adam with decoupled weight decay) and bitsandbytes' AdamW8bit."""

from __future__ import annotations

import numpy as np
import pytest
from torch_models import fused_adam, round_binary

from floatlab.mixed import Adam, AdamW, parameter, use_precision


def _adamw_reference(w, grads, lr, b1, b2, eps, wd):
    """torch.optim.AdamW (single tensor) in float64: decay the weights, then Adam's step."""
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t, g in enumerate(grads, start=1):
        w = w * (1 - lr * wd)
        m = m + (g - m) * (1 - b1)
        v = v * b2 + (1 - b2) * g * g
        w = w - lr / (1 - b1**t) * m / (np.sqrt(v) / np.sqrt(1 - b2**t) + eps)
    return w


def _drive(opt, w, grads):
    for g in grads:
        w.grad = np.asarray(g)
        opt.step()


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("wd", [0.0, 1e-2, 0.3])
def test_adamw_matches_the_formula_in_float64(fused, wd):
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal(9)
    grads = [rng.standard_normal(9) for _ in range(6)]
    with use_precision("64-true"):
        w = parameter(w0)
        _drive(AdamW([w], lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=wd, fused=fused),
               w, grads)
    np.testing.assert_allclose(w.data, _adamw_reference(w0, grads, 0.05, 0.8, 0.95, 1e-6, wd),
                               rtol=1e-13)


def test_adamw_is_adam_with_decoupled_weight_decay_and_torchs_default():
    rng = np.random.default_rng(2)
    w0, grads = rng.standard_normal(5), [rng.standard_normal(5) for _ in range(3)]
    out = []
    for make in (lambda w: AdamW([w]), lambda w: Adam([w], weight_decay=1e-2,
                                                      decoupled_weight_decay=True)):
        w = parameter(w0.astype(np.float32))
        _drive(make(w), w, [g.astype(np.float32) for g in grads])
        out.append(w.data)
    assert AdamW([parameter([1.0])]).weight_decay == 1e-2            # torch's default
    assert np.array_equal(out[0], out[1])
    w = parameter(w0.astype(np.float32))
    _drive(Adam([w], weight_decay=1e-2), w, [g.astype(np.float32) for g in grads])
    assert not np.array_equal(w.data, out[0])                       # coupled (L2) differs


@pytest.mark.parametrize("fused", [False, True])
def test_adamw_in_fp16_by_hand(fused):
    """One pure-fp16 step where every value is exact in binary, worked by hand:
    decay 1.5 * (1 - 2**-4 * 2**-1) = 1.453125 (exact in fp16); m = 0.5, v = 0.25,
    denom = sqrt(0.25) / sqrt(1 - 0.75) + 2**-10 = 1 + 2**-10; the step is
    2**-4 / (1 - 0.5) * 0.5 / (1 + 2**-10) = 0.062439..., so w = 1.390686... and fp16's
    spacing 2**-10 in [1, 2) gives 1424 * 2**-10 = 1.390625. Decaying after the update instead
    (bitsandbytes' order) gives 1.4375 * 0.96875 = 1.392578125; the coupled decay (Adam's L2),
    a gradient of 1.75, gives yet another value."""
    with use_precision("16-true"):
        w = parameter([1.5])
        w.grad = np.array([1.0], np.float32)
        AdamW([w], lr=2**-4, betas=(0.5, 0.75), eps=2**-10, weight_decay=0.5,
              fused=fused).step()
        assert w.data.tolist() == [1.390625]
        v = parameter([1.5])
        v.grad = np.array([1.0], np.float32)
        Adam([v], lr=2**-4, betas=(0.5, 0.75), eps=2**-10, weight_decay=0.5, fused=fused).step()
        assert v.data.tolist() != [1.390625]


@pytest.mark.parametrize("precision, fmt", [("32-true", "float32"), ("16-true", "float16"),
                                            ("bf16-true", "bfloat16")])
@pytest.mark.parametrize("wd, lr", [(0.01, 1e-3), (0.1, 0.03)])
def test_fused_adamw_matches_the_kernels_adamw_mode(precision, fmt, wd, lr):
    rng = np.random.default_rng(4)
    w0 = [round_binary(v, fmt) for v in rng.standard_normal(64) * rng.choice([1, 10], 64)]
    grads = [[round_binary(v, fmt) for v in
              rng.standard_normal(64) * rng.choice([1e-5, 1e-2, 1, 30], 64)] for _ in range(5)]
    with use_precision(precision):
        w = parameter(w0)
        opt = AdamW([w], lr=lr, weight_decay=wd, fused=True)
        for g in grads:
            w.grad = np.array(g, np.float32)
            opt.step()
    ew, em, ev = fused_adam(w0, grads, fmt, lr, (0.9, 0.999), 1e-8, wd, decoupled=True)
    assert w.data.astype(np.float64).tolist() == ew
    assert opt.groups[0].state["exp_avg"].astype(np.float64).tolist() == em
    assert opt.groups[0].state["exp_avg_sq"].astype(np.float64).tolist() == ev


def test_the_decay_is_torchs_mul_rounded_into_the_weights():
    """Unfused: param.mul_(1 - lr * wd) is one float32 product stored in the weights' format,
    before the update (checked with a zero gradient, where Adam's step is 0 / eps = 0)."""
    for precision, fmt in (("32-true", "float32"), ("bf16-true", "bfloat16")):
        with use_precision(precision):
            w0 = [3.0, -0.7, 1e-3]
            w = parameter(w0)
            w.grad = np.zeros(3, np.float32)
            AdamW([w], lr=0.2, weight_decay=0.3).step()
        factor = round_binary(1 - 0.2 * 0.3, "float32")
        want = [round_binary(round_binary(round_binary(x, fmt) * factor, "float32"), fmt)
                for x in w0]
        assert w.data.astype(np.float64).tolist() == want


@pytest.mark.parametrize("remedy", [dict(update_rounding="stochastic"), dict(kahan=True)])
def test_the_remedies_keep_the_decay_of_bf16_weights(remedy):
    """In bf16 the decay factor 1 - 1e-4 rounds every weight back (lost, as in torch); the
    low-precision remedies carry it over the steps, as they do for the update."""
    def run(**kw):
        with use_precision("bf16-true"):
            w = parameter(np.ones(256, np.float32))
            opt = AdamW([w], lr=1e-2, weight_decay=1e-2, **kw)
            for _ in range(100):
                w.grad = np.zeros(256, np.float32)
                opt.step()
        return float(w.data.mean())

    assert run() == 1.0                                    # every decay rounded away
    assert abs(run(**remedy) - (1 - 1e-4) ** 100) < 2e-3  # ~0.990


def test_adamw_repr_and_bad_input():
    w = parameter([1.0])
    assert repr(AdamW([w], weight_decay=0.1, fused=True)) == \
        "AdamW(lr=0.001, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.1, fused)"
    assert "weight_decay=0.01 decoupled" in repr(Adam([w], weight_decay=0.01,
                                                      decoupled_weight_decay=True))
    assert repr(Adam([w])) == "Adam(lr=0.001, betas=(0.9, 0.999), eps=1e-08)"  # unchanged
    with pytest.raises(ValueError, match=r"AdamW: Invalid weight_decay value: -0.1 \(need "
                                         r"weight_decay >= 0; e.g. weight_decay=0.01\)"):
        AdamW([w], weight_decay=-0.1)
    with pytest.raises(TypeError,
                       match=r"weight_decay must be a number such as 0.01, got .0.1. \(str\)"):
        AdamW([w], weight_decay="0.1")
    with pytest.raises(TypeError, match="decoupled_weight_decay must be True or False"):
        Adam([w], decoupled_weight_decay="True")
    with pytest.raises(TypeError, match="AdamW\\(\\) got an unexpected keyword argument "
                                        "'decoupled_weight_decay'.*drop it"):
        AdamW([w], decoupled_weight_decay=True)
    with pytest.raises(ValueError, match=r"AdamW\(fused=True\) .* kahan=True needs"):
        AdamW([w], fused=True, kahan=True)


def _bnb_run(make, steps=3, n=5000):
    rng = np.random.default_rng(5)
    w = parameter(rng.standard_normal(n).astype(np.float32))
    opt = make(w)
    for _ in range(steps):
        w.grad = (rng.standard_normal(n) * 1e-2).astype(np.float32)
        opt.step()
    return w, opt


@pytest.mark.parametrize("min_8bit_size", [0, 4096, 10**6])
def test_adamw8bit_decays_after_the_update_as_bitsandbytes(min_8bit_size):
    """bitsandbytes' kernels store p + update, then p * (1.0f - lr * wd) in float32: one step
    of AdamW8bit is Adam8bit's step followed by that product (8-bit and 32-bit moments)."""
    from floatlab.mixed import Adam8bit, AdamW8bit

    lr, wd = 3e-3, 0.07
    rng = np.random.default_rng(6)
    w0 = rng.standard_normal(5000).astype(np.float32)
    g = (rng.standard_normal(5000) * 1e-2).astype(np.float32)
    out = {}
    for cls in (Adam8bit, AdamW8bit):
        w = parameter(w0)
        opt = cls([w], lr=lr, min_8bit_size=min_8bit_size, **({"weight_decay": wd}
                                                              if cls is AdamW8bit else {}))
        w.grad = g
        opt.step()
        out[cls] = w.data
    f32 = np.float32
    factor = f32(f32(1) - f32(f32(lr) * f32(wd)))
    assert np.array_equal(out[AdamW8bit], out[Adam8bit] * factor)   # a float32 product
    assert not np.array_equal(out[AdamW8bit], out[Adam8bit])


def test_adamw8bit_is_adam8bit_with_bitsandbytes_default_decay():
    from floatlab.mixed import Adam8bit, AdamW8bit

    a, opt_a = _bnb_run(lambda w: AdamW8bit([w], min_8bit_size=0))
    b, _ = _bnb_run(lambda w: Adam8bit([w], weight_decay=1e-2, min_8bit_size=0))
    c, _ = _bnb_run(lambda w: Adam8bit([w], min_8bit_size=0))
    assert opt_a.weight_decay == 1e-2 and np.array_equal(a.data, b.data)
    assert not np.array_equal(a.data, c.data)
    assert "weight_decay=0.01" in repr(opt_a) and "weight_decay" not in repr(_bnb_run(
        lambda w: Adam8bit([w]), steps=0)[1])


def test_adamw8bit_bad_input():
    from floatlab.mixed import AdamW8bit

    w = parameter(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match=r"AdamW8bit: Invalid weight_decay value: -1.0 \(need "
                                         r"weight_decay >= 0"):
        AdamW8bit([w], weight_decay=-1.0)
    with pytest.raises(TypeError, match="weight_decay must be a number"):
        AdamW8bit([w], weight_decay=None)
    with pytest.raises(TypeError, match="weight_decay must be a number"):
        AdamW8bit([w], weight_decay=True)


@pytest.mark.parametrize("options", [dict(optimizer="adam8bit",
                                          optimizer_options={"min_8bit_size": 0}),
                                     dict(optimizer_options={"state": {"exp_avg": "bf16"}})])
def test_trainer_passes_weight_decay_to_the_8bit_and_state_optimizers(options):
    """Trainer(optimizer="adam8bit", weight_decay=0.5) and the per-moment StateAdam trained
    exactly as weight_decay=0: the argument was dropped without a word."""
    from floatlab.mixed import Trainer, teacher_gaussians

    data = teacher_gaussians(n=1024)
    runs = []
    for wd in (0.0, 0.5):
        t = Trainer("32-true", weight_decay=wd, progress=False, telemetry=False, **options)
        runs.append(t.fit(data, steps=3)["loss"])
        assert t.optimizer.weight_decay == wd
    assert not np.array_equal(runs[0], runs[1])
    with pytest.raises(ValueError, match=r"pass weight_decay to the Trainer \(Trainer\("
                                         r"weight_decay=...\)\), not in optimizer_options"):
        Trainer(optimizer="adam8bit", optimizer_options={"weight_decay": 0.1},
                progress=False)


def test_the_experiment_line_names_the_optimizer_for_sequences_too():
    """describe() of a sequence run called Adam8bit "Adam" (the MLP line said Adam8bit)."""
    from floatlab.mixed import Trainer, char_lm

    data = char_lm()
    for name, label in (("adam8bit", "Adam8bit lr"), ("sgd", "SGD lr"), ("adam", "Adam lr")):
        t = Trainer(optimizer=name, model="transformer", progress=False)
        assert f", {label} " in t.describe(data, 5) and f", {label} " in t.describe(None, 5)
    assert ", Adam (fused) lr" in Trainer(fused=True, progress=False).describe(data, 5)


def test_trainer_trains_with_adamw_and_adamw8bit():
    from floatlab.mixed import AdamW8bit, Trainer, compare, teacher_gaussians

    data = teacher_gaussians(n=1024)

    def fit(**kw):
        t = Trainer("bf16-mixed", progress=False, telemetry=False, **kw)
        return t, t.fit(data, steps=4)["loss"]

    t, adamw = fit(optimizer="adamw")
    assert type(t.optimizer) is AdamW and t.optimizer.weight_decay == 1e-2  # torch's default
    assert ", AdamW lr 0.001," in t.describe(data, 4)
    assert not np.array_equal(adamw, fit(optimizer="adam")[1])
    assert not np.array_equal(adamw, fit(optimizer="adam", weight_decay=1e-2)[1])
    # no decay: AdamW is Adam
    assert np.array_equal(fit(optimizer="adamw", weight_decay=0)[1], fit(optimizer="adam")[1])
    t, fused = fit(optimizer="adamw", fused=True)
    assert t.optimizer.fused and ", AdamW (fused) lr" in t.describe(data, 4)
    t, _ = fit(optimizer="adamw8bit", optimizer_options={"min_8bit_size": 0})
    assert type(t.optimizer) is AdamW8bit and t.optimizer.weight_decay == 1e-2
    assert Trainer(optimizer="adam", progress=False).weight_decay == 0.0    # unchanged
    assert Trainer(optimizer="sgd", progress=False).weight_decay == 0.0
    # recipes with per-moment states take AdamW's decoupled decay too
    t, _ = fit(optimizer="adamw", optimizer_options={"state": {"exp_avg": "bf16"}})
    assert t.optimizer.decoupled_weight_decay and t.optimizer.weight_decay == 1e-2
    r = compare([{"precision": "32-true", "optimizer": "adamw", "label": "AdamW"},
                 {"precision": "32-true", "optimizer": "adam", "label": "Adam"}],
                steps=3, progress=False, data=data)
    assert [h.precision for h in r] == ["AdamW", "Adam"] and "AdamW lr" in str(r)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(optimizer="adamw", weight_decay=-0.1), ValueError, "weight_decay"),
    (dict(optimizer="adamw", weight_decay="0.1"), TypeError, "weight_decay must be a number"),
    (dict(optimizer="adamw8bit", fused=True), ValueError, "use optimizer='adam' or 'adamw'"),
    (dict(optimizer="AdamW"), ValueError, "'adamw', 'sgd', 'adam8bit' or 'adamw8bit'"),
])
def test_trainer_adamw_bad_input(kwargs, error, match):
    from floatlab.mixed import Trainer

    with pytest.raises(error, match=match):
        Trainer(progress=False, **kwargs)


@pytest.mark.parametrize("optimizer", ["adam", "adamw", "adam8bit", "adamw8bit"])
def test_trainer_refuses_momentum_for_the_adams(optimizer):
    """Trainer(optimizer='adam', momentum=0.9) trained exactly as momentum=0: SGD's argument
    was dropped without a word."""
    from floatlab.mixed import Trainer

    with pytest.raises(ValueError, match=rf"momentum=0.9 is SGD's argument \(optimizer='sgd'\);"
                                         rf" optimizer='{optimizer}' takes no momentum.*betas"):
        Trainer(optimizer=optimizer, momentum=0.9, progress=False)
    assert Trainer(optimizer=optimizer, momentum=0.0, progress=False).momentum == 0.0
    assert Trainer(optimizer="sgd", momentum=0.9, progress=False).momentum == 0.9
