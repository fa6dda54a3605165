"""API conformance of the sim: it exposes only TensorRT's names, with TensorRT's argument names.

For each TensorRT version the sim implements, ``torch2trt_lite.sim.api(version)`` is compared with
that version's manifest (``torch2trt_lite/sim/_manifests/tensorrt-<version>.json``, extracted from
TensorRT's Python binding sources):

* every public name of the namespace is a manifest class, function, attribute or enum;
* every public member of every exposed class (``dir()``; ``_`` names, members hidden for this
  version and members that come from Python's built-in base types are skipped) is a method,
  property, attribute or overridable hook of the manifest class or one of its bases; manifest
  methods are callables in the sim;
* every exposed enum's members are a subset of the manifest's;
* methods (and constructors the manifest declares) take the manifest's argument names, and where
  both sides give a default, the same default.

Each test collects every violation of its rule, so one run lists them all.
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Iterator
from typing import Any

import pytest

import torch2trt_lite.sim as sim
from torch2trt_lite.sim import _manifest, api
from torch2trt_lite.sim._api import _Absent, _EnumViewMeta

VERSIONS = list(_manifest.VERSIONS)
assert VERSIONS == ["10.13", "10.16", "11.1"]

# Names the sim module adds beside TensorRT's API (documented in torch2trt_lite/sim/__init__.py).
SIM_HELPERS = {"api", "Namespace", "VERSIONS", "torch_dtype"}


# ------------------------------------------------------------------------------ helpers
def _classes(version: str) -> dict[str, type]:
    return dict(api(version)._classes)


def _public_members(cls: type) -> Iterator[tuple[str, Any]]:
    """(name, static attribute) of the public members ``cls`` really exposes."""
    for name in dir(cls):
        if name.startswith("_"):
            continue
        try:
            static = inspect.getattr_static(cls, name)
        except AttributeError:
            continue
        if isinstance(static, _Absent):
            continue  # hidden: this TensorRT version does not have it
        owner = next((k for k in cls.__mro__ if name in k.__dict__), None)
        if owner is not None and owner.__module__ == "builtins":
            continue  # standard Python (e.g. tuple.count on Dims, bytes.hex on IHostMemory)
        yield name, static


def _manifest_class(version: str, name: str) -> dict[str, Any]:
    return _manifest.load(version)["classes"][name]  # type: ignore[no-any-return]


def _declaration(version: str, cls_name: str, member: str) -> tuple[str, dict[str, Any]] | None:
    """The manifest class (``cls_name`` or a base) declaring ``member`` and its record."""
    classes = _manifest.load(version)["classes"]
    todo = [cls_name]
    seen: set[str] = set()
    while todo:
        c = todo.pop(0)
        if c in seen or c not in classes:
            continue
        seen.add(c)
        rec = classes[c]
        if member in rec["methods"] or member in rec["properties"] or member in rec.get("attributes", []) \
                or member in rec.get("overridable", []):
            return c, rec
        todo.extend(rec["bases"])
    return None


def _is_callable(static: Any) -> bool:
    return isinstance(static, (staticmethod, classmethod)) or inspect.isfunction(static) or inspect.isbuiltin(
        static
    ) or inspect.ismethoddescriptor(static)


def _signature(static: Any) -> list[inspect.Parameter] | None:
    """The sim's parameters (without self / cls, without *args / **kwargs); None if unknown."""
    fn = static.__func__ if isinstance(static, (staticmethod, classmethod)) else static
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if not isinstance(static, staticmethod) and params:
        params = params[1:]
    return [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


class _EnumName:
    def __init__(self, member: str) -> None:
        self.member = member

    def __repr__(self) -> str:
        return f"<enum member {self.member}>"


def cpp_default(text: str) -> Any:
    """The Python value of a C++ default argument as written in the binding source."""
    text = text.strip()
    if text == "nullptr":
        return None
    if text in ("true", "false"):
        return text == "true"
    if text == '""':
        return ""
    if re.fullmatch(r"-?\d+[uUlL]*", text):
        return int(re.sub(r"[uUlL]+$", "", text))
    if re.fullmatch(r"-?(\d+\.\d*|\.\d+|\d+)([eE]-?\d+)?[fF]?", text):
        return float(text.rstrip("fF"))
    if "::" in text:
        member = text.rsplit("::", 1)[1]
        if re.fullmatch(r"k[A-Z0-9].*", member):
            member = member[1:]
        return _EnumName(member)
    raise AssertionError(f"unknown C++ default {text!r}: extend cpp_default")


def _same_default(expected: Any, got: Any) -> bool:
    if isinstance(expected, _EnumName):
        return getattr(got, "name", None) == expected.member
    if expected is None or got is None:
        return expected is got
    if isinstance(expected, bool) or isinstance(got, bool):
        return bool(got) == expected and isinstance(got, (bool, int)) and got in (0, 1)
    return type(got) in (int, float, str) and got == expected


def _check_signature(where: str, static: Any, overloads: list[dict[str, Any]]) -> list[str]:
    params = _signature(static)
    if params is None or not overloads:
        return []
    names = [p.name for p in params]
    accepted: list[set[str]] = []
    for ov in overloads:
        if ov["args"] is None:
            return []  # the manifest does not know this overload's arguments
        if ov.get("positional_only"):
            accepted.append(set(names[: len(ov["args"])]))  # matched by position (arg0, arg1, ...)
        else:
            accepted.append({a["name"] for a in ov["args"]})
    union = set().union(*accepted)
    problems = []
    extra = [n for n in names if n not in union]
    if extra:
        wanted = [[a["name"] for a in ov["args"]] for ov in overloads]
        problems.append(f"{where}: parameters {extra} are not TensorRT's; overloads take {wanted}")
    required = {p.name for p in params if p.default is inspect.Parameter.empty}
    if not any(required <= acc for acc in accepted):
        problems.append(f"{where}: required parameters {sorted(required)} match no single overload")
    # callers pass arguments by position (network.add_slice(x, start, shape, stride)): the order must be
    # TensorRT's too, a prefix of one overload's argument list
    named = [ov for ov in overloads if not ov.get("positional_only")]
    if named and not any([a["name"] for a in ov["args"]][: len(names)] == names for ov in named):
        wanted = [[a["name"] for a in ov["args"]] for ov in named]
        problems.append(f"{where}: parameters {names} are not in the order of any overload {wanted}")
    for p in params:
        if p.default is inspect.Parameter.empty:
            continue
        for ov in overloads:
            if ov.get("positional_only"):
                continue
            arg = next((a for a in ov["args"] if a["name"] == p.name and a["default"] is not None), None)
            if arg is None:
                continue
            want = cpp_default(arg["default"])
            if not _same_default(want, p.default):
                problems.append(
                    f"{where}: default of '{p.name}' is {p.default!r}, TensorRT's is {arg['default']} ({want!r})"
                )
            break
    return problems


# -------------------------------------------------------------------------------- names
@pytest.mark.parametrize("version", VERSIONS)
def test_namespace_names_exist_in_manifest(version: str) -> None:
    m = _manifest.load(version)
    known = set(m["classes"]) | set(m["functions"]) | set(m["attributes"]) | {
        e for e in m["enums"] if "." not in e
    }
    ns = api(version)
    unknown = [n for n in ns._public_names() if n not in known]
    assert not unknown, f"TensorRT {version} has no {unknown}"


@pytest.mark.parametrize("version", VERSIONS)
def test_class_members_exist_in_manifest(version: str) -> None:
    problems = []
    for cname, cls in sorted(_classes(version).items()):
        allowed = _manifest.class_members(version, cname)
        for name, static in _public_members(cls):
            if name not in allowed:
                problems.append(f"{cname}.{name}")
                continue
            decl = _declaration(version, cname, name)
            assert decl is not None
            owner, rec = decl
            if name in rec["methods"] and not _is_callable(static) and not isinstance(static, _EnumViewMeta):
                problems.append(f"{cname}.{name} is a method in TensorRT ({owner}) but not callable in the sim")
            if name in rec["properties"] and inspect.isfunction(static):
                problems.append(f"{cname}.{name} is a property in TensorRT ({owner}) but a method in the sim")
    assert not problems, f"members that TensorRT {version} does not have (or of another kind):\n" + "\n".join(
        problems
    )


def _enum_views(version: str) -> Iterator[tuple[str, Any]]:
    ns = api(version)
    for name in ns._public_names():
        obj = getattr(ns, name)
        if isinstance(obj, _EnumViewMeta):
            yield name, obj
    for cname, cls in _classes(version).items():
        for name, static in _public_members(cls):
            if isinstance(static, _EnumViewMeta):
                yield f"{cname}.{name}", static


@pytest.mark.parametrize("version", VERSIONS)
def test_enum_members_exist_in_manifest(version: str) -> None:
    enums = _manifest.load(version)["enums"]
    problems = []
    seen = 0
    for qual, view in _enum_views(version):
        seen += 1
        if qual not in enums:
            problems.append(f"{qual}: not an enum of TensorRT {version}")
            continue
        extra = sorted(set(view.__members__) - set(enums[qual]))
        if extra:
            problems.append(f"{qual}: members {extra} are not TensorRT's")
    assert seen > 20
    assert not problems, "\n".join(problems)


# ----------------------------------------------------------------------------- signatures
@pytest.mark.parametrize("version", VERSIONS)
def test_method_arguments_match_manifest(version: str) -> None:
    problems: list[str] = []
    for cname, cls in sorted(_classes(version).items()):
        members = list(_public_members(cls))
        if "__init__" in _manifest_class(version, cname)["methods"]:
            init = inspect.getattr_static(cls, "__init__")
            owner = next(k for k in cls.__mro__ if "__init__" in k.__dict__)
            if owner.__module__ != "builtins":
                members.append(("__init__", init))
        for name, static in members:
            if not _is_callable(static):
                continue
            decl = _declaration(version, cname, name)
            if decl is None or name not in decl[1]["methods"]:
                continue
            problems += _check_signature(f"{cname}.{name}", static, decl[1]["methods"][name])
    ns = api(version)
    functions = _manifest.load(version)["functions"]
    for name in ns._public_names():
        if name in functions:
            problems += _check_signature(name, staticmethod(getattr(ns, name)), functions[name])
    assert not problems, f"arguments that differ from TensorRT {version}:\n" + "\n".join(problems)


def test_cpp_default_translation() -> None:
    assert cpp_default("0U") == 0 and cpp_default("0") == 0 and cpp_default("-1") == -1
    assert cpp_default("1.5f") == 1.5
    assert cpp_default("true") is True and cpp_default("false") is False
    assert cpp_default("nullptr") is None and cpp_default('""') == ""
    e = cpp_default("ILogger::Severity::kWARNING")
    assert isinstance(e, _EnumName) and e.member == "WARNING"
    assert cpp_default("nvinfer1::PluginFieldType::kUNKNOWN").member == "UNKNOWN"
    assert _same_default(cpp_default("DataType::kFLOAT"), sim.DataType.FLOAT)
    assert not _same_default(cpp_default("DataType::kFLOAT"), sim.DataType.HALF)
    assert not _same_default(cpp_default("0"), None)
    assert _same_default(cpp_default("false"), False)


def test_signature_check_catches_wrong_names() -> None:
    overloads = [{"args": [{"name": "input", "default": None}, {"name": "axis", "default": "0"}]}]

    def good(self: Any, input: Any, axis: int = 0) -> None:  # noqa: A002
        pass

    def renamed(self: Any, tensor: Any, axis: int = 0) -> None:
        pass

    def bad_default(self: Any, input: Any, axis: int = 1) -> None:  # noqa: A002
        pass

    assert _check_signature("good", good, overloads) == []
    assert _check_signature("renamed", renamed, overloads)
    assert _check_signature("bad_default", bad_default, overloads)


# ---------------------------------------------------------------------------- negatives
def test_version_differences() -> None:
    assert not hasattr(api("11.1").BuilderFlag, "FP16")
    assert api("10.16").BuilderFlag.FP16.name == "FP16"
    assert not hasattr(api("11.1").ILayer, "set_output_type")
    assert hasattr(api("10.16").ILayer, "set_output_type")


def test_sim_module_is_the_newest_namespace() -> None:
    newest = api("11.1")
    assert sim.api("11.1") is newest
    names = {
        n for n in dir(sim) if not n.startswith("_") and not isinstance(getattr(sim, n), types.ModuleType)
    }  # (subpackages such as sim.layers are package plumbing)
    assert names - SIM_HELPERS == set(newest._public_names())
    for name in newest._public_names():
        assert getattr(sim, name) is getattr(newest, name), name
    assert not hasattr(sim.BuilderFlag, "FP16")
