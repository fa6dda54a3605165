"""Calls the tracer cannot see into (issue 22): traced through, refused, or found out, never frozen.

A call that runs outside Python's view of torch (TorchScript, a C++ extension, code run with torch
function disabled) hands back tensors the tracer did not make; turned into constants, they would make
the engine answer every input with the traced input's values.

* A ``torch.jit.ScriptFunction`` (``@torch.jit.script``, ``torch.jit.trace`` of a function) called
  with a traced tensor (or a symbolic size) runs its original Python function instead
  (``_torchdynamo_inline``, which torch keeps for dynamo), so each call in it is converted. Without
  one, the call is refused. (Like dynamo, the Python runs with ``torch.jit.is_scripting()`` False.)
* A ``ScriptMethod`` (the forward of a ``torch.jit.script``-ed, traced or loaded module) called with a
  traced tensor is refused: TorchScript modules keep no Python forward to trace.
  Both patches are installed with the tracer's (``Tracer._patch_all``); another thread, or this one
  outside tracing, gets the original call.
* :class:`Provenance`: while tracing, the untraced tensors that the model's visible calls make (torch
  calls the guard saw, TorchScript run on untraced tensors) are noted. An untraced tensor argument of
  a converted call that is none of those, nor a parameter, buffer or attribute of the model, nor a
  global or closure variable of the code that calls it, was made by a call nothing saw: a *suspect*.
  ``build/dependence.py`` then runs the model twice (the traced inputs, perturbed ones) and refuses
  a suspect whose values change with the inputs.
"""

from __future__ import annotations

import functools
import os
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

from torch2trt_lite.converters.impl.active import ACTIVE, library_dirs, user_location
from torch2trt_lite.converters.impl.sizes import has_sym
from torch2trt_lite.trace.context import arg_tensors

# ------------------------------------------------------------------------------ TorchScript
_SCRIPT_REASON = (
    "TorchScript runs its calls in the TorchScript interpreter, where torch2trt-lite cannot see them, "
    "so its result would be frozen into the engine as a constant"
)


def _sees_inputs(tracer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Does a call get a traced tensor, or (dynamic shapes) a symbolic size?"""
    if tracer.touches_traced(args, kwargs):
        return True
    return tracer.symbolic is not None and has_sym((*args, *kwargs.values()))


def _refuse(tracer: Any, op: str, reason: str, original: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    tracer.unsupported(op, reason)  # raises, or (check mode) records the call
    out = original(*args, **kwargs)
    tracer.ctx.mark_traced(out)  # check mode: keep reporting downstream calls
    return out


def _opaque_call(on_inputs: Any) -> Any:
    """A patch of a TorchScript ``__call__``: passed through outside a conversion, while a converted call
    runs, or when no traced tensor reaches it (its result then counts as made by a visible call);
    otherwise ``on_inputs(tracer, original, self, args, kwargs)`` decides."""

    def make(original: Any) -> Any:
        @functools.wraps(original)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            tracer = ACTIVE.get()
            if tracer is None or tracer.busy:
                return original(self, *args, **kwargs)
            if not _sees_inputs(tracer, args, kwargs):
                return tracer.provenance.made(original(self, *args, **kwargs), args, kwargs)
            return on_inputs(tracer, original, self, args, kwargs)

        return call

    return make


@_opaque_call
def _script_function_call(tracer: Any, original: Any, self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The patched ``torch.jit.ScriptFunction.__call__`` (see module docstring)."""
    python = getattr(self, "_torchdynamo_inline", None)
    if python is None:
        return _refuse(
            tracer, f"torch.jit.ScriptFunction {self.qualified_name}",
            f"{_SCRIPT_REASON}, and torch kept no Python function to trace in its place. Call the Python "
            "function instead (remove @torch.jit.script / torch.jit.trace)",
            original, (self, *args), kwargs,
        )
    return python(*args, **kwargs)


@_opaque_call
def _script_method_call(tracer: Any, original: Any, self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The patched ``torch.ScriptMethod.__call__``: a TorchScript module's method on traced tensors
    is refused (check mode: recorded, its outputs count as traced)."""
    try:
        name = f"{self.owner._type().name()}.{self.name}"
    except Exception:  # noqa: BLE001 - only for the message
        name = str(getattr(self, "name", "forward"))
    return _refuse(
        tracer, f"torch.jit.ScriptModule {name}",
        f"a TorchScript module (torch.jit.script, torch.jit.trace or torch.jit.load) keeps no Python forward "
        f"to trace, and {_SCRIPT_REASON}. Convert the Python nn.Module instead: remove torch.jit.script / "
        "torch.jit.trace around it, or build the module from its Python class rather than a TorchScript file",
        original, (self, *args), kwargs,
    )


def _patch(owner: Any, attr: str, make: Any) -> tuple[Any, str, Any, Any]:
    source = vars(owner)[attr]
    return owner, attr, source, make(source)


# (owner, attr, original, wrapper): installed and restored with the tracer's patches
PATCHES: tuple[tuple[Any, str, Any, Any], ...] = (
    _patch(torch._C.ScriptFunction, "__call__", _script_function_call),
    _patch(torch._C.ScriptMethod, "__call__", _script_method_call),
)


def op_name(func: Any) -> str | None:
    """``torch.ops.<namespace>.<op>[.<overload>]``, the name to register a converter under, of a
    ``torch.ops`` operator; None for anything else."""
    if isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return f"torch.ops.{func}"
    return None


# ------------------------------------------------------------------------------- provenance
Key = tuple[str, str, int, int]  # (op, user's file:line, index among the call's tensors, occurrence)


@dataclass
class Suspect:
    """An untraced tensor argument of a converted call that no call the tracer saw made."""

    op: str
    module_path: str
    location: str
    index: int  # among the call's tensor arguments
    value: torch.Tensor | None  # a copy, where the conversion keeps values (the eager runs)

    def __str__(self) -> str:
        return f"{self.op} at module '{self.module_path or '<model>'}' ({self.location})"


def _holds(container: Any, t: torch.Tensor) -> bool:
    """Is ``t`` the value, or an item of the list, tuple or dict value ``container``?"""
    if container is t:
        return True
    if type(container) in (list, tuple):
        return any(x is t for x in container)
    if type(container) is dict:
        return any(x is t for x in container.values())
    return False


class Provenance:
    """Where the untraced tensors that converted calls receive come from (see module docstring).

    ``keep_values``: copy each suspect's values (the eager runs of ``build/dependence.py``)."""

    def __init__(self, is_traced: Any, model: torch.nn.Module | None, keep_values: bool = False) -> None:
        self._is_traced = is_traced
        self.model = model
        self.keep_values = keep_values
        self.made_here: WeakIdKeyDictionary = WeakIdKeyDictionary()  # untraced tensors visible calls made
        self.suspects: dict[Key, Suspect] = {}
        self._model_ids: set[int] | None = None  # ids of the model's parameters and buffers (at first use)
        self._cleared: WeakIdKeyDictionary = WeakIdKeyDictionary()  # found to exist outside the forward
        self._seen: Counter[tuple[str, str, int]] = Counter()

    def made(self, out: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> Any:
        """Note the tensors of ``out``, the result of an untraced call the tracer saw, as known, unless
        one of its tensor arguments is of unknown origin (then they are too); returns ``out``."""
        if not isinstance(out, (torch.Tensor, tuple, list)):
            return out
        if next(self._unknown(args, kwargs or {}), None) is not None:
            return out
        if isinstance(out, torch.Tensor):
            self.made_here[out] = True
        elif type(out) in (tuple, list):
            for t in out:
                if isinstance(t, torch.Tensor):
                    self.made_here[t] = True
        return out

    def check(self, args: tuple[Any, ...], kwargs: dict[str, Any], op: str, module_path: str) -> None:
        """Before a converted call: note its untraced tensor arguments that nothing is known to have made."""
        for i, t in self._unknown(args, kwargs):
            location = user_location(2)
            n = self._seen[(op, location, i)]
            self._seen[(op, location, i)] = n + 1
            value = t.detach().clone() if self.keep_values else None
            self.suspects[(op, location, i, n)] = Suspect(op, module_path, location, i, value)

    def _unknown(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[tuple[int, torch.Tensor]]:
        """(index among the tensors, tensor) of each untraced tensor argument of unknown origin."""
        ts = arg_tensors(args, kwargs)
        if ts is None:
            ts = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        ids = self._model_ids
        if ids is None:
            ids = self._model_ids = self._parameters_and_buffers()
        for i, t in enumerate(ts):
            if id(t) in ids or self._is_traced(t) or t in self.made_here or t in self._cleared:
                continue
            if self._outside_forward(t):
                self._cleared[t] = True
                continue
            yield i, t

    def _parameters_and_buffers(self) -> set[int]:
        m = self.model
        if m is None:
            return set()
        return {id(p) for p in m.parameters()} | {id(b) for b in m.buffers()}

    def _outside_forward(self, t: torch.Tensor) -> bool:
        """Is ``t`` held somewhere that outlives the forward pass: an attribute of a submodule (a cache
        built lazily included), memory of a parameter or buffer, a global, closure variable or attribute
        of ``self`` in the model's code on the stack? (Only for tensors no visible call made: rare.)"""
        m = self.model
        if m is not None:
            ptr = t.untyped_storage().data_ptr() if t.numel() and t.device.type != "meta" else None
            for mod in m.modules():
                if any(_holds(v, t) for v in vars(mod).values()):
                    return True
            if ptr is not None:
                for p in (*m.parameters(), *m.buffers()):
                    if p.numel() and p.device == t.device and p.untyped_storage().data_ptr() == ptr:
                        return True
        skip = library_dirs()
        frame: Any = sys._getframe(1)
        while frame is not None:
            code = frame.f_code
            mine = not os.path.abspath(code.co_filename).startswith(skip)  # the model's code
            if mine and any(_holds(v, t) for v in frame.f_globals.values()):
                return True
            if (mine and code.co_freevars) or "self" in code.co_varnames:
                local = frame.f_locals
                if mine and any(_holds(local.get(n), t) for n in code.co_freevars):
                    return True
                # NOTE: an attribute of the object whose method runs (also torch's: F.conv2d's weight is
                # a parameter of the Conv2d whose forward calls it, found in its _parameters)
                attrs = getattr(local.get("self"), "__dict__", None)
                if isinstance(attrs, dict) and any(_holds(v, t) for v in attrs.values()):
                    return True
            frame = frame.f_back
        return False


__all__ = ["PATCHES", "Provenance", "Suspect", "op_name"]
