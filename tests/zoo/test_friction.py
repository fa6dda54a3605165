"""What a new user ran into (issue 13): Hugging Face outputs, caches, pickling, torchvision's roi_align op,
dtype casts, autograd history, bare sim plans, the benchmark's ONNX skip and cuda_graph on the sim.

All on the sim; every comparison is against PyTorch's own (eager) result.
"""

from __future__ import annotations

import copy
import importlib.util
import io
import logging
import pathlib
import sys
from typing import Any

import pytest
import torch
from torch import nn

import torch2trt_lite
from torch2trt_lite.errors import EngineFileError, Torch2TRTError
from torch2trt_lite.runtime import engine_file
from torch2trt_lite.runtime.structure import decode_tree

torchvision = pytest.importorskip("torchvision", reason="the roi_align tests need torchvision")
transformers = pytest.importorskip("transformers", reason="the Hugging Face tests need transformers")

from torchvision.ops import MultiScaleRoIAlign  # noqa: E402
from torchvision.ops import roi_align as ra  # noqa: E402  (bound at import: before any convert patches it)

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEQ, VOCAB = 12, 100
HF_SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)


class Keywords(nn.Module):
    """``model(input_ids=..., attention_mask=...)``: engines take positional tensors."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> Any:
        return self.model(input_ids=ids, attention_mask=mask)


def _tokens() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, VOCAB, (1, SEQ), generator=g, dtype=torch.int64)
    mask = torch.ones(1, SEQ, dtype=torch.int64)
    mask[:, -3:] = 0  # padding: the mask is not trivial
    return [ids, mask]


@pytest.fixture(scope="module")
def bert() -> tuple[nn.Module, list[torch.Tensor], torch2trt_lite.TRTModule]:
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=VOCAB, max_position_embeddings=64, **HF_SMALL)
    model = Keywords(transformers.BertModel(cfg)).eval()
    xs = _tokens()
    return model, xs, torch2trt_lite.convert(model, xs, backend="sim")


@pytest.fixture(scope="module")
def small() -> tuple[nn.Module, torch.Tensor, torch2trt_lite.TRTModule]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)).eval()
    x = torch.randn(2, 4)
    return model, x, torch2trt_lite.convert(model, [x], backend="sim")


# --------------------------------------------------------------------- 1. ModelOutput comes back
def _check_model_output(y: Any, eager: Any) -> None:
    assert type(y) is type(eager)
    assert list(y.keys()) == list(eager.keys()) == ["last_hidden_state", "pooler_output"]
    torch.testing.assert_close(y.last_hidden_state, eager.last_hidden_state, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(y[0], eager[0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(y["pooler_output"], eager["pooler_output"], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(y.to_tuple(), eager.to_tuple(), rtol=1e-4, atol=1e-5)


def test_hf_model_output_keeps_its_class(bert: tuple, tmp_path: pathlib.Path) -> None:
    model, xs, trt = bert
    with torch.no_grad():
        eager = model(*xs)
    _check_model_output(trt(*xs), eager)
    path = tmp_path / "bert.engine"
    trt.save(path)
    _check_model_output(torch2trt_lite.load(path)(*xs), eager)


def test_model_output_falls_back_to_a_dict(caplog: pytest.LogCaptureFixture) -> None:
    """A class whose module is not imported (or that is no ModelOutput) is never imported: a dict, in order."""
    leaves = [torch.zeros(1), torch.ones(1)]
    for module, qualname in (("transformers_not_imported_xyz.outputs", "Out"), ("collections", "OrderedDict")):
        spec = {"dict": [["b", {"t": 0}], ["a", {"t": 1}]], "model_output": {"module": module, "qualname": qualname}}
        with caplog.at_level(logging.WARNING, logger="torch2trt_lite"):
            out = decode_tree(spec, leaves)
        assert type(out) is dict and list(out) == ["b", "a"] and out["a"] is leaves[1]
        assert f"{module}.{qualname} is returned as a plain dict" in caplog.text
    assert "transformers_not_imported_xyz" not in sys.modules


def test_header_validation_bounds_model_output(bert: tuple) -> None:
    meta = bert[2].metadata
    engine_file.validate_meta(meta)  # the new node kind is accepted
    for bad in ({"module": "os; rm", "qualname": "X"}, {"module": "m", "qualname": "f.<locals>.X"},
                {"module": "m"}, "transformers.X", {"module": "m" * 2000, "qualname": "X"}):
        crafted = dict(meta, out_tree=dict(meta["out_tree"], model_output=bad))
        with pytest.raises(EngineFileError, match="model_output"):
            engine_file.validate_meta(crafted)


# ------------------------------------------------------------------------------ 2. GPT-2's cache
def test_gpt2_default_config_returns_its_cache() -> None:
    # use_cache defaults to True: the model returns a DynamicCache, which used to be refused (the fix
    # was use_cache=False); the engine now returns it too (tests/zoo/test_kv_cache.py covers decode steps)
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                                  bos_token_id=1, eos_token_id=2)
    model = Keywords(transformers.GPT2Model(cfg)).eval()
    xs = _tokens()
    got = torch2trt_lite.convert(model, xs, backend="sim")(*xs)
    with torch.no_grad():
        want = model(*xs)
    torch.testing.assert_close(got.last_hidden_state, want.last_hidden_state, rtol=1e-4, atol=1e-4)
    assert type(got.past_key_values) is type(want.past_key_values) is transformers.DynamicCache
    for a, b in zip(got.past_key_values.layers, want.past_key_values.layers, strict=True):
        torch.testing.assert_close(a.keys, b.keys, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(a.values, b.values, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------------- 3. pickle
def test_torch_save_and_deepcopy(small: tuple) -> None:
    model, x, trt = small
    buf = io.BytesIO()
    torch.save(trt, buf)
    buf.seek(0)
    again = torch.load(buf, weights_only=False)
    assert isinstance(again, torch2trt_lite.TRTModule) and again.plan_sha256 == trt.plan_sha256
    torch.testing.assert_close(again(x), trt(x), rtol=0, atol=0)
    torch.testing.assert_close(again(x), model(x).detach(), rtol=1e-5, atol=1e-6)
    dup = copy.deepcopy(trt)
    torch.testing.assert_close(dup(x), trt(x), rtol=0, atol=0)


def test_unpickling_checks_the_plan(small: tuple) -> None:
    state = small[2].__getstate__()
    engine = state["_t2tl_engine"]
    assert set(engine) == {"plan", "meta"} and isinstance(engine["plan"], bytes)  # plain data only
    plan = bytearray(engine["plan"])
    plan[len(plan) // 2] ^= 0xFF
    state["_t2tl_engine"] = dict(engine, plan=bytes(plan))
    fresh = torch2trt_lite.TRTModule.__new__(torch2trt_lite.TRTModule)
    with pytest.raises(EngineFileError, match="checksum mismatch"):
        fresh.__setstate__(state)


# ------------------------------------------------------------------ 4. torchvision's roi_align op
class BoundBefore(nn.Module):
    def forward(self, x: torch.Tensor, rois: torch.Tensor) -> torch.Tensor:
        return ra(x, rois, (3, 3), spatial_scale=0.5, sampling_ratio=2, aligned=True)


class OpOverload(nn.Module):
    def forward(self, x: torch.Tensor, rois: torch.Tensor) -> torch.Tensor:
        return torch.ops.torchvision.roi_align.default(x, rois, 0.25, 2, 4, -1, False)


@pytest.mark.parametrize("model", [BoundBefore(), OpOverload()], ids=["bound_before_convert", "op_default"])
def test_roi_align_op_converts(model: nn.Module) -> None:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 4, 16, 16, generator=g)
    rois = torch.tensor([[0, 1.0, 1.0, 20.0, 24.0], [1, 4.0, 6.0, 12.0, 14.0], [0, 0.5, 2.0, 30.0, 9.0]])
    trt = torch2trt_lite.convert(model.eval(), [x, rois], backend="sim")
    torch.testing.assert_close(trt(x, rois), model(x, rois), rtol=1e-5, atol=1e-5)
    rois2 = rois + 1.5
    rois2[:, 0] = torch.tensor([1.0, 0.0, 1.0])
    torch.testing.assert_close(trt(x, rois2), model(x, rois2), rtol=1e-5, atol=1e-5)


class MultiScale(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pool = MultiScaleRoIAlign(["p2", "p3"], 3, 2)

    def forward(self, p2: torch.Tensor, p3: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
        return self.pool({"p2": p2, "p3": p3}, [boxes], [(128, 128)])


def test_multiscale_roi_align_matches_eager() -> None:
    g = torch.Generator().manual_seed(4)
    p2, p3 = torch.randn(1, 4, 32, 32, generator=g), torch.randn(1, 4, 16, 16, generator=g)
    boxes = torch.tensor([[2.0, 3.0, 22.0, 20.0], [0.0, 1.0, 126.0, 120.0], [40.0, 10.0, 60.0, 90.0],
                          [5.0, 5.0, 125.0, 127.0]])
    model = MultiScale().eval()
    ref = model(p2, p3, boxes)
    assert model.pool.map_levels is not None
    assert set(model.pool.map_levels([boxes]).tolist()) == {0, 1}  # both levels are used
    trt = torch2trt_lite.convert(model, [p2, p3, boxes], backend="sim")
    torch.testing.assert_close(trt(p2, p3, boxes), ref, rtol=1e-5, atol=1e-5)
    other = boxes.flip(0) * torch.tensor([0.5, 0.9, 0.5, 0.9])  # other levels per box
    torch.testing.assert_close(trt(p2, p3, other), model(p2, p3, other), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------- 5. dtype casts
@pytest.mark.parametrize("cast", [
    lambda m: m.half(), lambda m: m.float(), lambda m: m.bfloat16(), lambda m: m.double(),
    lambda m: m.to(torch.float16), lambda m: m.to("cpu", torch.float16), lambda m: m.to(dtype=torch.bfloat16),
    lambda m: m.type(torch.float16),
], ids=["half", "float", "bfloat16", "double", "to_dtype", "to_device_dtype", "to_kw_dtype", "type"])
def test_dtype_casts_are_refused(small: tuple, cast: Any) -> None:
    with pytest.raises(Torch2TRTError, match="precision is fixed"):
        cast(small[2])


def test_device_moves_still_work(small: tuple) -> None:
    model, x, trt = small
    assert trt.to("cpu") is trt and trt.cpu() is trt and trt.to(torch.device("cpu")) is trt
    torch.testing.assert_close(trt(x), model(x).detach(), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------- 6. plain outputs
def test_outputs_have_no_autograd_history(small: tuple) -> None:
    model, x, trt = small
    y = trt(x.clone().requires_grad_())
    assert not y.requires_grad and y.grad_fn is None
    torch.testing.assert_close(y, model(x).detach(), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------ 7. load()'s hints
def test_load_hint_for_a_bare_sim_plan(small: tuple, tmp_path: pathlib.Path) -> None:
    from torch2trt_lite.sim import _plan

    assert engine_file.SIM_PLAN_MAGIC == _plan.MAGIC
    path = tmp_path / "model.plan"
    small[2].save_plan(path)
    with pytest.raises(EngineFileError, match=r"bare plan of the sim.*torch2trt_lite\.sim\.Runtime\(logger\)"):
        torch2trt_lite.load(path)
    import torch2trt_lite.sim as sim  # the hint works as written

    assert sim.Runtime(sim.Logger()).deserialize_cuda_engine(path.read_bytes()) is not None


def test_load_hint_for_other_data(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "model.plan"
    path.write_bytes(b"\x00ftrt-plan" + bytes(64))
    with pytest.raises(EngineFileError, match="tensorrt.Runtime") as e:
        torch2trt_lite.load(path)
    assert "sim" not in str(e.value)


# ---------------------------------------------------------------------- 8. the benchmark's ONNX skip
def test_bench_convert_says_onnx_is_skipped(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_convert", ROOT / "benchmarks" / "bench_convert.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setitem(sys.modules, "onnxscript", None)  # import onnxscript now raises ImportError
    reason = bench.onnx_skip_reason()
    assert reason is not None and "pip install 'torch2trt-lite[bench]'" in reason
    entry = bench.onnx_result(nn.Identity(), torch.zeros(1), True)
    assert entry == {"skipped": reason}
    assert "ONNX comparison skipped" in capsys.readouterr().err


# ------------------------------------------------------------------------ 9. cuda_graph on the sim
def test_cuda_graph_is_refused_on_the_sim(small: tuple, tmp_path: pathlib.Path) -> None:
    trt = small[2]
    with pytest.raises(Torch2TRTError, match="CUDA graphs need a real TensorRT backend on a GPU"):
        torch2trt_lite.TRTModule(bytes(trt.plan), trt.metadata, cuda_graph=True)
    path = tmp_path / "m.engine"
    trt.save(path)
    with pytest.raises(Torch2TRTError, match="CUDA graphs need a real TensorRT backend on a GPU"):
        torch2trt_lite.TRTModule.load(path, cuda_graph=True)
    assert not trt.cuda_graph
