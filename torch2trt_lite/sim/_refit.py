"""Refit: ``Refitter`` and ``ISerializationConfig``, with TensorRT's rules.

* Only engines built with ``BuilderFlag.REFIT``, ``REFIT_IDENTICAL`` or ``REFIT_INDIVIDUAL`` (then
  only weights marked with ``INetworkDefinition.mark_weights_refittable``) can be refitted; the sim's
  refittable weights are the ones named with ``INetworkDefinition.set_weights_name`` (TensorRT also
  names the others after their layer and role; the sim does not).
* ``set_named_weights`` refuses (False, logged) an unknown name, another count of values or another
  type than the build's.
* ``get_missing_weights`` lists the weights a refit must still supply: those left out of a
  weight-stripped plan (``BuilderFlag.STRIP_PLAN``, ``SerializationFlag.EXCLUDE_WEIGHTS``) that were not
  set. The sim combines no weights, so nothing else is ever missing. ``refit_cuda_engine`` fails
  while any is missing.
* ``REFIT_IDENTICAL`` tells the builder the refit weights equal the build weights; TensorRT may then
  optimize with the build's values, so a refit with other values is undefined there. The sim records
  each weight's CRC-32 at build time and fails such a refit (logged) instead.
"""

from __future__ import annotations

import zlib
from typing import Any

import torch

from ._core import FlagSet, Weights, _log
from ._enums import ENUMS, Severity


class ISerializationConfig(FlagSet):
    """Flags of ``ICudaEngine.serialize_with_config`` (``SerializationFlag``)."""

    def __init__(self) -> None:
        self._flags = 0

    def set_flag(self, flag: Any) -> bool:
        self._flags |= 1 << int(flag)
        return True

    def clear_flag(self, flag: Any) -> bool:
        self._flags &= ~(1 << int(flag))
        return True


def _crc(t: torch.Tensor) -> int:
    t = t.detach().contiguous().cpu()
    return zlib.crc32(t.reshape(-1).view(torch.uint8).numpy().data) if t.numel() else 0


class Refitter:
    """Updates the weights of a refittable engine (TensorRT's ``Refitter(engine, logger)``)."""

    def __init__(self, engine: Any, logger: Any) -> None:
        self._engine = engine
        self._logger = logger
        self._pending: dict[str, Weights] = {}
        self.max_threads = 1
        self.weights_validation = True
        self.error_recorder: Any = None

    @property
    def logger(self) -> Any:
        return self._logger

    def _error(self, msg: str) -> bool:
        _log(self._logger, Severity.ERROR, msg)
        return False

    def get_all_weights(self) -> list[str]:
        return sorted(self._engine._named)

    def get_all(self) -> tuple[list[str], list[Any]]:
        names = self.get_all_weights()
        return names, [ENUMS["WeightsRole"]["ANY"]] * len(names)

    def get_missing_weights(self) -> list[str]:
        stripped = {n for n, uses in self._engine._named.items() if any(getattr(layer._a[a], "_stripped", False)
                                                                        for layer, a in uses)}
        return sorted(stripped - set(self._pending))

    def get_missing(self) -> tuple[list[str], list[Any]]:
        names = self.get_missing_weights()
        return names, [ENUMS["WeightsRole"]["ANY"]] * len(names)

    def set_named_weights(self, name: str, weights: Any, location: Any = None) -> bool:
        uses = self._engine._named.get(name)
        if not self._engine.refittable:
            return self._error("IRefitter::setNamedWeights: the engine was not built refittable (BuilderFlag.REFIT)")
        if uses is None:
            return self._error(f"IRefitter::setNamedWeights: no refittable weights are named '{name}'")
        w = weights if isinstance(weights, Weights) else Weights(weights)
        old = uses[0][0]._a[uses[0][1]]
        if len(w) != len(old):
            return self._error(
                f"IRefitter::setNamedWeights: weights '{name}' have {len(w)} values, the engine was built with {len(old)}"
            )
        if int(w.dtype) != int(old.dtype):
            return self._error(
                f"IRefitter::setNamedWeights: weights '{name}' are {w.dtype.name}, the engine was built with {old.dtype.name}"
            )
        copy = Weights(w._tensor().clone().reshape(old._shape()))  # NOTE: the caller's memory may change later
        self._pending[name] = copy
        return True

    def unset_named_weights(self, weights_name: str) -> bool:
        return self._pending.pop(weights_name, None) is not None

    def get_named_weights(self, weights_name: str) -> Any:
        if weights_name in self._pending:
            return self._pending[weights_name]
        uses = self._engine._named.get(weights_name)
        return uses[0][0]._a[uses[0][1]] if uses else None

    def get_weights_prototype(self, weights_name: str) -> Any:
        uses = self._engine._named.get(weights_name)
        if not uses:
            return None
        old = uses[0][0]._a[uses[0][1]]
        return Weights(torch.empty(old._shape(), dtype=_torch_dtype(old.dtype)))

    def get_weights_location(self, weights_name: str) -> Any:
        return ENUMS["TensorLocation"]["HOST"]

    def refit_cuda_engine(self) -> bool:
        eng = self._engine
        missing = self.get_missing_weights()
        if missing:
            return self._error(f"IRefitter::refitCudaEngine: missing weights {missing[:8]}: set them first")
        if eng._refit_mode == "REFIT_IDENTICAL":
            for name, w in self._pending.items():
                if _crc(w._tensor()) != eng._refit_crcs.get(name):
                    return self._error(
                        f"IRefitter::refitCudaEngine: the engine was built with BuilderFlag.REFIT_IDENTICAL, which "
                        f"assumes the refit weights equal the build weights, and weights '{name}' differ"
                    )
        for name, w in self._pending.items():
            for layer, attr in eng._named[name]:
                w._name = name
                layer._a[attr] = w
        if self._pending:
            eng._weights_epoch += 1
            eng._refitted = True
        self._pending = {}
        return True

    def refit_cuda_engine_async(self, stream_handle: int) -> bool:
        return self.refit_cuda_engine()

    def __del__(self) -> None:
        return None


def _torch_dtype(dt: Any) -> torch.dtype:
    from ._dtypes import torch_dtype

    return torch_dtype(dt)


__all__ = ["ISerializationConfig", "Refitter"]
