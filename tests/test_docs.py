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


def test_readme_kv_cache_example_is_the_tested_sample() -> None:
    """The README's decode-step example is ``samples/kv_cache_decode.py``'s README part, verbatim (the sample
    runs in tests/tools/test_cli.py::test_samples_run and checks the engine against eager PyTorch)."""
    sample = (ROOT / "samples" / "kv_cache_decode.py").read_text()
    part = sample.split("# README: KV-cache decode step\n", 1)[1].split("# README: end\n", 1)[0].rstrip("\n")
    assert f"```python\n{part}\n```" in (ROOT / "README.md").read_text()


def test_packaging_has_no_setuptools_warnings(tmp_path: pathlib.Path) -> None:
    """Building the wheel warns about nothing (license as a table, data folders not declared as packages)."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path),
         str(ROOT)], capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout + out.stderr
    for warning in ("would be ignored", "project.license", "BuildBackendWarning", "SetuptoolsDeprecationWarning"):
        assert warning not in text, text[-3000:]
    import zipfile

    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    # every source file of the three package roots is in the wheel (a new subpackage not listed in
    # pyproject.toml would be missing from users' installs while the editable checkout still works)
    roots = {"torch2trt_lite": "torch2trt_lite", "converters": "torch2trt_lite/converters",
             "plugins_cuda": "torch2trt_lite/plugins_cuda"}
    suffixes = (".py", ".cu", ".h", ".inc", ".json", ".md")
    expected = set()
    for folder, installed in roots.items():
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in suffixes and "__pycache__" not in path.parts:
                expected.add(f"{installed}/{path.relative_to(ROOT / folder).as_posix()}")
    missing = sorted(expected - names)
    assert not missing, missing
    assert "torch2trt_lite/sim/_manifests/tensorrt-rtx-1.7.json" in names
