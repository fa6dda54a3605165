"""Attention: F.scaled_dot_product_attention, nn.MultiheadAttention, F.multi_head_attention_forward,
torch's fused inference ops ``_native_multi_head_attention`` and ``_transformer_encoder_layer_fwd``;
similarity and distances: cosine_similarity, pairwise_distance, cdist."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from torch2trt_lite.registry import Call, converter

from .impl import attention as att
from .impl import sizes as Y
from .impl.linear import linear
from .impl.nn_common import const, ew, float_dtype, gather, is_traced, reshape, unary
from .impl.normalization import layer_norm

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


def _all_masked(mask: torch.Tensor | None) -> torch.Tensor | None:
    if mask is None:
        return None
    return torch.ones_like(mask) if mask.dtype == torch.bool else torch.full_like(mask, float("-inf"))


def _eager_masked_rows_nan(m: torch.nn.MultiheadAttention, a: dict[str, Any]) -> bool | None:
    """What eager gives for a query row whose keys are all masked: NaN (torch's fused inference path,
    and wherever it returns weights) or 0 (its sdpa path); which path torch takes depends on the
    module, the arguments and the grad mode, so the module is run once here with every key masked
    (None: no mask, no row can be all masked). Converters run with the tracer passing calls through."""
    if a["key_padding_mask"] is None and a["attn_mask"] is None:
        return None
    with torch.no_grad():
        out = m(a["query"], a["key"], a["value"], key_padding_mask=_all_masked(a["key_padding_mask"]),
                need_weights=bool(a["need_weights"]), attn_mask=_all_masked(a["attn_mask"]),
                average_attn_weights=bool(a["average_attn_weights"]), is_causal=bool(a["is_causal"]))[0]
    return bool(out.isnan().any())


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
        self_attention=q is k and k is v, masked_rows_nan=_eager_masked_rows_nan(m, a),
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
    return call.named(_MHAF, dict.fromkeys(_MHAF) | _MHAF_DEFAULTS)


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


# ------------------------------------------- torch's fused inference ops (fast paths, in dynamo's graphs)
_NMHA = ("query", "key", "value", "embed_dim", "num_head", "qkv_weight", "qkv_bias", "proj_weight", "proj_bias",
         "mask", "need_weights", "average_attn_weights", "mask_type")
_NMHA_DEFAULTS: dict[str, Any] = {"mask": None, "need_weights": True, "average_attn_weights": True,
                                  "mask_type": None}
# mask_type -> the mask's rank: 0 an attention mask [L, S], 1 a key padding mask [N, S], 2 (and None)
# a merged mask [N, H, L, S] (nn.MultiheadAttention.merge_masks)
_MASK_RANKS = {0: 2, 1: 2, 2: 4, None: 4}
_TEL = ("src", "embed_dim", "num_heads", "qkv_weight", "qkv_bias", "proj_weight", "proj_bias", "use_gelu",
        "norm_first", "eps", "norm_weight_1", "norm_bias_1", "norm_weight_2", "norm_bias_2", "ffn_weight_1",
        "ffn_bias_1", "ffn_weight_2", "ffn_bias_2", "mask", "mask_type")
_TEL_WEIGHTS = tuple(n for n in _TEL if "weight" in n or "bias" in n)


def _check_fused(a: dict[str, Any], tensors: tuple[str, ...], weights: tuple[str, ...]) -> str | None:
    for n in tensors:
        t = a[n]
        if getattr(t, "is_nested", False):
            return (f"{n} is a nested tensor (torch's fast path for padded sequences, e.g. nn.TransformerEncoder "
                    "with src_key_padding_mask): not supported; pass enable_nested_tensor=False to the encoder")
        if t.dim() != 3 or not float_dtype(t.dtype):
            return f"{n} must be a batched floating-point [N, L, E] tensor, got {t.dim()}-D {t.dtype}"
    traced = [n for n in weights if is_traced(a[n])]
    if traced:
        return f"{', '.join(traced)} computed from the network inputs: weights must be constants for TensorRT"
    mask, mask_type = a["mask"], a["mask_type"]
    if mask is not None and (mask_type not in _MASK_RANKS or mask.dim() != _MASK_RANKS[mask_type]):
        return (f"a {mask.dim()}-D mask with mask_type={mask_type}: torch takes a [L, S] mask (type 0), an [N, S] "
                "key padding mask (type 1) or an [N, H, L, S] mask (type 2)")
    return None


def _fused_mha(ctx: ConversionContext, a: dict[str, Any], x: tuple[Any, Any, Any], heads: int, need_weights: bool,
               average: bool, dtype: torch.dtype) -> tuple[Any, Any | None]:
    """torch's ``_native_multi_head_attention`` on batch-first network tensors: its mask, of any dtype,
    masks where nonzero (torch converts it to bool); a query row whose keys are all masked is NaN, as
    in torch (the decomposed attention; the fused IAttention would give 0 there)."""
    mhaf = dict.fromkeys(_MHAF) | {
        "embed_dim_to_check": a["embed_dim"], "num_heads": heads, "use_separate_proj_weight": False,
        "in_proj_weight": a["qkv_weight"], "in_proj_bias": a["qkv_bias"], "out_proj_weight": a["proj_weight"],
        "out_proj_bias": a["proj_bias"], "add_zero_attn": False}
    mod = _FunctionalMHA(ctx, mhaf, dtype)
    mask, kpm = a["mask"], None
    if mask is not None:
        it = ctx.itensor(mask)
        if mask.dtype != torch.bool:
            it = unary(ctx, ew(ctx, it, const(ctx, 0, mask.dtype, mask.dim()), "EQUAL"), "NOT")
        mask, kpm = (None, it) if a["mask_type"] == 1 else (it, None)
    q, k, v = x
    return att.multi_head_attention(ctx, mod, q, k, v, kpm, mask, need_weights or a["mask"] is not None, average,
                                    True, False, dtype, self_attention=q is k and k is v)


@converter(torch._native_multi_head_attention,
           check=lambda call: _check_fused(call.named(_NMHA, _NMHA_DEFAULTS), ("query", "key", "value"),
                                           ("qkv_weight", "qkv_bias", "proj_weight", "proj_bias")))
def convert_native_multi_head_attention(ctx: ConversionContext, call: Call) -> Any:
    """nn.MultiheadAttention's fast path (eval, batch_first, self-attention): (output, the attention
    weights averaged over heads or per head, or None without ``need_weights``)."""
    a = call.named(_NMHA, _NMHA_DEFAULTS)
    dt = call.output[0].dtype
    q = ctx.itensor(a["query"], dt)
    same = a["query"] is a["key"] and a["key"] is a["value"]
    x = (q, q, q) if same else (q, ctx.itensor(a["key"], dt), ctx.itensor(a["value"], dt))
    need = bool(a["need_weights"])
    out, weights = _fused_mha(ctx, a, x, int(a["num_head"]), need, bool(a["average_attn_weights"]), dt)
    return out, (weights if need else None)


@converter(torch._transformer_encoder_layer_fwd,
           check=lambda call: _check_fused(call.named(_TEL, {"mask": None, "mask_type": None}), ("src",),
                                           _TEL_WEIGHTS))
def convert_transformer_encoder_layer_fwd(ctx: ConversionContext, call: Call) -> Any:
    """nn.TransformerEncoderLayer's fast path (eval, batch_first): self-attention, residual and layer
    norm (before each block with ``norm_first``, else after), the ReLU / exact GELU feed-forward."""
    a = call.named(_TEL, {"mask": None, "mask_type": None})
    dt = call.output.dtype
    eps = float(a["eps"])

    def norm(it: Any, i: int) -> Any:
        return layer_norm(ctx, it, 1, a[f"norm_weight_{i}"], a[f"norm_bias_{i}"], eps, dt)

    def w(name: str) -> Any:
        return const(ctx, a[name].detach(), dt)

    src = ctx.itensor(a["src"], dt)
    x = norm(src, 1) if a["norm_first"] else src
    x = ew(ctx, _fused_mha(ctx, a, (x, x, x), int(a["num_heads"]), False, True, dt)[0], src, "SUM")
    if not a["norm_first"]:
        x = norm(x, 1)
    residual = x
    x = norm(x, 2) if a["norm_first"] else x
    hidden = linear(ctx, x, w("ffn_weight_1"), w("ffn_bias_1"))
    act = ctx.trt.ActivationType.GELU_ERF if a["use_gelu"] else ctx.trt.ActivationType.RELU
    hidden = ctx.network.add_activation(hidden, act).get_output(0)
    x = ew(ctx, linear(ctx, hidden, w("ffn_weight_2"), w("ffn_bias_2")), residual, "SUM")
    return x if a["norm_first"] else norm(x, 2)


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
