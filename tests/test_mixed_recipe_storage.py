"""What recipes store: bytes with every scale, MS-AMP's scales, O3's FP8 weights (issue 11)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from floatlab import get_format
from floatlab.mixed import (
    StateAdam,
    Tensor,
    Trainer,
    linear,
    parameter,
    recipe_storage,
    teacher_gaussians,
    use_precision,
)
from floatlab.mixed.recipe import RowScaling, TensorScaling, get_recipe, msamp_scheme
from floatlab.mixed.recipe_gemm import recipe_run
from floatlab.mixed.recipe_storage import operand_nbytes
from floatlab.quant.quantize import quantize
from floatlab.quant.scheme import get_scheme

BF16 = get_format("bf16")


# (scheme, shape, bytes written from the definitions: codes + scales [+ tensor scale])
CASES = [
    (get_scheme("fp8_rowwise"), (64, 32), 64 * 32 + 64 * 4),           # float32 per row
    (get_scheme("fp8_tensorwise"), (10, 10), 100 + 4),
    (get_scheme("mxfp8"), (64, 64), 64 * 64 + 64 * 2),                 # E8M0 per 32
    (get_scheme("mxfp8"), (3, 40), 3 * 40 + 3 * 2),                    # ragged: 2 blocks a row
    (get_scheme("mxfp4"), (8, 64), 8 * 64 // 2 + 8 * 2),               # 4-bit codes
    (get_scheme("nvfp4"), (64, 32), 64 * 32 // 2 + 64 * 2 + 4),        # E4M3 per 16 + float32
    (get_scheme("nvfp4").replace(block=(16, 16)), (64, 32), 64 * 32 // 2 + 8 + 4),
    (get_scheme("nvfp4").replace(rounding="stochastic", hadamard=16), (32, 64),
     32 * 64 // 2 + 32 * 4 + 4),
    (get_scheme("fp8_1x128"), (8, 256), 8 * 256 + 8 * 2 * 4),          # float32 per 1x128
    (get_scheme("fp8_128x128"), (256, 256), 256 * 256 + 4 * 4),
    (msamp_scheme("e4m3fn"), (16, 4), 64 + 4),
    (msamp_scheme("float16"), (100,), 200 + 4),
    (get_scheme("dynamic8"), (1000,), 1000 + 4 * 4),                   # absmax per 256
]


@pytest.mark.parametrize("spec, shape, expected", CASES)
def test_operand_bytes_count_codes_and_every_scale(spec, shape, expected):
    label, n = operand_nbytes(spec, shape)
    assert n == expected
    assert label == (spec.name or spec.describe())
    # and it is what the quantiser actually stores for that shape
    probe = spec.replace(rounding="nearest_even")
    assert n == quantize(np.random.default_rng(0).standard_normal(shape), probe).nbytes


def test_operand_bytes_of_stochastic_schemes_with_random_bits():
    """A stochastic Scheme with random_bits (NVFP4's SR gradients take 8) was measured through
    a nearest-even twin that kept random_bits, which a Scheme refuses: operand_nbytes, and so
    StateAdam.state_bytes() after a step, raised "random_bits ... needs rounding='stochastic'"
    about a scheme the user never built; it counts the same bytes as without random_bits."""
    sr = get_scheme("nvfp4").replace(rounding="stochastic", random_bits=8)
    plain = get_scheme("nvfp4").replace(rounding="stochastic")
    assert operand_nbytes(sr, (64, 32))[1] == operand_nbytes(plain, (64, 32))[1] == 1156
    w = parameter(np.ones(40, np.float32))
    opt = StateAdam([w], state={"exp_avg": sr, "exp_avg_sq": None})
    w.grad = np.full(40, 0.1, np.float32)
    opt.step()
    assert opt.state_bytes() == {sr.describe(): 20 + 3 * 1 + 4, "float32": 160}


def test_operand_bytes_of_plain_specs_and_bad_input():
    assert operand_nbytes(TensorScaling("e5m2"), (8, 4)) == ("float8_e5m2", 36)
    # torchao rowwise: the codes and one float32 scale per row, as the fp8_rowwise scheme
    assert operand_nbytes(RowScaling("e4m3fn"), (64, 32)) == ("fp8_rowwise", 64 * 32 + 64 * 4)
    assert operand_nbytes(RowScaling("e4m3fn", True), (2, 3, 8)) == ("fp8_rowwise", 48 + 24)
    assert operand_nbytes(get_format("e4m3fn"), (8, 4)) == ("float8_e4m3fn", 32)
    assert operand_nbytes(None, (8, 4), BF16) == ("bfloat16", 64)
    with pytest.raises(ValueError, match="needs compute="):
        operand_nbytes(None, (8, 4))
    with pytest.raises(TypeError, match="operand spec is a Scheme"):
        operand_nbytes("e4m3", (8, 4), BF16)


def test_rowwise_weights_and_activations_count_their_scales():
    data = teacher_gaussians(n=512)
    h = Trainer("fp8-rowwise", hidden=(32,), batch_size=64, progress=False).fit(data, 1)
    # weights (out, in) = (32, 16) and (4, 32): one float32 scale per output row
    assert h.bytes_held["weights"]["fp8_rowwise"] == (32 * 16 + 32 * 4) + (4 * 32 + 4 * 4)
    # wgrad reads x^T (in, batch) rowwise: one float32 scale per input feature
    assert h.bytes_held["activations"]["fp8_rowwise"] == (16 * 64 + 16 * 4) + (32 * 64 + 32 * 4)


def test_msamp_scale_is_msamp_power_of_two_rule():
    """MS-AMP's ScalingMeta.compute_scaling_factor: multiplier 2**floor(log2(fmax / amax)); the
    stored (dequantisation) scale is its reciprocal, so amax / scale lies in (fmax/2, fmax]."""
    rng = np.random.default_rng(1)
    for fmt_name, fmax in (("e4m3fn", 448.0), ("float16", 65504.0)):
        spec = msamp_scheme(fmt_name)
        for amax in np.concatenate([np.exp(rng.uniform(-20, 5, 50)), [448.0, 448.0 * 2**-7]]):
            x = np.array([amax, -amax / 3], np.float32)
            scale = float(np.ravel(quantize(x, spec).scales)[0])
            multiplier = 2.0 ** math.floor(math.log2(fmax / float(np.float32(amax))))
            assert scale == 1 / multiplier, (fmt_name, amax)


def test_msamp_levels_follow_ms_amp():
    o1, o2, o3 = (get_recipe(f"msamp-O{k}") for k in (1, 2, 3))
    assert o1.forward.a.fmt.name == "float8_e4m3fn" and o1.dgrad.a.fmt.name == "float8_e5m2"
    assert o1.forward.a.delayed and o1.forward.a.history_len == 16  # FP8Linear's window 16
    assert o1.weight_grad == msamp_scheme("e4m3fn")
    assert o2.state == {"exp_avg": msamp_scheme("e4m3fn"), "exp_avg_sq": msamp_scheme("fp16")}
    assert o2.weights is None and o1.master.name == o2.master.name == "float16"  # no master
    assert o1.state == {"exp_avg": get_format("float32"), "exp_avg_sq": get_format("float32")}
    assert o3.weights == msamp_scheme("e4m3fn") and o3.master.name == "float16"
    assert "weights held as msamp e4m3fn" in o3.describe()


def test_o3_forward_reads_the_fp8_weights_stored_once_per_update(monkeypatch):
    calls = []
    real = recipe_storage.fake_quantize
    monkeypatch.setattr(recipe_storage, "fake_quantize",
                        lambda x, s, **k: calls.append(1) or real(x, s, **k))
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((8, 16)).astype(np.float32))
    with use_precision("msamp-O3"), recipe_run() as run:
        w = parameter(rng.standard_normal((4, 16)) * 0.1)
        assert w.fmt.name == "float16"                          # FP16 master
        y1 = linear(x, w)
        y2 = linear(x, w)
        assert len(calls) == 1                                  # one FP8 copy per update
        qt = recipe_storage.held_tensor(run, "linear0.weights")
        assert qt.codes.dtype == np.uint8 and qt.codes.size == 64   # E4M3 codes
        scale = float(np.ravel(qt.scales)[0])
        assert math.log2(scale).is_integer() and 224 < np.abs(w.data).max() / scale <= 448
        # the GEMM used exactly the stored codes times the scale
        held = recipe_storage._HELD[run]["linear0.weights"][2]
        np.testing.assert_array_equal(held, qt.dequantize().astype(held.dtype))
        assert np.array_equal(y1.data, y2.data)
        w.data = (w.data * 2).astype(w.data.dtype)              # an update: a new array
        linear(x, w)
        assert len(calls) == 2
    assert run._pending["linear0.weights"].scale == 2 * scale   # telemetry of the new copy
    with pytest.raises(KeyError, match="no stored weights 'linear9.weights'"):
        recipe_storage.held_tensor(run, "linear9.weights")


def test_o3_trains_and_holds_fp8_weights_with_fp16_masters():
    data = teacher_gaussians(n=1024)
    opts = dict(hidden=(32,), batch_size=128, progress=False)
    o3 = Trainer("msamp-O3", **opts).fit(data, 60)
    bf16 = Trainer("bf16-mixed", **opts).fit(data, 60)
    assert abs(o3.final_test_accuracy - bf16.final_test_accuracy) < 0.05
    held = o3.bytes_held
    assert held["weights"]["msamp e4m3fn"] == (32 * 16 + 4) + (4 * 32 + 4)
    assert held["master weights"] == {"float16": 2 * (32 * 16 + 32 + 4 * 32 + 4)}
    assert set(held["optimizer state"]) == {"msamp e4m3fn", "msamp fp16"}
    assert "linear0.weights" in o3.info["operands"]


@pytest.mark.parametrize("name", ["fp8-delayed", "msamp-O2"])
def test_transformer_counts_only_gemm_weights_with_the_recipe_spec(name):
    """The Transformer's position embedding and layer norms are no GEMM weights: they are
    counted in their storage formats (bf16 copies of float32 masters; MS-AMP's FP16 weights
    and FP16 gradients), the Linear weights and the tied token embedding (the output layer's
    weight) with the recipe's weight spec, and MS-AMP's FP8 gradients only for those."""
    from floatlab.mixed import char_lm

    t = Trainer(name, model="transformer", batch_size=4, progress=False)
    h = t.fit(char_lm(context=16), steps=1)
    params = dict(t.model.named_parameters())
    others = [p for n, p in params.items() if p.ndim == 1 or n == "transformer.wpe.weight"]
    gemm = [p for p in params.values() if not any(p is o for o in others)]
    assert params["transformer.wte.weight"] in gemm and len(gemm) == 1 + 4 * 2  # 4 per block
    spec = t.policy.recipe.forward.b
    weights = {}
    for p in gemm:
        label, n = operand_nbytes(spec, p.shape)
        weights[label] = weights.get(label, 0) + n
    fmt = t.policy.compute if t.policy.master_weights else params["transformer.wpe.weight"].fmt
    weights[fmt.name] = weights.get(fmt.name, 0) + 2 * sum(p.size for p in others)
    assert h.bytes_held["weights"] == weights
    if name == "msamp-O2":
        grads = h.bytes_held["gradients"]
        assert grads["float16"] == 2 * sum(p.size for p in others)
        assert grads["msamp e4m3fn"] == sum(operand_nbytes(t.policy.recipe.weight_grad,
                                                           p.shape)[1] for p in gemm)
