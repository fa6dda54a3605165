"""Runtime, ICudaEngine, IExecutionContext and IOutputAllocator: executing a sim plan with torch."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import torch

from ..errors import EngineFileError, NetworkDefinitionError, RuntimeExecutionError, Torch2TRTError
from . import _dtypes, _plan
from ._core import DDS_PROBE_SIZES, PROBE_SIZES, Dims, ILayer, RunContext, _log, as_dims, field_property
from ._enums import ENUMS, DataType, Severity, TensorIOMode, TensorLocation

# The largest tensor an engine may compute (bytes). Shape inference checks every tensor against it
# before anything is allocated, so a crafted plan cannot make an execution allocate terabytes.
MAX_TENSOR_BYTES = 1 << 34

# What a malformed plan or a layer given impossible attributes may raise inside the sim; the API
# turns them into TensorRT's contract (None / False, with the reason logged).
FOREIGN_ERRORS = (
    KeyError, TypeError, AttributeError, ValueError, IndexError, RecursionError, ZeroDivisionError,
    OverflowError, RuntimeError, MemoryError, NotImplementedError, AssertionError,
)


def _reason(e: BaseException) -> str:
    return str(e) if isinstance(e, Torch2TRTError) else f"{type(e).__name__}: {e}"


class LayerStep:
    """One layer of the schedule: read inputs from ``env``, run, store outputs."""

    __slots__ = ("layer", "ins", "outs")

    def __init__(self, layer: ILayer, ins: Sequence[int | None], outs: Sequence[int]) -> None:
        self.layer = layer
        self.ins = list(ins)
        self.outs = list(outs)

    def run(self, env: dict[int, Any], rt: RunContext) -> None:
        args = [env[i] if i is not None else None for i in self.ins]
        try:
            res = self.layer._call(args, rt)
        except (NetworkDefinitionError, RuntimeExecutionError):
            raise
        except (RuntimeError, ValueError, IndexError, TypeError) as e:
            raise RuntimeExecutionError(f"layer '{self.layer.name}' failed: {e}") from e
        for o, r in zip(self.outs, res, strict=False):
            env[o] = r


def build_schedule(layers: list[ILayer]) -> list[Any]:
    """The execution schedule: control-flow families may group layers into composite steps.

    A composite step has ``run(env, rt)``, reading and writing tensors by id in ``env``.
    """
    hook = _SCHEDULE_HOOKS[-1] if _SCHEDULE_HOOKS else None
    if hook is not None:
        return hook(layers)  # type: ignore[no-any-return]
    return [LayerStep(layer, *layer._plan_io) for layer in layers]


_SCHEDULE_HOOKS: list[Any] = []


def register_schedule_hook(fn: Any) -> None:
    """Let a layer family (loops, conditionals) build the schedule from the restored layers."""
    _SCHEDULE_HOOKS.append(fn)


class IOutputAllocator:
    """Override ``reallocate_output`` (and ``notify_shape``) to receive data-dependent outputs."""

    def __init__(self) -> None:
        pass


class Runtime:
    _ns: Any = None

    def __init__(self, logger: Any) -> None:
        self._logger = logger
        self.max_threads = 1
        self.DLA_core = -1
        self.engine_host_code_allowed = False
        self.temporary_directory = ""
        self._error_recorder: Any = None

    @property
    def logger(self) -> Any:
        return self._logger

    @property
    def num_DLA_cores(self) -> int:
        return 0

    error_recorder = field_property("_error_recorder")

    def deserialize_cuda_engine(self, serialized_engine: Any) -> Any:
        """The engine of a plan; None, with the reason logged, for anything that is not a valid plan."""
        try:
            header, blob = _plan.parse(serialized_engine)
            # NOTE: the plan this process just built is used in place (its weights are not copied).
            layers = _plan.restore_layers(header, blob, self._ns, zero_copy=_plan.is_trusted(serialized_engine))
            data = serialized_engine if isinstance(serialized_engine, (bytes, bytearray)) else bytes(serialized_engine)
            engine = self._ns._class("ICudaEngine")(header, layers, data, self._logger)
            engine._validate()
        except (Torch2TRTError, *FOREIGN_ERRORS) as e:
            msg = _reason(e)
            if not isinstance(e, EngineFileError):
                msg = f"plan is corrupt or inconsistent: {msg}"
            _log(self._logger, Severity.ERROR, msg[:2000])
            return None
        return engine

    def get_plugin_registry(self) -> Any:
        return self._ns.get_plugin_registry()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        return None

    def __del__(self) -> None:
        return None


class ICudaEngine:
    _ns: Any = None

    def __init__(self, header: dict[str, Any], layers: list[ILayer], data: bytes, logger: Any) -> None:
        self._header = header
        self._layers = layers
        self._data = data
        self._logger = logger
        self._tensors = header["tensors"]
        self._in_ids = [i["tensor"] for i in header["inputs"]]
        self._shape_inputs = {self._tensors[i["tensor"]]["name"] for i in header["inputs"] if i["is_shape"]}
        self._out_ids = list(header["outputs"])
        self._io = [self._tensors[i]["name"] for i in self._in_ids + self._out_ids]
        self._by_name = {self._tensors[i]["name"]: i for i in self._in_ids + self._out_ids}
        self._mode = {self._tensors[i]["name"]: TensorIOMode.INPUT for i in self._in_ids}
        self._mode.update({self._tensors[i]["name"]: TensorIOMode.OUTPUT for i in self._out_ids})
        self._schedule = build_schedule(layers)
        self._has_dds = any(getattr(layer, "_dds", False) for layer in layers)
        # NOTE: free each intermediate after its last reader, like TensorRT's activation memory reuse.
        self._last_use: dict[int, int] = {}
        for k, step in enumerate(self._schedule):
            for i in getattr(step, "ins", []):
                if i is not None:
                    self._last_use[i] = k
        keep = set(self._in_ids) | set(self._out_ids)
        self._free_after: list[list[int]] = [[] for _ in self._schedule]
        for i, k in self._last_use.items():
            if i not in keep:
                self._free_after[k].append(i)
        self.name = header.get("name", "")
        self._shape_cache: dict[Any, dict[str, tuple[int, ...]]] = {}  # shared by its contexts
        # refit (sim/_refit.py): each refittable weight's uses (layer, attribute); bumped by each refit
        # (contexts drop their cached weights); the plan is written again when serialized after a refit
        refit = header.get("refit") or {}
        self._refit_mode: str | None = refit.get("mode") if isinstance(refit, dict) else None
        self._refit_crcs: dict[str, int] = dict(refit.get("weights", {})) if self._refit_mode else {}
        self._named: dict[str, list[tuple[ILayer, str]]] = {}
        for layer in layers:
            for attr, w in layer._a.items():
                name = getattr(w, "_name", None)
                if name in self._refit_crcs:
                    self._named.setdefault(name, []).append((layer, attr))
        self._weights_epoch = 0
        self._refitted = False

    # -- internal
    def _validate(self) -> None:
        """Run shape inference once (static shapes, else profile 0's opt shapes): every tensor must
        be within ``MAX_TENSOR_BYTES`` and the outputs must have their declared types and shapes."""
        if self._shape_inputs:
            return  # NOTE: needs input values; checked at each execution instead
        profiles = self._header["profiles"]
        feeds: dict[int, Any] = {}
        shapes: dict[str, tuple[int, ...]] = {}
        for i in self._in_ids:
            t = self._tensors[i]
            shape = tuple(t["shape"])
            if any(d < 0 for d in shape):
                dims = profiles[0]["shapes"].get(t["name"]) if profiles else None
                if dims is None:
                    raise EngineFileError(f"plan is corrupt: input '{t['name']}' is dynamic but has no profile shapes")
                shape = tuple(dims[1])
            shapes[t["name"]] = shape
            feeds[i] = torch.empty(shape, dtype=_dtypes.torch_dtype(DataType.__members__[t["dtype"]]), device="meta")
            _check_size(feeds[i], i, None)
        rt = RunContext("meta", probe=True)
        env = self._run(feeds, rt)
        out = {}
        for i in self._out_ids:
            t = self._tensors[i]
            y = env.get(i)
            if not isinstance(y, torch.Tensor):
                raise EngineFileError(f"plan is corrupt: output '{t['name']}' is not computed by any layer")
            self._check_output(t, y)
            out[t["name"]] = tuple(y.shape)
        if not self._has_dds:
            self._shape_cache[tuple(sorted(shapes.items()))] = out

    def _check_output(self, t: dict[str, Any], y: torch.Tensor) -> None:
        declared = t["shape"]
        if y.dim() != len(declared) or any(d >= 0 and d != s for d, s in zip(declared, y.shape, strict=True)):
            raise RuntimeExecutionError(
                f"output '{t['name']}' computes shape {tuple(y.shape)}, the engine declares {tuple(declared)}: "
                "the plan is corrupt or inconsistent"
            )
        want = _dtypes.torch_dtype(DataType.__members__[t["dtype"]])
        if y.dtype != want:
            raise RuntimeExecutionError(
                f"output '{t['name']}' computes {y.dtype}, the engine declares {want}: the plan is corrupt or inconsistent"
            )

    def _io_id(self, name: str) -> int:
        if name not in self._by_name:
            raise RuntimeExecutionError(f"engine has no I/O tensor named '{name}'; it has {self._io}")
        return self._by_name[name]

    def _run(self, feeds: dict[int, Any], rt: RunContext) -> dict[int, Any]:
        env: dict[int, Any] = dict(feeds)
        for step, free in zip(self._schedule, self._free_after, strict=True):
            step.run(env, rt)
            if rt.probe:
                for o in getattr(step, "outs", ()):
                    _check_size(env.get(o), o, step)
            for i in free:
                env.pop(i, None)
        return env

    # -- TensorRT API
    @property
    def num_io_tensors(self) -> int:
        return len(self._io)

    @property
    def num_layers(self) -> int:
        return len(self._layers)

    @property
    def num_optimization_profiles(self) -> int:
        return max(1, len(self._header["profiles"]))

    @property
    def refittable(self) -> bool:
        return self._refit_mode is not None

    @property
    def device_memory_size_v2(self) -> int:
        return 0

    @property
    def device_memory_size(self) -> int:
        return 0

    @property
    def has_implicit_batch_dimension(self) -> bool:
        return False

    @property
    def num_aux_streams(self) -> int:
        return 0

    def get_tensor_name(self, index: int) -> str | None:
        return self._io[index] if 0 <= index < len(self._io) else None

    def __getitem__(self, index: int) -> str | None:
        return self.get_tensor_name(index)

    def get_tensor_mode(self, name: str) -> Any:
        return self._mode.get(name, TensorIOMode.NONE)

    def get_tensor_shape(self, name: str) -> Dims:
        return Dims(self._tensors[self._io_id(name)]["shape"])

    def get_tensor_dtype(self, name: str) -> Any:
        return DataType.__members__[self._tensors[self._io_id(name)]["dtype"]]

    def get_tensor_location(self, name: str) -> Any:
        return TensorLocation.HOST if name in self._shape_inputs else TensorLocation.DEVICE

    def is_shape_inference_io(self, name: str) -> bool:
        return name in self._shape_inputs

    def get_tensor_profile_shape(self, name: str, profile_index: int) -> list[Dims]:
        self._io_id(name)
        profiles = self._header["profiles"]
        if not profiles:
            shape = self.get_tensor_shape(name)
            return [shape, shape, shape]
        if not 0 <= profile_index < len(profiles):
            raise RuntimeExecutionError(f"profile index {profile_index} out of range [0, {len(profiles)})")
        shapes = profiles[profile_index]["shapes"].get(name)
        if shapes is None:
            shape = self.get_tensor_shape(name)
            return [shape, shape, shape]
        return [Dims(s) for s in shapes]

    def get_aliased_input_tensor(self, name: str) -> str | None:
        """The input whose buffer output ``name`` must share (a layer with ``_aliased_input``), else None."""
        tid = self._io_id(name)
        for layer in self._layers:
            k = getattr(layer, "_aliased_input", None)
            if k is None:
                continue
            ins, outs = layer._plan_io
            if outs and outs[0] == tid and k < len(ins) and ins[k] in self._in_ids:
                return str(self._tensors[ins[k]]["name"])
        return None

    def get_tensor_profile_values(self, name: str, profile_index: int) -> list[tuple[int, ...]]:
        profiles = self._header["profiles"]
        if not 0 <= profile_index < len(profiles):
            return []
        return [tuple(v) for v in profiles[profile_index]["values"].get(name, [])]

    def get_tensor_bytes_per_component(self, name: str, profile_index: int = 0) -> int:
        return int(self.get_tensor_dtype(name).itemsize)

    def get_tensor_components_per_element(self, name: str, profile_index: int = 0) -> int:
        return 1

    def get_tensor_vectorized_dim(self, name: str, profile_index: int = 0) -> int:
        return -1

    def create_execution_context(
        self, strategy: Any = ENUMS["ExecutionContextAllocationStrategy"].STATIC
    ) -> Any:
        return self._ns._class("IExecutionContext")(self)

    def create_execution_context_without_device_memory(self) -> Any:
        return self.create_execution_context()

    def serialize(self) -> Any:
        if self._refitted:  # NOTE: the plan with the weights of the last refit
            return _plan.reserialize(self._header, self._layers, False, self._ns._class("IHostMemory"))
        return self._ns._class("IHostMemory")(self._data)

    def create_serialization_config(self) -> Any:
        return self._ns._class("ISerializationConfig")()

    def serialize_with_config(self, config: Any) -> Any:
        """The plan; with ``SerializationFlag.EXCLUDE_WEIGHTS`` (a refittable engine) without its
        refittable weights, which a refit must then supply."""
        strip = bool(config.get_flag(ENUMS["SerializationFlag"]["EXCLUDE_WEIGHTS"]))
        if strip and not self.refittable:
            _log(self._logger, Severity.ERROR, "serializeWithConfig: EXCLUDE_WEIGHTS needs an engine built with "
                 "BuilderFlag.REFIT, REFIT_IDENTICAL or REFIT_INDIVIDUAL")
            return None
        if not strip:
            return self.serialize()
        return _plan.reserialize(self._header, self._layers, True, self._ns._class("IHostMemory"))

    def __enter__(self) -> ICudaEngine:
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        return None

    def __del__(self) -> None:
        return None


def _check_size(t: Any, tid: int, step: Any) -> None:
    if isinstance(t, torch.Tensor) and t.numel() * t.element_size() > MAX_TENSOR_BYTES:
        layer = getattr(step, "layer", None)
        where = f"layer '{layer.name}'" if layer is not None else ("an input" if step is None else "a layer")
        raise RuntimeExecutionError(
            f"{where} would make a tensor of shape {tuple(t.shape)} ({t.numel() * t.element_size()} bytes), over the "
            f"sim's limit of {MAX_TENSOR_BYTES} bytes per tensor; the plan is corrupt or the input too large"
        )


def _is_device_pointer(ptr: int) -> bool:
    """Whether ``ptr`` is CUDA device memory (cuda-python when installed, else torch's segments)."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return False
    try:
        from cuda.bindings import runtime as cudart

        err, attrs = cudart.cudaPointerGetAttributes(ptr)
        if int(err) == 0:
            return int(attrs.type) in (2, 3)  # cudaMemoryTypeDevice, cudaMemoryTypeManaged
    except ImportError:
        pass
    for seg in torch.cuda.memory_snapshot():
        if seg["address"] <= ptr < seg["address"] + seg["total_size"]:
            return True
    return False


def _tensor_from_address(address: Any, dtype: torch.dtype, numel: int) -> torch.Tensor:
    """Wrap a raw address: device memory through __cuda_array_interface__, else host memory."""
    ptr = int(address)
    itemsize = torch.empty(0, dtype=dtype).element_size()
    if _is_device_pointer(ptr):

        class _Iface:
            __cuda_array_interface__ = {
                "shape": (numel * itemsize,), "typestr": "|u1", "data": (ptr, False), "version": 3,
            }

        return torch.as_tensor(_Iface(), device="cuda").view(dtype)
    buf = (ctypes.c_uint8 * (numel * itemsize)).from_address(ptr)
    return torch.frombuffer(buf, dtype=dtype, count=numel)


class IExecutionContext:
    _ns: Any = None

    def __init__(self, engine: ICudaEngine) -> None:
        self._engine = engine
        self._shapes: dict[str, tuple[int, ...]] = {}
        self._addresses: dict[str, Any] = {}
        self._allocators: dict[str, Any] = {}
        self._profile = 0
        self._rts: dict[torch.device, RunContext] = {}
        self._last_out_shapes: dict[str, tuple[int, ...]] = {}
        self._shape_cache = engine._shape_cache
        self.name = ""
        self.debug_sync = False
        self.profiler: Any = None
        self.enqueue_emits_profile = True
        self.nvtx_verbosity: Any = None
        self.persistent_cache_limit = 0
        self._error_recorder: Any = None
        for i in engine._in_ids:
            t = engine._tensors[i]
            if all(d >= 0 for d in t["shape"]):
                self._shapes[t["name"]] = tuple(t["shape"])

    @property
    def engine(self) -> ICudaEngine:
        return self._engine

    error_recorder = field_property("_error_recorder")

    @property
    def active_optimization_profile(self) -> int:
        return self._profile

    def set_optimization_profile_async(self, profile_index: int, stream_handle: int) -> bool:
        if not 0 <= profile_index < self._engine.num_optimization_profiles:
            _log(self._engine._logger, Severity.ERROR, f"profile index {profile_index} out of range")
            return False
        self._profile = int(profile_index)
        return True

    def _fail(self, msg: str) -> bool:
        _log(self._engine._logger, Severity.ERROR, msg)
        return False

    def set_input_shape(self, name: str, shape: Any) -> bool:
        eng = self._engine
        if eng.get_tensor_mode(name) != TensorIOMode.INPUT:
            return self._fail(f"set_input_shape: '{name}' is not an input of the engine")
        dims = as_dims(shape, "shape")
        declared = eng.get_tensor_shape(name)
        if len(dims) != len(declared) or any(d >= 0 and d != s for d, s in zip(declared, dims, strict=True)):
            return self._fail(f"set_input_shape: {dims} does not match the engine's shape {tuple(declared)} for '{name}'")
        if eng._header["profiles"]:
            mn, _, mx = eng.get_tensor_profile_shape(name, self._profile)
            if not all(a <= d <= b for a, d, b in zip(mn, dims, mx, strict=True)):
                return self._fail(
                    f"set_input_shape: {dims} for '{name}' is outside optimization profile {self._profile} "
                    f"[min {tuple(mn)}, max {tuple(mx)}]"
                )
        self._shapes[name] = dims
        return True

    @property
    def all_binding_shapes_specified(self) -> bool:
        return all(self._engine._tensors[i]["name"] in self._shapes for i in self._engine._in_ids)

    @property
    def all_shape_inputs_specified(self) -> bool:
        return all(n in self._addresses for n in self._engine._shape_inputs)

    def set_tensor_address(self, name: str, memory: Any) -> bool:
        self._engine._io_id(name)
        self._addresses[name] = memory
        return True

    def get_tensor_address(self, name: str) -> Any:
        mem = self._addresses.get(name, 0)
        return mem.data_ptr() if isinstance(mem, torch.Tensor) else mem

    def set_output_allocator(self, name: str, output_allocator: Any) -> bool:
        self._allocators[name] = output_allocator
        return True

    def get_output_allocator(self, name: str) -> Any:
        return self._allocators.get(name)

    def get_max_output_size(self, name: str) -> int:
        return 0

    # -- shapes
    def _input_tensor(self, name: str, tid: int) -> torch.Tensor:
        eng = self._engine
        dt = _dtypes.torch_dtype(DataType.__members__[eng._tensors[tid]["dtype"]])
        if name not in self._shapes:
            raise RuntimeExecutionError(f"input '{name}' has dynamic dimensions: call set_input_shape first")
        shape = self._shapes[name]
        numel = 1
        for d in shape:
            numel *= d
        mem = self._addresses.get(name)
        if mem is None:
            raise RuntimeExecutionError(f"no address set for input '{name}': call set_tensor_address")
        if isinstance(mem, torch.Tensor):
            if mem.dtype != dt:
                raise RuntimeExecutionError(f"input '{name}': expected dtype {dt}, got a {mem.dtype} tensor")
            if mem.numel() < numel:
                raise RuntimeExecutionError(
                    f"input '{name}': the tensor has {mem.numel()} elements, shape {shape} needs {numel}"
                )
            t = mem if mem.is_contiguous() else mem.contiguous()
            return t.reshape(-1)[:numel].view(shape) if t.numel() != numel or t.shape != shape else t
        if isinstance(mem, (bytes, bytearray, memoryview)):
            return torch.frombuffer(bytearray(mem), dtype=dt, count=numel).view(shape)
        return _tensor_from_address(mem, dt, numel).view(shape)

    def _shape_values(self, name: str, tid: int) -> torch.Tensor:
        return self._input_tensor(name, tid).cpu()

    def _probe_shapes(self) -> dict[str, tuple[int, ...]]:
        eng = self._engine
        key = tuple(sorted(self._shapes.items()))
        values: dict[str, Any] = {}
        for name in eng._shape_inputs:
            if name in self._addresses:
                v = self._shape_values(name, eng._by_name[name])
                values[name] = (tuple(v.shape), tuple(v.reshape(-1).tolist()))  # 0-d shape inputs too
        key = key + tuple(sorted(values.items()))
        hit = self._shape_cache.get(key)
        if hit is not None:
            return hit
        if len(self._shape_cache) >= 256:  # NOTE: bounded (dynamic shapes, shape-input values)
            self._shape_cache.clear()
        results = []
        for k in range(len(DDS_PROBE_SIZES) if eng._has_dds else 1):  # NOTE: every count of a probe differs
            rt = RunContext("meta", probe=True)
            rt.probe_index = k
            feeds: dict[int, Any] = {}
            for i in eng._in_ids:
                t = eng._tensors[i]
                name = t["name"]
                dt = _dtypes.torch_dtype(DataType.__members__[t["dtype"]])
                if name in values:
                    feeds[i] = torch.tensor(values[name][1], dtype=dt).reshape(values[name][0])
                else:
                    if name not in self._shapes:
                        raise RuntimeExecutionError(f"input '{name}': call set_input_shape first")
                    feeds[i] = torch.empty(self._shapes[name], dtype=dt, device="meta")
            if k < 2:
                env = eng._run(feeds, rt)
            else:  # NOTE: soft: a layer failing at a count of 0 or 1 only drops the probe
                try:
                    env = eng._run(feeds, rt)
                except (RuntimeExecutionError, NetworkDefinitionError, RuntimeError, ValueError, IndexError):
                    break
            for i in eng._out_ids:
                y = env.get(i)
                if not isinstance(y, torch.Tensor):
                    raise RuntimeExecutionError(f"output '{eng._tensors[i]['name']}' is not computed by any layer")
                if not eng._has_dds:
                    eng._check_output(eng._tensors[i], y)
            results.append({eng._tensors[i]["name"]: tuple(env[i].shape) for i in eng._out_ids})
        out = results[0]
        if len(results) > 1:
            out = {
                n: tuple(a if all(r[n][j] == a for r in results[1:] if len(r[n]) == len(s)) else -1
                         for j, a in enumerate(s))
                for n, s in out.items()
            }
        self._shape_cache[key] = out
        return out

    def get_tensor_shape(self, name: str) -> Dims:
        eng = self._engine
        if eng.get_tensor_mode(name) == TensorIOMode.INPUT:
            if name in self._shapes:
                return Dims(self._shapes[name])
            return eng.get_tensor_shape(name)
        try:
            return Dims(self._probe_shapes()[name])
        except (RuntimeExecutionError, NetworkDefinitionError) as e:
            _log(eng._logger, Severity.ERROR, f"get_tensor_shape('{name}'): {e}")
            return Dims([-1] * len(eng.get_tensor_shape(name)))

    def infer_shapes(self) -> list[str]:
        try:
            self._probe_shapes()
        except (RuntimeExecutionError, NetworkDefinitionError):
            return [n for n in self._engine._io if n not in self._shapes]
        return []

    # -- execution
    def _rt(self, device: torch.device) -> RunContext:
        rt = self._rts.get(device)
        epoch = self._engine._weights_epoch
        if rt is None or getattr(rt, "_weights_epoch", 0) != epoch:  # NOTE: a refit drops cached weights
            rt = self._rts[device] = RunContext(device)
            rt._weights_epoch = epoch  # type: ignore[attr-defined]
        return rt

    def _execute(self) -> None:
        eng = self._engine
        expected = self._probe_shapes()  # NOTE: sizes are checked before anything is allocated
        feeds: dict[int, Any] = {}
        device: torch.device | None = None
        for i in eng._in_ids:
            name = eng._tensors[i]["name"]
            t = self._input_tensor(name, i)
            feeds[i] = t
            if device is None and name not in eng._shape_inputs:
                device = t.device
        if device is None:
            device = torch.device("cpu")
        for i in eng._in_ids:
            if eng._tensors[i]["name"] in eng._shape_inputs:
                feeds[i] = feeds[i].cpu()
        rt = self._rt(device)
        rt.inputs = {}
        env = eng._run(feeds, rt)
        for i in eng._out_ids:
            name = eng._tensors[i]["name"]
            out = env[i]
            eng._check_output(eng._tensors[i], out)
            self._last_out_shapes[name] = tuple(out.shape)
            self._write_output(name, out, expected.get(name))

    def _write_output(self, name: str, out: torch.Tensor, expected: tuple[int, ...] | None = None) -> None:
        alloc = self._allocators.get(name)
        nbytes = out.numel() * out.element_size()
        if alloc is not None:
            mem = alloc.reallocate_output(name, self._addresses.get(name, 0), nbytes, 256)
            if hasattr(alloc, "notify_shape"):
                alloc.notify_shape(name, Dims(out.shape))
            if mem is None or (isinstance(mem, int) and mem == 0 and nbytes > 0):
                raise RuntimeExecutionError(f"output allocator for '{name}' returned no memory")
            self._addresses[name] = mem
            expected = tuple(out.shape)  # the allocator was asked for exactly these bytes
        mem = self._addresses.get(name)
        if mem is None:
            raise RuntimeExecutionError(f"no address set for output '{name}': call set_tensor_address")
        if nbytes == 0:  # an empty output (e.g. NonZero found nothing): nothing to copy
            return
        if isinstance(mem, torch.Tensor):
            if mem.numel() * mem.element_size() < nbytes:
                raise RuntimeExecutionError(
                    f"output '{name}' needs {nbytes} bytes (shape {tuple(out.shape)}), the tensor holds "
                    f"{mem.numel() * mem.element_size()}"
                )
            flat = mem.view(-1) if mem.is_contiguous() else None
            if flat is None:
                raise RuntimeExecutionError(f"output '{name}': the destination tensor must be contiguous")
            if flat.dtype != out.dtype:
                flat = flat.view(torch.uint8)[:nbytes].view(out.dtype)
            flat[: out.numel()].copy_(out.reshape(-1))
            return
        if isinstance(mem, (bytes, bytearray, memoryview)):
            raise RuntimeExecutionError(f"output '{name}': the destination must be a tensor or an address, not {type(mem).__name__}")
        # NOTE: a raw address holds what get_tensor_shape() said: never write more than that.
        if expected is None or -1 in expected or tuple(out.shape) != tuple(expected):
            raise RuntimeExecutionError(
                f"output '{name}' has shape {tuple(out.shape)}, but its buffer (a raw address) was sized for "
                f"{expected}: refusing to write past it; use an output allocator for data-dependent shapes"
            )
        dst = _tensor_from_address(mem, out.dtype, out.numel())
        dst.copy_(out.reshape(-1).to(dst.device))

    def execute_async_v3(self, stream_handle: int) -> bool:
        try:
            self._execute()
        except (Torch2TRTError, *FOREIGN_ERRORS) as e:
            _log(self._engine._logger, Severity.ERROR, _reason(e)[:2000])
            return False
        return True

    def execute_v2(self, bindings: Sequence[Any]) -> bool:
        for name, mem in zip(self._engine._io, bindings, strict=False):
            self._addresses[name] = mem
        return self.execute_async_v3(0)

    def __enter__(self) -> IExecutionContext:
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        return None

    def __del__(self) -> None:
        return None


__all__ = ["ICudaEngine", "IExecutionContext", "IOutputAllocator", "LayerStep", "PROBE_SIZES", "Runtime"]
