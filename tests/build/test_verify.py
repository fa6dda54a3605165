"""The dynamic verify run of ``convert(..., verify=True)`` (build/verify.py): its own inputs never fail
a conversion, and a model that eager PyTorch refuses at a size of the declared range is refused with
a torch2trt-lite error that says so (issue 22)."""

from __future__ import annotations

import pytest
import torch

import torch2trt_lite
from torch2trt_lite import Input


def _emb() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Embedding(10, 4).eval()


def test_integer_inputs_keep_the_examples_values() -> None:
    """ids in [0, 10): the verify run's random ids stay within the example's values (not [0, 100))."""
    m = _emb()
    ids = torch.randint(0, 10, (2, 3), generator=torch.Generator().manual_seed(1))
    trt = torch2trt_lite.convert(m, [ids], backend="sim", max_batch_size=4)
    for b in (1, 4):
        x = torch.randint(0, 10, (b, 3))
        with torch.no_grad():
            torch.testing.assert_close(trt(x), m(x))


def test_integer_inputs_keep_an_inputs_example_and_bounds() -> None:
    m = _emb()
    ex = torch.tensor([[1, 9, 4]])
    torch2trt_lite.convert(m, [Input((1, 3), (1, 3), (4, 3), dtype=torch.int64, example=ex)], backend="sim")
    torch2trt_lite.convert(m, [Input((1, 3), (2, 3), (4, 3), dtype=torch.int64, low=0, high=10)], backend="sim")


class Pad(torch.nn.Module):
    """Valid only where x is at least as long as y."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, torch.zeros(x.size(0) - y.size(0))])


def test_a_model_eager_refuses_at_a_size_of_the_range_is_a_conversion_error() -> None:
    with pytest.raises(torch2trt_lite.ConversionError) as info:
        torch2trt_lite.convert(Pad().eval(), [Input((1,), (4,), (8,)), Input((2,), (2,), (4,))], backend="sim")
    msg = str(info.value)
    assert "input shapes [(1,), (4,)]" in msg, msg
    assert "fails in eager PyTorch" in msg and "Dimension size must be non-negative" in msg, msg
    assert "Narrow the range" in msg, msg
    assert "layers with a dynamic input" not in msg, msg  # not a size baked by a converter


def test_the_narrowed_range_converts() -> None:
    m = Pad().eval()
    trt = torch2trt_lite.convert(m, [Input((4,), (6,), (8,)), Input((2,), (2,), (4,))], backend="sim")
    x, y = torch.randn(5), torch.randn(3)
    torch.testing.assert_close(trt(x, y), m(x, y))
