"""Issue 27: ``x.expand(2, 3, -1, -1)`` over a dynamic batch, and ``F.affine_grid`` (then
``grid_sample``) with a dynamic batch, convert and match eager PyTorch at several batch sizes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch2trt_lite
from torch2trt_lite.errors import Torch2TRTError


class ExpandBatch(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.expand(2, 3, -1, -1) * 2


class ExpandChannels(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.expand(-1, 3, -1, -1) + 1


class Warp(torch.nn.Module):
    def forward(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        return F.grid_sample(x, grid, align_corners=False)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("traced_batch", [1, 2])
def test_expand_of_a_dynamic_batch_to_a_static_size_matches_eager(traced_batch: int) -> None:
    """PyTorch accepts a batch of 1 (repeated) or 2 (kept) there: the stride is chosen at run time."""
    model = ExpandBatch().eval()
    example = torch.randn(traced_batch, 3, 4, 5, generator=_gen(0))
    assert torch2trt_lite.check(model, [example], max_batch_size=2).ok
    trt = torch2trt_lite.convert(model, [example], backend="sim", max_batch_size=2)
    for b in (1, 2):
        x = torch.randn(b, 3, 4, 5, generator=_gen(b))
        torch.testing.assert_close(trt(x), model(x), rtol=0, atol=0)


def test_expand_over_a_range_pytorch_refuses_in_part_is_refused_and_checked() -> None:
    model = ExpandBatch().eval()
    x = torch.randn(2, 3, 4, 5, generator=_gen(0))
    with pytest.raises(Torch2TRTError, match="accepts only a size of 1 or 2") as info:
        torch2trt_lite.convert(model, [x], backend="sim", max_batch_size=3)
    report = torch2trt_lite.check(model, [x], max_batch_size=3)
    assert [u.op for u in report.unsupported] == ["torch.Tensor.expand"]
    assert report.unsupported[0].reason in str(info.value)


def test_expand_of_a_static_dim_under_a_dynamic_batch_matches_eager() -> None:
    model = ExpandChannels().eval()
    trt = torch2trt_lite.convert(model, [torch.randn(2, 1, 4, 5, generator=_gen(0))], backend="sim", max_batch_size=4)
    for b in (1, 3, 4):
        x = torch.randn(b, 1, 4, 5, generator=_gen(b))
        torch.testing.assert_close(trt(x), model(x), rtol=0, atol=0)


def test_affine_grid_and_grid_sample_with_a_dynamic_batch_match_eager() -> None:
    model = Warp().eval()
    x, theta = torch.randn(2, 3, 8, 10, generator=_gen(0)), torch.randn(2, 2, 3, generator=_gen(1))
    assert torch2trt_lite.check(model, [x, theta], max_batch_size=4).ok
    trt = torch2trt_lite.convert(model, [x, theta], backend="sim", max_batch_size=4)
    for b in (1, 3, 4):
        xb, tb = torch.randn(b, 3, 8, 10, generator=_gen(b)), torch.randn(b, 2, 3, generator=_gen(10 + b)) * 0.5
        torch.testing.assert_close(trt(xb, tb), model(xb, tb), rtol=1e-4, atol=1e-5)


def test_affine_grid_with_a_dynamic_spatial_size_is_refused() -> None:
    class Grid(torch.nn.Module):
        def forward(self, x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
            return F.affine_grid(theta, list(x.shape), align_corners=False)

    spec = [torch2trt_lite.Input(min_shape=(1, 3, 8, 6), opt_shape=(1, 3, 8, 10), max_shape=(1, 3, 8, 12)),
            torch2trt_lite.Input(min_shape=(1, 2, 3), opt_shape=(1, 2, 3), max_shape=(1, 2, 3))]
    with pytest.raises(Torch2TRTError, match="affine_grid cannot take a dynamic size"):
        torch2trt_lite.convert(Grid().eval(), spec, backend="sim")


@pytest.mark.rtx  # skipped without TensorRT-RTX (tests/conftest.py says how to install it)
def test_expand_and_affine_grid_build_on_tensorrt_rtx() -> None:
    """The real builder takes the slice with a run-time stride and the batch-free grid reshape."""
    for model, xs in ((ExpandBatch().eval(), [torch.randn(2, 3, 4, 5)]),
                      (Warp().eval(), [torch.randn(2, 3, 8, 10), torch.randn(2, 2, 3)])):
        trt = torch2trt_lite.convert(model, xs, backend="tensorrt-rtx", max_batch_size=2)
        assert trt.plan.nbytes > 0
