"""Accuracy measures shared by the tools (and the CLI's convert report)."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_flatten


def max_rel_err(got: Any, ref: Any) -> float:
    """The largest relative error over the floating tensors of two matching output trees: for each
    tensor, max |got - ref| divided by max |ref| (at least 1e-12); 0.0 when there are none."""
    errs = []
    for g, r in zip(tree_flatten(got)[0], tree_flatten(ref)[0], strict=True):
        if isinstance(r, torch.Tensor) and r.dtype.is_floating_point:
            scale = r.abs().max().clamp_min(1e-12)
            errs.append(float((g.to(r.device).float() - r.float()).abs().max() / scale))
    return max(errs, default=0.0)


__all__ = ["max_rel_err"]
