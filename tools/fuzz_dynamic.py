"""Differential fuzzing of dynamic and data-dependent programs: an engine matches eager or refuses.

Each random program combines masks, nonzero, top-k, sort, unique, concatenation, counts compared
(with each other and with input sizes) and subtracted, sizes read from values (and compared),
Python branches on sizes, reshapes and transposes, writes into views of fresh tensors, and two
inputs with their own ranges (traced at equal or distinct sizes; traced alike, they are also run
at equal sizes, since the engine checks that dims traced alike stay equal). It is converted
once on the sim (``convert`` with its defaults, ``verify`` included) and then run against eager
PyTorch at many input sizes and values inside the ranges. The only accepted outcomes are:

* a match (same output shapes, values within rtol 1e-4 / atol 1e-4),
* a ``Torch2TRTError`` at conversion or at the call.

Everything else is a finding: ``silent`` (a different shape or value: the worst bug there is),
``foreign`` (any other exception out of ``convert`` or the engine). Inputs eager itself rejects
are skipped.

    python tools/fuzz_dynamic.py --count 1000 --seed 0 --workers 2 --out fuzz.json
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing as mp
import os
import random
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from typing import Any

WIDTH = 4  # every row tensor of a program is [rows, WIDTH]
RUNS = 10  # input sets per program
KINDS = ("mask", "nonzero", "topk", "sort", "cat", "unique", "slice", "slice_by", "branch_eq", "branch_gt",
         "size_diff", "sizes_sum", "write", "masked_write", "value_size", "sin", "count_scale",
         # sizes compared, counts compared with each other and with input sizes, value reads compared,
         # and ops whose output dims are not their input's at the same position (reshapes, transposes)
         "mask_cmp", "count_vs_size", "nonzero_all", "item_cmp", "item_slice", "reshape", "transpose", "rowsum",
         "count_expr", "slice_min")


@dataclass(frozen=True)
class Op:
    kind: str
    a: int = 0  # operand indices into the program's list of row tensors
    b: int = 0
    k: int = 1
    col: int = 0
    thr: float = 0.0


@dataclass(frozen=True)
class Spec:
    ops: tuple[Op, ...]
    outputs: tuple[int, ...]
    x_range: tuple[int, int, int]  # min, opt (traced), max rows of x
    y_range: tuple[int, int, int]
    n_high: int  # > 0: a third int64 input n of shape [1] with values in [1, n_high)
    n_traced: int


def generate(rng: random.Random) -> Spec:
    """A random program of 1 to 6 ops over inputs x, y (and n where a value is read as a size)."""
    static_x = rng.random() < 0.2
    x_max = 8
    x_opt = rng.randint(1, x_max)
    x_range = (x_opt, x_opt, x_opt) if static_x else (1, x_opt, x_max)
    y_max = rng.choice((8, 16, 64))
    y_opt = x_opt if (rng.random() < 0.4 and x_opt <= y_max) else rng.randint(1, y_max)
    y_range = (1, y_opt, y_max)
    ops: list[Op] = []
    count = 2
    uses_n = False
    for _ in range(rng.randint(1, 6)):
        kind = rng.choice(KINDS)
        uses_n |= kind in ("value_size", "item_cmp", "item_slice")
        ops.append(Op(kind, rng.randrange(count), rng.randrange(count), rng.randint(0, 6), rng.randrange(WIDTH),
                      round(rng.uniform(-1.0, 1.0), 2)))
        count += 1
    outputs = tuple(sorted({count - 1, *rng.sample(range(2, count), k=min(2, count - 2))}))
    n_high = rng.choice((9, 33)) if uses_n else 0
    return Spec(tuple(ops), outputs, x_range, y_range, n_high, rng.randint(1, n_high - 1) if uses_n else 0)


def _apply(op: Op, ts: list[Any], n: Any) -> Any:
    import torch

    t, u = ts[op.a], ts[op.b]
    kind = op.kind
    if kind == "mask":
        return t[t[:, op.col] > op.thr]
    if kind == "nonzero":
        return t.index_select(0, torch.nonzero(t[:, op.col] > op.thr)[:, 0])
    if kind == "topk":
        return t[t[:, 0].topk(min(op.k, t.size(0))).indices]
    if kind == "sort":
        return t[t[:, op.col].argsort(descending=op.k % 2 == 1)]
    if kind == "cat":
        return torch.cat([t, u])
    if kind == "unique":
        v = torch.unique(torch.round(t[:, op.col] * 2))
        return v[:, None] * torch.ones(1, WIDTH)
    if kind == "slice":
        return t[: op.k]
    if kind == "slice_by":
        return t[: u.size(0)]
    if kind == "branch_eq":
        return t + 1 if t.size(0) == u.size(0) else t - 1
    if kind == "branch_gt":
        return t * 2 if t.size(0) > op.k else t * 3
    if kind == "size_diff":
        return torch.zeros(t.size(0) - u.size(0) + op.k, WIDTH) + t.sum()
    if kind == "sizes_sum":
        return torch.arange(t.size(0) + u.size(0), dtype=torch.float32)[:, None] * torch.ones(1, WIDTH)
    if kind == "write":
        buf = t.new_zeros(t.size(0) + u.size(0), WIDTH)
        buf[: t.size(0)] = t
        buf[t.size(0):] = u
        return buf
    if kind == "masked_write":
        b = t.clone()
        b[b[:, op.col] > op.thr] = 0.0
        return b
    if kind == "value_size":
        k = n.max().item()
        return torch.arange(k, dtype=torch.float32)[:, None].repeat(1, WIDTH) + t[:, op.col].mean()
    if kind == "sin":
        return torch.sin(t) * 2
    if kind == "count_scale":
        return t * (t[:, op.col] > op.thr).sum()
    if kind == "mask_cmp":  # two counts traced alike are not one size
        a, b = t[t[:, op.col] > op.thr], t[t[:, (op.col + 1) % WIDTH] > -op.thr]
        return a + 1 if a.size(0) == b.size(0) else b * 2
    if kind == "count_vs_size":  # a count traced at an input's size is not that size
        a = t[t[:, op.col] > op.thr]
        return a * 2 if a.size(0) >= u.size(0) - op.k % 3 else a - 1
    if kind == "nonzero_all":
        idx = torch.nonzero(t[:, op.col] > op.thr)[:, 0]
        return t[idx] * 2 if idx.size(0) == t.size(0) else t[idx] + 3
    if kind == "item_cmp":  # a size read from a value, compared with an input's size
        k = n.max().item()
        return t[:k] if k <= t.size(0) else t * 4
    if kind == "item_slice":
        k = n.max().item()
        return t[: k + op.k % 3] + u.sum()
    if kind == "reshape":
        return t.reshape(-1, 2).reshape(-1, WIDTH).unsqueeze(1).flatten(0, 1) + 1
    if kind == "transpose":
        return (t.t() * 2).t().contiguous() + t.transpose(0, 1).transpose(0, 1)
    if kind == "rowsum":
        return t.sum(1, keepdim=True) * torch.ones(1, WIDTH) + t.abs().amax(1)[:, None]
    if kind == "count_expr":  # sizes computed from counts and input sizes, kept symbolic
        a = t[t[:, op.col] > op.thr]
        return torch.zeros(a.size(0) * 2 + u.size(0) // 2, WIDTH) + a.sum()
    if kind == "slice_min":  # x[:k] of a dim traced at k is min(n, k)
        return t[: op.k] * 2 if t[: op.k].size(0) == t.size(0) else t[: op.k] - 1
    raise ValueError(kind)


def make_model(spec: Spec) -> Any:
    import torch

    class Program(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor, n: torch.Tensor | None = None) -> Any:
            ts = [x, y]
            for op in spec.ops:
                ts.append(_apply(op, ts, n))
            outs = [ts[i] for i in spec.outputs]
            return (*outs, *(o.sum(0) for o in outs))

    return Program().eval()


def _inputs(spec: Spec, rng: random.Random, rows_x: int, rows_y: int, n_value: int) -> list[Any]:
    import torch

    g = torch.Generator().manual_seed(rng.randrange(1 << 30))
    xs = [torch.randn(rows_x, WIDTH, generator=g), torch.randn(rows_y, WIDTH, generator=g)]
    if spec.n_high:
        xs.append(torch.tensor([n_value], dtype=torch.int64))
    return xs


def _compare(got: Any, ref: Any) -> str | None:
    import torch

    got = got if isinstance(got, (tuple, list)) else (got,)
    if len(got) != len(ref):
        return f"{len(got)} outputs, eager has {len(ref)}"
    for i, (g, r) in enumerate(zip(got, ref, strict=True)):
        if tuple(g.shape) != tuple(r.shape):
            return f"output {i}: shape {tuple(g.shape)}, eager {tuple(r.shape)}"
        try:
            torch.testing.assert_close(g.to(r.dtype), r, rtol=1e-4, atol=1e-4, equal_nan=True)
        except AssertionError as e:
            return f"output {i}: {str(e).splitlines()[0]}"
    return None


def run_program(seed: int) -> dict[str, Any]:
    """Generate, convert and check one program; returns its outcome record."""
    import torch

    import torch2trt_lite
    from torch2trt_lite import Input, Torch2TRTError

    rng = random.Random(seed)
    spec = generate(rng)
    model = make_model(spec)
    lo, opt, hi = spec.x_range
    ylo, yopt, yhi = spec.y_range
    traced = _inputs(spec, rng, opt, yopt, spec.n_traced)
    args: list[Any] = [
        Input((lo, WIDTH), (opt, WIDTH), (hi, WIDTH), example=traced[0]) if lo != hi else traced[0],
        Input((ylo, WIDTH), (yopt, WIDTH), (yhi, WIDTH), example=traced[1]),
    ]
    if spec.n_high:
        args.append(Input((1,), (1,), (1,), dtype=torch.int64, example=traced[2], low=1, high=spec.n_high))
    record: dict[str, Any] = {"seed": seed, "spec": asdict(spec)}
    try:
        with torch.no_grad():
            model(*traced)
    except Exception as e:  # noqa: BLE001 - a program eager rejects at its own example is not a case
        record.update(outcome="invalid", detail=f"{type(e).__name__}: {e}"[:300])
        return record
    try:
        engine = torch2trt_lite.convert(model, args, backend="sim")
    except Torch2TRTError as e:
        record.update(outcome="refused_convert", detail=f"{type(e).__name__}: {e}"[:300])
        return record
    except Exception as e:  # noqa: BLE001 - the fuzzer's job is to report these
        record.update(outcome="foreign", where="convert", detail=traceback.format_exc()[-1500:])
        del e
        return record
    runs = ok = refused = 0
    sizes = [(opt, yopt, spec.n_traced), (lo, ylo, 1), (hi, yhi, max(spec.n_high - 1, 0))]
    while len(sizes) < RUNS:
        rows_x, rows_y = rng.randint(lo, hi), rng.randint(ylo, yhi)
        if opt == yopt and rng.random() < 0.5 and ylo <= rows_x <= yhi:  # x and y traced alike: also equal rows
            rows_y = rows_x
        sizes.append((rows_x, rows_y, rng.randint(1, max(spec.n_high - 1, 1))))
    for rows_x, rows_y, n_value in sizes:
        xs = _inputs(spec, rng, rows_x, rows_y, n_value)
        try:
            with torch.no_grad():
                ref = model(*xs)
        except Exception:  # noqa: BLE001 - eager rejects these inputs: no reference to compare with
            continue
        runs += 1
        try:
            got = engine(*xs)
        except Torch2TRTError:
            refused += 1
            continue
        except Exception:  # noqa: BLE001
            record.update(outcome="foreign", where="call", sizes=[rows_x, rows_y, n_value],
                          detail=traceback.format_exc()[-1500:])
            return record
        problem = _compare(got, ref)
        if problem is not None:
            record.update(outcome="silent", sizes=[rows_x, rows_y, n_value], detail=problem)
            return record
        ok += 1
    record.update(outcome="match" if refused == 0 else "match_or_refused_call", runs=runs, ok=ok, refused=refused)
    return record


def _worker_init() -> None:
    import warnings

    import torch

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    logging_off()


def logging_off() -> None:
    import logging

    for name in ("torch2trt_lite", "torch2trt_lite.tensorrt"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def fuzz(count: int, seed: int = 0, workers: int = 1) -> dict[str, Any]:
    started = time.perf_counter()
    seeds = [seed * 1_000_003 + i for i in range(count)]
    if workers > 1:
        ctx = mp.get_context("spawn")
        with ctx.Pool(workers, initializer=_worker_init, maxtasksperchild=200) as pool:
            records = pool.map(run_program, seeds, chunksize=4)
    else:
        _worker_init()
        records = [run_program(s) for s in seeds]
    counts = collections.Counter(r["outcome"] for r in records)
    refusals = collections.Counter(r["detail"].split(":")[0] + ": " + r["detail"].split(":", 1)[1][:80]
                                   for r in records if r["outcome"] == "refused_convert")
    return {
        "programs": count,
        "seed": seed,
        "seconds": round(time.perf_counter() - started, 1),
        "outcomes": dict(counts),
        "engine_runs": sum(r.get("runs", 0) for r in records),
        "silent": [r for r in records if r["outcome"] == "silent"],
        "foreign": [r for r in records if r["outcome"] == "foreign"],
        "top_refusals": refusals.most_common(15),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--count", type=int, default=200, help="programs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--out", default=None, help="write the JSON report here")
    args = p.parse_args(argv)
    report = fuzz(args.count, args.seed, args.workers)
    text = json.dumps(report, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    summary = {k: report[k] for k in ("programs", "seconds", "outcomes", "engine_runs")}
    print(json.dumps(summary))
    for r in report["silent"][:10] + report["foreign"][:10]:
        print(r["outcome"], r["seed"], r.get("detail", "")[:400].replace("\n", " | "), file=sys.stderr)
    return 1 if report["silent"] or report["foreign"] else 0


if __name__ == "__main__":
    sys.exit(main())
