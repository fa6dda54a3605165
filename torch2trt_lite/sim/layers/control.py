"""Control flow: loops (ILoop and its boundary layers), if-conditionals, and the assertion layer.

How it works:

* ``network.add_loop()`` / ``network.add_if_conditional()`` return an :class:`ILoop` /
  :class:`IIfConditional`; their ``add_*`` methods create boundary layers in the network. Each
  boundary layer remembers its structure (``_sid``), which is serialized into the plan.
* Which layers form a loop body is decided by dataflow, as TensorRT does: every layer that depends
  on an output of the loop's recurrence or iterator layers, up to the loop's own boundary layers
  (its recurrences take the back edge, its loop outputs are the only exits). A conditional's
  branches are the layers depending on its input layers, up to its output layers. Layers that do
  not depend on the loop / branch inputs (constants, loop-invariant computations) run outside.
  A structure whose layers lie in another's body is nested in it.
* Execution: a schedule hook (``register_schedule_hook``) groups each structure into one composite
  step (``_LoopStep`` / ``_IfStep``) that runs its body with torch, and sorts all steps
  topologically (``set_input`` may make the network order differ from the dataflow order).
* Shape inference: a loop output's shape comes from running the loop step on probe tensors. When
  every value the loop reads is known at build time, the loop really runs (its outputs may be
  shape values); otherwise the body runs once on ``meta`` tensors to get the shapes.
"""

from __future__ import annotations

import heapq
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ...errors import EngineFileError, NetworkDefinitionError, RuntimeExecutionError
from .._core import PROBE_SIZES, ILayer, ITensor, RunContext, TensorInfo
from .._enums import DataType, LoopOutput, TripLimit
from .._runtime import LayerStep, register_schedule_hook

_INT_COUNTS = (DataType.INT32, DataType.INT64)


def _is_meta(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "meta"


def _to_meta(t: torch.Tensor) -> torch.Tensor:
    return t if t.device.type == "meta" else torch.empty(t.shape, dtype=t.dtype, device="meta")


def _scalar(t: torch.Tensor) -> Any:
    return t.reshape(()).item()


# =================================================================================== structures
class _Structure:
    """What ILoop and IIfConditional share: a weak link to the network, the boundary layers, a name."""

    _kind = ""

    def __init__(self, network: Any, uid: int) -> None:
        self._network_ref = weakref.ref(network)
        self._sid = (self._kind, uid)
        self._name = ""

    @property
    def _network(self) -> Any:
        net = self._network_ref()
        if net is None:
            what = "loop" if self._kind == "loop" else "conditional"
            raise NetworkDefinitionError(f"the INetworkDefinition of this {what} no longer exists")
        return net

    def _boundary(self) -> list[ILayer]:
        return [layer for layer in self._network._layers if getattr(layer, "_owner", None) is self]

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._name = str(value)


class ILoop(_Structure):
    """A loop of the network: create its boundary layers with the ``add_*`` methods."""

    _kind = "loop"

    def add_recurrence(self, initial_value: ITensor) -> IRecurrenceLayer:
        return _add_boundary(self, "IRecurrenceLayer", [initial_value])  # type: ignore[return-value]

    def add_trip_limit(self, tensor: ITensor, kind: Any) -> ITripLimitLayer:
        kind = TripLimit(int(kind))
        for layer in self._boundary():
            if isinstance(layer, ITripLimitLayer) and layer.kind == kind:
                raise self._network._error(
                    f"loop '{self._name}': add_trip_limit: the loop already has a {kind.name} trip limit "
                    "(a loop has at most one trip limit of each kind)"
                )
        return _add_boundary(self, "ITripLimitLayer", [tensor], kind=kind)  # type: ignore[return-value]

    def add_iterator(self, tensor: ITensor, axis: int = 0, reverse: bool = False) -> IIteratorLayer:
        return _add_boundary(  # type: ignore[return-value]
            self, "IIteratorLayer", [tensor], axis=axis, reverse=reverse
        )

    def add_loop_output(self, tensor: ITensor, kind: Any, axis: int = 0) -> ILoopOutputLayer:
        # NOTE: not inferred eagerly: a CONCATENATE/REVERSE output gets its length with set_input(1)
        # later, and the body may not be complete yet.
        return _add_boundary(  # type: ignore[return-value]
            self, "ILoopOutputLayer", [tensor], eager=False, kind=LoopOutput(int(kind)), axis=axis
        )

    def __repr__(self) -> str:
        return f"<ILoop {self._name!r}>"


class IIfConditional(_Structure):
    """An if-then-else construct: ``set_condition``, then ``add_input`` / ``add_output``."""

    _kind = "cond"

    def _condition_layer(self) -> IConditionLayer | None:
        for layer in self._boundary():
            if isinstance(layer, IConditionLayer):
                return layer
        return None

    def set_condition(self, condition: ITensor) -> IConditionLayer:
        if self._condition_layer() is not None:
            raise self._network._error(
                f"conditional '{self._name}': set_condition was already called (a conditional has exactly "
                "one condition)"
            )
        return _add_boundary(self, "IConditionLayer", [condition])  # type: ignore[return-value]

    def add_input(self, input: ITensor) -> IIfConditionalInputLayer:  # noqa: A002 (TensorRT's name)
        return _add_boundary(self, "IIfConditionalInputLayer", [input])  # type: ignore[return-value]

    def add_output(
        self, true_subgraph_output: ITensor, false_subgraph_output: ITensor
    ) -> IIfConditionalOutputLayer:
        eager = self._condition_layer() is not None
        return _add_boundary(  # type: ignore[return-value]
            self, "IIfConditionalOutputLayer", [true_subgraph_output, false_subgraph_output], eager=eager
        )

    def __repr__(self) -> str:
        return f"<IIfConditional {self._name!r}>"


def _add_boundary(owner: Any, cls_name: str, inputs: Sequence[Any], eager: bool = True, **attrs: Any) -> ILayer:
    net = owner._network
    layer = net._add(cls_name, inputs, eager=False, **attrs)
    layer._owner = owner
    layer._sid = owner._sid
    net._wiring += 1  # the layer joined a structure: cached structure analyses are stale
    if eager:
        try:
            layer._infos()
        except NetworkDefinitionError:
            net._remove_layer(layer)
            raise
    return layer  # type: ignore[no-any-return]


# ============================================================================ boundary layers
class _BoundaryLayer(ILayer):
    """Shared by loop and conditional boundary layers: the owning structure, serialized by id."""

    _owner: Any = None
    _sid: tuple[str, int] = ("", -1)
    _owner_name = ""

    def _extra_state(self) -> dict[str, Any]:
        self._validate_structure()
        owner = self._owner
        return {"sid": [self._sid[0], self._sid[1]], "owner_name": owner.name if owner is not None else ""}

    def _restore_extra(self, state: dict[str, Any]) -> None:
        self._owner = None
        self._sid = (str(state["sid"][0]), int(state["sid"][1]))
        self._owner_name = str(state.get("owner_name", ""))

    def _validate_structure(self) -> None:
        """Build-time checks of the whole structure (run for each boundary layer while serializing)."""
        if self._owner is None:
            return
        _live_scheduler(self._network, self._fail).composite(self._sid)


class ILoopBoundaryLayer(_BoundaryLayer):
    @property
    def loop(self) -> ILoop | None:
        return self._owner  # type: ignore[no-any-return]


class IRecurrenceLayer(ILoopBoundaryLayer):
    """Output = the initial value (input 0) in the first iteration, then input 1 of the previous one."""

    _layer_type = "RECURRENCE"
    _max_inputs = 2

    def _input_infos(self) -> list[TensorInfo | None]:
        # Input 1 is the back edge: the output's dtype and shape are those of the initial value.
        t = self._inputs[0] if self._inputs else None
        return [t._info() if t is not None else None]

    def _out_dtypes(self, in_dtypes: list[Any], outs: list[torch.Tensor]) -> list[Any]:
        return [in_dtypes[0]]

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        return [inputs[0]]


class ITripLimitLayer(ILoopBoundaryLayer):
    """COUNT: a 0-D INT32/INT64 trip count (a shape value). WHILE: a 0-D BOOL, checked per iteration."""

    _layer_type = "TRIP_LIMIT"
    _attrs = {"kind": TripLimit.COUNT}
    _num_outputs = 0

    @property
    def kind(self) -> Any:
        return self._a["kind"]

    @property
    def _shape_inputs(self) -> tuple[int, ...]:  # type: ignore[override]
        return (0,) if self._a["kind"] == TripLimit.COUNT else ()

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        info = infos[0]
        assert info is not None
        if info.rank != 0:
            raise self._fail(f"the trip limit tensor must be 0-D, got shape {info.shape}")
        if self._a["kind"] == TripLimit.COUNT and info.dtype not in _INT_COUNTS:
            raise self._fail(f"a COUNT trip limit must be INT32 or INT64, got {info.dtype.name}")
        if self._a["kind"] == TripLimit.WHILE and info.dtype != DataType.BOOL:
            raise self._fail(f"a WHILE trip limit must be BOOL, got {info.dtype.name}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        return []


class IIteratorLayer(ILoopBoundaryLayer):
    """Output = slice ``i`` of the input along ``axis`` in iteration ``i`` (``M-1-i`` if ``reverse``)."""

    _layer_type = "ITERATOR"
    _attrs = {"axis": 0, "reverse": False}

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        info = infos[0]
        assert info is not None
        axis = self._a["axis"]
        if not 0 <= axis < info.rank:
            raise self._fail(f"axis {axis} is out of range for an input of rank {info.rank}")

    def _out_dtypes(self, in_dtypes: list[Any], outs: list[torch.Tensor]) -> list[Any]:
        return [in_dtypes[0]]

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        return [_first_slice(inputs[0], self._a["axis"])]


def _first_slice(x: torch.Tensor, axis: int) -> torch.Tensor:
    if x.shape[axis] == 0:
        shape = list(x.shape)
        del shape[axis]
        return torch.empty(shape, dtype=x.dtype, device="meta")
    return x.select(axis, 0)


def _same_infos(a: list[TensorInfo], b: list[TensorInfo]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        vx, vy = x.value(), y.value()
        if (vx is None) != (vy is None):
            return False
        if vx is not None and vy is not None and not (vx.shape == vy.shape and torch.equal(vx, vy)):
            return False
    return True


class _RecomputedLayer(ILayer):
    """A layer whose inference depends on more than its inputs (a whole loop, a condition).

    Its infos are recomputed on every request; when they change, downstream caches are invalidated.
    """

    _wiring_seen = -1  # the network's wiring stamp when the cache was computed
    _dds_flag = False  # set by _input_infos: the output's shape depends on values (data-dependent)

    @property
    def _dds(self) -> bool:  # type: ignore[override]
        return self._dds_flag

    def _extra_state(self) -> dict[str, Any]:
        state = super()._extra_state()
        self._infos()
        state["dds"] = self._dds_flag
        return state

    def _restore_extra(self, state: dict[str, Any]) -> None:
        super()._restore_extra(state)
        self._dds_flag = bool(state.get("dds", False))

    def _infos(self) -> list[TensorInfo]:
        net = self._network
        if self._cache is not None and self._wiring_seen == net._wiring:
            return self._cache  # nothing in the network changed since
        new = self._infer()
        if self._cache is None or not _same_infos(new, self._cache):
            if self._cache is not None:
                self._touch()
            self._cache = new
        self._wiring_seen = net._wiring
        return self._cache


class ILoopOutputLayer(_RecomputedLayer, ILoopBoundaryLayer):
    """LAST_VALUE: a recurrence's final value. CONCATENATE / REVERSE: per-iteration values stacked
    along a new axis ``axis`` whose length is input 1 (a 0-D shape value); unused slots are zero."""

    _layer_type = "LOOP_OUTPUT"
    _attrs = {"kind": LoopOutput.LAST_VALUE, "axis": 0}
    _max_inputs = 2
    _shape_inputs = (1,)

    @property
    def kind(self) -> Any:
        return self._a["kind"]

    # -- inference: run the whole loop step on the probes of everything it reads
    def _input_infos(self) -> list[TensorInfo | None]:
        sched = _live_scheduler(self._network, self._fail)
        graph = sched.g
        step = sched.composite(self._sid)
        assert isinstance(step, _LoopStep)
        keys = [k for k in step.ins if k is not None]
        infos = [graph.tensors[k]._info() for k in keys]
        self._probe = (step, keys, id(self._outputs[0]))
        self._dds_flag = False
        if self._a["kind"] != LoopOutput.LAST_VALUE and len(self._inputs) > 1 and self._inputs[1] is not None:
            self._dds_flag = any(_is_meta(p) for p in self._inputs[1]._info().probes)
        return infos  # type: ignore[return-value]

    def _check(self, infos: list[TensorInfo | None]) -> None:
        pass  # the loop step was validated when it was built (see _Scheduler)

    def _out_dtypes(self, in_dtypes: list[Any], outs: list[torch.Tensor]) -> list[Any]:
        t = self._inputs[0]
        assert t is not None
        return [t._info().dtype]

    def _call(self, args: list[Any], rt: RunContext) -> Sequence[torch.Tensor]:
        step, keys, out = self._probe
        env = dict(zip(keys, args, strict=True))
        try:
            step.run(env, rt)
        except RuntimeExecutionError as e:
            raise self._fail(str(e)) from None
        return [env[out]]


# ================================================================ conditional boundary layers
class IIfConditionalBoundaryLayer(_BoundaryLayer):
    @property
    def conditional(self) -> IIfConditional | None:
        return self._owner  # type: ignore[no-any-return]


class IConditionLayer(IIfConditionalBoundaryLayer):
    """The 0-D BOOL condition of an if-conditional (no outputs)."""

    _layer_type = "CONDITION"
    _num_outputs = 0

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        info = infos[0]
        assert info is not None
        if info.rank != 0 or info.dtype != DataType.BOOL:
            raise self._fail(f"the condition must be a 0-D BOOL tensor, got {info.dtype.name} {info.shape}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        return []


class IIfConditionalInputLayer(IIfConditionalBoundaryLayer):
    """An input of the conditional's branches (passes its input through)."""

    _layer_type = "CONDITIONAL_INPUT"

    def _out_dtypes(self, in_dtypes: list[Any], outs: list[torch.Tensor]) -> list[Any]:
        return [in_dtypes[0]]

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        return [inputs[0]]


class IIfConditionalOutputLayer(_RecomputedLayer, IIfConditionalBoundaryLayer):
    """Output = input 0 (true branch) if the condition holds, else input 1 (false branch)."""

    _layer_type = "CONDITIONAL_OUTPUT"
    _trt_label = "Output"  # TensorRT's spelling in default layer names

    def _required_inputs(self) -> int:
        return 2

    def _input_infos(self) -> list[TensorInfo | None]:
        infos = super()._input_infos()
        cond = self._owner._condition_layer() if self._owner is not None else None
        if cond is None or cond._inputs[0] is None:
            raise self._fail("the conditional has no condition: call set_condition before building")
        cinfo = cond._inputs[0]._info()
        t, f = infos[0], infos[1]
        self._dds_flag = bool(
            t is not None and f is not None and t.shape != f.shape and any(_is_meta(p) for p in cinfo.probes)
        )
        return [*infos, cinfo]

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        t, f, c = infos[0], infos[1], infos[2]
        assert t is not None and f is not None and c is not None
        if t.dtype != f.dtype:
            raise self._fail(
                f"the true and false branch outputs must have the same type, got {t.dtype.name} and {f.dtype.name}"
            )
        if t.rank != f.rank and c.value() is None:
            raise self._fail(
                f"the true and false branch outputs must have the same rank, got {t.shape} and {f.shape}"
            )

    def _out_dtypes(self, in_dtypes: list[Any], outs: list[torch.Tensor]) -> list[Any]:
        return [in_dtypes[0]]

    def _call(self, args: list[Any], rt: RunContext) -> Sequence[torch.Tensor]:
        t, f, c = args
        if not _is_meta(c):
            return [t if bool(_scalar(c)) else f]
        if t.shape == f.shape:
            return [_to_meta(t)]
        return [_to_meta(t if rt.probe_index == 0 else f)]


# ================================================================================= assertion
class IAssertionLayer(ILayer):
    """Fails the build (condition known at build time) or the inference if any element is false."""

    _layer_type = "ASSERTION"
    _attrs = {"message": ""}
    _num_outputs = 0

    @property
    def message(self) -> str:
        return str(self._a["message"])

    @message.setter
    def message(self, value: str) -> None:
        self._a["message"] = str(value)

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        info = infos[0]
        assert info is not None
        if info.dtype != DataType.BOOL:
            raise self._fail(f"the assertion condition must be BOOL, got {info.dtype.name}")

    def _extra_state(self) -> dict[str, Any]:
        self._cache = None
        self._infos()  # a condition known at build time is checked now
        return {}

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0]
        if _is_meta(x):
            return []
        if not bool(x.all()):
            msg = f"assertion failed: {self.message}"
            if rt.probe:
                raise self._fail(msg)
            raise RuntimeExecutionError(f"layer '{self.name}': {msg}")
        return []


# ===================================================================================== graphs
class _Graph:
    """Layers with the keys of the tensors they read and write (live network or restored plan)."""

    def __init__(self, layers: Sequence[ILayer], io: Callable[[ILayer], tuple[list[Any], list[Any]]]) -> None:
        self.layers = list(layers)
        self.io = {id(layer): io(layer) for layer in self.layers}
        self.order = {id(layer): k for k, layer in enumerate(self.layers)}
        self.by_id = {id(layer): layer for layer in self.layers}
        self.producer: dict[Any, ILayer] = {}
        self.consumers: dict[Any, list[ILayer]] = {}
        self.tensors: dict[Any, ITensor] = {}
        self.structs: dict[tuple[str, int], list[ILayer]] = {}
        self.names: dict[tuple[str, int], str] = {}
        for layer in self.layers:
            ins, outs = self.io[id(layer)]
            for k in outs:
                self.producer[k] = layer
            for k in ins:
                if k is not None:
                    self.consumers.setdefault(k, []).append(layer)
            sid = getattr(layer, "_sid", None)
            if isinstance(layer, _BoundaryLayer) and sid is not None and sid[1] >= 0:
                self.structs.setdefault(sid, []).append(layer)
                owner = layer._owner
                self.names[sid] = owner.name if owner is not None else layer._owner_name

    @classmethod
    def live(cls, network: Any) -> _Graph:
        g = cls(network._layers, _live_io)
        for layer in g.layers:
            for t in layer._inputs:
                if t is not None:
                    g.tensors[id(t)] = t
            for t in layer._outputs:
                g.tensors[id(t)] = t
        return g

    @classmethod
    def plan(cls, layers: Sequence[ILayer]) -> _Graph:
        return cls(layers, _plan_io)


def _live_io(layer: ILayer) -> tuple[list[Any], list[Any]]:
    return [id(t) if t is not None else None for t in layer._inputs], [id(t) for t in layer._outputs]


def _plan_io(layer: ILayer) -> tuple[list[Any], list[Any]]:
    ins, outs = layer._plan_io  # type: ignore[attr-defined]
    return list(ins), list(outs)


# ================================================================================= scheduling
class _LoopOut:
    __slots__ = ("kind", "src", "length", "out", "axis", "rec")

    def __init__(self, kind: Any, src: Any, length: Any, out: Any, axis: int, rec: int) -> None:
        self.kind, self.src, self.length, self.out, self.axis, self.rec = kind, src, length, out, axis, rec


class _LoopStep:
    """A loop as one schedule step: iterates its body steps with torch."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.recs: list[tuple[Any, Any, Any]] = []  # (output key, initial value key, next value key)
        self.iters: list[tuple[Any, Any, int, bool]] = []  # (output key, input key, axis, reverse)
        self.count: Any = None
        self.cond: Any = None
        self.outputs: list[_LoopOut] = []
        self.body: list[Any] = []
        self.cond_body: list[Any] = []
        self.rest_body: list[Any] = []
        self.ins: list[Any] = []
        self.outs: list[Any] = []
        self.internal: list[Any] = []

    def _error(self, msg: str) -> RuntimeExecutionError:
        return RuntimeExecutionError(f"loop '{self.name}': {msg}")

    def run(self, env: dict[Any, Any], rt: RunContext) -> None:
        try:
            if not (rt.probe and any(_is_meta(env[k]) for k in self.ins)) and self._iterate(env, rt):
                return
            self._shape_pass(env, rt)
        finally:
            for k in self.internal:
                env.pop(k, None)

    def _iterate(self, env: dict[Any, Any], rt: RunContext) -> bool:
        """Run the loop; False if (in a probe) a trip limit turns out unknown."""
        count = None
        if self.count is not None:
            c = env[self.count]
            if _is_meta(c):
                return False
            count = max(int(_scalar(c)), 0)
        its = [(out, env[src], axis, rev) for out, src, axis, rev in self.iters]
        avail = min((x.shape[axis] for _, x, axis, _ in its), default=None)
        if count is not None and avail is not None and count > avail:
            raise self._error(f"the trip count {count} exceeds the {avail} slices an iterator has")
        state = [env[init] for _, init, _ in self.recs]
        collected: list[list[torch.Tensor]] = [[] for _ in self.outputs]
        i = 0
        while count is None or i < count:
            for (out, _, _), value in zip(self.recs, state, strict=True):
                env[out] = value
            if its and avail is not None and i >= avail:
                raise self._error(f"iteration {i} runs past the end of an iterator ({avail} slices)")
            for out, x, axis, rev in its:
                env[out] = x.select(axis, ((count if count is not None else x.shape[axis]) - 1 - i) if rev else i)
            if self.cond is not None:
                for s in self.cond_body:
                    s.run(env, rt)
                c = env[self.cond]
                if _is_meta(c):
                    return False
                if not bool(_scalar(c)):
                    break
                for s in self.rest_body:
                    s.run(env, rt)
            else:
                for s in self.body:
                    s.run(env, rt)
            for j, o in enumerate(self.outputs):
                if o.kind != LoopOutput.LAST_VALUE:
                    collected[j].append(env[o.src])
            state = [env[nxt] for _, _, nxt in self.recs]
            i += 1
        shapes: dict[Any, tuple[torch.Size, torch.dtype]] | None = None
        for j, o in enumerate(self.outputs):
            if o.kind == LoopOutput.LAST_VALUE:
                env[o.out] = state[o.rec]
                continue
            length_t = env[o.length]
            if _is_meta(length_t):
                return False
            length = int(_scalar(length_t))
            if i > length:
                raise self._error(f"ran {i} iterations, more than the concatenation length {length} of a loop output")
            vals = collected[j] if o.kind == LoopOutput.CONCATENATE else collected[j][::-1]
            if vals:
                elem_shape, dtype, device = vals[0].shape, vals[0].dtype, vals[0].device
            else:
                if shapes is None:
                    shapes = self._element_shapes(env, rt)
                elem_shape, dtype = shapes[o.src]
                device = rt.device if not rt.probe else torch.device("cpu")
            stacked = torch.stack(vals, dim=o.axis) if vals else None
            if length > i or stacked is None:
                pad_shape = list(elem_shape)
                pad_shape.insert(o.axis, length - i)
                pad = torch.zeros(pad_shape, dtype=dtype, device=device)
                stacked = pad if stacked is None else torch.cat([stacked, pad], dim=o.axis)
            env[o.out] = stacked
        return True

    def _element_shapes(self, env: dict[Any, Any], rt: RunContext) -> dict[Any, tuple[torch.Size, torch.dtype]]:
        """Shapes of the per-iteration values when the loop ran no iteration (one pass on meta)."""
        probe = RunContext("meta", probe=True)
        sub = dict(env)
        self._body_pass(sub, probe)
        return {o.src: (sub[o.src].shape, sub[o.src].dtype) for o in self.outputs}

    def _body_pass(self, env: dict[Any, Any], rt: RunContext) -> None:
        for out, init, _ in self.recs:
            env[out] = _to_meta(env[init])
        for out, src, axis, _ in self.iters:
            env[out] = _to_meta(_first_slice(env[src], axis))
        for s in self.body:
            s.run(env, rt)

    def _shape_pass(self, env: dict[Any, Any], rt: RunContext) -> None:
        self._body_pass(env, rt)
        for o in self.outputs:
            if o.kind == LoopOutput.LAST_VALUE:
                env[o.out] = _to_meta(env[self.recs[o.rec][1]])
                continue
            length_t = env[o.length]
            length = PROBE_SIZES[rt.probe_index] if _is_meta(length_t) else int(_scalar(length_t))
            v = env[o.src]
            shape = list(v.shape)
            shape.insert(o.axis, length)
            env[o.out] = torch.empty(shape, dtype=v.dtype, device="meta")


class _IfStep:
    """An if-conditional as one schedule step: runs the branch the condition selects."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.cond: Any = None
        self.inputs: list[tuple[Any, Any]] = []  # (input key, output key)
        self.outputs: list[tuple[Any, Any, Any]] = []  # (true key, false key, output key)
        self.true_steps: list[Any] = []
        self.false_steps: list[Any] = []
        self.all_steps: list[Any] = []
        self.ins: list[Any] = []
        self.outs: list[Any] = []
        self.internal: list[Any] = []

    def run(self, env: dict[Any, Any], rt: RunContext) -> None:
        try:
            for src, out in self.inputs:
                env[out] = env[src]
            c = env[self.cond]
            if _is_meta(c):
                for s in self.all_steps:
                    s.run(env, rt)
                for t, f, out in self.outputs:
                    tv, fv = env[t], env[f]
                    env[out] = _to_meta(tv if tv.shape == fv.shape or rt.probe_index == 0 else fv)
                return
            take = bool(_scalar(c))
            for s in self.true_steps if take else self.false_steps:
                s.run(env, rt)
            for t, f, out in self.outputs:
                env[out] = env[t if take else f]
        finally:
            for k in self.internal:
                env.pop(k, None)


class _Scheduler:
    """Finds each structure's members by dataflow and builds (nested) composite steps."""

    def __init__(self, graph: _Graph, fail: Callable[[str], Exception]) -> None:
        self.g = graph
        self.fail = fail
        self.members: dict[tuple[str, int], dict[int, ILayer]] = {}
        self.parent: dict[tuple[str, int], tuple[str, int] | None] = {}
        self._find_members()

    # -- membership
    def _close(self, sid: tuple[str, int], start: dict[int, ILayer], stop: set[int]) -> dict[int, ILayer]:
        members = dict(start)
        todo = [k for layer in members.values() for k in self.g.io[id(layer)][1]]
        while todo:
            key = todo.pop()
            for c in self.g.consumers.get(key, []):
                if id(c) in members or id(c) in stop:
                    continue
                members[id(c)] = c
                todo.extend(self.g.io[id(c)][1])
        return members

    def _seeds(self, sid: tuple[str, int]) -> list[ILayer]:
        bound = self.g.structs[sid]
        if sid[0] == "loop":
            return [b for b in bound if isinstance(b, (IRecurrenceLayer, IIteratorLayer))]
        return [b for b in bound if isinstance(b, IIfConditionalInputLayer)]

    def _find_members(self) -> None:
        g = self.g
        bounds = {sid: {id(b) for b in layers} for sid, layers in g.structs.items()}
        members: dict[tuple[str, int], dict[int, ILayer]] = {}
        for sid, layers in g.structs.items():
            stop = bounds[sid]
            reached = self._close(sid, {id(s): s for s in self._seeds(sid)}, stop)
            reached.update({id(b): b for b in layers})
            members[sid] = reached
        # nesting: S2 lies inside S when S's body reaches S2's layers but S2 does not reach S's boundary
        inside: dict[tuple[str, int], set[tuple[str, int]]] = {sid: set() for sid in members}
        changed = True
        while changed:
            changed = False
            for sid in members:
                for sid2 in members:
                    if sid2 == sid or sid2 in inside[sid]:
                        continue
                    if not members[sid].keys() & members[sid2].keys():
                        continue
                    if members[sid2].keys() & bounds[sid]:
                        if members[sid].keys() & bounds[sid2]:
                            raise self.fail(
                                f"{_label(sid, g.names)} and {_label(sid2, g.names)} overlap without one "
                                "being nested in the other"
                            )
                        continue
                    inside[sid].add(sid2)
                    grown = dict(members[sid])
                    grown.update(members[sid2])
                    members[sid] = self._close(sid, grown, bounds[sid])
                    changed = True
        self.members = members
        for sid2 in members:
            outer = [s for s in members if sid2 in inside[s]]
            self.parent[sid2] = min(outer, key=lambda s: len(members[s])) if outer else None

    # -- steps
    def top_level(self) -> list[Any]:
        return self._level(set(self.g.by_id), None)

    def composite(self, sid: tuple[str, int]) -> Any:
        if sid not in self.members:
            raise self.fail(f"{_label(sid, self.g.names)} has no layers")
        if sid[0] == "loop":
            return self._loop_step(sid)
        return self._if_step(sid)

    def _level(self, ids: set[int], enclosing: tuple[str, int] | None) -> list[Any]:
        g = self.g
        nodes: list[tuple[int, Any]] = []
        covered: set[int] = set()
        for sid, mem in self.members.items():
            if self.parent[sid] == enclosing and mem.keys() <= ids:
                covered |= mem.keys()
                nodes.append((min(g.order[i] for i in mem), self.composite(sid)))
        for i in ids - covered:
            layer = g.by_id[i]
            ins, outs = g.io[i]
            nodes.append((g.order[i], LayerStep(layer, ins, outs)))
        return self._toposort(nodes)

    def _toposort(self, nodes: list[tuple[int, Any]]) -> list[Any]:
        made = {k: n for n, (_, step) in enumerate(nodes) for k in step.outs}
        deps: list[set[int]] = []
        users: list[list[int]] = [[] for _ in nodes]
        for n, (_, step) in enumerate(nodes):
            d = {made[k] for k in step.ins if k is not None and k in made and made[k] != n}
            deps.append(d)
            for m in d:
                users[m].append(n)
        heap = [(nodes[n][0], n) for n in range(len(nodes)) if not deps[n]]
        heapq.heapify(heap)
        out: list[Any] = []
        while heap:
            _, n = heapq.heappop(heap)
            out.append(nodes[n][1])
            for u in users[n]:
                deps[u].discard(n)
                if not deps[u]:
                    heapq.heappush(heap, (nodes[u][0], u))
        if len(out) != len(nodes):
            stuck = [getattr(nodes[n][1], "layer", None) for n in range(len(nodes)) if deps[n]]
            names = [layer.name for layer in stuck if layer is not None][:5]
            raise self.fail(
                f"the network has a cycle that does not pass through a recurrence layer (layers {names})"
            )
        return out

    def _externals(self, mem: dict[int, ILayer], step: Any) -> None:
        made = {k for layer in mem.values() for k in self.g.io[id(layer)][1]}
        read: list[Any] = []
        for layer in sorted(mem.values(), key=lambda x: self.g.order[id(x)]):
            for k in self.g.io[id(layer)][0]:
                if k is not None and k not in made and k not in read:
                    read.append(k)
        step.ins = read
        step.internal = [k for k in made if k not in step.outs]

    def _loop_step(self, sid: tuple[str, int]) -> _LoopStep:
        g, fail = self.g, self.fail
        label = _label(sid, g.names)
        mem = self.members[sid]
        bound = g.structs[sid]
        step = _LoopStep(g.names.get(sid, ""))
        rec_index: dict[Any, int] = {}
        for b in sorted(bound, key=lambda x: g.order[id(x)]):
            ins, outs = g.io[id(b)]
            if isinstance(b, IRecurrenceLayer):
                if len(ins) < 2 or ins[1] is None:
                    raise fail(f"{label}: recurrence '{b.name}' has no next value: call set_input(1, tensor)")
                rec_index[outs[0]] = len(step.recs)
                step.recs.append((outs[0], ins[0], ins[1]))
            elif isinstance(b, IIteratorLayer):
                step.iters.append((outs[0], ins[0], int(b._a["axis"]), bool(b._a["reverse"])))
            elif isinstance(b, ITripLimitLayer):
                if b._a["kind"] == TripLimit.COUNT:
                    step.count = ins[0]
                else:
                    step.cond = ins[0]
        for b in sorted(bound, key=lambda x: g.order[id(x)]):
            if not isinstance(b, ILoopOutputLayer):
                continue
            ins, outs = g.io[id(b)]
            kind = b._a["kind"]
            if kind == LoopOutput.LAST_VALUE:
                if ins[0] not in rec_index:
                    raise fail(
                        f"{label}: LAST_VALUE loop output '{b.name}' must take the output of a recurrence layer "
                        "of the same loop"
                    )
                step.outputs.append(_LoopOut(kind, ins[0], None, outs[0], 0, rec_index[ins[0]]))
            else:
                if len(ins) < 2 or ins[1] is None:
                    raise fail(
                        f"{label}: {kind.name} loop output '{b.name}' needs its length: call set_input(1, tensor) "
                        "with a 0-D shape tensor"
                    )
                step.outputs.append(_LoopOut(kind, ins[0], ins[1], outs[0], int(b._a["axis"]), -1))
        if step.count is None and step.cond is None and not step.iters:
            raise fail(f"{label} has no trip limit: call add_trip_limit (COUNT or WHILE)")
        interior = {i for i in mem if id(g.by_id[i]) not in {id(b) for b in bound}}
        step.body = self._level(interior, sid)
        if step.cond is not None:
            needed = self._needed(step.body, [step.cond])
            step.cond_body = [s for s in step.body if id(s) in needed]
            step.rest_body = [s for s in step.body if id(s) not in needed]
        step.outs = [o.out for o in step.outputs]
        self._externals(mem, step)
        body_made = {k for i in interior for k in g.io[i][1]}
        body_made |= {out for out, _, _ in step.recs} | {out for out, _, _, _ in step.iters}
        if g.tensors:  # live network: dataflow may leave the loop only through loop outputs
            net_outputs = {id(t) for t in _network_outputs(g)}
            leaks = [g.tensors[k].name for k in body_made if k in net_outputs]
            if leaks:
                raise fail(
                    f"{label}: tensors {leaks} are computed inside the loop and marked as network outputs; "
                    "use add_loop_output to take values out of a loop"
                )
        for o in step.outputs:
            if o.kind != LoopOutput.LAST_VALUE and o.length in body_made:
                raise fail(f"{label}: the length of a loop output must be computed before the loop")
        if step.count is not None and step.count in body_made:
            raise fail(f"{label}: the COUNT trip limit must be computed before the loop")
        if g.tensors:
            for _, init, nxt in step.recs:
                first, then = g.tensors[init]._info(), g.tensors[nxt]._info()
                if first.dtype != then.dtype:
                    raise fail(
                        f"{label}: a recurrence's next value is {then.dtype.name}, its initial value "
                        f"{first.dtype.name}; they must be the same"
                    )
                if first.rank != then.rank or any(
                    x != y and x >= 0 and y >= 0 for x, y in zip(first.shape, then.shape, strict=True)
                ):
                    raise fail(
                        f"{label}: a recurrence's next value has shape {then.shape}, its initial value "
                        f"{first.shape}; they must be the same"
                    )
        return step

    def _if_step(self, sid: tuple[str, int]) -> _IfStep:
        g, fail = self.g, self.fail
        label = _label(sid, g.names)
        mem = self.members[sid]
        bound = g.structs[sid]
        step = _IfStep(g.names.get(sid, ""))
        for b in sorted(bound, key=lambda x: g.order[id(x)]):
            ins, outs = g.io[id(b)]
            if isinstance(b, IConditionLayer):
                step.cond = ins[0]
            elif isinstance(b, IIfConditionalInputLayer):
                step.inputs.append((ins[0], outs[0]))
            elif isinstance(b, IIfConditionalOutputLayer):
                step.outputs.append((ins[0], ins[1], outs[0]))
        if step.cond is None:
            raise fail(f"{label} has no condition: call set_condition")
        if not step.outputs:
            raise fail(f"{label} has no output: call add_output")
        interior = {i for i in mem if not isinstance(g.by_id[i], IIfConditionalBoundaryLayer)}
        step.all_steps = self._level(interior, sid)
        for which, pick in ((0, "true_steps"), (1, "false_steps")):
            needed = self._needed(step.all_steps, [o[which] for o in step.outputs])
            setattr(step, pick, [s for s in step.all_steps if id(s) in needed])
        step.outs = [o[2] for o in step.outputs]
        self._externals(mem, step)
        return step

    @staticmethod
    def _needed(steps: list[Any], keys: list[Any]) -> set[int]:
        made = {k: s for s in steps for k in s.outs}
        needed: set[int] = set()
        todo = [made[k] for k in keys if k in made]
        while todo:
            s = todo.pop()
            if id(s) in needed:
                continue
            needed.add(id(s))
            todo.extend(made[k] for k in s.ins if k is not None and k in made)
        return needed


def _live_scheduler(network: Any, fail: Callable[[str], Exception]) -> _Scheduler:
    """The scheduler of the live network (its graph and structure members), cached until the network's
    wiring changes: recomputing it for every loop output's inference is quadratic in the number of loops."""
    cached = getattr(network, "_live_scheduler", None)
    if cached is not None and cached[0] == network._wiring:
        sched: _Scheduler = cached[1]
        sched.fail = fail
        return sched
    wiring = network._wiring
    sched = _Scheduler(_Graph.live(network), fail=fail)
    network._live_scheduler = (wiring, sched)
    return sched


def _label(sid: tuple[str, int], names: dict[tuple[str, int], str]) -> str:
    what = "loop" if sid[0] == "loop" else "conditional"
    name = names.get(sid, "")
    return f"{what} '{name}'" if name else f"{what} #{sid[1]}"


def _network_outputs(g: _Graph) -> list[ITensor]:
    for t in g.tensors.values():
        return list(t._network._outputs)
    return []


def _schedule(layers: list[ILayer]) -> list[Any]:
    """The schedule hook: plan layers -> steps (composite steps for loops and conditionals)."""

    def fail(msg: str) -> Exception:
        return EngineFileError(f"plan is inconsistent: {msg}")

    return _Scheduler(_Graph.plan(layers), fail).top_level()


register_schedule_hook(_schedule)


# ===================================================================================== mixin
class ControlMixin:
    _add: Any
    _layers: list[ILayer]

    def _new_structure_uid(self) -> int:
        uid = int(getattr(self, "_control_uids", 0))
        self._control_uids = uid + 1
        return uid

    def add_loop(self) -> ILoop:
        return self._cls("ILoop")(self, self._new_structure_uid())  # type: ignore[attr-defined, no-any-return]

    def add_if_conditional(self) -> IIfConditional:
        return self._cls("IIfConditional")(self, self._new_structure_uid())  # type: ignore[attr-defined, no-any-return]

    def add_assertion(self, condition: ITensor, message: str) -> IAssertionLayer:
        layer = self._add("IAssertionLayer", [condition], eager=False, message=str(message))
        try:
            layer._check(layer._input_infos())
        except NetworkDefinitionError:
            self._remove_layer(layer)  # type: ignore[attr-defined]
            raise
        return layer  # type: ignore[no-any-return]
