"""Static check of the real-TensorRT code path (which cannot run here).

Every TensorRT name the project's code touches must exist in the TensorRT 10.13, 10.16 and 11.1
API manifests and in TensorRT-RTX 1.7's (introspected from its bindings; it has no plugin layers, so
``add_plugin_v3`` is reached through ``getattr`` with a refusal when it is absent), unless it sits in an explicit version branch (an ``if`` that tests ``hasattr`` /
``getattr`` / a version, or a ``getattr(obj, "NAME", default)`` lookup). Checked:

* ``trt.X``, ``tensorrt.X``, ``<anything>.trt.X``: X is a module-level name; ``.X.Y``: Y is a member
  of enum or class X;
* ``<...>.network.add_*(...)`` and ``net.add_*``: the method exists on INetworkDefinition and every
  keyword argument is one of its parameter names;
* attribute assignments ``<name ending in layer>.attr = ...``: attr is a property of some ILayer
  class (or ILayer itself).
"""

from __future__ import annotations

import ast
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "torch2trt_lite" / "sim" / "_manifests"
VERSIONS = ("10.13", "10.16", "11.1", "rtx-1.7")  # rtx-1.7: TensorRT-RTX (tensorrt_rtx)
SOURCES = [
    p
    for d in ("torch2trt_lite", "converters", "plugins_cuda", "samples")
    for p in sorted((ROOT / d).rglob("*.py"))
    if "sim" not in p.relative_to(ROOT).parts[1:2]
]


def _manifest(v: str) -> dict:
    return json.loads((MANIFESTS / f"tensorrt-{v}.json").read_text())


def _members(m: dict, cls: str) -> set[str]:
    out: set[str] = set()
    todo = [cls]
    while todo:
        c = m["classes"].get(todo.pop())
        if c:
            out |= set(c["methods"]) | set(c["properties"]) | set(c.get("attributes", [])) | set(c.get("overridable", []))
            todo += c["bases"]
    return out


def _is_trt_root(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ("trt", "tensorrt")
    return isinstance(node, ast.Attribute) and node.attr == "trt"


def _guarded(parents: list[ast.AST]) -> bool:
    for p in parents:
        if isinstance(p, (ast.If, ast.IfExp)):
            src = ast.unparse(p.test)
            if any(k in src for k in ("hasattr", "getattr", "version", "major")):
                return True
    return False


class _Visitor(ast.NodeVisitor):
    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        self.stack: list[ast.AST] = []
        self.uses: list[tuple[str, tuple[str, ...], int]] = []  # (kind, names, line)

    def generic_visit(self, node: ast.AST) -> None:
        self.stack.append(node)
        super().generic_visit(node)
        self.stack.pop()

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _is_trt_root(node.value) and not _guarded(self.stack):
            parent = self.stack[-1] if self.stack else None
            names: tuple[str, ...] = (node.attr,)
            if isinstance(parent, ast.Attribute) and parent.value is node:
                names = (node.attr, parent.attr)
            self.uses.append(("name", names, node.lineno))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr.startswith("add_") and not _guarded(self.stack):
            recv = ast.unparse(f.value)
            if recv.endswith("network") or recv in ("net",):
                kws = tuple(k.arg for k in node.keywords if k.arg)
                self.uses.append(("add", (f.attr, *kws), node.lineno))
        if isinstance(f, ast.Name) and f.id == "getattr" and len(node.args) == 3:
            return  # explicit dynamic lookup with a default: a version branch
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            for el in t.elts if isinstance(t, ast.Tuple) else [t]:
                if isinstance(el, ast.Attribute) and isinstance(el.value, ast.Name) and el.value.id.endswith("layer"):
                    if not _guarded(self.stack):
                        self.uses.append(("layer_attr", (el.attr,), node.lineno))
        self.generic_visit(node)


def _collect() -> list[tuple[pathlib.Path, str, tuple[str, ...], int]]:
    out = []
    for path in SOURCES:
        v = _Visitor(path)
        v.visit(ast.parse(path.read_text(), str(path)))
        out += [(path, *u) for u in v.uses]
    return out


USES = _collect()


def _problems(uses: list[tuple[pathlib.Path, str, tuple[str, ...], int]], version: str) -> list[str]:
    """What in ``uses`` does not exist in TensorRT ``version``."""
    m = _manifest(version)
    top = set(m["classes"]) | set(m["enums"]) | set(m["functions"]) | set(m["attributes"])
    net = m["classes"]["INetworkDefinition"]["methods"]
    layer_props = set()
    for cname in m["classes"]:
        if cname.endswith("Layer") or cname == "ILayer":
            layer_props |= _members(m, cname)
    problems = []
    for path, kind, names, line in uses:
        where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{line}"
        if kind == "name":
            head = names[0]
            if head.startswith("_"):
                continue
            if head not in top:
                problems.append(f"{where}: trt.{head} is not in TensorRT {version}")
            elif len(names) > 1 and not names[1].startswith("_"):
                if head in m["enums"] and names[1] not in m["enums"][head] and names[1] not in (
                    m.get("enum_attributes", {}).get(head, [])
                ):
                    problems.append(f"{where}: trt.{head}.{names[1]} is not in TensorRT {version}")
                if head in m["classes"] and names[1] not in _members(m, head) and names[1] not in (
                    "__init__",
                ):
                    problems.append(f"{where}: trt.{head}.{names[1]} is not in TensorRT {version}")
        elif kind == "add":
            meth, *kws = names
            if meth not in net:
                problems.append(f"{where}: INetworkDefinition.{meth} is not in TensorRT {version}")
                continue
            allowed = {a["name"] for ov in net[meth] for a in (ov["args"] or [])}
            bad = [k for k in kws if k not in allowed]
            if bad:
                problems.append(f"{where}: {meth}() has no argument(s) {bad} in TensorRT {version}")
        elif kind == "layer_attr" and names[0] not in layer_props and not names[0].startswith("_"):
            problems.append(f"{where}: no ILayer class has a property '{names[0]}' in TensorRT {version}")
    return problems


@pytest.mark.parametrize("version", VERSIONS)
def test_every_tensorrt_name_exists(version: str) -> None:
    problems = _problems(USES, version)
    assert not problems, "\n".join(problems)


def test_the_check_sees_the_code() -> None:
    kinds = {k for _, k, _, _ in USES}
    assert {"name", "add", "layer_attr"} <= kinds, kinds
    assert any(p.name == "backends" or p.parent.name == "backends" for p, *_ in USES)


def test_the_check_catches_a_wrong_name(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def f(ctx, layer):\n"
        "    ctx.network.add_convolution(ctx.trt.BuilderFlag.FP16, kernel_size=3)\n"
        "    layer.no_such_property = 1\n"
    )
    v = _Visitor(bad)
    v.visit(ast.parse(bad.read_text()))
    kinds = sorted(k for k, *_ in v.uses)
    assert kinds == ["add", "layer_attr", "name"]
    found = "\n".join(_problems([(bad, *u) for u in v.uses], "11.1"))
    for wrong in ("trt.BuilderFlag.FP16", "INetworkDefinition.add_convolution", "'no_such_property'"):
        assert wrong in found, (wrong, found)
    # the same names, spelled right, are not reported
    good = [(bad, "name", ("BuilderFlag", "DEBUG"), 1), (bad, "add", ("add_convolution_nd", "kernel_shape"), 2),
            (bad, "layer_attr", ("stride_nd",), 3)]
    assert _problems(good, "11.1") == []
