"""SGD and Adam: torch's formulas, state in the policy's format, lost updates and remedies."""

from __future__ import annotations

import numpy as np
import pytest
from torch_models import fused_adam, round_binary, sgd

import floatlab
from floatlab.mixed import SGD, Adam, Tensor, parameter, use_precision
from floatlab.mixed.optim8bit import Adam8bit, StateAdam


def _adam_reference(w, grads, lr, b1, b2, eps, wd=0.0):
    """torch.optim.Adam (single tensor, no amsgrad) in float64."""
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, g in enumerate(grads, start=1):
        g = g + wd * w
        m = m + (g - m) * (1 - b1)
        v = v * b2 + (1 - b2) * g * g
        denom = np.sqrt(v) / np.sqrt(1 - b2**t) + eps
        w = w - lr / (1 - b1**t) * m / denom
    return w


def _sgd_reference(w, grads, lr, momentum, dampening, nesterov, wd):
    buf = None
    for g in grads:
        g = g + wd * w
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        w = w - lr * g
    return w


def _drive(opt, params, grads):
    for step_grads in grads:
        for p, g in zip(params, step_grads, strict=True):
            p.grad = np.asarray(g)
        opt.step()


@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_adam_matches_torchs_formula_in_float64(wd):
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal(7)
    grads = [rng.standard_normal(7) for _ in range(6)]
    with use_precision("64-true"):
        w = parameter(w0)
        _drive(Adam([w], lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=wd), [w],
               [[g] for g in grads])
    np.testing.assert_allclose(w.data, _adam_reference(w0, grads, 0.01, 0.8, 0.95, 1e-6, wd),
                               rtol=1e-13)


@pytest.mark.parametrize("momentum, dampening, nesterov, wd", [
    (0.0, 0.0, False, 0.0), (0.9, 0.0, False, 0.0), (0.9, 0.1, False, 0.01),
    (0.9, 0.0, True, 0.0)])
def test_sgd_matches_torchs_formula_in_float64(momentum, dampening, nesterov, wd):
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal(5)
    grads = [rng.standard_normal(5) for _ in range(4)]
    with use_precision("64-true"):
        w = parameter(w0)
        _drive(SGD([w], lr=0.1, momentum=momentum, dampening=dampening, nesterov=nesterov,
                   weight_decay=wd), [w], [[g] for g in grads])
    np.testing.assert_allclose(
        w.data, _sgd_reference(w0, grads, 0.1, momentum, dampening, nesterov, wd), rtol=1e-13)


def test_several_parameters_and_a_missing_gradient():
    with use_precision("64-true"):
        a, b = parameter([1.0, 2.0]), parameter([[3.0]])
        opt = Adam([a, b], lr=0.1)
        a.grad = np.array([0.5, -0.5])
        opt.step()  # b has no gradient: untouched, its step count does not advance
        assert b.data.tolist() == [[3.0]]
        a.grad, b.grad = np.array([0.5, -0.5]), np.array([[1.0]])
        opt.step()
    np.testing.assert_allclose(a.data, _adam_reference(np.array([1.0, 2.0]),
                                                       [np.array([0.5, -0.5])] * 2,
                                                       0.1, 0.9, 0.999, 1e-8))
    np.testing.assert_allclose(b.data, _adam_reference(np.array([[3.0]]), [np.array([[1.0]])],
                                                       0.1, 0.9, 0.999, 1e-8))


def test_adam_eps_vanishes_in_fp16_and_the_step_goes_nonfinite():
    assert float(floatlab.round(1e-8, "fp16")) == 0.0  # the seed article's mechanism
    with use_precision("16-true"):
        w = parameter([0.5, 0.5, 0.5])
        opt = Adam([w])
        # zero gradient: 0 / (0 + 0); 2**-13: v = 0.001 * 2**-26 underflows, m / 0 = inf
        w.grad = np.array([0.0, 2.0**-13, 0.1], np.float32)
        opt.step()
    assert np.isnan(w.data[0]) and np.isinf(w.data[1]) and np.isfinite(w.data[2])
    with use_precision("bf16-true"):  # bf16 keeps eps (1e-8 is a normal bf16 number)
        w = parameter([0.5, 0.5, 0.5])
        w.grad = np.array([0.0, 2.0**-13, 0.1], np.float32)
        Adam([w]).step()
    assert np.isfinite(w.data).all()


def test_optimizer_state_lives_in_the_policy_format():
    for precision, fmt, width in (("16-true", "float16", 2), ("16-mixed", "float32", 4),
                                  ("bf16-true", "bfloat16", 2), ("64-true", "float64", 8)):
        with use_precision(precision):
            w = parameter(np.ones((3, 4)))
            opt = Adam([w])
            w.grad = np.full((3, 4), 0.25, w.data.dtype)
            opt.step()
        assert opt.state_bytes() == {fmt: 2 * 12 * width}, precision
    with use_precision("bf16-true", optimizer_state="fp32"):
        w = parameter(np.ones(3))
        opt = SGD([w], lr=0.1, momentum=0.9)
        w.grad = np.full(3, 0.5, np.float32)
        opt.step()
    assert opt.state_bytes() == {"float32": 12}


def test_small_updates_are_lost_in_bf16_and_reported():
    with use_precision("bf16-true"):
        w = parameter([1.0, 1.0])
        opt = SGD([w], lr=1e-3)
        w.grad = np.array([1.0, 0.0], np.float32)  # 1 - 1e-3 rounds back to 1 in bf16
        report = opt.step()
    assert w.data.tolist() == [1.0, 1.0]
    assert (report.nonzero_grads, report.lost, report.lost_fraction) == (1, 1, 1.0)
    assert opt.last_report is report


@pytest.mark.parametrize("remedy", [{"update_rounding": "stochastic"}, {"kahan": True}])
def test_stochastic_rounding_and_kahan_recover_small_updates(remedy):
    steps, lr = 400, 2.0**-12  # each update is 1/32 of bf16's ulp at 1
    with use_precision("bf16-true"):
        plain, fixed = parameter(np.ones(64)), parameter(np.ones(64))
        opt_plain, opt_fixed = SGD([plain], lr=lr), SGD([fixed], lr=lr, seed=3, **remedy)
        for _ in range(steps):
            plain.grad = fixed.grad = np.ones(64, np.float32)
            opt_plain.step()
            opt_fixed.step()
    target = 1 - steps * lr  # 0.90234375
    assert plain.data.tolist() == [1.0] * 64  # nearest rounding never moves
    assert abs(fixed.data.mean() - target) < 0.004  # the remedies follow the exact path
    if "kahan" in remedy:
        assert np.all(np.abs(fixed.data - target) <= 2.0**-8)  # within one ulp, every entry
        assert opt_fixed.state_bytes() == {"bfloat16": 128}  # the compensation buffer


def test_stochastic_updates_are_seeded():
    def run(seed):
        with use_precision("bf16-true"):
            w = parameter(np.ones(16))
            opt = SGD([w], lr=2.0**-10, update_rounding="stochastic", seed=seed)
            for _ in range(5):
                w.grad = np.ones(16, np.float32)
                opt.step()
        return w.data.copy()

    np.testing.assert_array_equal(run(1), run(1))
    assert not np.array_equal(run(1), run(2))


def test_low_copies_are_made_after_each_step():
    with use_precision("16-mixed"):
        w = parameter([[1 / 3]])
        opt = SGD([w], lr=0.1)
        assert w._copy is not None and w._copy[0] is w.data  # primed at construction
        w.grad = np.array([[1.0]], np.float32)
        opt.step()
        assert w._copy[0] is w.data
        assert w._copy[2].tolist() == floatlab.round(w.data, "fp16").tolist()


@pytest.mark.parametrize("make, match", [
    (lambda: SGD([], lr=0.1), "no parameters"),
    (lambda: SGD([np.ones(2)], lr=0.1), "can only optimize Tensors.*ndarray"),
    (lambda: SGD([{"params": [parameter([1.0])]}], lr=0.1), "parameter groups.*one optimizer"),
    (lambda: SGD([parameter([1.0]) * 2.0], lr=0.1), "can't optimize a non-leaf Tensor"),
    (lambda: SGD([parameter([1.0])], lr=-0.1), "lr >= 0"),
    (lambda: SGD([parameter([1.0])], lr=0.1, nesterov=True), "Nesterov"),
    (lambda: Adam([parameter([1.0])], betas=(1.0, 0.9)), "betas"),
    (lambda: SGD([parameter([1.0])], lr=0.1, update_rounding="odd"), "update_rounding"),
    (lambda: SGD([parameter([1.0])], lr=0.1, update_rounding="stochastic", kahan=True),
     "choose one"),
])
def test_bad_optimizer_arguments(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


@pytest.mark.parametrize("make", [
    lambda ps: SGD(ps, lr=0.1, momentum=0.9), lambda ps: Adam(ps), lambda ps: Adam(ps, fused=True),
    lambda ps: StateAdam(ps, state={"exp_avg": "e4m3fn", "exp_avg_sq": "dynamic8"}),
    lambda ps: Adam8bit(ps, min_8bit_size=0),
])
def test_frozen_parameters_are_kept_and_skipped_as_torch_does(make):
    """torch.optim takes a parameter with requires_grad=False (a frozen layer in
    model.parameters()) and skips it while its .grad is None; floatlab refused it ("not a leaf
    tensor with requires_grad=True"). The trained parameter moves exactly as without it."""
    def train(with_frozen):
        w = parameter(np.linspace(-1, 1, 300).astype(np.float32))
        frozen = Tensor(np.ones(300, np.float32))  # requires_grad=False
        opt = make([frozen, w] if with_frozen else [w])
        for step in range(3):
            w.grad = np.full(300, 0.1 * (step + 1), np.float32)
            opt.step()
        if with_frozen:
            assert frozen.data.tolist() == [1.0] * 300 and not frozen.requires_grad
        return w.data
    assert np.array_equal(train(True), train(False))


def test_a_set_of_parameters_is_refused_as_torch_does():
    """A set was taken in its iteration order, which changes between runs (ids hash), and
    with it which random numbers each value's stochastic update drew; torch refuses sets."""
    for make in (lambda ps: SGD(ps, lr=0.1), lambda ps: Adam(ps)):
        with pytest.raises(TypeError, match="ordered collections.*use a list"):
            make({parameter([1.0]), parameter([2.0])})
    assert len(SGD((p for p in [parameter([1.0]), parameter([2.0])]), lr=0.1).params) == 2


def test_duplicate_parameters_are_refused():
    # deliberate, stricter than torch (a UserWarning, then two updates per step): the
    # Optimizer docstring says why
    w = parameter([1.0])
    with pytest.raises(ValueError, match="appears twice"):
        Adam([w, w])


def test_sgd_step_rounds_once_like_torchs_add_():
    # torch 2.13, float32: w.add_(g, alpha=-1e-3) gives -0.87083775 (w - lr*g rounded once)
    w = parameter([0.10490011])
    w.grad = np.array([975.7378], np.float32)
    SGD([w], lr=1e-3).step()
    assert w.data.tolist() == [-0.8708377480506897]


@pytest.mark.parametrize("precision, fmt", [("32-true", "float32"), ("16-true", "float16"),
                                            ("bf16-true", "bfloat16")])
@pytest.mark.parametrize("momentum, dampening, nesterov, wd", [
    (0.0, 0.0, False, 0.0), (0.9, 0.0, False, 0.0), (0.9, 0.1, False, 1e-2),
    (0.9, 0.0, True, 5e-4), (0.0, 0.0, False, 0.1)])
def test_sgd_matches_an_exact_model_of_torchs_cpu_ops(precision, fmt, momentum, dampening,
                                                     nesterov, wd):
    """Every element after four steps equals the exact model (tests/torch_models.py: alpha in
    the tensor's dtype, one float32 FMA per add_, float32 scalar in mul_), which matched
    torch.optim.SGD on CPU for float32, float16 and bfloat16 parameters."""
    rng = np.random.default_rng(7)
    w0 = [round_binary(v, fmt) for v in rng.standard_normal(64)]
    grads = [[round_binary(v, fmt) for v in rng.standard_normal(64) * rng.choice([1, 30], 64)]
             for _ in range(4)]
    with use_precision(precision):
        w = parameter(w0)
        _drive(SGD([w], lr=0.013, momentum=momentum, dampening=dampening, nesterov=nesterov,
                   weight_decay=wd), [w], [[np.array(g)] for g in grads])
    expected = sgd(w0, grads, fmt, 0.013, momentum, dampening, nesterov, wd)
    assert w.data.astype(np.float64).tolist() == expected


def test_fused_adam_does_not_go_nan_in_pure_fp16():
    # torch 2.13 on CPU: the default Adam gives [nan, -inf], fused=True [1.0, 0.9990234375]
    out = {}
    for fused in (False, True):
        with use_precision("16-true"):
            w = parameter([1.0, 1.0])
            w.grad = np.array([0.0, 1e-4], np.float32)
            opt = Adam([w], fused=fused)
            opt.step()
        out[fused] = w.data.tolist()
        assert opt.groups[0].state["exp_avg_sq"].tolist() == [0.0, 0.0]  # v underflows in fp16
    assert np.isnan(out[False][0]) and out[False][1] == -np.inf
    assert out[True] == [1.0, 0.9990234375]


@pytest.mark.parametrize("precision, fmt", [("32-true", "float32"), ("16-true", "float16"),
                                            ("bf16-true", "bfloat16")])
@pytest.mark.parametrize("wd, lr, betas, eps", [(0.0, 1e-3, (0.9, 0.999), 1e-8),
                                               (0.01, 1e-3, (0.9, 0.999), 1e-8),
                                               (0.01, 0.03, (0.8, 0.99), 1e-6)])
def test_fused_adam_matches_an_exact_model_of_torchs_kernel(precision, fmt, wd, lr, betas, eps):
    """Weights and both moments after five steps equal the exact model of torch's fused CPU
    kernel (tests/torch_models.py; it matched torch 2.13 element for element)."""
    rng = np.random.default_rng(3)
    w0 = [round_binary(v, fmt) for v in rng.standard_normal(64) * rng.choice([1, 10], 64)]
    grads = [[round_binary(v, fmt) for v in
              rng.standard_normal(64) * rng.choice([1e-5, 1e-2, 1, 30], 64)] for _ in range(5)]
    with use_precision(precision):
        w = parameter(w0)
        opt = Adam([w], lr=lr, betas=betas, eps=eps, weight_decay=wd, fused=True)
        _drive(opt, [w], [[np.array(g)] for g in grads])
    ew, em, ev = fused_adam(w0, grads, fmt, lr, betas, eps, wd)
    state = opt.groups[0].state
    assert w.data.astype(np.float64).tolist() == ew
    assert state["exp_avg"].astype(np.float64).tolist() == em
    assert state["exp_avg_sq"].astype(np.float64).tolist() == ev


def test_fused_adam_refuses_kahan_and_shows_in_repr():
    with pytest.raises(ValueError, match="kahan=True needs the unfused update"):
        Adam([parameter([1.0])], fused=True, kahan=True)
    assert "fused" in repr(Adam([parameter([1.0])], fused=True))


@pytest.mark.parametrize("make, match", [
    (lambda: SGD([parameter([1.0])], lr="0.1"), r"lr must be a number such as 0.001, got '0.1'"),
    (lambda: SGD([parameter([1.0])], lr=float("nan")), "lr must be finite"),
    (lambda: Adam([parameter([1.0])], lr=float("inf")), "lr must be finite"),
    (lambda: Adam([parameter([1.0])], betas=0.9), r"betas must be a pair"),
    (lambda: Adam([parameter([1.0])], fused="yes"), "fused must be True or False"),
    (lambda: SGD([parameter([1.0])], lr=0.1, nesterov="no"), "nesterov must be True or False"),
])
def test_non_numbers_and_non_finite_hyperparameters_are_refused(make, match):
    with pytest.raises((TypeError, ValueError), match=match):
        make()


@pytest.mark.parametrize("fmt", ["fp32", "bf16", "fp16"])
def test_axpy_fast_path_equals_the_fma_path(fmt):
    from floatlab.mixed.opmath import axpy

    rng = np.random.default_rng(5)
    f = floatlab.get_format(fmt)
    x = floatlab.round(rng.standard_normal(4096) * rng.choice([1, 1e-3, 1e3], 4096), f,
                       dtype=np.float32)
    y = (rng.standard_normal(4096) * rng.choice([1, 1e-6, 1e4], 4096)).astype(np.float32)
    fast = axpy(x, 1.0, y, f)                       # float32 + float32
    general = axpy(x.astype(np.float64), 1.0, y.astype(np.float64), f)  # the FMA path
    np.testing.assert_array_equal(fast, general)


def _fma_cases(rng):
    """(a, b, c) float32 triples whose a*b + c is a float32 midpoint, a hair off one, in the
    subnormal range, overflowing, a signed zero, an exact cancellation, inf / NaN, or random."""
    f32 = np.float32
    x = (rng.standard_normal(400) * rng.choice([1, 1e-20, 1e20], 400)).astype(f32)
    half_ulp = (np.spacing(np.abs(x)) / 2).astype(f32)
    nudge = np.float32(1 + 2**-23)
    a = [np.ones(400, f32), np.ones(400, f32), np.full(400, nudge), np.full(400, nudge)]
    b = [half_ulp, -half_ulp, half_ulp, -half_ulp]
    c = [x] * 4
    tiny = (rng.standard_normal(400) * 2.0**-140).astype(f32)          # float32 subnormals
    a += [tiny, np.full(400, f32(2.0**-30)), np.full(400, f32(3e38))]
    b += [rng.standard_normal(400).astype(f32), tiny * f32(2**20), np.full(400, f32(1.5))]
    c += [tiny, (tiny * f32(3)).astype(f32), np.full(400, f32(3e38))]
    a.append(np.array([0, -0.0, 0, 2, 3, np.inf, 1, np.nan], f32))
    b.append(np.array([-0.0, 0, -0.0, 3, -2, 1, 1, 1], f32))
    c.append(np.array([-0.0, -0.0, 0, -6, 6, 1, np.inf, 1], f32))
    r = (rng.standard_normal((3, 4000)) * rng.choice([1, 1e-3, 1e3], (3, 4000))).astype(f32)
    a.append(r[0])
    b.append(r[1])
    c.append(r[2])
    return np.concatenate(a), np.concatenate(b), np.concatenate(c)


def test_fma32_cast_equals_round_to_odd():
    """The cast fast path of fma32 equals the round-to-odd FMA on every element it does not
    flag; it flags the midpoints, subnormal sums and overflows (which fma32 sends through
    round-to-odd), never the random values; fma32 as a whole equals it switched off."""
    from floatlab.mixed import opmath

    a, b, c = _fma_cases(np.random.default_rng(11))
    product = a.astype(np.float64) * b.astype(np.float64)
    with np.errstate(all="ignore"):
        slow = opmath._nearest(opmath.round_to_odd_sum(c.astype(np.float64), product), opmath.FP32)
        fast, risky = opmath._fma32_cast(c.astype(np.float64), product)
        whole = opmath.fma32(a, b, c)
        scalar_a = opmath.fma32(np.float32(0.1), b, c)   # a broadcast operand (Adam's betas)
        opmath._FAST_FMA32 = False
        try:
            general = opmath.fma32(a, b, c)
            scalar_general = opmath.fma32(np.float32(0.1), b, c)
        finally:
            opmath._FAST_FMA32 = True
    assert fast[~risky].tobytes() == slow[~risky].tobytes()
    assert 1600 <= np.count_nonzero(risky) and not risky[-4000:].any()
    assert whole.dtype == np.float32 and whole.tobytes() == general.tobytes() == slow.tobytes()
    assert scalar_a.tobytes() == scalar_general.tobytes()


@pytest.mark.parametrize("make", [
    lambda params: Adam(params, lr=1e-3),
    lambda params: Adam(params, lr=1e-3, weight_decay=0.01),
    lambda params: SGD(params, lr=0.1, momentum=0.9),
])
def test_hand_assigned_float64_gradients_update_as_float32_ones(make):
    # p.grad = a float64 array (its values float32's) made the group's whole update float64:
    # Adam's weights came out different in their last bits (58 of 10000 here), for the
    # parameter that shares the group too; the step reads gradients in the weights' dtype
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal(10000).astype(np.float32)
    g0 = (rng.standard_normal(10000) * 1e-3).astype(np.float32)
    out = []
    for dtype in (np.float32, np.float64):
        w, b = parameter(w0.copy()), parameter(w0[:3].copy())
        opt = make([w, b])
        for _ in range(3):
            w.grad, b.grad = g0.astype(dtype), g0[:3].copy()
            opt.step()
        out.append((w.data.tobytes(), b.data.tobytes(), w.data.dtype))
    assert out[0] == out[1]


@pytest.mark.parametrize("spelling, mode", [
    ("sr", "stochastic"), ("Stochastic", "stochastic"), ("rne", "nearest_even"),
    ("nearest-even", "nearest_even")])
def test_update_rounding_takes_the_spellings_of_every_rounding_argument(spelling, mode):
    # floatlab.round, Scheme, Accumulator and Trainer(rounding=) take "sr" and "RNE": so do
    # the optimizers (they refused every alias), through the same table
    assert SGD([parameter([1.0])], lr=0.1, update_rounding=spelling).update_rounding == mode
    assert Adam([parameter([1.0])], update_rounding=spelling).update_rounding == mode


@pytest.mark.parametrize("bad, error, match", [
    ("bogus", ValueError, r"update_rounding: unknown rounding mode 'bogus'; use one of "
                          r"nearest_even, nearest_away"),
    (None, TypeError, r"update_rounding: rounding must be one string"),
    ("rtz", ValueError, r"update_rounding='rtz' is 'toward_zero': the optimizers round "
                        r"w \+ update to nearest even or stochastically"),
    ("sr", ValueError, "choose one remedy"),  # with kahan=True
])
def test_trainer_checks_update_rounding_up_front_as_the_optimizers(bad, error, match):
    from floatlab.mixed import Trainer

    kahan = bad == "sr"
    with pytest.raises(error, match=match):
        SGD([parameter([1.0])], lr=0.1, update_rounding=bad, kahan=kahan)
    with pytest.raises(error, match=match):  # was accepted, then failed at fit()
        Trainer("bf16-true", update_rounding=bad, kahan=kahan)


@pytest.mark.parametrize("betas", [[0.8, 0.95], np.array([0.8, 0.95]),
                                   (np.float64(0.8), np.float64(0.95))])
def test_betas_take_any_pair_torch_takes(betas):
    """torch.optim reads betas[0], betas[1] and unpacks the pair: a list or a NumPy array of
    two floats works there; floatlab refused both ("betas must be a pair ... got [0.8, 0.95]").
    They now give the tuple's result bit for bit."""
    def run(b):
        w = parameter([1.0, -2.0])
        opt = Adam([w], lr=0.01, betas=b)
        for g in ([0.5, 0.25], [-0.125, 1.0]):
            w.grad = np.array(g, np.float32)
            opt.step()
        return w.data, opt.betas

    w, b = run(betas)
    w0, b0 = run((0.8, 0.95))
    assert np.array_equal(w, w0) and b == b0 and all(type(x) is float for x in b)


@pytest.mark.parametrize("betas, match", [
    (np.array([[0.9, 0.999]]), r"Adam: betas must be a pair.*shape \(1, 2\).*betas=\(0.9, 0.999\)"),
    ([0.9, 0.99, 0.999], r"Adam: betas must be a pair.*got 3 values"),
    ("ab", r"Adam: betas must be a pair"),
    ({0.9, 0.999}, r"Adam: betas must be a pair"),
    (np.array([True, False]), r"betas\[0\] must be a number"),
    (np.array([1.0, 0.5]), "Adam: Invalid beta parameter at index 0: 1.0"),
])
def test_betas_that_are_not_a_pair_of_numbers_are_refused(betas, match):
    with pytest.raises((TypeError, ValueError), match=match):
        Adam([parameter([1.0])], betas=betas)


def test_zero_grad_takes_torchs_set_to_none():
    """torch's Optimizer.zero_grad(set_to_none=True) (the default since torch 2.0): code
    written for torch that passes it got "zero_grad() got an unexpected keyword argument".
    set_to_none=False zeroes existing gradients (new arrays: the caller's is not written to)."""
    a, b, c = parameter([1.0, 2.0]), parameter([3.0]), parameter([4.0])
    g = np.array([0.5, -0.25], np.float32)
    a.grad, b.grad = g, np.array([1.0], np.float32)
    opt = SGD([a, b, c], lr=0.1)
    opt.zero_grad(set_to_none=False)
    assert a.grad.tolist() == [0.0, 0.0] and a.grad.dtype == np.float32 and c.grad is None
    assert g.tolist() == [0.5, -0.25]                       # not mutated
    assert opt.step().nonzero_grads == 0 and a.data.tolist() == [1.0, 2.0]
    opt.zero_grad(set_to_none=True)
    assert a.grad is None and b.grad is None
    opt.zero_grad()
    with pytest.raises(TypeError, match="set_to_none must be True or False"):
        opt.zero_grad(set_to_none="False")


@pytest.mark.parametrize("cls", [SGD, Adam])
def test_torch_only_options_at_their_inert_values_are_accepted(cls):
    """Code written for torch.optim passes amsgrad=False, maximize=False, foreach=None ...: they
    were "Optimizer.__init__() got an unexpected keyword argument 'amsgrad'". At the value that
    changes nothing they are accepted (same result); any other value is refused by name."""
    def run(**kw):
        w = parameter([1.0, -2.0])
        opt = cls([w], lr=0.1, **kw)
        w.grad = np.array([0.5, 0.25], np.float32)
        opt.step()
        return w.data

    inert = dict(maximize=False, foreach=None, capturable=False, differentiable=False)
    if cls is Adam:
        inert.update(amsgrad=False, decoupled_weight_decay=False)
    assert np.array_equal(run(**inert), run()) and np.array_equal(run(foreach=False), run())
    name = cls.__name__
    with pytest.raises(ValueError, match=rf"{name}: maximize=True is a torch.optim option "
                                         rf"that floatlab's {name} does not model.*maximize"
                                         "=False"):
        run(maximize=True)
    with pytest.raises(TypeError, match=rf"{name}\(\) got an unexpected keyword argument 'lrr'"):
        run(lrr=0.1)
