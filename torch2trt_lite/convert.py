"""convert(): trace one forward pass into a TensorRT network, build it, wrap it in a TRTModule.

This module is the orchestration; the phases live in :mod:`torch2trt_lite.build`: ``inputs`` (the
model and its inputs checked and flattened), ``options`` (convert's options as one record, checked
into a ``Setup``), ``precision``, ``define`` (the traced network), ``cache`` (the engine cache),
``engine`` (builder config, profiles, timing cache, the builder call, the engine's metadata),
``verify`` (the dynamic verify run) and ``check`` (``check``'s traced run).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from torch2trt_lite.build import cache as _cache
from torch2trt_lite.build.check import CheckReport, check_traced
from torch2trt_lite.build.define import NetworkDefinition, define
from torch2trt_lite.build.engine import build_module, timing_cache_save
from torch2trt_lite.build.inputs import (
    as_inputs,
    check_model,
    input_ranges,
    net_shapes,
    resolve_names,
    structure,
)
from torch2trt_lite.build.options import ConvertOptions, prepare, target
from torch2trt_lite.build.precision import int8_model
from torch2trt_lite.build.verify import verify_dynamic
from torch2trt_lite.runtime.module import TRTModule
from torch2trt_lite.trace import shapes as _shapes

from .backends import Backend, get_backend


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
    check_model(model)
    inputs, in_tree, input_names = structure(inputs, input_names)
    res = _shapes.resolve(as_inputs(inputs, allow_ranges=True))
    names = resolve_names(input_names, res)
    return define(model, res.examples, get_backend(backend), names, output_names, net_shapes=net_shapes(res),
                  input_ranges=input_ranges(res, names), in_tree=in_tree)


def convert(
    model: Any, inputs: Sequence[Any] | torch.Tensor, *, backend: str = "auto",
    input_names: Sequence[str] | None = None, output_names: Sequence[str] | None = None,
    max_workspace_size: int = 1 << 30,
    compute_capabilities: Sequence[str | tuple[int, int]] | str | None = None,
    progress: Any = None, cache_dir: str | os.PathLike[str] | None = None,
    timing_cache: str | os.PathLike[str] | None = None, cuda_graph: bool = False,
    max_batch_size: int | None = None, dynamic_batch: tuple[int, int] | None = None,
    profiles: Sequence[Sequence[Any]] | None = None, verify: bool = True,
    precision: str | torch.dtype = "fp32", fp16_mode: bool = False,
    precision_overrides: Mapping[Any, Any] | None = None, io_dtype: str | torch.dtype | None = None,
    int8_mode: bool = False, int8_calib_dataset: Any = None, int8_calib_algorithm: Any = None,
    truncate_double: bool | None = None, refittable: bool = False, strip_weights: bool = False,
) -> TRTModule:
    """Convert ``model`` by running ``model(*inputs)`` once, and return a :class:`TRTModule`.

    ``backend``: ``"auto"`` (TensorRT, else TensorRT-RTX, when it imports and a GPU exists, else the
    sim, and it says so), ``"tensorrt"``, ``"tensorrt-rtx"`` (builds without a GPU; the engine runs
    only on a supported GPU) or ``"sim"``. ``compute_capabilities`` (TensorRT-RTX only): the GPUs to
    build for, e.g. ``["sm75", "sm86"]``, ``"8.9"`` or ``"current"`` (default: TensorRT-RTX's own).
    ``progress``: a display of the build's phases on stderr (None: when stderr is a terminal;
    True/False), or a monitor that may cancel the build (see :mod:`torch2trt_lite.build.progress`).

    ``cache_dir``: a folder of built engines keyed by a SHA-256 of the model (code, attributes,
    parameters, buffers), the inputs' names, dtypes, shape ranges and value bounds, these options and
    the versions: a hit loads the engine without tracing, a miss builds and saves it
    (``conversion_stats["cache"]`` says which; ``"off"`` with a warning where an attribute cannot be
    hashed; see :mod:`torch2trt_lite.build.cache`). ``timing_cache`` (TensorRT): a file of kernel
    timings read before the build (not one from another GPU or version) and written after it; the sim
    ignores it.
    ``cuda_graph`` (real backends on a GPU): runs replay a captured CUDA graph (the sim refuses it).

    Dynamic shapes: an entry of ``inputs`` may be a :class:`torch2trt_lite.Input` (a min/opt/max
    range); ``max_batch_size=N`` (torch2trt's option) makes dim 0 of every example range over [1, N],
    ``dynamic_batch=(lo, hi)`` over [lo, hi]; ``profiles=[[Input, ...], ...]`` builds one optimization
    profile per list (``TRTModule`` runs a call with the first that covers its shapes). The model is
    traced once with the sizes of dynamic dims symbolic (:mod:`torch2trt_lite.trace.symbolic`);
    ``verify=True`` runs a dynamic engine on the sim at other sizes than the traced ones (integer
    inputs hold values the example holds, within an Input's ``low``/``high``) and refuses it
    (``ConversionError``) where an output shape differs from eager PyTorch's, or where eager PyTorch
    itself fails at those sizes (then the declared range is wider than the model allows).

    Precision (:mod:`torch2trt_lite.trace.precision`): ``precision="fp16"`` or ``"bf16"``
    (``fp16_mode=True`` is torch2trt's ``"fp16"``) builds a strongly typed network whose convolutions,
    linear layers, matrix multiplies and attention compute in that type, the numerically sensitive
    ops in float32 (autocast's lists); ``precision_overrides={"backbone.layer4": "fp32", nn.LayerNorm:
    "fp32", F.softmax: "fp16"}`` changes it per module path, class or op; under ``torch.autocast`` the
    model gets autocast's casts. Floating outputs come in the floating inputs' type (float32 without),
    or in ``io_dtype`` (``"fp16"``: the engine takes its floating inputs in it too).
    ``int8_mode=True`` (torch2trt's) quantizes the model first (:func:`torch2trt_lite.quantize`) on
    ``int8_calib_dataset`` (batches; default: the examples) with ``int8_calib_algorithm``
    (``"entropy"``, ``"max"``, ``"percentile"``, ``"mse"`` or a TensorRT ``CalibrationAlgoType``); a
    model with no convolution or linear layer to quantize converts in float precision, with a warning.

    ``truncate_double`` (:mod:`torch2trt_lite.trace.double`): TensorRT has no float64, so float64
    intermediates are computed in float32 (None, the default: with one warning naming the ops; True:
    silently, and a float64 output comes back as float32; False: refused). A float64 output is refused
    unless ``truncate_double=True``.

    Refit (:mod:`torch2trt_lite.runtime.refit`): ``refittable=True`` builds an engine whose weights
    ``TRTModule.refit(model_or_state_dict)`` replaces without a rebuild. Every weight computed from the
    parameters and buffers (batch norm folded into a convolution, packed q/k/v projections, fp16 copies,
    ``self.w.t()`` in ``forward``) is named after its parameter path and recomputed from the new ones;
    one that cannot be is refused here (the model is traced twice: see :mod:`torch2trt_lite.build.refit`).
    ``strip_weights=True`` builds a plan without those weights (``BuilderFlag.STRIP_PLAN``): alone, it
    may only be refitted with the weights it was built with (``REFIT_IDENTICAL``); with
    ``refittable=True`` with any. TensorRT-RTX without a GPU refuses both.
    """
    t0 = time.perf_counter()
    check_model(model)
    options = ConvertOptions(
        backend=backend, input_names=input_names, output_names=output_names,
        max_workspace_size=max_workspace_size, compute_capabilities=compute_capabilities, progress=progress,
        cache_dir=cache_dir, timing_cache=timing_cache, cuda_graph=cuda_graph, max_batch_size=max_batch_size,
        dynamic_batch=dynamic_batch, profiles=profiles, verify=verify, precision=precision,
        fp16_mode=fp16_mode, precision_overrides=precision_overrides, io_dtype=io_dtype, int8_mode=int8_mode,
        int8_calib_dataset=int8_calib_dataset, int8_calib_algorithm=int8_calib_algorithm,
        truncate_double=truncate_double, refittable=bool(refittable), strip_weights=bool(strip_weights),
    )
    model = int8_model(model, inputs, int8_mode, int8_calib_dataset, int8_calib_algorithm)
    setup = prepare(model, inputs, options)  # inputs, ranges, precision, names, workspace
    on = target(get_backend(backend), options)  # backend, compute capabilities, progress
    entry, found = (None, None) if cache_dir is None else _cache.find(cache_dir, model, setup, on, options)
    if found is not None:  # a cache hit: loaded, neither traced nor built
        found.conversion_time_s = time.perf_counter() - t0
        return found  # type: ignore[no-any-return]
    built = build_module(model, setup, on, options)
    if verify and setup.res.dynamic:
        verify_dynamic(model, built, setup, options)
    if built.timings is not None:
        timing_cache_save(built.config, timing_cache)
    module, stats = built.module, built.stats
    if entry is not None:
        _cache.store(module, entry)
        stats["cache"] = "miss"
    elif cache_dir is not None:  # the key cannot represent the model or an option (a warning said which)
        stats["cache"] = "off"
    module.conversion_time_s = time.perf_counter() - t0
    module.conversion_stats = stats
    return module


def load(path: str | os.PathLike[str], *, cuda_graph: bool = False, weights: Any = None) -> TRTModule:
    """Load an engine file written by ``TRTModule.save`` (``cuda_graph``: see :func:`convert`);
    ``weights`` (a model or a state dict) refits it at load: required for a file saved without weights."""
    return TRTModule.load(path, cuda_graph=cuda_graph, weights=weights)


def check(
    model: Any,
    inputs: Sequence[Any] | torch.Tensor,
    *,
    max_batch_size: int | None = None,
    dynamic_batch: tuple[int, int] | None = None,
    profiles: Sequence[Sequence[Any]] | None = None,
    input_names: Sequence[str] | None = None,
    truncate_double: bool | None = None,
) -> CheckReport:
    """Run ``model`` once under the tracer without building anything; report unsupported calls.

    ``inputs``, ``max_batch_size``, ``dynamic_batch``, ``profiles`` and ``input_names`` are
    ``convert``'s. With a dynamic dim the model is traced into a network of the sim (not built)
    with symbolic sizes, and the report also lists, without stopping at the first, every call whose
    converter refuses a dynamic size and every comparison, ``len()`` or float of a dynamic size that
    the range does not decide (:class:`torch2trt_lite.trace.symbolic.DynamicSizeGuardError` in ``convert``),
    each with the op, module path, location and reason (``CheckReport.dynamic`` holds these).
    ``truncate_double`` is ``convert``'s: ``CheckReport.truncated`` lists the ops whose float64 results
    would be computed in float32, and a float64 output is listed as unsupported unless it is True."""
    check_model(model)
    inputs, in_tree, input_names = structure(inputs, input_names)
    res = _shapes.resolve(as_inputs(inputs, allow_ranges=True), max_batch_size=max_batch_size,
                          dynamic_batch=dynamic_batch, profiles=profiles)
    return check_traced(model, res, in_tree, input_names, truncate_double)


__all__ = ["Backend", "CheckReport", "NetworkDefinition", "check", "convert", "define_network", "load"]
