"""Keypoint R-CNN's keypoint decoding, ``torchvision.models.detection.roi_heads.heatmaps_to_keypoints``,
converted alone (converters/zoo_torchvision.py) and compared with torchvision's own Python loop (a
bicubic resize of each RoI's heatmaps to its box, argmax, end score) on random heatmaps and RoIs:
boxes smaller than one pixel (clamped to 1 by torchvision), boxes at the image border, the whole
image, a dynamic RoI count (1..12), ties (first maximum in row-major order) and the
refusal without an image size to bound the boxes. The real TensorRT-RTX builder builds the network too.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torch2trt_lite
from torch2trt_lite import Input
from torch2trt_lite.errors import Torch2TRTError

torchvision = pytest.importorskip("torchvision")
roi_heads = torchvision.models.detection.roi_heads

H, W = 40, 48  # the image the RoIs were clipped to
K, M = 5, 56  # keypoints, heatmap size (keypointrcnn: 17, 56)


class _Decode(nn.Module):
    """heatmaps_to_keypoints as RoIHeads.forward calls it: ``image_shapes`` (its argument there) is the
    bound of the RoI sizes the converter reads."""

    def __init__(self, image_shapes: tuple[tuple[int, int], ...] | None = ((H, W),)) -> None:
        super().__init__()
        self.shapes = None if image_shapes is None else list(image_shapes)

    def forward(self, maps: torch.Tensor, rois: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.shapes is None:
            return roi_heads.heatmaps_to_keypoints(maps, rois)  # type: ignore[no-any-return]
        image_shapes = self.shapes  # noqa: F841  (read by the converter, as in RoIHeads.forward)
        return roi_heads.heatmaps_to_keypoints(maps, rois)  # type: ignore[no-any-return]


def _data(seed: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    maps = torch.randn(n, K, M, M, generator=g)
    corner = torch.rand(n, 2, generator=g) * torch.tensor([W, H])
    size = torch.rand(n, 2, generator=g) * torch.tensor([W, H])
    size[: min(n, 3)] *= 0.01  # smaller than a pixel: widths/heights clamp to 1
    far = torch.minimum(corner + size, torch.tensor([float(W), float(H)]))  # clipped: some end at the border
    rois = torch.cat([corner, far], 1)
    if n > 4:
        rois[3] = torch.tensor([0.0, 0.0, W, H])  # the whole image: the largest resize
        rois[4] = torch.tensor([W - 0.3, H - 10.5, W, H])  # a sliver at the bottom-right border
    return maps, rois


def _assert_same(got: tuple[torch.Tensor, torch.Tensor], want: tuple[torch.Tensor, torch.Tensor]) -> None:
    assert got[0].shape == want[0].shape and got[1].shape == want[1].shape
    # argmax positions equal (an off-by-one would be >= 1/56 of a box here): pixels
    torch.testing.assert_close(got[0], want[0], rtol=1e-6, atol=1e-5)
    # bicubic values: aten sums the taps in its own order (measured: within 8e-7)
    torch.testing.assert_close(got[1], want[1], rtol=1e-5, atol=1e-5)


def test_static_count_matches_torchvision() -> None:
    model = _Decode().eval()
    trt = torch2trt_lite.convert(model, list(_data(0, 8)), backend="sim")
    for seed in (0, 1, 2):
        maps, rois = _data(seed, 8)
        _assert_same(trt(maps, rois), model(maps, rois))


def test_dynamic_count_matches_torchvision() -> None:
    model = _Decode().eval()
    inputs = [Input((1, K, M, M), (6, K, M, M), (12, K, M, M)), Input((1, 4), (6, 4), (12, 4))]
    trt = torch2trt_lite.convert(model, inputs, backend="sim")
    for seed, n in ((3, 1), (4, 6), (5, 12)):
        maps, rois = _data(seed, n)
        _assert_same(trt(maps, rois), model(maps, rois))


def test_ties_take_the_first_maximum() -> None:
    # all-zero heatmaps resize to exact zeros: every position ties, torch's argmax takes the first
    model = _Decode().eval()
    maps, rois = _data(6, 6)
    maps[1:3] = 0.0
    trt = torch2trt_lite.convert(model, [maps, rois], backend="sim")
    got, want = trt(maps, rois), model(maps, rois)
    _assert_same(got, want)
    torch.testing.assert_close(got[0][1:3, :, :2], rois[1:3, None, :2].expand(2, K, 2)
                               + 0.5 * (rois[1:3, None, 2:] - rois[1:3, None, :2]).clamp(min=1)
                               / (rois[1:3, None, 2:] - rois[1:3, None, :2]).clamp(min=1).ceil())


def test_refused_without_an_image_size() -> None:
    with pytest.raises(Torch2TRTError, match="image_shapes"):
        torch2trt_lite.convert(_Decode(None).eval(), list(_data(0, 8)), backend="sim")


def test_builds_on_the_real_builder() -> None:
    pytest.importorskip("tensorrt_rtx", reason="the real-builder tier needs TensorRT-RTX: pip install -e '.[rtx]'")
    from tests.build.test_real_builder import check_both

    sim, real = check_both("heatmaps_to_keypoints", _Decode().eval(), list(_data(0, 8)))
    assert sim.built and real.built, (sim.error, real.error)
