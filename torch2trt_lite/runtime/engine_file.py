"""Standalone engine files: a small JSON header plus the backend's serialized plan.

Layout (file format version 2)::

    b"T2TLENGN"   magic (8 bytes)
    u32           file format version
    u32           header length N
    32 bytes      SHA-256 of the 16 bytes above followed by the N header bytes
    N bytes       JSON header: backend, TensorRT version, device capability, I/O names, dtypes,
                  shape ranges, output structure, plan length and SHA-256; ``equal_dims`` (optional:
                  files written before it have none) lists the dynamic input dims duck sizing took for
                  one size, ``[{"dims": [[input name, dim], ...], "min": lo, "max": hi}, ...]`` (traced
                  at the same size, so the engine assumes they are equal, within [lo, hi]:
                  ``TRTModule`` checks it on every call); ``refit`` (optional: refittable engines)
                  the named weights, their recipes and fingerprint, and ``stripped`` for a plan
                  without them (:mod:`torch2trt_lite.runtime.refit`, which checks it)
    plan bytes    exactly what ``build_serialized_network`` returned

Every byte is covered by a checksum: the header's SHA-256 covers the fixed prefix and the header,
the header's ``plan_sha256`` covers the plan. Loading checks, in this order and before anything is
allocated from what the file claims: the magic and version, the header length against the file's
real size, the header checksum, the header against its schema (:func:`validate_header`), the plan
length against the file's real size, the plan's first bytes against its backend's (:func:`check_plan_start`:
a huge file is refused before it is hashed), then the plan's SHA-256 (streamed, in small pieces), and
only then reads the plan into memory. Version 1 files (no header checksum) are refused with a message.

``write`` writes an engine file, ``atomic_write`` the bare plan for ``trtexec``, Triton Inference
Server or C++. Writes are atomic: a temporary file ``.t2tl-<host>-<pid>-<random>.tmp`` in the same
folder, then ``os.replace``. A new file gets the mode the umask gives (like ``open``), an existing
file keeps its mode; temporary files left by a writer that was killed are removed by the next write
in that folder (when their process is gone, or after an hour).
"""

from __future__ import annotations

import hashlib
import io
import json
import keyword
import os
import secrets
import socket
import stat
import struct
import time
from collections.abc import Callable
from typing import Any

from torch2trt_lite import _buffers
from torch2trt_lite.errors import EngineFileError

MAGIC = b"T2TLENGN"
SIM_PLAN_MAGIC = b"T2TLSIMP"  # the sim's bare plans (torch2trt_lite/sim/_plan.py MAGIC; a test keeps them equal)
FORMAT_VERSION = 2
_ID = struct.Struct("<8sI")  # magic, version: read first, so any version is recognised
_HEAD = struct.Struct("<8sII32s")  # magic, version, header length, header SHA-256
_CHUNK = 4 << 20  # plan bytes hashed per read: loading never holds more than this before the check

# Bounds of what a header may describe (far above anything convert() writes; a file beyond them is
# refused at load instead of making a later call allocate or recurse without limit).
MAX_HEADER_BYTES = 16 << 20
MAX_IO = 4096  # inputs, outputs
MAX_RANK = 32
MAX_DIM = 1 << 40
MAX_NAME = 1024
MAX_TREE_DEPTH = 64
MAX_TREE_NODES = 100_000
MAX_FIELDS = 1000  # fields of an output namedtuple
MAX_CONSTANT_CHARS = 1 << 16

DTYPES = frozenset({"float32", "float16", "bfloat16", "int8", "int32", "int64", "bool", "uint8"})
_HEX = frozenset("0123456789abcdef")


# ----------------------------------------------------------------------------------- write
def prefix(header: dict[str, Any], plan: bytes | bytearray | memoryview, plan_sha256: str | None = None) -> bytes:
    """Everything an engine file holds before the plan (the plan follows unchanged).

    ``plan_sha256``: the plan's SHA-256 when the caller already knows it (else it is computed).
    """
    h = dict(header)
    h["plan_nbytes"] = len(plan)
    h["plan_sha256"] = plan_sha256 or hashlib.sha256(plan).hexdigest()
    body = json.dumps(h, sort_keys=True).encode()
    ident = _ID.pack(MAGIC, FORMAT_VERSION) + struct.pack("<I", len(body))
    return ident + hashlib.sha256(ident + body).digest() + body


def pack(header: dict[str, Any], plan: bytes | bytearray | memoryview) -> bytes:
    """The whole engine file in memory (``write`` writes it without this copy)."""
    return prefix(header, plan) + bytes(plan)


def write(
    path: str | os.PathLike[str], header: dict[str, Any], plan: bytes | bytearray | memoryview,
    plan_sha256: str | None = None,
) -> None:
    """Write an engine file atomically; the plan goes to the file straight from its buffer."""
    atomic_write(path, prefix(header, plan, plan_sha256), plan)


_STALE_S = 3600.0
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def _temp_name() -> str:
    return f".t2tl-{_HOST}-{os.getpid()}-{secrets.token_hex(6)}.tmp"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # someone else's process (or a number that is no pid): leave its files alone
    return True


def clean_stale_temp_files(folder: str, now: float | None = None) -> list[str]:
    """Remove ``.t2tl-*.tmp`` files of writers that were killed; return the names removed.

    A file goes when its writer (this host, the pid in its name) no longer runs, or when nobody has
    written to it for an hour (files of other hosts, or of the old ``.t2tl-XXXX.tmp`` naming).
    """
    now = time.time() if now is None else now
    removed: list[str] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        if not (name.startswith(".t2tl-") and name.endswith(".tmp")):
            continue
        full = os.path.join(folder, name)
        try:
            st = os.lstat(full)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        parts = name[len(".t2tl-") : -len(".tmp")].split("-")
        dead = (
            len(parts) == 3 and parts[0] == _HOST and parts[1].isdigit()
            and int(parts[1]) != os.getpid() and not _pid_alive(int(parts[1]))
        )
        if dead or now - st.st_mtime > _STALE_S:
            try:
                os.unlink(full)
                removed.append(name)
            except OSError:
                pass
    return removed


def atomic_write(path: str | os.PathLike[str], *chunks: bytes | bytearray | memoryview) -> None:
    """Write ``chunks`` one after the other to a temporary file in the same folder, then rename.

    Raises :class:`EngineFileError` naming ``path`` when the folder or the disk refuses.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    clean_stale_temp_files(folder)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)  # an existing file keeps its mode
    except OSError:
        mode = None
    tmp = os.path.join(folder, _temp_name())
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as e:
        raise EngineFileError(f"cannot write {path!r}: {e.strerror or e} (creating a file in {folder!r})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise EngineFileError(f"cannot write {path!r}: {e.strerror or e}; nothing was written") from None
        raise


# ------------------------------------------------------------------------------------ read
Validator = Callable[[dict[str, Any], str], None]


def unpack(
    data: bytes | bytearray | memoryview, source: str = "<bytes>", validate: Validator | None = None,
) -> tuple[dict[str, Any], bytearray]:
    return _unpack(io.BytesIO(data), len(data), source, validate)


def read(
    path: str | os.PathLike[str], validate: Validator | None = None,
) -> tuple[dict[str, Any], bytearray]:
    """Header and plan of an engine file; ``validate(header, source)`` also runs before the plan is read."""
    try:
        with open(path, "rb") as f:
            return _unpack(f, os.fstat(f.fileno()).st_size, os.fspath(path), validate)
    except OSError as e:
        raise EngineFileError(f"cannot read engine file {os.fspath(path)!r}: {e.strerror or e}") from None


def _unpack(f: Any, size: int, source: str, validate: Validator | None) -> tuple[dict[str, Any], bytearray]:
    """Header and plan of the engine file of ``size`` bytes that ``f`` reads from its start.

    The plan is hashed in pieces before anything is allocated for it, then read into its own buffer
    once (no copy of the whole file is sliced).
    """
    ident = f.read(_ID.size)
    if len(ident) < _ID.size:
        raise EngineFileError(f"{source}: file is truncated ({size} bytes); not a torch2trt-lite engine")
    magic, version = _ID.unpack(ident)
    if magic != MAGIC:
        if magic == SIM_PLAN_MAGIC:
            raise EngineFileError(
                f"{source}: not a torch2trt-lite engine file: this is a bare plan of the sim (as save_plan "
                "writes it, without the engine header torch2trt_lite.load needs); load it with "
                "torch2trt_lite.sim.Runtime(logger).deserialize_cuda_engine(data), or write an engine file "
                "with TRTModule.save(path)"
            )
        raise EngineFileError(
            f"{source}: not a torch2trt-lite engine file (bad magic bytes {magic!r}); raw TensorRT plans "
            "are loaded with tensorrt.Runtime, not torch2trt_lite.load"
        )
    if version != FORMAT_VERSION:
        old = " (written by an older torch2trt-lite, without a header checksum)" if version < FORMAT_VERSION else ""
        raise EngineFileError(
            f"{source}: engine file format version {version}{old} is not supported by this torch2trt-lite "
            f"(it reads version {FORMAT_VERSION}); convert the model again with this version"
        )
    rest = f.read(_HEAD.size - _ID.size)
    if len(rest) < _HEAD.size - _ID.size:
        raise EngineFileError(f"{source}: file is truncated inside the header ({size} bytes)")
    (n,) = struct.unpack_from("<I", rest, 0)
    digest = rest[4:]
    end = _HEAD.size + n
    if n > MAX_HEADER_BYTES:
        raise EngineFileError(
            f"{source}: header length {n} is over the limit of {MAX_HEADER_BYTES} bytes; the file is corrupt"
        )
    if end > size:
        raise EngineFileError(f"{source}: file is truncated inside the header (header says {n} bytes)")
    body = f.read(n)
    if len(body) != n:
        raise EngineFileError(f"{source}: file changed size while it was read")
    if hashlib.sha256(ident + rest[:4] + body).digest() != digest:
        raise EngineFileError(f"{source}: header checksum mismatch; the file is corrupt")
    header = parse_json(body, f"{source}: header")
    validate_header(header, source)
    if validate is not None:
        validate(header, source)
    if size - end != header["plan_nbytes"]:
        raise EngineFileError(
            f"{source}: file is truncated or has trailing data: plan is {size - end} bytes, header says "
            f"{header['plan_nbytes']}"
        )
    check_plan_start(f.read(_PLAN_START), header, size - end, source)  # NOTE: before hashing a huge plan
    f.seek(end)
    h = hashlib.sha256()
    piece = bytearray(min(_CHUNK, size - end))
    view = memoryview(piece)
    left = size - end
    while left:
        got = f.readinto(view[: min(len(view), left)])
        if not got:
            raise EngineFileError(f"{source}: file changed size while it was read")
        h.update(view[:got])
        left -= got
    del view, piece
    if h.hexdigest() != header["plan_sha256"]:
        raise EngineFileError(f"{source}: plan checksum mismatch; the file is corrupt")
    f.seek(end)
    plan = _buffers.uninitialized(size - end)
    if f.readinto(plan) != len(plan) or f.read(1):
        raise EngineFileError(f"{source}: file changed size while it was read")
    return header, plan


# The first bytes of a backend's plan: its magic, and for the sim's own container its declared
# header length (sim/_plan.py: magic, u32 version, u64 header length, ..., a 4- or 32-byte checksum).
_PLAN_START = 20
_PLAN_MAGIC = {"sim": SIM_PLAN_MAGIC, "tensorrt-rtx": b"vtrt"}


def check_plan_start(start: bytes, header: dict[str, Any], nbytes: int, source: str) -> None:
    """Refuse a plan whose first bytes cannot start a plan of the header's backend (its magic; for
    the sim, a container version and header length that fit in ``nbytes``), before the plan is
    hashed: a file of gigabytes with a valid header is refused at once instead of after reading it
    all. Backends whose plan layout is not known here (full TensorRT) pass."""
    magic = _PLAN_MAGIC.get(str(header.get("backend")))
    if magic is None:
        return
    if not start.startswith(magic):
        raise EngineFileError(
            f"{source}: the plan does not start as a {header['backend']} plan does (magic {start[:len(magic)]!r}, "
            f"expected {magic!r}); {_FIX}"
        )
    if header["backend"] == "sim":
        if len(start) < _PLAN_START:
            raise EngineFileError(f"{source}: the sim plan is truncated ({nbytes} bytes); {_FIX}")
        version, n = struct.unpack_from("<IQ", start, len(magic))
        if version not in (1, 2) or _PLAN_START + n + 4 > nbytes:
            raise EngineFileError(
                f"{source}: the sim plan declares container version {version} and a {n}-byte header, which do "
                f"not fit its {nbytes} bytes; {_FIX}"
            )


def parse_json(body: bytes | bytearray | memoryview, what: str) -> Any:
    """JSON of a header; any malformation (also nesting too deep for the parser) is EngineFileError."""
    try:
        return json.loads(bytes(body))
    except RecursionError:
        raise EngineFileError(f"{what} is corrupt (nested too deeply)") from None
    except ValueError as e:  # also UnicodeDecodeError and numbers too long to convert
        raise EngineFileError(f"{what} is corrupt ({e})") from None


# ---------------------------------------------------------------------------------- schema
_FIX = "the engine file is corrupt or was not written by torch2trt-lite: convert the model again"


def _bad(source: str, where: str, what: str, got: Any) -> EngineFileError:
    shown = repr(got)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return EngineFileError(f"{source}: engine metadata: {where} must be {what}, got {shown}; {_FIX}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _name(v: Any) -> bool:
    return isinstance(v, str) and 0 < len(v) <= MAX_NAME


def _dims(source: str, where: str, v: Any, lo: int) -> list[int]:
    if not isinstance(v, list) or len(v) > MAX_RANK or not all(_is_int(d) and lo <= d <= MAX_DIM for d in v):
        raise _bad(source, where, f"a list of at most {MAX_RANK} ints in [{lo}, 2**40]", v)
    return v


def validate_header(h: Any, source: str = "<engine>") -> None:
    """Check an engine header (the metadata of a TRTModule) against its schema.

    Types, ranges, lengths, names, dtypes, shape ranges and the output structure are all checked, so
    a corrupt or crafted header is refused here with :class:`EngineFileError` rather than failing
    later in ``forward``.
    """
    if not isinstance(h, dict):
        raise _bad(source, "the header", "a JSON object", type(h).__name__)
    for key in ("plan_nbytes", "plan_sha256"):
        if key not in h:
            raise EngineFileError(f"{source}: header is corrupt (missing {key}); {_FIX}")
    validate_meta(h, source)
    if not _is_int(h["plan_nbytes"]) or h["plan_nbytes"] < 0:
        raise _bad(source, "plan_nbytes", "a non-negative int", h["plan_nbytes"])


def validate_meta(h: Any, source: str = "<engine>") -> None:
    """The schema of TRTModule metadata (an engine header without the container's own fields)."""
    if not isinstance(h, dict):
        raise _bad(source, "the metadata", "a JSON object", type(h).__name__)
    if "plan_sha256" in h:
        s = h["plan_sha256"]
        if not (isinstance(s, str) and len(s) == 64 and set(s) <= _HEX):
            raise _bad(source, "plan_sha256", "64 lowercase hex digits", s)
    if "plan_nbytes" in h and (not _is_int(h["plan_nbytes"]) or h["plan_nbytes"] < 0):
        raise _bad(source, "plan_nbytes", "a non-negative int", h["plan_nbytes"])
    if not _is_int(h.get("format")):
        raise _bad(source, "format", "an int (the metadata format)", h.get("format"))
    if not isinstance(h.get("backend"), str):
        raise _bad(source, "backend", "a string", h.get("backend"))
    for key in ("torch2trt_lite", "trt_version", "api_version"):
        v = h.get(key)
        if v is not None and not (isinstance(v, str) and len(v) <= MAX_NAME):
            raise _bad(source, key, "a string or null", v)
    cap = h.get("device_capability")
    if cap is not None and not (isinstance(cap, list) and len(cap) == 2 and all(_is_int(c) and 0 <= c < 1000 for c in cap)):
        raise _bad(source, "device_capability", "null or [major, minor]", cap)
    ccs = h.get("compute_capabilities")
    if ccs is not None and not (
        (isinstance(ccs, str) and len(ccs) <= MAX_NAME)
        or (isinstance(ccs, list) and len(ccs) <= 64 and all(_name(c) for c in ccs))
    ):
        raise _bad(source, "compute_capabilities", "null, a string or a list of strings", ccs)
    nl = h.get("num_layers")
    if nl is not None and not (_is_int(nl) and 0 <= nl <= 1 << 31):
        raise _bad(source, "num_layers", "a non-negative int", nl)
    if "plugins" in h and not isinstance(h["plugins"], bool):
        raise _bad(source, "plugins", "true or false", h["plugins"])
    names: set[str] = set()
    for key in ("inputs", "outputs"):
        specs = h.get(key)
        if not isinstance(specs, list) or len(specs) > MAX_IO or (key == "outputs" and not specs):
            raise _bad(source, key, f"a list of {'1' if key == 'outputs' else '0'} to {MAX_IO} tensor descriptions", specs)
        for k, spec in enumerate(specs):
            where = f"{key}[{k}]"
            if not isinstance(spec, dict):
                raise _bad(source, where, "an object", spec)
            if not _name(spec.get("name")):
                raise _bad(source, f"{where}.name", f"a string of 1 to {MAX_NAME} characters", spec.get("name"))
            if spec["name"] in names:
                raise _bad(source, f"{where}.name", "unique among inputs and outputs", spec["name"])
            names.add(spec["name"])
            if "assert" in spec and not (key == "outputs" and isinstance(spec["assert"], str)
                                         and len(spec["assert"]) <= MAX_CONSTANT_CHARS):
                raise _bad(source, f"{where}.assert", "the message of a runtime check (outputs only)", spec["assert"])
            if not isinstance(spec.get("dtype"), str) or spec["dtype"] not in DTYPES:
                raise _bad(source, f"{where}.dtype", f"one of {sorted(DTYPES)}", spec.get("dtype"))
            shape = _dims(source, f"{where}.shape", spec.get("shape"), -1)
            if key == "inputs":
                lo = _dims(source, f"{where}.min", spec.get("min"), 0)
                hi = _dims(source, f"{where}.max", spec.get("max"), 0)
                if not len(lo) == len(hi) == len(shape):
                    raise _bad(source, f"{where}.min/max", f"of the rank of shape {shape}", [lo, hi])
                if not all(a <= b and (d == -1 or a <= d <= b) for a, b, d in zip(lo, hi, shape, strict=True)):
                    raise _bad(source, f"{where}.min/max", f"min <= shape <= max for shape {shape}", [lo, hi])
                if "opt" in spec:
                    op = _dims(source, f"{where}.opt", spec.get("opt"), 0)
                    if len(op) != len(lo) or not all(a <= o <= b for a, o, b in zip(lo, op, hi, strict=True)):
                        raise _bad(source, f"{where}.opt", f"min <= opt <= max for min {lo}, max {hi}", op)
                if "values" in spec:
                    _validate_shape_values(source, f"{where}.values", spec["values"], shape)
    if "profiles" in h:
        _validate_profiles(h["profiles"], h["inputs"], source)
    if "equal_dims" in h:
        _validate_equal_dims(h["equal_dims"], h["inputs"], source)
    _validate_tree(h.get("out_tree"), len(h["outputs"]), source)
    if "in_tree" in h:
        _validate_in_tree(h["in_tree"], len(h["inputs"]), source)
    if "precision" in h:
        _validate_precision(h["precision"], source)
    if "layers" in h:
        _validate_layers(h["layers"], source)


MAX_LAYERS = 1 << 20


def _validate_precision(p: Any, source: str) -> None:
    if not isinstance(p, dict) or not isinstance(p.get("precision"), str) or len(p) > 16:
        raise _bad(source, "precision", "an object with a 'precision' string", p)
    ov = p.get("overrides", {})
    if not isinstance(ov, dict) or len(ov) > MAX_IO or not all(
        _name(k) and isinstance(v, str) and len(v) <= 16 for k, v in ov.items()
    ):
        raise _bad(source, "precision.overrides", "an object of names to precisions", ov)


def _validate_layers(layers: Any, source: str) -> None:
    if not isinstance(layers, list) or len(layers) > MAX_LAYERS:
        raise _bad(source, "layers", f"a list of at most {MAX_LAYERS} layers", type(layers).__name__)
    for k, entry in enumerate(layers):
        if not (
            isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str) and len(entry[0]) <= 4 * MAX_NAME
            and _name(entry[1]) and isinstance(entry[2], list) and len(entry[2]) <= MAX_IO
            and all(_name(d) for d in entry[2])
        ):
            raise _bad(source, f"layers[{k}]", "[name, layer type, [output types]]", entry)


MAX_PROFILES = 64


def _validate_equal_dims(groups: Any, inputs: list[dict[str, Any]], source: str) -> None:
    """``equal_dims``: groups of at least two dynamic input dims ([input name, dim], each in one group
    at most) assumed equal, with the range [min, max] that lies within each dim's own."""
    specs = {i["name"]: i for i in inputs}
    if not isinstance(groups, list) or len(groups) > MAX_IO * MAX_RANK:
        raise _bad(source, "equal_dims", f"a list of at most {MAX_IO * MAX_RANK} groups of equal dims", groups)
    seen: set[tuple[str, int]] = set()
    for k, g in enumerate(groups):
        where = f"equal_dims[{k}]"
        if not (isinstance(g, dict) and set(g) == {"dims", "min", "max"} and isinstance(g["dims"], list)
                and 2 <= len(g["dims"]) <= MAX_IO * MAX_RANK):
            raise _bad(source, where, "an object of dims (at least two [input name, dim] pairs), min and max", g)
        lo, hi = g["min"], g["max"]
        if not (_is_int(lo) and _is_int(hi) and 0 <= lo <= hi <= MAX_DIM):
            raise _bad(source, f"{where}.min/max", "ints with 0 <= min <= max", [lo, hi])
        for pair in g["dims"]:
            spec = specs.get(pair[0]) if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) else None
            if spec is None or not (_is_int(pair[1]) and 0 <= pair[1] < len(spec["shape"])):
                raise _bad(source, f"{where}.dims", "[input name, dim] pairs naming dims of the inputs", pair)
            d: int = pair[1]
            if (pair[0], d) in seen:
                raise _bad(source, f"{where}.dims", "dims that appear once in equal_dims", pair)
            seen.add((pair[0], d))
            if not spec["min"][d] <= lo <= hi <= spec["max"][d]:
                raise _bad(source, f"{where}.min/max", f"within the range [{spec['min'][d]}, {spec['max'][d]}] "
                           f"of {pair[0]!r} dim {d}", [lo, hi])


def _validate_shape_values(source: str, where: str, values: Any, shape: list[int]) -> None:
    """The value ranges of a shape input: {"min", "opt", "max"}, one int per element each, min <= opt <= max."""
    n = 1
    for d in shape:
        n *= d
    if not isinstance(values, dict) or set(values) != {"min", "opt", "max"} or len(shape) > 1 or n < 0:
        raise _bad(source, where, "{min, opt, max} of a shape input of rank 0 or 1", values)
    rows = [values[k] for k in ("min", "opt", "max")]
    if not all(isinstance(r, list) and len(r) == n and all(_is_int(v) for v in r) for r in rows):
        raise _bad(source, where, f"three lists of {n} ints", values)
    if not all(a <= b <= c for a, b, c in zip(*rows, strict=True)):
        raise _bad(source, where, "min <= opt <= max per element", values)


def _validate_profiles(profiles: Any, inputs: list[dict[str, Any]], source: str) -> None:
    """``profiles``: one {input name: {"min", "opt", "max"}} per optimization profile, naming every
    input, of its rank, with min <= opt <= max within the input's own min/max."""
    if not isinstance(profiles, list) or not 0 < len(profiles) <= MAX_PROFILES:
        raise _bad(source, "profiles", f"a list of 1 to {MAX_PROFILES} optimization profiles", profiles)
    names = [i["name"] for i in inputs]
    for k, prof in enumerate(profiles):
        if not isinstance(prof, dict) or sorted(prof) != sorted(names):
            raise _bad(source, f"profiles[{k}]", f"an object with one range per input {names}", prof)
        for spec in inputs:
            r = prof[spec["name"]]
            where = f"profiles[{k}][{spec['name']!r}]"
            if not isinstance(r, dict) or sorted(r) != ["max", "min", "opt"]:
                raise _bad(source, where, "an object of min, opt and max", r)
            mn, op, mx = (_dims(source, f"{where}.{key}", r[key], 0) for key in ("min", "opt", "max"))
            if not len(mn) == len(op) == len(mx) == len(spec["min"]) or not all(
                lo <= a <= b <= c <= hi for lo, a, b, c, hi in zip(spec["min"], mn, op, mx, spec["max"], strict=True)
            ):
                raise _bad(
                    source, where, f"min <= opt <= max of the input's rank, within its min {spec['min']} and "
                    f"max {spec['max']}", r,
                )


def _validate_in_tree(root: Any, nleaves: int, source: str) -> None:
    """The structure of the inputs (tuples, lists and DynamicCaches of the engine's input tensors): a
    tuple of the model's arguments whose leaves are the inputs 0, 1, ... each once, in order."""
    if not (isinstance(root, dict) and isinstance(root.get("tuple"), list) and set(root) == {"tuple"}):
        raise _bad(source, "in_tree", "a tuple node of the model's arguments", root)
    _validate_tree(root, nleaves, source, "in_tree", ("t", "tuple", "list", "cache"))
    order: list[int] = []
    todo: list[Any] = [root]
    while todo:  # depth first, left to right: the order flatten_args gives the inputs in
        node = todo.pop()
        if "t" in node:
            order.append(node["t"])
        elif "cache" in node:
            todo.extend(reversed([leaf for pair in node["layers"] for leaf in pair]))
        else:
            todo.extend(reversed(node.get("tuple", node.get("list", []))))
    if order != list(range(nleaves)):
        raise _bad(source, "in_tree", f"the inputs 0 to {nleaves - 1}, each once and in order", order[:16])


def _validate_cache(node: dict[str, Any], where: str, source: str) -> list[Any]:
    """A DynamicCache node: its kind and one [key, value] pair of tensor leaves per layer."""
    if node["cache"] != "DynamicCache" or set(node) != {"cache", "layers"}:
        raise _bad(source, where, 'a cache node {"cache": "DynamicCache", "layers": [...]}', sorted(node)[:5])
    layers = node["layers"]
    if not isinstance(layers, list) or not 0 < len(layers) <= MAX_IO:
        raise _bad(source, f"{where}.layers", f"a list of 1 to {MAX_IO} [key, value] pairs", layers)
    leaves = []
    for i, pair in enumerate(layers):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, dict) and set(x) == {"t"} for x in pair)):
            raise _bad(source, f"{where}.layers[{i}]", "a [key, value] pair of tensor nodes", pair)
        leaves += [(x, f"{where}.layers[{i}][{j}]") for j, x in enumerate(pair)]
    return leaves


def _validate_tree(root: Any, nleaves: int, source: str, name: str = "out_tree",
                   allowed: tuple[str, ...] = ("t", "c", "tuple", "list", "dict", "cache")) -> None:
    import torch  # NOTE: only for the names of torch.return_types

    todo: list[tuple[Any, int, str]] = [(root, 0, name)]
    count = 0
    while todo:
        node, depth, where = todo.pop()
        count += 1
        if count > MAX_TREE_NODES:
            raise _bad(source, name, f"at most {MAX_TREE_NODES} nodes", f"more than {MAX_TREE_NODES}")
        if depth > MAX_TREE_DEPTH:
            raise _bad(source, name, f"nested at most {MAX_TREE_DEPTH} deep", f"{where} deeper")
        if not isinstance(node, dict):
            raise _bad(source, where, "an output structure node (an object)", node)
        kinds = [k for k in ("t", "c", "tuple", "list", "dict", "cache") if k in node]
        if len(kinds) != 1 or kinds[0] not in allowed:
            raise _bad(source, where, f"a node with one of {', '.join(allowed)}", sorted(node)[:5])
        kind = kinds[0]
        v = node[kind]
        if kind == "t":
            if not (_is_int(v) and 0 <= v < nleaves):
                what = "an output" if name == "out_tree" else "an input"
                raise _bad(source, f"{where}.t", f"{what} index in [0, {nleaves})", v)
        elif kind == "cache":
            todo.extend((x, depth + 1, w) for x, w in _validate_cache(node, where, source))
        elif kind == "c":
            if not (v is None or isinstance(v, (bool, int, float)) or (isinstance(v, str) and len(v) <= MAX_CONSTANT_CHARS)):
                raise _bad(source, f"{where}.c", "null, a bool, a number or a string", v)
            if isinstance(v, int) and abs(v) > 1 << 64:
                raise _bad(source, f"{where}.c", "an int of at most 64 bits", v)
        elif kind in ("tuple", "list"):
            if not isinstance(v, list):
                raise _bad(source, f"{where}.{kind}", "a list of nodes", v)
            if kind == "tuple":
                _validate_tuple_type(node, len(v), where, source, torch)
            todo.extend((x, depth + 1, f"{where}.{kind}[{i}]") for i, x in enumerate(v))
        else:
            if not isinstance(v, list):
                raise _bad(source, f"{where}.dict", "a list of [key, node] pairs", v)
            if "model_output" in node:
                _validate_model_output(node["model_output"], v, where, source)
            for i, pair in enumerate(v):
                if not (isinstance(pair, list) and len(pair) == 2 and (isinstance(pair[0], str) or _is_int(pair[0]))):
                    raise _bad(source, f"{where}.dict[{i}]", "a [str or int key, node] pair", pair)
                todo.append((pair[1], depth + 1, f"{where}.dict[{i}]"))


def _validate_tuple_type(node: dict[str, Any], n: int, where: str, source: str, torch: Any) -> None:
    if "return_type" in node:
        rt = node["return_type"]
        cls = getattr(torch.return_types, rt, None) if isinstance(rt, str) and rt.isidentifier() else None
        if not (isinstance(cls, type) and issubclass(cls, tuple) and _is_int(getattr(cls, "n_sequence_fields", None))):
            raise _bad(source, f"{where}.return_type", "the name of a torch.return_types type", rt)
        arity = getattr(cls, "n_sequence_fields", None)
        if n != arity:  # NOTE: else decode_tree's cls(items) raises TypeError at the first call
            raise _bad(source, f"{where}.tuple", f"{arity} items (torch.return_types.{rt})", n)
    if "namedtuple" in node:
        name, fields = node["namedtuple"], node.get("fields")
        if not (_name(name) and name.isidentifier() and not keyword.iskeyword(name)):
            raise _bad(source, f"{where}.namedtuple", "a Python identifier", name)
        if not isinstance(fields, list) or len(fields) > MAX_FIELDS:
            raise _bad(source, f"{where}.fields", f"a list of at most {MAX_FIELDS} field names", fields)
        if len(fields) != n:
            raise _bad(source, f"{where}.fields", f"{n} names (one per item)", len(fields))
        ok = all(
            _name(f) and f.isidentifier() and not keyword.iskeyword(f) and not f.startswith("_") for f in fields
        )
        if not ok or len(set(fields)) != len(fields):
            raise _bad(source, f"{where}.fields", "unique identifiers not starting with '_'", fields)


def _dotted(v: Any) -> bool:
    return _name(v) and all(p.isidentifier() and not keyword.iskeyword(p) for p in v.split("."))


def _validate_model_output(mo: Any, pairs: list[Any], where: str, source: str) -> None:
    """A transformers ModelOutput node: its class's module and qualname (dotted identifiers), str keys."""
    if not (isinstance(mo, dict) and set(mo) == {"module", "qualname"}):
        raise _bad(source, f"{where}.model_output", "an object with module and qualname", mo)
    for key in ("module", "qualname"):
        if not _dotted(mo[key]):
            raise _bad(source, f"{where}.model_output.{key}", f"a dotted Python name of at most {MAX_NAME} characters", mo[key])
    if len(pairs) > MAX_FIELDS:
        raise _bad(source, f"{where}.dict", f"at most {MAX_FIELDS} fields of a ModelOutput", len(pairs))
    if not all(isinstance(p, list) and p and isinstance(p[0], str) for p in pairs):
        raise _bad(source, f"{where}.dict", "[str key, node] pairs (a ModelOutput has field names)", pairs)
