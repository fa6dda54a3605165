"""Building the engine: the builder config (workspace, target GPUs, optimization profiles and the
values of shape inputs, timing cache), the builder call with its progress monitor, and the engine
file's metadata; :func:`build_module` runs them after :func:`~torch2trt_lite.build.define.define`
and wraps the plan in a :class:`~torch2trt_lite.runtime.module.TRTModule`.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from torch2trt_lite._version import __version__
from torch2trt_lite.backends import Backend
from torch2trt_lite.build import progress as _progress
from torch2trt_lite.build import refit as _refit
from torch2trt_lite.build.define import NetworkDefinition, define, network_layers
from torch2trt_lite.build.inputs import hull, input_ranges, net_shapes, value_bounds
from torch2trt_lite.build.options import ConvertOptions, Setup, Target
from torch2trt_lite.build.precision import quantization_info
from torch2trt_lite.errors import BuildError, ConversionError, Torch2TRTError
from torch2trt_lite.runtime.loading import FORMAT
from torch2trt_lite.runtime.module import TRTModule
from torch2trt_lite.runtime.structure import dtype_name
from torch2trt_lite.trace import shapes as _shapes

_log = logging.getLogger("torch2trt_lite")


def shape_input_values(network: Any, names: list[str], res: _shapes.Resolved) -> dict[str, tuple[list[int], ...]]:
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


def add_profiles(builder: Any, config: Any, names: list[str], res: _shapes.Resolved,
                 shape_values: dict[str, tuple[list[int], ...]] | None = None) -> None:
    """One optimization profile per profile of ``res`` (and the shape inputs' value ranges)."""
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


def builder_config(builder: Any, be: Backend, workspace: int, capabilities: list[Any]) -> Any:
    """A builder config with the workspace limit and (TensorRT-RTX) the target compute capabilities."""
    config = builder.create_builder_config()
    config.set_memory_pool_limit(be.trt.MemoryPoolType.WORKSPACE, workspace)
    if capabilities:
        config.num_compute_capabilities = len(capabilities)
        for k, cc in enumerate(capabilities):
            config.set_compute_capability(cc, k)
    return config


def timing_cache_load(be: Backend, config: Any, path: Any) -> Any:
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


def timing_cache_save(config: Any, path: Any) -> None:
    """Write ``config``'s timing cache to the file ``path`` (atomically)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        cache = config.get_timing_cache()
        blob = cache.serialize() if cache is not None else None
    if blob is None:
        return
    from torch2trt_lite.runtime.engine_file import atomic_write

    atomic_write(os.fspath(path), memoryview(blob).cast("B"))


def build_plan(d: NetworkDefinition, config: Any, monitor: Any) -> tuple[Any, float]:
    """The serialized engine of ``d``'s network and the seconds the builder took; a failed or
    cancelled build is a :class:`BuildError` (an exception of the monitor is raised as it is)."""
    t_build = time.perf_counter()
    with _progress.attached(d.backend.trt, config, monitor) as watch:
        plan = d.builder.build_serialized_network(d.network, config)
    t_build = time.perf_counter() - t_build
    if watch.error is not None:
        raise watch.error
    if plan is None and watch.cancelled:
        raise BuildError(
            "building the engine was cancelled: the progress monitor's step_complete returned False "
            "(return True from it to let the build go on)"
        )
    if plan is None:
        raise BuildError("building the engine failed: " + (builder_failure(d.logger.errors) or (
            "TensorRT logged no error to torch2trt-lite (a TensorRT Builder or Runtime made earlier in this "
            "process with another logger receives TensorRT's messages instead)")))
    return plan, t_build


def builder_failure(errors: list[str]) -> str:
    """The builder's errors, led by what to do where the cause is known (TensorRT-RTX's target limits)."""
    import re

    text = "; ".join(errors)
    gemm = re.search(r"Cannot compile operation '([^']*)' for Turing \(SM75\): FP32 GEMM is not supported", text)
    if gemm:
        return (f"TensorRT-RTX cannot compile float32 matrix multiplications (linear, matmul, attention) for "
                f"Turing GPUs (sm75), and layer '{gemm.group(1)}' is one: convert with precision='fp16' (they then "
                f"compute in fp16), or leave sm75 out of compute_capabilities. TensorRT-RTX said: {text}")
    if re.search(r"Cannot compile for target\(s\) sm75\b.*HW-specific datatypes: b16", text):
        return ("TensorRT-RTX cannot compile bfloat16 for Turing GPUs (sm75, no bf16 hardware): convert with "
                f"precision='fp16', or leave sm75 out of compute_capabilities. TensorRT-RTX said: {text}")
    if "generateForCurrent" in text:
        return ("compute_capabilities='current' builds for this machine's GPU, and TensorRT-RTX could not query it "
                "(no usable GPU or CUDA driver): name the targets instead, e.g. compute_capabilities=['sm86', "
                f"'sm89'], or leave the option out for TensorRT-RTX's default targets. TensorRT-RTX said: {text}")
    return text


def engine_meta(
    model: Any, d: NetworkDefinition, setup: Setup, target: Target, shape_values: dict[str, tuple[list[int], ...]],
    uses_plugins: bool,
) -> dict[str, Any]:
    """The engine file's metadata of a conversion (see :mod:`torch2trt_lite.runtime.engine_file`)."""
    be, res, network, names = target.backend, setup.res, d.network, d.input_names
    meta: dict[str, Any] = {
        "format": FORMAT,
        "torch2trt_lite": __version__,
        "backend": be.name,
        "trt_version": be.version,
        "api_version": getattr(be.trt, "_version", None) if be.name == "sim" else None,
        "device_capability": list(torch.cuda.get_device_capability()) if be.name == "tensorrt" else None,
        "compute_capabilities": (
            [str(c.name).lower() for c in target.capabilities] or "default"
        ) if be.name == "tensorrt-rtx" else None,
        "num_layers": int(network.num_layers),
        "inputs": [
            {"name": n, "dtype": dtype_name(x.dtype), "shape": list(x.shape), **hull([p[i] for p in res.profiles]),
             **({"values": dict(zip(("min", "opt", "max"), shape_values[n], strict=True))} if n in shape_values else {})}
            for i, (n, x) in enumerate(zip(names, res.examples, strict=True))
        ],
        "outputs": d.out_meta,
        "out_tree": d.out_tree,
        **({"in_tree": setup.in_tree} if setup.in_tree is not None else {}),
        "plugins": uses_plugins,
        "precision": dict(setup.precision_meta),
        "layers": [[n, t, [dt for _, dt in outs]] for n, t, outs in network_layers(network)],
    }
    quant = quantization_info(model)
    if quant is not None:
        meta["precision"]["quantization"] = quant
    symbolic = d.context.symbolic
    if symbolic is not None and symbolic.equal_dims:  # duck sizing's assumptions, checked on every call
        meta["equal_dims"] = [dict(e) for e in symbolic.equal_dims]
    if res.dynamic:
        meta["profiles"] = [
            {n: {"min": list(r[0]), "opt": list(r[1]), "max": list(r[2])} for n, r in zip(names, p, strict=True)}
            for p in res.profiles
        ]
    return meta


@dataclass
class Built:
    """What :func:`build_module` made: the engine's module, the network it was built from, the
    builder config and the timing cache it was given (None: none), and the phases' seconds."""

    module: TRTModule
    definition: NetworkDefinition
    config: Any
    timings: Any
    stats: dict[str, Any]


def build_module(model: Any, setup: Setup, target: Target, options: ConvertOptions) -> Built:
    """Define the network of ``model`` on ``target``'s backend, build it and wrap the plan in a
    TRTModule (``options``: the output names, the timing cache file and ``cuda_graph``)."""
    res, shapes = setup.res, net_shapes(setup.res)

    def traced() -> NetworkDefinition:
        return define(model, res.examples, target.backend, setup.input_names, options.output_names, net_shapes=shapes,
                      policy=setup.policy, out_float=setup.out_float, input_ranges=input_ranges(res, setup.input_names),
                      in_tree=setup.in_tree, truncate_double=options.truncate_double,
               value_bounds=value_bounds(res, setup.input_names))

    refit = options.refittable or options.strip_weights  # build/refit.py: weights named, recipes recorded
    d, refit_record = _refit.define_refittable(model, traced) if refit else (traced(), None)
    network, plugin_type = d.network, d.backend.trt.LayerType.PLUGIN_V3
    uses_plugins = any(network.get_layer(i).type == plugin_type for i in range(int(network.num_layers)))
    config = builder_config(d.builder, target.backend, setup.workspace, target.capabilities)
    shape_values = shape_input_values(network, d.input_names, res)
    if shapes is not None or shape_values:
        add_profiles(d.builder, config, d.input_names, res, shape_values)
    timings = timing_cache_load(target.backend, config, options.timing_cache)
    if refit:
        _refit.set_builder_flags(config, target.backend.trt, options.refittable, options.strip_weights)
    try:
        plan, t_build = build_plan(d, config, target.monitor)
    except BuildError as e:
        raise (_refit.refused_build(target.backend, e, options.strip_weights) if refit else e) from None
    meta = engine_meta(model, d, setup, target, shape_values, uses_plugins)
    if refit_record is not None:
        meta["refit"] = {**refit_record, "stripped": bool(options.strip_weights), "identical": not options.refittable}
    t_load = time.perf_counter()
    module = TRTModule(plan, meta, cuda_graph=options.cuda_graph)  # NOTE: TRTModule takes bytes-like plans as they are
    if options.strip_weights and module.runnable:
        module.refit(model)  # NOTE: the plan has no weights: the module runs with the model's own
    t_load = time.perf_counter() - t_load
    return Built(module, d, config, timings, {"trace_s": d.trace_s, "build_s": t_build, "load_s": t_load})


__all__ = [
    "Built", "add_profiles", "build_module", "build_plan", "builder_config", "engine_meta", "shape_input_values",
    "timing_cache_load", "timing_cache_save",
]
