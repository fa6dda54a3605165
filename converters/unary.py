"""Unary math: one table from torch's op name to every callable form of it.

Each op is registered as ``torch.<name>``, ``torch.Tensor.<name>``, the in-place
``torch.Tensor.<name>_`` / ``torch.<name>_`` where torch has them, aliases (``arcsin``,
``absolute``, ``fix``...), ``torch.special`` forms and operators (``abs(x)``, ``-x``, ``~x``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.registry import Call, converter, register_table

from .elementwise import no_out
from .impl import elementwise as E

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

# op name -> aliases sharing its semantics
_OPS: dict[str, tuple[str, ...]] = {
    "abs": ("absolute",), "neg": ("negative",), "exp": (), "expm1": (), "exp2": (), "log": (), "log1p": (),
    "log2": (), "log10": (), "sqrt": (), "rsqrt": (), "reciprocal": (), "sin": (), "cos": (), "tan": (),
    "asin": ("arcsin",), "acos": ("arccos",), "atan": ("arctan",), "sinh": (), "cosh": (),
    "asinh": ("arcsinh",), "acosh": ("arccosh",), "atanh": ("arctanh",), "erf": (), "erfc": (), "floor": (),
    "ceil": (), "trunc": ("fix",), "frac": (), "sign": ("sgn",), "logical_not": (), "bitwise_not": (),
    "isnan": (), "isinf": (), "isfinite": (), "isposinf": (), "isneginf": (), "signbit": (), "square": (),
    "positive": (), "deg2rad": (), "rad2deg": (), "sinc": (),
}
_SPECIAL = {"expm1": "expm1", "exp2": "exp2", "log1p": "log1p", "erf": "erf", "erfc": "erfc", "sinc": "sinc"}
_OPERATORS = {"abs": ("__abs__",), "neg": ("__neg__",), "bitwise_not": ("__invert__",), "positive": ("__pos__",)}


def _targets(kind: str) -> tuple[Any, ...]:
    out: list[Any] = []
    for name in (kind, *_OPS[kind]):
        for owner, prefix in ((torch, "torch."), (torch.Tensor, "torch.Tensor.")):
            for n in (name, name + "_"):
                if n in getattr(owner, "__dict__", {}) or hasattr(owner, n):
                    out.append(prefix + n)
    if kind in _SPECIAL:
        out.append("torch.special." + _SPECIAL[kind])
    out.extend("torch.Tensor." + op for op in _OPERATORS.get(kind, ()))
    return tuple(out)


def _in_dtype(x: Any) -> torch.dtype:
    if isinstance(x, torch.Tensor):
        return x.dtype
    return torch.bool if isinstance(x, bool) else torch.int64 if isinstance(x, int) else torch.float32


def _make(kind: str) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        x = call.arg(0, "input")
        out = E.math_unary(ctx, x, kind, call.output.dtype, _in_dtype(x))
        return out

    return convert


register_table({_targets(kind): kind for kind in _OPS}, _make, check=no_out)


@converter(torch.round, torch.Tensor.round, torch.Tensor.round_, torch.round_, "torch.special.round", check=no_out)
def convert_round(ctx: ConversionContext, call: Call) -> Any:
    x = call.arg(0, "input")
    decimals = call.kwargs.get("decimals", 0)
    return E.round_decimals(ctx, x, int(decimals), call.output.dtype)


@converter(torch.logit, torch.Tensor.logit, torch.Tensor.logit_, torch.logit_, "torch.special.logit", check=no_out)
def convert_logit(ctx: ConversionContext, call: Call) -> Any:
    x, eps = call.arg(0, "input"), call.arg(1, "eps", None)
    dtype = call.output.dtype
    if eps is not None:
        x = E.clamp(ctx, x, float(eps), 1.0 - float(eps), dtype)
    return E.math_unary(ctx, x, "logit", dtype, dtype)
