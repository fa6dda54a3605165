"""Polygraphy runners (torch2trt_lite.polygraphy): Comparator.run / compare_accuracy against PyTorch, on the sim."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

import numpy as np
import pytest
import torch

import torch2trt_lite
from torch2trt_lite.errors import RuntimeExecutionError, Torch2TRTError

pytest.importorskip("polygraphy", reason="polygraphy is not installed (the deploy extra)")
from polygraphy.comparator import Comparator, DataLoader, SimpleCompareFunc  # noqa: E402

from torch2trt_lite.tools.polygraphy import TorchModuleRunner, TRTModuleRunner, engine_input_metadata  # noqa: E402

TOL = {"atol": 1e-5, "rtol": 1e-5}  # float32 on the CPU: the sim and eager PyTorch agree to rounding


class SmallCNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(y.mean((2, 3))), y


class Scaled(torch.nn.Module):
    """The same model with its first output off by 1%."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = self.model(x)
        return a * 1.01, b


@pytest.fixture(scope="module")
def cnn() -> tuple[torch.nn.Module, torch.Tensor, torch2trt_lite.TRTModule]:
    torch.manual_seed(0)
    model = SmallCNN().eval()
    with torch.no_grad():  # non-trivial batch-norm statistics
        model.bn.running_mean.uniform_(-0.2, 0.2)
        model.bn.running_var.uniform_(0.5, 1.5)
    x = torch.randn(2, 3, 16, 16)
    return model, x, torch2trt_lite.convert(model, [x], backend="sim")


def _torch_runner(model, engine, x):
    return TorchModuleRunner(model, engine.input_names, engine.output_names, example_inputs=[x])


def test_comparator_passes_for_the_converted_cnn(cnn):
    model, x, engine = cnn
    torch_runner, trt_runner = _torch_runner(model, engine, x), TRTModuleRunner(engine, name="sim-engine")
    results = Comparator.run([torch_runner, trt_runner])
    assert bool(Comparator.compare_accuracy(results, compare_func=SimpleCompareFunc(**TOL)))
    # on a given input, the outputs polygraphy got from the engine are PyTorch's own
    results = Comparator.run([torch_runner, trt_runner], data_loader=[{"input_0": x.numpy()}])
    assert bool(Comparator.compare_accuracy(results, compare_func=SimpleCompareFunc(**TOL)))
    engine_out = results[trt_runner.name][0]
    assert list(engine_out.keys()) == engine.output_names == ["output_0", "output_1"]
    with torch.no_grad():
        ref = model(x)
    for name, want in zip(engine.output_names, ref, strict=True):
        torch.testing.assert_close(torch.from_numpy(engine_out[name]), want, **TOL)


def test_comparator_fails_for_a_different_model(cnn):
    model, x, engine = cnn
    results = Comparator.run([_torch_runner(Scaled(model), engine, x), TRTModuleRunner(engine)])
    acc = Comparator.compare_accuracy(results, compare_func=SimpleCompareFunc(**TOL))
    assert not bool(acc)


def test_runner_outputs_match_pytorch(cnn, tmp_path):
    model, x, engine = cnn
    path = tmp_path / "cnn.engine"
    engine.save(path)
    with TRTModuleRunner(path) as runner:  # an engine file, loaded on activate
        meta = runner.get_input_metadata(use_numpy_dtypes=False)
        assert list(meta) == ["input_0"] and tuple(meta["input_0"].shape) == tuple(x.shape)
        out = runner.infer({"input_0": x.numpy()})
        assert runner.last_inference_time() is not None
    with torch.no_grad():
        ref = model(x)
    for got, want in zip(out.values(), ref, strict=True):
        assert isinstance(got, np.ndarray)
        torch.testing.assert_close(torch.from_numpy(got), want, **TOL)
    with TRTModuleRunner(engine) as runner:  # torch tensors in: torch tensors out
        out = runner.infer({"input_0": x})
    torch.testing.assert_close(out["output_0"], ref[0], **TOL)


def test_torch_runner_first_or_second_with_torch_data(cnn):
    model, _, engine = cnn
    torch_runner = TorchModuleRunner(model, engine.input_names, engine.output_names, input_metadata=engine)
    loader = DataLoader(data_loader_backend_module="torch")
    results = Comparator.run([TRTModuleRunner(engine), torch_runner], data_loader=loader)
    assert bool(Comparator.compare_accuracy(results, compare_func=SimpleCompareFunc(**TOL)))
    assert isinstance(results[torch_runner.name][0]["output_0"], torch.Tensor)
    with pytest.raises(Torch2TRTError, match="give example_inputs"):
        TorchModuleRunner(model, engine.input_names, engine.output_names)
    assert list(engine_input_metadata(engine)) == engine.input_names


class ToBF16(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 2.0).to(torch.bfloat16)


def test_bfloat16_is_refused_with_numpy_and_works_with_torch():
    x = torch.randn(2, 3)
    engine = torch2trt_lite.convert(ToBF16().eval(), [x], backend="sim")
    with TRTModuleRunner(engine) as runner:
        with pytest.raises(RuntimeExecutionError, match="bfloat16, which numpy has no dtype for"):
            runner.infer({"input_0": x.numpy()})
        out = runner.infer({"input_0": x})
    torch.testing.assert_close(out["output_0"], ToBF16()(x), rtol=0, atol=0)


class _ImportSpy(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Records (and fails, as they fail here) imports of TensorRT; a mere ``find_spec`` probe, which
    torch._dynamo makes, is not an import and is not recorded."""

    NAMES = ("tensorrt", "tensorrt_rtx", "tensorrt_lean", "tensorrt_dispatch")

    def __init__(self) -> None:
        self.imported: list[str] = []

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.NAMES:
            return importlib.machinery.ModuleSpec(name, self, origin=None)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        self.imported.append(module.__name__)
        raise ImportError(f"{module.__name__} is blocked by the test")


_NO_TRT_SCRIPT = """
import importlib.machinery, sys
import torch, torch2trt_lite
from polygraphy.comparator import Comparator, CompareFunc
from torch2trt_lite.polygraphy import TorchModuleRunner, TRTModuleRunner

class Spy:
    imported = []
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorrt", "tensorrt_rtx", "tensorrt_lean", "tensorrt_dispatch"):
            return importlib.machinery.ModuleSpec(name, self, origin=None)
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        Spy.imported.append(module.__name__)
        raise ImportError("blocked")

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
x = torch.randn(1, 3, 8, 8)
engine = torch2trt_lite.convert(model, [x], backend="sim")
engine.save(sys.argv[1])
sys.meta_path.insert(0, Spy())
runners = [TorchModuleRunner(model, engine.input_names, engine.output_names, example_inputs=[x]),
           TRTModuleRunner(sys.argv[1])]
results = Comparator.run(runners)
ok = bool(Comparator.compare_accuracy(results, compare_func=CompareFunc.simple(atol=1e-5, rtol=1e-5)))
assert ok, "the comparison failed"
assert Spy.imported == [], Spy.imported
print("no tensorrt import")
"""


def test_comparison_does_not_import_tensorrt(tmp_path):
    """Polygraphy imports TensorRT lazily: loading an engine file and comparing must never import it.
    Checked in a fresh interpreter, where a hook records import attempts (TensorRT is not installed
    here, so a failed import would leave no trace in sys.modules)."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", _NO_TRT_SCRIPT, str(tmp_path / "cnn.engine")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "no tensorrt import" in out.stdout
