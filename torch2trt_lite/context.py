"""ConversionContext: what a converter works with (network, backend module, tensor map, helpers)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import SUPPORTED_NODES, tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

from .errors import ConversionError, InternalError
from .precision import short_name


class ConverterRefusal(ConversionError):
    """Raised by a converter that cannot convert this particular call (its arguments): the tracer
    reports it as an unsupported call, naming the op, the module path and the user's source line."""


class FrozenValueError(ConverterRefusal):
    """A converter asked for a constant holding values computed from the inputs: they would be
    frozen into the engine."""

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


class _Lazy:
    """A network tensor created on first use (e.g. an unfolded conv output after BN folding)."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


class ConversionContext:
    """Handed to every converter as ``ctx``.

    * ``ctx.trt``: the backend module (``tensorrt`` or ``torch2trt_lite.sim``), ``ctx.network``.
    * ``ctx.itensor(x)``: the network tensor of a traced torch tensor; a constant for anything else.
    * ``ctx.constant(value)``: a constant layer's output.
    """

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
        self._map[t] = (itensor, t._version)
        self._remember_storage(t)

    def set_lazy(self, t: torch.Tensor, make: Callable[[], Any]) -> None:
        self._map[t] = (_Lazy(make), t._version)
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
        if isinstance(it, _Lazy):
            it = it.make()
            self._map[t] = (it, version)
        return it, version

    def itensor(self, x: Any, dtype: torch.dtype | None = None) -> Any:
        """The network tensor for ``x`` (traced tensor, untraced tensor, Python scalar), cast to ``dtype``."""
        if isinstance(x, torch.Tensor):
            entry = self._map.get(x)
            if entry is not None:
                it, version = entry
                if version != x._version:
                    raise ConversionError(
                        "a traced tensor was modified in place through a view or by an untracked write "
                        f"(version {version} -> {x._version}); torch2trt-lite cannot follow that. Use the "
                        "out-of-place form of the operation"
                    )
                if isinstance(it, _Lazy):
                    it = it.make()
                    self._map[x] = (it, x._version)
                return self.cast(it, dtype) if dtype is not None and dtype != x.dtype else it
            return self._tensor_constant(x if dtype is None else x.to(dtype))
        if isinstance(x, (bool, int, float, np.generic)):
            if dtype is None:
                dtype = torch.bool if isinstance(x, bool) else torch.int64 if isinstance(x, int) else torch.float32
            return self.constant(torch.tensor(x, dtype=dtype))
        raise ConversionError(f"cannot turn a {type(x).__name__} into a network tensor")

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
        if self.backend_name == "sim":
            from .sim._core import DeferredWeights

            return DeferredWeights(shape, dtype, fill)
        out = torch.empty(tuple(shape), dtype=dtype)
        fill(out)
        return self.weights(out)

    def weights(self, value: Any) -> Any:
        """``value`` as weights the backend accepts (numpy; kept alive until the build finishes)."""
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
            from .sim import _dtypes

            name = _dtypes.from_torch(torch.from_numpy(arr).dtype).name
            return self.trt.Weights(getattr(self.trt.DataType, name))
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
        from .sim import _dtypes

        dt = _dtypes.from_torch(dtype)
        return getattr(self.trt.DataType, dt.name)

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
        than its inputs' that no list of :mod:`torch2trt_lite.precision` names)."""
        outs = [out] if isinstance(out, torch.Tensor) else [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        for t in outs:
            entry = self._map.get(t)
            if entry is None or isinstance(entry[0], _Lazy) or not t.is_floating_point():
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

    def num_layers(self) -> int:
        return 0

    def mark_traced(self, out: Any) -> None:
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self._map[t] = (None, t._version)

    def itensor(self, x: Any, dtype: torch.dtype | None = None) -> Any:
        raise InternalError("check mode builds no network")
