"""Attention: F.scaled_dot_product_attention, nn.MultiheadAttention, F.multi_head_attention_forward;
similarity and distances: cosine_similarity, pairwise_distance, cdist."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from torch2trt_lite.registry import Call, converter

from .impl import attention as att
from .impl import sizes as Y
from .impl.nn_common import float_dtype, gather, is_traced, reshape

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


# ------------------------------------------------------ F.multi_head_attention_forward
_MHAF = ("query", "key", "value", "embed_dim_to_check", "num_heads", "in_proj_weight", "in_proj_bias", "bias_k",
         "bias_v", "add_zero_attn", "dropout_p", "out_proj_weight", "out_proj_bias", "training", "key_padding_mask",
         "need_weights", "attn_mask", "use_separate_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight",
         "static_k", "static_v", "average_attn_weights", "is_causal")
_MHAF_DEFAULTS: dict[str, Any] = {"training": True, "need_weights": True, "use_separate_proj_weight": False,
                                  "average_attn_weights": True, "is_causal": False}
_MHAF_WEIGHTS = ("in_proj_weight", "in_proj_bias", "bias_k", "bias_v", "out_proj_weight", "out_proj_bias",
                 "q_proj_weight", "k_proj_weight", "v_proj_weight")


def _mhaf_args(call: Call) -> dict[str, Any]:
    return {n: call.arg(i, n, _MHAF_DEFAULTS.get(n)) for i, n in enumerate(_MHAF)}


def _check_mhaf(call: Call) -> str | None:
    a = _mhaf_args(call)
    if not float_dtype(a["query"].dtype):
        return "query must be floating point"
    if a["training"] and float(a["dropout_p"]) > 0:
        return "attention dropout with training=True is random; pass training=False (or dropout_p=0)"
    traced = [n for n in _MHAF_WEIGHTS if is_traced(a[n])]
    if traced:
        return (f"{', '.join(traced)} computed from the network inputs: projection weights must be constants "
                "(TensorRT needs constant weights); masks, static_k and static_v may be network tensors")
    return None


class _Projection:
    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        self.weight, self.bias = weight, bias


class _FunctionalMHA:
    """``nn.MultiheadAttention``'s attributes from ``F.multi_head_attention_forward``'s arguments, for
    ``impl.attention.multi_head_attention`` (static_k / static_v as network tensors)."""

    def __init__(self, ctx: ConversionContext, a: dict[str, Any], dtype: torch.dtype) -> None:
        self.embed_dim, self.num_heads = int(a["embed_dim_to_check"]), int(a["num_heads"])
        self._qkv_same_embed_dim = not a["use_separate_proj_weight"]
        self.in_proj_weight, self.in_proj_bias = a["in_proj_weight"], a["in_proj_bias"]
        self.q_proj_weight, self.k_proj_weight, self.v_proj_weight = (a[n] for n in ("q_proj_weight", "k_proj_weight",
                                                                                     "v_proj_weight"))
        self.out_proj = _Projection(a["out_proj_weight"], a["out_proj_bias"])
        self.bias_k, self.bias_v, self.add_zero_attn = a["bias_k"], a["bias_v"], bool(a["add_zero_attn"])
        self.static_k, self.static_v = (None if a[n] is None else ctx.itensor(a[n], dtype) for n in ("static_k",
                                                                                                   "static_v"))
        self.mask_covers_extra_keys = False  # an attn_mask made here for is_causal spans bias_k / zero keys


@converter(F.multi_head_attention_forward, check=_check_mhaf)
def convert_multi_head_attention_forward(ctx: ConversionContext, call: Call) -> Any:
    """The functional form that nn.MultiheadAttention calls, called directly (models that pass their own
    position bias as ``attn_mask``): every argument; time-major [L, N, E] or unbatched [L, E] inputs.
    ``is_causal`` is torch's hint: where torch drops ``attn_mask`` for a causal mask (no key padding
    mask, no weights asked for), so does this."""
    a = _mhaf_args(call)
    dt = call.output[0].dtype
    m = _FunctionalMHA(ctx, a, dt)
    q, k, v = (ctx.itensor(a[n], dt) for n in ("query", "key", "value"))
    unbatched = a["query"].dim() == 2
    attn_mask = a["attn_mask"]
    mask = _mask(ctx, attn_mask, dt)
    if a["is_causal"] and a["key_padding_mask"] is None and not a["need_weights"]:
        length = Y.sizes_of(ctx, a["query"])[0]
        s = Y.sizes_of(ctx, a["static_k"])[1] if a["static_k"] is not None else Y.sizes_of(ctx, a["key"])[0]
        extra = int(a["bias_k"] is not None and a["static_k"] is None) + int(bool(a["add_zero_attn"]))
        # NOTE: torch's causal mask (True: masked, above the diagonal) spans the appended key positions
        # too (bias_k, add_zero_attn); sequence lengths may be dynamic
        mask = att.causal_mask(ctx, length, s + extra)
        m.mask_covers_extra_keys = True
    out, weights = att.multi_head_attention(
        ctx, m, q, k, v, _mask(ctx, a["key_padding_mask"], dt), mask, bool(a["need_weights"]),
        bool(a["average_attn_weights"]), False, unbatched, dt,
        self_attention=q is k and k is v and m._qkv_same_embed_dim and m.static_k is None,
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
