"""float64 in a network: ``convert(..., truncate_double=...)``.

TensorRT has no float64. A model that computes in float64 (a diffusion transformer's rotary position
embedding does ``torch.outer`` of float64 positions and frequencies, then ``cos``/``sin`` and
``.float()``) is traced as it runs: the traced PyTorch run keeps computing in float64, and every
float64 tensor of the network is a float32 one (casts to float64 become casts to float32, float64
constants are stored as float32). This is Torch-TensorRT's ``truncate_double``. The option:

* ``None`` (the default): float64 *intermediates* are computed in float32, with one warning naming
  the ops (at the end of tracing, once the outputs are known); a float64 *output* is refused
  (:class:`~torch2trt_lite.errors.ConversionError`), since the engine could only return float32:
  pass ``truncate_double=True`` to accept that.
* ``True``: every float64 tensor is computed in float32, outputs included (a float64 output of the
  model is a float32 output of the engine); no warning.
* ``False``: the first call with a float64 result on a traced tensor is refused
  (``UnsupportedOperatorError``), as before this option existed.

A float64 *input* stays refused whatever the option (pass ``x.float()``): the engine's inputs are its
inputs. ``check(model, inputs)`` lists the ops it would compute in float32 (``CheckReport.truncated``).

Precision: float32 keeps 24 bits of mantissa, float64 53; a value the model rounds to float32 at the
end (``f.cos().float()``) then differs from eager by the float32 rounding of every step before, e.g.
``cos(p * w)`` at position ``p``: about ``p * 2**-24`` radians.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from torch2trt_lite.errors import ConversionError, Torch2TRTError

log = logging.getLogger("torch2trt_lite")

ADVICE = "pass truncate_double=True to convert (the engine then computes and returns it in float32)"
FLOAT64_REFUSED = ("TensorRT has no float64 (truncate_double=False); convert with truncate_double=None (the default) "
                   "or True to compute it in float32, or compute it in float32 in the model")


def check_option(value: Any) -> bool | None:
    """``truncate_double`` checked: None, True or False."""
    if value is not None and not isinstance(value, bool):
        raise Torch2TRTError(f"truncate_double must be None (the default), True or False, got {value!r}")
    return value


def has_float64(out: Any) -> bool:
    """Does a call's result hold a float64 tensor (a tensor, or a tuple/list of them)?"""
    if isinstance(out, torch.Tensor):
        return out.dtype == torch.float64
    if isinstance(out, (tuple, list)):
        return any(isinstance(t, torch.Tensor) and t.dtype == torch.float64 for t in out)
    return False


class Float64:
    """One conversion's float64 policy (see the module docstring) and the ops it truncated."""

    def __init__(self, mode: bool | None = None) -> None:
        self.mode = check_option(mode)
        self.ops: dict[str, str] = {}  # qualname -> the first user file:line it was called at

    @property
    def allowed(self) -> bool:
        """Are float64 tensors computed in float32 (else refused)?"""
        return self.mode is not False

    def note(self, qualname: str, location: str) -> None:
        """Record that call ``qualname`` (at ``location``) made a float64 result, computed in float32."""
        self.ops.setdefault(qualname, location)

    def check_outputs(self, outputs: list[tuple[str, torch.Tensor]]) -> None:
        """The default (None) refuses a float64 output; otherwise one warning names the truncated ops."""
        wide = [name for name, t in outputs if t.dtype == torch.float64]
        if wide and self.mode is None:
            raise ConversionError(
                f"output(s) {', '.join(wide)} of the model are float64, which TensorRT does not have; "
                f"{ADVICE}, or return .float() of them"
            )
        if self.ops and self.mode is None:
            log.warning("torch2trt-lite: computing float64 in float32 (TensorRT has no float64) in: %s. "
                        "Pass truncate_double=True to silence this, or compute these in float32 in the model",
                        self.describe())

    def describe(self) -> str:
        """The truncated ops with where each was first called, for messages."""
        return ", ".join(f"{op} ({where})" for op, where in self.ops.items())


__all__ = ["ADVICE", "FLOAT64_REFUSED", "Float64", "check_option", "has_float64"]
