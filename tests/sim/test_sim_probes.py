"""The sim's shape inference of dynamic dims (torch2trt_lite/sim/_core.py, ``PROBE_SIZES``): each
layer runs at four sizes of the dynamic input dims, and an output dim that differs between them is
-1. The third (88) and fourth (2) probes are soft: a layer that fails there (a 64-entry table sliced
to the probe size) defines as before, from the first two; the small one tells a clamp of a dynamic
size to a constant (``x[:4]``: min(n, 4), the same at every large probe) from a static size. Checked against eager PyTorch and, where it is
installed, against TensorRT-RTX's own shape inference (the spec)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch2trt_lite
from torch2trt_lite import Input
from torch2trt_lite.sim import _core


class Fn(torch.nn.Module):
    def __init__(self, fn: object) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs: torch.Tensor) -> object:
        return self.fn(*xs)  # type: ignore[operator]


class Table(torch.nn.Module):
    """A 64-entry position table sliced to the sequence length (text models' position embeddings)."""

    pos: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("pos", torch.arange(64, dtype=torch.float32).view(1, 64, 1) / 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.pos[:, : x.size(1)]  # fails at the soft probe 88 (STRICT_BOUNDS slice)


def _stride64(x: torch.Tensor) -> torch.Tensor:
    # 1 x 1 at H, W of 24 and 56 (the first two probes), 2 x 2 at 88: dynamic, as TensorRT says
    return F.max_pool2d(F.max_pool2d(x, 1, 32), 1, 2)


_SPATIAL = [Input((1, 3, 32, 32), (1, 3, 64, 64), (1, 3, 160, 160))]


def test_probe_sizes() -> None:
    assert _core.PROBE_SIZES[: _core._STRICT_PROBES] == (24, 56) and len(_core.PROBE_SIZES) == 4


def test_a_level_that_is_one_at_two_probes_is_dynamic_and_runs() -> None:
    d = torch2trt_lite.define_network(Fn(_stride64).eval(), _SPATIAL, backend="sim")
    assert [outs[0][0] for _, _, outs in d.layers()] == [(1, 3, -1, -1), (1, 3, -1, -1)]
    e = torch2trt_lite.convert(Fn(_stride64).eval(), _SPATIAL, backend="sim")
    for hw in (32, 64, 96, 160):
        x = torch.randn(1, 3, hw, hw)
        torch.testing.assert_close(e(x), _stride64(x), rtol=0, atol=0)


@pytest.mark.rtx
@pytest.mark.parametrize("which", ["stride64", "table"])
def test_layer_shapes_equal_tensorrt_rtx(which: str) -> None:
    model: torch.nn.Module
    if which == "stride64":
        model, spec = Fn(_stride64).eval(), _SPATIAL
    else:
        model, spec = Table().eval(), [Input((1, 1, 4), (1, 12, 4), (1, 64, 4))]
    sim = torch2trt_lite.define_network(model, spec, backend="sim").layers()
    rtx = torch2trt_lite.define_network(model, spec, backend="tensorrt-rtx").layers()
    assert [(t, outs) for _, t, outs in sim] == [(t, outs) for _, t, outs in rtx]


def test_a_layer_that_fails_at_the_soft_probe_defines_logs_nothing_and_runs() -> None:
    model = Table().eval()
    spec = [Input((1, 1, 4), (1, 12, 4), (1, 64, 4))]
    d = torch2trt_lite.define_network(model, spec, backend="sim")
    assert d.layers()[-1][2][0][0] == (1, -1, 4)
    assert not d.logger.errors  # the soft probe's failure is no error of the network
    e = torch2trt_lite.convert(model, spec, backend="sim")
    for n in (1, 5, 64):
        x = torch.randn(1, n, 4)
        with torch.no_grad():
            torch.testing.assert_close(e(x), model(x), rtol=0, atol=0)


def test_mixing_a_tensor_without_the_soft_probe_with_one_that_has_it() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        pooled = _stride64(x)  # probed at 3 sizes
        table = Table()(x.mean(1).flatten(1).unsqueeze(-1)[:, : x.size(2)])  # without the third probe
        return pooled.flatten(2).sum(-1, keepdim=True) * table.sum()

    m = Fn(fn).eval()
    spec = [Input((1, 3, 8, 8), (1, 3, 16, 16), (1, 3, 64, 64))]
    e = torch2trt_lite.convert(m, spec, backend="sim")
    for hw in (8, 40, 64):
        x = torch.randn(1, 3, hw, hw)
        with torch.no_grad():
            torch.testing.assert_close(e(x), m(x), rtol=1e-5, atol=1e-5)
