"""An LLM decode step with a key/value cache of dynamic length (issue 10, item 4): Llama and GPT-2
(tiny random-weight transformers configs, as the zoo builds them) take one new token, the attention
mask over the cached and the new tokens, its position and the cache of ``past`` tokens, and return
the logits and the cache of ``past + 1`` tokens. Two forms of the cache:

* ``tuple``: plain tensors, a tuple of (key, value) per layer of shape [batch, heads, past, head_dim],
  in and out (the step wraps them in a DynamicCache for the model); each given as an ``Input`` range.
* ``cache``: transformers' ``DynamicCache`` object itself as the argument and in the output: convert
  flattens it into the engine inputs ``past_key_values.<layer>.key`` / ``.value`` (ranges in
  ``profiles=``, one Input per engine input) and ``TRTModule`` returns a DynamicCache again.

One engine per model and form, traced at past length 8 with the past length dynamic over [1, 64]
(the mask over [2, 65]), is saved to an engine file and loaded back, and compared with eager PyTorch
at past lengths 1 and 32 (float32 on the sim: ``assert_close`` with atol 1e-4 / rtol 1e-4, which
covers the reordered float sums of fused attention; a wrong mask position, a wrong rotary position
or a stale cache entry is off by far more). The traced mask pads its first position: transformers
skips an all-ones mask by reading its values, which the engine could not follow
(converters/zoo_transformers.py refuses that; see tests/zoo/test_zoo.py). The Llama cache form is also
built by the real TensorRT-RTX builder. Budget: about 15 s on 2 cores.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import torch2trt_lite
from tests.weights import nontrivial
from torch2trt_lite import Input
from torch2trt_lite.errors import EngineFileError, RuntimeExecutionError, Torch2TRTError

transformers = pytest.importorskip("transformers", reason="the KV-cache tests need transformers")

VOCAB, LAYERS, HEADS, HEAD_DIM = 100, 2, 4, 16
TRACE_PAST, MAX_PAST = 8, 64
PASTS = (1, 32)
TOL = {"atol": 1e-4, "rtol": 1e-4}
NAMES = ["input_ids", "attention_mask", "position_ids", "past_key_values"]


def _llama() -> tuple[nn.Module, int]:  # grouped-query attention: 2 key/value heads for 4 query heads
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, max_position_embeddings=128, hidden_size=HEADS * HEAD_DIM,
                                   num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=2,
                                   intermediate_size=128, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    return transformers.LlamaForCausalLM(cfg), 2


def _gpt2() -> tuple[nn.Module, int]:
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_positions=128, n_embd=HEADS * HEAD_DIM, n_layer=LAYERS,
                                  n_head=HEADS, bos_token_id=1, eos_token_id=2)
    return transformers.GPT2LMHeadModel(cfg), HEADS


MODELS: dict[str, Callable[[], tuple[nn.Module, int]]] = {"llama": _llama, "gpt2": _gpt2}


class CacheStep(nn.Module):
    """One decode step with transformers' DynamicCache in and out."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                cache: Any) -> tuple[torch.Tensor, Any]:
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, cache=cache,
                         use_cache=True)
        return out.logits, out.cache


class TupleStep(CacheStep):
    """One decode step with the cache as plain tensors: a tuple of (key, value) per layer."""

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                past_key_values: Any) -> tuple[torch.Tensor, Any]:
        logits, cache = super().forward(input_ids, attention_mask, position_ids,
                                        transformers.DynamicCache(ddp_cache_data=past_key_values))
        return logits, tuple((layer.keys, layer.values) for layer in cache.layers)


def _pairs(kv_heads: int, past: int, seed: int) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    g = torch.Generator().manual_seed(seed)
    shape = (1, kv_heads, past, HEAD_DIM)
    return tuple((torch.randn(shape, generator=g), torch.randn(shape, generator=g)) for _ in range(LAYERS))


def _step_inputs(kv_heads: int, past: int, form: str, pad: int = 0, seed: int = 0) -> list[Any]:
    """The token, mask (its first ``pad`` positions masked), position and cache of a step after ``past`` tokens."""
    g = torch.Generator().manual_seed(100 + seed)
    ids = torch.randint(3, VOCAB, (1, 1), generator=g)
    mask = torch.ones(1, past + 1, dtype=torch.int64)
    mask[:, :pad] = 0
    pos = torch.tensor([[past]])
    pairs = _pairs(kv_heads, past, seed)
    return [ids, mask, pos, pairs if form == "tuple" else transformers.DynamicCache(ddp_cache_data=pairs)]


def _ranges(kv_heads: int) -> list[Input]:
    """The engine inputs' ranges: past length over [1, MAX_PAST] (the mask one longer)."""
    kv = [Input((1, kv_heads, 1, HEAD_DIM), (1, kv_heads, TRACE_PAST, HEAD_DIM), (1, kv_heads, MAX_PAST, HEAD_DIM))
          for _ in range(2 * LAYERS)]
    return [Input((1, 1), (1, 1), (1, 1), dtype=torch.int64),
            Input((1, 2), (1, TRACE_PAST + 1), (1, MAX_PAST + 1), dtype=torch.int64),
            Input((1, 1), (1, 1), (1, 1), dtype=torch.int64), *kv]


def _step(name: str, form: str) -> tuple[nn.Module, int]:
    torch.manual_seed(0)
    model, kv_heads = MODELS[name]()
    nontrivial(model)  # NOTE: random init keeps norms at 1 and biases at 0; these are random too
    return (TupleStep if form == "tuple" else CacheStep)(model.eval()).eval(), kv_heads


def _convert(step: nn.Module, kv_heads: int, form: str, backend: str = "sim", **kw: Any) -> torch2trt_lite.TRTModule:
    ex = _step_inputs(kv_heads, TRACE_PAST, form, pad=1)
    if form == "tuple":  # every tensor of the cache is an Input range, with the example to trace
        ranges = _ranges(kv_heads)
        ex[:3] = [Input(r.min_shape, r.opt_shape, r.max_shape, r.dtype, example=x) for r, x in zip(ranges[:3], ex[:3], strict=True)]
        ex[3] = tuple(
            (Input(*ranges[3 + 2 * i].range, example=k), Input(*ranges[4 + 2 * i].range, example=v))
            for i, (k, v) in enumerate(ex[3])
        )
        return torch2trt_lite.convert(step, ex, backend=backend, input_names=NAMES, progress=False, **kw)
    return torch2trt_lite.convert(step, ex, backend=backend, input_names=NAMES, profiles=[_ranges(kv_heads)],
                                  progress=False, **kw)


_ENGINES: dict[tuple[str, str], tuple[nn.Module, int, torch2trt_lite.TRTModule]] = {}


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], tuple[nn.Module, int, Any]]:
    """(eager step, key/value heads, engine loaded back from its engine file) per model and form, made once."""

    def get(name: str, form: str) -> tuple[nn.Module, int, Any]:
        if (name, form) not in _ENGINES:
            step, kv_heads = _step(name, form)
            path = tmp_path_factory.mktemp("kv") / f"{name}_{form}.engine"
            _convert(step, kv_heads, form).save(path)
            _ENGINES[name, form] = (step, kv_heads, torch2trt_lite.load(path))
        return _ENGINES[name, form]

    return get


def _kv(cache: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    if isinstance(cache, tuple):
        return list(cache)
    assert type(cache) is transformers.DynamicCache, f"expected a DynamicCache, got {type(cache).__name__}"
    return [(layer.keys, layer.values) for layer in cache.layers]


@pytest.mark.parametrize("past", PASTS)
@pytest.mark.parametrize("form", ["tuple", "cache"])
@pytest.mark.parametrize("name", list(MODELS))
def test_decode_step_matches_eager(engines: Any, name: str, form: str, past: int) -> None:
    step, kv_heads, engine = engines(name, form)
    for pad in (0, min(3, past)):  # no padding, and a left-padded batch row (the engine applies the mask it is given)
        xs = _step_inputs(kv_heads, past, form, pad=pad, seed=past + pad)
        given = [copy.deepcopy(x) for x in xs]
        with torch.no_grad():
            want_logits, want_cache = step(*copy.deepcopy(xs))
        logits, cache = engine(*xs)
        torch.testing.assert_close(logits, want_logits, **TOL)
        assert float(want_logits.std()) > 0.1  # the comparison is not trivial
        got, want = _kv(cache), _kv(want_cache)
        assert len(got) == len(want) == LAYERS
        for (k, v), (wk, wv) in zip(got, want, strict=True):
            assert k.shape == (1, kv_heads, past + 1, HEAD_DIM)
            torch.testing.assert_close(k, wk, **TOL)
            torch.testing.assert_close(v, wv, **TOL)
        for (k, v), (gk, gv) in zip(_kv(xs[3]), _kv(given[3]), strict=True):  # the engine left its input cache alone
            assert torch.equal(k, gk) and torch.equal(v, gv)
        if form == "cache":
            assert cache.get_seq_length() == past + 1


def test_engine_decodes_its_own_cache(engines: Any) -> None:
    """Three steps in a row, each fed the cache the engine returned, as generation does."""
    step, kv_heads, engine = engines("llama", "cache")
    xs = _step_inputs(kv_heads, 5, "cache")
    want_cache, got_cache = copy.deepcopy(xs[3]), xs[3]
    for t in range(3):
        ids, mask, pos = xs[0] + t, torch.ones(1, 6 + t, dtype=torch.int64), torch.tensor([[5 + t]])
        with torch.no_grad():
            want_logits, want_cache = step(ids, mask, pos, want_cache)
        logits, got_cache = engine(ids, mask, pos, got_cache)
        torch.testing.assert_close(logits, want_logits, **TOL)
    for (k, v), (wk, wv) in zip(_kv(got_cache), _kv(want_cache), strict=True):
        assert k.shape[2] == 8
        torch.testing.assert_close(k, wk, **TOL)
        torch.testing.assert_close(v, wv, **TOL)


def test_cache_engine_inputs_and_structure_are_recorded(engines: Any) -> None:
    _, kv_heads, engine = engines("llama", "cache")
    names = [f"past_key_values.{i}.{kind}" for i in range(LAYERS) for kind in ("key", "value")]
    assert engine.input_names == NAMES[:3] + names
    prof = engine.metadata["profiles"][0]
    assert prof["past_key_values.1.value"]["min"][2] == 1 and prof["past_key_values.1.value"]["max"][2] == MAX_PAST
    assert engine.metadata["in_tree"]["tuple"][3] == {"cache": "DynamicCache", "layers": [
        [{"t": 3 + 2 * i}, {"t": 4 + 2 * i}] for i in range(LAYERS)]}
    out = engine.metadata["out_tree"]["tuple"][1]
    assert set(out) == {"cache", "layers"} and len(out["layers"]) == LAYERS
    _, _, tuple_engine = engines("gpt2", "tuple")
    assert tuple_engine.input_names[3:5] == ["past_key_values.0.0", "past_key_values.0.1"]


@pytest.mark.parametrize("bad, why", [
    (lambda t: t["tuple"][3].update(cache="StaticCache"), "DynamicCache"),
    (lambda t: t["tuple"][3]["layers"][0].reverse(), "each once and in order"),
    (lambda t: t["tuple"][3]["layers"][1].pop(), "pair"),
    (lambda t: t["tuple"].pop(), "each once and in order"),
    (lambda t: t["tuple"][0].update(c=1), "one of t, tuple, list, cache"),
])
def test_engine_file_in_tree_is_validated(engines: Any, bad: Callable[[Any], None], why: str) -> None:
    _, _, engine = engines("llama", "cache")
    meta = engine.metadata
    bad(meta["in_tree"])
    with pytest.raises(EngineFileError, match=why):
        torch2trt_lite.TRTModule(bytes(engine.plan), json.loads(json.dumps(meta)))


def test_engine_file_cache_output_node_is_validated(engines: Any) -> None:
    _, _, engine = engines("llama", "cache")
    meta = engine.metadata
    meta["out_tree"]["tuple"][1]["layers"][0] = [{"t": 1}, {"c": 0}]
    with pytest.raises(EngineFileError, match=r"out_tree.tuple\[1\].layers\[0\]"):
        torch2trt_lite.TRTModule(bytes(engine.plan), meta)


def test_engine_refuses_arguments_of_another_structure(engines: Any) -> None:
    _, kv_heads, engine = engines("llama", "cache")
    ids, mask, pos, cache = _step_inputs(kv_heads, 4, "cache")
    with pytest.raises(RuntimeExecutionError, match="expected a transformers DynamicCache"):
        engine(ids, mask, pos, _pairs(kv_heads, 4, 0))
    with pytest.raises(RuntimeExecutionError, match="has 1 layers, the engine was converted with 2"):
        engine(ids, mask, pos, transformers.DynamicCache(ddp_cache_data=_pairs(kv_heads, 4, 0)[:1]))
    with pytest.raises(RuntimeExecutionError, match="expected 4 entries"):
        engine(ids, mask, pos)
    with pytest.raises(RuntimeExecutionError, match="outside every optimization profile"):
        engine(*_step_inputs(kv_heads, MAX_PAST + 1, "cache"))
    _, _, tuple_engine = engines("gpt2", "tuple")
    with pytest.raises(RuntimeExecutionError, match=r"inputs\[3\]\[1\]: expected a tuple of 2"):
        tuple_engine(ids, mask, pos, (_pairs(HEADS, 4, 0)[0], None))


def test_unsupported_caches_are_refused() -> None:
    step, kv_heads = _step("llama", "cache")
    ids, mask, pos, _ = _step_inputs(kv_heads, 4, "cache", pad=1)
    with pytest.raises(Torch2TRTError, match="the DynamicCache is empty"):
        torch2trt_lite.convert(step, [ids, mask, pos, transformers.DynamicCache()], backend="sim")
    static = transformers.StaticCache(config=step.model.config, max_cache_len=16)
    with pytest.raises(Torch2TRTError, match="a transformers StaticCache is not supported; only a DynamicCache"):
        torch2trt_lite.convert(step, [ids, mask, pos, static], backend="sim")
    with pytest.raises(Torch2TRTError, match="one name per model argument"):
        torch2trt_lite.convert(step, _step_inputs(kv_heads, 4, "cache", pad=1), backend="sim", input_names=["a", "b"])


@pytest.mark.parametrize("mask_length", [7, 5])
def test_static_cache_length_converts(mask_length: int) -> None:
    """Without ranges the cache keeps the traced length; a mask shorter than the 7 keys is zero-padded
    as transformers pads it."""
    step, kv_heads = _step("gpt2", "tuple")
    xs = _step_inputs(kv_heads, 6, "tuple", pad=2)
    xs[1] = xs[1][:, :mask_length]
    engine = torch2trt_lite.convert(step, xs, backend="sim")
    padded = any("prepare_padding_mask" in n for n, _, _ in engine.layer_precisions())
    assert padded == (mask_length < 7)
    with torch.no_grad():
        want_logits, want_kv = step(*copy.deepcopy(xs))
    logits, kv = engine(*xs)
    torch.testing.assert_close(logits, want_logits, **TOL)
    for (k, v), (wk, wv) in zip(kv, want_kv, strict=True):
        torch.testing.assert_close(k, wk, **TOL)
        torch.testing.assert_close(v, wv, **TOL)


@pytest.mark.rtx
def test_decode_step_builds_on_tensorrt_rtx() -> None:
    """The Llama cache form through TensorRT-RTX's real builder (it cannot run without a GPU): the
    dynamic past length as an optimization profile, every layer's output shape and dtype as the sim's."""
    step, kv_heads = _step("llama", "cache")
    engine = _convert(step, kv_heads, "cache", backend="tensorrt-rtx", verify=False)
    assert len(engine.plan) > 0 and not engine.runnable
    sim = _convert(step, kv_heads, "cache", verify=False)
    assert engine.metadata["in_tree"] == sim.metadata["in_tree"]
    assert engine.layer_precisions() == sim.layer_precisions()
    assert engine.metadata["outputs"] == sim.metadata["outputs"]
    assert [o["shape"] for o in engine.metadata["outputs"]] == [[1, 1, VOCAB]] + [[1, kv_heads, -1, HEAD_DIM]] * 4
    assert engine.metadata["profiles"] == sim.metadata["profiles"]


@pytest.mark.parametrize("name", list(MODELS))
def test_mask_of_another_length_is_padded_or_cut_as_transformers_does(engines: Any, name: str) -> None:
    """transformers zero-pads a mask shorter than the keys (prepare_padding_mask) and reads only the
    first positions of a longer one; the engine's mask (a slice of the kv length) does the same."""
    step, kv_heads, engine = engines(name, "cache")
    for length in (20, 33, 40):  # past 32: the keys hold 33 positions
        ids, _, pos, cache = _step_inputs(kv_heads, 32, "cache", seed=length)
        mask = torch.ones(1, length, dtype=torch.int64)
        mask[:, :2] = 0
        with torch.no_grad():
            want, _ = step(ids, mask, pos, copy.deepcopy(cache))
        got, _ = engine(ids, mask, pos, cache)
        torch.testing.assert_close(got, want, **TOL)


def test_prefill_returns_the_cache_it_made() -> None:
    """A model run without a cache makes one (``use_cache`` defaults to True in GPT-2's config): the
    engine returns it as a DynamicCache of the prompt's keys and values (formerly refused)."""
    step, kv_heads = _step("gpt2", "cache")
    ids = torch.randint(3, VOCAB, (1, 7), generator=torch.Generator().manual_seed(3))
    mask = torch.ones(1, 7, dtype=torch.int64)
    mask[:, 0] = 0

    def prefill(ids: torch.Tensor, mask: torch.Tensor) -> Any:
        return step.model(input_ids=ids, attention_mask=mask)

    engine = torch2trt_lite.convert(prefill, [ids, mask], backend="sim")
    with torch.no_grad():
        want = prefill(ids, mask)
    got = engine(ids, mask)
    torch.testing.assert_close(got.logits, want.logits, **TOL)
    assert type(got.cache) is transformers.DynamicCache and got.cache.get_seq_length() == 7
    for (k, v), (wk, wv) in zip(_kv(got.cache), _kv(want.cache), strict=True):
        torch.testing.assert_close(k, wk, **TOL)
        torch.testing.assert_close(v, wv, **TOL)


@pytest.mark.parametrize("name", list(MODELS))
def test_positions_follow_the_dynamic_cache_length(name: str) -> None:
    """Without position_ids the model derives the new token's position (cache_position) from the
    cache's length: a symbolic size, so the engine's positions follow the past length of each call."""
    step, kv_heads = _step(name, "cache")

    def no_positions(ids: torch.Tensor, mask: torch.Tensor, cache: Any) -> Any:
        out = step.model(input_ids=ids, attention_mask=mask, cache=cache, use_cache=True)
        return out.logits, out.cache

    ids, mask, _, cache = _step_inputs(kv_heads, TRACE_PAST, "cache", pad=1)
    ranges = _ranges(kv_heads)
    engine = torch2trt_lite.convert(no_positions, [ids, mask, cache], backend="sim",
                                    profiles=[[ranges[0], ranges[1], *ranges[3:]]])
    for past in PASTS:
        ids, mask, _, cache = _step_inputs(kv_heads, past, "cache", pad=min(3, past), seed=7)
        with torch.no_grad():
            want_logits, want_cache = no_positions(ids, mask, copy.deepcopy(cache))
        logits, got_cache = engine(ids, mask, cache)
        torch.testing.assert_close(logits, want_logits, **TOL)
        for (k, v), (wk, wv) in zip(_kv(got_cache), _kv(want_cache), strict=True):
            torch.testing.assert_close(k, wk, **TOL)
            torch.testing.assert_close(v, wv, **TOL)
