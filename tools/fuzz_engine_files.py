"""Fuzz engine files and bare sim plans: mutated inputs must be refused cleanly.

Every mutated engine file goes through ``torch2trt_lite.load`` (and, when it loads, one forward);
every mutated sim plan through ``torch2trt_lite.sim.Runtime(...).deserialize_cuda_engine`` (and,
when it deserializes, one execution). The only accepted outcomes are success, a
``Torch2TRTError`` subclass, ``None`` from deserialize and ``False`` from execute. Cases run in
worker processes under a memory limit (RLIMIT_AS) and a per-case time limit: a worker that dies is
a crash, one that runs out of time a hang.

Mutations: bit flips, byte changes, truncations, insertions, and structured mutations of the JSON
headers (wrong types, huge numbers, deep nesting, removed keys) resealed with valid checksums, so
that they reach the schema checks instead of stopping at a checksum.

State dicts (``TRTModule.state_dict()``: ``engine`` and ``metadata``) are mutated the same way and
go through ``load_state_dict`` (and, when it loads, one forward): byte mutations of the engine and
of the metadata, structured JSON mutations of the metadata kept under its old checksum
(``sd-meta-json``) or resealed (``sd-meta-sealed``), and edits of the structure and dtype fields
(output dtypes, shapes and names, the output tree's nodes) kept (``sd-field``) or resealed
(``sd-field-sealed``). A load that runs is ``silent`` when its metadata's inputs and outputs
(names, dtypes, shapes; -1 fits any size) are not the engine's, or, for a mutant under the old checksum, when the
output's structure or dtypes differ from the unmutated module's. Resealed mutants carry a valid
checksum, as an edit on purpose would: their loads that run with another output structure (the
plan does not record it) are counted apart (``sealed_structure_edits_loaded``).

    python tools/fuzz_engine_files.py --count 10000     # 10,000 engine files, plans and state dicts
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import math
import multiprocessing as mp
import os
import random
import struct
import sys
import tempfile
import time
from typing import Any

MEMORY_LIMIT = 2 << 30  # bytes of address space a worker may add to what it holds after imports
TIMEOUT_S = 20.0


# ----------------------------------------------------------------------------- seed inputs
@functools.lru_cache(maxsize=1)
def _seed_module() -> tuple[Any, Any]:
    """The seed model converted on the sim, and its example input."""
    import torch

    import torch2trt_lite

    pair = collections.namedtuple("pair", "logits probs")

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(4)
            self.fc = torch.nn.Linear(4 * 4 * 4, 5)

        def forward(self, x: torch.Tensor) -> Any:
            y = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
            z = self.fc(y.flatten(1))
            return pair(z, torch.softmax(z, 1)), {"mean": y.mean((2, 3)), "k": [y.sum()]}

    torch.manual_seed(0)
    x = torch.randn(1, 3, 8, 8)
    return torch2trt_lite.convert(Net().eval(), [x], backend="sim"), x


def seed_inputs() -> tuple[bytes, bytes, list[tuple[int, ...]]]:
    """An engine file and a bare plan of a small model with several layer kinds (built in the parent)."""
    from torch2trt_lite.runtime import engine_file

    t, x = _seed_module()
    return engine_file.pack(t.metadata, t.plan), bytes(t.plan), [tuple(x.shape)]


def signature(obj: Any) -> Any:
    """The structure of a module's output: container types (namedtuple fields), keys, and each
    tensor's dtype and shape."""
    import torch

    if isinstance(obj, torch.Tensor):
        return ["tensor", str(obj.dtype), list(obj.shape)]
    if isinstance(obj, dict):
        return ["dict", type(obj).__name__, [[k, signature(v)] for k, v in obj.items()]]
    if isinstance(obj, (tuple, list)):
        return [type(obj).__name__, list(getattr(type(obj), "_fields", ()) or ()), [signature(v) for v in obj]]
    return ["const", repr(obj)]


def seed_state_dict() -> tuple[bytes, bytes, dict[str, Any]]:
    """The seed module's state dict entries (engine, metadata) and what a load must agree with:
    the engine's inputs and outputs (names, dtypes, shapes), the output tree and the output's signature."""
    import torch

    t, x = _seed_module()
    sd = t.state_dict()
    with torch.no_grad():
        sig = signature(t(x))
    io = {k: [{f: o[f] for f in ("name", "dtype", "shape")} for o in t.metadata[k]] for k in ("inputs", "outputs")}
    ref = {"io": io, "out_tree": t.metadata["out_tree"], "signature": sig}
    return bytes(sd["engine"].numpy().tobytes()), bytes(sd["metadata"].numpy().tobytes()), ref


# ------------------------------------------------------------------------------- mutations
_POOL: list[Any] = [
    None, True, False, 0, -1, -2, 1, 7, 2**31, 2**40, 2**63, -(2**63), 10**30, 1.5, -0.0, 1e308, "", "x",
    "float128", "IFooLayer", [], [1], [-1, -1], [2**40, 2**40], {}, {"t": 0}, {"__e__": "PaddingMode.NOPE"},
    {"__w__": [0, 2**40], "dtype": "FLOAT", "shape": [2**38]}, {"__d__": 5}, {"__m__": []}, "a" * 5000,
]


def _deep(depth: int) -> Any:
    node: Any = 0
    for _ in range(depth):
        node = [node]
    return node


def _paths(obj: Any, prefix: tuple[Any, ...] = (), out: list[tuple[Any, ...]] | None = None, limit: int = 20000) -> list[tuple[Any, ...]]:
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    out.append(prefix)
    if isinstance(obj, dict):
        for k, v in obj.items():
            _paths(v, (*prefix, k), out, limit)
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:64]):
            _paths(v, (*prefix, i), out, limit)
    return out


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        obj = obj[p]
    return obj


def mutate_json(h: Any, rng: random.Random) -> Any:
    """One or a few structured mutations of a JSON document (in place on a copy)."""
    h = json.loads(json.dumps(h))
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        paths = _paths(h)
        path = rng.choice(paths[1:]) if len(paths) > 1 else ()
        if not path:
            continue
        try:
            parent, key = _get(h, path[:-1]), path[-1]
            old = parent[key]
        except (KeyError, IndexError, TypeError):
            continue
        r = rng.random()
        if r < 0.45:
            new: Any = rng.choice(_POOL)
        elif r < 0.55:
            new = _deep(rng.choice((50, 200, 2000)))
        elif r < 0.7 and isinstance(old, int) and not isinstance(old, bool):
            new = rng.choice((old + 1, old - 1, -old, old * 1000, old ^ (1 << rng.randrange(64)), 2**rng.randrange(70)))
        elif r < 0.8 and isinstance(old, list) and old:
            new = old * rng.choice((0, 2, 1000)) if rng.random() < 0.5 else old[:-1]
        elif r < 0.9 and isinstance(parent, dict):
            del parent[key]
            continue
        else:
            other = _get(h, rng.choice(paths))
            new = json.loads(json.dumps(other)) if other is not h else None
        parent[key] = new
    return h


def _bytes_mutation(data: bytes, rng: random.Random, hot: int) -> bytes:
    """Bit flips, byte changes, truncations, insertions; ``hot``: bytes at the start hit more often."""
    b = bytearray(data)
    kind = rng.choice(("bit", "bit", "byte", "truncate", "insert", "delete"))

    def pos() -> int:
        return rng.randrange(min(hot, len(b))) if rng.random() < 0.5 else rng.randrange(len(b))

    if kind == "bit":
        for _ in range(rng.choice((1, 1, 2, 8))):
            p = pos()
            b[p] ^= 1 << rng.randrange(8)
    elif kind == "byte":
        for _ in range(rng.choice((1, 4))):
            b[pos()] = rng.randrange(256)
    elif kind == "truncate":
        del b[rng.randrange(len(b)) :]
    elif kind == "insert":
        p = pos()
        b[p:p] = bytes(rng.randrange(256) for _ in range(rng.choice((1, 4, 100))))
    else:
        p = pos()
        del b[p : p + rng.choice((1, 4, 100))]
    return bytes(b)


def _seal_plan(header: Any, blob: bytes) -> bytes:
    from torch2trt_lite.sim import _plan

    body = json.dumps(header).encode()
    data = _plan._HEAD.pack(_plan.MAGIC, 2, len(body)) + body + blob
    return data + _plan._CRC.pack(_plan.crc32(memoryview(data)))


def mutated_plans(plan: bytes, count: int, seed: int) -> list[tuple[str, bytes]]:
    from torch2trt_lite.sim import _plan

    header, blob_view = _plan.parse(plan)
    blob = bytes(blob_view)
    hot = _plan._HEAD.size + struct.unpack_from("<Q", plan, 12)[0]
    rng = random.Random(seed)
    out = []
    for k in range(count):
        if k % 4 == 0:
            out.append(("plan-bytes", _bytes_mutation(plan, rng, hot)))
        else:
            try:
                data = _seal_plan(mutate_json(header, rng), blob)
            except (ValueError, RecursionError):  # NOTE: a mutation json.dumps cannot write
                data = _bytes_mutation(plan, rng, hot)
            out.append(("plan-json", data))
    return out


def mutated_engines(data: bytes, count: int, seed: int) -> list[tuple[str, bytes]]:
    from torch2trt_lite.runtime import engine_file

    header, plan = engine_file.unpack(data)
    hot = engine_file._HEAD.size + struct.unpack_from("<I", data, 12)[0]
    rng = random.Random(seed + 1)
    sim_header, blob_view = __import__("torch2trt_lite.sim._plan", fromlist=["parse"]).parse(bytes(plan))
    blob = bytes(blob_view)
    out = []
    for k in range(count):
        r = k % 8
        try:
            if r < 3:
                out.append(("file-bytes", _bytes_mutation(data, rng, hot)))
            elif r < 7:
                out.append(("file-header", engine_file.pack(mutate_json(header, rng), plan)))
            else:
                out.append(("file-plan", engine_file.pack(header, _seal_plan(mutate_json(sim_header, rng), blob))))
        except (ValueError, RecursionError):
            out.append(("file-bytes", _bytes_mutation(data, rng, hot)))
    return out


_DTYPE_NAMES = ("float32", "float16", "bfloat16", "int8", "int32", "int64", "bool", "uint8")


def _edit_field(m: dict[str, Any], rng: random.Random) -> None:
    """One edit of a structure or dtype field of TRTModule metadata (in place)."""
    outs, ins = m["outputs"], m["inputs"]
    nodes = [p for p in _paths(m["out_tree"]) if isinstance(_get(m["out_tree"], p), dict)]
    r = rng.randrange(9)
    if r == 0:
        rng.choice(outs)["dtype"] = rng.choice(_DTYPE_NAMES)
    elif r == 1:
        rng.choice(ins)["dtype"] = rng.choice(_DTYPE_NAMES)
    elif r == 2:
        o = rng.choice(outs)
        o["shape"] = [d + rng.choice((-1, 1)) for d in o["shape"]] if o["shape"] and rng.random() < 0.5 else [*o["shape"], 1]
    elif r == 3 and len(outs) > 1:
        a, b = rng.sample(range(len(outs)), 2)
        outs[a]["name"], outs[b]["name"] = outs[b]["name"], outs[a]["name"]
    elif r == 4:
        leaves = [_get(m["out_tree"], p) for p in nodes if "t" in _get(m["out_tree"], p)]
        if len(leaves) > 1:
            a, b = rng.sample(leaves, 2)
            a["t"], b["t"] = b["t"], a["t"]
    else:
        node = _get(m["out_tree"], rng.choice(nodes))
        kind = next((k for k in ("tuple", "list", "dict") if k in node), None)
        if kind is None:
            node["t" if "t" in node else "c"] = rng.choice((0, 1, len(outs) - 1, len(outs), -1, None, "x"))
        elif r == 5 and kind in ("tuple", "list"):
            node["list" if kind == "tuple" else "tuple"] = node.pop(kind)
        elif r == 6 and node[kind]:
            node[kind].pop(rng.randrange(len(node[kind])))  # a node with one child fewer
        elif r == 7 and node[kind]:
            node[kind].append(json.loads(json.dumps(rng.choice(node[kind]))))  # one more
        else:
            node["return_type"] = rng.choice(("max", "sort", "topk", "Nope"))


def mutated_state_dicts(engine: bytes, meta: bytes, count: int, seed: int) -> list[tuple[str, Any]]:
    """``count`` mutated state dicts, as (kind, (engine bytes, metadata bytes))."""
    from torch2trt_lite.errors import EngineFileError
    from torch2trt_lite.runtime import state

    doc = json.loads(meta)
    rng = random.Random(seed + 2)
    out: list[tuple[str, Any]] = []
    for k in range(count):
        r = k % 8
        try:
            if r == 0:
                out.append(("sd-engine-bytes", (_bytes_mutation(engine, rng, 64), meta)))
            elif r < 3:
                out.append(("sd-meta-bytes", (engine, _bytes_mutation(meta, rng, len(meta)))))
            elif r == 3:
                out.append(("sd-meta-json", (engine, json.dumps(mutate_json(doc, rng)).encode())))
            elif r == 4:
                out.append(("sd-meta-sealed", (engine, json.dumps(state.sealed_meta(mutate_json(doc, rng))).encode())))
            else:
                m = json.loads(meta)
                for _ in range(rng.choice((1, 1, 2))):
                    _edit_field(m, rng)
                sealed = r >= 6
                body = state.sealed_meta(m) if sealed else m
                out.append(("sd-field-sealed" if sealed else "sd-field", (engine, json.dumps(body).encode())))
        except (ValueError, RecursionError, TypeError, EngineFileError):  # NOTE: a mutation JSON cannot write
            out.append(("sd-meta-bytes", (engine, _bytes_mutation(meta, rng, len(meta)))))
    return out


def header_bit_flips(data: bytes) -> list[tuple[str, bytes]]:
    from torch2trt_lite.runtime import engine_file

    end = engine_file._HEAD.size + struct.unpack_from("<I", data, 12)[0]
    out = []
    for bit in range(end * 8):
        b = bytearray(data)
        b[bit // 8] ^= 1 << (bit % 8)
        out.append(("header-bit", bytes(b)))
    return out


# --------------------------------------------------------------------------------- workers
def _worker_init() -> None:
    import resource

    import torch

    import torch2trt_lite  # noqa: F401 - imported before the limit (the import maps large libraries)

    torch.set_num_threads(1)
    with open("/proc/self/statm") as f:
        vm = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = vm + MEMORY_LIMIT
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _state_dict_case(kind: str, data: tuple[bytes, bytes], shapes: list[tuple[int, ...]], ref: dict[str, Any]) -> str:
    """Load a mutated state dict into a fresh TRTModule and run it: 'ok', or 'silent:<what>' when it
    runs as another engine than its plan (see the module docstring); refusals raise."""
    import torch

    import torch2trt_lite

    sd = {"engine": torch.frombuffer(bytearray(data[0]), dtype=torch.uint8),
          "metadata": torch.frombuffer(bytearray(data[1]), dtype=torch.uint8)}
    m = torch2trt_lite.TRTModule()
    m.load_state_dict(sd)
    with torch.no_grad():
        out = m(*[torch.ones(s) for s in shapes])
    meta = m.metadata
    io = {k: [{f: o[f] for f in ("name", "dtype", "shape")} for o in meta[k]] for k in ("inputs", "outputs")}
    for k in ("inputs", "outputs"):
        mine = {o["name"]: o for o in io[k]}
        theirs = {o["name"]: o for o in ref["io"][k]}
        if sorted(mine) != sorted(theirs) or any(
            mine[n]["dtype"] != o["dtype"] or len(mine[n]["shape"]) != len(o["shape"])
            or any(a not in (b, -1) for a, b in zip(mine[n]["shape"], o["shape"], strict=True))
            for n, o in theirs.items()
        ):  # NOTE: -1 (dynamic: the engine gives the size at run time) fits any size the engine declares
            return "silent:io"  # a tensor of the engine described with another dtype or shape, or one missing
    # NOTE: outputs in another order are another output structure (as a reordered tree is)
    if io != ref["io"] or signature(out) != ref["signature"] or meta["out_tree"] != ref["out_tree"]:
        return "sealed-structure" if kind.endswith("sealed") else "silent:structure"
    return "ok"


def run_case(kind: str, data: Any, shapes: list[tuple[int, ...]], tmpdir: str, ref: dict[str, Any] | None = None) -> str:
    """'ok', 'refused', 'silent:<what>' (state dicts), 'sealed-structure' or 'foreign:<type>: message'
    for one mutated input."""
    import torch

    import torch2trt_lite
    from torch2trt_lite import sim
    from torch2trt_lite.errors import Torch2TRTError

    try:
        if kind.startswith("sd-"):
            return _state_dict_case(kind, data, shapes, ref or {})
        if kind.startswith("plan"):
            class Quiet(sim.ILogger):  # NOTE: the reasons are not printed (thousands of them)
                def log(self, severity: Any, msg: str) -> None:
                    pass

            logger = Quiet()
            sim.ILogger.__init__(logger)
            engine = sim.Runtime(logger).deserialize_cuda_engine(data)
            if engine is None:
                return "refused"
            ctx = engine.create_execution_context()
            buffers = []
            for i in range(engine.num_io_tensors):
                name = engine.get_tensor_name(i)
                if engine.get_tensor_mode(name) == sim.TensorIOMode.INPUT:
                    shape = [d if d >= 0 else 1 for d in engine.get_tensor_shape(name)]
                    ctx.set_input_shape(name, shape)
                    dt = sim.torch_dtype(engine.get_tensor_dtype(name))
                    if math.prod(shape) * torch.empty(0, dtype=dt).element_size() > 1 << 30:
                        return "refused"  # NOTE: the harness does not allocate a declared input over 1 GiB
                    x = torch.ones(shape, dtype=dt)
                    buffers.append(x)
                    ctx.set_tensor_address(name, x)
            for i in range(engine.num_io_tensors):
                name = engine.get_tensor_name(i)
                if engine.get_tensor_mode(name) == sim.TensorIOMode.OUTPUT:
                    out_shape = tuple(ctx.get_tensor_shape(name))
                    if -1 in out_shape:
                        return "refused"
                    y = torch.empty(out_shape, dtype=sim.torch_dtype(engine.get_tensor_dtype(name)))
                    buffers.append(y)
                    ctx.set_tensor_address(name, y.data_ptr() if i % 2 else y)  # raw addresses too
            return "ok" if ctx.execute_async_v3(0) else "refused"
        path = os.path.join(tmpdir, "case.engine")
        with open(path, "wb") as f:
            f.write(data)
        m = torch2trt_lite.load(path)
        m(*[torch.ones(s) for s in shapes])
        return "ok"
    except Torch2TRTError:
        return "refused"
    except BaseException as e:  # noqa: BLE001 - this is what the fuzzer counts
        return f"foreign:{type(e).__name__}: {str(e)[:200]}"


def _serve(conn: Any, shapes: list[tuple[int, ...]], ref: dict[str, Any] | None) -> None:
    _worker_init()
    tmpdir = tempfile.mkdtemp(prefix="t2tl-fuzz-")
    while True:
        task = conn.recv()
        if task is None:
            return
        kind, data = task
        conn.send(run_case(kind, data, shapes, tmpdir, ref))


class _Worker:
    def __init__(self, ctx: Any, shapes: list[tuple[int, ...]], ref: dict[str, Any] | None = None) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, shapes, ref), daemon=True)
        self.proc.start()
        child.close()
        self.task: tuple[str, bytes] | None = None
        self.started = 0.0

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.proc.join(2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


def run_all(cases: list[tuple[str, Any]], shapes: list[tuple[int, ...]], workers: int = 2,
            timeout_s: float = TIMEOUT_S, ref: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run ``cases`` on ``workers`` processes; the figures: outcomes, crashes, hangs, foreign errors,
    silent loads of state dicts."""
    ctx = mp.get_context("spawn")
    pool = [_Worker(ctx, shapes, ref) for _ in range(workers)]
    todo = list(reversed(cases))
    stats: dict[str, Any] = {"cases": len(cases), "ok": 0, "refused": 0, "crashes": [], "hangs": [], "foreign": collections.Counter(),
                             "foreign_examples": {}, "by_kind": collections.Counter(), "refused_header_bits": 0, "header_bits": 0,
                             "silent": collections.Counter(), "sealed_structure_edits_loaded": 0}
    t0 = time.perf_counter()
    from multiprocessing.connection import wait

    try:
        while todo or any(w.task is not None for w in pool):
            for w in pool:
                if w.task is None and todo:
                    w.task = todo.pop()
                    w.started = time.monotonic()
                    w.conn.send(w.task)
            busy = [w for w in pool if w.task is not None]
            ready = wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=0.5)
            for k, w in enumerate(pool):
                if w.task is None:
                    continue
                kind = w.task[0]
                result = None
                if w.conn in ready:
                    try:
                        result = w.conn.recv()
                    except (EOFError, OSError):
                        result = None
                if result is None and (w.proc.sentinel in ready or not w.proc.is_alive()):
                    stats["crashes"].append((kind, w.proc.exitcode))
                elif result is None and time.monotonic() - w.started > timeout_s:
                    stats["hangs"].append(kind)
                    w.proc.kill()
                    w.proc.join()
                elif result is None:
                    continue
                else:
                    stats["by_kind"][f"{kind}:{result.split(':')[0]}"] += 1
                    if kind == "header-bit":
                        stats["header_bits"] += 1
                        stats["refused_header_bits"] += result == "refused"
                    if result in ("ok", "refused"):
                        stats[result] += 1
                    elif result == "sealed-structure":
                        stats["ok"] += 1
                        stats["sealed_structure_edits_loaded"] += 1
                    elif result.startswith("silent:"):
                        stats["ok"] += 1
                        stats["silent"][f"{kind}:{result[len('silent:'):]}"] += 1
                    else:
                        name = result.split(":")[1]
                        stats["foreign"][name] += 1
                        stats["foreign_examples"].setdefault(name, result)
                    w.task = None
                    continue
                w.task = None  # crashed or hung: a fresh worker takes its place
                w.stop()
                pool[k] = _Worker(ctx, shapes, ref)
    finally:
        for w in pool:
            w.stop()
    stats["seconds"] = round(time.perf_counter() - t0, 1)
    return stats


def fuzz(count: int, seed: int = 0, workers: int = 2, timeout_s: float = TIMEOUT_S,
         state_dicts: int | None = None, files: bool = True) -> dict[str, Any]:
    """``count`` mutated engine files and as many plans (with every header bit flip) where ``files``,
    and ``state_dicts`` mutated state dicts (default: ``count``)."""
    cases: list[tuple[str, Any]] = []
    engine, plan, shapes = seed_inputs()
    if files:
        cases += header_bit_flips(engine) + mutated_engines(engine, count, seed) + mutated_plans(plan, count, seed)
    sd_engine, sd_meta, ref = seed_state_dict()
    cases += mutated_state_dicts(sd_engine, sd_meta, count if state_dicts is None else state_dicts, seed)
    return run_all(cases, shapes, workers, timeout_s, ref)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=2000, help="mutated engine files, and as many mutated plans")
    p.add_argument("--state-dicts", type=int, default=None, help="mutated state dicts (default: --count)")
    p.add_argument("--only-state-dicts", action="store_true", help="no engine files or plans")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per case")
    args = p.parse_args(argv)
    stats = fuzz(args.count, args.seed, args.workers, args.timeout, args.state_dicts, not args.only_state_dicts)
    print(json.dumps({k: (dict(v) if isinstance(v, collections.Counter) else v) for k, v in stats.items()}, indent=1))
    bad = (stats["crashes"] or stats["hangs"] or stats["foreign"] or stats["silent"]
           or stats["refused_header_bits"] != stats["header_bits"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
