"""The sim's activation, elementwise, unary and cast layers against TensorRT's documented formulas.

References are written from TensorRT's API documentation (NvInfer.h: ActivationType,
ElementWiseOperation, UnaryOperation; the Cast operator) and computed with numpy in float64, so they
share no code with the sim's torch implementation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from tests.sim.netbuilder import Net, infer, trt
from torch2trt_lite.errors import NetworkDefinitionError
from torch2trt_lite.sim import torch_dtype

F32 = {"rtol": 1e-5, "atol": 1e-6}
F16 = {"rtol": 1e-3, "atol": 1e-3}
EXACT = {"rtol": 0.0, "atol": 0.0}

A = trt.ActivationType


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x)


# (type, alpha, beta, reference(x, alpha, beta)) from NvInfer.h's ActivationType documentation
ACTIVATIONS: list[tuple[Any, float, float, Callable[[np.ndarray, float, float], np.ndarray]]] = [
    (A.RELU, 0.0, 0.0, lambda x, a, b: np.maximum(x, 0)),
    (A.SIGMOID, 0.0, 0.0, lambda x, a, b: 1 / (1 + np.exp(-x))),
    (A.TANH, 0.0, 0.0, lambda x, a, b: np.tanh(x)),
    (A.LEAKY_RELU, 0.1, 0.0, lambda x, a, b: np.where(x >= 0, x, a * x)),
    (A.ELU, 0.7, 0.0, lambda x, a, b: np.where(x >= 0, x, a * (np.exp(x) - 1))),
    (A.SELU, 1.67, 1.05, lambda x, a, b: np.where(x >= 0, b * x, b * (a * np.exp(x) - a))),
    (A.SOFTSIGN, 0.0, 0.0, lambda x, a, b: x / (1 + np.abs(x))),
    (A.SOFTPLUS, 0.5, 2.0, lambda x, a, b: a * np.log(np.exp(b * x) + 1)),
    (A.CLIP, -0.5, 1.25, lambda x, a, b: np.maximum(a, np.minimum(b, x))),
    (A.HARD_SIGMOID, 0.2, 0.5, lambda x, a, b: np.maximum(0, np.minimum(1, a * x + b))),
    (A.SCALED_TANH, 1.5, 0.5, lambda x, a, b: a * np.tanh(b * x)),
    # NvInfer.h: x > alpha ? x : 0 (the operator page writes max(0, x - alpha); the API's is kept)
    (A.THRESHOLDED_RELU, 0.5, 0.0, lambda x, a, b: np.where(x > a, x, 0.0)),
    (A.GELU_ERF, 0.0, 0.0, lambda x, a, b: 0.5 * x * (1 + _erf(x * math.sqrt(0.5)))),
    (A.GELU_TANH, 0.0, 0.0,
     lambda x, a, b: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (0.044715 * x**3 + x)))),
]

# includes the branch points of the piecewise ones: 0, alpha, and x where alpha * x + beta hits 0 / 1
X = torch.tensor([-4.0, -2.5, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 2.5, 4.0])


def _run_activation(kind: Any, alpha: float, beta: float, x: torch.Tensor, dtype: Any) -> torch.Tensor:
    net = Net()
    layer = net.network.add_activation(net.input("x", x.shape, dtype), kind)
    layer.alpha, layer.beta = alpha, beta
    (y,) = infer(net.build(layer.get_output(0)), {"x": x})
    return y


@pytest.mark.parametrize("kind,alpha,beta,ref", ACTIVATIONS, ids=[a[0].name for a in ACTIVATIONS])
def test_activation_follows_the_documented_formula(kind: Any, alpha: float, beta: float, ref: Callable) -> None:
    want = torch.from_numpy(ref(X.double().numpy(), alpha, beta))
    got = _run_activation(kind, alpha, beta, X, trt.float32)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), want, **F32)
    xh = X.half()
    got16 = _run_activation(kind, alpha, beta, xh, trt.float16)
    assert got16.dtype == torch.float16
    torch.testing.assert_close(got16.double(), torch.from_numpy(ref(xh.double().numpy(), alpha, beta)), **F16)


E = trt.ElementWiseOperation


@pytest.mark.parametrize("dtype", [trt.int32, trt.int64])
def test_integer_div_truncates_and_floor_div_floors(dtype: Any) -> None:
    a = torch.tensor([7, -7, 7, -7, 6, -6, 0], dtype=torch.int32 if dtype == trt.int32 else torch.int64)
    b = torch.tensor([2, 2, -2, -2, 3, 4, 5], dtype=a.dtype)
    net = Net()
    xa, xb = net.input("a", a.shape, dtype), net.input("b", b.shape, dtype)
    engine = net.build(net.ew(xa, xb, "DIV"), net.ew(xa, xb, "FLOOR_DIV"))
    div, floor_div = infer(engine, {"a": a, "b": b})
    an, bn = a.numpy().astype(np.int64), b.numpy().astype(np.int64)
    trunc = np.sign(an) * np.sign(bn) * (np.abs(an) // np.abs(bn))  # toward zero, in exact integers
    torch.testing.assert_close(div, torch.from_numpy(trunc).to(a.dtype), **EXACT)
    torch.testing.assert_close(floor_div, torch.from_numpy(an // bn).to(a.dtype), **EXACT)  # toward -inf


FLOAT_OPS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "SUM": np.add, "PROD": np.multiply, "MAX": np.maximum, "MIN": np.minimum, "SUB": np.subtract,
    "DIV": np.divide, "POW": np.power, "FLOOR_DIV": lambda a, b: np.floor(a / b),
}
COMPARE_OPS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "EQUAL": np.equal, "GREATER": np.greater, "LESS": np.less,
}


@pytest.mark.parametrize("op", sorted(FLOAT_OPS) + sorted(COMPARE_OPS))
def test_float_elementwise_broadcasts_and_computes(op: str) -> None:
    g = torch.Generator().manual_seed(len(op))
    a = torch.rand(2, 1, 4, generator=g) * 3 + 0.5  # positive: POW of a fractional exponent is real
    b = torch.rand(1, 3, 4, generator=g) * 2 - 1
    b[0, 0, :2] = a[0, 0, :2]  # some equal pairs for EQUAL
    net = Net()
    y = net.ew(net.input("a", a.shape), net.input("b", b.shape), op)
    assert tuple(y.shape) == (2, 3, 4)
    (got,) = infer(net.build(y), {"a": a, "b": b})
    an, bn = a.double().numpy(), b.double().numpy()
    if op in COMPARE_OPS:
        assert got.dtype == torch.bool
        want = COMPARE_OPS[op](a.numpy(), b.numpy())  # compared in float32, as given
        assert torch.equal(got, torch.from_numpy(want))
    else:
        torch.testing.assert_close(got.double(), torch.from_numpy(FLOAT_OPS[op](an, bn)), **F32)


@pytest.mark.parametrize("op,ref", [("AND", np.logical_and), ("OR", np.logical_or), ("XOR", np.logical_xor)])
def test_boolean_elementwise(op: str, ref: Callable) -> None:
    a = torch.tensor([[True, True, False, False]])
    b = torch.tensor([[True], [False]])
    net = Net()
    y = net.ew(net.input("a", a.shape, trt.bool), net.input("b", b.shape, trt.bool), op)
    (got,) = infer(net.build(y), {"a": a, "b": b})
    assert got.dtype == torch.bool and torch.equal(got, torch.from_numpy(ref(a.numpy(), b.numpy())))


def test_elementwise_refuses_mixed_types_and_bools_in_arithmetic() -> None:
    net = Net()
    with pytest.raises(NetworkDefinitionError, match="same type"):
        net.ew(net.input("a", (2,)), net.input("b", (2,), trt.int32), "SUM")
    net = Net()
    with pytest.raises(NetworkDefinitionError, match="BOOL"):
        net.ew(net.input("a", (2,), trt.bool), net.input("b", (2,), trt.bool), "SUM")


U = trt.UnaryOperation
UNARY: dict[str, tuple[Callable[[np.ndarray], np.ndarray], tuple[float, float]]] = {
    # op: (numpy reference, input range)
    "EXP": (np.exp, (-3, 3)), "LOG": (np.log, (0.1, 5)), "SQRT": (np.sqrt, (0, 5)),
    "RECIP": (np.reciprocal, (0.5, 4)), "ABS": (np.abs, (-3, 3)), "NEG": (np.negative, (-3, 3)),
    "SIN": (np.sin, (-3, 3)), "COS": (np.cos, (-3, 3)), "TAN": (np.tan, (-1.2, 1.2)),
    "SINH": (np.sinh, (-3, 3)), "COSH": (np.cosh, (-3, 3)), "ASIN": (np.arcsin, (-0.99, 0.99)),
    "ACOS": (np.arccos, (-0.99, 0.99)), "ATAN": (np.arctan, (-3, 3)), "ASINH": (np.arcsinh, (-3, 3)),
    "ACOSH": (np.arccosh, (1.01, 5)), "ATANH": (np.arctanh, (-0.99, 0.99)), "CEIL": (np.ceil, (-3, 3)),
    "FLOOR": (np.floor, (-3, 3)), "ERF": (_erf, (-3, 3)), "SIGN": (np.sign, (-3, 3)),
    "ROUND": (np.rint, (-3, 3)),  # half to even
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_operation_matches_its_function(op: str) -> None:
    ref, (lo, hi) = UNARY[op]
    x = torch.linspace(lo, hi, 41)
    if op in ("CEIL", "FLOOR", "ROUND", "SIGN"):
        x = torch.cat([x, torch.tensor([-2.5, -1.5, -0.5, 0.0, 0.5, 1.5, 2.5])])  # ties and zero
    net = Net()
    layer = net.network.add_unary(net.input("x", x.shape), getattr(U, op))
    (got,) = infer(net.build(layer.get_output(0)), {"x": x})
    torch.testing.assert_close(got.double(), torch.from_numpy(ref(x.double().numpy())), **F32)


def test_unary_bool_outputs_and_int_inputs() -> None:
    x = torch.tensor([1.0, float("inf"), float("-inf"), float("nan"), 0.0])
    net = Net()
    xt = net.input("x", x.shape)
    isinf = net.network.add_unary(xt, U.ISINF).get_output(0)
    isnan = net.network.add_unary(xt, U.ISNAN).get_output(0)
    flags = net.input("b", (3,), trt.bool)
    nots = net.network.add_unary(flags, U.NOT).get_output(0)
    ints = net.input("i", (3,), trt.int32)
    negs = net.network.add_unary(ints, U.NEG).get_output(0)
    engine = net.build(isinf, isnan, nots, negs)
    b = torch.tensor([True, False, True])
    i = torch.tensor([3, -4, 0], dtype=torch.int32)
    got_inf, got_nan, got_not, got_neg = infer(engine, {"x": x, "b": b, "i": i})
    assert torch.equal(got_inf, torch.from_numpy(np.isinf(x.numpy())))
    assert torch.equal(got_nan, torch.from_numpy(np.isnan(x.numpy())))
    assert torch.equal(got_not, ~b)
    assert got_neg.dtype == torch.int32 and torch.equal(got_neg, torch.tensor([-3, 4, 0], dtype=torch.int32))
    net = Net()
    with pytest.raises(NetworkDefinitionError, match="floating-point"):
        net.network.add_unary(net.input("i", (3,), trt.int32), U.EXP)


# The Cast operator's documented examples (TensorRT operator docs, Cast and Identity): 5.6 -> 5,
# 8.9 -> 8: float -> int truncates toward zero; out-of-range values saturate to the int range.
_FRACTIONS = [5.6, 8.9, -5.6, -8.9, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.7, -3.7, 0.99, -0.99, 126.9, -127.9]
_INT_RANGES = {trt.int8: (-128, 127), trt.int32: (-(2**31), 2**31 - 1), trt.int64: (-(2**63), 2**63 - 1)}


def _truncated(values: list[float], lo: int, hi: int) -> list[int]:
    """Toward zero, saturated; in exact Python ints (no float64 rounding near int64's bounds)."""
    return [hi if v >= hi else lo if v <= lo else int(np.trunc(v)) for v in values]


@pytest.mark.parametrize("target", [trt.int8, trt.int32, trt.int64])
def test_float_to_int_cast_truncates_toward_zero_and_saturates(target: Any) -> None:
    x = torch.tensor(_FRACTIONS + [200.0, -200.0, 3e9, -3e9, 1e20, -1e20, float("inf"), float("-inf")])
    net = Net()
    y = net.network.add_cast(net.input("x", x.shape), target).get_output(0)
    (got,) = infer(net.build(y), {"x": x})
    assert got.tolist()[:4] == [5, 8, -5, -8]  # the documented examples, and their negatives
    assert got.tolist() == _truncated(x.double().tolist(), *_INT_RANGES[target])


@pytest.mark.parametrize("src", [trt.float16, trt.bfloat16])
def test_half_to_int32_cast_truncates_toward_zero(src: Any) -> None:
    x = torch.tensor([5.625, 8.875, -5.625, -8.875, 2.5, -2.5, 0.75, -0.75])  # exact in half and bf16
    net = Net()
    y = net.network.add_cast(net.input("x", x.shape, src), trt.int32).get_output(0)
    (got,) = infer(net.build(y), {"x": x.to(torch_dtype(src))})
    assert got.tolist() == [5, 8, -5, -8, 2, -2, 0, 0]


def test_float_to_uint8_cast_truncates_clamps_negatives_and_wraps() -> None:
    # negatives -> 0 and values above 255 wrap mod 256: conformance Cast/case_simple (TensorRT 10.16)
    x = torch.tensor([5.6, 8.9, 0.99, 254.9, 255.9, 256.5, 266.7, -5.6, -0.5, -300.0])
    net = Net()
    y = net.network.add_cast(net.input("x", x.shape), trt.uint8).get_output(0)
    (got,) = infer(net.build(y), {"x": x})
    assert got.tolist() == [5, 8, 0, 254, 255, 0, 10, 0, 0, 0]


@pytest.mark.parametrize("target", [trt.int8, trt.int32, trt.int64])
def test_identity_with_an_output_type_truncates_like_cast(target: Any) -> None:
    x = torch.tensor(_FRACTIONS)
    net = Net()
    layer = net.network.add_identity(net.input("x", x.shape))
    layer.set_output_type(0, target)
    (got,) = infer(net.build(layer.get_output(0)), {"x": x})
    assert got.tolist() == _truncated(x.double().tolist(), *_INT_RANGES[target])


def test_output_type_forced_on_a_float_layer_truncates() -> None:
    # a float layer whose output type is set to INT32 converts like a cast (reformatting)
    x = torch.tensor([5.6, 8.9, -5.6, -8.9, 2.5])
    net = Net()
    layer = net.network.add_unary(net.input("x", x.shape), trt.UnaryOperation.NEG)
    layer.set_output_type(0, trt.int32)
    (got,) = infer(net.build(layer.get_output(0)), {"x": x})
    assert got.dtype == torch.int32 and got.tolist() == [-5, -8, 5, 8, -2]


def test_int8_cast_with_a_dynamic_range_quantizes_to_nearest() -> None:
    # a dynamic range makes an INT8 cast a quantization (scale = 127 / max |range|), which rounds to
    # nearest, not toward zero: conformance Cast/case_int8 (-88.9 -> -89, -122.77 -> -123)
    x = torch.tensor([5.6, 8.9, -5.6, -88.9, 2.5, -2.5, 126.6, -126.6])
    net = Net()
    net.config.set_flag(trt.BuilderFlag.INT8)
    y = net.network.add_cast(net.input("x", x.shape), trt.int8).get_output(0)
    y.dynamic_range = (-127.0, 127.0)
    (got,) = infer(net.build(y), {"x": x})
    assert got.tolist() == [6, 9, -6, -89, 2, -2, 127, -127]
