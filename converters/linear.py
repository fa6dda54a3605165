"""Linear algebra: linear, matmul (every rank combination), mm, bmm, addmm, baddbmm, einsum, outer,
bilinear."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from torch2trt_lite.registry import Call, converter, register_table

from .impl import linear as lin
from .impl.nn_common import ew, float_dtype, reshape

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


def _float_operands(*indices: int) -> Any:
    def check(call: Call) -> str | None:
        if call.kwargs.get("out") is not None:
            return "out= is not supported"
        for i in indices:
            t = call.args[i] if i < len(call.args) else None
            if isinstance(t, torch.Tensor) and not float_dtype(t.dtype):
                return f"TensorRT matrix multiplication needs floating-point operands, got {t.dtype}"
        if isinstance(call.output, torch.Tensor) and not float_dtype(call.output.dtype):
            return f"TensorRT matrix multiplication needs floating-point operands, got {call.output.dtype}"
        return None

    return check


@converter(F.linear, check=_float_operands(0))
def convert_linear(ctx: ConversionContext, call: Call) -> Any:
    dt = call.output.dtype
    bias = call.arg(2, "bias", None)
    return lin.linear(ctx, ctx.itensor(call.arg(0, "input"), dt), ctx.itensor(call.arg(1, "weight"), dt),
                      ctx.itensor(bias, dt) if bias is not None else None)


def _matmul(ctx: ConversionContext, call: Call) -> Any:
    dt = call.output.dtype
    return lin.torch_matmul(ctx, ctx.itensor(call.arg(0, "input"), dt), ctx.itensor(call.arg(1, "other"), dt))


def _rmatmul(ctx: ConversionContext, call: Call) -> Any:
    dt = call.output.dtype
    return lin.torch_matmul(ctx, ctx.itensor(call.args[1], dt), ctx.itensor(call.args[0], dt))


register_table(
    {
        (torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.mm, torch.Tensor.mm, torch.bmm,
         torch.Tensor.bmm): _matmul,
        torch.Tensor.__rmatmul__: _rmatmul,
    },
    lambda fn: fn,
    check=_float_operands(0, 1),
)


def _addmm(ctx: ConversionContext, call: Call) -> Any:
    dt = call.output.dtype
    base = ctx.itensor(call.arg(0, "input"), dt)
    m1 = call.args[1] if len(call.args) > 1 else call.kwargs.get("mat1", call.kwargs.get("batch1"))
    m2 = call.args[2] if len(call.args) > 2 else call.kwargs.get("mat2", call.kwargs.get("batch2"))
    prod = lin.torch_matmul(ctx, ctx.itensor(m1, dt), ctx.itensor(m2, dt))
    beta, alpha = call.kwargs.get("beta", 1), call.kwargs.get("alpha", 1)
    return lin.blend(ctx, base, prod, float(beta), float(alpha), dt)


register_table(
    {(torch.addmm, torch.Tensor.addmm, torch.baddbmm, torch.Tensor.baddbmm): _addmm},
    lambda fn: fn,
    check=_float_operands(0, 1, 2),
)


def _einsum_operands(call: Call) -> list[Any]:
    ops = list(call.args[1:])
    if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
        ops = list(ops[0])
    return ops


def _check_einsum(call: Call) -> str | None:
    ops = _einsum_operands(call)
    if any(not float_dtype(t.dtype) for t in ops if isinstance(t, torch.Tensor)):
        return "TensorRT einsum needs floating-point operands"
    eq = str(call.args[0]).replace(" ", "")
    for term in eq.replace("->", ",").split(","):
        letters = [c for c in term if c.isalpha()]
        if len(letters) != len(set(letters)):
            return f"repeated subscripts in one operand ({term!r}: diagonals/traces) are not supported by TensorRT"
    return None


@converter(torch.einsum, check=_check_einsum)
def convert_einsum(ctx: ConversionContext, call: Call) -> Any:
    dt = call.output.dtype
    ops = [ctx.itensor(t, dt) for t in _einsum_operands(call)]
    return lin.einsum(ctx, str(call.args[0]), ops)


@converter(torch.outer, torch.Tensor.outer, torch.ger, torch.Tensor.ger, check=_float_operands(0, 1))
def convert_outer(ctx: ConversionContext, call: Call) -> Any:
    dt = call.output.dtype
    a = reshape(ctx, ctx.itensor(call.arg(0, "input"), dt), (-1, 1))
    b = reshape(ctx, ctx.itensor(call.arg(1, "vec2"), dt), (1, -1))
    return ew(ctx, a, b, "PROD")


def _check_bilinear(call: Call) -> str | None:
    from .impl.nn_common import is_traced

    if is_traced(call.arg(2, "weight")):
        return "a bilinear weight computed from the network inputs is not supported"
    return _float_operands(0, 1)(call)


@converter(F.bilinear, check=_check_bilinear)
def convert_bilinear(ctx: ConversionContext, call: Call) -> Any:
    dt = call.output.dtype
    bias = call.arg(3, "bias", None)
    return lin.bilinear(ctx, ctx.itensor(call.arg(0, "input1"), dt), ctx.itensor(call.arg(1, "input2"), dt),
                        call.arg(2, "weight"), ctx.itensor(bias, dt) if bias is not None else None, dt)
