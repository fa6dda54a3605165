"""torchvision classification models convert on the sim and match eager (foundation issue)."""

from __future__ import annotations

import os

import pytest
import torch
import torchvision

import torch2trt_lite

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "vgg11_bn", "squeezenet1_1", "densenet121"]


def max_rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    return float((got - ref).abs().max() / ref.abs().max())


@pytest.mark.parametrize("name", MODELS)
def test_torchvision_model_matches_eager(name: str, tmp_path: object) -> None:
    torch.manual_seed(0)
    model = torchvision.models.get_model(name, weights=None).eval()
    if name == "vgg11_bn":  # random BN statistics: give them realistic values so the test is not trivial
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        ref = model(x)
    trt_model = torch2trt_lite.convert(model, [x], backend="sim")
    got = trt_model(x)
    assert got.shape == ref.shape
    assert max_rel_err(got, ref) <= 1e-4
    path = os.path.join(str(tmp_path), f"{name}.engine")
    trt_model.save(path)
    again = torch2trt_lite.load(path)
    assert torch.equal(again(x), got)
