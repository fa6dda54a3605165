"""Collects the sim's public classes and module functions for the version namespaces."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _builder, _core, _dtypes, _network, _refit, _runtime
from ._core import ILayer
from .layers import control as _control
from .layers import linalg as _linalg
from .layers import plugin as _plugin


def classes() -> dict[str, type]:
    out: dict[str, type] = {}
    for mod in (_core, _builder, _network, _runtime, _refit, _control, _linalg, _plugin):
        for name, obj in vars(mod).items():
            if isinstance(obj, type) and not name.startswith("_") and obj.__module__ == mod.__name__:
                out[name] = obj
    todo = list(ILayer.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if not getattr(cls, "_versioned", False) and not cls.__name__.startswith("_"):
            out.setdefault(cls.__name__, cls)
    out["ILayer"] = ILayer
    return out


def _volume(iterable: Any) -> int:
    return _core.volume(iterable)


def _nptype(trt_type: Any) -> Any:
    t = _dtypes.torch_dtype(trt_type)
    return {
        "torch.float32": np.float32, "torch.float16": np.float16, "torch.int8": np.int8,
        "torch.int32": np.int32, "torch.int64": np.int64, "torch.bool": np.bool_, "torch.uint8": np.uint8,
    }[str(t)]


def functions() -> dict[str, Any]:
    fns: dict[str, Any] = {"volume": _volume, "nptype": _nptype}
    reg = getattr(_plugin, "_get_plugin_registry", None)
    if reg is not None:
        fns["get_plugin_registry"] = reg
    return fns
