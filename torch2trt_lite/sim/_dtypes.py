"""Mapping between TensorRT DataType and torch dtypes."""

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
