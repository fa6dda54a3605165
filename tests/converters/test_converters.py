"""Runs every converter case against eager PyTorch, and checks every converter has a case."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
import torch

import torch2trt_lite
from tests.converters.harness import Case, run_case
from torch2trt_lite.errors import Torch2TRTError


def _all_cases() -> list[Case]:
    cases: list[Case] = []
    pkg = importlib.import_module("tests.converters")
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("cases_"):
            cases.extend(importlib.import_module(f"tests.converters.{info.name}").CASES)
    return cases


CASES = _all_cases()


def _param(c: Case) -> object:
    # an xfail must fail by the project's refusal, not by any error (a harness bug would pass too)
    raises = c.extra.get("xfail_raises", Torch2TRTError)
    marks = [pytest.mark.xfail(reason=c.xfail, strict=True, raises=raises)] if c.xfail else []
    if c.extra.get("needs_cuda"):
        marks.append(pytest.mark.skipif(not torch.cuda.is_available(), reason="eager .cuda() needs a CUDA GPU"))
    return pytest.param(c, id=c.name, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_converter(case: Case) -> None:
    run_case(case)


def test_case_names_unique() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


def test_every_converter_has_a_case() -> None:
    covered = {t for c in CASES for t in c.targets}
    missing = sorted(set(torch2trt_lite.supported_ops()) - covered)
    assert not missing, f"registered converters without a harness case: {missing}"
