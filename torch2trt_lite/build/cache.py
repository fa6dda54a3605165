"""The engine cache of ``convert(..., cache_dir=PATH)``: engine files keyed by what made them.

The key is a SHA-256 of:

* the model's structure: ``repr(model)``, the module and qualified name of every submodule's class,
  the code of each class's ``forward`` (its bytecode, constants and names) and each submodule's
  plain attributes (numbers, strings, tuples of them, tensors);
* its parameters and buffers (persistent or not): name, dtype, shape and bytes of each, in order;
* the example inputs' names, dtypes, shapes and device type (not their values);
* the convert options that change the engine (workspace, target GPUs, output names, ...);
* the backend's name and version (and, for TensorRT, the GPU's name and compute capability),
  the torch version and ``torch2trt_lite.__version__``.

The key does not cover code that ``forward`` calls outside the model's classes (helper functions,
converters registered at run time): after changing that code, use a fresh ``cache_dir`` (or empty it).

A hit loads ``cache_dir/<key>.engine`` with :func:`torch2trt_lite.load` instead of tracing and
building; a miss converts and saves the engine there atomically (a temporary file, then a rename),
so concurrent writers of one key all succeed and leave one whole file. An entry that does not load
(:class:`~torch2trt_lite.errors.EngineFileError`) is removed and rebuilt, with a warning.

Hits and misses are logged at INFO on the ``torch2trt_lite`` logger, recorded on the returned module
(``trt_model.conversion_stats["cache"]`` is ``"hit"`` or ``"miss"``) and counted by :func:`stats`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
import types
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.build.inputs import default_names
from torch2trt_lite.errors import EngineFileError, Torch2TRTError

if TYPE_CHECKING:
    from torch2trt_lite.build.options import ConvertOptions, Setup, Target

log = logging.getLogger("torch2trt_lite")

_STATS = {"hits": 0, "misses": 0, "rebuilt": 0}
_LOCK = threading.Lock()
_CHUNK = 1 << 24  # tensor bytes hashed per update (a big weight is not copied whole to the CPU)


def stats() -> dict[str, int]:
    """Counts of this process: ``hits``, ``misses`` and ``rebuilt`` (corrupt entries replaced)."""
    with _LOCK:
        return dict(_STATS)


def reset_stats() -> None:
    with _LOCK:
        for k in _STATS:
            _STATS[k] = 0


def count(what: str) -> None:
    """Count one ``hits``, ``misses`` or ``rebuilt`` in :func:`stats`."""
    with _LOCK:
        _STATS[what] += 1


# ------------------------------------------------------------------------------------- key
def _code(fn: Any, h: Any, depth: int = 0) -> None:
    code = getattr(fn, "__code__", None)
    if code is None:
        func = getattr(fn, "__func__", None)
        code = getattr(func, "__code__", None)
    if code is None:
        h.update(repr(fn).encode())
        return
    _code_object(code, h, depth)


def _code_object(code: types.CodeType, h: Any, depth: int) -> None:
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            if depth < 8:
                _code_object(c, h, depth + 1)
        else:
            h.update(repr(c).encode())


def _tensor(t: torch.Tensor, h: Any) -> None:
    t = t.detach()
    if t.is_quantized:
        h.update(str(t.qscheme()).encode())
        if t.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
            h.update(repr((t.q_scale(), t.q_zero_point())).encode())
        else:
            _tensor(t.q_per_channel_scales(), h)
            _tensor(t.q_per_channel_zero_points(), h)
        t = t.int_repr()
    if t.layout != torch.strided:
        t = t.to_dense()
    h.update(repr((str(t.dtype), tuple(t.shape))).encode())
    flat = t.reshape(-1).contiguous()
    if flat.is_complex():
        flat = torch.view_as_real(flat).reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.to(torch.uint8)
    raw = flat.view(torch.uint8) if flat.numel() else flat.to(torch.uint8)
    for start in range(0, raw.numel(), _CHUNK):
        piece = raw[start : start + _CHUNK].cpu().contiguous()
        h.update(piece.numpy().data)


_PLAIN = (int, float, bool, str, type(None))


def _plain(v: Any) -> bool:
    if isinstance(v, _PLAIN):
        return True
    if isinstance(v, (tuple, list)):
        return len(v) < 1000 and all(_plain(x) for x in v)
    return False


_SKIP = {"_parameters", "_buffers", "_modules", "training", "_non_persistent_buffers_set"}


def _model(model: Any, h: Any) -> None:
    h.update(b"model\0")
    if not isinstance(model, torch.nn.Module):  # (a function's repr holds its address: not hashed)
        _callable(model, h)
        return
    h.update(repr(model).encode())
    for name, m in model.named_modules(remove_duplicate=False):
        cls = type(m)
        h.update(f"\0{name}\0{cls.__module__}.{cls.__qualname__}\0".encode())
        _code(cls.forward, h)
        for k in sorted(vars(m)):
            if k in _SKIP or k.startswith("_forward") or k.endswith("_hooks"):
                continue
            v = vars(m)[k]
            if isinstance(v, torch.Tensor):
                h.update(f"\0attr {k}".encode())
                _tensor(v, h)
            elif _plain(v):
                h.update(f"\0attr {k}={v!r}".encode())
    for kind, items in (("param", model.named_parameters(remove_duplicate=False)),
                        ("buffer", model.named_buffers(remove_duplicate=False))):
        for name, t in items:
            h.update(f"\0{kind} {name}\0".encode())
            _tensor(t, h)


def _callable(fn: Any, h: Any) -> None:
    """A plain callable: its name and code, and the modules it reaches (bound ``self``, closure
    cells, ``functools.partial`` arguments, globals its code names), hashed as models."""
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    h.update(f"{getattr(fn, '__module__', '')}.{name}".encode())
    _code(fn, h)
    found: list[Any] = []
    inner = getattr(fn, "func", None)  # functools.partial
    if inner is not None:
        found += [inner, *getattr(fn, "args", ()), *getattr(fn, "keywords", {}).values()]
    found.append(getattr(fn, "__self__", None))
    for cell in getattr(fn, "__closure__", None) or ():
        with contextlib.suppress(ValueError):  # an empty cell
            found.append(cell.cell_contents)
    code = getattr(fn, "__code__", None)
    glob = getattr(fn, "__globals__", {})
    if code is not None:
        found += [glob.get(n) for n in code.co_names]
    for obj in found:
        if isinstance(obj, torch.nn.Module):
            _model(obj, h)
        elif isinstance(obj, torch.Tensor):
            _tensor(obj, h)


def key(model: Any, inputs: Sequence[torch.Tensor], input_names: Sequence[str], options: dict[str, Any],
        backend: Any) -> str:
    """The cache key (64 hex digits) of converting ``model`` with ``inputs`` on ``backend``."""
    from torch2trt_lite._version import __version__

    h = hashlib.sha256()
    device: Any = None
    if backend.name == "tensorrt" and torch.cuda.is_available():
        device = [torch.cuda.get_device_name(), list(torch.cuda.get_device_capability())]
    head = {
        "torch2trt_lite": __version__,
        "torch": torch.__version__,
        "backend": backend.name,
        "backend_version": backend.version,
        "device": device,
        "inputs": [
            [str(n), str(x.dtype), list(x.shape), x.device.type] for n, x in zip(input_names, inputs, strict=True)
        ],
        "options": options,
    }
    h.update(json.dumps(head, sort_keys=True, default=repr).encode())
    _model(model, h)
    return h.hexdigest()


# ----------------------------------------------------------------------------- lookup/store
def entry_path(cache_dir: str | os.PathLike[str], cache_key: str) -> str:
    folder = os.fspath(cache_dir)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise Torch2TRTError(
            f"cache_dir={folder!r} cannot be created ({e.strerror or e}); pass a folder you can write to"
        ) from None
    if not os.path.isdir(folder):
        raise Torch2TRTError(f"cache_dir={folder!r} is not a folder; pass a folder for the engine files")
    return os.path.join(folder, f"{cache_key}.engine")


def lookup(path: str, backend: str, input_names: Sequence[str], *, cuda_graph: bool = False) -> Any:
    """The cached TRTModule at ``path``, or None (no entry, or a bad one: removed, with a warning)."""
    from torch2trt_lite.runtime.module import TRTModule

    if not os.path.exists(path):
        return None
    try:
        module = TRTModule.load(path, cuda_graph=cuda_graph)
        meta = module.metadata
        if meta.get("backend") != backend or [i["name"] for i in meta.get("inputs", [])] != list(input_names):
            raise EngineFileError(f"{path}: the entry is for another backend or other inputs than its name says")
    except EngineFileError as e:
        log.warning("torch2trt-lite: engine cache entry %s does not load (%s); removing it and rebuilding", path, e)
        count("rebuilt")
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as err:
            log.warning("torch2trt-lite: cannot remove %s (%s); it will be overwritten", path, err.strerror or err)
        return None
    return module


def find(
    cache_dir: str | os.PathLike[str], model: Any, setup: Setup, target: Target, options: ConvertOptions,
) -> tuple[str, Any]:
    """The entry of a conversion in ``cache_dir`` (its path), and its module on a hit (with
    ``conversion_stats`` saying so) or None on a miss; both are counted and logged."""
    res, be = setup.res, target.backend
    names = default_names(setup.input_names, len(res.examples))
    opts: dict[str, Any] = {
        "max_workspace_size": setup.workspace,
        "compute_capabilities": [str(c.name) for c in target.capabilities],
        "input_names": names,
        "output_names": list(options.output_names) if options.output_names is not None else None,
    }
    if res.dynamic:
        opts["profiles"] = [[[list(s) for s in r] for r in p] for p in res.profiles]
    if setup.policy is not None or setup.out_float is not None:
        opts["precision"] = setup.precision_meta
    if setup.in_tree is not None:
        opts["in_tree"] = setup.in_tree
    t_key = time.perf_counter()
    entry = entry_path(cache_dir, key(model, res.examples, names, opts, be))
    t_key = time.perf_counter() - t_key
    t_load = time.perf_counter()
    found = lookup(entry, be.name, names, cuda_graph=options.cuda_graph)
    if found is None:
        count("misses")
        log.info("torch2trt-lite: engine cache miss: building %s", entry)
        return entry, None
    t_load = time.perf_counter() - t_load
    count("hits")
    log.info("torch2trt-lite: engine cache hit: %s", entry)
    found.conversion_stats = {"cache": "hit", "key_s": t_key, "load_s": t_load}
    return entry, found


def store(module: Any, path: str) -> None:
    """Save ``module`` as the entry ``path`` (atomically); a failure is a warning, not an error."""
    try:
        module.save(path)
    except EngineFileError as e:
        log.warning("torch2trt-lite: the engine was built but not cached: %s", e)


__all__ = ["count", "entry_path", "find", "key", "lookup", "reset_stats", "stats", "store"]
