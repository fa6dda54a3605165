"""Elementwise builders: broadcasting to equal rank and torch's dtype promotion."""

from __future__ import annotations

from typing import Any

import torch

from torch2trt_lite.context import ConversionContext


def unsqueeze_to(ctx: ConversionContext, it: Any, rank: int) -> Any:
    """Prepend size-1 dims so ``it`` has ``rank`` dims (TensorRT broadcasts only equal ranks)."""
    shape = tuple(it.shape)
    if len(shape) >= rank:
        return it
    layer = ctx.network.add_shuffle(it)
    if all(d >= 0 for d in shape):
        layer.reshape_dims = (1,) * (rank - len(shape)) + shape
    else:
        layer.reshape_dims = (1,) * (rank - len(shape)) + tuple(0 for _ in shape)
    return layer.get_output(0)


def operand(ctx: ConversionContext, x: Any, dtype: torch.dtype) -> Any:
    """A network tensor for an elementwise operand, in the computation dtype."""
    return ctx.itensor(x, dtype=dtype)


def binary(ctx: ConversionContext, a: Any, b: Any, op: Any, dtype: torch.dtype, out_dtype: torch.dtype | None = None) -> Any:
    """``op(a, b)`` computed in ``dtype`` with broadcasting; cast to ``out_dtype`` when it differs."""
    ia, ib = operand(ctx, a, dtype), operand(ctx, b, dtype)
    rank = max(len(ia.shape), len(ib.shape))
    ia, ib = unsqueeze_to(ctx, ia, rank), unsqueeze_to(ctx, ib, rank)
    out = ctx.network.add_elementwise(ia, ib, op).get_output(0)
    if out_dtype is not None and out_dtype != torch.bool:
        out = ctx.cast(out, out_dtype)
    return out


def compute_dtype(*xs: Any) -> torch.dtype:
    """torch's result dtype of an arithmetic op over tensors and Python scalars."""
    vals = [x for x in xs if isinstance(x, (torch.Tensor, bool, int, float))]
    return torch.result_type(*vals[:2]) if len(vals) >= 2 else (
        vals[0].dtype if isinstance(vals[0], torch.Tensor) else torch.get_default_dtype()
    )
