"""TensorRT's enums, as one canonical IntEnum each (the union of members over all versions).

Per-version views (see ``_api.py``) expose only the members a version has; their members are the
canonical ones, so code inside the sim compares members directly.
"""

from __future__ import annotations

import enum
from typing import Any

from . import _manifest

# NOTE: DataType keeps TensorRT's C++ values (NvInferRuntimeBase.h) so engine headers and
# bitmasks agree with real TensorRT; other enums number members in manifest order.
_EXPLICIT_VALUES = {
    "DataType": {
        "FLOAT": 0, "HALF": 1, "INT8": 2, "INT32": 3, "BOOL": 4, "UINT8": 5, "FP8": 6,
        "BF16": 7, "INT64": 8, "INT4": 9, "FP4": 10, "E8M0": 11,
    },
}


def _union_members(name: str) -> list[str]:
    seen: list[str] = []
    for v in _manifest.VERSIONS:
        for m in _manifest.enum_members(v, name):
            if m not in seen:
                seen.append(m)
    return seen


def _all_enum_names() -> list[str]:
    names: list[str] = []
    for v in _manifest.VERSIONS:
        for n in _manifest.load(v)["enums"]:
            if n not in names:
                names.append(n)
    return names


_ITEMSIZE = {
    "FLOAT": 4, "HALF": 2, "BF16": 2, "INT8": 1, "INT32": 4, "INT64": 8, "BOOL": 1, "UINT8": 1,
    "FP8": 1, "INT4": 0.5, "FP4": 0.5, "E8M0": 1,
}


class _TrtEnum(enum.IntEnum):
    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self.name}: {int(self)}>"

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


def _make(name: str) -> type[_TrtEnum]:
    members = _union_members(name)
    explicit = _EXPLICIT_VALUES.get(name, {})
    values = {m: explicit.get(m, i) for i, m in enumerate(members)}
    qual = name.split(".")[-1]
    cls: Any = _TrtEnum(qual, values)  # type: ignore[call-overload]
    cls.__qualname__ = name
    cls.__module__ = "torch2trt_lite.sim"
    if name == "DataType":
        cls.itemsize = property(lambda self: _ITEMSIZE[self.name])
    return cls  # type: ignore[no-any-return]


ENUMS: dict[str, type[_TrtEnum]] = {n: _make(n) for n in _all_enum_names()}

ActivationType = ENUMS["ActivationType"]
BuilderFlag = ENUMS["BuilderFlag"]
CumulativeOperation = ENUMS["CumulativeOperation"]
DataType = ENUMS["DataType"]
ElementWiseOperation = ENUMS["ElementWiseOperation"]
FillOperation = ENUMS["FillOperation"]
GatherMode = ENUMS["GatherMode"]
InterpolationMode = ENUMS["InterpolationMode"]
LayerType = ENUMS["LayerType"]
LoopOutput = ENUMS["LoopOutput"]
MatrixOperation = ENUMS["MatrixOperation"]
MemoryPoolType = ENUMS["MemoryPoolType"]
NetworkDefinitionCreationFlag = ENUMS["NetworkDefinitionCreationFlag"]
PaddingMode = ENUMS["PaddingMode"]
PoolingType = ENUMS["PoolingType"]
ReduceOperation = ENUMS["ReduceOperation"]
ResizeCoordinateTransformation = ENUMS["ResizeCoordinateTransformation"]
ResizeRoundMode = ENUMS["ResizeRoundMode"]
ResizeSelector = ENUMS["ResizeSelector"]
SampleMode = ENUMS["SampleMode"]
ScaleMode = ENUMS["ScaleMode"]
ScatterMode = ENUMS["ScatterMode"]
Severity = ENUMS["ILogger.Severity"]
TensorIOMode = ENUMS["TensorIOMode"]
TensorLocation = ENUMS["TensorLocation"]
TensorFormat = ENUMS["TensorFormat"]
TopKOperation = ENUMS["TopKOperation"]
TripLimit = ENUMS["TripLimit"]
UnaryOperation = ENUMS["UnaryOperation"]

# Every other top-level enum by name, for the layer families (``from .._enums import X``).
globals().update({_n: _c for _n, _c in ENUMS.items() if "." not in _n and _n not in globals()})
