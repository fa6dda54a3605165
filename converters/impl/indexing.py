"""Indexing builders: torch's ``x[idx]`` (basic and advanced), functional ``x[idx] = v``, gathers and scatters.

An index is first normalized into a list of items, one per indexed dim (ellipsis expanded, bool
masks of untraced tensors turned into integer indices, ints turned into 0-d advanced indices when
advanced indexing is present), which both ``getitem`` and ``setitem`` consume.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.errors import ConversionError, ConverterRefusal

from . import elementwise as E
from . import shape as S
from . import sizes as Y

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


@dataclass
class Item:
    kind: str  # "slice", "int", "none", "adv"
    value: Any = None  # slice / int / index tensor (torch tensor, maybe traced)


def _as_index_tensor(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return v
    return torch.tensor(v)


def normalize(x: torch.Tensor, index: Any, traced: Any) -> list[Item]:
    """Items of ``x[index]`` (see module docstring); ``traced(t)`` tells traced tensors apart."""
    idx = index if isinstance(index, tuple) else (index,)
    items: list[Item] = []
    for v in idx:
        if v is None:
            items.append(Item("none"))
        elif v is Ellipsis:
            items.append(Item("ellipsis"))
        elif isinstance(v, bool):
            if not v:
                raise ConversionError("indexing with False gives an empty tensor")
            items.append(Item("none"))
        elif isinstance(v, int):
            items.append(Item("int", v if Y.is_sym(v) else int(v)))
        elif isinstance(v, slice):
            items.append(Item("slice", v))
        elif isinstance(v, (torch.Tensor, list, tuple)):
            t = _as_index_tensor(v)
            if t.dtype in (torch.bool, torch.uint8):
                if traced(t):
                    raise ConversionError(
                        "indexing with a traced boolean mask has a data-dependent shape (use torch.where or "
                        "masked_fill instead)"
                    )
                for comp in t.nonzero(as_tuple=True):
                    items.append(Item("adv", comp))
                if t.dim() == 0:
                    items.append(Item("none"))
            elif t.is_floating_point():
                raise ConversionError(f"tensors used as indices must be integer or bool, got {t.dtype}")
            else:
                items.append(Item("adv", t))
        else:
            raise ConversionError(f"unsupported index of type {type(v).__name__}")
    consuming = sum(1 for it in items if it.kind in ("int", "slice", "adv"))
    if consuming > x.dim():
        raise ConversionError(f"too many indices for a tensor of dimension {x.dim()}")
    out: list[Item] = []
    seen_ellipsis = False
    for it in items:
        if it.kind == "ellipsis":
            if seen_ellipsis:
                raise ConversionError("an index can only have a single ellipsis")
            seen_ellipsis = True
            out.extend(Item("slice", slice(None)) for _ in range(x.dim() - consuming))
        else:
            out.append(it)
    # NOTE: unlike numpy, torch applies int indices as basic selects even beside index tensors
    # (``x[1, :, [0, 3]]`` has shape (5, 2) for x of shape (4, 5, 6)).
    return out


def _wrap_index(ctx: ConversionContext, idx: Any, size: int) -> Any:
    """An INT64 network tensor of ``idx`` with negative entries wrapped (``i + size`` when ``i < 0``)."""
    if isinstance(idx, torch.Tensor) and not ctx.is_traced(idx):
        t = idx.to(torch.int64)
        if Y.is_sym(size):  # a dynamic dim: negative indices wrap by its size, computed in the network
            if not bool((t < 0).any()):
                return ctx.constant(t)
            idx = ctx.constant(t)
        elif bool((t >= size).any()) or bool((t < -size).any()):
            raise ConversionError(f"index out of range for a dim of size {size}")
        else:
            return ctx.constant(torch.where(t < 0, t + size, t))
    it = ctx.cast(ctx.itensor(idx) if not E.is_itensor(idx) else idx, torch.int64)
    zero = E.scalar(ctx, 0, torch.int64)
    neg = E.ew(ctx, it, zero, "LESS")
    n = Y.scalar(ctx, size) if Y.is_sym(size) else E.scalar(ctx, size, torch.int64)
    return E.select(ctx, neg, E.ew(ctx, it, n, "SUM"), it)


def _adjacent(items: Sequence[Item]) -> bool:
    """Whether the index tensors sit next to each other (ints between them do not count; None does)."""
    items = [it for it in items if it.kind != "int"]
    pos = [i for i, it in enumerate(items) if it.kind == "adv"]
    return bool(pos) and pos[-1] - pos[0] + 1 == len(pos)


def _basic_slice(ctx: ConversionContext, it: Any, shape: Sequence[int], items: Sequence[Item]) -> Any:
    """One slice layer for every slice and int item (ints keep a size-1 dim, dropped by the final reshape)."""
    n = len(shape)
    starts, sizes, strides = [0] * n, list(shape), [1] * n
    d = 0
    for item in items:
        if item.kind == "none":
            continue
        if item.kind == "slice":
            step = 1 if item.value.step is None else int(item.value.step)
            if step <= 0:
                raise ConversionError(f"slice step must be positive, got {step}")
            b, e, _ = item.value.indices(shape[d])
            starts[d], sizes[d], strides[d] = b, len(range(b, e, step)), step
        elif item.kind == "int":
            i = item.value + shape[d] if item.value < 0 else item.value
            if not 0 <= i < shape[d]:
                raise ConversionError(f"index {item.value} is out of bounds for a dim of size {shape[d]}")
            starts[d], sizes[d] = i, 1
        d += 1
    if starts == [0] * n and sizes == list(shape) and strides == [1] * n:
        return it
    if 0 in sizes:
        starts = [0] * n
    return ctx.network.add_slice(it, tuple(starts), tuple(sizes), tuple(strides)).get_output(0)


def broadcast_indices(ctx: ConversionContext, idxs: Sequence[Any], sizes: Sequence[int]) -> tuple[list[Any], tuple]:
    """Wrapped INT64 index tensors broadcast to one shape (returned with that shape)."""
    if Y.dynamic(ctx) and any(isinstance(i, torch.Tensor) and ctx.is_traced(i) for i in idxs):
        return _broadcast_dynamic(ctx, idxs, sizes)
    shapes = [tuple(i.shape) for i in idxs]
    bshape = tuple(torch.broadcast_shapes(*shapes)) if shapes else ()
    out = []
    for i, size in zip(idxs, sizes, strict=True):
        w = _wrap_index(ctx, i, size)
        w = S.expand(ctx, w, bshape) if tuple(w.shape) != bshape else w
        out.append(w)
    return out, bshape


def _slice_dynamic(ctx: ConversionContext, it: Any, sizes: Sequence[Any],
                   items: Sequence[Item]) -> tuple[Any, list[Any], list[Any]]:
    """``_basic_slice`` where dims or bounds are dynamic: starts and sizes as shape tensors; also the
    reshape spec that drops the int dims and inserts the None dims, and the sliced sizes."""
    n = len(sizes)
    starts: list[Any] = [0] * n
    lens: list[Any] = list(sizes)
    strides = [1] * n
    spec: list[Any] = []
    d = 0
    for item in items:
        if item.kind == "none":
            spec.append(1)
            continue
        if item.kind == "slice":
            sl = item.value
            step = 1 if sl.step is None else sl.step
            if Y.is_sym(step) or int(step) <= 0:
                raise ConverterRefusal(f"slice step must be a static positive int, got {step}")
            b = S._clamp_bound(sl.start, sizes[d], 0)
            e = S._clamp_bound(sl.stop, sizes[d], sizes[d])
            starts[d], lens[d], strides[d] = b, Y.sym_max(0, (e - b + step - 1) // step), int(step)
            spec.append(S.Copy(d))
        elif item.kind == "int":
            i = item.value
            if not Y.is_sym(i) and i < 0:
                i = sizes[d] + i
            starts[d], lens[d] = i, 1
        else:  # adv
            spec.append(S.Copy(d))
        d += 1
    spec += [S.Copy(k) for k in range(d, n)]
    if all(not Y.is_sym(v) and v == 0 for v in starts) and all(
        (Y.is_sym(a) and a is b) or (not Y.is_sym(a) and not Y.is_sym(b) and a == b) for a, b in zip(lens, sizes, strict=True)
    ) and strides == [1] * n:
        return it, spec, lens
    layer = ctx.network.add_slice(
        it, tuple(0 if Y.is_sym(v) else int(v) for v in starts), tuple(1 if Y.is_sym(v) else int(v) for v in lens),
        tuple(strides),
    )
    if Y.has_sym(starts):
        layer.set_input(1, Y.shape_tensor(ctx, starts))
    if Y.has_sym(lens):
        layer.set_input(2, Y.shape_tensor(ctx, lens))
    return layer.get_output(0), spec, lens


def _getitem_dynamic(ctx: ConversionContext, x: torch.Tensor, it: Any, items: list[Item],
                     traced_out: Sequence[int] | None = None) -> Any:
    sizes: Sequence[Any] = Y.sizes_of(ctx, x)
    adv = [(d, item.value) for d, item in enumerate(i for i in items if i.kind != "none") if item.kind == "adv"]
    if adv and any(i.kind in ("int", "none") for i in items):
        it, sizes, items = _ints_as_indices(ctx, it, sizes, items)
    sliced, spec, lens = _slice_dynamic(ctx, it, sizes, items)
    adv = [(d, item.value) for d, item in enumerate(i for i in items if i.kind != "none") if item.kind == "adv"]
    if not adv:
        out = S.reshape_spec(ctx, sliced, spec)
        if traced_out is not None:  # the sliced sizes (x[:3] of a dim traced at 3 is min(n, 3), not n)
            ctx.known_sizes(out, [lens[e.index] if isinstance(e, S.Copy) else e for e in spec], traced_out)
        return out
    dims = [d for d, _ in adv]
    idxs, _ = broadcast_indices(ctx, [v for _, v in adv], [sizes[d] for d in dims])
    if len(adv) == 1:
        out = ctx.network.add_gather(sliced, idxs[0], dims[0]).get_output(0)
        index = adv[0][1]
        if traced_out is not None and isinstance(index, torch.Tensor) and ctx.is_traced(index):
            # the index's sizes (with their bounds) along the gathered dim; the others' as sliced
            kept = list(Y.network_sizes(ctx, sliced))
            kept = [traced_out[i] if i < len(traced_out) and not Y.is_sym(v) else v for i, v in enumerate(kept)]
            ctx.known_sizes(out, kept[:dims[0]] + list(Y.sizes_of(ctx, index)) + kept[dims[0] + 1:], traced_out)
        return out
    n = len(sizes)
    rest = [d for d in range(n) if d not in dims]
    out = S.permute(ctx, sliced, dims + rest)
    out = S.flatten(ctx, out, 0, len(dims) - 1)
    lin = idxs[0]
    for d, i in zip(dims[1:], idxs[1:], strict=True):
        size = Y.scalar(ctx, sizes[d]) if Y.is_sym(sizes[d]) else E.scalar(ctx, sizes[d], torch.int64)
        lin = E.ew(ctx, E.ew(ctx, lin, size, "PROD"), i, "SUM")
    out = ctx.network.add_gather(out, lin, 0).get_output(0)
    if _adjacent(items) and dims[0]:
        nb, p = len(tuple(lin.shape)), dims[0]
        r = len(tuple(out.shape))
        out = S.permute(ctx, out, list(range(nb, nb + p)) + list(range(nb)) + list(range(nb + p, r)))
    idx_sizes = [tuple(Y.sizes_of(ctx, v)) for _, v in adv if isinstance(v, torch.Tensor)]
    if traced_out is not None and len(idx_sizes) == len(adv) and len({tuple(map(Y.size_key, z)) for z in idx_sizes}) == 1:
        kept = [lens[d] for d in rest]  # the index tensors' common sizes (a mask's rows: one count), then the rest
        p = dims[0] if _adjacent(items) else 0
        ctx.known_sizes(out, kept[:p] + list(idx_sizes[0]) + kept[p:], traced_out)
    return out


def _ints_as_indices(ctx: ConversionContext, it: Any, sizes: Sequence[Any],
                     items: list[Item]) -> tuple[Any, list[Any], list[Item]]:
    """Index tensors beside ints or None, made index tensors beside slices only (torch's own rules):
    an int there is an advanced index (a 0-D index tensor, broadcast with the others), and a None
    is a new size-1 dim (an unsqueeze, then a full slice). The dynamic sizes stay symbolic."""
    out: list[Item] = []
    new_sizes = list(sizes)
    pos = 0
    for item in items:
        if item.kind == "none":
            it = S.unsqueeze(ctx, it, pos)
            new_sizes.insert(pos, 1)
            out.append(Item("slice", slice(None)))
        elif item.kind == "int":
            if Y.is_sym(item.value):
                Y.refuse("indexing with index tensors beside a dynamic int", [item.value])
            out.append(Item("adv", torch.tensor(int(item.value), dtype=torch.int64)))
        else:
            out.append(item)
        pos += 1
    return it, new_sizes, out


def _broadcast_dynamic(ctx: ConversionContext, idxs: Sequence[Any], sizes: Sequence[int]) -> tuple[list[Any], tuple]:
    shapes = [Y.sizes_of(ctx, i) if isinstance(i, torch.Tensor) else tuple(torch.as_tensor(i).shape) for i in idxs]
    n = max(len(sh) for sh in shapes)
    target: list[Any] = []
    for k in range(n):
        ds = [sh[len(sh) - n + k] for sh in shapes if len(sh) - n + k >= 0]
        big = [d for d in ds if Y.is_sym(d) or d != 1]
        target.append(big[0] if big else 1)
    out = []
    for i, sh, size in zip(idxs, shapes, sizes, strict=True):
        w = _wrap_index(ctx, i, size)
        same = len(sh) == n and all(a is b or (not Y.is_sym(a) and not Y.is_sym(b) and a == b)
                                    for a, b in zip(sh, target, strict=True))
        out.append(w if same else S.expand(ctx, w, target))
    return out, tuple(target)


def _mask_indices(ctx: ConversionContext, index: Any) -> Any:
    """``index`` with each traced boolean mask replaced by the index tensors it stands for (its NonZero
    rows: a data-dependent size, see :mod:`converters.datadep`)."""
    parts = index if isinstance(index, tuple) else (index,)
    if not any(isinstance(v, torch.Tensor) and v.dtype in (torch.bool, torch.uint8) and ctx.is_traced(v)
               for v in parts):
        return index
    from .datadep import mask_index

    out: list[Any] = []
    for v in parts:
        if isinstance(v, torch.Tensor) and v.dtype in (torch.bool, torch.uint8) and ctx.is_traced(v):
            if v.dim() == 0:
                raise ConverterRefusal("indexing with a traced 0-D boolean mask (x[cond]) keeps or drops the "
                                       "whole tensor on a value; use torch.where")
            out.extend(mask_index(ctx, v if v.dtype == torch.bool else v.bool()))
        else:
            out.append(v)
    return tuple(out)


def getitem(ctx: ConversionContext, x: torch.Tensor, index: Any, out_shape: Sequence[int], it: Any = None) -> Any:
    """``x[index]`` as a network tensor (of ``it`` when given: x's network tensor at another version)."""
    index = _mask_indices(ctx, index)
    items = normalize(x, index, ctx.is_traced)
    it = ctx.itensor(x) if it is None else it
    if Y.dynamic(ctx) and (-1 in tuple(it.shape) or any(
        Y.has_sym([i.value.start, i.value.stop, i.value.step] if i.kind == "slice" else i.value)
        for i in items if i.kind in ("slice", "int")
    ) or any(i.kind == "adv" and ctx.is_traced(i.value) and -1 in tuple(ctx.itensor(i.value).shape)
             for i in items)):
        return _getitem_dynamic(ctx, x, it, items, tuple(out_shape))
    shape = tuple(x.shape)
    it = _basic_slice(ctx, it, shape, items)
    adv = [(d, item.value) for d, item in enumerate(i for i in items if i.kind != "none") if item.kind == "adv"]
    if adv:
        cur = tuple(it.shape)
        dims = [d for d, _ in adv]
        idxs, bshape = broadcast_indices(ctx, [v for _, v in adv], [cur[d] for d in dims])
        if len(adv) == 1:
            it = ctx.network.add_gather(it, idxs[0], dims[0]).get_output(0)
        else:
            rest = [d for d in range(len(cur)) if d not in dims]
            it = S.permute(ctx, it, dims + rest)
            it = S.flatten(ctx, it, 0, len(dims) - 1)
            lin = idxs[0]
            for d, i in zip(dims[1:], idxs[1:], strict=True):
                lin = E.ew(ctx, E.ew(ctx, lin, E.scalar(ctx, cur[d], torch.int64), "PROD"), i, "SUM")
            it = ctx.network.add_gather(it, lin, 0).get_output(0)
            if _adjacent(items):
                nb = len(bshape)
                p = dims[0]  # kept dims before the block
                if p:
                    r = len(tuple(it.shape))
                    perm = list(range(nb, nb + p)) + list(range(nb)) + list(range(nb + p, r))
                    it = S.permute(ctx, it, perm)
    return S.reshape(ctx, it, tuple(out_shape))


def setitem(ctx: ConversionContext, x: torch.Tensor, base: Any, index: Any, value: Any) -> Any:
    """The network tensor of ``x`` after ``x[index] = value`` (``base`` is x's tensor before it)."""
    items = normalize(x, index, ctx.is_traced)
    shape = tuple(x.shape)
    n = len(shape)
    dtype = x.dtype
    real = [i for i in items if i.kind != "none"]
    real += [Item("slice", slice(None))] * (n - len(real))
    if Y.dynamic(ctx) and (-1 in tuple(base.shape) or any(
        Y.has_sym(i.value) for i in real if i.kind in ("slice", "int")
    )):
        sizes = _sizes_of_base(ctx, x, base)
        if any(i.kind == "adv" for i in real):
            return _set_advanced(ctx, base, shape, items, real, value, dtype, sizes)
        if any(Y.has_sym(i.value) or (Y.is_sym(sizes[d]) and not (i.kind == "slice" and i.value == slice(None)))
               for d, i in enumerate(real)):
            return _set_box_dynamic(ctx, base, sizes, items, real, value, dtype)
        return _set_box(ctx, base, shape, real, value, dtype, _dynamic_region(ctx, base, items, shape))
    # the region's shape as x[index] shows it, to broadcast the value the way torch does
    region_shape: tuple[Any, ...] = tuple(x[index].shape)
    if all(i.kind in ("slice", "int") for i in real):
        return _set_box(ctx, base, shape, real, value, dtype, region_shape)
    return _set_advanced(ctx, base, shape, items, real, value, dtype)


def _sizes_of_base(ctx: ConversionContext, x: torch.Tensor, base: Any) -> tuple[Any, ...]:
    """The sizes of ``base`` (x's network tensor before an assignment) with their traced values (x's
    sizes), so dynamic dims take the ranges of the inputs they were traced beside (duck sizing)."""
    state = ctx.symbolic
    if state is not None and len(tuple(base.shape)) == x.dim():
        sizes = state.itensor_sizes(base, tuple(x.shape))
        if sizes is not None:
            return tuple(sizes)
    return Y.network_sizes(ctx, base)


def _dynamic_region(ctx: ConversionContext, base: Any, items: list[Item], shape: tuple) -> tuple[Any, ...]:
    """``x[index]``'s shape with the dynamic dims of ``base`` symbolic, for an index that restricts only
    static dims with static bounds (the others take :func:`_set_box_dynamic`)."""
    sizes = Y.network_sizes(ctx, base)
    out: list[Any] = []
    d = 0
    for item in items:
        if item.kind == "none":
            out.append(1)
            continue
        if item.kind == "slice":
            out.append(sizes[d] if Y.is_sym(sizes[d]) else len(range(*item.value.indices(shape[d]))))
        d += 1
    out += list(sizes[d:])
    return tuple(out)


def _same_size(a: Any, b: Any) -> bool:
    """Are ``a`` and ``b`` (ints or dynamic sizes) the same size for every input shape?"""
    if Y.is_sym(a) or Y.is_sym(b):
        return Y.is_sym(a) and Y.is_sym(b) and Y.size_key(a) == Y.size_key(b)
    return bool(a == b)


def _set_box_dynamic(
    ctx: ConversionContext, base: Any, sizes: Sequence[Any], items: list[Item], real: list[Item], value: Any,
    dtype: torch.dtype,
) -> Any:
    """``x[index] = value`` for a box of unit-step slices and ints whose bounds or dims are dynamic
    (``shifted[:, 1:] = ids[:, :-1]`` on a dynamic sequence dim): the box is pasted in with slices of
    the base around it and concatenations, one restricted dim at a time, all sized by shape tensors."""
    n = len(sizes)
    box: list[tuple[int, Any, Any]] = []  # (dim, start, stop) of each restricted dim
    lens: list[Any] = []
    for d, item in enumerate(real):
        if item.kind == "slice":
            sl = item.value
            step = 1 if sl.step is None else sl.step
            if Y.is_sym(step) or int(step) != 1:
                if Y.is_sym(step) or int(step) <= 0:
                    raise ConverterRefusal(f"slice step must be a static positive int, got {step}")
                Y.refuse("torch.Tensor.__setitem__", [v for v in (sizes[d], sl.start, sl.stop) if Y.is_sym(v)]
                         or [s for s in sizes if Y.is_sym(s)],
                         f"an assignment with step {step} along a dim whose size or bounds are dynamic")
            b = S._clamp_bound(sl.start, sizes[d], 0)
            e = Y.sym_max(b, S._clamp_bound(sl.stop, sizes[d], sizes[d]))
        else:
            b = item.value
            if not Y.is_sym(b):
                if Y.is_sym(sizes[d]) and b < 0:
                    b = sizes[d] + b
                elif not Y.is_sym(sizes[d]) and not -sizes[d] <= b < sizes[d]:
                    raise ConversionError(f"index {b} is out of bounds for a dim of size {sizes[d]}")
                elif b < 0:
                    b = b + sizes[d]
            elif not b._lo >= 0:
                Y.refuse("torch.Tensor.__setitem__", [b], "an index that may be negative wraps around the dim")
            e = b + 1
        length = e - b
        lens.append(length)
        if not (not Y.is_sym(b) and b == 0 and _same_size(e, sizes[d])):
            box.append((d, b, e))
    if any(not Y.is_sym(v) and v == 0 for v in lens):
        return ctx.network.add_identity(base).get_output(0)
    # the region's shape as x[index] shows it (ints dropped, None a 1), to broadcast the value as torch does
    region: list[Any] = []
    d = 0
    for item in items:
        if item.kind == "none":
            region.append(1)
            continue
        if item.kind == "slice":
            region.append(lens[d])
        d += 1
    region += lens[d:]
    val = S.expand(ctx, _value_it(ctx, value, dtype), region)
    if len(region) != n or any(i.kind != "slice" for i in items):
        val = S.reshape(ctx, val, lens)
    if not box:
        return ctx.network.add_identity(val).get_output(0)
    return _paste(ctx, base, sizes, box, val)


def _paste(ctx: ConversionContext, it: Any, sizes: Sequence[Any], box: Sequence[tuple[int, Any, Any]], val: Any) -> Any:
    """``it`` (of ``sizes``) with ``val`` in place of the box ``box`` (restricted dims' ``(dim, start,
    stop)``, clamped: ``0 <= start <= stop <= size``)."""
    if not box:
        return val
    (d, b, e), rest = box[0], box[1:]
    parts = []
    if Y.is_sym(b) or b != 0:
        parts.append(_slab(ctx, it, sizes, d, 0, b))
    if rest:
        inner = list(sizes)
        inner[d] = e - b
        parts.append(_paste(ctx, _slab(ctx, it, sizes, d, b, e - b), inner, rest, val))
    else:
        parts.append(val)
    if not _same_size(e, sizes[d]):
        parts.append(_slab(ctx, it, sizes, d, e, sizes[d] - e))
    return S.concat(ctx, parts, d)


def _slab(ctx: ConversionContext, it: Any, sizes: Sequence[Any], d: int, start: Any, length: Any) -> Any:
    """``it[..., start:start + length, ...]`` along ``d`` (in range), sizes as shape tensors where dynamic."""
    n = len(sizes)
    starts: list[Any] = [0] * n
    starts[d] = start
    lens = list(sizes)
    lens[d] = length
    layer = ctx.network.add_slice(it, tuple(0 if Y.is_sym(v) else int(v) for v in starts),
                                  tuple(1 if Y.is_sym(v) else int(v) for v in lens), (1,) * n)
    if Y.has_sym(starts):
        layer.set_input(1, Y.shape_tensor(ctx, starts))
    if Y.has_sym(lens):
        layer.set_input(2, Y.shape_tensor(ctx, lens))
    return layer.get_output(0)


def _value_it(ctx: ConversionContext, value: Any, dtype: torch.dtype) -> Any:
    return E.operand(ctx, value, dtype)


def _set_box(
    ctx: ConversionContext, base: Any, shape: tuple, real: list[Item], value: Any, dtype: torch.dtype,
    region_shape: tuple,
) -> Any:
    """A strided box region: ND scatter over the restricted dims (moved to the front)."""
    n = len(shape)
    sets: list[list[int]] = []
    for d, item in enumerate(real):
        if item.kind == "slice":
            sets.append(list(range(*item.value.indices(shape[d]))))
        else:
            i = item.value + shape[d] if item.value < 0 else item.value
            sets.append([i])
    restricted = [d for d in range(n) if len(sets[d]) != shape[d]]
    val = _value_it(ctx, value, dtype)
    # value broadcast to the full box shape (ints keep size-1 dims)
    box: tuple[Any, ...] = tuple(len(s) for s in sets)
    if Y.has_sym(region_shape):  # dynamic dims (whole, never restricted): symbolic sizes
        sizes = Y.network_sizes(ctx, base)
        box = tuple(sizes[d] if Y.is_sym(sizes[d]) else b for d, b in enumerate(box))
        vs = Y.network_sizes(ctx, val)
        if len(vs) != len(region_shape) or any(
            not ((Y.is_sym(a) and tuple(val.shape)[i] < 0) or (not Y.is_sym(a) and a == b))
            for i, (a, b) in enumerate(zip(region_shape, vs, strict=True))
        ):
            val = S.expand(ctx, val, list(region_shape))
        val = S.reshape(ctx, val, list(box)) if len(box) != len(region_shape) or any(
            not Y.is_sym(b) and b != r for b, r in zip(box, region_shape, strict=False)) else val
    else:
        val = S.expand(ctx, val, region_shape) if tuple(val.shape) != tuple(region_shape) else val
        val = S.reshape(ctx, val, box) if tuple(val.shape) != box else val
    if any(b == 0 for b in box):
        return ctx.network.add_identity(base).get_output(0)
    if not restricted:
        return ctx.network.add_identity(val).get_output(0)
    if len(restricted) == 1 and sets[restricted[0]] == list(range(sets[restricted[0]][0],
                                                                  sets[restricted[0]][-1] + 1)):
        d = restricted[0]
        a, b = sets[d][0], sets[d][-1] + 1
        parts = []
        if a > 0:
            parts.append(S.slice_(ctx, base, d, 0, a))
        parts.append(val)
        if b < shape[d]:
            parts.append(S.slice_(ctx, base, d, b, None))
        return S.concat(ctx, parts, d)
    full = [d for d in range(n) if d not in restricted]
    perm = restricted + full
    data = S.permute(ctx, base, perm)
    upd = S.permute(ctx, val, perm)
    grids = torch.meshgrid(*[torch.tensor(sets[d], dtype=torch.int64) for d in restricted], indexing="ij")
    coords = torch.stack(grids, dim=-1)  # (|S_1|, ..., |S_k|, k)
    layer = ctx.network.add_scatter(data, ctx.constant(coords), upd, ctx.trt.ScatterMode.ND)
    out = layer.get_output(0)
    inv = [perm.index(i) for i in range(n)]
    return S.permute(ctx, out, inv)


def _set_advanced(
    ctx: ConversionContext, base: Any, shape: tuple, items: list[Item], real: list[Item], value: Any,
    dtype: torch.dtype, sizes: Sequence[Any] | None = None,
) -> Any:
    """Integer index tensors (with full slices elsewhere): ND scatter with the advanced dims in front.
    ``sizes``: the base's sizes with its dynamic dims symbolic (a dynamic-shape conversion)."""
    n = len(shape)
    dims: Sequence[Any] = shape if sizes is None else sizes
    if any(i.kind == "slice" and i.value != slice(None) for i in real) or any(i.kind == "none" for i in items):
        raise ConversionError("assignment mixing index tensors with partial slices or None is not supported")
    adv_dims = [d for d, i in enumerate(real) if i.kind == "adv"]
    cdims = [d for d, i in enumerate(real) if i.kind in ("adv", "int")]  # dims given coordinates
    cvals = [real[d].value if real[d].kind == "adv" else torch.tensor(real[d].value) for d in cdims]
    idxs, bshape = broadcast_indices(ctx, cvals, [dims[d] for d in cdims])
    rest = [d for d in range(n) if d not in cdims]
    perm = cdims + rest
    data = S.permute(ctx, base, perm)
    coords = S.concat(ctx, [S.unsqueeze(ctx, i, -1) for i in idxs], -1) if len(idxs) > 1 else S.unsqueeze(
        ctx, idxs[0], -1)
    # torch's x[idx] layout: the block at the first index tensor when they are adjacent, else in front
    nb = len(bshape)
    p = sum(1 for d in rest if d < adv_dims[0]) if _adjacent(real) else 0
    getitem_shape = tuple(dims[d] for d in rest[:p]) + tuple(bshape) + tuple(dims[d] for d in rest[p:])
    val = _value_it(ctx, value, dtype)
    val = S.expand(ctx, val, getitem_shape) if tuple(val.shape) != getitem_shape else val
    if p:
        r = len(getitem_shape)
        vperm = list(range(p, p + nb)) + list(range(p)) + list(range(p + nb, r))
        val = S.permute(ctx, val, vperm)
    out = ctx.network.add_scatter(data, coords, val, ctx.trt.ScatterMode.ND).get_output(0)
    inv = [perm.index(i) for i in range(n)]
    return S.permute(ctx, out, inv)


def masked_set(ctx: ConversionContext, base: Any, shape: tuple, mask: Any, value: Any, dtype: torch.dtype) -> Any:
    """``x[mask] = value`` for a (traced) boolean mask over x's leading dims and a broadcastable value."""
    m = E.to_bool(ctx, ctx.itensor(mask) if not E.is_itensor(mask) else mask)
    r = len(tuple(m.shape))
    if r < len(shape):
        m = S.reshape_spec(ctx, m, [S.Copy(i) for i in range(r)] + [1] * (len(shape) - r))
    return E.select(ctx, m, _value_it(ctx, value, dtype), base)


def one_hot(ctx: ConversionContext, idx: Any, depth: int, dtype: torch.dtype) -> Any:
    """``idx`` (INT64) one-hot along a new last axis, as ``dtype``."""
    u = S.unsqueeze(ctx, idx, -1)
    r = len(tuple(u.shape))
    ar = ctx.constant(torch.arange(depth, dtype=torch.int64).reshape((1,) * (r - 1) + (depth,)))
    return ctx.cast(E.ew(ctx, u, ar, "EQUAL"), dtype)
