"""Plugin layers: ``add_plugin_v3`` runs a declared plugin's torch reference under its contract.

The plugin API mirrors TensorRT's: ``get_plugin_registry().get_creator(name, version, namespace)``
returns an ``IPluginCreatorV3One`` whose ``create_plugin(name, PluginFieldCollection([...]),
TensorRTPhase.BUILD)`` gives the plugin object for ``add_plugin_v3(inputs, shape_inputs, plugin)``.
The sim cannot run arbitrary Python ``IPluginV3`` objects (it has no kernels), only declared plugins
(:func:`torch2trt_lite.plugins.declare_plugin`), whose reference it executes.

The sim sits below the plugins package and never imports it: the plugins package installs its
registry of declarations here (:func:`set_declared_plugins`; ``torch2trt_lite.plugins.prepare_backend``
does it before a sim plugin is created or a sim engine with plugins is loaded). The registry then
finds a creator for every declared plugin. What the sim needs of a plugin (its outputs, contract
checks, shape and dtype rules, torch reference, attribute fields) it asks of the declaration object
the lookup hands it (``torch2trt_lite.plugins.PluginDef``: ``name``, ``version``, ``namespace``,
``outputs``, ``attrs``, ``float_type``, ``check_shapes``, ``output_shapes``, ``output_dtypes``,
``run_reference``, ``encode_fields``, ``decode_fields``, ``attrs_to_json``, ``attrs_from_json``).

Checks, as TensorRT would make them: input count, ranks, dtypes (the plugin's float types, one
type shared by all float inputs) and the declaration's shape rule, at ``add_plugin_v3`` time with
-1 for dimensions not known until run time; at run time the reference's outputs must match the
declared shape and dtype rules. The plan stores (name, version, namespace, attributes as JSON); a
plan that uses a plugin not declared in the loading process fails to load with a PluginError.
"""

from __future__ import annotations

import json
import types
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

import numpy as np
import torch

from ...errors import NetworkDefinitionError, PluginError, RuntimeExecutionError
from .. import _dtypes
from .._core import ILayer, RunContext, TensorInfo, field_property
from .._enums import ENUMS, DataType

PluginFieldType: Any = ENUMS["PluginFieldType"]
_DT: Any = DataType
_SHAPE_TYPES = (_DT.INT32, _DT.INT64)


# ------------------------------------------------------------------------------ plugin fields
class PluginField:
    """A named, typed attribute value for a plugin creator (``data`` is a numpy array)."""

    def __init__(self, name: str = "", data: Any = None, type: Any = PluginFieldType.UNKNOWN) -> None:  # noqa: A002
        self.name = str(name)
        self.data = data
        self.type = type

    @property
    def data(self) -> Any:
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        self._data = np.array([]) if value is None else np.asarray(value) if not isinstance(value, str) else value

    @property
    def type(self) -> Any:  # noqa: A003 (TensorRT's name)
        return self._type

    @type.setter  # noqa: A003
    def type(self, value: Any) -> None:
        self._type = PluginFieldType(int(value))

    @property
    def size(self) -> int:
        return len(self._data) if isinstance(self._data, str) else int(np.asarray(self._data).size)

    @size.setter
    def size(self, value: int) -> None:
        if int(value) != self.size:
            raise NetworkDefinitionError(f"PluginField '{self.name}': size {value} differs from the data's {self.size}")

    def __repr__(self) -> str:
        return f"<PluginField {self.name!r} {self._type.name} {self._data!r}>"


class PluginFieldCollection(list):  # type: ignore[type-arg]
    """A list of PluginField (TensorRT binds it as a Python list type)."""


_FIELD_TYPES = types.SimpleNamespace(PluginField=PluginField, PluginFieldType=PluginFieldType)


# --------------------------------------------------------------------------- declared plugins
class _Declarations(Protocol):
    """Where the sim finds declared plugins (installed by torch2trt_lite.plugins)."""

    def find(self, name: str, version: str, namespace: str) -> Any | None:
        """The declaration under that key (built-ins load on demand), or None."""

    def get(self, name: str, version: str, namespace: str) -> Any:
        """The declaration under that key, or a PluginError that says which ones are declared."""

    def declared(self) -> list[Any]:
        """Every declaration of this process, built-ins included."""


class _NoDeclarations:
    """Until torch2trt_lite.plugins installs its registry, no plugin is declared."""

    def find(self, name: str, version: str, namespace: str) -> Any | None:
        return None

    def get(self, name: str, version: str, namespace: str) -> Any:
        raise PluginError(
            f"plugin '{name}' version {version} in namespace '{namespace}' is not declared in this process "
            "(torch2trt_lite.plugins is not loaded). Import the module that declares it (declare_plugin) before "
            "loading the engine."
        )

    def declared(self) -> list[Any]:
        return []


_DECLARED: _Declarations = _NoDeclarations()


def set_declared_plugins(declarations: _Declarations) -> None:
    """Install where the sim's plugin registry finds declared plugins (not TensorRT API):
    ``find(name, version, namespace)``, ``get(name, version, namespace)`` and ``declared()``, each
    giving declaration objects (``torch2trt_lite.plugins.PluginDef``)."""
    global _DECLARED
    _DECLARED = declarations


# ----------------------------------------------------------------------------- plugin objects
class _SimPlugin:
    """The sim's plugin object: a declared plugin (PluginDef) with resolved attributes."""

    def __init__(self, pdef: Any, attrs: Any, phase: Any = None) -> None:
        self._pdef = pdef
        self._attrs = attrs
        self._phase = phase

    @property
    def plugin_name(self) -> str:
        return str(self._pdef.name)

    @property
    def plugin_version(self) -> str:
        return str(self._pdef.version)

    @property
    def plugin_namespace(self) -> str:
        return str(self._pdef.namespace)

    @property
    def num_outputs(self) -> int:
        return len(self._pdef.outputs)

    def get_fields_to_serialize(self) -> PluginFieldCollection:
        return PluginFieldCollection(self._pdef.encode_fields(_FIELD_TYPES, self._attrs))

    def __repr__(self) -> str:
        return f"<sim plugin {self.plugin_name} v{self.plugin_version} ({self.plugin_namespace}) {dict(self._attrs)}>"


class IPluginCreatorV3One:
    """Creates plugin objects from fields. Subclass and override ``create_plugin`` to register your own."""

    def __init__(self) -> None:
        self.name = ""
        self.plugin_version = "1"
        self.plugin_namespace = ""
        self.field_names = PluginFieldCollection()

    def create_plugin(self, name: str, field_collection: Any, phase: Any) -> Any:
        raise NotImplementedError("IPluginCreatorV3One.create_plugin must be overridden")


class _DeclaredCreator(IPluginCreatorV3One):
    """Creator of a plugin declared with torch2trt_lite.plugins.declare_plugin."""

    def __init__(self, pdef: Any) -> None:
        super().__init__()
        self._pdef = pdef
        self.name = pdef.name
        self.plugin_version = pdef.version
        self.plugin_namespace = pdef.namespace
        self.field_names = PluginFieldCollection(
            PluginField(n, np.array([]), PluginFieldType.UNKNOWN) for n in pdef.attrs
        )

    def create_plugin(self, name: str, field_collection: Any, phase: Any) -> _SimPlugin:
        return _SimPlugin(self._pdef, self._pdef.decode_fields(list(field_collection or [])), phase)


class IPluginRegistry:
    """Plugin creators by (name, version, namespace); declared plugins are always found."""

    def __init__(self) -> None:
        self._creators: dict[tuple[str, str, str], Any] = {}
        self._declared: dict[tuple[str, str, str], _DeclaredCreator] = {}
        self._error_recorder: Any = None
        self._parent_search_enabled = True

    @staticmethod
    def _key(creator: Any, namespace: str) -> tuple[str, str, str]:
        return (str(creator.name), str(creator.plugin_version), str(namespace or creator.plugin_namespace or ""))

    def register_creator(self, creator: Any, plugin_namespace: str = "") -> bool:
        key = self._key(creator, plugin_namespace)
        if key in self._creators:
            return False
        self._creators[key] = creator
        return True

    def deregister_creator(self, creator: Any) -> bool:
        for k, c in list(self._creators.items()):
            if c is creator:
                del self._creators[k]
                return True
        return False

    def get_creator(self, type: str, version: str, plugin_namespace: str = "") -> Any:  # noqa: A002
        key = (str(type), str(version), str(plugin_namespace))
        hit = self._creators.get(key)
        if hit is not None:
            return hit
        hit = self._declared.get(key)
        if hit is None:
            pdef = _DECLARED.find(*key)
            if pdef is None:
                return None
            hit = self._declared[key] = _DeclaredCreator(pdef)
        return hit

    def get_plugin_creator(self, type: str, version: str, plugin_namespace: str = "") -> Any:  # noqa: A002
        return self.get_creator(type, version, plugin_namespace)

    @property
    def all_creators(self) -> list[Any]:
        for pdef in _DECLARED.declared():
            self.get_creator(pdef.name, pdef.version, pdef.namespace)
        return [*self._creators.values(), *(c for k, c in self._declared.items() if k not in self._creators)]

    @property
    def all_creators_recursive(self) -> list[Any]:
        return self.all_creators

    @property
    def plugin_creator_list(self) -> list[Any]:
        return self.all_creators

    error_recorder = field_property("_error_recorder")

    @property
    def parent_search_enabled(self) -> bool:
        return self._parent_search_enabled

    @parent_search_enabled.setter
    def parent_search_enabled(self, value: bool) -> None:
        self._parent_search_enabled = bool(value)


_REGISTRY = IPluginRegistry()


def _get_plugin_registry() -> IPluginRegistry:
    return _REGISTRY


# ------------------------------------------------------------------------------------- layer
class IPluginV3Layer(ILayer):
    _layer_type = "PLUGIN_V3"
    _attrs: ClassVar[dict[str, Any]] = {}

    def __init__(self, network: Any, inputs: Sequence[Any], plugin: Any = None, n_shape_inputs: int = 0, **attrs: Any):
        super().__init__(network, inputs, **attrs)
        self._plugin: _SimPlugin | None = plugin
        self._set_shape_inputs(len(self._inputs), int(n_shape_inputs))

    def _set_shape_inputs(self, n_inputs: int, n_shape: int) -> None:
        self._n_shape = n_shape
        self._shape_inputs = tuple(range(n_inputs - n_shape, n_inputs))  # type: ignore[misc]

    @property
    def plugin(self) -> Any:
        return self._plugin

    def _sim_plugin(self) -> _SimPlugin:
        if self._plugin is None:
            raise PluginError(f"{self._name}: the plugin of this layer was not restored")
        return self._plugin

    def _n_outputs(self) -> int:
        return self._sim_plugin().num_outputs

    def _required_inputs(self) -> int:
        return len(self._inputs)

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        p = self._sim_plugin()
        pdef, attrs = p._pdef, p._attrs
        n_exec = len(infos) - self._n_shape
        exec_infos = [i for i in infos[:n_exec] if i is not None]
        try:
            pdef.float_type(attrs, [_dtypes.torch_dtype(i.dtype) for i in exec_infos])
            pdef.check_shapes(attrs, [i.shape for i in exec_infos])
        except PluginError as e:
            raise self._fail(str(e)) from None
        for k, info in enumerate(infos[n_exec:]):
            assert info is not None
            if info.rank > 1 or info.dtype not in _SHAPE_TYPES:
                got = getattr(info.dtype, "name", info.dtype)
                raise self._fail(f"shape input {k} must be a 0-D or 1-D INT32/INT64 tensor, got {got} of rank {info.rank}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        p = self._sim_plugin()
        pdef, attrs = p._pdef, p._attrs
        exec_in = list(inputs[: len(inputs) - self._n_shape])
        if rt.probe or any(t.device.type == "meta" for t in exec_in):
            try:
                t = pdef.float_type(attrs, [x.dtype for x in exec_in])
                shapes = pdef.output_shapes(attrs, [tuple(x.shape) for x in exec_in])
                dts = pdef.output_dtypes(attrs, t)
            except PluginError as e:
                raise self._fail(str(e)) from None
            for s in shapes:
                if any(not isinstance(d, int) or d < 0 for d in s):
                    raise self._fail(f"the shape rule gave output shape {tuple(s)}; dimensions must be ints >= 0")
            return [torch.empty(tuple(s), dtype=d, device="meta") for s, d in zip(shapes, dts, strict=True)]
        try:
            return pdef.run_reference(attrs, exec_in)
        except PluginError as e:
            raise RuntimeExecutionError(f"layer '{self._name}': {e}") from None

    # -- plan
    def _extra_state(self) -> dict[str, Any]:
        p = self._sim_plugin()
        return {
            "plugin": {
                "name": p.plugin_name, "version": p.plugin_version, "namespace": p.plugin_namespace,
                "attrs": json.dumps(p._pdef.attrs_to_json(p._attrs), sort_keys=True),
            },
            "n_shape_inputs": self._n_shape,
        }

    def _restore_extra(self, state: dict[str, Any]) -> None:
        rec = state.get("plugin")
        if not isinstance(rec, dict):
            raise PluginError(f"layer '{self._name}': the plan holds no plugin record")
        pdef = _DECLARED.get(rec["name"], rec["version"], rec["namespace"])
        try:
            attrs = pdef.attrs_from_json(json.loads(rec["attrs"]))
        except ValueError as e:
            raise PluginError(f"layer '{self._name}': plugin attributes in the plan are corrupt: {e}") from None
        self._plugin = _SimPlugin(pdef, attrs)
        n_inputs = len(getattr(self, "_plan_io", ([], []))[0])
        self._set_shape_inputs(n_inputs, int(state.get("n_shape_inputs", 0)))


# ------------------------------------------------------------------------------------- mixin
class PluginMixin:
    def add_plugin_v3(self, inputs: Sequence[Any], shape_inputs: Sequence[Any], plugin: Any) -> IPluginV3Layer:
        net: Any = self
        if not isinstance(plugin, _SimPlugin):
            raise net._error(
                f"add_plugin_v3: the sim runs plugins declared with torch2trt_lite.plugins.declare_plugin "
                f"(created through get_plugin_registry().get_creator(...).create_plugin(...)); got a "
                f"{type(plugin).__name__}"
            )
        ins, shp = list(inputs), list(shape_inputs)
        layer: IPluginV3Layer = net._add("IPluginV3Layer", ins + shp, plugin=plugin, n_shape_inputs=len(shp))
        return layer


__all__ = [
    "IPluginCreatorV3One", "IPluginRegistry", "IPluginV3Layer", "PluginField", "PluginFieldCollection",
    "PluginMixin", "set_declared_plugins",
]
