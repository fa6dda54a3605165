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


def test_readme_unsupported_example_is_unsupported() -> None:
    """The README's example of an unsupported op must really have no converter."""
    import re

    import torch2trt_lite

    readme = (ROOT / "README.md").read_text()
    ops = re.findall(r"unsupported operator (\S+) at module", readme)
    assert ops, "the README shows no unsupported-operator message"
    for op in ops:
        assert op not in torch2trt_lite.supported_ops(), f"the README's example {op} is supported"
