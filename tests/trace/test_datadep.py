"""Data-dependent shapes (converters/datadep.py): outputs whose size depends on the values, sizes read
from them that stay symbolic, their refusals, and what the real builder says of NonZero."""

from __future__ import annotations

import pathlib

import pytest
import torch
from torch import nn

import torch2trt_lite
from torch2trt_lite.errors import DynamicSizeGuardError


class Detect(nn.Module):
    """YOLO-style rows above a threshold, their boxes, and per-row ids from the data-dependent count."""

    def forward(self, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        conf = p[:, 4:5] * p[:, 5:]
        best, cls = conf.max(1)
        keep = best > 0.3
        q = p[keep]
        boxes = torch.cat([q[:, :2] - q[:, 2:4] / 2, q[:, :2] + q[:, 2:4] / 2], 1)
        ids = torch.arange(boxes.size(0)).float() + cls[keep].float() / 10
        return boxes[:5], ids


def _preds(seed: int, rows: int = 30) -> torch.Tensor:
    return torch.rand(rows, 8, generator=torch.Generator().manual_seed(seed))


def _assert_match(trt: nn.Module, m: nn.Module, x: torch.Tensor) -> None:
    for got, want in zip(trt(x), m(x), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_outputs_take_each_run_s_size() -> None:
    m = Detect().eval()
    trt = torch2trt_lite.convert(m, [_preds(0)], backend="sim")
    counts = set()
    for seed in range(4):
        x = _preds(seed)
        _assert_match(trt, m, x)
        counts.add(int(m(x)[1].numel()))
    assert len(counts) > 1, "the test inputs must select different numbers of rows"


def test_no_row_selected_gives_empty_outputs() -> None:
    m = Detect().eval()
    trt = torch2trt_lite.convert(m, [_preds(0)], backend="sim")
    x = _preds(1) * torch.tensor([1, 1, 1, 1, 0, 1, 1, 1])  # objectness 0: nothing passes
    boxes, ids = trt(x)
    assert boxes.shape == (0, 4) and ids.shape == (0,)


def test_data_dependent_outputs_survive_the_engine_file(tmp_path: pathlib.Path) -> None:
    m = Detect().eval()
    path = str(tmp_path / "d.engine")
    torch2trt_lite.convert(m, [_preds(0)], backend="sim").save(path)
    _assert_match(torch2trt_lite.load(path), m, _preds(3))


def test_with_a_dynamic_batch() -> None:
    class Per(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nonzero(x > 0.5)

    m = Per().eval()
    trt = torch2trt_lite.convert(m, [torch2trt_lite.Input((1, 6), (4, 6), (8, 6))], backend="sim")
    for b in (1, 3, 8):
        x = torch.rand(b, 6, generator=torch.Generator().manual_seed(b))
        torch.testing.assert_close(trt(x), m(x))


def test_branch_on_a_data_dependent_size_names_the_line() -> None:
    class Branch(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            keep = torch.nonzero(x > 0)
            if keep.size(0) == 0:  # the engine would take the traced branch for every input
                return x.sum()
            return keep.float().sum()

    with pytest.raises(DynamicSizeGuardError, match=r"test_datadep\.py:\d+.*data-dependent size nonzero count"):
        torch2trt_lite.convert(Branch().eval(), [torch.randn(4, 4)], backend="sim")


def test_bound_of_a_data_dependent_size_answers_guards() -> None:
    class Bounded(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            n = torch.nonzero(x > 0).size(0)
            assert n <= x.numel()  # true for every input: answered without a refusal
            return torch.arange(n).float() + x.mean()

    m = Bounded().eval()
    trt = torch2trt_lite.convert(m, [torch.randn(3, 4)], backend="sim")
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(trt(x), m(x))


def test_zero_dim_mask_is_refused() -> None:
    class Zero(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[x.sum() > 0]

    with pytest.raises(torch2trt_lite.Torch2TRTError, match="0-D boolean mask"):
        torch2trt_lite.convert(Zero().eval(), [torch.randn(3)], backend="sim")


def test_nonzero_on_int64_compares_with_zero() -> None:
    # NOTE: TensorRT's NonZero takes no INT64 input (the sim refuses it like TensorRT's operator page):
    # the converter feeds it x != 0
    class Ints(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x * 2).nonzero()

    m = Ints().eval()
    x = torch.tensor([[0, 3, -1], [2, 0, 0]])
    trt = torch2trt_lite.convert(m, [x], backend="sim")
    torch.testing.assert_close(trt(torch.tensor([[1, 0, 0], [0, 0, 5]])), m(torch.tensor([[1, 0, 0], [0, 0, 5]])))


@pytest.mark.rtx
def test_tensorrt_rtx_defines_nonzero_but_its_cpu_builder_has_no_runner() -> None:
    # Measured with TensorRT-RTX 1.7's CPU-only builder: the network defines (shapes and types are
    # accepted), and the build stops at the NonZero layer (named after the op that made it, here
    # ``getitem_<k>`` for ``p[keep]``): "<layer> has no runners that implement it".
    # Whether a GPU build accepts it is unexecuted here (no GPU).
    with pytest.raises(torch2trt_lite.BuildError, match="has no runners that implement it"):
        torch2trt_lite.convert(Detect().eval(), [_preds(0)], backend="tensorrt-rtx", progress=False)


# ------------------------------------------------------------------------------ sizes from values
class LengthMask(nn.Module):
    """Speech-style padding: the longest length read from the values sizes the output."""

    def forward(self, feat: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        n = lengths.max().item()
        mask = torch.arange(n)[None, :] < lengths[:, None]
        return feat[:, :n] * mask[..., None]


def _lengths_input(example: torch.Tensor) -> torch2trt_lite.Input:
    return torch2trt_lite.Input((3,), (3,), (3,), dtype=torch.int64, example=example, low=1, high=65)


def test_a_size_read_from_values_follows_each_run() -> None:
    m = LengthMask().eval()
    feat = torch.randn(3, 64, 4)
    trt = torch2trt_lite.convert(m, [feat, _lengths_input(torch.tensor([5, 9, 3]))], backend="sim")
    assert trt.metadata["inputs"][1]["values"] == {"min": [1, 1, 1], "opt": [5, 9, 3], "max": [64, 64, 64]}
    for lengths in ([5, 9, 3], [64, 2, 2], [1, 1, 1], [17, 40, 8]):
        x = torch.tensor(lengths)
        torch.testing.assert_close(trt(feat, x), m(feat, x))


def test_a_value_outside_the_built_range_is_refused_at_run_time(tmp_path: pathlib.Path) -> None:
    m = LengthMask().eval()
    feat = torch.randn(3, 64, 4)
    path = str(tmp_path / "v.engine")
    torch2trt_lite.convert(m, [feat, _lengths_input(torch.tensor([5, 9, 3]))], backend="sim").save(path)
    again = torch2trt_lite.load(path)
    torch.testing.assert_close(again(feat, torch.tensor([7, 7, 7])), m(feat, torch.tensor([7, 7, 7])))
    with pytest.raises(torch2trt_lite.RuntimeExecutionError, match=r"value 65 at 1 is outside \[1, 64\]"):
        again(feat, torch.tensor([3, 65, 2]))


def test_a_value_read_from_a_plain_example_asks_for_its_range() -> None:
    with pytest.raises(torch2trt_lite.ConversionError, match="needs the range of its values: pass torch2trt_lite.Input"):
        torch2trt_lite.convert(LengthMask().eval(), [torch.randn(3, 64, 4), torch.tensor([5, 9, 3])], backend="sim")


def test_int_of_a_value_read_is_refused_not_baked() -> None:
    class Baked(nn.Module):
        def forward(self, feat: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            return feat[:, : int(lengths.max().item())]  # int() makes a plain number of the traced value

    with pytest.raises(torch2trt_lite.ConversionError, match=r"test_datadep.py:\d+\) was read as a Python number \(traced as 9\).*plain int or float"):
        torch2trt_lite.convert(Baked().eval(), [torch.randn(3, 64, 4), _lengths_input(torch.tensor([5, 9, 3]))],
                               backend="sim")


def test_a_size_computed_from_float_values_is_refused() -> None:
    class Count(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.arange((x > 0).sum().item()).float()

    with pytest.raises(torch2trt_lite.ConversionError, match=r"input 'input_0' \(torch.float32.*is read as a size"):
        torch2trt_lite.convert(Count().eval(), [torch.randn(8)], backend="sim")


@pytest.mark.rtx
def test_a_size_read_from_values_builds_on_tensorrt_rtx() -> None:
    # Measured: TensorRT-RTX 1.7 makes the int64 input a shape input and builds the plan (running it
    # needs a GPU: unexecuted here).
    trt = torch2trt_lite.convert(LengthMask().eval(), [torch.randn(3, 64, 4), _lengths_input(torch.tensor([5, 9, 3]))],
                                 backend="tensorrt-rtx", progress=False)
    assert len(bytes(trt.plan)) > 0
