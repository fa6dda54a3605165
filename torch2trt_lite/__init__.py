"""torch2trt-lite: convert a PyTorch model to a TensorRT engine during one forward pass.

    import torch2trt_lite
    trt_model = torch2trt_lite.convert(model.eval(), [x])     # backend="auto": TensorRT(-RTX) on a GPU, else the sim
    y = trt_model(x)
    trt_model.save("model.engine"); again = torch2trt_lite.load("model.engine")
"""

from __future__ import annotations

__version__ = "0.1.0"

from .bench import BenchResult, bench  # noqa: E402
from .convert import CheckReport, NetworkDefinition, check, convert, define_network, load  # noqa: E402
from .debug import CompareReport, compare  # noqa: E402
from .errors import (  # noqa: E402
    BackendUnavailableError,
    BuildError,
    ConversionError,
    EngineFileError,
    InternalError,
    NetworkDefinitionError,
    PluginError,
    RuntimeExecutionError,
    Torch2TRTError,
    UnsupportedOperatorError,
)
from .module import TRTModule  # noqa: E402
from .quantization import QuantizedModel, quantization_info, quantize  # noqa: E402
from .registry import Call, converter, register_table, supported_ops  # noqa: E402
from .shapes import Input  # noqa: E402

__all__ = [
    "BackendUnavailableError",
    "BenchResult",
    "BuildError",
    "Call",
    "CheckReport",
    "CompareReport",
    "ConversionError",
    "EngineFileError",
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
    "convert",
    "converter",
    "define_network",
    "load",
    "QuantizedModel", "quantization_info", "quantize",
    "register_table",
    "supported_ops",
]
