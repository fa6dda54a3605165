"""Types and creation: to(dtype)/type/type_as and the float()/int()/... casts, device moves, the *_like
creation functions and Tensor.new_* of traced tensors, fill_/zero_.

Creation functions with Python-int sizes (``torch.zeros(x.shape[0], 4)``) need no converter: they
build untraced tensors, which become constants.
"""

from __future__ import annotations

from typing import Any

import torch

from torch2trt_lite.context import ConversionContext
from torch2trt_lite.registry import Call, converter, register_table

from .impl import elementwise as E
from .impl import shape as S

T = torch.Tensor


def _dtype_check(call: Call) -> str | None:
    out = call.output
    if isinstance(out, torch.Tensor) and out.dtype not in E.TRT_DTYPES:
        return f"TensorRT has no {out.dtype} (supported: float32, float16, bfloat16, int8, uint8, int32, int64, bool)"
    return None


def _cast(ctx: ConversionContext, call: Call) -> Any:
    x = call.args[0]
    if not isinstance(call.output, torch.Tensor):  # x.type() names the type
        return None
    it = ctx.itensor(x)
    out = E.convert_dtype(ctx, it, call.output.dtype)
    if out is it and call.output is not x:  # a copy (copy=True, or .to() of another device)
        return ctx.network.add_identity(it).get_output(0)
    return out


register_table(
    {
        (T.to, T.type, T.type_as, T.float, T.half, T.bfloat16, T.int, T.long, T.bool, T.double, T.short, T.char,
         T.byte, T.cpu, T.cuda): None,
    },
    lambda _: _cast,
    check=_dtype_check,
)


def _like_value(kind: str, call: Call) -> Any:
    if kind == "zeros" or kind == "empty":
        return 0
    if kind == "ones":
        return 1
    return call.arg(1, "fill_value")


def _filled(ctx: ConversionContext, shape: tuple, value: Any, dtype: torch.dtype) -> Any:
    """A tensor of ``shape`` filled with ``value``: a one-element constant broadcast (no big weights)."""
    one = ctx.constant(torch.full((1,) * len(shape), value, dtype=dtype))
    return S.expand(ctx, one, shape) if any(s != 1 for s in shape) else one


def _like(kind: str) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        out = call.output
        value = _like_value(kind, call)
        if isinstance(value, torch.Tensor):
            value = value.item()
        return _filled(ctx, tuple(out.shape), value, out.dtype)

    return convert


register_table(
    {
        (torch.zeros_like,): "zeros",
        (torch.ones_like,): "ones",
        (torch.empty_like,): "empty",
        (torch.full_like,): "full",
    },
    _like,
    check=_dtype_check,
)


def _new(kind: str) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        out = call.output
        if kind == "tensor":
            data = call.arg(1, "data")
            if isinstance(data, torch.Tensor) and ctx.is_traced(data):  # a copy of a traced tensor
                return E.convert_dtype(ctx, ctx.itensor(data), out.dtype)
            return ctx.constant(out.detach().clone())
        value = {"zeros": 0, "ones": 1, "empty": 0}.get(kind)
        if kind == "full":
            value = call.arg(2, "fill_value")
        return _filled(ctx, tuple(out.shape), value, out.dtype)

    return convert


register_table(
    {
        (T.new_zeros,): "zeros",
        (T.new_ones,): "ones",
        (T.new_empty,): "empty",
        (T.new_full,): "full",
        (T.new_tensor,): "tensor",
    },
    _new,
    check=_dtype_check,
)


@converter(T.fill_, T.zero_)
def convert_fill(ctx: ConversionContext, call: Call) -> Any:
    x = call.args[0]
    if call.qualname.endswith("zero_"):
        return _filled(ctx, tuple(x.shape), 0, x.dtype)
    value = call.arg(1, "value")
    if isinstance(value, torch.Tensor) and ctx.is_traced(value):
        return S.expand(ctx, E.operand(ctx, value, x.dtype), tuple(x.shape))
    if isinstance(value, torch.Tensor):
        value = value.item()
    return _filled(ctx, tuple(x.shape), value, x.dtype)
