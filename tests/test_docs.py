"""Generated documentation stays in sync with the code."""

from __future__ import annotations

import pathlib
import runpy

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_operators_md_is_current() -> None:
    gen = runpy.run_path(str(ROOT / "tools" / "gen_operators.py"))
    current = (ROOT / "docs" / "operators.md").read_text()
    assert current == gen["render"](), "docs/operators.md is stale: run python tools/gen_operators.py"
