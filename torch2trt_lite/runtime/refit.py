"""Refit: new weights for a refittable engine without a rebuild, and weight-stripped engine files.

An engine converted with ``refittable=True`` or ``strip_weights=True`` carries a ``refit`` record in
its metadata (and engine file header), written by :mod:`torch2trt_lite.build.refit`::

    "refit": {
      "weights": [{"name": "layer1.0.conv1.weight", "shape": [...], "dtype": "float32",
                   "sources": ["layer1.0.conv1.weight", "layer1.0.bn1.weight", ...],
                   "transform": ["detach", "mul", ...], "node": 7}, ...],
      "nodes": [...],            # the recipes (torch2trt_lite.trace.weights.replay)
      "sources": {"layer1.0.conv1.weight": {"shape": [...], "dtype": "float32"}, ...},
      "fingerprint": "<sha256>", # of the weights' names, shapes and types (build.refit.fingerprint)
      "stripped": false,         # true: the plan holds none of these weights (load needs weights=)
      "identical": false         # true: REFIT_IDENTICAL, refitted only with the weights it was built with
    }

:func:`refitted` recomputes every named weight from a model or a state dict (through its recorded
transform: batch norm folded into a convolution, packed projections, fp16 copies) and refits a fresh
copy of the engine with TensorRT's ``Refitter`` (the sim's or the real one); the module swaps to it
only when everything succeeded, so a refused refit leaves it working with its old weights.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from torch2trt_lite.errors import EngineRefitError
from torch2trt_lite.runtime.loading import Loaded, prepare
from torch2trt_lite.trace.weights import replay

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}
_HOW = "convert(model, inputs, refittable=True) builds a refittable engine"


def record(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The engine's ``refit`` record, checked; a non-refittable engine is refused with the fix."""
    rec = meta.get("refit")
    if rec is None:
        raise EngineRefitError(f"this engine is not refittable (it was converted without refittable=True); {_HOW}")
    ok = isinstance(rec, dict) and isinstance(rec.get("weights"), list) and isinstance(rec.get("nodes"), list) \
        and isinstance(rec.get("sources"), dict) and all(
            isinstance(w, dict) and isinstance(w.get("name"), str) and isinstance(w.get("shape"), list)
            and w.get("dtype") in _DTYPES and isinstance(w.get("node"), int) and 0 <= w["node"] < len(rec["nodes"])
            for w in rec["weights"])
    if not ok:
        raise EngineRefitError("the engine's refit record is malformed; convert the model again")
    if rec.get("fingerprint") != fingerprint(rec["weights"]):
        raise EngineRefitError(
            "the engine's refit record does not match its fingerprint (refit.fingerprint: the names, shapes and "
            "types of its weights); the header was edited or belongs to another engine: convert the model again"
        )
    return rec


def fingerprint(weights: list[dict[str, Any]]) -> str:
    """SHA-256 of the names, shapes and types of an engine's refittable weights (what a refit must supply)."""
    rows = [[w["name"], w["shape"], w["dtype"]] for w in weights]
    return hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()


def sources_of(weights: Any) -> dict[str, torch.Tensor]:
    """The model tensors by path: a module's parameters and buffers, or a state dict."""
    if isinstance(weights, torch.nn.Module):
        return {p: t for p, t in (*weights.named_parameters(remove_duplicate=False),
                                  *weights.named_buffers(remove_duplicate=False))}
    if isinstance(weights, Mapping):
        return dict(weights)
    raise EngineRefitError(
        f"refit takes a model (an nn.Module of the converted architecture) or its state dict, got {type(weights).__name__}"
    )


def new_weights(rec: Mapping[str, Any], weights: Any) -> list[tuple[str, torch.Tensor]]:
    """(name, value) of every refittable weight computed from ``weights``; the first key, shape or
    type that does not fit is an :class:`EngineRefitError`."""
    given = sources_of(weights)
    for path, spec in rec["sources"].items():
        t = given.get(path)
        if t is None:
            raise EngineRefitError(
                f"refit: the weights have no '{path}' (the engine's weights are computed from {len(rec['sources'])} "
                "model tensors); pass the model or state dict of the converted architecture"
            )
        if not isinstance(t, torch.Tensor):
            raise EngineRefitError(f"refit: '{path}' is a {type(t).__name__}, not a tensor")
        if list(t.shape) != list(spec["shape"]) or str(t.dtype)[6:] != spec["dtype"]:
            raise EngineRefitError(
                f"refit: '{path}' is {str(t.dtype)[6:]} of shape {list(t.shape)}, the engine was converted with "
                f"{spec['dtype']} of shape {list(spec['shape'])}; a refit keeps the architecture (convert again "
                "for another one)"
            )
    srcs = {p: given[p].detach().cpu() for p in rec["sources"]}
    try:
        values = replay(rec["nodes"], [w["node"] for w in rec["weights"]], srcs)
    except (KeyError, ValueError, TypeError, IndexError, RuntimeError) as e:
        raise EngineRefitError(f"refit: the engine's recorded weight transforms fail on these weights ({e})") from None
    out = []
    for w, v in zip(rec["weights"], values, strict=True):
        v = v.detach().to(_DTYPES[w["dtype"]]).contiguous()
        if list(v.shape) != list(w["shape"]):
            raise EngineRefitError(
                f"refit: weight '{w['name']}' comes out of shape {list(v.shape)}, the engine holds {w['shape']}"
            )
        out.append((w["name"], v))
    return out


def _as_backend_weights(trt: Any, v: torch.Tensor, keep: list[Any]) -> Any:
    if v.dtype == torch.bfloat16:
        keep.append(v)
        return v if getattr(trt, "_version", None) else trt.Weights(trt.DataType.BF16, v.data_ptr(), v.numel())
    arr = np.ascontiguousarray(v.numpy())
    keep.append(arr)
    return arr


def refitted(st: Loaded, weights: Any) -> Loaded:
    """A new engine state: ``st``'s engine refitted with ``weights`` (a model or state dict)."""
    rec = record(st.meta)
    values = new_weights(rec, weights)
    be = st.backend
    if st.engine is None:
        raise EngineRefitError(
            f"refit: this {be.name} engine cannot be deserialized here (no GPU), and a refit works on a "
            "deserialized engine (TensorRT's Refitter); refit it on a machine with a supported GPU"
        )
    trt = be.trt
    engine = st.runtime.deserialize_cuda_engine(st.plan)  # NOTE: a fresh copy: the module's engine stays as it is
    if engine is None:
        raise EngineRefitError("refit: the engine could not be deserialized again: " + "; ".join(st.log.errors))
    refitter = trt.Refitter(engine, st.log.logger)
    keep: list[Any] = []
    expected = set(refitter.get_all_weights())
    missing_names = [n for n, _ in values if n not in expected]
    if missing_names:
        raise EngineRefitError(f"refit: the engine has no refittable weights named {missing_names[:3]}; convert again")
    for name, v in values:
        if not refitter.set_named_weights(name, _as_backend_weights(trt, v, keep)):
            raise EngineRefitError(f"refit: the backend refused weights '{name}': " + "; ".join(st.log.errors[-2:]))
    missing = list(refitter.get_missing_weights())
    if missing:
        raise EngineRefitError(f"refit: the backend still needs weights {missing[:5]}")
    if not refitter.refit_cuda_engine():
        why = "; ".join(st.log.errors[-2:]) or "no reason given"
        hint = (" (an engine converted with strip_weights=True alone is built with REFIT_IDENTICAL and takes only the "
                "weights it was built with: convert with refittable=True, strip_weights=True to refit others)"
                if rec.get("identical") else "")
        raise EngineRefitError(f"refit: the backend refused the refit: {why}{hint}")
    plan = engine.serialize()
    context = engine.create_execution_context()
    if plan is None or context is None:
        raise EngineRefitError("refit: the refitted engine cannot be serialized or run: " + "; ".join(st.log.errors[-2:]))
    meta = {k: v for k, v in st.meta.items() if k not in ("plan_sha256", "plan_nbytes")}
    meta["refit"] = {**rec, "stripped": False}
    # NOTE: the same engine as st's but for its weights: its I/O was checked when st was prepared
    return Loaded(bytes(memoryview(plan).cast("B")), meta, be, st.log, st.runtime, engine, context, None)


def stripped_plan(st: Loaded) -> bytes:
    """``st``'s plan without its refittable weights (``SerializationFlag.EXCLUDE_WEIGHTS``)."""
    rec = record(st.meta)
    if rec.get("stripped"):
        return bytes(st.plan)
    if st.engine is None:
        raise EngineRefitError(
            f"save(weights=False): this {st.backend.name} engine cannot be deserialized here (no GPU), and leaving "
            "its weights out needs the engine (serialize_with_config); convert with strip_weights=True, which strips "
            "them when the plan is built"
        )
    config = st.engine.create_serialization_config()
    config.set_flag(st.backend.trt.SerializationFlag.EXCLUDE_WEIGHTS)
    plan = st.engine.serialize_with_config(config)
    if plan is None:
        raise EngineRefitError("save(weights=False): the backend could not serialize the engine without weights: "
                               + "; ".join(st.log.errors[-2:]))
    return bytes(memoryview(plan).cast("B"))


def loaded(plan: Any, meta: dict[str, Any], weights: Any, source: str) -> Loaded:
    """An engine file's engine, refitted with ``weights`` where given (a stripped file needs them)."""
    rec = meta.get("refit")
    if isinstance(rec, dict) and rec.get("stripped") and weights is None:
        raise EngineRefitError(
            f"{source} was saved without its weights (save(path, weights=False)): load it with "
            "torch2trt_lite.load(path, weights=model_or_state_dict)"
        )
    st = prepare(plan, meta, verified=True, source=source)
    return st if weights is None else refitted(st, weights)


__all__ = ["fingerprint", "loaded", "new_weights", "record", "refitted", "sources_of", "stripped_plan"]
