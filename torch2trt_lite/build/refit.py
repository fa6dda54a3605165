"""Refittable conversions (``convert(..., refittable=True, strip_weights=True)``).

:func:`define_refittable` traces the model with a weight log (:mod:`torch2trt_lite.trace.weights`),
so every weight of the network computed from the model's parameters and buffers has a recipe, and
then makes sure none is missed, before anything is built:

1. every recipe replayed on the model's own tensors gives the traced weight bit for bit;
2. the model is traced a second time with its floating parameters and buffers perturbed in place
   (values scaled by 1.25 and 0.8125 in turn, every third moved by 2^-7; restored exactly afterwards
   from a copy; meanwhile no other thread may run the model): a weight that changes must have a
   recipe, and that recipe replayed on the perturbed tensors must give the second trace's weight. A weight computed from the parameters in a way the log cannot see (a
   value read into Python, numpy arithmetic) is refused here, naming where it was made.

Each weight with a recipe is named after its main source (``layer1.0.conv1.weight``: the source of its
shape, else the first; ``#1``, ``#2`` where a source makes several) with
``INetworkDefinition.set_weights_name``, and the engine file's ``refit`` record keeps, per name, its
shape, type, sources and recipe (see :mod:`torch2trt_lite.runtime.refit`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

from torch2trt_lite.backends import refit_build_refusal
from torch2trt_lite.errors import BuildError, ConversionError
from torch2trt_lite.runtime.refit import fingerprint
from torch2trt_lite.trace.weights import Sink, WeightLog, replay

_log = logging.getLogger("torch2trt_lite")
_FLOAT_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float64: "float32"}


def define_refittable(model: Any, define: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    """``define()`` traced with a weight log, its weights checked and named; returns the network
    definition and the engine file's ``refit`` record (without ``stripped``)."""
    log = WeightLog(model)
    with log.active():
        d = define()
    derived = [s for s in log.sinks if s.node is not None]
    for s in derived:
        why = log.bad(s.node)  # type: ignore[arg-type]
        if why is not None:
            raise ConversionError(
                f"refittable=True: a weight of '{s.where or '<model>'}' is computed from {log.sources_of(s.node)[:3]} "  # type: ignore[arg-type]
                f"by a call a refit cannot repeat ({why}); convert without refittable=True, or compute it in forward "
                "with torch operations"
            )
    _check_replay(log, derived, {p: t.detach() for p, t in log.sources.items()}, "the model's own weights")
    _check_perturbed(model, log, define)
    if log.frozen:
        _log.warning(
            "torch2trt-lite: refittable=True: the engine holds the values of tensor attributes that are not "
            "parameters or buffers (%s) as constants: a refit keeps them (the engine file's refit.frozen lists "
            "them); register them as buffers for a refit to replace them", ", ".join(log.frozen[:5]),
        )
    before = len(d.logger.errors)
    trt_log = logging.getLogger("torch2trt_lite.tensorrt")
    quiet, trt_log.disabled = trt_log.disabled, True  # NOTE: set_weights_name logs an error for each unused weight
    try:
        record = _name(d.network, log, derived)
    finally:
        trt_log.disabled = quiet
        del d.logger.errors[before:]
    if log.frozen:
        record["frozen"] = list(log.frozen)
    return d, record


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same values (bit for bit where NaNs differ from themselves)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if torch.equal(a, b):
        return True
    a, b = a.detach().contiguous().cpu().reshape(-1), b.detach().contiguous().cpu().reshape(-1)
    return bool(torch.equal(a.view(torch.uint8), b.view(torch.uint8))) if a.numel() else True


def _check_replay(log: WeightLog, sinks: list[Sink], sources: dict[str, torch.Tensor], what: str,
                  expected: list[torch.Tensor] | None = None) -> None:
    got = replay(log.nodes, [s.node for s in sinks], sources)  # type: ignore[misc]
    for k, (s, g) in enumerate(zip(sinks, got, strict=True)):
        want = s.value if expected is None else expected[k]
        if not _same(g, want):
            raise ConversionError(
                f"refittable=True: the recorded transform of a weight of '{s.where or '<model>'}' (from "
                f"{log.sources_of(s.node)[:3]}: {' -> '.join(log.ops(s.node)[-6:])}) does not reproduce it on "  # type: ignore[arg-type]
                f"{what}, so a refit could not recompute it; convert without refittable=True"
            )


def _perturb(t: torch.Tensor) -> None:
    """Scale the values of ``t`` by 1.25 and 0.8125 in turn and move every third by 2^-7 (zeros move
    too), in place (not through ``.data``: the version counter must move, caches keyed on it see it)."""
    flat = t.detach().reshape(-1)
    flat[0::2] *= 1.25
    flat[1::2] *= 0.8125
    flat[0::3] += 0.0078125
    if not t.is_contiguous():  # NOTE: reshape copied; a view (detach included) shares t's version counter
        t.copy_(flat.reshape(t.shape))


def _check_perturbed(model: Any, log: WeightLog, define: Callable[[], Any]) -> None:
    firsts = [s.value.clone() for s in log.sinks]  # NOTE: a sink may share memory with a parameter
    saved = {id(t): (t, t.detach().clone()) for t in log.sources.values()}
    second = WeightLog(model, recording=False)
    try:
        with torch.no_grad():
            for path, t in log.sources.items():
                try:
                    _perturb(t)
                except RuntimeError as e:  # NOTE: read-only memory, an inference-mode tensor
                    raise ConversionError(
                        f"refittable=True perturbs each parameter and buffer in place for a second trace (and restores "
                        f"it), and '{path}' cannot be written ({e}); give convert a model whose weights can be"
                    ) from None
        with second.active():
            define()
        if len(second.sinks) != len(log.sinks):
            raise ConversionError(
                f"refittable=True: the network holds {len(log.sinks)} weights with the model's weights and "
                f"{len(second.sinks)} with others: its structure depends on the weights' values, so it cannot be "
                "refitted; convert without refittable=True"
            )
        changed = [k for k, (a, b) in enumerate(zip(firsts, second.sinks, strict=True)) if not _same(a, b.value)]
        for k in changed:
            s = log.sinks[k]
            if s.node is None:
                reads = f" (values read into Python: {', '.join(log.reads[:3])})" if log.reads else ""
                raise ConversionError(
                    f"refittable=True: a weight of '{s.where or '<model>'}' (shape {list(s.value.shape)}) depends on "
                    f"the model's parameters through computations torch2trt-lite cannot record{reads}, so a refit "
                    "would leave it stale; compute it with torch operations on the parameters, or convert without "
                    "refittable=True"
                )
        derived = [log.sinks[k] for k in changed]
        _check_replay(log, derived, {p: t.detach() for p, t in log.sources.items()}, "other weights",
                      [second.sinks[k].value for k in changed])
    finally:
        with torch.no_grad():
            for t, orig in saved.values():
                t.copy_(orig)


def _ptr(a: Any) -> Any:
    ai = getattr(a, "__array_interface__", None)
    return (ai["data"][0], a.size) if ai is not None else ("obj", id(a))


def _name(network: Any, log: WeightLog, derived: list[Sink]) -> dict[str, Any]:
    used: dict[str, int] = {}
    named: dict[Any, str] = {}
    weights: list[dict[str, Any]] = []
    roots: list[int] = []
    for s in derived:
        key = _ptr(s.array)
        if key in named:  # NOTE: the same memory given twice: one weight
            continue
        sources = log.sources_of(s.node)  # type: ignore[arg-type]
        main = next((p for p in sources if tuple(log.sources[p].shape) == tuple(s.value.shape)), sources[0])
        k = used.get(main, 0)
        name = main if k == 0 else f"{main}#{k}"
        if not network.set_weights_name(s.array, name):
            # NOTE: False only where no layer uses them (the name is new): replaced before the network was
            # finished, as a convolution's kernel when its batch norm is folded into it
            continue
        used[main] = k + 1
        named[key] = name
        s.name = name
        roots.append(s.node)  # type: ignore[arg-type]
        weights.append({
            "name": name, "shape": list(s.value.shape), "dtype": _FLOAT_NAMES.get(s.value.dtype, str(s.value.dtype)[6:]),
            "sources": sources, "transform": log.ops(s.node),  # type: ignore[arg-type]
        })
    nodes, new_roots = log.pruned(roots)
    for w, r in zip(weights, new_roots, strict=True):
        w["node"] = r
    srcs = sorted({p for w in weights for p in w["sources"]})
    return {
        "weights": weights,
        "nodes": nodes,
        "sources": {p: {"shape": list(log.sources[p].shape), "dtype": str(log.sources[p].dtype)[6:]} for p in srcs},
        "fingerprint": fingerprint(weights),
    }


def set_builder_flags(config: Any, trt: Any, refittable: bool, strip: bool) -> None:
    """``REFIT`` (``refittable=True``: any weights of the same names, shapes and types), else
    ``REFIT_IDENTICAL`` (``strip_weights=True`` alone: the engine is refitted only with the weights it
    was built with, so TensorRT may optimize for their values); ``STRIP_PLAN`` leaves them out of the plan."""
    config.set_flag(trt.BuilderFlag.REFIT if refittable else trt.BuilderFlag.REFIT_IDENTICAL)
    if strip:
        config.set_flag(trt.BuilderFlag.STRIP_PLAN)


def refused_build(backend: Any, error: BuildError, strip: bool) -> BuildError:
    """A failed refittable / weight-stripped build: where the backend is known not to build these here
    (TensorRT-RTX without a GPU: :func:`torch2trt_lite.backends.refit_build_refusal`), the error says so,
    quotes the builder and says where it works."""
    why = refit_build_refusal(backend)
    if why is None:
        return error
    what = "strip_weights=True" if strip else "refittable=True"
    return BuildError(f"{why}; convert without {what} here. Its builder said: {error}")


__all__ = ["define_refittable", "refused_build", "set_builder_flags"]
