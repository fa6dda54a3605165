"""Symbolic sizes while tracing a dynamic-shape network (issue 10): the conversion's state.

The sizes themselves, :class:`SymSize` (an ``int`` subclass whose arithmetic is recorded), their
bounds and guards, and the layers that compute them in the network (:func:`shape_tensor`,
``to_itensor``, ``arange``) live beside the other shape builders, in
:mod:`torch2trt_lite.converters.impl.sizes` (read its docstring for the rules: what stays symbolic,
which comparisons are answered, why floats are refused). This module re-exports the user-facing ones
(:class:`SymSize`, :func:`sym_min`, :func:`sym_max`, :func:`is_sym`, :func:`has_sym`).

Here is what one conversion keeps (:class:`SymbolicSizes`, ``ctx.symbolic``; a static conversion
has none and pays nothing): the sizes of each network tensor (a size is never looked up by its traced
value: a dim no converter recorded and no call inherited is a symbol of its own), duck sizing (dynamic
input dims traced at the same size, assumed equal where a decision needs it and then checked on every
engine call: :meth:`SymbolicSizes.duck_sizing`), data-dependent sizes (:func:`data_dependent`: NonZero
and NMS outputs, each a symbol of its own),
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
    bounds,
    guard_problem,
    has_sym,
    is_sym,
    range_text,
    shape_tensor,
    size_key,
    sym_max,
    sym_min,
    symbol,
)
from torch2trt_lite.errors import ConversionError, DynamicSizeGuardError
from torch2trt_lite.trace.values import value_bounds

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
        # duck sizing (see duck_sizing): input dim's key -> its group; each group's record and stand-in
        self._duck: dict[Any, int] = {}
        self._groups: list[dict[str, Any]] = []
        self.equal_dims: list[dict[str, Any]] = []  # the groups a decision assumed equal: engine metadata
        self._fresh = self._fresh_at_call = 0  # data-dependent symbols made (before the call converted now)
        self._shared: dict[Any, tuple[Any, Any]] = {}  # key -> (source, output): see share()
        self._static_checks: set[Any] = set()  # (size, static dim) pairs checked at run time: _check_static
        self._values: list[tuple[SymSize, str]] = []  # sizes read from values, with where they were read
        self._used: set[int] = set()  # id() of those the network computes
        self.filled: WeakIdKeyDictionary = WeakIdKeyDictionary()  # traced tensor -> the value it holds
        ctx.symbolic = self

    def install(self, tracer: Any, inputs: Sequence[torch.Tensor] = ()) -> None:
        """Make ``tracer`` see calls whose arguments hold a dynamic size (``torch.zeros(n, 4)``,
        ``torch.arange(n)``) as calls on traced values (their converters build them in the network).
        ``inputs``: the traced network inputs, whose dynamic dims seed duck sizing."""
        self.duck_sizing(inputs)
        for x in inputs:
            self.sizes(x)
        tracer.symbolic = self
        plain: Callable[[Any, Any], bool] = tracer.touches_traced

        def touches_traced(args: Any, kwargs: Any) -> bool:
            return plain(args, kwargs) or has_sym(args) or (bool(kwargs) and has_sym(tuple(kwargs.values())))

        tracer.touches_traced = touches_traced

    def duck_sizing(self, inputs: Sequence[torch.Tensor]) -> None:
        """Duck sizing, as torch.export and dynamo do, but only where it is needed: the dynamic dims of
        the network inputs traced at the same size form a group that may be *assumed* equal (one size
        in the intersection of their ranges). Each dim keeps its own symbol and range; a comparison the
        ranges do not decide is answered under the assumption when that decides it
        (:meth:`assume`, from ``converters.impl.sizes``: ``if x.size(0) == y.size(0)``,
        ``mask.size(0) < hidden.size(0) * 2``), and an elementwise op of two such dims takes one
        (:meth:`inherit`). A group assumed is recorded in :attr:`equal_dims` (``{"dims": [[input name,
        dim], ...], "min", "max"}``), which goes into the engine's metadata: ``TRTModule`` checks on
        every call that those dims are equal (``runtime/binding.py``), so no engine runs a branch or a
        size decided on an equality that does not hold. Dims never assumed equal stay independent (a
        CNN traced at 64x64 runs at 96x128)."""
        groups: dict[int, list[tuple[Any, str, int, float, float]]] = {}
        for x in inputs:
            entry = self.ctx.mapped(x)
            it = entry[0] if entry is not None else None
            if it is None or not it.is_network_input or len(tuple(it.shape)) != x.dim():
                continue
            name = str(it.name)
            rng = self.ranges.get(name)
            for i, d in enumerate(int(v) for v in it.shape):
                if d < 0 and ("input", name, i) not in self._duck:
                    lo, hi = (float(rng[0][i]), float(rng[1][i])) if rng is not None else (0.0, _INF)
                    groups.setdefault(int(x.shape[i]), []).append((it, name, i, lo, hi))
        for value, dims in groups.items():
            if len(dims) < 2:
                continue
            lo, hi = max(d[3] for d in dims), min(d[4] for d in dims)
            it, name, i = dims[0][0], dims[0][1], dims[0][2]
            label = " = ".join(f"{n}.size({j})" for _, n, j, _, _ in dims)
            stand_in = SymSize(value, Dim(it, i, label, ("duck", len(self._groups))), lo, hi)
            for _, n, j, _, _ in dims:
                self._duck[("input", n, j)] = len(self._groups)
            self._groups.append({"record": {"dims": [[n, j] for _, n, j, _, _ in dims], "min": int(lo),
                                            "max": int(hi) if hi != _INF else int(max(d[4] for d in dims))},
                                 "size": stand_in, "used": False})

    def duck_groups(self, keys: Any) -> dict[Any, Any]:
        """For :meth:`assume`'s callers: each of ``keys`` (symbols) that is an input dim in a duck
        group, mapped to the group's stand-in size (one symbol, the ranges' intersection)."""
        return {k: self._groups[self._duck[k]]["size"] for k in keys if k in self._duck}

    def assume(self, keys: Any) -> None:
        """A decision took the input dims ``keys`` for their duck groups' one size: record those groups
        (checked on every engine call)."""
        for k in keys:
            g = self._groups[self._duck[k]] if k in self._duck else None
            if g is not None and not g["used"]:
                g["used"] = True
                self.equal_dims.append(g["record"])

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
        if traced is not None and any(0 <= d != t for d, t in zip(dims, traced, strict=True)):
            raise ConversionError(  # NOTE: its sizes would be read as the network's, not the traced ones
                f"the network gives {it.name!r} the shape {dims} (-1: dynamic) but PyTorch traced it as {tuple(traced)}: "
                "the backend's shape inference fixed a size that is not fixed (the sim infers shapes from probe "
                "sizes, alike for every input: a difference of two inputs' dims looks constant). Convert with "
                "static shapes for those dims, or compute the size differently"
            )
        if -1 not in dims:
            self._sizes[id(it)] = (it, (), True)
            return None
        label = str(it.name) if it.is_network_input else "a tensor computed from the inputs"
        out: list[Any] = []
        for i, d in enumerate(dims):
            if d >= 0:
                out.append(d)
                continue
            where = f"{label}.size({i})" if it.is_network_input else f"size({i}) of {label}"
            value = int(traced[i]) if traced is not None else 1
            # NOTE: a size is never looked up by its traced value: a dim of a computed tensor no
            # converter recorded (ctx.known_sizes) or inherited (inherit) is a symbol of its own, >= 0
            key: Any = ("dim", id(it), i)
            lo, hi = 0.0, _INF
            if it.is_network_input:  # its own symbol and range (duck sizing assumes equalities lazily)
                rng = self.ranges.get(str(it.name))
                if rng is not None:
                    lo, hi = rng[0][i], rng[1][i]
                key = ("input", str(it.name), i)
            out.append(SymSize(value, Dim(it, i, where, key), lo, hi))
        sizes = tuple(out)
        self._sizes[id(it)] = (it, sizes, traced is not None)
        return sizes

    def arg_sizes(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[Any, ...]]:
        """The sizes of a call's traced tensor arguments that have dynamic dims, read before the call
        is converted (an in-place op maps its argument to the result's network tensor): for
        :meth:`inherit`."""
        self._fresh_at_call = self._fresh
        out = []
        for a in tree_leaves((args, kwargs)):
            if isinstance(a, torch.Tensor) and self.ctx.is_traced(a):
                sizes = self.sizes(a)
                if sizes is not None:
                    out.append(sizes)
        return out

    def inherit(self, ins: list[tuple[Any, ...]], out: Any) -> None:
        """After a converted call (``ins``: :meth:`arg_sizes`): each dynamic dim of an output whose size
        no converter recorded takes the size of the arguments' dims at the same position from the right
        (broadcasting's alignment) and from the left traced at the same value, when those are all one
        size; so that elementwise ops and the like keep a size's identity and bounds (``boxes[idx] * 2``
        has ``idx``'s count, at most k). Ops whose output dims are not their arguments' at those
        positions (reshapes, slices, gathers) record their sizes (``ctx.known_sizes``) instead."""
        if not ins or self._fresh != self._fresh_at_call:
            return  # NOTE: a call that made data-dependent sizes (x[mask], nonzero, unique): its counts are not its arguments' dims
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
                # the same position from the right (broadcasting) and from the left (boxes[..., 0],
                # stack(dim=-1)): inherited only where all those traced at this size are one size
                cands = [s[len(s) - j] for s in ins if len(s) >= j and isinstance(s[len(s) - j], SymSize)
                         and int.__int__(s[len(s) - j]) == v]
                cands += [s[i] for s in ins if len(s) > i and isinstance(s[i], SymSize) and int.__int__(s[i]) == v]
                keys = {size_key(c) for c in cands}
                if len(keys) != 1:
                    # input dims traced alike (x + y of batches traced at 4): one size if assumed equal
                    syms = {symbol(c) for c in cands} - {None}
                    if len(keys) != len(syms) or len({self._duck.get(k) for k in syms} - {None}) != 1 or not all(
                            k in self._duck for k in syms):
                        break
                    self.assume(syms)
                new.append(cands[0])
            else:
                self._sizes[id(it)] = (it, tuple(new), True)

    def share(self, key: Any, source: Any, out: Any) -> None:
        """Remember ``out``, a data-dependent layer's output computed from network tensor ``source``,
        for :meth:`shared` (one NonZero per mask: ``x[keep]`` and ``y[keep]`` have one count)."""
        self._shared[key] = (source, out)

    def shared(self, key: Any, source: Any) -> Any:
        """The output :meth:`share` remembered for ``key`` and ``source`` (None: none). The call using it
        makes data-dependent sizes, as if it made the layer (see :meth:`inherit`)."""
        hit = self._shared.get(key)
        if hit is None or hit[0] is not source:
            return None
        self._fresh += 1
        return hit[1]

    def carry(self, old: Any, new: Any, traced: Sequence[int]) -> None:
        """A traced tensor (of shape ``traced``) was mapped from network tensor ``old`` to ``new`` (a
        write into it: ``x[1:] += 1``, a view write): ``new`` keeps ``old``'s recorded sizes where it
        has none of its own and its shape is the one those sizes were traced at (a write never
        changes a tensor's shape; an in-place op that does, like ``transpose_``, records its own)."""
        hit, mine = self._sizes.get(id(old)), self._sizes.get(id(new))
        if hit is None or hit[0] is not old or not hit[2] or not hit[1] or (mine is not None and mine[0] is new):
            return
        dims = tuple(int(d) for d in new.shape)
        if len(dims) != len(hit[1]) or len(traced) != len(dims) or any(
            int.__int__(s) != t or (d >= 0 and d != t) for s, d, t in zip(hit[1], dims, traced, strict=True)
        ):
            return
        self._sizes[id(new)] = (new, tuple(d if d >= 0 else s for s, d in zip(hit[1], dims, strict=True)), True)

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


def relabel(v: Any, it: Any, index: int, label: str) -> Any:
    """``v`` (a dim's size) as dim ``index`` of network tensor ``it`` named ``label``: the same symbol
    and bounds (for ``check``'s stand-ins of refused calls, which take the inputs' sizes)."""
    key = symbol(v)
    return v if key is None else SymSize(int.__int__(v), Dim(it, index, label, key), *bounds(v))


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
    symbols: each is a :class:`SymSize` in ``[0, hi]`` named after ``what``, a symbol of its own (two
    counts traced at the same value, or a count traced at an input's size, are different sizes).
    Tensors computed from it keep it where their converter records it (``ctx.known_sizes``) or by
    :meth:`SymbolicSizes.inherit`."""
    state = ensure(ctx)
    out: list[Any] = []
    for i, d in enumerate(int(v) for v in it.shape):
        if d >= 0:
            out.append(d)
            continue
        value = int(traced[i])
        state._fresh += 1
        where = f"the data-dependent size {what} #{state._fresh}"  # NOTE: numbered: two counts are two sizes
        key: Any = ("dds", state._fresh, id(it), i)  # NOTE: a symbol of its own, whatever its traced value
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
            if isinstance(v, SymSize) and bounds(v) != (d, d) and int.__int__(v) == d:
                _check_static(ctx, v, d)
        elif isinstance(v, SymSize) and int.__int__(v) == int(t):
            out.append(v)
        else:
            return
    state._sizes[id(it)] = (it, tuple(out), True)


def _check_static(ctx: ConversionContext, v: SymSize, d: int) -> None:
    """The backend's shape inference made a dim static (``d``) whose size ``v`` the model computes and
    whose range says it may differ (the sim infers shapes from probe sizes; TensorRT proves them): the
    sizes read from that dim are ``d``, so the engine checks on every run that ``v`` is ``d`` (an
    output read after each run, as a value check of the model is) rather than compute a wrong shape."""
    state = ensure(ctx)
    key = (size_key(v), d)
    if key in state._static_checks:
        return
    state._static_checks.add(key)
    eq = ctx.network.add_elementwise(shape_tensor(ctx, [v]), shape_tensor(ctx, [d]), ctx.trt.ElementWiseOperation.EQUAL)
    ctx.assertions.append((eq.get_output(0), f"the size {v.describe()} (range {range_text(v)}) is {d} in the network "
                                             "(the backend's shape inference fixed it): a run where it is not would "
                                             "compute a wrong shape"))


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

    Its upper bound is the Input's ``high - 1`` where the value is picked from a shape input
    (:mod:`torch2trt_lite.trace.values`), else unbounded.
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
        lo, hi = value_bounds(ctx, it)
        for i, v in enumerate(out):
            elem = S.slice_(ctx, it, 0, i, i + 1)
            values.append(SymSize(int(v), Value(elem, 0, f"{where}[{i}]", ("value", id(elem))), max(lo, 0), hi))
        state._values += [(v, where) for v in values]
        return values
    if x.numel() != 1:
        return None
    lo, hi = value_bounds(ctx, it)  # NOTE: a shape input's Input range bounds what is read from it
    size = SymSize(int(out), Value(it, 0, where, ("value", id(it))), max(lo, 0), hi)
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
    "has_sym", "is_sym", "known_sizes", "relabel", "shape_tensor", "sym_max", "sym_min", "value_read",
]
