"""Training recipes: each GEMM against a reference assembled from floatlab.quantize and the
exact accumulators, names and errors, Adam8bit's storage against an exact reference of the
dynamic map, compare(workers=N) equal to the serial run."""

from __future__ import annotations

import re

import numpy as np
import pytest

from floatlab import Accumulator, get_format, get_scheme
from floatlab.accumulate import matmul as acc_matmul
from floatlab.mixed import Adam, Tensor, Trainer, compare, get_policy, parameter, teacher_gaussians
from floatlab.mixed.nn import linear
from floatlab.mixed.optim8bit import Adam8bit, StateAdam
from floatlab.mixed.recipe import RowScaling, TensorScaling, get_recipe, recipe_names
from floatlab.mixed.recipe_gemm import recipe_run
from floatlab.mixed.tensor import use_precision
from floatlab.quant.codebook import dynamic_map
from floatlab.quant.quantize import fake_quantize
from floatlab.rounding import round as fl_round

BF16 = get_format("bf16")


def _layer(seed: int, batch: int = 32, k: int = 64, n: int = 48):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, k)).astype(np.float32)
    w = (rng.standard_normal((n, k)) / 8).astype(np.float32)
    g = (rng.standard_normal((batch, n)) * 1e-3)
    return x, w, fl_round(g, BF16).astype(np.float32)


def _run(precision, x, w, g, **opts):
    with use_precision(get_policy(precision, recipe_options=opts or None)), recipe_run():
        xt = Tensor(x, requires_grad=True)
        wt = parameter(w)
        y = linear(xt, wt)
        y.backward(g)
    return y.data, xt.grad, wt.grad


def _fq(values, scheme):
    return fake_quantize(np.ascontiguousarray(values), scheme).astype(np.float64)


def _ref(a, b_rows, acc=None):
    """The slow reference: exact products summed by the accumulator (float32 by default)."""
    if acc is None:
        return a.astype(np.float32) @ b_rows.T.astype(np.float32)
    return acc_matmul(a.astype(np.float64), b_rows.T.astype(np.float64), acc)


@pytest.mark.parametrize("name,opts", [("mxfp8", {}), ("mxfp8", {"scale_rounding": "rceil"}),
                                       ("mxfp4", {}),
                                       ("nvfp4", {"stochastic_rounding": False}),
                                       ("nvfp4", {"stochastic_rounding": False,
                                                  "hadamard": False})])
def test_block_recipes_match_reference(name, opts):
    x, w, g = _layer(1)
    recipe = get_recipe(name, **opts)
    y, dx, dw = _run(name, x, w, g, **opts)
    f, d, wg = recipe.forward, recipe.dgrad, recipe.wgrad
    y_ref = fl_round(_ref(_fq(x, f.a), _fq(w, f.b)), BF16)
    np.testing.assert_array_equal(y, y_ref)
    dx_ref = fl_round(_ref(_fq(g, d.a), _fq(w.T, d.b)), BF16)
    np.testing.assert_array_equal(dx, dx_ref.astype(np.float32))
    dw_ref = _ref(_fq_wgrad(g.T, wg.a), _fq_wgrad(x.T, wg.b))
    np.testing.assert_array_equal(dw, dw_ref.astype(np.float32))


def _fq_wgrad(values, scheme):
    """A wgrad operand as NVFP4's hardware GEMM reads it: with the RHT, blocks of 16 along the
    batch axis (last here) times the one random Hadamard matrix R, then quantised, and *not*
    turned back (both operands carry R, and (gᵀR)(xᵀR)ᵀ = gᵀx); without, plainly quantised."""
    from floatlab.quant.quantize import hadamard_matrix, quantize

    if not scheme.hadamard:
        return _fq(values, scheme)
    v = np.ascontiguousarray(values)
    rotated = (v.reshape(-1, 16) @ hadamard_matrix(16, v.dtype)).reshape(v.shape)
    return quantize(rotated, scheme.replace(hadamard=None)).dequantize().astype(np.float64)


def _deepseek_ref(a, a_scheme, b_rows, b_scheme):
    """DeepSeek-V3's kernel written out: per 128-tile along K, the e8m13 block-FMA sum of the
    E4M3 codes' products (floatlab.matmul), then out = fma32(float32(s_a * s_b), sum, out)."""
    from floatlab import fma
    from floatlab.quant.quantize import quantize_elements

    tile = Accumulator("e8m13", "toward_zero", block_fma=32)
    ea, sa, ba, _ = quantize_elements(np.ascontiguousarray(a), a_scheme)
    eb, sb, bb, _ = quantize_elements(np.ascontiguousarray(b_rows), b_scheme)
    sa = np.repeat(sa, ba[0], axis=0)[: len(ea)]
    sb = np.repeat(sb, bb[0], axis=0)[: len(eb)]
    out = np.zeros((len(ea), len(eb)))
    for t, s in enumerate(range(0, ea.shape[1], 128)):
        part = acc_matmul(ea[:, s:s + 128].astype(np.float64),
                          eb[:, s:s + 128].T.astype(np.float64), tile)
        out = fma(sa[:, t, None] * sb[None, :, t], part, out, fmt="float32")
    return out


@pytest.mark.parametrize("k", [256, 200, 16])
def test_deepseek_accumulator_matches_reference(k):
    x, w, g = _layer(2, batch=8, k=k, n=16)
    recipe = get_recipe("deepseek-fp8")
    y, dx, dw = _run("deepseek-fp8", x, w, g)
    acts, blocks = get_scheme("fp8_1x128"), get_scheme("fp8_128x128")
    np.testing.assert_array_equal(y, fl_round(_deepseek_ref(x, acts, w, blocks), BF16))
    np.testing.assert_array_equal(dx, fl_round(_deepseek_ref(g, acts, w.T, blocks), BF16))
    np.testing.assert_array_equal(dw, _deepseek_ref(g.T, acts, x.T, acts).astype(np.float32))
    acc = Accumulator("e8m13", "toward_zero", chunk=128, promote="float32", block_fma=32)
    assert recipe.forward.accumulate == acc and recipe.forward.codes


def test_fp8_current_is_te_per_tensor_scaling():
    """Reference from Transformer Engine's definition, in its float32 order: scale =
    float32(448 / amax) (E4M3) or float32(57344 / amax) (E5M2), values fp8(float32(x * scale))
    dequantised as float32(fp8 * float32(1 / scale)), the GEMM in float32; straight-through
    gradients. (The float64 order, round(x * scale) / scale, is what the recipes did before
    they followed TE; the quantised values differ where the float32 rounding matters.)"""
    x, w, g = _layer(3)
    y, dx, dw = _run("fp8-current", x, w, g)

    def te(v, fmt):
        f32 = np.float32
        s = f32(f32(get_format(fmt).max) / np.max(np.abs(v)).astype(f32))   # float32 division
        q = fl_round(v.astype(f32) * s, get_format(fmt), saturate=True)    # float32 product
        return (q.astype(f32) * (f32(1) / s)).astype(np.float64)         # float32 scale_inv

    xq, wq, gq = te(x, "e4m3fn"), te(w, "e4m3fn"), te(g, "e5m2")
    np.testing.assert_array_equal(y, fl_round(_ref(xq, wq), BF16))
    np.testing.assert_array_equal(dx, fl_round(_ref(gq, wq.T), BF16))  # W's FP8 copy reused
    _close_to_exact(dw, gq.T, xq.T)                                     # x's FP8 copy reused


@pytest.mark.parametrize("name", ["fp8-rowwise", "fp8-rowwise-gw-hp"])
def test_fp8_rowwise_is_torchao_axiswise_scaling(name):
    """Reference from torchao's definition, in its float32 order: per row along the inner
    dimension, scale = float32(448 / max(amax, 1e-12)) (rounded down to a power of two for
    "fp8-rowwise"), values fp8(clamp(float32(x) * scale)), dequantised as
    float32(fp8 * float32(1 / scale)); the GEMM in float32. gw-hp: the dgrad GEMM's weight is
    tensorwise (TE-style current scaling), the wgrad GEMM bf16."""
    x, w, g = _layer(4)
    x[3] = 0.0                                   # an all-zero row: amax floored at 1e-12
    y, dx, dw = _run(name, x, w, g)
    pow2 = name == "fp8-rowwise"
    f32, e4m3 = np.float32, get_format("e4m3fn")

    def rows(v):
        v = np.ascontiguousarray(v).astype(f32)
        amax = np.max(np.abs(v), axis=-1, keepdims=True).astype(np.float64)
        s = (448.0 / np.maximum(amax, 1e-12)).astype(f32)
        if pow2:
            s = (2.0 ** np.floor(np.log2(s.astype(np.float64)))).astype(f32)
        q = fl_round(np.clip(v * s, -448, 448), e4m3)
        return (q.astype(f32) * (f32(1) / s)).astype(np.float64)

    def tensorwise(v):
        s = f32(f32(448) / np.max(np.abs(v)).astype(f32))
        q = fl_round(v.astype(f32) * s, e4m3, saturate=True)
        return (q.astype(f32) * (f32(1) / s)).astype(np.float64)

    np.testing.assert_array_equal(y, fl_round(_ref(rows(x), rows(w)), BF16))
    wt = tensorwise(w.T) if name.endswith("gw-hp") else rows(w.T)
    np.testing.assert_array_equal(dx, fl_round(_ref(rows(g), wt), BF16).astype(np.float32))
    if name.endswith("gw-hp"):
        dw_ref = _ref(fl_round(g.T, BF16), fl_round(x.T, BF16))
    else:
        dw_ref = _ref(rows(g.T), rows(x.T))
    np.testing.assert_array_equal(dw, dw_ref.astype(np.float32))


def _close_to_exact(actual, a, b_rows):
    """float32 BLAS sums (their order depends on the memory layout): within the float32
    summation bound K * 2**-24 * sum |a_k b_k| of the exact float64 product."""
    exact = a.astype(np.float64) @ b_rows.T.astype(np.float64)
    bound = a.shape[1] * 2.0**-24 * (np.abs(a) @ np.abs(b_rows).T)
    assert np.all(np.abs(actual - exact) <= bound)


def test_delayed_scaling_spike_clips_then_lags_current_does_not():
    """A 64x jump of amax: delayed scaling (history 4) clips at the spike and flags the lag;
    the spike then dominates the history for 4 steps (small values flush); current scaling
    never clips."""
    base = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    w = parameter(np.eye(8, dtype=np.float32))
    records = {}
    for name in ("fp8-delayed", "fp8-current"):
        opts = {"history_len": 4} if name == "fp8-delayed" else None
        with use_precision(get_policy(name, recipe_options=opts)), recipe_run() as run:
            clipped = []
            for step in range(10):
                x = base * np.float32(64 if step == 3 else 1)
                linear(Tensor(x), w)
                clipped.append(run.end_step()["clipped"])
            records[name] = (clipped, run.series("linear0.forward.a", "lag"),
                             run.series("linear0.forward.a", "scale"))
    clipped, lag, scale = records["fp8-delayed"]
    assert clipped[3] > 0.3 and lag[3] and not lag[:3].any()
    assert np.all(scale[4:8] < scale[2] / 16) and scale[8] > scale[2] / 4  # recovers after 4
    assert max(records["fp8-current"][0]) == 0


def test_names_and_errors():
    assert "nvfp4" in recipe_names() and "msamp-O2" in recipe_names()
    with pytest.raises(ValueError, match="Did you mean 'mxfp8'"):
        get_policy("mxfp9")
    with pytest.raises(ValueError, match="scale_rounding does not apply to recipe 'fp8-delayed'"):
        get_policy("fp8-delayed", recipe_options={"scale_rounding": "rceil"})
    with pytest.raises(ValueError, match="takes no loss scaler"):
        Trainer("mxfp8", scaler="dynamic")
    with pytest.raises(ValueError, match="need a recipe name"):
        get_policy("bf16-mixed", recipe_options={"scale_rounding": "rceil"})
    with pytest.raises(ValueError, match="unknown scale_rounding"):
        get_recipe("mxfp8", scale_rounding="up")
    assert get_policy("transformer-engine-float16").scaler == "dynamic"
    assert get_policy("Transformer-Engine").recipe.name == "transformer-engine"


@pytest.mark.parametrize("spelling, name", [
    ("fp8_delayed", "fp8-delayed"), ("FP8_Rowwise_GW_HP", "fp8-rowwise-gw-hp"),
    ("msamp_o2", "msamp-O2"), (" deepseek_fp8 ", "deepseek-fp8")])
def test_recipe_names_take_underscores_as_format_and_scheme_names_do(spelling, name):
    # get_format("float8-e4m3fn") and get_scheme("mxfp8-e4m3") read '-' and '_' alike; recipe
    # names refused "fp8_delayed" (get_recipe, get_policy, Trainer, compare, the CLI)
    assert get_recipe(spelling).name == name
    assert get_policy(spelling).name == name
    assert get_policy("fp8_delayed", recipe_options={"margin": 1}).recipe.name == "fp8-delayed"
    with pytest.raises(ValueError, match=r"unknown recipe 'fp8__delay'\. Did you mean "
                                         r"'fp8-delayed'"):
        get_recipe("fp8__delay")


def _dynamic_reference(values: np.ndarray, signed: bool, block: int = 256) -> np.ndarray:
    """bitsandbytes' blockwise quantisation from its definition: per block absmax (float32),
    the nearest entry of the dynamic map to value / absmax, times absmax."""
    table = dynamic_map(signed).astype(np.float64)
    out = np.empty_like(values, dtype=np.float64)
    for start in range(0, values.size, block):
        part = values[start : start + block].astype(np.float32)
        absmax = np.float32(np.max(np.abs(part)))
        normed = (part / absmax).astype(np.float64)
        idx = np.argmin(np.abs(normed[:, None] - table[None, :]), axis=1)
        out[start : start + block] = (table[idx].astype(np.float32) * absmax)
    return out


def test_adam8bit_states_match_dynamic_map_reference_and_bytes():
    rng = np.random.default_rng(5)
    w = parameter(np.zeros(5000, np.float32))
    opt = Adam8bit([w], betas=(0.9, 0.995))
    g = (rng.standard_normal(5000) * 1e-3).astype(np.float32)
    w.grad = g
    opt.step()
    state = opt.groups[0].state
    m_exact = (np.float32(0.1) * g).astype(np.float32)  # fused lerp from zero: (1 - b1) * g
    np.testing.assert_allclose(state["exp_avg"], _dynamic_reference(m_exact, True),
                               rtol=0, atol=0)
    v_exact = (np.float32(1 - 0.995) * g * g).astype(np.float32)
    np.testing.assert_array_equal(state["exp_avg_sq"], _dynamic_reference(v_exact, False))
    per_moment = 5000 + 4 * 20  # 8-bit codes + a float32 absmax per block of 256
    assert opt.state_bytes() == {"dynamic8": per_moment, "udynamic8": per_moment}
    small = Adam8bit([parameter(np.zeros(100, np.float32))])  # below min_8bit_size: float32
    small.params[0].grad = g[:100]
    small.step()
    assert small.state_bytes() == {"float32": 800}


def test_state_adam_with_float32_storage_is_fused_adam():
    rng = np.random.default_rng(6)
    a, b = parameter(np.ones(300, np.float32)), parameter(np.ones(300, np.float32))
    oa, ob = StateAdam([a]), Adam([b], fused=True)
    for _ in range(3):
        a.grad = b.grad = rng.standard_normal(300).astype(np.float32)
        oa.step()
        ob.step()
    np.testing.assert_array_equal(a.data, b.data)


def test_adam8bit_rejects_bad_options():
    p = parameter(np.zeros(10, np.float32))
    with pytest.raises(ValueError, match="map='log'"):
        Adam8bit([p], map="log")
    with pytest.raises(ValueError, match="block must be >= 1, got 0"):
        Adam8bit([p], block=0)
    with pytest.raises(ValueError, match="state must be a dict"):
        StateAdam([p], state={"momentum": "fp16"})


def test_compare_workers_equal_serial():
    data = teacher_gaussians(n=1024)
    names = ["bf16-mixed", "fp8-delayed", "mxfp8"]
    serial = compare(names, steps=8, progress=False, data=data)
    parallel = compare(names, steps=8, progress=False, data=data, workers=2)
    for a, b in zip(serial, parallel, strict=True):
        assert a.precision == b.precision
        for col in ("loss", "accuracy", "clipped", "flushed"):
            np.testing.assert_array_equal(a[col], b[col])
        assert a.final_test_accuracy == b.final_test_accuracy
        assert a.bytes_held == b.bytes_held


def test_msamp_o2_saves_62_5_percent_of_optimizer_memory_and_columns():
    data = teacher_gaussians(n=512)
    opts = dict(hidden=(64,), batch_size=64, progress=False)
    o2 = Trainer("msamp-O2", **opts).fit(data, 2)
    fp32 = Trainer("bf16-mixed", **opts).fit(data, 2)
    ratio = sum(o2.bytes_held["optimizer state"].values()) / sum(
        fp32.bytes_held["optimizer state"].values())
    assert abs(ratio - 0.375) < 0.01  # 1 + 2 bytes instead of 4 + 4, plus per-tensor scales
    assert np.isfinite(o2["clipped"]).all() and np.isnan(fp32["clipped"]).all()
    assert "linear0.weight_grad" in o2.info["operands"]  # FP8 weight gradients
    assert o2.bytes_held["gradients"] == {"msamp e4m3fn": 16 * 64 + 64 * 4 + 2 * 4,
                                          "float16": 2 * (64 + 4)}  # biases: FP16 weights


def test_recipe_state_formats_and_gw_hp():
    data = teacher_gaussians(n=256)
    t = Trainer("deepseek-fp8", hidden=(8,), batch_size=16, progress=False)
    t.fit(data, 1)
    assert t.policy.optimizer_state == BF16  # one format for both moments: the policy's
    assert t.optimizer.state_bytes() == {"bfloat16": 2 * 2 * sum(
        p.size for p in t.model.parameters())}
    r = get_recipe("fp8-rowwise-gw-hp")
    assert r.wgrad.a == BF16 and r.forward.a == RowScaling("e4m3fn")        # float32 scales
    assert r.dgrad.b == TensorScaling("e4m3fn")                  # torchao: tensorwise weight
    assert get_recipe("fp8-rowwise").wgrad.a == RowScaling("e4m3fn", power_of_two=True)
    t = Trainer("bf16-mixed", optimizer_options={"state": {"exp_avg": "e4m3fn"}}, progress=False)
    t.fit(data, 1)
    assert t.optimizer.state_bytes() == {"float8_e4m3fn": 5508, "float32": 4 * 5508}


def test_coat_expansion_fills_the_range():
    from floatlab.mixed.optim8bit import expand_range

    e4m3 = get_format("e4m3fn")
    x = np.geomspace(1e-6, 1e-3, 128) * np.where(np.arange(128) % 2, 1, -1)
    y, k = expand_range(x, e4m3)
    mag = np.abs(y)
    np.testing.assert_allclose(mag.max() / mag.min(), 448 / 2.0**-6, rtol=1e-9)
    np.testing.assert_allclose(np.sign(y) * np.abs(y) ** (1 / k[0]), x, rtol=1e-12)


def test_recipe_plots():
    import matplotlib

    matplotlib.use("Agg")
    from floatlab.mixed.recipe_plots import plot_amax_history, plot_operand_qsnr

    h = Trainer("fp8-delayed", hidden=(8,), batch_size=32, progress=False).fit(
        teacher_gaussians(n=256), 3)
    ax = plot_operand_qsnr(h, contains="forward")
    assert len(ax.get_lines()) == 4  # two layers x two forward operands
    with pytest.raises(KeyError, match="no operand 'linear9"):
        plot_amax_history(h, "linear9.forward.a")
    # a filter that matches no operand: an empty picture and matplotlib's legend warning
    # before; None failed in 'in <string>'
    with pytest.raises(KeyError, match="no operand name contains 'forwards'; recorded: linear0"):
        plot_operand_qsnr(h, contains="forwards")
    with pytest.raises(TypeError, match="contains must be a string"):
        plot_operand_qsnr(h, contains=None)
    with pytest.raises(TypeError, match="History of a recipe run"):
        plot_amax_history(Trainer("bf16-mixed", progress=False).fit(teacher_gaussians(n=256),
                                                                    1), "linear0.forward.a")


# ------------------------------------------------- issue 11, phenomenon 4: what SR and RHT buy

def _survives(quantised: np.ndarray, g: np.ndarray) -> float:
    """The share of the quiet columns' energy that a quantised dgrad operand keeps (1 =
    unbiased on average)."""
    return float(np.sum(quantised[:, :3] * g[:, :3]) / np.sum(g[:, :3] ** 2))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nvfp4_round_to_nearest_drops_quiet_gradients_that_sr_keeps(seed):
    # notebook 08, section 4: a loud residual in every block of the dgrad operand puts the
    # quiet ones under amax / 24, where round-to-nearest returns 0 every time; stochastic
    # rounding returns 0 or one E2M1 step with probabilities that keep the mean
    rng = np.random.default_rng(seed)
    g = np.hstack([rng.normal(0, 0.5, (256, 3)), 100 * rng.standard_normal((256, 1))])
    rn = fake_quantize(g, get_recipe("nvfp4", stochastic_rounding=False).dgrad.a)
    sr = get_recipe("nvfp4").dgrad.a
    assert sr.rounding == "stochastic"
    assert _survives(rn, g) < 0.4
    assert abs(np.mean([_survives(fake_quantize(g, sr, rng=s), g) for s in range(200)]) - 1) < 0.1


def test_nvfp4_hadamard_is_orthonormal_and_runs_along_the_wgrad_inner_dimension():
    from floatlab.quant.hadamard import apply_hadamard, hadamard_matrix

    R = hadamard_matrix(16)
    assert np.array_equal(R @ R.T, np.eye(16))    # entries +-1/4: every product is exact
    # Transformer Engine's RHT matrix: its fixed sign vector on the rows of Sylvester's H_16
    # (signs applied to the block's values first), scaled by 1/4
    h16 = np.kron(np.kron([[1, 1], [1, -1]], [[1, 1], [1, -1]]),
                  np.kron([[1, 1], [1, -1]], [[1, 1], [1, -1]]))
    te_signs = [1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1]
    assert np.array_equal(R, np.diag(te_signs) @ h16 / 4)
    recipe = get_recipe("nvfp4")
    assert recipe.wgrad.a.hadamard == recipe.wgrad.b.hadamard == 16
    assert recipe.forward.a.hadamard is recipe.dgrad.a.hadamard is None
    assert get_recipe("nvfp4", hadamard=False).wgrad.a.hadamard is None
    # the GEMM reads operands with the reduced (batch) dimension last; rotating blocks of 16
    # along it leaves the unquantised product unchanged
    rng = np.random.default_rng(0)
    gt, xt = rng.standard_normal((8, 64)), rng.standard_normal((5, 64))
    np.testing.assert_allclose(apply_hadamard(gt, 16, -1) @ apply_hadamard(xt, 16, -1).T,
                               gt @ xt.T, rtol=1e-12, atol=1e-12)
    # so the wgrad GEMM multiplies the rotated operands (no inverse), only when both carry
    # the same transform
    from floatlab.mixed.recipe_gemm import _wgrad_rotated

    a, b = recipe.wgrad.a, recipe.wgrad.b
    assert _wgrad_rotated(a, b)
    assert not _wgrad_rotated(a, b.replace(hadamard=None))
    assert not _wgrad_rotated(a, b.replace(hadamard=32))
    assert not _wgrad_rotated(recipe.forward.a, recipe.forward.b)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hadamard_lowers_mxfp4_error_on_heavy_tails_but_not_nvfp4s(seed):
    # Gaussian in, Gaussian out: no change; heavy tails: the rotation helps MXFP4's shared
    # power-of-two scale and hurts NVFP4, whose E4M3-scaled blocks of 16 already store the
    # outlier (Castro, Egiazarian et al. 2025)
    rng = np.random.default_rng(seed)

    def gain(x, fmt):
        s = get_scheme(fmt)
        err = [np.sum((x - fake_quantize(x, t)) ** 2) for t in (s, s.replace(hadamard=16))]
        return 10 * np.log10(err[0] / err[1])

    gauss = rng.standard_normal((32, 512))
    heavy = rng.standard_t(3, (32, 512))
    assert abs(gain(gauss, "nvfp4")) < 0.3 and abs(gain(gauss, "mxfp4")) < 0.3
    assert gain(heavy, "mxfp4") > 1.0 and gain(heavy, "nvfp4") < 0


def test_deepseek_promotion_removes_the_drift_of_a_k_1024_gemm():
    # issue 11, phenomenon 5, on one GEMM (notebook 08, section 5): the recipe's accumulator
    # with and without promotion, a positive sum over K = 1024 against the exact product
    promoted = get_recipe("deepseek-fp8").wgrad.accumulate
    plain = get_recipe("deepseek-fp8", promote_every=None).wgrad.accumulate
    assert plain == Accumulator("e8m13", "toward_zero", block_fma=32)
    rng = np.random.default_rng(0)
    x, w = rng.random((8, 1024)), rng.random((1024, 4))
    exact = x @ w
    err = {name: float(np.max(np.abs(acc_matmul(x, w, acc) - exact) / exact))
           for name, acc in (("promoted", promoted), ("plain", plain))}
    assert err["promoted"] < 0.005 and err["plain"] > 5 * err["promoted"]
    # truncation toward zero: the drift only ever shrinks a positive sum
    assert np.all(acc_matmul(x, w, plain) <= exact)


def test_gemm_and_recipe_operands_take_format_and_scheme_names():
    # a Format was accepted but not its name or dtype ('e4m3fn', np.float16), while
    # StateAdam(state=...) took both: one resolver (format_or_scheme) serves all three
    from dataclasses import replace

    from floatlab.mixed import Gemm

    gemm = Gemm("E4M3FN", np.float16)
    assert gemm == Gemm(get_format("e4m3fn"), get_format("fp16"))
    assert Gemm("mxfp8", None).a == get_scheme("mxfp8")
    recipe = replace(get_recipe("fp8-delayed"), weights="bf16", weight_grad="mxfp8")
    assert recipe.weights == get_format("bf16") and recipe.weight_grad == get_scheme("mxfp8")
    with pytest.raises(ValueError, match=r"Gemm.a: format name 'fp8' is ambiguous.*Say which"):
        Gemm("fp8", None)
    with pytest.raises(ValueError, match=r"Gemm.b='mxfp9' is neither a floatlab format nor a "
                                         r"scheme name\. Did you mean .*'mxfp8'"):
        Gemm(None, "mxfp9")
    with pytest.raises(TypeError, match="an operand is a floatlab.Scheme"):
        Gemm(3, None)


@pytest.mark.parametrize("recipe, option, homes", [
    ("mxfp4", "fp8_format", "'fp8-delayed', 'fp8-current', 'fp8-e4m3', 'transformer-engine', "
                            "'transformer-engine-float16'"),
    ("fp8-delayed", "backward", "'mxfp4'"),
    ("nvfp4", "margin", "'fp8-delayed', 'fp8-current'"),
    ("mxfp8", "block_fma", "'deepseek-fp8'"),
    ("fp8-current", "history_len", "'fp8-delayed', 'fp8-e4m3', 'transformer-engine', "
                                   "'transformer-engine-float16'")])
def test_a_misplaced_recipe_option_names_the_recipes_that_take_it(recipe, option, homes):
    # a hand-kept table missed fp8_format, margin, backward, accumulator_bits and block_fma
    # ("it is not an option of any recipe") and listed history_len's recipes without
    # transformer-engine-float16: the homes are now read from the builders
    with pytest.raises(ValueError, match=f"{option} does not apply to recipe '{recipe}': it is "
                                         f"an option of {re.escape(homes)}"):
        get_recipe(recipe, **{option: 1})
    with pytest.raises(ValueError, match="it is not an option of any recipe"):
        get_recipe(recipe, bogus=1)
