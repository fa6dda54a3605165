"""Issue 27: ``check()`` reports every refusal ``convert()`` makes while tracing, in the same words
(it runs the same converters into a network of the sim that it never builds)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import torch2trt_lite
from torch2trt_lite.errors import Torch2TRTError


def _ball_query(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    idx = x.clone()
    mask = y > 0  # a traced mask: the written count is data-dependent
    idx[mask] = y[mask]
    return idx


def _scatter_add_traced(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    i = (y.abs() * 3).long().clamp(0, 7)[0]
    return torch.zeros(8).index_put_((i,), x[0], accumulate=True)


def _det(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.linalg.det(x[:2, :2]) + y.sum()


def _value_read(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x * 2 if float(x.sum()) > 0 else y


def _expanded_write(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    z = (x[:1, :1] + 1).expand(4, 8)
    z[0, 0].fill_(7)  # a write into a view whose memory holds computed values
    return z + y


def _chunk_dynamic(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x.chunk(3, 0)[0] + 1


def _complex_exp(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.exp(torch.stft(x, 4, window=torch.ones(4), return_complex=True)).abs()  # no complex exp in TensorRT


def _complex_output(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.stft(x, 4, window=torch.ones(4), return_complex=True) * 2  # engine outputs are real


def _returns_a_set(x: torch.Tensor, y: torch.Tensor) -> Any:
    return {x + 1, y}  # no order: its tensors cannot be engine outputs


def _returns_no_tensor(x: torch.Tensor, y: torch.Tensor) -> Any:
    return x.shape[0] + 1


class Program(torch.nn.Module):
    def __init__(self, fn: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Any:
        return self.fn(x, y)


CASES: dict[str, tuple[Callable[..., torch.Tensor], dict[str, Any]]] = {
    "ball query (idx[mask] = other[mask])": (_ball_query, {}),
    "index_put accumulate with traced indices": (_scatter_add_traced, {}),
    "op without a converter": (_det, {}),
    "value read into Python": (_value_read, {}),
    "write into an expanded computed view": (_expanded_write, {}),
    "chunk of a dynamic dim": (_chunk_dynamic, {"max_batch_size": 8}),
    "ball query, dynamic batch": (_ball_query, {"max_batch_size": 8}),
    "an op without a complex form on a complex value": (_complex_exp, {}),
    "a complex output": (_complex_output, {}),
    "an output that is a set": (_returns_a_set, {}),
    "an output without tensors": (_returns_no_tensor, {}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_reports_what_convert_refuses_in_the_same_words(name: str) -> None:
    fn, options = CASES[name]
    model = Program(fn).eval()
    xs = [torch.randn(4, 8, generator=torch.Generator().manual_seed(1)),
          torch.randn(4, 8, generator=torch.Generator().manual_seed(2))]
    with pytest.raises(Torch2TRTError) as info:
        torch2trt_lite.convert(model, xs, backend="sim", **options)
    report = torch2trt_lite.check(model, xs, **options)
    assert not report.ok, f"check() said {report} but convert() refused: {info.value}"
    said = str(info.value)
    words = [u.reason.split(" (checking stopped here")[0] for u in report.unsupported]
    assert any(w and w in said for w in words), (said, [str(u) for u in report.unsupported])
    first = report.unsupported[0]
    if not first.location.startswith("<"):  # a call of the model's code: convert names it and its line
        assert first.op in said and first.location in said, (said, str(first))
