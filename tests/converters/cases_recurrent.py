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
