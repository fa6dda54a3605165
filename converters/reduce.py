"""Reductions: sum/mean/prod/amax/amin, max/min (all forms), arg*, var/std, norms, logsumexp, all/any,
cumulative sums, products, maxima and minima (cummax/cummin), count_nonzero, isin (any-of equality).

``dim`` may be None, an int, negative, or a sequence; ``keepdim`` is honoured everywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.errors import ConversionError
from torch2trt_lite.registry import Call, converter, register_table

from .elementwise import no_out
from .impl import elementwise as E
from .impl import normalization as N
from .impl import reduce as R
from .impl import shape as S
from .impl import sizes as Y

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

T = torch.Tensor


def _dim_keep(call: Call, dim_default: Any = None) -> tuple[Any, bool]:
    return call.arg(1, "dim", dim_default), bool(call.arg(2, "keepdim", False))


def _work_dtype(call: Call) -> torch.dtype:
    """The dtype the reduction runs in: the output's, or int32 for bool/uint8/int16 inputs' sums."""
    return call.output.dtype if isinstance(call.output, torch.Tensor) else call.args[0].dtype


def _input(ctx: ConversionContext, call: Call, dtype: torch.dtype) -> Any:
    x = call.arg(0, "input")
    it = E.operand(ctx, x, dtype)
    return it


def _in_dtype(ctx: ConversionContext, x: Any, dtype: torch.dtype) -> Any:
    """``x`` converted to a reduction's ``dtype=`` like torch: float -> integer truncates."""
    if isinstance(x, torch.Tensor) and x.dtype.is_floating_point and not dtype.is_floating_point:
        return E.convert_dtype(ctx, ctx.itensor(x), dtype)
    return E.operand(ctx, x, dtype)


def _simple(op: str) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        dim, keep = _dim_keep(call)
        if op in ("MAX", "MIN") and dim is None:
            dim = call.kwargs.get("dim", ())  # amax/amin: () means every dim
        dt = call.output.dtype
        x = call.arg(0, "input")
        it = _in_dtype(ctx, x, dt)
        dims = R.dims_of(dim, x.dim())
        if dt == torch.bool:
            it = ctx.cast(it, torch.int32)
            return ctx.cast(R.reduce(ctx, it, op, dims, keep), torch.bool)
        return R.reduce(ctx, it, op, dims, keep)

    return convert


register_table(
    {
        (torch.sum, T.sum): "SUM",
        (torch.mean, T.mean): "AVG",
        (torch.amax, T.amax): "MAX",
        (torch.amin, T.amin): "MIN",
    },
    _simple,
    check=no_out,
)


@converter(torch.nansum, T.nansum, torch.nanmean, T.nanmean, check=no_out)
def convert_nansum(ctx: ConversionContext, call: Call) -> Any:
    dim, keep = _dim_keep(call)
    dt = call.output.dtype
    x = call.arg(0, "input")
    it = E.operand(ctx, x, dt)
    dims = R.dims_of(dim, x.dim())
    if not dt.is_floating_point:
        return R.reduce(ctx, it, "SUM" if call.qualname.endswith("nansum") else "AVG", dims, keep)
    nan = E.unary(ctx, it, "ISNAN")
    clean = E.select(ctx, nan, E.scalar(ctx, 0, dt), it)
    total = R.reduce(ctx, clean, "SUM", dims, keep)
    if call.qualname.endswith("nansum"):
        return total
    valid = R.reduce(ctx, ctx.cast(E.unary(ctx, nan, "NOT"), dt), "SUM", dims, keep)
    return E.ew(ctx, total, valid, "DIV")


@converter(torch.prod, T.prod, check=no_out)
def convert_prod(ctx: ConversionContext, call: Call) -> Any:
    dim, keep = _dim_keep(call)
    dt = call.output.dtype
    x = call.arg(0, "input")
    it = _in_dtype(ctx, x, dt)
    if dt == torch.bool:
        return ctx.cast(R.reduce(ctx, ctx.cast(it, torch.int32), "MIN", R.dims_of(dim, x.dim()), keep), torch.bool)
    return R.reduce(ctx, it, "PROD", R.dims_of(dim, x.dim()), keep)


# ---------------------------------------------------------------------------- max / min
def _extreme(largest: bool) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        x = call.arg(0, "input")
        other = call.args[1] if len(call.args) > 1 else call.kwargs.get("other", call.kwargs.get("dim"))
        if isinstance(other, torch.Tensor):  # torch.max(a, b): elementwise
            return E.arith(ctx, x, other, "max" if largest else "min", call.output.dtype)
        op = "MAX" if largest else "MIN"
        if not isinstance(call.output, tuple):  # torch.max(x): every dim
            it = E.operand(ctx, x, x.dtype)
            if x.dtype == torch.bool:
                return ctx.cast(R.reduce(ctx, ctx.cast(it, torch.int32), op, list(range(x.dim())), False), torch.bool)
            return R.reduce(ctx, it, op, list(range(x.dim())), False)
        dim = int(other)
        keep = bool(call.arg(2, "keepdim", False))
        it = ctx.itensor(x)
        if x.dim() == 0:
            return ctx.network.add_identity(it).get_output(0), ctx.constant(torch.zeros((), dtype=torch.int64))
        d = S.norm_dim(dim, x.dim())
        values, idx = R.extreme(ctx, it, d, largest)
        if not keep:
            values, idx = S.squeeze(ctx, values, d), S.squeeze(ctx, idx, d)
        return values, idx

    return convert


register_table({(torch.max, T.max): True, (torch.min, T.min): False}, _extreme, check=no_out)


@converter(torch.aminmax, T.aminmax, check=no_out)
def convert_aminmax(ctx: ConversionContext, call: Call) -> Any:
    x = call.arg(0, "input")
    dim, keep = call.kwargs.get("dim"), bool(call.kwargs.get("keepdim", False))
    dims = R.dims_of(dim, x.dim())
    it = ctx.itensor(x)
    return R.reduce(ctx, it, "MIN", dims, keep), R.reduce(ctx, it, "MAX", dims, keep)


def _arg(largest: bool) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        x = call.arg(0, "input")
        dim, keep = _dim_keep(call)
        return R.arg_extreme(ctx, ctx.itensor(x), dim, keep, largest)

    return convert


register_table({(torch.argmax, T.argmax): True, (torch.argmin, T.argmin): False}, _arg, check=no_out)


# -------------------------------------------------------------------------- statistics
def _var_args(call: Call) -> tuple[Any, float, bool]:
    """(dim, correction, keepdim) from torch's overloads of var/std(_mean)."""
    dim: Any = call.kwargs.get("dim")
    unbiased: Any = call.kwargs.get("unbiased")
    keep = call.kwargs.get("keepdim")
    pos = list(call.args[1:])
    if pos and isinstance(pos[0], bool):
        unbiased = pos.pop(0)
    elif pos:
        dim = pos.pop(0)
        if pos:
            if isinstance(pos[0], bool) and len(pos) >= 2:
                unbiased, keep = pos[0], pos[1]
            elif isinstance(pos[0], bool):
                unbiased = pos[0]
    correction = call.kwargs.get("correction")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return dim, float(correction), bool(keep)


def _stat(kind: str) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        x = call.arg(0, "input")
        dim, corr, keep = _var_args(call)
        dt = x.dtype if x.dtype.is_floating_point else torch.float32
        it = E.operand(ctx, x, dt)
        dims = R.dims_of(dim, x.dim())
        var = R.variance(ctx, it, dims, corr, keep)
        res = E.unary(ctx, var, "SQRT") if kind.startswith("std") else var
        if kind.endswith("_mean"):
            return res, R.reduce(ctx, it, "AVG", dims, keep)
        return res

    return convert


register_table(
    {
        (torch.var, T.var): "var",
        (torch.std, T.std): "std",
        (torch.var_mean,): "var_mean",
        (torch.std_mean,): "std_mean",
    },
    _stat,
    check=no_out,
)


def vector_norm(ctx: ConversionContext, it: Any, ord: Any, dims: list[int], keep: bool) -> Any:  # noqa: A002
    return N.vector_norm(ctx, it, float(ord), dims, keep, E.dtype_of(ctx, it))


def _norm_check(call: Call) -> str | None:
    p = call.arg(1, "p", call.kwargs.get("ord", 2))
    if isinstance(p, str) and p != "fro":
        return f"matrix norm {p!r} is not supported"
    return no_out(call)


@converter("torch.norm", T.norm, check=_norm_check)
def convert_norm(ctx: ConversionContext, call: Call) -> Any:
    x = call.arg(0, "input")
    p, dim, keep = call.arg(1, "p", "fro"), call.arg(2, "dim", None), bool(call.arg(3, "keepdim", False))
    dt = call.output.dtype
    it = E.operand(ctx, x, dt)
    return vector_norm(ctx, it, 2 if p in ("fro", None) else p, R.dims_of(dim, x.dim()), keep)


@converter(torch.linalg.vector_norm, check=no_out)
def convert_vector_norm(ctx: ConversionContext, call: Call) -> Any:
    x = call.arg(0, "x")
    ord_, dim, keep = call.arg(1, "ord", 2), call.arg(2, "dim", None), bool(call.arg(3, "keepdim", False))
    dt = call.output.dtype
    it = E.operand(ctx, x, dt)
    return vector_norm(ctx, it, ord_, R.dims_of(dim, x.dim()), keep)


def _linalg_norm_check(call: Call) -> str | None:
    ord_ = call.arg(1, "ord", None)
    dim = call.arg(2, "dim", None)
    x = call.args[0] if call.args else call.kwargs.get("A")
    matrix = (isinstance(dim, (tuple, list)) and len(dim) == 2) or (dim is None and isinstance(x, torch.Tensor)
                                                                    and x.dim() == 2 and ord_ is not None)
    if matrix and ord_ not in ("fro", None):
        return f"matrix norm ord={ord_!r} is not supported (only 'fro')"
    return no_out(call)


@converter(torch.linalg.norm, check=_linalg_norm_check)
def convert_linalg_norm(ctx: ConversionContext, call: Call) -> Any:
    x = call.arg(0, "A")
    ord_, dim, keep = call.arg(1, "ord", None), call.arg(2, "dim", None), bool(call.arg(3, "keepdim", False))
    dt = call.output.dtype
    it = E.operand(ctx, x, dt)
    return vector_norm(ctx, it, 2 if ord_ in (None, "fro") else ord_, R.dims_of(dim, x.dim()), keep)


@converter(torch.logsumexp, T.logsumexp, torch.special.logsumexp, check=no_out)
def convert_logsumexp(ctx: ConversionContext, call: Call) -> Any:
    x = call.arg(0, "input")
    dim, keep = _dim_keep(call, ())
    dt = call.output.dtype
    it = E.operand(ctx, x, dt)
    return R.logsumexp(ctx, it, R.dims_of(dim, x.dim()), keep)


def _logic(op: str) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        x = call.arg(0, "input")
        dim, keep = _dim_keep(call)
        b = ctx.cast(E.to_bool(ctx, ctx.itensor(x)), torch.int32)
        out = ctx.cast(R.reduce(ctx, b, op, R.dims_of(dim, x.dim()), keep), torch.bool)
        return ctx.cast(out, call.output.dtype)

    return convert


register_table({(torch.all, T.all): "MIN", (torch.any, T.any): "MAX"}, _logic, check=no_out)


@converter(torch.count_nonzero, T.count_nonzero)
def convert_count_nonzero(ctx: ConversionContext, call: Call) -> Any:
    x = call.arg(0, "input")
    dim = call.arg(1, "dim", None)
    nz = ctx.cast(E.to_bool(ctx, ctx.itensor(x)), torch.int64)
    return R.reduce(ctx, nz, "SUM", R.dims_of(dim, x.dim()), False)


def _cum(kind: str) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        x = call.arg(0, "input")
        dim = call.arg(1, "dim")
        dt = call.output.dtype
        if dt == torch.bool:
            raise ConversionError(f"{kind} of bool output is not supported")
        it = _in_dtype(ctx, x, dt)
        if kind == "cumprod" and x.dim() and -1 in tuple(it.shape):
            axis = S.norm_dim(dim, x.dim())
            if tuple(it.shape)[axis] >= 0:
                return _cumprod_scan(ctx, it, axis)
        return R.cumsum(ctx, it, dim) if kind == "cumsum" else R.cumprod(ctx, it, dim)

    return convert


def _cumprod_scan(ctx: ConversionContext, it: Any, axis: int) -> Any:
    """``cumprod`` along a static ``axis`` of a tensor with other dims dynamic: the log-step scan of
    ``R.cumprod`` (y *= y shifted by 1, 2, 4, .. with ones shifted in: products in the input's dtype,
    exact for integers, not exp(cumsum(log)), which loses bf16/fp16 precision), its slices sized by a
    shape tensor."""
    n, length = len(tuple(it.shape)), tuple(it.shape)[axis]
    dt = E.dtype_of(ctx, it)
    y, step = it, 1
    while step < length:
        start = [0] * n
        start[axis] = -step
        layer = ctx.network.add_slice(y, tuple(start), tuple(max(d, 1) for d in y.shape), (1,) * n)
        layer.set_input(2, S.shape_of(ctx, y))
        layer.mode = ctx.trt.SampleMode.FILL
        layer.set_input(4, E.scalar(ctx, 1, dt))
        y = E.ew(ctx, y, layer.get_output(0), "PROD")
        step *= 2
    return y if length > 1 else ctx.network.add_identity(it).get_output(0)


register_table(
    {(torch.cumsum, T.cumsum, T.cumsum_): "cumsum", (torch.cumprod, T.cumprod, T.cumprod_): "cumprod"},
    _cum,
    check=no_out,
)


# ------------------------------------------------------------------------- cummax / cummin
def _check_cum_extreme(call: Call) -> str | None:
    x = call.arg(0, "input")
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool):
        return f"{x.dtype} inputs are not supported (float32/16, bfloat16, int32, int64 and bool are)"
    return no_out(call)


def _cum_extreme(largest: bool) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        x = call.arg(0, "input")
        if x.dim() == 0:
            return ctx.network.add_identity(ctx.itensor(x)).get_output(0), ctx.constant(torch.zeros((), dtype=torch.int64))
        axis = S.norm_dim(int(call.arg(1, "dim")), x.dim())
        size = Y.sizes_of(ctx, x)[axis]
        if Y.bounds(size)[1] == float("inf"):
            Y.refuse(call.qualname, [size], "the scan's steps are set by the largest length of its dim")
        it = ctx.itensor(x)
        if x.dtype == torch.bool:
            values, idx = R.cum_extreme(ctx, ctx.cast(it, torch.int32), axis, largest)
            return ctx.cast(values, torch.bool), idx
        return R.cum_extreme(ctx, it, axis, largest)

    return convert


register_table({(torch.cummax, T.cummax): True, (torch.cummin, T.cummin): False}, _cum_extreme,
               check=_check_cum_extreme)


# ----------------------------------------------------------------------------------- isin
@converter(torch.isin, check=no_out)
def convert_isin(ctx: ConversionContext, call: Call) -> Any:
    """``torch.isin(elements, test_elements, assume_unique=, invert=)``; either may be a scalar or a
    network tensor (assume_unique only speeds torch up)."""
    x, test = call.arg(0, "elements"), call.arg(1, "test_elements")
    it = ctx.itensor(x)
    return R.isin(ctx, it, ctx.itensor(test), bool(call.kwargs.get("invert", False)))
