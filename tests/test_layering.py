"""The package's imports run one way (docs/architecture.md): cli and tools -> convert -> build ->
runtime -> trace -> converters -> plugins -> backends -> sim -> registry and quantization records ->
errors. Every ``import`` statement counts, inside functions too; what only type checkers read
(``if TYPE_CHECKING:``) does not, nor do lazy imports of third-party packages.

A module may import modules of its own layer or of lower layers, never of a higher one, and no two
modules may import each other through any chain (no cycle, even inside one package).
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE_ROOTS = {
    "torch2trt_lite": ROOT / "torch2trt_lite",
    "torch2trt_lite.converters": ROOT / "converters",
    "torch2trt_lite.plugins_cuda": ROOT / "plugins_cuda",
}

# Layers from the bottom up; the first name that prefixes a module gives its layer.
LAYERS: list[tuple[str, ...]] = [
    ("_version", "errors", "_buffers", "_layout"),
    ("registry", "quantization"),
    ("sim",),
    ("backends",),
    ("plugins",),
    ("converters", "plugins_cuda"),
    ("trace",),
    ("runtime",),
    ("build",),
    ("convert",),
    ("tools", "compile"),
    ("cli",),
    ("polygraphy", "__main__", ""),  # the top: the package's __init__ and the documented aliases
]
MAX_TOP_LEVEL_MODULES = 12
MAX_LINES = 700  # outside sim/


def _modules() -> dict[str, pathlib.Path]:
    found: dict[str, pathlib.Path] = {}
    for pkg, folder in PACKAGE_ROOTS.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("").parts
            if pkg == "torch2trt_lite" and rel[0] in ("converters", "plugins_cuda"):
                continue
            if rel[-1] == "__init__":
                rel = rel[:-1]
            found[".".join((pkg, *rel))] = path
    return found


MODULES = _modules()


def layer(module: str) -> int:
    rest = module.split(".")[1:]
    first = rest[0] if rest else ""
    for i, names in enumerate(LAYERS):
        if first in names:
            return i
    raise AssertionError(f"{module}: no layer in tests/test_layering.py LAYERS; give its package one")


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(module: str, path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    targets: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking_only(child):
                continue
            if isinstance(child, ast.Import):
                targets.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = module.split(".") if is_pkg else module.split(".")[:-1]
                    base = base[: len(base) - (child.level - 1)]
                    source = ".".join(base + ([child.module] if child.module else []))
                else:
                    source = child.module or ""
                for alias in child.names:
                    full = f"{source}.{alias.name}"
                    targets.add(full if full in MODULES else source)
            visit(child)

    visit(tree)
    resolved = set()
    for name in targets:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module:
            resolved.add(name)
    return resolved


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _package(module: str) -> str:
    parts = module.split(".")
    if parts[:2] in (["torch2trt_lite", "converters"], ["torch2trt_lite", "plugins_cuda"]):
        return "converters"  # one family: plugins_cuda's converters use converters' private builders
    return parts[1] if len(parts) > 1 else ""


def _private_reach_ins(module: str, path: pathlib.Path) -> list[str]:
    """Names starting with one underscore, imported from (or read off) a module of another package."""
    found = []
    tree = ast.parse(path.read_text(), str(path))
    aliases: dict[str, str] = {}  # local name -> module it stands for
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or node.level):
            if node.level:
                is_pkg = path.name == "__init__.py"
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if not source.startswith("torch2trt_lite"):
                continue
            for a in node.names:
                full = f"{source}.{a.name}"
                if full in MODULES:
                    aliases[a.asname or a.name] = full
                    target = full
                else:
                    target = source
                private = a.name.startswith("_") and not a.name.startswith("__")
                private_mod = any(p.startswith("_") and not p.startswith("__") for p in target.split(".")[2:])
                shared = _package(target).startswith("_")  # torch2trt_lite/_x.py: internals every phase shares
                if (private or private_mod) and target in MODULES and _package(target) != _package(module) and not shared:
                    found.append(f"{module} imports {a.name} from {source}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name in MODULES:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            target = aliases[node.value.id]
            if _package(target) != _package(module):
                found.append(f"{module} reads {target}.{node.attr}")
    return found


def test_no_private_reach_ins_across_packages() -> None:
    """What one package needs from another is public there (a ``ctx`` method, a ``backends`` helper)."""
    found = [f for m, p in sorted(MODULES.items()) for f in _private_reach_ins(m, p)]
    assert not found, "\n".join(found)


def test_no_upward_import() -> None:
    upward = [f"{m} ({LAYERS[layer(m)]}) imports {t} ({LAYERS[layer(t)]})"
              for m, ts in sorted(GRAPH.items()) for t in sorted(ts) if layer(t) > layer(m)]
    assert not upward, "\n".join(upward)


def test_no_import_cycle() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def strongconnect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            strongconnect(v)
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)


def test_the_checker_sees_upward_imports_inside_functions() -> None:
    """The rule is not vacuous: an import inside a function counts, one under TYPE_CHECKING does not."""
    src = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from torch2trt_lite.convert import convert\n"
           "def f():\n    from torch2trt_lite.runtime import module\n")
    path = ROOT / "tests" / "_layering_probe.py"
    try:
        path.write_text(src)
        assert _imports("torch2trt_lite.errors", path) == {"torch2trt_lite.runtime.module"}
    finally:
        path.unlink()


def test_top_level_is_small_and_files_are_short() -> None:
    top = sorted(p.name for p in (ROOT / "torch2trt_lite").glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top
    long = [f"{p.relative_to(ROOT)}: {n} lines" for p in MODULES.values()
            if "sim" not in p.relative_to(ROOT).parts[:2]
            and (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not long, "\n".join(long)
