"""Layers, initialisers and losses for the lab's MLPs.

Parameters are created in the active policy's weight format (float32 masters in mixed modes,
the low format in true modes). Initial values are drawn in float64 from a seeded generator and
rounded once, so every precision starts from the same network, up to its own rounding.

>>> from floatlab.mixed import MLP, Tensor, use_precision
>>> import numpy as np
>>> with use_precision("bf16-true"):
...     net = MLP((16, 64, 64, 4), seed=0)
...     logits = net(Tensor(np.zeros((2, 16), np.float32)))
>>> logits.shape, logits.fmt.name, net.num_parameters()
((2, 4), 'bfloat16', 5508)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from floatlab._validate import as_array, as_float_array
from floatlab.formats import Format, get_format
from floatlab.mixed.autograd import Tensor, _operand
from floatlab.mixed.checks import flag, sizes_fit, whole
from floatlab.mixed.checks import seed as seed_rng
from floatlab.mixed.elementwise import cast, mul, relu, sub, tanh
from floatlab.mixed.gemm import linear
from floatlab.mixed.reductions import _check_targets, cross_entropy, mean
from floatlab.mixed.scope import active_policy

__all__ = [
    "Module", "Linear", "MLP", "parameter", "he_normal", "xavier_normal",
    "cross_entropy", "mse_loss", "accuracy",
]


def parameter(values: Any, fmt: str | Format | None = None, name: str | None = None) -> Tensor:
    """A leaf tensor that requires grad, in ``fmt`` (default: the policy's weight format).

    >>> parameter([0.1], "bf16").data.tolist()
    [0.10009765625]
    """
    fmt = active_policy().weights if fmt is None else get_format(fmt)
    return Tensor(values, fmt, requires_grad=True, name=name)


def he_normal(rng: np.random.Generator, fan_in: int, shape: tuple[int, ...]) -> np.ndarray:
    """N(0, 2 / fan_in) in float64: keeps ReLU activations' variance constant through depth."""
    return rng.normal(0.0, np.sqrt(2.0 / fan_in), size=shape)


def xavier_normal(rng: np.random.Generator, fan_in: int, fan_out: int,
                  shape: tuple[int, ...]) -> np.ndarray:
    """N(0, 2 / (fan_in + fan_out)) in float64: the usual choice for tanh networks."""
    return rng.normal(0.0, np.sqrt(2.0 / (fan_in + fan_out)), size=shape)


class Module:
    """A container of parameters and sub-modules, callable as ``module(x)``."""

    def forward(self, x: Tensor) -> Tensor:
        raise NotImplementedError

    def __call__(self, x: Any) -> Tensor:
        return self.forward(x if isinstance(x, Tensor) else Tensor(x))

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        """(name, parameter) pairs, in a fixed order."""
        for key, value in vars(self).items():
            if isinstance(value, Tensor) and value.requires_grad:
                yield prefix + key, value
            elif isinstance(value, Module):
                yield from value.named_parameters(f"{prefix}{key}.")
            elif isinstance(value, (list, tuple)):
                for i, item in enumerate(value):
                    if isinstance(item, Module):
                        yield from item.named_parameters(f"{prefix}{key}.{i}.")

    def parameters(self) -> list[Tensor]:
        """All parameters, in a fixed order."""
        return [p for _, p in self.named_parameters()]

    def num_parameters(self) -> int:
        return int(np.sum([p.size for p in self.parameters()]))

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    # ------------------------------------------------------------------ torch-style weights
    def tied_parameters(self) -> dict[str, str]:
        """Extra state_dict names that alias a parameter (torch lists tied weights under both
        names): {alias: name}. None by default."""
        return {}

    def state_dict(self) -> dict[str, np.ndarray]:
        """{name: a copy of the values}, with torch's names (``layers.0.weight``, ...) and
        shapes (Linear weights are (out_features, in_features)); tied weights appear under
        every name, as in torch.

        >>> sorted(MLP((2, 3), seed=0).state_dict())
        ['layers.0.bias', 'layers.0.weight']
        """
        state = {name: p.data.copy() for name, p in self.named_parameters()}
        for alias, name in self.tied_parameters().items():
            state[alias] = state[name].copy()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Load values by name (NumPy arrays, or anything ``np.asarray`` takes, such as a CPU
        torch state_dict's tensors), rounded to each parameter's format. Keys and shapes must
        match exactly; the arrays passed in are never modified or kept.

        >>> net = MLP((2, 3), seed=0); other = MLP((2, 3), seed=1)
        >>> other.load_state_dict(net.state_dict())
        >>> bool((other.layers[0].weight.data == net.layers[0].weight.data).all())
        True
        """
        if not isinstance(state, dict):
            raise TypeError(f"load_state_dict: pass a dict of name -> array, got "
                            f"{type(state).__name__}")
        params = dict(self.named_parameters())
        tied = self.tied_parameters()
        missing = sorted(set(params) - set(state))
        unexpected = sorted(set(state) - set(params) - set(tied))
        if missing or unexpected:
            raise KeyError(f"load_state_dict: missing keys {missing}, unexpected keys "
                           f"{unexpected}; the state_dict must come from the same architecture")
        values = {}
        for name, p in params.items():
            # as_array: a masked array is refused (its mask would be dropped), ragged explained
            arr = as_array(state[name], f"load_state_dict: {name!r}")
            if arr.dtype.kind not in "fiu":
                raise TypeError(f"load_state_dict: {name!r} has dtype {arr.dtype}; expected "
                                "real numbers")
            if arr.shape != p.shape:
                raise ValueError(f"load_state_dict: {name!r} has shape {arr.shape}, the model's "
                                 f"parameter has shape {p.shape}")
            values[name] = arr
        for alias, name in tied.items():
            # NaN weights (a diverged run) load as torch loads them: tied copies match with NaN
            if alias in state and not np.array_equal(np.asarray(state[alias]), values[name],
                                                      equal_nan=True):
                raise ValueError(f"load_state_dict: {alias!r} is tied to {name!r} in this model "
                                 "but the state_dict holds different values for them")
        for name, p in params.items():
            new = Tensor(values[name].astype(np.float64), p.fmt)  # a fresh, rounded copy
            p.data, p.grad, p._copy = new.data, None, None


class Linear(Module):
    """``y = x @ weight.T + bias`` with torch's layout: weight is (out_features, in_features).

    >>> layer = Linear(3, 2, seed=0)
    >>> layer.weight.shape, layer.bias.shape
    ((2, 3), (2,))
    """

    @sizes_fit
    def __init__(
        self,
        in_features: int,
        out_features: int,
        *,
        bias: bool = True,
        init: str = "he_normal",
        seed: int | np.random.Generator = 0,
    ) -> None:
        in_features = whole("Linear: in_features", in_features)
        out_features = whole("Linear: out_features", out_features)
        bias = flag("Linear: bias", bias)  # bias="False" would build a bias
        rng = seed_rng("Linear: seed", seed)  # a Generator passes through, as default_rng's
        shape = (out_features, in_features)
        if init == "he_normal":
            w = he_normal(rng, in_features, shape)
        elif init == "xavier_normal":
            w = xavier_normal(rng, in_features, out_features, shape)
        else:
            raise ValueError(f"init={init!r}: use 'he_normal' or 'xavier_normal'")
        self.weight = parameter(w, name="weight")
        self.bias = parameter(np.zeros(out_features), name="bias") if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)


_ACTIVATIONS = {"relu": relu, "tanh": tanh}


class MLP(Module):
    """A multilayer perceptron: Linear layers with an activation between them, logits out.

    ``sizes`` lists the widths from input to output, e.g. ``(16, 64, 64, 4)``. ReLU networks
    use He-normal initialisation, tanh networks Xavier-normal; biases start at zero.

    >>> MLP((2, 8, 3), seed=1).num_parameters()
    51
    """

    def __init__(
        self, sizes: Sequence[int], *, activation: str = "relu", seed: int = 0
    ) -> None:
        if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Iterable):
            raise TypeError(f"MLP: sizes must be a sequence of layer widths such as (16, 64, 4), "
                            f"got {sizes!r}")
        # whole(): int(s) truncated 2.5 to 2 and read "3" as 3 (and sizes="32" as (3, 2))
        sizes = tuple(whole(f"MLP: sizes[{i}]", s) for i, s in enumerate(sizes))
        if len(sizes) < 2:
            raise ValueError(f"MLP sizes={sizes}: give at least input and output widths")
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation={activation!r}: use one of {sorted(_ACTIVATIONS)}")
        rng = seed_rng("MLP: seed", seed)
        init = "he_normal" if activation == "relu" else "xavier_normal"
        self.sizes, self.activation = sizes, activation
        pairs = zip(sizes[:-1], sizes[1:], strict=True)
        self.layers = [Linear(a, b, init=init, seed=rng) for a, b in pairs]

    def forward(self, x: Tensor) -> Tensor:
        act = _ACTIVATIONS[self.activation]
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = act(x)
        return x

    def __repr__(self) -> str:
        return f"MLP({'-'.join(map(str, self.sizes))}, {self.activation})"


def mse_loss(pred: Tensor, target: Any) -> Tensor:
    """Mean squared error, computed in the policy's float32 list format (autocast's mse_loss is
    on the float32 list on CUDA and CPU).

    >>> mse_loss(Tensor([1.0, 3.0]), Tensor([0.0, 0.0])).item()
    5.0
    """
    policy = active_policy()
    pred, target = _operand(pred, "mse_loss: pred"), _operand(target, "mse_loss: target")
    if pred.shape != target.shape:
        raise ValueError(f"mse_loss: pred has shape {pred.shape}, target {target.shape}; "
                         "they must match")
    fmt = policy.op_format("mse_loss", pred.fmt, target.fmt)
    d = sub(cast(pred, fmt), cast(target, fmt))
    return mean(mul(d, d))


def accuracy(logits: Tensor | np.ndarray, targets: Any) -> float:
    """Fraction of rows whose largest logit is the target class.

    A row holding NaN predicts the index of its first NaN (NumPy's and torch's argmax), so a
    network that went NaN scores like a constant guess -- the seed article's 50% on two classes.

    >>> accuracy(np.array([[0.1, 0.9], [0.8, 0.2]]), [1, 1])
    0.5
    """
    # checked as cross_entropy checks them: a wrong-length, out-of-range, string or masked
    # target used to compare unequal (or broadcast) and score as a silent wrong answer
    z = as_float_array(logits.data if isinstance(logits, Tensor) else logits,
                       name="accuracy: logits")
    if z.ndim != 2:
        raise ValueError(f"accuracy: logits must be (batch, classes), got shape {z.shape}")
    y = _check_targets(targets, z.shape[0], z.shape[1], "accuracy")
    return _fraction_correct(z, y)


def _fraction_correct(z: np.ndarray, y: np.ndarray) -> float:
    """:func:`accuracy` of checked arrays: logits (batch, classes), one class index per row.
    The trainer's steps call it directly, as cross_entropy checked the same targets in the
    same step (the checks cost about 4 us, a step's accuracy itself 8)."""
    ok = z.argmax(axis=1) == y
    return float(ok.mean()) if ok.size else float("nan")
