"""Activation, elementwise, unary, constant, identity and cast layers."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .. import _dtypes
from .._core import ILayer, RunContext, TensorInfo, Weights, as_dims, broadcast_shape, volume
from .._dtypes import cast_to
from .._enums import ActivationType, DataType, ElementWiseOperation, UnaryOperation

_ACT_TYPES = _dtypes.FLOATS | {DataType.INT8}


def _activation(x: torch.Tensor, kind: Any, alpha: float, beta: float) -> torch.Tensor:
    A = ActivationType
    if kind == A.RELU:
        return torch.relu(x)
    if kind == A.SIGMOID:
        return torch.sigmoid(x)
    if kind == A.TANH:
        return torch.tanh(x)
    if kind == A.LEAKY_RELU:
        return torch.where(x >= 0, x, x * alpha)
    if kind == A.ELU:
        return torch.where(x >= 0, x, alpha * torch.expm1(x))
    if kind == A.SELU:
        return beta * torch.where(x >= 0, x, alpha * torch.expm1(x))
    if kind == A.SOFTSIGN:
        return x / (1 + x.abs())
    if kind == A.SOFTPLUS:
        return alpha * F.softplus(x * beta)
    if kind == A.CLIP:
        return x.clamp(alpha, beta)
    if kind == A.HARD_SIGMOID:
        return (alpha * x + beta).clamp(0, 1)
    if kind == A.SCALED_TANH:
        return alpha * torch.tanh(beta * x)
    if kind == A.THRESHOLDED_RELU:
        return torch.where(x > alpha, x, torch.zeros_like(x))
    if kind == A.GELU_ERF:
        return F.gelu(x)
    if kind == A.GELU_TANH:
        return F.gelu(x, approximate="tanh")
    raise ValueError(f"unknown activation {kind!r}")


class IActivationLayer(ILayer):
    _layer_type = "ACTIVATION"
    _attrs = {"type": ActivationType.RELU, "alpha": 0.0, "beta": 0.0}

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        assert infos[0] is not None
        if infos[0].dtype not in _ACT_TYPES:
            raise self._fail(f"activation input must be FLOAT, HALF, BF16 or INT8, got {infos[0].dtype.name}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0]
        a = self._a
        if x.device.type == "meta":  # shape inference: same shape and dtype
            return [torch.empty_like(x)]
        if x.dtype in (torch.float16, torch.bfloat16) and not rt.probe:
            return [_activation(x.float(), a["type"], a["alpha"], a["beta"]).to(x.dtype)]
        return [_activation(x, a["type"], a["alpha"], a["beta"])]


_E = ElementWiseOperation
_BOOL_OPS = {_E.AND, _E.OR, _E.XOR}
_CMP_OPS = {_E.EQUAL, _E.GREATER, _E.LESS}


def elementwise(op: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if op == _E.SUM:
        return a + b
    if op == _E.PROD:
        return a * b
    if op == _E.MAX:
        return torch.maximum(a, b)
    if op == _E.MIN:
        return torch.minimum(a, b)
    if op == _E.SUB:
        return a - b
    if op == _E.DIV:
        if a.dtype.is_floating_point:
            return a / b
        return torch.div(a, b, rounding_mode="trunc")
    if op == _E.POW:
        return torch.pow(a, b)
    if op == _E.FLOOR_DIV:
        return torch.div(a, b, rounding_mode="floor")
    if op == _E.AND:
        return torch.logical_and(a, b)
    if op == _E.OR:
        return torch.logical_or(a, b)
    if op == _E.XOR:
        return torch.logical_xor(a, b)
    if op == _E.EQUAL:
        return torch.eq(a, b)
    if op == _E.GREATER:
        return torch.gt(a, b)
    if op == _E.LESS:
        return torch.lt(a, b)
    raise ValueError(f"unknown elementwise operation {op!r}")


class IElementWiseLayer(ILayer):
    _layer_type = "ELEMENTWISE"
    _attrs = {"op": ElementWiseOperation.SUM}

    def _required_inputs(self) -> int:
        return 2

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        a, b = infos[0], infos[1]
        assert a is not None and b is not None
        if a.dtype != b.dtype:
            raise self._fail(
                f"both inputs must have the same type, got {a.dtype.name} and {b.dtype.name} (insert a cast)"
            )
        op = self._a["op"]
        if op in _BOOL_OPS and a.dtype != DataType.BOOL:
            raise self._fail(f"{op.name} requires BOOL inputs, got {a.dtype.name}")
        if op not in _BOOL_OPS and op not in (_E.EQUAL,) and a.dtype == DataType.BOOL:
            raise self._fail(f"{op.name} does not accept BOOL inputs")
        if op == _E.POW and a.dtype not in _dtypes.FLOATS | {DataType.INT8}:
            raise self._fail(f"POW requires floating-point inputs, got {a.dtype.name}")
        broadcast_shape(a.shape, b.shape, self._fail)

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        a, b = inputs
        if a.device.type == "meta":  # shape inference: broadcast shape, bool for comparisons
            dt = torch.bool if self._a["op"] in _CMP_OPS or self._a["op"] in _BOOL_OPS else a.dtype
            return [torch.empty(torch.broadcast_shapes(a.shape, b.shape), dtype=dt, device="meta")]
        if a.dtype in (torch.float16, torch.bfloat16) and not rt.probe:
            return [elementwise(self._a["op"], a.float(), b.float()).to(
                torch.bool if self._a["op"] in _CMP_OPS else a.dtype)]
        return [elementwise(self._a["op"], a, b)]


_U = UnaryOperation
_UNARY_FN: dict[Any, Any] = {
    _U.EXP: torch.exp, _U.LOG: torch.log, _U.SQRT: torch.sqrt, _U.RECIP: torch.reciprocal,
    _U.ABS: torch.abs, _U.NEG: torch.neg, _U.SIN: torch.sin, _U.COS: torch.cos, _U.TAN: torch.tan,
    _U.SINH: torch.sinh, _U.COSH: torch.cosh, _U.ASIN: torch.asin, _U.ACOS: torch.acos,
    _U.ATAN: torch.atan, _U.ASINH: torch.asinh, _U.ACOSH: torch.acosh, _U.ATANH: torch.atanh,
    _U.CEIL: torch.ceil, _U.FLOOR: torch.floor, _U.ERF: torch.erf, _U.NOT: torch.logical_not,
    _U.SIGN: torch.sign, _U.ROUND: torch.round, _U.ISINF: torch.isinf, _U.ISNAN: torch.isnan,
}
_INT_OK = {_U.ABS, _U.NEG, _U.SIGN}


class IUnaryLayer(ILayer):
    _layer_type = "UNARY"
    _attrs = {"op": UnaryOperation.EXP}

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        assert infos[0] is not None
        dt, op = infos[0].dtype, self._a["op"]
        if op == _U.NOT:
            if dt != DataType.BOOL:
                raise self._fail(f"NOT requires a BOOL input, got {dt.name}")
        elif dt == DataType.BOOL:
            raise self._fail(f"{op.name} does not accept BOOL input")
        elif dt in _dtypes.INTS and op not in _INT_OK:
            raise self._fail(f"{op.name} requires a floating-point input, got {dt.name}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0]
        if x.device.type == "meta":  # shape inference: same shape; bool for NOT / ISINF / ISNAN
            boolean = self._a["op"] in (_U.NOT, _U.ISINF, _U.ISNAN)
            return [torch.empty_like(x, dtype=torch.bool if boolean else x.dtype)]
        fn = _UNARY_FN[self._a["op"]]
        if x.dtype in (torch.float16, torch.bfloat16) and not rt.probe:
            y = fn(x.float())
            return [y if y.dtype == torch.bool else y.to(x.dtype)]
        return [fn(x)]


class IConstantLayer(ILayer):
    _layer_type = "CONSTANT"
    _attrs = {"weights": None, "shape": ()}

    def _required_inputs(self) -> int:
        return 0

    def _check(self, infos: list[TensorInfo | None]) -> None:
        w: Weights | None = self._a["weights"]
        shape = self._a["shape"]
        if w is None:
            raise self._fail("constant has no weights")
        if any(d < 0 for d in shape):
            raise self._fail(f"constant shape must be static, got {shape}")
        if volume(shape) != len(w):
            raise self._fail(f"weights count {len(w)} does not match the volume {volume(shape)} of shape {shape}")

    def _out_dtypes(self, in_dtypes: list[Any], outs: list[torch.Tensor]) -> list[Any]:
        return [self._a["weights"].dtype]

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        shape = self._a["shape"]
        if rt.probe:
            w = self._a["weights"]
            if getattr(w, "_stripped", False):  # NOTE: a weight-stripped plan's refittable weights: no values yet
                return [torch.empty(shape, dtype=_dtypes.torch_dtype(w.dtype), device="meta")]
            t = w._tensor()
            return [t.reshape(shape) if t.numel() <= 4096 else torch.empty(shape, dtype=t.dtype, device="meta")]
        w = rt.weight(self, "weights")
        if w is None:
            w = self._a["weights"]._tensor().to(rt.device)
        return [w.reshape(shape)]


class IIdentityLayer(ILayer):
    _layer_type = "IDENTITY"

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0]
        target = self._output_types.get(0)
        if target is not None:
            return [cast_to(x, target)]
        return [x]


class ICastLayer(ILayer):
    _layer_type = "CAST"
    _attrs = {"to_type": DataType.FLOAT}

    def _out_dtypes(self, in_dtypes: list[Any], outs: list[torch.Tensor]) -> list[Any]:
        return [self._a["to_type"]]

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        target = self._output_types.get(0, self._a["to_type"])
        rng = self.__dict__.get("_out_range")
        if rng is None and "_network_ref" in self.__dict__ and self._outputs:
            rng = self._outputs[0]._dynamic_range
        if rng is not None and target == DataType.INT8 and inputs[0].dtype.is_floating_point:
            # INT8 with a dynamic range (implicit quantization): scale = max(|min|, |max|) / 127 in
            # float32, applied as a multiplication by its reciprocal (matches TensorRT's rounding).
            inv = 1.0 / torch.tensor(max(abs(rng[0]), abs(rng[1])) / 127.0, dtype=torch.float32)
            return [cast_to(inputs[0].float() * inv.item(), target, nearest=True)]
        return [cast_to(inputs[0], target)]

    def _extra_state(self) -> dict[str, Any]:
        rng = self._outputs[0]._dynamic_range if self._outputs else None
        return {"out_range": list(rng) if rng is not None else None}

    def _restore_extra(self, state: dict[str, Any]) -> None:
        rng = state.get("out_range")
        self._out_range = tuple(rng) if rng is not None else None


class BasicMixin:
    _add: Any

    def add_activation(self, input: Any, type: Any) -> IActivationLayer:  # noqa: A002 (TensorRT's names)
        return self._add("IActivationLayer", [input], type=type)  # type: ignore[no-any-return]

    def add_elementwise(self, input1: Any, input2: Any, op: Any) -> IElementWiseLayer:
        return self._add("IElementWiseLayer", [input1, input2], op=op)  # type: ignore[no-any-return]

    def add_unary(self, input: Any, op: Any) -> IUnaryLayer:  # noqa: A002
        return self._add("IUnaryLayer", [input], op=op)  # type: ignore[no-any-return]

    def add_constant(self, shape: Any, weights: Any) -> IConstantLayer:
        return self._add("IConstantLayer", [], shape=as_dims(shape, "add_constant shape"),  # type: ignore[no-any-return]
                         weights=weights)

    def add_identity(self, input: Any) -> IIdentityLayer:  # noqa: A002
        return self._add("IIdentityLayer", [input])  # type: ignore[no-any-return]

    def add_cast(self, input: Any, to_type: Any) -> ICastLayer:  # noqa: A002
        return self._add("ICastLayer", [input], to_type=to_type)  # type: ignore[no-any-return]
