"""StateAdam's one-pass storage of per-tensor scaled moments equals one fake_quantize per
tensor, bit for bit; FP16 masters (MS-AMP O3) are accepted (issue 11)."""

from __future__ import annotations

import numpy as np
import pytest

import floatlab
from floatlab.mixed import optim8bit, parameter, use_precision
from floatlab.mixed.optim8bit import StateAdam, _fake_quantize_each
from floatlab.mixed.recipe import msamp_scheme
from floatlab.quant.quantize import fake_quantize


@pytest.mark.parametrize("element", ["e4m3fn", "float16", "e5m2"])
def test_one_pass_equals_fake_quantize_per_tensor(element):
    spec = msamp_scheme(element)
    rng = np.random.default_rng(0)
    sizes = np.array([1024, 64, 1, 4096, 3, 7, 256])
    parts = [rng.standard_normal(n) * 10.0 ** rng.uniform(-12, 2) for n in sizes]
    parts[2][:] = 0.0                                   # an all-zero tensor
    parts[4] = np.array([448.0, -448 * 2.0**-20, 2.0**-30])  # exact power-of-two amax, tiny
    parts[5] = np.exp(rng.uniform(-40, 0, 7))           # 17 decades within one tensor
    values = np.concatenate(parts).astype(np.float32)
    got = _fake_quantize_each(values, sizes, spec)
    want = np.concatenate([fake_quantize(p.astype(np.float32), spec) for p in
                           np.split(values, np.cumsum(sizes)[:-1])]).astype(np.float32)
    assert got.dtype == np.float32
    assert got.tobytes() == want.tobytes()          # bit for bit, signed zeros included


@pytest.mark.parametrize("master", ["bf16-mixed", "msamp-O3"])
def test_state_adam_fast_path_matches_the_per_tensor_loop(monkeypatch, master):
    state = {"exp_avg": msamp_scheme("e4m3fn"), "exp_avg_sq": msamp_scheme("fp16")}

    def run(fast: bool):
        if not fast:
            monkeypatch.setattr(optim8bit, "_whole_group_path", lambda spec: False)
        rng = np.random.default_rng(1)
        with use_precision(master):
            params = [parameter(rng.standard_normal(s) * 0.1) for s in ((8, 16), (16,), (3, 8))]
            opt = StateAdam(params, lr=1e-2, state=state)
            for _ in range(5):
                for p in params:
                    p.grad = (rng.standard_normal(p.shape) * 1e-4).astype(np.float32)
                opt.step()
        monkeypatch.undo()
        return [p.data.copy() for p in params], [g.state for g in opt.groups]

    (w_fast, s_fast), (w_loop, s_loop) = run(True), run(False)
    for a, b in zip(w_fast, w_loop, strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(s_fast, s_loop, strict=True):
        for key in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_array_equal(a[key], b[key])
    if master == "msamp-O3":
        for w in w_fast:                                    # FP16 masters
            np.testing.assert_array_equal(w, w.astype(np.float16).astype(w.dtype))


def test_state_adam_refuses_low_masters_other_than_fp16():
    with use_precision("bf16-true"):
        w = parameter(np.zeros(3))
        with pytest.raises(ValueError, match="float32 \\(or MS-AMP O3's float16\\) master"):
            StateAdam([w], state={"exp_avg": "e4m3fn"})


@pytest.mark.parametrize("make", [
    lambda ps: optim8bit.Adam8bit(ps, min_8bit_size=0),
    lambda ps: optim8bit.Adam8bit(ps, min_8bit_size=0, block=None, map="linear"),
    lambda ps: StateAdam(ps, state={"exp_avg": msamp_scheme(), "exp_avg_sq": msamp_scheme()}),
    lambda ps: StateAdam(ps, state={"exp_avg": "mxfp8_e4m3", "exp_avg_sq": "fp8_tensorwise"},
                         expand=True),
])
def test_empty_parameters_have_no_moments_to_quantise(make):
    """A parameter with no values (torch allows them) beside others: its moments were handed
    to fake_quantize, which refuses an empty array (ValueError "x is empty"), or folded into
    the one-pass storage's reduceat (IndexError deep in NumPy); the other parameters train
    exactly as without it, and it adds no state bytes."""
    def train(with_empty):
        rng = np.random.default_rng(0)
        w = parameter(rng.standard_normal(300).astype(np.float32))
        b = parameter(rng.standard_normal(3).astype(np.float32))
        ps = [parameter(np.zeros(0, np.float32)), w, parameter(np.zeros((2, 0), np.float32)),
              b] if with_empty else [w, b]
        opt = make(ps)
        for _ in range(3):
            for p in ps:
                p.grad = rng.standard_normal(p.shape).astype(np.float32) if p.size else \
                    np.zeros(p.shape, np.float32)
            opt.step()
        return w.data, b.data, opt.state_bytes(), [p.shape for p in ps]

    w, b, nbytes, shapes = train(True)
    w0, b0, nbytes0, _ = train(False)
    assert np.array_equal(w, w0) and np.array_equal(b, b0)
    assert nbytes == nbytes0 and shapes == [(0,), (300,), (2, 0), (3,)]


@pytest.mark.parametrize("spec, match", [
    ("fp8_1x128", r"1x128 tiles, which need a 2-D tensor.*'dynamic8'"),
    ("fp8_128x128", "128x128 tiles"),
    (floatlab.Scheme("e4m3fn", "column", "float32"), "per-column scales"),
    (floatlab.Scheme("e4m3fn", 32, axis=1), "runs along axis 1.*axis=-1"),
    (floatlab.Scheme("e2m1", 16, "e4m3fn", hadamard=16), "Hadamard.*300 values"),
])
def test_schemes_that_cannot_hold_a_flat_moment_are_refused_at_construction(spec, match):
    """These schemes failed only at the first step, deep inside the quantiser ("the 2-D tile
    (1, 128) needs at least 2 dimensions, got shape (300,)"): a moment is one flat vector per
    parameter. Now the constructor names the scheme and what works instead."""
    for make in (lambda ps: StateAdam(ps, state={"exp_avg_sq": spec}),
                 lambda ps: StateAdam(ps, state={"exp_avg": spec}, min_8bit_size=0)):
        with pytest.raises(ValueError, match=match):
            make([parameter(np.ones(300, np.float32))])
    # a Hadamard transform is fine where every quantised tensor has whole blocks
    if isinstance(spec, floatlab.Scheme) and spec.hadamard:
        StateAdam([parameter(np.ones(320, np.float32)), parameter(np.ones(3, np.float32))],
                  state={"exp_avg": spec}, min_8bit_size=16)


def test_expand_needs_a_float_element_at_construction():
    with pytest.raises(ValueError, match=r"expand=True \(COAT\) needs a float element.*dynamic8"):
        StateAdam([parameter(np.ones(300, np.float32))], state={"exp_avg": "dynamic8"},
                  expand=True)


def test_a_stochastic_moment_scheme_follows_the_seed():
    """A stochastic-rounding Scheme for a moment drew fresh entropy at every step (the
    optimizer's seed was not passed to the quantiser), so two runs with seed=0 differed."""
    def run(seed):
        w = parameter(np.linspace(-1, 1, 64).astype(np.float32))
        s = floatlab.Scheme("e2m1", 16, "e4m3fn", rounding="stochastic")
        opt = StateAdam([w], state={"exp_avg": s, "exp_avg_sq": s}, seed=seed)
        for i in range(3):
            w.grad = np.linspace(-1, 1, 64).astype(np.float32) * (i + 1)
            opt.step()
        return w.data.copy()
    assert np.array_equal(run(0), run(0))
    assert not np.array_equal(run(0), run(1))


@pytest.mark.parametrize("name, match", [
    ("fp8", r"state\['exp_avg'\]: format name 'fp8' is ambiguous.*Say which one: "
            r"float8_e4m3fn \(max 448\)"),
    ("fp17", r"state\['exp_avg'\]='fp17' is neither a floatlab format nor a scheme name\. "
             r"Did you mean 'fp16'.*\? E\.g\. 'e4m3fn'"),
    ("mxfp9", r"neither a floatlab format nor a scheme name\. Did you mean .*'mxfp8'"),
])
def test_state_names_keep_the_candidates_and_close_matches_of_the_resolvers(name, match):
    # the format error (its candidates for an ambiguous name, its close matches) was dropped
    # for one fixed sentence; it is a FormatNameError, as unknown names are everywhere
    with pytest.raises(floatlab.FormatNameError, match=match):
        StateAdam([parameter(np.ones(4))], state={"exp_avg": name})


@pytest.mark.parametrize("state", [{"exp_avg": "e4m3fn"},
                                   {"exp_avg": "mxfp8_e4m3", "exp_avg_sq": "fp16"}])
def test_expand_with_a_plain_format_is_refused(state):
    """expand=True with a plain Format moment was silently ignored (the format rounded the
    unexpanded values): COAT's expansion needs the block scales of a Scheme to bring the
    expanded values back into range. Now the constructor names the moment and the fix."""
    key = "exp_avg" if len(state) == 1 else "exp_avg_sq"
    with pytest.raises(ValueError, match=rf"expand=True \(COAT\).*state\['{key}'\] = "
                                         r"float.* is a plain format.*expand=False"):
        StateAdam([parameter(np.ones(300, np.float32))], state=state, expand=True)
