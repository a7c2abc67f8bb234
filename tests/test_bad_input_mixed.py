"""Bad input to the training lab (floatlab.mixed): each case gets an error that names the
argument and the fix (DEVELOPERS.md, "Bad input"), never a crash inside NumPy, a truthy string
or a silently wrong answer; and valid edge cases (0-d, empty) work.

Found by the h-audit-mixed fuzz pass: every case here failed before its fix.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import floatlab.mixed as fm
from floatlab.mixed import Tensor, layers


def _t(*shape: int, **kw) -> Tensor:
    return Tensor(np.ones(shape, np.float32), **kw)


# --------------------------------------------------------------------------- Tensor, autograd

@pytest.mark.parametrize("value", ["False", 0, None])
def test_tensor_requires_grad_is_a_real_flag(value):
    with pytest.raises(TypeError, match="requires_grad must be True or False, got"):
        Tensor([1.0], requires_grad=value)


def test_backward_retain_graph_is_a_real_flag():
    y = (_t(2, requires_grad=True) * 2).sum()
    with pytest.raises(TypeError, match="retain_graph must be True or False, got 'no'"):
        y.backward(retain_graph="no")


def test_len_of_a_0d_tensor_says_what_to_use():
    with pytest.raises(TypeError, match=r"0-d tensor; use \.item\(\)"):
        len(Tensor(2.0))


@pytest.mark.parametrize("op", ["sum", "mean", "softmax", "log_softmax"])
@pytest.mark.parametrize("axis, error, match", [
    (5, ValueError, r"axis 5 is out of range for a tensor of 2 dimension\(s\); use an axis in "
                    r"\[-2, 2\)"),
    (-3, ValueError, "axis -3 is out of range"),
    (1.5, TypeError, "axis must be an int, a tuple of ints or None, got 1.5"),
    ("0", TypeError, "axis must be an int, a tuple of ints or None, got '0'"),
    (True, TypeError, "axis must be an int, a tuple of ints or None, got True"),
    ((0, -2), ValueError, r"axis \(0, -2\) names axis 0 twice; list each axis once"),
])
def test_reduction_axis_is_checked(op, axis, error, match):
    with pytest.raises(error, match=f"{op}: {match}"):
        if op == "sum":
            _t(2, 3).sum(axis=axis)
        else:
            getattr(fm, op)(_t(2, 3), axis=axis)


@pytest.mark.parametrize("op", ["sum", "mean", "softmax", "log_softmax"])
def test_reduction_axis_out_of_range_is_also_torchs_index_error(op):
    # torch raises IndexError ("Dimension out of range"), as numpy's AxisError (the error
    # before the up-front check) is one: except IndexError written for torch still catches it
    with pytest.raises(IndexError, match=f"{op}: axis 2 is out of range"):
        getattr(fm, op)(_t(2, 3), axis=2)


@pytest.mark.parametrize("op", ["sum", "mean"])
def test_reduction_axis_named_twice_is_also_torchs_runtime_error(op):
    # torch: RuntimeError "dim 0 appears multiple times in the list of dims"
    with pytest.raises(RuntimeError, match=rf"{op}: axis \(0, 0\) names axis 0 twice"):
        getattr(_t(2, 3), op)(axis=(0, 0))


@pytest.mark.parametrize("op", ["sum", "mean"])
def test_reduction_keepdims_is_a_real_flag(op):
    with pytest.raises(TypeError, match=f"{op}: keepdims must be True or False, got 'False'"):
        getattr(_t(2, 3), op)(axis=0, keepdims="False")


def test_reductions_take_an_axis_list_like_a_tuple():
    x = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert x.sum(axis=[0, 1]).item() == x.sum(axis=(0, 1)).item() == 15.0


def test_softmax_and_log_softmax_of_0d_are_0d():
    # torch: softmax of a single value is 1, log_softmax 0; their gradients are 0
    for op, value in ((fm.softmax, 1.0), (fm.log_softmax, 0.0)):
        for x in (Tensor(3.0, requires_grad=True), Tensor(np.float32(3.0), requires_grad=True)):
            y = op(x)
            assert y.shape == () and y.item() == value
            y.backward()
            assert x.grad.shape == () and x.grad == 0.0
    x = Tensor(np.float32(3.0), requires_grad=True)
    x.mean(axis=-1).backward()  # axis 0 / -1 of a 0-d tensor, as torch's dim
    assert x.grad == 1.0


@pytest.mark.parametrize("op", [fm.softmax, fm.log_softmax])
def test_softmax_over_an_empty_axis_is_empty(op):
    x = Tensor(np.zeros((2, 0), np.float32), requires_grad=True)
    y = op(x)
    assert y.shape == (2, 0)
    y.sum().backward()
    assert x.grad.shape == (2, 0)


# --------------------------------------------------------------------------- functional ops

@pytest.mark.parametrize("weight, bias, match", [
    (np.ones((4, 3)), None, "linear: weight must be a floatlab.mixed Tensor, got ndarray; wrap "
                            r"arrays with floatlab.mixed.parameter\(x\)"),
    (None, None, "linear: weight must be a floatlab.mixed Tensor, got NoneType"),
    ([[1.0] * 3], None, "linear: weight must be a floatlab.mixed Tensor, got list"),
    (_t(4, 3), np.ones(4), "linear: bias must be a floatlab.mixed Tensor or None, got ndarray"),
])
def test_linear_weight_and_bias_must_be_tensors(weight, bias, match):
    with pytest.raises(TypeError, match=match):
        fm.linear(_t(2, 3), weight, bias)


@pytest.mark.parametrize("op, call", [
    ("cross_entropy", lambda t: fm.cross_entropy(_t(3, 4), t)),
    ("accuracy", lambda t: fm.accuracy(np.ones((3, 4)), t)),
])
def test_masked_targets_are_refused(op, call):
    with pytest.raises(TypeError, match=f"{op}: targets is a masked array; floatlab would lose"):
        call(np.ma.array([0, 1, 2], mask=[0, 1, 0]))


@pytest.mark.parametrize("targets, error, match", [
    (["a", "b", "c"], TypeError, "targets must be integer class indices, got dtype <U1"),
    ([0, 1], ValueError, r"targets have shape \(2,\) but the logits have 3 rows"),
    ([[0], [1], [2]], ValueError, r"targets have shape \(3, 1\)"),
    ([0, 1, 9], ValueError, r"targets must lie in \[0, 4\) for 4 classes, got values from 0 "
                            "to 9"),
    ([0.5, 1, 2], TypeError, "targets must be integer class indices, got dtype float64"),
])
def test_accuracy_checks_its_targets_like_cross_entropy(targets, error, match):
    # these used to compare unequal (or broadcast) and score as a silent wrong accuracy
    with pytest.raises(error, match=f"accuracy: {match}"):
        fm.accuracy(np.ones((3, 4)), targets)


@pytest.mark.parametrize("logits, error, match", [
    ("ab", TypeError, "accuracy: logits must hold real numbers"),
    (np.ones(3), ValueError, r"accuracy: logits must be \(batch, classes\), got shape \(3,\)"),
    (np.ones((2, 3, 4)), ValueError, r"got shape \(2, 3, 4\)"),
])
def test_accuracy_checks_its_logits(logits, error, match):
    with pytest.raises(error, match=match):
        fm.accuracy(logits, [0, 1])


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value encountered")
def test_accuracy_and_cross_entropy_of_an_empty_batch():
    assert np.isnan(fm.accuracy(np.ones((0, 3)), []))
    assert np.isnan(fm.cross_entropy(_t(0, 3), []).item())  # torch: the mean of nothing


def test_embedding_refuses_masked_ids():
    w = Tensor(np.zeros((4, 2), np.float32))
    with pytest.raises(TypeError, match="embedding: token ids is a masked array"):
        fm.embedding(np.ma.array([0, 1], mask=[0, 1]), w)


def test_mse_loss_takes_an_array_prediction():
    assert fm.mse_loss(np.ones((2, 3)), np.zeros((2, 3))).item() == 1.0


@pytest.mark.parametrize("eps, error, match", [
    ("1e-5", TypeError, "layer_norm: eps must be a number such as 0.5, got '1e-5'"),
    (None, TypeError, "layer_norm: eps must be a number"),
    (True, TypeError, r"layer_norm: eps must be a number such as 0.5, got True \(bool\)"),
    (np.array([1e-5, 1e-5]), TypeError, "layer_norm: eps must be a number"),
    (float("nan"), ValueError, "layer_norm: eps must be finite and >= 0, got nan"),
])
def test_layer_norm_eps_is_checked(eps, error, match):
    with pytest.raises(error, match=match):
        fm.layer_norm(_t(2, 3), eps=eps)


def test_layer_norm_weight_stats_and_0d_input():
    with pytest.raises(TypeError, match="layer_norm: weight must be a floatlab.mixed Tensor or "
                                        "None, got ndarray"):
        fm.layer_norm(_t(2, 3), weight=np.ones(3))
    with pytest.raises(ValueError, match=r"layer_norm: stats=\['x'\]; use one of float32"):
        fm.layer_norm(_t(2, 3), stats=["x"])
    with pytest.raises(ValueError, match="layer_norm: x is 0-d; it normalises over the last "
                                         r"axis.*layers\.reshape\(x, \(1,\)\)"):
        fm.layer_norm(Tensor(1.0))
    # the suggested fix works (it once said x.reshape(1): a Tensor has no .reshape)
    from floatlab.mixed.layers import reshape

    assert fm.layer_norm(reshape(Tensor(1.0), (1,))).shape == (1,)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_of_0d_is_0d(approximate):
    x = Tensor(np.float32(1.0), requires_grad=True)
    y = fm.gelu(x, approximate)
    assert y.shape == () and y.item() == fm.gelu(Tensor([1.0]), approximate).item()
    y.backward()
    assert x.grad.shape == ()


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_of_an_empty_batch_has_an_empty_gradient(approximate):
    # the tanh form's backward crashed in NumPy ("zero-size array to reduction operation
    # minimum which has no identity") checking an empty derivative for infinities
    x = Tensor(np.zeros((0, 4), np.float32), requires_grad=True)
    fm.gelu(x, approximate).sum().backward()
    assert x.grad.shape == (0, 4)


@pytest.mark.parametrize("p, error, match", [
    ("0.5", TypeError, "dropout: p must be a number such as 0.5, got '0.5'"),
    (None, TypeError, "dropout: p must be a number"),
    (True, TypeError, r"dropout: p must be a number such as 0.5, got True \(bool\)"),
    (float("nan"), ValueError, "dropout: p must be a probability between 0 and 1, got nan"),
    (1.5, ValueError, "dropout: p must be a probability between 0 and 1, got 1.5"),
    (-0.1, ValueError, "dropout: p must be a probability between 0 and 1, got -0.1"),
])
def test_dropout_p_is_checked(p, error, match):
    with pytest.raises(error, match=match):
        fm.dropout(_t(4), p, rng=0)


@pytest.mark.parametrize("precision", ["32-true", "16-mixed", "16-true"])
def test_dropout_p_one_is_torchs_input_times_zero(precision):
    # torch's dropout at p = 1 returns input * zeros({}) (no mask drawn): NaN / inf give NaN,
    # negative values -0, and the gradient is g * 0; floatlab refused p = 1
    with fm.use_precision(precision):
        x = fm.Tensor(np.array([1.5, -2.0, 0.0, -0.0, np.inf, np.nan]), requires_grad=True)
        y = fm.dropout(x, 1.0, rng=None)
        want = (x.data * x.data.dtype.type(0)).astype(y.data.dtype)
        assert np.array_equal(y.data, want, equal_nan=True)  # (a NaN's sign is no value)
        assert np.array_equal(np.signbit(y.data[:4]), [False, True, False, True])
        y.backward(np.array([1.0, -1.0, 2.0, 3.0, 4.0, 5.0], y.data.dtype))
    assert np.array_equal(np.signbit(x.grad), [False, True, False, False, False, False])
    assert not x.grad.any()


def test_dropout_takes_numpy_probabilities():
    # np.float32(0.5) was refused while np.float64(0.5) was accepted
    expected = fm.dropout(_t(8), 0.5, rng=0).data
    for p in (np.float32(0.5), np.float64(0.5)):
        assert np.array_equal(fm.dropout(_t(8), p, rng=0).data, expected)


@pytest.mark.parametrize("mask, error, match", [
    ([[0.5, 1, 1], [1, 1, 1]], ValueError, r"dtype float64 with values such as \[0.5, 1.0, 1.0\]"),
    ([[2, 1, 1], [1, 1, 1]], ValueError, r"dtype int64 with values such as \[2, 1, 1\]"),
    ([["no", "yes", "no"], ["a", "b", "c"]], TypeError, "dtype <U3"),
    (np.ma.array(np.ones((2, 3)), mask=[[0, 1, 0], [0, 0, 0]]), TypeError,
     "sequence_loss: mask is a masked array"),
])
def test_sequence_loss_mask_must_be_booleans(mask, error, match):
    # every one of these was read as "nonzero counts" (or lost its mask) and gave a loss
    logits = Tensor(np.zeros((2, 3, 4), np.float32))
    with pytest.raises(error, match=match):
        fm.sequence_loss(logits, [[0, 1, 2], [0, 0, 0]], mask)


def test_sequence_loss_mask_of_zeros_and_ones_is_a_boolean_mask():
    logits = Tensor(np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32))
    y = [[0, 1, 2], [3, 0, 1]]
    as_bool = fm.sequence_loss(logits, y, np.array([[1, 0, 1], [0, 1, 1]], bool)).item()
    assert fm.sequence_loss(logits, y, [[1, 0, 1], [0, 1, 1]]).item() == as_bool
    assert fm.sequence_loss(logits, y, [[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]).item() == as_bool


@pytest.mark.parametrize("scale, error, match", [
    ("0.1", TypeError, "scaled_dot_product_attention: scale must be a number such as 0.5, "
                       "got '0.1'"),
    (True, TypeError, "scale must be a number"),
    (float("nan"), ValueError, "scaled_dot_product_attention: scale must be finite, got nan"),
    (float("inf"), ValueError, "scale must be finite"),
])
def test_attention_scale_is_a_finite_number(scale, error, match):
    q = _t(1, 4, 8)
    with pytest.raises(error, match=match):
        fm.scaled_dot_product_attention(q, q, q, scale=scale)


def test_attention_with_no_tokens_is_empty_and_head_dim_0_is_refused():
    q = _t(1, 0, 8)
    assert fm.scaled_dot_product_attention(q, q, q).shape == (1, 0, 8)
    q = _t(1, 4, 0)
    with pytest.raises(ValueError, match="head_dim >= 1"):
        fm.scaled_dot_product_attention(q, q, q)


# --------------------------------------------------------------------------- modules, seeds

@pytest.mark.parametrize("make, error, match", [
    (lambda: fm.Linear(2.5, 2), TypeError, r"Linear: in_features must be a whole number \(int\) "
                                           r">= 1, got 2.5 \(float\); round it with int\(\)"),
    (lambda: fm.Linear(2, True), TypeError, "Linear: out_features must be a whole number"),
    (lambda: fm.Linear(2, "3"), TypeError, r"int\('3'\) if it holds a whole number"),
    (lambda: fm.Linear(0, 2), ValueError, "Linear: in_features must be >= 1, got 0"),
    (lambda: fm.Linear(2, 2, bias="False"), TypeError, "Linear: bias must be True or False"),
    (lambda: fm.MLP("32"), TypeError, "MLP: sizes must be a sequence of layer widths such as "
                                      r"\(16, 64, 4\), got '32'"),
    (lambda: fm.MLP([3, 2.5, 2]), TypeError, r"MLP: sizes\[1\] must be a whole number"),
    (lambda: fm.MLP(["3", "2"]), TypeError, r"MLP: sizes\[0\] must be a whole number"),
    (lambda: fm.LayerNorm(-1), ValueError, "LayerNorm: dim must be >= 0, got -1"),
    (lambda: fm.LayerNorm(2.5), TypeError, "LayerNorm: dim must be a whole number"),
    (lambda: fm.LayerNorm(3, eps="1e-5"), TypeError, "LayerNorm: eps must be a number"),
    (lambda: fm.LayerNorm(3, eps=-1.0), ValueError, "LayerNorm: eps must be >= 0, got -1.0"),
    (lambda: fm.Transformer(5, d_model="4"), TypeError, "Transformer: d_model must be a whole "
                                                        "number"),
    (lambda: fm.Transformer("aab"), ValueError, "Transformer: vocab lists 'a' more than once"),
    (lambda: fm.Transformer(5, dropout="0.1"), TypeError, "Transformer: dropout must be a number"),
    (lambda: fm.Transformer(5, seed=None), TypeError, "Transformer: seed must be a whole number"),
    (lambda: fm.Transformer(5, seed=-1), ValueError, "Transformer: seed must be >= 0, got -1"),
])
def test_module_constructors_check_their_arguments(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_transformer_vocab_duplicate_check_is_linear():
    # the duplicate check once compared every token with every other (tokens.count per
    # token): 50K word tokens took half a minute. Counted by the tokens' own == (no timing)
    calls = []

    class Token(str):
        def __eq__(self, other):
            calls.append(1)
            return str.__eq__(self, other)

        __hash__ = str.__hash__

    n = 300
    fm.Transformer([Token(f"w{i}") for i in range(n)], d_model=8, heads=2, layers=1,
                   context=4)
    assert len(calls) < 10 * n  # was n * (n - 1)
    with pytest.raises(ValueError, match=r"vocab lists \['x'\] more than once"):
        fm.Transformer([["x"], ["y"], ["x"]], d_model=8, heads=2, layers=1, context=4)


@pytest.mark.parametrize("make", [
    lambda s: fm.Linear(2, 2, seed=s), lambda s: fm.MLP([2, 2], seed=s),
    lambda s: fm.SGD([fm.parameter(np.ones(2, np.float32))], seed=s),
    lambda s: fm.Adam([fm.parameter(np.ones(2, np.float32))], seed=s),
    lambda s: fm.teacher_gaussians(n=8, seed=s), lambda s: fm.spirals(n=8, seed=s),
    lambda s: fm.Dataset.from_arrays(np.ones((4, 2)), [0, 1, 0, 1], seed=s),
])
@pytest.mark.parametrize("seed, error, match", [
    (-1, ValueError, "seed must be a non-negative int, got -1"),
    ("0", TypeError, r"seed must be a numpy.random.Generator, a non-negative int seed or None, "
                     r"got '0' \(str\); e.g. seed=np.random.default_rng\(0\) or seed=0"),
    (1.5, TypeError, "seed must be a numpy.random.Generator"),
    (True, TypeError, r"got True \(bool\)"),
])
def test_seeds_are_checked_with_the_argument_named(make, seed, error, match):
    # numpy's "SeedSequence expects int or sequence of ints" before
    with pytest.raises(error, match=match):
        make(seed)


def test_seed_generators_still_pass_through():
    rng = np.random.default_rng(5)
    expected = fm.Linear(3, 2, seed=np.random.default_rng(5)).weight.data
    assert np.array_equal(fm.Linear(3, 2, seed=rng).weight.data, expected)


# --------------------------------------------------------------------------- optimizers

@pytest.mark.parametrize("cls", [fm.SGD, fm.Adam, fm.Adam8bit, fm.StateAdam])
@pytest.mark.parametrize("params, what", [(None, "NoneType"), ("tensor", "Tensor")])
def test_optimizer_params_must_be_an_iterable_of_tensors(cls, params, what):
    if params == "tensor":
        params = fm.parameter(np.ones(3, np.float32))
    with pytest.raises(TypeError, match=f"{cls.__name__}: params must be an iterable of Tensors "
                                        rf"such as model.parameters\(\), got {what}; wrap a "
                                        r"single tensor in a list: \[w\]"):
        cls(params)


def test_adam8bit_options_take_numpy_ints_and_refuse_other_types():
    p = [fm.parameter(np.zeros(8, np.float32))]
    assert fm.Adam8bit(p, block=np.int64(256), min_8bit_size=np.int64(0)).min_8bit_size == 0
    assert fm.StateAdam(p, expand=np.bool_(False)).expand is False
    with pytest.raises(TypeError, match=r"block must be a whole number \(int\) >= 1, got '256'"):
        fm.Adam8bit(p, block="256")
    with pytest.raises(TypeError, match=r"min_8bit_size must be a whole number \(int\) >= 0, "
                                        "got 2.5"):
        fm.Adam8bit(p, min_8bit_size=2.5)
    with pytest.raises(TypeError, match="expand must be True or False, got 'False'"):
        fm.StateAdam(p, expand="False")


# --------------------------------------------------------------------------- data

@pytest.mark.parametrize("make, error, match", [
    (lambda: fm.teacher_gaussians(n=100.5), TypeError, "teacher_gaussians: n must be a whole "
                                                       "number"),
    (lambda: fm.teacher_gaussians(n="100"), TypeError, r"int\('100'\)"),
    (lambda: fm.teacher_gaussians(n=1), ValueError, "teacher_gaussians: n must be >= 2, got 1"),
    (lambda: fm.teacher_gaussians(dim=0), ValueError, "teacher_gaussians: dim must be >= 1"),
    (lambda: fm.teacher_gaussians(hidden=2.5), TypeError, "teacher_gaussians: hidden must be"),
    (lambda: fm.teacher_gaussians(classes=0), ValueError, "teacher_gaussians: classes must be"),
    (lambda: fm.teacher_gaussians(train_fraction="0.5"), TypeError,
     "teacher_gaussians: train_fraction must be a number"),
    (lambda: fm.teacher_gaussians(n=100, train_fraction=1e-9), ValueError,
     r"train_fraction=1e-09 of n=100 rows leaves an empty training split; pass a fraction "
     "between 0.01 and 0.99"),
    (lambda: fm.spirals(train_fraction=1.0), ValueError,
     "spirals: train_fraction must lie strictly between 0 and 1"),
    (lambda: fm.spirals(train_fraction=0.0), ValueError, "spirals: train_fraction"),
    (lambda: fm.spirals(classes=2.5), TypeError, "spirals: classes must be a whole number"),
    (lambda: fm.spirals(n=2, classes=3), ValueError, "spirals: need n >= classes"),
    (lambda: fm.spirals(noise=-1.0), ValueError, "spirals: noise must be >= 0"),
    (lambda: fm.spirals(turns="1"), TypeError, "spirals: turns must be a number"),
    (lambda: fm.spirals(turns=float("nan")), ValueError, "spirals: turns must be finite"),
    (lambda: fm.digits(train_fraction="0.7"), TypeError, "digits: train_fraction must be a "
                                                         "number"),
    (lambda: fm.digits(seed=-1), ValueError, "digits: seed must be a non-negative int"),
])
def test_dataset_generators_check_their_arguments(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_digits_split_leaves_rows_on_both_sides():
    # digits counted its training rows by hand (int(n * f)) and came back with an empty split
    pytest.importorskip("sklearn")
    with pytest.raises(ValueError, match="digits: train_fraction=0.0001 of n=1797 rows leaves an "
                                         "empty training split"):
        fm.digits(train_fraction=1e-4)


@pytest.mark.parametrize("X, y, error, match", [
    ([[1.0], [1.0, 2.0]], [0, 1], ValueError, "Dataset.from_arrays: X is ragged"),
    (np.ma.array(np.ones((4, 2))), [0, 1, 0, 1], TypeError,
     "Dataset.from_arrays: X is a masked array"),
    (np.ones((4, 2)), np.ma.array([0, 1, 0, 1], mask=[0, 1, 0, 0]), TypeError,
     "Dataset.from_arrays: y is a masked array"),
])
def test_from_arrays_refuses_ragged_and_masked(X, y, error, match):
    with pytest.raises(error, match=match):
        fm.Dataset.from_arrays(X, y)


def test_from_arrays_test_fraction_is_checked():
    with pytest.raises(TypeError, match="Dataset.from_arrays: test_fraction must be a number"):
        fm.Dataset.from_arrays(np.ones((4, 2)), [0, 1, 0, 1], test_fraction="0.5")


def test_sequence_dataset_decode_and_batch():
    d = fm.digit_reversal(n=16, digits=3)
    with pytest.raises(ValueError, match=r"decode: token ids must lie in \[0, 11\)"):
        d.decode(np.array([99]))  # an IndexError from the vocabulary string before
    with pytest.raises(TypeError, match="decode: token ids must be integers, got dtype float64"):
        d.decode(np.array([0.5]))  # was decoded as token 0
    x, _, _ = d.batch(0, 4)  # a seed, as the docstring says (an AttributeError before)
    assert np.array_equal(x, d.batch(np.random.default_rng(0), 4)[0])
    with pytest.raises(ValueError, match="batch: size must be >= 0, got -1"):
        d.batch(0, -1)


# --------------------------------------------------------------------------- policy, scope

@pytest.mark.parametrize("rounding, error, match", [
    ("bogus", ValueError, "unknown rounding mode 'bogus'; use one of nearest_even"),
    (1, TypeError, "rounding must be one string such as 'nearest_even', got 1"),
    (True, TypeError, "rounding must be one string"),
])
def test_get_policy_checks_rounding_up_front(rounding, error, match):
    # accepted before, failing (or not) at the first op
    with pytest.raises(error, match=match):
        fm.get_policy("16-mixed", rounding=rounding)


def test_get_policy_resolves_rounding_aliases():
    # "sr" reached the ops as "sr": the scope's seeded generator is made for "stochastic" only,
    # so every op drew fresh entropy and a seeded run was not reproducible
    assert fm.get_policy("16-mixed", rounding="sr").rounding == "stochastic"
    x = np.full(64, 1 + 2**-12, np.float32)
    runs = []
    for _ in range(2):
        with fm.use_precision("16-true", rounding="sr", rng=3):
            runs.append(Tensor(x).data.copy())
    assert np.array_equal(*runs)


@pytest.mark.parametrize("rng, error, match", [
    (-1, ValueError, "use_precision: rng must be a non-negative int, got -1"),
    ("0", TypeError, "use_precision: rng must be a numpy.random.Generator"),
])
def test_use_precision_rng_is_checked(rng, error, match):
    with pytest.raises(error, match=match):
        with fm.use_precision("16-mixed", rng=rng):
            pass


def test_quantize_and_recording_check_their_arguments():
    with pytest.raises(TypeError, match="quantize: values must hold real numbers"):
        fm.quantize("abc", fm.get_policy().weights)
    assert fm.quantize([1.0, 2.0], "fp16").tolist() == [1.0, 2.0]  # a format name is resolved
    with pytest.raises(TypeError, match=r"recording: stats must be a floatlab.mixed.StepStats, "
                                        r"got NoneType; e.g. recording\(StepStats\(\)\)"):
        with fm.recording(None):
            pass


# --------------------------------------------------------------------------- scalers

@pytest.mark.parametrize("make, match", [
    (lambda: fm.GradScaler(enabled="False"), "enabled must be True or False, got 'False'"),
    (lambda: fm.GradScaler(enabled=0), "enabled must be True or False, got 0"),
    (lambda: fm.StaticScaler(enabled="False"), "enabled must be True or False"),
    (lambda: fm.StaticScaler(skip_nonfinite="no"), "skip_nonfinite must be True or False"),
    (lambda: fm.StaticScaler("8"), "scale must be a number such as 8.0, got '8'"),
])
def test_scaler_flags_are_real_bools(make, match):
    # GradScaler(enabled="False") scaled the loss: a non-empty string is truthy
    with pytest.raises(TypeError, match=match):
        make()


def test_static_scaler_names_its_scale_argument():
    with pytest.raises(ValueError, match=r"^scale must be a positive finite number \(a float32: "
                                         r"at most 3.4e38\), got 0.0"):
        fm.StaticScaler(0.0)


def test_scaler_init_scale_must_be_float32_finite():
    # the scale is a float32: 1e300 became inf, so every step was skipped
    with pytest.raises(ValueError, match="init_scale must be a positive finite number"):
        fm.GradScaler(init_scale=1e300)
    assert fm.GradScaler(init_scale=2.0**127).get_scale() == 2.0**127


def test_tensor_truth_is_torchs_and_name_is_a_string():
    assert bool(Tensor([2.0])) and not bool(Tensor(0.0))
    # RuntimeError, torch's type (is_nonzero's TORCH_CHECK), not ValueError
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value "
                                           "is ambiguous"):
        bool(_t(2))  # was True (len 2)
    with pytest.raises(RuntimeError, match="with no values is ambiguous"):
        bool(_t(0))  # was False
    with pytest.raises(TypeError, match="Tensor: name must be a str or None, got 3"):
        Tensor([1.0], name=3)


# --------------------------------------------------------------------------- trainer, compare

def test_compare_progress_is_a_real_flag():
    with pytest.raises(TypeError, match="progress must be True or False, got 'False'"):
        fm.compare(["32-true"], steps=1, progress="False", data=fm.teacher_gaussians(n=64))


@pytest.fixture(scope="module")
def trained():
    data = fm.teacher_gaussians(n=64)
    trainer = fm.Trainer("32-true", progress=False, hidden=(4,), batch_size=16)
    trainer.fit(data, steps=1)
    return trainer, data


@pytest.mark.parametrize("args, error, match", [
    (lambda d: (d.X_test, d.y_test[:3]), ValueError,
     r"evaluate: y has shape \(3,\); pass one label per row of X, shape \(32,\)"),
    (lambda d: (d.X_test, d.y_test + 10), ValueError, r"accuracy: targets must lie in \[0, 4\)"),
    (lambda d: (d.X_test, d.y_test + 0.5), TypeError, "accuracy: targets must be integer"),
    (lambda d: ("x", d.y_test), TypeError, "evaluate: X must hold real numbers"),
    (lambda d: (d.X_test, d.y_test, 0), ValueError, "evaluate: chunk must be >= 1, got 0"),
])
def test_evaluate_checks_its_arguments(trained, args, error, match):
    trainer, data = trained
    with pytest.raises(error, match=match):
        trainer.evaluate(*args(data))


def test_evaluate_on_no_rows_is_nan_and_describe_checks_data(trained):
    trainer, data = trained
    assert np.isnan(trainer.evaluate(data.X_test[:0], data.y_test[:0]))  # a ZeroDivisionError
    with pytest.raises(TypeError, match="data must be a floatlab.mixed.Dataset"):
        trainer.describe("x")


# --------------------------------------------------------------------------- telemetry, recipes

@pytest.mark.parametrize("values, match", [
    (None, "log2_histogram: values must hold real numbers"),
    (np.ma.array([1.0, 2.0], mask=[0, 1]), "log2_histogram: values is a masked array"),
    (np.array([1j]), "log2_histogram: values is complex"),
    (np.array([True]), "log2_histogram: values is a boolean array"),
])
def test_log2_histogram_refuses_non_real_values(values, match):
    # None gave an empty histogram, a masked array lost its mask, complex lost its imaginary part
    with pytest.raises(TypeError, match=match):
        fm.log2_histogram(values, "fp16")


@pytest.mark.parametrize("lo, hi, error, match", [
    (10, -10, ValueError, r"need lo < hi <= 1100 \(binade exponents\), got lo=10, hi=-10"),
    (0, 0, ValueError, "need lo < hi"),
    (-4.5, 3, TypeError, "log2_histogram: lo must be a whole number"),
    (-10**9, 10**9, ValueError, "log2_histogram: lo must be >= -1100"),
])
def test_log2_histogram_range_is_checked(lo, hi, error, match):
    with pytest.raises(error, match=match):
        fm.log2_histogram(np.ones(3), "fp16", lo, hi)


def test_log2_histogram_takes_a_format_name():
    h = fm.log2_histogram(np.array([0.0, 2.0**-20, 3.0]), "fp16", -30, 5)
    assert (h["zeros"], h["format"], int(h["counts"].sum())) == (1, "float16", 2)


def test_recipe_flags_and_seeds():
    with pytest.raises(TypeError, match="delayed must be True or False, got 'False'"):
        fm.TensorScaling("e4m3fn", delayed="False")  # was delayed scaling
    with pytest.raises(TypeError, match="RecipeRun: telemetry must be True or False"):
        fm.RecipeRun(telemetry="False")
    with pytest.raises(ValueError, match="RecipeRun: seed must be a non-negative int, got -1"):
        with fm.recipe_run(seed=-1):
            pass


# --------------------------------------------------------------------------- operand names

@pytest.mark.parametrize("call, match", [
    (lambda: fm.add(_t(2), "abc"), "add: b must hold real numbers, got dtype <U3"),
    (lambda: "abc" + _t(2), "add: a must hold real numbers"),
    (lambda: _t(2) * None, "mul: b must hold real numbers, got dtype object"),
    (lambda: fm.matmul(["a"], _t(1, 1)), "matmul: a must hold real numbers"),
    (lambda: fm.relu({"a": 1}), "relu: x must hold real numbers"),
    (lambda: fm.cross_entropy("ab", [0]), "cross_entropy: logits must hold real numbers"),
    (lambda: fm.mse_loss("ab", [0.0]), "mse_loss: pred must hold real numbers"),
    (lambda: fm.mse_loss([0.0], "ab"), "mse_loss: target must hold real numbers"),
    (lambda: fm.scaled_dot_product_attention(_t(1, 2), _t(1, 2), "v"),
     "scaled_dot_product_attention: v must hold real numbers"),
])
def test_op_errors_name_the_op_and_operand(call, match):
    # they said "data must hold real numbers", the Tensor constructor's argument
    with pytest.raises(TypeError, match=match):
        call()


# --------------------------------------------------------------------------- torch's wording

@pytest.mark.parametrize("make, match", [
    (lambda p: fm.SGD(p, lr=-1.0), r"SGD: Invalid learning rate: -1.0 \(need lr >= 0; e.g. "
                                   r"lr=1e-3\)"),
    (lambda p: fm.SGD(p, momentum=-0.1), "SGD: Invalid momentum value: -0.1"),
    (lambda p: fm.SGD(p, weight_decay=-0.1), "SGD: Invalid weight_decay value: -0.1"),
    (lambda p: fm.SGD(p, nesterov=True), "SGD: Nesterov momentum requires a momentum and zero "
                                         "dampening"),
    (lambda p: fm.Adam(p, eps=-1e-8), "Adam: Invalid epsilon value: -1e-08"),
    (lambda p: fm.Adam(p, betas=(1.0, 0.9)), "Adam: Invalid beta parameter at index 0: 1.0"),
    (lambda p: fm.Adam8bit(p, betas=(0.9, -0.1)), "Adam8bit: Invalid beta parameter at index 1"),
    (lambda p: fm.StateAdam(p, lr=-2.0), "StateAdam: Invalid learning rate: -2.0"),
])
def test_optimizer_ranges_name_the_argument_in_torchs_words(make, match):
    # one message listing every range ("need lr > 0, momentum >= 0, ...") before; torch names
    # the argument ("Invalid learning rate: -1.0"), and code matching torch's text still matches
    with pytest.raises(ValueError, match=match):
        make([fm.parameter(np.ones(2, np.float32))])


@pytest.mark.parametrize("name", ["SGD", "Adam", "Adam8bit", "StateAdam"])
def test_optimizers_take_lr_zero_as_torch_does(name):
    # torch.optim (and bitsandbytes) check 0.0 <= lr: a zero learning rate is valid (a warm-up
    # schedule's first step); the step then leaves the weights as they were, to the bit
    w = fm.parameter(np.array([1.0, -2.0, 3.0], np.float32))
    before = w.data.copy()
    opt = getattr(fm, name)([w], lr=0.0)
    w.grad = np.array([0.5, -0.25, 4.0], np.float32)
    report = opt.step()
    assert w.data.tobytes() == before.tobytes()
    # no update was made, so none was lost (it said 3 of 3: "the update rounded away")
    assert (report.nonzero_grads, report.lost) == (3, 0)


# --------------------------------------------------------------------------- valid edge input

@pytest.mark.parametrize("op", [fm.relu, fm.gelu, fm.softmax, fm.exp, lambda t: t * t,
                                lambda t: (t * t).sum()])
def test_0d_tensors_get_0d_array_gradients(op):
    # relu's backward crashed on a 0-d input ("return arrays must be of ArrayType"), and numpy
    # arithmetic on 0-d arrays left numpy scalars as .grad
    t = Tensor(np.float32(2.0), requires_grad=True)
    op(t).backward()
    assert isinstance(t.grad, np.ndarray) and t.grad.shape == ()


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value encountered")
@pytest.mark.parametrize("make", [
    lambda x: x[:, ::-2], lambda x: x.T, lambda x: x.astype(np.float16),
    lambda x: np.require(x, requirements="C").view(), lambda x: x[:0],
])
@pytest.mark.parametrize("op", [fm.relu, fm.exp, fm.softmax, fm.log_softmax, fm.mean, fm.gelu,
                                fm.layer_norm, fm.tanh, fm.neg])
def test_views_read_only_and_float16_inputs_work_unchanged(make, op):
    x = np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32)
    arr = make(x)
    arr.flags.writeable = False  # read-only too
    before = arr.copy()
    expected = op(Tensor(np.ascontiguousarray(arr))).data
    assert np.array_equal(op(arr).data, expected, equal_nan=True)
    assert np.array_equal(arr, before)  # never mutated


# --------------------------------------------------------------------------- hand-set state

@pytest.mark.parametrize("grad, error, match", [
    ([1.0, 1.0, 1.0], TypeError, r"SGD.step: parameter 0's .grad is list; assign a float array "
                                 "of the parameter's shape, or None"),
    (np.array(["a", "b", "c"]), TypeError, "is an array of dtype <U1"),
    (np.ones(4, np.float32), ValueError, r"SGD.step: parameter 0's .grad has shape \(4,\), the "
                                         r"parameter has shape \(3,\)"),
    (np.ones((1, 3), np.float32), ValueError, r"has shape \(1, 3\)"),  # silently broadcast
])
def test_optimizer_step_checks_hand_assigned_grads(grad, error, match):
    p = fm.parameter(np.ones(3, np.float32))
    p.grad = grad
    with pytest.raises(error, match=match):
        fm.SGD([p], lr=0.1).step()


def test_load_state_dict_refuses_masked_arrays():
    net = fm.MLP([3, 2])
    state = {k: np.ma.array(v) for k, v in net.state_dict().items()}
    with pytest.raises(TypeError, match="load_state_dict: 'layers.0.weight' is a masked array"):
        net.load_state_dict(state)


def test_history_comparison_bytes_held_and_encode_check_types():
    with pytest.raises(TypeError, match="History: info must be a dict or None, got str"):
        fm.History("x", info="x")
    with pytest.raises(TypeError, match="Comparison: histories must be a list of History "
                                        "objects .*, got int"):
        fm.Comparison([1])
    net = fm.MLP([3, 2])
    opt = fm.SGD(net.parameters())
    with pytest.raises(TypeError, match="bytes_held: policy must be a floatlab.mixed Policy, "
                                        "got str"):
        fm.bytes_held(net, opt, "16-mixed", None)
    with pytest.raises(TypeError, match="encode: text must be a str, got int"):
        fm.digit_reversal(n=8, digits=2).encode(5)


def test_policy_built_by_hand_resolves_names_and_checks_modes():
    p = fm.Policy("x", "fp16", "fp16", "fp16", "fp16", "fp16", "fp16", rounding="sr")
    assert p.weights.name == "float16" and p.accumulate.name == "float16"
    assert p.rounding == "stochastic"
    with pytest.raises(ValueError, match="unknown rounding mode 'bogus'"):
        fm.Policy("x", "fp16", "fp16", "fp16", "fp16", "fp16", "fp16", rounding="bogus")
    with pytest.raises(ValueError, match="device='gpu': use 'cuda'"):
        fm.Policy("x", "fp16", "fp16", "fp16", "fp16", "fp16", "fp16", device="gpu")
    with pytest.raises(TypeError, match="Policy: saturate must be True or False, got 'no'"):
        fm.Policy("x", "fp16", "fp16", "fp16", "fp16", "fp16", "fp16", saturate="no")
    with pytest.raises(TypeError, match=r"recipe_options must be a dict .*, got \[\]"):
        fm.get_policy("16-mixed", recipe_options=[])


def test_prime_copies_checks_params_and_resolves_the_format():
    w = fm.parameter([1 / 3])
    fm.prime_copies((p for p in [w]), "bf16")  # a generator and a format name
    assert w._copy[2].tolist() == [0.333984375]
    for params in ("x", None, w):
        with pytest.raises(TypeError, match="prime_copies: params must be a list of parameter "
                                            "Tensors"):
            fm.prime_copies(params, "fp16")


@pytest.mark.parametrize("change, error, match", [
    (dict(forward="x"), TypeError, r"Recipe.forward must be a Gemm .*, got 'x'"),
    (dict(dgrad=None), TypeError, "Recipe.dgrad must be a Gemm"),
    (dict(name=1), TypeError, "Recipe: name must be a str, got 1"),
    (dict(scaler="bogus"), ValueError, "Recipe: scaler='bogus'; use None or 'dynamic'"),
    (dict(state="x"), TypeError, "Recipe: state must be a dict"),
    (dict(weight_grad=3), TypeError, "Recipe.weight_grad: an operand is a floatlab"),
])
def test_recipe_built_by_hand_is_checked(change, error, match):
    g = fm.Gemm()
    with pytest.raises(error, match=match):
        fm.Recipe(**{"name": "r", "forward": g, "dgrad": g, "wgrad": g, **change})


def test_recipe_resolves_format_names():
    g = fm.Gemm()
    r = fm.Recipe("r", g, g, g, compute="fp16", master="fp32")
    assert (r.compute.name, r.master.name) == ("float16", "float32")


def test_datasets_built_by_hand_are_checked():
    X, y = np.ones((4, 2), np.float32), np.array([0, 1, 0, 1])
    assert fm.Dataset("ok", X, y, X, y, classes=2).features == 2
    # lists pass the check and are kept as the checked arrays (.features read a list's .shape)
    listed = fm.Dataset("lists", X.tolist(), y.tolist(), X.tolist(), y.tolist(), classes=2)
    assert listed.features == 2 and np.array_equal(listed.X_train, X)
    assert fm.Dataset("ok", X, y, X, y, classes=2).X_train is X  # arrays: not copied
    with pytest.raises(TypeError, match=r"Dataset: X_train must be a 2-D array of real numbers"):
        fm.Dataset("x", "a", "b", "c", "d", 2)
    with pytest.raises(ValueError, match=r"Dataset: y_test holds labels from 0 to 1, outside "
                                         r"\[0, 1\) for classes=1"):
        fm.Dataset("x", X, np.zeros(4, int), X, y, classes=1)
    with pytest.raises(TypeError, match=r"Dataset: X_test must be a 2-D array"):
        fm.Dataset("x", X, y, np.ones((4, 3)), y, classes=2)  # other features than X_train
    with pytest.raises(ValueError, match=r"SequenceDataset: train: token ids must lie in \[0, 2\)"):
        fm.SequenceDataset("x", "ab", np.array([[0, 5]]), np.array([[0, 1]]), 1)
    with pytest.raises(ValueError, match=r"examples of context \+ 1 = 3 tokens, got shape"):
        fm.SequenceDataset("x", "ab", np.array([[0, 1]]), np.array([[0, 1]]), 2)
    with pytest.raises(TypeError, match="SequenceDataset: vocab must be a non-empty str"):
        fm.SequenceDataset("x", "", np.array([0, 1]), np.array([0, 1]), 1)


def test_row_scaling_name_is_a_string():
    with pytest.raises(TypeError, match="RowScaling: name must be a str, got 1"):
        fm.RowScaling("e4m3fn", name=1)


@pytest.mark.parametrize("make, who", [
    (lambda: fm.teacher_gaussians(n=10**12), "teacher_gaussians"),
    (lambda: fm.spirals(n=10**12), "spirals"),
    (lambda: fm.digit_reversal(n=10**12), "digit_reversal"),
    (lambda: fm.Linear(10**12, 2), "Linear"),
    (lambda: fm.LayerNorm(10**13), "LayerNorm"),
    (lambda: fm.Transformer(10**12, d_model=8, heads=2, layers=1, context=4), "Transformer"),
])
def test_impossible_sizes_are_a_value_error_naming_the_builder(make, who):
    # numpy's MemoryError ("Unable to allocate 116. TiB") from inside the builder before
    with pytest.raises(ValueError, match=f"^{who}: the sizes asked for need more memory than "
                                         r"there is \(Unable to allocate"):
        make()


def test_embedding_weight_must_be_a_2d_tensor():
    with pytest.raises(TypeError, match="embedding: weight must be a floatlab.mixed Tensor, got "
                                        "ndarray"):
        fm.embedding([0], np.ones((4, 2)))  # a ValueError saying "got (4, 2)" before
    with pytest.raises(ValueError, match=r"embedding: weight must be a 2-D Tensor \(vocab, dim\), "
                                         r"got shape \(4,\)"):
        fm.embedding([0], _t(4))


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "cross_entropy", "gelu_tanh"])
@pytest.mark.parametrize("fmt", ["fp32", "fp16", "bf16"])
def test_ops_outside_a_policy_block_do_not_raise_their_own_over_and_underflow(op, fmt):
    # Outside use_precision (whose errstate silences everything) the stable formulas' own
    # steps surfaced: exp of scores far below the max underflows (softmax, log_softmax,
    # cross_entropy), and gelu's tanh form computes exp(-2u), which overflows to inf for
    # x < -10 by design. Under np.errstate(all="raise") they were FloatingPointErrors, and
    # gelu(Tensor([-100.0]), "tanh") warned "overflow encountered in exp" by default. Same
    # values as inside a policy block, and gradients too.
    x = np.array([[-200.0, 0.0, 150.0, -16.0], [-60.0, 3.0, -1.0, 2.0]])
    call = {"softmax": lambda t: fm.softmax(t),
            "log_softmax": lambda t: fm.log_softmax(t),
            "cross_entropy": lambda t: fm.cross_entropy(t, [1, 0]),
            "gelu_tanh": lambda t: layers.gelu(t, "tanh")}[op]

    def run():
        t = Tensor(x, fmt, requires_grad=True)
        out = call(t)
        fm.tensor.sum(out).backward()
        return out.data, t.grad

    with fm.scope.use_precision("32-true"):
        want = run()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            got = run()
        got_default = run()
    for a, b, c in zip(got, got_default, want, strict=True):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, c)


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float16"])
def test_datasets_take_ml_dtypes_features(dtype):
    # bfloat16 / float8 features (dtype kind 'V') were refused as not "real numbers" by
    # Dataset.from_arrays and by a Dataset built by hand, where the rest of floatlab takes
    # them (widened exactly). Same dataset, and same training, as from their float32 values.
    import ml_dtypes

    rng = np.random.default_rng(2)
    X = rng.standard_normal((64, 3)).astype(getattr(ml_dtypes, dtype, None) or dtype)
    y = np.arange(64) % 2
    X32 = X.astype(np.float32)
    got, want = (fm.Dataset.from_arrays(v, y, seed=1) for v in (X, X32))
    for split in ("X_train", "y_train", "X_test", "y_test"):
        np.testing.assert_array_equal(getattr(got, split), getattr(want, split))
    by_hand = fm.Dataset("h", X[:48], y[:48], X[48:], y[48:], classes=2)
    plain = fm.Dataset("h", X32[:48], y[:48], X32[48:], y[48:], classes=2)
    runs = [fm.Trainer("bf16-mixed", progress=False, batch_size=16).fit(d, steps=4)
            for d in (by_hand, plain)]
    np.testing.assert_array_equal(runs[0]["loss"], runs[1]["loss"])


@pytest.mark.parametrize("scalar", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_ml_dtypes_scalars_are_scalars_in_tensor_ops(scalar):
    # A bf16 tensor times ml_dtypes.bfloat16(1.5) came out in float32: the scalar (not
    # np.floating) was taken for a tensor in the policy's input format, which promoted the
    # result, where 1.5 or np.float16(1.5) keep the tensor's format. Same format, values and
    # gradients as the Python float now.
    import ml_dtypes

    s = getattr(ml_dtypes, scalar)(1.5)
    ops = [lambda a, b: a * b, lambda a, b: b * a, lambda a, b: a + b, lambda a, b: b - a,
           lambda a, b: a / b, lambda a, b: b / a]
    with fm.scope.use_precision("bf16-mixed"):
        for op in ops:
            got, want = (Tensor([1.0, 3.0, 1000.0], "bf16", requires_grad=True) for _ in "ab")
            out, ref = op(got, s), op(want, 1.5)
            assert out.fmt == ref.fmt
            np.testing.assert_array_equal(out.data, ref.data)
            fm.tensor.sum(out).backward()
            fm.tensor.sum(ref).backward()
            np.testing.assert_array_equal(got.grad, want.grad)


@pytest.mark.parametrize("kwargs, message", [
    (dict(train=np.array([0, 1]), valid=np.array([1, 0, 1])),
     r"train holds 2 tokens, fewer than 3 tokens \(one window\)"),
    (dict(valid=np.zeros((0, 3), np.int64)), r"valid holds 0 examples, fewer than one example"),
    (dict(vocab="aab"), r"vocab lists \['a'\] more than once"),
    (dict(answer_from=-1), r"answer_from must be >= 0, got -1"),
    (dict(answer_from=5), r"answer_from=5 and answer_to=None select no position"),
    (dict(answer_from=1, answer_to=1), r"answer_from=1 and answer_to=1 select no position"),
    (dict(answer_from="1"), r"answer_from must be a whole number"),
])
def test_sequence_dataset_checks_its_splits_vocab_and_answer_span(kwargs, message):
    """A split shorter than one window crashed inside NumPy at the first batch ('high <= 0',
    'need at least one array to stack'), a repeated token made encode skip an id, and
    answer_from=-1 silently counted the last position (a Python slice)."""
    from floatlab.mixed.textdata import SequenceDataset

    base = dict(name="x", vocab="ab", train=np.array([0, 1, 0, 1, 1]),
                valid=np.array([1, 0, 1]), context=2)
    with pytest.raises((ValueError, TypeError), match=message):
        SequenceDataset(**{**base, **kwargs})
    SequenceDataset(**base)  # the same data with a window in each split is fine


@pytest.mark.parametrize("mask", [
    np.array([[0, 1, 2]]), np.array([[0.5, 0.0, 0.0]]), [[1, 0, 0]], Tensor([[1.0, 0.0, 0.0]]),
])
def test_masked_fill_mask_must_be_boolean_as_torchs(mask):
    """An integer or float mask was read as 'nonzero is filled' (0.5 and 2 filled silently);
    torch's masked_fill refuses it with a RuntimeError, which this error also is."""
    from floatlab.mixed.attention import MaskError, masked_fill

    x = Tensor([[1.0, 2.0, 3.0]])
    with pytest.raises(MaskError, match=r"mask must be a boolean array .* got dtype "
                                        r".*; pass mask.astype\(bool\)") as info:
        masked_fill(x, mask, -1.0)
    assert isinstance(info.value, TypeError) and isinstance(info.value, RuntimeError)
    assert x.data.tolist() == [[1.0, 2.0, 3.0]]


def test_masked_fill_mask_must_broadcast():
    """A mask of another shape was a ValueError from inside np.where ('operands could not be
    broadcast together with shapes (2,) () (1,3)')."""
    from floatlab.mixed.attention import MaskShapeError, masked_fill

    with pytest.raises(MaskShapeError, match=r"mask of shape \(2,\) does not broadcast with "
                                             r"the tensor's shape \(1, 3\)") as info:
        masked_fill(Tensor([[1.0, 2.0, 3.0]]), np.array([True, False]), -1.0)
    assert isinstance(info.value, ValueError) and isinstance(info.value, RuntimeError)
    with pytest.raises(TypeError, match="masked_fill: value must be a number"):
        masked_fill(Tensor([1.0]), np.array([True]), "x")
    # valid: a boolean list, a mask that broadcasts, a 0-d Tensor value (torch takes one)
    assert masked_fill(Tensor([[1.0, 2.0]]), [True, False], Tensor(5.0)).data.tolist() == \
        [[5.0, 2.0]]


def test_narrow_checks_its_axis_and_takes_torchs_negative_start():
    """axis was taken modulo ndim: axis 5 of a 2-D tensor silently narrowed axis 1 (torch
    raises IndexError), a 0-d tensor was a ZeroDivisionError and a float axis a TypeError from
    tuple indexing; torch's negative start (from the end) was refused."""
    from floatlab.mixed.checks import AxisRangeError

    x = Tensor(np.arange(6.0).reshape(2, 3))
    with pytest.raises(AxisRangeError, match=r"narrow: axis 5 is out of range for a tensor of 2"):
        fm.layers.narrow(x, 5, 0, 1)
    with pytest.raises(IndexError, match="narrow: axis -3 is out of range"):
        fm.layers.narrow(x, -3, 0, 1)
    with pytest.raises(TypeError, match="narrow: axis must be an int"):
        fm.layers.narrow(x, 1.0, 0, 1)
    with pytest.raises(TypeError, match=r"narrow: start must be a whole number"):
        fm.layers.narrow(x, 1, 0.5, 1)
    with pytest.raises(ValueError, match="narrow: x is 0-d"):
        fm.layers.narrow(Tensor(1.0), 0, 0, 1)
    with pytest.raises(ValueError, match=r"narrow: start must be >= -3, got -4"):
        fm.layers.narrow(x, 1, -4, 1)
    assert fm.layers.narrow(x, -1, -2, 2).data.tolist() == [[1.0, 2.0], [4.0, 5.0]]
    assert fm.layers.narrow(x, 1, 3, 0).shape == (2, 0)


@pytest.mark.parametrize("call", [
    lambda: fm.embedding([0, 5], fm.parameter(np.zeros((5, 2)))),
    lambda: fm.embedding([[-1]], fm.parameter(np.zeros((5, 2)))),
    lambda: fm.cross_entropy(Tensor(np.zeros((2, 3))), [3, 0]),
    lambda: fm.sequence_loss(Tensor(np.zeros((1, 2, 3))), [[0, 3]]),
])
def test_out_of_range_ids_and_targets_are_also_torchs_index_error(call):
    """torch raises IndexError ("index out of range in self", "Target 3 is out of bounds");
    these were plain ValueErrors, so `except IndexError` written for torch missed them."""
    from floatlab.mixed.checks import IndexRangeError

    with pytest.raises(IndexRangeError, match=r"must lie in \[0, \d\)") as info:
        call()
    assert isinstance(info.value, IndexError) and isinstance(info.value, ValueError)


def test_permute_takes_torchs_negative_axes_and_checks_them():
    """(-1, 0) was refused as 'not a permutation' (torch takes negative dims), and (0.0, 1.0)
    passed the check (0.0 == 0) to fail inside np.transpose."""
    x = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = fm.layers.permute(x, (-1, 0))
    assert y.data.tolist() == x.data.T.tolist()
    y.backward(grad=np.arange(6.0).reshape(3, 2))
    assert x.grad.tolist() == np.arange(6.0).reshape(3, 2).T.tolist()
    with pytest.raises(TypeError, match="permute: axis must be an int"):
        fm.layers.permute(x, (0.0, 1.0))
    with pytest.raises(RuntimeError, match="permute: axis .* names axis 1 twice"):
        fm.layers.permute(x, (1, -1))
    with pytest.raises(IndexError, match="permute: axis 2 is out of range"):
        fm.layers.permute(x, (0, 2))
    with pytest.raises(ValueError, match=r"permute: axes \(0,\) are not a permutation of 2"):
        fm.layers.permute(x, (0,))
