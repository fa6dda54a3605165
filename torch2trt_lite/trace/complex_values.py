"""Complex values while tracing: which converter a call with a complex argument or result gets.

TensorRT has no complex type; a complex value (from ``torch.stft(..., return_complex=True)``) is held
in the network as a real ``[..., 2]`` tensor (``converters/complex.py``). A converter that does not
know that layout would take the pair dim for a dim of its own and compute wrong values without a
word, so :func:`route` gives every call that touches a complex tensor (an argument, or its result)
to the complex form of its op in ``COMPLEX_AWARE``, and refuses it (naming the op and the user's
line, in ``convert`` and ``check`` alike) when there is none. Calls without a complex tensor keep
their own converter (one ``is_complex`` per tensor argument).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch
from torch.utils._pytree import tree_flatten

from torch2trt_lite.converters.impl.complex import COMPLEX_AWARE, complex_output, refusal
from torch2trt_lite.errors import UnsupportedOperatorError
from torch2trt_lite.trace.context import arg_tensors

if TYPE_CHECKING:
    from torch2trt_lite.registry import Call, ConverterRecord
    from torch2trt_lite.trace.tracer import Tracer


def _complex(x: Any) -> bool:
    return isinstance(x, complex) or (isinstance(x, torch.Tensor) and x.is_complex())


def touches_complex(call: Call) -> bool:
    """Does ``call`` take or return a complex tensor (or take a Python complex)?"""
    out = call.output
    if isinstance(out, torch.Tensor):
        if out.is_complex():
            return True
    elif isinstance(out, (tuple, list)) and any(_complex(t) for t in tree_flatten(out)[0]):
        return True
    ts = arg_tensors(call.args, call.kwargs)
    if ts is None:
        ts = tree_flatten((call.args, dict(call.kwargs)))[0]
    return any(_complex(t) for t in ts) or any(isinstance(x, complex) for x in (*call.args, *call.kwargs.values()))


def route(tracer: Tracer, record: ConverterRecord, call: Call) -> ConverterRecord | None:
    """``record``, or for a call on complex values its complex-aware form; None when refused (recorded
    in check mode; raised otherwise, by ``tracer.unsupported``)."""
    if not touches_complex(call):
        return record
    aware = COMPLEX_AWARE.get(record.qualname)
    if aware is None:
        tracer.unsupported(record.qualname, refusal(record.qualname, call), refused=True)
        return None
    return dataclasses.replace(record, converter=aware[0], check=aware[1], python_result=False)


def check_outputs(outputs: list[tuple[str, torch.Tensor]]) -> None:
    """Refuse a complex model output (TensorRT outputs are real)."""
    reason = complex_output(outputs)
    if reason:
        raise UnsupportedOperatorError(reason)


__all__ = ["check_outputs", "complex_output", "route", "touches_complex"]
