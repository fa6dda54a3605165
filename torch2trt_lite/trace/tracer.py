"""Tracing by patching, with a strict guard.

While a :class:`Tracer` is active, every registered target is replaced (``setattr``) by a wrapper
that runs the original first (exact shapes and values), then hands the call to its converter.
Originals are restored in ``finally``, whatever happens, from a table written before each
``setattr``: a KeyboardInterrupt at any line of the patch and restore code leaves torch as it was
(``tools/interrupt_sweep.py`` tries every line). A C slot wrapper (``Tensor.__getitem__``,
``__setitem__``) is not patched: CPython cannot give a type its slots back after a set and delete
of such an attribute; the strict guard converts those calls instead.

* Only the converting thread converts: a ``ContextVar`` holds the active tracer, and the wrappers
  of any other thread (or of this thread outside tracing) simply call the original.
* A re-entrancy guard: torch calls made while a converted call runs (inside the original or the
  converter) are not converted again.
* The strict guard: a ``TorchFunctionMode`` sees every torch call; one that touches a traced
  tensor without being converted raises :class:`UnsupportedOperatorError` naming the op, the
  module path and the user's ``file:line`` (or, in ``check`` mode, is recorded).
* In-place writes into views (``buf[i, :h].copy_(img)``, ``v += y``, ``v.fill_(0)`` on a view of a
  fresh or traced tensor): the base tensor follows, as a slice update of its network tensor
  (``ConversionContext.begin_view_write`` / ``end_view_write``). Only in-place calls on a view
  (``t._base``) pay for it; a dynamic-shape conversion also records how each view was indexed
  (``record_view``), since the traced strides hold only at the traced sizes.
"""

from __future__ import annotations

import contextvars
import functools
import os
import threading
import types
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch._C import (
    _get_function_stack_at,
    _len_torch_function_stack,
    _pop_torch_function_stack,
    _push_on_torch_function_stack,
)
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from torch2trt_lite.converters.impl.active import ACTIVE, library_dirs, user_location
from torch2trt_lite.errors import (
    ConversionError,
    ConverterRefusal,
    InternalError,
    Torch2TRTError,
    UnsupportedOperatorError,
)
from torch2trt_lite.registry import (
    REGISTRY,
    Call,
    ConverterRecord,
    Registry,
    load_builtin_converters,
    owners_of_function,
)
from torch2trt_lite.trace import opaque as _opaque
from torch2trt_lite.trace.complex_values import route as route_complex  # complex values: [..., 2] pairs
from torch2trt_lite.trace.context import arg_tensors
from torch2trt_lite.trace.double import FLOAT64_REFUSED, has_float64
from torch2trt_lite.trace.input_writes import InputWrites
from torch2trt_lite.trace.precision import Policy, call_eager, cast_call
from torch2trt_lite.trace.symbolic import (
    READS as _SYM_READS,  # size reads a dynamic conversion's symbolic sizes answer
)
from torch2trt_lite.trace.symbolic import value_read

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext
    from torch2trt_lite.trace.symbolic import SymbolicSizes


# The active tracer of this thread: the hook that code handed no ctx reads (converters/impl/active.py)
_ACTIVE: contextvars.ContextVar[Tracer | None] = ACTIVE
_PATCH_LOCK = threading.RLock()
_USERS: list[Tracer] = []  # tracers (any thread) using the installed patches: they stay while not empty
_PATCH_DEPTH = 0  # len(_USERS), refreshed by every install and uninstall

# Calls that only read metadata of a traced tensor (their results are exact while tracing).
_METADATA = frozenset(
    {
        "size", "dim", "ndim", "shape", "dtype", "device", "numel", "nelement", "is_contiguous",
        "__len__", "is_floating_point", "is_complex", "requires_grad", "layout", "element_size",
        "stride", "storage_offset", "is_cuda", "is_sparse", "is_quantized", "is_meta", "names",
        "__format__", "__repr__", "__str__", "data_ptr", "get_device", "is_leaf", "grad_fn",
        "__hash__", "__dlpack_device__", "_version", "is_nested", "__reduce_ex__",
        "is_inference", "dim_order", "ndimension", "has_names",
    }
)


def _func_name(func: Any) -> str:
    name = getattr(func, "__name__", None)
    if name == "__get__":
        owner = getattr(func, "__self__", None)
        prop = getattr(owner, "__name__", None)
        if prop:
            return str(prop)
    return str(name) if name else repr(func)


def _func_qualname(func: Any) -> str:
    op = _opaque.op_name(func)  # torch.ops.<namespace>.<op>: the name a converter is registered under
    if op is not None:
        return op
    owners = owners_of_function(func)
    if owners:
        return owners[0][2]
    name = _func_name(func)
    mod = getattr(func, "__module__", None)
    objcls = getattr(func, "__objclass__", None)
    if objcls is not None or getattr(func, "__qualname__", "").startswith(("TensorBase.", "Tensor.")):
        return f"torch.Tensor.{name}"
    if getattr(func, "__name__", None) == "__get__":
        return f"torch.Tensor.{name}"
    if isinstance(mod, str) and mod:
        if mod.startswith("torch._C"):
            mod = "torch"
        return f"{mod}.{name}"
    return f"torch.{name}"


_RECURSION_MIN = 10  # nested calls of one function of the user's code that make a RecursionError theirs


def _recursion_in_chain(error: BaseException) -> RecursionError | None:
    seen: set[int] = set()
    todo: list[BaseException | None] = [error]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        if isinstance(e, RecursionError):
            return e
        seen.add(id(e))
        todo += [e.__cause__, e.__context__]
    return None


def user_recursion(error: BaseException) -> ConversionError | None:
    """A :class:`ConversionError` for an error caused by a ``RecursionError`` (the error itself, or
    one that a converter or the network API turned it into) whose traceback shows a function of the
    user's code nested many times; else None."""
    cause = _recursion_in_chain(error)
    if cause is None:
        return None
    skip = library_dirs()
    counts: Counter[Any] = Counter()
    last: dict[Any, tuple[str, int]] = {}
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if not os.path.abspath(code.co_filename).startswith(skip):
            counts[code] += 1
            last[code] = (code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    if not counts:
        return None
    code, n = counts.most_common(1)[0]
    if n < _RECURSION_MIN:
        return None
    filename, line = last[code]
    name = getattr(code, "co_qualname", code.co_name)
    return ConversionError(
        f"the model recursed too deeply: RecursionError ({cause}) in the model's own code, where "
        f"{name} at {filename}:{line} was entered {n} times over. This is the model's recursion, not "
        "a conversion problem: end the recursion (or, if it must be this deep, raise "
        "sys.setrecursionlimit)."
    )


@dataclass
class Unsupported:
    op: str
    module_path: str
    location: str
    reason: str

    def __str__(self) -> str:
        where = self.module_path or "<model>"
        return f"{self.op} at {where} ({self.location}): {self.reason}"


# Calls that read a tensor's values into Python (by name for the guard; patched for converters: _value_read)
_VALUE_READS = frozenset({"item", "tolist", "__bool__", "__int__", "__float__", "__index__", "numpy", "__array__"})
_SIZE_VALUE_READS = frozenset({"item", "tolist", "__int__", "__index__"})  # of integers: sizes (symbolic.value_read)


class _Guard(TorchFunctionMode):
    def __init__(self, tracer: Tracer) -> None:
        super().__init__()
        self.tracer = tracer

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        tracer = self.tracer
        if tracer.busy or _ACTIVE.get() is not tracer:
            return func(*args, **kwargs)
        name = _func_name(func)
        if name in _METADATA:
            if tracer.symbolic is not None and name in _SYM_READS:  # dynamic shapes: sizes stay symbolic
                return tracer.symbolic.read(name, func, args, kwargs)
            return func(*args, **kwargs)
        if not tracer.touches_traced(args, kwargs):
            return tracer.provenance.made(func(*args, **kwargs), args, kwargs)  # untraced, made in sight
        record = _ORIGINALS.get(id(func))
        if record is None and getattr(func, "__name__", None) == "__get__":  # a Tensor property (x.T)
            prop = tracer.registry.get(f"torch.Tensor.{name}")
            if prop is not None and prop.kind == "property":
                return _convert(tracer, prop, func, args, kwargs)
        if record is not None:
            # NOTE: a reference to the original taken before patching (``self.act = F.relu``)
            # reaches us here instead of through the patched attribute: convert it all the same.
            return _convert(tracer, record, getattr(func, "__torch2trt_lite_original__", func), args, kwargs)
        if name in _SIZE_VALUE_READS and args and isinstance(args[0], torch.Tensor):
            # NOTE: an integer read as a Python number (``int(lengths.max())``) becomes a size that the
            # network computes (torch2trt_lite.trace.symbolic.value_read); other value reads are refused below
            got = value_read(tracer, name, func(*args, **kwargs), args[0])
            if got is not None:
                return got
        qual = _func_qualname(func)
        reason = "no converter is registered for this call on a traced tensor"
        if qual.startswith("torch.ops."):
            reason += f" (a torch.ops operator: convert it with @torch2trt_lite.converter('{qual}') or a plugin)"
        if name in _VALUE_READS:
            reason = (
                "reads tensor values into Python, which would freeze them into the engine as constants "
                "(data-dependent control flow or values cannot be converted)"
            )
            if name == "__bool__":  # NOTE: `if mask.any():` around work that an empty selection makes a no-op
                reason += (". Compute both sides and pick with torch.where, or, where the branch only skips work on "
                           "an empty selection (an expert with no tokens), drop it: ops on zero-size tensors convert")
        tracer.unsupported(qual, reason)
        out = func(*args, **kwargs)
        tracer.ctx.mark_traced(out)  # check mode: keep reporting downstream calls
        return out


def _value_read(original: Any) -> Any:
    """The patched form of a value-read method of ``torch.Tensor`` (``item``, ``__int__``, ...): while
    a converter runs, reading the value of a traced tensor (``int(start)``, ``slice.indices``,
    ``.item()`` of a 0-D tensor computed from the inputs) would freeze it into the engine. That is
    refused like the same read in the model's own code.

    NOTE: patched methods, not a TorchFunctionMode around each converter: a mode costs a Python
    call on every torch call a converter makes (thousands per model), these cost nothing there."""

    @functools.wraps(original)
    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        tracer = _ACTIVE.get()
        if tracer is not None and tracer.converting is not None and isinstance(self, torch.Tensor) and (
            tracer.ctx.is_traced(self)
        ):
            tracer.unsupported(
                tracer.converting,
                "an argument of this call is a tensor computed from the inputs where a Python number is "
                "needed (its value would be frozen into the engine as a constant)",
            )
        return original(self, *args, **kwargs)

    return read


# (attr, original, wrapper): built once, patched on torch.Tensor with the registered targets
_VALUE_READ_PATCHES = tuple((n, getattr(torch.Tensor, n), _value_read(getattr(torch.Tensor, n))) for n in sorted(_VALUE_READS))


class Tracer:
    """Patches registered targets for one conversion (see module docstring)."""

    # Dynamic shapes: the conversion's symbolic sizes (torch2trt_lite.trace.symbolic), set by its install()
    symbolic: SymbolicSizes | None = None
    input_writes: InputWrites = InputWrites((), ())  # the inputs, watched for writes (set by define/check)

    def __init__(
        self,
        ctx: ConversionContext,
        model: torch.nn.Module | None = None,
        registry: Registry | None = None,
        collect: bool = False,
        precision: Policy | None = None,
    ) -> None:
        self.ctx = ctx
        self.precision = precision  # the casts of reduced precision or autocast (torch2trt_lite.trace.precision)
        self.registry = registry if registry is not None else REGISTRY
        self.model = model
        self.collect = collect  # check mode: record unsupported calls instead of raising
        self.busy = False
        self.converting: str | None = None  # qualname of the call whose converter runs (value reads)
        self.scope: list[str] = []
        self.problems: list[Unsupported] = []
        self._traced_ids: Callable[[Any], bool] = ctx.is_traced
        self.provenance = _opaque.Provenance(ctx.is_traced, model)  # where untraced arguments come from
        self.guard: _Guard | None = None  # the strict guard while active (see _convert)
        self._hooks: list[Any] = []
        self._live = False  # between the start of activate() and the end of its cleanup

    # ------------------------------------------------------------------------- helpers
    def touches_traced(self, args: Any, kwargs: Any) -> bool:
        is_traced = self._traced_ids
        # NOTE: a fast path for flat arguments (nearly every call) and plain lists/tuples/dicts.
        for x in (*args, *kwargs.values()) if kwargs else args:
            if isinstance(x, torch.Tensor) and is_traced(x):
                return True
        ts = arg_tensors(args, kwargs)
        if ts is None:
            leaves, _ = tree_flatten((args, kwargs))
            return any(isinstance(x, torch.Tensor) and is_traced(x) for x in leaves)
        return any(is_traced(t) for t in ts)

    @property
    def module_path(self) -> str:
        path = self.scope[-1] if self.scope else ""  # NOTE: module overrides also count calls in methods
        return path if self.precision is None else self.precision.scope(path)

    def unsupported(self, op: str, reason: str, *, refused: bool = False) -> None:  # refused: by its converter
        item = Unsupported(op, self.module_path, user_location(2), reason)
        if self.collect:
            self.problems.append(item)
            return
        advice = "Register a converter with @torch2trt_lite.converter, or run" if not refused else "Run"
        raise UnsupportedOperatorError(
            f"unsupported operator {op} at module '{item.module_path or '<model>'}' ({item.location}): {reason}. "
            f"{advice} torch2trt_lite.check(model, inputs) to list every unsupported call.",
            op=op,
            module_path=item.module_path,
            location=item.location,
        )

    # ------------------------------------------------------------------------ patching
    def _wrap(self, record: ConverterRecord, original: Any) -> Any:
        if record.kind == "autograd":
            # NOTE: `apply` is a classmethod; `original` is the bound method of the target class.
            def apply_wrapper(cls: Any, *args: Any, **kwargs: Any) -> Any:
                return _dispatch(record, original, args, kwargs)

            return classmethod(apply_wrapper)

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            # NOTE: _dispatch inlined: most calls are made by converters (busy) and return at once
            tracer = _ACTIVE.get()
            if tracer is None or tracer.busy or not (record.constant_inputs or tracer.touches_traced(args, kwargs)):
                return original(*args, **kwargs)
            return _convert(tracer, record, original, args, kwargs)

        wrapper.__torch2trt_lite_original__ = original  # type: ignore[attr-defined]
        return wrapper

    def _cached_wrap(self, record: ConverterRecord, owner: Any, attr: str) -> Any:
        """``_wrap`` of what ``owner.attr`` is now, reused across conversions while both are unchanged."""
        source = getattr(owner, attr)
        if record.kind == "autograd":  # a bound classmethod: a new object on every getattr
            return self._wrap(record, source)
        key = (id(owner), attr)
        hit = _WRAPPERS.get(key)
        if hit is not None and hit[0] is record and hit[1] is source and hit[2] is owner:
            return hit[3]
        new = self._wrap(record, source)
        _WRAPPERS[key] = (record, source, owner, new)
        return new

    def _install(self) -> None:
        """Patch every registered target (when no other tracer has) and count this tracer as a user.

        NOTE: interrupt-safe with ``_deactivate``: the table of originals is written before each
        setattr, and this tracer counts as a user only once the patches are all in place; whatever
        an interrupt leaves half done, ``_deactivate`` (run by ``activate`` in ``finally``) undoes."""
        global _PATCH_DEPTH
        with _PATCH_LOCK:
            if not _USERS:
                _restore_all()  # completes a restore that an interrupt cut short (a no-op otherwise)
                self._patch_all()
            _USERS.append(self)
            _PATCH_DEPTH = len(_USERS)

    def _patch_all(self) -> None:
        for record in self.registry.records():
            for owner, attr in record.owners:
                had = attr in vars(owner)
                original = vars(owner)[attr] if had else getattr(owner, attr)
                if isinstance(original, (types.WrapperDescriptorType, torch._ops.OpOverloadPacket,
                                         torch._ops.OpOverload)):
                    # NOTE: a C slot wrapper (``Tensor.__getitem__``, ``__setitem__`` of
                    # ``torch._C.TensorBase``) is never patched: setting then deleting it on a subclass
                    # leaves CPython's type slots changed (``sq_item`` stays filled: every 0-d tensor
                    # then passes for a sequence, and ``torch.tensor([torch.tensor(0)])`` fails). Its
                    # calls reach the strict guard through ``__torch_function__``, which converts them.
                    # Nor a ``torch.ops`` operator: torch walks ``torch.ops.aten`` (DTensor: ``.overloads()``).
                    _ORIGINALS[id(original)] = record
                    continue
                # NOTE: getattr gives the callable to run (for autograd ``apply``, the bound
                # classmethod); ``original`` is what goes back in place.
                new = self._cached_wrap(record, owner, attr)
                if record.kind in ("function", "method"):
                    _ORIGINALS[id(getattr(owner, attr))] = record
                    _ORIGINALS[id(new)] = record
                _PATCHES.append((owner, attr, original, had))
                setattr(owner, attr, new)
        for owner, attr, source, new in (*((torch.Tensor, *p) for p in _VALUE_READ_PATCHES), *_opaque.PATCHES):
            had = attr in vars(owner)
            original = vars(owner)[attr] if had else getattr(owner, attr)
            if original is not source:  # a registered target (patched above) or changed since import
                continue
            _PATCHES.append((owner, attr, original, had))
            setattr(owner, attr, new)

    def _uninstall(self) -> None:
        """Stop counting this tracer as a user; restore torch when it was the last. Idempotent."""
        global _PATCH_DEPTH
        with _PATCH_LOCK:
            if self in _USERS:
                _USERS.remove(self)
            if not _USERS:
                _restore_all()
            _PATCH_DEPTH = len(_USERS)

    def _install_hooks(self) -> None:
        if self.model is None:
            return
        # NOTE: one global hook pair looking the module up, not two hooks per module: registering
        # and removing hundreds of hooks cost more than the rest of tracing a small model's call.
        paths = {id(mod): name for name, mod in self.model.named_modules()}
        scope = self.scope

        def pre(m: Any, a: Any) -> None:
            p = paths.get(id(m))
            if p is not None and _ACTIVE.get() is self:
                scope.append(p)

        def post(m: Any, a: Any, o: Any) -> None:
            p = paths.get(id(m))
            if p is not None and _ACTIVE.get() is self and scope and scope[-1] == p:
                scope.pop()

        self._hooks.append(torch.nn.modules.module.register_module_forward_pre_hook(pre))
        self._hooks.append(torch.nn.modules.module.register_module_forward_hook(post))

    @contextmanager
    def activate(self) -> Iterator[Tracer]:
        active = _ACTIVE.get()
        if active is not None:
            if active._live:
                raise Torch2TRTError("a conversion is already running in this thread; conversions do not nest")
            _ACTIVE.set(None)  # left behind by a conversion whose cleanup was interrupted twice
        load_builtin_converters()
        # NOTE: every step is inside the try, and _deactivate undoes each one by looking at the
        # state itself (not at how far this got), so a KeyboardInterrupt at any line leaves torch as it
        # was. It runs twice (idempotent): the second completes a first one that an interrupt cut
        # short, or that an interrupt kept from starting (no ``try`` opens a ``finally`` block here).
        try:
            try:
                self._live = True
                self.guard = _Guard(self)
                self._install()
                self._install_hooks()
                _ACTIVE.set(self)
                _push_on_torch_function_stack(self.guard)
                yield self
            finally:
                self._deactivate()
        finally:
            self._deactivate()

    def _deactivate(self) -> None:
        """Undo ``activate``, whatever part of it ran. Running it again is a no-op, or completes a
        run that an interrupt cut short."""
        _remove_mode(self.guard)
        if _ACTIVE.get() is self:
            _ACTIVE.set(None)
        while self._hooks:
            self._hooks[-1].remove()  # NOTE: removing a hook twice is harmless
            self._hooks.pop()
        self._uninstall()
        self.guard = None
        self._live = False

    def run_model(self, model: Any, args: Sequence[Any]) -> Any:
        """``model(*args)`` under this tracer. The model's own endless recursion is reported as a
        :class:`ConversionError` naming the recursing line (not as an internal error)."""
        try:
            with self.activate():
                return model(*args)
        except (RecursionError, InternalError, Torch2TRTError) as e:
            err = user_recursion(e)
            if err is None:
                raise
            raise err from e

    # ---------------------------------------------------------------------- conversion
    def convert_call(self, record: ConverterRecord, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Any:
        """Convert one call; returns the converter's result for a ``python_result`` converter (the
        call's Python result in the model's code), else None."""
        call = Call(record.target, record.qualname, args, kwargs, out, self.module_path)
        if (record := route_complex(self, record, call)) is None:  # type: ignore[assignment]  # refused
            return None
        wide = has_float64(out)  # float64: computed in float32, or refused (torch2trt_lite.trace.double)
        if wide and self.ctx.float64.mode is False:
            return self.unsupported(record.qualname, FLOAT64_REFUSED, refused=True)  # type: ignore[func-returns-value]
        if record.check is not None:
            reason = record.check(call)
            if reason:
                self.unsupported(record.qualname, reason, refused=True)
                return
        ctx = self.ctx
        if wide:
            ctx.float64.note(record.qualname, user_location(2))
        if ctx.network is None:  # check mode: the call is supported, its outputs are traced
            ctx.mark_traced(out)
            return
        before = ctx.num_layers()
        pre = self.symbolic.arg_sizes(args, kwargs) if self.symbolic is not None else None
        try:
            self.converting = record.qualname
            try:
                result = record.converter(ctx, call)
            finally:
                self.converting = None
        except Torch2TRTError as e:
            if isinstance(e, UnsupportedOperatorError):
                raise
            if isinstance(e, ConverterRefusal):
                self.unsupported(record.qualname, str(e), refused=True)
            raise ConversionError(
                f"converting {record.qualname} at module '{self.module_path or '<model>'}' "
                f"({user_location(2)}) failed: {e}"
            ) from e
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:
            raise InternalError(
                f"converter {record.source} for {record.qualname} at module '{self.module_path or '<model>'}' "
                f"({user_location(2)}) raised {type(e).__name__}: {e}"
            ) from e
        ctx.name_layers(before, self.module_path, record.qualname)
        if record.python_result:
            return result
        ctx.bind_outputs(call, result)
        if pre is not None:  # dynamic dims of the outputs keep their arguments' sizes
            self.symbolic.inherit(pre, out)  # type: ignore[union-attr]
        if self.symbolic is not None and isinstance(out, torch.Tensor) and out._base is not None:
            ctx.record_view(out, record.qualname, args, kwargs)  # dynamic shapes: writes follow the index
        if self.precision is not None:
            ctx.conform_dtypes(out, self.module_path, record.qualname)


# The saved table of originals: (owner, attr, original, had an own attribute), written before each
# setattr and emptied, last first, as each original goes back.
_PATCHES: list[tuple[Any, str, Any, bool]] = []


_ORIGINALS: dict[int, ConverterRecord] = {}

# (id(owner), attr) -> (record, patched callable, owner, wrapper): wrappers built once, not per conversion.
_WRAPPERS: dict[tuple[int, str], tuple[ConverterRecord, Any, Any, Any]] = {}


def _pop_guard(guard: _Guard | None) -> bool:
    """Take the strict guard off the torch function mode stack when it is on top (True if it was).

    While a converted call runs (``busy``), the guard passes every torch call through unchanged:
    taking it off the stack for that time gives the same results without a Python call per torch op.
    """
    n = _len_torch_function_stack()
    if guard is None or not n or _get_function_stack_at(n - 1) is not guard:
        return False
    _pop_torch_function_stack()
    return True


def _restore_all() -> None:
    """Put every saved original back, last patched first.

    NOTE: resumable: an entry leaves the table only once its original is back in place, and putting
    it back again is harmless, so a call that an interrupt cut short is completed by the next one."""
    _ORIGINALS.clear()
    while _PATCHES:
        owner, attr, original, had = _PATCHES[-1]
        if had:
            setattr(owner, attr, original)
        elif attr in vars(owner):
            delattr(owner, attr)
        _PATCHES.pop()


def _remove_mode(mode: TorchFunctionMode | None) -> None:
    """Take ``mode`` off this thread's torch function mode stack (a no-op when it is not on it),
    keeping any mode that was pushed above it."""
    if mode is None:
        return
    n = _len_torch_function_stack()
    stack = [_get_function_stack_at(i) for i in range(n)]
    if not any(m is mode for m in stack):
        return
    if stack[-1] is mode:
        _pop_torch_function_stack()
        return
    at = next(i for i, m in enumerate(stack) if m is mode)
    for _ in range(n - at):
        _pop_torch_function_stack()
    for m in stack[at + 1:]:
        _push_on_torch_function_stack(m)


def _dispatch(record: ConverterRecord, original: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    tracer = _ACTIVE.get()
    if tracer is None or tracer.busy or not (record.constant_inputs or tracer.touches_traced(args, kwargs)):
        return original(*args, **kwargs)
    return _convert(tracer, record, original, args, kwargs)


def _convert(
    tracer: Tracer, record: ConverterRecord, original: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Run and convert a call on traced tensors (the caller checked: ``tracer`` active and not busy)."""
    tracer.busy = True
    guard = tracer.guard
    popped = _pop_guard(guard)
    swap = None
    try:
        tracer.provenance.check(args, kwargs, record.qualname, tracer.module_path)  # NOTE: before casts replace them
        ctx = tracer.ctx
        if tracer.precision is not None and not _is_inplace(record.qualname):  # NOTE: an in-place op keeps its types
            args, kwargs, swap = cast_call(tracer.precision, ctx, record.qualname, record.kind, tracer.module_path,
                                           args, kwargs)
            if swap is not None:
                swap.__enter__()
        snap = None
        write = None
        if args and isinstance(args[0], torch.Tensor) and _is_inplace(record.qualname):
            if args[0]._base is not None and record.qualname.rsplit(".", 1)[-1] not in _RESHAPES_IN_PLACE:
                # NOTE: a write into a view (``buf[i, :h].copy_(img)``, ``v += y``): the base follows
                write = ctx.begin_view_write(args[0])
            if write is None and ctx.network is not None and not ctx.is_traced(args[0]):
                # NOTE: an in-place op on an untraced tensor (``buf.add_(x)``): its converter must read
                # the value from before the op, which running the original first would overwrite.
                snap = args[0].detach().clone()
        before = ctx.versions(args, kwargs)
        out = original(*args, **kwargs) if _is_inplace(record.qualname) else call_eager(original, args, kwargs)
        ctx.refresh_versions(before)  # in-place ops: the converter reads the inputs as they were
        out = ctx.own_fresh_view(out, args, kwargs)  # F.linear of 3-D: a view of its own 2-D result
        tracer.input_writes.after(tracer, record.qualname)  # NOTE: a write into the caller's tensor is refused
        if snap is not None:
            ctx.set_lazy(args[0], functools.partial(ctx.constant, snap))
        result = tracer.convert_call(record, args, kwargs, out)
        if record.python_result and result is not None:
            out = result
        if write is not None:
            ctx.end_view_write(write)
    finally:
        if swap is not None:
            swap.__exit__(None, None, None)
        if popped:
            _push_on_torch_function_stack(guard)
        tracer.busy = False
    return out


_INPLACE_DUNDERS = frozenset(
    {
        "__iadd__", "__isub__", "__imul__", "__itruediv__", "__idiv__", "__ifloordiv__", "__imod__", "__ipow__",
        "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__imatmul__", "__setitem__",
    }
)


# In-place methods that change a tensor's metadata, not its values (no write into a view's base)
_RESHAPES_IN_PLACE = frozenset(
    {"squeeze_", "unsqueeze_", "transpose_", "t_", "swapaxes_", "swapdims_", "requires_grad_", "detach_",
     "as_strided_", "resize_", "resize_as_"}
)


def _is_inplace(qualname: str) -> bool:
    name = qualname.rsplit(".", 1)[-1]
    return name in _INPLACE_DUNDERS or (name.endswith("_") and not name.endswith("__"))


INHERITED = object()  # marker: the attribute is not in the owner's own __dict__


def patched_originals() -> list[tuple[Any, str, Any]]:
    """(owner, attr, current value) of every registered target: for tests of the restore guarantee."""
    load_builtin_converters()
    out = []
    for record in REGISTRY.records():
        for owner, attr in record.owners:
            # NOTE: an inherited attribute (autograd ``apply``) has no own entry when restored.
            out.append((owner, attr, owner.__dict__.get(attr, INHERITED)))
    return out


__all__ = ["Tracer", "Unsupported", "patched_originals", "user_location", "user_recursion"]
