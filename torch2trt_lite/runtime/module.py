"""TRTModule: an ``nn.Module`` that runs a serialized engine (TensorRT or the sim).

Its parts live beside it in the runtime package: ``structure`` (input and output trees),
``loading`` (a plan and its metadata checked and deserialized), ``binding`` (one call: inputs,
profiles, outputs), ``cuda_graph`` (capture and replay), ``state`` (state dicts and pickling).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import Any

import torch

from torch2trt_lite.backends import Backend
from torch2trt_lite.errors import (
    EngineFileError,
    EngineRefitError,
    EngineStateError,
    RuntimeExecutionError,
    Torch2TRTError,
)
from torch2trt_lite.runtime import engine_file
from torch2trt_lite.runtime import refit as _refit
from torch2trt_lite.runtime.binding import check_assertions, check_inputs, execute
from torch2trt_lite.runtime.cuda_graph import check_graph_backend, replay
from torch2trt_lite.runtime.loading import Loaded, prepare
from torch2trt_lite.runtime.state import load_entries, pickled_engine, save_entries, unpickled_engine
from torch2trt_lite.runtime.structure import decode_tree, flatten_args


class TRTModule(torch.nn.Module):
    """Runs an engine. ``forward`` takes the model's tensors and returns its output structure.

    Threading: one TRTModule may be called from several threads at once. Each thread gets its own
    execution context (made on its first call, under a lock; TensorRT's contexts are not shared),
    so concurrent calls never share shapes, addresses or output buffers; the engine and its weights
    are shared. ``load_state_dict`` swaps the engine atomically: a call already running finishes
    with the engine it started with.

    Outputs are plain tensors: the engine runs under ``torch.no_grad()`` (no ``grad_fn``, even for
    inputs that require grad).

    ``cuda_graph=True`` (real TensorRT engines on a GPU): each thread captures its execution in a
    ``torch.cuda.CUDAGraph`` on the first call with CUDA inputs of a given set of shapes and replays
    it on later calls of the same shapes (a call with other shapes captures again). Inputs are copied
    into the graph's static input buffers, the graph is replayed on torch's current stream, and the
    outputs returned are clones of its static output buffers (so a result stays valid after the next
    call). It is captured on a side stream (CUDA cannot capture the legacy default stream), after one
    ordinary run at those shapes. Where a graph cannot be used (the context says the stream is not
    capturable, or an output has a data-dependent shape) it logs a warning and runs without one.
    The sim refuses ``cuda_graph=True`` at construction: it runs eagerly with torch, there is nothing
    to capture.

    Pickling (``torch.save(module)``, ``copy.deepcopy``) keeps only plain data: the plan bytes and
    the metadata; unpickling checks the plan's SHA-256 and deserializes it again.
    """

    def __init__(
        self, plan: bytes | bytearray | memoryview | None = None, meta: dict[str, Any] | None = None, *,
        cuda_graph: bool = False,
    ) -> None:
        super().__init__()
        self._st: Loaded | None = None
        self._tls = threading.local()
        self._ctx_lock = threading.Lock()
        self._cuda_graph = bool(cuda_graph)
        self.conversion_time_s: float | None = None
        self.conversion_stats: dict[str, Any] = {}  # trace_s / build_s / load_s (and cache) of convert()
        if plan is not None:
            if meta is None:
                raise Torch2TRTError("TRTModule(plan, meta): the engine metadata is required")
            check_graph_backend(self._cuda_graph, meta)
            self._install(prepare(plan, meta))

    @property
    def cuda_graph(self) -> bool:
        """Does ``forward`` capture and replay CUDA graphs? (See the class docstring.)"""
        return self._cuda_graph

    # ---------------------------------------------------------------------------- setup
    def _install(self, st: Loaded) -> None:
        """Make ``st`` the engine (its callers refused ``cuda_graph`` on a sim engine before preparing it)."""
        self._st = st
        self._tls.state, self._tls.ctx = st, st.context
        self._tls.graph = None

    # attributes of the current engine, as before (read-only views of the state)
    @property
    def _plan(self) -> bytes | bytearray:
        return self._st.plan if self._st is not None else b""

    @property
    def _meta(self) -> dict[str, Any]:
        return self._st.meta if self._st is not None else {}

    @property
    def _engine(self) -> Any:
        return self._st.engine if self._st is not None else None

    @property
    def _context(self) -> Any:
        return self._st.context if self._st is not None else None

    @property
    def _backend(self) -> Backend | None:
        return self._st.backend if self._st is not None else None

    @property
    def _in(self) -> list[dict[str, Any]]:
        return self._st.inputs if self._st is not None else []

    @property
    def _out(self) -> list[dict[str, Any]]:
        return self._st.outputs if self._st is not None else []

    @property
    def backend(self) -> str:
        return str(self._meta.get("backend", ""))

    @property
    def metadata(self) -> dict[str, Any]:
        return json.loads(json.dumps(self._meta)) if self._meta else {}  # a deep copy

    @property
    def input_names(self) -> list[str]:
        return [i["name"] for i in self._in]

    @property
    def output_names(self) -> list[str]:
        return [o["name"] for o in self._out]

    @property
    def num_layers(self) -> int:
        """Layers of the network as converted (the engine may fuse them into fewer)."""
        if "num_layers" in self._meta:
            return int(self._meta["num_layers"])
        return int(self._engine.num_layers) if self._engine is not None else 0

    @property
    def precision(self) -> dict[str, Any]:
        """The precision settings the engine was converted with: ``precision`` (fp32/fp16/bf16),
        ``source`` (``"precision"`` or ``"autocast"``), ``overrides``, ``io_dtype`` and, for a quantized
        model, ``quantization`` (see :func:`torch2trt_lite.convert`)."""
        from torch2trt_lite.trace.precision import settings

        p = self._meta.get("precision")
        return dict(p) if isinstance(p, dict) else settings(None, None)

    def layer_precisions(self) -> list[tuple[str, str, list[str]]]:
        """(name, layer type, [type of each output]) of every layer of the network as converted
        (TensorRT may fuse them into fewer kernels; strongly typed networks keep these types), e.g.
        ``("layer1.0.conv1/conv2d", "CONVOLUTION", ["HALF"])``. Engines written before this record
        give an empty list."""
        return [(str(n), str(t), [str(d) for d in dts]) for n, t, dts in self._meta.get("layers", [])]

    @property
    def runnable(self) -> bool:
        """Can this engine run here? A real engine built without a GPU cannot (it can be saved)."""
        return self._engine is not None

    @property
    def plan(self) -> memoryview:
        """The serialized plan, read-only (the engine runs from it: a copy is ``bytes(m.plan)``)."""
        return memoryview(self._plan).toreadonly()

    @property
    def plan_sha256(self) -> str:
        """SHA-256 of the plan (as engine files record it)."""
        if self._st is None:
            raise Torch2TRTError("this TRTModule holds no engine")
        return self._st.sha256()

    # -------------------------------------------------------------------------- forward
    def _context_here(self, st: Loaded) -> Any:
        """This thread's execution context of engine ``st`` (made on the thread's first call)."""
        tls = self._tls
        if getattr(tls, "state", None) is st:
            return tls.ctx
        with self._ctx_lock:
            ctx = st.engine.create_execution_context()
        if ctx is None:
            raise RuntimeExecutionError(
                "the backend could not create an execution context for this thread: "
                + ("; ".join(st.log.errors) or "no reason given")
            )
        tls.state, tls.ctx = st, ctx
        return ctx

    def forward(self, *inputs: Any) -> Any:
        st = self._st  # NOTE: one engine for the whole call, even if load_state_dict swaps it meanwhile
        if st is not None and "in_tree" in st.meta:  # structured inputs (tuples, DynamicCaches): their tensors
            inputs = tuple(flatten_args(st.meta["in_tree"], inputs))
        xs = check_inputs(st, inputs)
        assert st is not None
        with torch.no_grad():  # NOTE: outputs are plain tensors (the sim computes with torch ops)
            leaves = None
            if self._cuda_graph and xs and xs[0].device.type == "cuda":
                leaves = replay(self._tls, st, self._context_here(st), xs)
            if leaves is None:
                leaves = execute(st, self._context_here(st), xs)
            if st.assertions:
                check_assertions(st, leaves)
        return decode_tree(st.meta["out_tree"], leaves)

    # ---------------------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike[str], *, weights: bool = True) -> None:
        """Write a standalone engine file (header + plan), atomically.

        A new file gets the mode the umask gives, an existing one keeps its mode; errors are
        :class:`EngineFileError` naming ``path``. ``weights=False`` (a refittable engine): the file
        leaves out the refittable weights (its header says so: ``refit.stripped``), and
        ``torch2trt_lite.load(path, weights=model_or_state_dict)`` supplies them.
        """
        st = self._st
        if st is None or not st.plan:
            raise Torch2TRTError("this TRTModule holds no engine to save")
        stripped = bool((st.meta.get("refit") or {}).get("stripped"))
        if weights and stripped:
            raise EngineRefitError(
                "this engine's plan was built without its weights (strip_weights=True, no GPU here to refit it): "
                "save(path, weights=False)"
            )
        if not weights and not stripped:
            meta = {**st.meta, "refit": {**_refit.record(st.meta), "stripped": True}}
            engine_file.write(path, meta, _refit.stripped_plan(st))
            return
        engine_file.write(path, st.meta, st.plan, plan_sha256=st.sha256())

    def refit(self, weights: Any) -> TRTModule:
        """Replace the engine's weights with those of ``weights`` (a model of the converted architecture,
        or its state dict) without a rebuild; returns ``self``. Every weight computed from the
        parameters is recomputed through its recorded transform (:mod:`torch2trt_lite.runtime.refit`).
        A key, shape or type that does not fit, or an engine converted without ``refittable=True``, is an
        :class:`EngineRefitError`, and the module keeps working with its old weights. The refit is done on
        a copy of the engine, swapped in whole (a call already running finishes with the old weights)."""
        st = self._st
        if st is None:
            raise EngineRefitError("this TRTModule holds no engine to refit")
        self._install(_refit.refitted(st, weights))
        return self

    def export_triton(self, repo: str | os.PathLike[str], name: str, **options: Any) -> str:
        """Write a Triton Inference Server model repository entry ``repo/name`` (``config.pbtxt`` and
        ``1/model.plan``); see :func:`torch2trt_lite.runtime.triton.export_triton` for the options."""
        from torch2trt_lite.runtime.triton import export_triton

        return export_triton(self, repo, name, **options)

    def save_plan(self, path: str | os.PathLike[str]) -> None:
        """Write the bare serialized plan (for trtexec, Triton or C++), atomically."""
        st = self._st
        if st is None or not st.plan:
            raise Torch2TRTError("this TRTModule holds no engine to save")
        engine_file.atomic_write(path, st.plan)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, cuda_graph: bool = False, weights: Any = None) -> TRTModule:
        """An engine file's module; ``weights`` (a model or state dict) refits it (see :meth:`refit`)."""
        meta, plan = engine_file.read(path)  # NOTE: checks the header's schema and the plan's SHA-256
        module = cls(cuda_graph=cuda_graph)
        check_graph_backend(module._cuda_graph, meta)
        module._install(_refit.loaded(plan, meta, weights, os.fspath(path)))
        return module

    # ---------------------------------------------------------------------------- pickling
    _UNPICKLED = ("_st", "_tls", "_ctx_lock")

    def __getstate__(self) -> dict[str, Any]:
        """Plain data only (``torch.save(module)``, ``copy.deepcopy``): the plan bytes and the metadata
        with the plan's SHA-256; nothing of the backend (its objects cannot be pickled)."""
        state = {k: v for k, v in self.__dict__.items() if k not in self._UNPICKLED}
        state["_t2tl_engine"] = pickled_engine(self._st)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        engine = state.pop("_t2tl_engine", None)
        super().__setstate__(state)
        self._st = None
        self._tls = threading.local()
        self._ctx_lock = threading.Lock()
        self._cuda_graph = bool(state.get("_cuda_graph", False))
        st = unpickled_engine(engine, cuda_graph=self._cuda_graph)
        if st is not None:
            self._install(st)

    # ----------------------------------------------------------------------- dtype casts
    def _precision_error(self, what: str) -> Torch2TRTError:
        ins = ", ".join(f"{i['name']}: {i['dtype']}" for i in self._in) or "no engine"
        return Torch2TRTError(
            f"TRTModule{what}: an engine's precision is fixed when it is built ({ins}); a dtype cast cannot "
            "change it. To run in another precision, convert a model of that precision (e.g. "
            "convert(model.half(), [x.half()])), or wait for convert(precision=...). Device moves "
            "(.to(device), .cuda(), .cpu()) are allowed"
        )

    def to(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """Device moves are allowed (they change nothing: the engine stays where it runs); a dtype
        (``.to(torch.float16)``, ``.to(other_tensor)``) raises :class:`Torch2TRTError`."""
        _, dtype, _, _ = torch._C._nn._parse_to(*args, **kwargs)
        if dtype is not None:
            raise self._precision_error(f".to({dtype})")
        return super().to(*args, **kwargs)

    def _apply(self, fn: Callable[[torch.Tensor], Any], recurse: bool = True) -> Any:
        """``nn.Module`` casts (``.half()``, ``.float()``, ``.bfloat16()``, ``.double()``, ``.type()``)
        arrive here as a function: one that changes a probe tensor's dtype is refused."""
        if _casts_dtype(fn):
            raise self._precision_error(" dtype cast (.half(), .float(), .bfloat16(), .double(), .type())")
        return super()._apply(fn, recurse)

    def _save_to_state_dict(self, destination: Any, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        if self._st is not None:
            save_entries(self._st, destination, prefix)

    def _load_from_state_dict(
        self, state_dict: Any, prefix: str, local_metadata: Any, strict: bool, missing_keys: list[str],
        unexpected_keys: list[str], error_msgs: list[str],
    ) -> None:
        own = {"engine", "metadata", *self._parameters, *self._buffers, *self._modules}
        st = load_entries(state_dict, prefix, strict, own, missing_keys, unexpected_keys, error_msgs,
                          cuda_graph=self._cuda_graph)
        if st is not None:
            self._install(st)  # NOTE: all checked and deserialized: the swap cannot fail half-way

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        """As ``nn.Module.load_state_dict``; refusals raise :class:`EngineStateError` (a RuntimeError
        and an :class:`EngineFileError`), and leave the module's engine as it was."""
        try:
            return super().load_state_dict(state_dict, strict=strict, assign=assign)
        except EngineFileError:
            raise
        except RuntimeError as e:  # torch's report of error_msgs / missing / unexpected keys
            raise EngineStateError(str(e)) from None

    def extra_repr(self) -> str:
        if not self._meta:
            return "empty"
        return f"backend={self.backend}, trt={self._meta.get('trt_version')}, inputs={self.input_names}, " \
               f"outputs={self.output_names}, layers={self.num_layers}"


def _casts_dtype(fn: Callable[[torch.Tensor], Any]) -> bool:
    """Does ``fn`` (what nn.Module passes to ``_apply``) change a floating tensor's dtype? Probed on
    one-element CPU tensors of two dtypes; a device move this machine cannot make (``.cuda()`` with
    no GPU) raises, and counts as a move."""
    for probe in (torch.zeros(1), torch.zeros(1, dtype=torch.float16)):
        try:
            out = fn(probe)
        except (RuntimeError, AssertionError, TypeError, ValueError):
            continue
        if isinstance(out, torch.Tensor) and out.dtype != probe.dtype:
            return True
    return False
