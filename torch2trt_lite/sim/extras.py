"""What the rest of torch2trt-lite uses of the sim beyond TensorRT's API (through
``torch2trt_lite.backends``): the mapping between torch dtypes and ``DataType``, and weights the sim
computes when a plan is built (:class:`DeferredWeights`). Not part of the ``torch2trt_lite.sim``
namespace, which is TensorRT's API."""

from __future__ import annotations

from ._core import DeferredWeights
from ._dtypes import from_torch, torch_dtype

__all__ = ["DeferredWeights", "from_torch", "torch_dtype"]
