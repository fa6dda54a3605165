"""The one exception family of torch2trt-lite.

Every error a user can hit derives from :class:`Torch2TRTError`. Messages say what failed, where,
what was expected against what was got, and how to fix it. :class:`InternalError` is kept apart:
it means a bug in torch2trt-lite itself, never a problem with the user's model or input.
"""

from __future__ import annotations


class Torch2TRTError(Exception):
    """Base class of every error torch2trt-lite raises on purpose."""


class UnsupportedOperatorError(Torch2TRTError):
    """A torch call on a traced tensor has no converter (or its converter refused the arguments)."""

    def __init__(self, message: str, *, op: str = "", module_path: str = "", location: str = ""):
        super().__init__(message)
        self.op = op
        self.module_path = module_path
        self.location = location


class ConversionError(Torch2TRTError):
    """A converter failed to express a call as TensorRT layers."""


class ConverterRefusal(ConversionError):
    """Raised by a converter that cannot convert this particular call (its arguments): the tracer
    reports it as an unsupported call, naming the op, the module path and the user's source line."""


class FrozenValueError(ConverterRefusal):
    """A converter asked for a constant holding values computed from the inputs: they would be
    frozen into the engine."""


class DynamicSizeGuardError(ConversionError):
    """The model's code branched on (compared, or tested the truth of) a dynamic size whose result
    depends on the size within the profile's range."""


class NetworkDefinitionError(Torch2TRTError):
    """The TensorRT network API refused a layer, an attribute or a tensor (sim or TensorRT)."""


class BuildError(Torch2TRTError):
    """Building the engine from the network failed."""


class EngineFileError(Torch2TRTError):
    """An engine file is truncated, corrupt, foreign or of an incompatible version."""


class EngineStateError(EngineFileError, RuntimeError):
    """``TRTModule.load_state_dict`` refused a state dict (a RuntimeError too, as torch's own errors are)."""


class EngineRefitError(Torch2TRTError):
    """A refit (``TRTModule.refit``, ``load(path, weights=...)``) or a refittable / weight-stripped
    engine was refused: weights that do not fit the engine, an engine that is not refittable."""


class RuntimeExecutionError(Torch2TRTError):
    """Running an engine failed: bad inputs, shapes outside the profile, or an execution error."""


class BackendUnavailableError(Torch2TRTError):
    """The requested backend (TensorRT, CUDA, cuda-python) is not installed or has no device."""


class PluginError(Torch2TRTError):
    """A plugin declaration, compilation or launch failed."""


class InternalError(Exception):
    """A bug in torch2trt-lite. Please report it with the traceback."""


__all__ = [
    "BackendUnavailableError",
    "BuildError",
    "ConversionError",
    "ConverterRefusal",
    "DynamicSizeGuardError",
    "EngineFileError",
    "EngineRefitError",
    "EngineStateError",
    "FrozenValueError",
    "InternalError",
    "NetworkDefinitionError",
    "PluginError",
    "RuntimeExecutionError",
    "Torch2TRTError",
    "UnsupportedOperatorError",
]
