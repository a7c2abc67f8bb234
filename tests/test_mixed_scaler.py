"""GradScaler follows torch.amp.GradScaler: defaults, trajectory, unscale, skips, misuse errors."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from torch_models import round_binary, scaler_times

import floatlab
import floatlab.mixed as fm
from floatlab.mixed import SGD, GradScaler, StaticScaler, Tensor, parameter, use_precision
from floatlab.mixed.scaler import GradScalerError, GradScalerValueError


def _run(scaler, inf_at, iterations, factor=3.0):
    """torch's recipe on one parameter; inject inf into the gradient at the given iterations."""
    w = parameter([1.0])
    opt = SGD([w], lr=1e-3)
    out = []
    for it in range(iterations):
        opt.zero_grad()
        scaler.scale((w * factor).sum()).backward()
        if it in inf_at:
            w.grad = w.grad * np.float32(np.inf)
        before = w.data.copy()
        report = scaler.step(opt)
        scaler.update()
        tracker = scaler.state_dict().get("_growth_tracker")
        out.append((scaler.get_scale(), tracker, report is None, bool(np.all(w.data == before))))
    return out


def test_trajectory_equals_torchs():
    # measured with torch: init_scale 8, growth_interval 3, inf injected at iteration 2
    traj = _run(GradScaler(init_scale=8.0, growth_interval=3), {2}, 7)
    assert [t[0] for t in traj] == [8.0, 8.0, 4.0, 4.0, 4.0, 8.0, 8.0]
    assert [t[1] for t in traj] == [1, 2, 0, 1, 2, 0, 1]
    assert [t[2] for t in traj] == [False, False, True, False, False, False, False]
    assert [t[3] for t in traj] == [False, False, True, False, False, False, False]


def test_torch_defaults_and_state_dict_keys():
    s = GradScaler()
    assert s.get_scale() == 65536.0
    assert (s.get_growth_factor(), s.get_backoff_factor(), s.get_growth_interval()) == (
        2.0, 0.5, 2000)
    assert s.is_enabled()
    assert s.state_dict() == {"scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                              "growth_interval": 2000, "_growth_tracker": 0}
    # torch.amp.GradScaler(device="cuda", ...): the lab ignores the device, but its default
    # is torch's, as the docstring promises (it was "cpu")
    assert s.device == "cuda"


def test_scale_is_a_float32_number():
    s = GradScaler(init_scale=0.1)
    assert s.get_scale() == 0.1  # before first use: the init value, as torch
    s.scale(Tensor([1.0]))
    assert s.get_scale() == float(np.float32(0.1))


def test_scale_multiplies_tensors_and_nested_sequences():
    s = GradScaler(init_scale=4.0)
    out = s.scale([Tensor([1.0]), (Tensor([2.0]),)])
    assert isinstance(out, list) and isinstance(out[1], tuple)
    assert out[0].item() == 4.0 and out[1][0].item() == 8.0
    with pytest.raises(ValueError, match="Tensor or an iterable"):
        s.scale(3.0)


def test_unscale_uses_the_float32_reciprocal_and_unscales_even_with_inf():
    w = parameter([1.0, 1.0, 1.0])
    opt = SGD([w], lr=1.0)
    s = GradScaler(init_scale=3.0)
    s.scale((w * 1.0).sum()).backward()
    w.grad = np.array([3.0, 6.0, np.inf], np.float32)
    s.unscale_(opt)
    inv = np.float32(1.0 / np.float64(np.float32(3.0)))
    np.testing.assert_array_equal(w.grad, np.array([3.0, 6.0, np.inf], np.float32) * inv)
    assert s.step(opt) is None  # found inf: skipped
    np.testing.assert_array_equal(w.data, [1.0, 1.0, 1.0])
    s.update()
    assert s.get_scale() == 1.5


@pytest.mark.parametrize("sequence, message", [
    (("unscale", "unscale"), "unscale_() has already been called on this optimizer since the "
                             "last update()."),
    (("step", "unscale"), "unscale_() is being called after step()."),
    (("step", "step"), "step() has already been called since the last update()."),
])
def test_misuse_errors(sequence, message):
    w = parameter([1.0])
    opt = SGD([w], lr=0.1)
    s = GradScaler()
    s.scale(w.sum()).backward()
    calls = {"unscale": lambda: s.unscale_(opt), "step": lambda: s.step(opt)}
    calls[sequence[0]]()
    with pytest.raises(RuntimeError) as err:
        calls[sequence[1]]()
    assert str(err.value) == message


def test_update_and_step_need_inf_checks():
    w = parameter([1.0])
    opt = SGD([w], lr=0.1)
    s = GradScaler()
    with pytest.raises(RuntimeError, match="_scale is None"):
        s.update()
    s.scale(w.sum())  # initialises the scale, but nothing was unscaled
    with pytest.raises(RuntimeError, match="No inf checks were recorded prior to update."):
        s.update()
    with pytest.raises(RuntimeError, match="No inf checks were recorded for this optimizer."):
        s.step(opt)  # no parameter has a gradient


def test_fp16_gradients_are_refused_like_torch():
    with use_precision("16-true"):
        w = parameter([1.0])
        opt = SGD([w], lr=0.1)
        s = GradScaler()
        s.scale(w.sum()).backward()
        with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
            s.unscale_(opt)
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        fm.Trainer("16-true", scaler=GradScaler(), progress=False)
    # scaler="dynamic" is refused when the Trainer is built too (it raised in fit's first step)
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients.*Use '16-mixed'"):
        fm.Trainer("16-true", scaler="dynamic", progress=False)
    # Lightning's TransformerEnginePrecision: fp16 weights and no scaler; the fix is not '16-mixed'
    with pytest.raises(ValueError, match="TransformerEnginePrecision does.*leave out lightning"):
        fm.Trainer("transformer-engine-float16", recipe_options={"lightning": True},
                   scaler="dynamic", progress=False)
    fm.Trainer("transformer-engine-float16", recipe_options={"lightning": True}, scaler=1024.0,
               progress=False)  # a static scale is no GradScaler


def test_growth_and_the_finite_check():
    s = GradScaler(init_scale=2.0**127, growth_interval=1)
    _run(s, set(), 1, factor=2.0**-10)
    assert s.get_scale() == 2.0**127  # 2**128 overflows float32: the scale stays
    assert s.state_dict()["_growth_tracker"] == 0
    capped = GradScaler(init_scale=2.0**23, growth_interval=1, max_scale=2.0**24)
    assert [t[0] for t in _run(capped, set(), 3)] == [2.0**24] * 3


def test_update_with_new_scale_leaves_the_tracker():
    s = GradScaler(init_scale=8.0, growth_interval=5)
    _run(s, set(), 2)
    s.update(100.0)
    assert s.get_scale() == 100.0 and s.state_dict()["_growth_tracker"] == 2
    s.update(np.array([32.0]))
    assert s.get_scale() == 32.0
    with pytest.raises(ValueError, match="1-element"):
        s.update(np.ones(2))
    s.update(Tensor([16.0]))
    assert s.get_scale() == 16.0


def test_state_dict_round_trip():
    a = GradScaler(init_scale=8.0, growth_interval=3)
    _run(a, {1}, 3)
    b = GradScaler()
    b.load_state_dict(a.state_dict())
    assert b.state_dict() == a.state_dict() == {
        "scale": 4.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3,
        "_growth_tracker": 1}
    assert _run(b, set(), 2) == _run(a, set(), 2)
    with pytest.raises(RuntimeError, match="state dict is empty"):
        GradScaler().load_state_dict({})
    with pytest.raises(KeyError, match="_growth_tracker"):
        GradScaler().load_state_dict({"scale": 1.0})


def test_disabled_scaler_is_a_pass_through():
    s = GradScaler(enabled=False)
    t = Tensor([2.0])
    assert s.scale(t) is t and s.get_scale() == 1.0 and s.state_dict() == {}
    traj = _run(s, set(), 2)
    assert all(scale == 1.0 and not skipped for scale, _, skipped, _ in traj)
    s.load_state_dict({})  # ignored when disabled, as torch


@pytest.mark.parametrize("kwargs, match", [
    ({"growth_factor": 1.0}, "growth factor"),
    ({"backoff_factor": 1.0}, "backoff factor"),
    ({"growth_interval": 0}, "growth_interval"),
    ({"init_scale": 0.0}, "init_scale"),
    ({"init_scale": float("inf")}, "init_scale"),
])
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GradScaler(**kwargs)


def test_static_scaler():
    s = StaticScaler(8.0)
    traj = _run(s, {1}, 3)
    assert [t[0] for t in traj] == [8.0, 8.0, 8.0]
    assert [t[2] for t in traj] == [False, False, False]  # a static scale does not skip...
    skipping = StaticScaler(8.0, skip_nonfinite=True)
    assert [t[2] for t in _run(skipping, {1}, 3)] == [False, True, False]  # ...unless asked
    with use_precision("16-true"):  # and it accepts fp16 gradients
        w = parameter([1.0])
        opt = SGD([w], lr=0.5)
        s.scale((w * 2.0**-20).sum()).backward()
        assert s.step(opt) is not None
    assert s.state_dict() == {"scale": 8.0}


def test_exported_names():
    assert fm.GradScaler is GradScaler
    if "GradScaler" not in floatlab.__all__:
        pytest.skip("floatlab.GradScaler is exported from floatlab/__init__.py by the lead")
    assert floatlab.GradScaler is GradScaler


# --------------------------------------------------------------------------- torch fidelity

def test_backoff_by_a_factor_float32_cannot_hold_matches_torch():
    # torch 2.13: GradScaler(init_scale=3.0, backoff_factor=0.9), one inf step, update()
    s = GradScaler(init_scale=3.0, backoff_factor=0.9)
    _run(s, {0}, 1)
    assert s.get_scale() == 2.700000047683716  # not float32(3) * float32(0.9) = 2.6999998...
    assert s.get_scale() == scaler_times(3.0, 0.9)


@pytest.mark.parametrize("seed", range(6))
def test_random_factor_sequences_follow_torchs_double_product(seed):
    """The scale after every update equals the exact model: the float32 scale times the
    Python-float factor, rounded to float64 and then to float32 (torch's C++ arithmetic)."""
    rng = np.random.default_rng(seed)
    growth = float(rng.choice([1.1, 1.3, 2.0, 1.0001, rng.uniform(1.0, 3.0)]))
    backoff = float(rng.choice([0.9, 0.8, 0.5, 0.3333, rng.uniform(0.01, 1.0)]))
    init = float(rng.choice([3.0, 0.1, 65536.0, rng.uniform(1e-3, 1e5)]))
    interval = int(rng.integers(1, 4))
    infs = set(np.flatnonzero(rng.random(40) < 0.3).tolist())
    s = GradScaler(init_scale=init, growth_factor=growth, backoff_factor=backoff,
                   growth_interval=interval)
    got = [t[0] for t in _run(s, infs, 40, factor=2.0**-20)]
    expected, scale, tracker = [], round_binary(init, "float32"), 0
    for it in range(40):
        if it in infs:
            scale, tracker = scaler_times(scale, backoff), 0
        elif tracker + 1 == interval:
            grown = scaler_times(scale, growth)
            scale = grown if math.isfinite(grown) else scale
            tracker = 0
        else:
            tracker += 1
        expected.append(scale)
    assert got == expected


def test_errors_where_torch_asserts_are_assertion_errors_too():
    w = parameter([1.0])
    opt = SGD([w], lr=0.1)
    fix = ("  This may indicate your script did not use scaler.scale(loss or outputs) earlier in "
           "the iteration.")
    for call, what in ((lambda s: s.update(), "update"), (lambda s: s.unscale_(opt), "unscale_"),
                       (lambda s: s.step(opt), "step")):
        with pytest.raises(AssertionError) as err:
            call(GradScaler())
        assert isinstance(err.value, RuntimeError)
        assert str(err.value) == f"Attempted {what} but _scale is None." + fix
    s = GradScaler()
    s.scale(w.sum())
    with pytest.raises(AssertionError, match="^No inf checks were recorded prior to update.$"):
        s.update()  # no step
    with pytest.raises(AssertionError, match="^No inf checks were recorded for this optimizer.$"):
        s.step(opt)  # no gradient
    with pytest.raises(GradScalerValueError, match="new_scale should be a float or a 1-element"):
        s.update(np.ones(2))
    for kwargs, message in (({"growth_factor": 1.0}, "The growth factor must be > 1.0."),
                            ({"backoff_factor": 1.0}, "The backoff factor must be < 1.0.")):
        with pytest.raises(AssertionError, match=re.escape(message)) as err:
            GradScaler(**kwargs)
        assert isinstance(err.value, ValueError)
    assert issubclass(GradScalerError, RuntimeError) and issubclass(GradScalerValueError,
                                                                    ValueError)


def test_numpy_scalars_are_numbers():
    s = GradScaler(init_scale=np.float32(1024), growth_factor=np.float64(2.0),
                   backoff_factor=np.float16(0.5), growth_interval=np.int64(3))
    assert s.get_scale() == 1024.0 and s.get_growth_interval() == 3
    _run(s, {0}, 1)
    assert s.get_scale() == 512.0
    s.update(np.float32(8.0))
    assert s.get_scale() == 8.0
    assert StaticScaler(np.int32(8)).get_scale() == 8.0


@pytest.mark.parametrize("kwargs, match", [
    ({"backoff_factor": "0.5"}, r"backoff_factor must be a number such as 0.5, got '0.5' \(str\)"),
    ({"growth_factor": None}, "growth_factor must be a number"),
    ({"init_scale": "1024"}, "init_scale must be a number"),
    ({"init_scale": True}, "init_scale must be a number"),
    ({"max_scale": "big"}, "max_scale must be a number"),
])
def test_non_numbers_are_refused_by_name(kwargs, match):
    with pytest.raises(TypeError, match=match):
        GradScaler(**kwargs)


def test_new_scale_of_the_wrong_type():
    s = GradScaler()
    s.scale(Tensor([1.0]))
    with pytest.raises(TypeError, match="new_scale='8'.*Pass a number"):
        s.update("8")
