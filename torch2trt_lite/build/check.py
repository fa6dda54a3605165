"""``check``'s traced run: the model run once under the tracer, nothing built, every unsupported
call (and, with dynamic inputs, every refused dynamic size) collected in a :class:`CheckReport`."""

from __future__ import annotations

import functools
import os
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from torch2trt_lite.backends import CapturingLogger, get_backend
from torch2trt_lite.build.define import _no_tensors
from torch2trt_lite.build.inputs import default_names, example_copy, input_ranges, net_shapes, resolve_names
from torch2trt_lite.converters.impl.active import ACTIVE, library_dirs
from torch2trt_lite.errors import (
    ConversionError,
    ConverterRefusal,
    InternalError,
    Torch2TRTError,
    UnsupportedOperatorError,
)
from torch2trt_lite.runtime.structure import decode_tree, encode_tree, tensor_leaves
from torch2trt_lite.trace import complex_values as _complex
from torch2trt_lite.trace import shapes as _shapes
from torch2trt_lite.trace import symbolic as _symbolic
from torch2trt_lite.trace.context import ConversionContext
from torch2trt_lite.trace.double import ADVICE, Float64
from torch2trt_lite.trace.input_writes import InputWrites
from torch2trt_lite.trace.tracer import Tracer, Unsupported


@dataclass
class CheckReport:
    """What ``check`` found: ``ok`` and every unsupported call (op, module path, file:line, reason).
    With dynamic inputs, ``unsupported`` also holds every call whose converter refuses a dynamic size
    and every comparison or float of a dynamic size the range does not decide (``dynamic``)."""

    unsupported: list[Unsupported] = field(default_factory=list)
    dynamic: list[Unsupported] = field(default_factory=list)
    truncated: dict[str, str] = field(default_factory=dict)  # op -> file:line: float64 computed in float32

    @property
    def ok(self) -> bool:
        return not self.unsupported

    def __str__(self) -> str:
        lines = ["all calls on traced tensors have converters"] if self.ok else (
            [f"{len(self.unsupported)} unsupported call(s):"] + [f"  {u}" for u in self.unsupported])
        if self.truncated:  # torch2trt_lite.trace.double
            lines.append(f"float64 computed in float32 (TensorRT has no float64) in {len(self.truncated)} op(s):")
            lines += [f"  {op} ({where})" for op, where in self.truncated.items()]
        return "\n".join(lines)


def _float64_outputs(out: Any, float64: Float64, problems: list[Unsupported]) -> None:
    """A float64 output of the model is unsupported unless ``truncate_double=True``."""
    tensors = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    for i, t in enumerate(tensors):
        if t.dtype == torch.float64 and float64.mode is not True:
            problems.append(Unsupported(f"output_{i}", "", "<model output>",
                                        f"a float64 output (TensorRT has no float64): {ADVICE}"))


class _CheckTracer(Tracer):
    """The tracer of ``check``: it runs the converters ``convert`` runs, into a network that is never
    built; a converter's refusal (any torch2trt-lite error it raises, in the words ``convert`` would
    raise it with) is recorded (``collect``) and tracing goes on, the refused call's outputs standing
    in as constants of their traced values."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dynamic: list[Unsupported] = []  # the problems with dynamic sizes (symbolic's guards add theirs)

    def convert_call(self, record: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Any:
        n = len(self.problems)
        result = None
        try:
            result = super().convert_call(record, args, kwargs, out)
        except ConversionError as e:
            cause = e.__cause__
            if not isinstance(cause, Torch2TRTError) or isinstance(cause, InternalError):
                raise
            if len(self.problems) == n:  # NOTE: a ConverterRefusal is recorded already (Tracer.unsupported)
                self.unsupported(record.qualname, str(cause))
            if isinstance(cause, ConverterRefusal) and "dynamic size" in str(cause):  # symbolic.refuse and value reads of a SymSize say so
                self.dynamic.append(self.problems[-1])
        if len(self.problems) > n:
            self.ctx.mark_traced(out)
        return result


class _DynamicCheckContext(ConversionContext):
    """``check``'s network (never built; static or dynamic): a tensor no converter made (an unsupported or
    refused call's output) gets a stand-in so that the calls after it are still checked, with the
    dynamic sizes of the inputs in the dims traced at their sizes (duck sizing, as the tracer does)
    and zeros for values; a constant of its traced value where no dim is dynamic."""

    dims: dict[int, Any]  # traced size -> a dynamic size of the inputs traced at it

    def mark_traced(self, out: Any) -> None:
        tracer = ACTIVE.get()
        busy = tracer is not None and tracer.busy
        if tracer is not None:  # NOTE: the context's own reads of these tensors are no calls of the model
            tracer.busy = True
        try:
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor) and not self.is_traced(t):
                    self.set_lazy(t, functools.partial(self._stand_in, t.detach().clone()))
        finally:
            if tracer is not None:
                tracer.busy = busy

    def _stand_in(self, t: torch.Tensor) -> Any:
        dims = [self.dims.get(int(d), int(d)) for d in t.shape]
        if not _symbolic.has_sym(dims) or t.dtype.is_complex:
            return self.constant(torch.view_as_real(t) if t.is_complex() else t)  # complex: (real, imag) pairs
        work = torch.float32 if t.is_floating_point() else torch.int64
        layer = self.network.add_fill((0,) * t.dim(), self.trt.FillOperation.LINSPACE, self.trt_dtype(work))
        layer.set_input(0, _symbolic.shape_tensor(self, dims))
        layer.set_input(1, self.constant(torch.zeros((), dtype=work)))
        layer.set_input(2, self.constant(torch.zeros((t.dim(),), dtype=work)))
        out = self.cast(layer.get_output(0), t.dtype)
        # NOTE: only to go on checking (nothing is built): the stand-in's dims take the inputs' sizes
        label = "size({}) of a tensor computed from the inputs (= {})"
        _symbolic.known_sizes(self, out, [_symbolic.relabel(d, out, i, label.format(i, d.describe())) if _symbolic.is_sym(d) else d
                                          for i, d in enumerate(dims)], tuple(t.shape))
        return out


def _stopped(e: ConversionError | UnsupportedOperatorError, module_path: str) -> Unsupported:
    """The report's entry for an error that ended the traced run (``convert`` raises it as it is)."""
    frames = [f for f, _ in traceback.walk_tb(e.__traceback__)]
    skip = library_dirs()
    user = [f for f in frames if not os.path.abspath(f.f_code.co_filename).startswith(skip)]
    where = f"{user[-1].f_code.co_filename}:{user[-1].f_lineno}" if user else "<unknown>"
    op = getattr(e, "op", None) or type(e).__name__
    return Unsupported(str(op), module_path, where, f"{e} (checking stopped here, as convert does)")


def _after_trace(ctx: ConversionContext, out: Any, problems: list[Unsupported]) -> None:
    """What ``define`` refuses once the model has run: a size read as a number that never reached the
    network, an output without tensors or with an object an engine cannot return (in its words)."""
    try:
        _symbolic.check_value_reads(ctx)
    except ConversionError as e:
        problems.append(Unsupported("value read", "", "<model>", str(e)))
    try:
        if not tensor_leaves(out):
            raise _no_tensors(out)
        encode_tree(out, [0])
        _complex.check_outputs([(f"output_{i}", t) for i, t in enumerate(tensor_leaves(out))])  # TensorRT: real
    except Torch2TRTError as e:
        problems.append(Unsupported("model output", "", "<model output>", str(e)))


def check_traced(model: Any, res: _shapes.Resolved, in_tree: Any, input_names: Sequence[str] | None,
                 truncate_double: bool | None = None) -> CheckReport:
    """Run ``model`` on ``res``'s examples under the tracer without building anything: into a network
    of the sim (never built) through the converters ``convert`` runs, so that every refusal of theirs is
    reported; with dynamic inputs, with symbolic sizes."""
    module = model if isinstance(model, torch.nn.Module) else None

    def args(traced: list[torch.Tensor]) -> list[Any]:
        return traced if in_tree is None else list(decode_tree(in_tree, traced))

    names = resolve_names(input_names, res)
    be = get_backend("sim")
    network = be.trt.Builder(CapturingLogger(be.trt).logger).create_network(be.network_flags())
    ctx = _DynamicCheckContext(network, be.trt, be.name, has_plugins=be.has_plugins)
    ctx.float64 = Float64(truncate_double)
    shapes = net_shapes(res) or [tuple(x.shape) for x in res.examples]
    with torch.no_grad():
        traced = [example_copy(x) for x in res.examples]
        for name, x, shape in zip(default_names(names, len(traced)), traced, shapes, strict=True):
            ctx.set_itensor(x, network.add_input(name, ctx.trt_dtype(x.dtype), tuple(shape)))
        tracer = _CheckTracer(ctx, module, collect=True)
        tracer.input_writes = InputWrites(default_names(names, len(traced)), traced)
        ctx.dims = {}
        if res.dynamic:
            state = _symbolic.SymbolicSizes(ctx, input_ranges(res, names))
            state.install(tracer, traced)
            for x in traced:
                for d in state.sizes(x) or ():
                    if _symbolic.is_sym(d):
                        ctx.dims.setdefault(int.__int__(d), d)
        try:
            out = tracer.run_model(model, args(traced))
        except (ConverterRefusal, UnsupportedOperatorError) as e:  # a refusal that ends the trace: reported
            tracer.problems.append(_stopped(e, tracer.module_path))
            return CheckReport(tracer.problems, tracer.dynamic, ctx.float64.ops)
        _after_trace(ctx, out, tracer.problems)
    _float64_outputs(out, ctx.float64, tracer.problems)
    return CheckReport(tracer.problems, tracer.dynamic, ctx.float64.ops)


__all__ = ["CheckReport", "check_traced"]
