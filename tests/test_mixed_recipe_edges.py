"""Training recipes on valid but unusual configurations: batches that the recipe's blocks do
not divide, delayed scaling across zero and overflowing steps (Transformer Engine's records
the non-finite amax and keeps its scale, so the GradScaler skips the step)."""

from __future__ import annotations

import numpy as np
import pytest

from floatlab.mixed import Tensor, Trainer, get_policy, parameter, teacher_gaussians
from floatlab.mixed.nn import linear
from floatlab.mixed.recipe_gemm import recipe_run
from floatlab.mixed.tensor import no_grad, use_precision
from floatlab.rounding import round as fl_round


def _step(precision, batch, **opts):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 20)).astype(np.float32)
    w = rng.standard_normal((8, 20)).astype(np.float32)
    with use_precision(get_policy(precision, recipe_options=opts or None)), recipe_run():
        wt = parameter(w)
        y = linear(Tensor(x), wt)
        y.backward(np.ones(y.shape, np.float32))
    return wt.grad


def test_nvfp4_hadamard_on_a_batch_it_does_not_divide_is_refused_clearly():
    # the RHT runs along the batch axis of the wgrad GEMM in blocks of 16: a batch of 50 was
    # refused by the transform's own shape check ("length of axis 1 (50)", "pad the tensor")
    with pytest.raises(ValueError, match=r"'nvfp4'.*batch has 50 rows.*multiple of 16.*"
                                         r"hadamard=False"):
        _step("nvfp4", 50)
    with pytest.raises(ValueError, match="batch has 50 rows"):
        Trainer("nvfp4", batch_size=50, progress=False).fit(teacher_gaussians(n=128), steps=1)
    # the ways out the message names, and a forward pass alone, run
    assert np.isfinite(_step("nvfp4", 50, hadamard=False)).all()
    assert np.isfinite(_step("nvfp4", 48)).all()
    with use_precision("nvfp4"), recipe_run(), no_grad():
        y = linear(Tensor(np.ones((50, 20), np.float32)), parameter(np.ones((8, 20), np.float32)))
    assert y.shape == (50, 8)


def _overflowing_run(telemetry):
    """A hand-made loop under 'transformer-engine-float16' whose GradScaler starts at 2**24:
    the fp16 gradients overflow until the scale has backed off."""
    from floatlab.mixed import MLP, Adam, GradScaler, cross_entropy

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((64, 16)).astype(np.float32), rng.integers(0, 4, 64)
    with use_precision("transformer-engine-float16"), recipe_run(telemetry=telemetry) as run:
        model = MLP((16, 32, 4), seed=0)
        opt, scaler = Adam(model.parameters(), lr=1e-3), GradScaler(init_scale=2.0**24)
        start = [p.data.copy() for p in model.parameters()]
        reports, scales = [], []
        for _ in range(8):
            opt.zero_grad()
            scaler.scale(cross_entropy(model(Tensor(x)), y)).backward()
            reports.append(scaler.step(opt))
            scaler.update()
            scales.append(scaler.get_scale())
            run.end_step()
            if reports[-1] is None:  # a skipped step leaves the master weights alone
                params = model.parameters()
                assert all(np.array_equal(a, p.data) for a, p in zip(start, params, strict=True))
    return model, reports, scales, run


@pytest.mark.parametrize("telemetry", [True, False])
def test_an_overflowing_fp8_delayed_step_is_skipped_by_the_grad_scaler(telemetry):
    # The delayed scaler refused the inf amax of the overflowed fp16 gradient inside backward
    # ("x holds 0 NaN and ... inf values, so its amax is undefined"); Transformer Engine records
    # it and keeps the scale, so the inf reaches the GradScaler, which skips and backs off.
    model, reports, scales, run = _overflowing_run(telemetry)
    skipped = [r is None for r in reports]
    n = skipped.index(False)
    assert n >= 1 and not any(skipped[n:])
    assert scales == [2.0**24 * 0.5**min(i + 1, n) for i in range(8)]  # growth_interval 2000
    assert all(np.isfinite(p.data).all() for p in model.parameters())
    g = run.scalers["linear0.dgrad.a"]
    assert g.nonfinite == "record" and g.history[0] == np.inf and g.scale == 1.0  # TE's first
    # the forward operands never saw an inf: their scales follow their own amaxes
    assert np.isfinite(run.scalers["linear0.forward.a"].history).all()


def test_overflowing_steps_show_in_the_trainers_history_as_skipped():
    trainer = Trainer("transformer-engine-float16", loss_multiplier=1e6, progress=False)
    h = trainer.fit(teacher_gaussians(n=256), steps=3)
    assert list(h["skipped"]) == [True, True, True]
    assert list(h["scale"]) == [2.0**16, 2.0**15, 2.0**14] and h.skipped_steps == 3
    assert np.isfinite(h["loss"]).all()
    assert [s.scale for s in h.info["operands"]["linear0.dgrad.a"]] == [1.0] * 3
    # the gradient is all NaN here (inf - inf in fp16): TE's fmaxf amax leaves NaN out, 0
    assert trainer.recipe_run.scalers["linear0.dgrad.a"].history == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("telemetry", [True, False])
@pytest.mark.parametrize("name", ["mxfp8", "nvfp4", "deepseek-fp8", "fp8-current", "fp8-rowwise",
                                  "msamp-O1", "msamp-O3"])
def test_a_diverging_recipe_run_records_nan_as_the_plain_precisions_do(name, telemetry):
    # inf activations after a huge SGD step: the block / current / rowwise quantisers refused
    # them ("x holds 0 NaN and 8214 inf values, so a block amax is undefined") in the middle of
    # fit, where 'bf16-mixed' records the NaN in the History and carries on
    trainer = Trainer(name, optimizer="sgd", lr=1e30, telemetry=telemetry, progress=False)
    h = trainer.fit(teacher_gaussians(n=256), steps=3)
    assert h.went_nan and h.first_nonfinite_step == 1
    plain = Trainer("bf16-mixed", optimizer="sgd", lr=1e30, progress=False)
    assert plain.fit(teacher_gaussians(n=256), steps=3).first_nonfinite_step == 1


def test_a_non_finite_operand_is_nan_and_a_grad_scaler_skips_its_step():
    from dataclasses import replace

    from floatlab.mixed import MLP, Adam, GradScaler, Policy, cross_entropy
    from floatlab.mixed.policy import FP16
    from floatlab.mixed.recipe import get_recipe, msamp_scheme
    from floatlab.mixed.recipe_gemm import RecipeRun, quantize_operand

    run = RecipeRun()
    x = np.array([[np.inf, 1.0], [2.0, 3.0]])
    before = x.copy()
    out = quantize_operand(x, msamp_scheme(), run, "k")
    assert np.isnan(out).all() and np.array_equal(x, before)
    assert run._pending["k"].amax == np.inf and np.isnan(run._pending["k"].scale)
    with pytest.raises(ValueError, match="batch has 50 rows"):  # other errors still raise
        _step("nvfp4", 50)
    # an fp16 MXFP8 recipe with a GradScaler: the overflowing steps are skipped, the weights kept
    recipe = replace(get_recipe("mxfp8"), name="mxfp8-fp16", compute=FP16, scaler="dynamic")
    rng = np.random.default_rng(0)
    xb, yb = rng.standard_normal((64, 32)).astype(np.float32), rng.integers(0, 4, 64)
    with use_precision(Policy.from_recipe(recipe)), recipe_run():
        model = MLP((32, 32, 4), seed=0)
        opt, scaler = Adam(model.parameters(), lr=1e-3), GradScaler(init_scale=2.0**24)
        start = [p.data.copy() for p in model.parameters()]
        opt.zero_grad()
        scaler.scale(cross_entropy(model(Tensor(xb)), yb)).backward()
        assert scaler.step(opt) is None
        scaler.update()
    assert scaler.get_scale() == 2.0**23
    assert all(np.array_equal(a, p.data) for a, p in zip(start, model.parameters(), strict=True))


def test_the_telemetry_records_transformer_engines_amax_on_non_finite_steps():
    # Transformer Engine's amax kernels reduce fmaxf(|x|, max) from 0: NaN entries are left
    # out, an inf is kept. The delayed scalers record that amax, but the telemetry's
    # OperandStats.amax was NumPy's max, NaN as soon as one entry was NaN.
    from floatlab.mixed.recipe import get_recipe, msamp_scheme
    from floatlab.mixed.recipe_gemm import RecipeRun, quantize_operand

    run, spec = RecipeRun(), get_recipe("fp8-delayed").forward.a
    cases = [([1.0, -2.0], 2.0), ([np.nan, -3.0], 3.0), ([np.nan, np.inf, 1.0], np.inf),
             ([np.nan, np.nan], 0.0)]
    for values, te_amax in cases:
        quantize_operand(np.array([values]), spec, run, "x")
        assert run._pending["x"].amax == te_amax == run.scalers["x"].history[-1]
        for other in (msamp_scheme(), get_recipe("mxfp8").forward.a):  # refused, given as NaN
            quantize_operand(np.array([values]), other, run, "y")
            assert run._pending["y"].amax == te_amax
    # in a Trainer: the fp16 gradient is all NaN (inf - inf); the History says 0, as TE does
    trainer = Trainer("transformer-engine-float16", loss_multiplier=1e6, progress=False)
    h = trainer.fit(teacher_gaussians(n=256), steps=2)
    assert [s.amax for s in h.info["operands"]["linear0.dgrad.a"]] == [0.0, 0.0]


def test_msamp_recipes_take_a_loss_scaler_as_ms_amp_does():
    # MS-AMP's usage guide and examples (docs/user-tutorial/usage.md, examples/mnist.py) train
    # msamp.initialize(opt_level="O1" / "O2") models with torch's GradScaler, whose unscaling
    # MS-AMP overrides for its FP8 weight gradients; floatlab refused any scaler for them
    from floatlab.mixed import SGD, GradScaler
    from floatlab.mixed.scaler import _MSAMPGradScaler

    assert get_policy("msamp-O2", scaler="dynamic").scaler == "dynamic"
    trainer = Trainer("msamp-O1", scaler="dynamic", loss_multiplier=1e6, progress=False)
    h = trainer.fit(teacher_gaussians(n=256), steps=3)
    assert isinstance(trainer.scaler, _MSAMPGradScaler)
    assert list(h["skipped"]) == [True] * 3 and list(h["scale"]) == [2.0**16, 2.0**15, 2.0**14]
    assert np.isfinite(h["loss"]).all() and all(
        np.isfinite(p.data).all() for p in trainer.model.parameters())
    plain = Trainer("msamp-O1", loss_multiplier=1e6, progress=False)
    assert not np.isfinite(plain.fit(teacher_gaussians(n=256), steps=3)["loss"]).all()
    # the unscaling is MS-AMP's (through the gradient's scale): the FP16 weights' gradients are
    # neither refused as FP16 gradients (torch's GradScaler) nor rounded back to FP16
    with use_precision(get_policy("msamp-O1")):
        w = parameter(np.ones(2, np.float32))
        opt = SGD([w], lr=1.0)
        scaler = _MSAMPGradScaler(init_scale=2.0**10)
        scaler.scale((w * 2.0**-30).sum()).backward()  # 2**-20: an FP16 subnormal
        scaler.unscale_(opt)
        assert (w.grad == 2.0**-30).all()  # below FP16's range, kept as MS-AMP keeps it
        w.grad = None
        torch_scaler = GradScaler(init_scale=2.0**10)
        torch_scaler.scale((w * 2.0**-30).sum()).backward()
        with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
            torch_scaler.unscale_(opt)
    with pytest.raises(ValueError, match="pass scaler='dynamic'"):
        Trainer("msamp-O1", scaler=GradScaler())
    with pytest.raises(ValueError, match="TransformerEnginePrecision takes no scaler"):
        Trainer("fp8-delayed", scaler="dynamic")


@pytest.mark.parametrize("name, weights", [("transformer-engine", "bfloat16"),
                                           ("transformer-engine-float16", "float16")])
def test_transformer_engine_lightning_option_is_lightnings_plugin(name, weights):
    # The note said "Lightning's 'transformer-engine-float16': ... GradScaler" over float32
    # masters, but Lightning's connectors build TransformerEnginePrecision(weights_dtype=
    # torch.float16 / torch.bfloat16), which casts the module to that dtype and has no scaler.
    # The default stays torch's AMP around TE (float32 masters, GradScaler for fp16) and says
    # so; lightning=True trains the weights themselves in that dtype, without a loss scaler.
    from floatlab.mixed.recipe import get_recipe
    default = get_recipe(name)
    assert default.master.name == "float32" and "Lightning" not in default.note
    assert get_recipe(name, lightning=False) == default
    r = get_recipe(name, lightning=True)
    assert (r.master.name, r.compute.name, r.scaler) == (weights, weights, None)
    assert r.note.startswith(f"Lightning's {name!r}") and r.options["lightning"] is True
    assert r.forward == default.forward and r.dgrad == default.dgrad
    trainer = Trainer(name, recipe_options={"lightning": True}, optimizer="sgd", progress=False)
    assert not trainer.policy.master_weights and trainer.policy.scaler is None
    trainer.fit(teacher_gaussians(n=256), steps=3)
    assert trainer.scaler is None
    for p in trainer.model.parameters():  # held in bf16 / fp16 themselves, no float32 copy
        assert p.fmt.name == weights
        assert np.array_equal(fl_round(p.data, weights), p.data)
    with pytest.raises(ValueError, match="lightning must be True or False"):
        get_recipe(name, lightning="False")


@pytest.mark.parametrize("level", [1, 3])
def test_msamp_modelling_differences_documented_in_its_builder_hold(level, monkeypatch):
    # _msamp's docstring (and the README) state where the lab differs from MS-AMP's source:
    # every parameter, biases too, is FP16 (MS-AMP: only Linear weights), and the FP8 weight
    # gradient (MS-AMP: a ScalingTensor read as grad.float()) reaches its FP16 parameter
    # rounded to FP16: exact from 2**-21 up, tinier entries lose bits or flush.
    import floatlab.mixed.recipe_gemm as rg
    name = f"msamp-O{level}"
    held = []

    def spy(a, spec, run, label, *args, **kw):
        out = quantize_operand(a, spec, run, label, *args, **kw)
        if label.endswith(".weight_grad"):
            held.append(np.array(out, np.float32))
        return out

    quantize_operand = rg.quantize_operand
    monkeypatch.setattr(rg, "quantize_operand", spy)
    trainer = Trainer(name, progress=False)
    trainer.fit(teacher_gaussians(n=256), steps=2)
    assert {p.fmt.name for p in trainer.model.parameters()} == {"float16"}
    assert all(np.array_equal(fl_round(h, "float16"), h) for h in held)  # exact in these runs
    rng = np.random.default_rng(0)
    for size, exact in ((1e-3, True), (1e-7, False)):
        held.clear()
        x = rng.standard_normal((32, 16)).astype(np.float32)
        with use_precision(name), recipe_run():  # (the parameter takes the policy's FP16)
            w = parameter((rng.standard_normal((8, 16)) / 4).astype(np.float32))
            y = linear(Tensor(x), w)
            y.backward((rng.standard_normal((32, 8)) * size).astype(np.float32))
        (dw,) = held
        assert w.fmt.name == "float16" and np.array_equal(w.grad, fl_round(dw, "float16"))
        assert np.array_equal(w.grad, dw) == exact
        assert exact or (np.abs(dw[w.grad != dw]).max() < 2.0 ** -21
                         and np.count_nonzero(w.grad == 0) > np.count_nonzero(dw == 0))
