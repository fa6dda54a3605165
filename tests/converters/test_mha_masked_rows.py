"""nn.MultiheadAttention where every key of a query row is masked: eager gives NaN on some of torch's
paths (its fused inference path, and wherever it returns the weights) and 0 on others (its sdpa
path), depending on the arguments; the engine gives what eager gives (converters/attention.py runs
the module once with every key masked to learn which). Traced with partial masks, run with rows
fully masked."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

import torch2trt_lite

L = 5


class Attend(nn.Module):
    def __init__(self, batch_first: bool, need_weights: bool, kind: str) -> None:
        super().__init__()
        self.m = nn.MultiheadAttention(16, 2, batch_first=batch_first)
        self.need_weights, self.kind = need_weights, kind

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        kw = {"key_padding_mask": mask} if self.kind == "kpm" else {"attn_mask": mask}
        out: torch.Tensor = self.m(x, x, x, need_weights=self.need_weights, **kw)[0]
        return out


def _mask(kind: str, unbatched: bool, full: bool) -> torch.Tensor:
    if kind == "kpm":
        m = torch.zeros((L,) if unbatched else (2, L), dtype=torch.bool)
        m[..., -1] = True
        if full:
            m[..., :] = True if unbatched else False
            if not unbatched:
                m[1, :] = True
        return m
    m = torch.zeros(L, L, dtype=torch.bool)
    m[:, -1] = True
    if full:
        m[1, :] = True
    return m if kind == "attn_bool" else torch.zeros(L, L).masked_fill(m, float("-inf"))


@pytest.mark.parametrize("batch_first,need_weights,unbatched,kind", list(itertools.product(
    [True, False], [False, True], [False, True], ["kpm", "attn_bool", "attn_float"])))
def test_fully_masked_rows_match_eager(batch_first: bool, need_weights: bool, unbatched: bool, kind: str) -> None:
    torch.manual_seed(0)
    model = Attend(batch_first, need_weights, kind).eval()
    shape = (L, 16) if unbatched else ((2, L, 16) if batch_first else (L, 2, 16))
    x = torch.randn(*shape)
    with torch.no_grad():
        trt = torch2trt_lite.convert(model, [x, _mask(kind, unbatched, full=False)], backend="sim")
        for full in (False, True):
            mask = _mask(kind, unbatched, full)
            ref = model(x, mask)
            torch.testing.assert_close(trt(x, mask), ref, rtol=1e-5, atol=1e-5, equal_nan=True)
