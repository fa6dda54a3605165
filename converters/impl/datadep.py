"""Data-dependent shape builders (see :mod:`converters.datadep`): NonZero coordinates, their rows,
gathers by coordinates, and the index tensors of a traced boolean mask."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from . import elementwise as E
from . import shape as S
from . import sizes as Y

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


def nonzero_coords(ctx: ConversionContext, x: Any, traced: torch.Tensor) -> Any:
    """The ``[rank, N]`` INT64 coordinates of ``x``'s non-zero elements (``traced``: the torch tensor,
    whose traced count names ``N``). A 0-D ``x`` is taken as shape ``[1]`` (torch gives ``[N, 0]``:
    the converters refuse it)."""
    it = ctx.itensor(x) if isinstance(x, torch.Tensor) else x
    hit = ctx.symbolic.shared(("nonzero", id(it)), it) if ctx.symbolic is not None else None
    if hit is not None:  # one NonZero per mask: x[keep] and y[keep] have one count
        return hit
    src = it
    if traced.dtype != torch.bool:  # NOTE: NonZero takes no INT64/UINT8 input; x != 0 keeps NaN non-zero
        it = E.compare(ctx, it, 0, "ne")
    layer = ctx.network.add_non_zero(it)
    if hasattr(layer, "indices_type"):  # TensorRT 10.14+; 10.13's NonZero gives INT32 indices
        layer.indices_type = ctx.trt.int64
    out = ctx.cast(layer.get_output(0), torch.int64)
    n = int((traced != 0).sum())
    numel: Any = 1
    for d in Y.network_sizes(ctx, src):
        numel = numel * d
    # NOTE: at most the input's numel over its whole range (not the traced one: a dynamic batch grows it)
    ctx.data_dependent(out, (traced.dim(), n), f"nonzero count ({traced.dim()}-D input)", hi=Y.bounds(numel)[1])
    ctx.symbolic.share(("nonzero", id(src)), src, out)  # type: ignore[union-attr]  # data_dependent made it
    return out


def rows(ctx: ConversionContext, coords: Any, rank: int) -> list[Any]:
    """The coordinate rows of ``coords`` ``[rank, N]`` as 1-D ``[N]`` tensors."""
    n = Y.network_sizes(ctx, coords)[1]
    out = [S.reshape(ctx, S.slice_(ctx, coords, 0, r, r + 1), [n]) for r in range(rank)]
    for it in out:
        ctx.known_sizes(it, [n], [int.__int__(n)] if Y.is_sym(n) else [n])
    return out


def gather_coords(ctx: ConversionContext, it: Any, coords: Any, k: int) -> Any:
    """``it[c_0, .., c_{k-1}]`` for the rows of ``coords`` ``[k, N]``: shape ``[N, *it.shape[k:]]``."""
    layer = ctx.network.add_gather_v2(it, S.transpose(ctx, coords, 0, 1), ctx.trt.GatherMode.ND)
    return layer.get_output(0)


def mask_index(ctx: ConversionContext, mask: torch.Tensor) -> list[torch.Tensor]:
    """The index tensors a traced boolean ``mask`` stands for in ``x[mask]`` (torch: ``mask.nonzero(
    as_tuple=True)``), as traced torch tensors mapped to NonZero rows, for the advanced-indexing
    builders (:func:`converters.impl.indexing.getitem`)."""
    traced = mask.nonzero(as_tuple=True)
    coords = nonzero_coords(ctx, mask, mask)
    for t, it in zip(traced, rows(ctx, coords, mask.dim()), strict=True):
        ctx.set_itensor(t, it)
    return list(traced)
