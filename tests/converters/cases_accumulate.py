"""Harness cases: index_add (mixture-of-experts style row accumulation) and histc (counts per bin)."""

from __future__ import annotations

import torch

from tests.converters.harness import Case, randn

T = "torch.Tensor."


def rows_and_index() -> list[torch.Tensor]:
    # 5 source rows into 4 rows, row 1 twice, row 3 never: repeated indices must add up
    return [randn(4, 3), randn(5, 3, seed=1), torch.tensor([1, 0, 1, 2, 0])]


def cols_and_index() -> list[torch.Tensor]:
    return [randn(2, 4, 3), randn(2, 4, 2, seed=1), torch.tensor([2, 0])]


def ints_and_index() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randint(-5, 6, (4, 3), generator=g), torch.randint(-5, 6, (3, 3), generator=g), torch.tensor([3, 3, 0])]


def spread() -> list[torch.Tensor]:
    return [randn(200) * 2]


def expert_ids() -> list[torch.Tensor]:
    # transformers' MoE: histc of the chosen experts' ids (as floats), bins = experts, min 0, max experts - 1
    g = torch.Generator().manual_seed(0)
    return [torch.randint(0, 8, (6, 2), generator=g).float()]


def experts() -> list[torch.Tensor]:
    # transformers' grouped MoE: tokens sorted by expert, one [K, N] matrix per expert
    return [randn(16, 16), randn(3, 16, 8, seed=1)]


def _grouped(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # cumulative row offsets, the last one the token count (a size: it follows a dynamic batch)
    offs = torch.cat([torch.tensor([4, 9], dtype=torch.int32), torch.full((1,), a.size(0), dtype=torch.int32)])
    return torch._grouped_mm(a, b, offs=offs)


def routed() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.sort(torch.randint(0, 4, (12,), generator=g)).values
    return [randn(12, 8), randn(4, 8, 4, seed=1), ids]


def _routed_mm(x: torch.Tensor, w: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    # the offsets computed in the model: histc of the expert ids, cumulated (the last is the row count)
    offs = torch.histc(ids.float(), bins=4, min=0, max=3).cumsum(0).to(torch.int32)
    return torch._grouped_mm(x, w, offs=offs)


CASES = [
    Case("index_add_rows", lambda x, s, i: x.index_add(0, i, s), rows_and_index, targets=[T + "index_add"]),
    Case("index_add_alpha", lambda x, s, i: torch.index_add(x, 0, i, s, alpha=0.5), rows_and_index,
         targets=["torch.index_add"]),
    Case("index_add_dim1", lambda x, s, i: x.index_add(-1, i, s), cols_and_index, targets=[T + "index_add"]),
    Case("index_add_inplace", lambda x, s, i: x.clone().index_add_(0, i, s) * 2, rows_and_index,
         targets=[T + "index_add_"]),
    Case("index_add_ints", lambda x, s, i: x.index_add(0, i, s), ints_and_index, targets=[T + "index_add"]),
    # NOTE: other inputs of another distribution (rolling would keep the counts: a histogram ignores order)
    Case("histc_range", lambda x: torch.histc(x, bins=10, min=-3, max=3), spread, targets=["torch.histc"],
         others=lambda xs: [xs[0] * 1.3]),
    Case("histc_data_range", lambda x: x.histc(bins=7), spread, targets=[T + "histc"],
         others=lambda xs: [xs[0] ** 2]),
    Case("histc_moe_experts", lambda x: torch.histc(x, bins=8, min=0, max=7), expert_ids, targets=["torch.histc"],
         others=lambda xs: [(xs[0] + 3) % 8]),
    Case("grouped_mm", _grouped, experts, rtol=1e-5, atol=1e-4,
         targets=["torch._grouped_mm"]),
    Case("grouped_mm_routed", _routed_mm, routed, rtol=1e-5, atol=1e-4, targets=["torch._grouped_mm"]),
    Case("grouped_mm_functional", lambda a, b: torch.nn.functional.grouped_mm(
        a, b, offs=torch.cat([torch.tensor([5], dtype=torch.int32), torch.full((1,), a.size(0), dtype=torch.int32)])),
        lambda: [randn(16, 8), randn(2, 8, 4, seed=2)], rtol=1e-5, atol=1e-4, targets=["torch.nn.functional.grouped_mm"]),
]
