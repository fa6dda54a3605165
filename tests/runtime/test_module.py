"""TRTModule and engine files: input validation, output structures, save/load, state_dict."""

from __future__ import annotations

import collections
import io
import json
import os
import struct

import pytest
import torch

import torch2trt_lite
from torch2trt_lite.errors import EngineFileError, RuntimeExecutionError
from torch2trt_lite.runtime import engine_file


class Structured(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, object]:
        a = torch.relu(x)
        return {"a": a, "pair": (torch.sigmoid(y), [torch.tanh(x), a]), "none": None}


@pytest.fixture(scope="module")
def structured() -> tuple[torch.nn.Module, list[torch.Tensor], torch2trt_lite.TRTModule]:
    m = Structured().eval()
    xs = [torch.randn(2, 3), torch.randn(4)]
    return m, xs, torch2trt_lite.convert(m, xs, backend="sim")


def test_output_structure_matches(structured: tuple) -> None:
    m, xs, t = structured
    torch.testing.assert_close(t(*xs), m(*xs), rtol=1e-5, atol=1e-6)
    assert t.input_names == ["input_0", "input_1"]
    assert t.backend == "sim" and t.num_layers == 4


def test_input_validation(structured: tuple) -> None:
    m, xs, t = structured
    with pytest.raises(RuntimeExecutionError, match="expected 2 input"):
        t(xs[0])
    with pytest.raises(RuntimeExecutionError, match="dtype"):
        t(xs[0].half(), xs[1])
    with pytest.raises(RuntimeExecutionError, match="outside the engine's range"):
        t(torch.randn(3, 3), xs[1])
    with pytest.raises(RuntimeExecutionError, match="torch.Tensor"):
        t(xs[0], [1, 2, 3, 4])


def test_non_contiguous_input(structured: tuple) -> None:
    m, xs, t = structured
    x = torch.randn(3, 2).t()
    assert not x.is_contiguous()
    torch.testing.assert_close(t(x, xs[1]), m(x, xs[1]), rtol=1e-5, atol=1e-6)


def test_save_load_bit_identical(structured: tuple, tmp_path: object) -> None:
    m, xs, t = structured
    path = os.path.join(str(tmp_path), "m.engine")
    t.save(path)
    assert [f for f in os.listdir(str(tmp_path)) if f.startswith(".t2tl-")] == []
    again = torch2trt_lite.load(path)
    torch.testing.assert_close(again(*xs), t(*xs), rtol=0, atol=0)  # every leaf, bit for bit, and the structure
    assert again.metadata["inputs"] == t.metadata["inputs"]


def _saved(t: torch2trt_lite.TRTModule, tmp_path: object) -> tuple[str, bytes]:
    path = os.path.join(str(tmp_path), "e.engine")
    t.save(path)
    with open(path, "rb") as f:
        return path, f.read()


def test_truncated_corrupt_foreign_and_versioned_files(structured: tuple, tmp_path: object) -> None:
    _, _, t = structured
    path, data = _saved(t, tmp_path)
    cases = {  # what the file holds, what the error must say
        "truncated": (data[: len(data) // 2], "truncated"),
        "corrupt": (data[:-10] + bytes(b ^ 0xFF for b in data[-10:]), "checksum mismatch"),
        "foreign": (b"\x7fELF" + data[4:], "not a torch2trt-lite engine file"),
        "empty": (b"", "truncated"),
    }
    for blob, msg in cases.values():
        with open(path, "wb") as f:
            f.write(blob)
        with pytest.raises(EngineFileError, match=msg):
            torch2trt_lite.load(path)
    header, plan = engine_file.unpack(data)
    with open(path, "wb") as f:
        f.write(struct.pack("<8sII", engine_file.MAGIC, 99, 0))
    with pytest.raises(EngineFileError, match="format version 99"):
        torch2trt_lite.load(path)
    for key, value, msg in (("api_version", "9.0", "9.0"), ("format", 7, "format"), ("backend", "onnx", "onnx")):
        bad = dict(header, **{key: value})
        with open(path, "wb") as f:
            f.write(engine_file.pack(bad, plan))
        with pytest.raises(EngineFileError, match=msg):
            torch2trt_lite.load(path)
    with pytest.raises(EngineFileError, match="cannot read"):
        torch2trt_lite.load(os.path.join(str(tmp_path), "missing.engine"))


def test_corrupt_plan_inside_valid_container(structured: tuple) -> None:
    _, _, t = structured
    plan = bytearray(t.plan)
    plan[40] ^= 0xFF
    with pytest.raises(EngineFileError, match="checksum"):
        torch2trt_lite.TRTModule(bytes(plan), t.metadata)


def test_state_dict_round_trip_weights_only(structured: tuple) -> None:
    m, xs, t = structured
    buf = io.BytesIO()
    torch.save(t.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf, weights_only=True)
    fresh = torch2trt_lite.TRTModule()
    fresh.load_state_dict(sd)
    torch.testing.assert_close(fresh(*xs), t(*xs), rtol=0, atol=0)
    assert json.loads(bytes(sd["metadata"].numpy().tobytes()))["backend"] == "sim"


def test_empty_module_errors() -> None:
    with pytest.raises(RuntimeExecutionError, match="no engine"):
        torch2trt_lite.TRTModule()(torch.randn(1))


def test_bare_plan_is_written(structured: tuple, tmp_path: object) -> None:
    _, _, t = structured
    path = os.path.join(str(tmp_path), "bare.plan")
    t.save_plan(path)
    with open(path, "rb") as f:
        assert f.read() == t.plan


def test_engine_file_is_header_then_plan(structured: tuple, tmp_path: object) -> None:
    _, xs, t = structured
    path, data = _saved(t, tmp_path)
    assert data == engine_file.pack(t.metadata, t.plan)  # written in two pieces, the same bytes
    header, plan = engine_file.read(path)
    assert isinstance(plan, bytearray) and plan == t.plan and header == engine_file.unpack(data)[0]
    with open(path, "ab") as f:
        f.write(b"x")
    with pytest.raises(EngineFileError, match="trailing data"):
        torch2trt_lite.load(path)


def test_uninitialized_buffers() -> None:
    from torch2trt_lite import _buffers

    buf = _buffers.uninitialized(1 << 20)
    assert isinstance(buf, bytearray) and len(buf) == 1 << 20
    buf[:] = b"\x01" * len(buf)  # writable in full
    assert not _buffers.grow(buf, 10) and len(buf) == 1 << 20  # only an empty buffer grows
    assert _buffers.uninitialized(0) == bytearray()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (runs the sim on CUDA tensors)")
def test_sim_runs_on_cuda_tensors(structured: tuple) -> None:
    m, xs, t = structured
    cx = [x.cuda() for x in xs]
    got = t(*cx)
    assert got["a"].is_cuda
    torch.testing.assert_close(got, m(*cx), rtol=1e-5, atol=1e-6)


def test_named_outputs_keep_their_types(tmp_path: object) -> None:
    """torch.max(x, 0) returns torch.return_types.max and models return namedtuples: the engine
    gives back the same types (their fields by name), also after a save and a load."""
    pair = collections.namedtuple("pair", "a b")

    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[object, object]:
            return torch.max(x, 0), pair(x * 2, x.sum())

    x = torch.randn(3, 2)
    t = torch2trt_lite.convert(M().eval(), [x], backend="sim")
    path = os.path.join(str(tmp_path), "nt.engine")
    t.save(path)
    for m in (t, torch2trt_lite.load(path)):
        (mx, p) = m(x)
        assert isinstance(mx, torch.return_types.max) and torch.equal(mx.indices, x.max(0).indices)
        assert type(p).__name__ == "pair" and p._fields == ("a", "b")
        torch.testing.assert_close(p.a, x * 2)
