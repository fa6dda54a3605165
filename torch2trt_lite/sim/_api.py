"""Per-version namespaces: ``api("10.16")`` exposes only what TensorRT 10.16 has."""

from __future__ import annotations

import functools
from typing import Any

from . import _manifest
from ._enums import ENUMS, _TrtEnum


class _Absent:
    """Hides a sim member that this TensorRT version does not have."""

    def __init__(self, cls: str, name: str, version: str) -> None:
        self._cls, self._name, self._version = cls, name, version

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        raise AttributeError(f"'{self._cls}' has no attribute '{self._name}' in TensorRT {self._version}")

    def __set__(self, obj: Any, value: Any) -> None:
        raise AttributeError(f"'{self._cls}' has no attribute '{self._name}' in TensorRT {self._version}")


class _EnumViewMeta(type):
    _canonical: type[_TrtEnum]
    __members__: dict[str, _TrtEnum]

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls._canonical) and obj.name in cls.__members__

    def __iter__(cls) -> Any:
        return iter(cls.__members__.values())

    def __len__(cls) -> int:
        return len(cls.__members__)

    def __call__(cls, value: Any) -> _TrtEnum:  # type: ignore[override]
        m = cls._canonical(int(value))
        if m.name not in cls.__members__:
            raise ValueError(f"{int(value)} is not a valid {cls.__name__}")
        return m

    def __repr__(cls) -> str:
        return f"<class 'tensorrt.{cls.__qualname__}'>"


def _enum_view(name: str, version: str) -> type:
    canonical = ENUMS[name]
    members = {m: canonical[m] for m in _manifest.enum_members(version, name)}
    ns: dict[str, Any] = dict(members)
    ns["__members__"] = members
    ns["_canonical"] = canonical
    view = _EnumViewMeta(name.split(".")[-1], (), ns)
    view.__qualname__ = name
    return view


_LIST_METHODS = frozenset({"append", "clear", "extend", "insert", "pop", "remove", "count", "index", "reverse"})


def _public_members(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


class Namespace:
    """A module-like object holding one TensorRT version's API as implemented by the sim."""

    def __init__(self, version: str, classes: dict[str, type], functions: dict[str, Any]) -> None:
        manifest = _manifest.load(version)
        self._version = version
        self._classes: dict[str, type] = {}
        self.__version__ = manifest["version"]
        for name in manifest["enums"]:
            if "." not in name and name in ENUMS:
                setattr(self, name, _enum_view(name, version))
        for name, base in classes.items():
            if name not in manifest["classes"]:
                continue
            allowed = _manifest.class_members(version, name)
            if manifest["classes"][name].get("container") == "bind_vector":
                allowed = allowed | _LIST_METHODS  # pybind11's bind_vector gives list methods
            body: dict[str, Any] = {"_ns": self, "_versioned": True, "__module__": "tensorrt"}
            for member in _public_members(base) - allowed:
                body[member] = _Absent(name, member, version)
            for nested in manifest["classes"][name].get("attributes", []):
                if f"{name}.{nested}" in ENUMS:
                    body[nested] = _enum_view(f"{name}.{nested}", version)
            vcls = type(name, (base,), body)
            self._classes[name] = vcls
            setattr(self, name, vcls)
        for fname, fn in functions.items():
            if fname in manifest["functions"] or fname in manifest["attributes"]:
                setattr(self, fname, fn)
        for attr, target in manifest["attributes"].items():
            if target and target.startswith("DataType."):
                setattr(self, attr, ENUMS["DataType"][target.split(".", 1)[1]])

    def _class(self, name: str) -> Any:
        try:
            return self._classes[name]
        except KeyError:
            from ..errors import NetworkDefinitionError

            raise NetworkDefinitionError(
                f"{name} does not exist in TensorRT {self._version}, so the sim's API for it cannot create one"
            ) from None

    def _public_names(self) -> list[str]:
        return sorted(n for n in vars(self) if not n.startswith("_"))

    def __repr__(self) -> str:
        return f"<torch2trt_lite.sim API of TensorRT {self.__version__}>"


@functools.cache
def api(version: str = _manifest.NEWEST) -> Namespace:
    """The sim's TensorRT API for ``version`` ("10.13", "10.16" or "11.1")."""
    from . import _registry

    _manifest.load(version)  # validates the version
    return Namespace(version, _registry.classes(), _registry.functions())
