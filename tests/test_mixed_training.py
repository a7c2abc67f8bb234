"""The phenomena of mixed-precision training, reproduced on the reference experiment.

Teacher-labelled Gaussians, MLP 16-64-64-4, batches of 512 (reference section 5). The loss
multiplier λ stands in for a deep network's small gradients (a teaching device, not part of
real training); λ = 1 runs are shown alongside.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import threadpoolctl

from floatlab import get_format
from floatlab.mixed import (
    BYTE_CATEGORIES,
    MLP,
    GradScaler,
    History,
    Trainer,
    compare,
    spirals,
    teacher_gaussians,
    use_precision,
)
from floatlab.mixed.progress import Progress


@pytest.fixture(scope="module")
def data():
    return teacher_gaussians()


@pytest.fixture(scope="module")
def small():
    return teacher_gaussians(n=1024)


# ------------------------------------------------------------------- the seed article's NaN

def test_pure_fp16_with_adam_goes_nan_like_the_seed_article(data):
    h = Trainer("16-true", progress=False).fit(data, steps=10)
    assert h.went_nan and h.first_nonfinite_step <= 1  # eps = 1e-8 is 0 in fp16
    assert np.isnan(h["loss"][-1]) and h["nonfinite"][-1] > 0
    chance = np.bincount(data.y_test).max() / len(data.y_test)
    assert h.final_test_accuracy <= chance + 1e-9  # a NaN network predicts one class
    for precision in ("bf16-true", "16-mixed", "32-true"):  # the others stay finite
        assert not Trainer(precision, progress=False).fit(data, steps=10).went_nan, precision


# ------------------------------------------------------------------- underflow and scaling

@pytest.fixture(scope="module")
def tiny_gradients(data):
    """λ = 2**-16: fp16 gradients underflow unless the loss is scaled."""
    return compare(
        ["32-true", {"precision": "16-mixed", "scaler": None, "label": "no scaler"},
         "16-mixed", "bf16-mixed"],
        steps=300, progress=False, data=data, loss_multiplier=2.0**-16, eval_every=100)


def test_unscaled_fp16_loses_the_gradients_and_does_not_learn(tiny_gradients):
    fp32, unscaled = tiny_gradients["32-true"], tiny_gradients["no scaler"]
    assert fp32.final_test_accuracy > 0.8
    assert unscaled.mean("underflow") > 0.95  # nearly every ReLU-passed gradient is zero
    assert unscaled.final_test_accuracy < fp32.final_test_accuracy - 0.3
    assert fp32.mean("underflow") < 0.01
    assert set(unscaled["scale"].tolist()) == {1.0}


def test_dynamic_scaler_recovers_fp32_accuracy(tiny_gradients):
    fp32, scaled = tiny_gradients["32-true"], tiny_gradients["16-mixed"]
    assert abs(scaled.final_test_accuracy - fp32.final_test_accuracy) <= 0.02
    assert abs(scaled.final_train_accuracy - fp32.final_train_accuracy) <= 0.02
    assert scaled.mean("underflow") < 0.1
    assert scaled["scale"][0] == 2.0**16  # torch's default init_scale


def test_bf16_mixed_needs_no_scaler(tiny_gradients):
    fp32, bf16 = tiny_gradients["32-true"], tiny_gradients["bf16-mixed"]
    assert abs(bf16.final_test_accuracy - fp32.final_test_accuracy) <= 0.02
    assert set(bf16["scale"].tolist()) == {1.0} and bf16.skipped_steps == 0
    assert bf16.mean("underflow") < 0.01


def test_a_static_scale_by_8(small):
    h = Trainer("16-mixed", scaler=8.0, progress=False).fit(small, steps=5)
    assert set(h["scale"].tolist()) == {8.0} and h.info["policy"].scaler == 8.0


def test_gradient_histogram_marks_the_fp16_zones(data):
    from floatlab.mixed import log2_histogram

    trainer = Trainer("32-true", progress=False, loss_multiplier=2.0**-16)
    trainer.fit(data, steps=1)
    grads = np.concatenate([p.grad.reshape(-1) for p in trainer.model.parameters()])
    h = log2_histogram(grads, get_format("fp16"))
    binades, total = h["edges"][:-1], h["counts"].sum()
    assert h["counts"][binades < h["normal_min"]].sum() == total  # all below fp16's normals
    flushed = h["counts"][binades < h["subnormal_min"] - 1].sum()
    assert flushed > 0.2 * total  # and many below half its smallest subnormal: zero in fp16
    assert (h["normal_min"], h["subnormal_min"]) == (-14, -24)


def test_milder_multiplier_underflows_most_but_not_all(data):
    h = Trainer("16-mixed", scaler=None, loss_multiplier=2.0**-14, progress=False,
                eval_every=1000).fit(data, steps=100)
    assert 0.5 < h.mean("underflow") < 0.99


def test_scaler_from_2_32_skips_its_first_steps_while_it_calibrates(data):
    h = Trainer("16-mixed", scaler=GradScaler(init_scale=2.0**32), progress=False,
                eval_every=1000).fit(data, steps=25)
    skipped = h["skipped"]
    k = int(np.argmin(skipped))  # the first step taken
    assert 10 <= k <= 18 and skipped[:k].all()
    np.testing.assert_array_equal(h["scale"][: k + 1], 2.0 ** (32 - np.arange(k + 1)))
    assert np.isnan(h["lost_updates"][:k]).all()  # skipped steps update nothing
    assert not h.went_nan and h.skipped_steps < k + 5


# ------------------------------------------------------------------- lost updates in bf16

@pytest.fixture(scope="module")
def small_updates(data):
    """Pure bf16 weights with a small SGD learning rate, and the three remedies."""
    return compare(
        ["32-true", "bf16-true", "bf16-mixed",
         {"precision": "bf16-true", "update_rounding": "stochastic", "label": "sr"},
         {"precision": "bf16-true", "kahan": True, "label": "kahan"}],
        steps=500, progress=False, data=data, optimizer="sgd", lr=5e-3, eval_every=1000)


def test_pure_bf16_weights_stall_with_most_updates_lost(small_updates):
    fp32, bf16 = small_updates["32-true"], small_updates["bf16-true"]
    assert bf16.mean("lost_updates") > 0.85
    assert fp32.mean("lost_updates") < 0.05
    assert bf16.final_test_accuracy < fp32.final_test_accuracy - 0.1


@pytest.mark.parametrize("remedy", ["bf16-mixed", "sr", "kahan"])
def test_master_weights_stochastic_rounding_and_kahan_each_recover(small_updates, remedy):
    fp32, fixed = small_updates["32-true"], small_updates[remedy]
    assert abs(fixed.final_test_accuracy - fp32.final_test_accuracy) <= 0.02


# ------------------------------------------------------------------- telemetry and bytes

def test_bytes_held_are_computed_from_the_formats(small):
    n = 16 * 64 + 64 + 64 * 64 + 64 + 64 * 4 + 4  # 5508 parameters
    h = Trainer("16-mixed", progress=False).fit(small, steps=2)
    held = h.bytes_held
    assert list(held) == list(BYTE_CATEGORIES)
    assert held["weights"] == {"float16": 2 * n}
    assert held["master weights"] == {"float32": 4 * n}
    assert held["gradients"] == {"float32": 4 * n}
    assert held["optimizer state"] == {"float32": 2 * 4 * n}
    # fp16: the input's cast (512x16), two hidden layers before and after ReLU, the logits
    assert held["activations"]["float16"] == 2 * (512 * 16 + 4 * 512 * 64 + 512 * 4)
    pure = Trainer("16-true", progress=False).fit(small, steps=2).bytes_held
    assert pure["weights"] == {"float16": 2 * n} and pure["master weights"] == {}
    assert pure["optimizer state"] == {"float16": 2 * 2 * n}
    assert pure["gradients"] == {"float16": 2 * n}
    fp8 = Trainer("float8_e5m2-mixed", progress=False).fit(small, steps=2).bytes_held
    assert fp8["weights"] == {"float8_e5m2": n}


def test_history_records_every_step(small):
    h = Trainer("bf16-true", progress=False, eval_every=5).fit(small, steps=12)
    assert len(h) == 12 and h["step"].tolist() == list(range(12))
    for column in h.columns:
        assert h[column].shape == (12,)
    tested = np.flatnonzero(np.isfinite(h["test_accuracy"]))
    assert tested.tolist() == [4, 9, 11]  # every 5 steps and the last
    assert np.all((h["subnormal"] >= 0) & (h["subnormal"] <= 1))
    assert np.all(h["overflow"] == 0) and h.summary()["steps"] == 12
    assert "bf16-true" in repr(h) and "step" in str(h)
    assert "master weights" in h.bytes_table()
    with pytest.raises(KeyError, match="columns"):
        h["nope"]


def test_telemetry_off_leaves_its_columns_empty(small):
    h = Trainer("16-mixed", progress=False, telemetry=False).fit(small, steps=3)
    assert np.isnan(h["underflow"]).all() and h.bytes == []
    assert np.isfinite(h["loss"]).all()


def test_runs_are_deterministic(small):
    a = Trainer("bf16-true", progress=False, update_rounding="stochastic").fit(small, steps=8)
    b = Trainer("bf16-true", progress=False, update_rounding="stochastic").fit(small, steps=8)
    c = Trainer("bf16-true", progress=False, update_rounding="stochastic",
                seed=1).fit(small, steps=8)
    np.testing.assert_array_equal(a["loss"], b["loss"])
    assert not np.array_equal(a["loss"], c["loss"])


# ------------------------------------------------------------------- compare() and friends

def test_compare_table_in_the_spirit_of_the_seed_article(small):
    result = compare(["32-true", "16-mixed", "16-true"], steps=5, progress=False, data=small)
    text = str(result)
    for word in ("precision", "train acc", "test acc", "time", "bytes held", "skipped",
                 "underflow", "lost upd", "NaN", "32-true", "16-mixed", "16-true"):
        assert word in text
    assert text.splitlines()[0].startswith("teacher_gaussians")
    row = next(line for line in text.splitlines() if line.startswith("| 16-true"))
    assert "yes (step 1)" in row
    assert [h.precision for h in result] == ["32-true", "16-mixed", "16-true"]
    assert result["16-mixed"].total_bytes < result["32-true"].total_bytes
    assert "<pre>" in result._repr_html_()
    with pytest.raises(KeyError, match="runs: 32-true"):
        result["64-true"]


def test_loss_multiplier_is_shown_openly(small):
    text = str(compare(["32-true"], steps=2, progress=False, data=small,
                       loss_multiplier=2.0**-16))
    assert "λ = 2^-16" in text and "teaching device" in text


def test_other_policies_train(small):
    result = compare(["O1", "O2", "64-true", "float8_e4m3fn-mixed",
                      {"precision": "32-true", "matmul_precision": "medium"}],
                     steps=30, progress=False, data=small)
    for h in result:
        assert not h.went_nan and h.final_train_accuracy > 0.4, h


def test_spirals_train_and_plot_sized(small):
    s = spirals()
    assert s.X_train.shape == (750, 2) and s.classes == 3
    h = Trainer("bf16-mixed", lr=1e-2, hidden=(64, 64), batch_size=128,
                progress=False).fit(s, steps=300)
    assert h.final_test_accuracy > 0.9


def test_a_users_model_is_copied_not_changed(small):
    with use_precision("32-true"):
        model = MLP((16, 8, 4), seed=3)
    before = [p.data.copy() for p in model.parameters()]
    trainer = Trainer("bf16-true", model=model, progress=False)
    trainer.fit(small, steps=3)
    for p, b in zip(model.parameters(), before, strict=True):
        assert p.fmt.name == "float32"
        np.testing.assert_array_equal(p.data, b)
    assert all(p.fmt.name == "bfloat16" for p in trainer.model.parameters())
    assert 0.0 <= trainer.evaluate(small.X_test, small.y_test) <= 1.0


def test_data_is_deterministic_and_read_only():
    a, b = teacher_gaussians(n=256), teacher_gaussians(n=256)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    assert not a.X_train.flags.writeable and a.X_train.dtype == np.float32
    assert set(np.unique(a.y_train)) <= {0, 1, 2, 3}
    with pytest.raises(ValueError):
        teacher_gaussians(n=1)


@pytest.mark.parametrize("kwargs, match", [
    ({"optimizer": "lbfgs"}, "'adam', 'adamw', 'sgd', 'adam8bit' or 'adamw8bit'"),
    ({"loss_multiplier": 0.0}, "loss_multiplier"),
    ({"batch_size": 0}, "batch_size"),
    ({"precision": "fp16-halfway"}, "unknown precision"),
])
def test_trainer_argument_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Trainer(**kwargs, progress=False)


# ------------------------------------------------------------------- progress display

def test_progress_bar_draws_one_line_and_is_silent_when_asked(small, capsys):
    Trainer("32-true", progress=True).fit(small, steps=3)
    err = capsys.readouterr().err
    assert err.startswith("\r32-true |") and err.endswith("\n") and "3/3" in err
    assert err.count("\n") == 1
    Trainer("32-true", progress=False).fit(small, steps=3)
    assert capsys.readouterr() == ("", "")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_unit():
    out = _Terminal()
    bar = Progress(2, desc="x", stream=out, min_interval=0)
    bar.update(loss=0.25)
    bar.update(loss=math.nan)
    bar.close()
    lines = out.getvalue().split("\r")[1:]
    assert lines[0].startswith("x |" + "#" * 12 + "-" * 12 + "| 1/2") and "loss 0.25" in lines[0]
    assert lines[1].rstrip().endswith("loss nan") and out.getvalue().endswith("\n")
    # Not a terminal (a log file, CI): only the final state, once.
    log = io.StringIO()
    bar = Progress(2, desc="x", stream=log, min_interval=0)
    bar.update(loss=0.25)
    bar.update(loss=math.nan)
    bar.close()
    assert log.getvalue().count("\r") == 1 and "2/2" in log.getvalue()
    silent = io.StringIO()
    quiet = Progress(2, stream=silent, enabled=False)
    quiet.update()
    quiet.close()
    assert silent.getvalue() == ""


def test_history_by_hand():
    h = History("demo")
    h._append(loss=1.0, accuracy=0.5, skipped=True)
    assert h.skipped_steps == 1 and not h.went_nan and math.isnan(h.mean("underflow"))


def test_compare_keeps_runs_whose_names_coincide():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # 16 is a legacy alias of "16-mixed"
        result = compare(["16-mixed", 16], steps=2, progress=False,
                         data=teacher_gaussians(n=1024))
    assert list(result.histories) == ["16-mixed", "16-mixed #2"]


def test_comparison_built_by_hand_keeps_runs_of_one_precision():
    # two seeds of one precision, put side by side: the dict keyed by precision kept only the
    # last (len 1, one row in the table); compare() renamed its own runs, Comparison did not
    from floatlab.mixed.history import Comparison, History

    first, second = History("16-mixed"), History("16-mixed")
    first.final_train_accuracy, second.final_train_accuracy = 0.5, 0.75
    both = Comparison([first, second])
    assert len(both) == 2 and list(both.histories) == ["16-mixed", "16-mixed #2"]
    assert both["16-mixed #2"] is second and second.precision == "16-mixed"  # not renamed
    assert [r["precision"] for r in both.rows()] == ["16-mixed", "16-mixed #2"]
    table = str(both)
    assert "| 16-mixed    |" in table and "| 16-mixed #2 |" in table and "75.0%" in table


# ------------------------------------------------------------------- bad input, answered

@pytest.mark.parametrize("kwargs, error, match", [
    ({"lr": "0.1"}, TypeError, r"lr must be a number such as 0.001, got '0.1' \(str\)"),
    ({"lr": float("nan")}, ValueError, "lr must be finite"),
    ({"lr": float("inf")}, ValueError, "lr must be finite"),
    ({"lr": -1e-3}, ValueError, "lr must be >= 0"),
    ({"loss_multiplier": "a"}, TypeError, "loss_multiplier must be a number such as 2\\*\\*-16"),
    ({"batch_size": "a"}, TypeError, r"batch_size must be a whole number \(int\) >= 1, got 'a'"),
    ({"batch_size": 2.5}, TypeError, r"batch_size must be a whole number.*round it with int"),
    ({"momentum": "0.9", "optimizer": "sgd"}, TypeError, "momentum must be a number such as 0.9"),
    ({"eps": -1.0}, ValueError, "eps must be >= 0"),
    ({"hidden": 64}, TypeError, r"hidden must be a sequence .* write hidden=\(64,\)"),
    ({"hidden": (64, "a")}, TypeError, r"hidden\[1\] must be a whole number"),
    ({"activation": "gelu"}, ValueError, "'relu' or 'tanh'"),
    ({"telemetry": "no"}, TypeError, "telemetry must be True or False"),
    ({"fused": True, "optimizer": "sgd"}, ValueError, "fused=True is an option of Adam"),
    ({"device": "gpu"}, ValueError, "device='gpu': use 'cuda'"),
    ({"precision": "fp16"}, ValueError, "names a format, not a precision: use '16-mixed'"),
    ({"precision": "O1", "device": "cpu"}, ValueError, "Apex O1 .* CUDA only"),
])
def test_bad_trainer_arguments_get_clear_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        Trainer(**kwargs, progress=False)


@pytest.mark.parametrize("steps, error, match", [
    (2.5, TypeError, r"steps must be a whole number \(int\) >= 1, got 2.5"),
    ("3", TypeError, r"steps must be a whole number .* int\('3'\)"),
    (0, ValueError, "steps must be >= 1"),
])
def test_bad_steps(small, steps, error, match):
    with pytest.raises(error, match=match):
        Trainer(progress=False).fit(small, steps=steps)
    with pytest.raises(error, match=match):
        compare(["32-true"], steps=steps, progress=False, data=small)


def test_arrays_as_data_say_how_to_wrap_them(small):
    pair = (small.X_train, small.y_train)
    with pytest.raises(TypeError, match=r"data=\(X, y\): wrap the arrays .*Dataset.from_arrays"):
        Trainer(progress=False).fit(pair, steps=1)
    with pytest.raises(TypeError, match="data must be a floatlab.mixed.Dataset"):
        compare(["32-true"], steps=1, progress=False, data="iris")
    wrapped = __import__("floatlab.mixed", fromlist=["Dataset"]).Dataset.from_arrays(*pair)
    assert len(Trainer(progress=False).fit(wrapped, steps=2)) == 2
    assert wrapped.features == 16 and len(wrapped.X_test) == len(small.X_train) // 2


def test_compare_takes_one_precision_as_a_string_and_hints_formats(small):
    result = compare("16-mixed", steps=2, progress=False, data=small)
    assert list(result.histories) == ["16-mixed"]
    with pytest.raises(ValueError, match="precision='fp16' names a format.*'16-mixed'"):
        compare(["32-true", "fp16"], steps=2, progress=False, data=small)
    with pytest.raises(ValueError, match="precisions is empty"):
        compare([], steps=2, progress=False, data=small)


# ------------------------------------------------------------------- autocast lists by device

def test_device_picks_torchs_op_lists_and_the_tables_say_so(small):
    result = compare(["bf16-mixed"], steps=3, progress=False, data=small, device="cpu")
    history = result["bf16-mixed (cpu autocast)"]
    assert history.info["device"] == "cpu" and history.info["policy"].device == "cpu"
    assert "torch's CPU autocast op lists" in str(result).splitlines()[0]
    default = compare(["bf16-mixed"], steps=3, progress=False, data=small)
    assert "torch's CUDA autocast op lists" in str(default).splitlines()[0]
    assert default["bf16-mixed"].info["device"] == "cuda"
    # an MLP's only listed op is its loss (float32 on both devices); the lists differ elsewhere:
    with use_precision("bf16-mixed", device="cpu"):
        assert fm_softmax_format() == "bfloat16"
    with use_precision("bf16-mixed"):
        assert fm_softmax_format() == "float32"


def fm_softmax_format():
    from floatlab.mixed import Tensor, softmax

    return softmax(Tensor([[1.0, 2.0]], "bf16")).fmt.name


# ------------------------------------------------------------------- fused Adam, BLAS threads

def test_fused_adam_trains_pure_fp16_without_nan(small):
    plain = Trainer("16-true", progress=False).fit(small, steps=5)
    fused = Trainer("16-true", fused=True, progress=False).fit(small, steps=5)
    assert plain.went_nan and not fused.went_nan
    assert "Adam (fused)" in fused.info["experiment"]


def test_runs_use_one_blas_thread_and_restore_the_setting(small):
    from floatlab.mixed import Module

    seen = []

    class Spy(Module):
        def __init__(self):
            self.net = MLP((16, 8, 4), seed=0)

        def forward(self, x):
            seen.append([p["num_threads"] for p in threadpoolctl.threadpool_info()
                         if p["user_api"] == "blas"])
            return self.net(x)

    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = [p["num_threads"] for p in threadpoolctl.threadpool_info()
                  if p["user_api"] == "blas"]
        Trainer(model=Spy(), progress=False).fit(small, steps=2)
        after = [p["num_threads"] for p in threadpoolctl.threadpool_info()
                 if p["user_api"] == "blas"]
    assert seen and all(threads == [1] * len(threads) for threads in seen)
    assert after == before
