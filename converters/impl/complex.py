"""Complex values as (real, imaginary) pairs: builders over network tensors ``[..., 2]``.

TensorRT has no complex type. A complex torch tensor of logical shape ``S`` (only ever made by
``torch.stft(..., return_complex=True)``, ``torch.complex`` or ``torch.view_as_complex`` while
converting) is held in the network as a real tensor of shape ``S + [2]``: the layout of
``torch.view_as_real``. The converters of ``converters/complex.py`` work on that layout; the tracer
refuses every other converter on a complex value (``torch2trt_lite/trace/complex_values.py``).

Formulas (fp32, as torch's CPU kernels compute them up to rounding):
``|z| = sqrt(re^2 + im^2)``, ``angle z = atan2(im, re)``, ``conj z = (re, -im)``,
``z w = (a c - b d, a d + b c)``, ``z / w = z conj(w) / |w|^2``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch.utils._pytree import tree_flatten

from .elementwise import arith, broadcast, ew, scalar, unary
from .nn_common import const, gather, rank, unsqueeze
from .shape import concat

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


# qualname -> (converter, check) of the ops that take or make complex values: filled by
# converters/complex.py (the tracer reads it: torch2trt_lite/trace/complex_values.py)
COMPLEX_AWARE: dict[str, tuple[Callable[..., Any], Callable[..., str | None] | None]] = {}


def is_complex(x: Any) -> bool:
    """A complex tensor or a Python complex."""
    return isinstance(x, complex) or (isinstance(x, torch.Tensor) and x.is_complex())


def part(ctx: ConversionContext, z: Any, which: int) -> Any:
    """The real (0) or imaginary (1) part of ``z`` [..., 2]: one gather, dynamic-safe."""
    return gather(ctx, z, torch.tensor(which, dtype=torch.int32), rank(z) - 1)


def pack(ctx: ConversionContext, re: Any, im: Any) -> Any:
    """``(re, im)`` as ``[..., 2]`` (the two broadcast to one shape first)."""
    re, im = broadcast(ctx, re, im)
    if tuple(re.shape) != tuple(im.shape):  # NOTE: one is broadcast along a dim: add zeros of the other
        re, im = ew(ctx, re, ew(ctx, im, scalar(ctx, 0, ctx.dtype_of(im)), "PROD"), "SUM"), \
            ew(ctx, im, ew(ctx, re, scalar(ctx, 0, ctx.dtype_of(re)), "PROD"), "SUM")
    return concat(ctx, [unsqueeze(ctx, re, [-1]), unsqueeze(ctx, im, [-1])], -1)


def from_real(ctx: ConversionContext, r: Any, dtype: torch.dtype) -> Any:
    """A real network tensor ``r`` as a complex value ``(r, 0)``: ``r[..., None] * [1, 0]``."""
    return ew(ctx, unsqueeze(ctx, r, [rank(r)]), const(ctx, torch.tensor([1.0, 0.0]), dtype), "PROD")


def scale(ctx: ConversionContext, z: Any, r: Any, op: str) -> Any:
    """``z`` times (``op`` PROD) or over (DIV) the real network tensor ``r`` (broadcast over the logical dims)."""
    return ew(ctx, z, unsqueeze(ctx, r, [rank(r)]), op)


def magnitude(ctx: ConversionContext, z: Any) -> Any:
    """``|z|`` = sqrt(re^2 + im^2)."""
    sq = ew(ctx, z, z, "PROD")
    layer = ctx.network.add_reduce(sq, ctx.trt.ReduceOperation.SUM, 1 << (rank(z) - 1), False)
    return unary(ctx, layer.get_output(0), "SQRT")


def angle(ctx: ConversionContext, z: Any, dtype: torch.dtype) -> Any:
    """``atan2(im, re)`` (in (-pi, pi], torch.angle's range)."""
    return arith(ctx, part(ctx, z, 1), part(ctx, z, 0), "atan2", dtype)


def conj(ctx: ConversionContext, z: Any, dtype: torch.dtype) -> Any:
    return ew(ctx, z, const(ctx, torch.tensor([1.0, -1.0]), dtype), "PROD")


def multiply(ctx: ConversionContext, z: Any, w: Any) -> Any:
    """``z * w`` of two complex values (broadcast over the logical dims)."""
    a, b, c, d = part(ctx, z, 0), part(ctx, z, 1), part(ctx, w, 0), part(ctx, w, 1)
    re = ew(ctx, ew(ctx, a, c, "PROD"), ew(ctx, b, d, "PROD"), "SUB")
    im = ew(ctx, ew(ctx, a, d, "PROD"), ew(ctx, b, c, "PROD"), "SUM")
    return pack(ctx, re, im)


def divide(ctx: ConversionContext, z: Any, w: Any, dtype: torch.dtype) -> Any:
    """``z / w`` of two complex values: ``z conj(w) / |w|^2``."""
    den = ew(ctx, ew(ctx, part(ctx, w, 0), part(ctx, w, 0), "PROD"), ew(ctx, part(ctx, w, 1), part(ctx, w, 1), "PROD"),
             "SUM")
    return scale(ctx, multiply(ctx, z, conj(ctx, w, dtype)), den, "DIV")


def refusal(qualname: str, call: Any) -> str:
    """Why ``qualname`` is refused on a complex value (the tracer's words, in convert and check alike)."""
    if any(is_complex(x) for x in tree_flatten((call.args, dict(call.kwargs)))[0]):
        what = "has a complex argument"
    else:
        what = "makes a complex tensor from real ones"
    return (f"{qualname} {what}, and TensorRT has no complex type. A complex value from torch.stft("
            "return_complex=True) is held as (real, imaginary) pairs and only these ops convert on it: abs, angle, "
            ".real, .imag, torch.view_as_real, conj, + - * / (complex, real or number operands), indexing, reshape, "
            "view, flatten, squeeze, unsqueeze, permute, transpose, sum, mean, istft; compute this op on real tensors "
            "(z.abs(), z.real, z.imag, torch.view_as_real(z))")


def complex_output(outputs: list[tuple[str, torch.Tensor]]) -> str | None:
    """Why a model output that is complex cannot be an engine output (None when none is)."""
    names = [n for n, t in outputs if t.is_complex()]
    if not names:
        return None
    return (f"output(s) {', '.join(names)} of the model are complex, and TensorRT engine outputs cannot be: "
            "return z.abs() (the magnitude), z.abs() ** 2 (the power) or torch.view_as_real(z) (real, imaginary "
            "as a last dim of 2) instead")


__all__ = ["COMPLEX_AWARE", "angle", "complex_output", "conj", "divide", "from_real", "is_complex", "magnitude",
           "multiply", "pack", "part", "refusal", "scale"]
