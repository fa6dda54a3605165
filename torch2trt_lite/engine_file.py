"""Standalone engine files: a small JSON header plus the backend's serialized plan.

Layout::

    b"T2TLENGN"   magic (8 bytes)
    u32           file format version
    u32           header length N
    N bytes       JSON header: backend, TensorRT version, device capability, I/O names, dtypes,
                  shape ranges, output structure, plan length and SHA-256
    plan bytes    exactly what ``build_serialized_network`` returned

``write_raw_plan`` writes the plan alone, for ``trtexec``, Triton Inference Server or C++.
Writes are atomic: a temporary file in the same folder, then ``os.replace``.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from typing import Any

from .errors import EngineFileError

MAGIC = b"T2TLENGN"
FORMAT_VERSION = 1
_HEAD = struct.Struct("<8sII")


def pack(header: dict[str, Any], plan: bytes | bytearray) -> bytes:
    h = dict(header)
    h["plan_nbytes"] = len(plan)
    h["plan_sha256"] = hashlib.sha256(plan).hexdigest()
    body = json.dumps(h, sort_keys=True).encode()
    return _HEAD.pack(MAGIC, FORMAT_VERSION, len(body)) + body + bytes(plan)


def unpack(data: bytes, source: str = "<bytes>") -> tuple[dict[str, Any], bytes]:
    if len(data) < _HEAD.size:
        raise EngineFileError(f"{source}: file is truncated ({len(data)} bytes); not a torch2trt-lite engine")
    magic, version, n = _HEAD.unpack_from(data, 0)
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
    if end > len(data):
        raise EngineFileError(f"{source}: file is truncated inside the header")
    try:
        header = json.loads(data[_HEAD.size : end])
    except ValueError as e:
        raise EngineFileError(f"{source}: header is corrupt ({e})") from None
    if not isinstance(header, dict) or "plan_nbytes" not in header or "plan_sha256" not in header:
        raise EngineFileError(f"{source}: header is corrupt (missing plan size or checksum)")
    plan = data[end:]
    if len(plan) != header["plan_nbytes"]:
        raise EngineFileError(
            f"{source}: file is truncated or has trailing data: plan is {len(plan)} bytes, header says "
            f"{header['plan_nbytes']}"
        )
    if hashlib.sha256(plan).hexdigest() != header["plan_sha256"]:
        raise EngineFileError(f"{source}: plan checksum mismatch; the file is corrupt")
    return header, plan


def atomic_write(path: str | os.PathLike[str], data: bytes | bytearray) -> None:
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".t2tl-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def read(path: str | os.PathLike[str]) -> tuple[dict[str, Any], bytes]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise EngineFileError(f"cannot read engine file {os.fspath(path)!r}: {e}") from None
    return unpack(data, os.fspath(path))
