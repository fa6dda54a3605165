"""``torch2trt_lite.check`` with dynamic inputs (issue 10): it takes ``convert``'s inputs (tensors,
``Input`` ranges, ``max_batch_size=``, ``dynamic_batch=``, ``profiles=``) and lists, without stopping
at the first, every call whose converter refuses a dynamic size and every comparison, ``len()`` or
float of a dynamic size that the range does not decide, each with op, module path, location and
reason, next to the unsupported calls it reports for static inputs."""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.nn.functional as F

import torch2trt_lite
from torch2trt_lite import ConversionError, Input, UnsupportedOperatorError
from torch2trt_lite.errors import DynamicSizeGuardError


def _line(fn: object, text: str) -> int:
    """The line of ``fn``'s source that holds ``text``."""
    lines, start = inspect.getsourcelines(fn)  # type: ignore[arg-type]
    return start + next(i for i, t in enumerate(lines) if text in t)


class Halves(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = torch.chunk(x, 2, 0)  # the number of pieces of a dynamic dim depends on its size
        return torch.cat([b, a])


class Pool(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.adaptive_avg_pool1d(x, 2)  # bins over a dynamic length: refused


class Branchy(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.size(0) > 4:  # not decided by [1, 8]
            x = x * 2
        x = x * (x.size(0) / 2)  # a Python float of the traced batch
        x = x.view(len(x), -1)  # len() of a dynamic dim 0
        return torch.special.bessel_j0(x)  # no converter at all


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pool = Pool()
        self.head = Branchy()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(x) + 1)


_SPEC = [Input((1, 3, 8), (4, 3, 16), (8, 3, 32))]  # dynamic batch [1, 8] and length [8, 32]


def test_dynamic_check_lists_every_refusal_with_op_module_location_and_reason() -> None:
    report = torch2trt_lite.check(Model().eval(), _SPEC)
    got = [(p.op, p.module_path, p.location) for p in report.unsupported]
    here = f"{__file__}:"
    b = "size(0) of a tensor computed from the inputs (= input_0.size(0))"  # the batch after the stand-in
    assert got == [
        ("torch.adaptive_avg_pool1d", "pool", f"{here}{_line(Pool.forward, 'adaptive_avg_pool1d')}"),
        (f"`{b} > 4`", "head", f"{here}{_line(Branchy.forward, 'if x.size(0)')}"),
        (f"float of a dynamic size ({b} / 2)", "head", f"{here}{_line(Branchy.forward, '/ 2')}"),
        ("len() of a dynamic dim", "head", f"{here}{_line(Branchy.forward, 'len(x)')}"),
        ("torch.special.bessel_j0", "head", f"{here}{_line(Branchy.forward, 'bessel_j0')}"),
    ]
    reasons = [p.reason for p in report.unsupported]
    assert "cannot take a dynamic size (input_0.size(2))" in reasons[0]
    assert "range [1, 8]" in reasons[1] and f"`{b} > 4` is False at the traced size" in reasons[1]
    assert "Python float" in reasons[2] and "range [1, 8]" in reasons[2]
    assert "len()" in reasons[3] and "x.size(0)" in reasons[3]
    assert "no converter is registered" in reasons[4]
    assert report.dynamic == report.unsupported[:4] and not report.ok
    text = str(report)
    assert text.startswith("5 unsupported call(s):")
    assert "torch.adaptive_avg_pool1d at pool (" in text and f"`{b} > 4` at head (" in text


def test_convert_stops_at_the_first_refusal_that_check_lists() -> None:
    with pytest.raises(UnsupportedOperatorError, match="adaptive pooling cannot take a dynamic size"):
        torch2trt_lite.convert(Model().eval(), _SPEC, backend="sim")
    with pytest.raises(DynamicSizeGuardError, match=r"input_0\.size\(0\) > 4"):
        torch2trt_lite.convert(Branchy().eval(), [torch.randn(4, 3)], backend="sim", max_batch_size=8)


def test_static_check_of_the_same_model_lists_only_the_unsupported_op() -> None:
    report = torch2trt_lite.check(Model().eval(), [torch.randn(4, 3, 16)])
    assert [(p.op, p.module_path) for p in report.unsupported] == [("torch.special.bessel_j0", "head")]
    assert report.dynamic == []


class Decided(torch.nn.Module):
    """Branches and arithmetic on the batch that a range of [2, 16] decides (but [1, 8] does not)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.size(0) >= 2:
            x = x + 1
        b = x.size(0)
        return x.reshape(b * 2, -1)[: b // 2 + 1] * 3


@pytest.mark.parametrize("ranges", ["dynamic_batch", "Input"])
def test_check_follows_the_range_and_a_clean_check_converts(ranges: str) -> None:
    x = torch.randn(4, 6)
    if ranges == "dynamic_batch":
        inputs: list[object] = [x]
        options: dict[str, object] = {"dynamic_batch": (2, 16)}
    else:
        inputs, options = [Input((2, 6), (4, 6), (16, 6), example=x)], {}
    report = torch2trt_lite.check(Decided().eval(), inputs, **options)  # type: ignore[arg-type]
    assert report.ok and report.dynamic == [], str(report)
    assert str(report) == "all calls on traced tensors have converters"
    engine = torch2trt_lite.convert(Decided().eval(), inputs, backend="sim", **options)  # type: ignore[arg-type]
    for b in (2, 5, 16):
        xb = torch.randn(b, 6)
        with torch.no_grad():
            want = Decided().eval()(xb)
        torch.testing.assert_close(engine(xb), want, atol=1e-6, rtol=1e-6)
    # the same model over [1, 8]: the branch is not decided there
    bad = torch2trt_lite.check(Decided().eval(), [x], max_batch_size=8)
    assert [p.op for p in bad.unsupported] == ["`input_0.size(0) >= 2`"]
    with pytest.raises(ConversionError, match=r"`input_0\.size\(0\) >= 2`"):
        torch2trt_lite.convert(Decided().eval(), [x], backend="sim", max_batch_size=8)


def test_check_takes_profiles_and_refuses_bad_options() -> None:
    x = torch.randn(4, 3)
    report = torch2trt_lite.check(Halves().eval(), [x], profiles=[[Input((1, 3), (2, 3), (2, 3))],
                                                                  [Input((3, 3), (4, 3), (8, 3))]])
    assert [p.op for p in report.dynamic] == ["torch.chunk"] and "[1, 8]" in report.dynamic[0].reason
    with pytest.raises(torch2trt_lite.Torch2TRTError, match="at most one of"):
        torch2trt_lite.check(Halves().eval(), [x], max_batch_size=8, dynamic_batch=(1, 8))
    with pytest.raises(torch2trt_lite.Torch2TRTError, match="float64"):
        torch2trt_lite.check(Halves().eval(), [x.double()], max_batch_size=8)


class Pair(torch.nn.Module):
    def forward(self, pair: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        a, b = pair
        if a.size(0) == b.size(0):  # the same dynamic size (duck sizing): decided
            a = a + b
        return a * (a.size(0) / 4)  # a float of the batch: listed


def test_check_takes_structured_inputs_like_convert() -> None:
    pair = (torch.randn(4, 3), torch.randn(4, 3))
    report = torch2trt_lite.check(Pair().eval(), [pair], max_batch_size=8)
    assert [p.op for p in report.dynamic] == ["float of a dynamic size (input_0.0.size(0) / 4)"]
    assert report.dynamic[0].location == f"{__file__}:{_line(Pair.forward, '/ 4')}"
    assert torch2trt_lite.check(Pair().eval(), [pair]).ok  # static: nothing to list
