"""TensorRT's enums, as one canonical IntEnum each (the union of members over all versions).

Per-version views (see ``_api.py``) expose only the members a version has; their members are the
canonical ones, so code inside the sim compares members directly.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, TypeAlias

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
    cls: Any = _TrtEnum(qual, values)  # type: ignore[call-overload, call-arg, arg-type]
    cls.__qualname__ = name
    cls.__module__ = "torch2trt_lite.sim"
    if name == "DataType":
        cls.itemsize = property(lambda self: _ITEMSIZE[self.name])
    return cls  # type: ignore[no-any-return]


ENUMS: dict[str, Any] = {n: _make(n) for n in _all_enum_names()}

if TYPE_CHECKING:  # the enums are built at import time; to the type checker they are Any
    APILanguage: TypeAlias = Any
    ActivationType: TypeAlias = Any
    AllocatorFlag: TypeAlias = Any
    AttentionIOForm: TypeAlias = Any
    AttentionNormalizationOp: TypeAlias = Any
    BoundingBoxFormat: TypeAlias = Any
    BuilderFlag: TypeAlias = Any
    CalibrationAlgoType: TypeAlias = Any
    CausalMaskKind: TypeAlias = Any
    CollectiveOperation: TypeAlias = Any
    CumulativeOperation: TypeAlias = Any
    DataType: TypeAlias = Any
    DeviceType: TypeAlias = Any
    DimensionOperation: TypeAlias = Any
    ElementWiseOperation: TypeAlias = Any
    EngineCapability: TypeAlias = Any
    EngineStat: TypeAlias = Any
    ErrorCode: TypeAlias = Any
    ErrorCodeTRT: TypeAlias = Any
    ExecutionContextAllocationStrategy: TypeAlias = Any
    FillOperation: TypeAlias = Any
    GatherMode: TypeAlias = Any
    HardwareCompatibilityLevel: TypeAlias = Any
    InterpolationMode: TypeAlias = Any
    KVCacheMode: TypeAlias = Any
    LayerInformationFormat: TypeAlias = Any
    LayerType: TypeAlias = Any
    LoopOutput: TypeAlias = Any
    MatrixOperation: TypeAlias = Any
    MemoryPoolType: TypeAlias = Any
    MoEActType: TypeAlias = Any
    NetworkDefinitionCreationFlag: TypeAlias = Any
    OnnxParserFlag: TypeAlias = Any
    PaddingMode: TypeAlias = Any
    PluginArgDataType: TypeAlias = Any
    PluginArgType: TypeAlias = Any
    PluginCapabilityType: TypeAlias = Any
    PluginCreatorVersion: TypeAlias = Any
    PluginFieldType: TypeAlias = Any
    PoolingType: TypeAlias = Any
    PreviewFeature: TypeAlias = Any
    ProfilingVerbosity: TypeAlias = Any
    QuantizationFlag: TypeAlias = Any
    QuickPluginCreationRequest: TypeAlias = Any
    ReduceOperation: TypeAlias = Any
    ResizeCoordinateTransformation: TypeAlias = Any
    ResizeRoundMode: TypeAlias = Any
    ResizeSelector: TypeAlias = Any
    RuntimePlatform: TypeAlias = Any
    SampleMode: TypeAlias = Any
    ScaleMode: TypeAlias = Any
    ScatterMode: TypeAlias = Any
    SeekPosition: TypeAlias = Any
    SerializationFlag: TypeAlias = Any
    TacticSource: TypeAlias = Any
    TempfileControlFlag: TypeAlias = Any
    TensorFormat: TypeAlias = Any
    TensorIOMode: TypeAlias = Any
    TensorLocation: TypeAlias = Any
    TensorRTPhase: TypeAlias = Any
    TilingOptimizationLevel: TypeAlias = Any
    TopKOperation: TypeAlias = Any
    TripLimit: TypeAlias = Any
    UnaryOperation: TypeAlias = Any
    WeightsRole: TypeAlias = Any
    Severity: TypeAlias = Any
else:
    globals().update({_n: _c for _n, _c in ENUMS.items() if "." not in _n})
    Severity = ENUMS["ILogger.Severity"]
