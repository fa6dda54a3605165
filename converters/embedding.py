"""Embeddings: F.embedding (nn.Embedding) and F.embedding_bag (nn.EmbeddingBag)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from torch2trt_lite.registry import Call, converter

from .impl import embedding as emb
from .impl.nn_common import is_traced

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

_INDEX_DTYPES = (torch.int32, torch.int64)


def _check_embedding(call: Call) -> str | None:
    idx = call.arg(0, "input")
    if idx.dtype not in _INDEX_DTYPES:
        return f"indices must be int32 or int64, got {idx.dtype}"
    if call.arg(3, "max_norm", None) is not None:
        return "max_norm renormalizes the weight rows that the indices select (data-dependent); not supported"
    return None


@converter(F.embedding, check=_check_embedding)
def convert_embedding(ctx: ConversionContext, call: Call) -> Any:
    return emb.embedding(ctx, ctx.itensor(call.arg(1, "weight"), call.output.dtype), ctx.itensor(call.arg(0, "input")))


_BAG = ("input", "weight", "offsets", "max_norm", "norm_type", "scale_grad_by_freq", "mode", "sparse",
        "per_sample_weights", "include_last_offset", "padding_idx")
_BAG_DEFAULTS = (None, None, None, None, 2, False, "mean", False, None, False, None)


def _bag_args(call: Call) -> dict[str, Any]:
    return {n: call.arg(i, n, d) for i, (n, d) in enumerate(zip(_BAG, _BAG_DEFAULTS, strict=True))}


def _check_embedding_bag(call: Call) -> str | None:
    a = _bag_args(call)
    if a["input"].dtype not in _INDEX_DTYPES:
        return f"indices must be int32 or int64, got {a['input'].dtype}"
    if a["max_norm"] is not None:
        return "max_norm renormalizes the weight rows that the indices select (data-dependent); not supported"
    if a["offsets"] is not None and is_traced(a["offsets"]):
        return "offsets computed from the network inputs (variable bags) are not supported; pass constant offsets"
    if a["mode"] == "max" and a["padding_idx"] is not None:
        return "mode='max' with padding_idx is not supported"
    if a["mode"] == "max" and a["offsets"] is not None and a["input"].dim() == 1:
        offs = a["offsets"].tolist()
        bounds = offs + ([] if a["include_last_offset"] else [a["input"].numel()])
        if any(e <= s for s, e in zip(bounds[:-1], bounds[1:], strict=False)):
            return "mode='max' with empty bags is not supported"
    return None


@converter(F.embedding_bag, check=_check_embedding_bag)
def convert_embedding_bag(ctx: ConversionContext, call: Call) -> Any:
    a = _bag_args(call)
    dt = call.output[0].dtype if isinstance(call.output, tuple) else call.output.dtype
    idx = a["input"]
    offsets = None
    if idx.dim() == 1:
        offsets = [int(o) for o in a["offsets"].tolist()]
        if a["include_last_offset"]:
            offsets = offsets[:-1]
    psw = a["per_sample_weights"]
    pad = a["padding_idx"]
    if pad is not None and pad < 0:
        pad += a["weight"].shape[0]
    return emb.embedding_bag(
        ctx, ctx.itensor(a["weight"], dt), ctx.itensor(idx), offsets, idx.numel(), a["mode"],
        ctx.itensor(psw, dt) if psw is not None else None, pad, dt,
    )
