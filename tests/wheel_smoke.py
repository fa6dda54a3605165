"""Run by ``tools/wheel_check.py`` inside a venv that holds the installed wheel and only the core
dependencies (torch, numpy, rich): what a plain ``pip install torch2trt-lite`` must do. Not a pytest
module (the venv has no pytest): plain asserts, exit status 0 when every check passes."""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys
import sysconfig
import tempfile
import time

import torch
from torch import nn

import torch2trt_lite

T0 = time.perf_counter()


def step(what: str) -> None:
    print(f"[{time.perf_counter() - T0:6.1f}s] {what}", flush=True)


# the installed wheel, not the source tree; no optional package in reach
site = pathlib.Path(sysconfig.get_paths()["purelib"]).resolve()
assert pathlib.Path(torch2trt_lite.__file__).resolve().is_relative_to(site), (torch2trt_lite.__file__, site)
absent = ["modelopt", "transformers", "torchvision", "timm", "tensorrt", "tensorrt_rtx", "onnx", "pytest"]
present = [name for name in absent if importlib.util.find_spec(name) is not None]
assert not present, f"the core venv must not hold {present}"
step(f"torch2trt_lite {torch2trt_lite.__version__} from {torch2trt_lite.__file__}, torch {torch.__version__}")

ops = torch2trt_lite.supported_ops()
assert len(ops) > 300 and "torch.conv2d" in ops and "torch.Tensor.__getitem__" in ops, len(ops)
assert not [op for op in ops if op.startswith(("modelopt", "torchvision", "transformers"))]
step(f"supported_ops(): {len(ops)}")


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.head = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x)).softmax(-1)


def close(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


torch.manual_seed(0)
cnn = CNN().eval()
x = torch.randn(2, 3, 16, 16)
report = torch2trt_lite.check(cnn, [x])
assert report.ok, report
step("check(CNN)")

with torch.no_grad():
    trt = torch2trt_lite.convert(cnn, [x], backend="sim")
    close(trt(x), cnn(x))
    dyn = torch2trt_lite.convert(cnn, [x], backend="sim", max_batch_size=4)
    for b in (1, 4):
        xb = torch.randn(b, 3, 16, 16)
        close(dyn(xb), cnn(xb))
step("convert(CNN), static and dynamic batch")

with tempfile.TemporaryDirectory() as tmp:
    path = pathlib.Path(tmp) / "cnn.engine"
    trt.save(path)
    again = torch2trt_lite.load(path)
    with torch.no_grad():
        close(again(x), cnn(x))
    step("save / load")

    layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, batch_first=True).eval()
    tokens = torch.randn(2, 7, 32)
    assert torch2trt_lite.check(layer, [tokens]).ok
    with torch.no_grad():
        enc = torch2trt_lite.convert(layer, [tokens], backend="sim")
        close(enc(tokens), layer(tokens))
    step("convert(TransformerEncoderLayer)")

    spec = pathlib.Path(tmp) / "user_model.py"
    spec.write_text(
        "import torch\n\n\ndef make():\n    torch.manual_seed(0)\n"
        "    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),"
        " torch.nn.Linear(4 * 6 * 6, 2))\n"
    )
    out = pathlib.Path(tmp) / "user.engine"
    cli = pathlib.Path(sys.executable).parent / "torch2trt-lite"
    assert cli.exists(), f"the wheel installed no console script {cli}"
    res = subprocess.run([str(cli), "convert", f"{spec}:make", "--shape", "1-4x3x8x8", "--backend", "sim",
                          "--no-progress", "-o", str(out)], capture_output=True, text=True, cwd=tmp, check=False)
    assert res.returncode == 0 and out.exists(), res.stdout + res.stderr
    step("torch2trt-lite convert user_model.py:make")
    res = subprocess.run([sys.executable, "-m", "torch2trt_lite", "info", str(out)], capture_output=True, text=True,
                         cwd=tmp, check=False)
    assert res.returncode == 0 and "sim" in res.stdout, res.stdout + res.stderr
    step("python -m torch2trt_lite info")
    user = torch2trt_lite.load(out)
    sys.path.insert(0, tmp)
    import user_model

    model = user_model.make().eval()
    with torch.no_grad():
        for b in (1, 3):
            xb = torch.randn(b, 3, 8, 8)
            close(user(xb), model(xb))
    step("the CLI's engine matches eager")

print("wheel smoke: all passed", flush=True)
