"""TensorRT Python API name manifests (vendored from TensorRT's binding sources).

The sim exposes, for each TensorRT version, only names that exist in that version's manifest.
See ``_manifests/README.md`` for how the manifests were extracted.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

VERSIONS: tuple[str, ...] = ("10.13", "10.16", "11.1")
NEWEST = VERSIONS[-1]


@functools.cache
def load(version: str) -> dict[str, Any]:
    if version not in VERSIONS:
        from ..errors import Torch2TRTError

        raise Torch2TRTError(
            f"unknown TensorRT API version {version!r}; the sim implements {', '.join(VERSIONS)}"
        )
    text = resources.files(__package__).joinpath("_manifests", f"tensorrt-{version}.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


@functools.cache
def class_members(version: str, cls: str) -> frozenset[str]:
    """Every method, property and attribute name of ``cls`` in ``version``, bases included."""
    classes = load(version)["classes"]
    if cls not in classes:
        return frozenset()
    names: set[str] = set()
    todo = [cls]
    while todo:
        c = classes.get(todo.pop())
        if c is None:
            continue
        names.update(c["methods"])
        names.update(c["properties"])
        names.update(c.get("attributes", []))
        names.update(c.get("overridable", []))
        todo.extend(c["bases"])
    return frozenset(names)


def enum_members(version: str, enum: str) -> list[str]:
    members: list[str] = load(version)["enums"].get(enum, [])
    return members
