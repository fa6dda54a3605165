"""Linear algebra, reductions and attention: matrix multiply, einsum, softmax, ragged softmax,
reduce, top-k, cumulative, attention (IAttention and its boundary layers), rotary embedding,
KV-cache update and non-maximum suppression.

Semantics follow TensorRT's operator documentation (NvInfer.h / the operator pages); where real
TensorRT 10.16 showed a behaviour the documentation leaves open, the conformance cases in
``tests/data/trt_conformance`` are the reference and the code says so next to it.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .. import _dtypes, _manifest
from .._core import ILayer, ITensor, RunContext, TensorInfo, dds_probe
from .._enums import (
    ENUMS,
    CumulativeOperation,
    DataType,
    MatrixOperation,
    ReduceOperation,
    TopKOperation,
)

AttentionNormalizationOp = ENUMS["AttentionNormalizationOp"]
CausalMaskKind = ENUMS["CausalMaskKind"]
AttentionIOForm = ENUMS["AttentionIOForm"]
KVCacheMode = ENUMS["KVCacheMode"]
BoundingBoxFormat = ENUMS["BoundingBoxFormat"]

_FLOATS = _dtypes.FLOATS
_HALF = (torch.float16, torch.bfloat16)
_INDEX_TYPES = frozenset({DataType.INT32, DataType.INT64})
_TOPK_MAX_K = 3840


# ----------------------------------------------------------------------------------- helpers
def _bits(mask: int) -> list[int]:
    """Positions of the set bits of an axes bitmask (TensorRT: bit i = dimension i)."""
    mask = int(mask)
    return [i for i in range(mask.bit_length()) if (mask >> i) & 1]


def _dim_ok(a: int, b: int) -> bool:
    """Two dims agree (a dynamic -1 agrees with anything)."""
    return a == b or a < 0 or b < 0


def _names(dts: Sequence[DataType]) -> str:
    return ", ".join(d.name for d in dts)


def _wants_fp32(x: torch.Tensor) -> bool:
    """fp16/bf16 data is accumulated in fp32, as TensorRT does (on the GPU the kernels do it)."""
    return x.dtype in _HALF and x.device.type != "meta"


def _clear_input(layer: ILayer, index: int) -> None:
    """Reset an optional input to null (TensorRT: ``setX(nullptr)`` / a setter that drops input i)."""
    layer = layer._canon  # the layer itself, also when reached through a get_layer view
    if index < len(layer._inputs):
        old = layer._inputs[index]
        if old is not None and layer in old._consumers:
            old._consumers.remove(layer)
        layer._inputs[index] = None
        while layer._inputs and layer._inputs[-1] is None:
            layer._inputs.pop()
        layer._touch()


def _opt(inputs: Sequence[Any], index: int) -> Any:
    return inputs[index] if index < len(inputs) else None


def _indices_type_overload(net: Any, method: str, nargs: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The optional trailing ``indices_type`` of add_topk / add_nms: TensorRT 10.16 added overloads
    with it; 10.13 has none, so there it is refused like pybind11 refuses unknown arguments."""
    if len(args) + len(kwargs) > 1 or set(kwargs) - {"indices_type"}:
        raise TypeError(f"{method}() takes at most one extra argument, indices_type")
    value = args[0] if args else kwargs.get("indices_type")
    if value is None:
        return None
    methods = _manifest.load(net._ns._version)["classes"]["INetworkDefinition"]["methods"]
    if not any(o.get("args") is not None and len(o["args"]) == nargs for o in methods.get(method, [])):
        raise TypeError(f"{method}() takes no indices_type in TensorRT {net._ns._version}")
    return value


# ---------------------------------------------------------------------------- matrix multiply
_MO = MatrixOperation


def _mm_operand(shape: Sequence[int], op: Any, index: int) -> tuple[tuple[int, ...], int | None, int]:
    """(batch dims, free dim or None for a vector, contracted dim) of one operand after its op."""
    if op == _MO.VECTOR:
        return tuple(shape[:-1]), None, shape[-1]
    batch = tuple(shape[:-2])
    rows, cols = shape[-2], shape[-1]
    if (op == _MO.TRANSPOSE) == (index == 0):
        return batch, cols, rows  # input0 transposed or input1 as is: [.., K, N]
    return batch, rows, cols


class IMatrixMultiplyLayer(ILayer):
    _layer_type = "MATRIX_MULTIPLY"
    _trt_label = "Matrix Multiply"
    _attrs = {"op0": MatrixOperation.NONE, "op1": MatrixOperation.NONE}

    def _required_inputs(self) -> int:
        return 2

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        a, b = infos[0], infos[1]
        assert a is not None and b is not None
        for i, info in enumerate((a, b)):
            if info.dtype not in _FLOATS:
                raise self._fail(f"input {i} must be FLOAT, HALF or BF16, got {info.dtype.name}")
        if a.dtype != b.dtype:
            raise self._fail(f"both inputs must have the same type, got {a.dtype.name} and {b.dtype.name}")
        ops = (self._a["op0"], self._a["op1"])
        for i, (info, op) in enumerate(zip((a, b), ops, strict=True)):
            need = 1 if op == _MO.VECTOR else 2
            if info.rank < need:
                raise self._fail(
                    f"input {i} with MatrixOperation.{op.name} needs rank >= {need}, got shape {info.shape}"
                )
        batch0, _, k0 = _mm_operand(a.shape, ops[0], 0)
        batch1, _, k1 = _mm_operand(b.shape, ops[1], 1)
        if len(batch0) != len(batch1):
            raise self._fail(
                f"the inputs have {len(batch0)} and {len(batch1)} batch dimensions (shapes {a.shape}, {b.shape} "
                f"with {ops[0].name}/{ops[1].name}); they must have the same number"
            )
        if not _dim_ok(k0, k1):
            raise self._fail(f"contracted dimensions differ: {k0} and {k1} (shapes {a.shape}, {b.shape})")
        for d0, d1 in zip(batch0, batch1, strict=True):
            if not (_dim_ok(d0, d1) or d0 == 1 or d1 == 1):
                raise self._fail(f"batch dimensions {batch0} and {batch1} cannot be broadcast")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        a, b = inputs
        op0, op1 = self._a["op0"], self._a["op1"]
        dtype = a.dtype
        # NOTE: on CUDA the half-precision GEMM accumulates in fp32 already; on the CPU upcast.
        if _wants_fp32(a) and a.device.type == "cpu":
            a, b = a.float(), b.float()
        if op0 == _MO.TRANSPOSE:
            a = a.transpose(-1, -2)
        elif op0 == _MO.VECTOR:
            a = a.unsqueeze(-2)
        if op1 == _MO.TRANSPOSE:
            b = b.transpose(-1, -2)
        elif op1 == _MO.VECTOR:
            b = b.unsqueeze(-1)
        y = torch.matmul(a, b)
        if op1 == _MO.VECTOR:
            y = y.squeeze(-1)
        if op0 == _MO.VECTOR:
            y = y.squeeze(-1 if op1 == _MO.VECTOR else -2)
        return [y.to(dtype)]


# ------------------------------------------------------------------------------------ einsum
_EINSUM_CHARS = set(string.ascii_lowercase) | set(",.->")


def _einsum_terms(equation: str) -> tuple[list[str], str | None]:
    eq = equation.replace(" ", "")
    if eq.count("->") > 1:
        raise ValueError("the equation has more than one '->'")
    lhs, arrow, rhs = eq.partition("->")
    return lhs.split(","), (rhs if arrow else None)


def _einsum_labels(term: str, what: str) -> tuple[list[str], bool]:
    ell = term.count("...")
    if ell > 1:
        raise ValueError(f"{what} '{term}' has more than one ellipsis")
    rest = term.replace("...", "")
    if any(c not in string.ascii_lowercase for c in rest):
        raise ValueError(f"{what} '{term}' may hold only lower-case letters and one '...'")
    return list(rest), ell == 1


class IEinsumLayer(ILayer):
    _layer_type = "EINSUM"
    _attrs = {"equation": ""}

    @property
    def equation(self) -> str:
        return str(self._a["equation"])

    @equation.setter
    def equation(self, value: str) -> None:
        if not isinstance(value, str):
            raise self._fail(f"equation must be a str, got {type(value).__name__}")
        self._a["equation"] = value
        self._touch()

    def _required_inputs(self) -> int:
        return len(self._inputs)

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        if not infos:
            raise self._fail("einsum needs at least one input")
        eq = self._a["equation"]
        bad = sorted({c for c in eq if c not in _EINSUM_CHARS and c != " "})
        if bad:
            raise self._fail(
                f"equation '{eq}' has characters {bad}; only lower-case letters, ',', '->' and '...' are allowed"
            )
        try:
            terms, out = _einsum_terms(eq)
            if len(terms) != len(infos):
                raise ValueError(f"the equation has {len(terms)} input terms for {len(infos)} inputs")
            seen: set[str] = set()
            any_ell = False
            for i, (term, info) in enumerate(zip(terms, infos, strict=True)):
                assert info is not None
                labels, ell = _einsum_labels(term, f"term {i}")
                any_ell |= ell
                seen.update(labels)
                if (not ell and len(labels) != info.rank) or (ell and len(labels) > info.rank):
                    raise ValueError(f"term {i} '{term}' does not match input {i} of rank {info.rank}")
            if out is not None:
                labels, ell = _einsum_labels(out, "the output")
                if len(set(labels)) != len(labels):
                    raise ValueError(f"output subscripts '{out}' repeat a label")
                missing = [c for c in labels if c not in seen]
                if missing:
                    raise ValueError(f"output labels {missing} do not appear in any input")
                if ell and not any_ell:
                    raise ValueError("the output has '...' but no input has")
        except ValueError as e:
            raise self._fail(f"invalid equation '{eq}': {e}") from None
        dts = {i.dtype for i in infos if i is not None}
        if not dts <= _FLOATS:
            raise self._fail(f"einsum inputs must be FLOAT, HALF or BF16, got {_names(sorted(dts))}")
        if len(dts) > 1 and self._network._strongly_typed:
            raise self._fail(f"in a strongly typed network all einsum inputs need one type, got {_names(sorted(dts))}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        dts = {x.dtype for x in inputs}
        # NOTE: mixed FLOAT/HALF inputs (weakly typed networks) give a FLOAT output, as documented.
        out_dtype = dts.pop() if len(dts) == 1 else torch.float32
        compute = torch.float32 if (out_dtype != torch.float32 and inputs[0].device.type == "cpu") else out_dtype
        args = [x.to(compute) for x in inputs]
        return [torch.einsum(self._a["equation"].replace(" ", ""), *args).to(out_dtype)]


# ------------------------------------------------------------------------------------ softmax
def _softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    if _wants_fp32(x):
        return torch.softmax(x, dim, dtype=torch.float32).to(x.dtype)
    return torch.softmax(x, dim)


class ISoftMaxLayer(ILayer):
    _layer_type = "SOFTMAX"
    _trt_label = "Softmax"
    _attrs = {"axes": 1}

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x = infos[0]
        assert x is not None
        if x.dtype not in _FLOATS:
            raise self._fail(f"softmax input must be FLOAT, HALF or BF16, got {x.dtype.name}")
        bits = _bits(self._a["axes"])
        if len(bits) != 1:
            raise self._fail(f"axes must select exactly one dimension, got bitmask {self._a['axes']:#b}")
        if bits[0] >= x.rank:
            raise self._fail(f"axes bit {bits[0]} is out of range for an input of rank {x.rank}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        return [_softmax(inputs[0], int(self._a["axes"]).bit_length() - 1)]  # one bit (checked)


class IRaggedSoftMaxLayer(ILayer):
    _layer_type = "RAGGED_SOFTMAX"
    _trt_label = "Ragged SoftMax"

    def _required_inputs(self) -> int:
        return 2

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x, bounds = infos[0], infos[1]
        assert x is not None and bounds is not None
        if x.dtype != DataType.FLOAT:  # the operator's T1 is float32 only
            raise self._fail(f"ragged softmax input must be FLOAT, got {x.dtype.name} (cast it first)")
        if bounds.dtype != DataType.INT32:
            raise self._fail(f"bounds must be INT32, got {bounds.dtype.name}")
        if x.rank != 3 or bounds.rank != 3:
            raise self._fail(f"input and bounds must be 3D, got shapes {x.shape} and {bounds.shape}")
        if bounds.shape[2] != 1:
            raise self._fail(f"the last dimension of bounds must be 1 (not a wildcard), got {bounds.shape}")
        if not all(_dim_ok(a, b) for a, b in zip(x.shape[:2], bounds.shape[:2], strict=True)):
            raise self._fail(f"bounds shape {bounds.shape} does not match input shape {x.shape}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x, bounds = inputs
        if x.device.type == "meta":
            return [torch.empty_like(x)]
        dtype = x.dtype
        xf = x.float() if dtype != torch.float32 else x
        rows, length = xf.numel() // max(x.shape[-1], 1), x.shape[-1]
        b = bounds.reshape(rows, 1).to(device=x.device, dtype=torch.int64).clamp_min(0)
        width = max(length, int(b.max()) if rows else 0)
        flat = xf.contiguous().reshape(-1)
        if width == length:
            win = flat.reshape(rows, length)
        else:
            # NOTE: TensorRT 10.16 reads past the end of a row whose bound exceeds its length: the
            # softmax then runs over the next elements of the flattened input too (the
            # RaggedSoftMax/case_simple output shows it). The sim reproduces that, reading zeros
            # past the end of the tensor (the value the GPU read there in that case).
            padded = torch.cat([flat, flat.new_zeros(width - length)])
            win = padded.as_strided((rows, width), (length, 1))
        valid = torch.arange(width, device=x.device) < b
        scores = win.masked_fill(~valid, float("-inf"))
        top = scores.amax(-1, keepdim=True).nan_to_num(neginf=0.0)
        e = torch.exp(scores - top)
        total = e.sum(-1, keepdim=True)
        out = torch.where(total > 0, e / total.clamp_min(torch.finfo(torch.float32).tiny), torch.zeros_like(e))
        return [out[:, :length].reshape(x.shape).to(dtype)]


# ------------------------------------------------------------------------------------- reduce
_RO = ReduceOperation
_REDUCE_TYPES = _FLOATS | {DataType.INT8, DataType.INT32, DataType.INT64}


def _empty_reduce_value(op: Any, dtype: torch.dtype) -> float | int:
    if dtype.is_floating_point:
        return {_RO.SUM: 0.0, _RO.PROD: 1.0, _RO.MAX: float("-inf"), _RO.MIN: float("inf"), _RO.AVG: float("nan")}[op]
    info = torch.iinfo(dtype)
    return {_RO.SUM: 0, _RO.PROD: 1, _RO.MAX: info.min, _RO.MIN: info.max, _RO.AVG: 0}[op]


def reduce_tensor(x: torch.Tensor, op: Any, dims: list[int], keep: bool) -> torch.Tensor:
    """TensorRT's reduce of ``x`` over ``dims`` (fp16/bf16/int8 accumulate in fp32, ints stay ints)."""
    dtype = x.dtype
    if not dims:
        return x
    if dtype == torch.int8:
        y = reduce_tensor(x.float(), op, dims, keep)
        return torch.round(y).clamp(-128, 127).to(dtype)
    if _wants_fp32(x):
        return reduce_tensor(x.float(), op, dims, keep).to(dtype)
    count = 1
    for d in dims:
        count *= x.shape[d]
    if count == 0:
        shape = [1 if i in dims else s for i, s in enumerate(x.shape)] if keep else [
            s for i, s in enumerate(x.shape) if i not in dims]
        return torch.full(shape, _empty_reduce_value(op, dtype), dtype=dtype, device=x.device)
    if op == _RO.SUM:
        y = torch.sum(x, dims, keepdim=keep)
    elif op == _RO.MAX:
        y = torch.amax(x, dims, keepdim=keep)
    elif op == _RO.MIN:
        y = torch.amin(x, dims, keepdim=keep)
    elif op == _RO.AVG:
        if dtype.is_floating_point:
            y = torch.mean(x, dims, keepdim=keep)
        else:
            y = torch.div(torch.sum(x, dims, keepdim=keep), count, rounding_mode="trunc")
    elif op == _RO.PROD:
        y = x
        for d in sorted(dims, reverse=True):
            y = torch.prod(y, d, keepdim=keep)
    else:
        raise ValueError(f"ReduceOperation.{op.name} is not a reduction")
    return y.to(dtype)


class IReduceLayer(ILayer):
    _layer_type = "REDUCE"
    _attrs = {"op": ReduceOperation.SUM, "axes": 0, "keep_dims": False}

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x = infos[0]
        assert x is not None
        if x.dtype not in _REDUCE_TYPES:
            raise self._fail(f"reduce input must be a float, INT8, INT32 or INT64 tensor, got {x.dtype.name}")
        if self._a["op"] == _RO.NONE:
            raise self._fail("ReduceOperation.NONE is only for IDistCollectiveLayer, not a reduce layer")
        bad = [b for b in _bits(self._a["axes"]) if b >= x.rank]
        if bad:
            raise self._fail(f"axes bitmask {self._a['axes']:#b} names dimensions {bad} of a rank-{x.rank} input")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0]
        return [reduce_tensor(x, self._a["op"], _bits(self._a["axes"]), self._a["keep_dims"])]


# -------------------------------------------------------------------------------------- top-k
class ITopKLayer(ILayer):
    _layer_type = "TOPK"
    _attrs = {"op": TopKOperation.MAX, "k": 1, "axes": 1, "indices_type": DataType.INT32}
    _shape_inputs = (1,)
    _max_inputs = 2
    _num_outputs = 2

    @property
    def k(self) -> int:
        if _opt(self._inputs, 1) is not None:
            return -1
        return int(self._a["k"])

    @k.setter
    def k(self, value: int) -> None:
        self._a["k"] = int(value)
        _clear_input(self, 1)
        self._touch()

    @property
    def indices_type(self) -> Any:
        return self._a["indices_type"]

    @indices_type.setter
    def indices_type(self, value: Any) -> None:
        dt = DataType(int(value))
        if dt not in _INDEX_TYPES:
            raise self._fail(f"indices_type must be INT32 or INT64, got {dt.name}")
        self._set_attr("indices_type", dt)

    @property
    def _dds(self) -> bool:  # type: ignore[override]
        """A dynamic k whose value is unknown at build time makes the output size data-dependent."""
        kt = _opt(self._inputs, 1)
        return kt is not None and kt._info().value() is None

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x = infos[0]
        assert x is not None
        if x.dtype not in _FLOATS | _INDEX_TYPES:
            raise self._fail(f"top-k input must be a float, INT32 or INT64 tensor, got {x.dtype.name}")
        if x.rank < 2:
            raise self._fail(f"at least 2 dimensions are required for input, got shape {x.shape}")
        if self._a["indices_type"] not in _INDEX_TYPES:
            raise self._fail(f"indices_type must be INT32 or INT64, got {self._a['indices_type'].name}")
        bits = _bits(self._a["axes"])
        if len(bits) != 1:
            raise self._fail(f"axes must select exactly one dimension, got bitmask {self._a['axes']:#b}")
        axis = bits[0]
        if axis >= x.rank or axis < x.rank - 4:
            raise self._fail(f"the top-k axis must be one of the last four dimensions of a rank-{x.rank} input, got {axis}")
        kt = _opt(infos, 1)
        if kt is not None:
            if kt.dtype != DataType.INT32 or kt.rank != 0:
                raise self._fail(f"the k input must be a 0D INT32 tensor, got {kt.dtype.name} of shape {kt.shape}")
            return
        k = int(self._a["k"])
        if not 0 < k <= _TOPK_MAX_K:
            raise self._fail(f"k must be in [1, {_TOPK_MAX_K}], got {k}")
        if x.shape[axis] >= 0 and k > x.shape[axis]:
            raise self._fail(f"k={k} exceeds dimension {axis} of the input shape {x.shape}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0]
        axis = _bits(self._a["axes"])[0]
        it = _dtypes.torch_dtype(self._a["indices_type"])
        kt = _opt(inputs, 1)
        if kt is not None and kt.device.type == "meta":
            size = list(x.shape)
            size[axis] = 1 + rt.probe_index  # k unknown at build time: the dimension is dynamic
            return [torch.empty(size, dtype=x.dtype, device="meta"), torch.empty(size, dtype=it, device="meta")]
        k = int(kt.reshape(-1)[0]) if kt is not None else int(self._a["k"])
        if not 0 < k <= _TOPK_MAX_K or k > x.shape[axis]:
            raise ValueError(f"k={k} must be in [1, {min(_TOPK_MAX_K, x.shape[axis])}] for dimension {axis} of {tuple(x.shape)}")
        values, indices = torch.topk(x, k, dim=axis, largest=self._a["op"] == TopKOperation.MAX, sorted=True)
        return [values, indices.to(it)]


# --------------------------------------------------------------------------------- cumulative
class ICumulativeLayer(ILayer):
    _layer_type = "CUMULATIVE"
    _attrs = {"op": CumulativeOperation.SUM, "exclusive": False, "reverse": False}
    _shape_inputs = (1,)

    def _required_inputs(self) -> int:
        return 2

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x, axis = infos[0], infos[1]
        assert x is not None and axis is not None
        if x.dtype not in _FLOATS | _INDEX_TYPES:
            raise self._fail(f"cumulative input must be a float, INT32 or INT64 tensor, got {x.dtype.name}")
        if x.rank < 1:
            raise self._fail("cumulative input must have rank >= 1")
        if axis.dtype not in _INDEX_TYPES or axis.rank != 0:
            raise self._fail(f"axis must be a 0D INT32 or INT64 tensor, got {axis.dtype.name} of shape {axis.shape}")
        value = axis.value()
        if value is None:
            raise self._fail("axis must be a build-time constant")
        a = int(value.reshape(-1)[0])
        if not -x.rank <= a < x.rank:
            raise self._fail(f"axis {a} is out of range [{-x.rank}, {x.rank - 1}]")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x, axis_t = inputs
        key = (id(self), "axis")
        axis = rt.cache.get(key)
        if axis is None:
            axis = int(axis_t.reshape(-1)[0]) % x.dim()
            if not rt.probe:
                rt.cache[key] = axis
        dtype = x.dtype
        y = x.float() if _wants_fp32(x) else x
        if self._a["reverse"]:
            y = y.flip(axis)
        c = torch.cumsum(y, axis, dtype=y.dtype)
        if self._a["exclusive"] and c.shape[axis] > 0:  # shift by one: element j sums 0..j-1
            c = torch.cat([torch.zeros_like(c.narrow(axis, 0, 1)), c.narrow(axis, 0, c.shape[axis] - 1)], axis)
        if self._a["reverse"]:
            c = c.flip(axis)
        return [c.to(dtype)]


# ---------------------------------------------------------------------------------- attention
_NORM = AttentionNormalizationOp
_CAUSAL = CausalMaskKind
_FORM = AttentionIOForm
_MASK_IN, _SCALE_IN, _QLEN_IN, _KVLEN_IN = 3, 4, 5, 6


def _fake_quantize(p: torch.Tensor, scale: torch.Tensor, to_type: Any) -> torch.Tensor:
    """Quantize the normalization output to FP8/INT8 with ``scale`` and back (what BMM2 consumes)."""
    s = scale.reshape(-1).to(device=p.device, dtype=torch.float32)
    s = s[0] if s.numel() == 1 else s
    if to_type == DataType.INT8:
        return torch.round(p / s).clamp(-128, 127) * s
    return (p / s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).to(torch.float32) * s


def _attention_core(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                    causal: Any, kv_len: torch.Tensor | None, norm: Any,
                    quant: tuple[torch.Tensor, Any] | None) -> torch.Tensor:
    """softmax(Q K^T [+ mask]) V on [B, N, S, H] tensors; no scaling (TensorRT leaves it to the caller)."""
    dtype = q.dtype
    nq, nkv = q.shape[1], k.shape[1]
    if nq != nkv:  # grouped-query / multi-query attention: query head h reads kv head h // (nq / nkv)
        k = k.repeat_interleave(nq // nkv, dim=1)
        v = v.repeat_interleave(nq // nkv, dim=1)
    sq, skv = q.shape[2], k.shape[2]
    dev = q.device
    allowed: torch.Tensor | None = None
    length: Any = skv
    if kv_len is not None:
        length = kv_len.to(device=dev, dtype=torch.int64).reshape(-1, 1, 1, 1)
        allowed = torch.arange(skv, device=dev).view(1, 1, 1, skv) < length
    if causal != _CAUSAL.NONE and not (causal == _CAUSAL.UPPER_LEFT and kv_len is None and mask is None
                                       and norm == _NORM.SOFTMAX and quant is None):
        i = torch.arange(sq, device=dev).view(sq, 1)
        j = torch.arange(skv, device=dev).view(1, skv)
        offset = 0 if causal == _CAUSAL.UPPER_LEFT else length - sq
        c = j <= i + offset
        allowed = c if allowed is None else allowed & c
    add_mask: torch.Tensor | None = None
    if mask is not None:
        if mask.dtype == torch.bool:
            allowed = mask if allowed is None else allowed & mask
        else:
            add_mask = mask
    compute = torch.float32 if (dtype in _HALF and dev.type == "cpu") else dtype
    q, k, v = q.to(compute), k.to(compute), v.to(compute)
    if norm == _NORM.SOFTMAX and quant is None:
        attn_mask: torch.Tensor | None = allowed
        if add_mask is not None:
            attn_mask = add_mask.to(compute)
            if allowed is not None:
                attn_mask = attn_mask.masked_fill(~allowed, float("-inf"))
        is_causal = causal == _CAUSAL.UPPER_LEFT and attn_mask is None
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=1.0)
        return out.to(dtype)
    s = torch.matmul(q.float(), k.float().transpose(-1, -2))
    if add_mask is not None:
        s = s + add_mask.float()
    if norm == _NORM.SOFTMAX:
        if allowed is not None:
            s = s.masked_fill(~allowed, float("-inf"))
        p = torch.softmax(s, -1)
    else:
        p = s.masked_fill(~allowed, 0.0) if allowed is not None else s
    if quant is not None:
        p = _fake_quantize(p, *quant)
    return torch.matmul(p, v.float()).to(dtype)


class IAttentionBoundaryLayer(ILayer):
    _attention_obj: Any = None

    @property
    def attention(self) -> Any:
        return self._attention_obj


class IAttentionInputLayer(IAttentionBoundaryLayer):
    """Inputs: 0 query, 1 key, 2 value, 3 mask, 4 normalization quantize scale, 5 query lengths,
    6 key/value lengths. The sim computes the whole attention here; the output layer passes it on."""

    _layer_type = "ATTENTION_INPUT"
    _max_inputs = 7
    # NOTE: the IAttention settings live here (serialized with the layer); "_"-names keep them private.
    _attrs = {
        "_attn_norm_op": AttentionNormalizationOp.SOFTMAX,
        "_attn_causal": CausalMaskKind.NONE,
        "_attn_decomposable": False,
        "_attn_quant_type": DataType.FLOAT,
        "_attn_query_form": AttentionIOForm.PADDED_BHND,
        "_attn_kv_form": AttentionIOForm.PADDED_BHND,
        "_attn_ranks": 1,
        "_attn_name": "",
        "_attn_metadata": "",
    }

    def _required_inputs(self) -> int:
        return 3

    def _check(self, infos: list[TensorInfo | None]) -> None:  # noqa: C901 - one rule after the other
        super()._check(infos)
        q, k, v = infos[0], infos[1], infos[2]
        assert q is not None and k is not None and v is not None
        a = self._a
        if q.dtype not in _FLOATS:
            raise self._fail(f"query must be FLOAT, HALF or BF16, got {q.dtype.name}")
        if k.dtype != q.dtype or v.dtype != q.dtype:
            raise self._fail(f"query, key and value need one type, got {_names([q.dtype, k.dtype, v.dtype])}")
        q_packed = a["_attn_query_form"] == _FORM.PACKED_NHD
        kv_packed = a["_attn_kv_form"] == _FORM.PACKED_NHD
        for what, info, packed in (("query", q, q_packed), ("key", k, kv_packed), ("value", v, kv_packed)):
            want = 3 if packed else 4
            if info.rank != want:
                form = "PACKED_NHD [tokens, heads, dim]" if packed else "PADDED_BHND [batch, heads, seq, dim]"
                raise self._fail(f"{what} must be {want}D for {form}, got shape {info.shape}")
        if not all(_dim_ok(x, y) for x, y in zip(k.shape, v.shape, strict=True)):
            raise self._fail(f"key and value must have the same shape, got {k.shape} and {v.shape}")
        if not _dim_ok(q.shape[-1], k.shape[-1]):
            raise self._fail(f"query and key head sizes differ: {q.shape[-1]} and {k.shape[-1]}")
        hq, hkv = q.shape[-3], k.shape[-3]
        if hq >= 0 and hkv > 0 and hq % hkv:
            raise self._fail(f"the query heads ({hq}) must be a multiple of the key/value heads ({hkv})")
        if not q_packed and not kv_packed and not _dim_ok(q.shape[0], k.shape[0]):
            raise self._fail(f"query and key/value batch sizes differ: {q.shape[0]} and {k.shape[0]}")
        mask = _opt(infos, _MASK_IN)
        if mask is not None:
            if mask.dtype != DataType.BOOL and mask.dtype != q.dtype:
                raise self._fail(f"the mask must be BOOL or {q.dtype.name} (the BMM1 type), got {mask.dtype.name}")
            if mask.rank != 4:
                raise self._fail(f"the mask must be 4D [batch, heads, s_q, s_kv], got shape {mask.shape}")
            if not q_packed and not kv_packed:
                want_shape = (q.shape[0], hq, q.shape[2], k.shape[2])
                if not all(_dim_ok(m, w) or m == 1 for m, w in zip(mask.shape, want_shape, strict=True)):
                    raise self._fail(f"mask shape {mask.shape} is not broadcastable to {want_shape}")
            if a["_attn_causal"] != _CAUSAL.NONE:
                raise self._fail("a mask cannot be combined with causal attention; set causal off or drop the mask")
        scale = _opt(infos, _SCALE_IN)
        quant = a["_attn_quant_type"]
        if scale is not None:
            if scale.dtype not in _FLOATS or scale.rank > 1:
                raise self._fail(f"the normalization quantize scale must be a 0D/1D float tensor, got {scale.dtype.name} {scale.shape}")
            if scale.dtype != q.dtype:
                raise self._fail(f"the normalization quantize scale must have the query's type {q.dtype.name}, got {scale.dtype.name}")
            if quant not in (DataType.FP8, DataType.INT8):
                raise self._fail("a normalization quantize scale needs normalization_quantize_to_type FP8 or INT8")
        elif quant != DataType.FLOAT:
            raise self._fail(f"normalization_quantize_to_type {quant.name} needs a normalization_quantize_scale")
        for idx, what, needed in ((_QLEN_IN, "query_lengths", q_packed), (_KVLEN_IN, "key_value_lengths", kv_packed)):
            lens = _opt(infos, idx)
            if lens is None:
                if needed:
                    raise self._fail(f"{what} must be set for the PACKED_NHD form")
                continue
            if lens.dtype != DataType.INT32 or lens.rank != 1:
                raise self._fail(f"{what} must be a 1D INT32 tensor, got {lens.dtype.name} {lens.shape}")
        if a["_attn_ranks"] < 1:
            raise self._fail(f"num_ranks must be >= 1, got {a['_attn_ranks']}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        q, k, v = inputs[0], inputs[1], inputs[2]
        if q.device.type == "meta" or k.device.type == "meta" or v.device.type == "meta":
            return [torch.empty(q.shape, dtype=q.dtype, device="meta")]
        a = self._a
        mask = _opt(inputs, _MASK_IN)
        scale = _opt(inputs, _SCALE_IN)
        quant = (scale, a["_attn_quant_type"]) if scale is not None else None
        qlen, kvlen = _opt(inputs, _QLEN_IN), _opt(inputs, _KVLEN_IN)
        q_packed = a["_attn_query_form"] == _FORM.PACKED_NHD
        kv_packed = a["_attn_kv_form"] == _FORM.PACKED_NHD
        norm, causal = a["_attn_norm_op"], a["_attn_causal"]
        if not q_packed and not kv_packed:
            return [_attention_core(q, k, v, mask, causal, kvlen, norm, quant)]
        # Packed (ragged) layouts: one batch element at a time.
        qoff = [int(t) for t in qlen.tolist()] if q_packed else None
        kvoff = [int(t) for t in kvlen.tolist()] if kv_packed else None
        batch = len(qoff) - 1 if qoff is not None else q.shape[0]
        if kvoff is not None and len(kvoff) - 1 != batch:
            raise ValueError(f"query has {batch} sequences, key_value_lengths describes {len(kvoff) - 1}")
        out = torch.zeros_like(q)
        for b in range(batch):
            if qoff is not None:
                qb = q[qoff[b]:qoff[b + 1]].transpose(0, 1).unsqueeze(0)
            else:
                qb = q[b:b + 1]
            if kvoff is not None:
                kb = k[kvoff[b]:kvoff[b + 1]].transpose(0, 1).unsqueeze(0)
                vb = v[kvoff[b]:kvoff[b + 1]].transpose(0, 1).unsqueeze(0)
                lb = None
            else:
                kb, vb = k[b:b + 1], v[b:b + 1]
                lb = kvlen[b:b + 1] if kvlen is not None else None
            mb = None
            if mask is not None:
                mb = mask[min(b, mask.shape[0] - 1)].unsqueeze(0)[..., :qb.shape[2], :kb.shape[2]]
            ob = _attention_core(qb, kb, vb, mb, causal, lb, norm, quant)
            if qoff is not None:
                out[qoff[b]:qoff[b + 1]] = ob[0].transpose(0, 1)
            else:
                out[b] = ob[0]
        return [out]


class IAttentionOutputLayer(IAttentionBoundaryLayer):
    _layer_type = "ATTENTION_OUTPUT"

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        return [inputs[0]]


def _same(v: Any) -> Any:
    return v


def _attn_setting(key: str, get: Callable[[Any], Any] = _same, put: Callable[[Any], Any] = _same) -> property:
    """An IAttention property stored on its input layer under ``key``."""

    def fget(self: IAttention) -> Any:
        return get(self._get(key))

    def fset(self: IAttention, value: Any) -> None:
        self._set(key, put(value))

    return property(fget, fset)


def _attn_optional_input(index: int) -> property:
    """An IAttention property that is an optional input of its input layer (None clears it)."""

    def fget(self: IAttention) -> ITensor | None:
        return _opt(self._in._inputs, index)

    def fset(self: IAttention, value: ITensor | None) -> None:
        self._set_optional(index, value)

    return property(fget, fset)


class IAttention:
    """The helper returned by ``add_attention``: its settings live on the IAttentionInputLayer."""

    _ns: Any = None

    def __init__(self, input_layer: IAttentionInputLayer, output_layer: IAttentionOutputLayer) -> None:
        self._in = input_layer
        self._out = output_layer

    # -- internal
    def _get(self, key: str) -> Any:
        return self._in._a[key]

    def _set(self, key: str, value: Any) -> None:
        self._in._set_attr(key, value)

    def _set_optional(self, index: int, tensor: ITensor | None) -> None:
        if tensor is None:
            _clear_input(self._in, index)
        else:
            self._in.set_input(index, tensor)

    # -- TensorRT API
    def set_input(self, index: int, tensor: ITensor) -> bool:
        if not 0 <= int(index) < 3:
            raise self._in._fail(f"IAttention.set_input: index {index} out of range [0, 3) (query, key, value)")
        self._in.set_input(int(index), tensor)
        return True

    def get_input(self, index: int) -> ITensor | None:
        return self._in._inputs[index] if 0 <= index < 3 else None

    def get_output(self, index: int) -> ITensor | None:
        return self._out.get_output(0) if index == 0 else None

    @property
    def num_inputs(self) -> int:
        return 3

    @property
    def num_outputs(self) -> int:
        return 1

    norm_op = _attn_setting("_attn_norm_op")
    causal_kind = _attn_setting("_attn_causal")
    decomposable = _attn_setting("_attn_decomposable", get=bool)
    mask = _attn_optional_input(_MASK_IN)
    normalization_quantize_scale = _attn_optional_input(_SCALE_IN)
    query_form = _attn_setting("_attn_query_form")
    key_value_form = _attn_setting("_attn_kv_form")
    query_lengths = _attn_optional_input(_QLEN_IN)
    key_value_lengths = _attn_optional_input(_KVLEN_IN)
    num_ranks = _attn_setting("_attn_ranks", get=int, put=int)

    @property
    def causal(self) -> bool:
        return bool(self._get("_attn_causal") != _CAUSAL.NONE)

    @causal.setter
    def causal(self, value: bool) -> None:
        self._set("_attn_causal", _CAUSAL.UPPER_LEFT if value else _CAUSAL.NONE)

    @property
    def normalization_quantize_to_type(self) -> Any:
        return self._get("_attn_quant_type")

    @normalization_quantize_to_type.setter
    def normalization_quantize_to_type(self, value: Any) -> None:
        dt = DataType(int(value))
        if dt not in (DataType.FP8, DataType.INT8):
            raise self._in._fail(f"normalization_quantize_to_type must be FP8 or INT8, got {dt.name}")
        self._set("_attn_quant_type", dt)

    @property
    def name(self) -> str:
        return str(self._get("_attn_name"))

    @name.setter
    def name(self, value: str) -> None:
        self._in._a["_attn_name"] = str(value)

    @property
    def metadata(self) -> str:
        return str(self._get("_attn_metadata"))

    @metadata.setter
    def metadata(self, value: str) -> None:
        self._in._a["_attn_metadata"] = str(value)

    def __repr__(self) -> str:
        return f"<IAttention {self.name!r}>"


# ---------------------------------------------------------------------------- rotary embedding
class IRotaryEmbeddingLayer(ILayer):
    """Inputs: 0 input [b, n, s, h], 1 cos cache, 2 sin cache, 3 (optional) position ids [b, s] INT64."""

    _layer_type = "ROTARY_EMBEDDING"
    _attrs = {"interleaved": False, "rotary_embedding_dim": 0}
    _max_inputs = 4

    def _required_inputs(self) -> int:
        return 3

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x, cos, sin = infos[0], infos[1], infos[2]
        assert x is not None and cos is not None and sin is not None
        if x.dtype not in _FLOATS:
            raise self._fail(f"input must be FLOAT, HALF or BF16, got {x.dtype.name}")
        if cos.dtype != x.dtype or sin.dtype != x.dtype:
            raise self._fail(f"cos/sin caches must have the input type {x.dtype.name}, got {cos.dtype.name}/{sin.dtype.name}")
        if x.rank != 4:
            raise self._fail(f"input must be 4D [batch, heads, seq, head_size], got shape {x.shape}")
        rdim = int(self._a["rotary_embedding_dim"])
        h = x.shape[3]
        if rdim < 0 or rdim % 2:
            raise self._fail(f"rotary_embedding_dim must be non-negative and even, got {rdim}")
        if h >= 0 and (rdim > h or (rdim == 0 and h % 2)):
            raise self._fail(f"rotary_embedding_dim {rdim} does not fit head size {h} (the rotated part must be even)")
        half = (rdim or h) // 2 if (rdim or h) >= 0 else -1
        pos = _opt(infos, 3)
        if pos is not None:
            if pos.dtype != DataType.INT64 or pos.rank != 2:
                raise self._fail(f"position ids must be a 2D INT64 tensor [batch, seq], got {pos.dtype.name} {pos.shape}")
            if not (_dim_ok(pos.shape[0], x.shape[0]) and _dim_ok(pos.shape[1], x.shape[2])):
                raise self._fail(f"position ids shape {pos.shape} does not match input batch/seq {x.shape[0]}, {x.shape[2]}")
            want: tuple[int, ...] = (-1, half)
        else:
            want = (x.shape[0], x.shape[2], half)
        for what, c in (("cos", cos), ("sin", sin)):
            if c.rank != len(want) or not all(_dim_ok(d, w) for d, w in zip(c.shape, want, strict=True)):
                shape = "[max_position + 1, rot/2]" if pos is not None else "[batch, seq, rot/2]"
                raise self._fail(f"{what} cache must have shape {shape} = {want}, got {c.shape}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x, cos, sin = inputs[0], inputs[1], inputs[2]
        pos = _opt(inputs, 3)
        if x.device.type == "meta" or cos.device.type == "meta" or sin.device.type == "meta":
            return [torch.empty_like(x)]
        dtype = x.dtype
        h = x.shape[-1]
        rdim = int(self._a["rotary_embedding_dim"]) or h
        half = rdim // 2
        if pos is not None:
            idx = pos.to(device=cos.device, dtype=torch.int64)
            cos, sin = cos[idx], sin[idx]  # [b, s, rot/2]
        c = cos.unsqueeze(1).float()
        s = sin.unsqueeze(1).float()
        xf = x.float()
        rot = xf[..., :rdim]
        if self._a["interleaved"]:
            x1, x2 = rot[..., 0::2], rot[..., 1::2]
            out = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), -1).flatten(-2)
        else:
            x1, x2 = rot[..., :half], rot[..., half:]
            out = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1)
        if rdim < h:
            out = torch.cat((out, xf[..., rdim:]), -1)
        return [out.to(dtype)]


# ----------------------------------------------------------------------------- KV-cache update
class IKVCacheUpdateLayer(ILayer):
    """Inputs: 0 cache [b, n, s_max, h] (a network input), 1 update, 2 write indices [b],
    3 (11.1, PACKED_NHD updates) update lengths [b + 1]. The output aliases the cache: the update is
    written into the cache buffer in place, like TensorRT does."""

    _layer_type = "KV_CACHE_UPDATE"
    _output_is_network_output = True  # the update is in place: the output aliases the cache input's buffer
    _attrs = {"cache_mode": KVCacheMode.LINEAR, "update_form": AttentionIOForm.PADDED_BHND}
    _max_inputs = 4
    _aliased_input = 0  # output 0 shares memory with input 0 (ICudaEngine.get_aliased_input_tensor)

    @property
    def update_lengths(self) -> ITensor | None:
        return _opt(self._inputs, 3)

    @update_lengths.setter
    def update_lengths(self, value: ITensor | None) -> None:
        if value is None:
            _clear_input(self, 3)
        else:
            self.set_input(3, value)

    def _required_inputs(self) -> int:
        return 3

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        cache, update, idx = infos[0], infos[1], infos[2]
        assert cache is not None and update is not None and idx is not None
        if self._a["cache_mode"] != KVCacheMode.LINEAR:
            raise self._fail(f"cache_mode {self._a['cache_mode'].name} is not supported (LINEAR only)")
        if cache.dtype not in _FLOATS or update.dtype != cache.dtype:
            raise self._fail(
                f"cache and update must share a FLOAT, HALF or BF16 type, got {cache.dtype.name} and {update.dtype.name}"
            )
        if idx.dtype not in _INDEX_TYPES or idx.rank != 1:
            raise self._fail(f"write indices must be a 1D INT32 or INT64 tensor, got {idx.dtype.name} {idx.shape}")
        if cache.rank != 4:
            raise self._fail(f"cache must be 4D [batch, heads, max_seq, head_size], got shape {cache.shape}")
        if cache.shape[2] < 0:
            raise self._fail(f"the cache sequence dimension must be static, got shape {cache.shape}")
        src = self._inputs[0]
        if src is not None and (src._producer is not None or src not in self._network._inputs):
            raise self._fail("the cache must be a network input (the update is done in place in its buffer)")
        packed = self._a["update_form"] == AttentionIOForm.PACKED_NHD
        if packed:
            if update.rank != 3:
                raise self._fail(f"a PACKED_NHD update must be 3D [tokens, heads, head_size], got {update.shape}")
            lens = _opt(infos, 3)
            if lens is None:
                raise self._fail("update_lengths must be set for a PACKED_NHD update")
            if lens.dtype != DataType.INT32 or lens.rank != 1:
                raise self._fail(f"update_lengths must be a 1D INT32 tensor, got {lens.dtype.name} {lens.shape}")
            pairs = [(update.shape[1], cache.shape[1]), (update.shape[2], cache.shape[3])]
        else:
            if update.rank != 4:
                raise self._fail(f"update must be 4D [batch, heads, seq, head_size], got shape {update.shape}")
            if update.shape[2] >= 0 and update.shape[2] > cache.shape[2]:
                raise self._fail(f"update sequence length {update.shape[2]} exceeds the cache's {cache.shape[2]}")
            pairs = [(update.shape[i], cache.shape[i]) for i in (0, 1, 3)]
        if not all(_dim_ok(u, c) for u, c in pairs):
            raise self._fail(f"update shape {update.shape} does not match cache shape {cache.shape}")
        if not packed and not _dim_ok(idx.shape[0], cache.shape[0]):
            raise self._fail(f"write indices shape {idx.shape} does not match the cache batch {cache.shape[0]}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        cache, update, idx = inputs[0], inputs[1], inputs[2]
        if cache.device.type == "meta" or update.device.type == "meta" or idx.device.type == "meta":
            return [torch.empty_like(cache)]
        dev = cache.device
        smax = cache.shape[2]
        view = cache.transpose(1, 2)  # [b, s_max, n, h], a view of the cache buffer
        starts = idx.to(device=dev, dtype=torch.int64).reshape(-1)
        if self._a["update_form"] == AttentionIOForm.PACKED_NHD:
            lens = inputs[3].to(device=dev, dtype=torch.int64).reshape(-1)
            tokens = torch.arange(update.shape[0], device=dev)
            batch = torch.searchsorted(lens[1:], tokens, right=True)
            inside = tokens < lens[-1]
            batch = batch.clamp_max(lens.numel() - 2)
            pos = starts[batch] + tokens - lens[batch]
            keep = inside & (pos >= 0) & (pos < smax)
            rows, src = batch[keep], update[keep]
            cols = pos[keep]
        else:
            seq = update.shape[2]
            pos = starts.view(-1, 1) + torch.arange(seq, device=dev).view(1, -1)  # [b, s]
            # NOTE: TensorRT ignores out-of-bound writes silently; the sim drops them per position.
            rows, si = ((pos >= 0) & (pos < smax)).nonzero(as_tuple=True)
            cols = pos[rows, si]
            src = update.transpose(1, 2)[rows, si]
        with torch.no_grad():
            view[rows, cols] = src.to(cache.dtype)
        return [cache]


# ------------------------------------------------------------------------------------------ NMS
def _corners(b: np.ndarray, fmt: Any) -> np.ndarray:
    if fmt == BoundingBoxFormat.CENTER_SIZES:
        xc, yc, w, h = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
        return np.stack([xc - w / 2, yc - h / 2, xc + w / 2, yc + h / 2], -1)
    return np.stack([np.minimum(b[..., 0], b[..., 2]), np.minimum(b[..., 1], b[..., 3]),
                     np.maximum(b[..., 0], b[..., 2]), np.maximum(b[..., 1], b[..., 3])], -1)


def _iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    x1 = np.maximum(box[0], others[:, 0])
    y1 = np.maximum(box[1], others[:, 1])
    x2 = np.minimum(box[2], others[:, 2])
    y2 = np.minimum(box[3], others[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    union = area + areas - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


class INMSLayer(ILayer):
    """Inputs: 0 boxes, 1 scores, 2 max output boxes per class (0D INT32), 3 IoU threshold (0D FLOAT,
    default 0), 4 score threshold (0D FLOAT, default 0). Outputs: selected indices [n, 3] of
    (batch, class, box) and their count (0D INT32)."""

    _layer_type = "NMS"
    _attrs = {"bounding_box_format": BoundingBoxFormat.CORNER_PAIRS, "topk_box_limit": 5000,
              "indices_type": DataType.INT32}
    _max_inputs = 5
    _num_outputs = 2
    _dds = True

    @property
    def indices_type(self) -> Any:
        return self._a["indices_type"]

    @indices_type.setter
    def indices_type(self, value: Any) -> None:
        dt = DataType(int(value))
        if dt not in _INDEX_TYPES:
            raise self._fail(f"indices_type must be INT32 or INT64, got {dt.name}")
        self._set_attr("indices_type", dt)

    def _required_inputs(self) -> int:
        return 3

    def _out_dtypes(self, in_dtypes: list[Any], outs: list[torch.Tensor]) -> list[Any]:
        return [self._a["indices_type"], DataType.INT32]

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        boxes, scores, limit = infos[0], infos[1], infos[2]
        assert boxes is not None and scores is not None and limit is not None
        if boxes.dtype not in (DataType.FLOAT, DataType.HALF) or scores.dtype != boxes.dtype:
            raise self._fail(f"boxes and scores must both be FLOAT or HALF, got {boxes.dtype.name} and {scores.dtype.name}")
        if scores.rank != 3:
            raise self._fail(f"scores must be 3D [batch, boxes, classes], got shape {scores.shape}")
        b, n, c = scores.shape
        if boxes.rank == 3:
            want: tuple[int, ...] = (b, n, 4)
        elif boxes.rank == 4:
            want = (b, n, c, 4)
        else:
            raise self._fail(f"boxes must be [batch, boxes, 4] or [batch, boxes, classes, 4], got {boxes.shape}")
        if not all(_dim_ok(x, w) for x, w in zip(boxes.shape, want, strict=True)):
            raise self._fail(f"boxes shape {boxes.shape} does not match scores shape {scores.shape}")
        if limit.dtype != DataType.INT32 or limit.rank != 0:
            raise self._fail(f"max_output_boxes_per_class must be a 0D INT32 tensor, got {limit.dtype.name} {limit.shape}")
        for idx, what in ((3, "IoU threshold"), (4, "score threshold")):
            t = _opt(infos, idx)
            if t is not None and (t.dtype != DataType.FLOAT or t.rank != 0):
                raise self._fail(f"the {what} must be a 0D FLOAT tensor, got {t.dtype.name} {t.shape}")
        if not 0 < int(self._a["topk_box_limit"]) <= 5000:
            raise self._fail(f"topk_box_limit must be in [1, 5000], got {self._a['topk_box_limit']}")
        if self._a["indices_type"] not in _INDEX_TYPES:
            raise self._fail(f"indices_type must be INT32 or INT64, got {self._a['indices_type'].name}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        it = _dtypes.torch_dtype(self._a["indices_type"])
        if rt.probe:  # data-dependent number of rows: a different size per probe (as NonZero's)
            n = dds_probe(rt, self)
            return [torch.empty((n, 3), dtype=it, device="meta"),
                    torch.empty((), dtype=torch.int32, device="meta")]
        boxes, scores, limit = inputs[0], inputs[1], inputs[2]
        iou_t, score_t = _opt(inputs, 3), _opt(inputs, 4)
        max_out = int(limit.reshape(-1)[0])
        iou_thr = float(iou_t.reshape(-1)[0]) if iou_t is not None else 0.0
        score_thr = float(score_t.reshape(-1)[0]) if score_t is not None else 0.0
        bx = _corners(boxes.detach().float().cpu().numpy(), self._a["bounding_box_format"])
        sc = scores.detach().float().cpu().numpy()
        per_class = bx.ndim == 4
        n_classes = sc.shape[2]
        rows: list[tuple[int, int, int]] = []
        for b in range(sc.shape[0]):
            flat = sc[b].reshape(-1)
            cand = np.nonzero(flat > score_thr)[0]
            # candidates of every class sorted by score (ties keep box-major order), top-k limited
            order = cand[np.argsort(-flat[cand], kind="stable")][: int(self._a["topk_box_limit"])]
            kept: dict[int, list[np.ndarray]] = {}
            for f in order.tolist():
                n, c = divmod(f, n_classes)
                chosen = kept.setdefault(c, [])
                if len(chosen) >= max_out:
                    continue
                box = bx[b, n, c] if per_class else bx[b, n]
                if chosen and bool((_iou(box, np.stack(chosen)) > iou_thr).any()):
                    continue
                chosen.append(box)
                rows.append((b, c, n))
        sel = torch.tensor(rows, dtype=it, device=rt.device).reshape(-1, 3)
        return [sel, torch.tensor(len(rows), dtype=torch.int32, device=rt.device)]


# --------------------------------------------------------------------------------------- mixin
class LinalgMixin:
    _add: Any
    _cls: Any
    _ns: Any
    _check_owned: Any

    def add_matrix_multiply(self, input0: Any, op0: Any, input1: Any, op1: Any) -> IMatrixMultiplyLayer:
        return self._add("IMatrixMultiplyLayer", [input0, input1], op0=op0, op1=op1)  # type: ignore[no-any-return]

    def add_einsum(self, inputs: Sequence[Any], equation: str) -> IEinsumLayer:
        return self._add("IEinsumLayer", list(inputs), equation=str(equation))  # type: ignore[no-any-return]

    def add_softmax(self, input: Any) -> ISoftMaxLayer:  # noqa: A002 (TensorRT's names)
        rank = len(self._check_owned(input, "input").shape)
        # TensorRT's default axis: rank - 3, or 0 when the input has fewer than 3 dimensions.
        return self._add("ISoftMaxLayer", [input], axes=1 << max(0, rank - 3))  # type: ignore[no-any-return]

    def add_ragged_softmax(self, input: Any, bounds: Any) -> IRaggedSoftMaxLayer:  # noqa: A002
        return self._add("IRaggedSoftMaxLayer", [input, bounds])  # type: ignore[no-any-return]

    def add_reduce(self, input: Any, op: Any, axes: int, keep_dims: bool) -> IReduceLayer:  # noqa: A002
        return self._add("IReduceLayer", [input], op=op, axes=axes, keep_dims=keep_dims)  # type: ignore[no-any-return]

    def add_topk(self, input: Any, op: Any, k: int, axes: int, *args: Any, **kwargs: Any) -> ITopKLayer:  # noqa: A002
        # TensorRT binds add_topk(input, op, k, axes) and, from 10.16, (input, op, k, axes, indices_type).
        attrs: dict[str, Any] = {"op": op, "k": k, "axes": axes}
        indices_type = _indices_type_overload(self, "add_topk", 5, args, kwargs)
        if indices_type is not None:
            attrs["indices_type"] = indices_type
        return self._add("ITopKLayer", [input], **attrs)  # type: ignore[no-any-return]

    def add_cumulative(self, input: Any, axis: Any, op: Any, exclusive: bool, reverse: bool) -> ICumulativeLayer:  # noqa: A002
        return self._add(  # type: ignore[no-any-return]
            "ICumulativeLayer", [input, axis], op=op, exclusive=exclusive, reverse=reverse
        )

    # NOTE: attention, rotary embedding and KV-cache update layers are completed after add_* (mask,
    # forms, lengths, position ids come through setters / set_input, e.g. RotaryEmbedding/case_simple
    # gives its position ids after add_rotary_embedding), so like TensorRT the sim validates them
    # when their shapes are first needed (a .shape query or the build), not in add_*.
    def _attention(self, query: Any, key: Any, value: Any, norm_op: Any, causal_kind: Any) -> IAttention:
        inp = self._add("IAttentionInputLayer", [query, key, value], eager=False, _attn_norm_op=norm_op,
                        _attn_causal=causal_kind)
        out = self._add("IAttentionOutputLayer", [inp.get_output(0)], eager=False)
        attention = self._cls("IAttention")(inp, out)
        inp._attention_obj = attention
        out._attention_obj = attention
        return attention  # type: ignore[no-any-return]

    def add_attention(self, query: Any, key: Any, value: Any, norm_op: Any, causal: bool) -> IAttention:
        return self._attention(query, key, value, norm_op, CausalMaskKind.UPPER_LEFT if causal else CausalMaskKind.NONE)

    def add_attention_v2(self, query: Any, key: Any, value: Any, norm_op: Any, causal_kind: Any) -> IAttention:
        return self._attention(query, key, value, norm_op, causal_kind)

    def add_rotary_embedding(self, input: Any, cos_cache: Any, sin_cache: Any, interleaved: bool,  # noqa: A002
                             rotary_embedding_dim: int) -> IRotaryEmbeddingLayer:
        return self._add(  # type: ignore[no-any-return]
            "IRotaryEmbeddingLayer", [input, cos_cache, sin_cache], eager=False, interleaved=interleaved,
            rotary_embedding_dim=rotary_embedding_dim,
        )

    def add_kv_cache_update(self, cache: Any, update: Any, write_indices: Any, cache_mode: Any) -> IKVCacheUpdateLayer:
        return self._add(  # type: ignore[no-any-return]
            "IKVCacheUpdateLayer", [cache, update, write_indices], eager=False, cache_mode=cache_mode
        )

    def add_nms(self, boxes: Any, scores: Any, max_output_boxes_per_class: Any, *args: Any, **kwargs: Any) -> INMSLayer:
        # TensorRT binds add_nms(boxes, scores, max_output_boxes_per_class) and, from 10.16, a
        # fourth argument indices_type.
        attrs: dict[str, Any] = {}
        indices_type = _indices_type_overload(self, "add_nms", 4, args, kwargs)
        if indices_type is not None:
            attrs["indices_type"] = indices_type
        return self._add("INMSLayer", [boxes, scores, max_output_boxes_per_class], **attrs)  # type: ignore[no-any-return]
