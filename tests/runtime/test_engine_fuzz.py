"""Fuzzing (seeded, bounded): mutated engine files and sim plans are refused cleanly.

2,000 mutated engine files (bit flips, byte changes, truncations, insertions, JSON header mutations
resealed with valid checksums), every one-bit flip of an engine file's header, and 2,000 mutated
bare sim plans, in 2 worker processes with a memory limit and a per-case time limit: no crash, no
hang, no exception outside the Torch2TRTError family. 400 mutated state dicts (issue 27): none of
those also loads as another engine than its plan. ``tools/fuzz_engine_files.py --count N`` is the
same for longer runs.
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
    return _tool().fuzz(2000, seed=12, workers=2, timeout_s=20.0, state_dicts=400)  # type: ignore[no-any-return]


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


def test_mutated_state_dicts_are_refused_or_load_as_their_engine(stats: dict[str, Any]) -> None:
    """Crashes, hangs and foreign exceptions of these are counted with the others (first test)."""
    kinds = stats["by_kind"]
    assert sum(n for k, n in kinds.items() if k.startswith("sd-")) == 400
    assert not stats["silent"], stats["silent"]  # a load that runs with another structure or dtype than its plan
    # every kind ran, and edits under a recomputed checksum reached the cross-check with the plan
    for kind in ("sd-engine-bytes", "sd-meta-bytes", "sd-meta-json", "sd-meta-sealed", "sd-field", "sd-field-sealed"):
        assert kinds[f"{kind}:refused"] > 10, kind
