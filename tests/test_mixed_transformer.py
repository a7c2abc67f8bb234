"""The Transformer model, its torch-style state_dict, the sequence datasets, and training it
with the Trainer: forward against a plain NumPy float32 implementation written here, weight
tying against finite differences, and the bad inputs."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

import floatlab.mixed as fm
from floatlab.mixed import Tensor, Trainer, Transformer, char_lm, digit_reversal, use_precision

RNG = np.random.default_rng(99)


# --------------------------------------------------------------------------- a plain float32 GPT

def _ln(x, w, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + np.float32(1e-5)) * w + b


def numpy_gpt(state, ids, heads):
    """nanoGPT's forward written directly in NumPy float32 from the state_dict."""
    s = {k: np.asarray(v, np.float32) for k, v in state.items()}
    batch, t = ids.shape
    d = s["transformer.wte.weight"].shape[1]
    hd = d // heads
    x = s["transformer.wte.weight"][ids] + s["transformer.wpe.weight"][:t]
    layers = len({k.split(".")[2] for k in s if k.startswith("transformer.h.")})
    for i in range(layers):
        p = f"transformer.h.{i}."
        h = _ln(x, s[p + "ln_1.weight"], s[p + "ln_1.bias"])
        qkv = h @ s[p + "attn.c_attn.weight"].T + s[p + "attn.c_attn.bias"]
        q, k, v = (qkv[..., j * d:(j + 1) * d].reshape(batch, t, heads, hd).transpose(0, 2, 1, 3)
                   for j in range(3))
        att = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(hd))
        att = np.where(np.triu(np.ones((t, t), bool), 1), -np.inf, att)
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(batch, t, d)
        x = x + y @ s[p + "attn.c_proj.weight"].T + s[p + "attn.c_proj.bias"]
        h = _ln(x, s[p + "ln_2.weight"], s[p + "ln_2.bias"])
        f = h @ s[p + "mlp.c_fc.weight"].T + s[p + "mlp.c_fc.bias"]
        f = 0.5 * f * (1 + np.tanh(np.float32(math.sqrt(2 / math.pi)) * (f + 0.044715 * f**3)))
        x = x + f @ s[p + "mlp.c_proj.weight"].T + s[p + "mlp.c_proj.bias"]
    x = _ln(x, s["transformer.ln_f.weight"], s["transformer.ln_f.bias"])
    return x @ s["lm_head.weight"].T


def _perturbed(model, scale=0.3):
    """A state_dict with every parameter moved off its initial value (layer norms included)."""
    state = model.state_dict()
    for k in state:
        if k != "lm_head.weight":
            state[k] = (state[k] + RNG.normal(0, scale, state[k].shape)).astype(np.float32)
    state["lm_head.weight"] = state["transformer.wte.weight"]
    return state


def test_float32_forward_equals_a_plain_numpy_implementation():
    model = Transformer(vocab=13, d_model=32, heads=4, layers=2, context=16, seed=3)
    state = _perturbed(model)
    model.load_state_dict(state)
    ids = RNG.integers(0, 13, (3, 16))
    logits = model(ids)
    assert logits.shape == (3, 16, 13) and logits.data.dtype == np.float32
    np.testing.assert_allclose(logits.data, numpy_gpt(state, ids, heads=4), rtol=2e-5,
                               atol=2e-5)
    short = model(ids[:, :5]).data  # shorter sequences see the same prefix
    np.testing.assert_allclose(short, logits.data[:, :5], rtol=1e-5, atol=1e-5)


def test_state_dict_has_torch_names_and_shapes_and_round_trips():
    model = Transformer(vocab=11, d_model=16, heads=2, layers=2, context=8)
    state = model.state_dict()
    assert state["transformer.wte.weight"].shape == (11, 16)
    assert state["transformer.wpe.weight"].shape == (8, 16)
    assert state["transformer.h.1.attn.c_attn.weight"].shape == (48, 16)
    assert state["transformer.h.0.mlp.c_fc.weight"].shape == (64, 16)
    assert state["transformer.h.0.mlp.c_proj.weight"].shape == (16, 64)
    assert state["transformer.ln_f.bias"].shape == (16,)
    np.testing.assert_array_equal(state["lm_head.weight"], state["transformer.wte.weight"])
    assert len(state) == 4 + 12 * 2 + 1
    other = Transformer(vocab=11, d_model=16, heads=2, layers=2, context=8, seed=5)
    new = _perturbed(model)
    frozen = {k: v.copy() for k, v in new.items()}
    other.load_state_dict(new)
    for k, v in other.state_dict().items():
        np.testing.assert_array_equal(v, new[k])
        np.testing.assert_array_equal(new[k], frozen[k])           # input not mutated...
    other.transformer.wte.weight.data += 1
    np.testing.assert_array_equal(new["transformer.wte.weight"], frozen["transformer.wte.weight"])
    with use_precision("bf16-true"):                              # ...and rounded on load
        low = Transformer(vocab=11, d_model=16, heads=2, layers=2, context=8)
        low.load_state_dict(new)
    assert low.transformer.wte.weight.fmt.name == "bfloat16"


@pytest.mark.parametrize("edit, error, match", [
    (lambda s: s.pop("transformer.h.0.ln_1.bias"), KeyError, "missing keys"),
    (lambda s: s.update(extra=np.zeros(1)), KeyError, "unexpected keys"),
    (lambda s: s.update({"transformer.wpe.weight": np.zeros((9, 16))}), ValueError,
     r"shape \(9, 16\)"),
    (lambda s: s.update({"lm_head.weight": s["transformer.wte.weight"] + 1}), ValueError,
     "tied"),
    (lambda s: s.update({"transformer.ln_f.bias": np.array(["a"] * 16)}), TypeError, "dtype"),
])
def test_load_state_dict_refuses_a_different_architecture(edit, error, match):
    model = Transformer(vocab=11, d_model=16, heads=2, layers=1, context=8)
    state = model.state_dict()
    edit(state)
    with pytest.raises(error, match=match):
        model.load_state_dict(state)


def test_tied_embedding_gradient_matches_finite_differences():
    with use_precision("64-true"):
        model = Transformer(vocab=7, d_model=8, heads=2, layers=1, context=5, seed=1)
        ids, targets = RNG.integers(0, 7, (2, 5)), RNG.integers(0, 7, (2, 5))
        fm.sequence_loss(model(ids), targets).backward()
        w = model.transformer.wte.weight
        grad = w.grad.copy()
        h = 1e-6
        for idx in [(0, 0), (3, 5), (6, 7), (int(ids[0, 0]), 2)]:
            original = w.data[idx]
            w.data[idx] = original + h
            up = fm.sequence_loss(model(ids), targets).item()
            w.data[idx] = original - h
            down = fm.sequence_loss(model(ids), targets).item()
            w.data[idx] = original
            assert math.isclose(grad[idx], (up - down) / (2 * h), rel_tol=1e-5, abs_tol=1e-9)
        assert [n for n, _ in model.named_parameters()].count("transformer.wte.weight") == 1


@pytest.mark.parametrize("call, error, match", [
    (lambda m: m(np.array([[0, 11]])), ValueError, r"\[0, 11\)"),
    (lambda m: m(np.zeros((1, 9), np.int64)), ValueError, "context is 8"),
    (lambda m: m(np.zeros((2, 0), np.int64)), ValueError,
     r"sequences of 0 tokens \(ids of shape \(2, 0\)\); pass at least one token"),
    (lambda m: m(np.zeros(4, np.int64)), ValueError, r"\(batch, T\)"),
    (lambda m: m(np.full((1, 2), 0.5)), TypeError, "integers"),
])
def test_bad_token_input(call, error, match):
    model = Transformer(vocab=11, d_model=16, heads=2, layers=1, context=8)
    with pytest.raises(error, match=match):
        call(model)


@pytest.mark.parametrize("kwargs, match", [
    (dict(vocab=11, d_model=10, heads=4), "must divide"),
    (dict(vocab=0), "vocab must be >= 1, got 0"),
    (dict(vocab=11, gelu="erf"), "'tanh' or 'none'"),
    (dict(vocab=11, dropout=1.0), "dropout"),
    (dict(vocab=11, layer_norm_stats="kahan"), "welford"),
    (dict(vocab=11, scale_queries="no"), "True or False"),
    (dict(vocab=3.5), "vocab must be a size"),
])
def test_bad_model_arguments(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        Transformer(**{"d_model": 16, "heads": 2, "layers": 1, "context": 8, **kwargs})


@pytest.mark.parametrize("call, error, match", [
    (lambda: char_lm(context=True), TypeError, "context must be a whole number"),
    (lambda: char_lm(context="64"), TypeError, r"int\('64'\)"),
    (lambda: char_lm(context=0), ValueError, "context must be >= 1"),
    (lambda: char_lm(valid_fraction=1.5), ValueError, r"valid_fraction must be in \(0, 1\)"),
    (lambda: char_lm(max_chars=2.5), TypeError, "max_chars must be a whole number"),
    (lambda: digit_reversal(digits=2.5), TypeError, "digits must be a whole number"),
    (lambda: digit_reversal(n=1), ValueError, "n must be >= 2"),
    (lambda: digit_reversal(valid_fraction="0.1"), TypeError, "valid_fraction must be a number"),
    (lambda: digit_reversal(seed=-1), ValueError, "non-negative"),
    (lambda: digit_reversal(n=10).evaluation_batches(split="test"), ValueError,
     "'train' or 'valid'"),
    (lambda: digit_reversal(n=10).evaluation_batches(size=0), ValueError, "size must be >= 1"),
    (lambda: fm.layers.dropout(Tensor([1.0]), 0.5, rng=-1), ValueError, "non-negative"),
    (lambda: fm.layers.dropout(Tensor([1.0]), 0.5, rng="7"), TypeError, "Generator"),
])
def test_bad_dataset_and_dropout_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_load_state_dict_takes_nan_weights_of_a_diverged_run():
    # torch loads them; the tied copies are equal once NaN counts as equal to NaN
    model = Transformer(11, 16, 2, 1, 8)
    state = {k: np.full_like(v, np.nan) for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    assert np.isnan(model.state_dict()["transformer.wte.weight"]).all()


def test_dropout_masks_are_seeded_and_off_in_eval():
    ids = RNG.integers(0, 11, (2, 6))
    a = Transformer(11, 16, 2, 1, 8, dropout=0.2, seed=4)
    b = Transformer(11, 16, 2, 1, 8, dropout=0.2, seed=4)
    np.testing.assert_array_equal(a(ids).data, b(ids).data)
    assert not np.array_equal(a(ids).data, a(ids).data)      # a fresh mask per call
    a.eval()
    np.testing.assert_array_equal(a(ids).data, a(ids).data)


# --------------------------------------------------------------------------- datasets

def test_char_lm_is_deterministic_and_covers_its_text():
    a, b = char_lm(context=16), char_lm(context=16)
    np.testing.assert_array_equal(a.valid, b.valid)
    text = fm.textdata.python_docs_text()
    assert a.decode(np.concatenate([a.train, a.valid])) == text
    assert a.vocab == "".join(sorted(set(text)))
    assert 0.05 < len(a.valid) / len(text) < 0.15
    x, y, mask = a.batch(np.random.default_rng(0), 4)
    assert x.shape == y.shape == mask.shape == (4, 16) and mask.all()
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])
    assert not a.train.flags.writeable
    np.testing.assert_array_equal(a.encode("def"), [a.vocab.index(c) for c in "def"])
    with pytest.raises(ValueError, match="not in the char_lm vocabulary"):
        a.encode("\x00")
    with pytest.raises(ValueError, match="context"):
        char_lm(context=0)


def test_digit_reversal_answers_are_the_reversed_digits():
    data = digit_reversal(n=50, digits=5, seed=2)
    for row in data.train:
        text = data.decode(row)
        left, right = text.split(">")
        assert right == left[::-1] and len(left) == 5
    x, y, mask = data.batch(np.random.default_rng(1), 3)
    assert mask[0].tolist() == [False] * 5 + [True] * 5
    assert all(data.decode(y[i][mask[i]]) == data.decode(x[i][:5])[::-1] for i in range(3))


def test_digits_needs_the_data_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install floatlab\[data\]"):
        fm.digits()


def test_digits_loads_the_bundled_8x8_digits():
    pytest.importorskip("sklearn", reason="the optional 'data' extra is not installed")
    d = fm.digits()
    assert (d.features, d.classes, len(d.X_train) + len(d.X_test)) == (64, 10, 1797)
    assert d.X_train.dtype == np.float32 and 0 <= d.X_train.min() and d.X_train.max() == 1
    h = Trainer("bf16-mixed", progress=False).fit(d, steps=3)
    assert len(h) == 3


# --------------------------------------------------------------------------- training

def test_trainer_trains_a_transformer_and_reports_validation_loss():
    data = digit_reversal(n=512, digits=3)
    h = Trainer("32-true", model="transformer", progress=False, eval_every=4).fit(data, steps=8)
    assert h.info["experiment"].startswith("SequenceDataset('digit_reversal'")
    val = h["val_loss"]
    assert np.isfinite(val[[3, 7]]).all() and np.isnan(val[[0, 1, 2, 4]]).all()
    assert h.final_val_loss == val[7] and h.final_val_perplexity == pytest.approx(
        math.exp(val[7]))
    assert h["loss"][-1] < h["loss"][0]
    assert 0 <= h.final_test_accuracy <= 1


def test_trainer_device_reaches_the_transformers_ops():
    # Trainer(device=...) is the only switch: the CPU lists give the same first loss (the
    # softmax output is rounded to bf16 for the next bmm either way) but other gradients, so
    # the trained weights differ
    data = digit_reversal(n=256, digits=3)
    model = Transformer(data.vocab, 16, 2, 1, data.context, seed=1)
    trainers = {device: Trainer("bf16-mixed", device=device, model=model, batch_size=8,
                                progress=False, telemetry=False) for device in ("cuda", "cpu")}
    runs = {device: t.fit(data, steps=3) for device, t in trainers.items()}
    assert runs["cpu"].info["device"] == "cpu" and runs["cuda"].info["device"] == "cuda"
    assert runs["cpu"].info["experiment"].endswith("torch's CPU autocast op lists")
    assert runs["cuda"]["loss"][0] == runs["cpu"]["loss"][0]
    weights = {device: t.model.state_dict() for device, t in trainers.items()}
    name = "transformer.h.0.attn.c_attn.weight"  # upstream of the attention softmax
    assert not np.array_equal(weights["cuda"][name], weights["cpu"][name])
    with pytest.raises(ValueError, match="device='tpu'"):
        Trainer("bf16-mixed", device="tpu", model="transformer")


@pytest.mark.parametrize("recipe", ["fp8-delayed", "mxfp8"])
def test_recipes_quantise_every_projection_of_the_transformer(recipe):
    # issue 12, phenomenon 6: the four projections of the block and the tied output layer go
    # through the recipe's three GEMMs; each fit opens its own RecipeRun (delayed-scaling
    # histories do not leak from one fit into the next, so refitting repeats the run exactly)
    data = digit_reversal(n=256, digits=3)
    model = Transformer(data.vocab, 16, 2, 1, data.context, seed=1)
    trainer = Trainer(recipe, model=model, batch_size=8, progress=False)
    first = trainer.fit(data, steps=3)
    run = trainer.recipe_run
    assert {key.rsplit(".", 2)[0] for key in run.history} == {f"linear{i}" for i in range(5)}
    assert all(len(stats) == 3 for stats in run.history.values())   # one record per step
    assert run.history["linear4.forward.b"][0].n == model.state_dict()[
        "transformer.wte.weight"].size                                # the tied head
    assert np.isfinite(first["clipped"]).all() and np.isfinite(first["loss"]).all()
    again = trainer.fit(data, steps=3)
    assert trainer.recipe_run is not run
    np.testing.assert_array_equal(again["loss"], first["loss"])
    plain = Trainer("bf16-mixed", model=model, batch_size=8, progress=False,
                    telemetry=False).fit(data, steps=3)
    assert plain["loss"][0] != first["loss"][0]                     # the recipe did quantise


def test_compare_on_sequences_shows_perplexity_and_16_true_fails():
    data = digit_reversal(n=512, digits=3)
    model = Transformer(data.vocab, 16, 2, 1, data.context)
    result = fm.compare(["32-true", "bf16-mixed", "16-true"], steps=4, progress=False,
                        data=data, model=model)
    table = str(result)
    assert "val loss" in table and "perplexity" in table
    assert not result["32-true"].went_nan and result["16-true"].went_nan
    assert abs(result["bf16-mixed"].final_val_loss - result["32-true"].final_val_loss) < 0.05


@pytest.mark.parametrize("model, data, error, match", [
    (Transformer(12, 16, 2, 1, 8), digit_reversal(n=10, digits=3), ValueError,
     "vocabulary mismatch"),
    (Transformer("abcdefghijk", 16, 2, 1, 8), digit_reversal(n=10, digits=3), ValueError,
     "vocabulary mismatch"),
    (Transformer(11, 16, 2, 1, 4), digit_reversal(n=10, digits=3), ValueError,
     "context is 4"),
    ("transformer", fm.teacher_gaussians(n=64), TypeError, "token sequences"),
    (None, digit_reversal(n=10, digits=3), TypeError, "train a Transformer"),
])
def test_trainer_refuses_mismatched_model_and_data(model, data, error, match):
    with pytest.raises(error, match=match):
        Trainer("32-true", model=model, progress=False).fit(data, steps=1)


def test_trainer_refuses_unknown_model_names():
    with pytest.raises(ValueError, match="'transformer'"):
        Trainer(model="gpt2")


def test_outputs_are_tensors_of_the_policy_format():
    with use_precision("16-mixed"):
        model = Transformer(11, 16, 2, 1, 8)
        out = model(np.zeros((1, 3), np.int64))
    assert isinstance(out, Tensor) and out.fmt.name == "float16"


def test_cpu_autocast_lists_change_the_gradients_upstream_of_softmax_only():
    data = digit_reversal(n=64, digits=3)
    x, y, mask = data.batch(np.random.default_rng(0), 8)
    grads, losses = {}, {}
    for device in ("cuda", "cpu"):
        with use_precision("bf16-mixed", device=device):
            model = Transformer(data.vocab, 16, 2, 1, data.context, seed=2)
            loss = fm.sequence_loss(model(x), y, mask)
            loss.backward()
        losses[device] = loss.item()
        grads[device] = dict((n, p.grad) for n, p in model.named_parameters())
    assert losses["cuda"] == losses["cpu"]  # softmax output is rounded to bf16 for the bmm anyway
    for name in ("transformer.h.0.attn.c_attn.weight", "transformer.h.0.ln_1.weight"):
        assert not np.array_equal(grads["cuda"][name], grads["cpu"][name])
    for name in ("transformer.h.0.attn.c_proj.weight", "transformer.h.0.mlp.c_fc.weight"):
        np.testing.assert_array_equal(grads["cuda"][name], grads["cpu"][name])


# --------------------------------------------------------------------------- gradient underflow

def test_parameter_gradient_underflow_counts_every_part_of_the_transformer():
    # the oracle: the zero entries of every parameter's finished gradient (embedding, layer
    # norms, attention, MLP), skipping only the position rows no sequence reached
    data = digit_reversal(n=64, digits=3)
    model = Transformer(data.vocab, 16, 2, 1, data.context, seed=3)
    ids, targets, mask = data.batch(np.random.default_rng(0), 8)
    ids, targets = ids[:, :5], targets[:, :5]   # 5 of the context's positions
    stats = fm.StepStats()
    with use_precision("16-true"), fm.recording(stats):
        loss = fm.sequence_loss(model(ids), targets) * 2.0**-14   # a small loss: some underflow
        loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    assert {"transformer.wte.weight", "transformer.wpe.weight", "transformer.h.0.ln_1.weight",
            "transformer.h.0.attn.c_attn.weight", "transformer.h.0.mlp.c_fc.weight",
            "transformer.ln_f.bias"} <= set(grads)
    expected = sum(g.size for g in grads.values()) - (data.context - 5) * 16   # wpe rows >= 5
    zeros = sum(int(np.count_nonzero(g == 0)) for g in grads.values())
    zeros -= int(np.count_nonzero(grads["transformer.wpe.weight"][5:] == 0))
    assert np.all(grads["transformer.wpe.weight"][5:] == 0)
    assert (stats.param_grads, stats.param_zero_grads) == (expected, zeros)
    assert 0 < zeros < expected and stats.relu_passed == 0
    assert stats.underflow_fraction == zeros / expected


def test_transformer_underflow_column_shows_fp16_losing_its_gradients():
    # as the MLP's column does: fp16 gradients of a loss scaled by 2**-20 underflow without a
    # loss scaler (every parameter gradient is zero), the dynamic scaler and bf16 keep them
    data = digit_reversal(n=512, digits=3)
    model = Transformer(data.vocab, 16, 2, 1, data.context, seed=1)
    runs = {label: Trainer(model=model, batch_size=16, progress=False, eval_every=100,
                           loss_multiplier=2.0**-20, **kw).fit(data, steps=3)
            for label, kw in {"32-true": {"precision": "32-true"},
                              "unscaled": {"precision": "16-mixed", "scaler": None},
                              "scaled": {"precision": "16-mixed"},
                              "bf16": {"precision": "bf16-mixed"}}.items()}
    assert runs["32-true"].mean("underflow") < 1e-3
    assert runs["unscaled"].mean("underflow") > 0.95
    assert runs["scaled"].mean("underflow") < 0.05
    assert runs["bf16"].mean("underflow") < 1e-3
    table = str(fm.compare(["32-true"], steps=1, progress=False, data=data, model=model,
                           batch_size=4)).splitlines()
    header, row = ([c.strip() for c in line.split("|")] for line in (table[1], table[3]))
    assert row[header.index("underflow")] == "0.0%"   # a number, no longer "-"
