"""Triton model repository export (torch2trt_lite.runtime.triton): config.pbtxt + VERSION/model.plan."""

from __future__ import annotations

import argparse
import os

import pytest
import torch

import torch2trt_lite
from torch2trt_lite.cli.triton import add_parser, cmd_export_triton
from torch2trt_lite.errors import Torch2TRTError
from torch2trt_lite.runtime import engine_file
from torch2trt_lite.runtime.triton import (
    config_text,
    export_triton,
    triton_config,
)

mc = pytest.importorskip("tritonclient.grpc.model_config_pb2", reason="tritonclient[grpc] is not installed")
from google.protobuf import text_format  # noqa: E402


class TwoInTwoOut(torch.nn.Module):
    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * 2.0 + 1.0, idx + 3


def _inputs() -> list[torch.Tensor]:
    return [torch.randn(2, 3), torch.arange(4, dtype=torch.int64)]


@pytest.fixture(scope="module")
def rtx_engine() -> torch2trt_lite.TRTModule:
    pytest.importorskip("tensorrt_rtx", reason="TensorRT-RTX (tensorrt_rtx) is not installed")
    return torch2trt_lite.convert(TwoInTwoOut().eval(), _inputs(), backend="tensorrt-rtx")


@pytest.fixture(scope="module")
def sim_engine() -> torch2trt_lite.TRTModule:
    return torch2trt_lite.convert(TwoInTwoOut().eval(), _inputs(), backend="sim")


def _read_config(model_dir: str) -> mc.ModelConfig:
    with open(os.path.join(model_dir, "config.pbtxt")) as f:
        return text_format.Parse(f.read(), mc.ModelConfig())


def _plan(model_dir: str, version: int = 1) -> bytes:
    with open(os.path.join(model_dir, str(version), "model.plan"), "rb") as f:
        return f.read()


def test_config_and_plan_of_a_tensorrt_rtx_engine(rtx_engine, tmp_path):
    xs = _inputs()
    ref = TwoInTwoOut()(*xs)  # the shapes Triton must be told are PyTorch's own
    model_dir = export_triton(rtx_engine, tmp_path / "repo", "toy", instances=2)
    assert model_dir == os.path.join(str(tmp_path / "repo"), "toy")
    cfg = _read_config(model_dir)
    assert cfg.name == "toy" and cfg.platform == "tensorrt_plan"
    assert cfg.max_batch_size == 0 and not cfg.HasField("dynamic_batching")
    assert [(i.name, mc.DataType.Name(i.data_type), list(i.dims)) for i in cfg.input] == [
        ("input_0", "TYPE_FP32", list(xs[0].shape)), ("input_1", "TYPE_INT64", list(xs[1].shape)),
    ]
    assert [(o.name, mc.DataType.Name(o.data_type), list(o.dims)) for o in cfg.output] == [
        ("output_0", "TYPE_FP32", list(ref[0].shape)), ("output_1", "TYPE_INT64", list(ref[1].shape)),
    ]
    assert [(g.count, mc.ModelInstanceGroup.Kind.Name(g.kind)) for g in cfg.instance_group] == [(2, "KIND_GPU")]
    assert _plan(model_dir) == bytes(rtx_engine.plan)
    assert sorted(os.listdir(model_dir)) == ["1", "config.pbtxt"]  # no temporary folder is left
    assert os.listdir(os.path.join(model_dir, "1")) == ["model.plan"]


def test_cli_subcommand_from_an_engine_file(rtx_engine, tmp_path):
    path = tmp_path / "toy.engine"
    rtx_engine.save(path)
    parser = argparse.ArgumentParser(prog="torch2trt-lite")
    sub = parser.add_subparsers(dest="command", required=True)
    p = add_parser(sub)
    assert all(a.help for a in p._actions), "every option of export-triton has help text"
    args = parser.parse_args(
        ["export-triton", str(path), str(tmp_path / "repo"), "--name", "toy", "--instances", "3", "--kind", "cpu"]
    )
    assert args.fn is cmd_export_triton
    assert args.fn(args) == 0
    model_dir = str(tmp_path / "repo" / "toy")
    cfg = _read_config(model_dir)
    assert [(g.count, mc.ModelInstanceGroup.Kind.Name(g.kind)) for g in cfg.instance_group] == [(3, "KIND_CPU")]
    assert _plan(model_dir) == bytes(engine_file.read(path)[1]) == bytes(rtx_engine.plan)
    # a Namespace built by hand (as another CLI would) works too
    ns = argparse.Namespace(engine=str(path), repo=str(tmp_path / "repo2"), name="toy", max_batch_size=None,
                            instances=1, kind="gpu")
    assert cmd_export_triton(ns) == 0
    assert _read_config(str(tmp_path / "repo2" / "toy")).instance_group[0].count == 1
    with pytest.raises(SystemExit):
        parser.parse_args(["export-triton", str(path), "repo", "--name", "toy", "--instances", "0"])


def test_sim_engine_is_refused_unless_allowed(sim_engine, tmp_path):
    with pytest.raises(Torch2TRTError, match="not a TensorRT plan.*allow_sim=True"):
        export_triton(sim_engine, tmp_path, "toy")
    assert not os.path.exists(tmp_path / "toy")
    model_dir = export_triton(sim_engine, tmp_path, "toy", allow_sim=True)
    assert _plan(model_dir) == bytes(sim_engine.plan)
    assert _read_config(model_dir).platform == "tensorrt_plan"


def test_max_batch_size_on_a_static_engine_is_refused(rtx_engine, tmp_path):
    with pytest.raises(Torch2TRTError, match="the engine's input batch is fixed at 2; convert with a dynamic batch"):
        export_triton(rtx_engine, tmp_path, "toy", max_batch_size=8)
    assert not os.path.exists(tmp_path / "toy" / "1")
    assert export_triton(rtx_engine, tmp_path, "toy", max_batch_size=0)  # 0: no batching, accepted


def test_existing_version_folder_is_refused_unless_overwrite(rtx_engine, sim_engine, tmp_path):
    model_dir = export_triton(sim_engine, tmp_path, "toy", allow_sim=True)
    with pytest.raises(Torch2TRTError, match="already exists; pass overwrite=True"):
        export_triton(rtx_engine, tmp_path, "toy")
    assert _plan(model_dir) == bytes(sim_engine.plan)  # untouched
    export_triton(rtx_engine, tmp_path, "toy", overwrite=True)
    assert _plan(model_dir) == bytes(rtx_engine.plan)
    export_triton(rtx_engine, tmp_path, "toy", version=2)
    assert sorted(os.listdir(model_dir)) == ["1", "2", "config.pbtxt"]
    for bad in ("", "..", "a/b", ".hidden"):
        with pytest.raises(Torch2TRTError, match="must be a folder name"):
            export_triton(rtx_engine, tmp_path, bad)


def _dynamic_meta(meta: dict) -> dict:
    meta["inputs"][0].update(shape=[-1, 3], min=[1, 3], max=[8, 3])
    meta["inputs"][1].update(shape=[-1], min=[1], max=[8])
    meta["outputs"][0]["shape"] = [-1, 3]
    meta["outputs"][1]["shape"] = [-1]
    return meta


def test_dynamic_batch_range_gives_dynamic_batching(rtx_engine, tmp_path):
    meta = _dynamic_meta(rtx_engine.metadata)
    cfg = text_format.Parse(config_text(triton_config(meta, "dyn")), mc.ModelConfig())
    assert cfg.max_batch_size == 8 and cfg.HasField("dynamic_batching")
    assert [list(i.dims) for i in cfg.input] == [[3], [1]]  # without the batch dim
    assert [list(o.dims) for o in cfg.output] == [[3], [1]]
    # a rank-1 batched tensor is one scalar per request: dims [1] reshaped to []
    assert [i.HasField("reshape") and list(i.reshape.shape) == [] for i in cfg.input] == [False, True]
    assert triton_config(meta, "dyn", max_batch_size=4).max_batch_size == 4
    flat = triton_config(meta, "dyn", max_batch_size=0)
    assert flat.max_batch_size == 0 and not flat.HasField("dynamic_batching")
    assert [list(i.dims) for i in flat.input] == [[-1, 3], [-1]]
    with pytest.raises(Torch2TRTError, match="over the engine's batch range"):
        triton_config(meta, "dyn", max_batch_size=16)
    # through export_triton: a TRTModule holding the dynamic metadata (a real plan, not run here)
    module = torch2trt_lite.TRTModule(bytes(rtx_engine.plan), meta)
    cfg = _read_config(export_triton(module, tmp_path, "dyn"))
    assert cfg.max_batch_size == 8 and cfg.HasField("dynamic_batching")


def test_batch_range_not_from_one_is_not_batched(rtx_engine):
    meta = _dynamic_meta(rtx_engine.metadata)
    meta["inputs"][0].update(min=[2, 3])
    assert triton_config(meta, "dyn").max_batch_size == 0
    with pytest.raises(Torch2TRTError, match="batch ranges from 2 to 8"):
        triton_config(meta, "dyn", max_batch_size=4)
