"""Harness cases: library helpers with converters of their own (torchvision's mask pasting and
transformers' padding-mask preparation), called as the models call them."""

from __future__ import annotations

import torch

from tests.converters.harness import Case


def masks_and_boxes() -> list[torch.Tensor]:
    # Mask R-CNN's postprocess: [N, 1, M, M] probabilities and [N, 4] boxes, some crossing the image's
    # edges (torchvision itself fails on a box that starts past the far edge)
    g = torch.Generator().manual_seed(0)
    masks = torch.rand(5, 1, 14, 14, generator=g)
    xy = torch.rand(5, 2, generator=g) * 30 - 4
    wh = torch.rand(5, 2, generator=g) * 24 + 1
    return [masks, torch.cat([xy, xy + wh], 1)]


def _paste_transform(masks: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
    from torchvision.models.detection import transform

    return transform.paste_masks_in_image(masks, boxes, (40, 34), padding=2)


def padding_mask() -> list[torch.Tensor]:
    m = torch.ones(2, 5, dtype=torch.int64)
    m[0, :2] = 0
    return [torch.randn(2, 5, 4), m]


def _padded(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    from transformers import masking_utils

    return x.sum(-1) * masking_utils.prepare_padding_mask(mask, 7, 0)[:, :5]


def heatmaps_and_rois() -> list[torch.Tensor]:
    # Keypoint R-CNN: [N, K, 14, 14] heatmaps and [N, 4] boxes within a 32 x 40 image
    g = torch.Generator().manual_seed(0)
    corner = torch.rand(4, 2, generator=g) * torch.tensor([30.0, 24.0])
    far = torch.minimum(corner + torch.rand(4, 2, generator=g) * 16 + 0.5, torch.tensor([40.0, 32.0]))
    return [torch.randn(4, 3, 14, 14, generator=g), torch.cat([corner, far], 1)]


def _keypoints(maps: torch.Tensor, rois: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    from torchvision.models.detection import roi_heads

    image_shapes = [(32, 40)]  # noqa: F841 (the converter's bound on the boxes' size, as in RoIHeads.forward)
    return roi_heads.heatmaps_to_keypoints(maps, rois)  # type: ignore[no-any-return]


CASES = [
    Case("paste_masks_in_image", _paste_transform, masks_and_boxes, rtol=1e-5, atol=1e-5,
         targets=["torchvision.models.detection.transform.paste_masks_in_image"],
         vary="rolled boxes are no boxes (x1 < x0): torchvision itself fails on them"),
    Case("prepare_padding_mask", _padded, padding_mask,
         targets=["transformers.masking_utils.prepare_padding_mask"]),
    Case("heatmaps_to_keypoints", _keypoints, heatmaps_and_rois, rtol=1e-5, atol=1e-4,
         targets=["torchvision.models.detection.roi_heads.heatmaps_to_keypoints"],
         vary="rolled boxes are no boxes (x1 < x0)"),
]
