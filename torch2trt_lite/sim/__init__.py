"""torch2trt_lite.sim: TensorRT's Python network API, executed with torch on CPU or CUDA.

``torch2trt_lite.sim`` itself is the newest supported TensorRT version's API (11.1);
``api("10.13")``, ``api("10.16")`` and ``api("11.1")`` give each version's namespace, holding only
the names that version has. ``torch_dtype(trt_dtype)`` maps a DataType to a torch dtype.

Where TensorRT logs an error and returns ``None`` from an ``add_*`` call, the sim logs the same
error and raises :class:`torch2trt_lite.errors.NetworkDefinitionError`, so no mistake goes unseen.
``build_serialized_network`` and ``execute_async_v3`` keep TensorRT's contract (None / False, with
the reason logged).
"""

from typing import Any as _Any

from ._api import Namespace, api
from ._dtypes import torch_dtype
from ._manifest import VERSIONS

_newest = api(VERSIONS[-1])
globals().update({name: getattr(_newest, name) for name in _newest._public_names()})
__version__ = _newest.__version__

__all__ = ["Namespace", "VERSIONS", "api", "torch_dtype", *_newest._public_names()]


def __getattr__(name: str) -> _Any:
    raise AttributeError(f"module 'torch2trt_lite.sim' has no attribute '{name}' (TensorRT {_newest.__version__})")
