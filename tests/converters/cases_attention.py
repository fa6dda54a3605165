"""Harness cases: scaled dot-product attention, nn.MultiheadAttention, cosine similarity, distances.

Attention cases use rtol/atol 1e-4/1e-5: torch's CPU attention kernels (flash / math with q and k
each scaled by sqrt(scale)) round differently from one scaled q @ k^T product.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.converters.harness import Case, randn

_TOL = {"rtol": 1e-4, "atol": 1e-5}


def _qkv(b: int = 2, h: int = 3, lq: int = 5, s: int = 7, e: int = 8, ev: int = 8, hk: int | None = None):  # type: ignore[no-untyped-def]
    hk = h if hk is None else hk
    return lambda: [randn(b, h, lq, e, seed=1), randn(b, hk, s, e, seed=2), randn(b, hk, s, ev, seed=3)]


BOOL_MASK = torch.rand(5, 7, generator=torch.Generator().manual_seed(4)) > 0.3
BOOL_MASK[:, 0] = True  # no fully masked row
FLOAT_MASK = randn(2, 1, 5, 7, seed=5)


def _mha(**kw):  # type: ignore[no-untyped-def]
    def make() -> nn.Module:
        torch.manual_seed(0)
        m = nn.MultiheadAttention(8, 2, **kw)
        with torch.no_grad():
            if m.in_proj_bias is not None:
                m.in_proj_bias.uniform_(-0.5, 0.5)
                m.out_proj.bias.uniform_(-0.5, 0.5)
        return m

    return make


class _MHA(nn.Module):
    """Calls an nn.MultiheadAttention with keyword arguments and returns both outputs."""

    def __init__(self, mha: nn.Module, **kw: object) -> None:
        super().__init__()
        self.mha, self.kw = mha, kw

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *masks: torch.Tensor):  # type: ignore[no-untyped-def]
        kw = dict(self.kw)
        names = [n for n in ("key_padding_mask", "attn_mask") if kw.pop(n, False)]
        kw.update(dict(zip(names, masks, strict=True)))
        out = self.mha(q, k, v, **kw)
        return out if out[1] is not None else out[0]


class _SelfMHA(nn.Module):
    """Self-attention as models call it, ``mha(x, x, x)``: one tensor as query, key and value (the
    converter then projects with the packed in_proj weight once)."""

    def __init__(self, mha: nn.Module, **kw: object) -> None:
        super().__init__()
        self.mha, self.kw = mha, kw

    def forward(self, x: torch.Tensor, *masks: torch.Tensor):  # type: ignore[no-untyped-def]
        kw = dict(self.kw)
        names = [n for n in ("key_padding_mask", "attn_mask") if kw.pop(n, False)]
        kw.update(dict(zip(names, masks, strict=True)))
        out = self.mha(x, x, x, **kw)
        return out if out[1] is not None else out[0]


KPM = torch.tensor([[False, False, True, False, True, False, False], [False] * 6 + [True]])
ATTN_BOOL = torch.zeros(4, 7, dtype=torch.bool)
ATTN_BOOL[1, 2:4] = True
ATTN_BOOL[3, 0] = True


def _seq(batch_first: bool, lq: int = 4, s: int = 7, b: int = 2):  # type: ignore[no-untyped-def]
    shape_q = (b, lq, 8) if batch_first else (lq, b, 8)
    shape_k = (b, s, 8) if batch_first else (s, b, 8)
    return [randn(*shape_q, seed=1), randn(*shape_k, seed=2), randn(*shape_k, seed=3)]


SDPA = [
    Case("sdpa_basic", F.scaled_dot_product_attention, _qkv(),
         targets=["torch.nn.functional.scaled_dot_product_attention"], **_TOL),
    Case("sdpa_causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), _qkv(s=5), **_TOL),
    Case("sdpa_causal_rect", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), _qkv(), **_TOL),
    Case("sdpa_bool_mask", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=BOOL_MASK), _qkv(),
         **_TOL),
    Case("sdpa_float_mask_scale", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, FLOAT_MASK, scale=0.2),
         _qkv(), **_TOL),
    Case("sdpa_traced_mask", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
         lambda: [*_qkv()(), randn(5, 7, seed=9)], **_TOL),
    Case("sdpa_3d_value_dim", F.scaled_dot_product_attention,
         lambda: [randn(3, 4, 6, seed=1), randn(3, 5, 6, seed=2), randn(3, 5, 2, seed=3)], **_TOL),
    Case("sdpa_gqa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), _qkv(h=4, hk=2),
         **_TOL),
    # IAttention takes a mask of whole [s_q, s_kv] rows: a [1, S] key mask is broadcast first
    Case("sdpa_key_row_mask", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), lambda: [
        *_qkv()(), torch.tensor([[True] * 5 + [False, True]])], **_TOL),
    Case("sdpa_gqa_causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
         _qkv(h=6, hk=2, s=5), **_TOL),
    # not IAttention's (5D; key batch broadcast): decomposed on every backend
    Case("sdpa_5d", F.scaled_dot_product_attention, lambda: [randn(2, 2, 3, 5, 8, seed=s) for s in (1, 2, 3)],
         **_TOL),
    Case("sdpa_broadcast_key_batch", F.scaled_dot_product_attention,
         lambda: [randn(2, 3, 5, 8, seed=1), randn(1, 3, 7, 8, seed=2), randn(1, 3, 7, 8, seed=3)], **_TOL),
]

MHA = [
    Case("mha_self_time_major", lambda: _MHA(_mha()(), need_weights=True), lambda: [_seq(False)[0]] * 3,
         is_module=True, targets=["torch.nn.modules.activation.MultiheadAttention"], **_TOL),
    Case("mha_batch_first_cross", lambda: _MHA(_mha(batch_first=True)()), lambda: _seq(True), is_module=True, **_TOL),
    Case("mha_no_weights", lambda: _MHA(_mha()(), need_weights=False), lambda: _seq(False), is_module=True, **_TOL),
    Case("mha_weights_per_head", lambda: _MHA(_mha(batch_first=True)(), average_attn_weights=False),
         lambda: _seq(True), is_module=True, **_TOL),
    Case("mha_key_padding_mask", lambda: _MHA(_mha(batch_first=True)(), key_padding_mask=True),
         lambda: [*_seq(True), KPM.clone()], is_module=True, **_TOL),
    Case("mha_attn_mask_bool", lambda: _MHA(_mha()(), attn_mask=True), lambda: [*_seq(False), ATTN_BOOL.clone()],
         is_module=True, **_TOL),
    Case("mha_both_masks_float", lambda: _MHA(_mha(batch_first=True)(), key_padding_mask=True, attn_mask=True),
         lambda: [*_seq(True), randn(2, 7, seed=7), randn(4, 7, seed=8)], is_module=True, **_TOL),
    Case("mha_kdim_vdim_no_bias", lambda: _MHA(nn.MultiheadAttention(8, 4, bias=False, kdim=6, vdim=5)),
         lambda: [randn(3, 2, 8, seed=1), randn(4, 2, 6, seed=2), randn(4, 2, 5, seed=3)], is_module=True, **_TOL),
    Case("mha_unbatched", lambda: _MHA(_mha()()), lambda: [randn(4, 8, seed=1), randn(6, 8, seed=2),
                                                           randn(6, 8, seed=3)], is_module=True, **_TOL),
    Case("mha_self_packed_time_major", lambda: _SelfMHA(_mha()()), lambda: [randn(4, 2, 8, seed=1)],
         is_module=True, **_TOL),
    Case("mha_self_packed_batch_first_kpm", lambda: _SelfMHA(_mha(batch_first=True)(), key_padding_mask=True,
                                                             average_attn_weights=False),
         lambda: [randn(2, 7, 8, seed=1), KPM.clone()], is_module=True, **_TOL),
    Case("mha_self_packed_unbatched", lambda: _SelfMHA(_mha()(), need_weights=False), lambda: [randn(5, 8, seed=1)],
         is_module=True, **_TOL),
    # need_weights=False: one IAttention where the backend has it, the masks merged into its one mask
    Case("mha_no_weights_bool_masks", lambda: _MHA(_mha(batch_first=True)(), need_weights=False, key_padding_mask=True,
                                                   attn_mask=True),
         lambda: [*_seq(True), KPM.clone(), ATTN_BOOL.clone()], is_module=True, **_TOL),
    Case("mha_no_weights_float_masks", lambda: _MHA(_mha()(), need_weights=False, key_padding_mask=True,
                                                    attn_mask=True),
         lambda: [*_seq(False), randn(2, 7, seed=7), randn(2 * 2, 4, 7, seed=8)], is_module=True, **_TOL),
    Case("mha_self_packed_no_weights_kpm", lambda: _SelfMHA(_mha(batch_first=True)(), need_weights=False,
                                                            key_padding_mask=True),
         lambda: [randn(2, 7, 8, seed=1), KPM.clone()], is_module=True, **_TOL),
    Case("transformer_encoder_layer", lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
         lambda: [randn(2, 5, 8)], is_module=True, **_TOL),
]

DIST = [
    Case("cosine_similarity", F.cosine_similarity, lambda: [randn(3, 5, 4, seed=1), randn(3, 5, 4, seed=2)],
         targets=["torch.cosine_similarity"]),
    Case("cosine_similarity_dim_bcast", lambda a, b: F.cosine_similarity(a, b, dim=-1),
         lambda: [randn(3, 5, 4, seed=1), randn(5, 4, seed=2)]),
    Case("cosine_similarity_module_zero", lambda: nn.CosineSimilarity(dim=0, eps=1e-3),
         lambda: [randn(4, 3, seed=1) * torch.tensor([1.0, 0.0, 1.0]), randn(4, 3, seed=2)], is_module=True),
    Case("pairwise_distance", F.pairwise_distance, lambda: [randn(4, 6, seed=1), randn(4, 6, seed=2)],
         targets=["torch.pairwise_distance"]),
    Case("pairwise_distance_p1_keepdim", lambda a, b: F.pairwise_distance(a, b, p=1.0, keepdim=True),
         lambda: [randn(2, 4, 6, seed=1), randn(4, 6, seed=2)]),
    Case("pairwise_distance_module_inf", lambda: nn.PairwiseDistance(p=float("inf")),
         lambda: [randn(4, 6, seed=1), randn(4, 6, seed=2)], is_module=True),
    Case("cdist", torch.cdist, lambda: [randn(2, 5, 3, seed=1), randn(2, 4, 3, seed=2)],
         targets=["torch.functional.cdist"], rtol=1e-4, atol=1e-5),
    Case("cdist_p1_2d", lambda a, b: torch.cdist(a, b, p=1.0), lambda: [randn(5, 3, seed=1), randn(4, 3, seed=2)]),
    Case("cdist_p3", lambda a, b: torch.cdist(a, b, p=3.0), lambda: [randn(5, 3, seed=1), randn(4, 3, seed=2)],
         rtol=1e-4, atol=1e-5),
]



class _FunctionalMHA(nn.Module):
    """``F.multi_head_attention_forward`` called directly with a module's weights (time-major inputs),
    as models with their own position bias do; ``masks`` names the trailing inputs (attn_mask,
    key_padding_mask, static_k, static_v), ``kw`` the other arguments."""

    def __init__(self, masks: tuple[str, ...] = (), add_bias_kv: bool = False, separate: bool = False,
                 **kw: object) -> None:
        super().__init__()
        self.mha = _mha(add_bias_kv=add_bias_kv, **({"kdim": 6, "vdim": 6} if separate else {}))()
        self.masks, self.kw = masks, kw

    def forward(self, q: torch.Tensor, k: torch.Tensor, *rest: torch.Tensor):  # type: ignore[no-untyped-def]
        m = self.mha
        kw = dict(self.kw, **dict(zip(self.masks, rest, strict=True)))
        separate = not m._qkv_same_embed_dim
        out, w = F.multi_head_attention_forward(
            q, k, k, 8, 2, m.in_proj_weight, m.in_proj_bias, m.bias_k, m.bias_v, kw.pop("add_zero_attn", False),
            kw.pop("dropout_p", 0.0), m.out_proj.weight, m.out_proj.bias, training=kw.pop("training", False),
            use_separate_proj_weight=separate,
            q_proj_weight=m.q_proj_weight, k_proj_weight=m.k_proj_weight, v_proj_weight=m.v_proj_weight, **kw)
        return out if w is None else (out, w)


def _tq(lq: int = 5, s: int = 6, b: int = 2, e: int = 8):  # type: ignore[no-untyped-def]
    return lambda: [randn(lq, b, 8, seed=1), randn(s, b, e, seed=2)]


MHAF = [
    Case("mha_forward_functional", lambda: _FunctionalMHA(), _tq(), is_module=True,
         targets=["torch.nn.functional.multi_head_attention_forward"], **_TOL),
    Case("mha_forward_relative_bias_no_weights", lambda: _FunctionalMHA(("attn_mask",), need_weights=False),
         lambda: [*_tq()(), randn(2 * 2, 5, 6, seed=3)], is_module=True, **_TOL),
    Case("mha_forward_bias_kv_zero_attn_masks", lambda: _FunctionalMHA(
        ("attn_mask", "key_padding_mask"), add_bias_kv=True, add_zero_attn=True, average_attn_weights=False),
         lambda: [*_tq()(), randn(5, 6, seed=3), randn(2, 6, seed=4)],
         is_module=True, **_TOL),
    Case("mha_forward_static_kv", lambda: _FunctionalMHA(("static_k", "static_v")),
         lambda: [*_tq()(), randn(2 * 2, 3, 4, seed=3), randn(2 * 2, 3, 4, seed=4)], is_module=True, **_TOL),
    Case("mha_forward_is_causal_hint", lambda: _FunctionalMHA(("attn_mask",), is_causal=True, need_weights=False,
                                                               add_bias_kv=True),
         lambda: [*_tq(s=5)(), randn(5, 5, seed=3)], is_module=True, **_TOL),
    Case("mha_forward_separate_weights_unbatched", lambda: _FunctionalMHA(separate=True),
         lambda: [randn(5, 8, seed=1), randn(4, 6, seed=2)], is_module=True, **_TOL),
    Case("mha_module_bias_kv_zero_attn", lambda: _MHA(_mha(add_bias_kv=True, add_zero_attn=True)(),
                                                      key_padding_mask=True),
         lambda: [*_seq(False), KPM.clone()], is_module=True, **_TOL),
    Case("mha_module_bias_kv_batch_first_bool_kpm", lambda: _MHA(_mha(add_bias_kv=True, batch_first=True)(),
                                                                 key_padding_mask=True, need_weights=False),
         lambda: [*_seq(True), KPM.clone()], is_module=True, **_TOL),
    Case("mha_forward_half", lambda: _FunctionalMHA().half(), lambda: [x.half() for x in _tq()()], is_module=True,
         rtol=1e-2, atol=1e-2),
    Case("mha_forward_dropout_training_refused", lambda: _FunctionalMHA(dropout_p=0.1, training=True), _tq(),
         is_module=True, xfail="attention dropout with training=True is random"),
]

CASES = SDPA + MHA + MHAF + DIST


# ------------------------------------------------ torch's fused inference ops (nn modules' fast paths)
class _FastEncoder(nn.Module):
    """``torch._transformer_encoder_layer_fwd`` called with a TransformerEncoderLayer's weights, as the
    layer's fast path (eval, batch_first) calls it; the mask (and its type) as an input."""

    def __init__(self, norm_first: bool = False, gelu: bool = False, mask_type: int | None = None) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True, norm_first=norm_first,
                                                activation="gelu" if gelu else "relu")
        self.gelu, self.mask_type = gelu, mask_type

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        m = self.layer
        a = m.self_attn
        return torch._transformer_encoder_layer_fwd(
            x, a.embed_dim, a.num_heads, a.in_proj_weight, a.in_proj_bias, a.out_proj.weight, a.out_proj.bias,
            self.gelu, m.norm_first, m.norm1.eps, m.norm1.weight, m.norm1.bias, m.norm2.weight, m.norm2.bias,
            m.linear1.weight, m.linear1.bias, m.linear2.weight, m.linear2.bias, mask, self.mask_type)


class _FastMHA(nn.Module):
    """``torch._native_multi_head_attention`` with a MultiheadAttention's weights (its fast path)."""

    def __init__(self, need_weights: bool = True, average: bool = True, mask_type: int | None = None,
                 cross: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.mha = nn.MultiheadAttention(8, 2, batch_first=True)
        self.need_weights, self.average, self.mask_type, self.cross = need_weights, average, mask_type, cross

    def forward(self, x: torch.Tensor, *rest: torch.Tensor):  # type: ignore[no-untyped-def]
        m = self.mha
        kv = rest[0] if self.cross else x
        mask = rest[-1] if self.mask_type is not None else None
        out, w = torch._native_multi_head_attention(
            x, kv, kv, m.embed_dim, m.num_heads, m.in_proj_weight, m.in_proj_bias, m.out_proj.weight,
            m.out_proj.bias, mask, self.need_weights, self.average, self.mask_type)
        return (out, w) if self.need_weights else out


def _padding(n: int, s: int, dtype: torch.dtype = torch.bool) -> torch.Tensor:
    """A key padding mask [n, s]: True (or -inf) masks a key; key 0 is never masked."""
    mask = torch.rand(n, s, generator=torch.Generator().manual_seed(6)) > 0.6
    mask[:, 0] = False
    return mask if dtype == torch.bool else torch.zeros(n, s).masked_fill(mask, float("-inf"))


def _merged(n: int, h: int, length: int) -> torch.Tensor:
    """A merged [n, h, L, L] float mask (nn.MultiheadAttention.merge_masks: causal + padding, 0 / -inf)."""
    causal = torch.ones(length, length, dtype=torch.bool).triu(1)
    mask = causal.view(1, 1, length, length) | _padding(n, length).view(n, 1, 1, length)
    return torch.zeros(n, h, length, length).masked_fill(mask, float("-inf"))


FUSED = [
    Case("transformer_encoder_layer_fwd", lambda: _FastEncoder(), lambda: [randn(2, 6, 16)], is_module=True,
         targets=["torch._transformer_encoder_layer_fwd"], **_TOL),
    Case("transformer_encoder_layer_fwd_norm_first_gelu_padding", lambda: _FastEncoder(True, True, 1),
         lambda: [randn(3, 6, 16), _padding(3, 6)], is_module=True, **_TOL),
    Case("transformer_encoder_layer_fwd_merged_mask", lambda: _FastEncoder(mask_type=2),
         lambda: [randn(2, 5, 16), _merged(2, 2, 5)], is_module=True, **_TOL),
    Case("native_multi_head_attention", lambda: _FastMHA(), lambda: [randn(2, 5, 8)], is_module=True,
         targets=["torch._native_multi_head_attention"], **_TOL),
    Case("native_multi_head_attention_causal_no_weights", lambda: _FastMHA(False, mask_type=0),
         lambda: [randn(2, 5, 8), torch.ones(5, 5, dtype=torch.bool).triu(1)], is_module=True, **_TOL),
    Case("native_multi_head_attention_per_head_float_padding", lambda: _FastMHA(average=False, mask_type=1),
         lambda: [randn(3, 5, 8), _padding(3, 5, torch.float32)], is_module=True,
         vary="the -inf padding mask is an input: rolling it moves the masked keys of row 0", **_TOL),
    Case("native_multi_head_attention_fully_masked_row_no_weights", lambda: _FastMHA(False, mask_type=1),
         lambda: [randn(2, 5, 8), torch.tensor([[False, True, False, True, True], [True] * 5])], is_module=True,
         **_TOL),  # torch gives NaN for batch 1 (all keys masked): so must the engine (equal_nan)
    Case("native_multi_head_attention_cross", lambda: _FastMHA(cross=True), lambda: [randn(2, 5, 8), randn(2, 5, 8, seed=1)],
         is_module=True, **_TOL),
    Case("native_multi_head_attention_weights_from_inputs",
         lambda x, w: torch._native_multi_head_attention(x, x, x, 8, 2, w, torch.zeros(24), torch.eye(8),
                                                         torch.zeros(8), None, False)[0],
         lambda: [randn(2, 5, 8), randn(24, 8, seed=1)], vary="the weight is an input",
         xfail="qkv_weight computed from the network inputs"),
]

CASES += FUSED
