"""Data-dependent shapes (issue 15): ``nonzero``/``argwhere``, one-argument ``where``,
``masked_select`` and indexing with a traced boolean mask (``boxes[scores > t]``).

Their result has as many rows as the data has true (non-zero) elements: TensorRT's ``INonZeroLayer``
gives the ``[rank, N]`` coordinates with ``N`` a data-dependent size (a ``-1`` dim the engine learns
while it runs), and the engine returns such outputs through an output allocator (``TRTModule`` does
that). ``N`` stays symbolic while tracing (``ctx.data_dependent``): later code
may slice, gather, reshape and concatenate with it, and a Python branch on it is refused with the line
(``if keep.numel() == 0:``), as ``torch.export`` refuses a guard on an unbacked size.

Real builder: TensorRT-RTX 1.7's CPU-only builder refuses NonZero ("has no runners"); networks with
these layers build where a GPU is (full TensorRT 10.x documents INonZeroLayer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.registry import Call, converter

from .elementwise import convert_where, no_out
from .impl import datadep as D
from .impl import elementwise as E
from .impl import shape as S
from .impl import sizes as Y

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

T = torch.Tensor


def _nonzero_check(call: Call) -> str | None:
    x = call.arg(0, "input")
    if isinstance(x, torch.Tensor) and x.dim() == 0:
        return "nonzero of a 0-D tensor (convert x.reshape(1) instead)"
    if call.kwargs.get("out") is not None:
        return "out= is not supported"
    return None


@converter(torch.nonzero, T.nonzero, torch.argwhere, T.argwhere, check=_nonzero_check)
def convert_nonzero(ctx: ConversionContext, call: Call) -> Any:
    """``[N, rank]`` INT64 indices (``as_tuple=True``: ``rank`` 1-D tensors), in row-major order like
    torch (TensorRT's NonZero lists the coordinates in that order too)."""
    x = call.arg(0, "input")
    coords = D.nonzero_coords(ctx, x, x)
    if call.kwargs.get("as_tuple", call.args[1] if call.qualname.endswith("nonzero") and len(call.args) > 1 else False):
        return tuple(D.rows(ctx, coords, x.dim()))
    out = S.transpose(ctx, coords, 0, 1)
    ctx.known_sizes(out, list(reversed(Y.network_sizes(ctx, coords))), tuple(call.output.shape))  # [count, rank]
    return out


def _where_check(call: Call) -> str | None:
    if len(call.args) + len(call.kwargs) == 1:
        return _nonzero_check(call)
    return no_out(call)


@converter(torch.where, check=_where_check, override=True)
def convert_where_any(ctx: ConversionContext, call: Call) -> Any:
    """``torch.where(c, a, b)`` (elementwise: :func:`converters.elementwise.convert_where`) and
    ``torch.where(c)``, which is ``torch.nonzero(c, as_tuple=True)``."""
    if len(call.args) + len(call.kwargs) > 1:
        return convert_where(ctx, call)
    x = call.arg(0, "condition")
    return tuple(D.rows(ctx, D.nonzero_coords(ctx, x, x), x.dim()))


# ------------------------------------------------------------------------------ masks
def _masked_select_check(call: Call) -> str | None:
    x, mask = call.arg(0, "input"), call.arg(1, "mask")
    if not isinstance(x, torch.Tensor) or not isinstance(mask, torch.Tensor):
        return "masked_select needs tensors"
    if mask.dtype != torch.bool:
        return f"masked_select needs a bool mask, got {mask.dtype}"
    return no_out(call)


@converter(torch.masked_select, T.masked_select, check=_masked_select_check)
def convert_masked_select(ctx: ConversionContext, call: Call) -> Any:
    """The elements of ``input`` where ``mask`` is true, in row-major order, as a 1-D tensor: both are
    broadcast to one shape, then a gather of the NonZero coordinates (IGatherLayer ND mode)."""
    x, mask = call.arg(0, "input"), call.arg(1, "mask")
    shape = torch.broadcast_shapes(x.shape, mask.shape)
    xt, mt = x.expand(shape), mask.expand(shape)
    its = E.broadcast(ctx, E.operand(ctx, x, x.dtype), ctx.itensor(mask))
    sizes = Y.network_sizes(ctx, its[0]) if -1 in tuple(its[0].shape) else tuple(shape)
    full = [S.expand(ctx, it, sizes) for it in its]
    if not len(shape):
        full = [S.reshape(ctx, it, [1]) for it in full]
        xt, mt = xt.reshape(1), mt.reshape(1)
    return D.gather_coords(ctx, full[0], D.nonzero_coords(ctx, full[1], mt), mt.dim())
