"""Defining the network: the model traced once into a network of the backend, its outputs marked.

:func:`define` is the one place a network is traced (``convert``, ``define_network``, ``compare``
and the dynamic verify run all call it); :class:`NetworkDefinition` is what it returns.
"""

from __future__ import annotations

import time
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from torch2trt_lite.backends import Backend, CapturingLogger
from torch2trt_lite.build.dependence import check_dependence
from torch2trt_lite.build.inputs import default_names, example_copy
from torch2trt_lite.errors import ConversionError, Torch2TRTError
from torch2trt_lite.runtime.structure import decode_tree, dtype_name, encode_tree, tensor_leaves
from torch2trt_lite.trace import complex_values as _complex
from torch2trt_lite.trace import precision as _precision
from torch2trt_lite.trace import shapes as _shapes
from torch2trt_lite.trace import symbolic as _symbolic
from torch2trt_lite.trace.context import ConversionContext
from torch2trt_lite.trace.double import Float64
from torch2trt_lite.trace.input_writes import InputWrites
from torch2trt_lite.trace.tracer import Tracer


@dataclass
class NetworkDefinition:
    """A traced network before its build: the backend's builder and network, and what ``convert``
    records about the model's inputs and outputs. ``define_network`` returns it."""

    backend: Backend
    builder: Any
    network: Any
    logger: Any
    context: ConversionContext
    input_names: list[str]
    out_meta: list[dict[str, Any]]
    out_tree: Any
    trace_s: float
    policy: _precision.Policy | None = None  # the precision policy it was traced with (None: fp32)

    def layers(self) -> list[tuple[str, str, list[tuple[tuple[int, ...], str]]]]:
        """(name, LayerType name, [(shape, dtype name) of each output]) of every layer."""
        return network_layers(self.network)


def network_layers(network: Any) -> list[tuple[str, str, list[tuple[tuple[int, ...], str]]]]:
    """(name, LayerType name, [(shape, dtype name) of each output]) of every layer of a network of
    any backend (TensorRT infers shapes and dtypes while the network is defined)."""
    out = []
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        outs = [layer.get_output(j) for j in range(layer.num_outputs)]
        out.append((
            str(layer.name), str(layer.type.name),
            [(tuple(int(d) for d in t.shape), str(t.dtype.name)) for t in outs],
        ))
    return out


def baked_layers(network: Any) -> list[str]:
    """Layers whose inputs have a dynamic (-1) dim but whose outputs are fully static: where a
    traced size was likely baked in."""
    out = []
    for i in range(int(network.num_layers)):
        layer = network.get_layer(i)
        ins = [layer.get_input(j) for j in range(layer.num_inputs)]
        dyn = any(t is not None and -1 in tuple(t.shape) for t in ins)
        outs = [layer.get_output(j) for j in range(layer.num_outputs)]
        if dyn and outs and all(len(tuple(t.shape)) and -1 not in tuple(t.shape) for t in outs):
            out.append(f"{layer.name} ({layer.type.name})")
    return out


_SUPPORTED_OUTPUTS = "a tensor, or tensors in tuples, lists, dicts and namedtuples (nested as deep as needed)"


def _odd_output(obj: Any, path: str) -> tuple[str, Any] | None:
    """(where, object) of the first part of a model's output that is neither a tensor, a constant,
    nor a tuple, list or dict of those; None if every part is one of these."""
    if obj is None or isinstance(obj, (torch.Tensor, bool, int, float, str)):
        return None
    if isinstance(obj, (tuple, list)):
        parts: Any = ((f"{path}[{i}]", x) for i, x in enumerate(obj))
    elif isinstance(obj, dict):
        parts = ((f"{path}[{k!r}]", v) for k, v in obj.items())
    else:
        return path, obj
    for where, x in parts:
        found = _odd_output(x, where)
        if found is not None:
            return found
    return None


def _no_tensors(out: Any) -> ConversionError:
    """The error for a model output without tensors: what it returned, and what is supported."""
    found = _odd_output(out, "output")
    if found is None:
        what = "None" if out is None else f"no tensors (only {type(out).__name__} {out!r:.60})"
        return ConversionError(
            f"the model returned {what}; nothing to build. Return {_SUPPORTED_OUTPUTS}."
        )
    where, obj = found
    cls = type(obj)
    name = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    at = "" if where == "output" else f" as {where}"
    hint = ""
    if isinstance(obj, types.GeneratorType):
        hint = " (forward is a generator function: it yields instead of returning; return a tuple instead)"
    elif isinstance(obj, (set, frozenset)):
        hint = " (a set has no order, so its tensors cannot be engine outputs; return a tuple or list)"
    else:
        hint = " (return the tensors it holds instead, e.g. in a tuple or dict)"
    return ConversionError(
        f"the model returned a {name}{at}, which is not an output torch2trt-lite can build{hint}. "
        f"Supported outputs: {_SUPPORTED_OUTPUTS}."
    )


def define(
    model: Any, xs: list[torch.Tensor], be: Backend, input_names: Sequence[str] | None,
    output_names: Sequence[str] | None, context_cls: type[ConversionContext] = ConversionContext,
    net_shapes: list[tuple[int, ...]] | None = None, policy: _precision.Policy | None = None,
    out_float: torch.dtype | None = None, input_ranges: dict[str, tuple[_shapes.Shape, _shapes.Shape]] | None = None,
    in_tree: Any = None, truncate_double: bool | None = None, value_bounds: dict[str, tuple[int, int]] | None = None,
) -> NetworkDefinition:
    """Trace ``model(*xs)`` (the arguments rebuilt by ``in_tree`` where given) into a new network
    of ``be`` whose inputs are ``xs`` (shapes ``net_shapes``: -1 in dynamic dims, whose sizes stay
    symbolic within ``input_ranges``), in ``context_cls``, with the precision ``policy``; floating
    outputs are cast to ``out_float`` where given; float64 is computed in float32 as ``truncate_double``
    says (:mod:`torch2trt_lite.trace.double`). The outputs and value checks are marked."""
    names = default_names(input_names, len(xs))
    if len(names) != len(xs) or len(set(names)) != len(names):
        raise Torch2TRTError(f"input_names must be {len(xs)} distinct names, got {names}")
    trt = be.trt
    logger = CapturingLogger(trt)
    builder = trt.Builder(logger.logger)
    network = builder.create_network(be.network_flags())
    ctx = context_cls(network, trt, be.name, has_plugins=be.has_plugins)
    ctx.float64 = Float64(truncate_double)
    ctx.value_bounds = dict(value_bounds or {})  # the Inputs' value ranges: bounds of sizes read from values
    with torch.no_grad():
        traced = [example_copy(x) for x in xs]
        shapes = net_shapes if net_shapes is not None else [tuple(x.shape) for x in traced]
        for name, x, shape in zip(names, traced, shapes, strict=True):
            ctx.set_itensor(x, network.add_input(name, ctx.trt_dtype(x.dtype), tuple(shape)))
        tracer = Tracer(ctx, model if isinstance(model, torch.nn.Module) else None, precision=policy)
        if net_shapes is not None:  # dynamic dims: their sizes stay symbolic while tracing
            _symbolic.SymbolicSizes(ctx, input_ranges or {}).install(tracer, traced)
        tracer.input_writes = InputWrites(names, traced)  # a write into an input is refused (never lost)
        t_trace = time.perf_counter()
        try:
            args = traced if in_tree is None else list(decode_tree(in_tree, traced))  # NOTE: caches hold `traced`
            out = tracer.run_model(model, args)
        except ConversionError as e:
            if net_shapes is None:
                raise
            kind = _symbolic.DynamicSizeGuardError if isinstance(e, _symbolic.DynamicSizeGuardError) else ConversionError
            raise kind(
                f"{e} (the network has dynamic input dims {net_shapes}, -1 = dynamic; the model was traced at "
                f"{[tuple(x.shape) for x in traced]}. Sizes of dynamic dims stay symbolic while tracing "
                "(torch2trt_lite.trace.symbolic); a converter or branch that needs one as a Python number refuses it: "
                "convert with static shapes for that dim, or a range this model supports)"
            ) from None
        tracer.input_writes.check(None, "")  # a write no converted call made (the version counters tell)
        t_trace = time.perf_counter() - t_trace
        _symbolic.check_value_reads(ctx)
    tensors = tensor_leaves(out)  # NOTE: encode_tree's order (DynamicCaches included, which pytree does not know)
    if not tensors:
        raise _no_tensors(out)
    onames = list(output_names) if output_names is not None else [f"output_{i}" for i in range(len(tensors))]
    if len(onames) != len(tensors) or len(set(onames) | set(names)) != len(onames) + len(names):
        raise Torch2TRTError(f"output_names must be {len(tensors)} distinct names not used by inputs, got {onames}")
    ctx.float64.check_outputs(list(zip(onames, tensors, strict=True)))  # a float64 output, truncated ops
    _complex.check_outputs(list(zip(onames, tensors, strict=True)))  # a complex output: TensorRT's are real
    marked: set[int] = set()

    def mark(it: Any, name: str) -> Any:
        """``it`` as the network output ``name`` (an identity where it is an input or marked already)."""
        if id(it) in marked or it.is_network_input:
            it = network.add_identity(it).get_output(0)
        marked.add(id(it))
        it.name = name
        network.mark_output(it)
        return it

    out_meta = []
    outs = []
    for name, t in zip(onames, tensors, strict=True):
        it = ctx.itensor(t)
        dtype = t.dtype if t.dtype != torch.float64 else torch.float32  # truncate_double=True: float32
        if out_float is not None and dtype.is_floating_point and dtype != out_float:
            start = ctx.num_layers()
            it, dtype = ctx.cast(it, out_float), out_float  # NOTE: the boundary cast back to the user's type
            ctx.name_layers(start, "", f"{name}_to_{_precision.short_name(out_float)}")
        it = mark(it, name)
        outs.append(it)
        out_shape = list(t.shape) if net_shapes is None else [int(d) for d in it.shape]
        out_meta.append({"name": name, "dtype": dtype_name(dtype), "shape": out_shape})
    for k, (it, message) in enumerate(ctx.assertions):
        # NOTE: a check on values is an extra BOOL output TRTModule reads after each run (TensorRT's
        # IAssertionLayer takes shape tensors only: see converters/assertions.py)
        mark(it, f"assert_{k}")
        out_meta.append({"name": f"assert_{k}", "dtype": "bool", "shape": [1], "assert": message})
    # NOTE: outputs no input reaches, and tensors no visible call made, are checked against eager runs
    check_dependence(model, xs, in_tree, tracer.provenance.suspects, network, outs, onames)
    out_tree = encode_tree(out, [0])
    return NetworkDefinition(be, builder, network, logger, ctx, names, out_meta, out_tree, t_trace, policy)


__all__ = ["NetworkDefinition", "baked_layers", "define", "network_layers"]
