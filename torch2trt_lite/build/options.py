"""``convert``'s options as one record, and what the phases share once they are checked.

:class:`ConvertOptions` carries the options as given (see :func:`torch2trt_lite.convert` for each);
:func:`prepare` checks them against the model's inputs and returns the :class:`Setup` that the
network definition, the engine cache, the build and the dynamic verify run read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from torch2trt_lite.backends import Backend, parse_compute_capabilities
from torch2trt_lite.build import progress as _progress
from torch2trt_lite.build.inputs import as_inputs, resolve_names, structure
from torch2trt_lite.build.precision import precision_setup
from torch2trt_lite.errors import BackendUnavailableError, Torch2TRTError
from torch2trt_lite.trace import precision as _precision
from torch2trt_lite.trace import shapes as _shapes
from torch2trt_lite.trace.double import check_option


@dataclass(frozen=True, kw_only=True)
class ConvertOptions:
    """The options of :func:`torch2trt_lite.convert` (its keyword arguments, with its defaults)."""

    backend: str = "auto"
    input_names: Sequence[str] | None = None
    output_names: Sequence[str] | None = None
    max_workspace_size: int = 1 << 30
    compute_capabilities: Sequence[str | tuple[int, int]] | str | None = None
    progress: Any = None
    cache_dir: str | os.PathLike[str] | None = None
    timing_cache: str | os.PathLike[str] | None = None
    cuda_graph: bool = False
    max_batch_size: int | None = None
    dynamic_batch: tuple[int, int] | None = None
    profiles: Sequence[Sequence[Any]] | None = None
    verify: bool = True
    precision: str | torch.dtype = "fp32"
    fp16_mode: bool = False
    precision_overrides: Mapping[Any, Any] | None = None
    io_dtype: str | torch.dtype | None = None
    int8_mode: bool = False
    int8_calib_dataset: Any = None
    int8_calib_algorithm: Any = None
    truncate_double: bool | None = None
    refittable: bool = False
    strip_weights: bool = False


@dataclass(frozen=True)
class Setup:
    """A conversion's inputs and precision once checked: what every phase after it reads."""

    res: _shapes.Resolved  # examples (cast to io_dtype where given) and profiles
    in_tree: Any  # rebuilds the model's arguments from the engine's inputs (None: flat inputs)
    input_names: list[str] | None  # the names given (input_names= or Input names); None: input_<i>
    policy: _precision.Policy | None
    out_float: torch.dtype | None  # the floating outputs' type (None: as traced)
    precision_meta: dict[str, Any]  # what the engine file records of the precision
    workspace: int


@dataclass(frozen=True)
class Target:
    """What the engine is built for and with: the backend, TensorRT-RTX's compute capabilities
    (empty: its default) and the progress monitor (None: no display)."""

    backend: Backend
    capabilities: list[Any]
    monitor: Any


def prepare(model: Any, inputs: Any, options: ConvertOptions) -> Setup:
    """Check ``inputs`` and the options that shape the network against each other (structure,
    ranges, precision, names, workspace), in the order ``convert`` reports their errors."""
    inputs, in_tree, names = structure(inputs, options.input_names)
    check_option(options.truncate_double)  # float64: None, True or False (torch2trt_lite.trace.double)
    res = _shapes.resolve(
        as_inputs(inputs, allow_ranges=True), max_batch_size=options.max_batch_size,
        dynamic_batch=options.dynamic_batch, profiles=options.profiles,
    )
    policy, out_float = precision_setup(
        model, res, options.precision, options.fp16_mode, options.precision_overrides, options.io_dtype,
    )
    meta = _precision.settings(policy, out_float)
    names = resolve_names(names, res)
    return Setup(res, in_tree, names, policy, out_float, meta, check_workspace(options.max_workspace_size))


def target(be: Backend, options: ConvertOptions) -> Target:
    """The build's :class:`Target` on ``be`` (compute capabilities and progress checked)."""
    return Target(be, compute_targets(be, options.compute_capabilities), _progress.resolve(options.progress))


def check_workspace(value: Any) -> int:
    """``max_workspace_size`` checked: a positive number of bytes."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise Torch2TRTError(f"max_workspace_size must be a positive number of bytes (e.g. 1 << 30), got {value!r}")
    return value


def compute_targets(be: Backend, values: Any) -> list[Any]:
    """TensorRT-RTX's target compute capabilities; empty for its default."""
    if values is None:
        return []
    if be.name != "tensorrt-rtx":
        raise Torch2TRTError(
            f"compute_capabilities= is a TensorRT-RTX option; backend {be.name!r} builds for the GPU at hand"
        )
    targets = parse_compute_capabilities(be.trt, values)
    if any(t.name == "CURRENT" for t in targets) and not torch.cuda.is_available():
        raise BackendUnavailableError(
            "compute_capabilities='current' means the GPU of this machine, and it has none "
            "(torch.cuda.is_available() is False): name the targets instead, e.g. compute_capabilities=['sm86', "
            "'sm89'] (the CLI: --compute-capability sm86), or leave the option out for TensorRT-RTX's defaults"
        )
    return targets


__all__ = ["ConvertOptions", "Setup", "Target", "check_workspace", "compute_targets", "prepare", "target"]
