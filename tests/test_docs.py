"""Generated documentation stays in sync with the code."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_operators_md_is_current() -> None:
    # NOTE: a fresh interpreter: tests register converters and plugins of their own in this one
    res = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_operators.py"), "--check"],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )
    assert res.returncode == 0, res.stderr or res.stdout
