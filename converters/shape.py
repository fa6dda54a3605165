"""Shape ops: view/reshape/flatten, (un)squeeze, permute/transpose, expand/repeat, split/stack/cat, flips.

Thin argument adapters over ``impl/shape.py``. Sizes given as varargs (``x.view(2, -1)``) or one
sequence (``x.view((2, -1))``) are both accepted, like torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.errors import ConversionError
from torch2trt_lite.registry import Call, converter, register_table

from .elementwise import no_out
from .impl import elementwise as E
from .impl import indexing as I
from .impl import shape as S
from .impl import sizes as Y

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

T = torch.Tensor


def _sizes(call: Call, start: int, name: str) -> list[int]:
    """Sizes given as varargs from ``start`` or as one sequence (or keyword ``name``); dynamic sizes
    read while tracing (``converters.impl.sizes.SymSize``) are kept as they are."""
    rest = call.args[start:]
    if len(rest) == 1 and isinstance(rest[0], (list, tuple, torch.Size)):
        rest = tuple(rest[0])
    if not rest and name in call.kwargs:
        v = call.kwargs[name]
        rest = tuple(v) if isinstance(v, (list, tuple, torch.Size)) else (v,)
    return [s if isinstance(s, Y.SymSize) else int(s) for s in rest]


def _in(ctx: ConversionContext, call: Call, index: int = 0, name: str = "input") -> Any:
    return ctx.itensor(call.arg(index, name))


def _identity(ctx: ConversionContext, it: Any) -> Any:
    return ctx.network.add_identity(it).get_output(0)


# ------------------------------------------------------------------------------ reshapes
def _view_check(call: Call) -> str | None:
    rest = call.args[1:]
    if rest and isinstance(rest[0], torch.dtype) or isinstance(call.kwargs.get("dtype"), torch.dtype):
        return "Tensor.view(dtype) reinterprets bits, which TensorRT cannot do"
    return None


@converter(T.view, T.reshape, torch.reshape, check=_view_check)
def convert_reshape(ctx: ConversionContext, call: Call) -> Any:
    dims = _sizes(call, 1, "shape")
    x = call.arg(0, "input")
    if Y.has_sym(dims):
        Y.sizes_of(ctx, x)  # the input's dynamic dims, so the reshape copies those it keeps
    out = S.reshape(ctx, _in(ctx, call), dims)
    S.record_reshape(ctx, out, x, dims, tuple(call.output.shape))
    return out


@converter(T.view_as, T.reshape_as)
def convert_view_as(ctx: ConversionContext, call: Call) -> Any:
    dims = Y.sizes_of(ctx, call.arg(1, "other"))
    out = S.reshape(ctx, _in(ctx, call), dims)
    S.record_reshape(ctx, out, call.arg(0, "input"), dims, tuple(call.output.shape))
    return out


@converter(torch.flatten, T.flatten)
def convert_flatten(ctx: ConversionContext, call: Call) -> Any:
    start, end = call.arg(1, "start_dim", 0), call.arg(2, "end_dim", -1)
    if isinstance(start, str) or isinstance(end, str):
        raise ConversionError("flatten with named dims is not supported")
    out = S.flatten(ctx, _in(ctx, call), int(start), int(end))
    S.record_flatten(ctx, out, call.arg(0, "input"), int(start), int(end), tuple(call.output.shape))
    return out


@converter(torch.unflatten, T.unflatten)
def convert_unflatten(ctx: ConversionContext, call: Call) -> Any:
    it = _in(ctx, call)
    dim, sizes = call.arg(1, "dim"), [s if isinstance(s, Y.SymSize) else int(s) for s in call.arg(2, "sizes")]
    n = len(tuple(it.shape))
    d = S.norm_dim(dim, n)
    spec = [S.Copy(i) for i in range(d)] + sizes + [S.Copy(i) for i in range(d + 1, n)]
    out = S.reshape_spec(ctx, it, spec)
    x = call.arg(0, "input")
    if Y.dynamic(ctx):  # the dim's sizes as given, -1 its size over the others'
        have = list(Y.sizes_of(ctx, x))
        S.record_reshape(ctx, out, x, have[:d] + S.reshaped(have[d], sizes) + have[d + 1:], tuple(call.output.shape))
    return out


@converter(torch.squeeze, T.squeeze, T.squeeze_)
def convert_squeeze(ctx: ConversionContext, call: Call) -> Any:
    dim = call.arg(1, "dim", None)
    return S.squeeze(ctx, _in(ctx, call), dim if dim is None or isinstance(dim, int) else tuple(dim))


@converter(torch.unsqueeze, T.unsqueeze, T.unsqueeze_)
def convert_unsqueeze(ctx: ConversionContext, call: Call) -> Any:
    return S.unsqueeze(ctx, _in(ctx, call), int(call.arg(1, "dim")))


# --------------------------------------------------------------------------- permutations
def _permute(ctx: ConversionContext, call: Call, perm: Sequence[int], identity: bool = False) -> Any:
    """``call``'s input permuted by ``perm``; its dynamic sizes go with their dims (recorded). A
    tensor of rank < 2 is returned as it is (``permute``) or as an identity (``t``, ``T``)."""
    it = _in(ctx, call)
    n = len(tuple(it.shape))
    if n < 2:
        return _identity(ctx, it) if identity else S.permute(ctx, it, perm)
    perm = [S.norm_dim(d, n) for d in perm]
    out = S.permute(ctx, it, perm)
    x = call.arg(0, "input")
    if Y.dynamic(ctx) and out is not it and sorted(perm) == list(range(n)):
        sizes = Y.sizes_of(ctx, x)
        ctx.known_sizes(out, [sizes[p] for p in perm], tuple(call.output.shape))
    return out


def _swap(n: int, d0: int, d1: int) -> list[int]:
    perm, a, b = list(range(n)), S.norm_dim(d0, n), S.norm_dim(d1, n)
    perm[a], perm[b] = perm[b], perm[a]
    return perm


@converter(torch.permute, T.permute)
def convert_permute(ctx: ConversionContext, call: Call) -> Any:
    return _permute(ctx, call, _sizes(call, 1, "dims"))


@converter(torch.transpose, T.transpose, T.transpose_, torch.swapaxes, T.swapaxes, T.swapaxes_, torch.swapdims,
           T.swapdims, T.swapdims_)
def convert_transpose(ctx: ConversionContext, call: Call) -> Any:
    d0 = call.arg(1, "dim0", call.kwargs.get("axis0"))
    d1 = call.arg(2, "dim1", call.kwargs.get("axis1"))
    n = len(tuple(_in(ctx, call).shape))
    return _permute(ctx, call, _swap(n, int(d0), int(d1))) if n >= 2 else S.transpose(ctx, _in(ctx, call), int(d0), int(d1))


@converter(torch.t, T.t, T.t_)
def convert_t(ctx: ConversionContext, call: Call) -> Any:
    return _permute(ctx, call, [1, 0], identity=True)


def _convert_T(ctx: ConversionContext, call: Call) -> Any:
    n = len(tuple(_in(ctx, call).shape))
    return _permute(ctx, call, list(range(n - 1, -1, -1)), identity=True)


def _convert_mT(ctx: ConversionContext, call: Call) -> Any:
    n = len(tuple(_in(ctx, call).shape))
    return _permute(ctx, call, _swap(n, -2, -1)) if n >= 2 else S.transpose(ctx, _in(ctx, call), -2, -1)


converter("torch.Tensor.T")(_convert_T)
converter("torch.Tensor.mT")(_convert_mT)


@converter(torch.movedim, T.movedim, torch.moveaxis, T.moveaxis)
def convert_movedim(ctx: ConversionContext, call: Call) -> Any:
    it = _in(ctx, call)
    n = len(tuple(it.shape))
    src, dst = call.arg(1, "source"), call.arg(2, "destination")
    src = [src] if isinstance(src, int) else list(src)
    dst = [dst] if isinstance(dst, int) else list(dst)
    src = [S.norm_dim(d, n) for d in src]
    dst = [S.norm_dim(d, n) for d in dst]
    perm = [-1] * n
    for s, d in zip(src, dst, strict=True):
        perm[d] = s
    rest = iter(i for i in range(n) if i not in src)
    perm = [p if p >= 0 else next(rest) for p in perm]
    return _permute(ctx, call, perm) if n >= 2 else S.permute(ctx, it, perm)


# ------------------------------------------------------------------------------ identity
@converter(T.contiguous, T.detach, torch.detach, T.requires_grad_, T.detach_)
def convert_passthrough(ctx: ConversionContext, call: Call) -> Any:
    return _in(ctx, call)


@converter(torch.clone, T.clone)
def convert_clone(ctx: ConversionContext, call: Call) -> Any:
    return _identity(ctx, _in(ctx, call))


# ------------------------------------------------------------------------ expand / repeat
@converter(T.expand, torch.broadcast_to, T.broadcast_to)
def convert_expand(ctx: ConversionContext, call: Call) -> Any:
    it = _in(ctx, call)
    if not Y.dynamic(ctx):
        return S.expand(ctx, it, tuple(call.output.shape))
    # NOTE: dynamic shapes: the target from the arguments (-1 keeps the input's dim), not the traced output
    out, target = S.expand_args(ctx, it, _sizes(call, 1, "size"), Y.sizes_of(ctx, call.arg(0, "input")))
    if out is not it:
        ctx.known_sizes(out, target, tuple(call.output.shape))
    return out


def _expanded(ctx: ConversionContext, it: Any, target: list[Any], call: Call) -> Any:
    """``it`` expanded to ``target``, whose sizes the output has (recorded)."""
    out = S.expand(ctx, it, target)
    if out is not it:
        ctx.known_sizes(out, target, tuple(call.output.shape))
    return out


@converter(T.expand_as)
def convert_expand_as(ctx: ConversionContext, call: Call) -> Any:
    if not Y.dynamic(ctx):
        return S.expand(ctx, _in(ctx, call), tuple(call.output.shape))
    return _expanded(ctx, _in(ctx, call), list(Y.sizes_of(ctx, call.arg(1, "other"))), call)


@converter("torch.broadcast_tensors")
def convert_broadcast_tensors(ctx: ConversionContext, call: Call) -> Any:
    if Y.dynamic(ctx):
        shapes = [Y.sizes_of(ctx, t) for t in call.args]
        n = max(len(sh) for sh in shapes)
        target = []
        for k in range(n):
            ds = [sh[len(sh) - n + k] for sh in shapes if len(sh) - n + k >= 0]
            big = [d for d in ds if isinstance(d, Y.SymSize) or d != 1]
            target.append(big[0] if big else 1)
        return [S.expand(ctx, ctx.itensor(t), target) for t in call.args]
    return [S.expand(ctx, ctx.itensor(t), tuple(o.shape)) for t, o in zip(call.args, call.output, strict=True)]


def _tile(ctx: ConversionContext, it: Any, reps: Sequence[int]) -> Any:
    """Repeat the whole tensor ``reps[i]`` times along dim i (ranks already equal): a WRAP slice."""
    shape = tuple(it.shape)
    if all(not Y.is_sym(r) and r == 1 for r in reps):
        return _identity(ctx, it)
    if -1 in shape or Y.has_sym(reps):  # dynamic dims or counts: the size as a shape tensor
        sizes = [s * r for s, r in zip(Y.network_sizes(ctx, it), reps, strict=True)]
        layer = ctx.network.add_slice(it, (0,) * len(shape), tuple(1 if Y.is_sym(s) else s for s in sizes),
                                      (1,) * len(shape))
        layer.set_input(2, Y.shape_tensor(ctx, sizes))
    else:
        layer = ctx.network.add_slice(it, (0,) * len(shape), tuple(s * r for s, r in zip(shape, reps, strict=True)),
                                      (1,) * len(shape))
    layer.mode = ctx.trt.SampleMode.WRAP
    return layer.get_output(0)


@converter(T.repeat)
def convert_repeat(ctx: ConversionContext, call: Call) -> Any:
    reps = _sizes(call, 1, "repeats")
    it = S._unsqueeze_front(ctx, _in(ctx, call), len(reps))
    return _tile(ctx, it, reps)


@converter(torch.tile, T.tile)
def convert_tile(ctx: ConversionContext, call: Call) -> Any:
    reps = _sizes(call, 1, "dims")
    it = _in(ctx, call)
    n = len(tuple(it.shape))
    reps = [1] * (n - len(reps)) + reps
    it = S._unsqueeze_front(ctx, it, len(reps))
    return _tile(ctx, it, reps)


def _repeat_interleave_check(call: Call) -> str | None:
    reps = call.arg(1, "repeats", None)
    if reps is None:
        return "repeat_interleave(repeats) with only a tensor argument has a data-dependent shape"
    if isinstance(reps, torch.Tensor) and reps.numel() > 1 and not isinstance(call.args[0], torch.Tensor):
        return "repeats must be a tensor argument"
    return None


@converter(torch.repeat_interleave, T.repeat_interleave, check=_repeat_interleave_check)
def convert_repeat_interleave(ctx: ConversionContext, call: Call) -> Any:
    x = call.arg(0, "input")
    reps, dim = call.arg(1, "repeats"), call.arg(2, "dim", None)
    it = ctx.itensor(x)
    if dim is None:
        it = S.flatten(ctx, it, 0, -1)
        dim = 0
    n = len(tuple(it.shape))
    d = S.norm_dim(dim, n)
    if isinstance(reps, torch.Tensor) and reps.numel() > 1:
        if ctx.is_traced(reps):
            raise ConversionError("repeat_interleave with traced per-element repeats has a data-dependent shape")
        idx = torch.repeat_interleave(torch.arange(reps.numel()), reps.cpu())
        return ctx.network.add_gather(it, ctx.constant(idx.to(torch.int64)), d).get_output(0)
    r = int(reps)
    shape = Y.network_sizes(ctx, it)  # NOTE: a SymSize for each dynamic dim, so no traced size is baked in
    u = S.unsqueeze(ctx, it, d + 1)
    target = shape[: d + 1] + (r,) + shape[d + 1 :]
    e = S.expand(ctx, u, list(target))
    return S.reshape(ctx, e, list(shape[:d] + (shape[d] * r,) + shape[d + 1 :]))


# ------------------------------------------------------------------------- split / join
def _split_sizes(size: int, split: Any) -> list[int]:
    if isinstance(split, int):
        if split <= 0:
            raise ConversionError(f"split size must be positive, got {split}")
        return [min(split, size - i) for i in range(0, size, split)] or [0]
    return [int(s) for s in split]


def _slices(ctx: ConversionContext, it: Any, dim: int, sizes: Sequence[int],
            starts: Sequence[int] | None = None) -> list[Any]:
    """Pieces of ``it`` along ``dim``: back to back, or at ``starts`` (pieces may overlap)."""
    out, start = [], 0
    for k, s in enumerate(sizes):
        if starts is not None:
            start = starts[k]
        out.append(S.slice_(ctx, it, dim, start, start + s) if len(sizes) > 1 else _identity(ctx, it))
        start += s
    return out


def _view_starts(x: Any, pieces: Sequence[torch.Tensor], dim: int) -> list[int] | None:
    """Where each piece (a view of ``x``) starts along ``dim``, from the storage offsets; None when
    that cannot be read (``x`` not a tensor, a zero stride)."""
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.stride(dim) == 0:
        return None
    starts = []
    for p in pieces:
        if p.numel() == 0:
            starts.append(0)
            continue
        delta, rem = divmod(int(p.storage_offset()) - int(x.storage_offset()), int(x.stride(dim)))
        if rem or p.untyped_storage().data_ptr() != x.untyped_storage().data_ptr():
            return None
        starts.append(delta)
    return starts


def _dynamic_pieces(ctx: ConversionContext, x: torch.Tensor, dim: int, sizes: Sequence[Any]) -> list[Any]:
    """Back-to-back pieces of ``sizes`` (dynamic sizes allowed) along ``dim`` of traced ``x``."""
    out, start = [], 0
    for s in sizes:
        index = (slice(None),) * dim + (slice(start, start + s),)
        out.append(I.getitem(ctx, x, index, ()))
        start = start + s
    return out


def _split_dim_is_dynamic(ctx: ConversionContext, it: Any, dim: int) -> bool:
    return Y.dynamic(ctx) and tuple(it.shape)[dim] < 0


@converter("torch.split", T.split, torch.split_with_sizes, T.split_with_sizes)
def convert_split(ctx: ConversionContext, call: Call) -> Any:
    key = "tensor" if "tensor" in call.kwargs else "input"
    it = _in(ctx, call, 0, key)
    dim = S.norm_dim(call.arg(2, "dim", 0), len(tuple(it.shape)))
    split = call.arg(1, "split_size_or_sections", call.kwargs.get("split_size", call.kwargs.get("split_sizes")))
    if _split_dim_is_dynamic(ctx, it, dim) or Y.has_sym(split):
        if not isinstance(split, (list, tuple)):
            Y.refuse(call.qualname, Y.sizes_of(ctx, call.arg(0, key))[dim:dim + 1] + (split,),
                     "the number of pieces of a dynamic dim split by a size would vary")
            split = [split]
        return _dynamic_pieces(ctx, call.arg(0, key), dim, list(split))
    return _slices(ctx, it, dim, [o.shape[dim] for o in call.output])


def _chunk_count(n: int, lo: float, hi: float) -> int | None:
    """The number of pieces of ``torch.chunk(x, n)`` along a dim of size in ``[lo, hi]`` when it is the
    same for every size there (None otherwise). Pieces have ``c = ceil(S / n)`` elements, so there are
    ``ceil(S / c)``; that is ``n`` for every ``S > n * (n - 1)``, so only smaller sizes need checking."""
    def count(size: int) -> int:
        c = -(-size // n)
        return -(-size // c) if size else 1

    top = int(min(hi, max(lo, n * (n - 1) + 1)))
    counts = {count(size) for size in range(int(lo), top + 1)}
    if hi > top:
        counts.add(n)
    return counts.pop() if len(counts) == 1 else None


def _chunk_dynamic(ctx: ConversionContext, call: Call, dim: int) -> list[Any]:
    """``chunk`` / ``tensor_split`` along a dynamic dim (see ``convert_chunk``)."""
    x = call.arg(0, "input")
    size = Y.sizes_of(ctx, x)[dim]
    arg = call.arg(1, "chunks", call.kwargs.get("sections", call.kwargs.get("indices",
                                                                          call.kwargs.get("tensor_indices_or_sections"))))
    if isinstance(arg, torch.Tensor):
        if ctx.is_traced(arg) or arg.dim() > 1:
            Y.refuse(call.qualname, [size], "tensor_split by a traced or 2-D tensor")
        arg = arg.tolist()
    n_pieces = len(call.output)
    bounds: list[tuple[Any, Any]] = []
    if call.qualname.endswith("chunk"):
        n = int(arg)
        if _chunk_count(n, size._lo, size._hi) != n_pieces:
            Y.refuse(call.qualname, [size], f"chunk({n}) of a dim of size in {Y.range_text(size)} "
                     "gives a different number of pieces at different sizes, and a network has a fixed number of "
                     "outputs (narrow the range, or use tensor_split, whose count is fixed)")
        c = (size + n - 1) // n
        bounds = [(k * c, (k + 1) * c if k + 1 < n_pieces else None) for k in range(n_pieces)]
    elif isinstance(arg, int):  # tensor_split(n): S // n elements, one more in the first S % n pieces
        q, r = size // arg, size % arg
        starts = [k * q + Y.sym_min(k, r) for k in range(arg)]
        bounds = [(starts[k], starts[k + 1] if k + 1 < arg else None) for k in range(arg)]
    else:  # tensor_split at indices: x[:i0], x[i0:i1], .., x[ik:] (Python slice clamping)
        idx = [int(i) for i in arg]
        bounds = list(zip([None, *idx], [*idx, None], strict=True))
    return [I.getitem(ctx, x, (slice(None),) * dim + (slice(b, e),), tuple(o.shape))
            for (b, e), o in zip(bounds, call.output, strict=True)]


@converter(torch.chunk, T.chunk, torch.tensor_split, T.tensor_split)
def convert_chunk(ctx: ConversionContext, call: Call) -> Any:
    """``chunk`` / ``tensor_split``. Along a static dim (other dims may be dynamic) each piece is a
    static slice. Along a dynamic dim, ``tensor_split`` always works (its number of pieces is fixed:
    ``n`` sections, or one more than the indices; the bounds become shape tensors), and so does
    ``chunk(n)`` when the number of pieces torch makes, ``ceil(S / ceil(S / n))``, is the same for
    every size S the dim's range allows (e.g. chunk(2) of a dim >= 2); otherwise chunk is refused
    while converting, naming the dim and its range (the network's number of outputs is fixed)."""
    it = _in(ctx, call)
    dim = S.norm_dim(call.arg(2, "dim", 0), len(tuple(it.shape)))
    if _split_dim_is_dynamic(ctx, it, dim):
        return _chunk_dynamic(ctx, call, dim)
    # NOTE: tensor_split's indices need not increase ([-3, 2] on 7 elements: x[:4], x[4:2], x[2:]):
    # each piece starts where torch's view of it does.
    starts = _view_starts(call.arg(0, "input"), call.output, dim)
    return _slices(ctx, it, dim, [o.shape[dim] for o in call.output], starts)


@converter(torch.unbind, T.unbind)
def convert_unbind(ctx: ConversionContext, call: Call) -> Any:
    """``unbind``: one output per index of ``dim``, so ``dim`` must be static (other dims may be dynamic)."""
    it = _in(ctx, call)
    dim = S.norm_dim(call.arg(1, "dim", 0), len(tuple(it.shape)))
    if _split_dim_is_dynamic(ctx, it, dim):
        Y.refuse(call.qualname, Y.sizes_of(ctx, call.arg(0, "input"))[dim:dim + 1],
                 "unbind makes one output per index of the dim, and a network has a fixed number of outputs")
    return [S.squeeze(ctx, S.slice_(ctx, it, dim, i, i + 1), dim) for i in range(len(call.output))]


def _cat_inputs(ctx: ConversionContext, tensors: Sequence[Any], dtype: torch.dtype) -> list[Any]:
    out = []
    for t in tensors:
        it = E.operand(ctx, t, dtype)
        if isinstance(t, torch.Tensor) and t.dim() == 1 and t.shape[0] == 0 and tuple(it.shape) == (0,):
            continue  # torch skips legacy empty 1-D tensors in cat (not one empty only in this trace: -1)
        out.append(it)
    return out


@converter(torch.cat, torch.concat, torch.concatenate, check=no_out)
def convert_cat(ctx: ConversionContext, call: Call) -> Any:
    tensors = call.arg(0, "tensors")
    dim = call.arg(1, "dim", call.kwargs.get("axis", 0))
    its = _cat_inputs(ctx, tensors, call.output.dtype)
    d = S.norm_dim(dim, call.output.dim())
    out = S.concat(ctx, its, d)
    if Y.dynamic(ctx) and -1 in tuple(out.shape):  # the axis's size: the sum of the inputs' (with bounds)
        parts = [Y.sizes_of(ctx, t) for t in tensors if isinstance(t, torch.Tensor) and t.dim() == call.output.dim()]
        total: Any = 0
        for sz in parts:
            total = total + sz[d]
        ctx.known_sizes(out, [total if i == d else parts[0][i] for i in range(call.output.dim())],
                      tuple(call.output.shape))
    return out


@converter(torch.stack, check=no_out)
def convert_stack(ctx: ConversionContext, call: Call) -> Any:
    tensors = call.arg(0, "tensors")
    dim = S.norm_dim(call.arg(1, "dim", 0), call.output.dim())
    its = [S.unsqueeze(ctx, E.operand(ctx, t, call.output.dtype), dim) for t in tensors]
    return S.concat(ctx, its, dim)


def _atleast(ctx: ConversionContext, t: Any, n: int, dtype: torch.dtype) -> Any:
    it = E.operand(ctx, t, dtype)
    r = len(tuple(it.shape))
    if r >= n:
        return it
    if n == 3 and r == 2:  # dstack: (a, b) -> (a, b, 1)
        return S.unsqueeze(ctx, it, 2)
    if n == 3 and r == 1:  # (a,) -> (1, a, 1)
        return S.unsqueeze(ctx, S.unsqueeze(ctx, it, 0), 2)
    return S._unsqueeze_front(ctx, it, n)


@converter(torch.hstack, torch.vstack, torch.row_stack, torch.dstack, torch.column_stack, check=no_out)
def convert_hvdstack(ctx: ConversionContext, call: Call) -> Any:
    tensors = call.arg(0, "tensors")
    name = call.qualname.rsplit(".", 1)[-1]
    dtype = call.output.dtype
    if name == "hstack":
        its = [E.operand(ctx, t, dtype) for t in tensors]
        its = [S._unsqueeze_front(ctx, i, 1) for i in its]
        return S.concat(ctx, its, 0 if len(tuple(its[0].shape)) == 1 else 1)
    if name in ("vstack", "row_stack"):
        return S.concat(ctx, [_atleast(ctx, t, 2, dtype) for t in tensors], 0)
    if name == "dstack":
        return S.concat(ctx, [_atleast(ctx, t, 3, dtype) for t in tensors], 2)
    its = []
    for t in tensors:  # column_stack: 0-d/1-d become columns
        it = E.operand(ctx, t, dtype)
        r = len(tuple(it.shape))
        its.append(S.reshape(ctx, it, (-1, 1)) if r <= 1 else it)
    return S.concat(ctx, its, 1)


@converter(torch.narrow, T.narrow)
def convert_narrow(ctx: ConversionContext, call: Call) -> Any:
    it = _in(ctx, call)
    dim, start, length = call.arg(1, "dim"), call.arg(2, "start"), call.arg(3, "length")
    n = len(tuple(it.shape))
    d = S.norm_dim(dim, n)
    if Y.dynamic(ctx) and (Y.has_sym([start, length]) or -1 in tuple(it.shape)):
        x = call.arg(0, "input")
        if isinstance(start, torch.Tensor):
            Y.refuse(call.qualname, [start])
        if not Y.is_sym(start) and start < 0:
            start = Y.sizes_of(ctx, x)[d] + start
        return I.getitem(ctx, x, (slice(None),) * d + (slice(start, start + length),), ())
    start = int(start)
    if start < 0:
        start += tuple(it.shape)[d]
    return S.slice_(ctx, it, d, start, start + int(length))


# ------------------------------------------------------------------------- roll / flip
def _roll_dim(ctx: ConversionContext, it: Any, shift: int, dim: int) -> Any:
    shape = tuple(it.shape)
    if -1 in shape:  # dynamic dims: start and size as shape tensors
        sizes = Y.network_sizes(ctx, it)
        n = sizes[dim]
        starts: list[Any] = [0] * len(shape)
        starts[dim] = (n - shift % n) % n if Y.is_sym(n) else (n - shift % n if n and shift % n else 0)
        layer = ctx.network.add_slice(it, tuple(0 if Y.is_sym(s) else s for s in starts),
                                      tuple(1 if Y.is_sym(s) else s for s in sizes), (1,) * len(shape))
        if Y.has_sym(starts):
            layer.set_input(1, Y.shape_tensor(ctx, starts))
        layer.set_input(2, Y.shape_tensor(ctx, sizes))
        layer.mode = ctx.trt.SampleMode.WRAP
        return layer.get_output(0)
    size = shape[dim]
    if size == 0 or shift % size == 0:
        return it
    starts = [0] * len(shape)
    starts[dim] = size - shift % size
    layer = ctx.network.add_slice(it, tuple(starts), shape, (1,) * len(shape))
    layer.mode = ctx.trt.SampleMode.WRAP
    return layer.get_output(0)


@converter(torch.roll, T.roll)
def convert_roll(ctx: ConversionContext, call: Call) -> Any:
    it = _in(ctx, call)
    shifts, dims = call.arg(1, "shifts"), call.arg(2, "dims", None)
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    if dims is None or (isinstance(dims, (list, tuple)) and not dims):
        shape = tuple(it.shape)
        flat = S.flatten(ctx, it, 0, -1)
        return S.reshape(ctx, _roll_dim(ctx, flat, int(shifts[0]), 0), shape)
    dims = [dims] if isinstance(dims, int) else list(dims)
    n = len(tuple(it.shape))
    orig = it
    for s, d in zip(shifts, dims, strict=True):
        it = _roll_dim(ctx, it, int(s), S.norm_dim(d, n))
    return it if it is not orig else _identity(ctx, it)


def flip(ctx: ConversionContext, it: Any, dims: Sequence[int]) -> Any:
    shape = tuple(it.shape)
    n = len(shape)
    ds = {S.norm_dim(d, n) for d in dims}
    if not ds:
        return _identity(ctx, it)
    if -1 in shape:  # dynamic dims: start and size as shape tensors
        sizes = Y.network_sizes(ctx, it)
        first = [sizes[i] - 1 if i in ds else 0 for i in range(n)]
        layer = ctx.network.add_slice(it, tuple(0 if Y.is_sym(s) else s for s in first),
                                      tuple(1 if Y.is_sym(s) else s for s in sizes),
                                      tuple(-1 if i in ds else 1 for i in range(n)))
        if Y.has_sym(first):
            layer.set_input(1, Y.shape_tensor(ctx, first))
        layer.set_input(2, Y.shape_tensor(ctx, sizes))
        return layer.get_output(0)
    starts = tuple(shape[i] - 1 if i in ds else 0 for i in range(n))
    strides = tuple(-1 if i in ds else 1 for i in range(n))
    return ctx.network.add_slice(it, starts, shape, strides).get_output(0)


@converter(torch.flip, T.flip)
def convert_flip(ctx: ConversionContext, call: Call) -> Any:
    dims = _sizes(call, 1, "dims")
    return flip(ctx, _in(ctx, call), dims)


@converter(torch.fliplr, T.fliplr)
def convert_fliplr(ctx: ConversionContext, call: Call) -> Any:
    return flip(ctx, _in(ctx, call), [1])


@converter(torch.flipud, T.flipud)
def convert_flipud(ctx: ConversionContext, call: Call) -> Any:
    return flip(ctx, _in(ctx, call), [0])


# ---------------------------------------------------------------------- diag / tril / triu
def _index_grid(ctx: ConversionContext, rows: Any, cols: Any) -> Any:
    """``c - r`` over a [rows, cols] grid (INT64; dynamic sizes allowed): the diagonal each element is on."""
    r = Y.arange(ctx, rows, 2, 0, torch.int64)
    c = Y.arange(ctx, cols, 2, 1, torch.int64)
    return E.ew(ctx, c, r, "SUB")


def _tri(upper: bool) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        x = call.arg(0, "input")
        k = int(call.arg(1, "diagonal", 0))
        it = ctx.itensor(x)
        if min(tuple(it.shape)[-2:]) < 0:  # a dynamic row or column count: the mask from IFillLayer ranges
            rows, cols = Y.network_sizes(ctx, it)[-2:]
            mask = E.compare(ctx, _index_grid(ctx, rows, cols), k, "ge" if upper else "le")
        else:
            r = torch.arange(x.shape[-2]).unsqueeze(1)
            c = torch.arange(x.shape[-1]).unsqueeze(0)
            mask = ctx.constant((c - r >= k) if upper else (c - r <= k))
        zero = E.scalar(ctx, 0, x.dtype) if x.dtype != torch.bool else ctx.constant(torch.zeros((), dtype=torch.bool))
        return E.select(ctx, mask, it, zero)

    return convert


register_table({(torch.tril, T.tril, T.tril_): False, (torch.triu, T.triu, T.triu_): True}, _tri, check=no_out)


def _diagonal_index(ctx: ConversionContext, rows: Any, cols: Any, off: int) -> Any:
    """The flat indices ``r * cols + c`` of diagonal ``off`` of a [rows, cols] matrix (1-D INT64; the
    sizes may be dynamic: the length ``max(0, min(rows - r0, cols - c0))`` is then a shape tensor)."""
    r0, c0 = max(-off, 0), max(off, 0)
    length = Y.sym_max(0, Y.sym_min(rows - r0, cols - c0))
    if not (Y.is_sym(length) or Y.is_sym(cols)):
        i = torch.arange(int(length))
        return ctx.constant(((i + r0) * int(cols) + i + c0).to(torch.int64))
    i = Y.arange(ctx, length, 1, 0, torch.int64)
    row = E.ew(ctx, i, Y.to_itensor(ctx, r0), "SUM") if r0 else i
    flat = E.ew(ctx, row, Y.to_itensor(ctx, cols), "PROD")
    return E.ew(ctx, E.ew(ctx, flat, i, "SUM"), Y.to_itensor(ctx, c0), "SUM") if c0 else E.ew(ctx, flat, i, "SUM")


@converter(torch.diag, T.diag, check=no_out)
def convert_diag(ctx: ConversionContext, call: Call) -> Any:
    """``torch.diag``. A 1-D input of dynamic length n builds ``out[r, c] = x[r]`` (``x[c]`` below the
    diagonal) where ``c - r == k`` from index ranges of size ``n + |k|``; a 2-D input is ``diagonal``."""
    x = call.arg(0, "input")
    k = int(call.arg(1, "diagonal", 0))
    it = ctx.itensor(x)
    if x.dim() == 1 and tuple(it.shape)[0] < 0:
        n = Y.network_sizes(ctx, it)[0]
        m = n + abs(k)
        zeros = E.operand(ctx, torch.zeros(abs(k), dtype=x.dtype), x.dtype) if k else None
        pad = S.concat(ctx, [it, zeros], 0) if zeros is not None else it  # x then |k| zeros: length m
        vals = S.reshape_spec(ctx, pad, [m, 1] if k >= 0 else [1, m])
        zero = E.scalar(ctx, 0, x.dtype, 2) if x.dtype != torch.bool else ctx.constant(torch.zeros((1, 1), dtype=torch.bool))
        mask = E.compare(ctx, _index_grid(ctx, m, m), k, "eq")
        return E.select(ctx, mask, S.expand(ctx, vals, [m, m]), zero)
    if x.dim() == 1:
        n = x.shape[0]
        m = n + abs(k)
        # out[i, i + k] = x[i]: gather rows of [x, 0] with an index matrix (n -> the zero slot)
        pad = S.concat(ctx, [it, E.operand(ctx, torch.zeros(1, dtype=x.dtype), x.dtype)], 0)
        idx = torch.full((m, m), n, dtype=torch.int64)
        i = torch.arange(n)
        rows, cols = (i, i + k) if k >= 0 else (i - k, i)
        idx[rows, cols] = i
        return ctx.network.add_gather(pad, ctx.constant(idx), 0).get_output(0)
    rows, cols = Y.network_sizes(ctx, it)
    flat = S.flatten(ctx, it, 0, -1)
    return ctx.network.add_gather(flat, _diagonal_index(ctx, rows, cols, k), 0).get_output(0)


@converter(torch.diagonal, T.diagonal)
def convert_diagonal(ctx: ConversionContext, call: Call) -> Any:
    x = call.arg(0, "input")
    off, d1, d2 = int(call.arg(1, "offset", 0)), call.arg(2, "dim1", 0), call.arg(3, "dim2", 1)
    n = x.dim()
    d1, d2 = S.norm_dim(d1, n), S.norm_dim(d2, n)
    it = ctx.itensor(x)
    rest = [i for i in range(n) if i not in (d1, d2)]
    sizes = Y.network_sizes(ctx, it)
    rows, cols = sizes[d1], sizes[d2]
    it = S.permute(ctx, it, [*rest, d1, d2])
    it = S.flatten(ctx, it, len(rest), -1)
    return ctx.network.add_gather(it, _diagonal_index(ctx, rows, cols, off), len(rest)).get_output(0)
