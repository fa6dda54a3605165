"""Mapping between TensorRT DataType and torch dtypes, and conversion of values between them (Cast)."""

from __future__ import annotations

import torch

from ._enums import DataType

_TO_TORCH: dict[DataType, torch.dtype] = {
    DataType.FLOAT: torch.float32,
    DataType.HALF: torch.float16,
    DataType.BF16: torch.bfloat16,
    DataType.INT8: torch.int8,
    DataType.INT32: torch.int32,
    DataType.INT64: torch.int64,
    DataType.BOOL: torch.bool,
    DataType.UINT8: torch.uint8,
    DataType.FP8: torch.float8_e4m3fn,
}
# NOTE: INT4, FP4 and E8M0 have no unpacked torch dtype; the sim carries their values in float32
# tensors (exactly representable) and keeps the declared DataType beside them.
_CARRIER = {DataType.INT4: torch.float32, DataType.FP4: torch.float32, DataType.E8M0: torch.float32}

_FROM_TORCH: dict[torch.dtype, DataType] = {v: k for k, v in _TO_TORCH.items()}

FLOATS = frozenset({DataType.FLOAT, DataType.HALF, DataType.BF16})
INTS = frozenset({DataType.INT32, DataType.INT64})


def torch_dtype(trt_dtype: object) -> torch.dtype:
    """The torch dtype that holds values of TensorRT ``trt_dtype`` (a DataType member)."""
    dt = DataType(int(trt_dtype))  # type: ignore[call-overload]
    if dt in _TO_TORCH:
        return _TO_TORCH[dt]
    return _CARRIER[dt]


def from_torch(dtype: torch.dtype) -> DataType:
    try:
        return _FROM_TORCH[dtype]
    except KeyError:
        from ..errors import NetworkDefinitionError

        raise NetworkDefinitionError(f"torch dtype {dtype} has no TensorRT DataType") from None


def numpy_to_trt(np_dtype: object) -> DataType:
    import numpy as np

    name = np.dtype(np_dtype).name  # type: ignore[call-overload]
    table = {
        "float32": DataType.FLOAT, "float16": DataType.HALF, "int8": DataType.INT8,
        "int32": DataType.INT32, "int64": DataType.INT64, "bool": DataType.BOOL,
        "uint8": DataType.UINT8, "bfloat16": DataType.BF16,
    }
    if name not in table:
        from ..errors import NetworkDefinitionError

        raise NetworkDefinitionError(f"numpy dtype {name} has no TensorRT DataType")
    return table[name]


def cast_to(x: torch.Tensor, dt: DataType, *, nearest: bool = False) -> torch.Tensor:
    """Convert like TensorRT's Cast (also Identity and any forced output type): float -> int truncates
    toward zero (TensorRT's operator docs: 5.6 -> 5, 8.9 -> 8, -5.6 -> -5) and saturates to the int
    range; float -> bool is x != 0. ``nearest``: round half to even instead, for an INT8 cast with a
    dynamic range, which is a quantization (conformance Cast/case_int8: -88.9 -> -89)."""
    target = torch_dtype(dt)
    to_int = torch.round if nearest else torch.trunc
    if x.dtype.is_floating_point and target == torch.uint8:
        # NOTE: TensorRT 10.16 (conformance Cast/case_simple): negative -> 0, large values wrap mod 256.
        return to_int(x.float()).clamp(min=0).to(torch.int64).remainder(256).to(torch.uint8)
    if x.dtype.is_floating_point and not target.is_floating_point and target != torch.bool:
        info = torch.iinfo(target)
        # NOTE: in float64 (exact for int32's bounds); int64's max rounds up to 2^63 there, which no
        # conversion may see: values at or above it saturate by a select.
        r = to_int(x.double()).clamp(info.min, info.max)
        y = r.to(target)
        return torch.where(r >= float(info.max), torch.full_like(y, info.max), y) if target == torch.int64 else y
    if dt in (DataType.INT4, DataType.FP4):
        return x.float()
    return x.to(target)
