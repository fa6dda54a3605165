"""Harness cases: runtime assertions on values (torch._assert, _assert_async, _check_tensor_all)."""

from __future__ import annotations

import torch

from tests.converters.harness import Case, randn


def _assert(x: torch.Tensor) -> torch.Tensor:
    torch._assert((x.abs() < 100).all(), "x is out of range")
    return x * 2


def _assert_async(x: torch.Tensor) -> torch.Tensor:
    torch._assert_async(torch.isfinite(x).all())
    return x + 1


def _check_all(x: torch.Tensor) -> torch.Tensor:
    torch._check_tensor_all(x > -100, "x must be above -100")
    return x.relu()


def _check_all_with(x: torch.Tensor) -> torch.Tensor:
    torch._check_tensor_all_with(ValueError, torch.isfinite(x), lambda: "x must be finite")
    return x * 3


CASES = [
    Case("assert_value", _assert, lambda: [randn(3, 4)], targets=["torch._assert"]),
    Case("assert_async_value", _assert_async, lambda: [randn(3, 4)], targets=["torch._assert_async"]),
    Case("check_tensor_all", _check_all, lambda: [randn(3, 4)], targets=["torch._check_tensor_all"]),
    Case("check_tensor_all_with", _check_all_with, lambda: [randn(3, 4)], targets=["torch._check_tensor_all_with"]),
]
