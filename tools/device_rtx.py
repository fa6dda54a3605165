"""Device check of the TensorRT-RTX backend: does it run on this GPU, how exact and how fast is it?

    python tools/device_rtx.py --out rtx.json        # tools/device_check.sh runs it (step "rtx")

TensorRT-RTX's documentation lists Ampere, Ada and Blackwell GPUs (sm80/86/89/120), not Hopper (sm90):
whether it runs on an H100/H200 is what this records, with the exact refusal when it does not.

On a CUDA GPU, every step in its own try/except, all into one JSON (written again after each step):

* ``machine``: Python, torch, CUDA, the GPU (name, compute capability, memory, driver), tensorrt_rtx;
* ``resnet18`` (torchvision, 1x3x224x224, random weights, eval) and ``transformer`` (the zoo's tiny
  Hugging Face BertModel ``hf_bert``; a tiny torchvision ViT where transformers/timm are missing):
  built with ``backend="tensorrt-rtx"`` (default targets, then ``compute_capabilities="current"``
  if that is refused), run on CUDA tensors, compared with eager and with ``backend="sim"`` on CUDA
  (max abs error, and max rel error = max|got - ref| / max|ref|), TF32 off for the references;
  every refusal's type and message and the TensorRT logger's errors and warnings are kept;
* ``latency`` (when an engine ran): resnet18 fp32 and fp16 (``model.half()``, half inputs), median of
  ``--iters`` CUDA-event timings after warm-up: the engine, eager (TF32 off and on) and
  ``torch.compile``;
* ``harness`` (when an engine ran): the converter harness cases (tests/converters, ``CASES``) built
  as real engines, inputs and model on CUDA, compared with eager on CUDA using each case's
  tolerances (traced inputs, then the harness's other inputs); counts of matches, mismatches,
  refusals and errors, the mismatches listed; families taken round-robin until ``--budget-s``
  (env RTX_HARNESS_BUDGET_S, default 150) is spent.

Without a GPU it writes ``"status": "no CUDA device"`` after the part that needs none: resnet18
built on TensorRT-RTX (build time, plan size), and exits 0.

Exit status: 0 when the engines ran (or there is no GPU), 3 when TensorRT-RTX refused to build or
run on this GPU (recorded), 1 when a step failed otherwise. ``--backend sim --force`` rehearses the
GPU path on a CPU machine (no TensorRT-RTX involved).
"""

from __future__ import annotations

import argparse
import copy
import importlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the harness cases and the zoo live in tests/
    sys.path.insert(0, str(ROOT))

import torch2trt_lite  # noqa: E402
from torch2trt_lite.errors import Torch2TRTError  # noqa: E402

RTX = "tensorrt-rtx"
MAX_LOG = 40  # TensorRT log lines kept per step
MAX_MSG = 4000  # characters kept of an exception message

# ------------------------------------------------------------------ the TensorRT log, per step
TRT_LOG: list[dict[str, str]] = []
_current_step = ["-"]


class _RecordingHandler(logging.Handler):
    """Records every error and warning TensorRT logs (torch2trt-lite forwards them to the logger
    ``torch2trt_lite.tensorrt``) into TRT_LOG, tagged with the step that was running."""

    def emit(self, record: logging.LogRecord) -> None:
        TRT_LOG.append({"step": _current_step[0], "severity": record.levelname, "msg": record.getMessage()[:MAX_MSG]})


def _install_log_capture() -> str:
    # NOTE: TensorRT keeps the first logger of a process, so the messages are taken where torch2trt-lite's
    # one shared logger hands them to Python logging, not by a logger of our own
    trt_log = logging.getLogger("torch2trt_lite.tensorrt")
    trt_log.addHandler(_RecordingHandler(logging.WARNING))
    if trt_log.getEffectiveLevel() > logging.WARNING:
        trt_log.setLevel(logging.WARNING)
    return "errors and warnings of every builder and runtime (logger torch2trt_lite.tensorrt)"


# --------------------------------------------------------------------------------- the report
def error_info(e: BaseException) -> dict[str, Any]:
    tb = traceback.extract_tb(e.__traceback__)
    where = f"{Path(tb[-1].filename).name}:{tb[-1].lineno} in {tb[-1].name}" if tb else None
    info: dict[str, Any] = {"type": type(e).__name__, "message": str(e)[:MAX_MSG], "where": where}
    if e.__cause__ is not None:
        info["cause"] = f"{type(e.__cause__).__name__}: {str(e.__cause__)[:1000]}"
    return info


class Report:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {"tool": "tools/device_rtx.py", "status": "running",
                                     "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                     "machine": {}, "steps": {}}

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str) + "\n")
        tmp.replace(self.path)

    @contextmanager
    def step(self, name: str) -> Iterator[dict[str, Any]]:
        """One step: its record, its time and TensorRT log, and any exception it raised (kept going)."""
        rec: dict[str, Any] = {}
        self.data["steps"][name] = rec
        _current_step[0] = name
        first = len(TRT_LOG)
        t0 = time.perf_counter()
        print(f"-- {name}", flush=True)
        try:
            yield rec
            rec.setdefault("ok", True)
        except Exception as e:  # noqa: BLE001 - a device check: record every failure, keep going
            rec["ok"] = False
            rec["error"] = error_info(e)
            print(f"   {name} failed: {type(e).__name__}: {str(e)[:600]}", flush=True)
        finally:
            rec["seconds"] = round(time.perf_counter() - t0, 3)
            log = TRT_LOG[first:]
            if log:
                rec["trt_log"] = log[:MAX_LOG]
                if len(log) > MAX_LOG:
                    rec["trt_log_left_out"] = len(log) - MAX_LOG
            _current_step[0] = "-"
            self.save()


def attempt(rec: dict[str, Any], key: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, or None with ``rec[key]`` = the error's type and message (sub-steps that may fail)."""
    first = len(TRT_LOG)
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001 - recorded, the step goes on
        rec[key] = error_info(e)
        log = [r["msg"] for r in TRT_LOG[first:] if r["severity"] in ("ERROR", "INTERNAL_ERROR", "0", "1")]
        if log:
            rec[key]["trt_errors"] = log[:10]
        print(f"   {key}: {type(e).__name__}: {str(e)[:600]}", flush=True)
        return None


# -------------------------------------------------------------------------------- helpers
def leaves(tree: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


def compare(got: Any, ref: Any) -> dict[str, Any]:
    """Max abs and max rel (of the largest |ref|) error over all output leaves; shapes must agree."""
    g, r = leaves(got), leaves(ref)
    if len(g) != len(r):
        return {"ok": False, "why": f"{len(g)} outputs, expected {len(r)}"}
    max_abs = max_rel = 0.0
    for a, b in zip(g, r, strict=True):
        if tuple(a.shape) != tuple(b.shape):
            return {"ok": False, "why": f"shape {tuple(a.shape)}, expected {tuple(b.shape)}"}
        if not b.is_floating_point():
            diff = float((a.to(b.device).long() - b.long()).abs().max()) if b.numel() else 0.0
            max_abs = max(max_abs, diff)
            continue
        a64, b64 = a.to(b.device).double(), b.double()
        finite = torch.isfinite(b64)
        if not bool(torch.equal(torch.isfinite(a64), finite)):
            return {"ok": False, "why": "non-finite values differ", "nonfinite_got": int((~torch.isfinite(a64)).sum())}
        if b.numel() == 0:
            continue
        d = float((a64[finite] - b64[finite]).abs().max()) if bool(finite.any()) else 0.0
        scale = float(b64[finite].abs().max()) if bool(finite.any()) else 0.0
        max_abs = max(max_abs, d)
        max_rel = max(max_rel, d / scale if scale > 0 else d)
    return {"ok": True, "outputs": len(r), "max_abs": max_abs, "max_rel": max_rel}


def to_device(xs: Sequence[Any], device: torch.device, dtype: torch.dtype | None = None) -> list[Any]:
    out = []
    for x in xs:
        if isinstance(x, torch.Tensor):
            x = x.to(device)
            if dtype is not None and x.is_floating_point():
                x = x.to(dtype)
        out.append(x)
    return out


def clones(xs: Sequence[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]


def build(model: torch.nn.Module, xs: Sequence[Any], backend: str, caps: Any) -> Any:
    return torch2trt_lite.convert(model, clones(xs), backend=backend, compute_capabilities=caps)


def call(fn: Callable[..., Any], xs: Sequence[Any]) -> Any:
    with torch.no_grad():
        return fn(*clones(xs))


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def strict_fp32(on: bool) -> None:
    """TF32 off (on=True) for references that are really fp32; on (on=False) as torch's cuDNN default."""
    torch.backends.cuda.matmul.allow_tf32 = not on
    torch.backends.cudnn.allow_tf32 = not on


def engine_info(tm: Any) -> dict[str, Any]:
    meta = tm.metadata
    return {"plan_bytes": len(tm.plan), "runnable": bool(tm.runnable), "num_layers": tm.num_layers,
            "trt_version": meta.get("trt_version"), "compute_capabilities": meta.get("compute_capabilities"),
            "conversion_s": round(float(tm.conversion_time_s or 0.0), 3),
            **{k: round(v, 3) for k, v in tm.conversion_stats.items()}}


def _version(mod: str, dist: str | None = None) -> str | None:
    """The installed version: from the distribution's metadata (no import), else by importing."""
    try:
        if dist is not None:
            return importlib.metadata.version(dist)
        return str(importlib.import_module(mod).__version__)
    except Exception as e:  # noqa: BLE001 - missing or broken: say which
        return f"unavailable ({type(e).__name__}: {str(e)[:300]})"


def machine(rec: dict[str, Any]) -> None:
    rec["python"] = sys.version.split()[0]
    rec["platform"] = platform.platform()
    rec["torch"] = torch.__version__
    rec["torch_cuda"] = torch.version.cuda
    rec["torch2trt_lite"] = torch2trt_lite.__version__
    for mod in ("torchvision", "transformers", "timm"):
        rec[mod] = _version(mod, mod)
    rec["tensorrt_rtx"] = _version("tensorrt_rtx")  # imported: does it load here?
    rec["tensorrt_rtx_wheels"] = {d: _version(d, d) for d in
                                  ("tensorrt_rtx_cu13", "tensorrt_rtx_cu13_bindings", "tensorrt_rtx_cu13_libs")}
    spec = importlib.util.find_spec("tensorrt_rtx")
    rec["tensorrt_rtx_path"] = str(spec.origin) if spec is not None else None
    rec["cuda_available"] = torch.cuda.is_available()
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        rec["gpu"] = p.name
        rec["compute_capability"] = f"sm{p.major}{p.minor}"
        rec["gpu_memory_gib"] = round(p.total_memory / 2**30, 1)
        rec["multiprocessors"] = p.multi_processor_count
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30, check=False)
        rec["nvidia_smi"] = (smi.stdout or smi.stderr).strip()[:500]
    except (OSError, subprocess.SubprocessError) as e:
        rec["nvidia_smi"] = f"unavailable ({type(e).__name__}: {e})"


# ---------------------------------------------------------------------------------- models
def resnet18() -> tuple[torch.nn.Module, list[torch.Tensor]]:
    import torchvision

    from tests.weights import nontrivial

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    nontrivial(model)  # batch-norm statistics of a trained model: BN is no identity
    return model, [torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))]


def transformer(rec: dict[str, Any]) -> tuple[torch.nn.Module, list[torch.Tensor]]:
    """The zoo's hf_bert (tiny BertModel from a config, token ids + padded attention mask); where the
    zoo cannot be imported (it needs timm and transformers), a tiny torchvision ViT."""
    from tests.weights import nontrivial

    torch.manual_seed(0)
    missing = [m for m in ("transformers", "timm", "torchvision") if importlib.util.find_spec(m) is None]
    if not missing:
        try:
            from tests.zoo.test_zoo import ZOO

            zoo = next(z for z in ZOO if z.name == "hf_bert")
            model = zoo.build().eval()
            nontrivial(model)
            rec["model"] = "tests/zoo/test_zoo.py hf_bert (transformers BertModel, tiny config)"
            return model, list(zoo.inputs())
        except Exception as e:  # noqa: BLE001 - fall back to the ViT below, and say why
            rec["zoo_error"] = error_info(e)
    else:
        rec["zoo_error"] = {"type": "ImportError", "message": f"not installed: {', '.join(missing)}"}
    from torchvision.models.vision_transformer import VisionTransformer

    model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=64,
                              mlp_dim=128, num_classes=10).eval()
    nontrivial(model)
    rec["model"] = "torchvision VisionTransformer (32x32, patch 8, 2 layers, hidden 64)"
    return model, [torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(1))]


def check_model(rec: dict[str, Any], model: torch.nn.Module, xs_cpu: list[torch.Tensor], device: torch.device,
                backend: str) -> tuple[Any, Any]:
    """Eager vs sim vs the backend's engine on ``device``; returns (engine, compute_capabilities) or (None, None)."""
    model = model.to(device)
    xs = to_device(xs_cpu, device)
    rec["inputs"] = [f"{tuple(x.shape)} {x.dtype}" for x in xs]
    strict_fp32(True)
    with torch.no_grad():
        ref = model(*clones(xs))
    sync(device)
    sim_out = None
    sim_model = attempt(rec, "sim_error", build, model, xs, "sim", None)
    if sim_model is not None:
        sim_out = attempt(rec, "sim_run_error", call, sim_model, xs)
        if sim_out is not None:
            rec["sim_vs_eager"] = compare(sim_out, ref)
    attempts: list[dict[str, Any]] = []
    rec["attempts"] = attempts
    choices: list[Any] = [None, "current"] if backend == RTX else [None]
    for caps in choices:
        a: dict[str, Any] = {"compute_capabilities": caps or "default"}
        attempts.append(a)
        tm = attempt(a, "build_error", build, model, xs, backend, caps)
        if tm is None:
            continue
        a["engine"] = engine_info(tm)
        if not tm.runnable:
            attempt(a, "run_error", call, tm, xs)
            continue
        t0 = time.perf_counter()
        out = attempt(a, "run_error", call, tm, xs)
        sync(device)
        a["first_run_s"] = round(time.perf_counter() - t0, 4)  # TensorRT-RTX compiles its kernels (JIT) here
        if out is None:
            continue
        a["vs_eager"] = compare(out, ref)
        if sim_out is not None:
            a["vs_sim"] = compare(out, sim_out)
        out2 = attempt(a, "second_run_error", call, tm, xs)
        if out2 is not None:
            a["second_run_vs_first"] = compare(out2, out)
        rec["ran_with"] = caps or "default"
        return tm, caps
    return None, None


# --------------------------------------------------------------------------------- latency
def time_ms(fn: Callable[..., Any], xs: Sequence[Any], device: torch.device, iters: int, warmup: int) -> dict[str, Any]:
    with torch.no_grad():
        for _ in range(warmup):
            fn(*xs)
        sync(device)
        times: list[float] = []
        if device.type == "cuda":
            pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
            for start, end in pairs:
                start.record()
                fn(*xs)
                end.record()
            torch.cuda.synchronize(device)
            times = [s.elapsed_time(e) for s, e in pairs]
        else:  # rehearsal on a CPU machine
            for _ in range(iters):
                t0 = time.perf_counter()
                fn(*xs)
                times.append((time.perf_counter() - t0) * 1e3)
    q = statistics.quantiles(times, n=10) if len(times) >= 10 else [min(times), max(times)]
    return {"median_ms": round(statistics.median(times), 4), "p10_ms": round(q[0], 4), "p90_ms": round(q[-1], 4),
            "min_ms": round(min(times), 4), "iters": len(times),
            "timer": "cuda events" if device.type == "cuda" else "perf_counter"}


def latency(rec: dict[str, Any], device: torch.device, backend: str, caps: Any, iters: int, warmup: int,
            compile_too: bool, deadline: float) -> None:
    model32, xs_cpu = resnet18()
    rec["model"] = "torchvision resnet18, 1x3x224x224, batch 1"
    model32 = model32.to(device)
    xs32 = to_device(xs_cpu, device)
    strict_fp32(True)
    with torch.no_grad():
        ref32 = model32(*xs32)
    rec["fp32"] = latency_one(model32, xs32, ref32, device, backend, caps, iters, warmup, compile_too, deadline)
    model16 = copy.deepcopy(model32).half()
    xs16 = to_device(xs_cpu, device, torch.float16)
    rec["fp16"] = latency_one(model16, xs16, ref32, device, backend, caps, iters, warmup, compile_too, deadline)


def latency_one(model: torch.nn.Module, xs: list[Any], ref32: Any, device: torch.device, backend: str, caps: Any,
                iters: int, warmup: int, compile_too: bool, deadline: float) -> dict[str, Any]:
    """One precision: the engine, eager (fp32: TF32 off and on) and torch.compile, with their errors."""
    r: dict[str, Any] = {"dtype": str(xs[0].dtype)}
    strict_fp32(True)
    ref = call(model, xs)
    tm = attempt(r, "build_error", build, model, xs, backend, caps)
    if tm is not None:
        r["engine_info"] = engine_info(tm)
        out = attempt(r, "run_error", call, tm, xs)
        if out is not None:
            r["engine_vs_eager"] = compare(out, ref)
            r["engine_vs_eager_fp32"] = compare([t.float() for t in leaves(out)], leaves(ref32))
            r["engine"] = attempt(r, "engine_time_error", time_ms, tm, xs, device, iters, warmup)
    r["eager"] = attempt(r, "eager_time_error", time_ms, model, xs, device, iters, warmup)
    if xs[0].dtype == torch.float32 and device.type == "cuda":
        strict_fp32(False)
        r["eager_tf32"] = attempt(r, "eager_tf32_error", time_ms, model, xs, device, iters, warmup)
        strict_fp32(True)
    if not compile_too:
        r["compiled"] = "skipped (--no-compile)"
    elif deadline - time.monotonic() < 120:
        r["compiled"] = "skipped (too little time left before --deadline-s)"
    else:
        compiled = torch.compile(model)
        t0 = time.perf_counter()
        first = attempt(r, "compile_error", call, compiled, xs)
        sync(device)
        r["compile_first_call_s"] = round(time.perf_counter() - t0, 2)
        if first is not None:
            r["compiled_vs_eager"] = compare(first, ref)
            r["compiled"] = attempt(r, "compiled_time_error", time_ms, compiled, xs, device, iters, warmup)
    eng, eag, comp = r.get("engine"), r.get("eager"), r.get("compiled")
    if isinstance(eng, dict) and isinstance(eag, dict):
        r["speedup_vs_eager"] = round(eag["median_ms"] / eng["median_ms"], 3)
        if isinstance(comp, dict):
            r["speedup_vs_compile"] = round(comp["median_ms"] / eng["median_ms"], 3)
    print(f"   {r['dtype']}: " + ", ".join(f"{k} {v['median_ms']} ms" for k, v in r.items()
                                          if isinstance(v, dict) and "median_ms" in v), flush=True)
    return r


# --------------------------------------------------------------------------------- harness
def round_robin(cases: Sequence[Any]) -> list[Any]:
    """Cases by family (their cases_*.py), one of each in turn: a budget cut still samples every family."""
    fams: dict[str, list[Any]] = defaultdict(list)
    for c in cases:
        fams[str(getattr(c.model, "__module__", "?")).rsplit(".", 1)[-1]].append(c)
    queues = list(fams.values())
    out: list[Any] = []
    for i in range(max((len(q) for q in queues), default=0)):
        out.extend(q[i] for q in queues if i < len(q))
    return out


def run_case(case: Any, device: torch.device, backend: str, caps: Any) -> tuple[str, dict[str, Any]]:
    """One harness case on a real engine: (outcome, details)."""
    torch.manual_seed(0)
    model = case.build().to(device)
    xs = to_device(list(case.inputs()), device)
    try:
        with torch.no_grad():
            expected = model(*clones(xs))
    except Exception as e:  # noqa: BLE001 - e.g. a case that makes CPU tensors inside: not the engine's fault
        return "eager_failed", {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    first = len(TRT_LOG)
    try:
        tm = build(model, xs, backend, caps)
    except Torch2TRTError as e:
        errs = [r["msg"][:300] for r in TRT_LOG[first:] if r["severity"] in ("ERROR", "INTERNAL_ERROR")]
        info = {"error": f"{type(e).__name__}: {str(e)[:400]}", **({"trt_errors": errs[:3]} if errs else {})}
        return ("refused_expected" if case.xfail else "refused"), info
    if not tm.runnable:
        return "not_runnable", {}
    inputs = [("traced", xs, expected)]
    others = list(case.others(xs)) if case.others is not None else _varied(xs)
    if case.vary is None and any(a is not b for a, b in zip(others, xs, strict=True)):
        with torch.no_grad():
            inputs.append(("other inputs", others, model(*clones(others))))
    for label, ins, exp in inputs:
        try:
            got = tm(*clones(ins))
            sync(device)
        except Exception as e:  # noqa: BLE001 - the engine failed to run: record it
            return "run_error", {"on": label, "error": f"{type(e).__name__}: {str(e)[:400]}"}
        try:
            torch.testing.assert_close(got, exp, rtol=case.rtol, atol=case.atol, equal_nan=True)
        except (AssertionError, TypeError, ValueError) as e:
            err = compare(got, exp)
            return "mismatch", {"on": label, "rtol": case.rtol, "atol": case.atol,
                                "max_abs": err.get("max_abs"), "max_rel": err.get("max_rel"),
                                "message": " ".join(str(e).split())[:400]}
    return ("xpass" if case.xfail else "match"), {}


def _varied(xs: Sequence[Any]) -> list[Any]:
    from tests.converters.harness import varied

    return varied(xs)


def harness(rec: dict[str, Any], device: torch.device, backend: str, caps: Any, budget_s: float) -> None:
    from tests.converters.test_converters import CASES

    order = round_robin(CASES)
    rec["cases_total"] = len(order)
    rec["budget_s"] = round(budget_s, 1)
    rec["compute_capabilities"] = caps or "default"
    counts: Counter[str] = Counter()
    details: dict[str, list[dict[str, Any]]] = defaultdict(list)
    refusal_kinds: Counter[str] = Counter()
    t_end = time.monotonic() + budget_s
    slowest: list[tuple[float, str]] = []
    run = 0
    for case in order:
        if time.monotonic() > t_end:
            break
        t0 = time.perf_counter()
        try:
            outcome, info = run_case(case, device, backend, caps)
        except Exception as e:  # noqa: BLE001 - a harness or model problem, not the engine's verdict
            outcome, info = "error", {"error": f"{type(e).__name__}: {str(e)[:400]}"}
        dt = time.perf_counter() - t0
        slowest.append((dt, case.name))
        run += 1
        counts[outcome] += 1
        if outcome != "match":
            details[outcome].append({"case": case.name, **info})
        if outcome.startswith("refused"):
            refusal_kinds[str(info.get("error", ""))[:120]] += 1
        if run % 50 == 0:
            print(f"   {run} cases: {dict(counts)}", flush=True)
    rec["cases_run"] = run
    rec["not_run_budget"] = len(order) - run
    rec["counts"] = dict(counts)
    rec["mismatches"] = details.get("mismatch", [])
    rec["run_errors"] = details.get("run_error", [])
    rec["refused"] = details.get("refused", [])[:200]
    rec["refusal_kinds"] = dict(refusal_kinds.most_common(20))
    rec["refused_expected"] = [d["case"] for d in details.get("refused_expected", [])]
    rec["xpass"] = [d["case"] for d in details.get("xpass", [])]
    rec["eager_failed"] = details.get("eager_failed", [])[:50]
    rec["errors"] = details.get("error", [])[:50]
    rec["not_runnable"] = len(details.get("not_runnable", []))
    rec["slowest_s"] = [[n, round(t, 2)] for t, n in sorted(slowest, reverse=True)[:10]]
    print(f"   harness: {run}/{len(order)} cases, {dict(counts)}", flush=True)


# ------------------------------------------------------------------------------------ main
def no_gpu_build(report: Report, backend: str) -> None:
    """What TensorRT-RTX does without a GPU: an ahead-of-time build; the engine cannot run here."""
    with report.step("build_only_resnet18") as rec:
        model, xs = resnet18()
        rec["model"] = "torchvision resnet18, 1x3x224x224"
        for caps in (None, "current"):
            a: dict[str, Any] = {}
            rec["default" if caps is None else "current"] = a
            tm = attempt(a, "build_error", build, model, xs, backend, caps)
            if tm is not None:
                a["engine"] = engine_info(tm)
                attempt(a, "run_error", call, tm, xs)  # expected: BackendUnavailableError
        rec["note"] = ("without a GPU: the default targets build ahead of time and cannot run here; "
                       "'current' needs a GPU to query, so its build is expected to fail")
        if "engine" not in rec["default"]:
            rec["ok"] = False


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")) / "rtx.json")
    ap.add_argument("--budget-s", type=float, default=float(os.environ.get("RTX_HARNESS_BUDGET_S", "150")),
                    help="time for the harness cases (env RTX_HARNESS_BUDGET_S; default 150)")
    ap.add_argument("--deadline-s", type=float, default=float(os.environ.get("RTX_DEADLINE_S", "390")),
                    help="stop starting steps after this long, to write the JSON before an outer timeout (390)")
    ap.add_argument("--iters", type=int, default=int(os.environ.get("RTX_ITERS", "200")))
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile timings")
    ap.add_argument("--backend", default=RTX, help="tensorrt-rtx; 'sim' with --force rehearses on a CPU machine")
    ap.add_argument("--force", action="store_true", help="run the GPU path on whatever device there is")
    ap.add_argument("--skip", default="", help="comma-separated steps to skip: transformer,latency,harness")
    args = ap.parse_args(argv)
    deadline = time.monotonic() + args.deadline_s
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    report = Report(args.out)
    report.data["log_capture"] = _install_log_capture()
    report.data["settings"] = {"backend": args.backend, "budget_s": args.budget_s, "deadline_s": args.deadline_s,
                               "iters": args.iters, "warmup": args.warmup, "compile": not args.no_compile}
    with report.step("machine") as rec:
        machine(rec)
    report.data["machine"] = report.data["steps"].pop("machine")
    gpu = torch.cuda.is_available()
    if not gpu and not args.force:
        no_gpu_build(report, args.backend)
        report.data["status"] = "no CUDA device"
        report.data["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        report.save()
        print(f"no CUDA device: build-only part done; wrote {args.out}")
        return 0
    device = torch.device("cuda" if gpu else "cpu")
    report.data["device"] = str(device)

    engines: dict[str, Any] = {}
    with report.step("resnet18") as rec:
        rec["model"] = "torchvision resnet18, 1x3x224x224, random weights, eval"
        model, xs = resnet18()
        tm, caps = check_model(rec, model, xs, device, args.backend)
        if tm is not None:
            engines["resnet18"] = caps
    if "transformer" not in skip:
        with report.step("transformer") as rec:
            model, xs = transformer(rec)
            tm, caps = check_model(rec, model, xs, device, args.backend)
            if tm is not None:
                engines["transformer"] = caps
    ran = bool(engines)
    caps = engines.get("resnet18", engines.get("transformer"))
    rtx_version = str(report.data["machine"].get("tensorrt_rtx"))
    if not ran and args.backend == RTX and rtx_version.startswith("unavailable"):
        report.data["status"] = f"tensorrt_rtx does not import here: {rtx_version}"
    elif not ran:
        report.data["status"] = f"{args.backend} refused on this GPU (see steps.*.attempts)"
    else:
        report.data["status"] = f"{args.backend} ran (compute_capabilities={caps or 'default'})"
        if "latency" not in skip and time.monotonic() < deadline - 60:
            with report.step("latency") as rec:
                latency(rec, device, args.backend, caps, args.iters, args.warmup, not args.no_compile, deadline)
        if "harness" not in skip:
            budget = min(args.budget_s, deadline - time.monotonic() - 20)
            if budget < 10:
                report.data["steps"]["harness"] = {"ok": False, "skipped": "no time left before --deadline-s"}
            else:
                with report.step("harness") as rec:
                    harness(rec, device, args.backend, caps, budget)
    failed = [k for k, v in report.data["steps"].items() if isinstance(v, dict) and v.get("ok") is False]
    report.data["failed_steps"] = failed
    report.data["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    report.save()
    print(f"status: {report.data['status']}; failed steps: {failed or 'none'}; wrote {args.out}", flush=True)
    if not ran:
        return 1 if report.data["status"].startswith("tensorrt_rtx does not import") else 3
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
