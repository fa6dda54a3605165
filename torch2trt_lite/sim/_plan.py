"""The sim's serialized plan: a versioned, checksummed container that loads without running code.

Layout::

    b"T2TLSIMP"  magic (8 bytes)
    u32          container format version
    u64          length of the JSON header
    JSON header  network description (layers, tensors, profiles); weights refer to blobs
    blobs        raw little-endian weight bytes, concatenated
    32 bytes     SHA-256 of everything above

Nothing in it is pickled: values are JSON (ints, floats, strings, lists), enum members by name,
weights as (dtype, shape, offset, nbytes) into the blob area.
"""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any

import numpy as np
import torch

from ..errors import BuildError, EngineFileError, NetworkDefinitionError
from . import _dtypes
from ._core import ILayer, ITensor, RunContext, Weights
from ._enums import ENUMS, DataType, _TrtEnum

MAGIC = b"T2TLSIMP"
FORMAT_VERSION = 1
_HEAD = struct.Struct("<8sIQ")

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
    def __init__(self) -> None:
        self.parts: list[Any] = []
        self.size = 0

    def add(self, t: torch.Tensor) -> tuple[int, int]:
        t = t.detach().contiguous().cpu()
        n = t.numel() * t.element_size()
        if n == 0:
            return self.size, 0
        pad = -self.size % _ALIGN
        if pad:
            self.parts.append(bytes(pad))
            self.size += pad
        off = self.size
        self.parts.append(t.reshape(-1).view(torch.uint8).numpy().data)
        self.size += n
        return off, n


def encode_value(v: Any, blobs: _Blobs) -> Any:
    if isinstance(v, _TrtEnum):
        return {"__e__": f"{type(v).__qualname__}.{v.name}"}
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
            enum_name, _, member = v["__e__"].rpartition(".")
            return ENUMS[enum_name][member]
        if "__w__" in v or "__t__" in v:
            off, n = v.get("__w__") or v["__t__"]
            dt = DataType.__members__[v["dtype"]]
            tdt = _dtypes.torch_dtype(dt)
            if off < 0 or n < 0 or off + n > len(blob) or (n and off % _ALIGN):
                raise EngineFileError("plan is corrupt: a weight blob lies outside the file")
            t = blob[off : off + n].view(tdt) if n else torch.empty(0, dtype=tdt)
            t = t.reshape(v["shape"])
            if "__t__" in v:
                return t
            w = Weights(t)
            w._dtype = dt
            return w
        if "__d__" in v:
            return tuple(decode_value(x, blob) for x in v["__d__"])
        if "__m__" in v:
            return {k: decode_value(x, blob) for k, x in v["__m__"].items()}
        raise EngineFileError(f"plan is corrupt: unknown value encoding {sorted(v)}")
    if isinstance(v, list):
        return [decode_value(x, blob) for x in v]
    return v


# ---------------------------------------------------------------------------------- build
def _validate(network: Any, config: Any) -> None:
    if not network._outputs:
        raise BuildError("network has no outputs: call mark_output on at least one tensor")
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


def build(network: Any, config: Any, api_version: str, alloc: Any = bytearray) -> Any:
    """Serialize ``network``; ``alloc(n)`` makes the n-byte writable output buffer (IHostMemory)."""
    _validate(network, config)
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
    blobs = _Blobs()
    recs = []
    for layer in layers:
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
    body = json.dumps(header, separators=(",", ":")).encode()
    parts = [_HEAD.pack(MAGIC, FORMAT_VERSION, len(body)), body, *blobs.parts]
    digest = hashlib.sha256()
    total = sum(len(p) for p in parts) + 32
    # NOTE: one allocation and one copy of the weights: they go straight into the output buffer.
    out = alloc(total)
    view = memoryview(out)
    pos = 0
    for p in parts:
        n = len(p)
        view[pos : pos + n] = p
        digest.update(p)
        pos += n
    view[pos:] = digest.digest()
    return out


# ----------------------------------------------------------------------------------- load
# The newest plan this process built needs no re-hash. (Like TensorRT's IHostMemory it is a writable
# buffer; a caller that changes it before deserializing gets what it wrote.)
_TRUSTED: list[Any] = []


def is_trusted(data: Any) -> bool:
    return any(p is data for p in _TRUSTED)


def trust(plan: Any) -> None:
    _TRUSTED.append(plan)
    del _TRUSTED[:-1]  # NOTE: holds only the newest plan alive


def parse(data: bytes | bytearray | memoryview) -> tuple[dict[str, Any], memoryview]:
    buf = memoryview(data).cast("B")
    if len(buf) < _HEAD.size + 32:
        raise EngineFileError(f"plan is truncated: {len(buf)} bytes is shorter than any sim plan")
    magic, version, n = _HEAD.unpack_from(buf, 0)
    if magic != MAGIC:
        raise EngineFileError("not a torch2trt-lite sim plan (bad magic bytes); was it built by TensorRT?")
    if version != FORMAT_VERSION:
        raise EngineFileError(
            f"sim plan format version {version} is not supported (this torch2trt-lite reads {FORMAT_VERSION}); "
            "rebuild the engine with this version"
        )
    if not is_trusted(data) and hashlib.sha256(buf[:-32]).digest() != bytes(buf[-32:]):
        raise EngineFileError("sim plan checksum mismatch: the data is truncated or corrupt")
    start = _HEAD.size
    if start + n > len(buf) - 32:
        raise EngineFileError("plan is corrupt: header length exceeds the file")
    try:
        header = json.loads(bytes(buf[start : start + n]))
    except ValueError as e:
        raise EngineFileError(f"plan is corrupt: header is not valid JSON ({e})") from None
    return header, buf[start + n : len(buf) - 32]


def restore_layers(header: dict[str, Any], raw: memoryview, ns: Any) -> list[ILayer]:
    # NOTE: one copy into a torch allocation (64-byte aligned): with the 64-byte aligned offsets every
    # weight is aligned, so BLAS and oneDNN take the same code path each load and an engine reloaded
    # from a file gives bit-identical results. (Views into the plan buffer would not be aligned.)
    blob = torch.empty(len(raw), dtype=torch.uint8)
    if len(raw):
        blob.numpy()[:] = np.frombuffer(raw, dtype=np.uint8)
    classes = _layer_classes()
    layers: list[ILayer] = []
    for rec in header["layers"]:
        cls = classes.get(rec["cls"])
        if cls is None:
            raise EngineFileError(f"plan uses layer class {rec['cls']!r}, which this sim does not know")
        vcls = ns._class(rec["cls"]) if ns is not None else cls
        layer = vcls.__new__(vcls)
        layer._a = {k: decode_value(v, blob) for k, v in rec["attrs"].items()}
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


__all__ = ["RunContext", "build", "parse", "restore_layers"]
