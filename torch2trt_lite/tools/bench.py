"""Latency and throughput of an engine against eager PyTorch and ``torch.compile``.

    result = torch2trt_lite.bench(model.eval(), [x], batch_sizes=[1, 8, 32], backend="sim")
    rich.print(result.table()); result.save("bench-out")      # bench.json + latency_p50.png

    torch2trt-lite bench torchvision:resnet18 --shape 1x3x224x224 --batch 1,4,8 --backend sim -o OUT

For every batch size (the first dimension of every input is replaced by it; rows of the example
inputs are repeated to fill it) three runners are timed on the same device and dtype, one after
the other: the engine (converted once per batch size: static shapes), eager PyTorch and
``torch.compile(model, mode="default", dynamic=False)`` (compiled afresh per batch size after
``torch.compiler.reset()``); with ``trt_compile=True`` (``--compile``) a fourth,
``torch.compile(model, backend="torch2trt_lite")`` on the engine's backend (compiled afresh per batch
size, static shapes; not run where the engine runner cannot run). Each runner gets ``warmup``
untimed calls, then ``iters`` timed ones; every timed call is synchronized: CUDA events on a GPU, ``time.perf_counter`` on the CPU. The
report gives p50/p90/p99 latency (ms, ``statistics.quantiles`` inclusive method), the mean, the
minimum and the throughput (samples/s = batch / mean latency).

On the CPU the engine is the sim (TensorRT's API executed with torch ops), labelled as such; it is
not TensorRT. A real backend whose engines cannot run here (TensorRT-RTX without a GPU) makes the
engine runner "not runnable here", with the reason, while eager and torch.compile still run. If
``torch.compile`` fails, its error is recorded and the other runners go on.

fp16 (``precision="fp16"``): the model is cast with ``model.half()`` and floating inputs with
``.half()`` (recorded as ``"precision_mode": "model.half()"``); the engine is converted from that
half model. Benchmarks are not tests: nothing is asserted about the numbers.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import functools
import gc
import importlib
import importlib.util
import json
import logging
import os
import pathlib
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from torch2trt_lite.errors import BackendUnavailableError, Torch2TRTError
from torch2trt_lite.tools.metrics import max_rel_err

log = logging.getLogger("torch2trt_lite")

SIM_LABEL = "sim (TensorRT API on torch)"
EAGER_LABEL = "eager PyTorch"
COMPILE_LABEL = "torch.compile (mode=default)"
TRT_COMPILE = "torch.compile/torch2trt_lite"  # the runner of torch.compile(backend="torch2trt_lite")
RUNNERS = ("engine", "eager", "torch.compile")
PRECISIONS = ("fp32", "fp16")
JSON_NAME = "bench.json"
PLOT_NAME = "latency_p50.png"
_ERR_CHARS = 2000
_COMPILE_OPTIONS = {"mode": "default", "dynamic": False}


# ------------------------------------------------------------------------------------ results
@dataclass
class RunStats:
    """One runner at one batch size. ``status``: ``"ok"``, ``"not runnable here"`` or ``"failed"``
    (then ``reason`` says why and the timings are None)."""

    runner: str  # "engine", "eager" or "torch.compile"
    label: str
    batch: int
    status: str
    reason: str | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None
    min_ms: float | None = None
    throughput_samples_per_s: float | None = None
    setup_s: float | None = None  # conversion (engine) or first call, i.e. compilation (torch.compile)
    max_rel_err_vs_eager: float | None = None
    warmup: int = 0
    iters: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class BenchResult:
    """Per-runner, per-batch statistics and the description of the run (see ``to_dict``)."""

    stats: list[RunStats]
    runners: dict[str, str]  # runner -> label
    batch_sizes: list[int]
    warmup: int
    iters: int
    device: str
    dtype: str
    backend: str  # as requested
    backend_resolved: str | None  # "sim", "tensorrt", "tensorrt-rtx" (None: not available)
    precision: str
    precision_mode: str
    inputs: list[dict[str, Any]]
    compile: bool
    timing: str
    machine: dict[str, Any]
    date_started: str
    date_finished: str
    model: str = ""
    compile_options: dict[str, Any] = field(default_factory=lambda: dict(_COMPILE_OPTIONS))
    batching: str = "the first dimension of every input is replaced by the batch size (rows repeated)"
    command: str = field(default_factory=lambda: shlex.join([os.path.basename(sys.argv[0]), *sys.argv[1:]]))
    files: dict[str, str | None] = field(default_factory=dict)

    def get(self, runner: str, batch: int) -> RunStats:
        for s in self.stats:
            if s.runner == runner and s.batch == batch:
                return s
        raise KeyError(f"no result for runner {runner!r} at batch {batch} (runners: {', '.join(self.runners)})")

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "stats"}
        d = {"format": "torch2trt-lite-bench/1", **d}
        d["results"] = [dataclasses.asdict(s) for s in self.stats]
        return d

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def table(self) -> Any:
        """A ``rich.table.Table`` of the results, one row per runner and batch size."""
        from rich import box
        from rich.table import Table

        engine = self.backend_resolved or self.backend
        notes: list[str] = []  # the reasons of runners that did not run, once each, under the table
        rows = []
        for b in self.batch_sizes:
            for s in self.stats:
                if s.batch != b:
                    continue
                label = s.label
                if s.ok:
                    nums = [_ms(s.p50_ms), _ms(s.p90_ms), _ms(s.p99_ms), _rate(s.throughput_samples_per_s)]
                else:
                    nums = ["-"] * 4
                    reason = _first_line(s.reason or "no reason recorded", 300)
                    if reason not in notes:
                        notes.append(reason)
                    label += f" ({s.status} [{notes.index(reason) + 1}])"
                err = "-" if s.max_rel_err_vs_eager is None else f"{s.max_rel_err_vs_eager:.0e}"
                rows.append((b, [label, str(b), *nums, _fmt(s.setup_s, 2), err]))
        caption = f"latency p50/p90/p99 in ms; {self.warmup} warm-up + {self.iters} timed calls per runner and " \
            f"batch; {self.timing}; " \
            "setup: conversion (engine) or first call (torch.compile); rel err: max relative error vs eager"
        caption += "".join(f"\n[{k}] {n}" for k, n in enumerate(notes, 1))
        t = Table(
            title=f"{self.model or 'model'}: {self.device}, {self.precision} ({self.precision_mode}), backend {engine}",
            caption=caption, caption_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
        )
        t.add_column("runner", min_width=14)
        for name in ("batch", "p50", "p90", "p99", "samples/s", "setup s", "rel err"):
            t.add_column(name, justify="right")
        for k, (b, row) in enumerate(rows):
            t.add_row(*row, end_section=k + 1 < len(rows) and rows[k + 1][0] != b)
        return t

    def save(self, out_dir: str | os.PathLike[str]) -> dict[str, str | None]:
        """Write ``bench.json`` and the p50-latency plot ``latency_p50.png`` (needs matplotlib) in
        ``out_dir`` (made if missing); returns their paths (the plot's is None without matplotlib)."""
        out = pathlib.Path(out_dir)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise Torch2TRTError(f"cannot make the output folder {str(out)!r}: {e}") from None
        files: dict[str, str | None] = {"json": str(out / JSON_NAME), "plot": None}
        try:
            plot_latency(self, out / PLOT_NAME)
            files["plot"] = str(out / PLOT_NAME)
        except ImportError:
            log.warning("torch2trt-lite: no plot: matplotlib is not installed (pip install 'torch2trt-lite[bench]')")
        self.files = files
        try:
            (out / JSON_NAME).write_text(self.to_json() + "\n")
        except OSError as e:
            raise Torch2TRTError(f"cannot write {str(out / JSON_NAME)!r}: {e}") from None
        return files


def _fmt(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if v < 10 else f"{v:.2f}" if v < 1000 else f"{v:.0f}"


def _rate(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.1f}" if v < 100 else f"{v:,.0f}"


def _first_line(text: str, limit: int) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def plot_latency(result: BenchResult, path: str | os.PathLike[str]) -> None:
    """p50 latency against batch size (log x), one line per runner that ran; PNG via matplotlib's Agg."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    fig = Figure(figsize=(6.4, 4.4), dpi=120)
    FigureCanvasAgg(fig)  # Agg without touching pyplot's global backend
    ax = fig.subplots()
    for runner, label in result.runners.items():
        pts = [(s.batch, s.p50_ms) for s in result.stats if s.runner == runner and s.ok and s.p50_ms is not None]
        if pts:
            ax.plot([b for b, _ in pts], [v for _, v in pts], marker="o", label=label)
        else:
            ax.plot([], [], label=f"{label} (not run)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(result.batch_sizes)
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("batch size")
    ax.set_ylabel("p50 latency (ms)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{result.model or 'model'}: {result.device}, {result.precision}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(os.fspath(path), format="png")
    except OSError as e:
        raise Torch2TRTError(f"cannot write the plot {os.fspath(path)!r}: {e}") from None


# ------------------------------------------------------------------------------------ machine
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _module_version(name: str) -> str | None:
    if importlib.util.find_spec(name) is None:
        return None
    try:
        return str(getattr(importlib.import_module(name), "__version__", "unknown"))
    except ImportError as e:
        return f"not importable: {e}"


def machine_info() -> dict[str, Any]:
    """The machine and the library versions a benchmark ran with."""
    from torch2trt_lite._version import __version__

    try:
        affinity: int | None = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    return {
        "cpu_model": _cpu_model(),
        "cpu_cores": os.cpu_count(),
        "affinity_cores": affinity,
        "torch_threads": torch.get_num_threads(),
        "gpu": gpu,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "torch2trt_lite": __version__,
        "tensorrt": _module_version("tensorrt"),
        "tensorrt_rtx": _module_version("tensorrt_rtx"),
    }


def _load_average() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


# ------------------------------------------------------------------------------------ timing
def _timed(fn: Callable[[], Any], warmup: int, iters: int, cuda: bool) -> list[float]:
    """Milliseconds of each of ``iters`` calls of ``fn`` after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
        if cuda:
            torch.cuda.synchronize()
    times = []
    if cuda:
        torch.cuda.synchronize()
        for _ in range(iters):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(float(start.elapsed_time(end)))
    else:
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return times


def _stats(runner: str, label: str, batch: int, times: list[float], warmup: int) -> RunStats:
    if len(times) > 1:
        q = statistics.quantiles(times, n=100, method="inclusive")
        p50, p90, p99 = q[49], q[89], q[98]
    else:
        p50 = p90 = p99 = times[0]
    mean = statistics.fmean(times)
    return RunStats(
        runner, label, batch, "ok", p50_ms=p50, p90_ms=p90, p99_ms=p99, mean_ms=mean, min_ms=min(times),
        throughput_samples_per_s=batch * 1e3 / mean if mean > 0 else None, warmup=warmup, iters=len(times),
    )


def _error_text(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= _ERR_CHARS else text[: _ERR_CHARS - 3] + "..."


# ------------------------------------------------------------------------------------ inputs
def parse_batch_sizes(text: str) -> list[int]:
    """``"1,8,32"`` -> ``[1, 8, 32]`` (a clear :class:`Torch2TRTError` otherwise)."""
    parts = [p.strip() for p in str(text).split(",")]
    try:
        sizes = [int(p) for p in parts]
    except ValueError:
        raise Torch2TRTError(
            f"--batch {text!r}: expected comma-separated positive integers like 1,8,32"
        ) from None
    return _check_batch_sizes(sizes, f"--batch {text!r}")


def _check_batch_sizes(sizes: Any, what: str = "batch_sizes") -> list[int]:
    if isinstance(sizes, int | str) or not isinstance(sizes, Sequence):
        raise Torch2TRTError(f"{what}: expected a list of positive integers like [1, 8, 32], got {sizes!r}")
    out: list[int] = []
    for b in sizes:
        if isinstance(b, bool) or not isinstance(b, int) or b <= 0:
            raise Torch2TRTError(f"{what}: batch sizes must be positive integers like 1,8,32, got {b!r}")
        if b in out:
            raise Torch2TRTError(f"{what}: batch size {b} is given twice; give each once")
        out.append(b)
    if not out:
        raise Torch2TRTError(f"{what}: give at least one batch size, e.g. 1,8,32")
    return out


def _with_batch(xs: list[torch.Tensor], b: int) -> list[torch.Tensor]:
    """The inputs with first dimension ``b``: rows of each input repeated (valid ids and masks stay valid)."""
    out = []
    for k, x in enumerate(xs):
        if x.dim() == 0 or x.shape[0] == 0:
            raise Torch2TRTError(
                f"input {k} has shape {tuple(x.shape)}: a batch size replaces the first dimension, so every "
                "input needs one of size >= 1 (or pass batch_sizes=None to run the inputs as they are)"
            )
        idx = torch.arange(b, device=x.device) % x.shape[0]
        out.append(x.index_select(0, idx).contiguous())
    return out


def _prepare(
    model: Any, inputs: Any, precision: str | None, device: torch.device
) -> tuple[Any, list[torch.Tensor], str]:
    xs = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs)
    if not all(isinstance(x, torch.Tensor) for x in xs):
        raise Torch2TRTError("inputs must be a tensor or a list of tensors (the model is called as model(*inputs))")
    if precision is not None and precision not in PRECISIONS:
        raise Torch2TRTError(f"precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    mode = "as given"
    cast = {"fp32": torch.float32, "fp16": torch.float16}.get(precision or "")
    params = list(model.parameters()) + list(model.buffers()) if isinstance(model, torch.nn.Module) else []
    needs_move = any(p.device != device for p in params)
    needs_cast = cast is not None and any(p.is_floating_point() and p.dtype != cast for p in params)
    if isinstance(model, torch.nn.Module) and (needs_move or needs_cast):
        model = copy.deepcopy(model)  # the caller's model stays where and what it was
        model.to(device)
        if cast is torch.float16:
            model.half()
        elif cast is torch.float32:
            model.float()
    if precision == "fp16":
        mode = "model.half()"
    elif precision == "fp32":
        mode = "model.float()"
    xs = [x.detach().to(device) for x in xs]
    if cast is not None:
        xs = [x.to(cast) if x.is_floating_point() else x for x in xs]
    return model, xs, mode


# ------------------------------------------------------------------------------------ bench
def bench(
    model: Any,
    inputs: Sequence[torch.Tensor] | torch.Tensor,
    *,
    batch_sizes: Sequence[int] | None = None,
    backend: str = "auto",
    warmup: int = 10,
    iters: int = 50,
    compile: bool = True,
    out_dir: str | os.PathLike[str] | None = None,
    precision: str | None = None,
    device: str | torch.device | None = None,
    verbose: bool = False,
    trt_compile: bool = False,
) -> BenchResult:
    """Time the engine of ``model`` against eager PyTorch and ``torch.compile`` (see the module doc).

    ``batch_sizes``: the first dimension of every input is replaced by each (None: the inputs as
    they are). ``backend``: as for :func:`torch2trt_lite.convert`. ``precision``: None (model and
    inputs as given), ``"fp32"`` or ``"fp16"`` (``model.half()`` and half floating inputs; the model
    is copied first, the caller's is left alone). ``device``: default CUDA when available, else CPU.
    ``out_dir``: also write ``bench.json`` and ``latency_p50.png`` there. ``verbose``: progress on stderr.
    ``trt_compile``: also time ``torch.compile(model, backend="torch2trt_lite")`` on the same backend
    (runner ``"torch.compile/torch2trt_lite"``; on the CPU its engines are the sim's, labelled so).
    """
    from torch2trt_lite.backends import get_backend

    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise Torch2TRTError(f"warmup must be an integer >= 0, got {warmup!r}")
    if isinstance(iters, bool) or not isinstance(iters, int) or iters < 1:
        raise Torch2TRTError(f"iters must be an integer >= 1, got {iters!r}")
    if not callable(model):
        raise Torch2TRTError(f"model must be an nn.Module or a callable, got {type(model).__name__}")
    dev = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise Torch2TRTError(f"device {str(dev)!r}: torch.cuda.is_available() is False here; use device='cpu'")
    cuda = dev.type == "cuda"
    model, xs, mode = _prepare(model, inputs, precision, dev)
    sizes = _check_batch_sizes(batch_sizes) if batch_sizes is not None else None
    if sizes is None:
        sizes = [int(xs[0].shape[0]) if xs and xs[0].dim() > 0 else 1]
    floats = sorted({str(x.dtype).replace("torch.", "") for x in xs if x.is_floating_point()})
    dtype = ",".join(floats) or "none"
    machine = machine_info()
    machine["load_average_before"] = _load_average()
    started = _now()

    def say(text: str) -> None:
        if verbose:
            print(f"torch2trt-lite bench: {text}", file=sys.stderr, flush=True)

    # the engine runner: resolve the backend once; a real one without a GPU is not runnable here
    be_name: str | None = None
    engine_label = f"engine ({backend})"
    not_runnable: str | None = None
    try:
        be = get_backend(backend)
        be_name = be.name
        engine_label = SIM_LABEL if be.name == "sim" else be.label
        if not be.can_run():
            not_runnable = (
                f"{be.label} builds engines here, but running one needs a supported NVIDIA GPU and "
                "torch.cuda.is_available() is False; eager PyTorch and torch.compile ran without it"
            )
        elif be.is_real and not cuda:
            not_runnable = f"{be.label} engines take CUDA tensors; bench with device='cuda'"
    except BackendUnavailableError as e:
        not_runnable = str(e)
    runners = {"engine": engine_label, "eager": EAGER_LABEL}
    if compile:
        runners["torch.compile"] = COMPILE_LABEL
    trt_label = f"torch.compile(torch2trt_lite) on {'sim' if be_name == 'sim' else engine_label}"
    if trt_compile:
        runners[TRT_COMPILE] = trt_label
    failed: dict[str, str] = {}
    stats: list[RunStats] = []
    with torch.no_grad():
        for b in sizes:
            xb = _with_batch(xs, b) if batch_sizes is not None else xs
            say(f"batch {b}: {EAGER_LABEL}")
            try:
                ref = model(*xb)
            except Exception as e:  # noqa: BLE001 - the user's model failed in eager PyTorch
                raise Torch2TRTError(
                    f"the model fails in eager PyTorch at batch {b} on inputs of shape(s) "
                    f"{', '.join(str(tuple(x.shape)) for x in xb)}: {_error_text(e)}"
                ) from None
            stats.append(_stats("eager", EAGER_LABEL, b, _timed(functools.partial(model, *xb), warmup, iters, cuda), warmup))

            if compile:
                stats.append(_bench_compile(model, xb, b, ref, warmup, iters, cuda, failed, say))
            if trt_compile and not_runnable is not None:  # NOTE: its blocks would run in PyTorch: not timed
                stats.append(RunStats(TRT_COMPILE, trt_label, b, "not runnable here", reason=not_runnable))
            elif trt_compile:
                from torch2trt_lite.compile import compile_backend

                options = {"backend": compile_backend(backend=be_name or backend), "dynamic": False}
                stats.append(_bench_compile(model, xb, b, ref, warmup, iters, cuda, failed, say, TRT_COMPILE,
                                            trt_label, options))

            if not_runnable is not None:
                stats.append(RunStats("engine", engine_label, b, "not runnable here", reason=not_runnable))
            elif "engine" in failed:
                stats.append(RunStats("engine", engine_label, b, "failed", reason=failed["engine"]))
            else:
                stats.append(_bench_engine(model, xb, b, ref, be_name or backend, engine_label, warmup, iters, cuda, failed, say))
            del xb, ref
            gc.collect()  # this batch's inputs and outputs before the next one
    machine["load_average_after"] = _load_average()
    result = BenchResult(
        stats=stats, runners=runners, batch_sizes=sizes, warmup=warmup, iters=iters, device=str(dev), dtype=dtype,
        backend=backend, backend_resolved=be_name, precision=precision or dtype, precision_mode=mode,
        inputs=[{"shape": list(x.shape), "dtype": str(x.dtype).replace("torch.", "")} for x in xs],
        compile=bool(compile),
        timing="CUDA events (torch.cuda.Event), synchronized per iteration" if cuda
        else "time.perf_counter per iteration (CPU)",
        machine=machine, date_started=started, date_finished=_now(),
        model=type(model).__name__,
    )
    if batch_sizes is None:
        result.batching = "the inputs as given"
    if out_dir is not None:
        result.save(out_dir)
    return result


def _bench_engine(
    model: Any, xb: list[torch.Tensor], b: int, ref: Any, backend: str, label: str, warmup: int, iters: int,
    cuda: bool, failed: dict[str, str], say: Callable[[str], None],
) -> RunStats:
    from torch2trt_lite.convert import convert

    say(f"batch {b}: converting for {label}")
    try:
        engine = convert(model, xb, backend=backend)
        err = max_rel_err(engine(*xb), ref)
        s = _stats("engine", label, b, _timed(functools.partial(engine, *xb), warmup, iters, cuda), warmup)
    except Torch2TRTError as e:
        failed["engine"] = f"at batch {b}: {_error_text(e)}"
        return RunStats("engine", label, b, "failed", reason=failed["engine"])
    s.setup_s, s.max_rel_err_vs_eager = engine.conversion_time_s, err
    return s


def _bench_compile(
    model: Any, xb: list[torch.Tensor], b: int, ref: Any, warmup: int, iters: int, cuda: bool,
    failed: dict[str, str], say: Callable[[str], None], runner: str = "torch.compile", label: str = COMPILE_LABEL,
    options: dict[str, Any] | None = None,
) -> RunStats:
    if runner in failed:
        return RunStats(runner, label, b, "failed", reason=f"not retried: {failed[runner]}")
    say(f"batch {b}: {label} (compiling)")
    try:
        torch.compiler.reset()  # a fresh static-shape compile per batch size, as the engine gets
        compiled = torch.compile(model, **(options or _COMPILE_OPTIONS))  # type: ignore[call-overload]
        t0 = time.perf_counter()
        out = compiled(*xb)
        if cuda:
            torch.cuda.synchronize()
        setup = time.perf_counter() - t0
        err = max_rel_err(out, ref)
        s = _stats(runner, label, b, _timed(functools.partial(compiled, *xb), warmup, iters, cuda), warmup)
    except Exception as e:  # noqa: BLE001 - torch.compile fails in many ways (no compiler, unsupported ops)
        failed[runner] = f"failed at batch {b}: {_error_text(e)}"
        log.warning("torch2trt-lite: %s failed (recorded in the result): %s", label, _first_line(str(e), 200))
        return RunStats(runner, label, b, "failed", reason=failed[runner])
    s.setup_s, s.max_rel_err_vs_eager = setup, err
    return s
