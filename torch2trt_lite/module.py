"""TRTModule: an ``nn.Module`` that runs a serialized engine (TensorRT or the sim)."""

from __future__ import annotations

import collections
import functools
import json
import os
from typing import Any

import torch

from . import engine_file
from .backends import Backend, get_backend, sim_backend
from .errors import EngineFileError, RuntimeExecutionError, Torch2TRTError

FORMAT = 1

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
        return {"dict": [[k, encode_tree(obj[k], leaf_index)] for k in keys]}
    raise Torch2TRTError(
        f"model outputs: a {type(obj).__name__} cannot be returned by an engine; return tensors in "
        "tuples, lists or dicts"
    )


@functools.cache
def _namedtuple(name: str, fields: tuple[str, ...]) -> Any:
    """A namedtuple type like the model's (rebuilt from its name and fields; nothing is imported)."""
    try:
        return collections.namedtuple(name, fields)  # type: ignore[misc]
    except (TypeError, ValueError) as e:
        raise EngineFileError(f"engine metadata: invalid output namedtuple {name}{fields}: {e}") from None


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
        return {k: decode_tree(s, leaves) for k, s in spec["dict"]}
    raise EngineFileError(f"engine metadata: unknown output structure node {spec!r}")


class _CapturingLogger:
    """Keeps the last error the backend logged, to put it in our exceptions."""

    def __init__(self, trt: Any) -> None:
        base = trt.ILogger

        class Logger(base):  # type: ignore[misc, valid-type]
            def __init__(self) -> None:
                base.__init__(self)
                self.errors: list[str] = []

            def log(self, severity: Any, msg: str) -> None:
                if int(severity) <= int(trt.ILogger.Severity.ERROR):
                    self.errors.append(str(msg))

        self.logger = Logger()

    @property
    def errors(self) -> list[str]:
        return self.logger.errors  # type: ignore[no-any-return]


def _backend_for(meta: dict[str, Any]) -> Backend:
    name = meta.get("backend")
    if name == "sim":
        api_version = meta.get("api_version")
        try:
            return sim_backend(api_version)
        except Torch2TRTError as e:
            raise EngineFileError(f"engine was built by the sim for TensorRT API {api_version}: {e}") from None
    if name == "tensorrt":
        be = get_backend("tensorrt")
        built = str(meta.get("trt_version", ""))
        if built.split(".")[:2] != be.version.split(".")[:2]:
            raise EngineFileError(
                f"engine was built with TensorRT {built}, this machine has TensorRT {be.version}; TensorRT "
                "engines only load in the version that built them: convert the model again here"
            )
        cap = meta.get("device_capability")
        here = list(torch.cuda.get_device_capability())
        if cap and list(cap) != here:
            raise EngineFileError(
                f"engine was built for a GPU of compute capability {cap}, this GPU is {here}; convert again here"
            )
        return be
    raise EngineFileError(f"engine metadata names an unknown backend {name!r}")


class TRTModule(torch.nn.Module):
    """Runs an engine. ``forward`` takes the model's tensors and returns its output structure."""

    def __init__(self, plan: bytes | bytearray | None = None, meta: dict[str, Any] | None = None) -> None:
        super().__init__()
        self._plan: bytes | bytearray = b""
        self._meta: dict[str, Any] = {}
        self._engine: Any = None
        self._context: Any = None
        self._backend: Backend | None = None
        self.conversion_time_s: float | None = None
        self.conversion_stats: dict[str, float] = {}  # trace_s / build_s / load_s of convert()
        if plan is not None:
            if meta is None:
                raise Torch2TRTError("TRTModule(plan, meta): the engine metadata is required")
            self._setup(plan if isinstance(plan, (bytes, bytearray)) else bytes(plan), meta)

    # ---------------------------------------------------------------------------- setup
    def _setup(self, plan: bytes | bytearray, meta: dict[str, Any]) -> None:
        if meta.get("format") != FORMAT:
            raise EngineFileError(
                f"engine metadata format {meta.get('format')!r} is not supported (expected {FORMAT})"
            )
        backend = _backend_for(meta)
        if backend.name == "tensorrt" and meta.get("plugins"):
            from .plugins.trt_plugin import register_creators

            register_creators(backend.trt)  # plugins must be known before the plan deserializes
        self._log = _CapturingLogger(backend.trt)
        runtime = backend.trt.Runtime(self._log.logger)
        engine = runtime.deserialize_cuda_engine(plan)
        if engine is None:
            raise EngineFileError(
                "the backend could not deserialize the engine: " + ("; ".join(self._log.errors) or "no reason given")
            )
        self._plan, self._meta, self._backend = plan, meta, backend
        self._runtime, self._engine = runtime, engine
        self._context = engine.create_execution_context()
        self._in = meta["inputs"]
        self._out = meta["outputs"]
        self._in_dtypes = [_DTYPES[i["dtype"]] for i in self._in]
        self._out_dtypes = [_DTYPES[o["dtype"]] for o in self._out]
        self._dynamic_out = any(-1 in o["shape"] for o in self._out)

    @property
    def backend(self) -> str:
        return str(self._meta.get("backend", ""))

    @property
    def metadata(self) -> dict[str, Any]:
        return dict(self._meta)

    @property
    def input_names(self) -> list[str]:
        return [i["name"] for i in self._in]

    @property
    def output_names(self) -> list[str]:
        return [o["name"] for o in self._out]

    @property
    def num_layers(self) -> int:
        return int(self._engine.num_layers) if self._engine is not None else 0

    @property
    def plan(self) -> bytes | bytearray:
        return self._plan

    # -------------------------------------------------------------------------- forward
    def _check_inputs(self, inputs: tuple[Any, ...]) -> list[torch.Tensor]:
        if self._engine is None:
            raise RuntimeExecutionError("this TRTModule holds no engine: load one with torch2trt_lite.load")
        if len(inputs) != len(self._in):
            raise RuntimeExecutionError(
                f"expected {len(self._in)} input(s) ({', '.join(self.input_names)}), got {len(inputs)}"
            )
        device = None
        out = []
        for spec, dt, x in zip(self._in, self._in_dtypes, inputs, strict=True):
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
            if self.backend == "tensorrt" and x.device.type != "cuda":
                raise RuntimeExecutionError(f"input '{name}': TensorRT engines take CUDA tensors, got {x.device}")
            lo, hi = spec["min"], spec["max"]
            if x.dim() != len(lo) or not all(a <= d <= b for a, d, b in zip(lo, x.shape, hi, strict=True)):
                rng = tuple(lo) if lo == hi else f"between {tuple(lo)} and {tuple(hi)}"
                raise RuntimeExecutionError(
                    f"input '{name}': shape {tuple(x.shape)} is outside the engine's range {rng}; convert with "
                    "an input of this shape (or a dynamic range that covers it)"
                )
            out.append(x if x.is_contiguous() else x.contiguous())
        return out

    def forward(self, *inputs: Any) -> Any:
        xs = self._check_inputs(inputs)
        be = self._backend
        assert be is not None
        ctx = self._context
        device = xs[0].device if xs else torch.device("cuda" if be.name == "tensorrt" else "cpu")
        self._log.errors.clear()
        for spec, x in zip(self._in, xs, strict=True):
            if not ctx.set_input_shape(spec["name"], tuple(x.shape)):
                raise RuntimeExecutionError(f"input '{spec['name']}': " + "; ".join(self._log.errors))
            ctx.set_tensor_address(spec["name"], be.tensor_address(x))
        outs: list[torch.Tensor | None] = []
        allocators = []
        for spec, dt in zip(self._out, self._out_dtypes, strict=True):
            shape = tuple(ctx.get_tensor_shape(spec["name"]))
            if -1 in shape:
                alloc = _make_allocator(be, device, dt)
                ctx.set_output_allocator(spec["name"], alloc)
                allocators.append(alloc)
                outs.append(None)
                continue
            y = torch.empty(shape, dtype=dt, device=device)
            ctx.set_tensor_address(spec["name"], be.tensor_address(y))
            outs.append(y)
        if not ctx.execute_async_v3(be.stream_handle(device)):
            raise RuntimeExecutionError("engine execution failed: " + ("; ".join(self._log.errors) or "no reason given"))
        it = iter(allocators)
        leaves = [y if y is not None else next(it).result(spec["name"]) for y, spec in zip(outs, self._out, strict=True)]
        return decode_tree(self._meta["out_tree"], leaves)

    # ---------------------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write a standalone engine file (header + plan), atomically."""
        if self._engine is None:
            raise Torch2TRTError("this TRTModule holds no engine to save")
        engine_file.write(path, self._meta, self._plan)

    def save_plan(self, path: str | os.PathLike[str]) -> None:
        """Write the bare serialized plan (for trtexec, Triton or C++), atomically."""
        if self._engine is None:
            raise Torch2TRTError("this TRTModule holds no engine to save")
        engine_file.atomic_write(path, self._plan)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TRTModule:
        meta, plan = engine_file.read(path)
        return cls(plan, meta)

    def _save_to_state_dict(self, destination: Any, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "engine"] = torch.frombuffer(bytearray(self._plan), dtype=torch.uint8)
        destination[prefix + "metadata"] = torch.frombuffer(bytearray(json.dumps(self._meta).encode()), dtype=torch.uint8)

    def _load_from_state_dict(
        self, state_dict: Any, prefix: str, local_metadata: Any, strict: bool, missing_keys: list[str],
        unexpected_keys: list[str], error_msgs: list[str],
    ) -> None:
        eng, meta = state_dict.get(prefix + "engine"), state_dict.get(prefix + "metadata")
        if eng is None or meta is None:
            missing_keys.extend(k for k in (prefix + "engine", prefix + "metadata") if k not in state_dict)
            return
        try:
            meta_d = json.loads(bytes(meta.cpu().numpy().tobytes()).decode())
        except ValueError as e:
            error_msgs.append(f"TRTModule metadata is corrupt: {e}")
            return
        self._setup(bytes(eng.cpu().numpy().tobytes()), meta_d)

    def extra_repr(self) -> str:
        if not self._meta:
            return "empty"
        return f"backend={self.backend}, trt={self._meta.get('trt_version')}, inputs={self.input_names}, " \
               f"outputs={self.output_names}, layers={self.num_layers}"


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
