"""Backends: the real ``tensorrt`` module (imported lazily) or ``torch2trt_lite.sim``.

Both expose TensorRT's Python API; the differences the rest of the package sees are gathered
here: how a tensor is handed to ``set_tensor_address``, which stream runs it, and the version.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import BackendUnavailableError

log = logging.getLogger("torch2trt_lite")

BACKENDS = ("auto", "sim", "tensorrt")


@dataclass(frozen=True)
class Backend:
    name: str  # "sim" or "tensorrt"
    trt: Any  # the API module
    version: str  # the TensorRT API version, e.g. "11.1.0.106" (sim) or tensorrt.__version__

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def tensor_address(self, t: torch.Tensor) -> Any:
        # NOTE: the sim takes torch tensors directly (and raw addresses); TensorRT takes addresses.
        return t if self.name == "sim" else t.data_ptr()

    def stream_handle(self, device: torch.device) -> int:
        if device.type == "cuda":
            return int(torch.cuda.current_stream(device).cuda_stream)
        return 0

    def network_flags(self) -> int:
        flag = getattr(self.trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
        return 0 if flag is None else 1 << int(flag)


@functools.cache
def _import_tensorrt() -> Any:
    try:
        import tensorrt
    except ImportError as e:
        raise BackendUnavailableError(
            "backend='tensorrt' needs the TensorRT Python package: `pip install tensorrt` "
            "(from NVIDIA's package index) on a machine with an NVIDIA GPU; "
            f"the import failed with: {e}. Use backend='sim' to run the reference backend instead."
        ) from e
    return tensorrt


def tensorrt_available() -> bool:
    try:
        _import_tensorrt()
    except BackendUnavailableError:
        return False
    return torch.cuda.is_available()


def sim_backend(version: str | None = None) -> Backend:
    from .. import sim

    ns = sim.api(version) if version else sim.api()
    return Backend("sim", ns, ns.__version__)


def get_backend(name: str = "auto", *, quiet: bool = False) -> Backend:
    """Resolve ``"auto"``, ``"sim"`` or ``"tensorrt"`` to a :class:`Backend`."""
    if name not in BACKENDS:
        raise BackendUnavailableError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    if name == "sim":
        return sim_backend()
    if name == "tensorrt":
        trt = _import_tensorrt()
        if not torch.cuda.is_available():
            raise BackendUnavailableError(
                "backend='tensorrt' needs a CUDA GPU, and torch.cuda.is_available() is False"
            )
        return Backend("tensorrt", trt, str(trt.__version__))
    if tensorrt_available():
        trt = _import_tensorrt()
        if not quiet:
            log.info("torch2trt-lite: backend='auto' chose TensorRT %s", trt.__version__)
        return Backend("tensorrt", trt, str(trt.__version__))
    if not quiet:
        why = "TensorRT is not installed" if not _has_tensorrt_module() else "no CUDA GPU is available"
        log.warning(
            "torch2trt-lite: backend='auto' chose the sim (%s): the engine runs TensorRT's layer "
            "semantics with torch ops, not TensorRT kernels", why,
        )
    return sim_backend()


def _has_tensorrt_module() -> bool:
    try:
        _import_tensorrt()
    except BackendUnavailableError:
        return False
    return True
