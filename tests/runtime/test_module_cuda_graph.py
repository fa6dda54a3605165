"""TRTModule(..., cuda_graph=True) on a GPU with a real backend (TensorRT or TensorRT-RTX).

Captures on the first call, replays on later calls of the same shapes; results must equal the
engine run without a graph (and eager PyTorch). The sim's refusal is tested in test_friction.py.
"""

from __future__ import annotations

import importlib.util
import logging

import pytest
import torch
from torch import nn

import torch2trt_lite

_REAL = next((b for b, mod in (("tensorrt", "tensorrt"), ("tensorrt-rtx", "tensorrt_rtx"))
              if importlib.util.find_spec(mod) is not None), None)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA GPU"),
    pytest.mark.skipif(_REAL is None, reason="CUDA graphs need a real backend (tensorrt or tensorrt_rtx)"),
]


def test_cuda_graph_replay_matches_eager(caplog: pytest.LogCaptureFixture) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 16 * 16, 10))
    model = model.eval().cuda()
    x = torch.randn(2, 3, 16, 16, device="cuda")
    assert _REAL is not None
    plain = torch2trt_lite.convert(model, [x], backend=_REAL)
    graphed = torch2trt_lite.TRTModule(bytes(plain.plan), plain.metadata, cuda_graph=True)
    assert graphed.cuda_graph
    with caplog.at_level(logging.WARNING, logger="torch2trt_lite"):
        first = graphed(x)
    with torch.no_grad():
        torch.testing.assert_close(first, model(x), rtol=1e-3, atol=1e-3)
        torch.testing.assert_close(first, plain(x), rtol=0, atol=0)
        g = graphed._tls.graph
        captured = g is not None and g.graph is not None
        if not captured:  # TensorRT-RTX may say the stream is not capturable: then it must say so
            assert "not capturable" in caplog.text
        for _ in range(3):  # replays: the new values go through the static input buffers
            x2 = torch.randn_like(x)
            y2 = graphed(x2)
            torch.testing.assert_close(y2, model(x2), rtol=1e-3, atol=1e-3)
            torch.testing.assert_close(y2, plain(x2), rtol=0, atol=0)
        if captured:
            assert graphed._tls.graph is g  # replayed, not captured again
        # outputs are clones: an earlier result is not overwritten by a later replay
        torch.testing.assert_close(first, model(x), rtol=1e-3, atol=1e-3)
        # a side stream as torch's current stream: the replay runs there
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            y3 = graphed(x)
        s.synchronize()
        torch.testing.assert_close(y3, first, rtol=0, atol=0)
