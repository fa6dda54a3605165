"""A plugin declaration (:class:`PluginDef`): the contract checks and rules the sim and TensorRT
both apply, its attributes as plugin fields, and this process's registry of declarations.

The registry maps (name, version, namespace) to declarations; the sim's plugin registry and the
TensorRT plugin creators are both views of it, and a saved engine finds its plugin again by that
key in the loading process. :func:`torch2trt_lite.plugins.declare_plugin` adds to it.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import PluginError
from .spec import REQUIRED, Attr, Attrs, CudaKernel, Dim, Input, LaunchInfo, Shapes

DEFAULT_NAMESPACE = "torch2trt_lite"
FLOAT_TYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16)


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

    # -- attributes as plugin fields (TensorRT's or the sim's PluginField) and as JSON (sim plans)
    def encode_fields(self, trt: Any, attrs: Attrs) -> list[Any]:
        """One ``trt.PluginField`` per attribute (``trt``: any namespace with PluginField and PluginFieldType)."""
        return encode_fields(trt, self, attrs)

    def decode_fields(self, fields: Any) -> Attrs:
        """The attributes a PluginFieldCollection holds, resolved against this declaration."""
        return decode_fields(self, fields)

    def attrs_to_json(self, attrs: Attrs) -> dict[str, Any]:
        return attrs_to_json(attrs)

    def attrs_from_json(self, data: Mapping[str, Any]) -> Attrs:
        return attrs_from_json(self, data)


# ------------------------------------------------------------------------------------ registry
_LOCK = threading.RLock()
_PLUGINS: dict[tuple[str, str, str], PluginDef] = {}
_LISTENERS: list[Callable[[PluginDef], None]] = []


def add_declaration(pdef: PluginDef, replace: bool) -> list[Callable[[PluginDef], None]]:
    """Register ``pdef`` under its key; returns the listeners to tell (:func:`on_declare`)."""
    with _LOCK:
        if pdef.key in _PLUGINS and not replace:
            raise PluginError(f"{pdef.label} is already declared; pass replace=True to redefine it")
        _PLUGINS[pdef.key] = pdef
        return list(_LISTENERS)


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
    "DEFAULT_NAMESPACE", "FLOAT_TYPES", "PluginCall", "PluginDef", "add_declaration", "attrs_from_json",
    "attrs_to_json", "decode_fields", "encode_fields", "field_array", "field_type", "find_plugin", "get_plugin",
    "load_builtin_plugins", "numel", "on_declare", "registered_plugins",
]
