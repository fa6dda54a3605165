"""Harness cases: nn.LSTM, nn.GRU, nn.RNN as TensorRT loops."""

from __future__ import annotations

import torch
from torch import nn

from tests.converters.harness import Case, randn

_TOL = {"rtol": 1e-4, "atol": 1e-5}  # many chained steps: loose by a few ulps of accumulated rounding


def _seeded(cls, *args, **kw):  # type: ignore[no-untyped-def]
    def make() -> nn.Module:
        torch.manual_seed(0)
        return cls(*args, **kw)

    return make


class _WithState(nn.Module):
    def __init__(self, rnn: nn.Module) -> None:
        super().__init__()
        self.rnn = rnn

    def forward(self, x: torch.Tensor, *state: torch.Tensor):  # type: ignore[no-untyped-def]
        if len(state) == 2:
            return self.rnn(x, (state[0], state[1]))
        return self.rnn(x, state[0])


CASES = [
    Case("lstm", _seeded(nn.LSTM, 4, 5), lambda: [randn(6, 2, 4)], is_module=True,
         targets=["torch.nn.modules.rnn.LSTM"], **_TOL),
    Case("lstm_batch_first_2layers_bidir", _seeded(nn.LSTM, 4, 5, num_layers=2, bidirectional=True, batch_first=True),
         lambda: [randn(2, 6, 4)], is_module=True, **_TOL),
    Case("lstm_initial_state", lambda: _WithState(_seeded(nn.LSTM, 4, 3, num_layers=2)()),
         lambda: [randn(5, 2, 4), randn(2, 2, 3, seed=1), randn(2, 2, 3, seed=2)], is_module=True, **_TOL),
    Case("lstm_proj_no_bias", _seeded(nn.LSTM, 4, 6, proj_size=3, bias=False, bidirectional=True),
         lambda: [randn(5, 2, 4)], is_module=True, **_TOL),
    Case("lstm_unbatched", _seeded(nn.LSTM, 4, 5), lambda: [randn(6, 4)], is_module=True, **_TOL),
    Case("gru", _seeded(nn.GRU, 4, 5), lambda: [randn(6, 2, 4)], is_module=True,
         targets=["torch.nn.modules.rnn.GRU"], **_TOL),
    Case("gru_bidir_batch_first_state", lambda: _WithState(_seeded(nn.GRU, 4, 3, bidirectional=True,
                                                                   batch_first=True)()),
         lambda: [randn(2, 5, 4), randn(2, 2, 3, seed=1)], is_module=True, **_TOL),
    Case("gru_3layers_no_bias", _seeded(nn.GRU, 3, 4, num_layers=3, bias=False), lambda: [randn(4, 1, 3)],
         is_module=True, **_TOL),
    Case("rnn_tanh", _seeded(nn.RNN, 4, 5), lambda: [randn(6, 2, 4)], is_module=True,
         targets=["torch.nn.modules.rnn.RNN"], **_TOL),
    Case("rnn_relu_bidir_2layers", _seeded(nn.RNN, 4, 5, num_layers=2, nonlinearity="relu", bidirectional=True),
         lambda: [randn(6, 2, 4)], is_module=True, **_TOL),
    Case("rnn_unbatched_state", lambda: _WithState(_seeded(nn.RNN, 4, 3)()), lambda: [randn(5, 4), randn(1, 3, seed=1)],
         is_module=True, **_TOL),
]


class _CellLoop(nn.Module):
    """A cell stepped over dim 1 of ``x`` [N, T, I] (dim 0 of an unbatched [T, I]) in a Python loop,
    the hidden state from ``state`` or zeros: every step's hidden state stacked, and the last state."""

    def __init__(self, cell: nn.Module) -> None:
        super().__init__()
        self.cell = cell

    def forward(self, x: torch.Tensor, *state: torch.Tensor):  # type: ignore[no-untyped-def]
        hx: object = None if not state else state[0] if len(state) == 1 else (state[0], state[1])
        hs = []
        steps = x.unbind(1 if x.dim() == 3 else 0)
        for xt in steps:
            hx = self.cell(xt, hx)
            hs.append(hx[0] if isinstance(hx, tuple) else hx)
        return torch.stack(hs, 1 if x.dim() == 3 else 0), hx


def _loop(cls, *args, half: bool = False, **kw):  # type: ignore[no-untyped-def]
    def make() -> nn.Module:
        torch.manual_seed(0)
        m = _CellLoop(cls(*args, **kw))
        return m.half() if half else m

    return make


_HALF = {"rtol": 1e-2, "atol": 1e-2}

CASES += [
    Case("gru_cell_loop", _loop(nn.GRUCell, 4, 5), lambda: [randn(2, 3, 4)], is_module=True,
         targets=["torch.gru_cell"], **_TOL),
    Case("lstm_cell_loop_state", _loop(nn.LSTMCell, 4, 3), lambda: [randn(2, 3, 4), randn(2, 3, seed=1),
                                                                   randn(2, 3, seed=2)], is_module=True,
         targets=["torch.lstm_cell"], **_TOL),
    Case("rnn_tanh_cell_loop", _loop(nn.RNNCell, 4, 5), lambda: [randn(2, 3, 4)], is_module=True,
         targets=["torch.rnn_tanh_cell"], **_TOL),
    Case("rnn_relu_cell_no_bias_state", _loop(nn.RNNCell, 4, 5, bias=False, nonlinearity="relu"),
         lambda: [randn(2, 3, 4), randn(2, 5, seed=1)], is_module=True, targets=["torch.rnn_relu_cell"], **_TOL),
    Case("gru_cell_unbatched", _loop(nn.GRUCell, 4, 5, bias=False), lambda: [randn(3, 4)], is_module=True, **_TOL),
    Case("lstm_cell_functional", lambda x, h, c, w: torch.lstm_cell(x, (h, c), w, w[:, :3] * 0.5),
         lambda: [randn(2, 3), randn(2, 3, seed=1), randn(2, 3, seed=2)] + [randn(12, 3, seed=3)],
         vary="the weight is an input: rolling it changes nothing the case checks", **_TOL,
         xfail="cell weights computed from the network inputs are not supported"),
    Case("half_gru_cell_loop", _loop(nn.GRUCell, 4, 5, half=True), lambda: [randn(2, 3, 4, dtype=torch.float16)],
         is_module=True, **_HALF),
    Case("half_lstm_cell_loop", _loop(nn.LSTMCell, 4, 5, half=True), lambda: [randn(2, 3, 4, dtype=torch.float16)],
         is_module=True, **_HALF),
]


class _Flat(nn.Module):
    """``torch.lstm`` / ``gru`` / ``rnn_tanh`` / ``rnn_relu`` called with a layer's flat weights and an
    initial state (zeros where not given), as dynamo emits them for nn.LSTM etc. under ``allow_rnn``."""

    def __init__(self, rnn: nn.RNNBase) -> None:
        super().__init__()
        self.rnn = rnn

    def forward(self, x: torch.Tensor, *state: torch.Tensor):  # type: ignore[no-untyped-def]
        r = self.rnn
        fn = {"LSTM": torch.lstm, "GRU": torch.gru, "RNN_TANH": torch.rnn_tanh, "RNN_RELU": torch.rnn_relu}[r.mode]
        n = x.shape[0] if r.batch_first else x.shape[1]
        dirs = 2 if r.bidirectional else 1
        h = state[0] if state else x.new_zeros(r.num_layers * dirs, n, r.proj_size or r.hidden_size)
        hx: object = h
        if r.mode == "LSTM":
            hx = (h, state[1] if len(state) > 1 else x.new_zeros(r.num_layers * dirs, n, r.hidden_size))
        return fn(x, hx, r._flat_weights, r.bias, r.num_layers, 0.0, False, r.bidirectional,  # type: ignore[operator]
                  r.batch_first)


def _flat(cls, *args, **kw):  # type: ignore[no-untyped-def]
    return lambda: _Flat(_seeded(cls, *args, **kw)())


CASES += [
    Case("functional_lstm", _flat(nn.LSTM, 4, 5, num_layers=2, batch_first=True), lambda: [randn(2, 6, 4)],
         is_module=True, targets=["torch.lstm"], **_TOL),
    Case("functional_lstm_proj_bidir_state", _flat(nn.LSTM, 4, 6, proj_size=3, bidirectional=True, batch_first=True),
         lambda: [randn(3, 5, 4), randn(2, 3, 3, seed=1), randn(2, 3, 6, seed=2)], is_module=True,
         targets=["torch.lstm"], **_TOL),
    Case("functional_gru_time_major_no_bias", _flat(nn.GRU, 4, 5, num_layers=2, bias=False), lambda: [randn(6, 2, 4)],
         is_module=True, targets=["torch.gru"], **_TOL),
    Case("functional_gru_bidir", _flat(nn.GRU, 4, 3, bidirectional=True, batch_first=True), lambda: [randn(3, 5, 4)],
         is_module=True, targets=["torch.gru"], **_TOL),
    Case("functional_rnn_tanh", _flat(nn.RNN, 4, 5, batch_first=True), lambda: [randn(2, 6, 4)], is_module=True,
         targets=["torch.rnn_tanh"], **_TOL),
    Case("functional_rnn_relu_2layers", _flat(nn.RNN, 4, 5, num_layers=2, nonlinearity="relu", batch_first=True),
         lambda: [randn(2, 6, 4)], is_module=True, targets=["torch.rnn_relu"], **_TOL),
]
