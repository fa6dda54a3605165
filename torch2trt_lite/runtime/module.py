"""TRTModule: an ``nn.Module`` that runs a serialized engine (TensorRT or the sim)."""

from __future__ import annotations

import collections
import functools
import hashlib
import json
import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import torch

from torch2trt_lite.backends import REAL_BACKENDS, Backend, CapturingLogger, real_backend, sim_backend
from torch2trt_lite.errors import (
    BackendUnavailableError,
    EngineFileError,
    RuntimeExecutionError,
    Torch2TRTError,
)
from torch2trt_lite.runtime import engine_file

FORMAT = 1

log = logging.getLogger("torch2trt_lite")

_DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int8": torch.int8,
    "int32": torch.int32, "int64": torch.int64, "bool": torch.bool, "uint8": torch.uint8,
}


def dtype_name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


# ------------------------------------------------------------------------ output structure
def encode_tree(obj: Any, leaf_index: list[int]) -> Any:
    """JSON description of the model's output structure; tensors become leaf indices."""
    if isinstance(obj, torch.Tensor):
        leaf_index[0] += 1
        return {"t": leaf_index[0] - 1}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"c": obj}
    if isinstance(obj, tuple):
        items = [encode_tree(x, leaf_index) for x in obj]
        cls = type(obj)
        if cls.__module__ == "torch.return_types" and getattr(torch.return_types, cls.__name__, None) is cls:
            return {"tuple": items, "return_type": cls.__name__}  # torch.max(x, 0) -> (values, indices)
        fields = getattr(cls, "_fields", None)
        if isinstance(fields, tuple) and all(isinstance(f, str) for f in fields):  # a namedtuple
            return {"tuple": items, "namedtuple": cls.__name__, "fields": list(fields)}
        return {"tuple": items}
    if isinstance(obj, list):
        return {"list": [encode_tree(x, leaf_index) for x in obj]}
    if isinstance(obj, dict):
        keys = list(obj)
        if not all(isinstance(k, (str, int)) for k in keys):
            raise Torch2TRTError("model outputs: dict keys must be str or int to be stored in an engine")
        node: dict[str, Any] = {"dict": [[k, encode_tree(obj[k], leaf_index)] for k in keys]}
        dcls = type(obj)
        if is_transformers_class(dcls, "ModelOutput"):
            # NOTE: rebuilt on decode by module and qualname, only from modules already imported
            node["model_output"] = {"module": dcls.__module__, "qualname": dcls.__qualname__}
        return node
    if is_transformers_class(type(obj), "Cache"):
        pairs = cache_layers(obj, "model outputs")
        return {"cache": CACHE_KIND, "layers": [[encode_tree(k, leaf_index), encode_tree(v, leaf_index)] for k, v in pairs]}
    raise Torch2TRTError(
        f"model outputs: a {type(obj).__name__} cannot be returned by an engine; return tensors in "
        "tuples, lists or dicts"
    )


# A transformers key/value cache in a model's inputs or outputs: one (key, value) pair of tensors
# [batch, heads, length, head_dim] per layer, which are engine inputs / outputs of their own.
CACHE_KIND = "DynamicCache"


def cache_layers(cache: Any, where: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The (key, value) tensors of each layer of a transformers ``DynamicCache`` (layers of full
    attention); any other cache is refused, saying what is supported."""
    cls = type(cache)
    if cls.__name__ != CACHE_KIND or not is_transformers_class(cls, "Cache"):
        raise Torch2TRTError(
            f"{where}: a transformers {cls.__name__} is not supported; only a DynamicCache (keys and values that "
            "grow by one step per call) can be an engine input or output. Use transformers.DynamicCache"
        )
    if getattr(cache, "offloading", False):
        raise Torch2TRTError(f"{where}: a DynamicCache with offloading=True is not supported (the engine holds no state)")
    layers = list(getattr(cache, "layers", None) or [])
    if not layers:
        raise Torch2TRTError(
            f"{where}: the DynamicCache is empty (no layer holds keys and values yet); an engine input needs tensors: "
            "pass the cache of a previous step (or None / no cache for the first step)"
        )
    out = []
    for i, layer in enumerate(layers):
        k, v = getattr(layer, "keys", None), getattr(layer, "values", None)
        if type(layer).__name__ != "DynamicLayer" or not getattr(layer, "is_initialized", False) or not (
            isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor) and k.dim() == 4 and v.dim() == 4
        ):
            raise Torch2TRTError(
                f"{where}: layer {i} of the DynamicCache is a {type(layer).__name__} "
                f"{'holding ' + str(tuple(k.shape)) + ' keys' if isinstance(k, torch.Tensor) else 'without keys'}; "
                "only full-attention DynamicLayer layers holding 4D keys and values [batch, heads, length, head_dim] "
                "are supported (no sliding-window or empty layers)"
            )
        out.append((k, v))
    return out


def _make_cache(pairs: list[tuple[Any, Any]]) -> Any:
    """A transformers DynamicCache whose layers hold exactly these tensors (not copies), else, when
    transformers is not imported, the (key, value) pairs as a tuple (with a warning once)."""
    utils = sys.modules.get("transformers.cache_utils")
    cls, layer_cls = getattr(utils, CACHE_KIND, None), getattr(utils, "DynamicLayer", None)
    if not (isinstance(cls, type) and isinstance(layer_cls, type)):
        if ("transformers", CACHE_KIND) not in _WARNED:
            _WARNED.add(("transformers", CACHE_KIND))
            log.warning("engine output DynamicCache is returned as a tuple of (key, value) pairs: transformers is "
                        "not imported; import it before running the engine to get the DynamicCache back")
        return tuple((k, v) for k, v in pairs)
    cache = cls(ddp_cache_data=[(None, None)] * len(pairs))  # one empty DynamicLayer per pair
    for entry, (k, v) in zip(cache.layers, pairs, strict=True):
        entry.lazy_initialization(k, v)
        entry.keys, entry.values = k, v
    return cache


def tensor_leaves(obj: Any) -> list[torch.Tensor]:
    """The tensors of a model's inputs or outputs in :func:`encode_tree`'s order (tuples, lists,
    dicts, namedtuples, ModelOutputs and DynamicCaches; other objects hold none)."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for x in obj for t in tensor_leaves(x)]
    if isinstance(obj, dict):
        return [t for x in obj.values() for t in tensor_leaves(x)]
    if is_transformers_class(type(obj), "Cache"):
        return [t for pair in cache_layers(obj, "model outputs") for t in pair]
    return []


def flatten_args(spec: Any, args: Any, where: str = "inputs") -> list[Any]:
    """The engine's input tensors from a call's arguments structured as the engine's ``in_tree``
    (tensors, tuples and lists of them, DynamicCaches); a mismatch is a RuntimeExecutionError naming
    where it is."""
    if "t" in spec:
        return [args]
    if "tuple" in spec or "list" in spec:
        items = spec.get("tuple", spec.get("list"))
        if not isinstance(args, (tuple, list)) or is_transformers_class(type(args), "Cache"):
            raise RuntimeExecutionError(
                f"{where}: expected a {'tuple' if 'tuple' in spec else 'list'} of {len(items)} as when converted, "
                f"got {type(args).__name__}"
            )
        if len(args) != len(items):
            raise RuntimeExecutionError(f"{where}: expected {len(items)} entries as when converted, got {len(args)}")
        return [t for k, (s, a) in enumerate(zip(items, args, strict=True)) for t in flatten_args(s, a, f"{where}[{k}]")]
    if "cache" in spec:
        if not is_transformers_class(type(args), "Cache"):
            raise RuntimeExecutionError(f"{where}: expected a transformers DynamicCache as when converted, got "
                                        f"{type(args).__name__}")
        try:
            pairs = cache_layers(args, where)
        except Torch2TRTError as e:
            raise RuntimeExecutionError(str(e)) from None
        if len(pairs) != len(spec["layers"]):
            raise RuntimeExecutionError(
                f"{where}: the DynamicCache has {len(pairs)} layers, the engine was converted with {len(spec['layers'])}"
            )
        return [t for pair in pairs for t in pair]
    raise EngineFileError(f"engine metadata: unknown input structure node {spec!r}")


def is_transformers_class(cls: type, base: str) -> bool:
    """Is ``cls`` a subclass of transformers' class named ``base`` (``ModelOutput``, ``Cache``)? Checked
    by walking the MRO, so transformers is never imported for it."""
    return any(
        c.__name__ == base and str(getattr(c, "__module__", "")).startswith("transformers") for c in cls.__mro__
    )


_WARNED: set[tuple[str, str]] = set()


def _model_output_class(module: str, qualname: str) -> type | None:
    """The ModelOutput subclass ``module.qualname`` if that module is imported already, else None.

    Nothing is imported: a name read from an engine file only selects among loaded classes."""
    obj: Any = sys.modules.get(module)
    for part in qualname.split("."):
        if obj is None or not part.isidentifier():
            return None
        obj = getattr(obj, part, None)
    if isinstance(obj, type) and issubclass(obj, dict) and is_transformers_class(obj, "ModelOutput"):
        return obj
    return None


def _model_output(spec: dict[str, Any], items: dict[Any, Any]) -> Any:
    """The model's ModelOutput rebuilt from its class name and ``items`` (in order), else ``items``."""
    module, qualname = str(spec.get("module", "")), str(spec.get("qualname", ""))
    cls = _model_output_class(module, qualname)
    why = f"its module {module!r} is not imported" if module not in sys.modules else "it is not a ModelOutput class"
    if cls is not None:
        try:
            out = cls(**items)
        except (TypeError, ValueError) as e:
            out, why = None, f"it refused the outputs ({type(e).__name__}: {e})"
        if out is not None and list(out.keys()) == list(items):
            return out
        if out is not None:
            why = "it would reorder or drop outputs"
    if (module, qualname) not in _WARNED:
        _WARNED.add((module, qualname))
        log.warning(
            "engine output %s.%s is returned as a plain dict (same keys, same order): %s; import it "
            "(e.g. import transformers) before running the engine to get the class back", module, qualname, why,
        )
    return items


@functools.lru_cache(maxsize=256)
def _namedtuple(name: str, fields: tuple[str, ...]) -> Any:
    """A namedtuple type like the model's (rebuilt from its name and fields; nothing is imported)."""
    try:
        return collections.namedtuple(name, fields)  # type: ignore[misc]
    except (TypeError, ValueError) as e:
        raise EngineFileError(f"engine metadata: invalid output namedtuple {name}{fields}: {e}") from None


def _check_assertions(st: Any, leaves: list[torch.Tensor]) -> None:
    """Raise when a runtime check of the model (``torch._assert`` on values, ``torch._check_tensor_all``)
    failed in this run: its engine output is False."""
    for k, message in st.assertions:
        if not bool(leaves[k].all()):
            raise RuntimeExecutionError(
                f"a check in the model failed on these inputs: {message} (the engine evaluated it as its output "
                f"{st.outputs[k]['name']!r}; PyTorch checked it only on the traced inputs)"
            )


def decode_tree(spec: Any, leaves: list[torch.Tensor]) -> Any:
    if "t" in spec:
        return leaves[spec["t"]]
    if "c" in spec:
        return spec["c"]
    if "tuple" in spec:
        items = tuple(decode_tree(s, leaves) for s in spec["tuple"])
        if "return_type" in spec:
            cls = getattr(torch.return_types, str(spec["return_type"]), None)
            if not isinstance(cls, type) or not issubclass(cls, tuple):
                raise EngineFileError(f"engine metadata: unknown torch.return_types.{spec['return_type']}")
            return cls(items)
        if "namedtuple" in spec:
            return _namedtuple(str(spec["namedtuple"]), tuple(spec["fields"]))(*items)
        return items
    if "list" in spec:
        return [decode_tree(s, leaves) for s in spec["list"]]
    if "dict" in spec:
        fields = {k: decode_tree(s, leaves) for k, s in spec["dict"]}
        if "model_output" in spec:
            return _model_output(spec["model_output"], fields)
        return fields
    if "cache" in spec:
        return _make_cache([(decode_tree(k, leaves), decode_tree(v, leaves)) for k, v in spec["layers"]])
    raise EngineFileError(f"engine metadata: unknown output structure node {spec!r}")


def _backend_for(meta: dict[str, Any]) -> Backend:
    name = meta.get("backend")
    if name == "sim":
        api_version = meta.get("api_version")
        try:
            return sim_backend(api_version)
        except Torch2TRTError as e:
            raise EngineFileError(f"engine was built by the sim for TensorRT API {api_version}: {e}") from None
    if name in REAL_BACKENDS:
        label = "TensorRT-RTX" if name == "tensorrt-rtx" else "TensorRT"
        try:
            be = real_backend(str(name))
        except BackendUnavailableError as e:
            raise EngineFileError(f"engine was built by {label} {meta.get('trt_version')}: {e}") from None
        built = str(meta.get("trt_version", ""))
        if built.split(".")[:2] != be.version.split(".")[:2]:
            raise EngineFileError(
                f"engine was built with {label} {built}, this machine has {label} {be.version}; {label} "
                "engines only load in the version that built them: convert the model again here"
            )
        cap = meta.get("device_capability")
        if name == "tensorrt" and cap and torch.cuda.is_available():
            here = list(torch.cuda.get_device_capability())
            if list(cap) != here:
                raise EngineFileError(
                    f"engine was built for a GPU of compute capability {cap}, this GPU is {here}; convert again here"
                )
        return be
    raise EngineFileError(f"engine metadata names an unknown backend {name!r}")


_FOREIGN = (
    KeyError, TypeError, AttributeError, ValueError, IndexError, RecursionError, ZeroDivisionError,
    OverflowError, RuntimeError, MemoryError,
)


class _Loaded:
    """One engine as a TRTModule holds it: swapped in whole (``load_state_dict`` is atomic)."""

    def __init__(self, plan: bytes | bytearray, meta: dict[str, Any], backend: Backend, log: CapturingLogger,
                 runtime: Any, engine: Any, context: Any, sha256: str | None) -> None:
        self.plan, self.meta, self.backend, self.log = plan, meta, backend, log
        self.runtime, self.engine, self.context = runtime, engine, context
        self.inputs: list[dict[str, Any]] = meta["inputs"]
        self.outputs: list[dict[str, Any]] = meta["outputs"]
        self.in_dtypes = [_DTYPES[i["dtype"]] for i in self.inputs]
        self.out_dtypes = [_DTYPES[o["dtype"]] for o in self.outputs]
        # (output index, message) of the model's runtime checks (converters/assertions.py)
        self.assertions = [(k, str(o["assert"])) for k, o in enumerate(self.outputs) if "assert" in o]
        self._sha256 = sha256
        self._sha_lock = threading.Lock()
        # host copies of shape inputs, per (thread, input name): alive while TensorRT may read them
        self.host_inputs: dict[tuple[int, str], torch.Tensor] = {}

    def sha256(self) -> str:
        """The plan's SHA-256 (computed once, when first needed)."""
        with self._sha_lock:
            if self._sha256 is None:
                self._sha256 = hashlib.sha256(self.plan).hexdigest()
            return self._sha256


def _prepare(plan: Any, meta: Any, verified: bool = False, source: str = "TRTModule") -> _Loaded:
    """Validate ``meta``, check the plan against it and deserialize; changes nothing on failure."""
    if not isinstance(plan, (bytes, bytearray)):
        try:
            plan = bytes(plan)
        except TypeError:
            raise Torch2TRTError(f"TRTModule(plan, meta): the plan must be bytes-like, got {type(plan).__name__}") from None
    engine_file.validate_meta(meta, source)
    if meta.get("format") != FORMAT:
        raise EngineFileError(f"engine metadata format {meta.get('format')!r} is not supported (expected {FORMAT})")
    sha = meta.get("plan_sha256")
    if sha is not None and not verified:
        got = hashlib.sha256(plan).hexdigest()
        if got != sha:
            size = f" ({len(plan)} bytes, the metadata says {meta['plan_nbytes']})" if meta.get("plan_nbytes", len(plan)) != len(plan) else ""
            raise EngineFileError(
                f"{source}: plan checksum mismatch{size}: the metadata's plan_sha256 is {sha[:16]}..., the plan "
                f"hashes to {got[:16]}...; the plan is corrupt or belongs to other metadata"
            )
    backend = _backend_for(meta)
    log = CapturingLogger(backend.trt)
    runtime = engine = context = None
    if backend.can_run():
        if backend.name == "tensorrt" and meta.get("plugins"):
            from torch2trt_lite.plugins.trt_plugin import register_creators

            register_creators(backend.trt)  # plugins must be known before the plan deserializes
        runtime = backend.trt.Runtime(log.logger)
        try:
            engine = runtime.deserialize_cuda_engine(plan)
        except _FOREIGN as e:  # NOTE: the sim returns None instead; a backend bug must not escape as such
            log.errors.append(f"{type(e).__name__}: {e}")
            engine = None
        if engine is None:
            raise EngineFileError(
                "the backend could not deserialize the engine: " + ("; ".join(log.errors) or "no reason given")
            )
        context = engine.create_execution_context()
        if context is None:
            raise EngineFileError(
                "the backend could not create an execution context: " + ("; ".join(log.errors) or "no reason given")
            )
        _check_engine_io(engine, meta)
    # NOTE: with no GPU a real engine is kept as its plan: it can be saved and described, not run.
    return _Loaded(plan, meta, backend, log, runtime, engine, context, sha)


def _check_engine_io(engine: Any, meta: dict[str, Any]) -> None:
    """The metadata's inputs and outputs must be the engine's (else forward would fail later)."""
    names = [engine.get_tensor_name(i) for i in range(int(engine.num_io_tensors))]
    want = [i["name"] for i in meta["inputs"]] + [o["name"] for o in meta["outputs"]]
    missing = [n for n in want if n not in names]
    if missing:
        raise EngineFileError(
            f"engine metadata names I/O tensors {missing} that the engine does not have (it has {names}); the "
            "metadata belongs to another engine"
        )


class EngineStateError(EngineFileError, RuntimeError):
    """``load_state_dict`` refused a state dict (a RuntimeError too, as torch's own errors are)."""


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
        self._st: _Loaded | None = None
        self._tls = threading.local()
        self._ctx_lock = threading.Lock()
        self._cuda_graph = bool(cuda_graph)
        self.conversion_time_s: float | None = None
        self.conversion_stats: dict[str, Any] = {}  # trace_s / build_s / load_s (and cache) of convert()
        if plan is not None:
            if meta is None:
                raise Torch2TRTError("TRTModule(plan, meta): the engine metadata is required")
            self._check_graph_backend(meta)
            self._install(_prepare(plan, meta))

    @property
    def cuda_graph(self) -> bool:
        """Does ``forward`` capture and replay CUDA graphs? (See the class docstring.)"""
        return self._cuda_graph

    def _check_graph_backend(self, meta: Any) -> None:
        if self._cuda_graph and isinstance(meta, dict) and meta.get("backend") == "sim":
            raise Torch2TRTError(
                "cuda_graph=True: CUDA graphs need a real TensorRT backend on a GPU; this engine was built "
                "by the sim, which runs eagerly with torch (nothing to capture). Convert with "
                "backend='tensorrt' (or 'tensorrt-rtx') on a GPU machine, or leave cuda_graph off"
            )

    # ---------------------------------------------------------------------------- setup
    def _install(self, st: _Loaded) -> None:
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
    def _check_inputs(self, st: _Loaded | None, inputs: tuple[Any, ...]) -> list[torch.Tensor]:
        if st is None or st.engine is None:
            if st is not None and st.plan:
                be = st.backend
                targets = st.meta.get("compute_capabilities")
                built_for = f" (built for {', '.join(targets)})" if isinstance(targets, list) and targets else ""
                raise BackendUnavailableError(
                    f"this engine was built by {be.label}{built_for} and needs a supported NVIDIA GPU to run; "
                    "this machine has none (torch.cuda.is_available() is False). It can still be written with "
                    "save() or save_plan() and run on a GPU machine (torch2trt_lite.load, trtexec, Triton)"
                )
            raise RuntimeExecutionError("this TRTModule holds no engine: load one with torch2trt_lite.load")
        if len(inputs) != len(st.inputs):
            raise RuntimeExecutionError(
                f"expected {len(st.inputs)} input(s) ({', '.join(i['name'] for i in st.inputs)}), got {len(inputs)}"
            )
        device = None
        out = []
        real = st.backend.is_real
        for spec, dt, x in zip(st.inputs, st.in_dtypes, inputs, strict=True):
            name = spec["name"]
            if not isinstance(x, torch.Tensor):
                raise RuntimeExecutionError(f"input '{name}': expected a torch.Tensor, got {type(x).__name__}")
            if x.dtype != dt:
                raise RuntimeExecutionError(
                    f"input '{name}': expected dtype {dt}, got {x.dtype}; convert with .to({dt})"
                )
            if device is None:
                device = x.device
            elif x.device != device:
                raise RuntimeExecutionError(f"inputs are on different devices: {device} and {x.device}")
            if real and x.device.type != "cuda":
                raise RuntimeExecutionError(
                    f"input '{name}': TensorRT engines take CUDA tensors, got {x.device}; move it with .cuda()"
                )
            lo, hi = spec["min"], spec["max"]
            if "profiles" not in st.meta and (  # NOTE: with profiles, checked against each of them below
                x.dim() != len(lo) or not all(a <= d <= b for a, d, b in zip(lo, x.shape, hi, strict=True))
            ):
                rng = tuple(lo) if lo == hi else f"between {tuple(lo)} and {tuple(hi)}"
                raise RuntimeExecutionError(
                    f"input '{name}': shape {tuple(x.shape)} is outside the engine's range {rng}; convert with "
                    "an input of this shape (or a dynamic range that covers it)"
                )
            out.append(x if x.is_contiguous() else x.contiguous())
        if "profiles" in st.meta and _profile_for(st, out) is None:
            shapes = ", ".join(f"{i['name']} {tuple(x.shape)}" for i, x in zip(st.inputs, out, strict=True))
            raise RuntimeExecutionError(
                f"input shapes {shapes} are outside every optimization profile of the engine: "
                + "; ".join(f"profile {k}: {_ranges_text(p)}" for k, p in enumerate(st.meta["profiles"]))
                + ". Call it with shapes within one profile, or convert with a range that covers them"
            )
        return out

    def _context_here(self, st: _Loaded) -> Any:
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
        xs = self._check_inputs(st, inputs)
        assert st is not None
        with torch.no_grad():  # NOTE: outputs are plain tensors (the sim computes with torch ops)
            leaves = None
            if self._cuda_graph and xs and xs[0].device.type == "cuda":
                leaves = self._run_graph(st, xs)
            if leaves is None:
                leaves = self._execute(st, self._context_here(st), xs)
            if st.assertions:
                _check_assertions(st, leaves)
        return decode_tree(st.meta["out_tree"], leaves)

    @staticmethod
    def _bind(
        st: _Loaded, ctx: Any, xs: list[torch.Tensor], device: torch.device,
    ) -> tuple[list[torch.Tensor | None], list[Any]]:
        """Set the input shapes and addresses, allocate the outputs of static shape (output allocators
        for the others: their entries are None)."""
        be = st.backend
        errors = st.log.errors
        errors.clear()
        if "profiles" in st.meta:
            k = _profile_for(st, xs)
            if k is None:
                raise RuntimeExecutionError("the input shapes are outside every optimization profile of the engine")
            if int(getattr(ctx, "active_optimization_profile", 0)) != k:
                if not ctx.set_optimization_profile_async(k, be.stream_handle(device)):
                    raise RuntimeExecutionError(
                        f"selecting optimization profile {k} failed: " + ("; ".join(errors) or "no reason given")
                    )
        for spec, x in zip(st.inputs, xs, strict=True):
            if not ctx.set_input_shape(spec["name"], tuple(x.shape)):
                raise RuntimeExecutionError(f"input '{spec['name']}': " + "; ".join(errors))
            if "values" in spec:  # a shape input: TensorRT reads its values on the host
                x = st.host_inputs[threading.get_ident(), spec["name"]] = _shape_input(spec, x)
            ctx.set_tensor_address(spec["name"], be.tensor_address(x))
        outs: list[torch.Tensor | None] = []
        allocators = []
        for spec, dt in zip(st.outputs, st.out_dtypes, strict=True):
            shape = tuple(ctx.get_tensor_shape(spec["name"]))
            if -1 in shape:
                alloc = _make_allocator(be, device, dt)
                ctx.set_output_allocator(spec["name"], alloc)
                allocators.append(alloc)
                outs.append(None)
                continue
            try:
                y = torch.empty(shape, dtype=dt, device=device)
            except (RuntimeError, MemoryError, ValueError) as e:
                raise RuntimeExecutionError(
                    f"output '{spec['name']}': cannot allocate shape {shape} ({type(e).__name__}: {e})"
                ) from None
            ctx.set_tensor_address(spec["name"], be.tensor_address(y))
            outs.append(y)
        return outs, allocators

    def _execute(self, st: _Loaded, ctx: Any, xs: list[torch.Tensor]) -> list[torch.Tensor]:
        be = st.backend
        device = xs[0].device if xs else torch.device("cuda" if be.is_real else "cpu")
        outs, allocators = self._bind(st, ctx, xs, device)
        if not ctx.execute_async_v3(be.stream_handle(device)):
            raise RuntimeExecutionError("engine execution failed: " + ("; ".join(st.log.errors) or "no reason given"))
        it = iter(allocators)
        return [y if y is not None else next(it).result(spec["name"]) for y, spec in zip(outs, st.outputs, strict=True)]

    # --------------------------------------------------------------------------- CUDA graphs
    def _run_graph(self, st: _Loaded, xs: list[torch.Tensor]) -> list[torch.Tensor] | None:
        """Replay this thread's CUDA graph for these input shapes (capturing it first when needed);
        None when no graph can be used (the caller then runs the engine as usual)."""
        ctx = self._context_here(st)
        key = tuple((tuple(x.shape), str(x.device)) for x in xs)
        g: _Graph | None = getattr(self._tls, "graph", None)
        if g is None or g.state is not st or g.key != key:
            g = self._tls.graph = _capture(st, ctx, xs, key)
        elif g.graph is not None:
            for buf, x in zip(g.inputs, xs, strict=True):
                buf.copy_(x)
        if g.graph is None:
            return None
        g.graph.replay()  # NOTE: on torch's current stream
        return [y.clone() for y in g.outputs]

    # ---------------------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write a standalone engine file (header + plan), atomically.

        A new file gets the mode the umask gives, an existing one keeps its mode; errors are
        :class:`EngineFileError` naming ``path``.
        """
        st = self._st
        if st is None or not st.plan:
            raise Torch2TRTError("this TRTModule holds no engine to save")
        engine_file.write(path, st.meta, st.plan, plan_sha256=st.sha256())

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
    def load(cls, path: str | os.PathLike[str], *, cuda_graph: bool = False) -> TRTModule:
        meta, plan = engine_file.read(path)  # NOTE: checks the header's schema and the plan's SHA-256
        module = cls(cuda_graph=cuda_graph)
        module._check_graph_backend(meta)
        module._install(_prepare(plan, meta, verified=True, source=os.fspath(path)))
        return module

    # ---------------------------------------------------------------------------- pickling
    _UNPICKLED = ("_st", "_tls", "_ctx_lock")

    def __getstate__(self) -> dict[str, Any]:
        """Plain data only (``torch.save(module)``, ``copy.deepcopy``): the plan bytes and the metadata
        with the plan's SHA-256; nothing of the backend (its objects cannot be pickled)."""
        state = {k: v for k, v in self.__dict__.items() if k not in self._UNPICKLED}
        st = self._st
        state["_t2tl_engine"] = None if st is None or not st.plan else {
            "plan": bytes(st.plan),
            "meta": json.loads(json.dumps(dict(st.meta, plan_nbytes=len(st.plan), plan_sha256=st.sha256()))),
        }
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        engine = state.pop("_t2tl_engine", None)
        super().__setstate__(state)
        self._st = None
        self._tls = threading.local()
        self._ctx_lock = threading.Lock()
        self._cuda_graph = bool(state.get("_cuda_graph", False))
        if engine is not None:
            if not (isinstance(engine, dict) and isinstance(engine.get("plan"), (bytes, bytearray))):
                raise EngineFileError("unpickling a TRTModule: the pickled engine is not plan bytes and metadata")
            self._check_graph_backend(engine.get("meta"))
            self._install(_prepare(engine["plan"], engine.get("meta"), source="unpickled TRTModule"))

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
        st = self._st
        if st is None:
            return
        meta = dict(st.meta, plan_nbytes=len(st.plan), plan_sha256=st.sha256())
        destination[prefix + "engine"] = torch.frombuffer(bytearray(st.plan), dtype=torch.uint8)
        destination[prefix + "metadata"] = torch.frombuffer(bytearray(json.dumps(meta).encode()), dtype=torch.uint8)

    def _load_from_state_dict(
        self, state_dict: Any, prefix: str, local_metadata: Any, strict: bool, missing_keys: list[str],
        unexpected_keys: list[str], error_msgs: list[str],
    ) -> None:
        ek, mk = prefix + "engine", prefix + "metadata"
        if strict:
            own = {"engine", "metadata", *self._parameters, *self._buffers, *self._modules}
            unexpected_keys.extend(
                k for k in state_dict if k.startswith(prefix) and k[len(prefix):].split(".", 1)[0] not in own
            )
        if ek not in state_dict and mk not in state_dict:
            missing_keys.extend((ek, mk))
            return
        missing = [k for k in (ek, mk) if k not in state_dict]
        if missing:
            missing_keys.extend(missing)
            error_msgs.append(f"TRTModule: the state dict has only one of {ek!r} and {mk!r}; both are needed")
            return
        try:
            plan = _state_bytes(state_dict[ek], ek)
            raw = _state_bytes(state_dict[mk], mk)
            try:
                meta_d = json.loads(raw.decode())
            except RecursionError:
                raise EngineFileError(f"{mk!r} is corrupt (nested too deeply)") from None
            except ValueError as e:
                raise EngineFileError(f"{mk!r} is not JSON ({e})") from None
            self._check_graph_backend(meta_d)
            st = _prepare(plan, meta_d, source=f"state dict {prefix or '<root>'}")
        except Torch2TRTError as e:
            error_msgs.append(f"TRTModule: {e}; the module keeps the engine it had")
            return
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


def _shape_input(spec: dict[str, Any], x: torch.Tensor) -> torch.Tensor:
    """The host copy of shape input ``x`` (its values compute sizes), checked against the range its
    optimization profile was built for."""
    host = x.detach().to("cpu").contiguous()
    lo, hi = spec["values"]["min"], spec["values"]["max"]
    flat = host.reshape(-1).tolist()
    bad = [i for i, v in enumerate(flat) if not lo[i] <= v <= hi[i]]
    if bad:
        i = bad[0]
        raise RuntimeExecutionError(
            f"input '{spec['name']}': value {flat[i]} at {i} is outside [{lo[i]}, {hi[i]}], the range of values the "
            "engine was built for (its values compute sizes: convert with an Input whose low/high cover it)"
        )
    return host


def _profile_for(st: _Loaded, xs: list[torch.Tensor]) -> int | None:
    """The index of the first optimization profile whose ranges cover the shapes of ``xs``."""
    for k, prof in enumerate(st.meta["profiles"]):
        if all(
            x.dim() == len(prof[i["name"]]["min"]) and all(
                a <= d <= b for a, d, b in zip(prof[i["name"]]["min"], x.shape, prof[i["name"]]["max"], strict=True)
            )
            for i, x in zip(st.inputs, xs, strict=True)
        ):
            return k
    return None


def _ranges_text(prof: dict[str, Any]) -> str:
    return ", ".join(f"{n} {tuple(r['min'])}..{tuple(r['max'])}" for n, r in prof.items())


class _Graph:
    """One thread's CUDA graph of one engine at one set of input shapes (``graph`` None: not usable)."""

    def __init__(self, state: _Loaded, key: Any, graph: Any, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
        self.state, self.key, self.graph, self.inputs, self.outputs = state, key, graph, inputs, outputs


def _capture(st: _Loaded, ctx: Any, xs: list[torch.Tensor], key: Any) -> _Graph:
    """Capture ``ctx``'s execution at the shapes of ``xs`` with static input and output buffers."""
    device = xs[0].device
    static_in = [x.clone() for x in xs]
    outs, allocators = TRTModule._bind(st, ctx, static_in, device)
    if allocators:
        names = [o["name"] for o, y in zip(st.outputs, outs, strict=True) if y is None]
        log.warning("cuda_graph: outputs %s have data-dependent shapes, which a CUDA graph cannot replay; "
                    "running without a graph", names)
        return _Graph(st, key, None, [], [])
    static_out = [y for y in outs if y is not None]
    stream = torch.cuda.Stream(device)  # NOTE: a side stream: CUDA cannot capture the legacy default stream
    capturable = getattr(ctx, "is_stream_capturable", None)  # TensorRT-RTX: some engines cannot be captured
    if capturable is not None and not capturable(int(stream.cuda_stream)):
        log.warning("cuda_graph: the execution context says the stream is not capturable (TensorRT-RTX "
                    "is_stream_capturable is False); running without a CUDA graph")
        return _Graph(st, key, None, [], [])
    current = torch.cuda.current_stream(device)
    stream.wait_stream(current)
    errors = st.log.errors
    with torch.cuda.stream(stream):  # NOTE: one ordinary run first: TensorRT's lazy setup stays out of the graph
        if not ctx.execute_async_v3(int(stream.cuda_stream)):
            raise RuntimeExecutionError("engine execution failed: " + ("; ".join(errors) or "no reason given"))
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, stream=stream):
            ok = ctx.execute_async_v3(int(stream.cuda_stream))
    except RuntimeError as e:  # CUDA refused the capture (an operation that cannot be captured)
        current.wait_stream(stream)
        log.warning("cuda_graph: capturing the engine failed (%s); running without a CUDA graph", e)
        return _Graph(st, key, None, [], [])
    if not ok:
        raise RuntimeExecutionError(
            "capturing the engine in a CUDA graph failed: " + ("; ".join(errors) or "no reason given")
            + "; run with cuda_graph=False"
        )
    current.wait_stream(stream)
    return _Graph(st, key, graph, static_in, static_out)


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


def _state_bytes(t: Any, key: str) -> bytes:
    if not isinstance(t, torch.Tensor) or t.dtype != torch.uint8 or t.dim() != 1:
        what = f"a {t.dtype} tensor of shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
        raise EngineFileError(f"{key!r} must be a 1-D uint8 tensor (as state_dict() writes it), got {what}")
    return bytes(t.detach().cpu().contiguous().numpy().tobytes())


def _make_allocator(be: Backend, device: torch.device, dtype: torch.dtype) -> Any:
    base = be.trt.IOutputAllocator
    sim = be.name == "sim"

    class _Allocator(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            base.__init__(self)
            self.buffers: dict[str, torch.Tensor] = {}
            self.shapes: dict[str, tuple[int, ...]] = {}

        def reallocate_output(self, tensor_name: str, memory: Any, size: int, alignment: int) -> Any:
            buf = torch.empty(max(int(size), 1), dtype=torch.uint8, device=device)
            self.buffers[tensor_name] = buf
            return buf if sim else buf.data_ptr()

        def reallocate_output_async(self, tensor_name: str, memory: Any, size: int, alignment: int, stream: int) -> Any:
            return self.reallocate_output(tensor_name, memory, size, alignment)

        def notify_shape(self, tensor_name: str, shape: Any) -> None:
            self.shapes[tensor_name] = tuple(shape)

        def result(self, name: str) -> torch.Tensor:
            shape = self.shapes[name]
            n = 1
            for d in shape:
                n *= d
            itemsize = torch.empty(0, dtype=dtype).element_size()
            return self.buffers[name][: n * itemsize].view(dtype).view(shape)

    return _Allocator()
