"""Standalone engine files: a small JSON header plus the backend's serialized plan.

Layout::

    b"T2TLENGN"   magic (8 bytes)
    u32           file format version
    u32           header length N
    N bytes       JSON header: backend, TensorRT version, device capability, I/O names, dtypes,
                  shape ranges, output structure, plan length and SHA-256
    plan bytes    exactly what ``build_serialized_network`` returned

``write`` writes an engine file, ``atomic_write`` the bare plan for ``trtexec``, Triton Inference
Server or C++.
Writes are atomic: a temporary file in the same folder, then ``os.replace``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
import tempfile
from typing import Any

from . import _buffers
from .errors import EngineFileError

MAGIC = b"T2TLENGN"
FORMAT_VERSION = 1
_HEAD = struct.Struct("<8sII")


def prefix(header: dict[str, Any], plan: bytes | bytearray | memoryview) -> bytes:
    """Everything an engine file holds before the plan (the plan follows unchanged)."""
    h = dict(header)
    h["plan_nbytes"] = len(plan)
    h["plan_sha256"] = hashlib.sha256(plan).hexdigest()
    body = json.dumps(h, sort_keys=True).encode()
    return _HEAD.pack(MAGIC, FORMAT_VERSION, len(body)) + body


def pack(header: dict[str, Any], plan: bytes | bytearray) -> bytes:
    """The whole engine file in memory (``write`` writes it without this copy)."""
    return prefix(header, plan) + bytes(plan)


def write(path: str | os.PathLike[str], header: dict[str, Any], plan: bytes | bytearray) -> None:
    """Write an engine file atomically; the plan goes to the file straight from its buffer."""
    atomic_write(path, prefix(header, plan), plan)


def unpack(data: bytes | bytearray, source: str = "<bytes>") -> tuple[dict[str, Any], bytearray]:
    return _unpack(io.BytesIO(data), len(data), source)


def _unpack(f: io.BufferedIOBase, size: int, source: str) -> tuple[dict[str, Any], bytearray]:
    """Header and plan of the engine file of ``size`` bytes that ``f`` reads from its start.

    The plan is read into its own buffer once (no copy of the whole file is sliced).
    """
    head = f.read(_HEAD.size)
    if len(head) < _HEAD.size:
        raise EngineFileError(f"{source}: file is truncated ({size} bytes); not a torch2trt-lite engine")
    magic, version, n = _HEAD.unpack(head)
    if magic != MAGIC:
        raise EngineFileError(
            f"{source}: not a torch2trt-lite engine file (bad magic bytes {magic!r}); raw TensorRT plans "
            "are loaded with tensorrt.Runtime, not torch2trt_lite.load"
        )
    if version != FORMAT_VERSION:
        raise EngineFileError(
            f"{source}: engine file format version {version} is not supported by this torch2trt-lite "
            f"(it reads version {FORMAT_VERSION}); convert the model again with this version"
        )
    end = _HEAD.size + n
    if end > size:
        raise EngineFileError(f"{source}: file is truncated inside the header")
    try:
        header = json.loads(f.read(n))
    except ValueError as e:
        raise EngineFileError(f"{source}: header is corrupt ({e})") from None
    if not isinstance(header, dict) or "plan_nbytes" not in header or "plan_sha256" not in header:
        raise EngineFileError(f"{source}: header is corrupt (missing plan size or checksum)")
    if size - end != header["plan_nbytes"]:
        raise EngineFileError(
            f"{source}: file is truncated or has trailing data: plan is {size - end} bytes, header says "
            f"{header['plan_nbytes']}"
        )
    plan = _buffers.uninitialized(size - end)
    if f.readinto(plan) != len(plan):
        raise EngineFileError(f"{source}: file changed size while it was read")
    if hashlib.sha256(plan).hexdigest() != header["plan_sha256"]:
        raise EngineFileError(f"{source}: plan checksum mismatch; the file is corrupt")
    return header, plan


def atomic_write(path: str | os.PathLike[str], *chunks: bytes | bytearray) -> None:
    """Write ``chunks`` one after the other to a temporary file in the same folder, then rename."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".t2tl-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def read(path: str | os.PathLike[str]) -> tuple[dict[str, Any], bytearray]:
    try:
        with open(path, "rb") as f:
            return _unpack(f, os.fstat(f.fileno()).st_size, os.fspath(path))
    except OSError as e:
        raise EngineFileError(f"cannot read engine file {os.fspath(path)!r}: {e}") from None
