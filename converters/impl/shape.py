"""Shape builders: reshape, permute, (un)squeeze, flatten, slice, concat, expand.

Every builder takes and returns network tensors (``builder(ctx, itensor, ...) -> itensor``).
Dims are taken from the network tensor's shape, so the builders stay valid when an input dim is
dynamic (``-1``): copied dims use shuffle's 0 placeholder where the position is unchanged, one
unknown dim becomes ``-1``, and otherwise the output shape is computed as a shape tensor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from torch2trt_lite.errors import ConversionError, ConverterRefusal

from . import sizes as Y

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

# A dim of a reshape spec: a static size (int >= 0), ``Copy(i)``: dim ``i`` of the input, or a dynamic
# size read while tracing (a ``sizes.SymSize``).
DimSpec = Any


class Copy:
    """Marks an output dim of a reshape as "the input's dim ``index``"."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"Copy({self.index})"


def rank(it: Any) -> int:
    return len(tuple(it.shape))


def norm_dim(dim: int, n: int) -> int:
    """``dim`` in ``[0, n)`` (Python-style negative dims)."""
    d = int(dim)
    if d < -n or d >= max(n, 1):
        raise ConversionError(f"dim {dim} is out of range for a tensor of rank {n}")
    return d + n if d < 0 else d


def norm_dims(dims: int | Sequence[int] | None, n: int) -> list[int]:
    """Normalized, sorted, de-duplicated dims; ``None`` or ``[]`` means every dim."""
    if dims is None:
        return list(range(n))
    if isinstance(dims, int):
        return [norm_dim(dims, n)]
    dims = list(dims)
    if not dims:
        return list(range(n))
    return sorted({norm_dim(d, n) for d in dims})


# ------------------------------------------------------------------------ shape tensors
def shape_of(ctx: ConversionContext, it: Any) -> Any:
    """The INT64 shape tensor of ``it`` (a 1-D shape tensor)."""
    out = ctx.network.add_shape(it).get_output(0)
    return ctx.cast(out, _int64())


def _int64() -> Any:
    import torch

    return torch.int64


def _const_i64(ctx: ConversionContext, values: Sequence[int]) -> Any:
    return ctx.constant(np.asarray(list(values), dtype=np.int64).reshape(len(values)))


def dims_tensor(ctx: ConversionContext, it: Any, spec: Sequence[DimSpec]) -> Any:
    """A 1-D INT64 shape tensor holding ``spec`` (static sizes, symbolic sizes and copies of ``it``'s dims)."""
    shape = shape_of(ctx, it) if any(isinstance(d, Copy) for d in spec) else None
    return Y.shape_tensor(ctx, [
        ctx.network.add_gather(shape, _const_i64(ctx, [d.index]), 0).get_output(0) if isinstance(d, Copy) else d
        for d in spec
    ])


def reshape_spec(ctx: ConversionContext, it: Any, spec: Sequence[DimSpec]) -> Any:
    """Reshape ``it`` to ``spec``; chooses static dims, 0 placeholders, -1, or a shape tensor."""
    in_shape = tuple(it.shape)
    spec = [_as_copy(ctx, it, d, pos) for pos, d in enumerate(spec)]
    dims: list[int] = []
    unknown = 0
    uses_placeholder = literal_zero = False
    for pos, d in enumerate(spec):
        if isinstance(d, Y.SymSize):
            dims.append(-1)  # NOTE: the only unknown dim: the reshape infers it (the eager reshape was valid)
            unknown += 1
        elif isinstance(d, Copy):
            size = in_shape[d.index]
            if size >= 0:
                dims.append(size)
                literal_zero = literal_zero or size == 0
            elif d.index == pos:
                dims.append(0)  # shuffle's placeholder: copy the input dim at this position
                uses_placeholder = True
            else:
                dims.append(-1)
                unknown += 1
        else:
            size = int(d)
            literal_zero = literal_zero or size == 0
            unknown += size < 0
            dims.append(size)
    if tuple(dims) == in_shape and all(s >= 0 for s in in_shape):
        return it
    layer = ctx.network.add_shuffle(it)
    if unknown > 1 or (uses_placeholder and literal_zero):
        layer.set_input(1, dims_tensor(ctx, it, spec))
    else:
        if literal_zero:
            layer.zero_is_placeholder = False
        layer.reshape_dims = tuple(dims)
    return layer.get_output(0)


def _as_copy(ctx: ConversionContext, it: Any, d: DimSpec, pos: int) -> DimSpec:
    """A dynamic size that is a dim of ``it`` (see ``symbolic.dim_of``) as ``Copy``."""
    j = Y.dim_of(ctx, it, d, pos)
    return d if j is None else Copy(j)


# ---------------------------------------------------------------------------- builders
def reshape(ctx: ConversionContext, it: Any, shape: Sequence[int] | Any) -> Any:
    """``it.reshape(shape)``; ``shape`` is a sequence of ints (one may be -1; dynamic sizes read while
    tracing are taken too) or a shape tensor."""
    if not isinstance(shape, (list, tuple)):
        layer = ctx.network.add_shuffle(it)
        layer.set_input(1, shape)
        return layer.get_output(0)
    if Y.has_sym(shape):
        return reshape_spec(ctx, it, list(shape))
    dims = tuple(int(d) for d in shape)
    if dims == tuple(it.shape) and -1 not in dims:
        return it
    layer = ctx.network.add_shuffle(it)
    if 0 in dims:
        layer.zero_is_placeholder = False
    layer.reshape_dims = dims
    return layer.get_output(0)


def permute(ctx: ConversionContext, it: Any, perm: Sequence[int]) -> Any:
    """``it.permute(perm)`` (negative dims allowed)."""
    n = rank(it)
    p = tuple(norm_dim(d, n) for d in perm)
    if sorted(p) != list(range(n)):
        raise ConversionError(f"permutation {tuple(perm)} is not a permutation of {n} dims")
    if p == tuple(range(n)):
        return it
    layer = ctx.network.add_shuffle(it)
    layer.first_transpose = p
    return layer.get_output(0)


def transpose(ctx: ConversionContext, it: Any, dim0: int, dim1: int) -> Any:
    """``it.transpose(dim0, dim1)``."""
    n = rank(it)
    perm = list(range(n))
    a, b = norm_dim(dim0, n), norm_dim(dim1, n)
    perm[a], perm[b] = perm[b], perm[a]
    return permute(ctx, it, perm)


def unsqueeze(ctx: ConversionContext, it: Any, dim: int | Sequence[int]) -> Any:
    """Insert size-1 dims at ``dim`` (positions in the output, negative allowed)."""
    dims = [dim] if isinstance(dim, int) else list(dim)
    n_out = rank(it) + len(dims)
    new = {norm_dim(d, n_out) for d in dims}
    spec: list[DimSpec] = []
    src = 0
    for pos in range(n_out):
        if pos in new:
            spec.append(1)
        else:
            spec.append(Copy(src))
            src += 1
    return reshape_spec(ctx, it, spec)


def squeeze(ctx: ConversionContext, it: Any, dim: int | Sequence[int] | None = None) -> Any:
    """Remove size-1 dims (all of them, or those of ``dim`` that have size 1, like torch)."""
    shape = tuple(it.shape)
    n = len(shape)
    cand = range(n) if dim is None else norm_dims(dim, n) if n else []
    drop = {d for d in cand if shape[d] == 1}
    if not drop:
        return it
    spec = [Copy(i) for i in range(n) if i not in drop]
    return reshape_spec(ctx, it, spec)


def flatten(ctx: ConversionContext, it: Any, start: int = 0, end: int = -1) -> Any:
    """``torch.flatten(it, start, end)``."""
    shape = tuple(it.shape)
    n = len(shape)
    if n == 0:
        return reshape(ctx, it, (1,))
    s, e = norm_dim(start, n), norm_dim(end, n)
    if s > e:
        raise ConversionError(f"flatten: start_dim {start} comes after end_dim {end}")
    merged = shape[s : e + 1]
    if all(d >= 0 for d in merged):
        mid: DimSpec = int(np.prod(merged, dtype=np.int64))
    else:
        mid = -1
    spec: list[DimSpec] = [Copy(i) for i in range(s)] + [mid] + [Copy(i) for i in range(e + 1, n)]
    if mid == -1 and any(shape[i] < 0 for i in range(n) if i < s or i > e):
        return _flatten_dynamic(ctx, it, s, e)
    return reshape_spec(ctx, it, spec)


def _flatten_dynamic(ctx: ConversionContext, it: Any, s: int, e: int) -> Any:
    n = rank(it)
    shape = shape_of(ctx, it)
    prod = ctx.network.add_reduce(
        ctx.network.add_slice(shape, (s,), (e - s + 1,), (1,)).get_output(0),
        ctx.trt.ReduceOperation.PROD, 1, True,
    ).get_output(0)
    parts: list[Any] = []
    if s > 0:
        parts.append(ctx.network.add_slice(shape, (0,), (s,), (1,)).get_output(0))
    parts.append(prod)
    if e + 1 < n:
        parts.append(ctx.network.add_slice(shape, (e + 1,), (n - e - 1,), (1,)).get_output(0))
    cat = ctx.network.add_concatenation(parts)
    cat.axis = 0
    layer = ctx.network.add_shuffle(it)
    layer.set_input(1, cat.get_output(0))
    return layer.get_output(0)


def slice_(
    ctx: ConversionContext, it: Any, dim: int, start: int | None = None, stop: int | None = None, step: int = 1
) -> Any:
    """``it[..., start:stop:step, ...]`` along ``dim`` (Python slice semantics, step > 0)."""
    shape = tuple(it.shape)
    n = len(shape)
    d = norm_dim(dim, n)
    size = shape[d]
    if size < 0 or Y.has_sym([start, stop]):
        return _slice_dynamic(ctx, it, d, start, stop, step)
    step = 1 if step is None else int(step)
    if step <= 0:
        raise ConversionError(f"slice step must be positive, got {step}")
    b, e, _ = slice(start, stop, step).indices(size)
    length = len(range(b, e, step))
    if b == 0 and length == size and step == 1:
        return it
    starts = [0] * n
    starts[d] = b if length else 0
    out_shape = [0 if s < 0 else s for s in shape]
    out_shape[d] = length
    strides = [1] * n
    strides[d] = step
    layer = ctx.network.add_slice(it, tuple(starts), tuple(out_shape), tuple(strides))
    if any(s < 0 for s in shape):
        full = dims_tensor(ctx, it, [length if i == d else Copy(i) for i in range(n)])
        layer.set_input(2, full)
    return layer.get_output(0)


def _clamp_bound(v: Any, size: Any, default: Any) -> Any:
    """A slice bound in ``[0, size]`` the way Python clamps it (``size`` may be dynamic)."""
    if v is None:
        return default
    if not isinstance(v, Y.SymSize) and v < 0:
        v = size + v
    elif isinstance(v, Y.SymSize) and not v._lo >= 0:
        Y.refuse("slicing", [v], "a bound that may be negative wraps around the dim")
    return Y.sym_max(0, Y.sym_min(v, size))


def _slice_dynamic(ctx: ConversionContext, it: Any, d: int, start: Any, stop: Any, step: Any) -> Any:
    """``slice_`` where the dim or the bounds are dynamic: start and size as shape tensors."""
    if not Y.dynamic(ctx):
        raise ConversionError("slicing a dynamic dim is not supported outside a dynamic-shape conversion")
    step = 1 if step is None else step
    if isinstance(step, Y.SymSize) or int(step) <= 0:
        raise ConversionError(f"slice step must be a static positive int, got {step}")
    sizes = list(Y.network_sizes(ctx, it))
    n = len(sizes)
    b = _clamp_bound(start, sizes[d], 0)
    e = _clamp_bound(stop, sizes[d], sizes[d])
    starts: list[Any] = [0] * n
    starts[d] = b
    sizes[d] = Y.sym_max(0, (e - b + step - 1) // step)
    strides = [1] * n
    strides[d] = int(step)
    layer = ctx.network.add_slice(
        it, tuple(0 if isinstance(v, Y.SymSize) else int(v) for v in starts),
        tuple(1 if isinstance(v, Y.SymSize) else int(v) for v in sizes), tuple(strides),
    )
    if Y.has_sym(starts):
        layer.set_input(1, Y.shape_tensor(ctx, starts))
    if Y.has_sym(sizes):
        layer.set_input(2, Y.shape_tensor(ctx, sizes))
    return layer.get_output(0)


def slice_nd(
    ctx: ConversionContext, it: Any, starts: Sequence[int], sizes: Sequence[int], strides: Sequence[int]
) -> Any:
    """A static N-d slice (all dims given)."""
    return ctx.network.add_slice(it, tuple(starts), tuple(sizes), tuple(strides)).get_output(0)


def concat(ctx: ConversionContext, its: Sequence[Any], dim: int) -> Any:
    """``torch.cat(its, dim)``: inputs must already share dtype and rank."""
    its = list(its)
    if not its:
        raise ConversionError("cat of an empty sequence")
    if len(its) == 1:
        return its[0]
    n = rank(its[0])
    layer = ctx.network.add_concatenation(its)
    layer.axis = norm_dim(dim, n)
    return layer.get_output(0)


def expand(ctx: ConversionContext, it: Any, shape: Sequence[int]) -> Any:
    """Broadcast ``it`` to ``shape`` (size-1 dims repeat; a slice with stride 0). ``shape`` may hold
    dynamic sizes read while tracing (the slice then takes its size from a shape tensor)."""
    if Y.has_sym(shape):
        return _expand_dynamic(ctx, it, list(shape))
    target = tuple(int(s) for s in shape)
    it = _unsqueeze_front(ctx, it, len(target))
    in_shape = tuple(it.shape)
    if in_shape == target:
        return it
    strides = tuple(0 if (i == 1 and t != 1) else 1 for i, t in zip(in_shape, target, strict=True))
    return ctx.network.add_slice(it, (0,) * len(target), target, strides).get_output(0)


def _expand_dynamic(ctx: ConversionContext, it: Any, target: list[Any]) -> Any:
    it = _unsqueeze_front(ctx, it, len(target))
    in_shape = tuple(it.shape)
    spec = [_as_copy(ctx, it, d, pos) for pos, d in enumerate(target)]
    if all((isinstance(d, Copy) and d.index == i) or (not isinstance(d, (Copy, Y.SymSize)) and d == s)
           for i, (d, s) in enumerate(zip(spec, in_shape, strict=True))):
        return it
    strides = tuple(0 if (s == 1 and not (not isinstance(d, Y.SymSize) and d == 1)) else 1
                    for s, d in zip(in_shape, target, strict=True))
    sizes = tuple(1 if isinstance(d, Y.SymSize) else int(d) for d in target)
    layer = ctx.network.add_slice(it, (0,) * len(target), sizes, strides)
    layer.set_input(2, dims_tensor(ctx, it, spec))
    return layer.get_output(0)


def expand_args(ctx: ConversionContext, it: Any, sizes: Sequence[Any], src: Sequence[Any]) -> tuple[Any, list[Any]]:
    """``x.expand(*sizes)`` where ``it`` is ``x``'s network tensor and ``src`` its sizes (dynamic ones
    included): the output and its sizes. -1 keeps a dim. A dynamic dim expanded to a static size ``t``
    is 1 or ``t`` in PyTorch (else it raises): it repeats where it is 1 and is copied where it is ``t``,
    a slice whose stride on that dim is computed at run time, ``(size - 1) // (t - 1)``; a range that
    holds other sizes is refused (the engine would accept calls PyTorch refuses)."""
    lead = len(sizes) - len(src)
    target = [src[i - lead] if (not Y.is_sym(d) and d == -1) else d for i, d in enumerate(sizes)]
    runtime = [i for i in range(lead, len(target)) if Y.is_sym(src[i - lead]) and not Y.is_sym(target[i])]
    if not runtime:
        return expand(ctx, it, target), target
    for i in runtime:
        s, t = src[i - lead], int(target[i])
        lo, hi = Y.bounds(s)
        if not (lo in (1, t) and hi in (1, t) and hi - lo <= 1):
            raise ConverterRefusal(
                f"expand of dim {i - lead} (size {s.describe()}, {Y.range_text(s)}) to {t}: PyTorch accepts only a "
                f"size of 1 or {t} there and raises for the others, which the engine would accept; convert with "
                f"a range of that dim that holds only 1 and {t}"
            )
    it = _unsqueeze_front(ctx, it, len(target))
    in_shape = tuple(it.shape)
    strides = [
        (src[i - lead] - 1) // (int(d) - 1) if i in runtime and int(d) > 1
        else 0 if in_shape[i] == 1 and not (not Y.is_sym(d) and d == 1) else 1
        for i, d in enumerate(target)
    ]
    spec = [_as_copy(ctx, it, d, pos) for pos, d in enumerate(target)]
    n = len(target)
    layer = ctx.network.add_slice(it, (0,) * n, tuple(1 if Y.is_sym(d) else int(d) for d in target), (1,) * n)
    if Y.has_sym(target):
        layer.set_input(2, dims_tensor(ctx, it, spec))
    layer.set_input(3, Y.shape_tensor(ctx, strides))
    return layer.get_output(0), target


def reshaped(total: Any, dims: Sequence[Any]) -> list[Any]:
    """``dims`` (ints, sizes, at most one -1) with the -1 as ``total`` over the others' product."""
    known: Any = 1
    for d in dims:
        if Y.is_sym(d) or d != -1:
            known = known * d
    if not Y.is_sym(known) and known <= 0:
        return list(dims)  # NOTE: the -1 stays unknown (recorded nowhere)
    return [total // known if not Y.is_sym(d) and d == -1 else d for d in dims]


def record_reshape(ctx: ConversionContext, out: Any, x: torch.Tensor, dims: Sequence[Any], traced: Sequence[int]) -> None:
    """Record the sizes of ``out``, a reshape of traced ``x`` to ``dims`` (ints, sizes, one -1: the
    input's numel over the others'), so that its dims keep their expressions and bounds
    (``q.reshape(bsz * heads, ...).size(0)`` is ``bsz * heads``, ``x.view(-1, h)`` is ``b * s``)."""
    if not Y.dynamic(ctx) or not isinstance(x, torch.Tensor) or not ctx.is_traced(x) or ctx.itensor(x) is out:
        return
    total: Any = 1
    for d in Y.sizes_of(ctx, x):
        total = total * d
    ctx.known_sizes(out, reshaped(total, dims), traced)


def record_flatten(ctx: ConversionContext, out: Any, x: torch.Tensor, start: int, end: int, traced: Sequence[int]) -> None:
    """:func:`record_reshape` of ``x.flatten(start, end)``."""
    if Y.dynamic(ctx) and isinstance(x, torch.Tensor) and x.dim() > 0:
        sizes = list(Y.sizes_of(ctx, x))
        s, e = norm_dim(start, x.dim()), norm_dim(end, x.dim())
        record_reshape(ctx, out, x, sizes[:s] + [-1] + sizes[e + 1:], traced)


def _unsqueeze_front(ctx: ConversionContext, it: Any, n: int) -> Any:
    r = rank(it)
    if r >= n:
        return it
    return reshape_spec(ctx, it, [1] * (n - r) + [Copy(i) for i in range(r)])


__all__ = [
    "Copy", "concat", "dims_tensor", "expand", "expand_args", "flatten", "norm_dim", "norm_dims", "permute", "rank", "record_flatten",
    "record_reshape", "reshape", "reshape_spec", "reshaped", "shape_of", "slice_", "slice_nd", "squeeze", "transpose", "unsqueeze",
]
