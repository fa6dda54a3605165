"""softmax, log_softmax and softmin in their functional, torch, Tensor and special forms (nn.Softmax calls F)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from torch2trt_lite.registry import Call, register_table

from .impl import elementwise as E
from .impl import reduce as R
from .impl import shape as S
from .impl.nn_common import float64_allowed

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


def _legacy_dim(ndim: int) -> int:
    # NOTE: F.softmax(x) without dim picks 0 for ranks 0, 1 and 3, else 1 (torch's _get_softmax_dim).
    return 0 if ndim in (0, 1, 3) else 1


def softmax(ctx: ConversionContext, it: Any, dim: int) -> Any:
    n = len(tuple(it.shape))
    if n == 0:
        return S.reshape(ctx, softmax(ctx, S.reshape(ctx, it, (1,)), 0), ())
    layer = ctx.network.add_softmax(it)
    layer.axes = 1 << S.norm_dim(dim, n)
    return layer.get_output(0)


def log_softmax(ctx: ConversionContext, it: Any, dim: int) -> Any:
    """x - max - log(sum(exp(x - max))): stable, unlike log(softmax(x))."""
    n = len(tuple(it.shape))
    d = S.norm_dim(dim, n) if n else 0
    if n == 0:
        return S.reshape(ctx, log_softmax(ctx, S.reshape(ctx, it, (1,)), 0), ())
    shifted = E.ew(ctx, it, R.reduce(ctx, it, "MAX", [d], True), "SUB")
    total = R.reduce(ctx, E.unary(ctx, shifted, "EXP"), "SUM", [d], True)
    return E.ew(ctx, shifted, E.unary(ctx, total, "LOG"), "SUB")


def _make(kind: str) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        x = call.arg(0, "input")
        dim = call.arg(1, "dim", None)
        if dim is None:
            dim = _legacy_dim(x.dim())
        dtype = call.kwargs.get("dtype") or next((a for a in call.args[2:] if isinstance(a, torch.dtype)), None)
        out_dtype = call.output.dtype
        it = E.operand(ctx, x, dtype if isinstance(dtype, torch.dtype) else out_dtype)
        if kind == "softmin":
            it = E.unary(ctx, it, "NEG")
        out = log_softmax(ctx, it, dim) if kind == "log_softmax" else softmax(ctx, it, dim)
        return ctx.cast(out, out_dtype)

    return convert


def _no_float64(call: Call) -> str | None:
    dtype = call.kwargs.get("dtype") or next((a for a in call.args[2:] if isinstance(a, torch.dtype)), None)
    wide = dtype == torch.float64 or (isinstance(call.output, torch.Tensor) and call.output.dtype == torch.float64)
    if wide and not float64_allowed():  # NOTE: truncate_double computes it in float32
        return "dtype=torch.float64: TensorRT has no float64 (use float32)"
    return None


register_table(
    {
        (F.softmax, torch.softmax, torch.Tensor.softmax, torch.special.softmax): "softmax",
        (F.log_softmax, torch.log_softmax, torch.Tensor.log_softmax, torch.special.log_softmax): "log_softmax",
        (F.softmin,): "softmin",
    },
    _make,
    check=_no_float64,
)
