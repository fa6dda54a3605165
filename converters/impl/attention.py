"""Attention and distance builders: scaled dot-product attention, multi-head attention, cosine
similarity, pairwise distance, cdist.

Attention is one fused IAttention (``INetworkDefinition.add_attention``: TensorRT 10.16+, 11.x,
TensorRT-RTX 1.7) where the backend has it and IAttention can express the call, else the
decomposition into matrix multiplies and a softmax (TensorRT 10.13; attention weights asked for;
shapes or masks IAttention refuses)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from . import sizes as Y
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
    unary,
    unsqueeze,
)
from .normalization import vector_norm

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


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


def _static(*shapes: tuple[int, ...]) -> bool:
    return all(int(d) > 0 for s in shapes for d in s)


def _shape(it: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in it.shape)


def can_fuse(ctx: ConversionContext, qs: tuple[int, ...], ks: tuple[int, ...], vs: tuple[int, ...],
             mask_shape: tuple[int, ...] | None, causal: bool) -> bool:
    """Whether :func:`fused_attention` can take [B, H, L, E] ``qs``, [B, Hkv, S, E] ``ks`` / ``vs``
    and a mask of ``mask_shape`` (as the caller will hand it, at most 4D; None: no mask; its type must
    be BOOL or the query's): the backend has IAttention (TensorRT 10.16+, TensorRT-RTX; not 10.13)
    and the call keeps TensorRT's rules (4D padded inputs, key and value of one shape, H a multiple of
    Hkv, a causal flag or a mask, not both, a mask broadcastable to [B, H, L, S]). Adds no layer."""
    if getattr(ctx.network, "add_attention", None) is None or getattr(ctx.trt, "AttentionNormalizationOp", None) is None:
        return False
    if causal and mask_shape is not None:
        return False
    if len(qs) != 4 or len(ks) != 4 or ks != vs:
        return False
    # NOTE: dynamic shapes: the batch and sequence dims may be dynamic (-1; the traced call, where
    # eager PyTorch ran, had them agree); the heads and the head size must be static
    if not (_static(qs, ks) or (Y.dynamic(ctx) and _static(qs[1::2], ks[1::2]))):
        return False
    if qs[0] != ks[0] or qs[3] != ks[3] or qs[1] % ks[1]:
        return False
    if mask_shape is None:
        return True
    if len(mask_shape) > 4:
        return False
    ms = (1,) * (4 - len(mask_shape)) + tuple(int(d) for d in mask_shape)
    if not _static(ms) and not Y.dynamic(ctx):
        return False
    return all(m in (1, d) for m, d in zip(ms, (qs[0], qs[1], qs[2], ks[2]), strict=True))


def fused_attention(ctx: ConversionContext, q: Any, k: Any, v: Any, mask: Any | None, causal: bool,
                    dtype: torch.dtype) -> Any:
    """One IAttention: ``softmax(q @ k^T + mask) @ v`` of [B, H, L, E] ``q`` and [B, Hkv, S, E] ``k``,
    ``v`` (grouped-query attention where Hkv < H), with no score scale (fold it into ``q``). A bool
    ``mask`` is True where attention is allowed, a float one is added; ``causal`` is torch's
    ``is_causal`` (top-left aligned). Only where :func:`can_fuse` said so."""
    length, s = _shape(q)[2], _shape(k)[2]
    if mask is not None and -1 in (*_shape(mask), length, s):
        # NOTE: dynamic shapes: the mask broadcast to [a0, a1, L, S] with the sizes as shape tensors
        mask = unsqueeze_to(ctx, mask, 4)
        ms = Y.network_sizes(ctx, mask)
        want = (Y.network_sizes(ctx, q)[2], Y.network_sizes(ctx, k)[2])
        if any(Y.is_sym(m) or m == 1 for m in ms[2:]) and not all(
            Y.is_sym(m) and Y.is_sym(w) and Y.size_key(m) == Y.size_key(w) for m, w in zip(ms[2:], want, strict=True)
        ):
            from .shape import expand

            mask = expand(ctx, mask, [ms[0], ms[1], *want])
    elif mask is not None:
        mask = unsqueeze_to(ctx, mask, 4)
        if _shape(mask)[2:] != (length, s):
            # NOTE: TensorRT documents the mask as [a0, a1, s_q, s_kv] where only a0 and a1 broadcast:
            # a mask of one row or one column is made whole (OR False / + 0)
            is_bool = int(mask.dtype) == int(ctx.trt.DataType.BOOL)
            fill = torch.bool if is_bool else dtype
            mask = ew(ctx, mask, const(ctx, torch.zeros(length, s, dtype=fill), fill, 4), "OR" if is_bool else "SUM")
    add = getattr(ctx.network, "add_attention", None)
    norm = getattr(ctx.trt, "AttentionNormalizationOp", None)
    assert add is not None and norm is not None, "fused_attention without can_fuse"
    attn = add(q, k, v, norm.SOFTMAX, bool(causal))
    # NOTE: decomposable: without it TensorRT-RTX 1.7 refuses FLOAT attention at build time ("Attention
    # operation was not supported by a dedicated kernel ... may be marked as decomposable"); TensorRT
    # still takes a fused kernel where one fits the shapes and types
    attn.decomposable = True
    if mask is not None:
        attn.mask = mask
    return attn.get_output(0)


def scaled_dot_product_attention(ctx: ConversionContext, q: Any, k: Any, v: Any, mask: Any | None, is_causal: bool,
                                 scale: float | None, dtype: torch.dtype, gqa: bool = False) -> Any:
    """``F.scaled_dot_product_attention``: one IAttention where it can express the call (the scale
    folded into q; 3D [N, L, E] inputs get a head dim of 1), else :func:`sdpa`'s decomposition."""
    qs, ks, vs = _shape(q), _shape(k), _shape(v)
    r = len(qs)
    mask_ok = mask is None or int(mask.dtype) in (int(ctx.trt.DataType.BOOL), int(ctx.trt_dtype(dtype)))
    if r in (3, 4) and len(ks) == r and len(vs) == r and (gqa or qs[:-2] == ks[:-2]) and mask_ok:
        ms = None if mask is None else _shape(mask)
        if r == 3:
            qs, ks, vs = ((t[0], 1, *t[1:]) for t in (qs, ks, vs))
            if ms is not None and len(ms) == 3:
                ms = (ms[0], 1, *ms[1:])
        if can_fuse(ctx, qs, ks, vs, ms, is_causal):
            sc = 1.0 / math.sqrt(qs[-1]) if scale is None else float(scale)
            fq = q if sc == 1.0 else ew(ctx, q, const(ctx, sc, dtype, r), "PROD")
            fk, fv, fmask = k, v, mask
            if r == 3:
                fq, fk, fv = (unsqueeze(ctx, t, [1]) for t in (fq, k, v))
                if mask is not None and rank(mask) == 3:
                    fmask = unsqueeze(ctx, mask, [1])
            out = fused_attention(ctx, fq, fk, fv, fmask, is_causal, dtype)
            return squeeze(ctx, out, [1]) if r == 3 else out
    return sdpa(ctx, q, k, v, mask, is_causal, scale, dtype, gqa)[0]


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
    """``softmax(q @ k^T * scale + mask) @ v`` decomposed (matrix multiplies, softmax); returns (output,
    attention weights)."""
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


def _mha_mask(ctx: ConversionContext, attn_mask: Any | None, key_padding_mask: Any | None,
              dims: tuple[int, int, int, int], dtype: torch.dtype) -> Any | None:
    """nn.MultiheadAttention's ``attn_mask`` ([L, S] or [N * H, L, S]) and ``key_padding_mask`` ([N, S]
    or [S]), where True (or -inf) masks a position, as one IAttention mask: bool masks become one
    bool mask, True where allowed; with a float mask among them, the sum of float masks (a bool
    mask gives -inf where True), as torch merges them."""
    n, h, length, s = dims
    masks = []
    # NOTE: [L, S] / [N, S] / [S] masks gain their size-1 dims by unsqueeze (valid for dynamic sizes too)
    if attn_mask is not None:
        masks.append(reshape(ctx, attn_mask, (n, h, length, s)) if rank(attn_mask) == 3 else
                     unsqueeze(ctx, attn_mask, [0, 1]))
    if key_padding_mask is not None:
        kpm = key_padding_mask
        masks.append(unsqueeze(ctx, kpm, [1, 2]) if rank(kpm) == 2 else unsqueeze(ctx, kpm, [0, 1, 2]))
    if not masks:
        return None
    is_bool = [int(m.dtype) == int(ctx.trt.DataType.BOOL) for m in masks]
    if all(is_bool):
        masked = masks[0] if len(masks) == 1 else ew(ctx, masks[0], masks[1], "OR")
        return unary(ctx, masked, "NOT")
    floats = [_select(ctx, m, const(ctx, float("-inf"), dtype, 4), const(ctx, 0.0, dtype, 4)) if b else m
              for m, b in zip(masks, is_bool, strict=True)]
    return floats[0] if len(floats) == 1 else ew(ctx, floats[0], floats[1], "SUM")


def _pad_keys(ctx: ConversionContext, mask: Any | None, extra: int) -> Any | None:
    """A mask with ``extra`` unmasked key positions appended (False, or 0.0 for a float mask)."""
    if mask is None or not extra:
        return mask
    from .resize import pad

    if int(mask.dtype) == int(ctx.trt.DataType.BOOL):
        return ctx.cast(pad(ctx, ctx.cast(mask, torch.int32), [0, extra], "constant", 0, torch.int32), torch.bool)
    return pad(ctx, mask, [0, extra], "constant", 0.0, ctx.dtype_of(mask))


def _extra_keys(ctx: ConversionContext, m: Any, k: Any, v: Any, dtype: torch.dtype) -> tuple[Any, Any, int]:
    """``bias_k``/``bias_v`` ([1, 1, E]: one more key and value position), ``static_k``/``static_v``
    (network tensors [N * H, S, D] that replace the projected keys and values) and ``add_zero_attn``
    (one more zero key and value position) on [N, H, S, D] keys and values, in torch's order: (k, v,
    the number of key positions appended, which the masks get as unmasked columns)."""
    from .shape import concat, expand
    from .shape import reshape as reshape_sized

    n, h, _, d = Y.network_sizes(ctx, k)
    extra = 0
    bias_k, bias_v = getattr(m, "bias_k", None), getattr(m, "bias_v", None)
    if bias_k is not None and bias_v is not None:
        rows = [expand(ctx, const(ctx, b.detach().reshape(1, h, 1, d), dtype), [n, h, 1, d]) for b in (bias_k, bias_v)]
        k, v = concat(ctx, [k, rows[0]], 2), concat(ctx, [v, rows[1]], 2)
        extra += 1
    static_k, static_v = getattr(m, "static_k", None), getattr(m, "static_v", None)
    if static_k is not None:
        k = reshape_sized(ctx, static_k, (n, h, -1, d))
    if static_v is not None:
        v = reshape_sized(ctx, static_v, (n, h, -1, d))
    if getattr(m, "add_zero_attn", False):
        zero = expand(ctx, const(ctx, torch.zeros(1, h, 1, d), dtype), [n, h, 1, d])
        k, v = concat(ctx, [k, zero], 2), concat(ctx, [v, zero], 2)
        extra += 1
    return k, v, extra


def causal_mask(ctx: ConversionContext, length: Any, keys: Any) -> Any:
    """[length, keys] bool, True above the diagonal (the positions a causal query row may not see);
    sizes may be dynamic (then the positions come from IFillLayer LINSPACE)."""
    rows = Y.arange(ctx, length, 2, 0, torch.int64) if Y.is_sym(length) else const(
        ctx, torch.arange(int(length)).reshape(-1, 1), torch.int64)
    cols = Y.arange(ctx, keys, 2, 1, torch.int64) if Y.is_sym(keys) else const(
        ctx, torch.arange(int(keys)).reshape(1, -1), torch.int64)
    return ew(ctx, cols, rows, "GREATER")


def multi_head_attention(
    ctx: ConversionContext,
    m: Any,
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
    masked_rows_nan: bool | None = None,
) -> tuple[Any, Any | None]:
    """``nn.MultiheadAttention`` in inference; inputs as given (time-major unless ``batch_first``).
    ``self_attention``: query, key and value are one tensor (only ``query`` is read then). ``m`` is the
    module, or an object with its attributes (``F.multi_head_attention_forward``'s arguments, whose
    ``static_k``/``static_v`` are network tensors). ``masked_rows_nan``: what a query row whose keys are
    all masked gives, as eager's path does (True: NaN, a plain softmax; False: 0, torch's sdpa; None:
    the builder's own choice, the fused layer's 0 where it fuses, else NaN)."""
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
    k, v, extra = _extra_keys(ctx, m, k, v, dtype)
    if extra and not getattr(m, "mask_covers_extra_keys", False):
        attn_mask, key_padding_mask = _pad_keys(ctx, attn_mask, extra), _pad_keys(ctx, key_padding_mask, extra)
    n, _, length, _ = tuple(q.shape)
    s = tuple(k.shape)[2]
    attn = None
    # NOTE: fused, a query row whose keys are all masked gives 0 on the sim (torch's sdpa does); TensorRT
    # does not document what its IAttention gives there
    masked = attn_mask is not None or key_padding_mask is not None
    # NOTE: where eager gives NaN for fully masked rows, the decomposed form (a plain softmax) gives it too;
    # the fused layer gives 0 there on the sim, as torch's sdpa (TensorRT does not document its IAttention's)
    if not need_weights and not (masked and masked_rows_nan) and can_fuse(
            ctx, _shape(q), _shape(k), _shape(v), None if attn_mask is None and
                                     key_padding_mask is None else (1, 1, length, s), False):
        out = fused_attention(ctx, q, k, v, _mha_mask(ctx, attn_mask, key_padding_mask, (n, h, length, s), dtype),
                              False, dtype)  # [N, H, L, D]; the scale is in the query projection (above)
    else:
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
        if masked and masked_rows_nan is False:
            attn = zero_masked_rows(ctx, attn, scores, dtype)
        out = matmul(ctx, attn, v)  # [N, H, L, D]
    out = _merge_heads(ctx, out)
    out = linear(ctx, out, w(m.out_proj.weight), w(m.out_proj.bias))
    if not batch_first:
        out = permute(ctx, out, (1, 0, 2))
    if unbatched:
        out = squeeze(ctx, out, [1])
    weights = None
    if attn is not None and need_weights:
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

    def norm(t: Any, own: int, other: int, other_t: Any) -> Any:
        v = vector_norm(ctx, t, 2.0, [dim], True, dtype)
        if own == 1 and other > 1:  # NOTE: torch broadcasts first: a size-1 dim counts `other` times
            v = ew(ctx, v, const(ctx, math.sqrt(other), dtype, n), "PROD")
        elif own == 1 and other < 0:  # the other's dim is dynamic: sqrt of its runtime size
            size = ctx.network.add_slice(ctx.network.add_shape(other_t).get_output(0), [dim % n], [1], [1]).get_output(0)
            root = ctx.network.add_unary(ctx.cast(size, dtype), ctx.trt.UnaryOperation.SQRT).get_output(0)
            shuffle = ctx.network.add_shuffle(root)
            shuffle.reshape_dims = [1] * n
            v = ew(ctx, v, shuffle.get_output(0), "PROD")
        return ew(ctx, v, e, "MAX")

    na, nb = norm(a, ka, kb, b), norm(b, kb, ka, a)
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

