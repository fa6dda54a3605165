"""The range of values of an integer network tensor, for a size read from values (``n =
lengths.max().item()``, :func:`torch2trt_lite.trace.symbolic.value_read`).

An engine input read as a size is a *shape input*: its optimization profiles hold its values within
its ``Input``'s ``low``..``high - 1`` (``torch2trt_lite.build.engine.shape_input_values``), and
TensorRT refuses a call outside them. A value computed from it by layers that only pick or reorder
elements (shuffles, slices, gathers, integer casts, identities, concatenations with other such values
or constants, MAX/MIN reductions and elementwise MAX/MIN) stays within the same range, so the size
read from it gets those bounds: a comparison the range decides (``if n > x.shape[1]:`` with
``high <= x.shape[1] + 1``) is answered, where an unbounded size would be refused.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from torch2trt_lite.converters.impl.nn_common import producer_layers

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

_UNBOUNDED = (-math.inf, math.inf)
_PICKS = {"SHUFFLE": None, "SLICE": "ISliceLayer", "GATHER": None, "CAST": None, "IDENTITY": None}


def value_bounds(ctx: ConversionContext, it: Any) -> tuple[float, float]:
    """``(lo, hi)`` every value of integer network tensor ``it`` lies in, whatever the inputs within
    their ranges (``ctx.value_bounds``: network input name -> (low, high), inclusive); unbounded
    where its layers do not show one."""
    if not ctx.value_bounds:
        return _UNBOUNDED
    trt, producers = ctx.trt, producer_layers(ctx.network)
    ints = (trt.int32, trt.int64, trt.int8, trt.uint8)

    def union(parts: list[tuple[float, float]]) -> tuple[float, float]:
        return min(p[0] for p in parts), max(p[1] for p in parts)

    def bounds(t: Any, depth: int) -> tuple[float, float]:
        if depth > 64 or t.dtype not in ints:
            return _UNBOUNDED
        if t.is_network_input:
            return ctx.value_bounds.get(str(t.name), _UNBOUNDED)
        layer = producers.get(str(t.name))
        if layer is None:
            return _UNBOUNDED
        kind = layer.type.name
        if kind == "CONSTANT":
            layer.__class__ = trt.IConstantLayer
            w = layer.weights  # TensorRT gives a numpy array, the sim its Weights
            vals = np.asarray(w.numpy() if hasattr(w, "numpy") else w)
            return (float(vals.min()), float(vals.max())) if vals.size else _UNBOUNDED
        if kind == "CONCATENATION":
            return union([bounds(layer.get_input(k), depth + 1) for k in range(int(layer.num_inputs))])
        if kind == "REDUCE":
            layer.__class__ = trt.IReduceLayer
            ok = layer.op in (trt.ReduceOperation.MAX, trt.ReduceOperation.MIN)
            return bounds(layer.get_input(0), depth + 1) if ok else _UNBOUNDED
        if kind == "ELEMENTWISE":
            layer.__class__ = trt.IElementWiseLayer
            if layer.op not in (trt.ElementWiseOperation.MAX, trt.ElementWiseOperation.MIN):
                return _UNBOUNDED
            return union([bounds(layer.get_input(k), depth + 1) for k in range(2)])
        if kind not in _PICKS:
            return _UNBOUNDED
        sub = _PICKS[kind]
        if sub is not None:
            layer.__class__ = getattr(trt, sub)
            if layer.mode == trt.SampleMode.FILL:  # NOTE: fills with a value of its own
                return _UNBOUNDED
        return bounds(layer.get_input(0), depth + 1)

    return bounds(it, 0)


__all__ = ["value_bounds"]
