"""ConversionContext: what a converter works with (network, backend module, tensor map, helpers, and
the conversion's symbolic sizes: ``ctx.symbolic``, ``ctx.data_dependent``, ``ctx.known_sizes``,
``ctx.mark_filled`` / ``ctx.filled_value``)."""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.utils._pytree import SUPPORTED_NODES, tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

from torch2trt_lite import backends
from torch2trt_lite.converters.impl import sizes as Y
from torch2trt_lite.errors import ConversionError, FrozenValueError, InternalError, Torch2TRTError
from torch2trt_lite.trace import symbolic as _symbolic
from torch2trt_lite.trace import weights as _weight_log
from torch2trt_lite.trace.double import Float64
from torch2trt_lite.trace.precision import short_name

if TYPE_CHECKING:
    from torch2trt_lite.trace.symbolic import SymbolicSizes

_TORCH_TO_NP = {
    torch.float32: np.float32, torch.float16: np.float16, torch.int8: np.int8, torch.int32: np.int32,
    torch.int64: np.int64, torch.bool: np.bool_, torch.uint8: np.uint8,
}


def arg_tensors(args: Any, kwargs: Any) -> list[torch.Tensor] | None:
    """The tensors among a call's arguments, as pytree would find them, for plain lists, tuples and
    dicts (nearly every call); None when a container needs pytree (a namedtuple, a registered type)."""
    out = []
    todo: list[Any] = [args, kwargs] if kwargs else [args]
    while todo:
        c = todo.pop()
        for x in c.values() if type(c) is dict else c:
            if isinstance(x, torch.Tensor):
                out.append(x)
                continue
            tx = type(x)
            if tx is tuple or tx is list or tx is dict:
                todo.append(x)
            elif tx is not torch.Size and (tx in SUPPORTED_NODES or isinstance(x, (tuple, list, dict))):
                return None  # NOTE: torch.Size is a pytree leaf (and holds ints)
    return out


def view_index(base: torch.Tensor, view: torch.Tensor) -> tuple[Any, ...] | None:
    """The basic index (ints and positive-step slices) with ``base[index]`` holding exactly the elements
    of ``view`` (a view of ``base``'s memory), in the same order up to size-1 dims; None when there is
    none (``base`` not contiguous, a permuted, expanded or overlapping view, another storage).

    Computed from the view's strides and storage offset, so it follows any chain of slicing, ``select``,
    ``narrow``, ``view``/``unsqueeze`` that kept the element order."""
    if view.device != base.device or view.dtype != base.dtype or not base.is_contiguous():
        return None
    if view.untyped_storage().data_ptr() != base.untyped_storage().data_ptr():
        return None
    shape = tuple(base.shape)
    n = len(shape)
    strides = [1] * n
    for d in range(n - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    off = int(view.storage_offset()) - int(base.storage_offset())
    if off < 0 or (n and off >= base.numel()) or (not n and off):
        return None
    starts = [0] * n
    for d in range(n):
        starts[d], off = divmod(off, strides[d])
    if off:
        return None
    lens, steps = [0] * n, [1] * n  # 0: dim not taken by a dim of the view (an int index)
    prev = -1
    for size, stride in zip(view.shape, view.stride(), strict=True):
        if size == 1:
            continue
        if size == 0:
            return None
        found = None
        for d in range(prev + 1, n):
            if shape[d] > 1 and stride > 0 and stride % strides[d] == 0 and (
                starts[d] + (size - 1) * (stride // strides[d]) < shape[d]
            ):
                found = d
                break
        if found is None:
            return None
        lens[found], steps[found], prev = size, stride // strides[found], found
    return tuple(
        slice(starts[d], starts[d] + (lens[d] - 1) * steps[d] + 1, steps[d]) if lens[d] else starts[d]
        for d in range(n)
    )


class _ViewWrite:
    """An in-place write into ``view`` of ``base`` being converted (see
    :meth:`ConversionContext.begin_view_write`)."""

    __slots__ = ("base", "base_it", "chain", "index", "view")

    def __init__(self, view: torch.Tensor, base: torch.Tensor, base_it: Any, index: Any,
                 chain: list[tuple[torch.Tensor, Any, Any]] | None = None) -> None:
        self.view, self.base, self.base_it, self.index = view, base, base_it, index
        self.chain = chain  # a dynamic-shape conversion: (parent, index, parent's tensor) from the view up


def _raise(error: Exception) -> Any:
    raise error


def _refuse_view_value(view_shape: tuple[int, ...], base_shape: tuple[int, ...]) -> Any:
    raise ConversionError(
        f"a tensor of shape {base_shape} was written in place through a view of shape {view_shape} "
        "(a permuted, expanded or strided view) with values computed from the inputs, and torch2trt-lite "
        "cannot map that view back onto the tensor it views; write into the tensor itself "
        "(``buf[index] = value``), or use the out-of-place form"
    )


class Lazy:
    """A network tensor created on first use (e.g. an unfolded conv output after BN folding)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


class ConversionContext:
    """Handed to every converter as ``ctx``.

    * ``ctx.trt``: the backend module (``tensorrt`` or ``torch2trt_lite.sim``), ``ctx.network``.
    * ``ctx.itensor(x)``: the network tensor of a traced torch tensor; a constant for anything else.
    * ``ctx.constant(value)``: a constant layer's output.
    * ``ctx.symbolic``: the conversion's symbolic sizes (:class:`~torch2trt_lite.trace.symbolic.SymbolicSizes`),
      None while no size is dynamic; converters read them with ``converters/impl/sizes.py``.

    A write into a view of a tensor (``buf[i, :h].copy_(img)``) is followed with
    :meth:`begin_view_write` / :meth:`end_view_write`: the base is mapped to a slice update of its
    network tensor, and views made before the write are read again from the base when used.
    """

    # Dynamic or data-dependent sizes: the conversion's symbolic sizes (set by SymbolicSizes), else None
    symbolic: SymbolicSizes | None = None

    def __init__(self, network: Any, trt: Any, backend_name: str, *, has_plugins: bool = True) -> None:
        self.network = network
        self.trt = trt
        self.backend_name = backend_name
        self.has_plugins = has_plugins  # False on TensorRT-RTX (no plugin API)
        self._map: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._consts: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._storages: dict[int, weakref.ref[torch.Tensor]] = {}  # data_ptr -> a traced tensor using it
        self._keepalive: list[Any] = []
        self._names: dict[str, int] = {}
        self.layer_info: dict[int, Any] = {}  # id(ITensor) -> converter-private info (e.g. BN folding)
        self.assertions: list[tuple[Any, str]] = []  # (BOOL [1] network tensor, message): checked after each run
        self.float64 = Float64()  # float64 computed in float32 (torch2trt_lite.trace.double; define() sets it)
        self.value_bounds: dict[str, tuple[int, int]] = {}  # shape inputs' value ranges (trace/values.py)

    # ----------------------------------------------------------------------- tensor map
    def num_layers(self) -> int:
        return int(self.network.num_layers)

    def is_traced(self, t: Any) -> bool:
        return t in self._map

    def mark_traced(self, out: Any) -> None:
        raise InternalError("mark_traced is only used in check mode")

    def versions(self, args: Any, kwargs: Any) -> list[tuple[torch.Tensor, int]]:
        """(tensor, version) of the traced tensors among a call's arguments."""
        m = self._map
        ts = arg_tensors(args, kwargs)
        if ts is None:
            ts = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        return [(t, t._version) for t in ts if t in m]

    def refresh_versions(self, before: list[tuple[torch.Tensor, int]]) -> None:
        """After an in-place call: accept the new versions of its own arguments (and only theirs)."""
        for t, v in before:
            entry = self._map.get(t)
            if entry is not None and entry[1] == v and t._version != v:
                self._map[t] = (entry[0], t._version)

    def set_itensor(self, t: torch.Tensor, itensor: Any) -> None:
        old = self._map.get(t) if self.symbolic is not None else None
        self._map[t] = (itensor, t._version)
        self._remember_storage(t)
        if old is not None and old[0] is not itensor and not isinstance(old[0], Lazy):
            self.symbolic.carry(old[0], itensor, tuple(t.shape))  # type: ignore[union-attr]  # a write: same sizes

    def set_lazy(self, t: torch.Tensor, make: Callable[[], Any]) -> None:
        self._map[t] = (Lazy(make), t._version)
        self._remember_storage(t)

    def _remember_storage(self, t: torch.Tensor) -> None:
        if t.numel() and t.device.type != "meta":
            self._storages[t.untyped_storage().data_ptr()] = weakref.ref(t)

    def holds_traced_values(self, t: torch.Tensor) -> bool:
        """Does ``t`` share memory with a live traced tensor (a view, a ``detach()``, the tensor itself)?"""
        if not t.numel() or t.device.type == "meta":
            return False
        ptr = t.untyped_storage().data_ptr()
        ref = self._storages.get(ptr)
        live = ref() if ref is not None else None
        return live is not None and live.untyped_storage().data_ptr() == ptr

    def own_fresh_view(self, out: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A call's result that eager returns as a view of memory the op made itself (``F.linear`` of a 3-D
        input: a view of its 2-D result; ``einsum``, ``bilinear``, ``avg_pool1d``, ``instance_norm``,
        ``scaled_dot_product_attention`` alike): no argument and no traced tensor holds that memory, so
        the result stands for it alone, and is handed on as a tensor of its own (``detach()``, or a copy
        where it needs grad), so an in-place write into it or into a view of it (``y += b``,
        ``y[0] += b``) is followed like one into any traced tensor instead of refused."""
        base = out._base if isinstance(out, torch.Tensor) else None
        if base is None or not out.numel() or out.device.type == "meta" or self.holds_traced_values(base):
            return out
        ptr = base.untyped_storage().data_ptr()
        tensors = arg_tensors(args, kwargs)
        if tensors is None:
            tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        if any(t.device.type == "meta" or t.untyped_storage().data_ptr() == ptr for t in tensors):
            return out  # a view of an argument (x[0], x.view(...)): writes go back into it
        return out.clone() if out.requires_grad else out.detach()

    def aliases(self, it: Any) -> list[torch.Tensor]:
        """The traced torch tensors now mapped to the network tensor ``it`` (a converter that rewrites
        the layer producing ``it``, like batch-norm folding, re-maps all of them)."""
        return [t for t, (v, _) in list(self._map.items()) if v is it]

    def mapped(self, t: torch.Tensor) -> tuple[Any, int] | None:
        """(network tensor, version it was recorded at) of a traced tensor, without the version check.

        For converters that can prove a newer version is still described by the network tensor
        (``x[i] += v`` writes the modified view back with ``__setitem__``).
        """
        entry = self._map.get(t)
        if entry is None:
            return None
        it, version = entry
        if isinstance(it, Lazy):
            it = it.make()
            self._map[t] = (it, version)
        return it, version

    def itensor(self, x: Any, dtype: torch.dtype | None = None) -> Any:
        """The network tensor for ``x`` (traced tensor, untraced tensor, Python scalar), cast to ``dtype``."""
        if isinstance(x, torch.Tensor):
            entry = self._map.get(x)
            if entry is not None:
                it, version = entry
                if version != x._version and x._base is not None:
                    # NOTE: a view whose base was written (through another view) since it was made
                    follow = self._follow_view(x)
                    if follow is not None:
                        it, version = follow, x._version
                if version != x._version:
                    raise ConversionError(
                        "a traced tensor was modified in place through a view or by an untracked write "
                        f"(version {version} -> {x._version}); torch2trt-lite cannot follow that. Use the "
                        "out-of-place form of the operation"
                    )
                if isinstance(it, Lazy):
                    it = it.make()
                    self._map[x] = (it, x._version)
                return self.cast(it, dtype) if dtype is not None and dtype != x.dtype else it
            return self._tensor_constant(x if dtype is None else x.to(dtype))
        if isinstance(x, (bool, int, float, np.generic)):
            if dtype is None:
                dtype = torch.bool if isinstance(x, bool) else torch.int64 if isinstance(x, int) else torch.float32
            return self.constant(torch.tensor(x, dtype=dtype))
        raise ConversionError(f"cannot turn a {type(x).__name__} into a network tensor")

    # ------------------------------------------------------------ in-place writes through views
    def begin_view_write(self, view: torch.Tensor) -> _ViewWrite | None:
        """Before an in-place op writes ``view`` (a view of another tensor's memory: ``view._base``):
        note the base's network tensor and where the view sits in it, and map ``view`` to its current
        value (read from the base when its own mapping is missing or out of date). After the op's
        converter, :meth:`end_view_write` writes the view's new value back into the base with a
        slice-update, so the base (``buf`` of ``buf[i, :h].copy_(img)``) follows the write.

        None when the write cannot be followed (today's errors then apply: reading the base later
        raises a clear error)."""
        base = view._base
        if base is None:
            return None
        if self.network is None:  # check mode: the base now holds traced values
            return _ViewWrite(view, base, None, None)
        if self.symbolic is not None and view in self._map:
            return self._begin_recorded_write(view, base)
        index = view_index(base, view)
        entry = self._map.get(base)
        if entry is not None and entry[1] != base._version:
            return None  # the base was already modified by a write that was not followed
        if index is None:
            if entry is not None:
                return None
            # NOTE: an untraced buffer: its values would silently stay the old ones; reading it is
            # refused (end_view_write), the view itself converts as an untraced tensor's in-place op
            if view not in self._map:
                self._map[view] = (Lazy(functools.partial(self.constant, view.detach().clone())), view._version)
            return _ViewWrite(view, base, None, None)
        if entry is None and self.holds_traced_values(base):
            raise FrozenValueError(
                "an in-place write into a view of a tensor whose memory holds values computed from the inputs "
                "through another tensor (not followed): its values would be frozen into the engine; use "
                "out-of-place ops"
            )
        # NOTE: a constant of an untraced base is a copy: the op about to run overwrites its memory
        base_it = self.mapped(base)[0] if entry is not None else self.constant(base.detach().clone())  # type: ignore[index]
        if self.symbolic is not None and -1 in tuple(base_it.shape):
            return None  # NOTE: the index comes from the traced strides: not valid for other sizes
        mine = self._map.get(view)
        if mine is None or mine[1] != view._version:
            self._map[view] = (Lazy(lambda: self._read_view(base, base_it, index, view)), view._version)
        return _ViewWrite(view, base, base_it, index)

    def end_view_write(self, write: _ViewWrite) -> None:
        """After the converter of an in-place write into ``write.view``: map the base to its new value."""
        view, base = write.view, write.base
        if self.network is None:
            self.mark_traced(base)
            return
        if (write.index is None and write.chain is None) or view.is_complex():  # not followed (begin_view_write)
            self.set_lazy(base, functools.partial(_refuse_view_value, tuple(view.shape), tuple(base.shape)))
            return  # NOTE: nor a complex view: its index does not count the pair dim (converters/complex.py)
        entry = self.mapped(view)
        if entry is None or entry[1] != view._version:
            return  # not followed: the base stays out of date (reading it raises)
        from torch2trt_lite.converters.impl import indexing as I
        from torch2trt_lite.converters.impl import shape as S

        value = entry[0]
        state = self.symbolic
        try:
            if write.chain is not None:  # x[index] views, written back one link at a time
                for parent, index, parent_it in write.chain:
                    value = I.setitem(self, parent, parent_it, index, value)
                    self.set_itensor(parent, value)
                    state.filled.pop(parent, None)  # type: ignore[union-attr]
                return
            region = tuple(base[write.index].shape)
            if tuple(value.shape) != region:
                value = S.reshape(self, value, region)
            self.set_itensor(base, I.setitem(self, base, write.base_it, write.index, value))
        except Torch2TRTError as e:
            # NOTE: the view itself converted; only a later read of the base needs the write-back
            error = ConversionError(
                f"a tensor was written in place through a view of shape {tuple(view.shape)}, and writing that "
                f"back into the tensor it views failed: {e}"
            )
            self.set_lazy(base, functools.partial(_raise, error))
        if state is not None:
            state.filled.pop(base, None)

    def record_view(self, out: torch.Tensor, qualname: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """A dynamic-shape conversion: note how the view ``out`` was indexed out of its parent
        (``x[index]``, ``narrow``), so a write into it follows the (maybe dynamic) index back."""
        if kwargs or len(args) < 2 or not isinstance(args[0], torch.Tensor):
            return
        index = args[1]
        if qualname.endswith(".narrow"):
            if len(args) != 4 or not all(isinstance(a, int) for a in args[1:]):
                return
            dim, start, length = args[1], args[2], args[3]
            dim = dim + args[0].dim() if dim < 0 else dim
            if Y.bounds(start)[0] < 0:  # the lower bound of a dynamic size (Y.SymSize)
                return  # NOTE: a negative start counts from the end
            index = (slice(None),) * dim + (slice(start, start + length),)
        elif not qualname.endswith(".__getitem__"):
            return
        views = getattr(self, "_views", None)
        if views is None:
            views = self._views = WeakIdKeyDictionary()
        views[out] = (args[0], index)

    def _begin_recorded_write(self, view: torch.Tensor, base: torch.Tensor) -> _ViewWrite | None:
        """:meth:`begin_view_write` of a traced view in a dynamic-shape conversion: the chain of
        recorded indexings from ``view`` up to ``base`` (the traced strides would not hold at other
        sizes); None when a link was made otherwise or a tensor on the way is out of date."""
        version = view._version
        mine = self._map.get(view)
        views = getattr(self, "_views", None)
        if mine is None or mine[1] != version or views is None:
            return None
        chain: list[tuple[torch.Tensor, Any, Any]] = []
        t = view
        while t is not base:
            rec = views.get(t)
            if rec is None:
                return None
            parent, index = rec
            entry = self.mapped(parent)
            if entry is None or entry[1] != version or len(chain) > 64:
                return None
            chain.append((parent, index, entry[0]))
            t = parent
        return _ViewWrite(view, base, None, None, chain)

    def _read_view(self, base: torch.Tensor, base_it: Any, index: Any, view: torch.Tensor) -> Any:
        from torch2trt_lite.converters.impl import indexing as I

        return I.getitem(self, base, index, tuple(view.shape), it=base_it)

    def _follow_view(self, view: torch.Tensor) -> Any:
        """The network tensor of an out-of-date view read from its (up-to-date) base; None if not possible."""
        base = view._base
        entry = self._map.get(base) if base is not None and self.network is not None else None
        if entry is None or entry[1] != view._version:
            return None
        index = view_index(base, view)  # type: ignore[arg-type]
        base_it = self.mapped(base)[0]  # type: ignore[arg-type, index]
        if index is None or (self.symbolic is not None and -1 in tuple(base_it.shape)):
            return None
        it = self._read_view(base, base_it, index, view)  # type: ignore[arg-type]
        self._map[view] = (it, view._version)
        return it

    def _tensor_constant(self, t: torch.Tensor) -> Any:
        entry = self._consts.get(t)
        if entry is not None and entry[1] == t._version:
            return entry[0]
        it = self.constant(t)
        self._consts[t] = (it, t._version)
        return it

    def constant(self, value: Any, shape: Sequence[int] | None = None) -> Any:
        """A constant layer holding ``value`` (torch tensor, numpy array or scalar)."""
        arr = self.weights(value)
        # NOTE: np.ascontiguousarray makes 0-d arrays 1-d; take the dims from the value itself.
        dims = tuple(np.shape(value) if not isinstance(value, torch.Tensor) else value.shape) if shape is None \
            else tuple(shape)
        layer = self.network.add_constant(dims, arr)
        return layer.get_output(0)

    def deferred_weights(
        self, shape: Sequence[int], dtype: torch.dtype, fill: Callable[[torch.Tensor], None]
    ) -> Any:
        """Weights that ``fill(out)`` writes into a contiguous ``out`` of ``shape`` and ``dtype``. On the
        sim they are computed straight into the plan at build time (derived weights, such as a
        convolution with batch norm folded in, then never exist as a separate copy); on TensorRT now."""
        # NOTE: a refittable conversion computes them now, where the weight log sees the calls that make them
        log = _weight_log.current()
        deferred = backends.deferred_weights(self.backend_name, shape, dtype, fill) if log is None else None
        if deferred is not None:
            return deferred
        out = torch.empty(tuple(shape), dtype=dtype)
        fill(out)
        return self.weights(out)

    def weights(self, value: Any) -> Any:
        """``value`` as weights the backend accepts (numpy; kept alive until the build finishes); in a
        refittable conversion the weight log records where they come from (:mod:`torch2trt_lite.trace.weights`)."""
        log = _weight_log.current()
        return self._weights(value) if log is None else log.weights(value, self._weights)

    def _weights(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if self.holds_traced_values(value):
                raise FrozenValueError(
                    "a value computed from the inputs would be stored in the engine as a constant (frozen); "
                    "this call cannot be converted with that argument"
                )
            t = value.detach()
            if t.dtype == torch.float64:
                t = t.float()
            if t.dtype == torch.bfloat16:
                if self.backend_name == "sim":
                    self._keepalive.append(t)
                    return t.cpu().contiguous()
                return self._bf16_weights(t)
            if t.dtype not in _TORCH_TO_NP:
                raise ConversionError(f"constants of dtype {t.dtype} are not supported by TensorRT")
            arr = t.cpu().contiguous().numpy()
        else:
            arr = np.asarray(value)
            if arr.dtype == np.float64:
                arr = arr.astype(np.float32)
        arr = np.ascontiguousarray(arr)
        if arr.size == 0 and self.backend_name != "sim":
            # NOTE: TensorRT refuses an empty numpy array's weights (a non-null pointer with count 0);
            # empty weights are typed Weights with no values.
            return self.trt.Weights(self.trt_dtype(torch.from_numpy(arr).dtype))
        self._keepalive.append(arr)
        return arr

    def _bf16_weights(self, t: torch.Tensor) -> Any:
        """bfloat16 weights for a real backend: numpy has no bfloat16, so TensorRT gets a Weights
        object over the tensor's own memory (kept alive until the build finishes)."""
        t = t.cpu().contiguous()
        self._keepalive.append(t)
        return self.trt.Weights(self.trt.DataType.BF16, t.data_ptr(), t.numel())

    def cast(self, it: Any, dtype: torch.dtype) -> Any:

        target = self.trt_dtype(dtype)
        if int(it.dtype) == int(target):
            return it
        layer = self.network.add_cast(it, target)
        return layer.get_output(0)

    def trt_dtype(self, dtype: torch.dtype) -> Any:
        """The backend's ``DataType`` of torch ``dtype`` (float64: float32 where ``self.float64`` allows it)."""
        if dtype == torch.float64 and self.float64.allowed:
            dtype = torch.float32
        return backends.trt_dtype(self.trt, dtype)

    def dtype_of(self, it: Any) -> torch.dtype:
        """The torch dtype of network tensor ``it``."""
        return backends.torch_dtype(it.dtype)

    # ------------------------------------------------------------------- symbolic sizes
    def data_dependent(self, it: Any, traced: Sequence[int], what: str, hi: float = math.inf) -> tuple[Any, ...]:
        """Make the ``-1`` dims of network tensor ``it`` (a data-dependent layer's output, traced at
        ``traced``) data-dependent sizes in ``[0, hi]`` named after ``what``
        (:func:`torch2trt_lite.trace.symbolic.data_dependent`); returns its sizes."""
        return _symbolic.data_dependent(self, it, traced, what, hi)

    def known_sizes(self, it: Any, sizes: Sequence[Any], traced: Sequence[int]) -> None:
        """Record that network tensor ``it`` (traced at ``traced``) has ``sizes``, expressions of its
        inputs' sizes (:func:`torch2trt_lite.trace.symbolic.known_sizes`); nothing in a static conversion."""
        _symbolic.known_sizes(self, it, sizes, traced)

    def mark_filled(self, t: torch.Tensor, value: Any) -> None:
        """Record that traced ``t`` holds ``value`` everywhere (a creation of a dynamic size, e.g.
        ``torch.ones(b, n)``): its values are known although its shape is dynamic."""
        state = self.symbolic
        if state is not None and isinstance(t, torch.Tensor):
            state.filled[t] = value

    def filled_value(self, t: Any) -> Any:
        """The value every element of traced ``t`` holds when :meth:`mark_filled` recorded one, else None."""
        state = self.symbolic
        if state is None or not isinstance(t, torch.Tensor):
            return None
        return state.filled.get(t)

    # --------------------------------------------------------------------- bookkeeping
    def name_layers(self, start: int, module_path: str, qualname: str) -> None:
        """Name the layers a converter added: ``<module path>/<op>`` (suffixed when repeated)."""
        end = self.num_layers()
        if end <= start:
            return
        op = qualname.rsplit(".", 1)[-1].strip("_") or qualname
        base = f"{module_path}/{op}" if module_path else op
        n = self._names.get(base, 0)
        self._names[base] = n + end - start
        for k, i in enumerate(range(start, end)):
            j = n + k
            self.network.get_layer(i).name = base if j == 0 else f"{base}_{j}"

    def bind_outputs(self, call: Any, result: Any) -> None:
        out = call.output
        if (
            isinstance(out, torch.Tensor) and result is not None
            and not isinstance(result, (list, tuple, dict)) and type(result) not in SUPPORTED_NODES
        ):
            # NOTE: the common case (one tensor, one network tensor) without pytree.
            if isinstance(result, (int, float, bool)):
                raise ConversionError(
                    f"converter of {call.qualname} returned 0 network tensor(s) for 1 torch output(s)"
                )
            self.set_itensor(out, self.itensor(result) if isinstance(result, torch.Tensor) else result)
            return
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if not outs:
            return
        res = [r for r in tree_flatten(result)[0] if r is not None and not isinstance(r, (int, float, bool))]
        if len(res) != len(outs):
            raise ConversionError(
                f"converter of {call.qualname} returned {len(res)} network tensor(s) for {len(outs)} torch output(s)"
            )
        for t, r in zip(outs, res, strict=True):
            if isinstance(r, torch.Tensor):
                r = self.itensor(r)
            self.set_itensor(t, r)

    def conform_dtypes(self, out: Any, module_path: str, qualname: str) -> None:
        """Under a precision policy or autocast: give each output of a call the type torch gave it
        (a Cast layer where the converter's result differs, e.g. an op autocast runs in another type
        than its inputs' that no list of :mod:`torch2trt_lite.trace.precision` names)."""
        outs = [out] if isinstance(out, torch.Tensor) else [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        for t in outs:
            entry = self._map.get(t)
            if entry is None or isinstance(entry[0], Lazy) or not t.is_floating_point():
                continue
            it = entry[0]
            want = self.trt_dtype(t.dtype)
            if int(it.dtype) != int(want):
                start = self.num_layers()
                self._map[t] = (self.network.add_cast(it, want).get_output(0), entry[1])
                op = qualname.rsplit(".", 1)[-1].strip("_")
                self.name_layers(start, module_path, f"{op}_out_{short_name(t.dtype)}")


class CheckContext(ConversionContext):
    """Check mode: no network; tracks which tensors derive from the inputs."""

    def __init__(self) -> None:
        self.network = None
        self.trt = None
        self.backend_name = "check"
        self._map = WeakIdKeyDictionary()
        self.float64 = Float64()

    def num_layers(self) -> int:
        return 0

    def mark_traced(self, out: Any) -> None:
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self._map[t] = (None, t._version)

    def itensor(self, x: Any, dtype: torch.dtype | None = None) -> Any:
        raise InternalError("check mode builds no network")
