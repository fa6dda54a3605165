"""Shared markers of the test suite (see tests/README.md for what runs where).

Each marker skips its tests, with the reason and how to enable them, where the machine lacks what
they need; a test may carry several:

- ``rtx``: needs TensorRT-RTX's Python package (its builder runs without a GPU): ``pip install -e '.[rtx]'``
- ``gpu``: needs a CUDA GPU
- ``tensorrt``: needs full TensorRT (``pip install tensorrt``) and a CUDA GPU
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

HAS_RTX = importlib.util.find_spec("tensorrt_rtx") is not None
HAS_TENSORRT = importlib.util.find_spec("tensorrt") is not None
HAS_CUDA = torch.cuda.is_available()

_SKIPS = {
    "rtx": (not HAS_RTX, "needs TensorRT-RTX: pip install -e '.[rtx]'"),
    "gpu": (not HAS_CUDA, "needs a CUDA GPU (tools/device_check.sh runs these on a lent GPU machine)"),
    "tensorrt": (not (HAS_TENSORRT and HAS_CUDA), "needs full TensorRT (pip install tensorrt) and a CUDA GPU"),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    for item in items:
        for name, (skip, reason) in _SKIPS.items():
            if skip and item.get_closest_marker(name) is not None:
                item.add_marker(pytest.mark.skip(reason=reason))
