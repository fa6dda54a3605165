"""``check``'s traced run: the model run once under the tracer, nothing built, every unsupported
call (and, with dynamic inputs, every refused dynamic size) collected in a :class:`CheckReport`."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from torch2trt_lite.backends import CapturingLogger, get_backend
from torch2trt_lite.build.inputs import default_names, example_copy, input_ranges, net_shapes, resolve_names
from torch2trt_lite.errors import ConversionError, ConverterRefusal
from torch2trt_lite.runtime.structure import decode_tree
from torch2trt_lite.trace import shapes as _shapes
from torch2trt_lite.trace import symbolic as _symbolic
from torch2trt_lite.trace.context import CheckContext, ConversionContext
from torch2trt_lite.trace.tracer import Tracer, Unsupported


@dataclass
class CheckReport:
    """What ``check`` found: ``ok`` and every unsupported call (op, module path, file:line, reason).
    With dynamic inputs, ``unsupported`` also holds every call whose converter refuses a dynamic size
    and every comparison or float of a dynamic size the range does not decide (``dynamic``)."""

    unsupported: list[Unsupported] = field(default_factory=list)
    dynamic: list[Unsupported] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unsupported

    def __str__(self) -> str:
        if self.ok:
            return "all calls on traced tensors have converters"
        lines = [f"{len(self.unsupported)} unsupported call(s):"]
        lines += [f"  {u}" for u in self.unsupported]
        return "\n".join(lines)


class _CheckTracer(Tracer):
    """The tracer of ``check`` on a dynamic network: a converter's refusal is recorded (``collect``)
    and tracing goes on, the refused call's outputs standing in as constants of their traced values."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dynamic: list[Unsupported] = []  # the problems with dynamic sizes (symbolic's guards add theirs)

    def convert_call(self, record: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Any:
        n = len(self.problems)
        result = None
        try:
            result = super().convert_call(record, args, kwargs, out)
        except ConversionError as e:
            if not isinstance(e.__cause__, ConverterRefusal) or len(self.problems) == n:
                raise
            if "dynamic size" in str(e.__cause__):  # symbolic.refuse and value reads of a SymSize say so
                self.dynamic.append(self.problems[-1])
        if len(self.problems) > n:
            self.ctx.mark_traced(out)
        return result


class _DynamicCheckContext(ConversionContext):
    """``check`` on a dynamic network (never built): a tensor no converter made (an unsupported or
    refused call's output) gets a stand-in so that the calls after it are still checked, with the
    dynamic sizes of the inputs in the dims traced at their sizes (duck sizing, as the tracer does)
    and zeros for values; a constant of its traced value where no dim is dynamic."""

    dims: dict[int, Any]  # traced size -> a dynamic size of the inputs traced at it

    def mark_traced(self, out: Any) -> None:
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and not self.is_traced(t):
                self.set_lazy(t, functools.partial(self._stand_in, t.detach().clone()))

    def _stand_in(self, t: torch.Tensor) -> Any:
        dims = [self.dims.get(int(d), int(d)) for d in t.shape]
        if not _symbolic.has_sym(dims) or t.dtype.is_complex:
            return self.constant(t)
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


def check_traced(model: Any, res: _shapes.Resolved, in_tree: Any, input_names: Sequence[str] | None) -> CheckReport:
    """Run ``model`` on ``res``'s examples under the tracer without building anything: with static
    inputs in a :class:`CheckContext`, else in a network of the sim (never built) with symbolic sizes."""
    module = model if isinstance(model, torch.nn.Module) else None

    def args(traced: list[torch.Tensor]) -> list[Any]:
        return traced if in_tree is None else list(decode_tree(in_tree, traced))

    if not res.dynamic:
        ctx: ConversionContext = CheckContext()
        with torch.no_grad():
            traced = [example_copy(x) for x in res.examples]
            ctx.mark_traced(traced)
            tracer = Tracer(ctx, module, collect=True)
            tracer.run_model(model, args(traced))
        return CheckReport(tracer.problems)
    names = resolve_names(input_names, res)
    be = get_backend("sim")
    network = be.trt.Builder(CapturingLogger(be.trt).logger).create_network(be.network_flags())
    ctx = _DynamicCheckContext(network, be.trt, be.name, has_plugins=be.has_plugins)
    shapes = net_shapes(res) or []
    with torch.no_grad():
        traced = [example_copy(x) for x in res.examples]
        for name, x, shape in zip(default_names(names, len(traced)), traced, shapes, strict=True):
            ctx.set_itensor(x, network.add_input(name, ctx.trt_dtype(x.dtype), tuple(shape)))
        tracer = _CheckTracer(ctx, module, collect=True)
        state = _symbolic.SymbolicSizes(ctx, input_ranges(res, names))
        state.install(tracer, traced)
        ctx.dims = {}
        for x in traced:
            for d in state.sizes(x) or ():
                if _symbolic.is_sym(d):
                    ctx.dims.setdefault(int.__int__(d), d)
        tracer.run_model(model, args(traced))
    return CheckReport(tracer.problems, tracer.dynamic)


__all__ = ["CheckReport", "check_traced"]
