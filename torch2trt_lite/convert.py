"""convert(): trace one forward pass into a TensorRT network, build it, wrap it in a TRTModule."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from . import __version__
from .backends import Backend, get_backend
from .context import CheckContext, ConversionContext
from .errors import BuildError, ConversionError, Torch2TRTError
from .module import FORMAT, TRTModule, _CapturingLogger, dtype_name, encode_tree
from .tracer import Tracer, Unsupported


def _as_inputs(inputs: Any) -> list[torch.Tensor]:
    if isinstance(inputs, torch.Tensor):
        inputs = [inputs]
    if not isinstance(inputs, (list, tuple)):
        raise Torch2TRTError(f"inputs must be a list of tensors, e.g. convert(model, [x]); got {type(inputs).__name__}")
    if not inputs:
        raise Torch2TRTError("inputs is empty: pass one example tensor per model input, e.g. convert(model, [x])")
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor):
            raise Torch2TRTError(f"input {i}: expected a torch.Tensor, got {type(x).__name__}")
        if x.dtype == torch.float64:
            raise Torch2TRTError(f"input {i}: TensorRT has no float64; pass a float32 tensor (x.float())")
    return list(inputs)


def _check_model(model: Any) -> None:
    if not callable(model):
        raise Torch2TRTError(f"model must be an nn.Module or a callable, got {type(model).__name__}")
    if isinstance(model, torch.nn.Module) and model.training:
        raise Torch2TRTError(
            "the model is in training mode; call model.eval() first (batch norm and dropout convert with "
            "their inference behaviour)"
        )


def convert(
    model: Any,
    inputs: Sequence[torch.Tensor] | torch.Tensor,
    *,
    backend: str = "auto",
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    max_workspace_size: int = 1 << 30,
) -> TRTModule:
    """Convert ``model`` by running ``model(*inputs)`` once, and return a :class:`TRTModule`.

    ``backend``: ``"auto"`` (TensorRT when it imports and a GPU exists, else the sim, and it says
    so), ``"tensorrt"`` or ``"sim"``.
    """
    t0 = time.perf_counter()
    _check_model(model)
    xs = _as_inputs(inputs)
    be = get_backend(backend)
    names = list(input_names) if input_names is not None else [f"input_{i}" for i in range(len(xs))]
    if len(names) != len(xs) or len(set(names)) != len(names):
        raise Torch2TRTError(f"input_names must be {len(xs)} distinct names, got {names}")
    trt = be.trt
    logger = _CapturingLogger(trt)
    builder = trt.Builder(logger.logger)
    network = builder.create_network(be.network_flags())
    ctx = ConversionContext(network, trt, be.name)
    with torch.no_grad():
        traced = [x.detach().clone() for x in xs]
        for name, x in zip(names, traced, strict=True):
            ctx.set_itensor(x, network.add_input(name, ctx.trt_dtype(x.dtype), tuple(x.shape)))
        tracer = Tracer(ctx, model if isinstance(model, torch.nn.Module) else None)
        t_trace = time.perf_counter()
        with tracer.activate():
            out = model(*traced)
        t_trace = time.perf_counter() - t_trace
    leaves, _ = tree_flatten(out)
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    if not tensors:
        raise ConversionError("the model returned no tensors; nothing to build")
    onames = list(output_names) if output_names is not None else [f"output_{i}" for i in range(len(tensors))]
    if len(onames) != len(tensors) or len(set(onames) | set(names)) != len(onames) + len(names):
        raise Torch2TRTError(f"output_names must be {len(tensors)} distinct names not used by inputs, got {onames}")
    marked: set[int] = set()
    out_meta = []
    for name, t in zip(onames, tensors, strict=True):
        it = ctx.itensor(t)
        if id(it) in marked or it.is_network_input:
            it = network.add_identity(it).get_output(0)
        marked.add(id(it))
        it.name = name
        network.mark_output(it)
        out_meta.append({"name": name, "dtype": dtype_name(t.dtype), "shape": list(t.shape)})
    out_tree = encode_tree(out, [0])
    plugin_type = trt.LayerType.PLUGIN_V3
    uses_plugins = any(network.get_layer(i).type == plugin_type for i in range(network.num_layers))
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(max_workspace_size))
    t_build = time.perf_counter()
    plan = builder.build_serialized_network(network, config)
    t_build = time.perf_counter() - t_build
    if plan is None:
        raise BuildError("building the engine failed: " + ("; ".join(logger.errors) or "no reason given"))
    meta = {
        "format": FORMAT,
        "torch2trt_lite": __version__,
        "backend": be.name,
        "trt_version": be.version,
        "api_version": getattr(trt, "_version", None) if be.name == "sim" else None,
        "device_capability": list(torch.cuda.get_device_capability()) if be.name == "tensorrt" else None,
        "inputs": [
            {"name": n, "dtype": dtype_name(x.dtype), "shape": list(x.shape), "min": list(x.shape), "max": list(x.shape)}
            for n, x in zip(names, xs, strict=True)
        ],
        "outputs": out_meta,
        "out_tree": out_tree,
        "plugins": uses_plugins,
    }
    t_load = time.perf_counter()
    module = TRTModule(plan, meta)  # NOTE: TRTModule takes bytes-like plans as they are
    t_load = time.perf_counter() - t_load
    module.conversion_time_s = time.perf_counter() - t0
    module.conversion_stats = {"trace_s": t_trace, "build_s": t_build, "load_s": t_load}
    return module


def load(path: str) -> TRTModule:
    """Load an engine file written by ``TRTModule.save``."""
    return TRTModule.load(path)


@dataclass
class CheckReport:
    """What ``check`` found: ``ok`` and every unsupported call (op, module path, file:line)."""

    unsupported: list[Unsupported] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unsupported

    def __str__(self) -> str:
        if self.ok:
            return "all calls on traced tensors have converters"
        lines = [f"{len(self.unsupported)} unsupported call(s):"]
        lines += [f"  {u}" for u in self.unsupported]
        return "\n".join(lines)


def check(model: Any, inputs: Sequence[torch.Tensor] | torch.Tensor) -> CheckReport:
    """Run ``model`` once under the tracer without building anything; report unsupported calls."""
    _check_model(model)
    xs = _as_inputs(inputs)
    ctx = CheckContext()
    with torch.no_grad():
        traced = [x.detach().clone() for x in xs]
        ctx.mark_traced(traced)
        tracer = Tracer(ctx, model if isinstance(model, torch.nn.Module) else None, collect=True)
        with tracer.activate():
            model(*traced)
    return CheckReport(tracer.problems)


__all__ = ["Backend", "CheckReport", "check", "convert", "load"]
