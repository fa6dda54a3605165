"""Issue 27: a state dict's metadata is checksummed and cross-checked against the plan; output
structure nodes are checked at load (not at the first call); a huge engine file is refused from
its first bytes, before its plan is hashed."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import time
from typing import Any

import pytest
import torch

import torch2trt_lite
from torch2trt_lite.errors import EngineFileError
from torch2trt_lite.runtime import engine_file, state


class Net(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> Any:
        y = x * 2 + 1
        return {"top": torch.max(y, 1), "sum": y.sum(1, keepdim=True)}


X = torch.randn(2, 5, generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def trt() -> torch2trt_lite.TRTModule:
    return torch2trt_lite.convert(Net().eval(), [X], backend="sim")


def _meta(sd: dict[str, torch.Tensor]) -> dict[str, Any]:
    return json.loads(bytes(sd["metadata"].numpy().tobytes()))


def _with_meta(trt: torch2trt_lite.TRTModule, meta: dict[str, Any], *, seal: bool) -> dict[str, torch.Tensor]:
    sd = trt.state_dict()
    data = state.sealed_meta(meta) if seal else meta
    sd["metadata"] = torch.frombuffer(bytearray(json.dumps(data).encode()), dtype=torch.uint8)
    return sd


def _refused(target: torch2trt_lite.TRTModule, sd: dict[str, torch.Tensor], match: str) -> None:
    want = Net()(X)
    with pytest.raises(EngineFileError, match=match):
        target.load_state_dict(sd)
    got = target(X)  # the module keeps the engine it had, and it still runs
    torch.testing.assert_close(got["top"].values, want["top"].values, rtol=1e-6, atol=1e-6)
    assert torch.equal(got["top"].indices, want["top"].indices)


def test_state_dict_metadata_carries_a_checksum(trt: torch2trt_lite.TRTModule) -> None:
    m = _meta(trt.state_dict())
    assert m[state.META_SHA256] == state.meta_digest({k: v for k, v in m.items() if k != state.META_SHA256})
    assert state.META_SHA256 not in trt.metadata  # the module's own metadata has none


def test_edited_metadata_is_refused_by_its_checksum(trt: torch2trt_lite.TRTModule) -> None:
    target = torch2trt_lite.TRTModule()
    target.load_state_dict(trt.state_dict())
    m = _meta(trt.state_dict())
    m["outputs"][0]["dtype"] = "int32"  # returned the float bits as int32 before the checksum
    _refused(target, _with_meta(trt, m, seal=False), "metadata checksum mismatch")
    tree = _meta(trt.state_dict())
    tree["out_tree"]["dict"].reverse()  # another structure, still valid for the schema
    _refused(target, _with_meta(trt, tree, seal=False), "metadata checksum mismatch")
    bare = {k: v for k, v in _meta(trt.state_dict()).items() if k != state.META_SHA256}
    _refused(target, _with_meta(trt, bare, seal=False), "no metadata checksum")


def test_every_metadata_byte_flip_is_refused(trt: torch2trt_lite.TRTModule) -> None:
    """A flip either breaks the JSON, the schema or the checksum; none loads as another engine."""
    target = torch2trt_lite.TRTModule()
    sd = trt.state_dict()
    raw = bytes(sd["metadata"].numpy().tobytes())
    loaded = []
    for k in range(0, len(raw), 7):
        b = bytearray(raw)
        b[k] ^= 1 << (k % 8)
        try:
            target.load_state_dict(dict(sd, metadata=torch.frombuffer(b, dtype=torch.uint8)))
        except EngineFileError:
            continue
        loaded.append((k, chr(raw[k]), chr(b[k])))
    assert loaded == []


def test_resealed_metadata_is_cross_checked_against_the_plan(trt: torch2trt_lite.TRTModule) -> None:
    """Metadata with a valid checksum (rewritten on purpose) must still be the plan's own."""
    target = torch2trt_lite.TRTModule()
    target.load_state_dict(trt.state_dict())
    cases: dict[str, tuple[Any, str]] = {
        "output dtype": (lambda m: m["outputs"][0].update(dtype="int32"), "dtype float32, but|dtype int32, but"),
        "input dtype": (lambda m: m["inputs"][0].update(dtype="float16"), "dtype float16, but"),
        "output rank": (lambda m: m["outputs"][1].update(shape=[2, 1, 1]), "does not fit the engine's shape"),
        "output size": (lambda m: m["outputs"][2].update(shape=[3, 1]), "does not fit the engine's shape"),
        "input range": (lambda m: m["inputs"][0].update(min=[1, 5], max=[4, 5], shape=[2, 5]), "does not fit"),
        "output dropped": (lambda m: m["outputs"].pop(), "does not name"),
        "input as output": (lambda m: m["outputs"].append(m["inputs"].pop()), "the engine has it as an input"),
    }
    for name, (edit, match) in cases.items():
        m = _meta(trt.state_dict())
        edit(m)
        if name == "output dropped":
            m["out_tree"] = {"tuple": [{"t": 0}, {"t": 1}]}
        if name == "input as output":
            m["out_tree"] = {"tuple": [{"t": i} for i in range(len(m["outputs"]))]}
        with pytest.raises(EngineFileError, match=match):
            target.load_state_dict(_with_meta(trt, m, seal=True))
        with pytest.raises(EngineFileError, match=match):
            torch2trt_lite.TRTModule(bytes(trt.plan), {k: v for k, v in m.items() if k != state.META_SHA256})
    torch.testing.assert_close(target(X)["sum"], Net()(X)["sum"], rtol=1e-6, atol=1e-6)


def test_return_type_node_of_the_wrong_arity_is_refused_at_load(trt: torch2trt_lite.TRTModule, tmp_path: Any) -> None:
    m = trt.metadata
    node = dict(m["out_tree"]["dict"])["top"]
    assert node.get("return_type") == "max"
    node["tuple"].append({"t": 2})  # torch.return_types.max of 3 items: a TypeError at the first call before
    path = str(tmp_path / "bad.engine")
    with open(path, "wb") as f:
        f.write(engine_file.pack(m, trt.plan))
    with pytest.raises(EngineFileError, match=r"return_types\.max"):
        torch2trt_lite.load(path)
    with pytest.raises(EngineFileError, match=r"return_types\.max"):
        torch2trt_lite.TRTModule().load_state_dict(_with_meta(trt, m, seal=True))


@pytest.mark.parametrize("backend", ["sim", "tensorrt-rtx"])
def test_huge_file_is_refused_before_its_plan_is_hashed(trt: torch2trt_lite.TRTModule, tmp_path: Any,
                                                        backend: str) -> None:
    """A 10 GB sparse file whose header is valid and claims its size (37 s of hashing before)."""
    header = dict(trt.metadata, backend=backend)
    n = 10 * 10**9
    body = json.dumps(dict(header, plan_nbytes=n, plan_sha256="0" * 64), sort_keys=True).encode()
    ident = struct.pack("<8sII", engine_file.MAGIC, engine_file.FORMAT_VERSION, len(body))
    path = str(tmp_path / "huge.engine")
    with open(path, "wb") as f:
        f.write(ident + hashlib.sha256(ident + body).digest() + body)
        f.truncate(f.tell() + n)
    try:
        t0 = time.perf_counter()
        with pytest.raises(EngineFileError, match="does not start as a"):
            torch2trt_lite.load(path)
        assert time.perf_counter() - t0 < 5.0  # hashing 10 GB takes tens of seconds
    finally:
        os.unlink(path)


def test_sim_plan_declaring_a_header_beyond_the_file_is_refused_before_hashing(
    trt: torch2trt_lite.TRTModule, tmp_path: Any,
) -> None:
    plan = bytearray(trt.plan)
    struct.pack_into("<Q", plan, 12, 1 << 40)
    with pytest.raises(EngineFileError, match="do not fit"):
        engine_file.unpack(engine_file.pack(trt.metadata, plan))
