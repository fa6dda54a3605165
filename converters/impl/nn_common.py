"""Small layout and arithmetic builders shared by the nn families (conv, pooling, norms, linear, ...).

Every builder takes and returns network tensors (``ITensor``) and adds as few layers as it can.
Reshapes use shuffle ``reshape_dims`` with 0 placeholders for copied dims, so they stay valid when
a dimension becomes dynamic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.errors import ConversionError

from .active import active_context

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


def rank(it: Any) -> int:
    return len(tuple(it.shape))


def axes_mask(axes: Sequence[int], ndim: int) -> int:
    """TensorRT's axes bitmask of (possibly negative) ``axes`` of a rank-``ndim`` tensor."""
    mask = 0
    for a in axes:
        mask |= 1 << (a % ndim if ndim else 0)
    return mask


def reshape(ctx: ConversionContext, it: Any, dims: Sequence[int]) -> Any:
    """Shuffle to ``dims`` (0 copies the input dim at that index, -1 is inferred)."""
    layer = ctx.network.add_shuffle(it)
    layer.reshape_dims = tuple(int(d) for d in dims)
    return layer.get_output(0)


def permute(ctx: ConversionContext, it: Any, perm: Sequence[int]) -> Any:
    perm = tuple(int(p) for p in perm)
    if perm == tuple(range(len(perm))):
        return it
    layer = ctx.network.add_shuffle(it)
    layer.first_transpose = perm
    return layer.get_output(0)


def unsqueeze(ctx: ConversionContext, it: Any, axes: Sequence[int]) -> Any:
    """Insert size-1 dims at ``axes`` (positions in the output): one shuffle, dynamic-safe."""
    r = rank(it)
    out_rank = r + len(axes)
    new = sorted(a % out_rank for a in axes)
    if new == list(range(r, out_rank)):
        return reshape(ctx, it, (0,) * r + (1,) * len(new))
    # reshape appends the new dims at the end, then the second transpose moves them in place
    perm: list[int] = []
    old, extra = 0, r
    for i in range(out_rank):
        if i in new:
            perm.append(extra)
            extra += 1
        else:
            perm.append(old)
            old += 1
    layer = ctx.network.add_shuffle(it)
    layer.reshape_dims = (0,) * r + (1,) * len(new)
    layer.second_transpose = tuple(perm)
    return layer.get_output(0)


def squeeze(ctx: ConversionContext, it: Any, axes: Sequence[int]) -> Any:
    """Remove size-1 dims ``axes``: one shuffle, dynamic-safe."""
    r = rank(it)
    drop = sorted({a % r for a in axes})
    keep = [i for i in range(r) if i not in drop]
    shape = tuple(it.shape)
    layer = ctx.network.add_shuffle(it)
    if drop != list(range(r - len(drop), r)):
        layer.first_transpose = tuple(keep + drop)
    # NOTE: static dims where known; a 0 placeholder only for a dynamic dim (kept dims come first)
    layer.reshape_dims = tuple(shape[i] if shape[i] >= 0 else 0 for i in keep)
    return layer.get_output(0)


def const(ctx: ConversionContext, value: torch.Tensor | float, dtype: torch.dtype, ndim: int | None = None) -> Any:
    """A constant of ``dtype``, left-padded with size-1 dims to rank ``ndim``."""
    t = value.detach() if isinstance(value, torch.Tensor) else torch.tensor(value)
    t = t.to(dtype)
    if ndim is not None and t.dim() < ndim:
        t = t.reshape((1,) * (ndim - t.dim()) + tuple(t.shape))
    return ctx.constant(t)


def ew(ctx: ConversionContext, a: Any, b: Any, op: str) -> Any:
    """``a <op> b`` on network tensors of equal dtype; ranks are equalized by prepending 1s."""
    from .elementwise import unsqueeze_to

    n = max(rank(a), rank(b))
    a, b = unsqueeze_to(ctx, a, n), unsqueeze_to(ctx, b, n)
    return ctx.network.add_elementwise(a, b, getattr(ctx.trt.ElementWiseOperation, op)).get_output(0)


def unary(ctx: ConversionContext, it: Any, op: str) -> Any:
    return ctx.network.add_unary(it, getattr(ctx.trt.UnaryOperation, op)).get_output(0)


def reduce(ctx: ConversionContext, it: Any, op: str, axes: Sequence[int], keep_dims: bool = True) -> Any:
    mask = axes_mask(axes, rank(it))
    return ctx.network.add_reduce(it, getattr(ctx.trt.ReduceOperation, op), mask, keep_dims).get_output(0)


def concat(ctx: ConversionContext, its: Sequence[Any], axis: int) -> Any:
    if len(its) == 1:
        return its[0]
    layer = ctx.network.add_concatenation(list(its))
    layer.axis = axis % rank(its[0])
    return layer.get_output(0)


def slice_axis(ctx: ConversionContext, it: Any, axis: int, start: int, size: int, step: int = 1) -> Any:
    """``it`` narrowed along ``axis`` (static shapes)."""
    shape = list(it.shape)
    if any(d < 0 for d in shape):
        from torch2trt_lite.converters.impl.shape import slice_

        return slice_(ctx, it, axis, start, start + (size - 1) * step + 1, step)
    r = len(shape)
    axis %= r
    start_v = [0] * r
    start_v[axis] = start
    stride = [1] * r
    stride[axis] = step
    shape[axis] = size
    return ctx.network.add_slice(it, tuple(start_v), tuple(shape), tuple(stride)).get_output(0)


def gather(ctx: ConversionContext, it: Any, indices: Any, axis: int) -> Any:
    """``it`` gathered along ``axis`` with an index tensor (a network tensor or a torch int tensor)."""
    if isinstance(indices, torch.Tensor):
        indices = ctx.constant(indices.to(torch.int32))
    return ctx.network.add_gather(it, indices, axis % rank(it)).get_output(0)


def matmul(ctx: ConversionContext, a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False) -> Any:
    """Batched matrix product of rank >= 2 tensors of equal dtype (batch dims broadcast)."""
    n = max(rank(a), rank(b))
    from .elementwise import unsqueeze_to

    a, b = unsqueeze_to(ctx, a, n), unsqueeze_to(ctx, b, n)
    op = ctx.trt.MatrixOperation
    return ctx.network.add_matrix_multiply(
        a, op.TRANSPOSE if transpose_a else op.NONE, b, op.TRANSPOSE if transpose_b else op.NONE
    ).get_output(0)


def softmax(ctx: ConversionContext, it: Any, axis: int) -> Any:
    layer = ctx.network.add_softmax(it)
    layer.axes = 1 << (axis % rank(it))
    return layer.get_output(0)


def ntuple(value: Any, n: int) -> tuple[int, ...]:
    """torch's ``_ntuple``: an int repeated ``n`` times, or a sequence of ``n`` ints."""
    if isinstance(value, (int, torch.SymInt)):
        return (int(value),) * n
    vals = tuple(int(v) for v in value)
    if len(vals) == 1:
        return vals * n
    if len(vals) != n:
        raise ConversionError(f"expected {n} values, got {vals}")
    return vals


def is_traced(t: Any) -> bool:
    """Whether ``t`` is derived from the network inputs (usable in ``check=`` functions)."""
    ctx = active_context()
    return ctx is not None and isinstance(t, torch.Tensor) and ctx.is_traced(t)


def float_dtype(dtype: torch.dtype) -> bool:
    """A floating type the network computes in: float64 too where the conversion computes it in
    float32 (``truncate_double``, torch2trt_lite/trace/double.py)."""
    return dtype in (torch.float32, torch.float16, torch.bfloat16) or (dtype == torch.float64 and float64_allowed())


def float64_allowed() -> bool:
    """Does the running conversion compute float64 in float32 (``truncate_double`` not False)?"""
    ctx = active_context()
    return ctx is not None and ctx.float64.allowed


def producer_layers(network: Any) -> dict[str, Any]:
    """Tensor name -> the layer of ``network`` that produces it (inputs have none)."""
    out: dict[str, Any] = {}
    for i in range(int(network.num_layers)):
        layer = network.get_layer(i)
        for j in range(int(layer.num_outputs)):
            out[str(layer.get_output(j).name)] = layer
    return out
