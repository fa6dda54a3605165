"""Issue 23's converters with a dynamic dim that the batch harness (test_dynamic_harness.py, dim 0
from batch 1) cannot reach: the unfolded dim of Tensor.unfold (a window count computed in the
network), the signal length of torch.stft, the scanned dim of cummax/cummin, the number of indices
and of bags of embedding_bag with offsets from the inputs, a test set of isin. Each is converted
once with Input ranges and compared with eager PyTorch at sizes other than the traced one."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import torch2trt_lite
from tests.converters.harness import Fn
from torch2trt_lite import Input


def _stft(x: torch.Tensor) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.stft(x, 64, 16, window=torch.hann_window(64), return_complex=False)


_W = torch.randn(20, 3, generator=torch.Generator().manual_seed(3))


def _ids(n: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 20, (n,), generator=torch.Generator().manual_seed(seed))


CASES: list[tuple[str, Callable[..., Any], list[Any], list[list[torch.Tensor]]]] = [
    ("unfold_dynamic_dim_then_reshape", lambda x: x.unfold(1, 4, 3).flatten(2).sum(-1) * 2,
     [Input((1, 4, 2), (2, 13, 2), (3, 40, 2), example=torch.randn(2, 13, 2))],
     [[torch.randn(3, 40, 2)], [torch.randn(1, 4, 2)], [torch.randn(2, 21, 2)]]),
    ("stft_dynamic_length", _stft, [Input((1, 100), (2, 400), (4, 1000), example=torch.randn(2, 400))],
     [[torch.randn(3, 777)], [torch.randn(1, 100)]]),
    ("cummax_dynamic_axis", lambda x: torch.cummax(x, 1), [Input((1, 1), (2, 12), (4, 40), example=torch.randn(2, 12))],
     [[torch.randn(3, 37)], [torch.randn(1, 1)], [torch.randint(0, 3, (2, 40)).float()]]),
    ("cummin_dynamic_axis_int", lambda x: torch.cummin(x, 0),
     [Input((1, 3), (5, 3), (30, 3), dtype=torch.int64, example=torch.randint(0, 4, (5, 3)))],
     [[torch.randint(0, 4, (30, 3))], [torch.randint(0, 4, (2, 3))]]),
    ("embedding_bag_dynamic_ids_and_bags", lambda i, o: F.embedding_bag(i, _W, o, mode="max"),
     [Input((1,), (9,), (30,), dtype=torch.int64, example=_ids(9)),
      Input((1,), (3,), (8,), dtype=torch.int64, example=torch.tensor([0, 4, 4]))],
     [[_ids(30, 1), torch.tensor([0, 1, 1, 7, 20, 29])], [_ids(2, 2), torch.tensor([0])]]),
    ("isin_dynamic_set", lambda x, t: torch.isin(x, t),
     [Input((1, 3), (2, 3), (4, 3), dtype=torch.int64, example=torch.randint(0, 5, (2, 3))),
      Input((1,), (4,), (9,), dtype=torch.int64, example=torch.tensor([1, 2, 3, 4]))],
     [[torch.randint(0, 5, (3, 3)), torch.tensor([0, 4])], [torch.randint(0, 5, (4, 3)), torch.arange(9)]]),
]


@pytest.mark.parametrize(("name", "fn", "spec", "others"), CASES, ids=[c[0] for c in CASES])
def test_dynamic_dim_matches_eager(name: str, fn: Callable[..., Any], spec: list[Any],
                                   others: list[list[torch.Tensor]]) -> None:
    model = Fn(fn).eval()
    trt = torch2trt_lite.convert(model, spec, backend="sim", verify=False, progress=False)
    for xs in others:
        with torch.no_grad():
            want = model(*xs)
        where = f"{name} at {tuple(xs[0].shape)}"
        torch.testing.assert_close(trt(*xs), want, rtol=1e-5, atol=1e-4, msg=lambda m, w=where: f"{w}: {m}")


@pytest.mark.rtx
@pytest.mark.parametrize(("name", "fn", "spec", "others"), CASES, ids=[c[0] for c in CASES])
def test_dynamic_dim_builds_on_tensorrt_rtx(name: str, fn: Callable[..., Any], spec: list[Any],
                                            others: list[list[torch.Tensor]]) -> None:
    """The same dynamic networks, built by the real TensorRT-RTX builder (no GPU: built, not run)."""
    engine = torch2trt_lite.convert(Fn(fn).eval(), spec, backend="tensorrt-rtx", verify=False, progress=False)
    assert len(engine.plan) > 0 and not engine.runnable
