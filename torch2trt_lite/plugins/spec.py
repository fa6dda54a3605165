"""The pieces of a plugin's contract: typed attributes, inputs and their shapes (with the dimension
arithmetic of shape rules), and the CUDA kernel with its launch rule.

:mod:`torch2trt_lite.plugins.declaration` puts them together into a declaration (``PluginDef``);
everything here is re-exported by :mod:`torch2trt_lite.plugins.api` and the package.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import PluginError


# ---------------------------------------------------------------------------------- attributes
class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
_KINDS = ("int", "float", "bool", "str", "ints", "floats")


@dataclass(frozen=True)
class Attr:
    """A typed plugin attribute: ``kind`` is int, float, bool, str, ints or floats."""

    kind: str
    default: Any = REQUIRED
    length: int | None = None  # for ints / floats: the exact length, or None for any
    doc: str = ""

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise PluginError(f"attribute kind must be one of {_KINDS}, got {self.kind!r}")
        if self.default is not REQUIRED:
            object.__setattr__(self, "default", self.coerce("default", self.default))

    def coerce(self, name: str, value: Any) -> Any:
        """``value`` converted to this attribute's type, or a PluginError saying why it cannot be."""
        kind = self.kind
        try:
            if kind in ("ints", "floats"):
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    value = (value,) * (self.length or 1)
                seq = tuple(value)
                out: tuple[Any, ...] = tuple(_scalar(kind[:-1], v) for v in seq)
                if self.length is not None and len(out) != self.length:
                    raise ValueError(f"expected {self.length} values, got {len(out)}")
                return out
            return _scalar(kind, value)
        except (TypeError, ValueError) as e:
            raise PluginError(f"attribute '{name}': cannot use {value!r} as {kind} ({e})") from None


def _scalar(kind: str, v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        if v.numel() != 1:
            raise ValueError("a tensor attribute must hold exactly one value")
        v = v.item()
    if kind == "int":
        if isinstance(v, float) and not v.is_integer():
            raise ValueError("not an integer")
        if isinstance(v, str):
            raise TypeError("a string is not an int")
        return int(v)
    if kind == "float":
        if isinstance(v, str):
            raise TypeError("a string is not a float")
        return float(v)
    if kind == "bool":
        if not isinstance(v, (bool, int)):
            raise TypeError(f"{type(v).__name__} is not a bool")
        return bool(v)
    if not isinstance(v, str):
        raise TypeError(f"{type(v).__name__} is not a str")
    return v


def int_attr(default: Any = REQUIRED, doc: str = "") -> Attr:
    return Attr("int", default, doc=doc)


def float_attr(default: Any = REQUIRED, doc: str = "") -> Attr:
    return Attr("float", default, doc=doc)


def bool_attr(default: Any = REQUIRED, doc: str = "") -> Attr:
    return Attr("bool", default, doc=doc)


def str_attr(default: Any = REQUIRED, doc: str = "") -> Attr:
    return Attr("str", default, doc=doc)


def ints_attr(default: Any = REQUIRED, length: int | None = None, doc: str = "") -> Attr:
    return Attr("ints", default, length=length, doc=doc)


def floats_attr(default: Any = REQUIRED, length: int | None = None, doc: str = "") -> Attr:
    return Attr("floats", default, length=length, doc=doc)


class Attrs(Mapping[str, Any]):
    """Resolved attribute values of one plugin instance: a read-only mapping with attribute access."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_values", dict(values))

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"plugin has no attribute '{name}'") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("plugin attributes are read-only")

    def __repr__(self) -> str:
        return f"Attrs({self._values!r})"


# ------------------------------------------------------------------------------ inputs / shapes
@dataclass(frozen=True)
class Input:
    """One plugin input.

    ``dtype`` None means the plugin's float type ``T`` (one of the declaration's ``dtypes``, shared
    by all such inputs); a torch dtype fixes it. ``present`` names a bool attribute: the input is
    optional and exists when that attribute is true (the converter sets it from the call).
    """

    name: str
    rank: int | None = None
    dtype: torch.dtype | None = None
    present: str | None = None


Dim = Any  # an int, or a backend's symbolic dimension supporting + - * // and cdiv/dmax/dmin


class Shapes(Mapping[str, tuple[Dim, ...]]):
    """Input shapes of one plugin instance, by input name (only present inputs) or by position."""

    def __init__(self, names: Sequence[str], shapes: Sequence[Sequence[Dim]]) -> None:
        self._names = list(names)
        self._shapes = [tuple(s) for s in shapes]

    def __getitem__(self, key: str | int) -> tuple[Dim, ...]:  # type: ignore[override]
        if isinstance(key, int):
            return self._shapes[key]
        try:
            return self._shapes[self._names.index(key)]
        except ValueError:
            raise KeyError(f"no input named '{key}' (present inputs: {self._names})") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def index(self, name: str) -> int | None:
        return self._names.index(name) if name in self._names else None


def cdiv(a: Dim, b: Dim) -> Dim:
    """Ceiling division for shape rules (ints or symbolic dimensions)."""
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return _sym(a, b)._binary("cdiv", a, b)


def dmax(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    return _sym(a, b)._binary("max", a, b)


def dmin(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    return _sym(a, b)._binary("min", a, b)


def _sym(a: Any, b: Any) -> Any:
    return a if isinstance(a, SymbolicDim) else b


class SymbolicDim:
    """Base of backend dimension expressions: arithmetic dispatches to ``_binary(op, a, b)``.

    ``op`` is one of sum, sub, prod, floordiv, cdiv, max, min; ``a`` and ``b`` are ints or
    symbolic dims. Subclasses (the TensorRT one wraps ``IDimensionExpr``) implement ``_binary``.
    """

    def _binary(self, op: str, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def __add__(self, o: Any) -> Any:
        return self._binary("sum", self, o)

    def __radd__(self, o: Any) -> Any:
        return self._binary("sum", o, self)

    def __sub__(self, o: Any) -> Any:
        return self._binary("sub", self, o)

    def __rsub__(self, o: Any) -> Any:
        return self._binary("sub", o, self)

    def __mul__(self, o: Any) -> Any:
        return self._binary("prod", self, o)

    def __rmul__(self, o: Any) -> Any:
        return self._binary("prod", o, self)

    def __floordiv__(self, o: Any) -> Any:
        return self._binary("floordiv", self, o)

    def __rfloordiv__(self, o: Any) -> Any:
        return self._binary("floordiv", o, self)


# ------------------------------------------------------------------------------------ launches
@dataclass(frozen=True)
class In:
    """Kernel argument: device pointer of an input (by name or position); null when absent."""

    input: str | int


@dataclass(frozen=True)
class Out:
    """Kernel argument: device pointer of an output."""

    index: int = 0


@dataclass(frozen=True)
class Workspace:
    """Kernel argument: device pointer into the plugin's workspace."""

    offset: int = 0


@dataclass(frozen=True)
class I32:
    value: int


@dataclass(frozen=True)
class I64:
    value: int


@dataclass(frozen=True)
class F32:
    value: float


@dataclass(frozen=True)
class F64:
    value: float


Arg = In | Out | Workspace | I32 | I64 | F32 | F64


@dataclass(frozen=True)
class Launch:
    """One kernel launch: entry point, grid and block (x, y, z), arguments, dynamic shared memory."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[Arg, ...]
    shared_mem: int = 0

    def __init__(
        self, kernel: str, grid: int | Sequence[int], block: int | Sequence[int], args: Sequence[Arg],
        shared_mem: int = 0,
    ) -> None:
        object.__setattr__(self, "kernel", kernel)
        object.__setattr__(self, "grid", _dim3(grid, "grid"))
        object.__setattr__(self, "block", _dim3(block, "block"))
        object.__setattr__(self, "args", tuple(args))
        object.__setattr__(self, "shared_mem", int(shared_mem))


def _dim3(v: int | Sequence[int], what: str) -> tuple[int, int, int]:
    vals = [int(v)] if isinstance(v, int) else [int(x) for x in v]
    if not 1 <= len(vals) <= 3 or any(x < 0 for x in vals):
        raise PluginError(f"launch {what} must be 1 to 3 non-negative ints, got {v!r}")
    vals += [1] * (3 - len(vals))
    return (vals[0], vals[1], vals[2])


@dataclass(frozen=True)
class LaunchInfo:
    """What a launch rule sees: concrete input/output shapes and dtypes, and the attributes."""

    inputs: Shapes
    outputs: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[torch.dtype, ...]
    output_dtypes: tuple[torch.dtype, ...]
    dtype: torch.dtype  # the plugin's float type T
    attrs: Attrs


@dataclass(frozen=True)
class CudaKernel:
    """CUDA source of a plugin: ``path`` to a .cu file or ``source`` text, its entry points,
    the launch rule, an optional workspace rule (bytes) and extra NVRTC options."""

    entry_points: tuple[str, ...]
    launch: Callable[[LaunchInfo], Launch | Sequence[Launch]]
    path: str | os.PathLike[str] | None = None
    source: str | None = None
    workspace: Callable[[LaunchInfo], int] | None = None
    options: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.path is None) == (self.source is None):
            raise PluginError("CudaKernel needs exactly one of path= (a .cu file) or source= (CUDA text)")
        if not self.entry_points:
            raise PluginError("CudaKernel needs at least one entry point")
        object.__setattr__(self, "entry_points", tuple(self.entry_points))
        object.__setattr__(self, "options", tuple(self.options))

    def text(self) -> tuple[str, str]:
        """(source text, file name used in compiler messages)."""
        if self.source is not None:
            return self.source, "<inline>.cu"
        p = Path(self.path)  # type: ignore[arg-type]
        try:
            return p.read_text(), str(p)
        except OSError as e:
            raise PluginError(f"cannot read CUDA source {p}: {e}") from None

    def launches(self, info: LaunchInfo) -> list[Launch]:
        res = self.launch(info)
        out = [res] if isinstance(res, Launch) else list(res)
        for lc in out:
            if lc.kernel not in self.entry_points:
                raise PluginError(
                    f"launch rule names kernel '{lc.kernel}', which is not a declared entry point "
                    f"{self.entry_points}"
                )
            threads = lc.block[0] * lc.block[1] * lc.block[2]
            if not 1 <= threads <= 1024:
                raise PluginError(f"kernel '{lc.kernel}': block {lc.block} has {threads} threads (1..1024)")
        return out

    def workspace_bytes(self, info: LaunchInfo) -> int:
        return int(self.workspace(info)) if self.workspace is not None else 0



__all__ = [
    "REQUIRED", "Arg", "Attr", "Attrs", "CudaKernel", "Dim", "F32", "F64", "I32", "I64", "In", "Input", "Launch",
    "LaunchInfo", "Out", "Shapes", "SymbolicDim", "Workspace", "bool_attr", "cdiv", "dmax", "dmin", "float_attr",
    "floats_attr", "int_attr", "ints_attr", "str_attr",
]
