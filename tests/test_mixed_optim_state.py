"""Optimizer.state_dict() / load_state_dict(): torch's structure, bit-identical resume."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from floatlab.mixed import SGD, Adam, Adam8bit, AdamW, AdamW8bit, parameter, use_precision


def _grads(seed, shapes, steps):
    rng = np.random.default_rng(seed)
    return [[(rng.standard_normal(s) * 1e-2).astype(np.float32) for s in shapes]
            for _ in range(steps)]


def _run(opt, params, grads):
    for step in grads:
        for p, g in zip(params, step, strict=True):
            p.grad = g
        opt.step()


MAKERS = {
    "adam fp16": ("16-true", lambda ps: Adam(ps, eps=1e-4)),
    "adamw fused": ("bf16-mixed", lambda ps: AdamW(ps, fused=True)),
    "adamw stochastic": ("bf16-true", lambda ps: AdamW(ps, lr=1e-2,
                                                      update_rounding="stochastic", seed=3)),
    "adamw kahan": ("bf16-true", lambda ps: AdamW(ps, lr=1e-2, kahan=True)),
    "sgd momentum": ("32-true", lambda ps: SGD(ps, lr=0.1, momentum=0.9, nesterov=True)),
    "sgd stochastic": ("bf16-true", lambda ps: SGD(ps, lr=0.1, update_rounding="stochastic")),
    "adamw8bit": ("32-true", lambda ps: AdamW8bit(ps, min_8bit_size=0)),
}


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_resume_from_a_state_dict_is_bit_identical(name):
    precision, make = MAKERS[name]
    shapes = [(300,), (4, 5), (3,)]
    grads = _grads(1, shapes, 8)
    grads[2][2] = None  # a parameter without a gradient in one step: its own step count
    rng = np.random.default_rng(0)
    w0 = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    with use_precision(precision):
        ps = [parameter(w) for w in w0]
        opt = make(ps)
        _run(opt, ps, grads[:4])
        sd = opt.state_dict()
        saved = copy.deepcopy(sd)
        middle = [p.data.copy() for p in ps]
        _run(opt, ps, grads[4:])
        qs = [parameter(w) for w in w0]
        resumed = make(qs)
        for q, m in zip(qs, middle, strict=True):
            q.data = m.copy()
        resumed.load_state_dict(sd)
        _run(resumed, qs, grads[4:])
    for p, q in zip(ps, qs, strict=True):
        assert p.data.tobytes() == q.data.tobytes()
    # the dict holds copies: the later steps changed neither it nor the loaded optimizer's
    for i, entry in saved["state"].items():
        for key, value in entry.items():
            assert np.array_equal(value, sd["state"][i][key], equal_nan=True)


def test_state_dict_has_torchs_structure():
    w, b = parameter(np.ones((2, 3), np.float32)), parameter(np.zeros(3, np.float32))
    opt = AdamW([w, b], lr=0.01)
    assert opt.state_dict()["state"] == {}           # no step yet: no state, as in torch
    w.grad = np.full((2, 3), 0.1, np.float32)
    opt.step()
    sd = opt.state_dict()
    assert list(sd["state"]) == [0]                  # b had no gradient
    entry = sd["state"][0]
    assert entry["step"].dtype == np.float32 and float(entry["step"]) == 1.0
    assert entry["exp_avg"].shape == (2, 3) and isinstance(entry["exp_avg_sq"], np.ndarray)
    group = sd["param_groups"][0]
    assert group["params"] == [0, 1] and group["lr"] == 0.01 and group["weight_decay"] == 0.01
    assert group["betas"] == (0.9, 0.999) and group["decoupled_weight_decay"] is True
    sgd = SGD([parameter([1.0])], lr=0.1, momentum=0.9)
    sgd.params[0].grad = np.array([1.0], np.float32)
    sgd.step()
    assert sorted(sgd.state_dict()["state"][0]) == ["momentum_buffer", "step"]


def _saved():
    w = parameter(np.ones(4, np.float32))
    opt = Adam([w])
    w.grad = np.full(4, 0.5, np.float32)
    opt.step()
    return opt.state_dict()


@pytest.mark.parametrize("make, edit, error, match", [
    (lambda: Adam([parameter(np.ones(4, np.float32))]), lambda sd: [1, 2], TypeError,
     "pass the dict optimizer.state_dict\\(\\) returned"),
    (lambda: AdamW([parameter(np.ones(4, np.float32))]), lambda sd: sd, ValueError,
     "saved with optimizer='Adam', this optimizer has optimizer='AdamW'"),
    (lambda: Adam([parameter(np.ones(4, np.float32))], lr=0.1), lambda sd: sd, ValueError,
     "saved with lr=0.001, this optimizer has lr=0.1; build the optimizer with the saved"),
    (lambda: Adam([parameter(np.ones(4, np.float32)), parameter([1.0])]), lambda sd: sd,
     ValueError, "doesn't match the size of optimizer's group.*lists 1 parameters, this "
                 "optimizer has 2"),
    (lambda: Adam([parameter(np.ones(5, np.float32))]), lambda sd: sd, ValueError,
     r"parameter 0's 'exp_avg' has shape \(4,\), the parameter has shape \(5,\)"),
    (lambda: Adam([parameter(np.ones(4, np.float32))]),
     lambda sd: {**sd, "param_groups": sd["param_groups"] * 2}, ValueError,
     "different number of parameter groups"),
    (lambda: Adam([parameter(np.ones(4, np.float32))]),
     lambda sd: {**sd, "state": {0: {**sd["state"][0], "step": -1}}}, ValueError,
     "step must be a whole number >= 1"),
    (lambda: Adam([parameter(np.ones(4, np.float32))]),
     lambda sd: {**sd, "state": {3: sd["state"][0]}}, ValueError,
     "entry for parameter 3; the indices run from 0 to 0"),
    (lambda: Adam([parameter(np.ones(4, np.float32))]),
     lambda sd: {**sd, "state": {0: {**sd["state"][0], "exp_avg": [0.0] * 4}}}, TypeError,
     "'exp_avg' must be a float NumPy array of shape \\(4,\\), got list"),
    (lambda: Adam([parameter(np.ones(4, np.float32))]),
     lambda sd: {**sd, "state": {0: {"step": 1.0, "exp_avg": sd["state"][0]["exp_avg"]}}},
     ValueError, r"state has \['exp_avg'\], this optimizer keeps \['exp_avg', 'exp_avg_sq'\]"),
    (lambda: Adam([parameter(np.ones(4, np.float32))]),
     lambda sd: {**sd, "rng_state": {"bit_generator": "MT19937"}}, ValueError,
     "rng_state is not the state of this optimizer's generator"),
])
def test_a_mismatched_state_dict_is_refused_and_changes_nothing(make, edit, error, match):
    opt = make()
    before = (copy.deepcopy(opt.state_dict()), opt.state_bytes())
    with pytest.raises(error, match=match):
        opt.load_state_dict(edit(_saved()))
    after = (opt.state_dict(), opt.state_bytes())
    assert repr(before) == repr(after)


def test_state_in_another_format_is_refused():
    with use_precision("16-true"):
        w = parameter(np.ones(4, np.float32))
        opt = Adam([w])
    sd = _saved()
    sd["state"][0]["exp_avg"] = np.full(4, 0.1, np.float32)  # not a float16 value
    with pytest.raises(ValueError, match="not exact in this optimizer's state"):
        opt.load_state_dict(sd)


def test_adam8bit_state_dict_round_trips():
    w = parameter(np.ones(5000, np.float32))
    opt = Adam8bit([w])
    w.grad = np.linspace(-1, 1, 5000).astype(np.float32)
    opt.step()
    other = Adam8bit([parameter(np.ones(5000, np.float32))])
    other.load_state_dict(opt.state_dict())
    assert other.state_bytes() == opt.state_bytes()
    assert np.array_equal(other.groups[0].state["exp_avg"], opt.groups[0].state["exp_avg"])
