"""Recurrent layers: nn.LSTM, nn.GRU, nn.RNN (num_layers, bidirectional, batch_first, initial
states, LSTM projections) as TensorRT loops."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from torch2trt_lite.registry import Call, converter

from .impl.nn_common import float_dtype
from .impl.recurrent import recurrent

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


def _inputs(call: Call) -> tuple[Any, Any]:
    x = call.args[1] if len(call.args) > 1 else call.kwargs["input"]
    hx = call.args[2] if len(call.args) > 2 else call.kwargs.get("hx")
    return x, hx


def _check(call: Call) -> str | None:
    m, (x, _) = call.args[0], _inputs(call)
    if not isinstance(x, torch.Tensor):
        return "packed sequences (nn.utils.rnn.PackedSequence) are not supported; pass a padded tensor"
    if not float_dtype(x.dtype):
        return f"input must be floating point, got {x.dtype}"
    if m.training and m.dropout > 0 and m.num_layers > 1:
        return "dropout between layers in training mode is random; call model.eval()"
    return None


@converter(nn.LSTM, nn.GRU, nn.RNN, check=_check)
def convert_recurrent(ctx: ConversionContext, call: Call) -> Any:
    m = call.args[0]
    x, hx = _inputs(call)
    dt = call.output[0].dtype
    cx = None
    if isinstance(hx, (tuple, list)):
        hx, cx = hx
    out, h_n, c_n = recurrent(
        ctx, m, ctx.itensor(x, dt), ctx.itensor(hx, dt) if hx is not None else None,
        ctx.itensor(cx, dt) if cx is not None else None, x.dim() == 2, dt,
    )
    if c_n is not None:
        return out, (h_n, c_n)
    return out, h_n
