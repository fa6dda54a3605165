"""A seeded subset of the differential fuzzer of dynamic and data-dependent programs
(``tools/fuzz_dynamic.py``): every program converted on the sim either matches eager PyTorch at
every input it accepts or is refused with a torch2trt-lite error; nothing else (no silent mismatch,
no foreign exception). Larger runs: ``python tools/fuzz_dynamic.py --count 3000 --seed N``."""

from __future__ import annotations

import importlib.util
import json
import logging
import pathlib
import sys
import warnings
from typing import Any

import torch

_PATH = pathlib.Path(__file__).resolve().parents[2] / "tools" / "fuzz_dynamic.py"


def _fuzzer() -> Any:
    spec = importlib.util.spec_from_file_location("fuzz_dynamic", _PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fuzz_dynamic", module)
    spec.loader.exec_module(module)
    return module


def test_seeded_programs_match_eager_or_refuse() -> None:
    loggers = [logging.getLogger(n) for n in ("torch2trt_lite", "torch2trt_lite.tensorrt")]
    levels, threads = [lg.level for lg in loggers], torch.get_num_threads()
    try:
        with warnings.catch_warnings():  # the fuzzer quiets warnings, logs and threads for its run only
            report = _fuzzer().fuzz(150, seed=7, workers=1)
    finally:
        torch.set_num_threads(threads)
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
    findings = [{k: r.get(k) for k in ("seed", "outcome", "where", "sizes", "spec", "detail")}
                for r in report["silent"] + report["foreign"]]
    assert not findings, json.dumps(findings, indent=1)[:4000]
    outcomes = report["outcomes"]
    assert outcomes.get("match", 0) >= 40, outcomes  # the programs still exercise engines, not only refusals
    assert report["engine_runs"] >= 400, report["engine_runs"]
