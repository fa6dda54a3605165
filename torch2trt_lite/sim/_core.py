"""Core objects of the sim: Logger, Dims, Weights, ITensor, ILayer and the probe machinery.

How a layer works (read this before adding one):

* A layer class derives from :class:`ILayer`, sets ``_layer_type`` (a ``LayerType`` member name)
  and declares its attributes in ``_attrs`` (name -> default). Each declared attribute becomes a
  property (unless the class defines one itself), is validated on assignment by the type of its
  default (enum, Dims tuple, Weights, float, int, bool), and is serialized into the plan.
* ``_run(inputs, rt)`` computes the outputs from torch tensors. It is used both at run time
  (``rt.probe`` False, real tensors on ``rt.device``) and for shape inference (``rt.probe``
  True: execution tensors are on the ``meta`` device, shape tensors are real CPU tensors).
* ``_check(infos)`` validates inputs like TensorRT does (rank, dtype) and raises with
  ``self._fail(...)``. ``infos`` are :class:`TensorInfo` (dtype, shape with -1 for dynamic dims).
* ``_shape_inputs``: input indices whose *values* the layer reads as shapes (kept real in probes).
* ``_out_dtypes(in_dtypes)``: optional override of output DataTypes (needed when the torch
  carrier dtype differs from the declared type, e.g. INT4/FP4).

Shape inference runs each layer on probe tensors: dynamic input dims take three different probe
sizes (``PROBE_SIZES``; the third is soft: a layer that fails at it just drops it), and an output dim
that differs between the probes is reported as -1. When no input value
is known (all meta), the result is memoized per network by the layer's class, settings and input
dtypes/shapes/strides, so ``_run`` in probe mode must depend on nothing else (else set
``_memo_probe = False``).
"""

from __future__ import annotations

import itertools
import math
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from ..errors import NetworkDefinitionError
from . import _dtypes
from ._enums import DataType, LayerType, Severity, TensorLocation, _TrtEnum

if TYPE_CHECKING:
    from ._network import INetworkDefinition

# NOTE: the first two probes are strict (a layer that fails at them fails to be defined): distinct after a
# stride-32 backbone (1 and 2) and within small position tables (64). The third is soft (_SOFT_PROBES):
# distinct from both after a stride-64 level (1, 1, 2: an FPN's extra pooled level), and a layer that
# fails at it (a 64-entry position table sliced to 88) only loses it: the tensors computed from that
# layer are probed at the first two sizes, as before. The fourth, also soft, is small: a clamp of a
# dynamic size to a constant (``x[:4]``, ``diag``: min(n, k)) is the same at every large probe, and
# TensorRT calls it dynamic (-1), so a small probe tells it apart: 1, so that ``x[:2]`` (min(n, 2), 1 at
# n = 1) is dynamic too (at a probe of 2 it was 2 at every probe, declared static, and sizes read from it
# baked 2 where n was 1).
PROBE_SIZES = (24, 56, 88, 1)
# Stand-in counts of data-dependent sizes (NonZero, NMS) while probing: small and odd, unlike the input
# probes, so that a later ``min(n, k)`` (``keep[:100]``) or ``max`` with a static k stays -1. The last two
# (soft at build time) are 0 and 1: at run time, where the input sizes are known, ``min(count, n)`` with
# a small n is the same at 3 and 61 but not at 0 (TensorRT calls it data-dependent: -1).
DDS_PROBE_SIZES = (3, 61, 0, 1)


_DDS_ORDINALS = itertools.count()


def dds_probe(rt: RunContext, layer: Any = None) -> int:
    """The stand-in count of a data-dependent size at probe ``rt.probe_index``: at the second probe,
    a different one per input of ``layer`` (layers of one input, e.g. two NonZero of one mask, count
    alike), so that sizes computed from two counts (``a.size(0) - b.size(0)``) stay dynamic, as
    TensorRT keeps them (-1), instead of folding to a constant."""
    base = DDS_PROBE_SIZES[min(rt.probe_index, len(DDS_PROBE_SIZES) - 1)]
    if rt.probe_index != 1 or layer is None:  # NOTE: the others stay small (0 and 1: min(count, n) varies)
        return base
    io = layer.__dict__.get("_plan_io")
    if io is not None and io[0] and io[0][0] is not None:  # a restored engine's layer: one probe run, in order
        ordinals = rt.cache.setdefault("dds_ordinals", {})
        k = ordinals.setdefault(io[0][0], len(ordinals))
    else:  # numbered per network, in the order met: the same probes however many networks came before
        source = layer._inputs[0] if layer._inputs and layer._inputs[0] is not None else layer
        k = source.__dict__.get("_dds_ordinal")
        if k is None:
            net = layer._network_ref()
            ordinals = net.__dict__.setdefault("_dds_ordinals", itertools.count()) if net is not None else _DDS_ORDINALS
            k = source._dds_ordinal = next(ordinals)
    return base + 2 * (k % 512)
_STRICT_PROBES = 2
_REAL_PROBE_LIMIT = 4096  # real probe values larger than this are demoted to meta tensors


# ----------------------------------------------------------------------------------- Logger
class ILogger:
    Severity = Severity
    INTERNAL_ERROR = Severity.INTERNAL_ERROR
    ERROR = Severity.ERROR
    WARNING = Severity.WARNING
    INFO = Severity.INFO
    VERBOSE = Severity.VERBOSE

    def __init__(self) -> None:
        pass

    def log(self, severity: Any, msg: str) -> None:
        raise NotImplementedError


class Logger(ILogger):
    def __init__(self, min_severity: Any = Severity.WARNING) -> None:
        super().__init__()
        self.min_severity = min_severity
        self._messages: list[tuple[Any, str]] = []

    def log(self, severity: Any, msg: str) -> None:
        self._messages.append((severity, msg))
        if int(severity) <= int(self.min_severity):
            import sys

            print(f"[sim] [{Severity(int(severity)).name[0]}] {msg}", file=sys.stderr)


def _log(logger: Any, severity: Any, msg: str) -> None:
    if logger is not None:
        logger.log(severity, msg)


# ------------------------------------------------------------------------------------- Dims
class Dims(tuple):  # type: ignore[type-arg]
    """TensorRT's Dims: an immutable sequence of ints (the sim also accepts any int sequence)."""

    MAX_DIMS = 8

    def __new__(cls, shape: Iterable[int] = ()) -> Dims:
        vals = tuple(int(d) for d in shape)
        if len(vals) > cls.MAX_DIMS:
            raise NetworkDefinitionError(f"Dims has {len(vals)} dimensions; TensorRT allows at most 8")
        return super().__new__(cls, vals)

    def __repr__(self) -> str:
        return "(" + ", ".join(str(d) for d in self) + ")"

    __str__ = __repr__


class Permutation:
    """TensorRT's Permutation: ``order`` of up to 8 dimensions (``Permutation([1, 0])``); unset
    entries are zero, as in TensorRT's ``int32_t order[MAX_DIMS]``."""

    def __init__(self, *args: Iterable[int]) -> None:  # Permutation() or Permutation(order), positional
        if len(args) > 1:
            raise TypeError(f"Permutation takes one sequence of ints, got {len(args)} arguments")
        vals = [int(d) for d in (args[0] if args else ())]
        if len(vals) > Dims.MAX_DIMS:
            raise NetworkDefinitionError(f"Permutation has {len(vals)} entries; TensorRT allows at most 8")
        self._order = vals + [0] * (Dims.MAX_DIMS - len(vals))

    def __getitem__(self, index: int) -> int:
        return self._order[self._index(index)]

    def __setitem__(self, index: int, value: int) -> None:
        self._order[self._index(index)] = int(value)

    def __len__(self) -> int:
        return Dims.MAX_DIMS

    def __iter__(self) -> Iterator[int]:
        return iter(self._order)

    def _index(self, index: int) -> int:
        if not isinstance(index, int) or not 0 <= index < Dims.MAX_DIMS:
            raise IndexError(f"Permutation index {index!r} out of range [0, {Dims.MAX_DIMS})")
        return index

    def __repr__(self) -> str:
        return "(" + ", ".join(str(d) for d in self._order) + ")"

    __str__ = __repr__


class Dims2(Dims):
    def __new__(cls, *args: Any) -> Dims2:
        return super().__new__(cls, args[0] if len(args) == 1 else args)  # type: ignore[return-value]


class Dims3(Dims2):
    pass


class Dims4(Dims2):
    pass


class DimsHW(Dims2):
    @property
    def h(self) -> int:
        return int(self[0])

    @property
    def w(self) -> int:
        return int(self[1])


def as_dims(value: Any, what: str = "dims") -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)):
        return (int(value),)
    try:
        return tuple(int(v) for v in value)
    except TypeError:
        raise NetworkDefinitionError(f"{what}: expected a sequence of ints, got {value!r}") from None


# ---------------------------------------------------------------------------------- Weights
class Weights:
    """Constant data for a layer: wraps a numpy array (the sim also accepts a torch tensor)."""

    _name: str | None = None  # set by INetworkDefinition.set_weights_name (refit)

    def __init__(self, a: Any = None, *args: Any) -> None:
        if args:
            raise NetworkDefinitionError("sim Weights cannot be built from a raw pointer; pass an array")
        if a is None or isinstance(a, _TrtEnum):
            dt = DataType.FLOAT if a is None else DataType(int(a))
            self._t = torch.empty(0, dtype=_dtypes.torch_dtype(dt))
            self._dtype = dt
            return
        if isinstance(a, Weights):
            self._t, self._dtype = a._t, a._dtype
            return
        if isinstance(a, torch.Tensor):
            t = a.detach().to("cpu").contiguous()
        else:
            arr = np.ascontiguousarray(a)
            if arr.dtype == np.float64:
                arr = arr.astype(np.float32)
            t = torch.from_numpy(arr) if arr.dtype != np.bool_ else torch.from_numpy(arr.copy())
        if t.dtype == torch.float64:
            t = t.float()
        self._t = t
        self._dtype = _dtypes.from_torch(t.dtype)

    def numpy(self) -> np.ndarray:
        if self._t.dtype == torch.bfloat16:
            return self._t.float().numpy()
        return self._t.numpy()

    def __len__(self) -> int:
        return int(self._t.numel())

    @property
    def dtype(self) -> Any:
        return self._dtype

    @property
    def size(self) -> int:
        return int(self._t.numel())

    @property
    def nbytes(self) -> int:
        return int(self._t.numel() * self._t.element_size())

    def _tensor(self) -> torch.Tensor:
        return self._t

    def _shape(self) -> tuple[int, ...]:
        return tuple(self._t.shape)


class DeferredWeights(Weights):
    """Weights computed when first needed (sim only, not part of TensorRT's API).

    ``fill(out)`` writes the values into ``out``, a contiguous tensor of ``shape`` and ``dtype``. A
    plan build calls it on the plan buffer itself, so weights derived from others (BN folded into a
    convolution) never exist as a separate copy; anything else that reads the values (running the
    network before a build, ``numpy()``) computes them once.
    """

    def __init__(self, shape: Sequence[int], dtype: torch.dtype, fill: Callable[[torch.Tensor], None]) -> None:
        self._dims = tuple(int(d) for d in shape)
        self._torch_dtype = dtype
        self._fill = fill
        self._dtype = _dtypes.from_torch(dtype)
        self._cached: torch.Tensor | None = None

    @property
    def _t(self) -> torch.Tensor:  # type: ignore[override]
        if self._cached is None:
            t = torch.empty(self._dims, dtype=self._torch_dtype)
            self._fill(t)
            self._cached = t
        return self._cached

    def _shape(self) -> tuple[int, ...]:
        return self._dims

    def __len__(self) -> int:
        return math.prod(self._dims)

    @property
    def size(self) -> int:
        return math.prod(self._dims)

    @property
    def nbytes(self) -> int:
        return math.prod(self._dims) * torch.empty((), dtype=self._torch_dtype).element_size()


def as_weights(value: Any) -> Weights | None:
    if value is None:
        return None
    if isinstance(value, Weights):
        return value
    return Weights(value)


# ------------------------------------------------------------------------------- Probe info
class TensorInfo:
    """What shape inference knows of a tensor: dtype, shape (-1 = dynamic) and probe values."""

    __slots__ = ("dtype", "shape", "probes", "_dims")

    def __init__(self, dtype: DataType, shape: tuple[int, ...], probes: tuple[Any, ...]):
        self.dtype = dtype
        self.shape = shape
        self.probes = probes  # (A,) when static, (A, B) when something upstream is dynamic
        self._dims: Dims | None = None

    @property
    def dims(self) -> Dims:
        """``shape`` as Dims (made once: Dims are immutable)."""
        d = self._dims
        if d is None:
            d = self._dims = Dims(self.shape)
        return d

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def dynamic(self) -> bool:
        return len(self.probes) > 1

    def value(self) -> torch.Tensor | None:
        """The build-time value when it is known and the same for every probe."""
        vals = []
        for p in self.probes:
            if not isinstance(p, torch.Tensor) or p.device.type == "meta":
                return None
            vals.append(p)
        if any(not (v.shape == vals[0].shape and torch.equal(v, vals[0])) for v in vals[1:]):
            return None
        return vals[0]


class RunContext:
    """Handed to ``ILayer._run``: the device, the probe flag and a per-engine weight cache."""

    def __init__(self, device: torch.device | str, probe: bool = False) -> None:
        self.device = torch.device(device)
        self.probe = probe
        self.probe_index = 0
        self.cache: dict[Any, Any] = {}
        self.inputs: dict[str, torch.Tensor] = {}

    def weight(self, layer: ILayer, attr: str, dtype: torch.dtype | None = None) -> torch.Tensor | None:
        """A layer's Weights attribute as a torch tensor on the run device (cached)."""
        key = (id(layer), attr, dtype)
        hit = self.cache.get(key)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        w = layer._a.get(attr)
        if w is None or len(w) == 0:
            return None
        t = w._tensor()
        if dtype is not None:
            t = t.to(dtype)
        t = t.to(self.device)
        self.cache[key] = t
        return t


# ---------------------------------------------------------------------------------- ITensor
class ITensor:
    """A tensor of the network. Its shape and dtype come from shape inference of its producer."""

    def __init__(self, network: INetworkDefinition, name: str, producer: ILayer | None, index: int = 0):
        self._network_ref = weakref.ref(network)
        self._name = name
        self._producer = producer
        self._index = index
        self._input_info: TensorInfo | None = None  # set for network inputs
        self._location = TensorLocation.DEVICE
        self._dim_names: dict[int, str] = {}
        self._consumers: list[ILayer] = []
        self._dynamic_range: tuple[float, float] | None = None
        self._allowed_formats = 1
        self._broadcast_across_batch = False
        self._is_shape_input = False

    # -- internal
    @property
    def _network(self) -> INetworkDefinition:
        net = self._network_ref()
        if net is None:
            raise NetworkDefinitionError("the INetworkDefinition of this tensor no longer exists")
        return net

    def _info(self) -> TensorInfo:
        if self._producer is None:
            assert self._input_info is not None
            return self._input_info
        return self._producer._infos()[self._index]

    # -- TensorRT API
    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._network._rename_tensor(self, str(value))

    @property
    def shape(self) -> Dims:
        return self._info().dims

    @shape.setter
    def shape(self, value: Any) -> None:
        if self._producer is not None:
            raise NetworkDefinitionError(f"tensor '{self._name}': only network inputs can be reshaped")
        self._network._set_input_shape(self, as_dims(value, "shape"))

    @property
    def dtype(self) -> Any:
        return self._info().dtype

    @dtype.setter
    def dtype(self, value: Any) -> None:
        if self._producer is not None:
            # NOTE: on a layer output TensorRT takes the type as that output's type (what
            # ILayer.set_output_type does); a strongly typed network only accepts the inferred type.
            dt = DataType(int(value))
            if self._network._strongly_typed:
                if dt != self._info().dtype:
                    raise NetworkDefinitionError(
                        f"tensor '{self._name}': a strongly typed network infers type "
                        f"{self._info().dtype.name}; it cannot be set to {dt.name} (use add_cast)"
                    )
                return
            self._producer._output_types[self._index] = dt
            self._producer._touch()
            return
        self._network._set_input_dtype(self, DataType(int(value)))

    @property
    def location(self) -> Any:
        return self._location

    @location.setter
    def location(self, value: Any) -> None:
        self._location = TensorLocation(int(value))

    @property
    def broadcast_across_batch(self) -> bool:
        return self._broadcast_across_batch

    @broadcast_across_batch.setter
    def broadcast_across_batch(self, value: bool) -> None:
        self._broadcast_across_batch = bool(value)

    @property
    def allowed_formats(self) -> int:
        return self._allowed_formats

    @allowed_formats.setter
    def allowed_formats(self, value: int) -> None:
        self._allowed_formats = int(value)

    @property
    def is_network_input(self) -> bool:
        return self._producer is None and self in self._network._inputs

    @property
    def is_network_output(self) -> bool:
        return self in self._network._outputs

    @property
    def is_shape_tensor(self) -> bool:
        """TensorRT's rule: a tensor whose values a layer reads as a shape, or from which such a tensor
        is computed (through any layer but IShapeLayer, which reads only its input's dims), is a shape
        tensor; a network input that is one is a shape input (its values are given on the host, and
        each optimization profile sets their range)."""
        if self._is_shape_input:
            return True
        seen: set[int] = set()
        todo: list[ITensor] = [self]
        while todo:
            t = todo.pop()
            for c in t._consumers:
                for i, u in enumerate(c._inputs):
                    if u is not t:
                        continue
                    if i in c._shape_inputs:
                        return True
                    if c._layer_type != "SHAPE" and id(c) not in seen:
                        seen.add(id(c))
                        todo.extend(o for o in c._outputs if o is not None)
        return False

    @property
    def is_execution_tensor(self) -> bool:
        if self.is_network_output:
            return True
        if not self._consumers:
            return not self.is_shape_tensor
        return any(
            i not in c._shape_inputs for c in self._consumers for i, t in enumerate(c._inputs) if t is self
        )

    def set_dimension_name(self, index: int, name: str) -> None:
        self._dim_names[int(index)] = str(name)

    def get_dimension_name(self, index: int) -> str | None:
        return self._dim_names.get(int(index))

    def set_dynamic_range(self, min: float, max: float) -> bool:  # noqa: A002 (TensorRT's names)
        self._dynamic_range = (float(min), float(max))
        return True

    def reset_dynamic_range(self) -> None:
        self._dynamic_range = None

    @property
    def dynamic_range(self) -> tuple[float, float] | None:
        return self._dynamic_range

    @dynamic_range.setter
    def dynamic_range(self, value: Any) -> None:
        vals = list(value)
        if len(vals) != 2:
            raise ValueError("Dynamic range must contain exactly 2 elements")
        self.set_dynamic_range(vals[0], vals[1])

    def __repr__(self) -> str:
        return f"<ITensor {self._name!r}>"


# ----------------------------------------------------------------------------------- ILayer
def _coerce(name: str, default: Any, value: Any, owner: str) -> Any:
    if isinstance(default, _TrtEnum):
        enum_cls = type(default)
        if isinstance(value, _TrtEnum) and type(value) is not enum_cls:
            raise NetworkDefinitionError(
                f"{owner}.{name}: expected a {enum_cls.__qualname__} member, got {value!r}"
            )
        try:
            return enum_cls(int(value))
        except (TypeError, ValueError):
            raise NetworkDefinitionError(f"{owner}.{name}: invalid value {value!r}") from None
    if isinstance(default, tuple):
        return as_dims(value, f"{owner}.{name}")
    if isinstance(default, Weights) or name in ("kernel", "bias", "shift", "scale", "power", "weights"):
        return as_weights(value) if value is not None else None
    if isinstance(default, bool):
        return bool(value)
    if isinstance(default, float):
        return float(value)
    if isinstance(default, int):
        if isinstance(value, float) and not value.is_integer():
            raise NetworkDefinitionError(f"{owner}.{name}: expected an int, got {value!r}")
        return int(value)
    return value


class FlagSet:
    """A set of flag bits (``IBuilderConfig``, ``ISerializationConfig``): ``get_flag`` and the ``flags``
    property; ``set_flag``/``clear_flag`` differ in what they return, so each class has its own."""

    _flags: int

    def get_flag(self, flag: Any) -> bool:
        return bool(self._flags & (1 << int(flag)))

    @property
    def flags(self) -> int:
        return self._flags

    @flags.setter
    def flags(self, value: int) -> None:
        self._flags = int(value)


def field_property(field: str) -> property:
    """A settable API member stored as the instance attribute ``field`` (``error_recorder`` and the like)."""

    def fget(self: Any) -> Any:
        return getattr(self, field)

    def fset(self: Any, value: Any) -> None:
        setattr(self, field, value)

    return property(fget, fset)


def _attr_property(name: str) -> property:
    def fget(self: ILayer) -> Any:
        return self._a[name]

    def fset(self: ILayer, value: Any) -> None:
        self._set_attr(name, value)

    return property(fget, fset)


_ALL_ATTRS: dict[type, dict[str, Any]] = {}  # class -> merged ``_attrs`` of its MRO

# Shape inference memo (one per network, INetworkDefinition._probe_memo): layers of one class with the
# same settings on inputs of the same dtypes, shapes and strides, where no value is read (meta probes),
# give the same output shapes, strides and dtypes, so the probe runs once per distinct configuration
# (transformer blocks repeat a dozen times; the meta kernels of some ops are slow). ``_check`` still
# runs for every layer. Not memoized: layers reading shape values, data-dependent output sizes,
# settings that cannot be keyed (see _key_of), classes with extra state or their own _call (plugins,
# control flow, casts with dynamic ranges) and classes that set ``_memo_probe = False``.
_MEMOIZABLE: dict[type, bool] = {}
_NO_KEY = object()
_PLAIN_TYPES = (type(None), bool, int, float, str)


def _is_meta(p: Any) -> bool:
    return isinstance(p, torch.Tensor) and p.device.type == "meta"


def _key_of(v: Any) -> Any:
    """A hashable key of a layer setting: plain values, enum members, tuples and lists of them, and
    Weights by dtype and shape (their values never change an output's shape); else _NO_KEY."""
    t = type(v)
    if t in _PLAIN_TYPES:
        return (t, v)
    if isinstance(v, _TrtEnum):
        return (t, int(v))
    if isinstance(v, (tuple, list)):
        if all(type(x) is int for x in v):  # Dims and the like (the common case)
            return (t, tuple(v))
        items = tuple(_key_of(x) for x in v)
        return _NO_KEY if any(x is _NO_KEY for x in items) else (t, items)
    if isinstance(v, Weights):
        return (Weights, v._dtype, v._shape())
    return _NO_KEY


class ILayer:
    _layer_type: ClassVar[str] = ""
    _attrs: ClassVar[dict[str, Any]] = {}
    _shape_inputs: ClassVar[tuple[int, ...]] = ()
    _num_outputs: ClassVar[int] = 1
    _max_inputs: ClassVar[int | None] = None  # for set_input; None = number of inputs given
    _memo_probe: ClassVar[bool] = True  # probe results may be reused by equal layers (see _probe_key)
    _plan_io: tuple[list[int | None], list[int]]  # (input ids, output ids) of a restored layer

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        for name in cls.__dict__.get("_attrs", {}):
            if name not in cls.__dict__:
                setattr(cls, name, _attr_property(name))

    def __init__(self, network: INetworkDefinition, inputs: Sequence[ITensor | None], **attrs: Any):
        self._network_ref = weakref.ref(network)
        self._inputs: list[ITensor | None] = list(inputs)
        declared = self._all_attrs()
        self._a: dict[str, Any] = dict(declared)
        for k, v in attrs.items():
            self._a[k] = _coerce(k, declared.get(k), v, type(self).__name__)
        self._name = ""
        self._metadata = ""
        self._cache: list[TensorInfo] | None = None
        self._outputs: list[ITensor] = []
        self._output_types: dict[int, DataType] = {}
        self._precision: DataType | None = None
        self._num_ranks = 1

    @classmethod
    def _all_attrs(cls) -> dict[str, Any]:
        """Declared attributes of the class and its bases (merged once per class; read-only)."""
        merged = _ALL_ATTRS.get(cls)
        if merged is None:
            merged = {}
            for klass in reversed(cls.__mro__):
                merged.update(klass.__dict__.get("_attrs", {}))
            _ALL_ATTRS[cls] = merged
        return merged

    # -- internal helpers
    @property
    def _canon(self) -> ILayer:
        """The network's own object of this layer. ``INetworkDefinition.get_layer`` gives, like
        TensorRT, a base-class ILayer: a view sharing this layer's ``__dict__`` (so its settings and a
        ``view.__class__ = trt.IActivationLayer`` downcast reach the layer). Identity (consumer lists)
        and the subclass's own methods go through the layer itself."""
        ref = self.__dict__.get("_canon_ref")
        layer = ref() if ref is not None else None
        return layer if layer is not None else self

    @property
    def _network(self) -> INetworkDefinition:
        net = self._network_ref()
        if net is None:
            raise NetworkDefinitionError("the INetworkDefinition of this layer no longer exists")
        return net

    def _fail(self, msg: str) -> NetworkDefinitionError:
        text = f"{self._name or type(self._canon).__name__}: {msg}"
        try:
            _log(self._network._logger, Severity.ERROR, text)
        except NetworkDefinitionError:
            pass
        return NetworkDefinitionError(text)

    def _set_attr(self, name: str, value: Any) -> None:
        self._a[name] = _coerce(name, self._all_attrs().get(name), value, type(self).__name__)
        self._touch()

    def _touch(self) -> None:
        """Invalidate cached shape inference of this layer and everything downstream."""
        net = self._network_ref()
        if net is not None:
            net._wiring += 1
        todo: list[ILayer] = [self]
        seen: set[int] = set()
        while todo:
            layer = todo.pop()
            if id(layer) in seen:
                continue
            seen.add(id(layer))
            layer._cache = None
            for out in layer._outputs:
                todo.extend(out._consumers)

    def _infos(self) -> list[TensorInfo]:
        if self._cache is None:
            self._cache = self._canon._infer()  # a get_layer view infers with the layer's own class
        return self._cache

    def _input_infos(self) -> list[TensorInfo | None]:
        return [t._info() if t is not None else None for t in self._inputs]

    _dds: ClassVar[bool] = False  # output size depends on input values (forces two probes)

    def _call(self, args: list[Any], rt: RunContext) -> Sequence[torch.Tensor]:
        """Run the layer; in probe mode, move value inputs to ``meta`` when any input is meta."""
        if rt.probe and any(isinstance(a, torch.Tensor) and a.device.type == "meta" for a in args):
            args = [
                a.to("meta") if isinstance(a, torch.Tensor) and idx not in self._shape_inputs else a
                for idx, a in enumerate(args)
            ]
        outs = self._run(args, rt)
        if self._output_types:
            # NOTE: a type forced on an output (set_output_type, or ITensor.dtype in a weakly typed
            # network) converts the data like TensorRT's reformatting does, not only the label.
            outs = list(outs)
            for j, dt in self._output_types.items():
                if j < len(outs) and outs[j].dtype != _dtypes.torch_dtype(dt):
                    outs[j] = _dtypes.cast_to(outs[j], dt)
        return outs

    def _infer(self) -> list[TensorInfo]:
        infos = self._input_infos()
        self._check(infos)
        # NOTE: as many probes as the dynamic inputs all have (one whose soft probe failed has two)
        nprobe = min((len(i.probes) for i in infos if i is not None and len(i.probes) > 1), default=1)
        dds = self._dds
        if dds:
            nprobe = max(nprobe, _STRICT_PROBES)
        net = self._network_ref() if "_network_ref" in self.__dict__ else None
        memo: dict[Any, Any] | None = net._probe_memo if net is not None and not dds else None
        key = self._probe_key(infos, nprobe) if memo is not None else None
        specs = memo.get(key) if memo is not None and key is not None else None
        results: list[list[torch.Tensor]] = []
        if specs is not None:
            results = [
                [torch.empty_strided(shape, stride, dtype=dt, device="meta") for shape, stride, dt in probe]
                for probe in specs
            ]
            nprobe = len(results)
        for k in range(len(results), nprobe):
            rt = RunContext("meta", probe=True)
            rt.probe_index = k
            args = [self._probe_arg(i, idx, k) for idx, i in enumerate(infos)]
            soft = k >= _STRICT_PROBES and net is not None
            logger = net._logger if soft and net is not None else None
            if soft and net is not None:
                net._logger = None  # NOTE: a soft probe that fails is no error of the network: nothing is logged
            try:
                results.append(list(self._call(args, rt)))
            except (NetworkDefinitionError, RuntimeError, ValueError, IndexError, TypeError, NotImplementedError) as e:
                if k >= _STRICT_PROBES:  # a soft probe (see PROBE_SIZES): this layer's outputs go without it
                    break
                if isinstance(e, NetworkDefinitionError):
                    raise
                raise self._fail(f"invalid configuration: {e}") from None
            finally:
                if soft and net is not None:
                    net._logger = logger
            if k >= _STRICT_PROBES and [o.dim() for o in results[k]] != [o.dim() for o in results[0]]:
                results.pop()  # NOTE: a soft probe that changes a rank is dropped, not an error
                break
        if memo is not None and key is not None and specs is None and all(o.device.type == "meta" for r in results for o in r):
            memo[key] = tuple(tuple((tuple(o.shape), o.stride(), o.dtype) for o in r) for r in results)
        in_dtypes = [i.dtype if i is not None else None for i in infos]
        out_dtypes = self._out_dtypes(in_dtypes, results[0])
        out: list[TensorInfo] = []
        for j, a in enumerate(results[0]):
            probes = tuple(self._demote(r[j]) for r in results)
            shape = list(a.shape)
            if len(results) > 1:
                others = [r[j] for r in results[1:]]
                if any(b.dim() != a.dim() for b in others):
                    raise self._fail("output rank depends on dynamic input dimensions")
                shape = [da if all(b.shape[d] == da for b in others) else -1 for d, da in enumerate(a.shape)]
                if all(p.device.type != "meta" for p in probes) and all(
                    p.shape == probes[0].shape and torch.equal(p, probes[0]) for p in probes[1:]
                ):
                    probes = probes[:1]
                elif all(p.device.type == "meta" for p in probes) and -1 not in shape:
                    probes = probes[:1]
            dt = self._output_types[j] if j in self._output_types else out_dtypes[j]
            out.append(TensorInfo(dt, tuple(int(s) for s in shape), probes))
        return out

    def _probe_key(self, infos: list[TensorInfo | None], nprobe: int) -> tuple[Any, ...] | None:
        """Key of this layer's probe run in the network's memo, or None when it must run (see _key_of)."""
        cls = type(self)
        ok = _MEMOIZABLE.get(cls)
        if ok is None:
            ok = _MEMOIZABLE[cls] = (
                cls._memo_probe and cls._extra_state is ILayer._extra_state and cls._call is ILayer._call
            )
        if not ok:
            return None
        shape_inputs = self._shape_inputs
        for k in range(nprobe):
            # NOTE: _call runs value inputs as meta tensors when any input is meta: their values are
            # then unused. A probe without any meta input computes from values: not memoized.
            if not any(
                i is not None and _is_meta(i.probes[min(k, len(i.probes) - 1)]) for i in infos
            ):
                return None
        ins: list[Any] = []
        for idx, info in enumerate(infos):
            if info is None:
                ins.append(None)
                continue
            if idx in shape_inputs:
                return None
            probes = []
            for p in info.probes:
                if not isinstance(p, torch.Tensor):
                    return None
                probes.append((p.shape, p.stride(), p.dtype))
            ins.append((info.dtype, tuple(probes)))
        attrs = []
        for name, v in self._a.items():
            kv = _key_of(v)
            if kv is _NO_KEY:
                return None
            attrs.append((name, kv))
        return (cls, nprobe, tuple(ins), tuple(attrs), tuple(sorted(self._output_types.items())))

    @staticmethod
    def _demote(t: torch.Tensor) -> torch.Tensor:
        if t.device.type != "meta" and t.numel() > _REAL_PROBE_LIMIT:
            return t.to("meta")
        return t

    @staticmethod
    def _probe_arg(info: TensorInfo | None, idx: int, k: int) -> Any:
        if info is None:
            return None
        return info.probes[min(k, len(info.probes) - 1)]

    def _out_dtypes(self, in_dtypes: list[DataType | None], outs: list[torch.Tensor]) -> list[DataType]:
        return [_dtypes.from_torch(o.dtype) for o in outs]

    def _check(self, infos: list[TensorInfo | None]) -> None:
        for i, info in enumerate(infos):
            if info is None and i < self._required_inputs():
                raise self._fail(f"input {i} is not set")

    def _required_inputs(self) -> int:
        return 1 if self._inputs else 0

    def _run(self, inputs: list[Any], rt: RunContext) -> Sequence[torch.Tensor]:
        raise NotImplementedError(type(self).__name__)

    # -- serialization hooks (see _plan.py)
    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _restore_extra(self, state: dict[str, Any]) -> None:
        pass

    # -- TensorRT API
    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._name = str(value)

    @property
    def metadata(self) -> str:
        return self._metadata

    @metadata.setter
    def metadata(self, value: str) -> None:
        self._metadata = str(value)

    @property
    def num_ranks(self) -> int:
        return self._num_ranks

    @num_ranks.setter
    def num_ranks(self, value: int) -> None:
        self._num_ranks = int(value)

    @property
    def type(self) -> Any:
        return LayerType.__members__[type(self._canon)._layer_type]

    @property
    def num_inputs(self) -> int:
        return len(self._inputs)

    @property
    def num_outputs(self) -> int:
        return len(self._outputs)

    def get_input(self, index: int) -> ITensor | None:
        if not 0 <= index < len(self._inputs):
            return None
        return self._inputs[index]

    def get_output(self, index: int) -> ITensor | None:
        if not 0 <= index < len(self._outputs):
            return None
        return self._outputs[index]

    def set_input(self, index: int, tensor: ITensor) -> None:
        me = self._canon  # the layer itself when called on a get_layer view
        limit = me._max_inputs if me._max_inputs is not None else len(me._inputs)
        if not 0 <= index < limit:
            raise me._fail(f"set_input: index {index} out of range [0, {limit})")
        if not isinstance(tensor, ITensor):
            raise me._fail(f"set_input: expected an ITensor, got {type(tensor).__name__}")
        me._network._check_owned(tensor)
        while len(me._inputs) <= index:
            me._inputs.append(None)
        old = me._inputs[index]
        if old is not None and me in old._consumers:
            old._consumers.remove(me)
        me._inputs[index] = tensor
        tensor._consumers.append(me)
        me._on_set_input(index)
        me._touch()

    def _on_set_input(self, index: int) -> None:
        pass

    def get_output_type(self, index: int) -> Any:
        if index in self._output_types:
            return self._output_types[index]
        return self._infos()[index].dtype

    def set_output_type(self, index: int, dtype: Any) -> None:
        if self._network._strongly_typed:
            raise self._fail("set_output_type is not allowed in a strongly typed network")
        self._output_types[int(index)] = DataType(int(dtype))
        self._touch()

    def output_type_is_set(self, index: int) -> bool:
        return int(index) in self._output_types

    def reset_output_type(self, index: int) -> None:
        self._output_types.pop(int(index), None)
        self._touch()

    @property
    def precision(self) -> Any:
        return self._precision if self._precision is not None else DataType.FLOAT

    @precision.setter
    def precision(self, value: Any) -> None:
        if self._network._strongly_typed:
            raise self._fail("layer precision cannot be set in a strongly typed network")
        self._precision = DataType(int(value))

    @property
    def precision_is_set(self) -> bool:
        return self._precision is not None

    def reset_precision(self) -> None:
        self._precision = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._name!r}>"


# ---------------------------------------------------------------------------- shared rules
def broadcast_shape(a: Sequence[int], b: Sequence[int], fail: Callable[[str], Exception]) -> tuple[int, ...]:
    """TensorRT's elementwise broadcast: equal ranks, each dim equal or one of them 1."""
    if len(a) != len(b):
        raise fail(f"inputs must have the same rank, got {len(a)} and {len(b)} (use a shuffle to unsqueeze)")
    out = []
    for da, db in zip(a, b, strict=True):
        if da == db or db == 1:
            out.append(da)
        elif da == 1:
            out.append(db)
        elif da == -1 or db == -1:
            out.append(-1)
        else:
            raise fail(f"dimensions {tuple(a)} and {tuple(b)} cannot be broadcast")
    return tuple(out)


def volume(iterable: Iterable[int]) -> int:
    return math.prod(int(v) for v in iterable)

