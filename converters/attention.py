"""Attention: F.scaled_dot_product_attention, nn.MultiheadAttention; similarity and distances:
cosine_similarity, pairwise_distance, cdist."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from torch2trt_lite.registry import Call, converter

from .impl import attention as att
from .impl import sizes as Y
from .impl.nn_common import float_dtype, gather, reshape

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


def _floats(*names: tuple[int, str]) -> Any:
    def check(call: Call) -> str | None:
        for i, n in names:
            t = call.arg(i, n, None)
            if isinstance(t, torch.Tensor) and not float_dtype(t.dtype):
                return f"{n} must be a floating-point tensor, got {t.dtype}"
        return None

    return check


def _mask(ctx: ConversionContext, mask: Any, dtype: torch.dtype) -> Any:
    if mask is None:
        return None
    return ctx.itensor(mask) if mask.dtype == torch.bool else ctx.itensor(mask, dtype)


# ------------------------------------------------------------------------------------ SDPA
def _check_sdpa(call: Call) -> str | None:
    if float(call.arg(4, "dropout_p", 0.0)) > 0:
        return "dropout_p > 0 is random (scaled_dot_product_attention applies it even in eval mode)"
    return _floats((0, "query"), (1, "key"), (2, "value"))(call)


@converter(F.scaled_dot_product_attention, check=_check_sdpa)
def convert_sdpa(ctx: ConversionContext, call: Call) -> Any:
    # NOTE: fp16/bf16 attention runs in fp32 like torch's math path: q @ k^T overflows half from |q.k| ~ 65504
    dt = torch.float32 if call.output.dtype in (torch.float16, torch.bfloat16) else call.output.dtype
    q, k, v = (ctx.itensor(call.arg(i, n), dt) for i, n in ((0, "query"), (1, "key"), (2, "value")))
    # NOTE: one IAttention layer where the backend has it (TensorRT 10.16+, TensorRT-RTX) and it can
    # express the call, else matrix multiplies and a softmax (impl.attention.scaled_dot_product_attention)
    out = att.scaled_dot_product_attention(ctx, q, k, v, _mask(ctx, call.arg(3, "attn_mask", None), dt),
                                           bool(call.arg(5, "is_causal", False)), call.arg(6, "scale", None), dt,
                                           bool(call.kwargs.get("enable_gqa", False)))
    return ctx.cast(out, call.output.dtype)


# ------------------------------------------------------------------------ multi-head attention
def _mha_args(call: Call) -> dict[str, Any]:
    names = ("query", "key", "value", "key_padding_mask", "need_weights", "attn_mask", "average_attn_weights",
             "is_causal")
    defaults = (None, None, None, None, True, None, True, False)
    return {n: call.arg(i + 1, n, d) for i, (n, d) in enumerate(zip(names, defaults, strict=True))}


def _check_mha(call: Call) -> str | None:
    m = call.args[0]
    if m.bias_k is not None or m.add_zero_attn:
        return "add_bias_kv / add_zero_attn are not supported"
    a = _mha_args(call)
    if not float_dtype(a["query"].dtype):
        return "query must be floating point"
    if m.dropout > 0 and m.training:
        return "attention dropout in training mode is random; call model.eval()"
    return None


@converter(torch.nn.MultiheadAttention, check=_check_mha)
def convert_multihead_attention(ctx: ConversionContext, call: Call) -> Any:
    m: torch.nn.MultiheadAttention = call.args[0]
    a = _mha_args(call)
    out_t = call.output[0]
    dt = out_t.dtype
    q, k, v = (ctx.itensor(a[n], dt) for n in ("query", "key", "value"))
    unbatched = a["query"].dim() == 2
    out, weights = att.multi_head_attention(
        ctx, m, q, k, v, _mask(ctx, a["key_padding_mask"], dt), _mask(ctx, a["attn_mask"], dt),
        bool(a["need_weights"]), bool(a["average_attn_weights"]), bool(m.batch_first), unbatched, dt,
        self_attention=q is k and k is v,
    )
    return out, weights


# ---------------------------------------------------------------------------- distances
@converter(F.cosine_similarity, check=_floats((0, "x1"), (1, "x2")))
def convert_cosine_similarity(ctx: ConversionContext, call: Call) -> Any:
    dt = call.output.dtype
    return att.cosine_similarity(ctx, ctx.itensor(call.arg(0, "x1"), dt), ctx.itensor(call.arg(1, "x2"), dt),
                                 int(call.arg(2, "dim", 1)), float(call.arg(3, "eps", 1e-8)), dt)


@converter(F.pairwise_distance, check=_floats((0, "x1"), (1, "x2")))
def convert_pairwise_distance(ctx: ConversionContext, call: Call) -> Any:
    dt = call.output.dtype
    return att.pairwise_distance(ctx, ctx.itensor(call.arg(0, "x1"), dt), ctx.itensor(call.arg(1, "x2"), dt),
                                 float(call.arg(2, "p", 2.0)), float(call.arg(3, "eps", 1e-6)),
                                 bool(call.arg(4, "keepdim", False)), dt)


@converter(F.pdist, check=_floats((0, "input")))
def convert_pdist(ctx: ConversionContext, call: Call) -> Any:
    """Distances of the pairs i < j of the rows of [N, M], in row-major order: cdist of x with itself,
    then the upper triangle gathered by constant indices."""
    x = call.arg(0, "input")
    dt = call.output.dtype
    Y.refuse("torch.nn.functional.pdist", list(Y.sizes_of(ctx, x)[:1]),
             "its i < j pairs are gathered by indices made for the traced row count")
    n = int(x.shape[0])
    full = att.cdist(ctx, ctx.itensor(x, dt), ctx.itensor(x, dt), float(call.arg(1, "p", 2.0)), dt)
    upper = torch.triu_indices(n, n, offset=1)
    flat = (upper[0] * n + upper[1]).to(torch.int32)
    return gather(ctx, reshape(ctx, full, (n * n,)), flat, 0)


@converter(torch.cdist, check=_floats((0, "x1"), (1, "x2")))
def convert_cdist(ctx: ConversionContext, call: Call) -> Any:
    dt = call.output.dtype
    return att.cdist(ctx, ctx.itensor(call.arg(0, "x1"), dt), ctx.itensor(call.arg(1, "x2"), dt),
                     float(call.arg(2, "p", 2.0)), dt)
