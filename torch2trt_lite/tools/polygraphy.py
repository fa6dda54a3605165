"""Polygraphy runners: compare an engine (any backend, the sim too) against PyTorch with Polygraphy's Comparator.

    from polygraphy.comparator import Comparator, CompareFunc
    from torch2trt_lite.polygraphy import TorchModuleRunner, TRTModuleRunner

    trt_runner = TRTModuleRunner(trt_model)                      # a TRTModule or an engine file
    torch_runner = TorchModuleRunner(model, trt_model.input_names, trt_model.output_names, example_inputs=[x])
    results = Comparator.run([torch_runner, trt_runner])
    ok = bool(Comparator.compare_accuracy(results, compare_func=CompareFunc.simple(atol=1e-4, rtol=1e-4)))

Polygraphy passes arrays by name: numpy arrays by default (``DataLoader()``), or torch tensors
(``DataLoader(data_loader_backend_module="torch")``); the runners return outputs of the same kind.
bfloat16 has no numpy dtype: a bfloat16 input or output is refused with numpy arrays (use torch
tensors). Outputs are the model's tensors in the order the engine stores them (the leaves of the
output structure: tuples and lists in order, dicts in key order), named by the engine's output
names. Nothing here imports TensorRT (Polygraphy imports it lazily, only for its own TRT runners).

Polygraphy's own ``PytRunner`` moves inputs to CUDA and zips a single output tensor over its batch,
so :class:`TorchModuleRunner` is provided for CPU (and CUDA) models.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import torch

from torch2trt_lite.errors import BackendUnavailableError, RuntimeExecutionError, Torch2TRTError

try:
    from polygraphy.backend.base import BaseRunner
    from polygraphy.common import TensorMetadata
    from polygraphy.datatype import DataType
except ImportError as e:  # NOTE: an optional dependency (the deploy extra)
    raise BackendUnavailableError(
        f"torch2trt_lite.polygraphy needs polygraphy ({e}): pip install 'torch2trt-lite[deploy]' "
        "(or pip install polygraphy)"
    ) from None

__all__ = ["TRTModuleRunner", "TorchModuleRunner", "engine_input_metadata"]

_POLY_DTYPES = {
    "float32": DataType.FLOAT32, "float16": DataType.FLOAT16, "bfloat16": DataType.BFLOAT16,
    "int8": DataType.INT8, "int32": DataType.INT32, "int64": DataType.INT64, "bool": DataType.BOOL,
    "uint8": DataType.UINT8,
}


def _dtype_name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


def engine_input_metadata(trt_module: Any) -> Any:
    """Polygraphy ``TensorMetadata`` of an engine's inputs (names, dtypes, shapes with ``None`` for
    dynamic dims, and the profile's min/max shapes)."""
    meta = trt_module.metadata if hasattr(trt_module, "metadata") else trt_module
    out = TensorMetadata()
    for spec in meta["inputs"]:
        lo, hi = list(spec["min"]), list(spec["max"])
        shape = [d if a == b else None for d, a, b in zip(spec["shape"], lo, hi, strict=True)]
        out.add(spec["name"], _POLY_DTYPES[spec["dtype"]], shape, min_shape=lo, max_shape=hi)
    return out


def _leaves(obj: Any, out: list[torch.Tensor]) -> list[torch.Tensor]:
    """The tensors of an output structure in the order the engine stores them (as ``encode_tree``)."""
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (tuple, list)):
        for x in obj:
            _leaves(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _leaves(x, out)
    return out


def _to_torch(name: str, value: Any, device: torch.device) -> tuple[torch.Tensor, bool]:
    """(tensor on ``device``, whether the caller gave torch tensors)."""
    if isinstance(value, torch.Tensor):
        return value.to(device), True
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a dependency of torch2trt-lite
        raise Torch2TRTError("numpy is needed for numpy inputs: pip install numpy") from None
    if not isinstance(value, (np.ndarray, np.generic)):
        raise RuntimeExecutionError(
            f"input '{name}': expected a numpy array or a torch.Tensor, got {type(value).__name__}"
        )
    arr = np.ascontiguousarray(value)
    if arr.dtype.kind == "V" or arr.dtype.name not in _NUMPY_OK:
        raise RuntimeExecutionError(
            f"input '{name}': numpy dtype {arr.dtype} has no torch equivalent here; feed float32, float16, int8, "
            "int32, int64, uint8 or bool arrays (bfloat16 has no numpy dtype: feed torch tensors, e.g. "
            "DataLoader(data_loader_backend_module='torch'))"
        )
    return torch.from_numpy(arr).to(device), False


_NUMPY_OK = frozenset({"float32", "float16", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"})


def _from_torch(name: str, t: torch.Tensor, as_torch: bool) -> Any:
    t = t.detach()
    if as_torch:
        return t
    if t.dtype == torch.bfloat16:
        raise RuntimeExecutionError(
            f"output '{name}' is bfloat16, which numpy has no dtype for; feed torch tensors to get torch outputs "
            "(Comparator.run(..., data_loader=DataLoader(data_loader_backend_module='torch'))), or convert the "
            "model in float32 or float16"
        )
    return t.cpu().numpy()


def _outputs(names: Sequence[str], result: Any, as_torch: bool, who: str) -> OrderedDict[str, Any]:
    leaves = _leaves(result, [])
    if len(leaves) != len(names):
        raise RuntimeExecutionError(
            f"{who}: the model returned {len(leaves)} tensor(s), but {len(names)} output name(s) were given "
            f"({', '.join(names)}); give one name per returned tensor"
        )
    return OrderedDict((n, _from_torch(n, t, as_torch)) for n, t in zip(names, leaves, strict=True))


def _model_device(model: Any) -> torch.device:
    if isinstance(model, torch.nn.Module):
        for t in (*model.parameters(), *model.buffers()):
            return t.device
    return torch.device("cpu")


class TRTModuleRunner(BaseRunner):  # type: ignore[misc]
    """Runs a :class:`~torch2trt_lite.TRTModule` (or an engine file, loaded on ``activate``) for Polygraphy.

    ``device``: where inputs go (default: ``cpu`` for a sim engine, ``cuda`` for TensorRT).
    """

    def __init__(self, trt_module_or_path: Any, name: str | None = None, device: str | torch.device | None = None):
        from torch2trt_lite.runtime.module import TRTModule

        super().__init__(name=name, prefix="torch2trt-lite-runner")  # NOTE: first: BaseRunner.__del__ needs it
        if not isinstance(trt_module_or_path, (TRTModule, str, os.PathLike)):
            raise Torch2TRTError(
                f"TRTModuleRunner: expected a TRTModule or the path of an engine file, got "
                f"{type(trt_module_or_path).__name__}"
            )
        self._source = trt_module_or_path
        self._device = None if device is None else torch.device(device)

    def activate_impl(self) -> None:
        from torch2trt_lite.runtime.module import TRTModule

        src = self._source
        module = src if isinstance(src, TRTModule) else TRTModule.load(src)
        if not module.runnable:
            raise BackendUnavailableError(
                f"{self.name}: this {module.backend} engine cannot run here (it needs a supported NVIDIA GPU); "
                "compare it on a GPU machine, or convert with backend='sim' to compare here"
            )
        self.module = module
        self.device = self._device or torch.device("cpu" if module.backend == "sim" else "cuda")

    def get_input_metadata_impl(self) -> Any:
        return engine_input_metadata(self.module)

    def infer_impl(self, feed_dict: Any) -> OrderedDict[str, Any]:
        names = self.module.input_names
        missing = [n for n in names if n not in feed_dict]
        if missing:
            raise RuntimeExecutionError(f"{self.name}: no data for input(s) {missing} (the engine takes {names})")
        pairs = [_to_torch(n, feed_dict[n], self.device) for n in names]
        as_torch = any(t for _, t in pairs)
        xs = [x for x, _ in pairs]
        with torch.no_grad():
            start = time.perf_counter()
            result = self.module(*xs)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.inference_time = time.perf_counter() - start
        return _outputs(self.module.output_names, result, as_torch, self.name)

    def deactivate_impl(self) -> None:
        del self.module, self.device


class TorchModuleRunner(BaseRunner):  # type: ignore[misc]
    """Runs a PyTorch module for Polygraphy: inputs by ``input_names`` (in the order ``forward`` takes
    them), outputs named by ``output_names`` (one per tensor the model returns, in the engine's order).

    The first runner of ``Comparator.run`` decides the generated inputs from its input metadata: give
    ``example_inputs`` (tensors: their dtypes and shapes) or ``input_metadata`` (a Polygraphy
    ``TensorMetadata``, or the TRTModule it is compared with: its inputs' metadata).
    ``device``: where inputs go (default: the device of the model's first parameter or buffer, else
    the CPU); the model itself is not moved.
    """

    def __init__(
        self, model: torch.nn.Module, input_names: Sequence[str], output_names: Sequence[str], *,
        example_inputs: Sequence[torch.Tensor] | None = None, input_metadata: Any = None,
        device: str | torch.device | None = None, name: str | None = None,
    ):
        super().__init__(name=name, prefix="torch-runner")  # NOTE: first: BaseRunner.__del__ needs it
        if not isinstance(model, torch.nn.Module) and not callable(model):
            raise Torch2TRTError(f"TorchModuleRunner: expected an nn.Module, got {type(model).__name__}")
        input_names, output_names = list(input_names), list(output_names)
        if not output_names:
            raise Torch2TRTError("TorchModuleRunner: give the output names (e.g. the engine's output_names)")
        if example_inputs is not None and input_metadata is not None:
            raise Torch2TRTError("TorchModuleRunner: give example_inputs or input_metadata, not both")
        if example_inputs is not None:
            xs = list(example_inputs)
            if len(xs) != len(input_names) or not all(isinstance(x, torch.Tensor) for x in xs):
                raise Torch2TRTError(
                    f"TorchModuleRunner: example_inputs must be {len(input_names)} tensor(s), one per input name"
                )
            input_metadata = TensorMetadata()
            for n, x in zip(input_names, xs, strict=True):
                input_metadata.add(n, _POLY_DTYPES.get(_dtype_name(x.dtype), x.dtype), list(x.shape))
        elif input_metadata is None:
            raise Torch2TRTError(
                "TorchModuleRunner: give example_inputs (tensors like the model's inputs) or input_metadata (a "
                "polygraphy TensorMetadata, or the TRTModule to compare with): Polygraphy needs the inputs' dtypes "
                "and shapes to generate data and check it"
            )
        else:
            if hasattr(input_metadata, "metadata") and hasattr(input_metadata, "input_names"):  # a TRTModule
                input_metadata = engine_input_metadata(input_metadata)
            if list(input_metadata) != input_names:
                raise Torch2TRTError(
                    f"TorchModuleRunner: input_metadata names {list(input_metadata)} are not the input names "
                    f"{input_names}"
                )
        self._model = model
        self._input_names = input_names
        self._output_names = output_names
        self._input_metadata = input_metadata
        self._device = torch.device(device) if device is not None else _model_device(model)

    def activate_impl(self) -> None:
        self.model = self._model

    def get_input_metadata_impl(self) -> Any:
        return self._input_metadata

    def infer_impl(self, feed_dict: Any) -> OrderedDict[str, Any]:
        missing = [n for n in self._input_names if n not in feed_dict]
        if missing:
            raise RuntimeExecutionError(f"{self.name}: no data for input(s) {missing} (the model takes {self._input_names})")
        pairs = [_to_torch(n, feed_dict[n], self._device) for n in self._input_names]
        as_torch = any(t for _, t in pairs)
        with torch.no_grad():
            start = time.perf_counter()
            result = self.model(*[x for x, _ in pairs])
            if self._device.type == "cuda":
                torch.cuda.synchronize(self._device)
            self.inference_time = time.perf_counter() - start
        return _outputs(self._output_names, result, as_torch, self.name)

    def deactivate_impl(self) -> None:
        del self.model
