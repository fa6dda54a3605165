"""Layer-by-layer accuracy debugging: ``compare(model, inputs)`` finds the first layer that drifts.

    report = torch2trt_lite.compare(model.eval(), [x], backend="sim", tolerance=1e-3)
    print(report)            # a table: op, module path, source line, layer, max abs / max rel / cosine
    report.first_bad         # the first tensor past the tolerance (by max rel), or None
    report.to_dict()         # JSON-able

The model is traced as ``convert`` traces it, keeping every converted call's eager output (a copy
taken when the call ran) with the network tensor it became. Those network tensors are marked as
extra engine outputs (network inputs and shape tensors are skipped), the engine is built and run
once on the inputs, and each intermediate is compared with PyTorch's value.

The extra outputs keep TensorRT from fusing across them, so a real backend's engine here is not
bit-for-bit the one ``convert`` builds; the sim computes the same either way.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from torch2trt_lite.errors import BackendUnavailableError, BuildError, Torch2TRTError
from torch2trt_lite.trace.context import ConversionContext
from torch2trt_lite.trace.context import Lazy as _Lazy
from torch2trt_lite.trace.tracer import user_location

_OPTIONS = ("backend", "input_names", "output_names", "max_workspace_size", "compute_capabilities", "precision",
            "fp16_mode", "precision_overrides", "io_dtype")


@dataclass
class TensorComparison:
    """One compared tensor: where it came from and how far the engine's value is from PyTorch's.

    ``max_rel`` is the max absolute error divided by the largest magnitude of PyTorch's tensor (the
    absolute error where that tensor is all zeros); ``cosine`` is the cosine similarity of the two
    tensors (flattened, finite elements)."""

    index: int
    op: str
    module_path: str
    location: str
    layer: str
    tensor: str
    shape: list[int]
    dtype: str
    max_abs: float
    max_rel: float
    cosine: float
    ok: bool

    def to_dict(self) -> dict[str, Any]:
        return {k: (_finite(v) if isinstance(v, float) else v) for k, v in asdict(self).items()}


@dataclass
class Skipped:
    """A converted call whose output was not compared, and why."""

    op: str
    module_path: str
    location: str
    reason: str


@dataclass
class CompareReport:
    """What :func:`compare` found: every compared tensor in network order, and the calls skipped."""

    backend: str
    tolerance: float
    entries: list[TensorComparison] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def first_bad(self) -> TensorComparison | None:
        """The first tensor (in network order) whose max relative error is past the tolerance."""
        return next((e for e in self.entries if not e.ok), None)

    @property
    def ok(self) -> bool:
        return self.first_bad is None

    def to_dict(self) -> dict[str, Any]:
        bad = self.first_bad
        return {
            "backend": self.backend,
            "tolerance": self.tolerance,
            "ok": self.ok,
            "first_bad": bad.index if bad is not None else None,
            "entries": [e.to_dict() for e in self.entries],
            "skipped": [asdict(s) for s in self.skipped],
        }

    def __str__(self) -> str:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"torch2trt-lite compare ({self.backend}, tolerance {self.tolerance:g})")
        for col in ("#", "op", "module", "source", "layer", "shape", "max abs", "max rel", "cosine", ""):
            table.add_column(col, justify="right" if col in ("#", "max abs", "max rel", "cosine") else "left")
        bad = self.first_bad
        for e in self.entries:
            status = "OK" if e.ok else ("FIRST BAD" if e is bad else "bad")
            table.add_row(
                str(e.index), e.op, e.module_path or "<model>", _short(e.location), e.layer,
                "x".join(map(str, e.shape)) or "scalar", f"{e.max_abs:.3g}", f"{e.max_rel:.3g}",
                f"{e.cosine:.6f}", status, style=None if e.ok else ("bold red" if e is bad else "red"),
            )
        buf = io.StringIO()
        console = Console(file=buf, width=200, force_terminal=False, color_system=None)
        console.print(table)
        lines = [buf.getvalue().rstrip()]
        if self.skipped:
            lines.append(f"{len(self.skipped)} call(s) not compared:")
            lines += [f"  {s.op} at {s.module_path or '<model>'} ({_short(s.location)}): {s.reason}" for s in self.skipped]
        if bad is None:
            lines.append(f"all {len(self.entries)} tensor(s) within max rel {self.tolerance:g}")
        else:
            lines.append(
                f"first bad: #{bad.index} {bad.op} at {bad.module_path or '<model>'} ({bad.location}), layer "
                f"{bad.layer!r}: max rel {bad.max_rel:.3g} > {self.tolerance:g}"
            )
        return "\n".join(lines)


def _finite(v: float) -> float | str:
    return v if v == v and v not in (float("inf"), float("-inf")) else str(v)


def _short(location: str) -> str:
    path, _, line = location.rpartition(":")
    if not path:
        return location
    try:
        rel = os.path.relpath(path)
    except ValueError:
        rel = path
    return f"{rel if len(rel) < len(path) else path}:{line}"


@dataclass
class _Record:
    traced: torch.Tensor  # the traced tensor (kept alive: its network tensor is looked up at the end)
    eager: torch.Tensor  # its value when the call ran (a copy: later in-place calls must not change it)
    entry: tuple[Any, int]  # (network tensor, version) it was mapped to
    op: str
    module_path: str
    location: str


class _RecordingContext(ConversionContext):
    """A ConversionContext that remembers every converted call's outputs (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.records: list[_Record] = []

    def bind_outputs(self, call: Any, result: Any) -> None:
        super().bind_outputs(call, result)
        out = call.output
        outs = [out] if isinstance(out, torch.Tensor) else [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        location = user_location(1)
        for t in outs:
            entry = self._map.get(t)
            if entry is not None:
                self.records.append(_Record(t, t.detach().clone(), entry, call.qualname, call.module_path, location))


def _errors(got: torch.Tensor, ref: torch.Tensor) -> tuple[float, float, float]:
    g = got.detach().cpu().to(torch.float64).reshape(-1)
    r = ref.detach().cpu().to(torch.float64).reshape(-1)
    if g.numel() == 0:
        return 0.0, 0.0, 1.0
    same = (g == r) | (torch.isnan(g) & torch.isnan(r))
    diff = torch.where(same, torch.zeros_like(g), (g - r).abs())
    diff = torch.nan_to_num(diff, nan=float("inf"))
    max_abs = float(diff.max())
    finite = torch.isfinite(r)
    scale = float(r[finite].abs().max()) if bool(finite.any()) else 0.0
    max_rel = max_abs / scale if scale > 0 else max_abs
    both = finite & torch.isfinite(g)
    gf, rf = g[both], r[both]
    ng, nr = float(gf.norm()), float(rf.norm())
    if ng == 0.0 and nr == 0.0:
        cosine = 1.0
    elif ng == 0.0 or nr == 0.0:
        cosine = 0.0
    else:
        cosine = float(torch.dot(gf, rf) / (ng * nr))
    return max_abs, max_rel, cosine


# The default tolerance by the lowest floating type the engine computes in (``precision``, or the inputs'
# own type): float32's 1e-3, and about ten units of rounding of float16 (9.8e-4) and bfloat16 (7.8e-3).
DEFAULT_TOLERANCE = {torch.float32: 1e-3, torch.float16: 1e-2, torch.bfloat16: 5e-2}


def default_tolerance(precision: Any = "fp32", fp16_mode: bool = False, inputs: Sequence[Any] = ()) -> float:
    """``compare``'s tolerance where none is given: :data:`DEFAULT_TOLERANCE` of the lowest of the compute
    precision (``precision``, ``fp16_mode``) and the inputs' floating types."""
    from torch2trt_lite.trace.precision import precision_dtype

    types = {precision_dtype(precision)} | ({torch.float16} if fp16_mode else set())
    types |= {x.dtype for x in inputs if isinstance(x, torch.Tensor) and x.dtype in DEFAULT_TOLERANCE}
    return max(DEFAULT_TOLERANCE[t] for t in types)


def compare(
    model: Any, inputs: Sequence[torch.Tensor] | torch.Tensor, *, tolerance: float | None = None,
    **convert_options: Any,
) -> CompareReport:
    """Convert ``model`` as :func:`torch2trt_lite.convert` does, run the engine once on ``inputs``
    with every converted call's output as an extra engine output, and compare each with PyTorch's.

    ``tolerance``: the largest max relative error (max abs error / the tensor's max magnitude) a
    tensor may have; the report's ``first_bad`` is the first tensor past it, in network order. By
    default it follows the precision (:func:`default_tolerance`: 1e-3 in fp32, 1e-2 with fp16, 5e-2
    with bf16, compute precision or input type).
    ``convert_options``: ``backend`` (default ``"auto"``), ``input_names``, ``output_names``,
    ``max_workspace_size``, ``compute_capabilities``, ``precision``, ``fp16_mode``,
    ``precision_overrides`` and ``io_dtype``, as for ``convert``. With a reduced precision each
    tensor is compared with PyTorch's computed with the same casts (the traced run), so the report
    names the first layer where the engine differs from PyTorch in that precision.

    Works on the sim; on TensorRT and TensorRT-RTX it needs a GPU to run the engine (on a machine
    without one it raises :class:`BackendUnavailableError`). The real-backend path is written for
    a GPU and was not executed where it was written (no GPU there).
    """
    from torch2trt_lite._version import __version__
    from torch2trt_lite.backends import get_backend, torch_dtype
    from torch2trt_lite.build.define import define
    from torch2trt_lite.build.inputs import as_inputs, check_model
    from torch2trt_lite.build.options import check_workspace, compute_targets
    from torch2trt_lite.runtime.loading import FORMAT
    from torch2trt_lite.runtime.module import TRTModule
    from torch2trt_lite.runtime.structure import dtype_name, encode_tree

    unknown = sorted(set(convert_options) - set(_OPTIONS))
    if unknown:
        raise Torch2TRTError(f"compare() does not take {', '.join(unknown)}; it takes {', '.join(_OPTIONS)}")
    if tolerance is None:
        tolerance = default_tolerance(convert_options.get("precision", "fp32"),
                                      bool(convert_options.get("fp16_mode", False)),
                                      [inputs] if isinstance(inputs, torch.Tensor) else list(inputs))
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not tolerance >= 0:
        raise Torch2TRTError(f"tolerance must be a non-negative number (e.g. 1e-3), got {tolerance!r}")
    check_model(model)
    xs = as_inputs(inputs)
    workspace = check_workspace(convert_options.get("max_workspace_size", 1 << 30))
    be = get_backend(convert_options.get("backend", "auto"))
    if not be.can_run():
        raise BackendUnavailableError(
            f"compare() runs the engine, and engines of {be.label} need a supported NVIDIA GPU to run; this "
            "machine has none (torch.cuda.is_available() is False). Compare on the sim (backend='sim') "
            "here, or run compare on a GPU machine"
        )
    targets = compute_targets(be, convert_options.get("compute_capabilities"))
    from torch2trt_lite.build.precision import precision_setup
    from torch2trt_lite.trace import shapes as _shapes

    res = _shapes.resolve(xs)
    policy, out_float = precision_setup(
        model, res, convert_options.get("precision", "fp32"), convert_options.get("fp16_mode", False),
        convert_options.get("precision_overrides"), convert_options.get("io_dtype"),
    )
    xs = res.examples
    d = define(
        model, xs, be, convert_options.get("input_names"), convert_options.get("output_names"),
        context_cls=_RecordingContext, policy=policy, out_float=out_float,
    )
    ctx = d.context
    assert isinstance(ctx, _RecordingContext)
    network = d.network
    report = CompareReport(be.name, float(tolerance))

    # network tensor name -> (layer index, layer name)
    producers: dict[int, tuple[int, Any]] = {}
    for i in range(int(network.num_layers)):
        layer = network.get_layer(i)
        for j in range(int(layer.num_outputs)):
            producers[id(layer.get_output(j))] = (i, layer)

    out_names = [m["name"] for m in d.out_meta]
    limit = 4096 - len(d.input_names)  # engine_file.MAX_IO
    chosen: dict[int, tuple[Any, str]] = {}  # id(network tensor) -> (tensor, output name)
    rows: list[tuple[int, int, _Record, Any]] = []
    for k, rec in enumerate(ctx.records):
        it, version = rec.entry
        now = ctx._map.get(rec.traced)
        if now is not None and now[1] == version and now[0] is not it:
            # NOTE: re-mapped without being modified: a later converter rewrote the layer that made it
            # (batch norm folded into the convolution); its unfolded copy is in the network only if used.
            if isinstance(now[0], _Lazy):
                report.skipped.append(Skipped(rec.op, rec.module_path, rec.location,
                                              "fused into the next layer (batch-norm folding)"))
                continue
            it = now[0]
        if getattr(it, "is_network_input", False):
            report.skipped.append(Skipped(rec.op, rec.module_path, rec.location, "is a network input"))
            continue
        if it.is_shape_tensor:
            report.skipped.append(Skipped(rec.op, rec.module_path, rec.location, "is a shape tensor"))
            continue
        if id(it) not in producers:
            report.skipped.append(Skipped(rec.op, rec.module_path, rec.location, "has no producing layer"))
            continue
        if id(it) not in chosen:
            if it.is_network_output:
                chosen[id(it)] = (it, str(it.name))
            elif len(chosen) >= limit:
                report.skipped.append(Skipped(rec.op, rec.module_path, rec.location,
                                              f"past {limit} compared tensors (an engine's I/O limit)"))
                continue
            else:
                name = f"t2l_debug_{len(chosen)}"
                while name in out_names or name in d.input_names:
                    name += "_"
                it.name = name
                network.mark_output(it)
                chosen[id(it)] = (it, name)
        rows.append((producers[id(it)][0], k, rec, it))
    rows.sort(key=lambda r: (r[0], r[1]))

    # outputs: the model's own (as convert marks them) then the extra ones, in network order
    extra = [t for t, n in chosen.values() if n not in out_names]
    all_names = out_names + [str(t.name) for t in extra]
    out_dtypes = {str(t.name): dtype_name(torch_dtype(t.dtype)) for t in extra}
    outputs = list(d.out_meta) + [
        {"name": str(t.name), "dtype": out_dtypes[str(t.name)], "shape": [int(s) for s in t.shape]} for t in extra
    ]
    config = d.builder.create_builder_config()
    config.set_memory_pool_limit(be.trt.MemoryPoolType.WORKSPACE, workspace)
    if targets:
        config.num_compute_capabilities = len(targets)
        for k, cc in enumerate(targets):
            config.set_compute_capability(cc, k)
    plan = d.builder.build_serialized_network(network, config)
    if plan is None:
        raise BuildError("building the engine with the intermediate tensors as outputs failed: "
                         + ("; ".join(d.logger.errors) or "no reason given"))
    meta = {
        "format": FORMAT, "torch2trt_lite": __version__, "backend": be.name, "trt_version": be.version,
        "api_version": getattr(be.trt, "_version", None) if be.name == "sim" else None,
        "device_capability": list(torch.cuda.get_device_capability()) if be.name == "tensorrt" else None,
        "compute_capabilities": (
            [str(c.name).lower() for c in targets] or "default"
        ) if be.name == "tensorrt-rtx" else None,
        "num_layers": int(network.num_layers),
        "inputs": [
            {"name": n, "dtype": dtype_name(x.dtype), "shape": list(x.shape), "min": list(x.shape), "max": list(x.shape)}
            for n, x in zip(d.input_names, xs, strict=True)
        ],
        "outputs": outputs,
        "out_tree": encode_tree([torch.empty(0)] * len(outputs), [0]),
        "plugins": any(network.get_layer(i).type == getattr(be.trt.LayerType, "PLUGIN_V3", None)
                       for i in range(int(network.num_layers))),
    }
    engine = TRTModule(plan, meta)
    device = torch.device("cuda") if be.is_real else xs[0].device
    got = engine(*[x.to(device) for x in xs])
    values = dict(zip(all_names, got, strict=True))

    for _, _, rec, it in rows:
        name = chosen[id(it)][1]
        value = values[name]
        layer = producers[id(it)][1]
        ref = rec.eager
        if value.shape != ref.shape and value.numel() == ref.numel():
            value = value.reshape(ref.shape)
        if value.shape != ref.shape:
            max_abs = max_rel = float("inf")
            cosine = 0.0
        else:
            max_abs, max_rel, cosine = _errors(value, ref)
        report.entries.append(TensorComparison(
            index=len(report.entries), op=rec.op, module_path=rec.module_path, location=rec.location,
            layer=str(layer.name), tensor=name, shape=list(ref.shape), dtype=dtype_name(ref.dtype),
            max_abs=max_abs, max_rel=max_rel, cosine=cosine, ok=max_rel <= tolerance,
        ))
    return report


__all__ = ["DEFAULT_TOLERANCE", "CompareReport", "Skipped", "TensorComparison", "compare", "default_tolerance"]
