"""The long-tail patterns of issue 23 (tests/zoo/longtail_models.py; each model is also in the zoo,
tests/zoo/test_zoo.py, which compares it with eager, static and with a dynamic batch): ``check()``
lists nothing unsupported on any of them, with a static and with a dynamic batch, and each op of
the patterns is named among the converted calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import torch2trt_lite
from tests.converters.harness import converted_calls
from tests.zoo import longtail_models as longtail
from torch2trt_lite import Input

PATTERNS: list[tuple[str, Callable[[], torch.nn.Module], Callable[[], list[torch.Tensor]], set[str]]] = [
    ("mel_front_end", longtail.MelFrontEnd, longtail.waveform, {"torch.functional.stft"}),
    ("recommender", longtail.Recommender, longtail.recommender_inputs,
     {"torch.nn.functional.embedding_bag", "torch.isin"}),
    ("cell_loop", longtail.CellLoop, longtail.sequence, {"torch.gru_cell", "torch.lstm_cell"}),
    ("patching", longtail.PatchTimeSeries, longtail.series, {"torch.Tensor.unfold", "torch.cummax"}),
]


def _dynamic(xs: list[torch.Tensor]) -> list[Any]:
    b = xs[0].shape[0]
    return [Input((1, *x.shape[1:]), tuple(x.shape), (b + 3, *x.shape[1:]), dtype=x.dtype, example=x)
            if x.shape[0] == b else x for x in xs]


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic_batch"])
@pytest.mark.parametrize(("name", "build", "inputs", "ops"), PATTERNS, ids=[p[0] for p in PATTERNS])
def test_check_lists_nothing_unsupported(name: str, build: Callable[[], torch.nn.Module],
                                         inputs: Callable[[], list[torch.Tensor]], ops: set[str],
                                         dynamic: bool) -> None:
    torch.manual_seed(0)
    model = build().eval()
    xs = inputs()
    with converted_calls() as seen:
        report = torch2trt_lite.check(model, _dynamic(xs) if dynamic else xs)
    assert report.ok, str(report)
    assert not report.dynamic, str(report)
    assert ops <= seen, f"{name}: {sorted(ops - seen)} not among the converted calls"
