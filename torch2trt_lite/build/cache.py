"""The engine cache of ``convert(..., cache_dir=PATH)``: engine files keyed by what made them.

The key is a SHA-256 of:

* the model's structure: ``repr(model)``, the module and qualified name of every submodule's class,
  the code of each class's ``forward`` (its bytecode, constants and names), each submodule's
  attributes and its forward hooks;
* its parameters and buffers (persistent or not): name, dtype, shape and bytes of each, in order;
* the example inputs' names, dtypes, shapes and device type (not their values), the shape ranges of
  every profile and the value bounds (``low``, ``high``) of :class:`~torch2trt_lite.Input` entries;
* every convert option that changes the engine: each field of
  :class:`~torch2trt_lite.build.options.ConvertOptions` not in :data:`NOT_KEYED` (which says why each
  there is left out) whose value is not its default, so a new option is in the key by default;
* the backend's name and version (and, for TensorRT, the GPU's name and compute capability),
  the torch version and ``torch2trt_lite.__version__``.

Attributes and option values are hashed by a stable representation (:class:`_Walker`): numbers,
strings and bytes by ``repr``; tensors and numpy arrays by content; lists, tuples, dicts (in their
order), sets (sorted), dataclasses (their fields), enums, functions (their code, defaults and closure
variables), ``functools.partial`` and plain Python objects (their ``__dict__`` and ``__slots__``),
recursively, a cycle as a reference to where it closes; another module by its path in the model;
loggers by name and locks by type (neither computes anything). A value it cannot represent (a file,
a random generator, another C extension's object such as an ``array.array``) turns the cache off for that
call: one warning names it (the module path and attribute), and the engine is built, neither looked up
nor stored (``conversion_stats["cache"]`` is ``"off"``).

The key does not cover code that ``forward`` calls outside the model's classes (helper functions,
globals, converters registered at run time): after changing that code, use a fresh ``cache_dir`` (or empty it).

A hit loads ``cache_dir/<key>.engine`` with :func:`torch2trt_lite.load` instead of tracing and
building; a miss converts and saves the engine there atomically (a temporary file, then a rename),
so concurrent writers of one key all succeed and leave one whole file. An entry that does not load
(:class:`~torch2trt_lite.errors.EngineFileError`) is removed and rebuilt, with a warning.

Hits and misses are logged at INFO on the ``torch2trt_lite`` logger, recorded on the returned module
(``trt_model.conversion_stats["cache"]`` is ``"hit"``, ``"miss"`` or ``"off"``) and counted by
:func:`stats`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import hashlib
import json
import logging
import os
import threading
import time
import types
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
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
        elif isinstance(c, frozenset):  # (``x in {"a", "b"}``: its order follows the process's str hashes)
            h.update(repr(sorted(repr(v) for v in c)).encode())
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
_HOOKS = ("_forward_pre_hooks", "_forward_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs",
          "_forward_hooks_always_called")
_LOCKS = (type(threading.Lock()), type(threading.RLock()))
_VOLATILE = {"_original_object_hash"}  # per-process values in plain objects (transformers' GenerationConfig)
_DEPTH = 100  # nesting of one value past which it counts as one the key cannot represent
_HEAP = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (not a C extension's static type)


class _Walker:
    """Writes a stable representation of values into the hash ``h``: the same bytes in every process
    for equal values (no ids, no addresses). ``bad`` names the first value it cannot represent (the
    key is then not used); ``subs`` maps the model's submodules (by id) to their paths."""

    def __init__(self, h: Any, subs: dict[int, str] | None = None) -> None:
        self.h = h
        self.subs: dict[int, str] = {} if subs is None else subs
        self.bad: str | None = None
        self.active: dict[int, int] = {}  # the containers on the current path (cycles) -> their depth

    def put(self, s: str) -> None:
        self.h.update(s.encode("utf-8", "surrogatepass") + b"\0")

    def value(self, v: Any, where: str) -> None:
        """Hash ``v`` (``where`` names it in ``bad``): plain values by ``repr``, tensors and arrays by
        content, containers, dataclasses, enums, functions and plain objects' attributes recursively."""
        if self.bad is not None:
            return
        if _plain(v) or isinstance(v, (bytes, complex, range)) or v is Ellipsis:
            self.put(repr(v))
        elif isinstance(v, torch.Tensor):
            self.put("tensor")
            _tensor(v, self.h)
        elif isinstance(v, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
            self.put(f"{type(v).__name__}:{v}")
        elif isinstance(v, type):
            self.put(f"class:{v.__module__}.{v.__qualname__}")
        elif isinstance(v, types.ModuleType):
            self.put(f"module:{v.__name__}")
        elif isinstance(v, logging.Logger):  # by name: its handlers (and their locks) compute nothing
            self.put(f"logger:{v.name}")
        elif isinstance(v, _LOCKS):  # a lock's state is not part of what the model computes
            self.put(f"lock:{type(v).__name__}")
        elif isinstance(v, weakref.ref):
            self.value(v(), where)
        elif isinstance(v, enum.Enum):
            self.put(f"enum:{type(v).__module__}.{type(v).__qualname__}.{v.name}")
            self.value(v.value, f"{where}.value")
        elif isinstance(getattr(type(v), "__members__", None), Mapping) and isinstance(getattr(v, "name", None), str):
            self.put(f"enum:{type(v).__module__}.{type(v).__qualname__}.{v.name}")  # a pybind11 enum (TensorRT's)
        elif isinstance(v, np.ndarray) and v.dtype != object:
            self.put(f"ndarray:{v.dtype.str}:{v.shape}")
            self.h.update(np.ascontiguousarray(v).tobytes())
        elif isinstance(v, np.generic) and not isinstance(v, np.object_):
            self.put(f"numpy:{v.dtype.str}:{v!r}")
        elif isinstance(v, torch.nn.Module) and id(v) in self.subs:
            self.put(f"submodule:{self.subs[id(v)]}")
        elif id(v) in self.active:  # a cycle: how far up the current path the container is
            self.put(f"cycle:{len(self.active) - self.active[id(v)]}")
        elif len(self.active) >= _DEPTH:
            self.bad = f"{where} (nested more than {_DEPTH} deep)"
        else:
            self.active[id(v)] = len(self.active)
            try:
                self._container(v, where)
            finally:
                del self.active[id(v)]

    def _container(self, v: Any, where: str) -> None:
        cls = type(v)
        name = f"{cls.__module__}.{cls.__qualname__}"
        if isinstance(v, torch.nn.Module):  # one that is not a submodule of the model
            self.put(f"nn.Module:{name}")
            _module_tree(v, self, where)
        elif isinstance(v, (list, tuple)):
            self.put(f"sequence:{name}:{len(v)}")
            for i, x in enumerate(v):
                self.value(x, f"{where}[{i}]")
        elif isinstance(v, Mapping):
            self.put(f"mapping:{name}:{len(v)}")
            for k, x in v.items():
                self.value(k, f"{where} (a key)")
                self.value(x, f"{where}[{k!r}]")
        elif isinstance(v, (set, frozenset)):  # NOTE: element digests sorted (the iteration order varies)
            digests = []
            for x in v:
                sub = _Walker(hashlib.sha256(), self.subs)
                sub.active = self.active
                sub.value(x, f"{where} (an element)")
                if sub.bad is not None:
                    self.bad = sub.bad
                    return
                digests.append(sub.h.hexdigest())
            self.put(f"set:{name}:{','.join(sorted(digests))}")
        elif isinstance(v, slice):
            self.put("slice")
            self.value((v.start, v.stop, v.step), where)
        elif isinstance(v, functools.partial):
            self.put("partial")
            self.value((v.func, v.args, v.keywords), where)
        elif isinstance(v, types.MethodType):
            self.put("method")
            self.value(v.__func__, where)
            self.value(v.__self__, f"{where}.__self__")
        elif isinstance(v, types.FunctionType):
            self._function(v, where)
        elif isinstance(v, types.BuiltinFunctionType):
            self.put(f"builtin:{getattr(v, '__module__', None)}.{getattr(v, '__qualname__', v.__name__)}")
            owner = getattr(v, "__self__", None)
            if owner is not None and not isinstance(owner, (types.ModuleType, type)):
                self.value(owner, f"{where}.__self__")
        elif dataclasses.is_dataclass(v):
            self.put(f"dataclass:{name}")
            for f in dataclasses.fields(v):
                self.put(f.name)
                self.value(getattr(v, f.name, None), f"{where}.{f.name}")
        elif isinstance(v, types.SimpleNamespace) or (_python_class(cls) and (hasattr(v, "__dict__") or _slots(cls))):
            self.put(f"object:{name}")
            state = dict(getattr(v, "__dict__", {}))
            for s in _slots(cls):
                if s not in state and hasattr(v, s):
                    state[s] = getattr(v, s)
            for k in sorted(state.keys() - _VOLATILE):
                self.put(k)
                self.value(state[k], f"{where}.{k}")
        else:
            self.bad = f"{where} (a {name})"

    def _function(self, fn: types.FunctionType, where: str) -> None:
        self.put(f"function:{fn.__module__}.{fn.__qualname__}")
        _code_object(fn.__code__, self.h, 0)
        self.value(fn.__defaults__, f"{where}.__defaults__")
        self.value(fn.__kwdefaults__, f"{where}.__kwdefaults__")
        for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False):
            try:
                inner = cell.cell_contents
            except ValueError:  # an empty cell
                self.put("empty cell")
                continue
            self.value(inner, f"{where} (its closure variable {var})")


def _python_class(cls: type) -> bool:
    """Whether every class of ``cls``'s MRO but ``object`` comes from a class statement (instances
    keep their whole state in ``__dict__`` and ``__slots__``, none in a C extension's memory)."""
    return all(
        c is object or (c.__flags__ & _HEAP and not c.__module__.startswith(("pybind11", "nanobind")))
        for c in cls.__mro__
    )


def _slots(cls: type) -> list[str]:
    out: list[str] = []
    for c in cls.__mro__:
        s = c.__dict__.get("__slots__", ())
        out += [s] if isinstance(s, str) else [x for x in s if x not in ("__dict__", "__weakref__")]
    return out


def _model(model: Any, w: _Walker) -> None:
    w.h.update(b"model\0")
    if not isinstance(model, torch.nn.Module):  # (a function's repr holds its address: not hashed)
        _callable(model, w)
        return
    for name, m in model.named_modules(remove_duplicate=False):
        w.subs.setdefault(id(m), name)
    _module_tree(model, w, "")


def _module_tree(model: torch.nn.Module, w: _Walker, where: str) -> None:
    """``model``'s structure (``repr``, classes, ``forward`` code, attributes, forward hooks), then
    its parameters and buffers."""
    h = w.h
    h.update(repr(model).encode())
    for name, m in model.named_modules(remove_duplicate=False):
        cls = type(m)
        h.update(f"\0{name}\0{cls.__module__}.{cls.__qualname__}\0".encode())
        _code(cls.forward, h)
        path = ".".join(p for p in (where, name) if p)
        attrs = vars(m)
        for k in sorted(attrs):
            if k in _SKIP or k.startswith("_forward") or k.endswith("_hooks"):
                continue
            v = attrs[k]
            if isinstance(v, torch.Tensor):
                h.update(f"\0attr {k}".encode())
                _tensor(v, h)
            elif _plain(v):
                h.update(f"\0attr {k}={v!r}".encode())
            else:
                h.update(f"\0attr {k}~".encode())
                w.value(v, f"{path}.{k}" if path else k)
        if attrs.get("_forward_pre_hooks") or attrs.get("_forward_hooks"):  # (their ids are left out)
            for k in _HOOKS:
                h.update(f"\0{k}~".encode())
                w.value(list(attrs.get(k, {}).values()), f"{path}.{k}" if path else k)
        if w.bad is not None:
            return
    for kind, items in (("param", model.named_parameters(remove_duplicate=False)),
                        ("buffer", model.named_buffers(remove_duplicate=False))):
        for name, t in items:
            h.update(f"\0{kind} {name}\0".encode())
            _tensor(t, h)


def _callable(fn: Any, w: _Walker) -> None:
    """A plain callable: its name and code, and the modules it reaches (bound ``self``, closure
    cells, ``functools.partial`` arguments, globals its code names), hashed as models."""
    h = w.h
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
            _model(obj, w)
        elif isinstance(obj, torch.Tensor):
            _tensor(obj, h)


def digest(model: Any, inputs: Sequence[torch.Tensor], input_names: Sequence[str], options: dict[str, Any],
           backend: Any) -> tuple[str | None, str | None]:
    """(the cache key, None), or (None, what the key cannot represent: a model attribute's path)."""
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
    w = _Walker(h)
    _model(model, w)
    return (None, f"the model's attribute {w.bad}") if w.bad is not None else (h.hexdigest(), None)


def key(model: Any, inputs: Sequence[torch.Tensor], input_names: Sequence[str], options: dict[str, Any],
        backend: Any) -> str | None:
    """The cache key (64 hex digits) of converting ``model`` with ``inputs`` on ``backend``; None
    when the model holds a value the key cannot represent (see :func:`digest`)."""
    return digest(model, inputs, input_names, options, backend)[0]


# convert's options that are not in the key as given, and why (every other one is, where it is not
# its default: a new option is in the key unless it is named here)
NOT_KEYED = {
    "backend": "the backend that runs (its name and version) is in the key",
    "input_names": "the engine's input names (these or the defaults) are in the key",
    "compute_capabilities": "the target compute capabilities they resolve to are in the key",
    "max_batch_size": "the profiles' shape ranges it makes are in the key",
    "dynamic_batch": "the profiles' shape ranges it makes are in the key",
    "profiles": "the profiles' shape ranges (and the Inputs' value bounds) are in the key",
    "progress": "a display of the build",
    "cache_dir": "where the entries are",
    "timing_cache": "kernel timings: they choose among kernels that compute the same",
    "cuda_graph": "applied to the loaded module (a hit gets it too)",
    "int8_calib_dataset": "the scales it calibrates are buffers of the quantized model, in the key",
}


def option_items(options: ConvertOptions) -> tuple[dict[str, Any], str | None]:
    """The options in the key (those not in :data:`NOT_KEYED` whose value is not the default):
    (``{"option <name>": value or its digest}``, None), or ({}, which option the key cannot represent)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(options):
        v = getattr(options, f.name)
        if f.name in NOT_KEYED or (f.default is not dataclasses.MISSING and _same(v, f.default)):
            continue
        if v is None or isinstance(v, (bool, int, str)):
            out[f"option {f.name}"] = v
            continue
        w = _Walker(hashlib.sha256())
        w.value(v, f"option {f.name}")
        if w.bad is not None:
            return {}, w.bad
        out[f"option {f.name}"] = w.h.hexdigest()
    return out, None


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


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
) -> tuple[str | None, Any]:
    """The entry of a conversion in ``cache_dir`` (its path), and its module on a hit (with
    ``conversion_stats`` saying so) or None on a miss; both are counted and logged. (None, None) when
    the key cannot represent the model or an option: the conversion is not cached, with one warning."""
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
    if res.ranged and any(res.ranged):  # the value bounds of Inputs (the random examples, shape inputs)
        bounds = res.bounds or [(0, 100)] * len(res.ranged)
        opts["bounds"] = [list(b) if r else None for b, r in zip(bounds, res.ranged, strict=True)]
    given, bad = option_items(options)
    opts.update(given)
    t_key = time.perf_counter()
    cache_key, bad = (None, bad) if bad is not None else digest(model, res.examples, names, opts, be)
    t_key = time.perf_counter() - t_key
    if cache_key is None:
        log.warning(
            "torch2trt-lite: engine cache not used for this conversion: %s cannot be part of the cache key (it "
            "hashes numbers, strings, tensors, containers, dataclasses, enums, functions and plain objects' "
            "attributes); the engine is built, neither looked up nor stored. Keep such state out of the model's "
            "attributes, or convert without cache_dir", bad,
        )
        return None, None
    entry = entry_path(cache_dir, cache_key)
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
