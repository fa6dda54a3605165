"""Harness cases: embedding and embedding_bag."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.converters.harness import Case, randn

W = randn(10, 4, seed=1)
OFFSETS = torch.tensor([0, 3, 3, 6])


def _ids(*shape: int, high: int = 10, dtype: torch.dtype = torch.int64, seed: int = 0):  # type: ignore[no-untyped-def]
    return lambda: [torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed)).to(dtype)]


def _bag(**kw):  # type: ignore[no-untyped-def]
    def make() -> nn.Module:
        torch.manual_seed(0)
        return nn.EmbeddingBag(10, 4, **kw)

    return make


class _BagWithOffsets(nn.Module):
    def __init__(self, bag: nn.EmbeddingBag, offsets: torch.Tensor, weighted: bool = False) -> None:
        super().__init__()
        self.bag, self.weighted = bag, weighted
        self.register_buffer("offsets", offsets)

    def forward(self, ids: torch.Tensor, *w: torch.Tensor) -> torch.Tensor:
        return self.bag(ids, self.offsets, per_sample_weights=w[0] if w else None)  # type: ignore[no-any-return]


CASES = [
    Case("embedding", lambda i: F.embedding(i, W), _ids(2, 5), targets=["torch.nn.functional.embedding"]),
    Case("embedding_int32_ids", lambda i: F.embedding(i, W), _ids(7, dtype=torch.int32)),
    Case("embedding_module_padding_idx", lambda: nn.Embedding(10, 3, padding_idx=0), _ids(3, 4), is_module=True),
    Case("embedding_module_3d_ids", lambda: nn.Embedding(10, 3), _ids(2, 3, 2), is_module=True),
    Case("embedding_bag_2d_mean", lambda i: F.embedding_bag(i, W), _ids(3, 4),
         targets=["torch.nn.functional.embedding_bag"]),
    Case("embedding_bag_2d_sum_module", _bag(mode="sum"), _ids(3, 4), is_module=True),
    Case("embedding_bag_2d_max_module", _bag(mode="max"), _ids(3, 4), is_module=True),
    Case("embedding_bag_2d_padding_mean", _bag(mode="mean", padding_idx=2), lambda: [torch.tensor(
        [[2, 1, 2, 5], [2, 2, 2, 2], [0, 9, 3, 2]])], is_module=True),
    Case("embedding_bag_offsets_sum", lambda: _BagWithOffsets(_bag(mode="sum")(), OFFSETS), _ids(8),
         is_module=True),
    Case("embedding_bag_offsets_mean_empty_bag", lambda: _BagWithOffsets(_bag(mode="mean")(), OFFSETS), _ids(8),
         is_module=True),
    Case("embedding_bag_offsets_max", lambda: _BagWithOffsets(_bag(mode="max")(), torch.tensor([0, 2, 5])),
         _ids(8), is_module=True),
    Case("embedding_bag_offsets_include_last", lambda: _BagWithOffsets(_bag(mode="sum", include_last_offset=True)(),
                                                                       torch.tensor([0, 2, 5, 8])),
         _ids(8), is_module=True),
    Case("embedding_bag_per_sample_weights", lambda: _BagWithOffsets(_bag(mode="sum")(), OFFSETS, True),
         lambda: [*_ids(8)(), randn(8, seed=3)], is_module=True),
    Case("embedding_bag_offsets_padding_mean", lambda: _BagWithOffsets(_bag(mode="mean", padding_idx=1)(), OFFSETS),
         lambda: [torch.tensor([1, 1, 4, 2, 1, 7, 1, 1])], is_module=True),
]


class _BagTracedOffsets(nn.Module):
    """Offsets as an input (recommendation models take them from the batch)."""

    def __init__(self, **kw: object) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.bag = nn.EmbeddingBag(10, 4, **kw)  # type: ignore[arg-type]

    def forward(self, ids: torch.Tensor, offsets: torch.Tensor, *w: torch.Tensor) -> torch.Tensor:
        return self.bag(ids, offsets, per_sample_weights=w[0] if w else None)  # type: ignore[no-any-return]


def _ids_offsets(offsets: list[int], n: int = 9, seed: int = 5):  # type: ignore[no-untyped-def]
    return lambda: [torch.randint(0, 10, (n,), generator=torch.Generator().manual_seed(seed)), torch.tensor(offsets)]


_OTHER_OFFSETS = {"others": lambda xs: [xs[0].flip(0), torch.tensor([0, 1, 1, 5])[: len(xs[1])], *xs[2:]]}

CASES += [
    Case("embedding_bag_traced_offsets_sum", lambda: _BagTracedOffsets(mode="sum"), _ids_offsets([0, 3, 3, 7]),
         is_module=True, **_OTHER_OFFSETS),
    Case("embedding_bag_traced_offsets_mean", lambda: _BagTracedOffsets(mode="mean"), _ids_offsets([0, 2, 2, 6]),
         is_module=True, **_OTHER_OFFSETS),
    Case("embedding_bag_traced_offsets_max_empty", lambda: _BagTracedOffsets(mode="max"), _ids_offsets([0, 4, 4, 8]),
         is_module=True, **_OTHER_OFFSETS),
    Case("embedding_bag_traced_offsets_max_padding", lambda: _BagTracedOffsets(mode="max", padding_idx=2),
         lambda: [torch.tensor([2, 2, 5, 1, 2, 7, 2, 0, 3]), torch.tensor([0, 2, 5, 6])], is_module=True,
         **_OTHER_OFFSETS),
    Case("embedding_bag_traced_offsets_mean_padding", lambda: _BagTracedOffsets(mode="mean", padding_idx=2),
         lambda: [torch.tensor([2, 2, 5, 1, 2, 7, 2, 0, 3]), torch.tensor([0, 2, 5, 6])], is_module=True,
         **_OTHER_OFFSETS),
    Case("embedding_bag_traced_offsets_include_last", lambda: _BagTracedOffsets(mode="sum", include_last_offset=True),
         _ids_offsets([0, 3, 3, 9]), is_module=True,
         others=lambda xs: [xs[0].flip(0), torch.tensor([0, 1, 1, 9])]),
    Case("embedding_bag_traced_offsets_weights", lambda: _BagTracedOffsets(mode="sum"),
         lambda: [*_ids_offsets([0, 4, 6])(), randn(9, seed=6)], is_module=True, **_OTHER_OFFSETS),
    Case("embedding_bag_2d_max_padding", _bag(mode="max", padding_idx=2), lambda: [torch.tensor(
        [[2, 1, 2, 5], [2, 2, 2, 2], [0, 9, 3, 2]])], is_module=True),
    Case("embedding_bag_offsets_max_empty_bag", lambda: _BagWithOffsets(_bag(mode="max")(), OFFSETS), _ids(8),
         is_module=True),
    Case("embedding_bag_2d_sum_weights_half", lambda: _Bag2dWeighted(), lambda: [
        *_ids(3, 4)(), randn(3, 4, dtype=torch.float16, seed=7)], is_module=True, rtol=1e-2, atol=1e-2),
    Case("embedding_bag_include_last_short_refused", lambda: _BagWithOffsets(
        _bag(mode="sum", include_last_offset=True)(), torch.tensor([0, 2, 5])), _ids(8), is_module=True,
        xfail="include_last_offset with a last offset other than the number of indices"),
]


class _Bag2dWeighted(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.bag = nn.EmbeddingBag(10, 4, mode="sum").half()

    def forward(self, ids: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return self.bag(ids, per_sample_weights=w)  # type: ignore[no-any-return]
