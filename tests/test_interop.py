"""Issue 8, section 4: torch tensors / JAX arrays in, the caller's array type out (torch).

Torch is not a test dependency: a small fake tensor library stands in for it, behaving as torch
does where floatlab relies on it (``__dlpack__`` that refuses non-host memory and dtypes numpy
lacks, ``__array__``, ``detach`` / ``cpu`` / ``float`` / ``to``, and a top-level
``from_numpy``). The real torch was checked by hand (see the issue 8 report).
"""

from __future__ import annotations

import sys
import types

import ml_dtypes
import numpy as np
import pytest

import floatlab

fake = types.ModuleType("fake_torch_for_floatlab_tests")


class Tensor:
    def __init__(self, data, device="cpu"):
        self.data, self.device = np.asarray(data), device
        self.detached = False

    @property
    def dtype(self):
        return f"fake.{self.data.dtype.name}"

    def __dlpack__(self, **kwargs):
        if self.device != "cpu":
            raise BufferError("fake tensor lives on another device")
        if self.data.dtype == ml_dtypes.bfloat16:
            raise BufferError("bfloat16 cannot be exported to numpy")
        return self.data.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.data.__dlpack_device__()

    def __array__(self, dtype=None, copy=None):
        if self.device != "cpu":
            raise TypeError("can't convert a device tensor to numpy: use .cpu() first")
        return self.data if dtype is None else self.data.astype(dtype)

    def detach(self):
        out = Tensor(self.data, self.device)
        out.detached = True
        return out

    def cpu(self):
        return Tensor(self.data, "cpu")

    def to(self, device):
        return Tensor(self.data, device)

    def float(self):
        return Tensor(self.data.astype(np.float32), self.device)

    def is_floating_point(self):
        return self.data.dtype.kind == "f" or self.data.dtype == ml_dtypes.bfloat16


Tensor.__module__ = fake.__name__
fake.Tensor = Tensor
fake.from_numpy = lambda array: Tensor(array)
sys.modules[fake.__name__] = fake


class JaxLikeArray:
    """__array__ only, in a library without from_numpy: results come back as numpy."""

    def __init__(self, data):
        self.data = np.asarray(data)

    def __array__(self, dtype=None, copy=None):
        return self.data


X = np.array([1 / 3, 65519.0, 1e-8, -2.5, np.inf])


@pytest.mark.parametrize(
    "call",
    [
        lambda x: floatlab.round(x, "fp16"),
        lambda x: floatlab.round(x, "bf16", "stochastic", rng=0),
        lambda x: floatlab.encode(x, "e4m3fn", saturate=True),
        lambda x: floatlab.ulp(x, "fp16"),
        lambda x: floatlab.nextafter(x, "up", "fp64"),
    ],
    ids=["round", "round-sr", "encode", "ulp", "nextafter"],
)
def test_tensor_in_tensor_out(call):
    for dtype in (np.float32, np.float64):
        values = X.astype(dtype)
        expected = call(values)  # the numpy answer
        got = call(Tensor(values))
        assert type(got) is Tensor and got.device == "cpu"
        assert np.array_equal(got.data, expected, equal_nan=True)
        assert got.data.dtype == expected.dtype


def test_results_go_back_to_the_input_device():
    x = Tensor(X.astype(np.float32), device="fake:1")
    out = floatlab.round(x, "fp16")
    assert type(out) is Tensor and out.device == "fake:1"
    assert np.array_equal(out.data, floatlab.round(X.astype(np.float32), "fp16"))
    codes = floatlab.encode(x, "fp16")
    assert codes.device == "fake:1" and codes.data.dtype == np.uint16
    values = floatlab.decode(codes, "fp16")
    assert type(values) is Tensor and values.device == "fake:1"
    assert np.array_equal(values.data, floatlab.round(X, "fp16"))


def test_bfloat16_tensors_widen_exactly():
    """numpy has no bfloat16: the tensor is widened (exactly) to float32 through .float()."""
    b = Tensor(np.array([1.0, 3.140625, -0.0, 2.0**-133], dtype=ml_dtypes.bfloat16))
    out = floatlab.round(b, "bf16")
    assert type(out) is Tensor
    assert np.array_equal(out.data, b.data.astype(np.float64))
    assert np.signbit(out.data[2])
    assert floatlab.to_bin(b, "bf16").tolist()[1] == "0100000001001001"


def test_zero_d_tensors_stay_zero_d():
    out = floatlab.round(Tensor(np.float64(0.1)), "bf16")
    assert type(out) is Tensor and out.data.shape == () and float(out.data) == 0.10009765625


def test_strings_and_explain_take_tensors():
    x = Tensor(X.astype(np.float32))
    assert floatlab.to_bin(x, "fp16").tolist() == floatlab.to_bin(X.astype(np.float32),
                                                                  "fp16").tolist()
    assert floatlab.to_hex(x, "e5m2").tolist() == floatlab.to_hex(X, "e5m2").tolist()
    assert floatlab.exact_decimal(Tensor(np.array([0.1])), "fp16").tolist() == ["0.0999755859375"]
    assert floatlab.explain(Tensor(np.float32(0.1)), "bf16").value == 0.10009765625
    assert floatlab.fields(Tensor(np.array([1.0])), "fp16").code.tolist() == [0x3C00]


def test_arrays_of_libraries_without_from_numpy_come_back_as_numpy():
    jx = JaxLikeArray(np.array([1.0, 1 / 3], dtype=ml_dtypes.bfloat16))
    out = floatlab.round(jx, "e4m3fn")
    assert type(out) is np.ndarray
    assert out.tolist() == [1.0, 0.34375]  # from bf16's 0.333984375, not from 1/3
    assert type(floatlab.decode(JaxLikeArray(np.array([0x3C00])), "fp16")) is np.ndarray


def test_numpy_and_python_inputs_are_unchanged():
    assert type(floatlab.round([1.0], "fp16")) is np.ndarray
    assert type(floatlab.round(np.float32(1.0), "fp16")) is np.ndarray
    assert type(floatlab.encode(1.0, "fp16")) is np.ndarray
