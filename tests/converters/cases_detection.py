"""Harness cases: detection post-processing (torchvision nms / batched_nms and gathers by their result),
torch.unique, and top-k / sort beyond TensorRT's k limit of 3840.

NMS inputs are random boxes with scores drawn without ties; the second run keeps the boxes and rolls
the scores (rolling boxes along their last dim would swap corners, which torchvision does not allow),
so another set of boxes survives and the engine returns another data-dependent length.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torchvision

from tests.converters.harness import Case, randn

T = "torch.Tensor."
TV = "torchvision.ops.boxes."


def boxes_scores(n: int, seed: int = 0, spread: float = 100.0) -> list[torch.Tensor]:
    """``n`` x1y1x2y2 boxes (sides 5..35 in a spread x spread field) and distinct scores in (0.05, 0.95)."""
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * spread
    wh = torch.rand(n, 2, generator=g) * 30 + 5
    scores = 0.05 + 0.9 * (torch.randperm(n, generator=g).float() + 0.5) / n
    return [torch.cat([xy, xy + wh], 1), scores]


def with_classes(n: int, classes: int = 4) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [*boxes_scores(n), torch.randint(0, classes, (n,), generator=g)]


def roll_scores(xs: Sequence[Any]) -> list[Any]:
    return [xs[0], torch.roll(xs[1], 1, -1), *xs[2:]]


def distinct(*shape: int, seed: int = 0) -> list[torch.Tensor]:
    """Values without ties (a permutation, scaled), so top-k indices are defined."""
    g = torch.Generator().manual_seed(seed)
    n = 1
    for s in shape:
        n *= s
    return [(torch.randperm(n, generator=g).float() / n - 0.5).reshape(shape)]


def _kept_boxes(b: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    keep = torchvision.ops.nms(b, s, 0.5)
    return b[keep] * 2, s[keep]


def _op_nms(b: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return torch.ops.torchvision.nms(b, s, 0.4)


def _batched_then_topk(b: torch.Tensor, s: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    keep = torchvision.ops.batched_nms(b, s, c, 0.5)
    return torch.cat([b[keep], s[keep, None], c[keep, None].float()], 1)


CASES = [
    # ---------------------------------------------------------------------------------- NMS
    Case("nms", lambda b, s: torchvision.ops.nms(b, s, 0.5), lambda: boxes_scores(60), targets=[TV + "nms"],
         others=roll_scores),
    Case("nms_iou_0", lambda b, s: torchvision.ops.nms(b, s, 0.0), lambda: boxes_scores(60), others=roll_scores),
    Case("nms_iou_0_8", lambda b, s: torchvision.ops.nms(b, s, 0.8), lambda: boxes_scores(120), others=roll_scores),
    Case("nms_op", _op_nms, lambda: boxes_scores(50), targets=["torch.ops.torchvision.nms"], others=roll_scores),
    Case("nms_gather_boxes", _kept_boxes, lambda: boxes_scores(80), others=roll_scores),
    Case("batched_nms", lambda b, s, c: torchvision.ops.batched_nms(b, s, c, 0.5), lambda: with_classes(80),
         targets=[TV + "batched_nms"], others=roll_scores),
    Case("batched_nms_coordinate_trick",
         lambda b, s, c: torchvision.ops.boxes._batched_nms_coordinate_trick(b, s, c, 0.3), lambda: with_classes(64),
         targets=[TV + "_batched_nms_coordinate_trick"], others=roll_scores),
    # 1200 boxes: 4800 coordinates, above the 4000 at which torchvision's batched_nms runs per-class NMS on CPU
    Case("batched_nms_large", lambda b, s, c: torchvision.ops.batched_nms(b, s, c, 0.5),
         lambda: with_classes(1200, 6), others=roll_scores),
    Case("batched_nms_vanilla", lambda b, s, c: torchvision.ops.boxes._batched_nms_vanilla(b, s, c, 0.5),
         lambda: with_classes(300, 5), targets=[TV + "_batched_nms_vanilla"], others=roll_scores),
    Case("batched_nms_gather", _batched_then_topk, lambda: with_classes(90, 3), others=roll_scores),
    # ------------------------------------------------------------------------------- unique
    Case("unique", lambda x: torch.unique(x), lambda: [torch.randint(0, 12, (5, 6))], targets=["torch.functional.unique"]),
    Case("unique_float_inverse_counts", lambda x: torch.unique(x.round(), return_inverse=True, return_counts=True),
         lambda: [randn(4, 7) * 3]),
    Case("unique_method_inverse", lambda x: (x * 2).unique(return_inverse=True), lambda: [torch.randint(-5, 5, (30,))],
         targets=[T + "unique"]),
    Case("unique_counts_large", lambda x: x.unique(return_counts=True), lambda: [torch.randint(0, 700, (4500,))]),
    # ------------------------------------------------------------------------ top-k > 3840
    Case("topk_5000", lambda x: x.topk(5000), lambda: distinct(2, 9000), targets=[T + "topk"]),
    Case("topk_5000_smallest_dim0", lambda x: torch.topk(x, 5000, dim=0, largest=False), lambda: distinct(6000, 2),
         targets=["torch.topk"]),
    Case("topk_5000_int", lambda x: x.topk(4000), lambda: [torch.randperm(7000).int()]),
    Case("sort_9000", lambda x: x.sort(descending=True), lambda: distinct(9000), targets=[T + "sort"]),
    Case("argsort_5000", lambda x: torch.argsort(x, dim=1), lambda: distinct(3, 5000), targets=["torch.argsort"]),
    # ------------------------------------------------------------- stable sorts of tied values
    Case("sort_stable_ties", lambda x: torch.sort(x.round(), dim=0, descending=True, stable=True),
         lambda: [randn(6, 40) * 2], targets=["torch.sort"]),
    Case("argsort_stable_ties", lambda x: x.round().argsort(dim=-1, stable=True), lambda: [randn(5, 60) * 2],
         targets=[T + "argsort"]),
    Case("sort_stable_5000_ties", lambda x: x.sort(stable=True, descending=True), lambda: [torch.randint(0, 90, (2, 5000))],
         targets=[T + "sort"]),
]
