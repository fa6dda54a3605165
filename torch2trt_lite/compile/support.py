"""Which nodes of a dynamo graph run in TensorRT: the decision the partitioner asks for.

Dynamo hands the backend a torch-level ``fx.GraphModule`` (torch functions, ``Tensor`` methods,
``operator.*`` on tensors: what the tracer and the converters handle) whose placeholders are the
user's inputs, the sizes of dynamic dims (``SymInt``) and, since modules are inlined, the module's
parameters and buffers. This module:

- :func:`classify` sorts the placeholders: *weights* (a module's ``_parameters``/``_buffers``),
  *scalars* (a module's float attribute that dynamo passes as a 0-d tensor read with ``.item()``,
  e.g. batch norm's ``eps``) and *runtime* inputs. Weights and scalars become constants of the
  engines; the backend checks at every call that they are the same tensors, unchanged
  (``_version``), resp. the same values, so nothing dynamo would see change is frozen.
- :func:`sizes_from_inputs` replaces each ``SymInt`` placeholder by ``x.size(d)`` of an input whose
  dim it is (dynamo guards that they are equal), so the size is symbolic in the network instead
  of a Python number passed between partitions.
- :func:`decide` runs ``check()``'s tracer once over the graph (an ``fx.Interpreter`` under it
  notes which node made the tracer record a problem), then keeps in PyTorch every node that an
  option forces there, that writes in place or shares storage with such a write, with a graph
  input it returns or with another output, and every Python value (a size, a float) that would
  have to cross between TensorRT and PyTorch.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import GraphModule, Interpreter, Node
from torch.utils._pytree import tree_flatten

from torch2trt_lite.converters.impl.active import ACTIVE
from torch2trt_lite.errors import Torch2TRTError
from torch2trt_lite.registry import REGISTRY as _REGISTRY
from torch2trt_lite.registry import load_builtin_converters, owners_of_function
from torch2trt_lite.trace.opaque import op_name as opaque_op_name

CALLS = ("call_function", "call_method", "call_module")
OUTPUT_VIEW = "makes a view of another output (in PyTorch, so that they stay one tensor; no computation)"
_DRY_RUN_FAILURES = (Torch2TRTError, RuntimeError, TypeError, ValueError, NotImplementedError)

# operator.* on tensors: the Tensor method the tracer converts
_OPERATORS = {
    operator.add: "__add__", operator.sub: "__sub__", operator.mul: "__mul__", operator.truediv: "__truediv__",
    operator.floordiv: "__floordiv__", operator.mod: "__mod__", operator.pow: "__pow__",
    operator.matmul: "__matmul__", operator.neg: "__neg__", operator.pos: "__pos__", operator.abs: "__abs__",
    operator.invert: "__invert__", operator.and_: "__and__", operator.or_: "__or__", operator.xor: "__xor__",
    operator.lshift: "__lshift__", operator.rshift: "__rshift__", operator.eq: "__eq__", operator.ne: "__ne__",
    operator.lt: "__lt__", operator.le: "__le__", operator.gt: "__gt__", operator.ge: "__ge__",
    operator.getitem: "__getitem__", operator.setitem: "__setitem__", operator.iadd: "__iadd__",
    operator.isub: "__isub__", operator.imul: "__imul__", operator.itruediv: "__itruediv__",
    operator.ifloordiv: "__ifloordiv__", operator.imod: "__imod__", operator.ipow: "__ipow__",
    operator.iand: "__iand__", operator.ior: "__ior__", operator.ixor: "__ixor__",
    operator.imatmul: "__imatmul__",
}
_INPLACE_DUNDERS = frozenset(
    {"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
     "__iand__", "__ior__", "__ixor__", "__imatmul__", "__ilshift__", "__irshift__"}
)


# Calls that make a tensor from their (constant) arguments alone, always the same one: in an engine
# they are constants (dynamo guards the arguments). Random and uninitialized ones stay in PyTorch.
_CONSTANT_FACTORIES = frozenset({
    torch.tensor, torch.as_tensor, torch.scalar_tensor, torch.zeros, torch.ones, torch.full, torch.arange,
    torch.eye, torch.linspace, torch.logspace, torch.triu_indices, torch.tril_indices,
})


def example(node: Any) -> Any:
    """The fake value dynamo recorded for ``node`` (None where it has none)."""
    return node.meta.get("example_value") if isinstance(node, Node) else None


def tensor_like(value: Any) -> bool:
    """A tensor, or a tuple/list of tensors (a multi-output op): what an engine can take or give."""
    if isinstance(value, torch.Tensor):
        return True
    return isinstance(value, (tuple, list)) and bool(value) and all(isinstance(v, torch.Tensor) for v in value)


def op_name(node: Node, gm: GraphModule | None = None) -> str:
    """The qualified name of a call node's op, as the registry and ``torch_executed_ops`` name it."""
    if node.op == "call_method":
        return f"torch.Tensor.{node.target}"
    if node.op == "call_module" and gm is not None:
        cls = type(gm.get_submodule(str(node.target)))
        return f"{cls.__module__}.{cls.__qualname__}"
    target = node.target
    torch_op = opaque_op_name(target)
    if torch_op is not None:
        return torch_op
    if target in _OPERATORS:
        return f"operator.{getattr(target, '__name__', _OPERATORS[target])}"
    owners = owners_of_function(target)
    if owners:
        return owners[0][2]
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__name__', repr(target))}"


def registered(node: Node, gm: GraphModule) -> bool:
    """Whether a converter is registered for the node's op (under any name it is reachable by)."""
    load_builtin_converters()
    if node.op == "call_method":
        return f"torch.Tensor.{node.target}" in _REGISTRY
    if node.op == "call_module":
        return op_name(node, gm) in _REGISTRY
    if opaque_op_name(node.target) is not None:
        return op_name(node) in _REGISTRY
    if node.target in _OPERATORS:
        return f"torch.Tensor.{_OPERATORS[node.target]}" in _REGISTRY
    return any(q in _REGISTRY for _, _, q in owners_of_function(node.target))


def is_plumbing(node: Node) -> bool:
    """Not an op of its own: an element of a multi-output op's tuple, arithmetic on sizes, or an
    ordering edge (:func:`ordered`)."""
    if node.op == "call_function" and node.target is ordered:
        return True
    if node.op == "call_function" and node.target is operator.getitem:
        return not isinstance(example(node.args[0]), torch.Tensor)
    return not tensor_like(example(node))


def writes_in_place(node: Node) -> bool:
    """An in-place op: ``x.add_(y)``, ``x += y``, ``x[i] = y``, ``torch.relu_(x)``, ``out=``,
    ``F.relu(x, inplace=True)``."""
    if node.op not in CALLS:
        return False
    if "out" in node.kwargs or node.kwargs.get("inplace") is True or _inplace_positional(node):
        return True
    if node.op == "call_method":
        name = str(node.target)
    elif node.op == "call_function":
        target: Any = node.target
        name = str(_OPERATORS.get(target) or getattr(target, "__name__", ""))
    else:
        return False
    return name in _INPLACE_DUNDERS or (name.endswith("_") and not name.endswith("__"))


def _inplace_positional(node: Node) -> bool:
    """``F.relu(x, True)``: a function's ``inplace`` parameter given by position."""
    if node.op != "call_function":
        return False
    try:
        params = list(inspect.signature(node.target).parameters)  # type: ignore[arg-type]
    except (TypeError, ValueError):  # NOTE: builtins without a signature have no inplace parameter
        return False
    return "inplace" in params and len(node.args) > params.index("inplace") and node.args[params.index("inplace")] is True


def public_targets(gm: GraphModule) -> int:
    """Give back the public function where dynamo inlined it into the C function it wraps (the
    converters are registered for the public one, e.g. ``F.pad`` for ``torch._C._nn.pad``), and
    indexing of a tensor as ``x.__getitem__(i)``; returns how many nodes changed."""
    inlined = {torch._C._nn.pad: torch.nn.functional.pad}  # same signature: (input, pad, mode, value)
    done = 0
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target in inlined:
            n.target = inlined[n.target]
            done += 1
        elif n.op == "call_function" and n.target is operator.getitem and isinstance(example(n.args[0]), torch.Tensor):
            # NOTE: indexing as the Tensor method it is: torch's partitioner takes operator.getitem for
            # the element of a tuple and leaves it with its producer (outside every block, for an input)
            n.op, n.target = "call_method", "__getitem__"
            done += 1
    if done:
        gm.recompile()
    return done


def transforms(gm: GraphModule) -> list[str]:
    """The calls of functorch transforms left in the graph once its vmap regions are written out or
    fused (:mod:`.vmap`): ``grad``, ``jvp``, ... nest like vmap, and the backend leaves such a graph
    to PyTorch (running part of a transform would leave functorch's state unbalanced, which
    dynamo's guards check). Higher-order ops (``torch.cond``, ...) are single nodes: PyTorch runs
    each whole, and the rest of the graph converts."""
    found = []
    for n in gm.graph.nodes:
        module = str(getattr(n.target, "__module__", ""))
        if n.op == "call_function" and module.startswith(("torch._C._functorch", "torch._functorch")):
            found.append(op_name(n))
    return found


# ------------------------------------------------------------------------------ placeholders
@dataclass
class Placeholders:
    """The graph's placeholders sorted: positions of weights, scalars and runtime inputs."""

    nodes: list[Node]
    weights: list[int] = field(default_factory=list)
    scalars: list[int] = field(default_factory=list)
    runtime: list[int] = field(default_factory=list)

    @property
    def frozen(self) -> list[int]:
        return sorted(self.weights + self.scalars)


def source_name(node: Node) -> str:
    """Dynamo's name of where a placeholder came from (``L['self']._modules['fc']._parameters['weight']``)."""
    source = getattr(node.meta.get("grapharg"), "source", None)
    if source is None:
        return ""
    name = source.name
    return str(name() if callable(name) else name)


def _attribute(node: Node) -> bool:
    """A placeholder dynamo made from an object's attribute (``L['self']._modules['bn'].eps``)."""
    source = getattr(node.meta.get("grapharg"), "source", None)
    return type(source).__name__ == "AttrSource"


def _keys_written(n: Node) -> set[Any]:
    """The storages an in-place op ``n`` writes: its result's, its ``self``'s or ``out=``'s."""
    target = [n.args[0]] if n.args else []
    keys = {_storage(a) for a in (example(n), *(example(a) for a in tree_flatten((target, n.kwargs.get("out")))[0]))}
    keys.discard(None)
    return keys


def written(gm: GraphModule) -> set[Any]:
    """The storages (of dynamo's fake values) that an op of the graph writes in place."""
    return {key for n in gm.graph.nodes if writes_in_place(n) for key in _keys_written(n)}


def ordered(x: Any, *after: Any) -> Any:
    """``x`` itself. In a graph, ``ordered(x, w)`` hands ``x`` on only once ``w`` ran: the data edge
    that an in-place write does not leave (see :func:`order_writes`). The tracer does not see it
    (a plain Python function), so in a block it converts to nothing."""
    return x


def order_writes(gm: GraphModule) -> int:
    """Give every in-place write the data edges of eager's order: the write takes its target through
    ``ordered(target, *readers before it)``, and a later node reading that memory through an alias
    made before the write takes it through ``ordered(alias, write)``. Without them a write and a read
    of the same memory have no edge (``buf.add_(m); s = buf.sum()`` reads the placeholder ``buf``),
    and torch's partitioner, placing blocks by data dependence alone, could put the read before the
    write. Returns how many edges were added."""
    nodes = list(gm.graph.nodes)
    pos = {n: i for i, n in enumerate(nodes)}
    writes = {w: keys for w in nodes if writes_in_place(w) and (keys := _keys_written(w))}
    if not writes:
        return 0
    key_of = {n: _storage(example(n)) for n in nodes}
    reads = {n: {key_of[a] for a in n.all_input_nodes} for n in nodes if n.op in CALLS}
    added = 0

    def edge(user: Node, arg: Node, after: Sequence[Node]) -> None:
        nonlocal added
        with gm.graph.inserting_before(user):
            o = gm.graph.call_function(ordered, (arg, *after))
        o.meta["example_value"] = example(arg)
        user.replace_input_with(arg, o)
        added += 1

    for w, keys in writes.items():
        target = w.args[0] if w.args and isinstance(w.args[0], Node) else w.kwargs.get("out")
        if not isinstance(target, Node):
            continue
        before = [n for n in nodes[:pos[w]] if n in reads and n is not target and not reads[n].isdisjoint(keys)]
        if before:
            edge(w, target, before)
    latest: dict[Any, Node] = {}
    for n in nodes:
        if n.op in CALLS:
            for a in list(n.all_input_nodes):
                w = latest.get(key_of[a]) if a in pos else None
                if w is not None and pos[a] < pos[w]:
                    edge(n, a, [w])
        for key in writes.get(n, ()):
            latest[key] = n
    if added:
        gm.graph.lint()
        gm.recompile()
    return added


def classify(gm: GraphModule, values: Sequence[Any]) -> Placeholders:
    """Weights and scalars are frozen into engines, except those the graph writes (a buffer the
    forward updates: it stays a runtime input, and its writes run in PyTorch)."""
    nodes = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = Placeholders(nodes)
    writes = written(gm)
    for i, (n, v) in enumerate(zip(nodes, values, strict=True)):
        src = source_name(n)
        if _storage(example(n)) in writes:
            out.runtime.append(i)
        elif isinstance(v, torch.Tensor) and ("._parameters[" in src or "._buffers[" in src):
            out.weights.append(i)
        elif (isinstance(v, torch.Tensor) and v.dim() == 0 and _attribute(n) and n.users and all(u.op == "call_method" and u.target == "item" for u in n.users)):
            out.scalars.append(i)  # a module's float attribute (dynamo does not specialize floats)
        else:
            out.runtime.append(i)
    return out


def sizes_from_inputs(gm: GraphModule, ph: Placeholders) -> int:
    """Replace every use of a ``SymInt`` placeholder by ``x.size(d)`` of a runtime tensor input whose
    dim ``d`` is that symbol; returns how many were replaced."""
    dims: dict[Any, tuple[Node, int]] = {}
    for i in ph.runtime:
        n = ph.nodes[i]
        ev = example(n)
        if isinstance(ev, torch.Tensor):
            for d, s in enumerate(ev.shape):
                if isinstance(s, torch.SymInt):
                    dims.setdefault(s.node.expr, (n, d))
    first = next((n for n in gm.graph.nodes if n.op != "placeholder"), None)
    done = 0
    for i in ph.runtime:
        n = ph.nodes[i]
        ev = example(n)
        if not isinstance(ev, torch.SymInt) or not n.users or ev.node.expr not in dims or first is None:
            continue
        x, d = dims[ev.node.expr]
        with gm.graph.inserting_before(first):
            size = gm.graph.call_method("size", (x, d))
        size.meta["example_value"] = ev
        n.replace_all_uses_with(size)
        done += 1
    if done:
        gm.recompile()
    return done


# ------------------------------------------------------------------------------ the dry run
class _Probe(Interpreter):
    """Runs the graph under ``check()``'s tracer, noting which nodes made it record a problem."""

    def __init__(self, gm: GraphModule, flagged: dict[str, str], atomic: Mapping[str, str]) -> None:
        super().__init__(gm, garbage_collect_values=True)
        self.flagged = flagged
        self.atomic = atomic

    def run_node(self, n: Node) -> Any:
        tracer = ACTIVE.get()
        if n.name in self.atomic and tracer is not None:  # PyTorch runs it whole: not traced, its outputs are
            busy, tracer.busy = tracer.busy, True
            try:
                out = super().run_node(n)
            finally:
                tracer.busy = busy
            tracer.ctx.mark_traced(out)
            self.flagged[n.name] = self.atomic[n.name]
            return out
        before = len(tracer.problems) if tracer is not None else 0
        out = super().run_node(n)
        if tracer is not None and len(tracer.problems) > before:
            self.flagged[n.name] = "; ".join(str(p.reason) for p in tracer.problems[before:])
        return out


class Bound(torch.nn.Module):
    """A graph with its frozen placeholders bound to tensors it holds (so the tracer sees module
    state, i.e. constants), called with the runtime inputs only; ``fill`` gives the other values
    (sizes of dynamic dims: their example values, unused once :func:`sizes_from_inputs` ran)."""

    def __init__(self, gm: torch.nn.Module, count: int, frozen: dict[int, torch.Tensor],
                 fill: dict[int, Any] | None = None, probe: dict[str, str] | None = None,
                 atomic: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.gm = gm
        self.count = count
        self.frozen_at = sorted(frozen)
        for i in self.frozen_at:
            self.register_buffer(f"frozen_{i}", frozen[i], persistent=False)
        self.fill = dict(fill or {})
        self.runtime_at = [i for i in range(count) if i not in frozen and i not in self.fill]
        self.probe = probe
        self.atomic = dict(atomic or {})
        self.eval()

    def forward(self, *xs: Any) -> Any:
        full: list[Any] = [None] * self.count
        for i in self.frozen_at:
            full[i] = getattr(self, f"frozen_{i}")
        for i, v in self.fill.items():
            full[i] = v
        for i, x in zip(self.runtime_at, xs, strict=True):
            full[i] = x
        if self.probe is not None and isinstance(self.gm, GraphModule):
            return _Probe(self.gm, self.probe, self.atomic).run(*full)
        return self.gm(*full)


def dry_run(gm: GraphModule, values: Sequence[Any], ph: Placeholders,
            ranged: Callable[[Node, torch.Tensor], Any] | None = None,
            atomic: Mapping[str, str] | None = None) -> dict[str, str]:
    """node name -> the reason the tracer gives for refusing it, from one ``check()`` run on the
    example values; nothing is built. ``ranged(node, value)`` gives a runtime input's engine input
    (an :class:`~torch2trt_lite.Input` range for a symbolic one): then ``check()`` also finds the
    converters that refuse a dynamic size (where that run itself fails, the sizes are taken at
    their hints and such a refusal shows at the block's conversion). ``atomic``: node name -> why
    PyTorch runs it whole (a higher-order op, a vmap region): run untraced, flagged with that reason."""
    from torch2trt_lite.convert import check  # NOTE: compile sits above convert (docs/architecture.md)

    flagged: dict[str, str] = {}
    frozen = {i: values[i] for i in ph.frozen}
    fill = {i: values[i] for i in ph.runtime if not isinstance(values[i], torch.Tensor)}
    bound = Bound(gm, len(values), frozen, fill, probe=flagged, atomic=atomic)
    # NOTE: copies: the run executes the graph, and dynamo's example inputs are the caller's own tensors
    # (and the module's buffers), which a graph that writes in place would change before its first call
    xs = [values[i].clone() if isinstance(values[i], torch.Tensor) else values[i] for i in bound.runtime_at]
    if not xs:  # nothing traced: every op is a constant of the weights; let the build decide
        return flagged
    specs = [ranged(ph.nodes[i], values[i]) for i in bound.runtime_at] if ranged is not None else xs
    report = None
    if any(s is not x for s, x in zip(specs, xs, strict=True)):
        try:
            report = check(bound, specs)
        except _DRY_RUN_FAILURES:
            flagged.clear()
    if report is None:
        report = check(bound, xs)
    if not report.ok and not flagged:  # a problem outside any node (the output): refuse every op
        return {n.name: str(report.unsupported[0].reason) for n in gm.graph.nodes if n.op in CALLS}
    return flagged


# ------------------------------------------------------------------------------ the decision
def _storage(value: Any) -> int | None:
    """The identity of a fake value's storage (the fake values live in the nodes' meta for the whole
    analysis, so the address is stable); None for a non-tensor or a tensor without storage."""
    if isinstance(value, torch.Tensor):
        try:
            return int(torch.multiprocessing.reductions.StorageWeakRef(value.untyped_storage()).cdata)
        except (RuntimeError, NotImplementedError):  # NOTE: a tensor without storage: no alias
            return None
    return None


@dataclass
class Family:
    """The nodes around one storage the graph writes in place: those making a tensor in it and
    those reading one. ``external``: the storage is a graph input's (a user's tensor or a buffer)."""

    write: str  # the first writing node's op and name, for messages
    members: set[str]
    external: bool


def write_families(gm: GraphModule) -> list[Family]:
    """One :class:`Family` per storage an op of the graph writes in place."""
    groups: dict[Any, list[Node]] = {}
    for n in gm.graph.nodes:
        key = _storage(example(n))
        if key is not None:
            groups.setdefault(key, []).append(n)
    out = []
    for key in written(gm):
        members = groups.get(key, [])
        names = {m.name for m in members if m.op in CALLS}
        for n in gm.graph.nodes:
            if n.op in CALLS and any(_storage(example(a)) == key for a in tree_flatten((n.args, n.kwargs))[0]
                                     if isinstance(a, Node)):
                names.add(n.name)
        first = next((n for n in gm.graph.nodes if n.name in names and writes_in_place(n)), None)
        write = f"{op_name(first, gm)} ({first.name})" if first is not None else "an in-place write"
        out.append(Family(write, names, any(m.op == "placeholder" for m in members)))
    return out


def alias_hazards(gm: GraphModule) -> dict[str, str]:
    """Nodes kept in PyTorch for aliasing: the family of every write into a graph input (its
    writes reach the caller; a block is placed by data dependence alone, so it could read before
    or after the write where eager reads after or before), and every returned view of a graph
    input or of another output (an engine returns a copy). A write into a tensor the graph makes
    converts as ``convert`` converts it, if its whole family lands in one block (:func:`decide`
    and the backend see to that)."""
    hazards: dict[str, str] = {}
    for fam in write_families(gm):
        if fam.external:
            for name in fam.members:
                hazards.setdefault(name, f"writes into or reads a graph input that {fam.write} writes in place")
    groups: dict[Any, list[Node]] = {}
    for n in gm.graph.nodes:
        key = _storage(example(n))
        if key is not None:
            groups.setdefault(key, []).append(n)
    out_nodes = {a for a in tree_flatten(next(n for n in gm.graph.nodes if n.op == "output").args)[0]
                 if isinstance(a, Node)}
    for members in groups.values():
        has_input = any(m.op == "placeholder" for m in members)
        outs = [m for m in members if m in out_nodes]
        calls = [m for m in members if m.op in CALLS]
        if outs and has_input:
            for m in calls:
                hazards.setdefault(m.name, "makes a view of a graph input that the graph returns")
        elif len(outs) > 1:  # NOTE: the first makes the memory (it may run in an engine), the rest view it
            for m in calls[1:]:
                hazards.setdefault(m.name, OUTPUT_VIEW)
    return hazards


def split_values(gm: GraphModule, block_of: dict[str, int], why: dict[str, str]) -> bool:
    """Send to PyTorch every Python value (a size, a number) that a block makes and a node outside
    that block reads, and then every node reading a Python value that PyTorch makes: an engine
    returns tensors, and a number among its outputs would be the value traced (``decide`` keeps
    such values on one side; the partitioner may still cut between two blocks). True if any moved."""
    changed = False
    for n in gm.graph.nodes:
        if n.name in block_of and n.op in CALLS and not tensor_like(example(n)) and any(
                u.op in CALLS and block_of.get(u.name) != block_of[n.name] for u in n.users):
            why[n.name] = "a Python value that a node outside its TensorRT block reads (an engine returns tensors)"
            changed = True
    grew = changed
    while grew:
        grew = False
        for n in gm.graph.nodes:
            if n.op in CALLS and n.name not in why and _reads_python_value(n, why):
                why[n.name] = _READS_PYTHON_VALUE
                grew = True
    return changed


_READS_PYTHON_VALUE = "reads a Python value that a PyTorch op makes"


def _reads_python_value(n: Node, why: dict[str, str]) -> bool:
    """Does ``n`` read a Python value (not a tensor) that a node running in PyTorch makes?"""
    return any(a.op in CALLS and a.name in why and not tensor_like(example(a)) for a in n.all_input_nodes)


def split_families(families: Sequence[Family], block_of: dict[str, int], why: dict[str, str]) -> bool:
    """Send to PyTorch every in-place family not wholly in one TensorRT block (``block_of``: node
    name -> block; nodes in ``why`` run in PyTorch); returns whether any moved."""
    moved = False
    for fam in families:
        blocks = {block_of.get(n, -1) for n in fam.members if n not in why}
        if fam.members - why.keys() and (len(blocks) > 1 or -1 in blocks or fam.members & why.keys()):
            for n in fam.members:
                why.setdefault(n, f"shares memory with the in-place write {fam.write}, which cannot all run in "
                                  "one TensorRT block")
            moved = True
    return moved


def _matches(node: Node, gm: GraphModule, forced: Iterable[Any]) -> bool:
    name = op_name(node, gm)
    for f in forced:
        if isinstance(f, str):
            if f in (name, str(node.target)):
                return True
        elif node.target is f or (node.op == "call_method" and getattr(f, "__name__", None) == node.target):
            return True
        elif node.op == "call_module" and isinstance(f, type) and isinstance(gm.get_submodule(str(node.target)), f):
            return True
    return False


def decide(gm: GraphModule, ph: Placeholders, flagged: dict[str, str], forced: Sequence[Any]) -> dict[str, str]:
    """node name -> why it runs in PyTorch, for every call node that does; the others go to TensorRT."""
    why: dict[str, str] = {}
    calls = [n for n in gm.graph.nodes if n.op in CALLS]
    runtime_sym = {ph.nodes[i] for i in ph.runtime if not isinstance(example(ph.nodes[i]), torch.Tensor)}
    hazards = alias_hazards(gm)
    for n in calls:
        if _matches(n, gm, forced):
            why[n.name] = "forced to PyTorch by torch_executed_ops"
        elif n.name in flagged:
            why[n.name] = flagged[n.name]
        elif n.name in hazards:
            why[n.name] = hazards[n.name]
        elif n.op == "call_module" and not registered(n, gm):
            why[n.name] = "a module call with no converter"
        elif (not any(isinstance(a, Node) for a in tree_flatten((n.args, n.kwargs))[0]) and not registered(n, gm)
              and n.target not in _CONSTANT_FACTORIES):
            why[n.name] = "made without inputs, not deterministic or no converter is registered (kept in PyTorch)"
        elif any(isinstance(a, Node) and a in runtime_sym for a in tree_flatten((n.args, n.kwargs))[0]):
            why[n.name] = "reads a Python number that is an input of the graph"
    families = [f for f in write_families(gm) if not f.external]
    changed = True
    while changed:  # no Python value may cross between TensorRT and PyTorch, no write family be split
        changed = split_families(families, {n.name: 0 for n in calls}, why)
        for n in calls:
            if n.name in why:
                continue
            value = not tensor_like(example(n))
            if value and any(u.op != "output" and u.name in why for u in n.users):
                why[n.name] = "a Python value that a PyTorch op reads"
                changed = True
            elif value and any(u.op == "output" for u in n.users):
                why[n.name] = "a Python value the graph returns"
                changed = True
            elif _reads_python_value(n, why):
                why[n.name] = _READS_PYTHON_VALUE
                changed = True
    return why


__all__ = ["OUTPUT_VIEW", "Bound", "Family", "Placeholders", "alias_hazards", "classify", "decide", "dry_run", "example",
           "is_plumbing", "op_name", "order_writes", "ordered", "public_targets", "registered", "sizes_from_inputs",
           "source_name", "split_families", "split_values", "tensor_like", "transforms", "write_families", "writes_in_place"]
