"""Fused attention: ``F.scaled_dot_product_attention`` and ``nn.MultiheadAttention`` become one
IAttention (``add_attention``) on TensorRT 10.16 / 11.1 and stay matrix multiplies and a softmax on
10.13 (no IAttention) and wherever IAttention cannot express the call; every network matches eager
PyTorch (fp32, rtol/atol 1e-5, on the traced inputs and on other inputs of the same shapes).

The sim version is chosen as a backend is: ``sim_backend(version)`` in place of ``get_backend``.
"""

from __future__ import annotations

import collections
import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch2trt_lite
from tests.converters.harness import Fn, randn, varied
from torch2trt_lite.backends import rtx_installed, sim_backend

RTOL = ATOL = 1e-5  # fp32
# torch warns that a float key_padding_mask with a bool attn_mask is deprecated; the case keeps it (torch merges them)
pytestmark = pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask and attn_mask:UserWarning")


@contextlib.contextmanager
def sim_version(version: str) -> Iterator[None]:
    """``backend="sim"`` resolves to the sim of TensorRT ``version`` (the engine records it, and
    loads on that version's sim)."""
    with mock.patch.object(sys.modules["torch2trt_lite.convert"], "get_backend",
                           lambda name="auto", **kw: sim_backend(version)):
        yield


def _layer_types(model: nn.Module, xs: Sequence[torch.Tensor]) -> collections.Counter[str]:
    layers = torch2trt_lite.define_network(model, [x.clone() for x in xs], backend="sim").layers()
    return collections.Counter(t for _, t, _ in layers)


def _check_matches_eager(model: nn.Module, xs: Sequence[torch.Tensor]) -> None:
    trt_model = torch2trt_lite.convert(model, [x.clone() for x in xs], backend="sim")
    for inputs in (list(xs), varied(xs)):
        with torch.no_grad():
            expected = model(*[x.clone() for x in inputs])
        torch.testing.assert_close(trt_model(*[x.clone() for x in inputs]), expected, rtol=RTOL, atol=ATOL)


@dataclass
class AttnCase:
    name: str
    model: Callable[[], nn.Module]
    inputs: Callable[[], list[torch.Tensor]]
    fused: int  # IAttention layers on 10.16 / 11.1


def _qkv(b: int = 2, h: int = 4, lq: int = 5, s: int = 7, e: int = 16, hk: int | None = None) -> Callable[[], list[torch.Tensor]]:
    hk = h if hk is None else hk
    return lambda: [randn(b, h, lq, e, seed=1), randn(b, hk, s, e, seed=2), randn(b, hk, s, e, seed=3)]


def _sdpa(**kw: Any) -> Callable[[], nn.Module]:
    return lambda: Fn(lambda q, k, v, *m: F.scaled_dot_product_attention(q, k, v, *m, **kw)).eval()


def _mha(batch_first: bool = True, need_weights: bool = False, masks: Sequence[str] = (),
         self_attention: bool = False) -> Callable[[], nn.Module]:
    class Call(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.mha = nn.MultiheadAttention(16, 4, batch_first=batch_first)
            with torch.no_grad():
                assert self.mha.in_proj_bias is not None
                self.mha.in_proj_bias.uniform_(-0.5, 0.5)
                self.mha.out_proj.bias.uniform_(-0.5, 0.5)

        def forward(self, *xs: torch.Tensor) -> Any:
            q, k, v = (xs[0],) * 3 if self_attention else xs[:3]
            rest = xs[1:] if self_attention else xs[3:]
            out = self.mha(q, k, v, need_weights=need_weights, **dict(zip(masks, rest, strict=True)))
            return out if need_weights else out[0]

    return lambda: Call().eval()


BOOL_MASK = torch.rand(5, 7, generator=torch.Generator().manual_seed(4)) > 0.3
BOOL_MASK[:, 0] = True  # no fully masked row: torch gives 0 there, TensorRT does not say
KEY_MASK = torch.tensor([[True] * 5 + [False, True]])  # [1, S]: one row, broadcast over the queries
KPM = torch.tensor([[False, False, True, False, True, False, False], [False] * 6 + [True]])  # True: masked
ATTN_BOOL = torch.zeros(5, 7, dtype=torch.bool)
ATTN_BOOL[1, 2:4] = True
ATTN_BOOL[3, 0] = True


def _seq(lq: int = 5, s: int = 7) -> list[torch.Tensor]:
    return [randn(2, lq, 16, seed=1), randn(2, s, 16, seed=2), randn(2, s, 16, seed=3)]


CASES = [
    AttnCase("sdpa", _sdpa(), _qkv(), 1),
    AttnCase("sdpa_causal_rect", _sdpa(is_causal=True), _qkv(), 1),
    AttnCase("sdpa_bool_mask", _sdpa(), lambda: [*_qkv()(), BOOL_MASK.clone()], 1),
    AttnCase("sdpa_key_row_mask", _sdpa(), lambda: [*_qkv()(), KEY_MASK.clone()], 1),
    AttnCase("sdpa_float_mask_scale", _sdpa(scale=0.3), lambda: [*_qkv()(), randn(2, 1, 5, 7, seed=5)], 1),
    AttnCase("sdpa_gqa", _sdpa(enable_gqa=True), _qkv(h=4, hk=2), 1),
    AttnCase("sdpa_3d", _sdpa(), lambda: [randn(3, 4, 8, seed=1), randn(3, 6, 8, seed=2), randn(3, 6, 8, seed=3)], 1),
    AttnCase("mha_self_packed", _mha(batch_first=False, self_attention=True), lambda: [randn(5, 2, 16, seed=1)], 1),
    AttnCase("mha_cross_both_bool_masks", _mha(masks=("key_padding_mask", "attn_mask")),
             lambda: [*_seq(), KPM.clone(), ATTN_BOOL.clone()], 1),
    AttnCase("mha_float_kpm_bool_attn_mask", _mha(masks=("key_padding_mask", "attn_mask")),
             lambda: [*_seq(), randn(2, 7, seed=7), ATTN_BOOL.clone()], 1),
    AttnCase("transformer_encoder_layer",
             lambda: nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True).eval(),
             lambda: [randn(2, 5, 16, seed=1)], 1),
]

# IAttention cannot express these (or the call asks for what it does not give): decomposed everywhere
FALLBACKS = [
    AttnCase("sdpa_value_head_dim_differs", _sdpa(),
             lambda: [randn(2, 3, 5, 8, seed=1), randn(2, 3, 7, 8, seed=2), randn(2, 3, 7, 4, seed=3)], 0),
    AttnCase("sdpa_5d", _sdpa(), lambda: [randn(2, 2, 3, 5, 8, seed=s) for s in (1, 2, 3)], 0),
    AttnCase("sdpa_broadcast_batch", _sdpa(),
             lambda: [randn(2, 3, 5, 8, seed=1), randn(1, 3, 7, 8, seed=2), randn(1, 3, 7, 8, seed=3)], 0),
    AttnCase("mha_need_weights", _mha(need_weights=True), _seq, 0),
]


def _ids(cases: list[AttnCase]) -> list[Any]:
    return [pytest.param(c, id=c.name) for c in cases]


@pytest.mark.parametrize("version", ["10.16", "11.1"])
@pytest.mark.parametrize("case", _ids(CASES))
def test_attention_is_one_iattention(case: AttnCase, version: str) -> None:
    model, xs = case.model(), case.inputs()
    with sim_version(version):
        types = _layer_types(model, xs)
        assert types["ATTENTION_INPUT"] == types["ATTENTION_OUTPUT"] == case.fused, types
        assert types["SOFTMAX"] == 0, types
        _check_matches_eager(model, xs)


@pytest.mark.parametrize("case", _ids(CASES + FALLBACKS))
def test_attention_decomposes_on_10_13(case: AttnCase) -> None:
    model, xs = case.model(), case.inputs()
    with sim_version("10.13"):
        types = _layer_types(model, xs)
        assert types["ATTENTION_INPUT"] == 0 and types["SOFTMAX"] >= 1, types
        _check_matches_eager(model, xs)


@pytest.mark.parametrize("case", _ids(FALLBACKS))
def test_inexpressible_attention_decomposes_on_11_1(case: AttnCase) -> None:
    model, xs = case.model(), case.inputs()
    with sim_version("11.1"):
        types = _layer_types(model, xs)
        assert types["ATTENTION_INPUT"] == 0 and types["SOFTMAX"] >= 1, types
        _check_matches_eager(model, xs)


def test_iattention_is_decomposable_with_the_scale_in_the_query() -> None:
    """TensorRT-RTX 1.7 refuses a FLOAT IAttention that is not decomposable (no dedicated kernel);
    IAttention has no scale, so the custom one multiplies the query."""
    model, xs = _sdpa(scale=0.3)(), _qkv()()
    with sim_version("11.1"):
        d = torch2trt_lite.define_network(model, [x.clone() for x in xs], backend="sim")
    net = d.network
    layers = [net.get_layer(i) for i in range(net.num_layers)]
    attn_in = next(la for la in layers if la.type.name == "ATTENTION_INPUT")
    attn_in.__class__ = d.backend.trt.IAttentionInputLayer  # TensorRT's downcast idiom
    attn = attn_in.attention
    assert attn.decomposable and not attn.causal and attn.mask is None
    prods = [la for la in layers if la.type.name == "ELEMENTWISE"]
    assert len(prods) == 1 and prods[0].get_output(0) is attn.get_input(0)


@pytest.mark.skipif(not rtx_installed(), reason="needs TensorRT-RTX (pip install -e '.[rtx]') for its builder")
@pytest.mark.parametrize("case", _ids([c for c in CASES if c.name in ("sdpa_bool_mask", "mha_self_packed")]))
def test_tensorrt_rtx_builds_the_iattention(case: AttnCase) -> None:
    d = torch2trt_lite.define_network(case.model(), case.inputs(), backend="tensorrt-rtx")
    assert collections.Counter(t for _, t, _ in d.layers())["ATTENTION_INPUT"] == 1
    plan = d.builder.build_serialized_network(d.network, d.builder.create_builder_config())
    assert plan is not None, "; ".join(d.logger.errors)
