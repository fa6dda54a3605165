"""Harness cases: the built-in plugins (deform_conv2d, roi_align) run through convert on the sim."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torchvision

from tests.converters.harness import Case, randn


def _deform_inputs() -> list[torch.Tensor]:
    x = randn(1, 4, 9, 9, seed=1)
    offset = randn(1, 2 * 3 * 3, 9, 9, seed=2) * 0.7
    return [x, offset]


class _DeformModule(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.op = torchvision.ops.DeformConv2d(4, 6, 3, padding=1)

    def forward(self, x: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
        return self.op(x, offset)


_W = randn(6, 4, 3, 3, seed=3)
_BOXES = torch.tensor([[0, 1.0, 1.0, 6.5, 7.0], [0, 0.0, 2.0, 8.0, 5.5]])


class _RoIAlignModule(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.op = torchvision.ops.RoIAlign((3, 3), spatial_scale=0.5, sampling_ratio=-1, aligned=True)

    def forward(self, x: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
        return self.op(x, boxes)


class _MultiScale(torch.nn.Module):
    """torchvision's FPN pooler over two levels (boxes of both sizes, so both levels are used)."""

    def __init__(self) -> None:
        super().__init__()
        self.pool = torchvision.ops.MultiScaleRoIAlign(["p2", "p3"], 3, 2)

    def forward(self, p2: torch.Tensor, p3: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
        return self.pool({"p2": p2, "p3": p3}, [boxes], [(128, 128)])


_FPN_BOXES = torch.tensor([[2.0, 3.0, 22.0, 20.0], [0.0, 1.0, 126.0, 120.0], [40.0, 10.0, 60.0, 90.0]])


def _other_features(xs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Other feature maps, the same boxes (a box row is (batch index, x1, y1, x2, y2): not to be rolled)."""
    return [torch.roll(xs[0], 1, -1), *xs[1:]]


CASES = [
    Case("deform_conv2d_fn", lambda x, off: torchvision.ops.deform_conv2d(x, off, _W, padding=(1, 1)),
         _deform_inputs, targets=["torchvision.ops.deform_conv.deform_conv2d"], rtol=1e-4, atol=1e-4),
    Case("deform_conv2d_module", _DeformModule, _deform_inputs, is_module=True,
         targets=["torchvision.ops.deform_conv.DeformConv2d"], rtol=1e-4, atol=1e-4),
    Case("roi_align_fn", lambda x, b: torchvision.ops.roi_align(x, b, (2, 2), 1.0, 2, False),
         lambda: [randn(1, 3, 10, 10, seed=4), _BOXES.clone()], targets=["torchvision.ops.roi_align.roi_align"],
         others=_other_features),
    Case("roi_align_module", _RoIAlignModule, lambda: [randn(1, 3, 16, 16, seed=5), _BOXES.clone()],
         is_module=True, targets=["torchvision.ops.roi_align.RoIAlign"], others=_other_features),
    # the underlying op (what torchvision.ops.roi_align calls, also when it was bound before convert)
    Case("roi_align_torch_ops", lambda x, b: torch.ops.torchvision.roi_align(x, b, 0.5, 3, 3, 2, True),
         lambda: [randn(1, 3, 12, 12, seed=6), _BOXES.clone()], targets=["torch.ops.torchvision.roi_align"],
         others=_other_features),
    Case("roi_align_torch_ops_default",
         lambda x, b: torch.ops.torchvision.roi_align.default(x, b, 1.0, 2, 2, -1, False),
         lambda: [randn(1, 3, 10, 10, seed=7), _BOXES.clone()], targets=["torch.ops.torchvision.roi_align.default"],
         others=_other_features),
    Case("multiscale_roi_align", _MultiScale,
         lambda: [randn(1, 4, 32, 32, seed=8), randn(1, 4, 16, 16, seed=9), _FPN_BOXES.clone()], is_module=True,
         targets=["torchvision.ops.poolers.MultiScaleRoIAlign"], others=_other_features),
]
