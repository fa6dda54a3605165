"""Attention and distance builders: scaled dot-product attention, multi-head attention, cosine
similarity, pairwise distance, cdist."""

from __future__ import annotations

import math
from typing import Any

import torch

from torch2trt_lite.context import ConversionContext

from .elementwise import unsqueeze_to
from .linear import linear
from .nn_common import (
    const,
    ew,
    gather,
    matmul,
    permute,
    rank,
    reduce,
    reshape,
    slice_axis,
    softmax,
    squeeze,
    unsqueeze,
)
from .normalization import vector_norm


def _select(ctx: ConversionContext, cond: Any, a: Any, b: Any) -> Any:
    n = max(rank(cond), rank(a), rank(b))
    cond, a, b = unsqueeze_to(ctx, cond, n), unsqueeze_to(ctx, a, n), unsqueeze_to(ctx, b, n)
    return ctx.network.add_select(cond, a, b).get_output(0)


def apply_mask(ctx: ConversionContext, scores: Any, mask: Any, keep_where_true: bool, dtype: torch.dtype) -> Any:
    """Add a float mask, or send masked positions of a bool mask to -inf (``keep_where_true``: True
    marks allowed positions, as in SDPA; False: True marks masked positions, as in nn.MultiheadAttention)."""
    if int(mask.dtype) != int(ctx.trt.DataType.BOOL):
        return ew(ctx, scores, mask, "SUM")
    neg = const(ctx, float("-inf"), dtype, rank(scores))
    if keep_where_true:
        return _select(ctx, mask, scores, neg)
    return _select(ctx, mask, neg, scores)


def zero_masked_rows(ctx: ConversionContext, attn: Any, scores: Any, dtype: torch.dtype) -> Any:
    """Attention weights with query rows whose scores are all masked (-inf) set to 0, as torch's
    scaled_dot_product_attention returns for them (a plain softmax gives NaN)."""
    r = rank(scores)
    dead = ew(ctx, reduce(ctx, scores, "MAX", [r - 1], True), const(ctx, float("-inf"), dtype, r), "EQUAL")
    return _select(ctx, dead, const(ctx, 0.0, dtype, r), attn)


def repeat_heads(ctx: ConversionContext, it: Any, heads: int) -> Any:
    """``repeat_interleave`` of dim -3 up to ``heads`` (grouped-query attention)."""
    have = tuple(it.shape)[-3]
    if have == heads:
        return it
    idx = torch.arange(heads, dtype=torch.int32) // (heads // have)
    return gather(ctx, it, idx, rank(it) - 3)


def sdpa(
    ctx: ConversionContext,
    q: Any,
    k: Any,
    v: Any,
    mask: Any | None,
    is_causal: bool,
    scale: float | None,
    dtype: torch.dtype,
    gqa: bool = False,
) -> tuple[Any, Any]:
    """``softmax(q @ k^T * scale + mask) @ v``; returns (output, attention weights)."""
    qs, ks = tuple(q.shape), tuple(k.shape)
    L, S, E = qs[-2], ks[-2], qs[-1]
    if gqa:
        k = repeat_heads(ctx, k, qs[-3])
        v = repeat_heads(ctx, v, qs[-3])
    sc = 1.0 / math.sqrt(E) if scale is None else float(scale)
    # NOTE: torch's reference scales q and k by sqrt(scale) each; one product is as accurate
    scores = matmul(ctx, q, k, transpose_b=True)
    scores = ew(ctx, scores, const(ctx, sc, dtype, rank(scores)), "PROD")
    if is_causal:
        causal = const(ctx, torch.ones(L, S, dtype=torch.bool).tril(), torch.bool)
        scores = apply_mask(ctx, scores, causal, True, dtype)
    if mask is not None:
        scores = apply_mask(ctx, scores, mask, True, dtype)
    attn = softmax(ctx, scores, -1)
    if mask is not None or is_causal:
        attn = zero_masked_rows(ctx, attn, scores, dtype)
    return matmul(ctx, attn, v), attn


def _heads(ctx: ConversionContext, it: Any, heads: int) -> Any:
    """[N, L, E] -> [N, H, L, E / H]: one shuffle (reshape, then transpose)."""
    n, length, e = tuple(it.shape)
    layer = ctx.network.add_shuffle(it)
    layer.reshape_dims = (n, length, heads, e // heads)
    layer.second_transpose = (0, 2, 1, 3)
    return layer.get_output(0)


def _merge_heads(ctx: ConversionContext, it: Any) -> Any:
    """[N, H, L, D] -> [N, L, H * D]: one shuffle (transpose, then reshape)."""
    n, h, length, d = tuple(it.shape)
    layer = ctx.network.add_shuffle(it)
    layer.first_transpose = (0, 2, 1, 3)
    layer.reshape_dims = (n, length, h * d)
    return layer.get_output(0)


def multi_head_attention(
    ctx: ConversionContext,
    m: torch.nn.MultiheadAttention,
    query: Any,
    key: Any,
    value: Any,
    key_padding_mask: Any | None,
    attn_mask: Any | None,
    need_weights: bool,
    average_weights: bool,
    batch_first: bool,
    unbatched: bool,
    dtype: torch.dtype,
    self_attention: bool = False,
) -> tuple[Any, Any | None]:
    """``nn.MultiheadAttention`` in inference; inputs as given (time-major unless ``batch_first``).
    ``self_attention``: query, key and value are one tensor (only ``query`` is read then)."""
    if self_attention:
        key = value = query = unsqueeze(ctx, query, [1]) if unbatched else query
        if unbatched:
            batch_first = False
        if not batch_first:
            key = value = query = permute(ctx, query, (1, 0, 2))
    else:
        if unbatched:
            query, key, value = (unsqueeze(ctx, t, [1]) for t in (query, key, value))
            batch_first = False
        if not batch_first:
            query, key, value = (permute(ctx, t, (1, 0, 2)) for t in (query, key, value))
    e, h = m.embed_dim, m.num_heads

    def w(t: torch.Tensor | None) -> Any:
        return None if t is None else const(ctx, t.detach(), dtype)

    # NOTE: the 1 / sqrt(head dim) score scale is folded into the query projection (weights and
    # bias), so no layer scales the [N, H, L, S] scores (exact for head dims 4^k, e.g. 64)
    sc = 1.0 / math.sqrt(e // h)
    b: torch.Tensor | None = m.in_proj_bias
    if b is not None:
        b = torch.cat([b.detach()[:e] * sc, b.detach()[e:]])
    if self_attention and m._qkv_same_embed_dim:
        # NOTE: one [N, L, 3E] projection with the packed in_proj weight, as torch computes it: one
        # GEMM (and one bias) instead of three, then three slices of it
        wp = m.in_proj_weight.detach()
        qkv = linear(ctx, query, w(torch.cat([wp[:e] * sc, wp[e:]])), w(b))
        q, k, v = (_heads(ctx, slice_axis(ctx, qkv, 2, i * e, e), h) for i in range(3))
    else:
        bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
        if m._qkv_same_embed_dim:
            wq, wk, wv = m.in_proj_weight[:e], m.in_proj_weight[e:2 * e], m.in_proj_weight[2 * e:]
        else:
            wq, wk, wv = m.q_proj_weight, m.k_proj_weight, m.v_proj_weight
        q = _heads(ctx, linear(ctx, query, w(wq.detach() * sc), w(bq)), h)
        k = _heads(ctx, linear(ctx, key, w(wk), w(bk)), h)
        v = _heads(ctx, linear(ctx, value, w(wv), w(bv)), h)
    n, _, length, _ = tuple(q.shape)
    s = tuple(k.shape)[2]
    scores = matmul(ctx, q, k, transpose_b=True)  # already scaled (above)
    if attn_mask is not None:
        if rank(attn_mask) == 3:  # [N * H, L, S]
            attn_mask = reshape(ctx, attn_mask, (n, h, length, s))
        scores = apply_mask(ctx, scores, attn_mask, False, dtype)
    if key_padding_mask is not None:
        kpm = key_padding_mask
        kpm = reshape(ctx, kpm, (n, 1, 1, s) if rank(kpm) == 2 else (1, 1, 1, s))
        scores = apply_mask(ctx, scores, kpm, False, dtype)
    # NOTE: a query row whose keys are all masked is NaN here, as in torch's fused inference path
    # (eval, batched); torch's unbatched / sdpa path gives 0 there instead: torch itself differs.
    attn = softmax(ctx, scores, -1)
    out = matmul(ctx, attn, v)  # [N, H, L, D]
    out = _merge_heads(ctx, out)
    out = linear(ctx, out, w(m.out_proj.weight), w(m.out_proj.bias))
    if not batch_first:
        out = permute(ctx, out, (1, 0, 2))
    if unbatched:
        out = squeeze(ctx, out, [1])
    weights = None
    if need_weights:
        weights = reduce(ctx, attn, "AVG", [1], keep_dims=False) if average_weights else attn
        if unbatched:
            weights = squeeze(ctx, weights, [0])
    return out, weights


# -------------------------------------------------------------------------------- distances
def cosine_similarity(ctx: ConversionContext, a: Any, b: Any, dim: int, eps: float, dtype: torch.dtype) -> Any:
    """torch's: each input divided by max(its 2-norm, eps), then the dot product over ``dim``."""
    n = max(rank(a), rank(b))
    a, b = unsqueeze_to(ctx, a, n), unsqueeze_to(ctx, b, n)
    e = const(ctx, eps, dtype, n)
    ka, kb = tuple(a.shape)[dim], tuple(b.shape)[dim]

    def norm(t: Any, own: int, other: int) -> Any:
        v = vector_norm(ctx, t, 2.0, [dim], True, dtype)
        if own == 1 and other > 1:  # NOTE: torch broadcasts first: a size-1 dim counts `other` times
            v = ew(ctx, v, const(ctx, math.sqrt(other), dtype, n), "PROD")
        return ew(ctx, v, e, "MAX")

    na, nb = norm(a, ka, kb), norm(b, kb, ka)
    prod = ew(ctx, ew(ctx, a, na, "DIV"), ew(ctx, b, nb, "DIV"), "PROD")
    return reduce(ctx, prod, "SUM", [dim], keep_dims=False)


def pairwise_distance(ctx: ConversionContext, a: Any, b: Any, p: float, eps: float, keepdim: bool,
                      dtype: torch.dtype) -> Any:
    """``||a - b + eps||_p`` over the last dim."""
    d = ew(ctx, a, b, "SUB")
    d = ew(ctx, d, const(ctx, eps, dtype, rank(d)), "SUM")
    return vector_norm(ctx, d, p, [-1], keepdim, dtype)


def cdist(ctx: ConversionContext, a: Any, b: Any, p: float, dtype: torch.dtype) -> Any:
    """``[..., P, M] x [..., R, M] -> [..., P, R]`` p-norm distances, computed directly per pair."""
    d = ew(ctx, unsqueeze(ctx, a, [-2]), unsqueeze(ctx, b, [-3]), "SUB")  # [..., P, R, M]
    return vector_norm(ctx, d, p, [-1], False, dtype)

