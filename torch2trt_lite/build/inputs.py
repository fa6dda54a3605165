"""The model and its inputs as a conversion takes them: checked, structured inputs flattened into
the engine's inputs, their names, shapes and ranges."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from torch2trt_lite.errors import Torch2TRTError
from torch2trt_lite.runtime.structure import cache_layers, decode_tree, is_transformers_class, tensor_leaves
from torch2trt_lite.trace import shapes as _shapes


def check_model(model: Any) -> None:
    """Refuse what cannot be converted: a non-callable, or a module in training mode."""
    if not callable(model):
        raise Torch2TRTError(f"model must be an nn.Module or a callable, got {type(model).__name__}")
    if isinstance(model, torch.nn.Module) and model.training:
        raise Torch2TRTError(
            "the model is in training mode; call model.eval() first (batch norm and dropout convert with "
            "their inference behaviour)"
        )


def as_inputs(inputs: Any, allow_ranges: bool = False) -> list[Any]:
    """``inputs`` as a list of tensors (and, with ``allow_ranges``, :class:`~torch2trt_lite.Input`
    ranges), refused with the fix where an entry cannot be an engine input."""
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


def structure(inputs: Any, input_names: Sequence[str] | None) -> tuple[Any, Any, Sequence[str] | None]:
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


def flat(fn: Any, in_tree: Any) -> Any:
    """``fn`` (the model, or its engine) called with the engine's input tensors: the arguments are
    rebuilt by ``in_tree``, the result is its tensors in order."""
    def call(*leaves: Any) -> list[torch.Tensor]:
        return tensor_leaves(fn(*decode_tree(in_tree, list(leaves))))

    return call


def example_copy(x: torch.Tensor) -> torch.Tensor:
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


def resolve_names(names: Sequence[str] | None, res: _shapes.Resolved) -> list[str] | None:
    """The inputs' names: ``names`` (convert's ``input_names``), else each Input's own name
    (input_<i> for the others); None when neither names any."""
    if names is not None:
        named = [n for n in res.names if n is not None]
        if named:
            raise Torch2TRTError(f"give input names either in input_names= or as Input(name=...), not both (got {named})")
        return list(names)
    if all(n is None for n in res.names):
        return None
    return [n if n is not None else f"input_{i}" for i, n in enumerate(res.names)]


def default_names(names: Sequence[str] | None, n: int) -> list[str]:
    """``names``, or input_0 .. input_<n - 1> when there are none."""
    return list(names) if names is not None else [f"input_{i}" for i in range(n)]


def net_shapes(res: _shapes.Resolved) -> list[tuple[int, ...]] | None:
    """Each network input's shape (-1 in the dims a profile lets vary); None when all are static."""
    if not res.dynamic:
        return None
    return [_shapes.network_shape([p[i] for p in res.profiles]) for i in range(len(res.examples))]


def hull(ranges: list[_shapes.Range]) -> dict[str, list[int]]:
    """An input's "min"/"opt"/"max" over all profiles (opt: the first profile's)."""
    n = len(ranges[0][0])
    return {
        "min": [min(r[0][k] for r in ranges) for k in range(n)],
        "opt": list(ranges[0][1]),
        "max": [max(r[2][k] for r in ranges) for k in range(n)],
    }


def value_bounds(res: _shapes.Resolved, names: Sequence[str] | None) -> dict[str, tuple[int, int]]:
    """Each ``Input`` with ``low``/``high``: the (low, high - 1) its values lie in, by name
    (the bounds of sizes read from its values, torch2trt_lite/trace/values.py)."""
    pairs = zip(default_names(names, len(res.examples)), res.bounds or [], res.ranged or [], strict=False)
    return {name: (int(lo), int(hi) - 1) for name, (lo, hi), ranged in pairs if ranged}


def input_ranges(res: _shapes.Resolved, names: Sequence[str] | None) -> dict[str, tuple[_shapes.Shape, _shapes.Shape]]:
    """Each input's (min shape, max shape) over every profile, by name (the ranges of symbolic sizes)."""
    out = {}
    for i, name in enumerate(default_names(names, len(res.examples))):
        h = hull([p[i] for p in res.profiles])
        out[name] = (tuple(h["min"]), tuple(h["max"]))
    return out


__all__ = [
    "as_inputs", "check_model", "default_names", "example_copy", "flat", "hull", "input_ranges", "net_shapes",
    "resolve_names", "structure", "value_bounds",
]
