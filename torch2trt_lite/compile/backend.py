"""The ``torch2trt_lite`` backend of ``torch.compile``: TensorRT engines for what converts, PyTorch
for the rest.

    trt = torch.compile(model.eval(), backend="torch2trt_lite")
    trt = torch.compile(model.eval(), backend=torch2trt_lite.compile_backend(precision="fp16", min_block_size=3))
    with torch.no_grad():
        y = trt(x)
    print(torch2trt_lite.compile_report())

Per FX graph that dynamo hands over: the placeholders are sorted (:mod:`.support`), the nodes the
tracer converts are found with one ``check()`` dry run, torch's ``CapabilityBasedPartitioner``
groups them into blocks (a block of fewer than ``min_block_size`` ops stays in PyTorch), and each
block is converted with :func:`torch2trt_lite.convert` into a :class:`TRTModule` (engines, cache,
precision and the sim as with ``convert``). A block whose conversion fails runs in PyTorch, with
a warning naming the reason.

Correct by construction:

- The module's parameters and buffers (and float attributes dynamo passes as tensors) are the
  engines' constants; every call checks that they are the tensors converted, unchanged
  (``Tensor._version``), or the same values; otherwise the graph runs in PyTorch, with a warning.
- In-place writes, the nodes that share memory with them and returned views of inputs stay in
  PyTorch (:func:`.support.alias_hazards`); every write gets the data edges of eager's order with
  the reads of its memory (:func:`.support.order_writes`), which dynamo's graph lacks.
- ``torch.vmap`` regions are written out as ops on whole tensors (:mod:`.vmap`); a region it does
  not understand, and a higher-order op (``torch.cond``, ...), runs whole in PyTorch as one node
  (the dry run does not trace it), so no engine runs inside a functorch level.
- A graph compiled while autograd records (grad mode on and an input that requires grad) runs in
  PyTorch: engines have no backward. Dynamo guards on grad mode, so ``torch.no_grad()`` compiles
  another graph, which gets engines.
- Dynamic dims (``dynamic=True`` or dynamo's automatic dynamic shapes) become
  :class:`~torch2trt_lite.Input` ranges: the bounds dynamo's ``ShapeEnv`` knows, else up to
  ``dynamic_max`` (default: 4x the size the graph was compiled at). A call outside the range, or
  one the engine refuses, runs that block in PyTorch with a warning.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx import GraphModule, Interpreter, Node
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from torch2trt_lite.backends import get_backend
from torch2trt_lite.compile import report as _report
from torch2trt_lite.compile import support as _support
from torch2trt_lite.compile import vmap as _vmap
from torch2trt_lite.convert import convert
from torch2trt_lite.errors import (
    BackendUnavailableError,
    InternalError,
    RuntimeExecutionError,
    Torch2TRTError,
)
from torch2trt_lite.trace.shapes import Input

log = logging.getLogger("torch2trt_lite")

DYNAMIC_MAX_FACTOR = 4  # an unbounded dynamic dim ranges up to this many times its size at compile time
_LABELS = {"sim": "TensorRT (sim)", "tensorrt": "TensorRT", "tensorrt-rtx": "TensorRT-RTX"}
# NOTE: a block's conversion may fail in a converter with torch's own error; it then runs in PyTorch
_CONVERSION_FAILURES = (Torch2TRTError, InternalError, RuntimeError, TypeError, ValueError, NotImplementedError)
_ANALYSIS_FAILURES = (*_CONVERSION_FAILURES, AttributeError, KeyError, IndexError, AssertionError)


@dataclass(frozen=True)
class CompileOptions:
    """The backend's options (see :func:`compile_backend`)."""

    backend: str = "auto"
    precision: str | torch.dtype = "fp32"
    precision_overrides: Mapping[Any, Any] | None = None
    cache_dir: str | os.PathLike[str] | None = None
    max_workspace_size: int = 1 << 30
    compute_capabilities: Sequence[str | tuple[int, int]] | str | None = None
    min_block_size: int = 3
    torch_executed_ops: tuple[Any, ...] = ()
    dynamic_max: int | None = None
    verify: bool = True


class Backend:
    """A configured backend: ``torch.compile(model, backend=Backend(options))``."""

    def __init__(self, options: CompileOptions) -> None:
        if isinstance(options.min_block_size, bool) or not isinstance(options.min_block_size, int) \
                or options.min_block_size < 1:
            raise Torch2TRTError(f"compile_backend: min_block_size must be an int >= 1, got {options.min_block_size!r}")
        if options.dynamic_max is not None and (not isinstance(options.dynamic_max, int) or options.dynamic_max < 1):
            raise Torch2TRTError(f"compile_backend: dynamic_max must be an int >= 1 or None, got {options.dynamic_max!r}")
        inlined = [k for k in (options.precision_overrides or {}) if isinstance(k, (str, type))]
        if inlined:
            raise Torch2TRTError(
                f"compile_backend: precision_overrides keys {inlined!r} name module paths or classes, which dynamo "
                "inlines (the graphs it hands over have no modules); key the overrides by op instead "
                "(e.g. {torch.nn.functional.softmax: 'fp32'}), or convert the model with torch2trt_lite.convert"
            )
        self.options = options
        self.__name__ = "torch2trt_lite"

    def __call__(self, gm: GraphModule, example_inputs: Sequence[Any]) -> Any:
        return compile_graph(gm, example_inputs, self.options)


def compile_backend(
    *, backend: str = "auto", precision: str | torch.dtype = "fp32",
    precision_overrides: Mapping[Any, Any] | None = None, cache_dir: str | os.PathLike[str] | None = None,
    max_workspace_size: int = 1 << 30, compute_capabilities: Sequence[str | tuple[int, int]] | str | None = None,
    min_block_size: int = 3, torch_executed_ops: Sequence[Any] = (), dynamic_max: int | None = None,
    verify: bool = True,
) -> Backend:
    """A ``torch.compile`` backend with these options: ``torch.compile(model, backend=compile_backend(...))``.

    ``backend``, ``precision``, ``precision_overrides``, ``cache_dir``, ``max_workspace_size``,
    ``compute_capabilities`` and ``verify`` are :func:`torch2trt_lite.convert`'s, for every block.
    ``min_block_size``: a block of fewer ops than this stays in PyTorch (an engine call costs more
    than a few ops). ``torch_executed_ops``: ops that always run in PyTorch (callables such as
    ``torch.nn.functional.gelu``, ``nn.Module`` classes, or qualified names such as
    ``"torch.Tensor.softmax"``). ``dynamic_max``: the largest size of a dynamic dim whose upper
    bound dynamo does not know (default: 4x its size when the graph was compiled)."""
    return Backend(CompileOptions(
        backend=backend, precision=precision, precision_overrides=precision_overrides, cache_dir=cache_dir,
        max_workspace_size=max_workspace_size, compute_capabilities=compute_capabilities,
        min_block_size=min_block_size, torch_executed_ops=tuple(torch_executed_ops), dynamic_max=dynamic_max,
        verify=verify,
    ))


# ------------------------------------------------------------------------------- one graph
def _hint(v: Any) -> Any:
    """A ``SymInt``/``SymFloat`` example input as the number it stands for."""
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        hint = v.node.hint
        env = v.node.shape_env
        return hint if hint is not None or env is None else env.size_hint(v.node.expr)
    return v


def _count(nodes: Any) -> list[str]:
    return [n.name for n in nodes if n.op in _support.CALLS and not _support.is_plumbing(n)]


def compile_graph(gm: GraphModule, example_inputs: Sequence[Any], options: CompileOptions) -> Any:
    """The backend's work on one graph: returns the callable dynamo runs in its place. Never an
    error: where the analysis itself fails, the graph runs in PyTorch with a warning."""
    t0 = time.perf_counter()
    eager = GraphModule(gm, copy.deepcopy(gm.graph))
    try:
        return _compile_graph(gm, example_inputs, options, t0, eager)
    except _ANALYSIS_FAILURES as e:
        warnings.warn(f"torch2trt_lite backend: this graph runs in PyTorch, its analysis failed "
                      f"({type(e).__name__}: {e}); please report it with the model", stacklevel=2)
        names = [_support.op_name(n, eager) for n in eager.graph.nodes if n.op in _support.CALLS]
        graph = _report.GraphReport(index=-1, backend="PyTorch", ops=len(names), trt_ops=0,
                                    note=f"analysis failed: {type(e).__name__}: {e}")
        graph.partitions.append(_report.PartitionReport("graph", "PyTorch", names))
        return _done(graph, t0, eager.forward)


def _compile_graph(gm: GraphModule, example_inputs: Sequence[Any], options: CompileOptions, t0: float,
                   eager: GraphModule) -> Any:
    label = _LABELS.get(get_backend(options.backend).name, options.backend)
    values = [_hint(v) for v in example_inputs]
    vmaps = _vmap.unbatch(gm)
    fused_regions = _vmap.fuse_left(gm, vmaps)
    # node name -> the ops it stands for in the report (a vmap region left as it is: its body's ops)
    inner = {call: [(n.name, _support.op_name(n, gm)) for n in region.nodes
                    if n.op in _support.CALLS and not _support.is_plumbing(n)]
             for call, region in fused_regions.items()}
    atomic = {name: f"in a torch.vmap that PyTorch runs whole (its body has {region.reason})"
              for name, region in fused_regions.items()}
    atomic |= {n.name: "a higher-order op: PyTorch runs it whole" for n in gm.graph.nodes
               if n.op == "call_function" and isinstance(n.target, torch._ops.HigherOrderOperator)}
    ph = _support.classify(gm, values)
    all_ops = _count(gm.graph.nodes)
    names = {n.name: _support.op_name(n, gm) for n in gm.graph.nodes if n.op in _support.CALLS}
    graph = _report.GraphReport(index=-1, backend=label, ops=len(all_ops) + sum(len(v) - 1 for v in inner.values()),
                                trt_ops=0)
    if torch.is_grad_enabled() and any(isinstance(v, torch.Tensor) and v.requires_grad for v in values):
        graph.note = ("autograd records (grad mode on, an input requires grad): the graph runs in PyTorch, "
                      "engines have no backward; call the model under torch.no_grad() or torch.inference_mode()")
        graph.partitions.append(_report.PartitionReport("graph", "PyTorch", _ops_of(all_ops, names, inner)))
        return _done(graph, t0, gm.forward)
    untyped = [f"{ph.nodes[i].name} ({values[i].dtype})" for i in ph.runtime
               if isinstance(values[i], torch.Tensor) and (values[i].dtype == torch.float64 or values[i].is_complex())]
    if untyped:  # NOTE: convert() refuses such inputs; the graph as a whole is left to PyTorch
        graph.note = (f"input {', '.join(untyped)} has a type TensorRT has none of: the graph runs in PyTorch "
                      "(pass float32 inputs to have it converted)")
        graph.partitions.append(_report.PartitionReport("graph", "PyTorch", _ops_of(all_ops, names, inner)))
        return _done(graph, t0, gm.forward)
    notes = []
    if any(r.rewritten for r in vmaps):
        notes.append(f"{sum(r.rewritten for r in vmaps)} torch.vmap region(s) written as ops on whole tensors")
    if fused_regions:
        notes.append(f"{len(fused_regions)} torch.vmap region(s) run whole in PyTorch")
    graph.note = "; ".join(notes)
    hop = _support.transforms(gm)
    if hop:  # NOTE: functorch calls outside a vmap region (grad, jvp): their state spans the graph
        graph.note = f"the graph calls functorch transforms ({', '.join(sorted(set(hop))[:3])}): PyTorch runs it"
        graph.partitions.append(_report.PartitionReport("graph", "PyTorch", _ops_of(all_ops, names, inner)))
        graph.pytorch_ops = [_report.PyTorchOp(node, op, "in a graph of functorch transforms")
                             for n in all_ops for node, op in _expanded(n, names, inner)]
        return _done(graph, t0, gm.forward)
    _support.sizes_from_inputs(gm, ph)
    _support.public_targets(gm)
    _support.order_writes(gm)
    flagged = _support.dry_run(gm, values, ph, lambda node, real: _input(node, real, options, []), atomic)
    why = _support.decide(gm, ph, flagged, options.torch_executed_ops)
    families = [f for f in _support.write_families(gm) if not f.external]
    while True:  # NOTE: ends: each round moves nodes to PyTorch or stops
        partitioner = CapabilityBasedPartitioner(gm, _Support(why), allows_single_node_partition=True)
        keep = []
        for p in partitioner.propose_partitions():
            ops = _count(p.nodes)
            if len(ops) >= options.min_block_size:
                keep.append(p)
                continue
            for n in ops:
                why[n] = f"in a TensorRT block of {len(ops)} op(s), fewer than min_block_size={options.min_block_size}"
        block_of = {n.name: i for i, p in enumerate(keep) for n in p.nodes}
        moved = _support.split_values(gm, block_of, why)
        if not _support.split_families(families, block_of, why) and not moved:
            break
    blocks = [_count(p.nodes) for p in keep]
    placed = {n for ops in blocks for n in ops}
    for n in all_ops:
        if n not in placed and n not in why:  # NOTE: the partitioner puts getitem with its producer, a placeholder here
            why[n] = "left outside every block by torch's partitioner (an element of a graph input)"
    fused = partitioner.fuse_partitions(keep) if keep else gm
    # NOTE: torch's fuse_by_partitions names the block of keep[i] "fused_{i}"; the graph may call them in another order
    calls = sorted((n for n in fused.graph.nodes if n.op == "call_module" and str(n.target).startswith("fused_")),
                   key=lambda n: int(str(n.target).removeprefix("fused_")))
    copies = [v.clone() if i in ph.runtime and isinstance(v, torch.Tensor) else v for i, v in enumerate(values)]
    recorded = _record_args(fused, copies, {str(n.target) for n in calls})  # NOTE: copies: the graph may write
    frozen_nodes = {ph.nodes[i].name for i in ph.frozen}  # NOTE: fusing copies the nodes
    dead: set[str] = set()
    for node, ops in zip(calls, blocks, strict=True):
        part = _report.PartitionReport(str(node.target), label, [names[n] for n in ops])
        if not node.users:  # NOTE: dead ops dynamo kept (a block writes only into its own tensors): not run
            part.runs_on, part.reason = "nowhere", "nothing reads its results (dead code dynamo kept): not run"
            fused.graph.erase_node(node)
            fused.recompile()
            graph.ops -= len(ops)
            dead.update(ops)
            graph.partitions.append(part)
            continue
        engine, part.reason = _convert_block(fused, node, recorded[str(node.target)], frozen_nodes, options, part,
                                             graph.dynamic_inputs)
        if engine is None:
            part.runs_on = "PyTorch"
            warnings.warn(f"torch2trt_lite backend: a block of {len(ops)} op(s) ({', '.join(part.ops[:4])}"
                          f"{', ...' if len(ops) > 4 else ''}) runs in PyTorch: {part.reason}", stacklevel=2)
            for n in ops:
                why[n] = f"its block's conversion failed: {part.reason}"
        else:
            setattr(fused, str(node.target), engine)
            graph.trt_ops += len(ops)
        graph.partitions.append(part)
    in_torch = [n for n in all_ops if n in why and n not in dead]
    if in_torch:
        graph.partitions.append(_report.PartitionReport("pytorch", "PyTorch", _ops_of(in_torch, names, inner)))
    graph.pytorch_ops = [_report.PyTorchOp(node, op, why[n]) for n in in_torch for node, op in _expanded(n, names, inner)]
    nodes = {n.name: n for n in gm.graph.nodes}
    graph.output_views = sum(1 for n in in_torch if why[n] == _support.OUTPUT_VIEW and n in nodes
                             and not _support.writes_in_place(nodes[n]))
    if not graph.trt_ops:
        return _done(graph, t0, eager.forward)
    return _done(graph, t0, _Guarded(fused, eager, ph, values))


def _expanded(node: str, names: Mapping[str, str], inner: Mapping[str, list[tuple[str, str]]]) -> list[tuple[str, str]]:
    """(node, op) of what ``node`` stands for in the report: itself, or a vmap region's body ops."""
    return inner.get(node, [(node, names[node])])


def _ops_of(nodes: Sequence[str], names: Mapping[str, str], inner: Mapping[str, list[tuple[str, str]]]) -> list[str]:
    """The ops of these nodes for the report (see :func:`_expanded`)."""
    return [op for n in nodes for _, op in _expanded(n, names, inner)]


def _done(graph: _report.GraphReport, t0: float, fn: Any) -> Any:
    graph.conversion_s = time.perf_counter() - t0
    _report.record(graph)
    log.info("torch2trt_lite backend: %s", graph.line())
    return fn


class _Support(OperatorSupportBase):
    def __init__(self, why: dict[str, str]) -> None:
        self.why = why

    def is_node_supported(self, submodules: Mapping[str, torch.nn.Module], node: Node) -> bool:
        return node.op in _support.CALLS and node.name not in self.why


class _Recorder(Interpreter):
    def __init__(self, gm: GraphModule, targets: set[str]) -> None:
        super().__init__(gm)
        self.targets = targets
        self.seen: dict[str, tuple[Any, ...]] = {}

    def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
        if target in self.targets:
            self.seen[target] = tuple(args)
        return super().call_module(target, args, kwargs)


def _record_args(gm: GraphModule, values: Sequence[Any], targets: set[str]) -> dict[str, tuple[Any, ...]]:
    """The real arguments of each block, from one eager run of the partitioned graph."""
    if not targets:
        return {}
    rec = _Recorder(gm, targets)
    with torch.no_grad():
        rec.run(*values)
    return rec.seen


def _finite(bound: Any) -> int | None:
    """A ShapeEnv bound as an int, None where it is infinite (sympy's and torch's infinities)."""
    value = float(bound)
    return int(value) if math.isfinite(value) else None


def _input(node: Any, real: torch.Tensor, options: CompileOptions, dynamic: list[str]) -> Any:
    """The engine input of one block argument: ``real`` itself, or an Input range over its symbolic dims."""
    fake = _support.example(node)
    if not isinstance(fake, torch.Tensor) or not any(
            isinstance(s, torch.SymInt) and not s.node.is_constant() for s in fake.shape):
        return real
    lo, hi = [], []
    for s, size in zip(fake.shape, real.shape, strict=True):
        if not isinstance(s, torch.SymInt) or s.node.is_constant():
            lo.append(size)
            hi.append(size)
            continue
        bounds = s.node.shape_env.bound_sympy(s.node.expr)
        low = _finite(bounds.lower) or 1
        high = _finite(bounds.upper) or options.dynamic_max or DYNAMIC_MAX_FACTOR * size
        lo.append(max(1, min(low, size)))
        hi.append(max(high, size))
    dynamic.append(f"{node.name}: [" + ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in zip(lo, hi, strict=True))
                   + "]")
    return Input(lo, tuple(real.shape), hi, dtype=real.dtype, example=real)


def _convert_block(fused: GraphModule, node: Node, args: tuple[Any, ...], frozen_nodes: set[str],
                   options: CompileOptions, part: _report.PartitionReport,
                   dynamic: list[str]) -> tuple[Any, str]:
    """(the block's engine module, "") or (None, why it stays in PyTorch)."""
    sub = getattr(fused, str(node.target))
    frozen = {j: a for j, (n, a) in enumerate(zip(node.args, args, strict=True))
              if isinstance(n, Node) and n.op == "placeholder" and n.name in frozen_nodes}
    runtime = [j for j in range(len(args)) if j not in frozen]
    bad = [str(node.args[j]) for j in runtime if not isinstance(args[j], torch.Tensor)]
    if bad:
        return None, f"it takes the Python value(s) {', '.join(bad)} from outside the block"
    if not runtime:
        return None, "it reads no input of the graph (only weights): nothing to compute at run time"
    inputs = [_input(node.args[j], args[j], options, dynamic) for j in runtime]
    bound = _support.Bound(sub, len(args), frozen)
    try:
        with torch.no_grad():
            trt = convert(bound, inputs, backend=options.backend, precision=options.precision,
                          precision_overrides=options.precision_overrides, cache_dir=options.cache_dir,
                          max_workspace_size=options.max_workspace_size,
                          compute_capabilities=options.compute_capabilities, verify=options.verify, progress=False)
    except _CONVERSION_FAILURES as e:
        return None, f"{type(e).__name__}: {e}"
    ranges: list[tuple[tuple[int, ...], tuple[int, ...]]] = [
        (tuple(x.min_shape), tuple(x.max_shape)) if isinstance(x, Input) else (tuple(x.shape), tuple(x.shape))
        for x in inputs]
    return _Engine(trt, runtime, sub, ranges, part), ""


class _Engine(torch.nn.Module):
    """A block in the partitioned graph: its engine, or the block's own graph in PyTorch for a call
    outside the engine's shape ranges or one the engine refuses (with a warning, once)."""

    def __init__(self, trt: Any, runtime: list[int], sub: torch.nn.Module, ranges: list[tuple[tuple[int, ...], tuple[int, ...]]],
                 part: _report.PartitionReport) -> None:
        super().__init__()
        self.trt = trt
        self.sub = sub
        self.runtime = runtime
        self.ranges = ranges
        self.part = part

    def _fits(self, xs: list[Any]) -> bool:
        for x, (lo, hi) in zip(xs, self.ranges, strict=True):
            if len(x.shape) != len(lo) or any(not a <= s <= b for s, a, b in zip(x.shape, lo, hi, strict=True)):
                return False
        return True

    def _fallback(self, reason: str, args: tuple[Any, ...]) -> Any:
        if not self.part.runtime_fallback:
            self.part.runtime_fallback = reason
            warnings.warn(f"torch2trt_lite backend: block {self.part.name} runs in PyTorch for this call: {reason}",
                          stacklevel=3)
        return self.sub(*args)

    def forward(self, *args: Any) -> Any:
        xs = [args[i] for i in self.runtime]
        if not self._fits(xs):
            shapes = [tuple(x.shape) for x in xs]
            return self._fallback(f"input shapes {shapes} outside the engine's ranges {self.ranges} (raise "
                                  "compile_backend(dynamic_max=...) or mark the dims dynamic with their bounds)", args)
        try:
            out = self.trt(*xs)
            self.part.engine_calls += 1
            return out
        except (RuntimeExecutionError, BackendUnavailableError) as e:
            return self._fallback(f"{type(e).__name__}: {e}", args)


class _Guarded:
    """What dynamo calls: the partitioned graph while the frozen weights are the tensors converted,
    unchanged, else the whole graph in PyTorch (with a warning, once)."""

    def __init__(self, fused: GraphModule, eager: GraphModule, ph: _support.Placeholders, values: Sequence[Any]) -> None:
        self.fused = fused
        self.eager = eager
        self.weights = [(i, values[i], values[i]._version) for i in ph.weights]
        self.scalars = [(i, values[i].detach().clone()) for i in ph.scalars]
        self.stale = ""

    def _changed(self, args: Sequence[Any]) -> str:
        for i, t, version in self.weights:
            if args[i] is not t:
                return f"weight {i} is another tensor than the one converted"
            if args[i]._version != version:
                return f"weight {i} was written in place since conversion"
        for i, v in self.scalars:
            if not torch.equal(args[i], v):
                return f"the module attribute passed as input {i} changed from {v.item()} to {args[i].item()}"
        return ""

    def __call__(self, *args: Any) -> Any:
        changed = self._changed(args)
        if changed:
            if not self.stale:
                self.stale = changed
                warnings.warn(f"torch2trt_lite backend: {changed}; the graph runs in PyTorch (call "
                              "torch._dynamo.reset() to convert again)", stacklevel=2)
            return self.eager(*args)
        return self.fused(*args)


__all__ = ["Backend", "CompileOptions", "DYNAMIC_MAX_FACTOR", "compile_backend", "compile_graph"]
