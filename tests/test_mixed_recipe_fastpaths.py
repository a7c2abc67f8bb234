"""Shortcuts of the recipe GEMMs, each equal to the path it replaces."""

import numpy as np
import pytest

import floatlab
from floatlab.mixed import Trainer, pow2_tensor, recipe_gemm, teacher_gaussians
from floatlab.mixed.recipe import get_recipe

SQUARE_TILES = [
    get_recipe("nvfp4").forward.b,                                   # NVFP4 16x16 weights
    get_recipe("deepseek-fp8").forward.b,                            # DeepSeek 128x128
    floatlab.Scheme("e4m3fn", (16, 16), "float32", "even"),
    floatlab.Scheme("e2m1", (8, 8), "e4m3fn", "ceil", global_scale=True, margin=1),
    floatlab.Scheme("e5m2", (32, 32), "e8m0", "floor"),
]


@pytest.mark.parametrize("scheme", SQUARE_TILES, ids=lambda s: s.name or s.describe())
@pytest.mark.parametrize("shape", [(64, 64), (4, 64), (64, 16), (20, 37), (130, 260), (1, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_square_tiles_of_the_transpose_are_the_transposed_tiles(scheme, shape, dtype):
    """The proof in recipe_gemm._tiles_transpose, checked: quantising Wᵀ gives Wᵀ of the
    quantised W, bit for bit (ragged edges, clamped tiles, outliers in one tile)."""
    assert recipe_gemm._tiles_transpose(scheme, scheme)
    rng = np.random.default_rng(shape[0] * 1000 + shape[1])
    w = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 3, shape)).astype(dtype)
    w[0, -1] *= 1e4
    direct = floatlab.fake_quantize(np.ascontiguousarray(w.T), scheme)
    transposed = floatlab.fake_quantize(w, scheme).T
    assert direct.dtype == transposed.dtype
    assert np.array_equal(direct.view(np.uint8), np.ascontiguousarray(transposed).view(np.uint8))


def test_tiles_transpose_only_where_proved():
    nvfp4 = get_recipe("nvfp4")
    weights = nvfp4.forward.b
    assert not recipe_gemm._tiles_transpose(weights, weights.replace(rounding="stochastic"))
    assert not recipe_gemm._tiles_transpose(weights.replace(rounding="stochastic"),
                                            weights.replace(rounding="stochastic"))
    assert not recipe_gemm._tiles_transpose(nvfp4.forward.a, nvfp4.forward.a)   # 1x16 blocks
    assert not recipe_gemm._tiles_transpose(weights, weights.replace(block=(16, 32)))
    assert not recipe_gemm._tiles_transpose(weights, weights.replace(scale_rounding="ceil"))
    dq8 = floatlab.Scheme("e4m3fn", (16, 16), "dq8")
    assert not recipe_gemm._tiles_transpose(dq8, dq8)
    assert not recipe_gemm._tiles_transpose(floatlab.get_format("e4m3fn"),
                                            floatlab.get_format("e4m3fn"))


def test_training_without_telemetry_equals_quantising_the_transpose(monkeypatch):
    """NVFP4 training without telemetry (dgrad reads the forward's 16x16 weight tiles
    transposed) ends with the same parameters as quantising Wᵀ anew."""
    data = teacher_gaussians(n=512)

    taken = []
    proved = recipe_gemm._tiles_transpose

    def params(shortcut: bool) -> list:
        with monkeypatch.context() as m:
            m.setattr(recipe_gemm, "_tiles_transpose",
                      lambda first, second: taken.append(proved(first, second)) or taken[-1]
                      if shortcut else False)
            t = Trainer("nvfp4", seed=0, telemetry=False, progress=False, batch_size=128)
            t.fit(data, steps=6)
        return [np.array(p.data) for p in t.model.parameters()]

    for fast, slow in zip(params(True), params(False), strict=True):
        assert np.array_equal(fast, slow)
    assert taken and all(taken)  # the shortcut ran (dgrad of the two upper layers, per step)


def _adversarial32(rng) -> np.ndarray:
    """float32 operands for per-tensor FP8 scaling: random values over many binades, float32
    subnormals, signed zeros, and values whose scaled copies sit on E4M3 / E5M2 midpoints (and
    a float32 ulp either side of them): the amax 0.875 makes E4M3's scale 448 / 0.875 = 512."""
    grid = np.unique(floatlab.round(np.linspace(0, 448, 20001), "e4m3fn"))
    mids = (grid[:-1] + grid[1:]) / 2                            # E4M3 midpoints (E5M2's too)
    x = np.concatenate([
        rng.uniform(-0.875, 0.875, 3000) * 10.0 ** rng.integers(-7, 1, 3000),
        np.array([0.0, -0.0, 1e-45, -3e-42, 2.0**-126]),
        mids[:400] / 512, -mids[-400:] / 512, [0.875]])
    x = x.astype(np.float32)
    near = np.concatenate([np.nextafter(x[-801:-1], np.float32(np.inf)),
                           np.nextafter(x[-801:-1], np.float32(-np.inf))])
    return np.concatenate([x, near]).reshape(-1, 1).repeat(2, axis=1)


@pytest.mark.parametrize("delayed", [False, True])
@pytest.mark.parametrize("fmt", ["e4m3fn", "e5m2"])
def test_per_tensor_operand_for_blas_equals_the_float64_path(delayed, fmt):
    """quantize_operand(blas=True) of a float32 operand (Transformer Engine's float32 order,
    dequantised straight to float32) equals the path that widens the dequantised values to
    float64, fed the same values as float64, cast back to float32, step after step of a
    delayed-scaling history (the third step's scale is too small for its amax: saturation),
    ties included."""
    from floatlab.mixed.recipe import TensorScaling

    spec = TensorScaling(fmt, delayed=delayed, history_len=2)
    rng = np.random.default_rng(3)
    fast_run, slow_run = recipe_gemm.RecipeRun(telemetry=False), recipe_gemm.RecipeRun(
        telemetry=False)
    for factor in (1.0, 0.5, 8.0, 1.0):
        x = _adversarial32(rng) * np.float32(factor)
        fast = recipe_gemm.quantize_operand(x, spec, fast_run, "k", blas=True)
        slow = recipe_gemm.quantize_operand(x.astype(np.float64), spec, slow_run, "k")
        assert fast.dtype == np.float32
        assert fast.tobytes() == slow.astype(np.float32).tobytes()
    assert fast_run.scalers["k"].__dict__.keys() == slow_run.scalers["k"].__dict__.keys()
    if delayed:
        assert fast_run.scalers["k"].history == slow_run.scalers["k"].history


@pytest.mark.parametrize("delayed", [False, True])
@pytest.mark.parametrize("fmt", ["e4m3fn", "e5m2"])
def test_fused_pow2_per_tensor_operand_equals_the_scalers_path(monkeypatch, delayed, fmt):
    """pow2_tensor._pow2_tensor_fake_quantize (a power-of-two per-tensor scale as the one-row
    case of the rowwise kernel) against the scaler's own quantize + dequantize(float32), step
    after step of a history: ties, float32 subnormals, signed zeros, all-zero and tiny tensors,
    a history whose scale is too large for the next amax (saturation: the fused path declines
    and the general path runs), and the histories left equal."""
    from floatlab.quant.scalers import CurrentScaling, DelayedScaling

    def scaler():
        return (DelayedScaling(fmt, history_len=2, power_of_two=True, float32=True) if delayed
                else CurrentScaling(fmt, power_of_two=True, float32=True))

    fused_scaler, general_scaler = scaler(), scaler()
    rng = np.random.default_rng(5)
    declined = []
    for factor in (1.0, 0.5, 8.0, 1.0, 3.0, 1e-30, 2.0**-140, 0.0, 1.0, 7e4):
        x = (_adversarial32(rng) * np.float32(factor)).astype(np.float32)
        before = x.tobytes()
        fused = pow2_tensor._pow2_tensor_fake_quantize(fused_scaler, x)
        if fused is None:  # declined before recording anything: the caller's general path
            declined.append(factor)
            fused = fused_scaler.quantize(x).dequantize(np.float32)
        general = general_scaler.quantize(x).dequantize(np.float32)
        assert x.tobytes() == before
        assert fused.dtype == np.float32 and fused.shape == x.shape
        assert fused.tobytes() == general.tobytes(), factor
        if delayed:
            assert fused_scaler.history == general_scaler.history
    assert 8.0 in declined if delayed else 8.0 not in declined  # (after 0.5: a lagging scale)
    with pytest.raises(ValueError, match="NaN"):  # the same refusal as the scaler's
        pow2_tensor._pow2_tensor_fake_quantize(scaler(), np.array([1.0, np.nan], np.float32))
    monkeypatch.setattr(pow2_tensor, "_POW2_FUSED", False)
    assert pow2_tensor._pow2_tensor_fake_quantize(scaler(), np.ones(3, np.float32)) is None


@pytest.mark.parametrize("fmt", ["e4m3fn", "e5m2"])
def test_pow2_kernel_at_every_scale_exponent_equals_the_general_path(fmt):
    """floatlab.quant.axiswise._round_rows_pow2 with one scale 2**k for k from -40 to 127 (the
    per-tensor scales of tiny tensors reach k = 127; its floor field emin - k + 127 crosses 0
    at k = emin + 127, where it once wrapped around uint32 and rounded on a wrong grid),
    against Transformer Engine's float32 order: equal where it runs, and it runs up to the
    boundary."""
    from floatlab.quant.axiswise import _round_rows_pow2
    from floatlab.quant.delayed import quantize_scaled

    f = floatlab.get_format(fmt)
    base = _adversarial32(np.random.default_rng(11)) / np.float32(0.875)  # amax 1
    ran = []
    for k in range(-40, 128):
        x = (base * np.float32(f.max) * np.float32(2.0**-k)).astype(np.float32)
        amax = np.array(np.max(np.abs(x)), np.float32)
        got = _round_rows_pow2(x, amax, np.array(2.0**k, np.float32), f)
        if got is None:
            continue
        ran.append(k)
        want = quantize_scaled(x, fmt, scale=2.0**k, float32=True).dequantize(np.float32)
        assert got.tobytes() == want.tobytes(), k
    assert f.emin + 127 in ran and f.emin + 128 not in ran


def _fit_recording_copies(monkeypatch, name, options, *, skip: bool, telemetry: bool = False
                          ) -> tuple[list, list]:
    """Parameters and optimizer state after 5 steps, and the keys of the operands quantised."""
    data = teacher_gaussians(n=512)
    made = []
    quantize = recipe_gemm.quantize_operand
    with monkeypatch.context() as m:
        m.setattr(recipe_gemm, "_SKIP_UNREAD_COPIES", skip)
        m.setattr(recipe_gemm, "quantize_operand",
                  lambda values, spec, run, key, **kw: made.append(key) or
                  quantize(values, spec, run, key, **kw))
        t = Trainer(name, seed=0, telemetry=telemetry, progress=False, batch_size=128,
                    recipe_options=options)
        t.fit(data, steps=5)
    state = [np.array(v) for v in t.optimizer.groups[0].state.values()]
    return [np.array(p.data) for p in t.model.parameters()] + state, made


@pytest.mark.parametrize("name, options", [
    ("fp8-rowwise", None), ("mxfp8", None), ("mxfp4", None),
    ("nvfp4", {"stochastic_rounding": False}),   # deterministic dgrad copies
])
def test_first_layer_dgrad_copy_skipped_only_where_unread(monkeypatch, name, options):
    """Without telemetry the first layer's dgrad copy of g (read by no GEMM: its input needs no
    gradient, and wgrad quantises gᵀ in its own blocks) is not made; a deterministic copy is a
    pure function of g, so training ends with the same parameters and state as making it."""
    fast, made_fast = _fit_recording_copies(monkeypatch, name, options, skip=True)
    slow, made_slow = _fit_recording_copies(monkeypatch, name, options, skip=False)
    for a, b in zip(fast, slow, strict=True):
        assert a.tobytes() == b.tobytes()
    assert made_fast.count("linear0.dgrad.a") == 0 and made_slow.count("linear0.dgrad.a") == 5


def test_first_layer_stochastic_dgrad_copy_is_never_made(monkeypatch):
    """NVFP4's SR copy of the first layer's g is read by no GEMM; making it only advanced the
    random stream. It is left out with telemetry on and off alike, so telemetry does not
    change training (a change of results against making it: a different stream, on purpose)."""
    quiet, made_quiet = _fit_recording_copies(monkeypatch, "nvfp4", None, skip=True)
    loud, made_loud = _fit_recording_copies(monkeypatch, "nvfp4", None, skip=True,
                                            telemetry=True)
    old, made_old = _fit_recording_copies(monkeypatch, "nvfp4", None, skip=False)
    for a, b in zip(quiet, loud, strict=True):
        assert a.tobytes() == b.tobytes()
    assert "linear0.dgrad.a" not in made_quiet + made_loud
    assert made_old.count("linear0.dgrad.a") == 5
    assert made_quiet.count("linear1.dgrad.a") == 5       # the copies a GEMM reads stay
    assert any(a.tobytes() != b.tobytes() for a, b in zip(quiet, old, strict=True))


@pytest.mark.parametrize("name", ["fp8-delayed", "msamp-O2"])
def test_optimizer_skips_unread_weight_copies_under_recipes(monkeypatch, name):
    """Under a recipe without telemetry the optimizer makes no low-precision weight copies (no
    GEMM reads them); training ends with the same parameters as making them, and a product
    that reads a parameter's copy gets the values prime_copies would have made."""
    from floatlab.mixed import gemm, get_policy, optim, use_precision

    data = teacher_gaussians(n=512)

    def fit(skip: bool):
        with monkeypatch.context() as m:
            if not skip:
                m.setattr(optim, "_copies_unread", lambda: False)
            t = Trainer(name, seed=0, telemetry=False, progress=False, batch_size=128)
            t.fit(data, steps=4)
        return t

    fast, slow = fit(True), fit(False)
    for a, b in zip(fast.model.parameters(), slow.model.parameters(), strict=True):
        assert a.data.tobytes() == b.data.tobytes()
    policy = get_policy(name)
    w = fast.model.parameters()[0]
    assert w._copy is None or w._copy[0] is not w.data        # not refreshed by the update
    with use_precision(policy):
        lazy = gemm._matmul_input(w, policy.matmul_inputs)
        gemm.prime_copies([w], policy.matmul_inputs)
    assert lazy.tobytes() == w._copy[2].tobytes()


@pytest.mark.parametrize("fmt", ["e4m3fn", "e5m2"])
def test_dequantize_by_reciprocal_only_where_exhaustively_equal(fmt):
    """ScaledTensor.dequantize(float32) multiplies by 1 / scale only when that equals dividing
    for every value of the format (checked exhaustively per call): on every signed value,
    inf and NaN, with scales built to put some quotient next to a float32 midpoint (where the
    check fails and it divides) and random ones, it equals the division cast to float32."""
    from floatlab.quant import delayed

    f = floatlab.get_format(fmt)
    grid = delayed._nonnegative_values(f)
    values = np.concatenate([grid, -grid, [-0.0]])
    values = np.tile(values, -(-delayed._RECIPROCAL_MIN // values.size))
    rng = np.random.default_rng(4)
    outcomes = set()
    for _ in range(300):
        v = rng.choice(grid[1:-2])
        m = np.float32(rng.uniform(0.5, 400))
        scale = float(v / (float(m) + float(np.spacing(m)) / 2)) if rng.random() < 0.7 else \
            float(rng.uniform(1e-3, 1e3))
        st = delayed.ScaledTensor(values=values, scale=scale, fmt=f)
        with np.errstate(all="ignore"):
            want = (values / scale).astype(np.float32)
        assert st.dequantize(np.float32).tobytes() == want.tobytes(), scale
        outcomes.add(delayed._reciprocal_is_exact(f, scale, np.dtype(np.float32)))
    assert outcomes == {True, False}


def test_msamp_per_tensor_scheme_twin_equals_the_scheme(monkeypatch):
    """MS-AMP's per-tensor power-of-two Scheme quantised through its float32 CurrentScaling
    twin (pow2_tensor._pow2_tensor_twin) gives fake_quantize's values bit for bit: midpoints
    and a float32 ulp around them, float32 subnormals, signed zeros, an all-zero tensor, amaxes
    over many binades, and amaxes so small that fl32(448 / amax) overflows (the twin's scale
    2**127 sends them back to the Scheme); other Schemes and float64 inputs have no twin."""
    from floatlab.mixed.recipe import msamp_scheme
    from floatlab.quant.quantize import fake_quantize

    spec = msamp_scheme("e4m3fn")
    assert pow2_tensor._pow2_tensor_twin(spec) is not None
    assert pow2_tensor._pow2_tensor_twin(floatlab.get_scheme("fp8_tensorwise")) is None
    assert pow2_tensor._pow2_tensor_twin(msamp_scheme("e4m3fn").replace(margin=1)) is None
    rng = np.random.default_rng(8)
    base = _adversarial32(rng)
    run = recipe_gemm.RecipeRun(telemetry=False)
    for factor in (1.0, 3.0, 1e-3, 7e3, 2.0**-100, 1e-37, 1e-39, 0.0):
        x = (base * np.float32(factor)).astype(np.float32)
        got = recipe_gemm.quantize_operand(x, spec, run, "w")
        assert got.dtype == np.float32
        assert got.tobytes() == fake_quantize(x, spec).tobytes(), factor


@pytest.mark.parametrize("switch", ["_POW2_TWINS", "_POW2_FUSED"])
@pytest.mark.parametrize("name", ["msamp-O1", "msamp-O2", "msamp-O3"])
def test_msamp_trains_bit_identical_without_the_pow2_fast_paths(monkeypatch, name, switch):
    """pow2_tensor's twins (a Scheme as a float32 CurrentScaling) and its fused rounding of
    per-tensor power-of-two operands, each switched off: the same bits after 5 steps."""
    data = teacher_gaussians(n=512)

    def fit(on: bool) -> list:
        with monkeypatch.context() as m:
            m.setattr(pow2_tensor, switch, on)
            t = Trainer(name, seed=0, telemetry=False, progress=False, batch_size=128)
            t.fit(data, steps=5)
        state = [np.array(v) for v in t.optimizer.groups[0].state.values()]
        return [np.array(p.data) for p in t.model.parameters()] + state

    for a, b in zip(fit(True), fit(False), strict=True):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("shape", [(512, 64), (512, 16), (2048, 64), (129, 300), (1, 9000),
                                   (9000, 1), (0, 64), (3, 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint8])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_transposed_copy_in_blocks_is_the_transposed_array(shape, dtype, layout):
    """recipe_gemm.transposed: np.ascontiguousarray(a.T), C-contiguous, a left untouched
    (blocked rows, a single block, a ragged last block, views)."""
    rng = np.random.default_rng(shape[0])
    a = (rng.random((shape[0], 2 * shape[1])) * 200 - 50).astype(dtype) if dtype != np.uint8 \
        else rng.integers(0, 256, (shape[0], 2 * shape[1]), dtype=np.uint8)
    a = a[:, ::2] if layout == "strided" else a[:, : shape[1]].copy(order=layout)
    before = a.copy()
    got, want = recipe_gemm.transposed(a), np.ascontiguousarray(a.T)
    assert got.flags.c_contiguous and got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
    assert np.array_equal(a, before)
