"""TensorRT side of declared plugins: a Python ``IPluginV3`` and its ``IPluginCreatorV3One``.

One plugin class serves every declaration (:class:`~torch2trt_lite.plugins.declaration.PluginDef`):

* core: ``plugin_name`` / ``plugin_version`` / ``plugin_namespace`` from the declaration;
* build: output dtypes and shapes from the declaration's rules (shapes as ``IDimensionExpr``
  built with ``IExprBuilder``, so dynamic dimensions stay symbolic); ``supports_format_combination``
  accepts LINEAR tensors whose dtype is one of the plugin's float types (all float inputs sharing
  one), fixed-dtype inputs at their dtype, outputs at the dtype rule's; the workspace from the
  declaration's rule at the profile's maximum shapes;
* runtime: ``enqueue`` launches the NVRTC-compiled kernels on TensorRT's stream through the CUDA
  driver API (``cuLaunchKernel``); ``get_fields_to_serialize`` stores the attributes as typed
  plugin fields, so a saved engine reloads in a fresh process once the creators are registered
  (:func:`register_creators`, which the engine loader must call before deserializing).

``tensorrt`` is imported only inside functions. Every TensorRT name used here exists in TensorRT
10.13, 10.16 and 11.1 with these argument names.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import torch

from ..errors import BackendUnavailableError, PluginError
from .declaration import (
    PluginDef,
    decode_fields,
    encode_fields,
    field_type,
    load_builtin_plugins,
    on_declare,
    registered_plugins,
)
from .spec import Attrs, SymbolicDim

_TORCH_BY_NAME = {
    "FLOAT": torch.float32, "HALF": torch.float16, "BF16": torch.bfloat16, "INT8": torch.int8,
    "INT32": torch.int32, "INT64": torch.int64, "BOOL": torch.bool, "UINT8": torch.uint8,
}
_NAME_BY_TORCH = {v: k for k, v in _TORCH_BY_NAME.items()}


def import_tensorrt() -> Any:
    try:
        import tensorrt
    except ImportError:
        raise BackendUnavailableError(
            "the TensorRT backend needs the tensorrt Python package (pip install tensorrt); "
            "use backend='sim' to run without it"
        ) from None
    return tensorrt


def torch_dtype(trt_dtype: Any) -> torch.dtype | None:
    """The torch dtype of a TensorRT DataType member (None when torch has no equivalent)."""
    return _TORCH_BY_NAME.get(getattr(trt_dtype, "name", str(trt_dtype).rsplit(".", 1)[-1]))


def trt_dtype(trt: Any, dtype: torch.dtype) -> Any:
    try:
        return getattr(trt.DataType, _NAME_BY_TORCH[dtype])
    except KeyError:
        raise PluginError(f"torch dtype {dtype} has no TensorRT DataType") from None


# ------------------------------------------------------------------------------- shape exprs
_OPS = {
    "sum": "SUM", "sub": "SUB", "prod": "PROD", "floordiv": "FLOOR_DIV", "cdiv": "CEIL_DIV",
    "max": "MAX", "min": "MIN",
}


class TrtDim(SymbolicDim):
    """A dimension of a shape rule as a TensorRT ``IDimensionExpr`` (built with ``IExprBuilder``)."""

    __slots__ = ("expr", "_builder", "_trt")

    def __init__(self, expr: Any, builder: Any, trt: Any) -> None:
        self.expr = expr
        self._builder = builder
        self._trt = trt

    @staticmethod
    def wrap(expr: Any, builder: Any, trt: Any) -> int | TrtDim:
        """A constant expression becomes a plain int, so shape rules may branch on it."""
        if expr.is_constant():
            return int(expr.get_constant_value())
        return TrtDim(expr, builder, trt)

    def _as_expr(self, v: Any) -> Any:
        if isinstance(v, TrtDim):
            return v.expr
        if isinstance(v, (int, np.integer)):
            return self._builder.constant(int(v))
        raise PluginError(f"shape rule: cannot use {v!r} as a dimension (ints and input dimensions only)")

    def _binary(self, op: str, a: Any, b: Any) -> Any:
        operation = getattr(self._trt.DimensionOperation, _OPS[op])
        expr = self._builder.operation(operation, self._as_expr(a), self._as_expr(b))
        return TrtDim.wrap(expr, self._builder, self._trt)

    def __repr__(self) -> str:
        return "<TrtDim>"


def _dim_expr(trt: Any, builder: Any, d: Any) -> Any:
    if isinstance(d, TrtDim):
        return d.expr
    if isinstance(d, (int, np.integer)):
        return builder.constant(int(d))
    raise PluginError(f"shape rule returned {d!r}; a dimension must be an int or an expression of input dimensions")


# ------------------------------------------------------------------------------------ classes
_LOCK = threading.Lock()
_CLASSES: dict[int, tuple[type, type]] = {}


def plugin_classes(trt: Any = None) -> tuple[type, type]:
    """(plugin class, creator class) for the ``tensorrt`` module ``trt`` (built once per module)."""
    trt = trt if trt is not None else import_tensorrt()
    with _LOCK:
        hit = _CLASSES.get(id(trt))
        if hit is None:
            hit = _CLASSES[id(trt)] = _make_classes(trt)
    return hit


def _make_classes(trt: Any) -> tuple[type, type]:  # noqa: C901 (one class per TensorRT interface)
    from . import nvrtc

    class Torch2TRTLitePlugin(trt.IPluginV3, trt.IPluginV3OneCore, trt.IPluginV3OneBuild, trt.IPluginV3OneRuntime):
        """A declared plugin as TensorRT sees it."""

        def __init__(self, pdef: PluginDef, attrs: Attrs, phase: Any = None) -> None:
            trt.IPluginV3.__init__(self)
            trt.IPluginV3OneCore.__init__(self)
            trt.IPluginV3OneBuild.__init__(self)
            trt.IPluginV3OneRuntime.__init__(self)
            self.plugin_name = pdef.name
            self.plugin_version = pdef.version
            self.plugin_namespace = pdef.namespace
            self.num_outputs = len(pdef.outputs)
            self._pdef = pdef
            self._attrs = attrs
            self._phase = phase
            self._fields: Any = None  # NOTE: TensorRT reads the serialized fields after the call returns

        # -- IPluginV3
        def get_capability_interface(self, type: Any) -> Any:  # noqa: A002 (TensorRT's argument name)
            return self

        def clone(self) -> Any:
            return Torch2TRTLitePlugin(self._pdef, self._attrs, self._phase)

        def destroy(self) -> None:
            self._fields = None

        # -- IPluginV3OneBuild
        def get_output_data_types(self, input_types: Any) -> list[Any]:
            dts = [torch_dtype(t) for t in input_types]
            if any(d is None for d in dts):
                raise PluginError(f"{self._pdef.label}: unsupported input types {list(input_types)}")
            t = self._pdef.float_type(self._attrs, dts)  # type: ignore[arg-type]
            return [trt_dtype(trt, d) for d in self._pdef.output_dtypes(self._attrs, t)]

        def get_output_shapes(self, inputs: Any, shape_inputs: Any, expr_builder: Any) -> list[Any]:
            shapes = [[TrtDim.wrap(dims[i], expr_builder, trt) for i in range(len(dims))] for dims in inputs]
            outs = self._pdef.output_shapes(self._attrs, shapes)
            return [trt.DimsExprs([_dim_expr(trt, expr_builder, d) for d in s]) for s in outs]

        def supports_format_combination(self, pos: int, in_out: Any, num_inputs: int) -> bool:
            desc = in_out[pos].desc
            if desc.format != trt.TensorFormat.LINEAR:
                return False
            t = torch_dtype(desc.type)
            active = self._pdef.active_inputs(self._attrs)
            first_float = next((i for i, s in enumerate(active) if s.dtype is None), None)
            if pos < num_inputs:
                spec = active[pos]
                if spec.dtype is not None:
                    return t == spec.dtype
                if t not in self._pdef.dtypes:
                    return False
                if first_float is not None and first_float < pos:
                    return t == torch_dtype(in_out[first_float].desc.type)
                return True
            ft = torch_dtype(in_out[first_float].desc.type) if first_float is not None else self._pdef.dtypes[0]
            if ft not in self._pdef.dtypes:
                return False
            return t == self._pdef.output_dtypes(self._attrs, ft)[pos - num_inputs]  # type: ignore[arg-type]

        def configure_plugin(self, inp: Any, out: Any) -> None:
            return None  # NOTE: enqueue receives the concrete shapes; nothing to precompute

        def get_workspace_size(self, inp: Any, out: Any) -> int:
            cuda = self._pdef.cuda
            if cuda is None or cuda.workspace is None:
                return 0
            dts = [torch_dtype(d.desc.type) for d in inp]
            info = self._pdef.launch_info(self._attrs, [tuple(d.max) for d in inp], dts)  # type: ignore[arg-type]
            return int(cuda.workspace_bytes(info))

        # -- IPluginV3OneRuntime
        def on_shape_change(self, inp: Any, out: Any) -> None:
            return None

        def set_tactic(self, tactic: int) -> None:
            return None

        def attach_to_context(self, resource_context: Any) -> Any:
            return self.clone()

        def get_fields_to_serialize(self) -> Any:
            self._fields = trt.PluginFieldCollection(encode_fields(trt, self._pdef, self._attrs))
            return self._fields

        def enqueue(
            self, input_desc: Any, output_desc: Any, inputs: Any, outputs: Any, workspace: Any, stream: Any
        ) -> None:
            cuda = self._pdef.cuda
            if cuda is None:
                raise PluginError(f"{self._pdef.label} has no CUDA kernel; it can only run on the sim")
            dts = [torch_dtype(d.type) for d in input_desc]
            info = self._pdef.launch_info(self._attrs, [tuple(d.dims) for d in input_desc], dts)  # type: ignore[arg-type]
            nvrtc.run_launches(cuda, info, [int(p) for p in inputs], [int(p) for p in outputs], int(workspace), int(stream))

    class Torch2TRTLitePluginCreator(trt.IPluginCreatorV3One):
        """Creates :class:`Torch2TRTLitePlugin` objects of one declaration from plugin fields."""

        def __init__(self, pdef: PluginDef) -> None:
            trt.IPluginCreatorV3One.__init__(self)
            self._pdef = pdef
            self.name = pdef.name
            self.plugin_version = pdef.version
            self.plugin_namespace = pdef.namespace
            self._field_list = [
                trt.PluginField(n, np.array([], dtype=np.int8), field_type(trt.PluginFieldType, s.kind))
                for n, s in pdef.attrs.items()
            ]
            self.field_names = trt.PluginFieldCollection(self._field_list)

        def create_plugin(self, name: str, field_collection: Any, phase: Any) -> Any:
            fields = [field_collection[i] for i in range(len(field_collection))] if field_collection else []
            return Torch2TRTLitePlugin(self._pdef, decode_fields(self._pdef, fields), phase)

    return Torch2TRTLitePlugin, Torch2TRTLitePluginCreator


# ------------------------------------------------------------------------------- registration
_CREATORS: dict[tuple[int, str, str, str], Any] = {}
_HOOKED: set[int] = set()


def register_creators(trt: Any = None) -> list[Any]:
    """Register a creator for every declared plugin (built-ins included) with TensorRT's plugin
    registry; plugins declared later are registered as they are declared. Call it before
    ``deserialize_cuda_engine`` of an engine that uses plugins. Returns the registered creators."""
    trt = trt if trt is not None else import_tensorrt()
    load_builtin_plugins()
    for pdef in registered_plugins():
        _register_one(trt, pdef)
    with _LOCK:
        first = id(trt) not in _HOOKED
        _HOOKED.add(id(trt))
    if first:
        on_declare(lambda pdef: _register_one(trt, pdef))
    return [c for k, c in _CREATORS.items() if k[0] == id(trt)]


def _register_one(trt: Any, pdef: PluginDef) -> None:
    key = (id(trt), *pdef.key)
    with _LOCK:
        if key in _CREATORS:
            return
    _, creator_cls = plugin_classes(trt)
    creator = creator_cls(pdef)
    registry = trt.get_plugin_registry()
    if not registry.register_creator(creator, pdef.namespace):
        existing = registry.get_creator(pdef.name, pdef.version, pdef.namespace)
        if existing is None:
            raise PluginError(f"{pdef.label}: TensorRT's plugin registry refused its creator")
        creator = existing  # NOTE: registered earlier in this process (e.g. by a previous import)
    with _LOCK:
        _CREATORS[key] = creator  # NOTE: keeps the Python creator alive while TensorRT holds it


def create_plugin(pdef: PluginDef, attrs: Attrs, trt: Any = None) -> Any:
    """A TensorRT plugin object for ``pdef``, created through the registry like TensorRT would."""
    trt = trt if trt is not None else import_tensorrt()
    register_creators(trt)
    with _LOCK:
        creator = _CREATORS.get((id(trt), *pdef.key))  # NOTE: our Python object, no C++ round trip
    if creator is None:
        creator = trt.get_plugin_registry().get_creator(pdef.name, pdef.version, pdef.namespace)
    if creator is None:
        raise PluginError(f"{pdef.label}: no creator in TensorRT's plugin registry")
    fc = trt.PluginFieldCollection(encode_fields(trt, pdef, attrs))
    return creator.create_plugin(pdef.name, fc, trt.TensorRTPhase.BUILD)


def precompile(pdef: PluginDef) -> None:
    """Compile ``pdef``'s kernels for the current device now, so errors surface at conversion."""
    if pdef.cuda is None:
        raise PluginError(f"{pdef.label} has no CUDA kernel, so it cannot run on TensorRT (the sim can run it)")
    from . import nvrtc

    nvrtc.compile_kernel(pdef.cuda, nvrtc.current_device_arch())


__all__ = [
    "TrtDim", "create_plugin", "import_tensorrt", "plugin_classes", "precompile", "register_creators",
    "torch_dtype", "trt_dtype",
]
