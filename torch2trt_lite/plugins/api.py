"""Declaring a plugin: one custom op, one TensorRT plugin node, a CUDA kernel and a torch reference.

A declaration (:func:`declare_plugin`) states the plugin's contract once:

* identity: ``name``, ``version``, ``namespace`` (the key TensorRT's plugin registry uses);
* inputs (:class:`Input`: name, rank, fixed dtype or the plugin's float type ``T``, optional inputs
  present when a bool attribute says so) and output names;
* typed attributes (:func:`int_attr`, :func:`float_attr`, ...), taken from the call;
* the output shape rule, written with ordinary arithmetic on input dimensions (``+ - * //`` and
  :func:`cdiv`, :func:`dmax`, :func:`dmin`), so it is evaluated on ints by the sim and turned into
  TensorRT dimension expressions for dynamic shapes;
* the output dtype rule (default: every output has the type ``T`` of the float inputs);
* the torch reference implementation (run by the sim, and the ground truth of the kernel tests),
  called as ``reference(*inputs, **attrs)`` with None for an absent optional input and without
  the presence attributes;
* the CUDA source with its entry points and launch configuration (:class:`CudaKernel`);
* the torch callables it replaces (``targets``): a function or ``torch.library`` op, an
  ``nn.Module`` subclass or an ``autograd.Function`` subclass. A converter is registered for each,
  so ``convert`` turns those calls into one plugin layer.

The registry here maps (name, version, namespace) to declarations; the sim's plugin registry and
the TensorRT plugin creators are both views of it, and a saved engine finds its plugin again by that
key in the loading process.
"""

from __future__ import annotations

import functools
import math
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..errors import ConversionError, PluginError

DEFAULT_NAMESPACE = "torch2trt_lite"
FLOAT_TYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16)


# ---------------------------------------------------------------------------------- attributes
class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
_KINDS = ("int", "float", "bool", "str", "ints", "floats")


@dataclass(frozen=True)
class Attr:
    """A typed plugin attribute: ``kind`` is int, float, bool, str, ints or floats."""

    kind: str
    default: Any = REQUIRED
    length: int | None = None  # for ints / floats: the exact length, or None for any
    doc: str = ""

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise PluginError(f"attribute kind must be one of {_KINDS}, got {self.kind!r}")
        if self.default is not REQUIRED:
            object.__setattr__(self, "default", self.coerce("default", self.default))

    def coerce(self, name: str, value: Any) -> Any:
        """``value`` converted to this attribute's type, or a PluginError saying why it cannot be."""
        kind = self.kind
        try:
            if kind in ("ints", "floats"):
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    value = (value,) * (self.length or 1)
                seq = tuple(value)
                out: tuple[Any, ...] = tuple(_scalar(kind[:-1], v) for v in seq)
                if self.length is not None and len(out) != self.length:
                    raise ValueError(f"expected {self.length} values, got {len(out)}")
                return out
            return _scalar(kind, value)
        except (TypeError, ValueError) as e:
            raise PluginError(f"attribute '{name}': cannot use {value!r} as {kind} ({e})") from None


def _scalar(kind: str, v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        if v.numel() != 1:
            raise ValueError("a tensor attribute must hold exactly one value")
        v = v.item()
    if kind == "int":
        if isinstance(v, float) and not v.is_integer():
            raise ValueError("not an integer")
        if isinstance(v, str):
            raise TypeError("a string is not an int")
        return int(v)
    if kind == "float":
        if isinstance(v, str):
            raise TypeError("a string is not a float")
        return float(v)
    if kind == "bool":
        if not isinstance(v, (bool, int)):
            raise TypeError(f"{type(v).__name__} is not a bool")
        return bool(v)
    if not isinstance(v, str):
        raise TypeError(f"{type(v).__name__} is not a str")
    return v


def int_attr(default: Any = REQUIRED, doc: str = "") -> Attr:
    return Attr("int", default, doc=doc)


def float_attr(default: Any = REQUIRED, doc: str = "") -> Attr:
    return Attr("float", default, doc=doc)


def bool_attr(default: Any = REQUIRED, doc: str = "") -> Attr:
    return Attr("bool", default, doc=doc)


def str_attr(default: Any = REQUIRED, doc: str = "") -> Attr:
    return Attr("str", default, doc=doc)


def ints_attr(default: Any = REQUIRED, length: int | None = None, doc: str = "") -> Attr:
    return Attr("ints", default, length=length, doc=doc)


def floats_attr(default: Any = REQUIRED, length: int | None = None, doc: str = "") -> Attr:
    return Attr("floats", default, length=length, doc=doc)


class Attrs(Mapping[str, Any]):
    """Resolved attribute values of one plugin instance: a read-only mapping with attribute access."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_values", dict(values))

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"plugin has no attribute '{name}'") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("plugin attributes are read-only")

    def __repr__(self) -> str:
        return f"Attrs({self._values!r})"


# ------------------------------------------------------------------------------ inputs / shapes
@dataclass(frozen=True)
class Input:
    """One plugin input.

    ``dtype`` None means the plugin's float type ``T`` (one of the declaration's ``dtypes``, shared
    by all such inputs); a torch dtype fixes it. ``present`` names a bool attribute: the input is
    optional and exists when that attribute is true (the converter sets it from the call).
    """

    name: str
    rank: int | None = None
    dtype: torch.dtype | None = None
    present: str | None = None


Dim = Any  # an int, or a backend's symbolic dimension supporting + - * // and cdiv/dmax/dmin


class Shapes(Mapping[str, tuple[Dim, ...]]):
    """Input shapes of one plugin instance, by input name (only present inputs) or by position."""

    def __init__(self, names: Sequence[str], shapes: Sequence[Sequence[Dim]]) -> None:
        self._names = list(names)
        self._shapes = [tuple(s) for s in shapes]

    def __getitem__(self, key: str | int) -> tuple[Dim, ...]:  # type: ignore[override]
        if isinstance(key, int):
            return self._shapes[key]
        try:
            return self._shapes[self._names.index(key)]
        except ValueError:
            raise KeyError(f"no input named '{key}' (present inputs: {self._names})") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def index(self, name: str) -> int | None:
        return self._names.index(name) if name in self._names else None


def cdiv(a: Dim, b: Dim) -> Dim:
    """Ceiling division for shape rules (ints or symbolic dimensions)."""
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return _sym(a, b)._binary("cdiv", a, b)


def dmax(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    return _sym(a, b)._binary("max", a, b)


def dmin(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    return _sym(a, b)._binary("min", a, b)


def _sym(a: Any, b: Any) -> Any:
    return a if isinstance(a, SymbolicDim) else b


class SymbolicDim:
    """Base of backend dimension expressions: arithmetic dispatches to ``_binary(op, a, b)``.

    ``op`` is one of sum, sub, prod, floordiv, cdiv, max, min; ``a`` and ``b`` are ints or
    symbolic dims. Subclasses (the TensorRT one wraps ``IDimensionExpr``) implement ``_binary``.
    """

    def _binary(self, op: str, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def __add__(self, o: Any) -> Any:
        return self._binary("sum", self, o)

    def __radd__(self, o: Any) -> Any:
        return self._binary("sum", o, self)

    def __sub__(self, o: Any) -> Any:
        return self._binary("sub", self, o)

    def __rsub__(self, o: Any) -> Any:
        return self._binary("sub", o, self)

    def __mul__(self, o: Any) -> Any:
        return self._binary("prod", self, o)

    def __rmul__(self, o: Any) -> Any:
        return self._binary("prod", o, self)

    def __floordiv__(self, o: Any) -> Any:
        return self._binary("floordiv", self, o)

    def __rfloordiv__(self, o: Any) -> Any:
        return self._binary("floordiv", o, self)


# ------------------------------------------------------------------------------------ launches
@dataclass(frozen=True)
class In:
    """Kernel argument: device pointer of an input (by name or position); null when absent."""

    input: str | int


@dataclass(frozen=True)
class Out:
    """Kernel argument: device pointer of an output."""

    index: int = 0


@dataclass(frozen=True)
class Workspace:
    """Kernel argument: device pointer into the plugin's workspace."""

    offset: int = 0


@dataclass(frozen=True)
class I32:
    value: int


@dataclass(frozen=True)
class I64:
    value: int


@dataclass(frozen=True)
class F32:
    value: float


@dataclass(frozen=True)
class F64:
    value: float


Arg = In | Out | Workspace | I32 | I64 | F32 | F64


@dataclass(frozen=True)
class Launch:
    """One kernel launch: entry point, grid and block (x, y, z), arguments, dynamic shared memory."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[Arg, ...]
    shared_mem: int = 0

    def __init__(
        self, kernel: str, grid: int | Sequence[int], block: int | Sequence[int], args: Sequence[Arg],
        shared_mem: int = 0,
    ) -> None:
        object.__setattr__(self, "kernel", kernel)
        object.__setattr__(self, "grid", _dim3(grid, "grid"))
        object.__setattr__(self, "block", _dim3(block, "block"))
        object.__setattr__(self, "args", tuple(args))
        object.__setattr__(self, "shared_mem", int(shared_mem))


def _dim3(v: int | Sequence[int], what: str) -> tuple[int, int, int]:
    vals = [int(v)] if isinstance(v, int) else [int(x) for x in v]
    if not 1 <= len(vals) <= 3 or any(x < 0 for x in vals):
        raise PluginError(f"launch {what} must be 1 to 3 non-negative ints, got {v!r}")
    vals += [1] * (3 - len(vals))
    return (vals[0], vals[1], vals[2])


@dataclass(frozen=True)
class LaunchInfo:
    """What a launch rule sees: concrete input/output shapes and dtypes, and the attributes."""

    inputs: Shapes
    outputs: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[torch.dtype, ...]
    output_dtypes: tuple[torch.dtype, ...]
    dtype: torch.dtype  # the plugin's float type T
    attrs: Attrs


@dataclass(frozen=True)
class CudaKernel:
    """CUDA source of a plugin: ``path`` to a .cu file or ``source`` text, its entry points,
    the launch rule, an optional workspace rule (bytes) and extra NVRTC options."""

    entry_points: tuple[str, ...]
    launch: Callable[[LaunchInfo], Launch | Sequence[Launch]]
    path: str | os.PathLike[str] | None = None
    source: str | None = None
    workspace: Callable[[LaunchInfo], int] | None = None
    options: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.path is None) == (self.source is None):
            raise PluginError("CudaKernel needs exactly one of path= (a .cu file) or source= (CUDA text)")
        if not self.entry_points:
            raise PluginError("CudaKernel needs at least one entry point")
        object.__setattr__(self, "entry_points", tuple(self.entry_points))
        object.__setattr__(self, "options", tuple(self.options))

    def text(self) -> tuple[str, str]:
        """(source text, file name used in compiler messages)."""
        if self.source is not None:
            return self.source, "<inline>.cu"
        p = Path(self.path)  # type: ignore[arg-type]
        try:
            return p.read_text(), str(p)
        except OSError as e:
            raise PluginError(f"cannot read CUDA source {p}: {e}") from None

    def launches(self, info: LaunchInfo) -> list[Launch]:
        res = self.launch(info)
        out = [res] if isinstance(res, Launch) else list(res)
        for lc in out:
            if lc.kernel not in self.entry_points:
                raise PluginError(
                    f"launch rule names kernel '{lc.kernel}', which is not a declared entry point "
                    f"{self.entry_points}"
                )
            threads = lc.block[0] * lc.block[1] * lc.block[2]
            if not 1 <= threads <= 1024:
                raise PluginError(f"kernel '{lc.kernel}': block {lc.block} has {threads} threads (1..1024)")
        return out

    def workspace_bytes(self, info: LaunchInfo) -> int:
        return int(self.workspace(info)) if self.workspace is not None else 0


# --------------------------------------------------------------------------------- declaration
@dataclass(frozen=True)
class PluginCall:
    """What a binder extracts from a torch call: plugin inputs (tensors or None) and attributes."""

    inputs: Sequence[Any]
    attrs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class PluginDef:
    name: str
    version: str
    namespace: str
    inputs: tuple[Input, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Attr]
    shape: Callable[[Shapes, Attrs], Sequence[Sequence[Dim]]]
    reference: Callable[..., Any]
    dtypes: tuple[torch.dtype, ...] = FLOAT_TYPES
    dtype: Callable[[torch.dtype, Attrs], Sequence[torch.dtype]] | None = None
    cuda: CudaKernel | None = None
    targets: tuple[Any, ...] = ()
    bind: Callable[[Any], PluginCall] | None = None
    validate: Callable[[Shapes, Attrs], str | None] | None = None
    convert: Callable[[Any, Any, PluginDef], Any] | None = None
    doc: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.name, self.version, self.namespace)

    @property
    def label(self) -> str:
        return f"plugin '{self.name}' (version {self.version}, namespace '{self.namespace}')"

    # -- attributes
    def resolve_attrs(self, values: Mapping[str, Any]) -> Attrs:
        """Fill defaults, coerce types; unknown or missing required attributes are errors."""
        unknown = sorted(set(values) - set(self.attrs))
        if unknown:
            raise PluginError(f"{self.label}: unknown attribute(s) {unknown}; declared: {sorted(self.attrs)}")
        out: dict[str, Any] = {}
        for name, spec in self.attrs.items():
            if name in values and values[name] is not None:
                out[name] = spec.coerce(name, values[name])
            elif spec.default is not REQUIRED:
                out[name] = spec.default
            else:
                raise PluginError(f"{self.label}: attribute '{name}' ({spec.kind}) is required")
        return Attrs(out)

    # -- inputs
    def active_inputs(self, attrs: Attrs) -> list[Input]:
        return self.present(attrs, self.inputs)

    def present(self, attrs: Mapping[str, Any], values: Sequence[Any]) -> list[Any]:
        """The entries of ``values`` (one per declared input) for the inputs present under ``attrs``."""
        return [v for spec, v in zip(self.inputs, values, strict=True) if spec.present is None or bool(attrs[spec.present])]

    def input_dtypes(self, attrs: Attrs, t: torch.dtype) -> list[torch.dtype]:
        return [i.dtype or t for i in self.active_inputs(attrs)]

    def float_type(self, attrs: Attrs, dtypes: Sequence[torch.dtype]) -> torch.dtype:
        """The plugin's T from the dtypes of the present inputs, checked against the contract."""
        active = self.active_inputs(attrs)
        if len(dtypes) != len(active):
            raise PluginError(
                f"{self.label}: expected {len(active)} inputs {[i.name for i in active]}, got {len(dtypes)}"
            )
        t: torch.dtype | None = None
        for spec, dt in zip(active, dtypes, strict=True):
            if spec.dtype is not None:
                if dt != spec.dtype:
                    raise PluginError(f"{self.label}: input '{spec.name}' must be {spec.dtype}, got {dt}")
                continue
            if dt not in self.dtypes:
                raise PluginError(
                    f"{self.label}: input '{spec.name}' has dtype {dt}; the plugin supports "
                    f"{[str(d) for d in self.dtypes]}"
                )
            if t is None:
                t = dt
            elif dt != t:
                raise PluginError(
                    f"{self.label}: input '{spec.name}' has dtype {dt} but earlier inputs are {t}; "
                    "all float inputs must share one dtype"
                )
        return t if t is not None else self.dtypes[0]

    def check_ranks(self, attrs: Attrs, ranks: Sequence[int]) -> None:
        for spec, r in zip(self.active_inputs(attrs), ranks, strict=True):
            if spec.rank is not None and r != spec.rank:
                raise PluginError(f"{self.label}: input '{spec.name}' must have rank {spec.rank}, got rank {r}")

    def check_shapes(self, attrs: Attrs, shapes: Sequence[Sequence[int]]) -> None:
        """Ranks, then the declaration's ``validate`` rule (dims may be -1 when not yet known)."""
        self.check_ranks(attrs, [len(s) for s in shapes])
        if self.validate is not None:
            names = [i.name for i in self.active_inputs(attrs)]
            reason = self.validate(Shapes(names, [tuple(int(d) for d in s) for s in shapes]), attrs)
            if reason:
                raise PluginError(f"{self.label}: {reason}")

    # -- rules
    def output_shapes(self, attrs: Attrs, shapes: Sequence[Sequence[Dim]]) -> list[tuple[Dim, ...]]:
        names = [i.name for i in self.active_inputs(attrs)]
        out = [tuple(s) for s in self.shape(Shapes(names, shapes), attrs)]
        if len(out) != len(self.outputs):
            raise PluginError(
                f"{self.label}: the shape rule returned {len(out)} shapes for {len(self.outputs)} outputs"
            )
        return out

    def output_dtypes(self, attrs: Attrs, t: torch.dtype) -> list[torch.dtype]:
        if self.dtype is None:
            return [t] * len(self.outputs)
        out = list(self.dtype(t, attrs))
        if len(out) != len(self.outputs):
            raise PluginError(
                f"{self.label}: the dtype rule returned {len(out)} dtypes for {len(self.outputs)} outputs"
            )
        return out

    def launch_info(
        self, attrs: Attrs, input_shapes: Sequence[Sequence[int]], input_dtypes: Sequence[torch.dtype]
    ) -> LaunchInfo:
        t = self.float_type(attrs, input_dtypes)
        self.check_shapes(attrs, input_shapes)
        names = [i.name for i in self.active_inputs(attrs)]
        outs = self.output_shapes(attrs, input_shapes)
        return LaunchInfo(
            inputs=Shapes(names, input_shapes),
            outputs=tuple(tuple(int(d) for d in s) for s in outs),
            input_dtypes=tuple(input_dtypes),
            output_dtypes=tuple(self.output_dtypes(attrs, t)),
            dtype=t,
            attrs=attrs,
        )

    # -- running the reference with the contract checks the sim applies
    def run_reference(self, attrs: Attrs, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Run the torch reference on the present inputs; PluginError if it breaks the contract."""
        active = self.active_inputs(attrs)
        t = self.float_type(attrs, [x.dtype for x in tensors])
        self.check_shapes(attrs, [tuple(x.shape) for x in tensors])
        by_name = {spec.name: x for spec, x in zip(active, tensors, strict=True)}
        args = [by_name.get(spec.name) for spec in self.inputs]
        presence = {spec.present for spec in self.inputs if spec.present}
        res = self.reference(*args, **{k: v for k, v in attrs.items() if k not in presence})
        outs = [res] if isinstance(res, torch.Tensor) else list(res)
        want_shapes = self.output_shapes(attrs, [tuple(x.shape) for x in tensors])
        want_dtypes = self.output_dtypes(attrs, t)
        if len(outs) != len(self.outputs):
            raise PluginError(f"{self.label}: the reference returned {len(outs)} outputs, expected {len(self.outputs)}")
        for j, (o, s, d) in enumerate(zip(outs, want_shapes, want_dtypes, strict=True)):
            if not isinstance(o, torch.Tensor):
                raise PluginError(f"{self.label}: reference output {j} is a {type(o).__name__}, not a tensor")
            if tuple(o.shape) != tuple(s):
                raise PluginError(
                    f"{self.label}: reference output '{self.outputs[j]}' has shape {tuple(o.shape)}, "
                    f"the shape rule says {tuple(s)}"
                )
            if o.dtype != d:
                raise PluginError(
                    f"{self.label}: reference output '{self.outputs[j]}' has dtype {o.dtype}, the dtype rule says {d}"
                )
        return outs


_LOCK = threading.RLock()
_PLUGINS: dict[tuple[str, str, str], PluginDef] = {}
_LISTENERS: list[Callable[[PluginDef], None]] = []


def declare_plugin(
    name: str,
    *,
    inputs: Sequence[Input | str],
    shape: Callable[[Shapes, Attrs], Sequence[Sequence[Dim]]],
    reference: Callable[..., Any],
    outputs: Sequence[str] = ("output",),
    attrs: Mapping[str, Attr] | None = None,
    version: str = "1",
    namespace: str = DEFAULT_NAMESPACE,
    dtypes: Sequence[torch.dtype] = FLOAT_TYPES,
    dtype: Callable[[torch.dtype, Attrs], Sequence[torch.dtype]] | None = None,
    cuda: CudaKernel | None = None,
    targets: Sequence[Any] = (),
    bind: Callable[[Any], PluginCall] | None = None,
    validate: Callable[[Shapes, Attrs], str | None] | None = None,
    convert: Callable[[Any, Any, PluginDef], Any] | None = None,
    doc: str = "",
    replace: bool = False,
) -> PluginDef:
    """Declare a plugin and register a converter for each of ``targets``.

    ``bind(call)`` maps a traced call to a :class:`PluginCall`; without it, positional and keyword
    arguments are matched to input names then attribute names, and for an ``nn.Module`` target
    missing attributes and inputs are read from the module (``module.stride``, ``module.weight``).
    ``validate(shapes, attrs)`` returns a reason string when input shapes break the contract (dims
    not yet known are -1). ``convert(ctx, call, pdef)`` replaces the generic converter body when a
    call needs network layers before the plugin (it ends with :func:`add_plugin`).
    Declaring the same (name, version, namespace) twice is an error unless ``replace=True``.
    """
    if not name or not isinstance(name, str):
        raise PluginError("a plugin needs a non-empty name")
    ins = tuple(Input(i) if isinstance(i, str) else i for i in inputs)
    attr_specs = dict(attrs or {})
    for i in ins:
        if i.present is not None and (i.present not in attr_specs or attr_specs[i.present].kind != "bool"):
            raise PluginError(
                f"plugin '{name}': optional input '{i.name}' names presence attribute '{i.present}', "
                "which must be declared as a bool_attr"
            )
    names = [i.name for i in ins] + list(outputs)
    if len(set(names)) != len(names):
        raise PluginError(f"plugin '{name}': input and output names must be unique, got {names}")
    for d in dtypes:
        if d not in (torch.float32, torch.float16, torch.bfloat16):
            raise PluginError(f"plugin '{name}': float type {d} is not supported (float32, float16, bfloat16)")
    pdef = PluginDef(
        name=name, version=str(version), namespace=namespace, inputs=ins, outputs=tuple(outputs),
        attrs=attr_specs, shape=shape, reference=reference, dtypes=tuple(dtypes), dtype=dtype, cuda=cuda,
        targets=tuple(targets), bind=bind, validate=validate, convert=convert, doc=doc,
    )
    with _LOCK:
        if pdef.key in _PLUGINS and not replace:
            raise PluginError(f"{pdef.label} is already declared; pass replace=True to redefine it")
        _PLUGINS[pdef.key] = pdef
        listeners = list(_LISTENERS)
    register_targets(pdef, pdef.targets, replace)
    for fn in listeners:
        fn(pdef)
    return pdef


def register_targets(pdef: PluginDef, targets: Sequence[Any], replace: bool = False) -> None:
    """Register the plugin converter of ``pdef`` for each of ``targets``. A target given by dotted
    name whose top-level package is not imported yet (``"torchvision.ops.roi_align.roi_align"``) is
    registered once the user imports that package (``registry.when_imported``): declaring a plugin
    never imports a heavy optional package itself."""
    import sys

    from .. import registry  # NOTE: imported here: the registry may import converters that declare plugins

    for t in targets:
        root = t.split(".", 1)[0] if isinstance(t, str) else ""
        if root and root not in sys.modules:
            registry.when_imported(root, functools.partial(_register_converter, pdef, t, replace))
        else:
            _register_converter(pdef, t, replace)


def get_plugin(name: str, version: str, namespace: str = DEFAULT_NAMESPACE) -> PluginDef:
    """The declaration registered under (name, version, namespace); built-ins load on demand."""
    key = (str(name), str(version), str(namespace))
    with _LOCK:
        hit = _PLUGINS.get(key)
    if hit is None and namespace == DEFAULT_NAMESPACE:
        load_builtin_plugins()
        with _LOCK:
            hit = _PLUGINS.get(key)
    if hit is None:
        known = ", ".join(f"{n} v{v} ({ns})" for n, v, ns in sorted(_PLUGINS)) or "none"
        raise PluginError(
            f"plugin '{name}' version {version} in namespace '{namespace}' is not declared in this process "
            f"(declared: {known}). Import the module that declares it (declare_plugin) before loading the engine."
        )
    return hit


def find_plugin(name: str, version: str, namespace: str = DEFAULT_NAMESPACE) -> PluginDef | None:
    try:
        return get_plugin(name, version, namespace)
    except PluginError:
        return None


def registered_plugins() -> list[PluginDef]:
    with _LOCK:
        return list(_PLUGINS.values())


def on_declare(fn: Callable[[PluginDef], None]) -> None:
    """Call ``fn`` for every plugin declared from now on (backends register creators this way)."""
    with _LOCK:
        _LISTENERS.append(fn)


@functools.cache
def load_builtin_plugins() -> list[str]:
    """Import ``torch2trt_lite.plugins_cuda`` (deform_conv2d, roi_align); returns their names."""
    import importlib

    mod = importlib.import_module("torch2trt_lite.plugins_cuda")
    return list(getattr(mod, "BUILTINS", ()))


# ---------------------------------------------------------------------------------- conversion
def _is_module_class(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, torch.nn.Module)


def default_binder(pdef: PluginDef, target: Any) -> Callable[[Any], PluginCall]:
    module_target = _is_module_class(target)
    in_names = [i.name for i in pdef.inputs]
    presence = {i.present for i in pdef.inputs if i.present}
    attr_names = [a for a in pdef.attrs if a not in presence]

    def bind(call: Any) -> PluginCall:
        args = list(call.args)
        module = args.pop(0) if module_target and args else None
        values: dict[str, Any] = {}
        order = in_names + attr_names
        if len(args) > len(order):
            raise ConversionError(
                f"{pdef.label}: the call passes {len(args)} positional arguments, the plugin declares "
                f"{len(order)} ({order})"
            )
        values.update(zip(order, args, strict=False))
        for k, v in dict(call.kwargs).items():
            if k not in in_names and k not in attr_names:
                raise ConversionError(f"{pdef.label}: the call passes '{k}=', which is no input or attribute")
            values[k] = v
        if module is not None:
            for k in attr_names:
                if k not in values and hasattr(module, k):
                    values[k] = getattr(module, k)
            for k in in_names:
                if values.get(k) is None and isinstance(getattr(module, k, None), torch.Tensor):
                    values[k] = getattr(module, k)
        return PluginCall([values.get(k) for k in in_names], {k: values[k] for k in attr_names if k in values})

    return bind


def bind_call(pdef: PluginDef, call: Any, target: Any = None) -> tuple[list[Any], Attrs]:
    """Inputs (one per declared input, None when absent) and resolved attributes of a call."""
    binder = pdef.bind or default_binder(pdef, target if target is not None else getattr(call, "target", None))
    bound = binder(call)
    inputs = list(bound.inputs)
    if len(inputs) != len(pdef.inputs):
        raise ConversionError(
            f"{pdef.label}: the binder returned {len(inputs)} inputs for {len(pdef.inputs)} declared "
            f"({[i.name for i in pdef.inputs]})"
        )
    values = dict(bound.attrs)
    for spec, x in zip(pdef.inputs, inputs, strict=True):
        if spec.present is not None:
            values[spec.present] = x is not None
        elif x is None:
            raise ConversionError(f"{pdef.label}: input '{spec.name}' is required but the call has none")
    return inputs, pdef.resolve_attrs(values)


def add_plugin(ctx: Any, pdef: PluginDef, inputs: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    """Add one plugin layer for ``pdef`` to ``ctx.network``; returns its output ITensor(s).

    ``inputs`` has one entry per declared input (torch tensors, ITensors or None for an absent
    optional input). The plugin object comes from the backend's plugin registry, so the same code
    serves the sim and TensorRT.
    """
    add_plugin_v3 = getattr(ctx.network, "add_plugin_v3", None)  # TensorRT-RTX has no plugin layers
    if add_plugin_v3 is None or not getattr(ctx, "has_plugins", True):
        from torch2trt_lite.trace.context import ConverterRefusal

        raise ConverterRefusal(
            f"{pdef.label} is a plugin layer, and TensorRT-RTX has no plugin API (no add_plugin_v3): a model "
            "that needs a plugin converts with backend='tensorrt' (or 'sim')"
        )
    resolved = attrs if isinstance(attrs, Attrs) else pdef.resolve_attrs(attrs)
    present = pdef.present(resolved, inputs)
    torch_inputs = [x for x in present if isinstance(x, torch.Tensor)]
    if len(torch_inputs) == len(present):
        pdef.float_type(resolved, [x.dtype for x in torch_inputs])
        pdef.check_shapes(resolved, [tuple(x.shape) for x in torch_inputs])
    itensors = [ctx.itensor(x) if isinstance(x, (torch.Tensor, bool, int, float)) else x for x in present]
    plugin = create_backend_plugin(ctx.trt, getattr(ctx, "backend_name", "sim"), pdef, resolved)
    layer = add_plugin_v3(itensors, [], plugin)
    if layer is None:
        raise ConversionError(f"{pdef.label}: the network refused the plugin layer (see the log above)")
    outs = [layer.get_output(j) for j in range(len(pdef.outputs))]
    return outs[0] if len(outs) == 1 else tuple(outs)


def create_backend_plugin(trt: Any, backend_name: str, pdef: PluginDef, attrs: Attrs) -> Any:
    """A plugin object for ``trt`` (the sim namespace or ``tensorrt``), via its plugin registry."""
    if backend_name == "tensorrt":
        from . import trt_plugin

        trt_plugin.precompile(pdef)
        return trt_plugin.create_plugin(pdef, attrs, trt)
    creator = trt.get_plugin_registry().get_creator(pdef.name, pdef.version, pdef.namespace)
    if creator is None:
        raise PluginError(f"{pdef.label}: no plugin creator is registered with the {backend_name} plugin registry")
    fc = trt.PluginFieldCollection(encode_fields(trt, pdef, attrs))
    plugin = creator.create_plugin(pdef.name, fc, trt.TensorRTPhase.BUILD)
    if plugin is None:
        raise PluginError(f"{pdef.label}: the plugin creator returned no plugin")
    return plugin


def _register_converter(pdef: PluginDef, target: Any, replace: bool) -> None:
    from .. import registry  # NOTE: imported here: the registry may import converters that declare plugins

    where: Any = target
    if isinstance(target, str) and not target.startswith("torch.ops."):
        target = registry.resolve_target(target)[3]  # the object: binders tell modules from functions

    def convert(ctx: Any, call: Any) -> Any:
        if pdef.convert is not None:
            return pdef.convert(ctx, call, pdef)
        inputs, attrs = bind_call(pdef, call, target)
        return add_plugin(ctx, pdef, inputs, attrs)

    def check(call: Any) -> str | None:
        try:
            inputs, attrs = bind_call(pdef, call, target)
            tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
            present = pdef.present(attrs, inputs)
            if len(tensors) == len(present):
                pdef.float_type(attrs, [x.dtype for x in tensors])
                pdef.check_shapes(attrs, [tuple(x.shape) for x in tensors])
        except (PluginError, ConversionError) as e:
            return str(e)
        return None

    convert.__name__ = convert.__qualname__ = f"convert_plugin_{pdef.name}"
    convert.__doc__ = f"Converts calls of {getattr(target, '__qualname__', target)!r} to {pdef.label}."
    init_fn = getattr(target, "_init_fn", None)
    if not isinstance(where, str) and type(target).__name__ == "CustomOpDef" and init_fn is not None:
        # NOTE: a torch.library.custom_op object has no __name__; the registry patches it where it
        # was defined, by dotted name (the decorator rebinds the function's name to the op object).
        where = f"{init_fn.__module__}.{init_fn.__name__}"
    registry.converter(where, check=check, override=replace)(convert)


# ---------------------------------------------------------------------------------- plugin fields
def field_type(field_types: Any, kind: str) -> Any:
    """The PluginFieldType member (of ``field_types``, TensorRT's or the sim's enum) for ``kind``."""
    t = field_types
    return {"int": t.INT32, "ints": t.INT32, "bool": t.INT32, "float": t.FLOAT64, "floats": t.FLOAT64,
            "str": t.CHAR}[kind]


def field_array(kind: str, value: Any) -> Any:
    """The numpy array that carries an attribute value in a PluginField."""
    import numpy as np

    if kind in ("int", "ints"):
        vals = list(value) if kind == "ints" else [value]
        if any(not -(2**31) <= v < 2**31 for v in vals):
            raise PluginError(f"integer attribute value {value!r} does not fit a 32-bit plugin field")
        return np.array(vals, dtype=np.int32)
    if kind == "bool":
        return np.array([1 if value else 0], dtype=np.int32)
    if kind in ("float", "floats"):
        return np.array(value if kind == "floats" else [value], dtype=np.float64)
    return np.frombuffer(value.encode("utf-8") + b"\0", dtype=np.int8).copy()


def encode_fields(trt: Any, pdef: PluginDef, attrs: Attrs) -> list[Any]:
    """One PluginField per attribute, typed (INT32 for int and bool, FLOAT64, CHAR)."""
    return [
        trt.PluginField(name, field_array(spec.kind, attrs[name]), field_type(trt.PluginFieldType, spec.kind))
        for name, spec in pdef.attrs.items()
    ]


def decode_fields(pdef: PluginDef, fields: Any) -> Attrs:
    """Attributes from a PluginFieldCollection (TensorRT's or the sim's)."""
    import numpy as np

    values: dict[str, Any] = {}
    for f in fields:
        name = f.name if isinstance(f.name, str) else bytes(f.name).decode()
        spec = pdef.attrs.get(name)
        if spec is None:
            raise PluginError(f"{pdef.label}: unknown plugin field '{name}'; declared: {sorted(pdef.attrs)}")
        data = f.data
        if spec.kind == "str":
            if isinstance(data, str):
                raw = data.encode()
            elif isinstance(data, bytes):
                raw = data
            else:
                raw = np.asarray(data).tobytes()  # int8 or 'S1' array, as TensorRT returns CHAR data
            values[name] = raw.split(b"\0", 1)[0].decode("utf-8")
            continue
        arr = np.asarray(data).reshape(-1)
        if spec.kind in ("ints", "floats"):
            values[name] = tuple(arr.tolist())
        elif arr.size != 1:
            raise PluginError(f"{pdef.label}: field '{name}' holds {arr.size} values, expected 1")
        else:
            values[name] = arr[0].item()
    return pdef.resolve_attrs(values)


def attrs_to_json(attrs: Attrs) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}


def attrs_from_json(pdef: PluginDef, data: Mapping[str, Any]) -> Attrs:
    return pdef.resolve_attrs(dict(data))


def numel(shape: Sequence[int]) -> int:
    return math.prod(int(d) for d in shape)


__all__ = [
    "DEFAULT_NAMESPACE", "FLOAT_TYPES", "REQUIRED", "Arg", "Attr", "Attrs", "CudaKernel", "F32", "F64", "I32",
    "I64", "In", "Input", "Launch", "LaunchInfo", "Out", "PluginCall", "PluginDef", "Shapes", "SymbolicDim",
    "Workspace", "add_plugin", "bind_call", "bool_attr", "cdiv", "create_backend_plugin", "declare_plugin",
    "decode_fields", "default_binder", "dmax", "dmin", "encode_fields", "find_plugin", "float_attr",
    "floats_attr", "get_plugin", "int_attr", "ints_attr", "load_builtin_plugins", "on_declare",
    "registered_plugins", "str_attr",
]
