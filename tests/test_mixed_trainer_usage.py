"""The Trainer, History and Comparison on valid but unusual use: empty or hand-built data,
sequence models, telemetry off, fitting twice."""

import numpy as np
import pytest

import floatlab.mixed as fm


def _xy(n=37, features=5, classes=3):
    X = np.random.default_rng(0).standard_normal((n, features))
    return X, np.arange(n) % classes


@pytest.mark.parametrize("split", ["train", "test"])
def test_a_dataset_with_an_empty_split_is_refused_when_built(split):
    """An empty test split was a ZeroDivisionError at the end of fit(), an empty training split
    NumPy's 'Mean of empty slice' warning and a NaN loss."""
    X, y = _xy()
    parts = {"train": (X[:0], y[:0], X, y), "test": (X, y, X[:0], y[:0])}[split]
    with pytest.raises(ValueError, match=f"Dataset: X_{split} has no rows; the Trainer"):
        fm.Dataset("h", *parts, classes=3)


def test_a_sequence_dataset_of_lists_keeps_the_checked_arrays():
    """Lists and tuples passed the check, then repr(), .language_model and fit() read their
    .ndim: an AttributeError."""
    data = fm.SequenceDataset("x", "ab", [0, 1] * 10, (1, 0) * 5, context=2)
    assert data.language_model and isinstance(data.valid, np.ndarray)
    assert "20 train / 10 validation tokens" in repr(data)
    h = fm.Trainer(progress=False, model="transformer", batch_size=4).fit(data, steps=2)
    assert len(h) == 2
    ids = np.array([0, 1] * 10, np.uint8)
    assert fm.SequenceDataset("x", "ab", ids, ids, context=2).train is ids  # arrays: not copied


def test_the_experiment_line_names_the_model_and_optimizer_that_ran():
    """A model= MLP was described with the default hidden widths (MLP 16-64-64-4 for a
    16-8-4 network), and a sequence run with optimizer='adam8bit' as 'Adam'."""
    data = fm.teacher_gaussians(n=64)
    c = fm.compare(["32-true"], steps=1, progress=False, data=data,
                   model=fm.MLP((16, 8, 4), activation="tanh"))
    assert "MLP(16-8-4, tanh), Adam lr 0.001" in c.header and "64-64" not in c.header
    assert "Transformer (d_model 64" in fm.Trainer(model="transformer").describe()
    h = fm.Trainer(progress=False, model="transformer", optimizer="adam8bit").fit(
        fm.digit_reversal(n=64, digits=2), steps=1)
    assert "Adam8bit lr 0.001" in h.info["experiment"]


def test_evaluate_after_a_sequence_run_says_where_its_metrics_are():
    """evaluate(X, y) read X as float features and failed in the embedding: 'token ids must
    be integers, got dtype float32'."""
    trainer = fm.Trainer(progress=False, model="transformer")
    trainer.fit(fm.digit_reversal(n=64, digits=2), steps=1)
    X, y = _xy()
    with pytest.raises(TypeError, match="evaluate.* scores a classifier; this Trainer trained "
                                        "a Transformer .*final_val_loss"):
        trainer.evaluate(X, y)


def test_a_run_without_telemetry_shows_no_bytes_rather_than_zero():
    """With telemetry=False no bytes are counted, and the table said the run held '0 B'."""
    c = fm.compare(["32-true", {"precision": "32-true", "telemetry": False, "label": "quiet"}],
                   steps=1, progress=False, data=fm.teacher_gaussians(n=64))
    rows = {line.split("|")[1].strip(): line.split("|")[5].strip()
            for line in str(c).splitlines()[3:]}
    assert rows["quiet"] == "-" and rows["32-true"].endswith("KiB")
    assert c["quiet"].bytes_table().splitlines()[-1].split() == ["total", "-"]


@pytest.mark.parametrize("plot", ["plot_operand_qsnr", "plot_amax_history"])
def test_recipe_plots_of_a_run_without_telemetry_say_so(plot):
    """The operand records are empty with telemetry=False: the error was "no operand name
    contains ''; recorded: " (an empty list)."""
    from floatlab.mixed import recipe_plots

    h = fm.Trainer("fp8-delayed", progress=False, telemetry=False).fit(
        fm.teacher_gaussians(n=64), steps=1)
    args = (h,) if plot == "plot_operand_qsnr" else (h, "linear0.forward.a")
    with pytest.raises(ValueError, match="recorded no per-operand telemetry .*telemetry=True"):
        getattr(recipe_plots, plot)(*args)


def test_a_scaler_object_starts_every_run_from_its_own_state():
    """The Trainer stepped the caller's GradScaler itself: a second fit, and every compare()
    entry after the first, started from the previous run's scale (and workers=2, which pickles
    a copy per run, disagreed with the serial run)."""
    data = fm.teacher_gaussians(n=256)
    scaler = fm.GradScaler(init_scale=2.0**20, growth_interval=2)
    t = fm.Trainer("16-mixed", progress=False, scaler=scaler)
    first, second = t.fit(data, steps=4)["scale"], t.fit(data, steps=4)["scale"]
    np.testing.assert_array_equal(first, second)
    assert scaler.get_scale() == 2.0**20 and t.scaler is not scaler  # the caller's: untouched
    c = fm.compare(["16-mixed", "O1"], steps=3, progress=False, data=data,
                   scaler=fm.GradScaler(init_scale=2.0**20))
    assert [h["scale"][0] for h in c] == [2.0**20, 2.0**20]


def test_training_curves_of_a_sparse_history_column_mark_no_divergence():
    """test_accuracy is NaN between evaluations: training_curves marked 'NaN at step 0' as if
    the run had diverged, and its values between NaNs drew nothing visible."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from floatlab.plots import training_curves

    h = fm.Trainer(progress=False, eval_every=5).fit(fm.teacher_gaussians(n=256), steps=10)
    ax = training_curves(h, "test_accuracy")
    assert [t.get_text() for t in ax.texts] == []
    (curve,) = ax.lines
    assert curve.get_marker() == "."  # a dot on each value: single values between gaps show
    assert np.flatnonzero(np.isfinite(curve.get_ydata())).tolist() == [4, 9]
    ax = training_curves({"loss": [1.0, float("nan"), 0.5, float("inf"), float("nan")]})
    assert [t.get_text() for t in ax.texts] == ["inf at step 3"]  # diverged for good there
    plt.close("all")


def test_the_experiment_line_gives_the_rows_a_batch_holds():
    """With batch_size above the training rows each batch holds every row, and the header
    said '3 steps of 512' for batches of 128."""
    data = fm.teacher_gaussians(n=256)
    h = fm.Trainer(progress=False).fit(data, steps=1)
    assert "1 steps of 128 (every training row; batch_size 512)" in h.info["experiment"]
    assert "1 steps of 64, " in fm.Trainer(batch_size=64).describe(data, 1)


@pytest.mark.parametrize("precision, model, data", [
    ("fp6_e3m2-true", None, lambda: fm.teacher_gaussians(n=256)),  # Adam's eps rounds to 0
    ("float4_e2m1fn-mixed", "transformer", lambda: fm.digit_reversal(n=64, digits=2)),  # -inf
])
def test_a_run_in_a_format_without_nan_or_inf_says_why_it_stops(precision, model, data):
    """The rounding's own error surfaced mid-run ('replace NaNs before rounding (e.g.
    np.nan_to_num...)', 'pass saturate=True'): advice for a caller of floatlab.round, not for a
    Trainer user."""
    trainer = fm.Trainer(precision, progress=False, model=model, batch_size=16)
    with pytest.raises(ValueError, match=r"policy '.*': values rounded to float\d_\w+ \(\w+\) "
                                         r"hold (NaN|inf), .* A run in a format without NaN / "
                                         r"inf stops"):
        trainer.fit(data(), steps=3)
    with fm.use_precision(precision), pytest.raises(ValueError, match=r"\(activations\) hold "
                                                                      "NaN, which float6"):
        fm.quantize(np.array([np.nan]), "fp6_e3m2")
    with fm.use_precision(precision):  # a format with NaN keeps the rounding's own word
        assert np.isnan(fm.quantize(np.array([np.nan]), "fp8_e4m3fn")).all()


@pytest.mark.parametrize("entry, error", [
    ({"precision": "16-mixed", "scalar": None}, "unexpected keyword argument 'scalar'"),
    ({"precision": "16-mixed", "lr": -1}, "lr must be >= 0"),
    ({"precision": "16-mixed", "optimizer": "lbfgs"}, "optimizer='lbfgs'"),
])
def test_compare_checks_every_entry_before_the_first_run(entry, error, monkeypatch):
    """Only the entries' precisions were resolved up front (the docstring's 'a typo in the last
    one fails before the first run'): a bad option of a later entry failed after the earlier
    runs had finished."""
    from floatlab.mixed import trainer

    runs = []
    monkeypatch.setattr(trainer, "_run_one", lambda *args: runs.append(args))
    with pytest.raises((TypeError, ValueError), match=error):
        fm.compare(["32-true", entry], steps=1, progress=False, data=fm.teacher_gaussians(n=64))
    assert runs == []


@pytest.mark.parametrize("optimizer", ["adam", "adamw", "sgd", "adam8bit"])
def test_the_trainer_takes_lr_zero_as_its_optimizers_do(optimizer):
    """Trainer(lr=0) was 'lr must be > 0' while every optimizer takes lr = 0 as torch.optim
    does (a frozen run, a warm-up's first step); the weights then stay as they were, to the
    bit, and a negative lr is still refused."""
    model = fm.MLP((16, 8, 4), seed=1)
    t = fm.Trainer(progress=False, optimizer=optimizer, lr=0.0, model=model)
    h = t.fit(fm.teacher_gaussians(n=64), steps=3)
    assert len(h) == 3 and "lr 0," in h.info["experiment"]
    for before, after in zip(model.parameters(), t.model.parameters(), strict=True):
        assert before.data.tobytes() == after.data.tobytes()
    with pytest.raises(ValueError, match="lr must be >= 0, got -0.001"):
        fm.Trainer(lr=-1e-3)


def test_a_summary_without_telemetry_says_nothing_was_counted():
    """summary() said overflow=0 and total_bytes=0 for a telemetry=False run: counts of 0
    where nothing was counted (the table already showed '-')."""
    data = fm.teacher_gaussians(n=64)
    quiet = fm.Trainer(progress=False, telemetry=False).fit(data, steps=2)
    counted = fm.Trainer(progress=False).fit(data, steps=2)
    assert quiet.total_bytes is None
    assert (quiet.summary()["overflow"], quiet.summary()["total_bytes"]) == (None, None)
    assert np.isnan(quiet.summary()["underflow"])
    assert counted.summary()["overflow"] == 0 and counted.summary()["total_bytes"] > 0
    rows = fm.Comparison([counted, quiet]).rows()
    assert [r["total_bytes"] is None for r in rows] == [False, True]


def _same_float(a, b):
    return (np.isnan(a) and np.isnan(b)) or a == b


def _assert_same_history(a, b):
    assert b.precision == a.precision and len(b) == len(a)
    for name in a.columns:  # every value to the bit (NaN and inf included)
        assert np.array(b._rows[name]).tobytes() == np.array(a._rows[name]).tobytes(), name
    assert b.bytes == a.bytes
    for name in ("final_train_accuracy", "final_test_accuracy", "final_val_loss", "wall_time"):
        assert _same_float(getattr(a, name), getattr(b, name)), name
    kept = {k: v for k, v in a.info.items() if k not in ("policy", "operands")}
    assert {k: v for k, v in b.info.items() if k != "operands"} == kept
    assert "policy" not in b.info
    assert set(b.info.get("operands", {})) == set(a.info.get("operands", {}))
    for key, records in a.info.get("operands", {}).items():
        for x, y in zip(records, b.info["operands"][key], strict=True):
            assert all(_same_float(getattr(x, f), getattr(y, f)) for f in vars(x)), key
    assert b.summary().keys() == a.summary().keys()


@pytest.mark.parametrize("make", [
    lambda: fm.Trainer("16-true", progress=False).fit(fm.teacher_gaussians(n=64), steps=3),
    lambda: fm.Trainer("fp8-delayed", progress=False).fit(fm.teacher_gaussians(n=64), steps=2),
    lambda: fm.Trainer("32-true", progress=False, telemetry=False).fit(
        fm.teacher_gaussians(n=64), steps=2),
    lambda: fm.Trainer("bf16-mixed", model="transformer", progress=False).fit(
        fm.digit_reversal(n=64, digits=2), steps=2),
])
def test_a_history_is_saved_and_loaded_field_for_field(make, tmp_path):
    """A History could not be saved: to_dict() held only the columns and the summary, with
    NaN floats that strict JSON refuses, and nothing read it back."""
    import json

    h = make()
    d = h.to_dict()
    json.dumps(d, allow_nan=False)  # strict JSON: NaN and inf as strings
    assert d["dropped"] == ["policy"]
    _assert_same_history(h, fm.History.from_dict(d))
    h.save(tmp_path / "run.json")
    loaded = fm.History.load(tmp_path / "run.json")
    _assert_same_history(h, loaded)
    assert repr(loaded) == repr(h) and str(loaded) == str(h)


def test_a_history_inf_loss_and_a_hand_built_one_round_trip():
    h = fm.History("x", {"note": (1, "a"), "obj": object()})
    h._append(loss=float("inf"), accuracy=-0.0, skipped=True, overflow=2)
    h._append(loss=float("-inf"), scale=2.0**-149)
    d = h.to_dict()
    assert d["loss"] == ["inf", "-inf"] and d["dropped"] == ["obj"]
    back = fm.History.from_dict(d)
    assert back.info == {"note": [1, "a"]}  # a tuple comes back a list (JSON has no tuples)
    assert back["loss"].tolist() == [np.inf, -np.inf] and back["scale"][1] == 2.0**-149
    assert np.signbit(back["accuracy"][0]) and back["overflow"][0] == 2


@pytest.mark.parametrize("edit, match", [
    (lambda d: d.update(kind="floatlab.Comparison"), "not a saved History .*kind "
                                                     "'floatlab.Comparison'"),
    (lambda d: d.pop("kind"), "not a saved History .*kind None"),
    (lambda d: d.update(version=2), "version 2; this floatlab reads version 1"),
    (lambda d: d.update(loss=[1.0, 2.0]), "columns have different lengths"),
    (lambda d: d.update(loss=["NaN"]), r"loss\[0\] must be a number or 'nan'"),
    (lambda d: d.pop("step"), r"has no columns \['step'\]"),
])
def test_from_dict_refuses_another_kind_or_version(edit, match):
    h = fm.History("32-true")
    h._append(loss=1.0)
    d = h.to_dict()
    edit(d)
    with pytest.raises(ValueError, match=match):
        fm.History.from_dict(d)


def test_load_refuses_a_file_that_is_not_a_saved_history(tmp_path):
    (tmp_path / "a.json").write_text("[1, 2]")
    (tmp_path / "b.txt").write_text("loss,1.0\n")
    (tmp_path / "c.json").write_text('{"kind": "other"}')
    with pytest.raises(ValueError, match="holds a JSON list, not a saved History"):
        fm.History.load(tmp_path / "a.json")
    with pytest.raises(ValueError, match="is not JSON .*History.save"):
        fm.History.load(tmp_path / "b.txt")
    with pytest.raises(ValueError, match="not a saved History"):
        fm.History.load(tmp_path / "c.json")
    with pytest.raises(TypeError, match="takes the dict of History.to_dict"):
        fm.History.from_dict([1])


def test_compare_heads_the_table_with_what_every_entry_shares():
    """The header was the first entry's describe() line: rows run with AdamW, another lr or
    another model appeared under 'MLP 16-64-64-4, Adam lr 0.001'. It now holds the shared
    parts; each row's own settings are a column (absent when the entries share everything)."""
    data = fm.teacher_gaussians(n=64)
    c = fm.compare(["32-true", {"precision": "32-true", "optimizer": "adamw", "lr": 0.01},
                    {"precision": "bf16-mixed", "model": fm.MLP((16, 8, 4))}],
                   steps=2, progress=False, data=data)
    assert c.header == ("teacher_gaussians (32 train / 32 test), 2 steps of 32 (every training "
                        "row; batch_size 512), λ = 1, torch's CUDA autocast op lists")
    lines = str(c).splitlines()
    assert [cell.strip() for cell in lines[1].split("|")[1:3]] == ["precision", "settings"]
    assert [[cell.strip() for cell in line.split("|")[1:3]] for line in lines[3:]] == [
        ["32-true", "MLP 16-64-64-4, Adam lr 0.001"],
        ["32-true #2", "MLP 16-64-64-4, AdamW lr 0.01"],
        ["bf16-mixed", "MLP(16-8-4, relu), Adam lr 0.001"]]
    assert [r["settings"] for r in c.rows()][1] == "MLP 16-64-64-4, AdamW lr 0.01"
    for h, row in zip(c, c.rows(), strict=True):  # each run's full line is in its History
        assert h.info["experiment"].startswith("teacher_gaussians") and \
            row["settings"].split(", ")[-1] in h.info["experiment"]
    same = fm.compare(["32-true", "bf16-mixed"], steps=2, progress=False, data=data)
    assert same.header == fm.Trainer().describe(data, 2) and "settings" not in str(same)
    assert str(same).splitlines()[1].startswith("| precision  | train acc |")
    with pytest.raises(ValueError, match=r"settings must be one string per history \(2\)"):
        fm.Comparison(list(same), settings=["a"])
