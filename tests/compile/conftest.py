"""Every test of the torch.compile backend starts from a fresh dynamo and an empty report."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch._dynamo

from torch2trt_lite.compile import compile_report


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    torch._dynamo.reset()
    compile_report(clear=True)
    yield
    torch._dynamo.reset()
