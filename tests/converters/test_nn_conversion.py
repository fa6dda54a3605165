"""nn converters beyond value checks: batch-norm folding (layer counts) and refusals with reasons."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch2trt_lite
from torch2trt_lite.errors import UnsupportedOperatorError


def _bn(c: int) -> nn.BatchNorm2d:
    bn = nn.BatchNorm2d(c)
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
    return bn


def _convert(model: nn.Module, x: torch.Tensor) -> torch2trt_lite.TRTModule:
    model = model.eval()
    trt = torch2trt_lite.convert(model, [x], backend="sim")
    with torch.no_grad():
        torch.testing.assert_close(trt(x), model(x), rtol=1e-5, atol=1e-5)
    return trt


def test_conv_bn_folds_into_one_layer() -> None:
    torch.manual_seed(0)
    trt = _convert(nn.Sequential(nn.Conv2d(3, 4, 3), _bn(4)), torch.randn(1, 3, 6, 6))
    assert trt.num_layers == 1


class _ConvOutputUsedTwice(nn.Module):
    """conv -> (bn, relu) in either order: the pre-BN tensor has a second consumer."""

    def __init__(self, bn_first: bool) -> None:
        super().__init__()
        self.conv, self.bn, self.bn_first = nn.Conv2d(3, 4, 3), _bn(4), bn_first

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.conv(x)
        return (self.bn(y), F.relu(y)) if self.bn_first else (F.relu(y), self.bn(y))


@pytest.mark.parametrize(
    "bn_first", [False, True], ids=["relu_first_no_folding", "bn_first_folded_then_unfolded_conv"]
)
def test_conv_output_with_another_consumer_keeps_its_value(bn_first: bool) -> None:
    torch.manual_seed(0)
    trt = _convert(_ConvOutputUsedTwice(bn_first), torch.randn(1, 3, 6, 6))
    # relu first: conv, relu, scale; bn first: folded conv, unfolded conv (created lazily), relu
    assert trt.num_layers == 3


_X = (torch.randn(1, 3, 6, 6),)
_IDS = (torch.tensor([1, 2, 0, 3]),)


@pytest.mark.parametrize(
    ("fn", "inputs", "reason"),
    [
        (lambda x: F.dropout(x, 0.5), _X, "training mode"),
        (lambda x: F.max_pool2d(x, 2, return_indices=True)[0], _X, "return_indices"),
        (lambda x: F.adaptive_max_pool2d(x, 2, return_indices=True)[0], _X, "return_indices"),
        (lambda x: F.interpolate(x, scale_factor=0.5, mode="bilinear", antialias=True), _X, "antialias"),
        (lambda x: F.scaled_dot_product_attention(x, x, x, dropout_p=0.1), _X, "dropout_p"),
        (lambda x: F.grid_sample(x.unsqueeze(0), torch.zeros(1, 1, 2, 2, 3)), _X, "4D"),
        (lambda i: F.embedding(i, torch.randn(5, 2), max_norm=1.0), _IDS, "max_norm"),
        (lambda i: F.embedding_bag(i, torch.randn(5, 2), torch.tensor([0, 1, 3]), include_last_offset=True), _IDS,
         "include_last_offset"),
    ],
)
def test_refusals_name_the_reason(fn, inputs: tuple[torch.Tensor, ...], reason: str) -> None:  # type: ignore[no-untyped-def]
    class M(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return fn(x)  # type: ignore[no-any-return]

    report = torch2trt_lite.check(M().eval(), list(inputs))
    assert not report.ok
    assert reason in str(report), str(report)
    with pytest.raises(UnsupportedOperatorError, match=reason) as info:
        torch2trt_lite.convert(M().eval(), list(inputs), backend="sim")
    e = info.value  # the refused call, where the user wrote it
    assert e.op.rsplit(".", 1)[-1] in str(e) and "test_nn_conversion.py:" in e.location


def test_aliases_of_folded_conv_output_keep_pre_norm_values() -> None:
    """dropout (eval) returns the conv's network tensor itself: the alias must not see the folded BN."""

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.bn = nn.Conv2d(3, 4, 3), _bn(4)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            y = self.conv(x)
            z = F.dropout(y, 0.5, training=False)
            return self.bn(y), z * 2

    torch.manual_seed(0)
    _convert(M(), torch.randn(1, 3, 6, 6))


# CPU torch has no float16 kernel for avg_pool3d (nor cdist): the tracer computes the traced value in float32
# and rounds it, as TensorRT computes halves. The reference is torch's float32 result rounded to float16.
_HALF_NO_CPU_KERNEL = {
    "avg_pool3d": (nn.AvgPool3d(2), 1),
    "avg_pool3d_padded": (nn.AvgPool3d(3, 2, 1, ceil_mode=True, count_include_pad=False), 1),
    "lp_pool3d": (nn.LPPool3d(2, 2), 1),
    "local_response_norm_3d": (nn.LocalResponseNorm(2), 1),
    "cdist": (lambda a, b: torch.cdist(a[0, 0], b[0, 0]), 2),
}


@pytest.mark.parametrize("name", list(_HALF_NO_CPU_KERNEL))
def test_float16_ops_without_a_cpu_half_kernel(name: str) -> None:
    op, n = _HALF_NO_CPU_KERNEL[name]

    class M(nn.Module):
        def forward(self, *xs: torch.Tensor) -> torch.Tensor:
            return op(*xs)  # type: ignore[operator]

    def make(seed: int) -> list[torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        return [torch.rand(1, 4, 4, 6, 6, generator=g).half() for _ in range(n)]

    with pytest.raises(NotImplementedError, match="Half"):
        op(*make(0))  # type: ignore[operator]
    trt = torch2trt_lite.convert(M().eval(), make(0), backend="sim")
    for seed in (0, 1):
        xs = make(seed)
        got = trt(*xs)
        assert got.dtype == torch.float16
        # fp16's tolerance: the sim rounds once per layer (pow, average, sqrt), torch's fp32 reference once
        torch.testing.assert_close(got, op(*[x.float() for x in xs]).half(), rtol=1e-2, atol=1e-2)  # type: ignore[operator]
