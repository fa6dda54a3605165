"""Runtime checks (converters/assertions.py): an assumption checked by PyTorch on the traced inputs is
checked by the engine on every run (an extra BOOL output), and a violation fails the run with the
model's message."""

from __future__ import annotations

import pathlib

import pytest
import torch
from torch import nn

import torch2trt_lite


class Positive(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch._assert((x > 0).all(), "the input must be positive")
        return x.log()


class Lengths(nn.Module):
    """speech-model style: the lengths must not exceed the padded time axis."""

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        torch._check_tensor_all(lengths <= x.shape[1], "a length is longer than the input")
        mask = torch.arange(x.shape[1])[None, :] < lengths[:, None]
        return x * mask


def test_violated_assertion_fails_the_run_with_the_message() -> None:
    m = Positive().eval()
    x = torch.rand(2, 3) + 0.5
    trt = torch2trt_lite.convert(m, [x], backend="sim")
    assert [o["name"] for o in trt.metadata["outputs"]] == ["output_0", "assert_0"]
    torch.testing.assert_close(trt(x), m(x))
    with pytest.raises(torch2trt_lite.RuntimeExecutionError, match="the input must be positive"):
        trt(x - 1)


def test_check_tensor_all_on_lengths() -> None:
    m = Lengths().eval()
    x, lengths = torch.randn(3, 5), torch.tensor([5, 2, 4])
    trt = torch2trt_lite.convert(m, [x, lengths], backend="sim")
    other = torch.tensor([1, 3, 5])
    torch.testing.assert_close(trt(x, other), m(x, other))
    with pytest.raises(torch2trt_lite.RuntimeExecutionError, match="a length is longer than the input"):
        trt(x, torch.tensor([6, 1, 1]))


def test_assertion_on_more_than_one_element_is_refused_like_pytorch() -> None:
    class Bad(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            torch._assert(x > 0, "x")  # eager PyTorch raises too: a tensor of 6 elements has no truth value
            return x

    with pytest.raises(RuntimeError, match="ambiguous"):
        torch2trt_lite.convert(Bad().eval(), [torch.rand(2, 3) + 1], backend="sim")


@pytest.mark.rtx
def test_checks_build_on_tensorrt_rtx() -> None:
    for m, xs in ((Lengths().eval(), [torch.randn(3, 5), torch.tensor([5, 2, 4])]), (Positive().eval(), [torch.rand(2, 3) + 1])):
        trt = torch2trt_lite.convert(m, xs, backend="tensorrt-rtx", progress=False)
        assert len(trt.plan) > 0 and trt.metadata["outputs"][-1]["assert"]


def test_checks_survive_the_engine_file(tmp_path: pathlib.Path) -> None:
    m = Positive().eval()
    x = torch.rand(2, 3) + 0.5
    path = str(tmp_path / "p.engine")
    torch2trt_lite.convert(m, [x], backend="sim").save(path)
    again = torch2trt_lite.load(path)
    torch.testing.assert_close(again(x), m(x))
    with pytest.raises(torch2trt_lite.RuntimeExecutionError, match="the input must be positive"):
        again(-x)
