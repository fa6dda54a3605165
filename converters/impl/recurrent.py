"""Recurrent builders: LSTM / GRU / RNN layers as TensorRT loops.

One ILoop per layer and direction: a COUNT trip limit of T steps, an iterator over the input
projections (``x @ W_ih^T + b_ih`` for every step, computed before the loop in one product), a
recurrence per state (h, and c for LSTM), the cell arithmetic in the body, and two loop outputs:
the per-step hidden states (CONCATENATE, or REVERSE for the backward direction so they line up
with time) and the last hidden (and cell) state (LAST_VALUE of the recurrences).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from . import sizes as Y
from .linear import linear
from .nn_common import concat, const, ew, matmul, rank, slice_axis, squeeze, unsqueeze

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


@dataclass
class CellWeights:
    w_ih: torch.Tensor
    w_hh: torch.Tensor
    b_ih: torch.Tensor | None
    b_hh: torch.Tensor | None
    w_hr: torch.Tensor | None = None  # LSTM projection


def _act(ctx: ConversionContext, it: Any, kind: str) -> Any:
    return ctx.network.add_activation(it, getattr(ctx.trt.ActivationType, kind)).get_output(0)


def _gate(ctx: ConversionContext, it: Any, index: int, size: int) -> Any:
    return slice_axis(ctx, it, -1, index * size, size)


def _cell(ctx: ConversionContext, mode: str, xg: Any, h: Any, c: Any | None, w: CellWeights, hidden: int,
          nonlinearity: str, dtype: torch.dtype) -> tuple[Any, Any | None]:
    """One step: ``xg`` = this step's input projection (bias included), ``h``/``c`` the states."""
    hg = matmul(ctx, h, const(ctx, w.w_hh, dtype), transpose_b=True)
    if w.b_hh is not None and mode != "GRU":
        hg = ew(ctx, hg, const(ctx, w.b_hh, dtype, 2), "SUM")
    if mode == "LSTM":
        g = ew(ctx, xg, hg, "SUM")
        i = _act(ctx, _gate(ctx, g, 0, hidden), "SIGMOID")
        f = _act(ctx, _gate(ctx, g, 1, hidden), "SIGMOID")
        cand = _act(ctx, _gate(ctx, g, 2, hidden), "TANH")
        o = _act(ctx, _gate(ctx, g, 3, hidden), "SIGMOID")
        assert c is not None
        c_new = ew(ctx, ew(ctx, f, c, "PROD"), ew(ctx, i, cand, "PROD"), "SUM")
        h_new = ew(ctx, o, _act(ctx, c_new, "TANH"), "PROD")
        if w.w_hr is not None:
            h_new = matmul(ctx, h_new, const(ctx, w.w_hr, dtype), transpose_b=True)
        return h_new, c_new
    if mode == "GRU":
        if w.b_hh is not None:
            hg = ew(ctx, hg, const(ctx, w.b_hh, dtype, 2), "SUM")
        r = _act(ctx, ew(ctx, _gate(ctx, xg, 0, hidden), _gate(ctx, hg, 0, hidden), "SUM"), "SIGMOID")
        z = _act(ctx, ew(ctx, _gate(ctx, xg, 1, hidden), _gate(ctx, hg, 1, hidden), "SUM"), "SIGMOID")
        n = _act(ctx, ew(ctx, _gate(ctx, xg, 2, hidden), ew(ctx, r, _gate(ctx, hg, 2, hidden), "PROD"), "SUM"),
                 "TANH")
        # h' = (1 - z) * n + z * h = n + z * (h - n)
        return ew(ctx, n, ew(ctx, z, ew(ctx, h, n, "SUB"), "PROD"), "SUM"), None
    return _act(ctx, ew(ctx, xg, hg, "SUM"), "TANH" if nonlinearity == "tanh" else "RELU"), None


def run_direction(
    ctx: ConversionContext,
    mode: str,
    x: Any,
    h0: Any,
    c0: Any | None,
    w: CellWeights,
    hidden: int,
    reverse: bool,
    nonlinearity: str,
    dtype: torch.dtype,
) -> tuple[Any, Any, Any | None]:
    """One layer, one direction over time-major ``x`` [T, N, I]: (outputs [T, N, H], h_T, c_T)."""
    steps = Y.network_sizes(ctx, x)[0]  # a dynamic sequence length: a shape-tensor trip count
    xg = linear(ctx, x, const(ctx, w.w_ih, dtype), None if w.b_ih is None else const(ctx, w.b_ih, dtype))
    if mode == "LSTM" and w.b_hh is not None:
        # NOTE: both LSTM biases are per step constants: add b_hh before the loop as well
        xg = ew(ctx, xg, const(ctx, w.b_hh, dtype, 3), "SUM")
        w = CellWeights(w.w_ih, w.w_hh, w.b_ih, None, w.w_hr)
    trip = Y.scalar(ctx, steps, torch.int32) if Y.is_sym(steps) else ctx.constant(torch.tensor(steps, dtype=torch.int32))
    loop = ctx.network.add_loop()
    loop.add_trip_limit(trip, ctx.trt.TripLimit.COUNT)
    step = loop.add_iterator(xg, 0, reverse).get_output(0)
    h_rec = loop.add_recurrence(h0)
    c_rec = loop.add_recurrence(c0) if c0 is not None else None
    h_new, c_new = _cell(ctx, mode, step, h_rec.get_output(0), c_rec.get_output(0) if c_rec is not None else None,
                         w, hidden, nonlinearity, dtype)
    h_rec.set_input(1, h_new)
    if c_rec is not None:
        c_rec.set_input(1, c_new)
    kind = ctx.trt.LoopOutput.REVERSE if reverse else ctx.trt.LoopOutput.CONCATENATE
    seq = loop.add_loop_output(h_new, kind, 0)
    seq.set_input(1, trip)
    # NOTE: a LAST_VALUE output reads a recurrence: its value after the last iteration
    h_last = loop.add_loop_output(h_rec.get_output(0), ctx.trt.LoopOutput.LAST_VALUE, 0).get_output(0)
    c_last = None
    if c_rec is not None:
        c_last = loop.add_loop_output(c_rec.get_output(0), ctx.trt.LoopOutput.LAST_VALUE, 0).get_output(0)
    return seq.get_output(0), h_last, c_last


def layer_weights(m: torch.nn.RNNBase, layer: int, suffix: str) -> CellWeights:
    def get(name: str) -> torch.Tensor | None:
        t = getattr(m, f"{name}_l{layer}{suffix}", None)
        return None if t is None else t.detach()

    w_ih, w_hh = get("weight_ih"), get("weight_hh")
    assert w_ih is not None and w_hh is not None
    return CellWeights(w_ih, w_hh, get("bias_ih"), get("bias_hh"), get("weight_hr"))


def recurrent(
    ctx: ConversionContext,
    m: torch.nn.RNNBase,
    x: Any,
    hx: Any | None,
    cx: Any | None,
    unbatched: bool,
    dtype: torch.dtype,
) -> tuple[Any, Any, Any | None]:
    """``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` forward: (output, h_n, c_n) as torch lays them out."""
    mode = "LSTM" if m.mode == "LSTM" else "GRU" if m.mode == "GRU" else "RNN"
    nonlinearity = "relu" if m.mode == "RNN_RELU" else "tanh"
    dirs = 2 if m.bidirectional else 1
    hidden = m.hidden_size
    out_h = m.proj_size if getattr(m, "proj_size", 0) else hidden
    if unbatched:
        x = unsqueeze(ctx, x, [1])
        hx = unsqueeze(ctx, hx, [1]) if hx is not None else None
        cx = unsqueeze(ctx, cx, [1]) if cx is not None else None
    elif m.batch_first:
        from .nn_common import permute

        x = permute(ctx, x, (1, 0, 2))
    n = Y.network_sizes(ctx, x)[1]

    def zeros(size: int) -> Any:  # a zero initial state (of a dynamic batch: a broadcast constant)
        if Y.is_sym(n):
            from .shape import expand

            return expand(ctx, const(ctx, torch.zeros(1, size), dtype), [n, size])
        return const(ctx, torch.zeros(n, size), dtype)

    hs, cs = [], []
    for layer in range(m.num_layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            h0 = squeeze(ctx, slice_axis(ctx, hx, 0, k, 1), [0]) if hx is not None else zeros(out_h)
            c0 = None
            if mode == "LSTM":
                c0 = squeeze(ctx, slice_axis(ctx, cx, 0, k, 1), [0]) if cx is not None else zeros(hidden)
            w = layer_weights(m, layer, "_reverse" if d else "")
            seq, h_last, c_last = run_direction(ctx, mode, x, h0, c0, w, hidden, bool(d), nonlinearity, dtype)
            outs.append(seq)
            hs.append(h_last)
            if c_last is not None:
                cs.append(c_last)
        x = concat(ctx, outs, -1)
    h_n = concat(ctx, [unsqueeze(ctx, h, [0]) for h in hs], 0)
    c_n = concat(ctx, [unsqueeze(ctx, c, [0]) for c in cs], 0) if cs else None
    out = x
    if unbatched:
        out = squeeze(ctx, out, [1])
        h_n = squeeze(ctx, h_n, [1])
        c_n = squeeze(ctx, c_n, [1]) if c_n is not None else None
    elif m.batch_first:
        from .nn_common import permute

        out = permute(ctx, out, (1, 0, 2))
    assert rank(out) in (2, 3)
    return out, h_n, c_n


def cell(ctx: ConversionContext, mode: str, x: Any, h: Any, c: Any | None, w: CellWeights, nonlinearity: str,
         dtype: torch.dtype) -> tuple[Any, Any | None]:
    """One step of ``torch.lstm_cell`` / ``gru_cell`` / ``rnn_tanh_cell`` / ``rnn_relu_cell`` on batched
    ``x`` [N, I] and states [N, H] (the cell arithmetic of the loops above): (h', c' or None)."""
    xg = linear(ctx, x, const(ctx, w.w_ih, dtype), None if w.b_ih is None else const(ctx, w.b_ih, dtype))
    return _cell(ctx, mode, xg, h, c, w, int(w.w_hh.shape[1]), nonlinearity, dtype)
