"""Accumulations into bins and rows: ``index_add``/``index_add_`` (loop-based mixture-of-experts code
adds each expert's output into its tokens' rows) and ``histc`` (transformers' MoE routing counts the
tokens per expert with it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.registry import Call, converter

from .elementwise import no_out
from .impl import elementwise as E
from .impl import indexing as I
from .impl import reduce as R
from .impl import shape as S
from .impl import sizes as Y
from .indexing import convert_scatter_reduce

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

T = torch.Tensor


# --------------------------------------------------------------------------------- index_add
def _index_add_check(call: Call) -> str | None:
    x, index, source = call.arg(0, "input"), call.arg(2, "index"), call.arg(3, "source")
    if not (isinstance(x, torch.Tensor) and isinstance(index, torch.Tensor) and isinstance(source, torch.Tensor)):
        return "index_add needs tensors for input, index and source"
    if index.dim() > 1:
        return f"index_add with a {index.dim()}-D index (torch takes a 0-D or 1-D index)"
    if x.dtype == torch.bool:
        return "index_add on a bool tensor"
    return no_out(call)


@converter(torch.index_add, T.index_add, T.index_add_, check=_index_add_check)
def convert_index_add(ctx: ConversionContext, call: Call) -> Any:
    """``x.index_add(dim, index, source, alpha=a)`` is ``x.scatter_add(dim, idx, a * source)`` with the
    1-D ``index`` broadcast to ``source``'s shape along ``dim``; converted by the scatter_add converter
    (a one-hot of the index and a sum: TensorRT's scatter layer cannot add)."""
    x, dim, index, source = call.arg(0, "input"), call.arg(1, "dim"), call.arg(2, "index"), call.arg(3, "source")
    alpha = call.kwargs.get("alpha", call.args[4] if len(call.args) > 4 else 1)
    n = max(source.dim(), 1)
    d = S.norm_dim(dim, n)
    src = source if source.dim() else source.reshape(1)
    view = [1] * n
    view[d] = -1
    # NOTE: torch tensors for the scatter_add converter's Call, each mapped to its network tensor
    idx_t = index.reshape(view).expand(src.shape).clone()
    # NOTE: source's sizes as the network has them (a data-dependent row count stays symbolic)
    src_sizes = Y.sizes_of(ctx, source) if source.dim() else (1,)
    ctx.set_itensor(idx_t, S.expand(ctx, S.reshape(ctx, ctx.itensor(index), view), src_sizes))
    src_it = E.operand(ctx, source, x.dtype)
    if source.dim() == 0:
        src_it = S.reshape(ctx, src_it, [1])
    if alpha != 1:
        src_it = E.ew(ctx, src_it, E.scalar(ctx, alpha, x.dtype), "PROD")
    src_t = (src * alpha).to(x.dtype).clone()
    ctx.set_itensor(src_t, src_it)
    inner = Call(torch.scatter_add, "torch.scatter_add", (x, d, idx_t, src_t), {}, call.output, call.module_path)
    return convert_scatter_reduce(ctx, inner)


# --------------------------------------------------------------------------------------- histc
def _histc_check(call: Call) -> str | None:
    x = call.arg(0, "input")
    if isinstance(x, torch.Tensor) and not x.is_floating_point():
        return f"histc of a {x.dtype} tensor (torch takes floating-point input)"
    bins = call.arg(1, "bins", 100)
    if not isinstance(bins, int) or bins <= 0:
        return f"histc with bins={bins!r} (a positive int is needed)"
    lo, hi = call.arg(2, "min", 0), call.arg(3, "max", 0)
    if not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)):
        return "histc with a tensor min or max"
    if lo > hi:
        return f"histc with min {lo} > max {hi}"
    return no_out(call)


@converter(torch.histc, T.histc, check=_histc_check)
def convert_histc(ctx: ConversionContext, call: Call) -> Any:
    """Counts per bin as torch computes them: ``bin = int((x - min) * bins / (max - min))`` (the last
    bin also holds ``x == max``), values outside [min, max] left out; ``min == max`` uses the data's
    own extremes (both 0 by default, as torch), and a range of zero width widens by 1 on each side.
    The counts are a sum over a one-hot of the bins (``numel x bins`` booleans)."""
    x = call.arg(0, "input")
    bins = int(call.arg(1, "bins", 100))
    lo, hi = float(call.arg(2, "min", 0)), float(call.arg(3, "max", 0))
    dt = x.dtype
    flat = S.reshape(ctx, ctx.itensor(x), [-1]) if x.dim() != 1 else ctx.itensor(x)
    if lo == hi:
        # NOTE: torch takes the data's min and max; equal ones widen to [min - 1, max + 1]
        mn = R.reduce(ctx, flat, "MIN", [0], False)
        mx = R.reduce(ctx, flat, "MAX", [0], False)
        same = E.ew(ctx, mn, mx, "EQUAL")
        one = E.scalar(ctx, 1, dt)
        left = E.select(ctx, same, E.ew(ctx, mn, one, "SUB"), mn)
        right = E.select(ctx, same, E.ew(ctx, mx, one, "SUM"), mx)
    else:
        left, right = E.scalar(ctx, lo, dt), E.scalar(ctx, hi, dt)
    # NOTE: torch's order of operations: (x - left) * bins / (right - left), in the input's type
    pos = E.ew(ctx, E.ew(ctx, flat, left, "SUB"), E.scalar(ctx, bins, dt), "PROD")
    pos = E.ew(ctx, pos, E.ew(ctx, right, left, "SUB"), "DIV")
    idx = ctx.cast(E.unary(ctx, pos, "FLOOR"), torch.int64)
    idx = E.ew(ctx, idx, E.scalar(ctx, bins - 1, torch.int64), "MIN")
    inside = E.logical(ctx, E.compare(ctx, flat, left, "ge"), E.compare(ctx, flat, right, "le"), "and")
    hot = I.one_hot(ctx, idx, bins, torch.bool)  # (numel, bins)
    hot = E.logical(ctx, hot, S.unsqueeze(ctx, inside, -1), "and")
    return ctx.cast(R.reduce(ctx, ctx.cast(hot, torch.int32), "SUM", [0], False), dt)


# ----------------------------------------------------------------------------------- grouped_mm
def _grouped_mm_check(call: Call) -> str | None:
    a, b, offs = call.arg(0, "mat_a"), call.arg(1, "mat_b"), call.kwargs.get("offs")
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() == 2 and b.dim() == 3):
        return "only the mixture-of-experts form is supported: mat_a [tokens, K], mat_b [experts, K, N] and offs"
    if not isinstance(offs, torch.Tensor) or offs.dim() != 1 or offs.shape[0] != b.shape[0]:
        return "offs must be a 1-D tensor of one cumulative row offset per group"
    if call.kwargs.get("bias") is not None:
        return "bias is not supported"
    if call.kwargs.get("out_dtype") not in (None, call.output.dtype):
        return "out_dtype is not supported"
    return None


@converter(torch._grouped_mm, torch.nn.functional.grouped_mm, check=_grouped_mm_check)
def convert_grouped_mm(ctx: ConversionContext, call: Call) -> Any:
    """``torch._grouped_mm(a, b, offs=offs)`` (transformers' default MoE experts): row r of ``a`` is
    multiplied by ``b[g]``, g the group whose rows ``[offs[g-1], offs[g])`` hold r. Here every row by
    every group's matrix in one matrix multiply (``a @ [b_0 | b_1 | ...]``), then each row's group
    gathered, g = the number of offsets <= r. Rows past the last offset, which torch leaves unwritten,
    are 0."""
    a, b, offs = call.arg(0, "mat_a"), call.arg(1, "mat_b"), call.kwargs["offs"]
    dt = call.output.dtype
    e, k, n = (int(v) for v in b.shape)
    a_it, b_it = E.operand(ctx, a, dt), E.operand(ctx, b, dt)
    rows = Y.sizes_of(ctx, a)[0]
    flat = S.reshape(ctx, S.permute(ctx, b_it, (1, 0, 2)), [k, e * n])  # [K, E*N]
    op = ctx.trt.MatrixOperation
    every = ctx.network.add_matrix_multiply(a_it, op.NONE, flat, op.NONE).get_output(0)  # [T, E*N]
    every = S.reshape(ctx, every, [rows, e, n])
    pos = Y.arange(ctx, rows, rank=2, dim=0, dtype=torch.int64) if Y.is_sym(rows) else ctx.constant(
        torch.arange(int(rows), dtype=torch.int64).reshape(-1, 1))  # [T, 1]
    bounds = S.reshape(ctx, ctx.cast(ctx.itensor(offs), torch.int64), [1, e])  # [1, E]
    passed = ctx.cast(E.compare(ctx, bounds, pos, "le"), torch.int32)  # [T, E]: offs[g] <= r
    group = ctx.cast(R.reduce(ctx, passed, "SUM", [1], True), torch.int64)  # [T, 1]
    inside = E.compare(ctx, group, E.scalar(ctx, e, torch.int64, 2), "lt")
    group = E.ew(ctx, group, E.scalar(ctx, e - 1, torch.int64, 2), "MIN")
    index = S.expand(ctx, S.unsqueeze(ctx, group, 2), [rows, 1, n])
    layer = ctx.network.add_gather_v2(every, index, ctx.trt.GatherMode.ELEMENT)
    layer.axis = 1
    out = S.reshape(ctx, layer.get_output(0), [rows, n])
    return E.select(ctx, inside, out, E.scalar(ctx, 0, dt, 2))
