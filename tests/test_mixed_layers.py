"""The transformer ops: gradients against float64 finite differences, results against exact
rounding references (the definition in float64, rounded by floatlab), the autocast lists per
device, and the errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradcheck import assert_gradients_match_finite_differences

import floatlab
import floatlab.mixed as fm
from floatlab import get_format
from floatlab.mixed import Tensor, use_precision
from floatlab.mixed import attention as A
from floatlab.mixed import layers as L
from floatlab.mixed.autocast import op_kind

F = get_format
RNG = np.random.default_rng(4321)
FP16_VALUES = floatlab.decode(np.arange(2**16, dtype=np.uint16), "fp16")
FP16_FINITE = FP16_VALUES[np.isfinite(FP16_VALUES)]


def _arr(*shape, low=-1.5, high=1.5):
    return RNG.uniform(low, high, size=shape)


def _ids(*shape, vocab=5):
    return RNG.integers(0, vocab, size=shape)


def _dropout_fixed_mask(x):
    return L.dropout(x, 0.3, rng=7)  # a fresh generator each call: the same mask each call


CAUSAL = np.triu(np.ones((4, 4), bool), 1)
TOKENS = _ids(2, 3)

# (name, function of float64 Tensors, input arrays)
CASES = [
    ("embedding", lambda w: L.embedding(TOKENS, w), [_arr(5, 3)]),
    ("layer_norm", lambda x, w, b: L.layer_norm(x, w, b), [_arr(4, 6), _arr(6), _arr(6)]),
    ("layer_norm 3-D, no affine", lambda x: L.layer_norm(x), [_arr(2, 3, 5)]),
    ("layer_norm stats=format", lambda x, w: L.layer_norm(x, w, stats="format"),
     [_arr(3, 6), _arr(6)]),
    ("layer_norm stats=one_pass", lambda x: L.layer_norm(x, stats="one_pass"), [_arr(3, 7)]),
    ("layer_norm stats=welford", lambda x: L.layer_norm(x, stats="welford"), [_arr(3, 7)]),
    ("gelu exact", lambda x: L.gelu(x), [_arr(4, 5, low=-4, high=4)]),
    ("gelu tanh", lambda x: L.gelu(x, "tanh"), [_arr(4, 5, low=-4, high=4)]),
    ("softmax", lambda x: fm.softmax(x), [_arr(3, 5)]),
    ("softmax without max subtraction", lambda x: fm.softmax(x, axis=0, subtract_max=False),
     [_arr(3, 5)]),
    ("bmm", lambda a, b: A.bmm(a, b), [_arr(2, 3, 4), _arr(2, 4, 5)]),
    ("bmm broadcast batch", lambda a, b: A.bmm(a, b), [_arr(2, 3, 4), _arr(4, 5)]),
    ("masked_fill", lambda x: fm.softmax(A.masked_fill(x, CAUSAL, -np.inf)), [_arr(4, 4)]),
    ("attention causal", lambda q, k, v: A.scaled_dot_product_attention(q, k, v),
     [_arr(2, 2, 4, 3), _arr(2, 2, 4, 3), _arr(2, 2, 4, 3)]),
    ("attention queries scaled first, no max subtraction",
     lambda q, k, v: A.scaled_dot_product_attention(q, k, v, scale_queries=True,
                                                    subtract_max=False),
     [_arr(1, 2, 4, 3), _arr(1, 2, 4, 3), _arr(1, 2, 4, 3)]),
    ("attention not causal, scale 0.7",
     lambda q, k, v: A.scaled_dot_product_attention(q, k, v, causal=False, scale=0.7),
     [_arr(3, 4, 2), _arr(3, 5, 2), _arr(3, 5, 2)]),
    ("dropout with a seeded mask", _dropout_fixed_mask, [_arr(4, 5)]),
    ("residual add (fan-out)", lambda x, w: fm.add(x, fm.linear(L.layer_norm(x), w)),
     [_arr(3, 4), _arr(4, 4)]),
    ("reshape, permute, narrow",
     lambda x: L.permute(L.reshape(L.narrow(x, 1, 1, 4), (3, 2, 2)), (2, 0, 1)),
     [_arr(3, 6)]),
    ("sequence_loss masked", lambda z: L.sequence_loss(
        z, [[0, 2, 1], [3, 3, 0]], [[True, False, True], [True, True, False]]), [_arr(2, 3, 4)]),
    ("weight tying: one parameter, two uses",
     lambda w: fm.linear(L.embedding(TOKENS.reshape(-1), w), w), [_arr(5, 3)]),
]


@pytest.mark.parametrize("name, fn, arrays", CASES, ids=[c[0] for c in CASES])
def test_gradients_match_float64_finite_differences(name, fn, arrays):
    assert_gradients_match_finite_differences(name, fn, arrays, RNG)


# --------------------------------------------------------------------------- rounding oracles

def assert_correctly_rounded(out, exact, fmt, slack=2.0**-20, tiny=0.0):
    """``out`` is ``exact`` (float64) rounded to ``fmt`` by floatlab.round, except where
    ``exact`` lies within ``slack`` (relative, per element or one number) of a rounding boundary:
    there an op that computes in float32 before its one rounding may legitimately land on the
    other neighbour. Values below ``tiny`` in magnitude (float32's subnormals, where its
    relative error grows) are not compared."""
    fmt = get_format(fmt)
    ref = floatlab.round(exact, fmt)
    differ = ~((out == ref) | (np.isnan(out) & np.isnan(ref))) & (np.abs(exact) >= tiny)
    if differ.any():
        e, o, r = exact[differ], out[differ], ref[differ]
        s = slack[differ] if np.ndim(slack) else slack
        midpoint = (o + r) / 2
        assert np.all(np.abs(e - midpoint) <= s * np.abs(e)), (e[:5], o[:5], r[:5])
        assert differ.mean() < 1e-3


@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_is_the_rounded_function_on_every_fp16_value(fmt, approximate):
    x = floatlab.round(FP16_FINITE, fmt)
    x = x[np.isfinite(x)]
    u = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
    if approximate == "none":  # evaluated in float64: the rounding is exact
        exact = x * 0.5 * (1 + np.array([math.erf(v / math.sqrt(2)) for v in x]))
        slack, tiny = 2.0**-40, 0.0
    else:  # float32 opmath: exp(-2u) carries float32's error of its argument, ~|2u| 2**-24
        with np.errstate(over="ignore"):
            exact = x / (1 + np.exp(-2 * u))
        slack, tiny = 2.0**-21 * (4 + 2 * np.abs(u)), 2.0**-100
        small = np.abs(x) < 3  # the sigmoid form is the tanh form
        np.testing.assert_allclose(exact[small], (0.5 * x * (1 + np.tanh(u)))[small],
                                   rtol=1e-12, atol=1e-300)
    with use_precision(f"{fmt}-true"):
        out = L.gelu(Tensor(x), approximate).data
    assert_correctly_rounded(out.astype(np.float64), exact, fmt, slack, tiny)


def _torch_tanh_gelu_grad(x: np.ndarray) -> np.ndarray:
    """torch's gelu_backward for approximate="tanh", evaluated in x's dtype as its kernel
    writes it (the derivative of 0.5 x (1 + tanh(u)), u = kBeta (x + kKappa x^3))."""
    t = x.dtype.type
    beta, kappa = t(math.sqrt(2 / math.pi)), t(0.044715)
    with np.errstate(all="ignore"):
        x_sq = x * x
        tanh_inner = np.tanh(beta * (x + kappa * (x_sq * x)))
        left = t(0.5) * x
        right = t(1) + tanh_inner
        left_derivative = t(0.5) * right
        right_derivative = t(1) - tanh_inner * tanh_inner
        inner_derivative = beta * (t(1) + t(3) * kappa * x_sq)
        return left_derivative + left * right_derivative * inner_derivative


def _tanh_gelu_grad_chain(x: np.ndarray) -> np.ndarray:
    """The lab's sigmoid-form derivative as its product chain computes it (before the repair
    of the entries the chain overflows)."""
    t = x.dtype.type
    c, a = t(2 * math.sqrt(2 / math.pi)), t(0.044715)
    with np.errstate(all="ignore"):
        e = np.exp((((x * x) * a + t(1)) * x) * -c)
        sig = t(1) / (e + t(1))
        return ((((((x * x) * (3 * a) + t(1)) * c) * x) * e) * sig + t(1)) * sig


@pytest.mark.parametrize("precision", ["32-true", "16-mixed", "64-true"])
def test_tanh_gelu_gradient_is_nan_exactly_where_torchs_is(precision):
    """The sigmoid-form chain multiplied by exp(-2u) before 1 / (1 + exp(-2u)): below
    x ~ -10 (float32) exp(-2u) overflowed and the gradient was -inf or NaN, where torch's
    tanh-form gradient is +-0. Now: NaN exactly where torch's is (x = +-inf, NaN, x**2
    overflowing), within 64 ulps of 1 of torch's elsewhere (torch's form cancels, the lab's does
    not), and every entry the chain got finite keeps its bits."""
    dt = np.float64 if precision == "64-true" else np.float32
    edge = np.array([-10.0, -10.05, -10.1, -12.0, -20.0, -30.0, -100.0, -1e10, -1e19, -1e20,
                     -1e30, 1e10, 1e19, 1e20, 1e30, -0.0, 0.0, np.inf, -np.inf, np.nan], dt)
    near = np.nextafter(np.full(40, -10.0, dt), -np.inf) - np.arange(40, dtype=dt) * dt(0.005)
    sweep = np.linspace(-60, 60, 4001).astype(dt)
    x_in = np.concatenate([edge, near, sweep, RNG.normal(0, 8, 2000).astype(dt)])
    g = np.where(RNG.random(x_in.size) < 0.5, -1.0, 1.0).astype(dt)
    with use_precision(precision):
        x = Tensor(x_in, requires_grad=True)
        L.gelu(x, "tanh").backward(grad=g)
    got = x.grad.astype(dt) * g  # g = +-1: the derivative itself, signs included
    torch_grad = _torch_tanh_gelu_grad(x_in)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(torch_grad))
    assert np.isfinite(got[~np.isnan(got)]).all()
    ok = np.isfinite(torch_grad)
    atol = 64 * np.finfo(dt).eps  # torch's 1 + tanh(u) and 1 - tanh(u)**2 cancel
    np.testing.assert_allclose(got[ok], torch_grad[ok], rtol=0, atol=atol)
    chain = _tanh_gelu_grad_chain(x_in)
    kept = np.isfinite(chain)
    assert (~kept).sum() > 40  # the far-left entries that the repair recomputes
    if precision != "16-mixed":  # (16-mixed rounds the gradient to fp16 on its way back)
        np.testing.assert_array_equal(got[kept].view(np.uint8), chain[kept].view(np.uint8))
    far = (x_in < -10.2) & ~kept & ~np.isnan(got)
    assert np.all(np.abs(got[far]) < 3e-36)


def test_softmax_without_max_subtraction_overflows_exactly_where_exp_exceeds_fp16():
    # e^x rounds to inf in fp16 once it reaches max + half an ulp (65504 + 16): x > ~11.09.
    fp16 = F("fp16")
    threshold = math.log(fp16.max + 2.0 ** (fp16.emax - fp16.man_bits - 1))
    xs = FP16_FINITE[(FP16_FINITE > 10) & (FP16_FINITE < 12)]
    with use_precision("16-true"):
        rows = np.stack([xs, np.zeros_like(xs)], axis=1)
        naive = fm.softmax(Tensor(rows), subtract_max=False).data
        stable = fm.softmax(Tensor(rows)).data
    overflowed = np.isnan(naive[:, 0])
    np.testing.assert_array_equal(overflowed, np.exp(xs) >= math.exp(threshold))
    assert 11.0 < xs[overflowed].min() < 11.1
    assert np.isfinite(stable).all()
    assert_correctly_rounded(stable[:, 1].astype(np.float64),
                             1 / (1 + np.exp(xs)), "fp16")


def test_softmax_rounds_once_to_its_list_format():
    x = floatlab.round(_arr(6, 9, low=-4, high=4), "fp16")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    exact = e / e.sum(axis=1, keepdims=True)
    with use_precision("16-true"):
        out = fm.softmax(Tensor(x)).data
    assert_correctly_rounded(out.astype(np.float64), exact, "fp16")
    with use_precision("16-mixed"):  # CUDA: softmax is on the float32 list
        assert fm.softmax(Tensor(x, "fp16")).fmt.name == "float32"


def test_layer_norm_float32_stats_round_once_and_format_stats_round_every_step():
    x = floatlab.round(_arr(8, 16, low=-3, high=3), "fp16")
    mean = x.mean(axis=1, keepdims=True)
    exact = (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    with use_precision("16-true"):
        out = L.layer_norm(Tensor(x)).data
        rough = L.layer_norm(Tensor(x), stats="format").data
    assert out.dtype == np.float32 and rough.dtype == np.float32
    assert_correctly_rounded(out.astype(np.float64), exact, "fp16")
    assert not np.array_equal(out, rough)          # intermediate roundings show...
    np.testing.assert_allclose(rough, exact, atol=0.02)   # ...but stay small here


def test_layer_norm_of_outlier_activations_overflows_in_fp16_statistics_only():
    # Activations around a few hundred: squares above 65504 overflow fp16.
    x = np.full((4, 64), 1.0)
    x[:, 3] = 400.0
    x += RNG.normal(0, 0.5, x.shape)
    with use_precision("16-true"):
        xin = Tensor(x)
        in_fp16 = L.layer_norm(xin, stats="format").data
        welford16 = L.layer_norm(xin, stats="welford").data
        torch_like = L.layer_norm(xin).data        # float32 statistics
    with use_precision("16-mixed"):                 # autocast: float32 list
        autocast = L.layer_norm(Tensor(x, "fp16")).data
    assert not np.isfinite(in_fp16).all() or np.abs(in_fp16).max() < 1e-3
    assert not np.isfinite(welford16).all() or np.abs(welford16).max() < 1e-3
    for good in (torch_like, autocast):
        assert np.isfinite(good).all() and 7 < np.abs(good).max() < 8.1   # sqrt(63) ~ 7.94


def test_welford_beats_one_pass_variance_in_bf16():
    # A large mean and a small spread: E[x^2] - E[x]^2 cancels catastrophically in bf16.
    x = floatlab.round(10.0 + RNG.normal(0, 1.0, (16, 64)), "bf16")
    mean = x.mean(axis=1, keepdims=True)
    exact = (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    with use_precision("bf16-true"):
        one_pass = L.layer_norm(Tensor(x), stats="one_pass").data.astype(np.float64)
        welford = L.layer_norm(Tensor(x), stats="welford").data.astype(np.float64)
    err_one = np.abs(one_pass - exact).max()   # NaN where the variance came out negative
    err_welford = np.abs(welford - exact).max()
    assert err_welford < 0.3 and not err_one < 1


def test_embedding_is_an_exact_lookup_and_dropout_an_exact_rescale():
    w = floatlab.round(_arr(7, 4), "bf16")
    ids = _ids(3, 5, vocab=7)
    with use_precision("bf16-true"):
        out = L.embedding(ids, Tensor(w))
        np.testing.assert_array_equal(out.data, w[ids])
        x = Tensor(_arr(50, 40))
        a, b = L.dropout(x, 0.25, rng=3), L.dropout(x, 0.25, rng=3)
        np.testing.assert_array_equal(a.data, b.data)             # seeded: reproducible
        keep = np.random.default_rng(3).random(x.shape) >= 0.25
        assert_correctly_rounded(a.data.astype(np.float64),
                                 np.where(keep, x.data / 0.75, 0.0), "bf16")
        assert L.dropout(x, 0.25, rng=3, training=False) is x


def test_bmm_rounds_like_the_2d_matmul_for_every_batch_entry():
    a, b = _arr(3, 5, 8), _arr(3, 8, 2)
    for precision, options in [("16-mixed", {}), ("bf16-true", {"accumulate": "bf16"})]:
        with use_precision(precision, **options):
            batched = A.bmm(Tensor(a), Tensor(b)).data
            for i in range(3):
                one = fm.matmul(Tensor(a[i]), Tensor(b[i])).data
                np.testing.assert_array_equal(batched[i], one)


def test_causal_attention_ignores_the_future():
    q, k, v = _arr(1, 1, 5, 4), _arr(1, 1, 5, 4), _arr(1, 1, 5, 4)
    out = A.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v)).data
    v2 = v.copy()
    v2[..., 3:, :] += 10  # change the last positions' values
    out2 = A.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v2)).data
    np.testing.assert_array_equal(out[..., :3, :], out2[..., :3, :])
    assert not np.allclose(out[..., 3:, :], out2[..., 3:, :])


def test_attention_scores_overflow_fp16_unless_the_queries_are_scaled_first():
    base = RNG.normal(0, 1, (1, 1, 4, 64))
    q, k, v = base * 40, base * 40, RNG.normal(0, 1, (1, 1, 4, 64))  # q.k ~ 64 * 1600 > 65504
    with use_precision("16-mixed"):
        late = A.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v)).data
        early = A.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v),
                                               scale_queries=True).data
    with use_precision("bf16-mixed"):
        bf16 = A.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v)).data
    assert np.isnan(late).any()
    assert np.isfinite(early).all() and np.isfinite(bf16).all()


# --------------------------------------------------------------------------- autocast lists

def test_transformer_ops_follow_torchs_autocast_lists_per_device():
    # torch 2.13's aten/src/ATen/autocast_mode.cpp, as h-transformer read it; the table itself
    # lives in floatlab.mixed.autocast (tested in test_mixed_policy.py)
    for op in ("matmul", "linear", "bmm", "baddbmm", "scaled_dot_product_attention"):
        assert op_kind(op, "cuda") == op_kind(op, "cpu") == "low"
    for op in ("softmax", "log_softmax", "exp", "log", "layer_norm", "sum"):
        assert op_kind(op, "cuda") == "safe" and op_kind(op, "cpu") == "promote"
    for op in ("gelu", "embedding", "dropout", "masked_fill", "mean", "add", "mul", "tanh",
               "relu"):
        assert op_kind(op, "cuda") == op_kind(op, "cpu") == "promote"
    for op in ("cross_entropy", "mse_loss"):
        assert op_kind(op, "cuda") == op_kind(op, "cpu") == "safe"


def test_cpu_lists_keep_softmax_and_layer_norm_in_bf16():
    x = _arr(4, 8)
    results = {}
    for device in ("cuda", "cpu"):
        with use_precision("bf16-mixed", device=device) as policy:
            xb = Tensor(x, "bf16")
            results[device] = fm.softmax(xb), L.layer_norm(xb), fm.exp(xb), fm.log_softmax(xb)
        assert policy.device == device
    assert [t.fmt.name for t in results["cuda"]] == ["float32"] * 4
    assert [t.fmt.name for t in results["cpu"]] == ["bfloat16"] * 4
    for on_cuda, on_cpu in zip(results["cuda"], results["cpu"], strict=True):
        # computed in float32 either way and rounded once: the CPU result is the CUDA one in bf16
        np.testing.assert_array_equal(on_cpu.data, floatlab.round(on_cuda.data, "bf16"))
    with pytest.raises(ValueError, match="device='tpu'"):
        with use_precision("bf16-mixed", device="tpu"):
            pass


# --------------------------------------------------------------------------- errors

@pytest.mark.parametrize("call, error, match", [
    (lambda: L.embedding([0, 5], Tensor(np.ones((5, 2)))), ValueError, r"\[0, 5\)"),
    (lambda: L.embedding([-1], Tensor(np.ones((5, 2)))), ValueError, "outside"),
    (lambda: L.embedding([0.5], Tensor(np.ones((5, 2)))), TypeError, "must be integers"),
    (lambda: L.embedding([0], Tensor(np.ones(5))), ValueError, "2-D Tensor"),
    (lambda: L.layer_norm(Tensor(np.ones((2, 3))), Tensor(np.ones(4))), ValueError,
     r"weight has shape \(4,\)"),
    (lambda: L.layer_norm(Tensor(np.ones((2, 3))), stats="kahan"), ValueError, "welford"),
    (lambda: L.layer_norm(Tensor(np.ones((2, 3))), eps=-1.0), ValueError, "eps"),
    (lambda: L.gelu(Tensor([1.0]), "erf"), ValueError, "'none' or 'tanh'"),
    (lambda: A.bmm(Tensor(np.ones((2, 3, 4))), Tensor(np.ones((2, 5, 1)))), ValueError,
     "do not align"),
    (lambda: A.bmm(Tensor(np.ones((2, 3, 4))), Tensor(np.ones((3, 4, 1)))), ValueError,
     "batch shapes"),
    (lambda: L.dropout(Tensor([1.0]), 1.5, rng=0), ValueError, "between 0 and 1, got 1.5"),
    (lambda: L.dropout(Tensor([1.0]), 0.5, rng=None), ValueError, "rng="),
    (lambda: L.dropout(Tensor([1.0]), 0.5, rng=0, training="no"), TypeError, "True or False"),
    (lambda: fm.softmax(Tensor([1.0]), subtract_max="no"), TypeError, "subtract_max must be"),
    (lambda: A.scaled_dot_product_attention(*[Tensor(np.ones((2, 4)))] * 3, causal="yes"),
     TypeError, "causal must be True or False"),
    (lambda: L.reshape(Tensor(np.ones(6)), (4, 2)), ValueError, "cannot reshape"),
    (lambda: L.permute(Tensor(np.ones((2, 3))), (0, 0)), ValueError, "names axis 0 twice"),
    (lambda: L.narrow(Tensor(np.ones((2, 3))), 1, 2, 2), ValueError, "outside axis 1"),
    (lambda: A.scaled_dot_product_attention(Tensor(np.ones((2, 3))), Tensor(np.ones((2, 4))),
                                            Tensor(np.ones((2, 4)))), ValueError, "head_dim"),
    (lambda: L.sequence_loss(Tensor(np.ones((1, 2, 3))), [[0, 3]]), ValueError, r"\[0, 3\)"),
    (lambda: L.sequence_loss(Tensor(np.ones((1, 2, 3))), [[0, 1]], [[False, False]]),
     ValueError, "selects no position"),
])
def test_bad_input_raises_clear_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_inputs_are_not_mutated():
    ids = np.array([[1, 2]])
    x = _arr(2, 4)
    before = x.copy(), ids.copy()
    w = Tensor(_arr(3, 4), requires_grad=True)
    L.layer_norm(Tensor(x), stats="welford")
    L.embedding(ids, w).sum().backward()
    np.testing.assert_array_equal(x, before[0])
    np.testing.assert_array_equal(ids, before[1])
