"""Builder, IBuilderConfig, IOptimizationProfile and IHostMemory."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import BuildError, NetworkDefinitionError
from ._core import Dims, FlagSet, _log, as_dims, field_property
from ._enums import BuilderFlag, DataType, MemoryPoolType, Severity


class IHostMemory(bytearray):
    """Serialized engine bytes. Like TensorRT's, it supports the buffer protocol."""

    @property
    def dtype(self) -> Any:
        return DataType.UINT8

    @property
    def nbytes(self) -> int:
        return len(self)

    def __enter__(self) -> IHostMemory:
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        return None

    def __del__(self) -> None:
        return None


class IProgressMonitor:
    """TensorRT's build progress interface: subclass it and set ``config.progress_monitor``.

    The builder calls ``phase_start`` when a phase begins (``parent_phase`` is the enclosing phase's
    name, or None for the top one), ``step_complete`` after each of its ``num_steps`` steps, and
    ``phase_finish`` when it ends. ``step_complete`` returning False cancels the build:
    ``build_serialized_network`` then finishes the open phases and returns None, logging
    "Build canceled by user" as TensorRT does. (TensorRT's own base methods are pure virtual; the
    sim's report nothing and never cancel, so a subclass may override only what it needs.)
    """

    def __init__(self) -> None:
        pass

    def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
        return None

    def step_complete(self, phase_name: str, step: int) -> bool:
        return True

    def phase_finish(self, phase_name: str) -> None:
        return None


class _Cancelled(Exception):
    """step_complete returned False (or raised): the build stops."""


class _Phases:
    """Drives a config's progress monitor through the sim builder's phases (nothing without one)."""

    def __init__(self, monitor: Any) -> None:
        self._monitor = monitor
        self._open: list[str] = []

    @contextmanager
    def phase(self, name: str, num_steps: int) -> Iterator[None]:
        m = self._monitor
        if m is None:
            yield
            return
        parent = self._open[-1] if self._open else None
        self._call("phase_start", m.phase_start, name, parent, int(num_steps))
        self._open.append(name)
        try:
            yield
        finally:
            # NOTE: like TensorRT, a cancelled build still finishes every open phase, innermost first
            self._open.pop()
            self._call("phase_finish", m.phase_finish, name)

    def step(self, name: str, step: int) -> None:
        if self._monitor is not None and not self._call("step_complete", self._monitor.step_complete, name, int(step)):
            raise _Cancelled("step_complete returned False")

    @staticmethod
    def _call(what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - TensorRT reports a raising monitor and cancels
            raise _Cancelled(f"{what} raised {type(e).__name__}: {e}") from e


class IOptimizationProfile:
    def __init__(self) -> None:
        self._shapes: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {}
        self._values: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {}
        self._valid = True
        self.extra_memory_target = 1.0

    def set_shape(self, input: str, min: Any, opt: Any, max: Any) -> None:  # noqa: A002 (TensorRT's names)
        mn, op, mx = (as_dims(v, "profile shape") for v in (min, opt, max))
        if not (len(mn) == len(op) == len(mx)):
            self._valid = False
            raise NetworkDefinitionError(f"set_shape('{input}'): min/opt/max ranks differ: {mn}, {op}, {mx}")
        if any(a < 0 for a in mn) or not all(a <= b <= c for a, b, c in zip(mn, op, mx, strict=True)):
            self._valid = False
            raise NetworkDefinitionError(
                f"set_shape('{input}'): need 0 <= min <= opt <= max in every dimension, got {mn}, {op}, {mx}"
            )
        self._shapes[str(input)] = (mn, op, mx)

    def get_shape(self, input: str) -> list[Dims]:  # noqa: A002
        if input not in self._shapes:
            return []
        return [Dims(d) for d in self._shapes[input]]

    def set_shape_input(self, input: str, min: Any, opt: Any, max: Any) -> None:  # noqa: A002
        mn, op, mx = (as_dims(v, "profile values") for v in (min, opt, max))
        if not (len(mn) == len(op) == len(mx)) or not all(
            a <= b <= c for a, b, c in zip(mn, op, mx, strict=True)
        ):
            self._valid = False
            raise NetworkDefinitionError(f"set_shape_input('{input}'): need min <= opt <= max, got {mn}, {op}, {mx}")
        self._values[str(input)] = (mn, op, mx)

    def get_shape_input(self, input: str) -> list[tuple[int, ...]]:  # noqa: A002
        return list(self._values.get(input, ()))

    def __bool__(self) -> bool:
        return self._valid

    __nonzero__ = __bool__


class IBuilderConfig(FlagSet):
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._flags = 0
        self._pools: dict[int, int] = {}
        self._profiles: list[IOptimizationProfile] = []
        self._preview: dict[int, bool] = {}
        self.profiling_verbosity: Any = None
        self.builder_optimization_level = 3
        self.avg_timing_iterations = 1
        self.max_aux_streams = -1
        self.DLA_core = -1
        self.default_device_type: Any = None
        self.engine_capability: Any = None
        self.hardware_compatibility_level: Any = None
        self.max_num_tactics = -1
        self.tiling_optimization_level: Any = None
        self._progress_monitor: Any = None

    progress_monitor = field_property("_progress_monitor")

    def set_memory_pool_limit(self, pool: Any, pool_size: int) -> None:
        self._pools[int(pool)] = int(pool_size)

    def get_memory_pool_limit(self, pool: Any) -> int:
        return self._pools.get(int(pool), 1 << 40 if int(pool) == int(MemoryPoolType.WORKSPACE) else 0)

    def set_flag(self, flag: Any) -> None:
        self._flags |= 1 << int(flag)

    def clear_flag(self, flag: Any) -> None:
        self._flags &= ~(1 << int(flag))

    def add_optimization_profile(self, profile: IOptimizationProfile) -> int:
        if not profile:
            raise NetworkDefinitionError("add_optimization_profile: the profile is invalid")
        self._profiles.append(profile)
        return len(self._profiles) - 1

    @property
    def num_optimization_profiles(self) -> int:
        return len(self._profiles)

    def set_preview_feature(self, feature: Any, enable: bool) -> None:
        self._preview[int(feature)] = bool(enable)

    def get_preview_feature(self, feature: Any) -> bool:
        return self._preview.get(int(feature), False)


class Builder:
    _ns: Any = None  # the version namespace; set on the versioned subclasses

    def __init__(self, logger: Any) -> None:
        self._logger = logger
        self.max_threads = 1
        self._error_recorder: Any = None

    @property
    def logger(self) -> Any:
        return self._logger

    error_recorder = field_property("_error_recorder")

    # NOTE: the sim runs on whatever device the inputs are on; it reports what a modern GPU has.
    @property
    def platform_has_fast_fp16(self) -> bool:
        return True

    @property
    def platform_has_fast_int8(self) -> bool:
        return True

    @property
    def platform_has_tf32(self) -> bool:
        return True

    @property
    def num_DLA_cores(self) -> int:
        return 0

    @property
    def max_DLA_batch_size(self) -> int:
        return 1

    def create_network(self, flags: int = 0) -> Any:
        return self._ns._class("INetworkDefinition")(self, flags)

    def create_builder_config(self) -> Any:
        return self._ns._class("IBuilderConfig")()

    def create_optimization_profile(self) -> Any:
        return self._ns._class("IOptimizationProfile")()

    def build_serialized_network(self, network: Any, config: Any) -> IHostMemory | None:
        from . import _plan

        phases = _Phases(getattr(config, "_progress_monitor", None))
        try:
            plan = _plan.build(network, config, self._ns._version, alloc=self._ns._class("IHostMemory"), phases=phases)
        except (BuildError, NetworkDefinitionError) as e:
            _log(self._logger, Severity.ERROR, str(e))
            return None
        except _Cancelled as e:
            _log(self._logger, Severity.ERROR, f"IBuilder::buildSerializedNetwork: Error Code 7: BuildCanceled "
                 f"(Build canceled by user: the progress monitor's {e})")
            return None
        _plan.trust(plan)
        return plan  # type: ignore[no-any-return]

    def build_engine_with_config(self, network: Any, config: Any) -> Any:
        plan = self.build_serialized_network(network, config)
        if plan is None:
            return None
        return self._ns._class("Runtime")(self._logger).deserialize_cuda_engine(plan)

    def is_network_supported(self, network: Any, config: Any) -> bool:
        from . import _plan

        try:
            _plan.build(network, config, self._ns._version)
        except (BuildError, NetworkDefinitionError):
            return False
        return True

    def reset(self) -> None:
        return None

    def get_plugin_registry(self) -> Any:
        return self._ns.get_plugin_registry()

    def __enter__(self) -> Builder:
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        return None

    def __del__(self) -> None:
        return None


__all__ = ["Builder", "BuilderFlag", "IBuilderConfig", "IHostMemory", "IOptimizationProfile", "IProgressMonitor"]
