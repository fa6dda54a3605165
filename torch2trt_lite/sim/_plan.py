"""The sim's serialized plan: a versioned, checksummed container that loads without running code.

Layout (format version 2)::

    b"T2TLSIMP"  magic (8 bytes)
    u32          container format version
    u64          length of the JSON header (with 0..63 trailing spaces, see build)
    JSON header  network description (layers, tensors, profiles); weights refer to blobs
    blobs        raw little-endian weight bytes at 64-byte aligned offsets, then zero padding
    u32          CRC-32 (zlib) of everything above

Version 1 plans (the same, with a 32-byte SHA-256 trailer instead of the CRC-32) still load. The
checksum guards against truncation and corruption; building hashes every weight byte once, and
CRC-32 does that at about twice the speed of SHA-256, in pieces on several threads (``_crc``). (Engine files written by ``TRTModule.save``
carry a SHA-256 of the whole plan in their own header as well.)

Nothing in it is pickled: values are JSON (ints, floats, strings, lists), enum members by name,
weights as (dtype, shape, offset, nbytes) into the blob area.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import struct
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from torch2trt_lite import _buffers

from ..errors import BuildError, EngineFileError, NetworkDefinitionError
from . import _dtypes
from ._core import DeferredWeights, ILayer, ITensor, RunContext, Weights
from ._crc import crc32
from ._enums import ENUMS, DataType, _TrtEnum

MAGIC = b"T2TLSIMP"
FORMAT_VERSION = 2
_HEAD = struct.Struct("<8sIQ")
_CRC = struct.Struct("<I")
_TRAILER = {1: 32, 2: _CRC.size}  # format version -> checksum bytes at the end (v1: SHA-256, v2: CRC-32)

LAYER_CLASSES: dict[str, type[ILayer]] = {}


def _layer_classes() -> dict[str, type[ILayer]]:
    if not LAYER_CLASSES:
        todo = list(ILayer.__subclasses__())
        while todo:
            cls = todo.pop()
            todo.extend(cls.__subclasses__())
            if not getattr(cls, "_versioned", False):
                LAYER_CLASSES.setdefault(cls.__name__, cls)
    return LAYER_CLASSES


# ------------------------------------------------------------------------------- encoding
_ALIGN = 64  # blob offsets are aligned so a loaded plan's weights are zero-copy views


class _Blobs:
    """The weights of a plan: (offset, uint8 view) pairs at ``_ALIGN``-aligned offsets (no copies)."""

    def __init__(self, refit: Any = None) -> None:
        self.parts: list[tuple[int, torch.Tensor | DeferredWeights]] = []
        self.size = 0
        self.refit: _RefitPlan | None = refit  # named (refittable) weights: recorded, or left out (STRIP_PLAN)

    def add(self, t: torch.Tensor) -> tuple[int, int]:
        t = t.detach().contiguous().cpu()
        if t.numel() == 0:
            return self.size, 0
        return self._place(t.reshape(-1).view(torch.uint8), t.numel() * t.element_size())

    def add_deferred(self, w: DeferredWeights) -> tuple[int, int]:
        """Weights computed straight into the plan buffer when it is written."""
        return self._place(w, w.nbytes)

    def _place(self, part: torch.Tensor | DeferredWeights, n: int) -> tuple[int, int]:
        if n == 0:
            return self.size, 0
        off = self.size + (-self.size % _ALIGN)
        self.parts.append((off, part))
        self.size = off + n
        return off, n


_PLAIN = frozenset({type(None), bool, int, float, str})


def encode_value(v: Any, blobs: _Blobs) -> Any:
    if type(v) in _PLAIN:  # NOTE: exact types: enum members are ints too
        return v
    if isinstance(v, _TrtEnum):
        return {"__e__": f"{type(v).__qualname__}.{v.name}"}
    name = getattr(v, "_name", None) if isinstance(v, Weights) else None
    if name is not None and blobs.refit is not None and blobs.refit.takes(name):
        return blobs.refit.encode(v, name, blobs)
    if isinstance(v, DeferredWeights) and v._cached is None:
        off, n = blobs.add_deferred(v)
        return {"__w__": [off, n], "dtype": v.dtype.name, "shape": list(v._shape())}
    if isinstance(v, Weights):
        off, n = blobs.add(v._tensor())
        return {"__w__": [off, n], "dtype": v.dtype.name, "shape": list(v._tensor().shape)}
    if isinstance(v, torch.Tensor):
        off, n = blobs.add(v)
        return {"__t__": [off, n], "dtype": _dtypes.from_torch(v.dtype).name, "shape": list(v.shape)}
    if isinstance(v, np.ndarray):
        return encode_value(torch.from_numpy(np.ascontiguousarray(v)), blobs)
    if isinstance(v, tuple):
        return {"__d__": [encode_value(x, blobs) for x in v]}
    if isinstance(v, list):
        return [encode_value(x, blobs) for x in v]
    if isinstance(v, dict):
        return {"__m__": {str(k): encode_value(x, blobs) for k, x in v.items()}}
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (np.integer, np.floating, np.bool_)):
        return v.item()
    raise BuildError(f"cannot serialize a value of type {type(v).__name__}")


def decode_value(v: Any, blob: torch.Tensor) -> Any:
    if isinstance(v, dict):
        if "__e__" in v:
            ref = v["__e__"]
            enum_name, _, member = ref.rpartition(".") if isinstance(ref, str) else ("", "", "")
            members = ENUMS.get(enum_name)
            if members is None or member not in members.__members__:
                raise EngineFileError(f"plan is corrupt: unknown enum value {str(ref)[:80]!r}")
            return members[member]
        if "__s__" in v:  # a weight left out of the plan (STRIP_PLAN / EXCLUDE_WEIGHTS): refit supplies it
            if not (isinstance(v["__s__"], str) and _dtype_name(v.get("dtype")) and _shape_ok(v.get("shape"), 0)):
                raise EngineFileError("plan is corrupt: a stripped weight record is malformed")
            return StrippedWeights(v["__s__"], DataType.__members__[v["dtype"]], tuple(v["shape"]))
        if "__w__" in v or "__t__" in v:
            pos = v.get("__w__") or v.get("__t__")
            shape: Any = v.get("shape")
            if not (isinstance(pos, list) and len(pos) == 2 and all(_int(x) for x in pos)
                    and _dtype_name(v.get("dtype")) and _shape_ok(shape, 0)):
                raise EngineFileError("plan is corrupt: a weight record is malformed")
            off, n = pos
            dt = DataType.__members__[v["dtype"]]
            tdt = _dtypes.torch_dtype(dt)
            if off < 0 or n < 0 or off + n > len(blob) or (n and off % _ALIGN):
                raise EngineFileError("plan is corrupt: a weight blob lies outside the file")
            itemsize = torch.empty(0, dtype=tdt).element_size()
            numel = 1
            for d in shape:
                numel *= d
            if n % itemsize or n // itemsize != numel:
                raise EngineFileError(
                    f"plan is corrupt: a weight of shape {shape} and type {dt.name} cannot be {n} bytes"
                )
            t = blob[off : off + n].view(tdt) if n else torch.empty(0, dtype=tdt)
            t = t.reshape(shape)
            if "__t__" in v:
                return t
            w = Weights.__new__(Weights)  # NOTE: t is already a contiguous CPU tensor of the right type
            w._t, w._dtype = t, dt
            if isinstance(v.get("name"), str):
                w._name = v["name"]
            return w
        if "__d__" in v:
            if not isinstance(v["__d__"], list):
                raise EngineFileError("plan is corrupt: a tuple value is not a list")
            return tuple(decode_value(x, blob) for x in v["__d__"])
        if "__m__" in v:
            if not isinstance(v["__m__"], dict):
                raise EngineFileError("plan is corrupt: a mapping value is not an object")
            return {k: decode_value(x, blob) for k, x in v["__m__"].items()}
        raise EngineFileError(f"plan is corrupt: unknown value encoding {sorted(v)[:5]}")
    if isinstance(v, list):
        return [decode_value(x, blob) for x in v]
    return v


# ---------------------------------------------------------------------------------- build
def _assertion_inputs(network: Any) -> list[Any]:
    """The network inputs an IAssertionLayer's condition is computed from, not through an IShapeLayer.

    TensorRT evaluates an assertion's condition as a shape tensor, and every tensor a shape tensor is
    computed from (up to the IShapeLayer that reads an execution tensor's dims) is a shape tensor too:
    a condition on the values of a network input makes that input a shape input."""
    found: list[Any] = []
    seen: set[int] = set()
    todo = [layer._inputs[0] for layer in network._layers if layer._layer_type == "ASSERTION" and layer._inputs]
    while todo:
        t = todo.pop()
        if t is None or id(t) in seen:
            continue
        seen.add(id(t))
        producer = t._producer
        if producer is None:
            if t in network._inputs:
                found.append(t)
            continue
        if producer._layer_type == "SHAPE":
            continue
        todo.extend(producer._inputs)
    return found


def _validate(network: Any, config: Any) -> None:
    if not network._outputs:
        raise BuildError("network has no outputs: call mark_output on at least one tensor")
    for t in _assertion_inputs(network):
        if t.dtype not in (DataType.INT32, DataType.INT64):
            # NOTE: TensorRT-RTX 1.7's words for the same network
            raise BuildError(
                f"Input shape tensor {t.name} has type {t.dtype.name.capitalize()} but input shape tensors must "
                "have type INT32 or INT64 (an IAssertionLayer's condition is a shape tensor: it is computed from "
                f"'{t.name}''s values)"
            )
        if not config._profiles or any(t.name not in p._values for p in config._profiles):
            raise BuildError(
                f"Network has dynamic or shape inputs, but no optimization profile sets the values of shape input "
                f"'{t.name}' (an IAssertionLayer's condition is computed from its values)"
            )
    profiles = config._profiles
    names = [t.name for t in network._inputs] + [t.name for t in network._outputs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise BuildError(f"network input/output names must be unique; duplicated: {sorted(dup)}")
    for t in network._inputs:
        shape = t.shape
        needs_profile = any(d < 0 for d in shape) or t.is_shape_tensor
        if needs_profile and not profiles:
            raise BuildError(
                f"input '{t.name}' has dynamic dimensions {tuple(shape)} or is a shape tensor, but no "
                "optimization profile was added to the builder config"
            )
        for i, p in enumerate(profiles):
            if any(d < 0 for d in shape):
                if t.name not in p._shapes:
                    raise BuildError(f"optimization profile {i} does not set a shape for input '{t.name}'")
                for dims in p._shapes[t.name]:
                    if len(dims) != len(shape) or any(s >= 0 and s != d for s, d in zip(shape, dims, strict=True)):
                        raise BuildError(
                            f"optimization profile {i}: shape {dims} of input '{t.name}' does not match "
                            f"the network's declared shape {tuple(shape)}"
                        )
            if t.is_shape_tensor and t.name not in p._values:
                raise BuildError(f"optimization profile {i} does not set values for shape input '{t.name}'")
    for t in network._outputs:
        t.shape  # noqa: B018 - runs shape inference of everything the outputs depend on
    for layer in network._layers:
        if getattr(layer, "_output_is_network_output", False) and not any(
            o is t for o in layer._outputs for t in network._outputs
        ):
            raise BuildError(f"layer '{layer.name}': its output must be a network output (mark_output it)")


def build(network: Any, config: Any, api_version: str, alloc: Any = bytearray, phases: Any = None) -> Any:
    """Serialize ``network``; ``alloc(n)`` makes the n-byte writable output buffer (IHostMemory).

    ``phases`` (the builder's ``_Phases``) reports progress to the config's progress monitor: a top
    phase "Building engine" of three steps (validation, the layers, serialization), each with its
    own phase ("Validating network", "Processing layers": a step per layer, "Serializing engine")."""
    if phases is None:
        return _build(network, config, api_version, alloc, _NoPhases())
    top = "Building engine"
    with phases.phase(top, 3):
        return _build(network, config, api_version, alloc, phases, top)


class _NoPhases:
    @contextlib.contextmanager
    def phase(self, name: str, num_steps: int) -> Iterator[None]:
        yield

    def step(self, name: str, step: int) -> None:
        return None


def _build(network: Any, config: Any, api_version: str, alloc: Any, phases: Any, top: str = "") -> Any:
    with phases.phase("Validating network", 1):
        _validate(network, config)
        phases.step("Validating network", 0)
    phases.step(top, 0)
    layers: list[ILayer] = list(network._layers)
    ids: dict[int, int] = {}
    tensors: list[dict[str, Any]] = []

    def tid(t: ITensor | None) -> int | None:
        if t is None:
            return None
        key = id(t)
        if key not in ids:
            info = t._info()
            ids[key] = len(tensors)
            tensors.append({"name": t.name, "dtype": info.dtype.name, "shape": list(info.shape)})
        return ids[key]

    for t in network._inputs:
        tid(t)
    blobs = _Blobs(_RefitPlan.of(network, config))
    step_layers = "Processing layers"
    with phases.phase(step_layers, len(layers)):
        recs = _records(layers, blobs, tid, phases, step_layers)
    phases.step(top, 1)
    with phases.phase("Serializing engine", 1):
        out = _serialize(network, config, api_version, alloc, tensors, ids, tid, recs, blobs)
        phases.step("Serializing engine", 0)
    phases.step(top, 2)
    return out


def _records(layers: list[ILayer], blobs: _Blobs, tid: Any, phases: Any, phase: str) -> list[dict[str, Any]]:
    recs = []
    for i, layer in enumerate(layers):
        try:
            rec = {
                "cls": type(layer).__name__,
                "name": layer.name,
                "attrs": {k: encode_value(v, blobs) for k, v in layer._a.items()},
                "inputs": [tid(t) for t in layer._inputs],
                "outputs": [tid(t) for t in layer._outputs],
                "output_types": {str(k): v.name for k, v in layer._output_types.items()},
                "extra": encode_value(layer._extra_state(), blobs),
            }
        except NetworkDefinitionError as e:
            raise BuildError(f"layer '{layer.name}': {e}") from None
        recs.append(rec)
        phases.step(phase, i)
    return recs


def _serialize(
    network: Any, config: Any, api_version: str, alloc: Any, tensors: list[dict[str, Any]], ids: dict[int, int],
    tid: Any, recs: list[dict[str, Any]], blobs: _Blobs,
) -> Any:
    header = {
        "api_version": api_version,
        "strongly_typed": network._strongly_typed,
        "name": network.name,
        "tensors": tensors,
        "inputs": [
            {"tensor": ids[id(t)], "is_shape": bool(t.is_shape_tensor)} for t in network._inputs
        ],
        "outputs": [ids[id(t)] if id(t) in ids else tid(t) for t in network._outputs],
        "profiles": [
            {
                "shapes": {k: [list(d) for d in v] for k, v in p._shapes.items()},
                "values": {k: [list(d) for d in v] for k, v in p._values.items()},
            }
            for p in config._profiles
        ],
        "layers": recs,
    }
    if blobs.refit is not None:
        header["refit"] = blobs.refit.header()
    return _pack(header, blobs, alloc)


def reserialize(header: dict[str, Any], layers: list[ILayer], strip: bool, alloc: Any = bytearray) -> Any:
    """The plan of a deserialized engine again, with its layers' current weights (after a refit);
    ``strip``: its refittable weights left out (``SerializationFlag.EXCLUDE_WEIGHTS``)."""
    old = header.get("refit") or {}
    refit = _RefitPlan(str(old.get("mode", "")), set(old.get("weights", {})), strip, crcs=dict(old.get("weights", {})))
    blobs = _Blobs(refit if old else None)
    recs = []
    for rec, layer in zip(header["layers"], layers, strict=True):
        # NOTE: extra states are plain JSON (no weights), so they are kept as they were
        recs.append({**rec, "attrs": {k: encode_value(v, blobs) for k, v in layer._a.items()}})
    new = {**header, "layers": recs}
    if old:
        new["refit"] = refit.header()
    return _pack(new, blobs, alloc)


class StrippedWeights(Weights):
    """A refittable weight left out of a plan: its name, type and shape, no values (refit supplies them)."""

    _stripped = True

    def __init__(self, name: str, dtype: Any, shape: tuple[int, ...]) -> None:
        self._name, self._dtype, self._dims = name, dtype, shape

    @property
    def _t(self) -> torch.Tensor:  # type: ignore[override]
        raise NetworkDefinitionError(
            f"weights '{self._name}' were stripped from this plan: refit the engine (Refitter.set_named_weights, "
            "refit_cuda_engine) before running it"
        )

    def _shape(self) -> tuple[int, ...]:
        return self._dims

    def __len__(self) -> int:
        return int(np.prod(self._dims, dtype=np.int64))

    @property
    def size(self) -> int:
        return len(self)

    @property
    def nbytes(self) -> int:
        return len(self) * torch.empty((), dtype=_dtypes.torch_dtype(self._dtype)).element_size()


class _RefitPlan:
    """The refittable weights of one plan: the refit mode of its builder flags, which named weights
    it takes (all, or with ``REFIT_INDIVIDUAL`` those marked refittable), whether they are left out
    (``STRIP_PLAN``), and each one's CRC-32 (``REFIT_IDENTICAL`` refits must supply the same values)."""

    def __init__(self, mode: str, names: set[str] | None, strip: bool, crcs: dict[str, int] | None = None) -> None:
        self.mode, self.names, self.strip = mode, names, strip
        self.crcs: dict[str, int] = dict(crcs or {})
        self.seen: dict[str, int] = {}

    @classmethod
    def of(cls, network: Any, config: Any) -> _RefitPlan | None:
        flags = ENUMS["BuilderFlag"]
        mode = next((m for m in ("REFIT_IDENTICAL", "REFIT", "REFIT_INDIVIDUAL")
                     if m in flags.__members__ and config.get_flag(flags[m])), None)
        if mode is None:
            return None
        names = set(network._refittable) if mode == "REFIT_INDIVIDUAL" else None
        return cls(mode, names, bool(config.get_flag(flags["STRIP_PLAN"])))

    def takes(self, name: str) -> bool:
        return self.names is None or name in self.names

    def encode(self, w: Weights, name: str, blobs: _Blobs) -> Any:
        shape = list(w._shape())
        if isinstance(w, StrippedWeights):
            crc = self.crcs.get(name, 0)
        else:
            t = w._tensor().detach().contiguous().cpu()
            crc = crc32(t.reshape(-1).view(torch.uint8).numpy().data) if t.numel() else 0
        if self.seen.setdefault(name, crc) != crc:
            raise BuildError(f"weights named '{name}' hold different values in two layers")
        self.crcs[name] = crc
        if self.strip or isinstance(w, StrippedWeights):
            return {"__s__": name, "dtype": w.dtype.name, "shape": shape}
        blobs.refit = None  # NOTE: encode the values as plain weights, then name them
        try:
            rec = encode_value(w, blobs)
        finally:
            blobs.refit = self
        return {**rec, "name": name}

    def header(self) -> dict[str, Any]:
        return {"mode": self.mode, "stripped": self.strip, "weights": dict(sorted(self.seen.items()))}


def _pack(header: dict[str, Any], blobs: _Blobs, alloc: Any) -> Any:
    body = json.dumps(header, separators=(",", ":")).encode()
    # NOTE: one allocation and one copy of the weights: they go straight into the output buffer.
    # The JSON header is followed by 0..63 spaces (JSON allows trailing whitespace) chosen from the
    # buffer's address so that the blob area starts 64-byte aligned in memory: a fresh plan then
    # loads without copying its weights (see restore_layers). The unused padding goes after the blobs.
    total = _HEAD.size + len(body) + (_ALIGN - 1) + blobs.size + _CRC.size
    out = _new_buffer(alloc, total)
    view = memoryview(out).cast("B")
    pad = -(_address(view) + _HEAD.size + len(body)) % _ALIGN
    start = _HEAD.size + len(body) + pad
    view[: _HEAD.size] = _HEAD.pack(MAGIC, FORMAT_VERSION, len(body) + pad)
    view[_HEAD.size : _HEAD.size + len(body)] = body
    view[_HEAD.size + len(body) : start] = b" " * pad
    dst = torch.frombuffer(out, dtype=torch.uint8)
    pos = start  # every byte is written (the buffer may come uninitialized): blobs, and zeros between
    for off, t in blobs.parts:
        a = start + off
        if a > pos:
            view[pos:a] = bytes(a - pos)
        if isinstance(t, DeferredWeights):
            n = t.nbytes
            if a % 16 == 0:  # NOTE: always, with a 16-byte aligned buffer: computed in place
                t._fill(dst[a : a + n].view(t._torch_dtype).view(t._shape()))
            else:
                dst[a : a + n].copy_(t._tensor().reshape(-1).view(torch.uint8))
            pos = a + n
            continue
        n = t.numel()
        if n >= _BIG:
            dst[a : a + n].copy_(t)  # NOTE: torch copies large blocks with its threads, without the GIL
        else:
            view[a : a + n] = t.numpy().data
        pos = a + n
    del dst
    end = total - _CRC.size
    view[pos:end] = bytes(end - pos)
    view[end:] = _CRC.pack(crc32(view[:end]))
    return out


_BIG = 1 << 16  # blobs copied by torch rather than by a memoryview assignment


def _new_buffer(alloc: Any, n: int) -> Any:
    """An n-byte writable buffer made by ``alloc``, possibly uninitialized (write every byte)."""
    out = alloc(0)
    if isinstance(out, bytearray) and _buffers.grow(out, n):
        return out
    return alloc(n)


def _address(view: memoryview) -> int:
    """Address of the first byte of a buffer (writable or read-only)."""
    if not len(view):
        return 0
    if view.readonly:
        return int(np.frombuffer(view, dtype=np.uint8).ctypes.data)
    return ctypes.addressof(ctypes.c_char.from_buffer(view))


# ----------------------------------------------------------------------------------- load
# The newest plan this process built needs no re-check. (Like TensorRT's IHostMemory it is a writable
# buffer; a caller that changes it before deserializing gets what it wrote.) Held weakly where the
# buffer type allows it, so the plan goes away with its owner rather than at the next build.
_TRUSTED: list[Any] = []


def is_trusted(data: Any) -> bool:
    return any((p() if isinstance(p, weakref.ref) else p) is data for p in _TRUSTED)


def trust(plan: Any) -> None:
    try:
        ref: Any = weakref.ref(plan)
    except TypeError:  # a plain bytearray
        ref = plan
    _TRUSTED[:] = [ref]  # NOTE: only the newest plan


def parse(data: bytes | bytearray | memoryview) -> tuple[dict[str, Any], memoryview]:
    buf = memoryview(data).cast("B")
    if len(buf) < _HEAD.size + _CRC.size:
        raise EngineFileError(f"plan is truncated: {len(buf)} bytes is shorter than any sim plan")
    magic, version, n = _HEAD.unpack_from(buf, 0)
    if magic != MAGIC:
        raise EngineFileError("not a torch2trt-lite sim plan (bad magic bytes); was it built by TensorRT?")
    if version not in _TRAILER:
        raise EngineFileError(
            f"sim plan format version {version} is not supported (this torch2trt-lite reads "
            f"{' and '.join(str(v) for v in sorted(_TRAILER))}); rebuild the engine with this version"
        )
    tail = _TRAILER[version]
    if len(buf) < _HEAD.size + tail:
        raise EngineFileError(f"plan is truncated: {len(buf)} bytes is shorter than any sim plan")
    if not is_trusted(data):
        if version == 1:
            ok = hashlib.sha256(buf[:-tail]).digest() == bytes(buf[-tail:])
        else:
            ok = crc32(buf[:-tail]) == _CRC.unpack_from(buf, len(buf) - tail)[0]
        if not ok:
            raise EngineFileError("sim plan checksum mismatch: the data is truncated or corrupt")
    start = _HEAD.size
    if start + n > len(buf) - tail:
        raise EngineFileError("plan is corrupt: header length exceeds the file")
    try:
        header = json.loads(bytes(buf[start : start + n]))
    except RecursionError:
        raise EngineFileError("plan is corrupt: header is nested too deeply") from None
    except ValueError as e:
        raise EngineFileError(f"plan is corrupt: header is not valid JSON ({e})") from None
    validate_header(header)
    return header, buf[start + n : len(buf) - tail]


# Bounds of a plan's header (far above anything a network builds to)
MAX_TENSORS = 1 << 22
MAX_RANK = 32
MAX_DIM = 1 << 40


def _corrupt(where: str, what: str, got: Any) -> EngineFileError:
    shown = repr(got)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return EngineFileError(f"plan is corrupt: {where} must be {what}, got {shown}")


def _dtype_name(v: Any) -> bool:
    return isinstance(v, str) and v in DataType.__members__


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _shape_ok(v: Any, lo: int = -1) -> bool:
    return isinstance(v, list) and len(v) <= MAX_RANK and all(_int(d) and lo <= d <= MAX_DIM for d in v)


def validate_header(h: Any) -> None:
    """The structure of a plan header: every field the runtime reads, with its type and range.

    Layer attributes are checked when they are decoded (``decode_value``) and by running shape
    inference once at deserialization (``ICudaEngine._validate``).
    """
    if not isinstance(h, dict):
        raise _corrupt("the header", "a JSON object", type(h).__name__)
    for key, typ in (("api_version", str), ("name", str)):
        if key in h and not isinstance(h[key], typ):
            raise _corrupt(key, typ.__name__, h[key])
    if "strongly_typed" in h and not isinstance(h["strongly_typed"], bool):
        raise _corrupt("strongly_typed", "a bool", h["strongly_typed"])
    tensors = h.get("tensors")
    if not isinstance(tensors, list) or len(tensors) > MAX_TENSORS:
        raise _corrupt("tensors", f"a list of at most {MAX_TENSORS}", type(tensors).__name__)
    for k, t in enumerate(tensors):
        if not (isinstance(t, dict) and isinstance(t.get("name"), str) and _dtype_name(t.get("dtype"))
                and _shape_ok(t.get("shape"))):
            raise _corrupt(f"tensors[{k}]", "{name: str, dtype: a DataType name, shape: ints >= -1}", t)
    nt = len(tensors)

    def tensor_id(v: Any, where: str) -> int:
        if not (_int(v) and 0 <= v < nt):
            raise _corrupt(where, f"a tensor index in [0, {nt})", v)
        return int(v)

    inputs, outputs = h.get("inputs"), h.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or not outputs:
        raise _corrupt("inputs/outputs", "lists (at least one output)", [type(inputs).__name__, type(outputs).__name__])
    io = []
    for k, i in enumerate(inputs):
        if not (isinstance(i, dict) and isinstance(i.get("is_shape"), bool)):
            raise _corrupt(f"inputs[{k}]", "{tensor: int, is_shape: bool}", i)
        io.append(tensor_id(i.get("tensor"), f"inputs[{k}].tensor"))
    io.extend(tensor_id(o, f"outputs[{k}]") for k, o in enumerate(outputs))
    names = [tensors[i]["name"] for i in io]
    if len(set(io)) != len(io) or len(set(names)) != len(names):
        raise _corrupt("inputs/outputs", "distinct tensors with unique names", names[:20])
    profiles = h.get("profiles")
    if not isinstance(profiles, list) or len(profiles) > 1024:
        raise _corrupt("profiles", "a list", type(profiles).__name__)
    in_names = {tensors[i]["name"]: tensors[i] for i in io[: len(inputs)]}
    for k, p in enumerate(profiles):
        if not (isinstance(p, dict) and isinstance(p.get("shapes"), dict) and isinstance(p.get("values"), dict)):
            raise _corrupt(f"profiles[{k}]", "{shapes: {...}, values: {...}}", p)
        for name, dims in p["shapes"].items():
            t = in_names.get(name)
            ok = t is not None and isinstance(dims, list) and len(dims) == 3 and all(
                _shape_ok(d, 0) and len(d) == len(t["shape"]) for d in dims
            )
            if not ok or not all(a <= b <= c for a, b, c in zip(*dims, strict=True)):
                raise _corrupt(f"profiles[{k}].shapes[{name!r}]", "[min, opt, max] shapes of an input, min <= opt <= max", dims)
        for name, vals in p["values"].items():
            if name not in in_names or not (isinstance(vals, list) and len(vals) == 3 and all(
                isinstance(v, list) and len(v) <= 1 << 16 and all(_int(x) for x in v) for v in vals
            )):
                raise _corrupt(f"profiles[{k}].values[{name!r}]", "[min, opt, max] lists of ints", vals)
    layers = h.get("layers")
    if not isinstance(layers, list) or len(layers) > MAX_TENSORS:
        raise _corrupt("layers", "a list", type(layers).__name__)
    for k, rec in enumerate(layers):
        where = f"layers[{k}]"
        if not (isinstance(rec, dict) and isinstance(rec.get("cls"), str) and isinstance(rec.get("name"), str)
                and isinstance(rec.get("attrs"), dict) and isinstance(rec.get("inputs"), list)
                and isinstance(rec.get("outputs"), list) and isinstance(rec.get("output_types"), dict)):
            raise _corrupt(where, "{cls, name, attrs, inputs, outputs, output_types, extra}", sorted(rec)[:8] if isinstance(rec, dict) else rec)
        for j, i in enumerate(rec["inputs"]):
            if i is not None:
                tensor_id(i, f"{where}.inputs[{j}]")
        for j, o in enumerate(rec["outputs"]):
            tensor_id(o, f"{where}.outputs[{j}]")
        for j, dt in rec["output_types"].items():
            if not (j.isdigit() and len(j) < 6 and _dtype_name(dt)):
                raise _corrupt(f"{where}.output_types", "{output index: DataType name}", {j: dt})


def _weight_buffer(raw: memoryview, zero_copy: bool) -> torch.Tensor:
    """The blob area as a uint8 tensor whose start is 64-byte aligned.

    With the 64-byte aligned offsets every weight is then aligned, so BLAS and oneDNN take the same
    code path on every load and an engine reloaded from a file gives bit-identical results. A fresh
    plan built here (``zero_copy``, a writable buffer laid out aligned) is used in place; anything
    else (bytes read from a file, a misaligned buffer) is copied once into an aligned allocation.
    """
    if zero_copy and len(raw) and not raw.readonly and _address(raw) % _ALIGN == 0:
        return torch.frombuffer(raw, dtype=torch.uint8)
    blob = torch.empty(len(raw), dtype=torch.uint8)
    if len(raw):
        blob.numpy()[:] = np.frombuffer(raw, dtype=np.uint8)
    return blob


def _check_attr(rec: dict[str, Any], key: str, default: Any, v: Any) -> None:
    """A decoded attribute must have the kind of its declared default: a number where a number is
    declared, a member of the same enum, a sequence where a sequence is."""
    if default is None or v is None:
        return
    if isinstance(default, _TrtEnum):
        ok = isinstance(v, _TrtEnum) and type(v).__qualname__ == type(default).__qualname__
    elif isinstance(default, (bool, int, float)):
        ok = isinstance(v, (bool, int, float)) and not (_int(v) and abs(v) > 1 << 62)
    elif isinstance(default, (tuple, list)):
        ok = isinstance(v, (tuple, list))
    else:
        return
    if not ok:
        raise EngineFileError(
            f"plan is corrupt: layer '{rec['name'][:80]}' attribute {key} is a {type(v).__name__}, "
            f"expected like {default!r}"
        )


def restore_layers(header: dict[str, Any], raw: memoryview, ns: Any, zero_copy: bool = False) -> list[ILayer]:
    """The layers of a parsed plan; ``zero_copy``: weights may be views of ``raw`` (a trusted plan)."""
    blob = _weight_buffer(raw, zero_copy)
    classes = _layer_classes()
    layers: list[ILayer] = []
    for rec in header["layers"]:
        cls = classes.get(rec["cls"])
        if cls is None:
            raise EngineFileError(f"plan uses layer class {rec['cls']!r}, which this sim does not know")
        vcls = ns._class(rec["cls"]) if ns is not None else cls
        layer = vcls.__new__(vcls)
        declared = cls._all_attrs()
        layer._a = {k: decode_value(v, blob) for k, v in rec["attrs"].items()}
        for k, v in layer._a.items():
            _check_attr(rec, k, declared.get(k), v)
        layer._name = rec["name"]
        layer._inputs = []
        layer._outputs = []
        layer._output_types = {int(k): DataType.__members__[v] for k, v in rec["output_types"].items()}
        layer._cache = None
        layer._plan_io = (rec["inputs"], rec["outputs"])
        layers.append(layer)
    for layer, rec in zip(layers, header["layers"], strict=True):
        layer._restore_extra(decode_value(rec["extra"], blob) | {"__layers__": layers})
    return layers


__all__ = ["RunContext", "StrippedWeights", "build", "parse", "reserialize", "restore_layers"]
