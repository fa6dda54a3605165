"""Model weights that make a conversion test able to fail."""

from __future__ import annotations

import torch
from torch import nn


def nontrivial(model: nn.Module) -> None:
    """Random init leaves some weights constant, and a constant weight can hide a wrong conversion: a
    zero-initialized head (torchvision ViT) makes the output 0 whatever came before it, a zero BN gamma
    closing a residual branch (timm ``zero_init_last``) or a 1e-6 layer scale (ConvNeXt) mutes the
    branch, a zero bias tests nothing. Give every constant parameter random values of a sensible size,
    and batch norm the statistics of a trained one (random init has mean 0 / var 1: an identity)."""
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():
        for p in model.parameters():
            if not p.dtype.is_floating_point or p.numel() <= 1:
                continue
            flat = p.detach().flatten()
            if not bool((flat == flat[0]).all()):
                continue
            if p.dim() >= 2:  # weights, class tokens: fan-in scaled normal
                p.copy_(torch.randn(p.shape, generator=g) * (p[0].numel() ** -0.5))
            elif float(flat[0]) == 0.0:  # biases, zero gammas
                p.copy_(torch.rand(p.shape, generator=g) * 0.4 - 0.2)
            else:  # norm scales, layer scales
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
        for m in model.modules():
            mean, var = getattr(m, "running_mean", None), getattr(m, "running_var", None)
            if isinstance(mean, torch.Tensor) and isinstance(var, torch.Tensor):
                mean.copy_(torch.rand(mean.shape, generator=g) - 0.5)
                var.copy_(torch.rand(var.shape, generator=g) * 1.5 + 0.5)
