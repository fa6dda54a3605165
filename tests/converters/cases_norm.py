"""Harness cases: layer/group/instance/RMS/local-response normalization and F.normalize."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.converters.harness import Case, randn


def _affine(m: nn.Module) -> nn.Module:
    """Non-trivial affine parameters (fresh modules have weight 1, bias 0)."""
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(torch.rand(p.shape, generator=g) + 0.5 if "weight" in name else torch.randn(p.shape, generator=g))
    return m


def _stats(m: nn.Module) -> nn.Module:
    g = torch.Generator().manual_seed(6)
    m = _affine(m)
    with torch.no_grad():
        m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g))
        m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
    return m


LN_W, LN_B = randn(6, seed=3) + 1, randn(6, seed=4)

CASES = [
    Case("layer_norm_module", lambda: _affine(nn.LayerNorm(6)), lambda: [randn(2, 3, 6)], is_module=True),
    Case("layer_norm_2d_shape", lambda: _affine(nn.LayerNorm((4, 6), eps=1e-3)), lambda: [randn(2, 3, 4, 6)],
         is_module=True),
    Case("layer_norm_no_affine", lambda x: F.layer_norm(x, (6,)), lambda: [randn(5, 6) * 3 + 1],
         targets=["torch.nn.functional.layer_norm"]),
    Case("layer_norm_weight_only", lambda x: F.layer_norm(x, [6], LN_W), lambda: [randn(2, 6)]),
    Case("layer_norm_traced_weight", lambda x, w: F.layer_norm(x, [6], w * 1.0, LN_B),
         lambda: [randn(2, 6), randn(6, seed=2)]),
    Case("group_norm_module", lambda: _affine(nn.GroupNorm(2, 6)), lambda: [randn(2, 6, 4, 5)], is_module=True),
    Case("group_norm_3d_input", lambda: _affine(nn.GroupNorm(3, 6)), lambda: [randn(2, 6, 7)], is_module=True),
    Case("group_norm_5d_affine", lambda: _affine(nn.GroupNorm(2, 4)), lambda: [randn(1, 4, 2, 3, 3)], is_module=True),
    Case("group_norm_one_group", lambda: _affine(nn.GroupNorm(1, 4)), lambda: [randn(2, 4, 3, 3)], is_module=True),
    Case("group_norm_per_channel", lambda: _affine(nn.GroupNorm(4, 4)), lambda: [randn(2, 4, 3, 3)], is_module=True),
    Case("group_norm_functional", lambda x: F.group_norm(x, 2, eps=1e-3), lambda: [randn(1, 4, 2, 3, 3)],
         targets=["torch.nn.functional.group_norm"]),
    Case("instance_norm_functional", lambda x: F.instance_norm(x), lambda: [randn(2, 3, 5, 5)],
         targets=["torch.nn.functional.instance_norm"]),
    Case("instance_norm1d_affine", lambda: _affine(nn.InstanceNorm1d(3, affine=True)), lambda: [randn(2, 3, 8)],
         is_module=True),
    Case("instance_norm2d_running", lambda: _stats(nn.InstanceNorm2d(3, affine=True, track_running_stats=True)),
         lambda: [randn(2, 3, 4, 4)], is_module=True),
    Case("instance_norm3d", lambda: nn.InstanceNorm3d(2), lambda: [randn(1, 2, 3, 4, 4)], is_module=True),
    Case("rms_norm_module", lambda: _affine(nn.RMSNorm(6)), lambda: [randn(2, 3, 6)], is_module=True),
    Case("rms_norm_functional_eps", lambda x: F.rms_norm(x, (3, 6), eps=1e-3), lambda: [randn(2, 3, 6)],
         targets=["torch.nn.functional.rms_norm"]),
    Case("local_response_norm", lambda x: F.local_response_norm(x, 3), lambda: [randn(2, 6, 4, 4)],
         targets=["torch.nn.functional.local_response_norm"]),
    Case("local_response_norm_module_3d", lambda: nn.LocalResponseNorm(5, alpha=0.1, beta=0.5, k=2.0),
         lambda: [randn(2, 7, 6)], is_module=True),
    Case("local_response_norm_even_size", lambda x: F.local_response_norm(x, 4, alpha=0.01), lambda: [randn(1, 6, 3, 3)]),
    Case("local_response_norm_5d", lambda x: F.local_response_norm(x, 2), lambda: [randn(1, 4, 2, 3, 3)]),
    # ILRNLayer needs 4 dims: 3D and 5D inputs run as [N, C, prod(spatial), 1]
    Case("local_response_norm_5d_odd", lambda x: F.local_response_norm(x, 3, alpha=0.2), lambda: [randn(2, 6, 2, 3, 3)]),
    Case("local_response_norm_3d_fn", lambda x: F.local_response_norm(x, 3, k=1.5), lambda: [randn(1, 5, 4)]),
    Case("normalize_default", lambda x: F.normalize(x), lambda: [randn(2, 5, 3)],
         targets=["torch.nn.functional.normalize"]),
    Case("normalize_p1_dim_last", lambda x: F.normalize(x, p=1.0, dim=-1), lambda: [randn(3, 4)]),
    Case("normalize_inf", lambda x: F.normalize(x, p=float("inf"), dim=0), lambda: [randn(3, 4)]),
    Case("normalize_p3", lambda x: F.normalize(x, p=3, dim=1), lambda: [randn(3, 4)], rtol=1e-4),
    Case("normalize_eps_zero_rows", lambda x: F.normalize(x * torch.tensor([[1.0], [0.0]]), dim=1),
         lambda: [randn(2, 4)]),
]
