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

    python tools/fuzz_engine_files.py --count 10000     # 10,000 engine files and 10,000 plans
"""

from __future__ import annotations

import argparse
import collections
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
def seed_inputs() -> tuple[bytes, bytes, list[tuple[int, ...]]]:
    """An engine file and a bare plan of a small model with several layer kinds (built in the parent)."""
    import torch

    import torch2trt_lite
    from torch2trt_lite.runtime import engine_file

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
    t = torch2trt_lite.convert(Net().eval(), [x], backend="sim")
    return engine_file.pack(t.metadata, t.plan), bytes(t.plan), [tuple(x.shape)]


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


def run_case(kind: str, data: bytes, shapes: list[tuple[int, ...]], tmpdir: str) -> str:
    """'ok', 'refused' or 'foreign:<type>: message' for one mutated input."""
    import torch

    import torch2trt_lite
    from torch2trt_lite import sim
    from torch2trt_lite.errors import Torch2TRTError

    try:
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


def _serve(conn: Any, shapes: list[tuple[int, ...]]) -> None:
    _worker_init()
    tmpdir = tempfile.mkdtemp(prefix="t2tl-fuzz-")
    while True:
        task = conn.recv()
        if task is None:
            return
        kind, data = task
        conn.send(run_case(kind, data, shapes, tmpdir))


class _Worker:
    def __init__(self, ctx: Any, shapes: list[tuple[int, ...]]) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, shapes), daemon=True)
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


def run_all(cases: list[tuple[str, bytes]], shapes: list[tuple[int, ...]], workers: int = 2,
            timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """Run ``cases`` on ``workers`` processes; the figures: outcomes, crashes, hangs, foreign errors."""
    ctx = mp.get_context("spawn")
    pool = [_Worker(ctx, shapes) for _ in range(workers)]
    todo = list(reversed(cases))
    stats: dict[str, Any] = {"cases": len(cases), "ok": 0, "refused": 0, "crashes": [], "hangs": [], "foreign": collections.Counter(),
                             "foreign_examples": {}, "by_kind": collections.Counter(), "refused_header_bits": 0, "header_bits": 0}
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
                    else:
                        name = result.split(":")[1]
                        stats["foreign"][name] += 1
                        stats["foreign_examples"].setdefault(name, result)
                    w.task = None
                    continue
                w.task = None  # crashed or hung: a fresh worker takes its place
                w.stop()
                pool[k] = _Worker(ctx, shapes)
    finally:
        for w in pool:
            w.stop()
    stats["seconds"] = round(time.perf_counter() - t0, 1)
    return stats


def fuzz(count: int, seed: int = 0, workers: int = 2, timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    engine, plan, shapes = seed_inputs()
    cases = header_bit_flips(engine) + mutated_engines(engine, count, seed) + mutated_plans(plan, count, seed)
    return run_all(cases, shapes, workers, timeout_s)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=2000, help="mutated engine files, and as many mutated plans")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per case")
    args = p.parse_args(argv)
    stats = fuzz(args.count, args.seed, args.workers, args.timeout)
    print(json.dumps({k: (dict(v) if isinstance(v, collections.Counter) else v) for k, v in stats.items()}, indent=1))
    bad = stats["crashes"] or stats["hangs"] or stats["foreign"] or stats["refused_header_bits"] != stats["header_bits"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
