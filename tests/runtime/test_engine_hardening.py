"""Issue 12: TRTModule from several threads, engine-file integrity, hostile files and plans, bounded
memory, atomic load_state_dict, save() modes / errors / stale temporary files, plan aliasing."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import struct
import subprocess
import sys
import threading
import time
import tracemalloc
from typing import Any

import pytest
import torch

import torch2trt_lite
from torch2trt_lite import sim
from torch2trt_lite.errors import EngineFileError, Torch2TRTError
from torch2trt_lite.runtime import engine_file, module, state, structure
from torch2trt_lite.sim import _plan, _runtime


class Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 8 * 8, 16)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        y = torch.relu(self.conv(x))
        z = self.fc(y.flatten(1))
        return {"logits": z, "probs": torch.softmax(z, 1)}


X = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def small() -> torch2trt_lite.TRTModule:
    return torch2trt_lite.convert(Small().eval(), [X], backend="sim")


@pytest.fixture(scope="module")
def engine_bytes(small: torch2trt_lite.TRTModule) -> bytes:
    return engine_file.pack(small.metadata, small.plan)


class _Logger(sim.ILogger):
    def __init__(self) -> None:
        sim.ILogger.__init__(self)
        self.errors: list[str] = []

    def log(self, severity: Any, msg: str) -> None:
        if int(severity) <= int(sim.ILogger.Severity.ERROR):
            self.errors.append(msg)


def _deserialize(plan: bytes | bytearray) -> tuple[Any, list[str]]:
    logger = _Logger()
    return sim.Runtime(logger).deserialize_cuda_engine(plan), logger.errors


def _seal(header: dict[str, Any], blob: bytes | memoryview) -> bytes:
    """A sim plan with ``header`` and the weight area ``blob``, with a valid CRC-32."""
    body = json.dumps(header).encode()
    data = _plan._HEAD.pack(_plan.MAGIC, 2, len(body)) + body + bytes(blob)
    return data + _plan._CRC.pack(_plan.crc32(memoryview(data)))


def _unseal(plan: Any) -> tuple[dict[str, Any], bytes]:
    header, blob = _plan.parse(bytes(plan))
    return header, bytes(blob)


# ------------------------------------------------------------------------------- 1. threads
def test_concurrent_calls_are_correct(small: torch2trt_lite.TRTModule) -> None:
    g = torch.Generator().manual_seed(5)
    inputs = [torch.randn(2, 3, 8, 8, generator=g) for _ in range(8)]
    serial = [small(x) for x in inputs]
    wrong: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def work(k: int) -> None:
        try:
            start.wait()
            for _ in range(50):
                got = small(inputs[k])
                if not all(torch.equal(got[n], serial[k][n]) for n in ("logits", "probs")):
                    wrong.append(k)
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert not wrong, f"{len(wrong)} of 400 concurrent calls returned another thread's result"
    assert "thread" in (module.TRTModule.__doc__ or "").lower()


# ------------------------------------------------------------------------- 2. integrity
def test_every_header_bit_flip_is_refused(small: torch2trt_lite.TRTModule, engine_bytes: bytes, tmp_path: Any) -> None:
    n = struct.unpack_from("<I", engine_bytes, 12)[0]
    end = engine_file._HEAD.size + n
    data = bytearray(engine_bytes)
    for bit in range(end * 8):
        data[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(EngineFileError):
            engine_file.unpack(data)
        data[bit // 8] ^= 1 << (bit % 8)
    g = torch.Generator().manual_seed(0)
    path = str(tmp_path / "e.engine")
    bits = list(range(0, end * 8, 97)) + [
        end * 8 + int(b) for b in torch.randint(0, (len(data) - end) * 8, (64,), generator=g)
    ]
    for bit in bits:  # through load(), header and plan bits
        data[bit // 8] ^= 1 << (bit % 8)
        with open(path, "wb") as f:
            f.write(data)
        with pytest.raises(EngineFileError):
            torch2trt_lite.load(path)
        data[bit // 8] ^= 1 << (bit % 8)
    with open(path, "wb") as f:
        f.write(data)
    assert torch.equal(torch2trt_lite.load(path)(X)["logits"], small(X)["logits"])


def test_old_file_format_is_refused_with_a_message(engine_bytes: bytes, tmp_path: Any) -> None:
    header, plan = engine_file.unpack(engine_bytes)
    body = json.dumps(header).encode()
    path = str(tmp_path / "v1.engine")
    with open(path, "wb") as f:
        f.write(struct.pack("<8sII", engine_file.MAGIC, 1, len(body)) + body + bytes(plan))
    with pytest.raises(EngineFileError, match=r"format version 1 .*older.*convert the model again"):
        torch2trt_lite.load(path)
    assert engine_file.FORMAT_VERSION == 2


# ------------------------------------------------------------------------ 3. hostile headers
def _deep(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"t": 0}
    for _ in range(depth):
        node = {"list": [node]}
    return node


_HEADER_CASES: dict[str, Any] = {
    "inputs None": lambda h: h.update(inputs=None),
    "input shape strings": lambda h: h["inputs"][0].update(shape=["a", 3]),
    "shape below -1": lambda h: h["inputs"][0].update(shape=[-2, 3, 8, 8]),
    "min > max": lambda h: h["inputs"][0].update(min=[3, 3, 8, 8], max=[2, 3, 8, 8]),
    "min wrong rank": lambda h: h["inputs"][0].update(min=[2, 3]),
    "huge dim": lambda h: h["inputs"][0].update(shape=[2**70, 3, 8, 8]),
    "bool dim": lambda h: h["inputs"][0].update(shape=[True, 3, 8, 8]),
    "unknown dtype": lambda h: h["outputs"][0].update(dtype="float128"),
    "duplicate names": lambda h: h["outputs"][1].update(name=h["outputs"][0]["name"]),
    "empty name": lambda h: h["outputs"][0].update(name=""),
    "name not a str": lambda h: h["inputs"][0].update(name=7),
    "no outputs": lambda h: h.update(outputs=[]),
    "too many outputs": lambda h: h.update(outputs=h["outputs"] * 3000),
    "output not an object": lambda h: h["outputs"].__setitem__(0, "x"),
    "tree missing": lambda h: h.pop("out_tree"),
    "tree leaf out of range": lambda h: h.update(out_tree={"t": 99}),
    "tree leaf negative": lambda h: h.update(out_tree={"t": -1}),
    "tree leaf a string": lambda h: h.update(out_tree={"t": "0"}),
    "tree nested too deep": lambda h: h.update(out_tree=_deep(200)),
    "tree node unknown": lambda h: h.update(out_tree={"set": []}),
    "tree dict pair": lambda h: h.update(out_tree={"dict": [["a"]]}),
    "tree dict key float": lambda h: h.update(out_tree={"dict": [[1.5, {"t": 0}]]}),
    "namedtuple 100k fields": lambda h: h.update(
        out_tree={"tuple": [{"t": 0}] * 100_000, "namedtuple": "P", "fields": [f"f{i}" for i in range(100_000)]}
    ),
    "namedtuple bad field": lambda h: h.update(out_tree={"tuple": [{"t": 0}], "namedtuple": "P", "fields": ["_x"]}),
    "namedtuple bad name": lambda h: h.update(out_tree={"tuple": [{"t": 0}], "namedtuple": "a b", "fields": ["x"]}),
    "namedtuple field count": lambda h: h.update(out_tree={"tuple": [{"t": 0}], "namedtuple": "P", "fields": []}),
    "unknown return type": lambda h: h.update(out_tree={"tuple": [{"t": 0}], "return_type": "__class__"}),
    "capability a string": lambda h: h.update(device_capability="8.0"),
    "num_layers negative": lambda h: h.update(num_layers=-5),
    "plugins a string": lambda h: h.update(plugins="yes"),
}


@pytest.mark.parametrize("case", sorted(_HEADER_CASES))
def test_hostile_header_is_refused_at_load(engine_bytes: bytes, tmp_path: Any, case: str) -> None:
    header, plan = engine_file.unpack(engine_bytes)
    path = str(tmp_path / "h.engine")
    _HEADER_CASES[case](header)
    data = engine_file.pack(header, plan)
    with open(path, "wb") as f:
        f.write(data)
    with pytest.raises(EngineFileError, match="engine metadata|header"):
        torch2trt_lite.load(path)


def test_deeply_nested_json_header_is_refused(engine_bytes: bytes) -> None:
    body = b"[" * 100_000 + b"]" * 100_000
    ident = struct.pack("<8sII", engine_file.MAGIC, engine_file.FORMAT_VERSION, len(body))
    data = ident + hashlib.sha256(ident + body).digest() + body
    with pytest.raises(EngineFileError, match="nested too deeply|corrupt"):
        engine_file.unpack(data)


def test_namedtuple_cache_is_bounded() -> None:
    assert structure._namedtuple.cache_info().maxsize is not None
    assert engine_file.MAX_FIELDS <= 1000


def _plan_cases(plan: Any) -> dict[str, bytes]:
    header, blob = _unseal(plan)

    def mutated(fn: Any) -> bytes:
        h = json.loads(json.dumps(header))
        fn(h)
        return _seal(h, blob)

    conv = next(i for i, r in enumerate(header["layers"]) if r["cls"] == "IConvolutionLayer")
    deep_header = json.loads(json.dumps(header))
    deep_header["layers"][conv]["attrs"]["stride_nd"] = "DEEP"
    body = json.dumps(deep_header).replace('"DEEP"', '{"__d__": [' * 480 + "0" + "]}" * 480).encode()
    deep = _plan._HEAD.pack(_plan.MAGIC, 2, len(body)) + body + blob
    deep += _plan._CRC.pack(_plan.crc32(memoryview(deep)))
    return {
        "tensors a string": mutated(lambda h: h.update(tensors="x")),
        "tensor dtype unknown": mutated(lambda h: h["tensors"][0].update(dtype="FLOAT128")),
        "tensor shape floats": mutated(lambda h: h["tensors"][0].update(shape=[1.5])),
        "input id out of range": mutated(lambda h: h["inputs"][0].update(tensor=10**6)),
        "output id a string": mutated(lambda h: h.update(outputs=["0"])),
        "no layers key": mutated(lambda h: h.pop("layers")),
        "layer class a number": mutated(lambda h: h["layers"][0].update(cls=5)),
        "layer class unknown": mutated(lambda h: h["layers"][0].update(cls="IFooLayer")),
        "layer input out of range": mutated(lambda h: h["layers"][0].update(inputs=[10**9])),
        "attrs a list": mutated(lambda h: h["layers"][conv].update(attrs=[])),
        "enum unknown": mutated(lambda h: h["layers"][conv]["attrs"].update(padding_mode={"__e__": "PaddingMode.NOPE"})),
        "enum not a str": mutated(lambda h: h["layers"][conv]["attrs"].update(padding_mode={"__e__": 3})),
        "weight outside the file": mutated(
            lambda h: h["layers"][conv]["attrs"].update(kernel={"__w__": [0, 10**12], "dtype": "FLOAT", "shape": [10**12 // 4]})
        ),
        "weight shape wrong": mutated(
            lambda h: h["layers"][conv]["attrs"]["kernel"].update(shape=[7])
        ),
        "weight record strings": mutated(lambda h: h["layers"][conv]["attrs"].update(kernel={"__w__": ["a", "b"]})),
        "num_output_maps a string": mutated(lambda h: h["layers"][conv]["attrs"].update(num_output_maps="8")),
        "value nested too deep": deep,
        "profiles a dict": mutated(lambda h: h.update(profiles={})),
        "header a list": _seal([], blob),  # type: ignore[arg-type]
        "json too deep": (lambda body: (lambda d: d + _plan._CRC.pack(_plan.crc32(memoryview(d))))(
            _plan._HEAD.pack(_plan.MAGIC, 2, len(body)) + body))(b"[" * 50_000 + b"]" * 50_000),
        "empty": b"",
        "garbage": bytes(range(256)) * 4,
    }


def test_malformed_plans_deserialize_to_none(small: torch2trt_lite.TRTModule) -> None:
    for name, data in _plan_cases(small.plan).items():
        engine, errors = _deserialize(data)
        assert engine is None, name
        assert errors and errors[-1], name


def test_malformed_plan_is_engine_file_error_in_trtmodule(small: torch2trt_lite.TRTModule) -> None:
    meta = small.metadata
    for name, data in _plan_cases(small.plan).items():
        with pytest.raises(EngineFileError, match="could not deserialize"):
            torch2trt_lite.TRTModule(data, meta)
        assert name


# --------------------------------------------------------------------- 4. out-of-bounds write
class Relu(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def _shrunk_output_plan() -> bytes:
    t = torch2trt_lite.convert(Relu().eval(), [torch.randn(1, 8)], backend="sim")
    header, blob = _unseal(t.plan)
    header["tensors"][header["outputs"][0]]["shape"] = [1, 4]  # declared smaller than computed
    return _seal(header, blob)


def test_declared_output_smaller_than_real_is_refused_at_deserialize() -> None:
    engine, errors = _deserialize(_shrunk_output_plan())
    assert engine is None and "declares" in errors[-1]


def test_raw_address_output_is_never_overrun(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_runtime.ICudaEngine, "_validate", lambda self: None)  # past the load-time check
    engine, _ = _deserialize(_shrunk_output_plan())
    assert engine is not None
    logger = engine._logger
    ctx = engine.create_execution_context()
    x = torch.ones(1, 8)
    out_name = engine.get_tensor_name(1)
    declared = tuple(engine.get_tensor_shape(out_name))
    assert declared == (1, 4)
    memory = torch.full((4 + 64,), -7.0)  # the declared 4 floats, then a guard
    ctx.set_input_shape(engine.get_tensor_name(0), (1, 8))
    ctx.set_tensor_address(engine.get_tensor_name(0), x)
    ctx.set_tensor_address(out_name, memory.data_ptr())
    assert ctx.execute_async_v3(0) is False
    assert torch.equal(memory[4:], torch.full((64,), -7.0)), "the sim wrote past the declared buffer"
    assert any("declares" in e or "refusing" in e for e in logger.errors)


# ------------------------------------------------------------------------- 5. bounded memory
def test_huge_num_output_maps_is_refused_at_deserialize(small: torch2trt_lite.TRTModule) -> None:
    header, blob = _unseal(small.plan)
    for rec in header["layers"]:
        if rec["cls"] == "IConvolutionLayer":
            rec["attrs"]["num_output_maps"] = 2**40
            for o in rec["outputs"]:
                header["tensors"][o]["shape"][1] = 2**40  # declared consistently: only the size is wrong
    data = _seal(header, blob)
    engine, errors = _deserialize(data)
    assert engine is None and "limit" in errors[-1]
    with pytest.raises(EngineFileError):
        torch2trt_lite.TRTModule(data, small.metadata)


def test_file_size_is_checked_before_allocating(engine_bytes: bytes, tmp_path: Any) -> None:
    header, plan = engine_file.unpack(engine_bytes)
    path = str(tmp_path / "big.engine")
    with open(path, "wb") as f:  # the header claims 1 TiB, the file is small: refused from its real size
        f.write(_prefix_claiming(header, 2**40, "0" * 64))
        f.write(bytes(plan))
    with pytest.raises(EngineFileError, match="truncated"):
        torch2trt_lite.load(path)
    n = 1 << 30  # a 1 GiB sparse file whose header claims its size: hashed in pieces, never held whole
    with open(path, "wb") as f:  # it starts as the real plan does, so the start check passes
        f.write(_prefix_claiming(header, n, "0" * 64))
        f.write(bytes(plan[:64]))
        f.truncate(f.tell() - 64 + n)
    tracemalloc.start()
    try:
        with pytest.raises(EngineFileError, match="checksum"):
            torch2trt_lite.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        os.unlink(path)
    assert peak < 64 << 20, f"loading a refused 1 GiB file held {peak >> 20} MiB"


def _prefix_claiming(header: dict[str, Any], nbytes: int, sha: str) -> bytes:
    h = dict(header, plan_nbytes=nbytes, plan_sha256=sha)
    body = json.dumps(h, sort_keys=True).encode()
    ident = struct.pack("<8sII", engine_file.MAGIC, engine_file.FORMAT_VERSION, len(body))
    return ident + hashlib.sha256(ident + body).digest() + body


# -------------------------------------------------------------------- 6. load_state_dict
def _state(small: torch2trt_lite.TRTModule, **meta: Any) -> dict[str, torch.Tensor]:
    sd = small.state_dict()
    m = json.loads(bytes(sd["metadata"].numpy().tobytes()))
    m.update(meta)  # resealed with a valid checksum: the edit reaches the schema checks
    sd["metadata"] = torch.frombuffer(bytearray(json.dumps(state.sealed_meta(m)).encode()), dtype=torch.uint8)
    return sd


def test_failed_load_state_dict_keeps_the_module_working(small: torch2trt_lite.TRTModule) -> None:
    target = torch2trt_lite.TRTModule()
    target.load_state_dict(small.state_dict())
    want = target(X)["logits"]
    bad_plan = small.state_dict()
    bad_plan["engine"] = bad_plan["engine"].clone()
    bad_plan["engine"][100] ^= 1
    cases = {
        "inputs None": _state(small, inputs=None),
        "format": _state(small, format=9),
        "plan corrupt": bad_plan,
        "engine None": {"engine": None, "metadata": small.state_dict()["metadata"]},
        "only engine None": {"engine": None},
        "metadata not JSON": {"engine": small.state_dict()["engine"], "metadata": torch.zeros(3, dtype=torch.uint8)},
        "metadata a float tensor": {"engine": small.state_dict()["engine"], "metadata": torch.zeros(3)},
    }
    for name, sd in cases.items():
        with pytest.raises(EngineFileError) as info:
            target.load_state_dict(sd)
        assert isinstance(info.value, RuntimeError), name  # torch's contract as well
        assert "keeps the engine" in str(info.value) or "Missing" in str(info.value), (name, str(info.value))
        assert torch.equal(target(X)["logits"], want), name


def test_load_state_dict_strict_refuses_unexpected_keys(small: torch2trt_lite.TRTModule) -> None:
    sd = dict(small.state_dict(), extra=torch.zeros(1))
    target = torch2trt_lite.TRTModule()
    with pytest.raises(EngineFileError, match="Unexpected key.*extra"):
        target.load_state_dict(sd)
    res = target.load_state_dict(sd, strict=False)
    assert res.unexpected_keys == ["extra"] and target.runnable


# ------------------------------------------------------------------------------- 7. save()
def test_save_respects_umask_and_keeps_existing_mode(small: torch2trt_lite.TRTModule, tmp_path: Any) -> None:
    old = os.umask(0o022)
    try:
        new = str(tmp_path / "new.engine")
        small.save(new)
        assert stat.S_IMODE(os.stat(new).st_mode) == 0o644
        os.chmod(new, 0o640)
        small.save(new)
        assert stat.S_IMODE(os.stat(new).st_mode) == 0o640
        small.save_plan(str(tmp_path / "new.plan"))
        assert stat.S_IMODE(os.stat(str(tmp_path / "new.plan")).st_mode) == 0o644
    finally:
        os.umask(old)


def test_save_errors_name_the_target(small: torch2trt_lite.TRTModule, tmp_path: Any) -> None:
    missing = str(tmp_path / "no" / "such" / "m.engine")
    with pytest.raises(Torch2TRTError, match="no/such/m.engine") as info:
        small.save(missing)
    assert ".t2tl-" not in str(info.value)
    folder = tmp_path / "adir"
    folder.mkdir()
    (folder / "sub").mkdir()
    with pytest.raises(EngineFileError, match="sub") as info:
        small.save(str(folder / "sub"))  # the target is a directory
    assert ".t2tl-" not in str(info.value)
    assert [f for f in os.listdir(folder) if f.startswith(".t2tl-")] == []


def test_save_removes_stale_temp_files(small: torch2trt_lite.TRTModule, tmp_path: Any) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    old = tmp_path / ".t2tl-abcd1234.tmp"  # the old naming, written two hours ago
    old.write_bytes(b"x")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    killed = tmp_path / f".t2tl-{engine_file._HOST}-{dead_pid}-aaaa.tmp"
    killed.write_bytes(b"x")
    live = tmp_path / f".t2tl-{engine_file._HOST}-{os.getppid()}-bbbb.tmp"  # a writer that still runs
    live.write_bytes(b"x")
    small.save(str(tmp_path / "m.engine"))
    left = sorted(f for f in os.listdir(tmp_path) if f.startswith(".t2tl-"))
    assert left == [live.name]


def test_plan_does_not_alias_the_engine(small: torch2trt_lite.TRTModule) -> None:
    want = small(X)["logits"]
    p = small.plan
    with pytest.raises(TypeError):
        p[len(p) // 2] ^= 0xFF  # type: ignore[index]
    copy = bytearray(small.plan)
    for k in range(len(copy) // 2, len(copy) - 8):
        copy[k] ^= 0x55
    assert torch.equal(small(X)["logits"], want)


def test_trtmodule_verifies_the_plan_checksum(small: torch2trt_lite.TRTModule, engine_bytes: bytes) -> None:
    meta, plan = engine_file.unpack(engine_bytes)  # metadata from a file carries plan_sha256
    header, blob = _unseal(plan)
    other = bytearray(blob)
    other[-1] ^= 1  # a different plan, valid for the sim (its CRC is recomputed)
    forged = _seal(header, bytes(other))
    assert _deserialize(forged)[0] is not None
    with pytest.raises(EngineFileError, match="checksum"):
        torch2trt_lite.TRTModule(forged, meta)
    torch2trt_lite.TRTModule(plan, meta)  # the right plan loads
    assert small.plan_sha256 == hashlib.sha256(small.plan).hexdigest()


def test_state_dict_round_trip_verifies_checksum(small: torch2trt_lite.TRTModule) -> None:
    buf = io.BytesIO()
    torch.save(small.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf, weights_only=True)
    assert json.loads(bytes(sd["metadata"].numpy().tobytes()))["plan_sha256"] == small.plan_sha256
    fresh = torch2trt_lite.TRTModule()
    fresh.load_state_dict(sd)
    assert torch.equal(fresh(X)["probs"], small(X)["probs"])
