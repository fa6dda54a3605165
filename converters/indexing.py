"""Indexing: ``x[idx]``, ``x[idx] = v`` (functional: x maps to the new network tensor), index_select,
gather/take_along_dim/take, scatter/scatter_add/scatter_reduce, index_put, masked_scatter, copy_,
topk/sort/argsort and one_hot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from torch2trt_lite.errors import ConversionError, ConverterRefusal
from torch2trt_lite.registry import Call, converter

from . import detection
from .elementwise import no_out
from .impl import elementwise as E
from .impl import indexing as I
from .impl import reduce as R
from .impl import shape as S
from .impl import sizes as Y

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

T = torch.Tensor


# ------------------------------------------------------------------------------ __getitem__
@converter(T.__getitem__)
def convert_getitem(ctx: ConversionContext, call: Call) -> Any:
    x, index = call.args[0], call.args[1]
    return I.getitem(ctx, x, index, tuple(call.output.shape))


@converter("torch.ops.aten.slice", "torch.ops.aten.slice.Tensor")
def convert_aten_slice(ctx: ConversionContext, call: Call) -> Any:
    """``aten.slice(self, dim=0, start=None, end=None, step=1)``: ``self[:, ..., start:end:step]``
    (dynamo records it where torch's own Python code slices with it, e.g. ``associative_scan``)."""
    x = call.arg(0, "self")
    dim, start, end = call.arg(1, "dim", 0), call.arg(2, "start", None), call.arg(3, "end", None)
    step = call.arg(4, "step", 1)
    d = S.norm_dim(dim, x.dim())
    return I.getitem(ctx, x, (slice(None),) * d + (slice(start, end, step),), tuple(call.output.shape))


# ------------------------------------------------------------------------------ __setitem__
def _is_mask(index: Any) -> bool:
    return isinstance(index, torch.Tensor) and index.dtype == torch.bool


def _writes_back_view(ctx: ConversionContext, x: torch.Tensor, index: Any, value: Any, version: int) -> bool:
    """True for ``x[index] op= v``: the only change since ``version`` went through the view being written."""
    if not (isinstance(value, torch.Tensor) and ctx.is_traced(value)) or x._version != version + 2:
        return False
    if value.untyped_storage().data_ptr() != x.untyped_storage().data_ptr():
        return False
    view = x[index]
    return bool(view.storage_offset() == value.storage_offset() and view.stride() == value.stride()
                and view.shape == value.shape)


def _base(ctx: ConversionContext, x: torch.Tensor, index: Any, value: Any) -> Any:
    entry = ctx.mapped(x)
    if entry is None:
        return ctx.itensor(x)  # an untraced tensor: its value before the assignment
    it, version = entry
    if version != x._version and not _writes_back_view(ctx, x, index, value, version):
        raise ConversionError(
            "the tensor assigned into was modified in place through a view before this assignment; "
            "torch2trt-lite cannot follow that (use out-of-place ops)"
        )
    return it


def assign(ctx: ConversionContext, x: torch.Tensor, new: Any) -> None:
    """Map ``x`` (modified in place) to its new network tensor."""
    ctx.set_itensor(x, new)


@converter(T.__setitem__)
def convert_setitem(ctx: ConversionContext, call: Call) -> Any:
    x, index, value = call.args[0], call.args[1], call.args[2]
    base = _base(ctx, x, index, value)
    if _is_mask(index) and (ctx.is_traced(index) or index.dim() < x.dim()) and (
        not isinstance(value, torch.Tensor) or value.numel() == 1
    ):
        new = I.masked_set(ctx, base, tuple(x.shape), index, value, x.dtype)
    else:
        new = I.setitem(ctx, x, base, index, value)
    assign(ctx, x, new)
    return None


def _index_put_check(call: Call) -> str | None:
    accumulate = call.arg(3, "accumulate", False)
    idx = call.arg(1, "indices")
    if accumulate and any(isinstance(i, torch.Tensor) and i.dtype != torch.bool for i in idx if i is not None):
        # NOTE: accumulate with duplicate indices needs a scatter-add TensorRT does not have
        flat = [i for i in idx if i is not None]
        if not flat:
            return None
        try:
            b = torch.broadcast_tensors(*flat)
        except RuntimeError as e:
            return str(e)
        coords = torch.stack([t.reshape(-1) for t in b], 1)
        if coords.unique(dim=0).shape[0] != coords.shape[0]:
            return "index_put with accumulate=True and repeated indices is not supported"
    return None


@converter(torch.index_put, T.index_put, T.index_put_, torch.index_put_, check=_index_put_check)
def convert_index_put(ctx: ConversionContext, call: Call) -> Any:
    x, indices, values = call.arg(0, "input"), call.arg(1, "indices"), call.arg(2, "values")
    accumulate = bool(call.arg(3, "accumulate", False))
    if accumulate and any(isinstance(i, torch.Tensor) and i.dtype != torch.bool and ctx.is_traced(i) for i in indices):
        raise ConverterRefusal(
            "accumulate=True with indices computed from the inputs: whether they repeat is only known at run "
            "time, and TensorRT has no scatter-add to sum repeated ones"
        )
    index = tuple(slice(None) if i is None else i for i in indices)
    inplace = call.qualname.endswith("_")
    base = _base(ctx, x, index, values) if inplace else ctx.itensor(x)
    if accumulate:
        current = I.getitem(ctx, x, index, tuple(x[index].shape), it=base)
        values = E.arith(ctx, current, values, "add", x.dtype)
    if len(index) == 1 and _is_mask(index[0]) and ctx.is_traced(index[0]):
        new = I.masked_set(ctx, base, tuple(x.shape), index[0], values, x.dtype)
    else:
        new = I.setitem(ctx, x, base, index, values)
    if inplace:
        assign(ctx, x, new)
    return new


@converter(T.copy_)
def convert_copy(ctx: ConversionContext, call: Call) -> Any:
    x, src = call.args[0], call.arg(1, "src")
    it = E.operand(ctx, src, x.dtype)
    if Y.dynamic(ctx):  # NOTE: x's dynamic sizes, not the traced ones (src broadcasts to x's shape)
        it = S.expand(ctx, it, list(Y.sizes_of(ctx, x)))
    elif tuple(it.shape) != tuple(x.shape):
        it = S.expand(ctx, it, tuple(x.shape))
    return ctx.network.add_identity(it).get_output(0)


# --------------------------------------------------------------------------- gathers
@converter(torch.index_select, T.index_select, check=no_out)
def convert_index_select(ctx: ConversionContext, call: Call) -> Any:
    x, dim, index = call.arg(0, "input"), call.arg(1, "dim"), call.arg(2, "index")
    it = ctx.itensor(x)
    n = max(x.dim(), 1)
    d = S.norm_dim(dim, n)
    if x.dim() == 0:
        it = S.reshape(ctx, it, (1,))
    idx = I._wrap_index(ctx, index, _size(ctx, x, d) if x.dim() else 1)
    if len(tuple(idx.shape)) == 0:
        idx = S.reshape(ctx, idx, (1,))
    out = ctx.network.add_gather(it, idx, d).get_output(0)
    # NOTE: only a 0-D input needs a reshape (the gather keeps x's rank); x's other dims may be dynamic
    return S.reshape(ctx, out, tuple(call.output.shape)) if x.dim() == 0 and tuple(out.shape) != tuple(
        call.output.shape) else out


def _size(ctx: ConversionContext, x: torch.Tensor, d: int) -> Any:
    """Dim ``d`` of ``x``: a dynamic size (``symbolic.SymSize``) where the network has it dynamic."""
    return Y.sizes_of(ctx, x)[d] if Y.dynamic(ctx) else x.shape[d]


def _broadcast_sizes(a: tuple[Any, ...], b: tuple[Any, ...]) -> list[Any]:
    """torch's broadcast of two size tuples of one rank, dynamic sizes kept (a static 1 gives way)."""
    return [q if (not Y.is_sym(p) and p == 1) else p for p, q in zip(a, b, strict=True)]


def gather_elements(ctx: ConversionContext, it: Any, dim: int, idx: Any) -> Any:
    layer = ctx.network.add_gather_v2(it, idx, ctx.trt.GatherMode.ELEMENT)
    layer.axis = dim
    return layer.get_output(0)


def _gather_check(call: Call) -> str | None:
    x, index = call.arg(0, "input"), call.arg(2, "index")
    if isinstance(x, torch.Tensor) and isinstance(index, torch.Tensor) and x.dim() != index.dim():
        return "gather needs index of the input's rank"
    return no_out(call)


@converter(torch.gather, T.gather, check=_gather_check)
def convert_gather(ctx: ConversionContext, call: Call) -> Any:
    x, dim, index = call.arg(0, "input"), call.arg(1, "dim"), call.arg(2, "index")
    n = x.dim()
    d = S.norm_dim(dim, n)
    it = ctx.itensor(x)
    if any(index.shape[k] != x.shape[k] for k in range(n) if k != d):
        # torch reads the leading part of the other dims: slice the data down to the index's shape
        it = S.slice_nd(ctx, it, [0] * n, [index.shape[k] if k != d else x.shape[k] for k in range(n)], [1] * n)
    idx = I._wrap_index(ctx, index, _size(ctx, x, d))
    return gather_elements(ctx, it, d, idx)


@converter(torch.take_along_dim, T.take_along_dim, check=no_out)
def convert_take_along_dim(ctx: ConversionContext, call: Call) -> Any:
    x, index, dim = call.arg(0, "input"), call.arg(1, "indices"), call.arg(2, "dim", None)
    it = ctx.itensor(x)
    if dim is None:
        flat = S.flatten(ctx, it, 0, -1)
        idx = S.flatten(ctx, I._wrap_index(ctx, index, x.numel()), 0, -1)
        return gather_elements(ctx, flat, 0, idx)
    n = x.dim()
    d = S.norm_dim(dim, n)
    if Y.dynamic(ctx):  # NOTE: the broadcast of the dynamic sizes, not of the traced ones
        xs_, is_ = Y.sizes_of(ctx, x), Y.sizes_of(ctx, index)
        both = _broadcast_sizes(xs_, is_) if len(xs_) == len(is_) else None
        if both is not None:
            xs = [*both[:d], xs_[d], *both[d + 1:]]
            ishape = [*both[:d], is_[d], *both[d + 1:]]
            it = S.expand(ctx, it, xs)
            idx = S.expand(ctx, I._wrap_index(ctx, index, xs_[d]), ishape)
            return gather_elements(ctx, it, d, idx)
    shape = list(torch.broadcast_shapes(tuple(s for k, s in enumerate(x.shape) if k != d),
                                        tuple(s for k, s in enumerate(index.shape) if k != d)))
    xs = shape[:d] + [x.shape[d]] + shape[d:]
    ishape = shape[:d] + [index.shape[d]] + shape[d:]
    it = S.expand(ctx, it, xs) if tuple(x.shape) != tuple(xs) else it
    idx = I._wrap_index(ctx, index, x.shape[d])
    idx = S.expand(ctx, idx, ishape) if tuple(index.shape) != tuple(ishape) else idx
    return gather_elements(ctx, it, d, idx)


@converter(torch.take, T.take)
def convert_take(ctx: ConversionContext, call: Call) -> Any:
    x, index = call.arg(0, "input"), call.arg(1, "index")
    flat = S.flatten(ctx, ctx.itensor(x), 0, -1) if x.dim() else S.reshape(ctx, ctx.itensor(x), (1,))
    n: Any = x.numel()
    if Y.dynamic(ctx):  # the element count of a tensor with dynamic dims (negative indices wrap by it)
        n = 1
        for d in Y.sizes_of(ctx, x):
            n = n * d
    idx = I._wrap_index(ctx, index, n)
    return ctx.network.add_gather(flat, idx, 0).get_output(0)


# --------------------------------------------------------------------------- scatters
def _scatter_check(call: Call) -> str | None:
    if call.kwargs.get("reduce") is not None or (len(call.args) > 4 and call.args[4] is not None):
        return "scatter(reduce=...) is deprecated and not supported; use scatter_reduce"
    x, dim, index = call.args[0], call.arg(1, "dim"), call.arg(2, "index")
    if isinstance(x, torch.Tensor) and isinstance(index, torch.Tensor) and x.dim() == index.dim():
        d = dim + x.dim() if dim < 0 else dim
        if any(index.shape[k] != x.shape[k] for k in range(x.dim()) if k != d):
            return "scatter with an index smaller than the input off the scatter dim is not supported"
    return no_out(call)


def _src(ctx: ConversionContext, src: Any, index: torch.Tensor, dtype: torch.dtype) -> Any:
    it = E.operand(ctx, src, dtype)
    shape = tuple(index.shape)
    if Y.dynamic(ctx):  # NOTE: the index's dynamic sizes, not the traced ones
        sizes = Y.sizes_of(ctx, index) if isinstance(index, torch.Tensor) else shape
        if isinstance(src, torch.Tensor) and src.dim() and tuple(src.shape) != shape:
            layer = ctx.network.add_slice(it, (0,) * len(shape), tuple(max(int(v), 1) for v in shape),
                                          (1,) * len(shape))
            layer.set_input(2, Y.shape_tensor(ctx, list(sizes)))
            return layer.get_output(0)
        return S.expand(ctx, it, list(sizes))
    if isinstance(src, torch.Tensor) and src.dim() and tuple(src.shape) != shape:
        return S.slice_nd(ctx, it, [0] * len(shape), list(shape), [1] * len(shape))
    if tuple(it.shape) != shape:
        it = S.expand(ctx, it, shape)
    return it


@converter(torch.scatter, T.scatter, T.scatter_, check=_scatter_check)
def convert_scatter(ctx: ConversionContext, call: Call) -> Any:
    x, dim, index = call.arg(0, "input"), call.arg(1, "dim"), call.arg(2, "index")
    src = call.kwargs.get("src", call.kwargs.get("value", call.args[3] if len(call.args) > 3 else None))
    d = S.norm_dim(dim, x.dim())
    base = ctx.itensor(x)
    upd = _src(ctx, src, index, x.dtype)
    idx = I._wrap_index(ctx, index, _size(ctx, x, d))
    layer = ctx.network.add_scatter(base, idx, upd, ctx.trt.ScatterMode.ELEMENT)
    layer.axis = d
    return layer.get_output(0)


_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _scatter_reduce_check(call: Call) -> str | None:
    reduce = call.arg(4, "reduce", "sum") if "scatter_reduce" in call.qualname else "sum"
    if reduce not in _REDUCES:
        return f"scatter_reduce(reduce={reduce!r}) is not supported"
    x, index = call.args[0], call.arg(2, "index")
    dim = call.arg(1, "dim")
    if isinstance(x, torch.Tensor) and isinstance(index, torch.Tensor):
        d = dim + x.dim() if dim < 0 else dim
        if any(index.shape[k] != x.shape[k] for k in range(x.dim()) if k != d):
            return "scatter_add/scatter_reduce with an index smaller than the input off the scatter dim"
    return no_out(call)


@converter(torch.scatter_add, T.scatter_add, T.scatter_add_, torch.scatter_reduce, T.scatter_reduce,
           T.scatter_reduce_, check=_scatter_reduce_check)
def convert_scatter_reduce(ctx: ConversionContext, call: Call) -> Any:
    """Through a one-hot of the index along a new last axis (TensorRT's scatter cannot reduce)."""
    x, dim, index, src = call.arg(0, "input"), call.arg(1, "dim"), call.arg(2, "index"), call.arg(3, "src")
    reduce = call.arg(4, "reduce", "sum") if "scatter_reduce" in call.qualname else "sum"
    include_self = bool(call.kwargs.get("include_self", call.args[5] if len(call.args) > 5 else True))
    dt = x.dtype
    n = x.dim()
    d = S.norm_dim(dim, n)
    size = x.shape[d]
    base = E.operand(ctx, x, dt)
    upd = _src(ctx, src, index, dt)
    hot = E.to_bool(ctx, I.one_hot(ctx, I._wrap_index(ctx, index, size), size, torch.int32))  # index.shape + (N,)
    vals = S.unsqueeze(ctx, upd, -1)
    cnt = R.reduce(ctx, ctx.cast(hot, torch.int32), "SUM", [d], False)  # (.., N) without d
    neutral = {"sum": 0, "mean": 0, "prod": 1, "amax": float("-inf") if dt.is_floating_point else torch.iinfo(
        dt).min, "amin": float("inf") if dt.is_floating_point else torch.iinfo(dt).max}[reduce]
    masked = E.select(ctx, hot, vals, E.scalar(ctx, neutral, dt))
    op = {"sum": "SUM", "mean": "SUM", "prod": "PROD", "amax": "MAX", "amin": "MIN"}[reduce]
    acc = R.reduce(ctx, masked, op, [d], False)  # x.shape without d, + (N,)
    perm = list(range(n - 1))
    perm.insert(d, n - 1)
    acc, cnt = S.permute(ctx, acc, perm), S.permute(ctx, cnt, perm)  # x's layout
    hit = E.ew(ctx, cnt, E.scalar(ctx, 0, torch.int32), "GREATER")
    if reduce == "mean":
        total = E.ew(ctx, acc, base, "SUM") if include_self else acc
        c = ctx.cast(cnt, dt)
        if include_self:
            c = E.ew(ctx, c, E.scalar(ctx, 1, dt), "SUM")
        safe = E.select(ctx, hit, c, E.scalar(ctx, 1, dt))
        res = E.arith(ctx, total, safe, "div" if dt.is_floating_point else "div_floor", dt)
        return E.select(ctx, hit, res, base)
    combine = {"sum": "SUM", "prod": "PROD", "amax": "MAX", "amin": "MIN"}[reduce]
    merged = E.ew(ctx, acc, base, combine) if include_self else acc
    return E.select(ctx, hit, merged, base)


@converter(torch.masked_scatter, T.masked_scatter, T.masked_scatter_)
def convert_masked_scatter(ctx: ConversionContext, call: Call) -> Any:
    x, mask, source = call.arg(0, "input"), call.arg(1, "mask"), call.arg(2, "source")
    traced = tuple(call.output.shape)
    shape: tuple[Any, ...] = traced
    for t in (x, mask):  # NOTE: the output's sizes, symbolic where dynamic (x's or the mask's: broadcast)
        if isinstance(t, torch.Tensor) and tuple(t.shape) == traced:
            shape = Y.sizes_of(ctx, t)
            break
    m = E.to_bool(ctx, ctx.itensor(mask))
    m = S.expand(ctx, S._unsqueeze_front(ctx, m, len(shape)), shape) if tuple(mask.shape) != traced else m
    flat = S.flatten(ctx, ctx.cast(m, torch.int64), 0, -1)
    pos = E.ew(ctx, R.cumsum(ctx, flat, 0), E.scalar(ctx, 1, torch.int64), "SUB")
    pos = E.ew(ctx, pos, E.scalar(ctx, 0, torch.int64), "MAX")
    src = S.flatten(ctx, E.operand(ctx, source, x.dtype), 0, -1)
    picked = S.reshape(ctx, ctx.network.add_gather(src, pos, 0).get_output(0), shape)
    base = E.operand(ctx, x, x.dtype)
    if not (isinstance(x, torch.Tensor) and tuple(x.shape) == traced):
        base = S.expand(ctx, S._unsqueeze_front(ctx, base, len(shape)), shape)
    return E.select(ctx, m, picked, base)


# --------------------------------------------------------------------------- sorting
def _topk_check(call: Call) -> str | None:
    return no_out(call)


@converter(torch.topk, T.topk, check=_topk_check)
def convert_topk(ctx: ConversionContext, call: Call) -> Any:
    """k beyond TensorRT's 3840 and a dynamic k: :func:`converters.detection.topk`."""
    x, k = call.arg(0, "input"), call.arg(1, "k")
    dim, largest = call.arg(2, "dim", -1), bool(call.arg(3, "largest", True))
    out = detection.topk(ctx, ctx.itensor(x), k if Y.is_sym(k) else int(k), dim, largest)
    if Y.is_sym(k):  # the outputs have k along dim (with k's bounds)
        sizes = list(Y.sizes_of(ctx, x))
        sizes[S.norm_dim(dim, max(x.dim(), 1))] = k
        for it, t in zip(out, call.output, strict=True):
            ctx.known_sizes(it, sizes, tuple(t.shape))
    return out


def _sort_args(call: Call) -> tuple[int, bool]:
    dim = call.kwargs.get("dim", -1)
    desc = call.kwargs.get("descending", False)
    pos = list(call.args[1:])
    if pos and not isinstance(pos[0], bool):
        dim = pos.pop(0)
    if pos:
        desc = pos.pop(0)
    return int(dim), bool(desc)


def _sort_check(call: Call) -> str | None:
    x = call.args[0] if call.args else call.kwargs.get("input")
    if isinstance(x, torch.Tensor):
        dim, _ = _sort_args(call)
        size = x.shape[dim] if x.dim() else 1
        if size > detection.TOPK_MAX_ROUNDS * R.TOPK_MAX_K:
            return (f"sorting {size} elements: TensorRT's top-k takes at most {R.TOPK_MAX_K}, and more than "
                    f"{detection.TOPK_MAX_ROUNDS * R.TOPK_MAX_K} would need over {detection.TOPK_MAX_ROUNDS} rounds")
    return no_out(call)


def _sort(ctx: ConversionContext, call: Call) -> tuple[Any, Any]:
    """A top-k of the whole dim: k is the dim's size, a shape tensor when the dim is dynamic. Ties:
    TensorRT's top-k leaves their order unspecified (the sim gives torch.topk's, not always index
    order), so tied indices may be permuted; ``stable=True`` puts them in index order like torch
    (:func:`converters.detection.stable_order`: one more top-k)."""
    x = call.args[0]
    dim, desc = _sort_args(call)
    stable = bool(call.kwargs.get("stable", False))  # keyword-only in torch
    size = Y.sizes_of(ctx, x)[dim] if x.dim() else 1
    values, indices = detection.topk(ctx, ctx.itensor(x), size, dim, desc)
    if stable and x.dim():
        indices = detection.stable_order(ctx, values, indices, S.norm_dim(dim, x.dim()), size)
    return values, indices


@converter(torch.sort, T.sort, check=_sort_check)
def convert_sort(ctx: ConversionContext, call: Call) -> Any:
    return _sort(ctx, call)


@converter(torch.argsort, T.argsort, check=_sort_check)
def convert_argsort(ctx: ConversionContext, call: Call) -> Any:
    return _sort(ctx, call)[1]


def _one_hot_check(call: Call) -> str | None:
    if int(call.arg(1, "num_classes", -1)) < 0:
        return "one_hot without num_classes takes its size from the data; pass num_classes"
    return None


@converter(F.one_hot, check=_one_hot_check)
def convert_one_hot(ctx: ConversionContext, call: Call) -> Any:
    x, depth = call.arg(0, "tensor"), int(call.arg(1, "num_classes"))
    return I.one_hot(ctx, ctx.cast(ctx.itensor(x), torch.int64), depth, torch.int64)
