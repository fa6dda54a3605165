"""``torch2trt-lite check --compile`` and ``bench --compile`` (the ``trt_compile`` runner of ``bench``)."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest
import torch
import torch._dynamo

import torch2trt_lite
from torch2trt_lite.cli import main
from torch2trt_lite.tools.bench import TRT_COMPILE

MODEL = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 4)

    def forward(self, x):
        y = torch.erfinv(torch.tanh(self.a(x)) * 0.5)  # no converter: runs in PyTorch
        return torch.sigmoid(self.b(torch.relu(y))) + 1


def make():
    torch.manual_seed(0)
    return Net()
'''


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_check_compile_prints_what_runs_where(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "net.py"
    spec.write_text(MODEL)
    rc = main(["check", f"{spec}:make", "--shape", "2-4-8x8", "--compile", "--backend", "sim"])
    out = capsys.readouterr().out
    assert rc == 1  # an op runs in PyTorch
    assert "in PyTorch: " in out and "torch.erfinv" in out, out
    assert "2 engine(s)" in out and "dynamic inputs" in out and "2..8" in out, out


def test_bench_times_the_backend_beside_eager_and_the_engine() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    result = torch2trt_lite.bench(model, [torch.randn(2, 8)], backend="sim", warmup=0, iters=2, compile=False,
                                  trt_compile=True)
    stats = result.get(TRT_COMPILE, 2)
    assert stats.status == "ok" and "sim" in stats.label, stats
    assert stats.max_rel_err_vs_eager is not None and stats.max_rel_err_vs_eager < 1e-5
    assert {s.runner for s in result.stats} == {"eager", "engine", TRT_COMPILE}


RNN = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn, self.head = nn.GRU(8, 6, batch_first=True), nn.Linear(6, 3)

    def forward(self, x):
        return self.head(self.rnn(x)[0]).softmax(-1)


def make():
    torch.manual_seed(0)
    return Net()
'''


def test_check_compile_allow_rnn_converts_the_rnn(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "rnn.py"
    spec.write_text(RNN)
    rc = main(["check", f"{spec}:make", "--shape", "2x5x8", "--compile", "--backend", "sim"])
    out = capsys.readouterr().out
    assert rc == 1 and "Attempted to wrap RNN" in out and "--allow-rnn" in out, out  # left to Python: the hint
    torch._dynamo.reset()
    rc = main(["check", f"{spec}:make", "--shape", "2x5x8", "--compile", "--backend", "sim", "--allow-rnn"])
    out = capsys.readouterr().out
    assert rc == 0 and "100% of ops in TensorRT" in out and "graph break" not in out.split("\n")[1], out
