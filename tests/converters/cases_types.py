"""Harness cases: dtype casts, device moves, *_like creation and Tensor.new_* of traced tensors, fill_."""

from __future__ import annotations

import torch

from tests.converters.harness import Case, randn

T = "torch.Tensor."


def xf() -> list[torch.Tensor]:
    return [randn(3, 4) * 5]


def xi() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randint(-100, 100, (3, 4), generator=g).to(torch.int32)]


_SHAPE_ONLY = "only the input's shape and dtype reach the output"


def _fill(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y.fill_(2.5)
    return y + x


def _fill_traced(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y.fill_(x.sum())
    return y


def _zero(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y.zero_()
    return y - x


CASES = [
    Case("to_dtype", lambda x: x.to(torch.float16), xf, targets=[T + "to"], rtol=1e-3, atol=1e-3),
    Case("to_int_truncates", lambda x: x.to(torch.int32), xf),
    Case("to_kwargs", lambda x: x.to(dtype=torch.int64, copy=True), xf),
    Case("to_same", lambda x: x.to(torch.float32) + x.to("cpu"), xf),
    Case("to_other", lambda x, y: x.to(y), lambda: [randn(3, 4), torch.zeros(2, dtype=torch.int32)]),
    Case("to_device_dtype", lambda x: x.to("cpu", torch.float16), xf, rtol=1e-3, atol=1e-3),
    Case("to_float64", lambda x: x.to(torch.float64), xf, xfail="TensorRT has no float64"),
    Case("type_dtype", lambda x: x.type(torch.int64), xf, targets=[T + "type"]),
    Case("type_string", lambda x: x.type("torch.IntTensor"), xf),
    Case("type_as", lambda x, y: x.type_as(y), lambda: [randn(3, 4) * 3, torch.zeros(1, dtype=torch.int64)],
         targets=[T + "type_as"]),
    Case("float", lambda x: x.float() / 3, xi, targets=[T + "float"]),
    Case("half", lambda x: x.half(), xf, targets=[T + "half"], rtol=1e-3, atol=1e-3),
    Case("bfloat16", lambda x: x.bfloat16(), xf, targets=[T + "bfloat16"], rtol=1e-2, atol=1e-2),
    Case("int", lambda x: x.int(), xf, targets=[T + "int"]),
    Case("long", lambda x: (x * 100).long(), xf, targets=[T + "long"]),
    Case("long_from_int", lambda x: x.long() * 3, xi),
    Case("bool", lambda x: (x / 5).round().bool(), xf, targets=[T + "bool"]),
    Case("bool_from_int", lambda x: x.bool(), lambda: [torch.tensor([[0, 3, -1, 0], [7, 0, 0, 1]], dtype=torch.int32)]),
    Case("bool_to_float", lambda x: (x > 0).float(), xf),
    Case("double", lambda x: x.double(), xf, targets=[T + "double"], xfail="TensorRT has no float64"),
    Case("short", lambda x: x.short(), xi, targets=[T + "short"], xfail="TensorRT has no int16"),
    Case("char", lambda x: (x / 2).char(), xi, targets=[T + "char"]),
    Case("byte", lambda x: x.abs().byte(), xi, targets=[T + "byte"]),
    Case("cpu", lambda x: x.cpu() + 1, xf, targets=[T + "cpu"]),
    Case("cuda", lambda x: x.cuda() + 1, xf, targets=[T + "cuda"],
         xfail="a device move is an identity in the network: outputs come back on the input's device (CPU "
               "here), unlike eager .cuda(): the comparison fails on the device",
         extra={"xfail_raises": AssertionError, "needs_cuda": True}),
    Case("zeros_like", lambda x: torch.zeros_like(x) + x, xf, targets=["torch.zeros_like"]),
    Case("zeros_like_dtype", lambda x: torch.zeros_like(x, dtype=torch.int32), xf, constant=_SHAPE_ONLY),
    Case("ones_like", lambda x: torch.ones_like(x), xi, targets=["torch.ones_like"], constant=_SHAPE_ONLY),
    Case("empty_like", lambda x: torch.empty_like(x).fill_(1.0) * x, xf, targets=["torch.empty_like"]),
    Case("full_like", lambda x: torch.full_like(x, 7.5), xf, targets=["torch.full_like"], constant=_SHAPE_ONLY),
    Case("full_like_int", lambda x: torch.full_like(x, 7), xi, constant=_SHAPE_ONLY),
    Case("new_zeros", lambda x: x.new_zeros(2, 3), xf, targets=[T + "new_zeros"], constant=_SHAPE_ONLY),
    Case("new_ones", lambda x: x.new_ones((3, 4)) + x, xf, targets=[T + "new_ones"]),
    Case("new_empty", lambda x: x.new_empty(3).zero_(), xf, targets=[T + "new_empty"], constant=_SHAPE_ONLY),
    Case("new_full", lambda x: x.new_full((3, 1), 2) * x, xi, targets=[T + "new_full"]),
    Case("new_tensor", lambda x: x.new_tensor([1.0, 2.0, 3.0, 4.0]) * x, xf, targets=[T + "new_tensor"]),
    Case("new_tensor_of_traced", lambda x: x.new_tensor(x * 2, dtype=torch.int32), xf),  # a copy, truncated
    Case("fill_", _fill, xf, targets=[T + "fill_"]),
    Case("fill_traced", _fill_traced, xf, constant="every element is x.sum() (a rolled x has the same sum)",
         others=lambda xs: [xs[0] * 2]),
    Case("zero_", _zero, xf, targets=[T + "zero_"]),
    Case("arange_from_shape", lambda x: x * torch.arange(x.shape[1]) + torch.ones(x.size(0), 1), xf),
    # creation with sizes read from the input: constants when static; with a dynamic batch the sizes
    # are symbolic (torch2trt_lite.trace.symbolic) and these converters build them in the network
    Case("zeros_of_size", lambda x: x + torch.zeros(x.shape[0], x.shape[1]), xf, targets=["torch.zeros"],
         extra={"dynamic_targets": ["torch.zeros"]}),
    Case("ones_of_size", lambda x: x * torch.ones((x.size(0), 1)), xf, targets=["torch.ones"],
         extra={"dynamic_targets": ["torch.ones"]}),
    Case("full_of_size", lambda x: x - torch.full((x.size(0), 1), 2.5), xf, targets=["torch.full"],
         extra={"dynamic_targets": ["torch.full"]}),
    Case("empty_of_size", lambda x: torch.empty(x.shape).fill_(1.0) * x, xf, targets=["torch.empty"],
         extra={"dynamic_targets": ["torch.empty"]}),
    Case("arange_of_size", lambda x: x + torch.arange(x.size(0) * 2, dtype=torch.float32)[::2, None], xf,
         targets=["torch.arange"], extra={"dynamic_targets": ["torch.arange"]}),
]
