"""Backends: the real ``tensorrt`` and ``tensorrt_rtx`` modules (imported lazily) or ``torch2trt_lite.sim``.

All three expose TensorRT's Python API; the differences the rest of the package sees are gathered
here: how a tensor is handed to ``set_tensor_address``, which stream runs it, the version, whether
the backend has plugins and whether it can run an engine on this machine.

* ``tensorrt``: NVIDIA TensorRT 10.13+ / 11.x; builds and runs on an NVIDIA GPU.
* ``tensorrt-rtx``: NVIDIA TensorRT for RTX (``pip install tensorrt-rtx-cu13``): TensorRT 11's
  network API without plugins. Its builder runs without a GPU (CPU-only ahead-of-time build), so
  engines for deployment can be built on any machine; running one needs a supported GPU.
* ``sim``: TensorRT's API executed with torch ops, on CPU or CUDA tensors.
"""

from __future__ import annotations

import functools
import importlib
import logging
import threading
import types
import weakref
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import BackendUnavailableError

log = logging.getLogger("torch2trt_lite")

BACKENDS = ("auto", "sim", "tensorrt", "tensorrt-rtx")
REAL_BACKENDS = ("tensorrt", "tensorrt-rtx")

_MODULES = {"tensorrt": "tensorrt", "tensorrt-rtx": "tensorrt_rtx"}
_INSTALL = {
    "tensorrt": "`pip install tensorrt` (from NVIDIA's package index) on a machine with an NVIDIA GPU",
    "tensorrt-rtx": "`pip install tensorrt-rtx-cu13` (or `pip install 'torch2trt-lite[rtx]'`)",
}


@dataclass(frozen=True)
class Backend:
    name: str  # "sim", "tensorrt" or "tensorrt-rtx"
    trt: Any  # the API module
    version: str  # the TensorRT API version, e.g. "11.1.0.106" (sim) or tensorrt.__version__

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def is_real(self) -> bool:
        """A real NVIDIA library (TensorRT or TensorRT-RTX), as opposed to the sim."""
        return self.name != "sim"

    @property
    def has_plugins(self) -> bool:
        """Does the network API have plugin layers? (TensorRT-RTX has none.)"""
        return hasattr(self.trt.INetworkDefinition, "add_plugin_v3")

    @property
    def label(self) -> str:
        return {"sim": "the sim", "tensorrt": "TensorRT", "tensorrt-rtx": "TensorRT-RTX"}[self.name] + \
            f" {self.version}"

    def can_run(self) -> bool:
        """Can engines of this backend execute here? The sim always can; the real ones need a GPU."""
        return not self.is_real or torch.cuda.is_available()

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
def _import(name: str) -> Any:
    try:
        return importlib.import_module(_MODULES[name])
    except ImportError as e:
        raise BackendUnavailableError(
            f"backend={name!r} needs the {_MODULES[name]} Python package: {_INSTALL[name]}; the import failed "
            f"with: {e}. Use backend='sim' to run the reference backend instead."
        ) from e


def _import_tensorrt() -> Any:
    return _import("tensorrt")


def _installed(name: str) -> bool:
    try:
        _import(name)
    except BackendUnavailableError:
        return False
    return True


def tensorrt_available() -> bool:
    return _installed("tensorrt") and torch.cuda.is_available()


def rtx_installed() -> bool:
    """Is TensorRT-RTX importable? (Its builder needs no GPU.)"""
    return _installed("tensorrt-rtx")


def sim_backend(version: str | None = None) -> Backend:
    from .. import sim

    ns = sim.api(version) if version else sim.api()
    return Backend("sim", ns, ns.__version__)


def real_backend(name: str) -> Backend:
    trt = _import(name)
    return Backend(name, trt, str(trt.__version__))


_said: set[str] = set()


def _say_once(level: int, msg: str, *args: Any) -> None:
    key = msg % args
    if key not in _said:
        _said.add(key)
        log.log(level, msg, *args)


def get_backend(name: str = "auto", *, quiet: bool = False) -> Backend:
    """Resolve ``"auto"``, ``"sim"``, ``"tensorrt"`` or ``"tensorrt-rtx"`` to a :class:`Backend`.

    ``"tensorrt"`` needs a CUDA GPU; ``"tensorrt-rtx"`` builds without one (its engines then need a
    supported GPU to run). ``"auto"`` takes TensorRT, else TensorRT-RTX, when a GPU exists, else the
    sim, and logs its choice once per process.
    """
    if name not in BACKENDS:
        raise BackendUnavailableError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    if name == "sim":
        return sim_backend()
    if name == "tensorrt":
        be = real_backend("tensorrt")
        if not torch.cuda.is_available():
            raise BackendUnavailableError(
                "backend='tensorrt' needs a CUDA GPU, and torch.cuda.is_available() is False; "
                "backend='tensorrt-rtx' builds real engines without a GPU"
            )
        return be
    if name == "tensorrt-rtx":
        return real_backend("tensorrt-rtx")
    gpu = torch.cuda.is_available()
    for real in REAL_BACKENDS:
        if gpu and _installed(real):
            be = real_backend(real)
            if not quiet:
                _say_once(logging.INFO, "torch2trt-lite: backend='auto' chose %s", be.label)
            return be
    if not quiet:
        if not gpu:
            why = "no CUDA GPU is available"
        else:
            why = "neither TensorRT nor TensorRT-RTX is installed"
        _say_once(
            logging.WARNING,
            "torch2trt-lite: backend='auto' chose the sim (%s): the engine runs TensorRT's layer "
            "semantics with torch ops, not TensorRT kernels", why,
        )
    return sim_backend()


def parse_compute_capabilities(trt: Any, values: Any) -> list[Any]:
    """TensorRT-RTX ``ComputeCapability`` members for ``values``: names such as ``"sm86"``, ``"8.6"``,
    ``(8, 6)`` or ``"current"`` (the GPU of this machine)."""
    if isinstance(values, (str, tuple)):
        values = [values]
    enum = getattr(trt, "ComputeCapability", None)  # TensorRT-RTX only
    if enum is None:
        raise BackendUnavailableError("compute capabilities are a TensorRT-RTX build option")
    known = [m for m in enum.__members__ if m.startswith("SM")]
    out = []
    for v in values:
        if isinstance(v, tuple) and len(v) == 2:
            key = f"SM{int(v[0])}{int(v[1])}"
        elif isinstance(v, str):
            s = v.strip().upper().replace("_", "")
            key = "CURRENT" if s == "CURRENT" else s if s.startswith("SM") else "SM" + s.replace(".", "")
        else:
            raise BackendUnavailableError(
                f"compute capability {v!r}: give names like 'sm86', '8.6', (8, 6) or 'current'"
            )
        if key not in enum.__members__ or key == "NONE":
            raise BackendUnavailableError(
                f"compute capability {v!r} is not one TensorRT-RTX builds for; it knows "
                f"{', '.join(k.lower() for k in known)} and 'current'"
            )
        out.append(enum.__members__[key])
    if not out:
        raise BackendUnavailableError("compute_capabilities is empty; omit it for TensorRT-RTX's default targets")
    return out


# ------------------------------------------------------------------------- types and weights
_TRT_DTYPE_NAMES: dict[torch.dtype, str] = {}  # torch dtype -> DataType member name (the same in every backend)
_TORCH_DTYPES: dict[int, torch.dtype] = {}  # int(DataType) -> the torch dtype holding its values


def trt_dtype(trt: Any, dtype: torch.dtype) -> Any:
    """The ``trt.DataType`` member (``trt``: a backend's API module) of torch ``dtype``; a
    NetworkDefinitionError for a dtype TensorRT has no type for."""
    name = _TRT_DTYPE_NAMES.get(dtype)
    if name is None:
        from torch2trt_lite.sim.extras import from_torch

        name = _TRT_DTYPE_NAMES[dtype] = from_torch(dtype).name
    return getattr(trt.DataType, name)


def torch_dtype(trt_dtype: Any) -> torch.dtype:
    """The torch dtype that holds values of a ``DataType`` member of any backend."""
    key = int(trt_dtype)
    hit = _TORCH_DTYPES.get(key)
    if hit is None:
        from torch2trt_lite.sim.extras import torch_dtype as to_torch

        hit = _TORCH_DTYPES[key] = to_torch(trt_dtype)
    return hit


def deferred_weights(backend_name: str, shape: Any, dtype: torch.dtype, fill: Any) -> Any | None:
    """Weights that ``fill(out)`` writes when the sim builds its plan (straight into the plan: derived
    weights then never exist as a separate copy); None on a real backend, where the caller computes
    them now."""
    if backend_name != "sim":
        return None
    from torch2trt_lite.sim.extras import DeferredWeights

    return DeferredWeights(shape, dtype, fill)


def refit_build_refusal(backend: Backend) -> str | None:
    """Why ``backend`` cannot build a refittable or weight-stripped engine here (None: it can, or it is
    not known not to). Measured with TensorRT-RTX 1.7.1.116: its CPU-only builder fails ``REFIT`` and
    ``STRIP_PLAN`` builds in Myelin (``graph_jit.cpp:278: CHECK(status == CUDA_SUCCESS) failed``) while a
    plain build of the same network succeeds; the builder's own words follow this reason."""
    if backend.name != "tensorrt-rtx" or torch.cuda.is_available():
        return None
    return (f"TensorRT-RTX {backend.version} without a GPU cannot build refittable (BuilderFlag.REFIT) or "
            "weight-stripped (BuilderFlag.STRIP_PLAN) engines; build them on a machine with a supported NVIDIA GPU "
            "(TensorRT-RTX documents both; not yet run here: tools/device_check.sh, step refit), or on the sim "
            "anywhere (backend='sim')")


# ------------------------------------------------------------------------------ logging
_TRT_LOG = logging.getLogger("torch2trt_lite.tensorrt")


class CapturingLogger:
    """Collects the errors a backend logs while one builder / runtime is in use (``.errors``), and
    maps TensorRT's severities onto Python ``logging`` (logger ``torch2trt_lite.tensorrt``).

    TensorRT keeps the first logger a process registers and ignores later ones (TensorRT-RTX says
    so in a warning), so the real backends get one shared ``ILogger`` per module that hands each
    message to the capturing loggers of the calling thread. The sim gets its own logger each time.
    """

    def __init__(self, trt: Any) -> None:
        self.errors: list[str] = []
        self._thread = threading.get_ident()
        if not (isinstance(trt, types.ModuleType) and trt.__name__ in _MODULES.values()):
            self.logger = _make_logger(trt, lambda: [self])  # the sim
        else:
            shared = _shared_logger(trt)
            shared.sinks.add(self)
            self.logger = shared


_SHARED_LOGGERS: dict[str, Any] = {}  # module name -> its shared ILogger
_SHARED_LOCK = threading.Lock()


def _shared_logger(trt: Any) -> Any:
    """The one logger of the real module ``trt`` (``tensorrt`` or ``tensorrt_rtx``), made on first use."""
    with _SHARED_LOCK:
        shared = _SHARED_LOGGERS.get(trt.__name__)
        if shared is None:
            sinks: weakref.WeakSet[CapturingLogger] = weakref.WeakSet()

            def current() -> list[CapturingLogger]:
                live = list(sinks)
                mine = [s for s in live if s._thread == threading.get_ident()]
                return mine or live

            shared = _SHARED_LOGGERS[trt.__name__] = _make_logger(trt, current)
            shared.sinks = sinks
        return shared


def _make_logger(trt: Any, sinks: Any) -> Any:
    base = trt.ILogger
    sev = trt.ILogger.Severity
    levels = {int(sev.INTERNAL_ERROR): logging.ERROR, int(sev.ERROR): logging.ERROR,
              int(sev.WARNING): logging.WARNING, int(sev.INFO): logging.DEBUG, int(sev.VERBOSE): 5}
    error = int(sev.ERROR)

    class Logger(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            base.__init__(self)

        def log(self, severity: Any, msg: str) -> None:
            level = int(severity)
            if level <= error:
                for sink in sinks():
                    sink.errors.append(str(msg))
            py_level = levels.get(level, logging.DEBUG)
            if _TRT_LOG.isEnabledFor(py_level):
                _TRT_LOG.log(py_level, "%s", msg)

    return Logger()
