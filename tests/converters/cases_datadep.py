"""Harness cases: data-dependent shapes (nonzero, one-argument where, masked_select, boolean-mask
indexing). The second run on rolled inputs selects another number of elements, so the engine's
output allocator must return the new size."""

from __future__ import annotations

import torch

from tests.converters.harness import Case, randn

T = "torch.Tensor."


def grid() -> list[torch.Tensor]:
    return [randn(6, 5)]


def ints() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randint(-2, 3, (4, 6), generator=g)]


def preds() -> list[torch.Tensor]:
    # YOLO-style rows: cx, cy, w, h, objectness, 4 class scores (all in [0, 1])
    g = torch.Generator().manual_seed(0)
    return [torch.rand(40, 9, generator=g)]


def _boxes(p: torch.Tensor) -> torch.Tensor:
    conf = p[:, 4:5] * p[:, 5:]
    best, j = conf.max(1)
    keep = best > 0.25
    q = p[keep]
    box = torch.cat([q[:, :2] - q[:, 2:4] / 2, q[:, :2] + q[:, 2:4] / 2], 1)
    return torch.cat([box + j[keep][:, None] * 4096.0, best[keep][:, None]], 1)[:12]


def _topk_selected(x: torch.Tensor) -> torch.Tensor:
    # torchvision's detectors: top-k of the scores over a threshold, k = min(k, their count)
    from torchvision.models.detection._utils import _topk_min

    scores = x.flatten()[x.flatten() > -0.2]
    return scores.topk(_topk_min(scores, 50, 0))[0]


CASES = [
    Case("nonzero", lambda x: torch.nonzero(x > 0.2), grid, targets=["torch.nonzero"]),
    Case("nonzero_method_ints", lambda x: x.nonzero(), ints, targets=[T + "nonzero"]),
    Case("nonzero_as_tuple", lambda x: torch.nonzero(x > 0, as_tuple=True), grid, targets=["torch.nonzero"]),
    Case("argwhere", lambda x: torch.argwhere(x < -0.3), grid, targets=["torch.argwhere"]),
    Case("argwhere_method", lambda x: (x > 0.1).argwhere(), grid, targets=[T + "argwhere"]),
    Case("topk_min_of_selected", _topk_selected, grid,
         targets=["torchvision.models.detection._utils._topk_min"]),
    Case("where_one_arg", lambda x: torch.where(x[:, 1] > 0)[0], grid, targets=["torch.where"]),
    Case("masked_select", lambda x: torch.masked_select(x, x > 0.5), grid, targets=["torch.masked_select"]),
    Case("masked_select_broadcast", lambda x: x.masked_select(torch.tensor([True, False, True, True, False])),
         grid, targets=[T + "masked_select"]),
    Case("getitem_bool_rows", lambda x: x[x[:, 0] > 0] * 2, grid, targets=[T + "__getitem__"]),
    Case("getitem_bool_full", lambda x: x[x.abs() > 0.7] + 1, grid, targets=[T + "__getitem__"]),
    Case("getitem_bool_cols", lambda x: x[:, x[0] > 0], grid, targets=[T + "__getitem__"]),
    Case("nonzero_sizes", lambda x: torch.arange(torch.nonzero(x > 0).size(0)) * x.sum(), grid,
         targets=["torch.nonzero", "torch.arange"]),
    Case("yolo_rows", _boxes, preds, targets=[T + "__getitem__"], rtol=1e-6, atol=1e-4),
    # under a dynamic batch the fill value is the network's size, not the traced one (see the dynamic harness)
    Case("full_of_a_size", lambda x: torch.full((2, 3), x.size(0), dtype=torch.float32) * x[0, :3], grid),
]
