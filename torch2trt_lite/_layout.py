"""The package's layout in a source checkout.

``converters/`` and ``plugins_cuda/`` sit beside this folder at the top of the repository, where
the data path shows; the wheel (and the editable install) map them into the package as
``torch2trt_lite.converters`` and ``torch2trt_lite.plugins_cuda``. Where Python imports this folder
straight from a checkout (not installed, or an installed wheel shadowed by the checkout on
``sys.path``, e.g. Python started in the repository's root), this module maps them the same way,
so the source tree imports as the installed package does, instead of failing with "No module
named 'torch2trt_lite.converters'".
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType

_SUBPACKAGES = ("converters", "plugins_cuda")


class _SourceTreeFinder(importlib.abc.MetaPathFinder):
    """Finds ``torch2trt_lite.<sub>`` in ``<repository>/<sub>`` (their submodules then by its path)."""

    def __init__(self, folders: dict[str, str]) -> None:
        self.folders = folders

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        folder = self.folders.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(fullname, os.path.join(folder, "__init__.py"),
                                                      submodule_search_locations=[folder])


def install() -> None:
    """Map the sibling folders where this package folder lacks them (a checkout); else nothing."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    folders = {f"{__package__}.{sub}": os.path.join(root, sub) for sub in _SUBPACKAGES
               if not os.path.isdir(os.path.join(here, sub)) and os.path.isfile(os.path.join(root, sub, "__init__.py"))}
    if folders and not any(isinstance(f, _SourceTreeFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceTreeFinder(folders))


install()
