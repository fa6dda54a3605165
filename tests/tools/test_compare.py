"""torch2trt_lite.compare: the layer-by-layer accuracy debugger (torch2trt_lite/debug.py)."""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json

import pytest
import torch
import torch.nn.functional as F

import torch2trt_lite
from torch2trt_lite.cli.compare import add_parser
from torch2trt_lite.registry import REGISTRY


class SmallCNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.relu = torch.nn.ReLU(inplace=True)  # in place: the recorded bn output must be its own copy
        self.conv2 = torch.nn.Conv2d(8, 4, 3)
        self.fc = torch.nn.Linear(4 * 6 * 6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn(self.conv1(x)))
        return self.fc(self.conv2(y).flatten(1))


def _cnn() -> SmallCNN:
    torch.manual_seed(0)
    m = SmallCNN().eval()
    with torch.no_grad():
        assert m.bn.running_mean is not None and m.bn.running_var is not None
        m.bn.running_mean.uniform_(-1, 1)
        m.bn.running_var.uniform_(0.5, 2.0)
        m.bn.weight.uniform_(0.5, 1.5)
    return m


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.proj(x))  # GELU LINE


class GeluNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = torch.nn.Linear(8, 16)
        self.block = Block()
        self.out = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.block(self.inp(x))))


def _gelu_line() -> int:
    lines, start = inspect.getsourcelines(Block.forward)
    return start + next(i for i, text in enumerate(lines) if "# GELU LINE" in text)


def test_small_cnn_all_intermediates_match_on_sim() -> None:
    model, x = _cnn(), torch.randn(2, 3, 8, 8)
    report = torch2trt_lite.compare(model, [x], backend="sim", tolerance=1e-5)
    assert report.first_bad is None and report.ok
    ops = [e.op for e in report.entries]
    # conv1 is folded with bn (reported as skipped); every other converted call is compared
    assert ops == [
        "torch.nn.functional.batch_norm", "torch.nn.functional.relu", "torch.conv2d",
        "torch.Tensor.flatten", "torch.nn.functional.linear",
    ], ops
    assert [s.module_path for s in report.skipped] == ["conv1"]
    assert [e.module_path for e in report.entries] == ["bn", "relu", "conv2", "", "fc"]
    for e in report.entries:
        assert e.max_rel <= 1e-5 and e.cosine > 1 - 1e-9, e
        assert e.location.startswith(__file__ + ":"), e.location
    # the errors are PyTorch's: the last intermediate is the model output; the plain engine agrees
    with torch.no_grad():
        ref = model(x)
    trt = torch2trt_lite.convert(model, [x], backend="sim")
    torch.testing.assert_close(trt(x), ref, atol=1e-5, rtol=1e-5)
    direct = float((trt(x) - ref).abs().max())
    assert report.entries[-1].max_abs == pytest.approx(direct, abs=1e-7)
    # the bn entry was compared with the value before ReLU(inplace=True) overwrote it
    assert report.entries[0].shape == [2, 8, 8, 8]
    d = report.to_dict()
    assert json.loads(json.dumps(d)) == d and d["first_bad"] is None and len(d["entries"]) == 5
    text = str(report)
    assert "batch_norm" in text and "fc/linear" in text and "all 5 tensor(s) within" in text


def test_injected_wrong_converter_is_found() -> None:
    qual = "torch.nn.functional.gelu"
    original = REGISTRY.get(qual)
    assert original is not None

    def wrong_gelu(ctx, call):  # type: ignore[no-untyped-def]
        it = original.converter(ctx, call)
        scale = ctx.constant(torch.full([1] * len(it.shape), 1.01))
        return ctx.network.add_elementwise(it, scale, ctx.trt.ElementWiseOperation.PROD).get_output(0)

    torch.manual_seed(0)
    model, x = GeluNet().eval(), torch.randn(3, 8)
    try:
        torch2trt_lite.converter(F.gelu, override=True)(wrong_gelu)
        report = torch2trt_lite.compare(model, [x], backend="sim")
    finally:
        REGISTRY.add(original, override=True)
    assert REGISTRY.get(qual) is original
    bad = report.first_bad
    assert bad is not None and not report.ok
    assert bad.op == qual and bad.module_path == "block"
    assert bad.location == f"{__file__}:{_gelu_line()}"
    assert bad.max_rel == pytest.approx(0.01, rel=1e-3)  # 1.01 x: 1 % of the largest value
    before = report.entries[: bad.index]
    assert [e.op for e in before] == ["torch.nn.functional.linear", "torch.nn.functional.linear"]
    assert all(e.ok and e.max_rel < 1e-5 for e in before)
    d = report.to_dict()
    assert d["first_bad"] == bad.index and d["entries"][bad.index]["op"] == qual
    assert "first bad" in str(report) and "block" in str(report)
    # with the original converter restored, the same model compares clean
    assert torch2trt_lite.compare(model, [x], backend="sim").ok


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="torch2trt-lite")
    add_parser(p.add_subparsers(dest="command", required=True))
    return p


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is None, reason="torchvision is not installed")
def test_cli_compare_squeezenet_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["compare", "torchvision:squeezenet1_1", "--shape", "1x3x32x32", "--backend", "sim"]
    args = _parser().parse_args([*argv, "--json"])
    assert args.fn(args) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["ok"] and d["first_bad"] is None and d["backend"] == "sim" and d["tolerance"] == 1e-3
    assert len(d["entries"]) > 20
    assert {"features.0", "classifier.1"} <= {e["module_path"] for e in d["entries"]}
    assert all(e["max_rel"] <= 1e-3 for e in d["entries"])
    args = _parser().parse_args([*argv, "--tolerance", "1e-4"])
    assert args.fn(args) == 0
    out = capsys.readouterr().out
    assert "features.0" in out and "max rel" in out and "within max rel 0.0001" in out


def test_cli_options_have_help() -> None:
    sub = argparse.ArgumentParser(prog="torch2trt-lite").add_subparsers()
    compare = add_parser(sub)
    for action in compare._actions:
        assert action.help, action


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
@pytest.mark.rtx
def test_real_backend_without_gpu_refuses_clearly() -> None:
    with pytest.raises(torch2trt_lite.BackendUnavailableError, match="need a supported NVIDIA GPU to run"):
        torch2trt_lite.compare(_cnn(), [torch.randn(1, 3, 8, 8)], backend="tensorrt-rtx")


def test_bad_arguments() -> None:
    with pytest.raises(torch2trt_lite.Torch2TRTError, match="does not take cache_dir"):
        torch2trt_lite.compare(_cnn(), [torch.randn(1, 3, 8, 8)], backend="sim", cache_dir="x")
    with pytest.raises(torch2trt_lite.Torch2TRTError, match="tolerance must be"):
        torch2trt_lite.compare(_cnn(), [torch.randn(1, 3, 8, 8)], backend="sim", tolerance=-1)
