"""The converter registry: one frozen record per target, registered with one decorator.

A *target* is what the tracer patches: a function (``torch.nn.functional.relu``), a
``torch.Tensor`` method or operator (``torch.Tensor.add_``, ``torch.Tensor.__radd__``), an
``nn.Module`` subclass (the converter receives the whole module call) or an
``autograd.Function`` subclass (its ``apply``). Targets may be given as objects or dotted names.

    from torch2trt_lite import converter

    @converter(torch.nn.functional.relu, torch.relu, torch.Tensor.relu)
    def convert_relu(ctx, call):
        return ctx.network.add_activation(ctx.itensor(call.arg(0, "input")),
                                          ctx.trt.ActivationType.RELU).get_output(0)

Registering a target twice is an error unless ``override=True``.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from .errors import Torch2TRTError

ConverterFn = Callable[..., Any]

# Namespaces searched to name a target object (first match wins).
_NAMESPACES = (
    "torch.nn.functional",
    "torch",
    "torch.Tensor",
    "torch.special",
    "torch.linalg",
    "torch.fft",
)


@dataclass(frozen=True)
class Call:
    """One intercepted call: the target, the Python arguments as given, and the torch result."""

    target: Any
    qualname: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    output: Any
    module_path: str = ""
    signature: inspect.Signature | None = field(default=None, compare=False, repr=False)

    def arg(self, index: int, name: str, default: Any = inspect.Parameter.empty) -> Any:
        """Argument by position or keyword (the way Python binds it), else ``default``."""
        if index < len(self.args):
            return self.args[index]
        if name in self.kwargs:
            return self.kwargs[name]
        if default is inspect.Parameter.empty:
            raise Torch2TRTError(f"{self.qualname}: missing argument '{name}' (position {index})")
        return default

    def named(self, names: Iterable[str], defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Every argument of a signature by name (``names`` in positional order), as :meth:`arg` binds it;
        a name without a default in ``defaults`` is required."""
        defaults = defaults or {}
        return {n: self.arg(i, n, defaults.get(n, inspect.Parameter.empty)) for i, n in enumerate(names)}


@dataclass(frozen=True)
class ConverterRecord:
    target: Any
    qualname: str
    kind: str  # "function", "method", "property", "module", "autograd"
    owners: tuple[tuple[Any, str], ...]  # where the target is patched: (object, attribute)
    converter: ConverterFn
    check: Callable[[Call], str | None] | None = None
    dynamic_shapes: bool = True
    source: str = ""
    # converted even when no argument is traced (fake quantization of a weight: constant -> Q -> DQ)
    constant_inputs: bool = False
    # the converter's return value is the call's Python result (a size computed with symbolic sizes,
    # e.g. ``min(k, x.size(0))`` as torch2trt_lite.trace.symbolic.sym_min), not network tensors to bind
    python_result: bool = False


class Registry:
    def __init__(self) -> None:
        self._records: dict[str, ConverterRecord] = {}
        self._lock = threading.Lock()
        self._version = 0

    def add(self, record: ConverterRecord, override: bool = False) -> None:
        with self._lock:
            old = self._records.get(record.qualname)
            if old is not None and not override:
                raise Torch2TRTError(
                    f"a converter for {record.qualname} is already registered ({old.source}); "
                    "pass override=True to replace it"
                )
            self._records[record.qualname] = record
            self._version += 1

    def remove(self, qualname: str) -> None:
        with self._lock:
            self._records.pop(qualname, None)
            self._version += 1

    def get(self, qualname: str) -> ConverterRecord | None:
        return self._records.get(qualname)

    def records(self) -> list[ConverterRecord]:
        return list(self._records.values())

    def __contains__(self, qualname: object) -> bool:
        return qualname in self._records

    def __len__(self) -> int:
        return len(self._records)


REGISTRY = Registry()


# ------------------------------------------------------------------------------- naming
def _import_dotted(name: str) -> tuple[Any, str, Any]:
    """Resolve "a.b.c.attr" to (owner object, attribute, value)."""
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        owner = obj
        try:
            for p in parts[i:-1]:
                owner = getattr(owner, p)
            value = getattr(owner, parts[-1])
        except AttributeError:
            break
        return owner, parts[-1], value
    raise Torch2TRTError(f"cannot resolve converter target {name!r}: no such importable attribute")


_INDEX: dict[str, dict[int, list[str]]] = {}


def _namespace(ns_name: str) -> Any:
    if ns_name == "torch.Tensor":
        return torch.Tensor
    return importlib.import_module(ns_name)


def _index(ns_name: str) -> dict[int, list[str]]:
    """id(value) -> attribute names, for one namespace (built once)."""
    idx = _INDEX.get(ns_name)
    if idx is None:
        idx = {}
        try:
            ns = _namespace(ns_name)
        except ImportError:
            ns = None
        if ns is not None:
            items = vars(ns).items() if ns is not torch.Tensor else ((n, getattr(ns, n, None)) for n in dir(ns))
            for name, value in items:
                idx.setdefault(id(value), []).append(name)
        _INDEX[ns_name] = idx
    return idx


def owners_of_function(obj: Any) -> list[tuple[Any, str, str]]:
    """Every (owner, attr, qualname) through which a function is reachable: its defining module and
    public parents, then torch's public namespaces. The first one names the target."""
    candidates: list[str] = []
    mod = getattr(obj, "__module__", None)
    if isinstance(mod, str):
        parts = mod.split(".")
        candidates = [
            ".".join(parts[:i]) for i in range(len(parts), 0, -1) if not any(p.startswith("_") for p in parts[:i])
        ]
    found: list[tuple[Any, str, str]] = []
    seen: set[str] = set()
    for ns_name in candidates + [n for n in _NAMESPACES if n not in candidates]:
        if ns_name in seen:
            continue
        seen.add(ns_name)
        for name in _index(ns_name).get(id(obj), []):
            ns = _namespace(ns_name)
            if getattr(ns, name, None) is obj:
                found.append((ns, name, f"{ns_name}.{name}"))
    return found


def resolve_target(target: Any) -> tuple[str, str, tuple[tuple[Any, str], ...], Any]:
    """(qualname, kind, owners, target object) for a target object or dotted name."""
    if isinstance(target, str):
        owner, attr, value = _import_dotted(target)
        if isinstance(value, type):
            return _resolve_class(value)
        if owner is torch.Tensor and (inspect.isgetsetdescriptor(value) or isinstance(value, property)):
            # NOTE: a property (``x.T``, ``x.mT``) cannot be patched with a function; the strict
            # guard sees its getter and dispatches it to the converter instead (no owners to patch).
            return target, "property", (), value
        if owner is torch.Tensor or isinstance(owner, type):
            return target, "method", ((owner, attr),), value
        owners = owners_of_function(value) or [(owner, attr, target)]
        if not any(o is owner and a == attr for o, a, _ in owners):
            owners.append((owner, attr, target))
        return target, "function", tuple((o, a) for o, a, _ in owners), value
    if isinstance(target, type):
        return _resolve_class(target)
    owners = owners_of_function(target)
    if not owners:
        raise Torch2TRTError(
            f"cannot find where {target!r} lives; register it by its dotted name, e.g. 'package.module.func'"
        )
    qual = owners[0][2]
    kind = "method" if owners[0][0] is torch.Tensor else "function"
    if kind == "method":
        owners = [o for o in owners if o[0] is torch.Tensor]
    return qual, kind, tuple((o, a) for o, a, _ in owners), target


def _resolve_class(cls: type) -> tuple[str, str, tuple[tuple[Any, str], ...], Any]:
    qual = f"{cls.__module__}.{cls.__qualname__}"
    if issubclass(cls, torch.nn.Module):
        return qual, "module", ((cls, "forward"),), cls
    if issubclass(cls, torch.autograd.Function):
        return qual, "autograd", ((cls, "apply"),), cls
    raise Torch2TRTError(f"{qual}: a class target must be an nn.Module or an autograd.Function subclass")


# ------------------------------------------------------------------------------ decorator
def converter(
    *targets: Any,
    check: Callable[[Call], str | None] | None = None,
    override: bool = False,
    dynamic_shapes: bool = True,
    registry: Registry | None = None,
    constant_inputs: bool = False,
    python_result: bool = False,
) -> Callable[[ConverterFn], ConverterFn]:
    """Register ``fn(ctx, call)`` as the converter of each target.

    ``check(call)`` may return a reason string when these arguments are unsupported; the tracer
    then reports the call as unsupported instead of converting it.

    ``constant_inputs=True``: the call is converted while tracing even when none of its arguments
    derives from the inputs (otherwise it runs in PyTorch and its result becomes a constant), e.g.
    fake quantization of a weight, which must become constant -> Quantize -> Dequantize layers.

    ``python_result=True``: the converter's return value replaces the call's result in the model's
    code (for helpers that compute sizes, which return a symbolic size instead of the traced int).
    """
    if not targets:
        raise Torch2TRTError("converter() needs at least one target")
    reg = registry if registry is not None else REGISTRY

    def deco(fn: ConverterFn) -> ConverterFn:
        src = f"{fn.__module__}.{fn.__qualname__}"
        done: set[str] = set()
        for t in targets:
            qual, kind, owners, obj = resolve_target(t)
            if qual in done:  # the same object under two names (torch.relu_ is F.relu_)
                continue
            done.add(qual)
            reg.add(ConverterRecord(obj, qual, kind, owners, fn, check, dynamic_shapes, src, constant_inputs,
                                    python_result), override)
        return fn

    return deco


def register_table(
    table: Mapping[Any, Any] | Iterable[tuple[Any, Any]],
    make: Callable[[Any], ConverterFn],
    *,
    check: Callable[[Call], str | None] | None = None,
    registry: Registry | None = None,
) -> None:
    """Register same-shaped ops in one loop: ``make(value)`` builds the converter of each target.

    Keys may be a single target or a tuple of targets sharing one value.
    """
    items = table.items() if isinstance(table, Mapping) else table
    for key, value in items:
        keys = key if isinstance(key, tuple) else (key,)
        fn = make(value)
        converter(*keys, check=check, registry=registry)(fn)


def supported_ops() -> list[str]:
    """Qualified names of every registered target, sorted (with the converters for optional packages
    that are installed, such as transformers: listing them imports those packages)."""
    load_builtin_converters()
    _register_optional(installed=True)
    return sorted(REGISTRY._records)


_LOADED = False
# Converters for optional third-party packages: (package, function that registers them). Run once the
# package is in ``sys.modules``, so loading the converters never imports a heavy optional package itself.
_WHEN_IMPORTED: list[tuple[str, Callable[[], None]]] = []
_WHEN_IMPORTED_LOCK = threading.Lock()


def when_imported(package: str, register: Callable[[], None]) -> None:
    """Call ``register()`` (which registers converters for ``package``) once the user has imported
    ``package``: at once if it is imported already, else when the next conversion starts."""
    if package in sys.modules:
        register()
    else:
        with _WHEN_IMPORTED_LOCK:
            _WHEN_IMPORTED.append((package, register))


def _register_optional(installed: bool = False) -> None:
    """Register the converters of optional packages the user has imported (or, with ``installed``,
    of every one that is installed, importing it)."""
    if not _WHEN_IMPORTED:
        return
    with _WHEN_IMPORTED_LOCK:
        due = [w for w in _WHEN_IMPORTED if w[0] in sys.modules or (installed and _importable(w[0]))]
        _WHEN_IMPORTED[:] = [w for w in _WHEN_IMPORTED if w not in due]
    for package, register in due:
        if package in sys.modules:
            register()
            continue
        try:  # NOTE: imported for supported_ops() only: one that does not import lists no converters
            register()
        except ImportError:
            continue


def _importable(package: str) -> bool:
    """Whether ``package`` is installed (``find_spec`` of ``a.b`` imports ``a``: a missing or broken
    parent is not installed, not an error)."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def load_builtin_converters() -> None:
    """Register the built-in converters (every family of ``torch2trt_lite.converters`` and the built-in
    plugins' converters) once, and those of the optional packages the user has imported since."""
    global _LOADED
    if not _LOADED:
        _LOADED = True
        importlib.import_module("torch2trt_lite.converters").load()
        importlib.import_module("torch2trt_lite.plugins_cuda")  # built-in plugins register converters
    _register_optional()


