"""Recurrent layers: nn.LSTM, nn.GRU, nn.RNN (num_layers, bidirectional, batch_first, initial
states, LSTM projections) as TensorRT loops; the single-step cells ``torch.lstm_cell``, ``gru_cell``,
``rnn_tanh_cell``, ``rnn_relu_cell`` (nn.LSTMCell, nn.GRUCell, nn.RNNCell, often in Python loops)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from torch2trt_lite.registry import Call, converter, register_table

from .impl.nn_common import float_dtype, is_traced
from .impl.recurrent import CellWeights, cell, recurrent

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


# --------------------------------------------------------------------------------- cells
_CELLS = ("input", "hx", "w_ih", "w_hh", "b_ih", "b_hh")


def _check_cell(call: Call) -> str | None:
    x = call.arg(0, "input")
    if not isinstance(x, torch.Tensor) or not float_dtype(x.dtype):
        return f"input must be a floating-point tensor, got {getattr(x, 'dtype', type(x).__name__)}"
    if x.dim() != 2:
        return f"input must be [batch, features] (nn.*Cell adds the batch dim of an unbatched input), got {x.dim()}-D"
    if any(is_traced(call.arg(i, n, None)) for i, n in enumerate(_CELLS) if i >= 2):
        return "cell weights computed from the network inputs are not supported (TensorRT needs constant weights)"
    return None


def _cell(mode: str, nonlinearity: str = "tanh") -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        x, hx, w_ih, w_hh = (call.arg(i, n) for i, n in enumerate(_CELLS[:4]))
        b_ih, b_hh = call.arg(4, "b_ih", None), call.arg(5, "b_hh", None)
        dt = call.output[0].dtype if isinstance(call.output, tuple) else call.output.dtype
        h, c = (hx[0], hx[1]) if mode == "LSTM" else (hx, None)
        w = CellWeights(*(None if t is None else t.detach() for t in (w_ih, w_hh, b_ih, b_hh)))  # type: ignore[arg-type]
        h_new, c_new = cell(ctx, mode, ctx.itensor(x, dt), ctx.itensor(h, dt),
                            None if c is None else ctx.itensor(c, dt), w, nonlinearity, dt)
        return (h_new, c_new) if mode == "LSTM" else h_new

    return convert


register_table(
    {torch.lstm_cell: ("LSTM",), torch.gru_cell: ("GRU",), torch.rnn_tanh_cell: ("RNN", "tanh"),
     torch.rnn_relu_cell: ("RNN", "relu")},
    lambda spec: _cell(*spec),
    check=_check_cell,
)
