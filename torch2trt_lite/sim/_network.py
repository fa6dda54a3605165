"""INetworkDefinition: the network container. The ``add_*`` methods live in ``layers/`` mixins."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..errors import NetworkDefinitionError
from . import _dtypes
from ._core import (
    PROBE_SIZES,
    DeferredWeights,
    ILayer,
    ITensor,
    TensorInfo,
    Weights,
    _log,
    as_dims,
    field_property,
)
from ._enums import DataType, NetworkDefinitionCreationFlag, Severity
from .layers import MIXINS


def _type_label(cls: type) -> str:
    label = getattr(cls, "_trt_label", None)  # TensorRT's own spelling, e.g. "Matrix Multiply"
    if label:
        return str(label)
    name = cls.__name__
    if name.startswith("I"):
        name = name[1:]
    if name.endswith("Layer"):
        name = name[: -len("Layer")]
    return name


class INetworkDefinition(*MIXINS):  # type: ignore[misc]
    def __init__(self, builder: Any, flags: int) -> None:
        self._builder_ref = weakref.ref(builder)
        self._logger = builder.logger
        self._flags = int(flags)
        self._strongly_typed = bool(self._flags & (1 << int(NetworkDefinitionCreationFlag.STRONGLY_TYPED)))
        self._layers: list[ILayer] = []
        # NOTE: bumped by every change of wiring or layer settings (layers added or removed, ILayer._touch):
        # the key of the loop/conditional analyses cached in layers/control.py.
        self._wiring = 0
        self._inputs: list[ITensor] = []
        self._outputs: list[ITensor] = []
        self._shape_outputs: list[ITensor] = []
        self._name = "Unnamed Network 0"
        self._error_recorder: Any = None
        self._ns: Any = builder._ns
        self._refittable: set[str] = set()
        self._debug: set[int] = set()
        self._probe_memo: dict[Any, Any] = {}  # shape inference results by layer configuration (_core)
        self._views: weakref.WeakKeyDictionary[ILayer, ILayer] = weakref.WeakKeyDictionary()  # see _view

    # ----------------------------------------------------------------------------- internal
    def _cls(self, name: str) -> Any:
        """The (versioned) class called ``name``: objects a network creates are version-scoped."""
        return self._ns._class(name)

    def _check_owned(self, tensor: Any, what: str = "tensor") -> ITensor:
        if not isinstance(tensor, ITensor):
            raise self._error(f"expected an ITensor for {what}, got {type(tensor).__name__}")
        if tensor._network_ref() is not self:
            raise self._error(f"{what} '{tensor.name}' belongs to another network")
        return tensor

    def _error(self, msg: str) -> NetworkDefinitionError:
        _log(self._logger, Severity.ERROR, msg)
        return NetworkDefinitionError(msg)

    def _add(self, cls_name: str, inputs: Sequence[Any], *, eager: bool = True, **attrs: Any) -> Any:
        """Create a layer of class ``cls_name`` on ``inputs`` (ITensors or None), name its outputs."""
        cls = self._cls(cls_name)
        checked = [self._check_owned(t, f"input {i}") if t is not None else None for i, t in enumerate(inputs)]
        layer = cls(self, checked, **attrs)
        index = len(self._layers)
        layer._name = f"(Unnamed Layer* {index}) [{_type_label(type(layer))}]"
        n_out = layer._n_outputs() if hasattr(layer, "_n_outputs") else layer._num_outputs
        for j in range(n_out):
            suffix = "_output" if n_out == 1 else f"_output_{j}"
            layer._outputs.append(ITensor(self, layer._name + suffix, layer, j))
        for t in checked:
            if t is not None:
                t._consumers.append(layer)
        self._layers.append(layer)
        self._wiring += 1
        if eager:
            try:
                layer._infos()
            except NetworkDefinitionError:
                self._remove_layer(layer)
                raise
        return layer

    def _view(self, layer: ILayer) -> ILayer:
        """What ``get_layer`` gives: like TensorRT, an object of class ``ILayer`` (``.type`` is the
        LayerType even where the subclass shadows ``type``, e.g. IActivationLayer) that becomes the
        subclass by ``view.__class__ = trt.IActivationLayer`` (the TensorRT idiom, as in Polygraphy).

        NOTE: the view shares the layer's ``__dict__``, so names, metadata, precisions and, after a
        downcast, layer settings written through it are the layer's; ILayer._canon leads it back to
        the layer for identity and virtual dispatch. Like pybind11, the same view is returned while
        it still is an ILayer; after a downcast, a new one."""
        base = self._cls("ILayer")
        view = self._views.get(layer)
        if view is None or type(view) is not base:
            if "_canon_ref" not in layer.__dict__:
                layer.__dict__["_canon_ref"] = weakref.ref(layer)
            view = base.__new__(base)
            view.__dict__ = layer.__dict__
            self._views[layer] = view
        return view

    def _remove_layer(self, layer: ILayer) -> None:
        self._wiring += 1
        if layer in self._layers:
            self._layers.remove(layer)
        for t in layer._inputs:
            if t is not None and layer in t._consumers:
                t._consumers.remove(layer)

    def _rename_tensor(self, tensor: ITensor, name: str) -> None:
        tensor._name = name

    def _set_input_shape(self, tensor: ITensor, shape: tuple[int, ...]) -> None:
        info = tensor._input_info
        assert info is not None
        tensor._input_info = self._input_info(info.dtype, shape)
        for c in list(tensor._consumers):
            c._touch()

    def _set_input_dtype(self, tensor: ITensor, dtype: DataType) -> None:
        info = tensor._input_info
        assert info is not None
        tensor._input_info = self._input_info(dtype, info.shape)
        for c in list(tensor._consumers):
            c._touch()

    @staticmethod
    def _input_info(dtype: DataType, shape: tuple[int, ...]) -> TensorInfo:
        tdt = _dtypes.torch_dtype(dtype)
        if all(d >= 0 for d in shape):
            return TensorInfo(dtype, shape, (torch.empty(shape, dtype=tdt, device="meta"),))
        probes = tuple(
            torch.empty([d if d >= 0 else p for d in shape], dtype=tdt, device="meta") for p in PROBE_SIZES
        )
        return TensorInfo(dtype, shape, probes)

    # ------------------------------------------------------------------------ TensorRT API
    def add_input(self, name: str, dtype: Any, shape: Any) -> ITensor:
        dt = DataType(int(dtype))
        dims = as_dims(shape, "add_input shape")
        if any(d < -1 for d in dims):
            raise self._error(f"add_input '{name}': dimensions must be >= -1, got {dims}")
        if any(t.name == name for t in self._inputs):
            raise self._error(f"add_input: a network input named '{name}' already exists")
        t = ITensor(self, str(name), None)
        t._input_info = self._input_info(dt, dims)
        self._inputs.append(t)
        return t

    def mark_output(self, tensor: ITensor) -> None:
        self._check_owned(tensor)
        if tensor not in self._outputs:
            self._outputs.append(tensor)

    def unmark_output(self, tensor: ITensor) -> None:
        if tensor in self._outputs:
            self._outputs.remove(tensor)

    def mark_output_for_shapes(self, tensor: ITensor) -> bool:
        self._check_owned(tensor)
        if tensor not in self._shape_outputs:
            self._shape_outputs.append(tensor)
        return True

    def unmark_output_for_shapes(self, tensor: ITensor) -> bool:
        if tensor in self._shape_outputs:
            self._shape_outputs.remove(tensor)
            return True
        return False

    def remove_tensor(self, tensor: ITensor) -> None:
        if tensor in self._inputs:
            if tensor._consumers:
                raise self._error(f"remove_tensor: input '{tensor.name}' is still used by a layer")
            self._inputs.remove(tensor)

    def get_layer(self, index: int) -> ILayer | None:
        return self._view(self._layers[index]) if 0 <= index < len(self._layers) else None

    def get_input(self, index: int) -> ITensor | None:
        return self._inputs[index] if 0 <= index < len(self._inputs) else None

    def get_output(self, index: int) -> ITensor | None:
        return self._outputs[index] if 0 <= index < len(self._outputs) else None

    def get_flag(self, flag: Any) -> bool:
        return bool(self._flags & (1 << int(flag)))

    def mark_weights_refittable(self, name: str) -> bool:
        """With ``BuilderFlag.REFIT_INDIVIDUAL``: the weights named ``name`` (set_weights_name) are refittable."""
        if not any(getattr(w, "_name", None) == name for layer in self._layers for w in layer._a.values()):
            _log(self._logger, Severity.ERROR, f"markWeightsRefittable: no weights are named '{name}'")
            return False
        self._refittable.add(str(name))
        return True

    def set_weights_name(self, weights: Any, name: str) -> bool:
        """Name every current use of ``weights`` (matched by their memory, as TensorRT does); False,
        with the reason logged, where no layer uses them or ``name`` names other weights."""
        uses = _weight_uses(self._layers, weights)
        if not uses:
            _log(self._logger, Severity.ERROR, f"setWeightsName: weights '{name}' are not used by the network")
            return False
        ptrs = {_weights_ptr(w) for w in uses}
        for layer in self._layers:
            for w in layer._a.values():
                if getattr(w, "_name", None) == name and _weights_ptr(w) not in ptrs:
                    _log(self._logger, Severity.ERROR, f"setWeightsName: the name '{name}' names other weights")
                    return False
        for w in uses:
            w._name = str(name)
        return True

    def unmark_weights_refittable(self, name: str) -> bool:
        self._refittable.discard(str(name))
        return True

    def are_weights_marked_refittable(self, name: str) -> bool:
        return str(name) in self._refittable

    def mark_debug(self, tensor: ITensor) -> bool:
        self._debug.add(id(self._check_owned(tensor)))
        return True

    def unmark_debug(self, tensor: ITensor) -> bool:
        self._debug.discard(id(tensor))
        return True

    def is_debug_tensor(self, tensor: ITensor) -> bool:
        return id(tensor) in self._debug

    def __len__(self) -> int:
        return len(self._layers)

    def __getitem__(self, index: int) -> ILayer:
        if not -len(self._layers) <= index < len(self._layers):
            raise IndexError(index)
        return self._view(self._layers[index])

    def __enter__(self) -> INetworkDefinition:
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        return None

    def __del__(self) -> None:
        return None

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._name = str(value)

    @property
    def num_layers(self) -> int:
        return len(self._layers)

    @property
    def num_inputs(self) -> int:
        return len(self._inputs)

    @property
    def num_outputs(self) -> int:
        return len(self._outputs)

    @property
    def has_implicit_batch_dimension(self) -> bool:
        return False

    @property
    def has_explicit_precision(self) -> bool:
        return False

    error_recorder = field_property("_error_recorder")

    @property
    def builder(self) -> Any:
        return self._builder_ref()

    @property
    def flags(self) -> int:
        return self._flags


def _weights_ptr(w: Any) -> Any:
    """The memory of weights (a sim Weights, numpy array or torch tensor); deferred weights by identity."""
    if isinstance(w, DeferredWeights):
        return ("deferred", id(w))
    if isinstance(w, Weights):
        w = w._tensor()
    if isinstance(w, torch.Tensor):
        return (w.data_ptr(), w.numel()) if w.numel() else None
    arr = np.asarray(w)
    return (arr.__array_interface__["data"][0], arr.size) if arr.size else None


def _weight_uses(layers: list[Any], weights: Any) -> list[Weights]:
    key = _weights_ptr(weights)
    if key is None:
        return []
    return [w for layer in layers for w in layer._a.values() if isinstance(w, Weights) and _weights_ptr(w) == key]
