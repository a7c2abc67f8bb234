"""Precision policies: the names users type, what they mean, and the errors for wrong ones."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import floatlab.mixed as fm
from floatlab import get_format
from floatlab.mixed import (
    LEGACY_ALIASES,
    PRECISIONS,
    GradScaler,
    Policy,
    StaticScaler,
    Trainer,
    get_policy,
)
from floatlab.mixed.policy import contains, storage_dtype, widest

F = get_format


@pytest.mark.parametrize(
    "name, weights, compute, safe, inputs, scaler",
    [
        ("64-true", "float64", "float64", "float64", "float64", None),
        ("32-true", "float32", "float32", "float32", "float32", None),
        ("16-mixed", "float32", "float16", "float32", "float32", "dynamic"),
        ("bf16-mixed", "float32", "bfloat16", "float32", "float32", None),
        ("16-true", "float16", "float16", "float16", "float16", None),
        ("bf16-true", "bfloat16", "bfloat16", "bfloat16", "bfloat16", None),
        ("O0", "float32", "float32", "float32", "float32", None),
        ("O1", "float32", "float16", "float32", "float32", "dynamic"),
        ("O2", "float32", "float16", "float16", "float16", "dynamic"),
        ("O3", "float16", "float16", "float16", "float16", None),
    ],
)
def test_builtin_policies(name, weights, compute, safe, inputs, scaler):
    p = get_policy(name)
    assert p.name == name
    assert (p.weights.name, p.compute.name, p.safe.name, p.inputs.name) == (
        weights, compute, safe, inputs)
    assert p.scaler == scaler
    assert p.matmul_inputs == p.compute
    # tensor cores accumulate in float32 even for 16-bit inputs
    assert p.accumulate.name == ("float64" if name == "64-true" else "float32")
    assert p.master_weights == (weights != compute)
    assert p.state_format == p.weights  # optimizer state lives with the weights


def test_apex_levels_cap_the_scale_torch_does_not():
    assert get_policy("O1").scaler_max == 2.0**24 == get_policy("O2").scaler_max
    assert get_policy("16-mixed").scaler_max is None


@pytest.mark.parametrize("alias", [16, "16", "bf16"])
def test_legacy_aliases_mean_the_same_and_say_they_are_legacy(alias):
    with pytest.warns(UserWarning, match="legacy alias") as record:
        p = get_policy(alias)
    assert LEGACY_ALIASES[alias] in str(record[0].message)
    assert p == get_policy(LEGACY_ALIASES[alias])


@pytest.mark.parametrize("alias", [32, 64, "32", "64"])
def test_legacy_32_and_64_are_silent_as_in_lightning(alias):
    # lightning.fabric.connector._convert_precision_to_unified_args warns only when
    # str(precision)[:2] is not "32" or "64": the 16 and bf16 aliases, not these
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert get_policy(alias) == get_policy(LEGACY_ALIASES[alias])
    assert set(LEGACY_ALIASES) == {16, 32, 64, "16", "32", "64", "bf16"}  # Lightning's list


@pytest.mark.parametrize("bad", ["16-mix", "fp16-mixed-ish", "17-true", "mixed", ""])
def test_unknown_precision_lists_the_valid_ones(bad):
    with pytest.raises(ValueError) as err:
        get_policy(bad)
    message = str(err.value)
    assert repr(bad) in message
    for name in PRECISIONS:
        assert repr(name) in message
    assert "legacy" in message and "-mixed" in message


def test_unknown_precision_suggests_a_close_name():
    with pytest.raises(ValueError, match="Did you mean '16-mixed'"):
        get_policy("16-mixd")


def test_unknown_format_in_a_custom_precision_names_the_format():
    with pytest.raises(ValueError, match="unknown format name 'fp17'"):
        get_policy("fp17-mixed")


@pytest.mark.parametrize("bad, match", [
    (24, "not a known bit width"),
    (None, "must be a string"),
    (3.5, "must be a string"),
    ("01", "letter O"),
    ("transformer-engin", "Did you mean .transformer-engine"),
])
def test_other_bad_precisions(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        get_policy(bad)


def test_apex_levels_are_case_insensitive():
    assert get_policy("o2") == get_policy("O2")


@pytest.mark.parametrize("scaler", ["dynamic", 8.0, True])
def test_bf16_mixed_refuses_a_scaler_like_lightning(scaler):
    with pytest.raises(ValueError, match="'bf16-mixed' does not use a scaler"):
        get_policy("bf16-mixed", scaler=scaler)


@pytest.mark.parametrize("scaler", [GradScaler(), StaticScaler(8.0)])
def test_trainer_refuses_a_scaler_object_for_bf16_mixed(scaler):
    with pytest.raises(ValueError, match="does not use a scaler"):
        Trainer("bf16-mixed", scaler=scaler, progress=False)
    with pytest.raises(ValueError, match="does not use a scaler"), \
            pytest.warns(UserWarning, match="legacy"):
        Trainer("bf16", scaler=scaler, progress=False)


def test_bf16_mixed_without_scaler_is_fine_and_a_custom_policy_may_experiment():
    assert get_policy("bf16-mixed", scaler=None).scaler is None
    assert Policy.mixed("bf16", scaler="dynamic").scaler == "dynamic"


def test_scaler_overrides_rename_the_policy():
    assert get_policy("16-mixed", scaler=None).name == "16-mixed (no scaler)"
    p = get_policy("16-mixed", scaler=8)
    assert p.scaler == 8.0 and p.name == "16-mixed (static scale 8)"
    assert get_policy("16-mixed", scaler="dynamic").name == "16-mixed"  # no change, no rename
    with pytest.raises(ValueError, match="positive static factor"):
        get_policy("16-mixed", scaler=-1)


def test_matmul_precision_rounds_float32_matmul_inputs_only():
    high = get_policy("32-true", matmul_precision="high")
    medium = get_policy("32-true", matmul_precision="medium")
    assert high.matmul_inputs.name == "tensorfloat32" and high.compute.name == "float32"
    assert medium.matmul_inputs.name == "bfloat16" and medium.compute.name == "float32"
    assert high.name == "32-true (matmul high)"
    assert get_policy("32-true", matmul_precision="highest") == get_policy("32-true")
    # like torch, the setting does not touch 16-bit or float64 matmuls
    assert get_policy("16-mixed", matmul_precision="medium") == get_policy("16-mixed")
    assert get_policy("64-true", matmul_precision="high") == get_policy("64-true")
    with pytest.raises(ValueError, match="'highest', 'high', 'medium'"):
        get_policy("32-true", matmul_precision="low")


def test_custom_formats_push_past_the_hardware_names():
    p = get_policy("float8_e5m2-mixed")
    assert (p.weights.name, p.compute.name, p.safe.name, p.scaler) == (
        "float32", "float8_e5m2", "float32", "dynamic")
    q = get_policy("e4m3fn-true")
    assert q.weights == q.compute == q.safe == q.inputs == F("float8_e4m3fn")
    assert q.scaler is None
    assert Policy.mixed("bf16").scaler is None  # float32's range: no scaler by default
    assert Policy.mixed(F("e3m4")).compute == F("float8_e3m4")


def test_overrides_for_accumulation_state_and_rounding():
    p = get_policy("16-true", accumulate="fp16", optimizer_state="fp32", rounding="stochastic")
    assert p.accumulate == F("fp16") and p.state_format == F("fp32")
    assert p.rounding == "stochastic"
    assert "accumulate float16" in p.name and "state float32" in p.name


def test_policy_routes_ops_by_kind():
    p = get_policy("16-mixed")
    assert p.format_for("low") == F("fp16")
    assert p.format_for("safe", F("fp16")) == F("fp32")
    assert p.format_for("safe", F("fp64")) == F("fp64")  # autocast only widens
    assert p.format_for("promote", F("fp16"), F("fp32")) == F("fp32")
    assert p.format_for("promote", F("fp16"), F("bf16")) == F("fp32")  # neither holds the other
    assert p.format_for("promote", F("fp16")) == F("fp16")


def test_describe_says_where_everything_lives():
    text = get_policy("16-mixed").describe()
    assert "float32" in text and "float16" in text and "dynamic GradScaler" in text
    assert str(get_policy("O2")).startswith("policy O2")
    assert "16-true" in repr(get_policy("16-true"))


def test_format_containment():
    assert contains(F("fp32"), F("fp16")) and contains(F("fp32"), F("bf16"))
    assert not contains(F("fp16"), F("bf16")) and not contains(F("bf16"), F("fp16"))
    assert contains(F("fp16"), F("e5m2")) and contains(F("fp16"), F("e4m3fn"))
    assert contains(F("bf16"), F("e4m3fn"))  # wider range, 7 >= 3 mantissa bits
    assert not contains(F("e4m3fn"), F("e5m2")) and not contains(F("e5m2"), F("e4m3fn"))
    assert contains(F("bf16"), F("e3m4")) and not contains(F("e5m2"), F("e3m4"))
    assert not contains(F("e8m0"), F("e5m2")) and not contains(F("e5m2"), F("e8m0"))
    assert contains(F("fp64"), F("fp32")) and not contains(F("fp32"), F("fp64"))
    assert contains(F("tf32"), F("fp16")) and contains(F("fp32"), F("tf32"))
    assert widest(F("fp16"), F("e5m2")) == F("fp16")
    assert widest(F("fp16"), F("bf16"), F("e4m3fn")) == F("fp32")


def test_containment_agrees_with_rounding_on_every_code():
    # every finite e5m2 / e4m3fn value survives rounding to a format that contains it
    import ml_dtypes

    for narrow in ("float8_e5m2", "float8_e4m3fn"):
        codes = np.arange(256, dtype=np.uint8).view(getattr(ml_dtypes, narrow))
        values = codes.astype(np.float64)
        values = values[np.isfinite(values)]
        for wide in ("fp16", "bf16", "fp32"):
            from floatlab import round as fl_round

            same = np.array_equal(fl_round(values, wide), values)
            assert same == contains(F(wide), F(narrow)), (narrow, wide)


def test_storage_dtypes():
    assert storage_dtype(F("fp16")) == np.float32 and storage_dtype(F("e5m2")) == np.float32
    assert storage_dtype(F("fp64")) == np.float64
    assert storage_dtype(F("e8m30")) == np.float64  # more mantissa than float32 holds


# --------------------------------------------------------------------------- autocast by device

def test_autocast_table_is_one_clean_structure_per_device():
    from floatlab.mixed.autocast import AUTOCAST_LISTS, NOTES

    assert set(AUTOCAST_LISTS) == {"cuda", "cpu"}
    assert set(AUTOCAST_LISTS["cuda"]) == set(AUTOCAST_LISTS["cpu"])  # every op, both devices
    allowed = {"lower_precision_fp", "fp32", "fp32_set_opt_dtype", "promote", "none"}
    for table in AUTOCAST_LISTS.values():
        assert set(table.values()) <= allowed
    transformer = {"layer_norm", "gelu", "embedding", "scaled_dot_product_attention", "dropout",
                   "cross_entropy", "mse_loss", "nll_loss", "softmax", "bmm", "baddbmm",
                   "masked_fill"}
    assert set(fm.LAB_OPS) | transformer <= set(AUTOCAST_LISTS["cpu"])
    assert all(device in ("cuda", "cpu") and op in AUTOCAST_LISTS[device] for device, op in NOTES)


@pytest.mark.parametrize("op, cuda, cpu", [
    # torch 2.13: autocast_mode.h (CUDA), autocast_mode.cpp (CPU), the CPU column run on torch
    ("matmul", "lower_precision_fp", "lower_precision_fp"),
    ("scaled_dot_product_attention", "lower_precision_fp", "lower_precision_fp"),
    ("exp", "fp32", "none"), ("log", "fp32", "none"),
    ("softmax", "fp32_set_opt_dtype", "none"), ("log_softmax", "fp32_set_opt_dtype", "none"),
    ("sum", "fp32_set_opt_dtype", "none"), ("mean", "none", "none"),
    ("layer_norm", "fp32", "none"), ("gelu", "none", "none"), ("embedding", "none", "none"),
    ("dropout", "none", "none"), ("cross_entropy", "fp32", "fp32"), ("mse_loss", "fp32", "fp32"),
    ("nll_loss", "fp32", "fp32"), ("prod", "fp32_set_opt_dtype", "fp32"),
    ("cat", "none", "promote"), ("masked_fill", "none", "none"),
    ("bmm", "lower_precision_fp", "lower_precision_fp"),
])
def test_autocast_lists_are_torchs(op, cuda, cpu):
    from floatlab.mixed.autocast import cast_policy

    assert (cast_policy(op, "cuda"), cast_policy(op, "cpu")) == (cuda, cpu)


def test_policy_device_routes_the_lab_ops():
    cuda, cpu = get_policy("16-mixed"), get_policy("16-mixed", device="cpu")
    assert cuda.device == "cuda" and cpu.device == "cpu" and cpu.name == "16-mixed (cpu autocast)"
    for op in ("exp", "log", "softmax", "log_softmax", "sum"):
        assert cuda.op_format(op, F("fp16")) == F("fp32")
        assert cpu.op_format(op, F("fp16")) == F("fp16")
        assert cpu.op_format(op, F("fp32")) == F("fp32")  # on no list: the input's format
    for op in ("cross_entropy", "mse_loss"):
        assert cuda.op_format(op, F("fp16")) == cpu.op_format(op, F("fp16")) == F("fp32")
    assert cuda.op_format("mean", F("fp16")) == F("fp16")  # mean is on no CUDA list either
    assert fm.OP_KINDS["cpu"]["softmax"] == "promote" and fm.OP_KINDS["cuda"]["softmax"] == "safe"
    assert get_policy("bf16-true", device="cpu").name == "bf16-true"  # no lists in a true run
    assert "torch's CPU lists" in cpu.describe() and "torch's CUDA lists" in cuda.describe()
    assert "only the losses in float32" in cpu.note and "CPU" not in cuda.note
    safe_row = next(line for line in cpu.describe().splitlines() if "cross_entropy" in line)
    assert "exp" not in safe_row and safe_row.rstrip().endswith("float32")


@pytest.mark.parametrize("kwargs, match", [
    ({"device": "gpu"}, "device='gpu': use 'cuda'"),
    ({"device": 0}, "device=0: use 'cuda'"),
    ({"precision": "O2", "device": "cpu"}, "Apex O2 has its own op lists"),
])
def test_bad_devices(kwargs, match):
    with pytest.raises(ValueError, match=match):
        get_policy(**kwargs)


@pytest.mark.parametrize("name, hint", [
    ("fp16", "'16-mixed'"), ("half", "'16-true'"), ("bfloat16", "'bf16-mixed'"),
    ("fp32", "'32-true'"), ("e4m3fn", "'float8_e4m3fn-mixed'"),
])
def test_format_names_where_a_precision_belongs_get_a_hint(name, hint):
    with pytest.raises(ValueError, match=f"names a format, not a precision: .*{hint}"):
        get_policy(name)


# --------------------------------------------------------------------------- LAB_OPS is complete

def _graph_ops(t) -> set[str]:
    seen, ops, stack = set(), set(), [t]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            ops.add(node._op)
            stack.extend(node._parents)
    return ops


@pytest.mark.parametrize("precision", ["bf16-mixed", "fp8-current"])
def test_every_op_the_lab_models_call_is_in_lab_ops(monkeypatch, precision):
    """Run the MLP (relu and tanh, both losses) and the Transformer (dropout on) forward and
    backward; every op asked of the policy and every graph node must be listed."""
    from floatlab.mixed import (
        MLP,
        Tensor,
        Transformer,
        cross_entropy,
        digit_reversal,
        mse_loss,
        use_precision,
    )
    from floatlab.mixed.autocast import AUTOCAST_LISTS
    from floatlab.mixed.layers import sequence_loss
    from floatlab.mixed.policy import STRUCTURAL_OPS, Policy

    asked: set[str] = set()
    kind = Policy.op_kind
    monkeypatch.setattr(Policy, "op_kind", lambda self, op: asked.add(op) or kind(self, op))
    graph: set[str] = set()
    data = digit_reversal(n=64, digits=3)
    with use_precision(precision):
        for activation in ("relu", "tanh"):
            mlp = MLP((16, 8, 4), activation=activation)
            x = Tensor(np.ones((4, 16), np.float32))
            for loss in (cross_entropy(mlp(x), np.arange(4)),
                         mse_loss(mlp(x), Tensor(np.zeros((4, 4), np.float32)))):
                graph |= _graph_ops(loss)
                loss.backward()
        model = Transformer(data.vocab, 16, 2, 1, data.context, dropout=0.1)
        ids, targets, mask = data.batch(np.random.default_rng(0), 4)
        loss = sequence_loss(model(ids), targets, mask)
        graph |= _graph_ops(loss)
        loss.backward()
    assert {"bmm", "layer_norm", "gelu", "embedding", "dropout", "masked_fill"} <= asked
    assert asked <= set(fm.LAB_OPS), asked - set(fm.LAB_OPS)
    assert graph <= set(fm.LAB_OPS) | set(STRUCTURAL_OPS), \
        graph - set(fm.LAB_OPS) - set(STRUCTURAL_OPS)
    for device in ("cuda", "cpu"):                       # consistent with the autocast lists
        assert set(fm.LAB_OPS) <= set(AUTOCAST_LISTS[device])
        assert set(fm.OP_KINDS[device]) == set(fm.LAB_OPS)
    text = get_policy("bf16-mixed").describe()
    assert all(op in text for op in fm.LAB_OPS)          # describe() names every op
    assert "matmul / linear / bmm inputs" in text
    assert re.search(r"layer_norm, [^\n]*\n[^\n]*mse_loss[^\n]* +float32", text)  # a wrapped row


@pytest.mark.parametrize("spelling, name", [
    ("16-Mixed", "16-mixed"), ("BF16-MIXED", "bf16-mixed"), ("BF16-mixed", "bf16-mixed"),
    (" 64-TRUE ", "64-true"), ("Float8_E5M2-Mixed", "float8_e5m2-mixed"),
    ("MXFP8", "mxfp8"), ("o2", "O2")])
def test_precision_names_are_case_insensitive_throughout(spelling, name):
    # recipe names, Apex levels and format names were case-insensitive, but "16-Mixed" was
    # refused and "BF16-mixed" became a policy of another name ("bfloat16-mixed")
    assert get_policy(spelling).name == name
    assert get_policy(spelling) == get_policy(name)


def test_a_legacy_alias_in_capitals_is_the_alias():
    with pytest.warns(UserWarning, match=r"precision='BF16' is a legacy alias .* 'bf16-mixed'"):
        assert get_policy("BF16") == get_policy("bf16-mixed")


def test_numpy_integer_precisions_are_the_int_aliases_as_in_lightning():
    # Lightning checks `precision in supported_precision`, which np.int64(32) == 32 passes;
    # floatlab refused numpy integers as "not a string"
    assert get_policy(np.int64(32)) == get_policy(32)
    with pytest.warns(UserWarning, match="precision=16 is a legacy alias"):
        assert get_policy(np.int32(16)) == get_policy("16-mixed")
    with pytest.raises(ValueError, match="precision=8 is not a known bit width"):
        get_policy(np.int8(8))
    with pytest.raises(TypeError, match="precision must be a string"):
        get_policy(np.True_)
