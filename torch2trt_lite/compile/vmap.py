"""``torch.vmap`` in dynamo's graphs, written out as the ops on whole tensors that it stands for.

Dynamo inlines a ``vmap`` into the graph as a *region*: ``_vmap_increment_nesting(size, ...)``,
``_add_batch_dim(x, in_dim, level)`` per mapped input, the body's ops on per-sample (batched)
tensors, ``_remove_batch_dim(y, level, size, out_dim)`` per output, ``_vmap_decrement_nesting()``.
The body's ops see per-sample shapes and functorch's state changes as the graph runs, so neither
the tracer nor an engine can run the region as it is (torch's ``associative_scan``, and so
``transformers``' Mamba, builds on it; so do the masks of some ``transformers`` versions).

:func:`unbatch` rewrites each region whose body it understands into the plain ops vmap's batching
rules amount to, with the mapped dim in front of every batched value:

- ``_add_batch_dim(x, d)`` is ``x.movedim(d, 0)``; ``_remove_batch_dim(y, out_dim)`` is
  ``y.movedim(0, out_dim)`` (an output that does not depend on a mapped input is expanded);
- an elementwise op broadcasts per sample from the right: a batched operand of lower rank than
  the result gets singleton dims after its batch dim, an unbatched operand broadcasts as it is;
- an op with dim arguments (reductions, softmax, transpose, ...) shifts each non-negative dim by
  one (negative dims count from the end, where nothing moved); basic indexing gets a leading ``:``.

Every rewritten value's fake tensor is computed again under dynamo's fake mode, and a region is
rewritten only if each output's shape and dtype come out as dynamo recorded them; any other op on
a batched value, a nested vmap or a batched value used outside its region leaves the region as it
is, and :func:`fuse_left` makes it one submodule call that PyTorch runs whole (the report names the
op); the ops around it still convert.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx import GraphModule, Node
from torch.utils._pytree import tree_flatten, tree_map

from torch2trt_lite.compile.support import example, op_name


def _functorch(node: Node, name: str) -> bool:
    target = node.target
    return (node.op == "call_function" and getattr(target, "__name__", "") == name
            and str(getattr(target, "__module__", "")).startswith(("torch._functorch", "torch._C._functorch")))


def _nesting(node: Node) -> bool:
    """A call that only manages functorch's state: the vmap level's increment or decrement, or vmap's
    loading of its decompositions (nothing to compute on whole tensors)."""
    return any(_functorch(node, f) for f in ("_vmap_increment_nesting", "_vmap_decrement_nesting",
                                             "lazy_load_decompositions"))


_ELEMENTWISE_FUNCTIONS: frozenset[Any] = frozenset({
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod, operator.pow,
    operator.neg, operator.pos, operator.abs, operator.invert, operator.and_, operator.or_, operator.xor,
    operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge,
    torch.add, torch.sub, torch.subtract, torch.mul, torch.multiply, torch.div, torch.divide, torch.true_divide,
    torch.floor_divide, torch.remainder, torch.fmod, torch.pow, torch.maximum, torch.minimum, torch.where,
    torch.relu, torch.selu, torch.erfc, torch.exp, torch.exp2, torch.expm1, torch.log, torch.log1p, torch.log2, torch.log10, torch.sqrt, torch.rsqrt,
    torch.sin, torch.cos, torch.tan, torch.tanh, torch.sigmoid, torch.abs, torch.neg, torch.reciprocal, torch.sign,
    torch.clamp, torch.clip, torch.erf, torch.floor, torch.ceil, torch.round, torch.trunc, torch.square,
    torch.atan2, torch.logical_not, torch.logical_and, torch.logical_or, torch.logical_xor, torch.eq, torch.ne,
    torch.lt, torch.le, torch.gt, torch.ge, torch.isnan, torch.isfinite, torch.lerp, torch.addcmul, torch.addcdiv,
    F.relu, F.relu6, F.silu, F.gelu, F.sigmoid, F.tanh, F.softplus, F.elu, F.leaky_relu, F.hardtanh, F.mish,
    F.hardswish, F.hardsigmoid, F.logsigmoid,
})
_ELEMENTWISE_METHODS = frozenset({
    "add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow", "maximum", "minimum",
    "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid",
    "abs", "neg", "reciprocal", "sign", "clamp", "clip", "erf", "floor", "ceil", "round", "trunc", "square",
    "relu", "logical_not", "logical_and", "logical_or", "isnan", "isfinite", "eq", "ne", "lt", "le", "gt", "ge",
    "float", "double", "half", "bfloat16", "int", "long", "bool", "type_as", "to", "contiguous", "clone",
    "masked_fill", "lerp", "addcmul", "addcdiv",
})
# ops whose dims shift by one: the positions and keywords of their dim arguments
_DIMS = {"dim": (1, "dim"), "dim0": (1, "dim0"), "dim1": (2, "dim1"), "start": (1, "start_dim"),
         "end": (2, "end_dim"), "source": (1, "source"), "destination": (2, "destination"), "dims": (1, "dims")}
_DIM_OPS: dict[str, tuple[str, ...]] = {
    "sum": ("dim",), "mean": ("dim",), "amax": ("dim",), "amin": ("dim",), "prod": ("dim",), "logsumexp": ("dim",),
    "softmax": ("dim",), "log_softmax": ("dim",), "cumsum": ("dim",), "cumprod": ("dim",), "unsqueeze": ("dim",),
    "squeeze": ("dim",), "transpose": ("dim0", "dim1"), "swapaxes": ("dim0", "dim1"), "flatten": ("start", "end"),
    "movedim": ("source", "destination"), "flip": ("dims",), "any": ("dim",), "all": ("dim",),
    "argmax": ("dim",), "argmin": ("dim",),
}
_DIM_FUNCTIONS: dict[Any, str] = {
    torch.sum: "sum", torch.mean: "mean", torch.amax: "amax", torch.amin: "amin", torch.prod: "prod",
    torch.logsumexp: "logsumexp", torch.softmax: "softmax", F.softmax: "softmax", F.log_softmax: "log_softmax",
    torch.log_softmax: "log_softmax", torch.cumsum: "cumsum", torch.cumprod: "cumprod", torch.unsqueeze: "unsqueeze",
    torch.squeeze: "squeeze", torch.transpose: "transpose", torch.swapaxes: "swapaxes", torch.flatten: "flatten",
    torch.movedim: "movedim", torch.flip: "flip", torch.argmax: "argmax", torch.argmin: "argmin",
}
# a reduction over every dim (no dim argument) is not the same op on the batch: refused
_NEEDS_DIM = frozenset({"sum", "mean", "amax", "amin", "prod", "any", "all", "argmax", "argmin", "squeeze",
                        "logsumexp", "softmax", "log_softmax", "cumsum", "cumprod"})

_WHOLE = frozenset({"sum", "mean", "amax", "amin", "any", "all"})  # reductions that take a tuple of dims


@dataclass
class Region:
    """One inlined ``vmap``: its nodes in graph order, from the nesting's increment to its decrement."""

    nodes: list[Node]
    rewritten: bool = False
    reason: str = ""


def regions(gm: GraphModule) -> list[Region]:
    """The graph's vmap regions, outermost only (a nested vmap is part of its outer region)."""
    out: list[Region] = []
    depth, current = 0, []
    for n in gm.graph.nodes:
        if _functorch(n, "_vmap_increment_nesting"):
            lazy = n.prev
            if not depth and _functorch(lazy, "lazy_load_decompositions"):  # vmap's own first call
                current.append(lazy)
            depth += 1
        if depth:
            current.append(n)
        if _functorch(n, "_vmap_decrement_nesting") and depth:
            depth -= 1
            if not depth:
                out.append(Region(current))
                current = []
    return out


def _kind(n: Node) -> str | None:
    """``"elementwise"``, a dim op's name, ``"getitem"``, or None (an op the rewrite does not know)."""
    if n.op == "call_function":
        if n.target in _ELEMENTWISE_FUNCTIONS:
            return None if n.target is torch.where and len(n.args) < 3 else "elementwise"
        if n.target in _DIM_FUNCTIONS:
            return _DIM_FUNCTIONS[n.target]
        if n.target is operator.getitem:
            return "getitem"
    if n.op == "call_method":
        target = str(n.target)
        if target in _ELEMENTWISE_METHODS:
            return "elementwise"
        if target in _DIM_OPS:
            return target
        if target == "__getitem__":
            return "getitem"
    return None


def _basic_index(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or isinstance(i, (int, slice)) for i in items)


class _Refuse(Exception):
    """The region cannot be rewritten (the message says why)."""


_REWRITE_FAILURES = (_Refuse, RuntimeError, TypeError, ValueError, IndexError, NotImplementedError)


class _Rewrite:
    """Rewrites one region in place: :meth:`plan` refuses (:class:`_Refuse`) before any change,
    :meth:`apply` may refuse midway, which is why :func:`unbatch` tries it on a copy first."""

    def __init__(self, gm: GraphModule, region: Region) -> None:
        self.gm, self.region = gm, region
        self.inside = set(region.nodes)
        self.batched: dict[Node, int] = {}  # a batched node -> its per-sample rank
        fakes = [v for n in region.nodes for v in tree_flatten(example(n))[0]
                 if isinstance(v, torch.Tensor)] + [example(a) for n in region.nodes for a in n.all_input_nodes]
        mode = next((getattr(v, "fake_mode", None) for v in fakes if getattr(v, "fake_mode", None) is not None), None)
        if mode is None:
            raise _Refuse("dynamo recorded no fake values for it")
        self.mode = mode
        self._first = next(n for n in region.nodes if _functorch(n, "_vmap_increment_nesting"))
        size = self._first.args[0]
        self.size = example(size) if isinstance(size, Node) else size  # the number of samples
        if not isinstance(self.size, (int, torch.SymInt)):
            raise _Refuse(f"a vmap over {size!r} samples")

    # ---------------------------------------------------------------- the plan (changes nothing)
    def plan(self) -> None:
        for n in self.region.nodes:
            if _nesting(n):
                if _functorch(n, "_vmap_increment_nesting") and n is not self._first:
                    raise _Refuse("a vmap nested in another")
                continue
            if _functorch(n, "_add_batch_dim"):
                x = n.args[0]
                if not isinstance(x, Node) or not isinstance(example(x), torch.Tensor) or x in self.batched:
                    raise _Refuse("a batch dim added to a value that is not a plain tensor")
                self.batched[n] = example(x).dim() - 1
                continue
            if _functorch(n, "_remove_batch_dim"):
                continue
            if n.op not in ("call_function", "call_method"):
                raise _Refuse(f"a {n.op} node ({n.name})")
            ins = [a for a in n.all_input_nodes if a in self.batched]
            if not ins:
                continue  # reads only values from outside the vmap: the same op on whole tensors
            kind = _kind(n)
            value = example(n)
            if kind is None or not isinstance(value, torch.Tensor):
                raise _Refuse(f"{op_name(n, self.gm)} on a batched value")
            if kind == "getitem" and not _basic_index(n.args[1]):
                raise _Refuse(f"{op_name(n, self.gm)} with an advanced index on a batched value")
            if kind not in ("elementwise", "getitem"):
                if n.args[0] not in self.batched or len(ins) > 1:
                    raise _Refuse(f"{op_name(n, self.gm)} with a batched argument other than its input")
                if kind in _NEEDS_DIM and not self._has_dims(n, kind) and not self._whole(n, kind):
                    raise _Refuse(f"{op_name(n, self.gm)} over every dim of a batched value")
            self.batched[n] = value.dim()
        for n in self.batched:
            outside = [u for u in n.users if u not in self.inside]
            if outside:
                raise _Refuse(f"a batched value ({n.name}) used outside the vmap")

    def _whole(self, n: Node, kind: str) -> bool:
        """A reduction of each whole sample (``row.sum()``): the same op over every dim but the batch's."""
        return kind in _WHOLE and len(n.args) == 1 and self.batched.get(n.args[0], 0) >= 1  # type: ignore[arg-type]

    @staticmethod
    def _has_dims(n: Node, kind: str) -> bool:
        for role in _DIM_OPS[kind]:
            pos, key = _DIMS[role]
            if key in n.kwargs or len(n.args) > pos:
                return True
        return False

    # ---------------------------------------------------------------- the rewrite
    def _fake(self, target: Any, op: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        vals = tree_map(lambda a: example(a) if isinstance(a, Node) else a, (tuple(args), dict(kwargs)))
        with self.mode:
            if op == "call_method":
                return getattr(vals[0][0], target)(*vals[0][1:], **vals[1])
            return target(*vals[0], **vals[1])

    def _emit(self, before: Node, op: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> Node:
        kwargs = kwargs or {}
        with self.gm.graph.inserting_before(before):
            node = self.gm.graph.create_node(op, target, args, kwargs)
        node.meta["example_value"] = self._fake(target, op, args, kwargs)
        return node

    def apply(self) -> None:
        """Rewrite the region (after :meth:`plan`); raises :class:`_Refuse` where a value does not
        come out as dynamo recorded it (:func:`unbatch` tries on a copy of the graph first)."""
        done: list[Node] = []
        for n in list(self.region.nodes):
            if _functorch(n, "_add_batch_dim"):
                x, d = n.args[0], int(n.args[1])  # type: ignore[arg-type]
                d = d % example(x).dim()
                if d == 0:  # the node stays until the end so that x's other uses stay unbatched
                    n.meta["example_value"] = example(x)
                    done.append(n)
                    continue
                moved = self._emit(n, "call_function", torch.movedim, (x, d, 0))
                n.replace_all_uses_with(moved)
                self.batched[moved] = self.batched.pop(n)
                done.append(n)
            elif _functorch(n, "_remove_batch_dim"):
                n.replace_all_uses_with(self._removed(n))
                done.append(n)
            elif n in self.batched:
                self._batch_op(n)
            elif _nesting(n):
                done.append(n)
        for n in reversed(done):
            if _functorch(n, "_add_batch_dim"):
                n.replace_all_uses_with(n.args[0])  # type: ignore[arg-type]
            self.gm.graph.erase_node(n)

    def _removed(self, n: Node) -> Node:
        """``_remove_batch_dim(y, level, size, out_dim)`` as ops on the whole tensor."""
        y, size, out_dim = n.args[0], n.args[2], int(n.args[3])  # type: ignore[arg-type]
        assert isinstance(y, Node)
        if y in self.batched:
            out_dim = out_dim % (self.batched[y] + 1)
            out = y if out_dim == 0 else self._emit(n, "call_function", torch.movedim, (y, 0, out_dim))
        else:  # the same for every sample
            rank = example(y).dim()
            out_dim = out_dim % (rank + 1)
            one = self._emit(n, "call_method", "unsqueeze", (y, out_dim))
            out = self._emit(n, "call_method", "expand", (one, *(size if i == out_dim else -1 for i in range(rank + 1))))
        _expect(example(out), example(n), f"its output {n.name}")
        return out

    def _batch_op(self, n: Node) -> None:
        """Rewrite one body op on batched values in place; sets its new fake value."""
        kind = _kind(n)
        if kind == "elementwise":
            rank = self.batched[n]
            args, kwargs = tree_map(lambda a: self._padded(a, rank, n), (n.args, n.kwargs))
            n.args, n.kwargs = args, kwargs
        elif kind == "getitem":
            index = n.args[1]
            items = index if isinstance(index, tuple) else (index,)
            if not items or items[0] is not Ellipsis:
                items = (slice(None), *items)
            n.args = (n.args[0], items, *n.args[2:])
        elif kind in _WHOLE and not self._has_dims(n, kind):
            rank = self.batched[n.args[0]]  # type: ignore[index]
            n.kwargs = {**n.kwargs, "dim": tuple(range(1, rank + 1))}
        elif kind == "flatten" and not self._has_dims(n, kind):  # every dim of the sample: from dim 1 on
            n.kwargs = {**n.kwargs, "start_dim": 1}
        else:
            assert kind is not None
            args, kwargs = list(n.args), dict(n.kwargs)
            for role in _DIM_OPS[kind]:
                pos, key = _DIMS[role]
                if key in kwargs:
                    kwargs[key] = _shift(kwargs[key])
                elif len(args) > pos:
                    args[pos] = _shift(args[pos])
            n.args, n.kwargs = tuple(args), kwargs
        logical = example(n)
        physical = self._fake(n.target, n.op, n.args, dict(n.kwargs))
        _expect(physical, logical, f"{op_name(n, self.gm)} ({n.name})", batched=True)
        if not _dims_equal(physical.shape[:1], [self.size]):
            raise _Refuse(f"{op_name(n, self.gm)} ({n.name}) came out with {physical.shape[0]} samples, not {self.size}")
        n.meta["example_value"] = physical

    def _padded(self, a: Any, rank: int, user: Node) -> Any:
        """A batched operand with singleton dims after its batch dim up to the per-sample ``rank``."""
        if not isinstance(a, Node) or a not in self.batched or self.batched[a] >= rank:
            return a
        pad = self._emit(user, "call_function", operator.getitem,
                         (a, (slice(None), *([None] * (rank - self.batched[a])))))
        self.batched[pad] = rank
        return pad


def _dims_equal(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Equal shapes, symbolic sizes compared by their expressions (no guard is added)."""
    def key(s: Any) -> Any:
        return s.node.expr if isinstance(s, torch.SymInt) else int(s)

    return len(a) == len(b) and all(key(x) == key(y) for x, y in zip(a, b, strict=True))


def _expect(got: Any, want: Any, what: str, batched: bool = False) -> None:
    """The rewritten value's fake against dynamo's (per sample where ``batched``)."""
    if not isinstance(got, torch.Tensor) or not isinstance(want, torch.Tensor):
        raise _Refuse(f"{what} is not a tensor")
    shape = got.shape[1:] if batched else got.shape
    if got.dtype != want.dtype or not _dims_equal(shape, want.shape):
        raise _Refuse(f"{what} came out {got.dtype}{list(got.shape)}, dynamo recorded "
                      f"{want.dtype}{list(want.shape)}{' per sample' if batched else ''}")


def _shift(dim: Any) -> Any:
    """A dim argument of a per-sample op as the dim of the whole tensor (batch dim in front)."""
    if isinstance(dim, (list, tuple)):
        return type(dim)(_shift(d) for d in dim)
    if isinstance(dim, int) and not isinstance(dim, bool):
        return dim + 1 if dim >= 0 else dim
    raise _Refuse(f"a dim argument {dim!r} that is not a number")


def unbatch(gm: GraphModule) -> list[Region]:
    """Rewrite every vmap region of ``gm`` that this module understands (see the module's text);
    returns all regions, each ``rewritten`` or with the ``reason`` it was left as it is. The
    rewrite runs on a copy of the graph first, so a refused region leaves ``gm`` untouched."""
    found = regions(gm)
    if not found:
        return found
    trial = GraphModule(gm, copy.deepcopy(gm.graph))
    by_name = {n.name: n for n in trial.graph.nodes}
    for region in found:
        try:
            step = _Rewrite(trial, Region([by_name[n.name] for n in region.nodes]))
            step.plan()
            step.apply()
        except _REWRITE_FAILURES as e:
            region.reason = str(e) if isinstance(e, _Refuse) else f"{type(e).__name__}: {e}"
    for region in found:
        if not region.reason:
            step = _Rewrite(gm, region)
            step.plan()
            step.apply()
            region.rewritten = True
    if any(r.rewritten for r in found):
        gm.graph.lint()
        gm.recompile()
    return found


def fuse_left(gm: GraphModule, found: Sequence[Region]) -> dict[str, Region]:
    """Each region left as it is becomes one call of a submodule ``vmap_region_<i>`` holding its
    nodes, so that it runs in PyTorch as one piece: torch's partitioner then places the TensorRT
    blocks around it by data dependence, and cannot move a block between a region's nesting
    increment and decrement, or a batch dim out of its region. Returns call node name -> region."""
    from torch.fx.passes.utils.fuser_utils import erase_nodes, fuse_as_graphmodule, insert_subgm

    out: dict[str, Region] = {}
    for i, region in enumerate(r for r in found if not r.rewritten):
        name = f"vmap_region_{i}"
        nodes = list(region.nodes)
        sub, ins, outs = fuse_as_graphmodule(gm, nodes, name)
        insert_subgm(gm, sub, ins, outs, nodes[-1])
        erase_nodes(gm, nodes)
        call = next(n for n in gm.graph.nodes if n.op == "call_module" and n.target == name)
        call.meta["example_value"] = example(outs[0]) if len(outs) == 1 else tuple(example(o) for o in outs)
        out[call.name] = region
    if out:
        gm.graph.lint()
        gm.recompile()
    return out


__all__ = ["Region", "fuse_left", "regions", "unbatch"]
