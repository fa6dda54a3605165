"""Preparing an engine: metadata and plan checked against each other, the plan deserialized.

:func:`prepare` checks everything before it returns, and changes nothing on failure: a TRTModule
swaps the :class:`Loaded` engine it returns in whole (construction, ``load``, ``load_state_dict``,
unpickling).
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import torch

from torch2trt_lite.backends import (
    REAL_BACKENDS,
    Backend,
    CapturingLogger,
    real_backend,
    sim_backend,
    torch_dtype,
)
from torch2trt_lite.errors import BackendUnavailableError, EngineFileError, Torch2TRTError
from torch2trt_lite.runtime import engine_file
from torch2trt_lite.runtime.structure import DTYPES, dtype_name

FORMAT = 1  # the engine metadata's "format"


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


class Loaded:
    """One engine as a TRTModule holds it: swapped in whole (``load_state_dict`` is atomic)."""

    def __init__(self, plan: bytes | bytearray, meta: dict[str, Any], backend: Backend, log: CapturingLogger,
                 runtime: Any, engine: Any, context: Any, sha256: str | None) -> None:
        self.plan, self.meta, self.backend, self.log = plan, meta, backend, log
        self.runtime, self.engine, self.context = runtime, engine, context
        self.inputs: list[dict[str, Any]] = meta["inputs"]
        self.outputs: list[dict[str, Any]] = meta["outputs"]
        self.in_dtypes = [DTYPES[i["dtype"]] for i in self.inputs]
        self.out_dtypes = [DTYPES[o["dtype"]] for o in self.outputs]
        # (output index, message) of the model's runtime checks (converters/assertions.py)
        self.assertions = [(k, str(o["assert"])) for k, o in enumerate(self.outputs) if "assert" in o]
        # groups of (input index, dim, input name) traced at the same size: equal on every call (binding.py)
        index = {i["name"]: k for k, i in enumerate(self.inputs)}
        self.equal_dims = [[(index[n], int(d), str(n)) for n, d in g["dims"]] for g in meta.get("equal_dims", ())]
        self._sha256 = sha256
        self._sha_lock = threading.Lock()
        self.allocated: dict[int, set[str]] = {}  # id(execution context) -> outputs given an output allocator
        # host copies of shape inputs, per (thread, input name): alive while TensorRT may read them
        self.host_inputs: dict[tuple[int, str], torch.Tensor] = {}

    def sha256(self) -> str:
        """The plan's SHA-256 (computed once, when first needed)."""
        with self._sha_lock:
            if self._sha256 is None:
                self._sha256 = hashlib.sha256(self.plan).hexdigest()
            return self._sha256


def prepare(plan: Any, meta: Any, verified: bool = False, source: str = "TRTModule") -> Loaded:
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
        if meta.get("plugins"):
            from torch2trt_lite.plugins import prepare_backend

            prepare_backend(backend.trt, backend.name)  # plugins must be known before the plan deserializes
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
        _check_engine_io(engine, meta, backend.trt)
    # NOTE: with no GPU a real engine is kept as its plan: it can be saved and described, not run.
    return Loaded(plan, meta, backend, log, runtime, engine, context, sha)


def _check_engine_io(engine: Any, meta: dict[str, Any], trt: Any) -> None:
    """The metadata's inputs and outputs must be the engine's: the same names, each an input or an
    output as the engine declares it, of its dtype and its rank, with the engine's static dims (else
    forward would fail later, or return the engine's values as another dtype or structure)."""
    names = [engine.get_tensor_name(i) for i in range(int(engine.num_io_tensors))]
    want = [i["name"] for i in meta["inputs"]] + [o["name"] for o in meta["outputs"]]
    missing = [n for n in want if n not in names]
    if missing:
        raise EngineFileError(
            f"engine metadata names I/O tensors {missing} that the engine does not have (it has {names}); the "
            "metadata belongs to another engine"
        )
    extra = [n for n in names if n not in want]
    if extra:
        raise EngineFileError(
            f"the engine has I/O tensors {extra} that its metadata does not name (it names {want}); the metadata "
            "belongs to another engine or is corrupt"
        )
    for key, mode in (("inputs", trt.TensorIOMode.INPUT), ("outputs", trt.TensorIOMode.OUTPUT)):
        for k, spec in enumerate(meta[key]):
            name = spec["name"]
            where = f"engine metadata {key}[{k}] ({name!r})"
            if engine.get_tensor_mode(name) != mode:
                raise EngineFileError(f"{where}: the engine has it as an {'output' if key == 'inputs' else 'input'}; "
                                      "the metadata is corrupt or belongs to another engine")
            dt = dtype_name(torch_dtype(engine.get_tensor_dtype(name)))
            if spec["dtype"] != dt:
                raise EngineFileError(f"{where}: dtype {spec['dtype']}, but the engine's is {dt}; the metadata is "
                                      "corrupt or belongs to another engine")
            shape = [int(d) for d in engine.get_tensor_shape(name)]
            if key == "inputs":  # a static dim of the engine: the input's range is that one size
                got = f"range {spec['min']} to {spec['max']}"
                ok = len(spec["min"]) == len(shape) and all(
                    e == -1 or lo == hi == e for lo, hi, e in zip(spec["min"], spec["max"], shape, strict=True))
            else:  # a dim static on one side only: the engine's static size where the network's was -1
                got = f"shape {spec['shape']}"
                ok = len(spec["shape"]) == len(shape) and all(
                    -1 in (m, e) or m == e for m, e in zip(spec["shape"], shape, strict=True))
            if not ok:
                raise EngineFileError(f"{where}: {got} does not fit the engine's shape {shape} (-1: dynamic); the "
                                      "metadata is corrupt or belongs to another engine")
