"""A module-path ``precision_overrides`` covers every layer whose call happens inside that module
(torch2trt_lite/trace/precision.py, ``Policy.scope``): calls in its ``forward`` and in any other method
(an audio codec calls ``self.quantizer.encode(z)``, which module hooks never see), converter-made
layers (constants, casts, shape layers, argmin's), and constants the model used in fp16 elsewhere first.

The model is codec-like: encoder -> vector quantizer (argmin over codebook distances) -> decoder. The
inputs sit within 0.1 % of the midpoint of two code vectors, so a distance computed in fp16 flips codes:
without overrides some codes differ from eager fp32 (the control: the data can tell), and with
``{"encoder": "fp32", "quantizer": "fp32"}`` every code equals eager fp32's exactly, while the decoder
stays in fp16. Codes are integers compared exactly; no tolerance.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch2trt_lite
from torch2trt_lite import Input

OVERRIDES = {"encoder": "fp32", "quantizer": "fp32"}


class VectorQuantizer(nn.Module):
    embed: torch.Tensor

    def __init__(self, codebook: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("embed", codebook)

    def encode(self, z: torch.Tensor) -> torch.Tensor:
        flat = z.reshape(-1, z.shape[-1])  # shape layers under a dynamic batch
        e = self.embed
        dist = flat.pow(2).sum(-1, keepdim=True) - 2 * flat @ e.t() + e.pow(2).sum(-1)
        dist = dist + flat.new_zeros(flat.size(0), 1)  # a fill of a size the network computes (dynamic)
        return dist.argmin(-1).view(z.shape[:-1])

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        return F.embedding(codes, self.embed)

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        codes = self.encode(z)
        return codes, self.decode(codes)


class Codec(nn.Module):
    def __init__(self, through_forward: bool) -> None:
        super().__init__()
        self.through_forward = through_forward
        self.encoder = nn.Linear(4, 4)
        self.decoder = nn.Linear(4, 4)
        with torch.no_grad():
            self.encoder.weight.copy_(torch.eye(4) * 1.001)
            self.encoder.bias.zero_()
        self.quantizer = VectorQuantizer(torch.randn(16, 4, generator=torch.Generator().manual_seed(0)) * 30)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        logits = x @ self.quantizer.embed.t()  # the codebook used first outside the quantizer, in fp16
        z = self.encoder(x)
        if self.through_forward:
            codes, q = self.quantizer(z)
        else:  # methods, as audio codecs call their quantizers: no module hook sees these calls
            codes = self.quantizer.encode(z)
            q = self.quantizer.decode(codes)
        return codes, self.decoder(q), logits


def _near_ties(model: Codec, n: int, seed: int) -> torch.Tensor:
    """``n`` inputs whose encoding lies within 0.1 % of the midpoint of two code vectors."""
    g = torch.Generator().manual_seed(seed)
    cb = model.quantizer.embed
    i, j = torch.randint(0, 16, (2, n), generator=g)
    t = torch.rand(n, 1, generator=g) * 0.002 + 0.499
    return (cb[i] * t + cb[j] * (1 - t)) / 1.001


def _convert(model: Codec, x: torch.Tensor, overrides: Any, dynamic: bool) -> torch2trt_lite.TRTModule:
    spec: list[Any] = [Input((1, 4), (x.shape[0], 4), (256, 4), example=x)] if dynamic else [x]
    return torch2trt_lite.convert(model, spec, backend="sim", precision="fp16", precision_overrides=overrides,
                                  verify=False)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic_batch"])
@pytest.mark.parametrize("through_forward", [False, True], ids=["methods", "forward"])
def test_module_override_covers_every_layer_of_the_module(through_forward: bool, dynamic: bool) -> None:
    model = Codec(through_forward).eval()
    x = _near_ties(model, 64, seed=1)
    with torch.no_grad():
        want = model(x)[0]

    plain = _convert(model, x, None, dynamic)
    assert int((plain(x)[0] != want).sum()) > 0, "control: fp16 distances must flip a code on this data"

    engine = _convert(model, x, OVERRIDES, dynamic)
    others = [x, _near_ties(model, 64, seed=2)] + ([_near_ties(model, 9, seed=3)] if dynamic else [])
    for xs in others:
        with torch.no_grad():
            eager = model(xs)[0]
        torch.testing.assert_close(engine(xs)[0], eager, rtol=0, atol=0)

    layers = engine.layer_precisions()
    inside = [(name, kind, dts) for name, kind, dts in layers if name.startswith(("encoder/", "quantizer/"))]
    kinds = {kind for name, kind, _ in inside if name.startswith("quantizer/")}
    # the quantizer's own calls, converter-made layers included, are named under it
    assert {"MATRIX_MULTIPLY", "TOPK", "REDUCE", "CONSTANT", "GATHER"} <= kinds, kinds
    if dynamic:
        assert "SHAPE" in kinds, kinds
    # nothing the quantizer computes is left at the top level: there only the logits and the output casts
    assert {name.split("_")[0] for name, _, _ in layers if "/" not in name} <= {"matmul", "output"}
    wrong = [(name, kind, dts) for name, kind, dts in inside if any(dt in ("HALF", "BF16") for dt in dts)]
    assert not wrong, f"layers under an fp32 override computing in a 16-bit type: {wrong}"
    assert any("HALF" in dts for name, _, dts in layers if name.startswith("decoder/")), "the decoder stays fp16"
