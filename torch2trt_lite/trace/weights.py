"""Where each weight of a refittable network comes from (``convert(..., refittable=True)``).

While the model is traced for a refittable engine, a :class:`WeightLog` is current: a torch function
mode beneath the tracer's own records every torch call that reads one of the model's parameters or
buffers, or a tensor computed from them without the inputs (the model's own ``self.w.t()`` or
``self.w * 2`` in ``forward``, a converter's ``w.detach().to(torch.float16)``, batch norm folded into
a convolution, packed q/k/v projections sliced and scaled). Each weight the converters put into the
network (``ConversionContext.weights``) is then either

* *derived*: a recipe, a small graph of torch calls over named model tensors (plain JSON: calls by
  their torch name, arguments as numbers, slices, dtypes or references), replayed by :func:`replay`
  on new weights for a refit; its name is its main source's path (``layer1.0.conv1.weight``); or
* *constant*: no model tensor reached it through a recorded call.

Nothing here decides that a constant really is constant: ``torch2trt_lite.build.refit`` checks it
(the recipes reproduce the traced weights bit for bit, and a second trace with perturbed weights
changes only weights with recipes) and refuses the conversion otherwise.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakIdKeyDictionary

from torch2trt_lite.converters.impl.active import ACTIVE

_CURRENT: contextvars.ContextVar[WeightLog | None] = contextvars.ContextVar("torch2trt_lite_weight_log", default=None)

# calls that only read metadata: no recipe is needed for their results
_METADATA = frozenset({
    "size", "dim", "numel", "stride", "is_contiguous", "__len__", "data_ptr", "element_size", "storage_offset",
    "untyped_storage", "is_floating_point", "is_complex", "nelement", "ndimension", "__get__", "__hash__",
    "__repr__", "__format__", "get_device",
})
_METADATA_PROPS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "is_meta", "layout", "requires_grad",
                             "is_leaf", "grad_fn", "_base", "names", "is_sparse", "is_quantized", "_version"})
# reads of values into Python: noted (a weight computed from them has no recipe)
_VALUE_READS = frozenset({"item", "tolist", "numpy", "__float__", "__int__", "__bool__", "__index__", "__array__"})
_SMALL = 4096  # untagged tensor arguments up to this many values are stored in the recipe


def current() -> WeightLog | None:
    """The weight log of the conversion being traced (None unless it is refittable)."""
    return _CURRENT.get()


@dataclass
class Sink:
    """One weight given to the network: its value, the backend's array, and its recipe node (None: constant)."""

    value: torch.Tensor
    array: Any
    node: int | None
    where: str
    name: str | None = None


class WeightLog:
    """The recipes of one traced conversion (``recording=False``: only the weights, in order)."""

    def __init__(self, model: Any, recording: bool = True) -> None:
        self.recording = recording
        self.nodes: list[dict[str, Any]] = []
        self.tags: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.sinks: list[Sink] = []
        self.reads: list[str] = []  # "op at module path" of values of model tensors read into Python
        self.sinking = False
        self.sources: dict[str, torch.Tensor] = {}
        self.attributes: dict[int, str] = {}  # storage of plain tensor attributes of modules -> their path
        self.frozen: list[str] = []  # those of them that became weights (a refit keeps their values)
        if recording and isinstance(model, torch.nn.Module):
            for path, t in (*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)):
                if t not in self.tags and t.dtype.is_floating_point:
                    self.tags[t] = self._add({"src": path})
                    self.sources[path] = t
            for prefix, mod in model.named_modules():
                for attr, v in vars(mod).items():
                    if isinstance(v, torch.Tensor) and v not in self.tags and v.numel() and v.device.type != "meta":
                        self.attributes[v.untyped_storage().data_ptr()] = f"{prefix}.{attr}" if prefix else attr

    def _add(self, node: dict[str, Any]) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    @contextlib.contextmanager
    def active(self) -> Iterator[WeightLog]:
        token = _CURRENT.set(self)
        try:
            if self.recording:
                with _Recorder(self):
                    yield self
            else:
                yield self
        finally:
            _CURRENT.reset(token)

    # --------------------------------------------------------------------------- sinks
    def weights(self, value: Any, convert: Any) -> Any:
        """``convert(value)`` (``ConversionContext.weights``), recording the weight it makes."""
        self.sinking = True
        try:
            arr = convert(value)
        finally:
            self.sinking = False
        if isinstance(value, torch.Tensor):
            t = value.detach()
            node = self.tags.get(value) if self.recording else None
        else:
            t = torch.as_tensor(value).detach()
            node = None
        if t.numel():
            self.sinks.append(Sink(t, arr, node, _where()))
            if node is None and t.device.type != "meta":
                attr = self.attributes.get(t.untyped_storage().data_ptr())
                if attr is not None and attr not in self.frozen:
                    self.frozen.append(attr)
        return arr

    # ------------------------------------------------------------------------- recording
    def before(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
        """Before a torch call: its recipe node where it reads a model tensor (None: it does not)."""
        tagged = any(t in self.tags for t in _tensors((args, kwargs)))
        if not tagged:
            return None
        name = getattr(func, "__name__", "")
        if name in _VALUE_READS:
            if not self.sinking:
                self.reads.append(f"{name}() at '{_where() or '<model>'}'")
            return None
        ctx = getattr(ACTIVE.get(), "ctx", None)
        if ctx is not None and any(ctx.is_traced(t) or ctx.holds_traced_values(t) for t in _tensors((args, kwargs))):
            return None  # NOTE: computed from the inputs too: a network tensor, not a weight
        inplace = (name.endswith("_") and not name.endswith("__")) or name.startswith("__i") or "out" in kwargs
        target = kwargs.get("out") if "out" in kwargs else (args[0] if inplace and args else None)
        try:  # NOTE: encoded before the call: an in-place call changes its target
            node: dict[str, Any] = {"fn": _name_of(func), "args": self._enc(list(args), target),
                                    "kwargs": self._enc(kwargs, target)}
            if inplace:
                node["inplace"] = True
        except _Unrecordable as e:
            node = {"bad": f"{getattr(func, '__qualname__', name)}: {e}"}
        return node, target

    def after(self, pending: tuple[Any, ...], out: Any) -> None:
        """After the call: tag its result (or the tensor it wrote) with the node."""
        node, target = pending
        nid = self._add(node)
        if isinstance(target, torch.Tensor):
            self._written(target, nid)
            return
        if isinstance(out, torch.Tensor):
            self.tags[out] = nid
        elif isinstance(out, (tuple, list)):
            for k, t in enumerate(out):
                if isinstance(t, torch.Tensor):
                    self.tags[t] = self._add({"get": [nid, k]})

    def _written(self, target: torch.Tensor, nid: int) -> None:
        """``target`` now holds node ``nid``; a view's base follows where the view covers all of it."""
        self.tags[target] = nid
        base = target._base
        if base is None:
            return
        if target.is_contiguous() and base.is_contiguous() and target.numel() == base.numel():
            self.tags[base] = self._add({"fn": "method:reshape", "args": [{"n": nid}, list(base.shape)], "kwargs": {}})
        else:
            self.tags[base] = self._add({"bad": "a part of it was written through a view"})

    def _enc(self, v: Any, target: Any) -> Any:
        if isinstance(v, torch.Tensor):
            n = self.tags.get(v)
            if n is not None:
                return {"n": n}
            if v is target:  # NOTE: overwritten by this call (out=, copy_): only its shape and type matter
                return {"empty": list(v.shape), "dtype": str(v.dtype).removeprefix("torch.")}
            if v.numel() <= _SMALL and v.device.type != "meta":
                return {"value": v.detach().cpu().reshape(-1).tolist(), "shape": list(v.shape),
                        "dtype": str(v.dtype).removeprefix("torch.")}
            raise _Unrecordable(f"a tensor argument of {v.numel()} values that no model tensor made")
        if v is None or isinstance(v, (bool, int, str)):
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else {"float": repr(v)}
        if isinstance(v, slice):
            return {"slice": [self._enc(v.start, target), self._enc(v.stop, target), self._enc(v.step, target)]}
        if v is Ellipsis:
            return {"ellipsis": True}
        if isinstance(v, torch.dtype):
            return {"dtype": str(v).removeprefix("torch.")}
        if isinstance(v, torch.device):
            return {"device": True}
        if isinstance(v, torch.memory_format):
            return {"memory_format": str(v).removeprefix("torch.")}
        if isinstance(v, (tuple, list)):
            items = [self._enc(x, target) for x in v]
            return items if isinstance(v, list) else {"tuple": items}
        if isinstance(v, dict) and all(isinstance(k, str) for k in v):
            return {"dict": {k: self._enc(x, target) for k, x in v.items()}}
        if hasattr(v, "item") and type(v).__module__ == "numpy":
            return self._enc(v.item(), target)
        raise _Unrecordable(f"an argument of type {type(v).__name__}")

    # ------------------------------------------------------------------------ the record
    def sources_of(self, nid: int) -> list[str]:
        """The model tensors node ``nid`` reads (in first-use order)."""
        out: list[str] = []
        for k in sorted(_deps(self.nodes, [nid])):
            src = self.nodes[k].get("src")
            if src is not None and src not in out:
                out.append(src)
        return out

    def bad(self, nid: int) -> str | None:
        """Why node ``nid`` cannot be replayed (None: it can)."""
        for k in sorted(_deps(self.nodes, [nid])):
            if "bad" in self.nodes[k]:
                return str(self.nodes[k]["bad"])
        return None

    def ops(self, nid: int) -> list[str]:
        """The calls of node ``nid``'s recipe, in order (its transform, for people)."""
        return [str(self.nodes[k]["fn"]).split(":")[-1] for k in sorted(_deps(self.nodes, [nid])) if "fn" in self.nodes[k]]

    def pruned(self, roots: list[int]) -> tuple[list[dict[str, Any]], list[int]]:
        """The nodes ``roots`` need, renumbered, and the roots' new ids (what an engine file records)."""
        keep = sorted(_deps(self.nodes, roots))
        new = {old: k for k, old in enumerate(keep)}
        return [_renumber(self.nodes[old], new) for old in keep], [new[r] for r in roots]


class _Unrecordable(Exception):
    pass


class _Recorder(TorchFunctionMode):
    def __init__(self, log: WeightLog) -> None:
        super().__init__()
        self.log = log

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if (name in _METADATA and not (name == "__get__" and _prop(func) not in _METADATA_PROPS)) \
                or ACTIVE.get() is None:  # NOTE: only while tracing (not the eager runs after it)
            return func(*args, **kwargs)
        pending = self.log.before(func, args, kwargs)
        out = func(*args, **kwargs)
        if pending is not None:
            self.log.after(pending, out)
        return out


def _where() -> str:
    """The module path being traced ("" at the top level or outside a trace)."""
    return str(getattr(ACTIVE.get(), "module_path", "") or "")


def _prop(func: Any) -> str:
    return str(getattr(getattr(func, "__self__", None), "__name__", ""))


def _tensors(tree: Any) -> Iterator[torch.Tensor]:
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, (tuple, list)):
        for x in tree:
            yield from _tensors(x)
    elif isinstance(tree, dict):
        for x in tree.values():
            yield from _tensors(x)


def _name_of(func: Any) -> str:
    """The recipe name of a torch callable (checked: :func:`_resolve` gives it back)."""
    func = getattr(func, "__torch2trt_lite_original__", func)  # NOTE: the tracer's patched wrappers
    name = getattr(func, "__name__", "")
    if name == "__get__" and hasattr(func, "__self__"):
        return f"prop:{_prop(func)}"
    qual = str(getattr(func, "__qualname__", ""))
    if qual.split(".")[0] in ("TensorBase", "Tensor", "_TensorBase"):
        out = f"method:{name}"
    else:
        mod = getattr(func, "__module__", None) or ""
        if not (mod == "torch" or mod.startswith("torch.")):
            raise _Unrecordable(f"{qual or name} is not a torch callable")
        out = f"fn:{mod}:{name}"
    got = _resolve(out)
    if got is not func and got != func:
        raise _Unrecordable(f"{qual or name} cannot be found again by its name")
    return out


def _resolve(name: str) -> Any:
    kind, _, rest = name.partition(":")
    if kind == "method":
        obj = getattr(torch.Tensor, rest)
    elif kind == "fn":
        mod, _, attr = rest.partition(":")
        if not (mod == "torch" or mod.startswith("torch.")):
            raise ValueError(f"not a torch module: {mod!r}")
        obj = getattr(importlib.import_module(mod), attr)
    else:
        raise ValueError(f"unknown recipe call {name!r}")
    return getattr(obj, "__torch2trt_lite_original__", obj)


def _deps(nodes: list[dict[str, Any]], roots: list[int]) -> set[int]:
    seen: set[int] = set()
    todo = list(roots)
    while todo:
        k = todo.pop()
        if k in seen:
            continue
        seen.add(k)
        node = nodes[k]
        if "get" in node:
            todo.append(int(node["get"][0]))
        for ref in _refs([node.get("args"), node.get("kwargs")]):
            todo.append(ref)
    return seen


def _refs(v: Any) -> Iterator[int]:
    if isinstance(v, dict):
        if "n" in v and len(v) == 1:
            yield int(v["n"])
            return
        for x in v.values():
            yield from _refs(x)
    elif isinstance(v, list):
        for x in v:
            yield from _refs(x)


def _renumber(node: dict[str, Any], new: dict[int, int]) -> dict[str, Any]:
    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            if "n" in v and len(v) == 1:
                return {"n": new[int(v["n"])]}
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    out = walk(node)
    if "get" in node:
        out["get"] = [new[int(node["get"][0])], node["get"][1]]
    return out  # type: ignore[no-any-return]


# ------------------------------------------------------------------------------ replay
def _dtype(name: Any) -> torch.dtype:
    dt = getattr(torch, str(name), None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dt


def replay(nodes: list[dict[str, Any]], roots: list[int], sources: Mapping[str, torch.Tensor]) -> list[torch.Tensor]:
    """The values of nodes ``roots`` computed from ``sources`` (model tensor path -> tensor).

    Raises ``KeyError`` (a source is missing) or ``ValueError`` (a malformed recipe); torch's own
    errors (a source of another shape) pass through."""
    memo: dict[int, Any] = {}

    def dec(v: Any, fresh: bool = False) -> Any:
        if isinstance(v, dict):
            if "n" in v and len(v) == 1:
                got = memo[int(v["n"])]
                return got.clone() if fresh else got
            if "empty" in v:
                return torch.empty(tuple(v["empty"]), dtype=_dtype(v["dtype"]))
            if "value" in v:
                return torch.tensor(v["value"], dtype=_dtype(v["dtype"])).reshape(tuple(v["shape"]))
            if "float" in v:
                return float(v["float"])
            if "slice" in v:
                return slice(*(dec(x) for x in v["slice"]))
            if "ellipsis" in v:
                return Ellipsis
            if "dtype" in v:
                return _dtype(v["dtype"])
            if "device" in v:
                return torch.device("cpu")
            if "memory_format" in v:
                return getattr(torch, str(v["memory_format"]))
            if "tuple" in v:
                return tuple(dec(x) for x in v["tuple"])
            if "dict" in v:
                return {k: dec(x) for k, x in v["dict"].items()}
            raise ValueError(f"unknown recipe value {sorted(v)[:4]}")
        if isinstance(v, list):
            return [dec(x) for x in v]
        return v

    for k in sorted(_deps(nodes, roots)):
        node = nodes[k]
        if "src" in node:
            memo[k] = sources[str(node["src"])].detach()
        elif "get" in node:
            memo[k] = memo[int(node["get"][0])][int(node["get"][1])]
        elif "fn" in node:
            inplace = bool(node.get("inplace"))
            args = node.get("args") or []
            kwargs = dict(node.get("kwargs") or {})
            if inplace and "out" not in kwargs.get("dict", {}):
                a = [dec(args[0], fresh=True), *(dec(x) for x in args[1:])] if args else []
            else:
                a = dec(args)
            kw = dec(kwargs) if kwargs else {}
            out_rec = kwargs.get("dict", {}).get("out") if isinstance(kwargs.get("dict"), dict) else None
            if isinstance(out_rec, dict) and "n" in out_rec:  # NOTE: an earlier node's value: written, so copied
                kw["out"] = kw["out"].clone()
            name = str(node["fn"])
            if name.startswith("prop:"):
                memo[k] = getattr(a[0], name[5:])
                continue
            fn = _resolve(name)
            with torch.no_grad():
                out = fn(*a, **kw)
            memo[k] = kw["out"] if isinstance(kw, dict) and "out" in kw else (a[0] if inplace else out)
        else:
            raise ValueError(f"node {k} of the recipe cannot be replayed ({node.get('bad', 'malformed')})")
    return [memo[r] for r in roots]


__all__ = ["Sink", "WeightLog", "current", "replay"]
