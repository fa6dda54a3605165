"""Symbolic sizes while tracing a dynamic-shape network (issue 10): the conversion's state.

The sizes themselves, :class:`SymSize` (an ``int`` subclass whose arithmetic is recorded), their
bounds and guards, and the layers that compute them in the network (:func:`shape_tensor`,
``to_itensor``, ``arange``) live beside the other shape builders, in
:mod:`torch2trt_lite.converters.impl.sizes` (read its docstring for the rules: what stays symbolic,
which comparisons are answered, why floats are refused). This module re-exports the user-facing ones
(:class:`SymSize`, :func:`sym_min`, :func:`sym_max`, :func:`is_sym`, :func:`has_sym`).

Here is what one conversion keeps (:class:`SymbolicSizes`, ``ctx.symbolic``; a static conversion
has none and pays nothing): the sizes of each network tensor, duck sizing (dynamic dims traced at the
same size are the same size), data-dependent sizes (:func:`data_dependent`: NonZero and NMS outputs),
sizes read from values (:func:`value_read`, checked by :func:`check_value_reads`) and the values of
tensors filled with one value (``ctx.mark_filled``). Converters reach it through their ``ctx``
(``ctx.data_dependent``, ``ctx.known_sizes``, ``ctx.mark_filled``, ``ctx.filled_value``), never by
importing this module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch.utils._pytree import tree_leaves
from torch.utils.weak import WeakIdKeyDictionary

from torch2trt_lite.converters.impl.active import active, user_location
from torch2trt_lite.converters.impl.sizes import (
    Dim,
    SymSize,
    Value,
    guard_problem,
    has_sym,
    is_sym,
    shape_tensor,
    size_key,
    sym_max,
    sym_min,
)
from torch2trt_lite.errors import ConversionError, DynamicSizeGuardError

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

_INF = math.inf

# Metadata reads of a traced tensor that give sizes (the guard hands them to SymbolicSizes.read).
READS = frozenset({"size", "shape", "__len__", "numel", "nelement"})


# ---------------------------------------------------------------------------- the tracer side
class SymbolicSizes:
    """One conversion's symbolic sizes: makes them (``read``, called by the tracer's guard for a size
    read of a traced tensor) and caches their network tensors. ``ranges`` gives each dynamic network
    input's (min shape, max shape) over every profile, by input name."""

    def __init__(self, ctx: ConversionContext, ranges: Mapping[str, tuple[Sequence[int], Sequence[int]]]) -> None:
        self.ctx = ctx
        self.ranges = ranges
        self._sizes: dict[int, tuple[Any, tuple[Any, ...], bool]] = {}  # id(itensor) -> (itensor, sizes, traced)
        self._shapes: dict[int, tuple[Any, Any]] = {}  # id(itensor) -> (itensor, its shape tensor)
        self.size_tensors: dict[int, tuple[SymSize, Any]] = {}  # id(SymSize) -> (it, its network tensor)
        self._duck: dict[int, tuple[Any, float, float, str]] = {}  # traced size -> (key, lo, hi, label)
        self._dds: dict[int, tuple[Any, float, float, str]] = {}  # the same for data-dependent sizes
        self._values: list[tuple[SymSize, str]] = []  # sizes read from values, with where they were read
        self._used: set[int] = set()  # id() of those the network computes
        self.filled: WeakIdKeyDictionary = WeakIdKeyDictionary()  # traced tensor -> the value it holds
        ctx.symbolic = self

    def install(self, tracer: Any, inputs: Sequence[torch.Tensor] = ()) -> None:
        """Make ``tracer`` see calls whose arguments hold a dynamic size (``torch.zeros(n, 4)``,
        ``torch.arange(n)``) as calls on traced values (their converters build them in the network).
        ``inputs``: the traced network inputs, whose dynamic dims seed duck sizing."""
        for x in inputs:
            self.sizes(x)
        tracer.symbolic = self
        plain: Callable[[Any, Any], bool] = tracer.touches_traced

        def touches_traced(args: Any, kwargs: Any) -> bool:
            return plain(args, kwargs) or has_sym(args) or (bool(kwargs) and has_sym(tuple(kwargs.values())))

        tracer.touches_traced = touches_traced

    def shape_of(self, it: Any) -> Any:
        """The shape tensor of network tensor ``it`` (one IShapeLayer per tensor)."""
        hit = self._shapes.get(id(it))
        if hit is not None and hit[0] is it:
            return hit[1]
        from torch2trt_lite.converters.impl.shape import shape_of

        out = shape_of(self.ctx, it)
        self._shapes[id(it)] = (it, out)
        return out

    def mark_used(self, size: SymSize) -> None:
        """The network computes ``size``, a size read from values (see :func:`check_value_reads`)."""
        self._used.add(id(size))

    def recorded_sizes(self, it: Any) -> tuple[Any, ...] | None:
        """The sizes recorded for network tensor ``it`` (None when none were, or all are static)."""
        hit = self._sizes.get(id(it))
        if hit is None or hit[0] is not it or not hit[1]:
            return None
        return hit[1]

    def sizes(self, x: torch.Tensor) -> tuple[Any, ...] | None:
        """The sizes of traced ``x``: a :class:`SymSize` for each dynamic dim; None when all are static."""
        entry = self.ctx.mapped(x)
        if entry is None:
            return None
        it = entry[0]
        if len(tuple(it.shape)) != x.dim():
            return None
        return self.itensor_sizes(it, tuple(x.shape))

    def itensor_sizes(self, it: Any, traced: Sequence[int] | None = None) -> tuple[Any, ...] | None:
        """The sizes of network tensor ``it`` (``traced``: the traced torch sizes; without them a
        dynamic dim's value is unknown and given as 1)."""
        hit = self._sizes.get(id(it))
        if hit is not None and hit[0] is it and (traced is None or hit[2]):
            return hit[1] or None
        dims = tuple(int(d) for d in it.shape)
        if -1 not in dims:
            self._sizes[id(it)] = (it, (), True)
            return None
        label = str(it.name) if it.is_network_input else "a tensor computed from the inputs"
        rng = self.ranges.get(str(it.name)) if it.is_network_input else None
        out: list[Any] = []
        for i, d in enumerate(dims):
            if d >= 0:
                out.append(d)
                continue
            lo: float = rng[0][i] if rng is not None else 0
            hi: float = rng[1][i] if rng is not None else _INF
            where = f"{label}.size({i})" if it.is_network_input else f"size({i}) of {label}"
            value = int(traced[i]) if traced is not None else 1
            key: Any = ("dim", id(it), i)
            if traced is not None:
                # NOTE: duck sizing (as torch.export / dynamo do): dynamic dims traced at the same size
                # are taken for the same size, with the range of the first network input dim of that size
                duck = self._duck.get(value)
                if duck is None and not it.is_network_input:  # a size derived from a data-dependent one
                    duck = self._dds.get(value)
                if duck is None and it.is_network_input:
                    duck = self._duck[value] = (("input", str(it.name), i), lo, hi, where)
                if duck is not None:
                    key, lo, hi = duck[0], duck[1], duck[2]
                    if not it.is_network_input:
                        where = f"{where} (= {duck[3]})"
            out.append(SymSize(value, Dim(it, i, where, key), lo, hi))
        sizes = tuple(out)
        self._sizes[id(it)] = (it, sizes, traced is not None)
        return sizes

    def arg_sizes(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[Any, ...]]:
        """The sizes of a call's traced tensor arguments that have dynamic dims, read before the call
        is converted (an in-place op maps its argument to the result's network tensor): for
        :meth:`inherit`."""
        out = []
        for a in tree_leaves((args, kwargs)):
            if isinstance(a, torch.Tensor) and self.ctx.is_traced(a):
                sizes = self.sizes(a)
                if sizes is not None:
                    out.append(sizes)
        return out

    def inherit(self, ins: list[tuple[Any, ...]], out: Any) -> None:
        """After a converted call (``ins``: :meth:`arg_sizes`): each dynamic dim of an output whose size
        no converter recorded takes the size of the arguments' dim at the same position from the right
        (broadcasting's alignment), or else from the left, traced at the same value, when that is one
        size; so that elementwise ops and the like keep a size's identity and bounds (``boxes[idx] * 2``
        has ``idx``'s count, at most k). This is duck sizing (see :meth:`itensor_sizes`) among one
        call's tensors."""
        if not ins:
            return
        ctx = self.ctx
        todo = []
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            entry = ctx.mapped(t)
            if entry is None:
                continue
            it = entry[0]
            hit = self._sizes.get(id(it))
            if (hit is not None and hit[0] is it and hit[2]) or -1 not in tuple(it.shape):
                continue
            todo.append((t, it))
        for t, it in todo:
            dims = tuple(int(d) for d in it.shape)
            if len(dims) != t.dim():
                continue
            new: list[Any] = []
            for i, d in enumerate(dims):
                if d >= 0:
                    new.append(d)
                    continue
                v, j = int(t.shape[i]), len(dims) - i
                cands = [s[len(s) - j] for s in ins if len(s) >= j and isinstance(s[len(s) - j], SymSize)
                         and int.__int__(s[len(s) - j]) == v]
                if not cands:  # e.g. boxes[..., 0] or stack(dim=-1): the same position from the left
                    cands = [s[i] for s in ins if len(s) > i and isinstance(s[i], SymSize) and int.__int__(s[i]) == v]
                if len({size_key(c) for c in cands}) != 1:
                    break
                new.append(cands[0])
            else:
                self._sizes[id(it)] = (it, tuple(new), True)

    def read(self, name: str, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The result of a size read ``func(*args, **kwargs)`` (``name`` in :data:`READS`) with the
        dynamic dims symbolic."""
        out = func(*args, **kwargs)
        x = args[0] if args else None
        if not isinstance(x, torch.Tensor) or not self.ctx.is_traced(x):
            return out
        sizes = self.sizes(x)
        if sizes is None:
            return out
        if name == "__len__":
            if isinstance(sizes[0], SymSize):
                message = (
                    f"len() of a tensor whose dim 0 is dynamic ({sizes[0].describe()}) at {user_location(2)}: Python "
                    "turns len()'s result into a plain int, which would bake the traced size "
                    f"{int.__int__(sizes[0])} into the engine; use x.size(0) or x.shape[0], which stay symbolic"
                )
                return guard_problem(active(), "len() of a dynamic dim", message, lambda: out)
            return sizes[0]
        if name in ("numel", "nelement"):
            n: Any = 1
            for s in sizes:
                n = n * s
            return n
        if isinstance(out, int):  # x.size(dim)
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            return sizes[int(dim)] if isinstance(dim, int) else out
        return torch.Size(sizes)


# ------------------------------------------------------------------------- data-dependent sizes
def ensure(ctx: ConversionContext) -> SymbolicSizes:
    """``ctx``'s symbolic sizes, made (and installed on the active tracer) when a static conversion
    meets its first data-dependent size (a NonZero or NMS output): from then on, size reads of tensors
    with ``-1`` dims give :class:`SymSize` like those of a dynamic-shape conversion."""
    state = ctx.symbolic
    if state is None:
        state = SymbolicSizes(ctx, {})
        tracer = active()
        if tracer is not None and tracer.ctx is ctx:
            state.install(tracer)
    return state


def data_dependent(ctx: ConversionContext, it: Any, traced: Sequence[int], what: str, hi: float = _INF) -> tuple[Any, ...]:
    """Register the ``-1`` dims of network tensor ``it`` (the output of a data-dependent layer; ``traced``:
    its traced torch sizes) as data-dependent sizes, in the spirit of ``torch.export``'s unbacked
    symbols: each is a :class:`SymSize` in ``[0, hi]`` named after ``what``. Tensors computed from it
    whose dims were traced at the same size (``boxes[keep]`` beside ``keep``) are taken for the same size
    (duck sizing), unless a dynamic network input dim was traced at that size too (then the input's)."""
    state = ensure(ctx)
    out: list[Any] = []
    for i, d in enumerate(int(v) for v in it.shape):
        if d >= 0:
            out.append(d)
            continue
        value = int(traced[i])
        where = f"the data-dependent size {what}" + (f" (dim {i})" if len(traced) > 1 else "")
        key: Any = ("dds", len(state._dds), id(it), i)
        if value not in state._dds:
            state._dds[value] = (key, 0, hi, where)
        out.append(SymSize(value, Dim(it, i, where, key), 0, hi))
    sizes = tuple(out)
    state._sizes[id(it)] = (it, sizes, True)
    return sizes


def known_sizes(ctx: ConversionContext, it: Any, sizes: Sequence[Any], traced: Sequence[int]) -> None:
    """Record that network tensor ``it`` (a converter's output, traced at shape ``traced``) has
    ``sizes``: expressions of its inputs' sizes (``torch.cat``: the sum along the axis; ``topk``: k), so
    that a later read of its dynamic dims gives them, with their bounds, instead of a fresh size only
    known to be >= 0. Nothing is recorded where an expression's traced value is not the traced size."""
    state = ctx.symbolic
    dims = tuple(int(d) for d in it.shape)
    if state is None or not len(dims) == len(sizes) == len(traced) or not any(isinstance(v, SymSize) for v in sizes):
        return
    out: list[Any] = []
    for v, d, t in zip(sizes, dims, traced, strict=True):
        if d >= 0:
            out.append(d)
        elif isinstance(v, SymSize) and int.__int__(v) == int(t):
            out.append(v)
        else:
            return
    state._sizes[id(it)] = (it, tuple(out), True)


# ------------------------------------------------------------------------------- sizes from values
_INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def value_read(tracer: Any, name: str, out: Any, x: torch.Tensor) -> Any:
    """A size read from the values of traced integer ``x`` (``int(x)``, ``x.item()``, ``x.tolist()``;
    ``out``: the traced result), in the spirit of ``torch.export``'s unbacked symbols: a
    :class:`SymSize` computed by the network, or None where it cannot be one (the caller refuses).

    TensorRT computes sizes from shape tensors only, so the values must come from integer engine
    inputs through shape-capable layers (``int(lengths.max())``): those inputs become *shape inputs*,
    given on the host, whose value ranges the optimization profiles set (``torch2trt_lite.Input(...,
    low=, high=)``). A size computed from a float input is refused when the engine is built
    ("input shape tensors must have type INT32 or INT64").

    Such a size is taken to be >= 0, as ``torch.export`` takes an unbacked ``.item()`` passed to
    ``torch._check_is_size``: used as a slice bound, a negative value at run time gives an empty
    slice, not Python's wrap-around. ``int(t.item())`` cannot stay symbolic (Python's ``int()`` of
    an int subclass is a plain int): the read is then refused at the end of tracing
    (:func:`check_value_reads`), never baked in silently."""
    ctx = tracer.ctx
    if ctx.network is None or x.dtype not in _INT_DTYPES:
        return None
    where = f"the value of a tensor computed from the inputs ({name} at {user_location(3)})"
    it = ctx.itensor(x)
    state = ensure(ctx)
    if name == "tolist":
        if x.dim() != 1 or x.numel() > 64:
            return None
        from torch2trt_lite.converters.impl import shape as S

        values = []
        for i, v in enumerate(out):
            elem = S.slice_(ctx, it, 0, i, i + 1)
            values.append(SymSize(int(v), Value(elem, 0, f"{where}[{i}]", ("value", id(elem))), 0, _INF))
        state._values += [(v, where) for v in values]
        return values
    if x.numel() != 1:
        return None
    size = SymSize(int(out), Value(it, 0, where, ("value", id(it))), 0, _INF)
    state._values.append((size, where))
    return size


def check_value_reads(ctx: ConversionContext) -> None:
    """Refuse the conversion when a size read from values (:func:`value_read`) never reached the
    network: the model turned it into a plain number (``int(n)``, ``float(n)``, a Python
    computation), which would freeze the traced value into the engine."""
    state = ctx.symbolic
    if state is None:
        return
    for size, where in state._values:
        if id(size) not in state._used:
            raise ConversionError(
                f"{where} was read as a Python number (traced as {int.__int__(size)}) but the network never "
                "used it as a size: the model turned it into a plain int or float (e.g. int(t.item())), which "
                "would freeze the traced value into the engine. Use it directly where torch takes a size "
                "(torch.arange(n), x[:, :n], x.view(n, -1)), where it stays symbolic"
            )



__all__ = [
    "READS", "DynamicSizeGuardError", "SymSize", "SymbolicSizes", "check_value_reads", "data_dependent", "ensure",
    "has_sym", "is_sym", "known_sizes", "shape_tensor", "sym_max", "sym_min", "value_read",
]
