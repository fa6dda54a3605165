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
    return call.named(_BAG, dict(zip(_BAG, _BAG_DEFAULTS, strict=True)))


def _check_embedding_bag(call: Call) -> str | None:
    a = _bag_args(call)
    if a["input"].dtype not in _INDEX_DTYPES:
        return f"indices must be int32 or int64, got {a['input'].dtype}"
    if a["max_norm"] is not None:
        return "max_norm renormalizes the weight rows that the indices select (data-dependent); not supported"
    if a["input"].dim() == 1 and a["offsets"] is None:
        return "1D indices need offsets"
    offsets = a["offsets"]
    if (a["input"].dim() == 1 and a["include_last_offset"] and not is_traced(offsets)
            and int(offsets[-1]) != a["input"].numel()):
        return (f"include_last_offset with a last offset ({int(offsets[-1])}) other than the number of indices "
                f"({a['input'].numel()}): torch's documentation requires them equal, and torch's own results differ "
                "between modes there (sum stops at the last offset, mean and max read to the end); pass a last "
                "offset equal to len(indices)")
    return None


def _masked(a: dict[str, Any]) -> bool:
    """Take the membership-mask builder: offsets the inputs set, or max bags that may be empty or padded."""
    idx, offsets = a["input"], a["offsets"]
    if idx.dim() != 1:
        return a["mode"] == "max" and a["padding_idx"] is not None
    if is_traced(offsets):
        return True
    if a["mode"] != "max":
        return False
    offs = offsets.tolist()
    bounds = offs + ([] if a["include_last_offset"] else [idx.numel()])
    return a["padding_idx"] is not None or any(e <= s for s, e in zip(bounds[:-1], bounds[1:], strict=False))


@converter(F.embedding_bag, check=_check_embedding_bag)
def convert_embedding_bag(ctx: ConversionContext, call: Call) -> Any:
    """Every mode (sum, mean, max), 2D bags and 1D indices with offsets (constant, or network tensors:
    bags whose bounds the inputs set), include_last_offset, per_sample_weights, padding_idx, empty
    bags (0, as torch). With include_last_offset, torch's documentation requires the last offset to
    equal the number of indices; network-tensor offsets are taken to keep it (the last bag ends at
    the last offset, as torch's sum does; torch's mean and max read to the end when it does not)."""
    a = _bag_args(call)
    dt = call.output[0].dtype if isinstance(call.output, tuple) else call.output.dtype
    idx = a["input"]
    psw = a["per_sample_weights"]
    pad = a["padding_idx"]
    if pad is not None and pad < 0:
        pad += a["weight"].shape[0]
    weight, psw_it = ctx.itensor(a["weight"], dt), ctx.itensor(psw, dt) if psw is not None else None
    if _masked(a):
        offsets = ctx.itensor(a["offsets"]) if idx.dim() == 1 else None
        return emb.embedding_bag_masked(ctx, weight, ctx.itensor(idx), offsets, bool(a["include_last_offset"]),
                                        a["mode"], psw_it, pad, dt)
    offsets = None
    if idx.dim() == 1:
        offsets = [int(o) for o in a["offsets"].tolist()]
        if a["include_last_offset"]:
            offsets = offsets[:-1]
    return emb.embedding_bag(ctx, weight, ctx.itensor(idx), offsets, idx.numel(), a["mode"], psw_it, pad, dt)
