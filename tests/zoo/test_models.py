"""torchvision classification models convert on the sim and match eager (foundation issue)."""

from __future__ import annotations

import os

import pytest
import torch
import torchvision

import torch2trt_lite
from tests.weights import nontrivial

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "vgg11_bn", "squeezenet1_1", "densenet121"]


def max_rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    return float((got - ref).abs().max() / ref.abs().max())


@pytest.mark.parametrize("name", MODELS)
def test_torchvision_model_matches_eager(name: str, tmp_path: object) -> None:
    torch.manual_seed(0)
    model = torchvision.models.get_model(name, weights=None).eval()
    nontrivial(model)  # random init has BN mean 0 / var 1 / gamma 1 / beta 0: an identity that hides a wrong fold
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        ref = model(x)
    trt_model = torch2trt_lite.convert(model, [x], backend="sim")
    got = trt_model(x)
    assert got.shape == ref.shape
    assert max_rel_err(got, ref) <= 1e-4
    x2 = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))  # not the traced input
    with torch.no_grad():
        ref2 = model(x2)
    assert max_rel_err(trt_model(x2), ref2) <= 1e-4
    path = os.path.join(str(tmp_path), f"{name}.engine")
    trt_model.save(path)
    again = torch2trt_lite.load(path)
    assert torch.equal(again(x), got)
