"""torch2trt_lite.bench and the `bench` subcommand: fields, percentiles, plot, table, labels, errors.

torch.compile is stubbed (it records its arguments and returns the model): a real inductor compile
takes half a minute on the CI's CPUs; benchmarks/results/2026-12-01-bench-cpu has a real one.
"""

from __future__ import annotations

import argparse
import json
import pathlib
from typing import Any

import pytest
import torch
from rich.console import Console

import torch2trt_lite
from torch2trt_lite.cli.bench import add_parser, cmd_bench
from torch2trt_lite.errors import Torch2TRTError
from torch2trt_lite.tools.bench import parse_batch_sizes

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LABELS = ("eager PyTorch", "sim (TensorRT API on torch)", "torch.compile (mode=default)")


class Net(torch.nn.Module):
    """A conv + 2-layer MLP that records the batch sizes it is called with."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.fc1 = torch.nn.Linear(4 * 6 * 6, 16)
        self.fc2 = torch.nn.Linear(16, 5)
        self.seen: set[int] = set()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.add(int(x.shape[0]))
        return self.fc2(torch.relu(self.fc1(torch.relu(self.conv(x)).flatten(1))))


@pytest.fixture
def fake_compile(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def compile_(model: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return lambda *xs: model(*xs)

    monkeypatch.setattr(torch, "compile", compile_)
    return calls


def _net() -> Net:
    torch.manual_seed(0)
    return Net().eval()


def test_bench_sim_json_plot_table(tmp_path: pathlib.Path, fake_compile: list[dict[str, Any]]) -> None:
    model = _net()
    x = torch.randn(1, 3, 8, 8)
    result = torch2trt_lite.bench(model, [x], batch_sizes=[1, 3], backend="sim", warmup=1, iters=5, out_dir=tmp_path)

    # the bench's own copy of the model ran (no cast or move was needed: the same module) at each batch size
    assert model.seen == {1, 3}
    # torch.compile: mode default, static shapes, one compile per batch size
    assert fake_compile == [{"mode": "default", "dynamic": False}] * 2

    data = json.loads((tmp_path / "bench.json").read_text())
    assert data == json.loads(result.to_json())
    for key in ("machine", "backend", "backend_resolved", "precision", "precision_mode", "date_started",
                "date_finished", "command", "warmup", "iters", "batch_sizes", "runners", "results", "timing"):
        assert key in data, key
    for key in ("cpu_model", "cpu_cores", "load_average_before", "load_average_after", "gpu", "torch",
                "torch2trt_lite", "tensorrt", "tensorrt_rtx"):
        assert key in data["machine"], key
    assert data["machine"]["torch"] == torch.__version__ and data["machine"]["torch2trt_lite"] == torch2trt_lite.__version__
    assert data["backend"] == "sim" and data["backend_resolved"] == "sim"
    assert data["warmup"] == 1 and data["iters"] == 5 and data["batch_sizes"] == [1, 3]
    assert data["runners"] == {"engine": LABELS[1], "eager": LABELS[0], "torch.compile": LABELS[2]}
    assert "TensorRT " not in data["runners"]["engine"].replace("TensorRT API", "")  # labelled as the sim
    rows = data["results"]
    assert sorted((r["runner"], r["batch"]) for r in rows) == sorted(
        (name, b) for name in ("engine", "eager", "torch.compile") for b in (1, 3)
    )
    for r in rows:
        assert r["status"] == "ok", r
        assert 0 < r["min_ms"] <= r["p50_ms"] <= r["p90_ms"] <= r["p99_ms"]
        assert r["iters"] == 5 and r["warmup"] == 1
        torch.testing.assert_close(r["throughput_samples_per_s"], r["batch"] * 1e3 / r["mean_ms"], rtol=1e-9, atol=0)
    for name in ("engine", "torch.compile"):
        for b in (1, 3):
            s = result.get(name, b)
            assert s.setup_s is not None and s.setup_s > 0
            assert s.max_rel_err_vs_eager is not None and s.max_rel_err_vs_eager <= 1e-5  # fp32 sim vs eager

    png = tmp_path / "latency_p50.png"
    assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 1000
    assert data["files"] == {"json": str(tmp_path / "bench.json"), "plot": str(png)}

    console = Console(record=True, width=200)
    console.print(result.table())
    text = console.export_text()
    for label in LABELS:
        assert label in text
    assert "TensorRT-RTX" not in text


def test_compile_false_and_fp16(tmp_path: pathlib.Path) -> None:
    model = _net()
    x = torch.randn(2, 3, 8, 8)
    result = torch2trt_lite.bench(model, x, backend="sim", warmup=0, iters=3, compile=False, precision="fp16")
    assert result.runners == {"engine": LABELS[1], "eager": LABELS[0]}
    assert result.batch_sizes == [2]  # no batch_sizes: the inputs as given
    assert {s.runner for s in result.stats} == {"engine", "eager"} and all(s.ok for s in result.stats)
    data = result.to_dict()
    assert data["compile"] is False and data["precision"] == "fp16" and data["precision_mode"] == "model.half()"
    assert data["dtype"] == "float16" and data["inputs"] == [{"shape": [2, 3, 8, 8], "dtype": "float16"}]
    assert next(model.parameters()).dtype == torch.float32  # the caller's model was not cast
    engine = result.get("engine", 2)
    assert engine.max_rel_err_vs_eager is not None and engine.max_rel_err_vs_eager <= 1e-2  # fp16 sim vs fp16 eager


def test_compile_failure_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(model: Any, **kwargs: Any) -> Any:
        def run(*args: Any) -> Any:
            raise RuntimeError("no C++ compiler here")

        return run

    monkeypatch.setattr(torch, "compile", broken)
    result = torch2trt_lite.bench(_net(), [torch.randn(1, 3, 8, 8)], batch_sizes=[1, 2], backend="sim",
                                  warmup=0, iters=2)
    comp = [result.get("torch.compile", b) for b in (1, 2)]
    assert [c.status for c in comp] == ["failed", "failed"]
    assert comp[0].reason is not None and "RuntimeError: no C++ compiler here" in comp[0].reason
    assert comp[1].reason is not None and comp[1].reason.startswith("not retried")
    assert all(result.get(r, b).ok for r in ("engine", "eager") for b in (1, 2))


def test_real_backend_without_gpu_is_not_runnable(monkeypatch: pytest.MonkeyPatch) -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the real backend's engine runs (this checks the CPU-only report)")
    pytest.importorskip("tensorrt_rtx", reason="TensorRT-RTX is not installed")
    result = torch2trt_lite.bench(_net(), [torch.randn(1, 3, 8, 8)], batch_sizes=[2], backend="tensorrt-rtx",
                                  warmup=0, iters=2, compile=False)
    engine = result.get("engine", 2)
    assert engine.status == "not runnable here" and engine.p50_ms is None
    assert engine.reason is not None and "needs a supported NVIDIA GPU" in engine.reason
    assert engine.label.startswith("TensorRT-RTX") and result.backend_resolved == "tensorrt-rtx"
    assert result.get("eager", 2).ok
    console = Console(record=True, width=200)
    console.print(result.table())
    assert "not runnable here" in console.export_text()


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="torch2trt-lite")
    add_parser(p.add_subparsers(dest="command", required=True))
    return p.parse_args(argv)


def test_cli_bench(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                   fake_compile: list[dict[str, Any]]) -> None:
    (tmp_path / "tiny_net.py").write_text(
        "import torch\n\n\n"
        "def make():\n"
        "    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")  # rich's console width: labels on one line
    out = tmp_path / "out"
    args = _parse(["bench", "tiny_net:make", "--shape", "1x6", "--batch", "1,4", "--backend", "sim",
                   "--warmup", "1", "--iters", "3", "-o", str(out)])
    assert args.fn is cmd_bench
    assert args.fn(args) == 0
    text = capsys.readouterr().out
    assert LABELS[1] in text and LABELS[0] in text
    data = json.loads((out / "bench.json").read_text())
    assert data["model"] == "tiny_net:make" and data["batch_sizes"] == [1, 4]
    assert data["command"].startswith("torch2trt-lite bench tiny_net:make --shape 1x6")
    assert (out / "latency_p50.png").read_bytes()[:8] == PNG_MAGIC
    assert [r["status"] for r in data["results"]] == ["ok"] * 6


def test_every_option_has_help() -> None:
    p = argparse.ArgumentParser()
    s = add_parser(p.add_subparsers())
    for action in s._actions:
        assert action.help, action.dest


@pytest.mark.parametrize("text", ["", "1,x", "0,8", "8,8", "-1", "1.5"])
def test_invalid_batch_is_a_clear_error(text: str) -> None:
    with pytest.raises(Torch2TRTError, match=r"--batch .*(positive integers|twice)"):
        parse_batch_sizes(text)
    args = _parse(["bench", "torchvision:squeezenet1_1", "--shape", "1x3x32x32", f"--batch={text}", "--backend", "sim"])
    if text:  # an empty --batch means the default (the shapes as given)
        with pytest.raises(Torch2TRTError, match="--batch"):
            args.fn(args)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"batch_sizes": []}, "at least one batch size"),
    ({"batch_sizes": 8}, "a list of positive integers"),
    ({"batch_sizes": [1, 0]}, "positive integers"),
    ({"iters": 0}, "iters must be an integer >= 1"),
    ({"warmup": -1}, "warmup must be an integer >= 0"),
    ({"precision": "int8"}, "precision 'int8'"),
])
def test_invalid_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(Torch2TRTError, match=match):
        torch2trt_lite.bench(_net(), [torch.randn(1, 3, 8, 8)], backend="sim", **kwargs)
