"""torch2trt-lite: convert a PyTorch model to a TensorRT engine during one forward pass.

    import torch2trt_lite
    trt_model = torch2trt_lite.convert(model.eval(), [x])     # backend="auto": TensorRT(-RTX) on a GPU, else the sim
    y = trt_model(x)
    trt_model.save("model.engine"); again = torch2trt_lite.load("model.engine")
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from torch2trt_lite import _layout  # noqa: F401  (first: maps converters/ and plugins_cuda/ in a checkout)
from torch2trt_lite.runtime.module import TRTModule
from torch2trt_lite.tools.bench import BenchResult, bench
from torch2trt_lite.tools.compare import CompareReport, compare
from torch2trt_lite.trace.context import ConversionContext
from torch2trt_lite.trace.shapes import Input

from ._version import __version__
from .convert import CheckReport, NetworkDefinition, check, convert, define_network, load
from .errors import (
    BackendUnavailableError,
    BuildError,
    ConversionError,
    EngineFileError,
    EngineRefitError,
    InternalError,
    NetworkDefinitionError,
    PluginError,
    RuntimeExecutionError,
    Torch2TRTError,
    UnsupportedOperatorError,
)
from .quantization import QuantizedModel, quantization_info, quantize
from .registry import Call, converter, register_table, supported_ops

__all__ = [
    "BackendUnavailableError",
    "BenchResult",
    "BuildError",
    "Call",
    "CheckReport",
    "CompareReport",
    "ConversionContext",
    "ConversionError",
    "EngineFileError",
    "EngineRefitError",
    "Input",
    "InternalError",
    "NetworkDefinition",
    "NetworkDefinitionError",
    "PluginError",
    "RuntimeExecutionError",
    "TRTModule",
    "Torch2TRTError",
    "UnsupportedOperatorError",
    "__version__",
    "bench",
    "check",
    "compare",
    "compile_backend",
    "compile_report",
    "convert",
    "converter",
    "define_network",
    "load",
    "QuantizedModel", "quantization_info", "quantize",
    "register_table",
    "supported_ops",
]

if TYPE_CHECKING:
    from torch2trt_lite.compile import compile_backend, compile_report

_LAZY = {"compile_backend", "compile_report"}  # torch2trt_lite.compile: imported at first use (fx's partitioner)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from torch2trt_lite import compile as _compile

        return getattr(_compile, name)
    raise AttributeError(f"module 'torch2trt_lite' has no attribute {name!r}")


if "torch._dynamo" in sys.modules:  # NOTE: register the torch.compile backend where dynamo is loaded already
    from torch2trt_lite import compile as _compile_package  # noqa: F401
