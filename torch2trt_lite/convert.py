"""convert(): trace one forward pass into a TensorRT network, build it, wrap it in a TRTModule."""

from __future__ import annotations

import functools
import logging
import os
import time
import types
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from torch2trt_lite.build import cache as _cache
from torch2trt_lite.build import progress as _progress
from torch2trt_lite.runtime.module import (
    FORMAT,
    TRTModule,
    cache_layers,
    decode_tree,
    dtype_name,
    encode_tree,
    is_transformers_class,
    tensor_leaves,
)
from torch2trt_lite.trace import precision as _precision
from torch2trt_lite.trace import shapes as _shapes
from torch2trt_lite.trace import symbolic as _symbolic
from torch2trt_lite.trace.context import CheckContext, ConversionContext, ConverterRefusal
from torch2trt_lite.trace.tracer import Tracer, Unsupported

from ._version import __version__
from .backends import Backend, CapturingLogger, get_backend
from .errors import BuildError, ConversionError, Torch2TRTError

_log = logging.getLogger("torch2trt_lite")


def _as_inputs(inputs: Any, allow_ranges: bool = False) -> list[Any]:
    if isinstance(inputs, (torch.Tensor, _shapes.Input)):
        inputs = [inputs]
    if not isinstance(inputs, (list, tuple)):
        raise Torch2TRTError(f"inputs must be a list of tensors, e.g. convert(model, [x]); got {type(inputs).__name__}")
    if not inputs:
        raise Torch2TRTError("inputs is empty: pass one example tensor per model input, e.g. convert(model, [x])")
    for i, x in enumerate(inputs):
        if allow_ranges and isinstance(x, _shapes.Input):
            continue
        if not isinstance(x, torch.Tensor):
            ranges = " or a torch2trt_lite.Input" if allow_ranges else ""
            raise Torch2TRTError(f"input {i}: expected a torch.Tensor{ranges}, got {type(x).__name__}")
        if x.dtype == torch.float64:
            raise Torch2TRTError(f"input {i}: TensorRT has no float64; pass a float32 tensor (x.float())")
    return list(inputs)


def _is_cache(x: Any) -> bool:
    return is_transformers_class(type(x), "Cache")


def _structure(inputs: Any, input_names: Sequence[str] | None) -> tuple[Any, Any, Sequence[str] | None]:
    """Structured inputs flattened: (the engine's inputs, the ``in_tree`` that rebuilds the model's
    arguments from them, their names), or ``inputs`` as they are (and None) when each is a tensor or an
    Input. An argument may be a tuple or list (nested) of tensors and Inputs (e.g. a key/value cache
    as (key, value) per layer) or a transformers ``DynamicCache``: its layers' keys and values become
    the inputs ``<name>.<layer>.key`` / ``.value`` (``<name>``: the argument's name in ``input_names``,
    else ``past_key_values``; ranges for them go in ``profiles=``, one Input per engine input)."""
    if not isinstance(inputs, (list, tuple)) or not any(isinstance(x, (list, tuple)) or _is_cache(x) for x in inputs):
        return inputs, None, input_names
    if input_names is not None and len(input_names) != len(inputs):
        raise Torch2TRTError(
            f"input_names: with structured inputs (tuples, caches) give one name per model argument ({len(inputs)}), "
            f"got {len(input_names)}; the engine inputs are named <argument>.<index> (caches: <argument>.<layer>.key/value)"
        )
    leaves: list[Any] = []
    names: list[str] = []

    def leaf(x: Any, name: str) -> Any:
        if isinstance(x, _shapes.Input) and x.name is not None:
            name = x.name
            x = _shapes.Input(x.min_shape, x.opt_shape, x.max_shape, x.dtype, None, x.example, x.low, x.high)
        leaves.append(x)
        names.append(name)
        return {"t": len(leaves) - 1}

    def walk(x: Any, name: str, where: str) -> Any:
        if isinstance(x, (torch.Tensor, _shapes.Input)):
            return leaf(x, name)
        if _is_cache(x):
            pairs = cache_layers(x, where)
            return {"cache": "DynamicCache", "layers": [
                [leaf(k, f"{name}.{i}.key"), leaf(v, f"{name}.{i}.value")] for i, (k, v) in enumerate(pairs)
            ]}
        if isinstance(x, (list, tuple)):
            if not x:
                raise Torch2TRTError(f"{where} is an empty {type(x).__name__}: it gives the engine no input")
            kind = "list" if isinstance(x, list) else "tuple"
            return {kind: [walk(v, f"{name}.{j}", f"{where}[{j}]") for j, v in enumerate(x)]}
        raise Torch2TRTError(
            f"{where}: expected a torch.Tensor, a torch2trt_lite.Input, a tuple or list of them, or a transformers "
            f"DynamicCache; got {type(x).__name__}"
        )

    args = []
    for i, x in enumerate(inputs):
        default = "past_key_values" if _is_cache(x) else f"input_{i}"
        args.append(walk(x, input_names[i] if input_names is not None else default, f"input {i}"))
    if len(set(names)) != len(names):
        raise Torch2TRTError(f"the engine inputs' names must be distinct, got {names}")
    return leaves, {"tuple": args}, names


def _flat(fn: Any, in_tree: Any) -> Any:
    """``fn`` (the model, or its engine) called with the engine's input tensors: the arguments are
    rebuilt by ``in_tree``, the result is its tensors in order."""
    def call(*leaves: Any) -> list[torch.Tensor]:
        return tensor_leaves(fn(*decode_tree(in_tree, list(leaves))))

    return call


def _check_model(model: Any) -> None:
    if not callable(model):
        raise Torch2TRTError(f"model must be an nn.Module or a callable, got {type(model).__name__}")
    if isinstance(model, torch.nn.Module) and model.training:
        raise Torch2TRTError(
            "the model is in training mode; call model.eval() first (batch norm and dropout convert with "
            "their inference behaviour)"
        )


def _example_copy(x: torch.Tensor) -> torch.Tensor:
    """The traced run's own copy of an example input: the model's in-place writes never reach the
    user's tensor. An input whose elements share memory (``expand``, stride 0) is copied with its
    strides, so only the memory it spans is: ``torch.randn(1, 1).expand(40000, 30000)`` stays one
    element instead of 4.8 GB (the tracer maps tensors by identity, not by their memory)."""
    x = x.detach()
    if x.layout != torch.strided or x.is_nested or x.is_quantized or x.is_conj() or x.is_neg() or not x.numel():
        return x.clone()
    span = 1 + sum((n - 1) * s for n, s in zip(x.shape, x.stride(), strict=True))
    if span >= x.numel():
        return x.clone()
    return x.as_strided((span,), (1,), x.storage_offset()).clone().as_strided(x.shape, x.stride())


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


def define_network(
    model: Any,
    inputs: Sequence[Any] | torch.Tensor,
    *,
    backend: str = "auto",
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
) -> NetworkDefinition:
    """Trace ``model`` into a network of ``backend`` as ``convert`` does, without building it
    (``inputs`` may hold :class:`torch2trt_lite.Input` ranges: their dynamic dims are -1)."""
    _check_model(model)
    inputs, in_tree, input_names = _structure(inputs, input_names)
    res = _shapes.resolve(_as_inputs(inputs, allow_ranges=True))
    names = _input_names(input_names, res)
    return _define(model, res.examples, get_backend(backend), names, output_names, net_shapes=_net_shapes(res),
                   input_ranges=_input_ranges(res, names), in_tree=in_tree)


def _input_names(input_names: Sequence[str] | None, res: _shapes.Resolved) -> list[str] | None:
    """The inputs' names: ``input_names``, else each Input's own name (input_<i> for the others)."""
    if input_names is not None:
        named = [n for n in res.names if n is not None]
        if named:
            raise Torch2TRTError(f"give input names either in input_names= or as Input(name=...), not both (got {named})")
        return list(input_names)
    if all(n is None for n in res.names):
        return None
    return [n if n is not None else f"input_{i}" for i, n in enumerate(res.names)]


def _default_names(input_names: Sequence[str] | None, n: int) -> list[str]:
    return list(input_names) if input_names is not None else [f"input_{i}" for i in range(n)]


def _net_shapes(res: _shapes.Resolved) -> list[tuple[int, ...]] | None:
    """Each network input's shape (-1 in the dims a profile lets vary); None when all are static."""
    if not res.dynamic:
        return None
    return [_shapes.network_shape([p[i] for p in res.profiles]) for i in range(len(res.examples))]


def _input_ranges(res: _shapes.Resolved, input_names: Sequence[str] | None) -> dict[str, tuple[_shapes.Shape, _shapes.Shape]]:
    """Each input's (min shape, max shape) over every profile, by name (the ranges of symbolic sizes)."""
    names = _default_names(input_names, len(res.examples))
    out = {}
    for i, name in enumerate(names):
        hull = _hull([p[i] for p in res.profiles])
        out[name] = (tuple(hull["min"]), tuple(hull["max"]))
    return out


def _define(
    model: Any, xs: list[torch.Tensor], be: Backend, input_names: Sequence[str] | None,
    output_names: Sequence[str] | None, context_cls: type[ConversionContext] = ConversionContext,
    net_shapes: list[tuple[int, ...]] | None = None, policy: _precision.Policy | None = None,
    out_float: torch.dtype | None = None, input_ranges: dict[str, tuple[_shapes.Shape, _shapes.Shape]] | None = None,
    in_tree: Any = None,
) -> NetworkDefinition:
    names = _default_names(input_names, len(xs))
    if len(names) != len(xs) or len(set(names)) != len(names):
        raise Torch2TRTError(f"input_names must be {len(xs)} distinct names, got {names}")
    trt = be.trt
    logger = CapturingLogger(trt)
    builder = trt.Builder(logger.logger)
    network = builder.create_network(be.network_flags())
    ctx = context_cls(network, trt, be.name, has_plugins=be.has_plugins)
    with torch.no_grad():
        traced = [_example_copy(x) for x in xs]
        shapes = net_shapes if net_shapes is not None else [tuple(x.shape) for x in traced]
        for name, x, shape in zip(names, traced, shapes, strict=True):
            ctx.set_itensor(x, network.add_input(name, ctx.trt_dtype(x.dtype), tuple(shape)))
        tracer = Tracer(ctx, model if isinstance(model, torch.nn.Module) else None, precision=policy)
        if net_shapes is not None:  # dynamic dims: their sizes stay symbolic while tracing
            _symbolic.SymbolicSizes(ctx, input_ranges or {}).install(tracer, traced)
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
        t_trace = time.perf_counter() - t_trace
        _symbolic.check_value_reads(ctx)
    tensors = tensor_leaves(out)  # NOTE: encode_tree's order (DynamicCaches included, which pytree does not know)
    if not tensors:
        raise _no_tensors(out)
    onames = list(output_names) if output_names is not None else [f"output_{i}" for i in range(len(tensors))]
    if len(onames) != len(tensors) or len(set(onames) | set(names)) != len(onames) + len(names):
        raise Torch2TRTError(f"output_names must be {len(tensors)} distinct names not used by inputs, got {onames}")
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
    for name, t in zip(onames, tensors, strict=True):
        it = ctx.itensor(t)
        dtype = t.dtype
        if out_float is not None and dtype.is_floating_point and dtype != out_float:
            start = ctx.num_layers()
            it, dtype = ctx.cast(it, out_float), out_float  # NOTE: the boundary cast back to the user's type
            ctx.name_layers(start, "", f"{name}_to_{_precision.short_name(out_float)}")
        it = mark(it, name)
        out_shape = list(t.shape) if net_shapes is None else [int(d) for d in it.shape]
        out_meta.append({"name": name, "dtype": dtype_name(dtype), "shape": out_shape})
    for k, (it, message) in enumerate(ctx.assertions):
        # NOTE: a check on values is an extra BOOL output TRTModule reads after each run (TensorRT's
        # IAssertionLayer takes shape tensors only: see converters/assertions.py)
        mark(it, f"assert_{k}")
        out_meta.append({"name": f"assert_{k}", "dtype": "bool", "shape": [1], "assert": message})
    out_tree = encode_tree(out, [0])
    return NetworkDefinition(be, builder, network, logger, ctx, names, out_meta, out_tree, t_trace, policy)


def convert(
    model: Any,
    inputs: Sequence[Any] | torch.Tensor,
    *,
    backend: str = "auto",
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    max_workspace_size: int = 1 << 30,
    compute_capabilities: Sequence[str | tuple[int, int]] | str | None = None,
    progress: Any = None,
    cache_dir: str | os.PathLike[str] | None = None,
    timing_cache: str | os.PathLike[str] | None = None,
    cuda_graph: bool = False,
    max_batch_size: int | None = None,
    dynamic_batch: tuple[int, int] | None = None,
    profiles: Sequence[Sequence[Any]] | None = None,
    verify: bool = True,
    precision: str | torch.dtype = "fp32",
    fp16_mode: bool = False,
    precision_overrides: Mapping[Any, Any] | None = None,
    io_dtype: str | torch.dtype | None = None,
    int8_mode: bool = False,
    int8_calib_dataset: Any = None,
    int8_calib_algorithm: Any = None,
) -> TRTModule:
    """Convert ``model`` by running ``model(*inputs)`` once, and return a :class:`TRTModule`.

    ``backend``: ``"auto"`` (TensorRT, else TensorRT-RTX, when it imports and a GPU exists, else the
    sim, and it says so), ``"tensorrt"``, ``"tensorrt-rtx"`` (builds without a GPU; the engine then
    runs only where a supported GPU is) or ``"sim"``.

    ``compute_capabilities`` (TensorRT-RTX only): the GPUs the engine is built for, e.g.
    ``["sm75", "sm86"]``, ``"8.9"`` or ``"current"``; default TensorRT-RTX's own (sm80, sm86, sm89,
    sm120 and later).

    ``progress``: a display of the build's phases (``rich.progress``, on stderr): ``None`` (default)
    shows it when stderr is a terminal, ``True`` always, ``False`` never (nothing is printed). It
    also takes a :class:`torch2trt_lite.build.progress.RichProgress` (another console) or any object with
    TensorRT's ``IProgressMonitor`` methods ``phase_start(phase_name, parent_phase, num_steps)``,
    ``step_complete(phase_name, step) -> bool`` and ``phase_finish(phase_name)``, which sees every
    phase the builder reports; ``step_complete`` returning False cancels the build (``BuildError``
    saying so), and an exception it raises stops the build and is raised here.

    ``cache_dir``: a folder of built engines. The engine is looked up by a SHA-256 of the model
    (structure, forward code, parameters and buffers), the inputs' names, dtypes and shapes, the
    options above, the backend and its version and torch2trt-lite's version: a hit loads the
    engine file without tracing or building, a miss converts and saves it atomically as
    ``cache_dir/<key>.engine``. ``conversion_stats["cache"]`` says ``"hit"`` or ``"miss"``;
    see :mod:`torch2trt_lite.build.cache` for what the key covers, and ``torch2trt_lite.build.cache.stats()``.

    ``timing_cache`` (TensorRT): a file of TensorRT's kernel timings, read before the build when it
    exists (``ignore_mismatch=False``: a cache from another GPU or version is not used, with a
    warning) and written after it (atomically), so later builds skip timing the kernels already
    timed. The sim times nothing, so there it is accepted and does nothing. TensorRT-RTX 1.2+
    treats timing caches as no-ops; the file is still written, and read only where a GPU is.

    ``cuda_graph`` (real backends on a GPU): the engine's execution is captured in a CUDA graph and
    replayed on torch's current stream (captured again when the input shapes change); the sim
    refuses it.

    Dynamic shapes: an entry of ``inputs`` may be a :class:`torch2trt_lite.Input` (a min/opt/max
    shape range; tensors stay static), and ``max_batch_size=N`` makes dim 0 of every example tensor
    range over [1, N] (torch2trt's option; torch2trt builds for batches up to N, here the
    optimization profile's opt batch is the example's), ``dynamic_batch=(lo, hi)`` over [lo, hi].
    ``profiles=[[Input, ...], [Input, ...]]`` builds one optimization profile per list (one entry
    per input, same dtypes and ranks); ``TRTModule`` runs each call with the first profile whose
    ranges cover its shapes. The model is traced once (on the example tensors, each Input's
    ``example`` or a random tensor of its ``opt_shape``). Sizes of dynamic dims stay symbolic while
    tracing (:mod:`torch2trt_lite.trace.symbolic`: ``x.size(0)`` and its arithmetic become shape-tensor
    layers; a branch on one that the range does not decide is an error naming the line), but a size
    turned into a plain number (``int(x.size(0))``) is the traced value, so with ``verify=True`` (default) a dynamic engine is also built on the sim and
    run once per profile with every dynamic dim at another size than the traced one (its min, or its
    max where the min is the traced size), and refused (``ConversionError``) when an output shape
    differs from eager PyTorch's.

    Precision (see :mod:`torch2trt_lite.trace.precision`): ``precision="fp16"`` or ``"bf16"`` (``fp16_mode=True``
    is torch2trt's name for ``"fp16"``) builds a strongly typed network whose convolutions, linear
    layers, matrix multiplies and attention compute in that type with weights stored in it, while
    softmax, normalization statistics, large reductions and exp/log/pow stay float32 (torch.autocast's
    lists); every cast is a named layer. ``precision_overrides={"backbone.layer4": "fp32",
    torch.nn.LayerNorm: "fp32", F.softmax: "fp16"}`` changes it per module path, module class or op. A
    model converted under ``torch.autocast(...)`` gets exactly autocast's casts. Inputs keep their
    types; floating outputs are returned in the floating inputs' type (float32 when there are none),
    or in ``io_dtype`` (``"fp16"``: the engine also takes its floating inputs in fp16).
    ``TRTModule.layer_precisions()`` lists each layer's output types.

    ``int8_mode=True`` is torch2trt's INT8 option: the model is first quantized with
    :func:`torch2trt_lite.quantize` (explicit Q/DQ: TensorRT 11 has no calibrator), calibrated on
    ``int8_calib_dataset`` (an iterable of batches; default: the example inputs) with
    ``int8_calib_algorithm`` (``"entropy"``, TensorRT's default, ``"max"``, ``"percentile"``, ``"mse"``, or
    a TensorRT ``CalibrationAlgoType`` whose name says ENTROPY or MINMAX).
    """
    t0 = time.perf_counter()
    _check_model(model)
    if int8_mode is not False:
        model = _int8_mode(model, inputs, int8_mode, int8_calib_dataset, int8_calib_algorithm)
    elif int8_calib_dataset is not None or int8_calib_algorithm is not None:
        raise Torch2TRTError("int8_calib_dataset and int8_calib_algorithm go with int8_mode=True")
    inputs, in_tree, input_names = _structure(inputs, input_names)
    res = _shapes.resolve(
        _as_inputs(inputs, allow_ranges=True), max_batch_size=max_batch_size, dynamic_batch=dynamic_batch,
        profiles=profiles,
    )
    policy, out_float = _precision_setup(model, res, precision, fp16_mode, precision_overrides, io_dtype)
    precision_meta = _precision.settings(policy, out_float)
    xs = res.examples
    input_names = _input_names(input_names, res)
    workspace = _workspace(max_workspace_size)
    be = get_backend(backend)
    targets = _targets(be, compute_capabilities)
    monitor = _progress.resolve(progress)
    entry = None
    if cache_dir is not None:
        names0 = _default_names(input_names, len(xs))
        options = {
            "max_workspace_size": workspace,
            "compute_capabilities": [str(c.name) for c in targets],
            "input_names": names0,
            "output_names": list(output_names) if output_names is not None else None,
        }
        if res.dynamic:
            options["profiles"] = [[[list(s) for s in r] for r in p] for p in res.profiles]
        if policy is not None or out_float is not None:
            options["precision"] = precision_meta
        if in_tree is not None:
            options["in_tree"] = in_tree
        t_key = time.perf_counter()
        entry = _cache.entry_path(cache_dir, _cache.key(model, xs, names0, options, be))
        t_key = time.perf_counter() - t_key
        t_load = time.perf_counter()
        found = _cache.lookup(entry, be.name, names0, cuda_graph=cuda_graph)
        if found is not None:
            t_load = time.perf_counter() - t_load
            _cache._count("hits")
            _log.info("torch2trt-lite: engine cache hit: %s", entry)
            found.conversion_time_s = time.perf_counter() - t0
            hit: dict[str, Any] = {"cache": "hit", "key_s": t_key, "load_s": t_load}
            found.conversion_stats = hit
            return found  # type: ignore[no-any-return]
        _cache._count("misses")
        _log.info("torch2trt-lite: engine cache miss: building %s", entry)
    net_shapes = _net_shapes(res)
    d = _define(model, xs, be, input_names, output_names, net_shapes=net_shapes, policy=policy, out_float=out_float,
                input_ranges=_input_ranges(res, input_names), in_tree=in_tree)
    trt, builder, network, logger = be.trt, d.builder, d.network, d.logger
    names, out_meta, out_tree, t_trace = d.input_names, d.out_meta, d.out_tree, d.trace_s
    plugin_type = trt.LayerType.PLUGIN_V3
    num_layers = int(network.num_layers)
    uses_plugins = any(network.get_layer(i).type == plugin_type for i in range(num_layers))
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace)
    if targets:
        config.num_compute_capabilities = len(targets)
        for k, cc in enumerate(targets):
            config.set_compute_capability(cc, k)
    shape_values = _shape_input_values(network, names, res)
    if net_shapes is not None or shape_values:
        _add_profiles(builder, config, d.input_names, res, shape_values)
    timings = _timing_cache_load(be, config, timing_cache)
    t_build = time.perf_counter()
    with _progress.attached(trt, config, monitor) as watch:
        plan = builder.build_serialized_network(network, config)
    t_build = time.perf_counter() - t_build
    if watch.error is not None:
        raise watch.error
    if plan is None and watch.cancelled:
        raise BuildError(
            "building the engine was cancelled: the progress monitor's step_complete returned False "
            "(return True from it to let the build go on)"
        )
    if plan is None:
        raise BuildError("building the engine failed: " + ("; ".join(logger.errors) or (
            "TensorRT logged no error to torch2trt-lite (a TensorRT Builder or Runtime made earlier in this "
            "process with another logger receives TensorRT's messages instead)")))
    meta = {
        "format": FORMAT,
        "torch2trt_lite": __version__,
        "backend": be.name,
        "trt_version": be.version,
        "api_version": getattr(trt, "_version", None) if be.name == "sim" else None,
        "device_capability": list(torch.cuda.get_device_capability()) if be.name == "tensorrt" else None,
        "compute_capabilities": (
            [str(c.name).lower() for c in targets] or "default"
        ) if be.name == "tensorrt-rtx" else None,
        "num_layers": num_layers,
        "inputs": [
            {"name": n, "dtype": dtype_name(x.dtype), "shape": list(x.shape), **_hull([p[i] for p in res.profiles]),
             **({"values": dict(zip(("min", "opt", "max"), shape_values[n], strict=True))} if n in shape_values else {})}
            for i, (n, x) in enumerate(zip(names, xs, strict=True))
        ],
        "outputs": out_meta,
        "out_tree": out_tree,
        **({"in_tree": in_tree} if in_tree is not None else {}),
        "plugins": uses_plugins,
        "precision": dict(precision_meta),
        "layers": [[n, t, [dt for _, dt in outs]] for n, t, outs in network_layers(network)],
    }
    quant = _quantization_info(model)
    if quant is not None:
        meta["precision"]["quantization"] = quant
    if net_shapes is not None:
        meta["profiles"] = [
            {n: {"min": list(r[0]), "opt": list(r[1]), "max": list(r[2])} for n, r in zip(names, p, strict=True)}
            for p in res.profiles
        ]
    t_load = time.perf_counter()
    module = TRTModule(plan, meta, cuda_graph=cuda_graph)  # NOTE: TRTModule takes bytes-like plans as they are
    t_load = time.perf_counter() - t_load
    if net_shapes is not None and verify:
        flat_model, engine = (model, module) if in_tree is None else (_flat(model, in_tree), _flat(module, in_tree))
        _verify_dynamic(flat_model, engine, d, res, input_names, output_names, io_cast=io_dtype is not None)
    if timings is not None:
        _timing_cache_save(config, timing_cache)
    stats: dict[str, Any] = {"trace_s": t_trace, "build_s": t_build, "load_s": t_load}
    if entry is not None:
        _cache.store(module, entry)
        stats["cache"] = "miss"
    module.conversion_time_s = time.perf_counter() - t0
    module.conversion_stats = stats
    return module


def _precision_setup(
    model: Any, res: _shapes.Resolved, precision: Any, fp16_mode: Any, overrides: Any, io_dtype: Any,
) -> tuple[_precision.Policy | None, torch.dtype | None]:
    """The precision policy and the floating outputs' type (None: as traced) of a conversion; with
    ``io_dtype`` the floating examples are cast to it (the engine's floating inputs take that type)."""
    if not isinstance(fp16_mode, bool):
        raise Torch2TRTError(f"fp16_mode must be True or False, got {fp16_mode!r}")
    if fp16_mode:
        if _precision.precision_dtype(precision) not in (torch.float32, torch.float16):
            raise Torch2TRTError(f"fp16_mode=True (torch2trt's name for precision='fp16') conflicts with precision={precision!r}")
        precision = "fp16"
    io = None if io_dtype is None else _precision.precision_dtype(io_dtype, "io_dtype")
    if io is not None:
        for i, x in enumerate(res.examples):
            if x.is_floating_point() and x.dtype != io:
                res.examples[i] = x.to(io)
    policy = _precision.make_policy(model, precision, overrides, res.examples)
    if io is not None:
        return policy, io
    if policy is None or policy.source == "autocast":
        return policy, None  # NOTE: under autocast, the outputs keep the types autocast gave them
    floats = [x.dtype for x in res.examples if x.is_floating_point()]
    return policy, floats[0] if floats else torch.float32


def _int8_mode(model: Any, inputs: Any, flag: Any, dataset: Any, algorithm: Any) -> Any:
    """torch2trt's ``int8_mode``: the model quantized by :func:`torch2trt_lite.quantize`."""
    from .quantization import METHODS, QuantizedModel, quantize

    if flag is not True:
        raise Torch2TRTError(f"int8_mode must be True or False, got {flag!r}")
    if isinstance(model, QuantizedModel):
        raise Torch2TRTError("int8_mode=True with a model quantize() already returned: leave int8_mode out")
    if not isinstance(model, torch.nn.Module):
        raise Torch2TRTError("int8_mode=True needs an nn.Module (quantize() replaces its conv and linear layers)")
    name = "entropy" if algorithm is None else str(getattr(algorithm, "name", algorithm)).lower()
    method = name if name in METHODS else "entropy" if "entropy" in name else "max" if "minmax" in name else None
    if method is None:
        raise Torch2TRTError(
            f"int8_calib_algorithm={algorithm!r}: use 'entropy', 'max', 'percentile' or 'mse' (or a TensorRT "
            "CalibrationAlgoType ENTROPY_CALIBRATION(_2) / MINMAX_CALIBRATION)"
        )
    if dataset is None:
        xs = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs)
        if not all(isinstance(x, torch.Tensor) for x in xs):
            raise Torch2TRTError("int8_mode=True without int8_calib_dataset calibrates on the example tensors: pass tensors")
        dataset = [tuple(xs)]
    return quantize(model, dataset, dtype="int8", method=method, progress=False)


def _quantization_info(model: Any) -> dict[str, Any] | None:
    """The quantization settings of a :class:`torch2trt_lite.QuantizedModel` (None for other models)."""
    from .quantization import quantization_info

    return quantization_info(model)


def _hull(ranges: list[_shapes.Range]) -> dict[str, list[int]]:
    """An input's "min"/"opt"/"max" over all profiles (opt: the first profile's)."""
    n = len(ranges[0][0])
    return {
        "min": [min(r[0][k] for r in ranges) for k in range(n)],
        "opt": list(ranges[0][1]),
        "max": [max(r[2][k] for r in ranges) for k in range(n)],
    }


def _shape_input_values(network: Any, names: list[str], res: _shapes.Resolved) -> dict[str, tuple[list[int], ...]]:
    """(min, opt, max) values of each engine input that became a *shape input* (TensorRT computes
    sizes from its values: ``n = lengths.max().item()`` used as a size, see
    :func:`torch2trt_lite.trace.symbolic.value_read`): its Input's ``low``..``high - 1`` per element, opt the
    traced values. A plain example tensor gives no range: refused with the fix."""
    out: dict[str, tuple[list[int], ...]] = {}
    for i, name in enumerate(names):
        t = network.get_input(i)
        if not bool(t.is_shape_tensor):
            continue
        x = res.examples[i]
        if x.dtype not in (torch.int32, torch.int64) or x.dim() > 1 or res.profiles[0][i][0] != res.profiles[0][i][2]:
            raise ConversionError(
                f"input '{name}' ({x.dtype}, shape {tuple(x.shape)}) is read as a size (TensorRT computes sizes only "
                "from shape inputs: int32/int64 tensors of at most one static dim); compute the size from an "
                "input of that kind, or from tensor sizes"
            )
        if not (res.ranged and res.ranged[i]):
            raise ConversionError(
                f"input '{name}' is read as a size (its values compute a shape: e.g. lengths.max().item()), so "
                "TensorRT needs the range of its values: pass torch2trt_lite.Input(shape, shape, shape, "
                f"dtype={x.dtype}, example=..., low=..., high=...) for it (values in [low, high - 1])"
            )
        lo, hi = res.bounds[i] if res.bounds else (0, 100)
        n = x.numel()
        opt = [min(max(int(v), lo), hi - 1) for v in x.reshape(-1).tolist()]
        out[name] = ([lo] * n, opt, [hi - 1] * n)
    return out


def _add_profiles(builder: Any, config: Any, names: list[str], res: _shapes.Resolved,
                  shape_values: dict[str, tuple[list[int], ...]] | None = None) -> None:
    for k, prof in enumerate(res.profiles):
        profile = builder.create_optimization_profile()
        for name, (mn, op, mx) in zip(names, prof, strict=True):
            if shape_values and name in shape_values:
                profile.set_shape_input(name, *shape_values[name])
                if mn == mx:  # NOTE: a static shape input needs no shape range
                    continue
            profile.set_shape(name, mn, op, mx)
        if config.add_optimization_profile(profile) < 0:
            raise BuildError(f"optimization profile {k} ({prof}) was refused by the builder")


def _baked_layers(network: Any) -> list[str]:
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


def _verify_dynamic(
    model: Any, module: Any, d: NetworkDefinition, res: _shapes.Resolved,
    input_names: Sequence[str] | None, output_names: Sequence[str] | None, io_cast: bool = False,
) -> None:
    """Check a dynamic engine at each profile's min and max shapes against eager PyTorch (on the sim:
    the engine itself when it was built by the sim, else the same network built again there).
    ``io_cast``: the engine's floating inputs were cast to ``io_dtype``; eager PyTorch gets float32."""
    baked = [o["name"] for o in d.out_meta if -1 not in o["shape"]]
    if io_cast:
        user_model = model

        def model(*xs: Any) -> Any:
            return user_model(*[x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs])

    engine = module
    if d.backend.name != "sim":  # NOTE: the same network built on the sim, which runs here
        engine = convert(
            model, res.examples, backend="sim", input_names=input_names, output_names=output_names, progress=False,
            profiles=[[_shapes.Input(*r, dtype=x.dtype) for r, x in zip(p, res.examples, strict=True)]
                      for p in res.profiles],
            verify=False,
        )
    try:
        _shapes.verify(model, engine, res)
    except ConversionError as e:
        layers = _baked_layers(d.network)
        where = f"; layers with a dynamic input and a static output: {', '.join(layers[:5])}" if layers else ""
        static = f"; outputs with a static shape: {baked}" if baked else ""
        raise ConversionError(f"{e}{where}{static}") from None


def _timing_cache_load(be: Backend, config: Any, path: Any) -> Any:
    """Give ``config`` the timing cache in the file ``path`` (an empty one when there is none);
    return it, or None where the backend has none (the sim) or ``path`` is None."""
    if path is None or not be.is_real:
        return None
    data = b""
    path = os.fspath(path)
    if os.path.exists(path) and (be.name != "tensorrt-rtx" or torch.cuda.is_available()):
        # NOTE: TensorRT-RTX reads a timing cache through CUDA; without a GPU it logs CUDA errors
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise Torch2TRTError(f"timing_cache={path!r} cannot be read ({e.strerror or e})") from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # TensorRT-RTX: "timing cache operations are no-ops"
        cache = config.create_timing_cache(data)
        if cache is None and data:
            _log.warning("torch2trt-lite: timing cache %s does not load; building with an empty one", path)
            cache = config.create_timing_cache(b"")
        if cache is None:
            return None
        if not config.set_timing_cache(cache, ignore_mismatch=False):
            _log.warning(
                "torch2trt-lite: timing cache %s is from another GPU or TensorRT version and is not used; "
                "it is replaced after this build", path,
            )
            cache = config.create_timing_cache(b"")
            if cache is None or not config.set_timing_cache(cache, ignore_mismatch=False):
                return None
    return cache


def _timing_cache_save(config: Any, path: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        cache = config.get_timing_cache()
        blob = cache.serialize() if cache is not None else None
    if blob is None:
        return
    from torch2trt_lite.runtime.engine_file import atomic_write

    atomic_write(os.fspath(path), memoryview(blob).cast("B"))


def _workspace(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise Torch2TRTError(f"max_workspace_size must be a positive number of bytes (e.g. 1 << 30), got {value!r}")
    return value


def _targets(be: Backend, values: Any) -> list[Any]:
    """TensorRT-RTX's target compute capabilities; empty for its default."""
    if values is None:
        return []
    if be.name != "tensorrt-rtx":
        raise Torch2TRTError(
            f"compute_capabilities= is a TensorRT-RTX option; backend {be.name!r} builds for the GPU at hand"
        )
    from .backends import parse_compute_capabilities

    return parse_compute_capabilities(be.trt, values)


def load(path: str | os.PathLike[str], *, cuda_graph: bool = False) -> TRTModule:
    """Load an engine file written by ``TRTModule.save`` (``cuda_graph``: see :func:`convert`)."""
    return TRTModule.load(path, cuda_graph=cuda_graph)


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
        return self.cast(layer.get_output(0), t.dtype)


def check(
    model: Any,
    inputs: Sequence[Any] | torch.Tensor,
    *,
    max_batch_size: int | None = None,
    dynamic_batch: tuple[int, int] | None = None,
    profiles: Sequence[Sequence[Any]] | None = None,
    input_names: Sequence[str] | None = None,
) -> CheckReport:
    """Run ``model`` once under the tracer without building anything; report unsupported calls.

    ``inputs``, ``max_batch_size``, ``dynamic_batch``, ``profiles`` and ``input_names`` are
    ``convert``'s. With a dynamic dim the model is traced into a network of the sim (not built)
    with symbolic sizes, and the report also lists, without stopping at the first, every call whose
    converter refuses a dynamic size and every comparison, ``len()`` or float of a dynamic size that
    the range does not decide (:class:`torch2trt_lite.trace.symbolic.DynamicSizeGuardError` in ``convert``),
    each with the op, module path, location and reason (``CheckReport.dynamic`` holds these)."""
    _check_model(model)
    inputs, in_tree, input_names = _structure(inputs, input_names)
    res = _shapes.resolve(_as_inputs(inputs, allow_ranges=True), max_batch_size=max_batch_size,
                          dynamic_batch=dynamic_batch, profiles=profiles)
    module = model if isinstance(model, torch.nn.Module) else None

    def args(traced: list[torch.Tensor]) -> list[Any]:
        return traced if in_tree is None else list(decode_tree(in_tree, traced))

    if not res.dynamic:
        ctx: ConversionContext = CheckContext()
        with torch.no_grad():
            traced = [_example_copy(x) for x in res.examples]
            ctx.mark_traced(traced)
            tracer = Tracer(ctx, module, collect=True)
            tracer.run_model(model, args(traced))
        return CheckReport(tracer.problems)
    names = _input_names(input_names, res)
    be = get_backend("sim")
    network = be.trt.Builder(CapturingLogger(be.trt).logger).create_network(be.network_flags())
    ctx = _DynamicCheckContext(network, be.trt, be.name, has_plugins=be.has_plugins)
    net_shapes = _net_shapes(res) or []
    with torch.no_grad():
        traced = [_example_copy(x) for x in res.examples]
        for name, x, shape in zip(_default_names(names, len(traced)), traced, net_shapes, strict=True):
            ctx.set_itensor(x, network.add_input(name, ctx.trt_dtype(x.dtype), tuple(shape)))
        tracer = _CheckTracer(ctx, module, collect=True)
        state = _symbolic.SymbolicSizes(ctx, _input_ranges(res, names))
        state.install(tracer, traced)
        ctx.dims = {}
        for x in traced:
            for d in state.sizes(x) or ():
                if _symbolic.is_sym(d):
                    ctx.dims.setdefault(int.__int__(d), d)
        tracer.run_model(model, args(traced))
    return CheckReport(tracer.problems, tracer.dynamic)


__all__ = ["Backend", "CheckReport", "NetworkDefinition", "check", "convert", "define_network", "load"]
