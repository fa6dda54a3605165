"""Tensor manipulation and quantization layers.

Shuffle, slice, concatenation, gather, scatter, select, shape, fill, one-hot, non-zero,
reverse-sequence, squeeze, unsqueeze, quantize, dequantize and dynamic quantize.

Shape-tensor inputs (reshape dims, slice start/size/stride/axes, fill dims, one-hot depth, squeeze
axes) are read with ``.tolist()``: during shape inference they are real CPU tensors when their value
is known at build time. When such a value is unknown at build time (a network shape input), the
layer reports the affected output dimensions as -1 (see ``_ShapeReader``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch

from ...errors import RuntimeExecutionError
from .. import _dtypes, _manifest
from .._core import (
    PROBE_SIZES,
    Dims,
    ILayer,
    ITensor,
    RunContext,
    TensorInfo,
    _is_meta,
    as_dims,
    broadcast_shape,
    dds_probe,
    volume,
)
from .._enums import DataType, FillOperation, GatherMode, SampleMode, ScatterMode

_INDEX_TYPES = frozenset({DataType.INT32, DataType.INT64})
_QUANT_TYPES = frozenset({DataType.INT8, DataType.FP8, DataType.INT4, DataType.FP4})
_IDENTITY_PERM = tuple(range(Dims.MAX_DIMS))
_FP8_MAX = 448.0
_FP4_MAX = 6.0


# ----------------------------------------------------------------------------------- helpers
def _opt(inputs: Sequence[Any], index: int) -> Any:
    """Optional input ``index`` (None when absent)."""
    return inputs[index] if index < len(inputs) else None


def _ints(t: torch.Tensor | None) -> list[int] | None:
    """The values of a shape tensor, or None when unknown (a meta tensor during shape inference)."""
    if t is None or t.device.type == "meta":
        return None
    return [int(v) for v in t.reshape(-1).tolist()]


def _probe_dims(rt: RunContext, n: int) -> list[int]:
    """Stand-in sizes for dimensions whose value is unknown at build time (they become -1)."""
    return [PROBE_SIZES[min(rt.probe_index, len(PROBE_SIZES) - 1)]] * n


def _fail(layer: ILayer, msg: str) -> Exception:
    """A NetworkDefinitionError while building; a RuntimeExecutionError in a deserialized engine."""
    if "_network_ref" in layer.__dict__:
        return layer._fail(msg)
    return RuntimeExecutionError(f"layer '{layer.name}': {msg}")


def _same_device(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """Move all tensors to the first non-CPU device among them (shape inputs live on the host)."""
    devices = {t.device for t in tensors}
    if len(devices) <= 1:
        return tensors
    target = next((d for d in devices if d.type not in ("cpu",)), tensors[0].device)
    return [t.to(target) for t in tensors]


def _wrap_index(idx: torch.Tensor, size: int) -> torch.Tensor:
    """Negative indices count from the back (ONNX semantics)."""
    idx = idx.long()
    return torch.where(idx < 0, idx + size, idx)


def _gather_index(idx: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(index to read, in range) for a gather: negative indices count from the back; an index out of
    range reads element 0 and is then zeroed (TensorRT: "Zero will be stored for OOB access")."""
    idx = _wrap_index(idx, size)
    ok = (idx >= 0) & (idx < size)
    return torch.where(ok, idx, torch.zeros_like(idx)), ok


def _zero_where_not(out: torch.Tensor, ok: torch.Tensor, lead: int) -> torch.Tensor:
    """``out`` with the entries whose index was out of range zeroed; ``ok``'s dims start at ``lead``."""
    if ok.device.type != "meta" and bool(ok.all()):
        return out
    mask = ok.reshape((*([1] * lead), *ok.shape, *([1] * (out.dim() - lead - ok.dim()))))
    return torch.where(mask, out, torch.zeros((), dtype=out.dtype, device=out.device))


def _norm_axis(axis: int, rank: int) -> int | None:
    if -rank <= axis < rank:
        return axis + rank if axis < 0 else axis
    return None


def _permutation(layer: ILayer, value: Any, what: str) -> tuple[int, ...]:
    """TensorRT's Permutation: up to 8 entries, the rest zero-filled."""
    vals = as_dims(value, what)
    if len(vals) > Dims.MAX_DIMS:
        raise layer._fail(f"{what}: a permutation has at most {Dims.MAX_DIMS} entries, got {len(vals)}")
    return tuple(vals) + (0,) * (Dims.MAX_DIMS - len(vals))


def _check_perm(layer: ILayer, perm: Sequence[int], rank: int, what: str) -> None:
    if sorted(perm[:rank]) != list(range(rank)):
        raise layer._fail(f"{what} {tuple(perm[:rank])} is not a permutation of the {rank} dimensions")


class _KeepsType(ILayer):
    """A data-movement layer: its output has the declared type of its data input.

    That matters for INT4 / FP4 / E8M0, whose values travel in float32 carrier tensors.
    """

    _data_input: ClassVar[int] = 0

    def _out_dtypes(self, in_dtypes: list[DataType | None], outs: list[torch.Tensor]) -> list[DataType]:
        dt = in_dtypes[self._data_input] if self._data_input < len(in_dtypes) else None
        if dt is not None and _dtypes.torch_dtype(dt) == outs[0].dtype:
            return [dt]
        return super()._out_dtypes(in_dtypes, outs)


class _ShapeReader(_KeepsType):
    """A layer whose output dimensions depend on the values of some shape inputs.

    When one of those values is unknown at build time (a network shape input), shape inference runs
    two probes with different stand-in sizes so the affected output dimensions are reported as -1.
    """

    _value_inputs: ClassVar[tuple[int, ...]] = ()

    @property
    def _dds(self) -> bool:  # type: ignore[override]
        ins = self.__dict__.get("_inputs") or []
        for i in self._value_inputs:
            t = ins[i] if i < len(ins) else None
            if t is not None and any(p.device.type == "meta" for p in t._info().probes):
                return True
        return False


def _check_shape_input(layer: ILayer, info: TensorInfo, what: str) -> int:
    """A 1-D Int32/Int64 tensor of static length; returns the length."""
    if info.dtype not in _INDEX_TYPES or info.rank != 1 or info.shape[0] < 0:
        raise layer._fail(
            f"{what} must be a 1-D INT32/INT64 tensor of static length, got {info.dtype.name} {info.shape}"
        )
    return info.shape[0]


# ----------------------------------------------------------------------------------- shuffle
def _resolve_reshape(in_shape: Sequence[int], dims: Sequence[int], zero_is_placeholder: bool) -> list[int]:
    out: list[int] = []
    infer = -1
    for i, d in enumerate(dims):
        if d == 0 and zero_is_placeholder:
            if i >= len(in_shape):
                raise ValueError(f"reshape dimension {i} is 0 (copy) but the input has only {len(in_shape)} dims")
            out.append(int(in_shape[i]))
        elif d == -1:
            if infer >= 0:
                raise ValueError(f"reshape dimensions {tuple(dims)} contain more than one -1")
            infer = i
            out.append(1)
        elif d < -1:
            raise ValueError(f"reshape dimensions {tuple(dims)} contain a negative value other than -1")
        else:
            out.append(int(d))
    total = volume(in_shape)
    known = volume(out)
    if infer >= 0:
        if known == 0 or total % known:
            raise ValueError(f"cannot infer the -1 in {tuple(dims)} for an input of shape {tuple(in_shape)}")
        out[infer] = total // known
    elif known != total:
        raise ValueError(
            f"reshape to {tuple(out)} ({known} elements) does not match the input volume {total} "
            f"(shape {tuple(in_shape)})"
        )
    return out


class IShuffleLayer(_ShapeReader):
    _layer_type = "SHUFFLE"
    _attrs = {
        "first_transpose": _IDENTITY_PERM,
        "reshape_dims": None,
        "second_transpose": _IDENTITY_PERM,
        "zero_is_placeholder": True,
    }
    _shape_inputs = (1,)
    _value_inputs = (1,)
    _max_inputs = 2

    @property
    def first_transpose(self) -> tuple[int, ...]:
        return self._a["first_transpose"]  # type: ignore[no-any-return]

    @first_transpose.setter
    def first_transpose(self, value: Any) -> None:
        self._a["first_transpose"] = _permutation(self, value, "first_transpose")
        self._touch()

    @property
    def second_transpose(self) -> tuple[int, ...]:
        return self._a["second_transpose"]  # type: ignore[no-any-return]

    @second_transpose.setter
    def second_transpose(self, value: Any) -> None:
        self._a["second_transpose"] = _permutation(self, value, "second_transpose")
        self._touch()

    @property
    def reshape_dims(self) -> Dims:
        # NOTE: TensorRT reports no dimensions (nbDims -1) when no reshape was set; the sim gives ().
        dims = self._a["reshape_dims"]
        return Dims(dims if dims is not None else ())

    @reshape_dims.setter
    def reshape_dims(self, value: Any) -> None:
        self._a["reshape_dims"] = Dims(as_dims(value, "reshape_dims"))
        if len(self._inputs) > 1:  # setting static dims drops a dynamic reshape input, like TensorRT
            old, me = self._inputs[1], self._canon
            if old is not None and me in old._consumers:
                old._consumers.remove(me)
            del self._inputs[1:]
        self._touch()

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x = infos[0]
        assert x is not None
        self._dyn_input = any(d < 0 for d in x.shape)  # for probes (see _run)
        _check_perm(self, self._a["first_transpose"], x.rank, "first_transpose")
        dyn = infos[1] if len(infos) > 1 else None
        dims = self._a["reshape_dims"]
        if dyn is not None:
            out_rank = _check_shape_input(self, dyn, "the reshape dimensions input")
        elif dims is not None:
            if sum(1 for d in dims if d == -1) > 1:
                raise self._fail(f"reshape_dims {tuple(dims)} may contain at most one -1")
            if any(d < -1 for d in dims):
                raise self._fail(f"reshape_dims {tuple(dims)} may not contain values below -1")
            if self._a["zero_is_placeholder"]:
                bad = [i for i, d in enumerate(dims) if d == 0 and i >= x.rank]
                if bad:
                    raise self._fail(
                        f"reshape_dims {tuple(dims)}: 0 at position {bad[0]} copies an input dimension, "
                        f"but the input has rank {x.rank}"
                    )
            elif 0 in dims and -1 in dims:
                raise self._fail(f"reshape_dims {tuple(dims)} mixes a literal 0 with -1 (zero_is_placeholder=False)")
            out_rank = len(dims)
        else:
            out_rank = x.rank
        _check_perm(self, self._a["second_transpose"], out_rank, "second_transpose")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0]
        r = x.dim()
        ft = self._a["first_transpose"][:r]
        if ft != _IDENTITY_PERM[:r]:
            x = x.permute(ft)
        dyn = _opt(inputs, 1)
        if dyn is not None:
            dims = _ints(dyn)
            if dims is None:
                if not rt.probe:
                    raise _fail(self, "the reshape dimensions are unknown")
                x = torch.empty(_probe_dims(rt, dyn.numel()), dtype=x.dtype, device="meta")
            else:
                x = x.reshape(_resolve_reshape(x.shape, dims, self._a["zero_is_placeholder"]))
        elif self._a["reshape_dims"] is not None:
            dims = self._a["reshape_dims"]
            try:
                x = x.reshape(_resolve_reshape(x.shape, dims, self._a["zero_is_placeholder"]))
            except ValueError:
                literal = all(d > 0 or (d == 0 and not self._a["zero_is_placeholder"]) for d in dims)
                if not (rt.probe and literal and self.__dict__.get("_dyn_input")):
                    raise
                # NOTE: a literal reshape of a dynamic input: the probe sizes need not fit it; the
                # volume is checked at run time, like TensorRT does.
                x = torch.empty(list(dims), dtype=x.dtype, device="meta")
        r2 = x.dim()
        st = self._a["second_transpose"][:r2]
        if st != _IDENTITY_PERM[:r2]:
            x = x.permute(st)
        return [x]


# ------------------------------------------------------------------------------------- slice
def _slice_indices(
    mode: SampleMode, start: int, size: int, stride: int, dim: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Input coordinates for one axis of an out-of-bounds slice, and the FILL validity mask."""
    coords = start + torch.arange(size, device=device, dtype=torch.int64) * stride
    if mode == SampleMode.WRAP:
        return torch.remainder(coords, dim), None
    if mode == SampleMode.CLAMP:
        return coords.clamp(0, dim - 1), None
    if mode == SampleMode.REFLECT:
        if dim == 1:
            return torch.zeros_like(coords), None
        period = 2 * dim - 2
        c = torch.remainder(coords.abs(), period)
        return torch.where(c >= dim, period - c, c), None
    valid = (coords >= 0) & (coords < dim)
    return coords.clamp(0, max(dim - 1, 0)), valid


class ISliceLayer(_ShapeReader):
    _layer_type = "SLICE"
    _attrs = {"start": (), "shape": (), "stride": (), "mode": SampleMode.STRICT_BOUNDS, "axes": ()}
    _shape_inputs = (1, 2, 3, 5)
    _value_inputs = (2, 5)
    _max_inputs = 6

    def _param_len(self, infos: list[TensorInfo | None], index: int, attr: str, what: str) -> int:
        info = infos[index] if index < len(infos) else None
        if info is not None:
            return _check_shape_input(self, info, what)
        return len(self._a[attr])

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x = infos[0]
        assert x is not None
        self._dyn_axes = {i for i, d in enumerate(x.shape) if d < 0}  # for probes (see _run)
        axes_info = infos[5] if len(infos) > 5 else None
        if axes_info is not None or self._a["axes"]:
            n = self._param_len(infos, 5, "axes", "the axes input")
            axes_val = axes_info.value() if axes_info is not None else torch.tensor(self._a["axes"])
            if axes_val is not None:
                norm = [_norm_axis(int(a), x.rank) for a in axes_val.reshape(-1).tolist()]
                if any(a is None for a in norm) or len(set(norm)) != len(norm):
                    raise self._fail(
                        f"axes {axes_val.reshape(-1).tolist()} must be distinct axes in [{-x.rank}, {x.rank})"
                    )
        else:
            n = x.rank
        for index, attr, what in ((1, "start", "start"), (2, "shape", "size"), (3, "stride", "stride")):
            got = self._param_len(infos, index, attr, f"the {what} input")
            if got != n:
                raise self._fail(f"{what} has {got} elements; expected {n} (one per sliced axis)")
        fill = infos[4] if len(infos) > 4 else None
        if fill is not None:
            if self._a["mode"] != SampleMode.FILL:
                raise self._fail(f"a fill value input (index 4) requires mode FILL, mode is {self._a['mode'].name}")
            if any(d != 1 for d in fill.shape):
                raise self._fail(f"the fill value must be a scalar (or one element), got shape {fill.shape}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0]
        r = x.dim()
        a = self._a
        axes_t = _opt(inputs, 5)
        if axes_t is not None:
            axes = _ints(axes_t)
            if axes is None:
                raise _fail(self, "the slice axes must be known at build time")
        else:
            axes = list(a["axes"]) or list(range(r))
        axes = [int(_norm_axis(ax, r)) for ax in axes]  # type: ignore[arg-type]
        size_t = _opt(inputs, 2)
        size = _ints(size_t) if size_t is not None else list(a["shape"])
        start_t, stride_t = _opt(inputs, 1), _opt(inputs, 3)
        start = _ints(start_t) if start_t is not None else list(a["start"])
        stride = _ints(stride_t) if stride_t is not None else list(a["stride"])
        if size is None or start is None or stride is None:
            if not rt.probe:
                raise _fail(self, "slice parameters are unknown")
            out_shape = list(x.shape)
            for ax, sz in zip(axes, size if size is not None else _probe_dims(rt, len(axes)), strict=True):
                out_shape[ax] = sz
            return [torch.empty(out_shape, dtype=x.dtype, device="meta")]
        if any(sz < 0 for sz in size):
            if rt.probe and size_t is not None:  # NOTE: a size computed from probe sizes and counts (a count
                # minus an input dim: sim._core.dds_probe): its sign is known only at run time, where it fails
                out_shape = list(x.shape)
                for ax, sz in zip(axes, size, strict=True):
                    out_shape[ax] = max(sz, 0)
                return [torch.empty(out_shape, dtype=x.dtype, device="meta")]
            raise _fail(self, f"slice size {tuple(size)} has a negative dimension")
        mode = a["mode"]
        view: list[slice] = [slice(None)] * r
        gathers: list[tuple[int, int, int, int, SampleMode]] = []
        for ax, st, sz, sd in zip(axes, start, size, stride, strict=True):
            d = int(x.shape[ax])
            if sz == 0:
                view[ax] = slice(0, 0)
                continue
            last = st + (sz - 1) * sd
            lo, hi = min(st, last), max(st, last)
            if 0 <= lo and hi < d:
                if sd > 0:
                    view[ax] = slice(st, last + 1, sd)
                    continue
                gathers.append((ax, st, sz, sd, SampleMode.CLAMP))  # in bounds: any mode reads the same
                continue
            if mode == SampleMode.STRICT_BOUNDS and rt.probe and (
                ax in self.__dict__.get("_dyn_axes", ())
                or any(getattr(t, "_stand_in", False) for t in (start_t, size_t, stride_t))
            ):  # a probe size of a dynamic dim, or parameters that stand in for values known only at run time
                # (sizes read from a shape input's values, see IConcatenationLayer._call): checked at run time
                gathers.append((ax, st, sz, sd, SampleMode.CLAMP))
                continue
            if mode == SampleMode.STRICT_BOUNDS:
                raise _fail(
                    self,
                    f"slice on axis {ax} reads coordinates {lo}..{hi}, outside [0, {d}) (mode STRICT_BOUNDS)",
                )
            if d == 0 and mode != SampleMode.FILL:
                raise _fail(self, f"cannot slice an empty axis {ax} with mode {mode.name}")
            gathers.append((ax, st, sz, sd, mode))
        y = x[tuple(view)] if any(v != slice(None) for v in view) else x
        mask: torch.Tensor | None = None
        for ax, st, sz, sd, ax_mode in gathers:
            d = int(x.shape[ax])
            key = ("slice", id(self), ax, st, sz, sd, d, ax_mode, y.device)
            hit = rt.cache.get(key)
            if hit is None:
                hit = rt.cache[key] = _slice_indices(ax_mode, st, sz, sd, d, y.device)
            idx, valid = hit
            if d == 0:
                shape = list(y.shape)
                shape[ax] = sz
                y = torch.zeros(shape, dtype=y.dtype, device=y.device)
            else:
                y = y.index_select(ax, idx)
            if valid is not None:
                m = valid.view([-1 if k == ax else 1 for k in range(r)])
                mask = m if mask is None else mask & m
        if mask is not None:
            fill_t = _opt(inputs, 4)
            if fill_t is not None:
                fill = fill_t.reshape(()).to(device=y.device, dtype=y.dtype)
            else:
                fill = torch.zeros((), dtype=y.dtype, device=y.device)
            y = torch.where(mask.to(y.device), y, fill)
        return [y]


# ----------------------------------------------------------------------------- concatenation
class IConcatenationLayer(_KeepsType):
    _layer_type = "CONCATENATION"
    _attrs = {"axis": 0}

    def _required_inputs(self) -> int:
        return len(self._inputs)

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        if not infos:
            raise self._fail("concatenation needs at least one input")
        first = infos[0]
        assert first is not None
        axis = self._a["axis"]
        if not 0 <= axis < max(first.rank, 1) or first.rank == 0:
            raise self._fail(f"axis {axis} is out of range for inputs of rank {first.rank} (need 0 <= axis < rank)")
        for i, info in enumerate(infos[1:], 1):
            assert info is not None
            if info.dtype != first.dtype:
                raise self._fail(f"input {i} has type {info.dtype.name}, input 0 has {first.dtype.name}")
            if info.rank != first.rank:
                raise self._fail(f"input {i} has rank {info.rank}, input 0 has rank {first.rank}")
            for k, (a, b) in enumerate(zip(first.shape, info.shape, strict=True)):
                if k != axis and a >= 0 and b >= 0 and a != b:
                    raise self._fail(
                        f"input {i} shape {info.shape} differs from input 0 shape {first.shape} in dimension {k} "
                        f"(only the concatenation axis {axis} may differ)"
                    )

    @property
    def _dds(self) -> bool:  # type: ignore[override]
        """Two probes for a shape tensor made of known and unknown values (see _call)."""
        ins = self.__dict__.get("_inputs") or []
        if len(ins) < 2 or any(t is None for t in ins):
            return False
        probes = [t._info().probes[0] for t in ins]
        return all(p.dim() == 1 and p.dtype in (torch.int32, torch.int64) for p in probes) and any(
            _is_meta(p) for p in probes) and not all(_is_meta(p) for p in probes)

    def _call(self, args: list[Any], rt: RunContext) -> Sequence[torch.Tensor]:
        # NOTE: a shape tensor built from known parts and parts whose values are unknown while probing
        # (sizes read from a shape input's values): the unknown elements stand at the probe size, as
        # a layer reading an unknown shape tensor takes them, and the known ones keep their values
        # (TensorRT's shape analysis keeps them too), so only the unknown dims come out -1.
        if rt.probe and any(_is_meta(a) for a in args) and any(
            isinstance(a, torch.Tensor) and not _is_meta(a) for a in args
        ) and all(
            isinstance(a, torch.Tensor) and a.dim() == 1 and a.dtype in (torch.int32, torch.int64) for a in args
        ) and sum(a.numel() for a in args) <= 64:
            p = PROBE_SIZES[min(rt.probe_index, len(PROBE_SIZES) - 1)]
            args = [torch.full(tuple(a.shape), p, dtype=a.dtype) if _is_meta(a) else a for a in args]
            outs = super()._call(args, rt)
            for o in outs:  # a shape whose values are partly stand-ins: a slice reading it is checked at run time
                o._stand_in = True  # type: ignore[attr-defined]
            return outs
        return super()._call(args, rt)

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        return [torch.cat(_same_device(list(inputs)), dim=self._a["axis"])]


# ------------------------------------------------------------------------------------ gather
class IGatherLayer(_KeepsType):
    _layer_type = "GATHER"
    _attrs = {"axis": 0, "num_elementwise_dims": 0, "mode": GatherMode.DEFAULT}

    def _required_inputs(self) -> int:
        return 2

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x, idx = infos[0], infos[1]
        assert x is not None and idx is not None
        if idx.dtype not in _INDEX_TYPES:
            raise self._fail(f"indices must be INT32 or INT64, got {idx.dtype.name}")
        mode, axis, b = self._a["mode"], self._a["axis"], self._a["num_elementwise_dims"]
        if x.rank < 1:
            raise self._fail("the data input must have rank >= 1")
        if b < 0:
            raise self._fail(f"num_elementwise_dims must be >= 0, got {b}")
        if mode == GatherMode.DEFAULT:
            if not 0 <= axis < x.rank:
                raise self._fail(f"axis {axis} is out of range for data of rank {x.rank} (need 0 <= axis < rank)")
            if b > 1:
                raise self._fail(f"num_elementwise_dims must be 0 or 1 in DEFAULT mode, got {b}")
            if b == 1:
                if axis < 1 or idx.rank < 1:
                    raise self._fail("with num_elementwise_dims=1 the gather axis must be >= 1 and indices rank >= 1")
                broadcast_shape(x.shape[:1], idx.shape[:1], self._fail)
        elif mode == GatherMode.ELEMENT:
            if not 0 <= axis < x.rank:
                raise self._fail(f"axis {axis} is out of range for data of rank {x.rank} (need 0 <= axis < rank)")
            if b != 0:
                raise self._fail("num_elementwise_dims must be 0 in ELEMENT mode")
            if idx.rank != x.rank:
                raise self._fail(f"ELEMENT mode needs indices of the data's rank {x.rank}, got rank {idx.rank}")
        else:
            if idx.rank < 1 or idx.shape[-1] < 0:
                raise self._fail("ND mode needs indices of rank >= 1 with a static last dimension")
            k = idx.shape[-1]
            if b >= min(x.rank, idx.rank):
                raise self._fail(f"num_elementwise_dims {b} must be less than the ranks of data and indices")
            if b + k > x.rank:
                raise self._fail(
                    f"ND indices address {k} dimensions after {b} elementwise ones; data has rank {x.rank}"
                )
            for i in range(b):
                if x.shape[i] >= 0 and idx.shape[i] >= 0 and x.shape[i] != idx.shape[i]:
                    raise self._fail(f"elementwise dimension {i} differs: data {x.shape}, indices {idx.shape}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x, idx = inputs[0], inputs[1]
        if idx.device != x.device:
            idx = idx.to(x.device)
        mode, axis, b = self._a["mode"], self._a["axis"], self._a["num_elementwise_dims"]
        if mode == GatherMode.DEFAULT:
            if x.shape[axis] == 0:  # nothing to read: every index is out of range
                return [self._all_out_of_range(x, idx)]
            idx, ok = _gather_index(idx, x.shape[axis])
            if b == 0:
                out = x.index_select(axis, idx.reshape(-1))
                out = out.reshape(tuple(x.shape[:axis]) + tuple(idx.shape) + tuple(x.shape[axis + 1 :]))
                return [_zero_where_not(out, ok, axis)]
            n = max(x.shape[0], idx.shape[0])
            x = x.expand(n, *x.shape[1:])
            idx, ok = idx.expand(n, *idx.shape[1:]), ok.expand(n, *ok.shape[1:])
            lead = torch.arange(n, device=x.device).view(n, *([1] * (idx.dim() - 1)))
            g = _zero_where_not(x.movedim(axis, 1)[lead, idx], ok, 0)  # (n, I..., pre..., post...)
            k, p = idx.dim() - 1, axis - 1
            perm = [0, *range(k + 1, k + 1 + p), *range(1, k + 1), *range(k + 1 + p, g.dim())]
            return [g.permute(perm)]
        if mode == GatherMode.ELEMENT:
            if x.shape[axis] == 0:
                return [torch.zeros(idx.shape, dtype=x.dtype, device=x.device)]
            idx, ok = _gather_index(idx, x.shape[axis])
            return [_zero_where_not(torch.gather(x, axis, idx), ok, 0)]
        k = idx.shape[-1]
        batch = tuple(x.shape[:b])
        nb = volume(batch)
        xf = x.reshape(nb, *x.shape[b:])
        idf = idx.reshape(nb, *idx.shape[b:])
        parts = [_gather_index(idf[..., j], max(xf.shape[1 + j], 1)) for j in range(k)]
        ok = torch.ones(idf.shape[:-1], dtype=torch.bool, device=x.device)
        for j, (_, okj) in enumerate(parts):
            ok = ok & okj & (xf.shape[1 + j] > 0)
        lead = torch.arange(nb, device=x.device).view(nb, *([1] * (idf.dim() - 2)))
        if xf.numel() == 0:
            out = torch.zeros((nb, *idf.shape[1:-1], *xf.shape[1 + k :]), dtype=x.dtype, device=x.device)
        else:
            out = _zero_where_not(xf[(lead, *(c for c, _ in parts))], ok, 0)
        return [out.reshape(*batch, *out.shape[1:])]

    def _all_out_of_range(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        axis, b = self._a["axis"], self._a["num_elementwise_dims"]
        if b == 0:
            shape = (*x.shape[:axis], *idx.shape, *x.shape[axis + 1 :])
        else:
            n = max(x.shape[0], idx.shape[0])
            shape = (n, *x.shape[1:axis], *idx.shape[1:], *x.shape[axis + 1 :])
        return torch.zeros(shape, dtype=x.dtype, device=x.device)


# ----------------------------------------------------------------------------------- scatter
class IScatterLayer(_KeepsType):
    _layer_type = "SCATTER"
    _attrs = {"axis": 0, "mode": ScatterMode.ELEMENT}

    def _required_inputs(self) -> int:
        return 3

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        data, idx, upd = infos[0], infos[1], infos[2]
        assert data is not None and idx is not None and upd is not None
        if idx.dtype not in _INDEX_TYPES:
            raise self._fail(f"indices must be INT32 or INT64, got {idx.dtype.name}")
        if upd.dtype != data.dtype:
            raise self._fail(f"updates type {upd.dtype.name} differs from data type {data.dtype.name}")
        if self._a["mode"] == ScatterMode.ELEMENT:
            axis = self._a["axis"]
            if not 0 <= axis < data.rank:
                raise self._fail(f"axis {axis} is out of range for data of rank {data.rank}")
            if idx.rank != data.rank or upd.rank != data.rank:
                raise self._fail(
                    f"ELEMENT mode needs data, indices and updates of equal rank, got {data.rank}, {idx.rank}, "
                    f"{upd.rank}"
                )
            if any(a >= 0 and c >= 0 and a != c for a, c in zip(idx.shape, upd.shape, strict=True)):
                raise self._fail(f"updates shape {upd.shape} must equal indices shape {idx.shape}")
        else:
            if idx.rank < 1 or idx.shape[-1] < 0:
                raise self._fail("ND mode needs indices of rank >= 1 with a static last dimension")
            k = idx.shape[-1]
            if k > data.rank:
                raise self._fail(f"ND indices address {k} dimensions, data has rank {data.rank}")
            expect = tuple(idx.shape[:-1]) + tuple(data.shape[k:])
            if len(expect) != upd.rank or any(
                a >= 0 and c >= 0 and a != c for a, c in zip(expect, upd.shape, strict=True)
            ):
                raise self._fail(f"updates shape {upd.shape} must be indices.shape[:-1] + data.shape[{k}:] = {expect}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        data, idx, upd = _same_device(list(inputs[:3]))
        if self._a["mode"] == ScatterMode.ELEMENT:
            axis = self._a["axis"]
            return [data.scatter(axis, _wrap_index(idx, data.shape[axis]), upd)]
        k = idx.shape[-1]
        comps = tuple(_wrap_index(idx[..., j], data.shape[j]) for j in range(k))
        return [data.index_put(comps, upd)]


# ------------------------------------------------------------------------------------ select
class ISelectLayer(_KeepsType):
    _layer_type = "SELECT"
    _data_input = 1

    def _required_inputs(self) -> int:
        return 3

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        cond, a, b = infos[0], infos[1], infos[2]
        assert cond is not None and a is not None and b is not None
        if cond.dtype != DataType.BOOL:
            raise self._fail(f"the condition must be BOOL, got {cond.dtype.name}")
        if a.dtype != b.dtype:
            raise self._fail(f"then_input ({a.dtype.name}) and else_input ({b.dtype.name}) must have the same type")
        broadcast_shape(broadcast_shape(cond.shape, a.shape, self._fail), b.shape, self._fail)

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        cond, a, b = _same_device(list(inputs[:3]))
        return [torch.where(cond, a, b)]


# ------------------------------------------------------------------------------------- shape
class IShapeLayer(ILayer):
    _layer_type = "SHAPE"

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0]
        if rt.probe:
            return [torch.tensor(list(x.shape), dtype=torch.int64)]
        key = ("shape", id(self), tuple(x.shape), x.device)
        hit = rt.cache.get(key)
        if hit is None:
            hit = rt.cache[key] = torch.tensor(list(x.shape), dtype=torch.int64, device=x.device)
        return [hit]


# -------------------------------------------------------------------------------------- fill
def _py_float(value: Any) -> float | None:
    if isinstance(value, (bool, int, float, np.integer, np.floating)):
        return float(value)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return float(value)
    return None


def _py_int(value: Any) -> int | None:
    if isinstance(value, (bool, int, np.integer)):
        return int(value)
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "biu":
        return int(value)
    return None


class IFillLayer(_ShapeReader):
    _layer_type = "FILL"
    _attrs = {
        "shape": (),
        "operation": FillOperation.LINSPACE,
        "alpha": 0.0,
        "beta": 1.0,
        "to_type": DataType.FLOAT,
        "_alpha_i64": 0,
        "_beta_i64": 1,
        "_int64": False,
    }
    _shape_inputs = (0,)
    _value_inputs = (0,)
    _max_inputs = 3

    def _required_inputs(self) -> int:
        return 0

    # NOTE: like TensorRT's Python binding, a value that converts to a float sets the double alpha,
    # one that converts to an int also sets the int64 alpha; anything else is silently ignored.
    def _set_param(self, name: str, value: Any) -> None:
        f, i = _py_float(value), _py_int(value)
        if f is not None:
            self._a[name] = f
            self._a["_int64"] = False
        if i is not None:
            self._a[f"_{name}_i64"] = i
            self._a["_int64"] = True
        self._touch()

    @property
    def alpha(self) -> float | int:
        return self._a["_alpha_i64"] if self._a["_int64"] else self._a["alpha"]  # type: ignore[no-any-return]

    @alpha.setter
    def alpha(self, value: Any) -> None:
        self._set_param("alpha", value)

    @property
    def beta(self) -> float | int:
        return self._a["_beta_i64"] if self._a["_int64"] else self._a["beta"]  # type: ignore[no-any-return]

    @beta.setter
    def beta(self, value: Any) -> None:
        self._set_param("beta", value)

    def is_alpha_beta_int64(self) -> bool:
        return bool(self._a["_int64"])

    def _out_dtypes(self, in_dtypes: list[DataType | None], outs: list[torch.Tensor]) -> list[DataType]:
        return [self._a["to_type"]]

    def _check(self, infos: list[TensorInfo | None]) -> None:
        op, tt = self._a["operation"], self._a["to_type"]
        if op == FillOperation.LINSPACE:
            if tt not in (DataType.INT32, DataType.INT64, DataType.FLOAT):
                raise self._fail(f"LINSPACE output type must be INT32, INT64 or FLOAT, got {tt.name}")
        elif tt not in (DataType.FLOAT, DataType.HALF):
            raise self._fail(f"{op.name} output type must be FLOAT or HALF, got {tt.name}")
        shape_info = infos[0] if infos else None
        if shape_info is not None:
            rank = _check_shape_input(self, shape_info, "the dimensions input")
        else:
            rank = len(self._a["shape"])
            if any(d < 0 for d in self._a["shape"]):
                raise self._fail(f"the fill dimensions {self._a['shape']} must not be negative")
        alpha = infos[1] if len(infos) > 1 else None
        beta = infos[2] if len(infos) > 2 else None
        if (alpha is None) != (beta is None):
            raise self._fail("alpha (input 1) and beta (input 2) must both be static or both be tensors")
        if alpha is not None and beta is not None:
            if alpha.dtype != beta.dtype:
                raise self._fail(f"alpha and beta must have the same type, got {alpha.dtype.name} and {beta.dtype.name}")
            if alpha.rank != 0:
                raise self._fail(f"alpha must be a scalar (rank 0), got shape {alpha.shape}")
            if op == FillOperation.LINSPACE:
                if beta.rank != 1 or beta.shape[0] not in (rank, -1):
                    raise self._fail(f"LINSPACE beta must be a 1-D tensor of {rank} elements, got shape {beta.shape}")
            elif beta.rank != 0:
                raise self._fail(f"{op.name} beta must be a scalar (rank 0), got shape {beta.shape}")
        elif op == FillOperation.LINSPACE and rank > 1:
            raise self._fail(
                f"LINSPACE with static alpha/beta makes a 1-D output; for a rank-{rank} output pass beta as a "
                "1-D tensor (set_input(2)) and alpha as a scalar tensor (set_input(1))"
            )

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        a = self._a
        tt = a["to_type"]
        dtype = _dtypes.torch_dtype(tt)
        dims_t = _opt(inputs, 0)
        dims = _ints(dims_t) if dims_t is not None else list(a["shape"])
        alpha_t, beta_t = _opt(inputs, 1), _opt(inputs, 2)
        if dims is None:
            if not rt.probe:
                raise _fail(self, "the fill dimensions are unknown")
            return [torch.empty(_probe_dims(rt, dims_t.numel()), dtype=dtype, device="meta")]
        if any(d < 0 for d in dims):
            raise _fail(self, f"fill dimensions {tuple(dims)} must not be negative")
        if alpha_t is not None:
            device = alpha_t.device if beta_t is None or beta_t.device == alpha_t.device else beta_t.device
        else:
            device = torch.device("cpu") if rt.probe else rt.device
        if rt.probe and (device.type == "meta" or volume(dims) > 4096 or a["operation"] != FillOperation.LINSPACE):
            return [torch.empty(dims, dtype=dtype, device="meta")]
        is_int = tt in _INDEX_TYPES
        if a["operation"] == FillOperation.LINSPACE:
            if alpha_t is not None and beta_t is not None:
                work = torch.int64 if is_int else torch.float32
                alpha = alpha_t.reshape(()).to(device=device, dtype=work)
                beta = beta_t.reshape(-1).to(device=device, dtype=work)
            elif is_int and a["_int64"]:
                alpha = torch.tensor(a["_alpha_i64"], dtype=torch.int64, device=device)
                beta = torch.tensor([a["_beta_i64"]] * len(dims), dtype=torch.int64, device=device)
            else:
                work = torch.int64 if is_int else torch.float32
                alpha = torch.tensor(a["alpha"], dtype=torch.float64, device=device).to(work)
                beta = torch.tensor([a["beta"]] * len(dims), dtype=torch.float64, device=device).to(work)
            out = alpha.expand(dims) if dims else alpha
            for k, n in enumerate(dims):
                ramp = torch.arange(n, device=device, dtype=beta.dtype) * beta[k]
                out = out + ramp.view([-1 if j == k else 1 for j in range(len(dims))])
            return [out.to(dtype).contiguous()]
        lo = alpha_t.reshape(()).float() if alpha_t is not None else a["alpha"]
        hi = beta_t.reshape(()).float() if beta_t is not None else a["beta"]
        if a["operation"] == FillOperation.RANDOM_UNIFORM:
            out = torch.rand(dims, device=device) * (hi - lo) + lo
        else:
            out = torch.randn(dims, device=device) * hi + lo
        return [out.to(dtype)]


# ----------------------------------------------------------------------------------- one-hot
class IOneHotLayer(_ShapeReader):
    _layer_type = "ONE_HOT"
    _data_input = 1  # the output takes the values' type
    _attrs = {"axis": -1}
    _shape_inputs = (2,)
    _value_inputs = (2,)

    def _required_inputs(self) -> int:
        return 3

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        idx, values, depth = infos[0], infos[1], infos[2]
        assert idx is not None and values is not None and depth is not None
        if idx.dtype not in _INDEX_TYPES:
            raise self._fail(f"indices must be INT32 or INT64, got {idx.dtype.name}")
        if values.rank != 1 or values.shape[0] != 2:
            raise self._fail(f"values must be a 1-D tensor [off_value, on_value], got shape {values.shape}")
        if depth.dtype not in _INDEX_TYPES or depth.rank != 0:
            raise self._fail(f"depth must be an INT32 scalar (rank 0), got {depth.dtype.name} {depth.shape}")
        axis = self._a["axis"]
        if not -(idx.rank + 1) <= axis <= idx.rank:
            raise self._fail(f"axis {axis} is out of range [{-(idx.rank + 1)}, {idx.rank}] for indices of rank {idx.rank}")
        v = depth.value()
        if v is not None and int(v.reshape(-1)[0]) < 1:
            raise self._fail(f"depth must be positive, got {int(v.reshape(-1)[0])}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        idx, values, depth_t = inputs[0], inputs[1], inputs[2]
        r = idx.dim()
        axis = self._a["axis"]
        axis = axis + r + 1 if axis < 0 else axis
        depth_v = _ints(depth_t)
        if depth_v is None:
            if not rt.probe:
                raise _fail(self, "the one-hot depth is unknown")
            depth = _probe_dims(rt, 1)[0]
        else:
            depth = depth_v[0]
        if values.device != idx.device:
            values = values.to(idx.device)
        i = _wrap_index(idx, depth)
        classes = torch.arange(depth, device=idx.device)
        hot = (i.unsqueeze(-1) == classes).movedim(-1, axis)
        return [torch.where(hot, values[1], values[0])]


# ---------------------------------------------------------------------------------- non-zero
class INonZeroLayer(ILayer):
    _layer_type = "NON_ZERO"
    _attrs = {"indices_type": DataType.INT32}
    _dds = True

    @property
    def indices_type(self) -> DataType:
        return self._a["indices_type"]  # type: ignore[no-any-return]

    @indices_type.setter
    def indices_type(self, value: Any) -> None:
        dt = DataType(int(value))
        if dt not in _INDEX_TYPES:
            raise self._fail(f"indices_type must be INT32 or INT64, got {dt.name}")
        self._a["indices_type"] = dt
        self._touch()

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x = infos[0]
        assert x is not None
        if x.dtype in (DataType.FP8, DataType.INT4, DataType.FP4, DataType.E8M0, DataType.INT64, DataType.UINT8):
            # NOTE: TensorRT 10.16's operator page lists bool, int8, int32, float16, float32, bfloat16
            raise self._fail(f"NonZero does not accept {x.dtype.name} input")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0]
        dtype = _dtypes.torch_dtype(self._a["indices_type"])
        if rt.probe:
            # NOTE: the count of non-zero values is data-dependent; two probe sizes make it -1.
            n = dds_probe(rt, self)
            return [torch.empty((x.dim(), n), dtype=dtype, device="meta")]
        return [torch.nonzero(x).t().to(dtype).contiguous()]


# -------------------------------------------------------------------------- reverse sequence
class IReverseSequenceLayer(_KeepsType):
    _layer_type = "REVERSE_SEQUENCE"
    _attrs = {"batch_axis": 1, "sequence_axis": 0}

    def _required_inputs(self) -> int:
        return 2

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x, lens = infos[0], infos[1]
        assert x is not None and lens is not None
        if x.rank < 2:
            raise self._fail(f"the input must have rank >= 2, got {x.rank}")
        b, s = self._a["batch_axis"], self._a["sequence_axis"]
        if not (0 <= b < x.rank and 0 <= s < x.rank) or b == s:
            raise self._fail(f"batch_axis {b} and sequence_axis {s} must be different axes in [0, {x.rank})")
        if lens.dtype not in _INDEX_TYPES or lens.rank != 1:
            raise self._fail(f"sequence_lens must be a 1-D INT32/INT64 tensor, got {lens.dtype.name} {lens.shape}")
        if lens.shape[0] >= 0 and x.shape[b] >= 0 and lens.shape[0] != x.shape[b]:
            raise self._fail(
                f"sequence_lens has {lens.shape[0]} elements; the batch axis {b} has size {x.shape[b]}"
            )

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x, lens = inputs[0], inputs[1]
        b, s = self._a["batch_axis"], self._a["sequence_axis"]
        steps = x.shape[s]
        lens = lens.to(x.device).long().clamp(0, steps)
        t = torch.arange(steps, device=x.device).view(steps, 1)
        src = torch.where(t < lens.view(1, -1), lens.view(1, -1) - 1 - t, t)  # (T, B)
        if s > b:
            src = src.t()
        view = [1] * x.dim()
        view[s], view[b] = steps, x.shape[b]
        return [torch.gather(x, s, src.reshape(view).expand(x.shape))]


# ------------------------------------------------------------------------- squeeze/unsqueeze
class _AxesLayer(_KeepsType):
    _shape_inputs = (1,)
    _max_inputs = 2
    _unsqueeze: ClassVar[bool] = False

    def _required_inputs(self) -> int:
        return 2

    def _axes(self, axes: list[int], rank: int) -> list[int]:
        out_rank = rank + len(axes) if self._unsqueeze else rank
        norm = [_norm_axis(a, out_rank) for a in axes]
        if any(a is None for a in norm) or len(set(norm)) != len(norm):
            raise _fail(self, f"axes {axes} must be distinct axes in [{-out_rank}, {out_rank})")
        return sorted(int(a) for a in norm)  # type: ignore[arg-type]

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x, axes = infos[0], infos[1]
        assert x is not None and axes is not None
        if axes.dtype not in _INDEX_TYPES or axes.rank > 1:
            raise self._fail(f"axes must be a 1-D INT32/INT64 tensor, got {axes.dtype.name} {axes.shape}")
        v = axes.value()
        if v is None:
            raise self._fail("axes must be a build-time constant")
        norm = self._axes([int(a) for a in v.reshape(-1).tolist()], x.rank)
        if not self._unsqueeze:
            bad = [a for a in norm if x.shape[a] not in (1, -1)]
            if bad:
                raise self._fail(f"cannot squeeze axis {bad[0]} of size {x.shape[bad[0]]} (shape {x.shape})")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0]
        vals = _ints(inputs[1])
        if vals is None:
            raise _fail(self, "axes must be a build-time constant")
        axes = self._axes(vals, x.dim())
        shape = list(x.shape)
        if self._unsqueeze:
            for a in axes:
                shape.insert(a, 1)
        else:
            keep = [d for k, d in enumerate(shape) if k not in axes]
            if any(shape[a] != 1 for a in axes):
                if rt.probe:  # a dynamic dimension's probe size; it must be 1 at run time
                    return [torch.empty(keep, dtype=x.dtype, device="meta")]
                raise _fail(self, f"cannot squeeze axes {axes} of shape {tuple(shape)}")
            shape = keep
        return [x.reshape(shape)]


class ISqueezeLayer(_AxesLayer):
    _layer_type = "SQUEEZE"


class IUnsqueezeLayer(_AxesLayer):
    _layer_type = "UNSQUEEZE"
    _unsqueeze = True


# ------------------------------------------------------------------------------ quantization
def _round_fp4(v: torch.Tensor) -> torch.Tensor:
    """Round float32 values to FP4 (E2M1: 0, 0.5, 1, 1.5, 2, 3, 4, 6), ties to even, saturating."""
    m = v.abs().clamp(max=_FP4_MAX)
    step = torch.where(m < 2, 0.5, torch.where(m < 4, 1.0, 2.0))
    q = torch.round(m / step) * step
    return torch.where(torch.isnan(v), v, torch.copysign(q, v))


def _round_fp8(v: torch.Tensor) -> torch.Tensor:
    """FP8 E4M3 values (torch.float8_e4m3fn), round to nearest even, saturating at +-448."""
    return v.clamp(-_FP8_MAX, _FP8_MAX).to(torch.float8_e4m3fn)


def _quantize_values(q: torch.Tensor, to_type: DataType) -> torch.Tensor:
    """Round/saturate already-scaled float32 values into ``to_type`` (INT4/FP4 carried in float32)."""
    if to_type == DataType.INT8:
        return torch.round(q).clamp(-128, 127).to(torch.int8)
    if to_type == DataType.INT4:
        return torch.round(q).clamp(-8, 7)
    if to_type == DataType.FP8:
        return _round_fp8(q)
    return _round_fp4(q)


class _QDQLayer(ILayer):
    """Shared validation and scale broadcasting of IQuantizeLayer and IDequantizeLayer."""

    _max_inputs = 3
    _quantize: ClassVar[bool] = True

    def _required_inputs(self) -> int:
        return 2

    def _out_dtypes(self, in_dtypes: list[DataType | None], outs: list[torch.Tensor]) -> list[DataType]:
        return [self._a["to_type"]]

    def _blocks(self, x_shape: Sequence[int], s_shape: Sequence[int]) -> list[int] | None:
        """Per-dimension block sizes of block quantization (None when not a block scale)."""
        if len(s_shape) != len(x_shape) or len(x_shape) < 2:
            return None
        bs = self._a.get("block_shape") or ()
        if bs:
            return [x if b == -1 else b for b, x in zip(bs, x_shape, strict=True)]
        return [x // s if s > 0 and x >= 0 else 1 for x, s in zip(x_shape, s_shape, strict=True)]

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x, scale = infos[0], infos[1]
        assert x is not None and scale is not None
        tt = self._a["to_type"]
        name = "quantize" if self._quantize else "dequantize"
        if self._quantize:
            if x.dtype not in _dtypes.FLOATS:
                raise self._fail(f"quantize input must be FLOAT, HALF or BF16, got {x.dtype.name}")
            if tt not in _QUANT_TYPES:
                raise self._fail(f"quantize output type must be INT8, FP8, INT4 or FP4, got {tt.name}")
        else:
            if x.dtype not in _QUANT_TYPES:
                raise self._fail(f"dequantize input must be INT8, FP8, INT4 or FP4, got {x.dtype.name}")
            if tt not in _dtypes.FLOATS:
                raise self._fail(f"dequantize output type must be FLOAT, HALF or BF16, got {tt.name}")
        if scale.dtype not in _dtypes.FLOATS:
            raise self._fail(f"the {name} scale must be FLOAT, HALF or BF16, got {scale.dtype.name}")
        if x.rank == 0:  # NvInfer.h: "The input tensor for this layer must not be a scalar."
            raise self._fail(f"the {name} input must not be a scalar (0-D); reshape it to [1]")
        known = scale.value()
        if known is not None and known.numel() and not bool((known.float() > 0).all()):
            raise self._fail(f"the {name} scale coefficients must all be positive")
        if self._network._strongly_typed and self._quantize and scale.dtype != x.dtype:
            raise self._fail(f"the scale type {scale.dtype.name} must match the input type {x.dtype.name}")
        bs = tuple(self._a.get("block_shape") or ())
        if bs and len(bs) != x.rank:
            raise self._fail(f"block_shape {bs} must have the input rank {x.rank}")
        axis = self._a["axis"]
        if volume(d for d in scale.shape if d >= 0) != 1 or any(d < 0 for d in scale.shape):
            if scale.rank == 1 and not bs and (x.rank != len(scale.shape) or x.rank == 1):
                if not 0 <= axis < x.rank:
                    raise self._fail(
                        f"a per-channel scale of shape {scale.shape} needs an axis in [0, {x.rank}), axis is {axis}"
                    )
                if scale.shape[0] >= 0 and x.shape[axis] >= 0 and scale.shape[0] != x.shape[axis]:
                    raise self._fail(
                        f"per-channel scale has {scale.shape[0]} elements; input dimension {axis} has {x.shape[axis]}"
                    )
            elif scale.rank == x.rank:
                blocks = self._blocks(x.shape, scale.shape)
                if blocks is None:
                    raise self._fail(f"scale shape {scale.shape} does not fit the input shape {x.shape}")
                for d, (xs, ss, b) in enumerate(zip(x.shape, scale.shape, blocks, strict=True)):
                    if xs >= 0 and ss >= 0 and (b < 1 or -(-xs // b) != ss):
                        raise self._fail(
                            f"block scale shape {scale.shape} does not match input shape {x.shape} "
                            f"(dimension {d}: block {b})"
                        )
            else:
                raise self._fail(
                    f"scale of shape {scale.shape} must be a scalar, a 1-D per-channel tensor or have the input "
                    f"rank {x.rank} (block quantization)"
                )
        zp = infos[2] if len(infos) > 2 else None
        if zp is not None:
            if tuple(zp.shape) != tuple(scale.shape):
                raise self._fail(f"zero point shape {zp.shape} must equal the scale shape {scale.shape}")
            v = zp.value()
            if v is not None and bool((v.float() != 0).any()):
                raise self._fail("the zero point must be all zeros (TensorRT supports symmetric quantization only)")

    def _scale(self, s: torch.Tensor, x_shape: Sequence[int], rt: RunContext) -> torch.Tensor:
        """The scale broadcast against the input: scalar, per-channel view or repeated blocks."""
        s = s.float()
        if s.numel() == 1:
            return s.reshape(())
        r = len(x_shape)
        if s.dim() == 1 and (r != 1 or not self._a.get("block_shape")):
            view = [1] * r
            view[self._a["axis"]] = s.shape[0]
            return s.view(view)
        blocks = self._blocks(x_shape, s.shape) or [1] * r
        for d, b in enumerate(blocks):
            if b > 1:
                s = s.repeat_interleave(b, dim=d)
        sl = tuple(slice(0, n) for n in x_shape)
        return s[sl]

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x, s = inputs[0], inputs[1]
        if s.device != x.device:
            s = s.to(x.device)
        scale = self._scale(s, x.shape, rt)
        zp_t = _opt(inputs, 2)
        zp = self._scale(zp_t.to(x.device), x.shape, rt) if zp_t is not None else None
        tt = self._a["to_type"]
        if self._quantize:
            q = x.float() / scale
            if zp is not None:
                q = torch.round(q) + zp
            return [_quantize_values(q, tt)]
        v = x.float()
        if zp is not None:
            v = v - zp
        return [(v * scale).to(_dtypes.torch_dtype(tt))]


class IQuantizeLayer(_QDQLayer):
    _layer_type = "QUANTIZE"
    _attrs = {"axis": -1, "block_shape": (), "to_type": DataType.INT8}


class IDequantizeLayer(_QDQLayer):
    _layer_type = "DEQUANTIZE"
    _attrs = {"axis": -1, "block_shape": (), "to_type": DataType.FLOAT}
    _quantize = False


class IDynamicQuantizeLayer(ILayer):
    _layer_type = "DYNAMIC_QUANTIZE"
    _attrs = {
        "axis": -1,
        "block_size": 16,
        "block_shape": (),
        "to_type": DataType.FP4,
        "scale_type": DataType.FP8,
    }
    _num_outputs = 2
    _max_inputs = 2

    def _out_dtypes(self, in_dtypes: list[DataType | None], outs: list[torch.Tensor]) -> list[DataType]:
        return [self._a["to_type"], self._a["scale_type"]]

    def _blocks(self, shape: Sequence[int]) -> list[int]:
        bs = self._a["block_shape"]
        if bs:
            return [s if b == -1 else b for b, s in zip(bs, shape, strict=True)]
        blocks = [1] * len(shape)
        blocks[int(_norm_axis(self._a["axis"], len(shape)))] = self._a["block_size"]  # type: ignore[arg-type]
        return blocks

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x = infos[0]
        assert x is not None
        a = self._a
        if x.dtype not in _dtypes.FLOATS:
            raise self._fail(f"dynamic quantize input must be FLOAT, HALF or BF16, got {x.dtype.name}")
        if a["to_type"] == DataType.FP4:
            if a["scale_type"] not in (DataType.FP8, DataType.E8M0):
                raise self._fail(f"FP4 output needs an FP8 or E8M0 scale_type, got {a['scale_type'].name}")
        elif a["to_type"] == DataType.FP8:
            if a["scale_type"] not in _dtypes.FLOATS | {DataType.E8M0}:
                raise self._fail(f"FP8 output needs a FLOAT, HALF, BF16 or E8M0 scale_type, got {a['scale_type'].name}")
        else:
            raise self._fail(f"dynamic quantize output type must be FP4 or FP8, got {a['to_type'].name}")
        if a["block_shape"]:
            if len(a["block_shape"]) != x.rank:
                raise self._fail(f"block_shape {a['block_shape']} must have the input rank {x.rank}")
        else:
            if x.rank not in (2, 3):
                raise self._fail(f"the input must be 2-D or 3-D, got rank {x.rank}")
            axis = _norm_axis(a["axis"], x.rank)
            if axis is None or axis < x.rank - 2:
                raise self._fail(f"axis {a['axis']} must be the last or second-to-last dimension (rank {x.rank})")
            if a["block_size"] < 1:
                raise self._fail(f"block_size must be positive, got {a['block_size']}")
        for d, (n, b) in enumerate(zip(x.shape, self._blocks(x.shape), strict=True)):
            if b < 1 or (b > 1 and n < 0) or (n >= 0 and n % b):
                raise self._fail(
                    f"dimension {d} of size {n} must be static and divisible by its block size {b} (shape {x.shape})"
                )
        g = infos[1] if len(infos) > 1 else None
        if g is not None and volume(g.shape) != 1:
            raise self._fail(f"the double-quantization scale must be a scalar, got shape {g.shape}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0].float()
        a = self._a
        shape = list(x.shape)
        blocks = self._blocks(shape)
        split: list[int] = []
        for n, b in zip(shape, blocks, strict=True):
            split += [n // b, b]
        xb = x.reshape(split)
        inner = tuple(range(1, 2 * len(shape), 2))
        amax = xb.abs().amax(dim=inner, keepdim=True)
        qmax = _FP4_MAX if a["to_type"] == DataType.FP4 else _FP8_MAX
        g_t = _opt(inputs, 1)
        g = g_t.to(x.device).float().reshape(()) if g_t is not None else None
        st = a["scale_type"]
        if st == DataType.E8M0:
            # NOTE: OCP microscaling rule: 2^(floor(log2(amax)) - emax of the element type).
            emax = 2 if a["to_type"] == DataType.FP4 else 8
            ref = amax / g if g is not None else amax
            exp = torch.floor(torch.log2(ref)) - emax
            stored = torch.where(ref > 0, torch.exp2(exp.clamp(-127, 127)), torch.zeros_like(ref))
            scales_out = stored
        else:
            # NOTE: a tensor divisor: CUDA turns division by a Python scalar into a multiplication by
            # its reciprocal, which moves quantization ties away from the CPU (and TensorRT) result.
            raw = amax / torch.full_like(amax, qmax)
            if g is not None:
                raw = raw / g
            if st == DataType.FP8:
                scales_out = _round_fp8(raw)
                stored = scales_out.float()
            else:
                scales_out = raw.to(_dtypes.torch_dtype(st))
                stored = scales_out.float()
        eff = stored * g if g is not None else stored
        q = torch.where(eff > 0, xb / torch.where(eff > 0, eff, torch.ones_like(eff)), torch.zeros_like(xb))
        data = _quantize_values(q.reshape(shape), a["to_type"])
        scale_shape = [n // b for n, b in zip(shape, blocks, strict=True)]
        return [data, scales_out.reshape(scale_shape)]


# -------------------------------------------------------------------------------- the mixin
class TensorMixin:
    _add: Any
    _error: Any
    _ns: Any
    _strongly_typed: bool

    def add_shuffle(self, input: ITensor) -> IShuffleLayer:  # noqa: A002 (TensorRT's names)
        return self._add("IShuffleLayer", [input])  # type: ignore[no-any-return]

    def add_slice(self, input: ITensor, start: Any, shape: Any, stride: Any) -> ISliceLayer:  # noqa: A002
        # NOTE: validated lazily (at build / shape query): start, size and stride are often replaced
        # by set_input after creation, as in TensorRT.
        return self._add(  # type: ignore[no-any-return]
            "ISliceLayer", [input], eager=False, start=as_dims(start, "add_slice start"),
            shape=as_dims(shape, "add_slice shape"), stride=as_dims(stride, "add_slice stride"),
        )

    def add_concatenation(self, inputs: Sequence[ITensor]) -> IConcatenationLayer:
        tensors = list(inputs)
        if not tensors:
            raise self._error("add_concatenation: at least one input tensor is required")
        rank = len(tensors[0].shape) if isinstance(tensors[0], ITensor) else 0
        return self._add("IConcatenationLayer", tensors, eager=False, axis=max(0, rank - 3))  # type: ignore[no-any-return]

    def add_gather(self, input: ITensor, indices: ITensor, axis: int) -> IGatherLayer:  # noqa: A002
        return self._add("IGatherLayer", [input, indices], eager=False, axis=axis)  # type: ignore[no-any-return]

    def add_gather_v2(self, input: ITensor, indices: ITensor, mode: Any) -> IGatherLayer:  # noqa: A002
        return self._add("IGatherLayer", [input, indices], eager=False, mode=mode)  # type: ignore[no-any-return]

    def add_scatter(self, data: ITensor, indices: ITensor, updates: ITensor, mode: Any) -> IScatterLayer:
        return self._add("IScatterLayer", [data, indices, updates], eager=False, mode=mode)  # type: ignore[no-any-return]

    def add_select(self, condition: ITensor, then_input: ITensor, else_input: ITensor) -> ISelectLayer:
        return self._add("ISelectLayer", [condition, then_input, else_input])  # type: ignore[no-any-return]

    def add_shape(self, input: ITensor) -> IShapeLayer:  # noqa: A002
        return self._add("IShapeLayer", [input])  # type: ignore[no-any-return]

    def add_fill(self, shape: Any, op: Any, output_type: Any = DataType.FLOAT) -> IFillLayer:
        # NOTE: validated lazily: dimensions, alpha and beta are often given later through set_input.
        return self._add(  # type: ignore[no-any-return]
            "IFillLayer", [], eager=False, shape=as_dims(shape, "add_fill shape"), operation=op,
            to_type=output_type,
        )

    def add_quantize(self, input: ITensor, scale: ITensor, output_type: Any = None) -> IQuantizeLayer:  # noqa: A002
        attrs = {} if output_type is None else {"to_type": output_type}
        return self._add("IQuantizeLayer", [input, scale], eager=False, **attrs)  # type: ignore[no-any-return]

    def add_dequantize(self, input: ITensor, scale: ITensor, output_type: Any = None) -> IDequantizeLayer:  # noqa: A002
        if output_type is None:
            dt = scale.dtype if isinstance(scale, ITensor) else DataType.FLOAT
            output_type = dt if dt in _dtypes.FLOATS else DataType.FLOAT
        return self._add("IDequantizeLayer", [input, scale], eager=False, to_type=output_type)  # type: ignore[no-any-return]

    def add_dynamic_quantize(
        self, input: ITensor, axis: int, block_size: int, output_type: Any, scale_type: Any  # noqa: A002
    ) -> IDynamicQuantizeLayer:
        return self._add(  # type: ignore[no-any-return]
            "IDynamicQuantizeLayer", [input], axis=axis, block_size=block_size, to_type=output_type,
            scale_type=scale_type,
        )

    def add_dynamic_quantize_v2(
        self, input: ITensor, block_shape: Any, output_type: Any, scale_type: Any  # noqa: A002
    ) -> IDynamicQuantizeLayer:
        return self._add(  # type: ignore[no-any-return]
            "IDynamicQuantizeLayer", [input], block_shape=as_dims(block_shape, "block_shape"),
            to_type=output_type, scale_type=scale_type,
        )

    def add_one_hot(self, indices: ITensor, values: ITensor, depth: ITensor, axis: int) -> IOneHotLayer:
        return self._add("IOneHotLayer", [indices, values, depth], axis=axis)  # type: ignore[no-any-return]

    def add_non_zero(self, input: ITensor, *args: Any, **kwargs: Any) -> INonZeroLayer:  # noqa: A002
        # TensorRT binds add_non_zero(input) and, from 10.16, add_non_zero(input, indices_type).
        if len(args) + len(kwargs) > 1 or set(kwargs) - {"indices_type"}:
            raise TypeError("add_non_zero() takes (input) or (input, indices_type)")
        indices_type = args[0] if args else kwargs.get("indices_type")
        overloads = _manifest.load(self._ns._version)["classes"]["INetworkDefinition"]["methods"]["add_non_zero"]
        if indices_type is not None and not any(len(ov["args"] or ()) == 2 for ov in overloads):
            raise TypeError(f"add_non_zero() takes only (input) in TensorRT {self._ns._version}")
        attrs = {}
        if indices_type is not None:
            dt = DataType(int(indices_type))
            if dt not in _INDEX_TYPES:
                raise self._error(f"add_non_zero: indices_type must be INT32 or INT64, got {dt.name}")
            attrs["indices_type"] = dt
        return self._add("INonZeroLayer", [input], **attrs)  # type: ignore[no-any-return]

    def add_reverse_sequence(self, input: ITensor, sequence_lens: ITensor) -> IReverseSequenceLayer:  # noqa: A002
        return self._add("IReverseSequenceLayer", [input, sequence_lens], eager=False)  # type: ignore[no-any-return]

    def add_squeeze(self, input: ITensor, axes: ITensor) -> ISqueezeLayer:  # noqa: A002
        return self._add("ISqueezeLayer", [input, axes])  # type: ignore[no-any-return]

    def add_unsqueeze(self, input: ITensor, axes: ITensor) -> IUnsqueezeLayer:  # noqa: A002
        return self._add("IUnsqueezeLayer", [input, axes])  # type: ignore[no-any-return]
