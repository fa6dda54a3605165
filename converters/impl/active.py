"""The conversion running in this thread, for code that is handed no ``ctx``: the guards of the size
algebra (:mod:`.sizes`: a comparison of a dynamic size in the model's code), ``check=`` functions
(:func:`.nn_common.is_traced`) and third-party guard rules (``sizes.specialize_guard``).

Dependency inversion: this module defines the hook, :data:`ACTIVE`, and what it holds,
:class:`ActiveConversion`; the tracer (``torch2trt_lite.trace.tracer``) sets it to itself while it
converts. Nothing here imports the trace phase.

:func:`user_location` names the user's ``file:line`` (the innermost frame outside torch,
torch2trt-lite and the stdlib), for messages.
"""

from __future__ import annotations

import contextvars
import functools
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import torch

from torch2trt_lite import errors

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


class ActiveConversion(Protocol):
    """What code without a ``ctx`` reads of the running conversion (the tracer is one)."""

    ctx: ConversionContext
    busy: bool  # a converted call runs (torch's own code): sizes answer with their traced values
    converting: str | None  # qualname of the call whose converter runs
    collect: bool  # check mode: problems are recorded, not raised
    problems: list[Any]

    def unsupported(self, op: str, reason: str) -> None:
        """Report ``op`` as unsupported (raised, or recorded in check mode)."""


# The active conversion of this thread: set by the tracer while it converts, None otherwise.
ACTIVE: contextvars.ContextVar[Any] = contextvars.ContextVar("torch2trt_lite_tracer", default=None)


def active() -> ActiveConversion | None:
    """The conversion running in this thread, or None."""
    return ACTIVE.get()  # type: ignore[no-any-return]


def active_context() -> ConversionContext | None:
    """The ``ctx`` of the conversion running in this thread, or None (for ``check=`` functions)."""
    conversion = ACTIVE.get()
    return None if conversion is None else conversion.ctx  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------- the user's line
_PKG_DIR = os.path.dirname(os.path.abspath(errors.__file__))  # the torch2trt_lite package
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
_SKIP_DIRS = tuple(
    d + os.sep for d in (_PKG_DIR, _TORCH_DIR, os.path.dirname(os.path.abspath(functools.__file__)))
)
_SKIP_MORE: list[tuple[str, ...]] = []


def library_dirs() -> tuple[str, ...]:
    """Folders of torch, the stdlib and this project's code, including ``converters/`` and
    ``plugins_cuda/`` (outside the package folder in an editable install)."""
    if not _SKIP_MORE:
        extra = []
        for name in ("torch2trt_lite.converters", "torch2trt_lite.plugins_cuda"):
            mod = sys.modules.get(name)
            extra += [os.path.abspath(p) + os.sep for p in getattr(mod, "__path__", [])]
        if len(extra) < 2:  # not imported yet: look again next time
            return _SKIP_DIRS + tuple(extra)
        _SKIP_MORE.append(_SKIP_DIRS + tuple(extra))
    return _SKIP_MORE[0]


def user_location(skip_frames: int = 1) -> str:
    """``file:line`` of the innermost frame outside torch, torch2trt-lite and the stdlib."""
    frame: Any = sys._getframe(skip_frames)
    skip = library_dirs()
    while frame is not None:
        fn = os.path.abspath(frame.f_code.co_filename)
        if not fn.startswith(skip) and not fn.startswith("<"):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


# Guard specializations: code object -> rules (see specialize_guard)
_SPECIAL: dict[Any, list[Callable[..., bool | None]]] = {}


def specialize_guard(code: Any, rule: Callable[..., bool | None]) -> None:
    """Let ``rule(frame, size, op, other, traced)`` answer a comparison of the dynamic size ``size``
    (``op``: ``"eq"``, ``"gt"``, ...; ``traced``: its answer at the traced size) made in the function
    whose code object is ``code`` (``frame``: that call's frame) that the range does not decide.
    The rule returns the answer (True/False) only where the branch it picks computes the same result
    for every size of the range, else None (the guard then refuses as usual). For third-party code
    that branches to a special case equal to the general one (see converters/zoo_transformers.py)."""
    rules = _SPECIAL.setdefault(code, [])
    if rule not in rules:
        rules.append(rule)


def specialized(skip_file: str, size: Any, op: str, other: Any, traced: bool) -> bool | None:
    """The answer of a rule of :func:`specialize_guard` for the comparison ``size op other`` made by the
    innermost caller outside ``skip_file`` (the size algebra's module); None: no rule answers."""
    if not _SPECIAL:
        return None
    frame: Any = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename in (skip_file, __file__):
        frame = frame.f_back
    for rule in _SPECIAL.get(frame.f_code if frame is not None else None, ()):
        answer = rule(frame, size, op, other, traced)
        if answer is not None:
            return bool(answer)
    return None


__all__ = [
    "ACTIVE", "ActiveConversion", "active", "active_context", "library_dirs", "specialize_guard", "specialized",
    "user_location",
]
