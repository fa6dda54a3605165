"""Recurrent layers: nn.LSTM, nn.GRU, nn.RNN (num_layers, bidirectional, batch_first, initial
states, LSTM projections) as TensorRT loops, also in the functional form ``torch.lstm`` / ``gru`` /
``rnn_tanh`` / ``rnn_relu`` (flat weights) that dynamo emits under ``allow_rnn``; the single-step
cells ``torch.lstm_cell``, ``gru_cell``, ``rnn_tanh_cell``, ``rnn_relu_cell`` (nn.LSTMCell, nn.GRUCell, nn.RNNCell, often in Python loops)."""

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


# ------------------------------------------------- functional layers (torch.compile's graphs)
_LAYER = ("input", "hx", "params", "has_biases", "num_layers", "dropout", "train", "bidirectional", "batch_first")
_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


class _FlatWeights:
    """``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN``'s attributes from the flat arguments of ``torch.lstm``
    (``gru``, ``rnn_tanh``, ``rnn_relu``), for ``impl.recurrent.recurrent``: the parameters come in
    ``_flat_weights`` order (per layer and direction: w_ih, w_hh, [b_ih, b_hh], [w_hr])."""

    def __init__(self, mode: str, call: Call, proj: bool) -> None:
        params = [t.detach() for t in call.arg(2, "params")]
        self.mode = mode
        self.num_layers = int(call.arg(4, "num_layers"))
        self.bidirectional = bool(call.arg(7, "bidirectional"))
        self.batch_first = bool(call.arg(8, "batch_first"))
        per = 2 + 2 * bool(call.arg(3, "has_biases")) + int(proj)
        names = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if per - int(proj) == 4 else [])
        names += ["weight_hr"] if proj else []
        dirs = 2 if self.bidirectional else 1
        for k in range(self.num_layers * dirs):
            layer, suffix = divmod(k, dirs)[0], "_reverse" if k % dirs else ""
            for j, n in enumerate(names):
                setattr(self, f"{n}_l{layer}{suffix}", params[k * per + j])
        gates = _GATES["RNN" if mode.startswith("RNN") else mode]
        self.hidden_size = int(params[1].shape[0]) // gates
        self.proj_size = int(params[1].shape[1]) if proj else 0


def _lstm_proj(call: Call) -> bool:
    hx = call.arg(1, "hx")
    return int(hx[0].shape[-1]) != int(hx[1].shape[-1])


def _check_layer(mode: str) -> Any:
    cls = "RNN" if mode.startswith("RNN") else mode

    def check(call: Call) -> str | None:
        x, hx = call.arg(0, "input"), call.arg(1, "hx")
        if not isinstance(x, torch.Tensor) or not isinstance(call.arg(2, "params", None), (list, tuple)):
            return "only the padded-input form (input, hx, params, ...) is supported, not packed sequences"
        if not float_dtype(x.dtype):
            return f"input must be floating point, got {x.dtype}"
        if x.dim() != 3:
            return f"input must be 3-D (nn.{cls} adds the batch dim of an unbatched input), got {x.dim()}-D"
        if bool(call.arg(6, "train")) and float(call.arg(5, "dropout")) > 0 and int(call.arg(4, "num_layers")) > 1:
            return "dropout between layers with train=True is random; call model.eval()"
        if any(is_traced(t) for t in call.arg(2, "params")):
            return "weights computed from the network inputs are not supported (TensorRT needs constant weights)"
        if mode == "LSTM" and (not isinstance(hx, (list, tuple)) or len(hx) != 2):
            return "torch.lstm needs hx = (h_0, c_0)"
        if mode != "LSTM" and not isinstance(hx, torch.Tensor):
            return f"hx must be a tensor [layers * directions, N, H], got {type(hx).__name__}"
        per = 2 + 2 * bool(call.arg(3, "has_biases")) + int(mode == "LSTM" and _lstm_proj(call))
        want = int(call.arg(4, "num_layers")) * (2 if call.arg(7, "bidirectional") else 1) * per
        if len(call.arg(2, "params")) != want:
            return f"params has {len(call.arg(2, 'params'))} tensors; the layers take {want} (nn.{cls}._flat_weights)"
        return None

    return check


def _layer(mode: str) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        x, hx = call.arg(0, "input"), call.arg(1, "hx")
        dt = call.output[0].dtype
        kind = "LSTM" if mode == "LSTM" else "GRU" if mode == "GRU" else "RNN"
        m = _FlatWeights(mode, call, kind == "LSTM" and _lstm_proj(call))
        h, c = (hx[0], hx[1]) if kind == "LSTM" else (hx, None)
        out, h_n, c_n = recurrent(ctx, m, ctx.itensor(x, dt), ctx.itensor(h, dt),  # type: ignore[arg-type]
                                  None if c is None else ctx.itensor(c, dt), False, dt)
        return (out, h_n, c_n) if kind == "LSTM" else (out, h_n)

    return convert


for _fn, _mode in ((torch.lstm, "LSTM"), (torch.gru, "GRU"), (torch.rnn_tanh, "RNN_TANH"),
                   (torch.rnn_relu, "RNN_RELU")):
    converter(_fn, check=_check_layer(_mode))(_layer(_mode))
