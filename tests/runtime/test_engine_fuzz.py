"""Fuzzing (seeded, bounded): mutated engine files and sim plans are refused cleanly.

2,000 mutated engine files (bit flips, byte changes, truncations, insertions, JSON header mutations
resealed with valid checksums), every one-bit flip of an engine file's header, and 2,000 mutated
bare sim plans, in 2 worker processes with a memory limit and a per-case time limit: no crash, no
hang, no exception outside the Torch2TRTError family. ``tools/fuzz_engine_files.py --count N`` is
the same for longer runs.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import pytest

_TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools")


def _tool() -> Any:
    if _TOOLS not in sys.path:
        sys.path.insert(0, _TOOLS)  # NOTE: importable by name, so the spawned workers find it too
    return importlib.import_module("fuzz_engine_files")


@pytest.fixture(scope="module")
def stats() -> dict[str, Any]:
    return _tool().fuzz(2000, seed=12, workers=2, timeout_s=20.0)  # type: ignore[no-any-return]


def test_no_crash_hang_or_foreign_exception(stats: dict[str, Any]) -> None:
    assert stats["cases"] >= 4000 + stats["header_bits"]
    assert stats["crashes"] == [], stats["crashes"][:5]
    assert stats["hangs"] == [], stats["hangs"][:5]
    assert not stats["foreign"], stats["foreign_examples"]
    assert stats["ok"] + stats["refused"] == stats["cases"]


def test_every_header_bit_flip_is_refused(stats: dict[str, Any]) -> None:
    assert stats["header_bits"] > 1000
    assert stats["refused_header_bits"] == stats["header_bits"]


def test_structured_mutations_reach_the_schema(stats: dict[str, Any]) -> None:
    kinds = stats["by_kind"]
    assert kinds["file-header:refused"] > 500 and kinds["plan-json:refused"] > 500
