"""Harness cases: convolution, batch norm, pooling, adaptive pooling, dropout and identity."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.converters.harness import Case, randn


def _seeded(factory):  # type: ignore[no-untyped-def]
    """A module factory with deterministic parameters and non-trivial BN statistics."""

    def make() -> nn.Module:
        torch.manual_seed(0)
        m = factory()
        for mod in m.modules():
            if isinstance(mod, nn.modules.batchnorm._BatchNorm) and mod.running_mean is not None:
                with torch.no_grad():
                    mod.running_mean.uniform_(-0.5, 0.5)
                    mod.running_var.uniform_(0.5, 2.0)
                    if mod.weight is not None:
                        mod.weight.uniform_(0.5, 1.5)
                        mod.bias.uniform_(-0.5, 0.5)
        return m

    return make


def _w(*shape: int, seed: int = 1) -> torch.Tensor:
    return randn(*shape, seed=seed) * 0.3



W2 = _w(6, 4, 3, 3)
B2 = _w(6, seed=2)
W2G = _w(6, 2, 3, 3, seed=3)
W1 = _w(6, 4, 3)
W3 = _w(4, 3, 3, 3, 3)
WT2 = _w(4, 3, 3, 3, seed=4)
WT2G = _w(4, 3, 3, 3, seed=5)  # groups=2: in 4, out 6
WT1 = _w(4, 3, 3, seed=6)
WT3 = _w(4, 2, 3, 3, 3, seed=7)

CONV = [
    Case("conv2d_basic", lambda x: F.conv2d(x, W2, B2), lambda: [randn(2, 4, 8, 8)], targets=["torch.conv2d"]),
    Case("conv2d_no_bias_stride_pad", lambda x: F.conv2d(x, W2, None, stride=2, padding=1),
         lambda: [randn(2, 4, 9, 7)]),
    Case("conv2d_asym_stride_pad_dil", lambda x: F.conv2d(x, W2, B2, stride=(2, 1), padding=(1, 2), dilation=(1, 2)),
         lambda: [randn(1, 4, 10, 11)]),
    Case("conv2d_groups", lambda x: F.conv2d(x, W2G, B2, groups=2), lambda: [randn(2, 4, 8, 8)]),
    Case("conv2d_same_odd", lambda x: F.conv2d(x, W2, B2, padding="same"), lambda: [randn(1, 4, 7, 6)]),
    Case("conv2d_same_even_dilated", lambda x: F.conv2d(x, _w(6, 4, 4, 2), None, padding="same", dilation=(1, 3)),
         lambda: [randn(1, 4, 9, 8)]),
    Case("conv2d_valid", lambda x: F.conv2d(x, W2, B2, padding="valid"), lambda: [randn(1, 4, 5, 5)]),
    Case("conv2d_module", lambda: nn.Conv2d(4, 8, 3, stride=2, padding=1), lambda: [randn(2, 4, 9, 9)],
         is_module=True),
    Case("conv2d_module_depthwise", lambda: nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False),
         lambda: [randn(2, 4, 6, 6)], is_module=True),
    Case("conv2d_unbatched", lambda x: F.conv2d(x, W2, B2, padding=1), lambda: [randn(4, 6, 6)]),
    Case("conv1d", lambda x: F.conv1d(x, W1, B2, stride=2, padding=1), lambda: [randn(2, 4, 9)],
         targets=["torch.conv1d"]),
    Case("conv1d_module", lambda: nn.Conv1d(4, 6, 5, padding="same", dilation=2), lambda: [randn(2, 4, 12)],
         is_module=True),
    Case("conv3d", lambda x: F.conv3d(x, W3, None, stride=(1, 2, 1), padding=1), lambda: [randn(1, 3, 5, 6, 4)],
         targets=["torch.conv3d"]),
    Case("conv3d_module_groups", lambda: nn.Conv3d(4, 6, 3, padding=(0, 1, 1), groups=2),
         lambda: [randn(1, 4, 4, 5, 5)], is_module=True),
    Case("conv_transpose2d", lambda x: F.conv_transpose2d(x, WT2, B2[:3], stride=2, padding=1, output_padding=1),
         lambda: [randn(2, 4, 5, 5)], targets=["torch.conv_transpose2d"]),
    Case("conv_transpose2d_groups_dil", lambda x: F.conv_transpose2d(x, WT2G, None, stride=(2, 1), padding=(0, 2),
                                                                      groups=2, dilation=2),
         lambda: [randn(1, 4, 5, 6)]),
    Case("conv_transpose2d_out_pad_gt_pad", lambda x: F.conv_transpose2d(x, WT2, B2[:3], stride=2, output_padding=1),
         lambda: [randn(1, 4, 4, 4)]),
    Case("conv_transpose2d_module", lambda: nn.ConvTranspose2d(4, 6, 4, stride=2, padding=1),
         lambda: [randn(2, 4, 5, 5)], is_module=True),
    Case("conv_transpose1d", lambda x: F.conv_transpose1d(x, WT1, None, stride=3, padding=1, output_padding=2),
         lambda: [randn(2, 4, 7)], targets=["torch.conv_transpose1d"]),
    Case("conv_transpose3d", lambda x: F.conv_transpose3d(x, WT3, None, stride=2, padding=1, output_padding=(1, 0, 1)),
         lambda: [randn(1, 4, 3, 4, 3)], targets=["torch.conv_transpose3d"]),
    # strided and dilated: TensorRT-RTX refuses it, the kernel is dilated (zeros between taps) instead
    Case("conv_transpose2d_stride2_dil2", lambda x: F.conv_transpose2d(x, WT2, B2[:3], stride=2, padding=1, dilation=2,
                                                                        output_padding=1),
         lambda: [randn(2, 4, 5, 5)]),
    Case("conv_transpose2d_module_stride_dil", lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=2, dilation=2),
         lambda: [randn(1, 4, 5, 4)], is_module=True),
    Case("conv_transpose1d_stride_dil", lambda x: F.conv_transpose1d(x, WT1, B2[:3], stride=2, dilation=3),
         lambda: [randn(2, 4, 6)]),
    Case("conv_transpose3d_stride_dil", lambda x: F.conv_transpose3d(x, WT3, None, stride=(2, 1, 2), dilation=(1, 2, 2)),
         lambda: [randn(1, 4, 3, 3, 2)]),
]


class _ConvBNReuse(nn.Module):
    """The pre-BN conv output is used again after the BN (lazy unfolded conv)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 3, padding=1)
        self.bn = nn.BatchNorm2d(6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        z = self.bn(y)
        return z + y


class _ConvUsedBeforeBN(nn.Module):
    """The conv output has another consumer before the BN: no folding (scale layer)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 3, padding=1)
        self.bn = nn.BatchNorm2d(6)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.conv(x)
        r = F.relu(y)
        return self.bn(y), r


def _bn_functional(x: torch.Tensor) -> torch.Tensor:
    c = x.shape[1]
    g = torch.Generator().manual_seed(3)
    mean, var = torch.randn(c, generator=g), torch.rand(c, generator=g) + 0.5
    w, b = torch.rand(c, generator=g) + 0.5, torch.randn(c, generator=g)
    return F.batch_norm(x, mean, var, w, b, False, 0.1, 1e-3)


BATCH_NORM = [
    Case("batch_norm_functional", _bn_functional, lambda: [randn(2, 5, 4, 4)],
         targets=["torch.nn.functional.batch_norm"]),
    Case("batch_norm2d_module", _seeded(lambda: nn.BatchNorm2d(5)), lambda: [randn(2, 5, 4, 3)], is_module=True),
    Case("batch_norm1d_2d_input", _seeded(lambda: nn.BatchNorm1d(5)), lambda: [randn(3, 5)], is_module=True),
    Case("batch_norm1d_3d_input", _seeded(lambda: nn.BatchNorm1d(5, affine=False)), lambda: [randn(3, 5, 7)],
         is_module=True),
    Case("batch_norm3d_module", _seeded(lambda: nn.BatchNorm3d(3)), lambda: [randn(2, 3, 2, 4, 3)], is_module=True),
    Case("batch_norm_batch_stats", _seeded(lambda: nn.BatchNorm2d(5, track_running_stats=False)),
         lambda: [randn(3, 5, 4, 4)], is_module=True, rtol=1e-4, atol=1e-5),
    Case("conv_bn_fold", _seeded(lambda: nn.Sequential(nn.Conv2d(4, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU())),
         lambda: [randn(2, 4, 8, 8)], is_module=True),
    Case("conv_bn_fold_no_bias", _seeded(lambda: nn.Sequential(nn.Conv2d(4, 6, 3, bias=False), nn.BatchNorm2d(6))),
         lambda: [randn(2, 4, 8, 8)], is_module=True),
    Case("conv_bn_fold_groups", _seeded(lambda: nn.Sequential(nn.Conv2d(4, 8, 3, groups=4), nn.BatchNorm2d(8))),
         lambda: [randn(1, 4, 6, 6)], is_module=True),
    Case("conv1d_bn_fold", _seeded(lambda: nn.Sequential(nn.Conv1d(4, 6, 3), nn.BatchNorm1d(6))),
         lambda: [randn(2, 4, 10)], is_module=True),
    Case("conv3d_bn_fold", _seeded(lambda: nn.Sequential(nn.Conv3d(3, 4, 3), nn.BatchNorm3d(4))),
         lambda: [randn(1, 3, 4, 5, 5)], is_module=True),
    Case("deconv_bn_fold", _seeded(lambda: nn.Sequential(nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2),
                                                         nn.BatchNorm2d(6))),
         lambda: [randn(1, 4, 4, 4)], is_module=True),
    Case("deconv_stride_dil_bn_fold", _seeded(lambda: nn.Sequential(
        nn.ConvTranspose2d(4, 6, 3, stride=2, dilation=2, groups=2), nn.BatchNorm2d(6))),
        lambda: [randn(1, 4, 4, 4)], is_module=True),
    Case("batch_norm3d_after_relu", _seeded(lambda: nn.Sequential(nn.ReLU(), nn.BatchNorm3d(2))),
         lambda: [randn(1, 2, 3, 2, 4)], is_module=True),
    Case("conv_bn_reuse_preact", _seeded(_ConvBNReuse), lambda: [randn(2, 4, 6, 6)], is_module=True),
    Case("conv_used_before_bn", _seeded(_ConvUsedBeforeBN), lambda: [randn(2, 4, 6, 6)], is_module=True),
]

POOL = [
    Case("max_pool2d", lambda x: F.max_pool2d(x, 2), lambda: [randn(2, 3, 8, 8)],
         targets=["torch.nn.functional.max_pool2d"]),
    Case("max_pool2d_stride_pad", lambda x: F.max_pool2d(x, 3, stride=2, padding=1), lambda: [randn(2, 3, 9, 8)]),
    Case("max_pool2d_ceil", lambda x: F.max_pool2d(x, 3, stride=2, ceil_mode=True), lambda: [randn(1, 2, 8, 9)]),
    Case("max_pool2d_ceil_drop_last", lambda x: F.max_pool2d(x, 2, stride=2, padding=1, ceil_mode=True),
         lambda: [randn(1, 2, 6, 5)]),
    Case("max_pool2d_dilated", lambda x: F.max_pool2d(x, 3, stride=2, padding=1, dilation=2),
         lambda: [randn(2, 3, 9, 8)]),
    Case("max_pool2d_dilated_ceil", lambda x: F.max_pool2d(x, (2, 3), stride=(2, 2), dilation=(3, 2), ceil_mode=True),
         lambda: [randn(1, 2, 10, 9)]),
    Case("max_pool1d_dilated", lambda x: F.max_pool1d(x, 2, stride=1, padding=1, dilation=3), lambda: [randn(2, 3, 9)]),
    Case("max_pool3d_dilated_module", lambda: nn.MaxPool3d(2, stride=1, dilation=2), lambda: [randn(1, 2, 4, 5, 5)],
         is_module=True),
    Case("max_pool2d_dilated_unbatched", lambda x: F.max_pool2d(x, 2, stride=1, padding=1, dilation=2),
         lambda: [randn(3, 6, 5)]),
    Case("max_pool2d_module", lambda: nn.MaxPool2d((3, 2), stride=(2, 1), padding=(1, 0)),
         lambda: [randn(2, 3, 7, 6)], is_module=True),
    Case("max_pool2d_unbatched", lambda x: F.max_pool2d(x, 2), lambda: [randn(3, 6, 6)]),
    Case("max_pool1d", lambda x: F.max_pool1d(x, 3, stride=2, padding=1), lambda: [randn(2, 3, 9)],
         targets=["torch.nn.functional.max_pool1d"]),
    Case("max_pool3d", lambda x: F.max_pool3d(x, 2, stride=(1, 2, 2), padding=(1, 0, 1)),
         lambda: [randn(1, 2, 4, 6, 5)], targets=["torch.nn.functional.max_pool3d"]),
    Case("max_pool3d_module_ceil", lambda: nn.MaxPool3d(3, stride=2, ceil_mode=True),
         lambda: [randn(1, 2, 6, 7, 8)], is_module=True),
    Case("avg_pool2d", lambda x: F.avg_pool2d(x, 2), lambda: [randn(2, 3, 8, 8)],
         targets=["torch.nn.functional.avg_pool2d"]),
    Case("avg_pool2d_pad_include", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1), lambda: [randn(1, 3, 9, 8)]),
    Case("avg_pool2d_pad_exclude", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
         lambda: [randn(1, 3, 9, 8)]),
    Case("avg_pool2d_ceil", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True),
         lambda: [randn(1, 3, 8, 8)]),
    Case("avg_pool2d_ceil_exclude", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
         lambda: [randn(1, 3, 8, 10)]),
    Case("avg_pool2d_divisor", lambda x: F.avg_pool2d(x, 2, padding=1, divisor_override=3),
         lambda: [randn(1, 3, 6, 6)]),
    Case("avg_pool2d_module", lambda: nn.AvgPool2d(3, stride=1), lambda: [randn(2, 3, 6, 6)], is_module=True),
    Case("avg_pool1d", lambda x: F.avg_pool1d(x, 3, stride=2, padding=1), lambda: [randn(2, 3, 9)],
         targets=["torch.avg_pool1d"]),
    Case("avg_pool3d", lambda x: F.avg_pool3d(x, 2, padding=1, count_include_pad=False),
         lambda: [randn(1, 2, 4, 5, 4)], targets=["torch.nn.functional.avg_pool3d"]),
    Case("avg_pool3d_divisor", lambda x: F.avg_pool3d(x, 2, divisor_override=5), lambda: [randn(1, 2, 4, 4, 4)]),
    Case("lp_pool2d", lambda x: F.lp_pool2d(x, 2.0, 2), lambda: [randn(1, 3, 6, 6)],
         targets=["torch.nn.functional.lp_pool2d"]),
    Case("lp_pool2d_p3_module", lambda: nn.LPPool2d(3, (2, 3), stride=1), lambda: [randn(1, 3, 6, 6).abs()],
         is_module=True, rtol=1e-4),
    Case("lp_pool1d", lambda x: F.lp_pool1d(x, 2, 3, stride=2), lambda: [randn(1, 3, 9)],
         targets=["torch.nn.functional.lp_pool1d"]),
    Case("lp_pool3d", lambda x: F.lp_pool3d(x, 1, 2), lambda: [randn(1, 2, 4, 4, 4)],
         targets=["torch.nn.functional.lp_pool3d"]),
]

ADAPTIVE = [
    Case("adaptive_avg_pool2d_1", lambda x: F.adaptive_avg_pool2d(x, 1), lambda: [randn(2, 3, 7, 7)],
         targets=["torch.nn.functional.adaptive_avg_pool2d"]),
    Case("adaptive_avg_pool2d_divides", lambda x: F.adaptive_avg_pool2d(x, (2, 3)), lambda: [randn(2, 3, 8, 9)]),
    Case("adaptive_avg_pool2d_none", lambda x: F.adaptive_avg_pool2d(x, (None, 2)), lambda: [randn(1, 3, 5, 8)]),
    Case("adaptive_avg_pool2d_module", lambda: nn.AdaptiveAvgPool2d((1, 1)), lambda: [randn(2, 8, 4, 4)],
         is_module=True),
    Case("adaptive_avg_pool2d_nondividing", lambda x: F.adaptive_avg_pool2d(x, (3, 4)), lambda: [randn(2, 3, 7, 10)]),
    Case("adaptive_avg_pool2d_upsample", lambda x: F.adaptive_avg_pool2d(x, (5, 6)), lambda: [randn(1, 2, 3, 4)]),
    Case("adaptive_avg_pool1d", lambda x: F.adaptive_avg_pool1d(x, 4), lambda: [randn(2, 3, 8)],
         targets=["torch.adaptive_avg_pool1d"]),
    Case("adaptive_avg_pool1d_nondividing", lambda x: F.adaptive_avg_pool1d(x, 3), lambda: [randn(2, 3, 7)]),
    Case("adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x, (1, 2, 2)), lambda: [randn(1, 2, 3, 4, 6)],
         targets=["torch.nn.functional.adaptive_avg_pool3d"]),
    Case("adaptive_avg_pool3d_nondividing", lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)),
         lambda: [randn(1, 2, 3, 5, 5)]),
    Case("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, (2, 2)), lambda: [randn(2, 3, 6, 8)],
         targets=["torch.nn.functional.adaptive_max_pool2d"]),
    Case("adaptive_max_pool2d_nondividing", lambda x: F.adaptive_max_pool2d(x, (3, 5)), lambda: [randn(2, 3, 7, 9)]),
    Case("adaptive_max_pool1d", lambda x: F.adaptive_max_pool1d(x, 3), lambda: [randn(2, 3, 7)],
         targets=["torch.nn.functional.adaptive_max_pool1d"]),
    Case("adaptive_max_pool3d", lambda x: F.adaptive_max_pool3d(x, 2), lambda: [randn(1, 2, 4, 4, 6)],
         targets=["torch.nn.functional.adaptive_max_pool3d"]),
]

DROPOUT = [
    Case("dropout_eval_module", lambda: nn.Sequential(nn.Dropout(0.3), nn.ReLU()), lambda: [randn(2, 5)],
         is_module=True),
    Case("dropout_functional_not_training", lambda x: F.dropout(x, 0.5, training=False).relu(),
         lambda: [randn(2, 5)], targets=["torch.nn.functional.dropout"]),
    Case("dropout_p0_training", lambda x: F.dropout(x, 0.0).relu(), lambda: [randn(2, 5)]),
    Case("dropout1d", lambda x: F.dropout1d(x, 0.2, training=False).relu(), lambda: [randn(2, 3, 5)],
         targets=["torch.nn.functional.dropout1d"]),
    Case("dropout2d", lambda x: F.dropout2d(x, 0.2, training=False).relu(), lambda: [randn(2, 3, 4, 5)],
         targets=["torch.nn.functional.dropout2d"]),
    Case("dropout3d", lambda x: F.dropout3d(x, 0.2, training=False).relu(), lambda: [randn(2, 3, 2, 4, 5)],
         targets=["torch.nn.functional.dropout3d"]),
    Case("alpha_dropout", lambda x: F.alpha_dropout(x, 0.2).relu(), lambda: [randn(2, 5)],
         targets=["torch.nn.functional.alpha_dropout"]),
    Case("feature_alpha_dropout", lambda x: F.feature_alpha_dropout(x, 0.2).relu(), lambda: [randn(2, 3, 5)],
         targets=["torch.nn.functional.feature_alpha_dropout"]),
    Case("torch_dropout", lambda x: torch.dropout(x, 0.4, False).relu(), lambda: [randn(2, 5)],
         targets=["torch.dropout"]),
    Case("dropout_inplace_module", lambda: nn.Sequential(nn.ReLU(), nn.Dropout(0.3, inplace=True)),
         lambda: [randn(2, 5)], is_module=True),
    Case("identity_module", lambda: nn.Sequential(nn.Identity(), nn.ReLU(), nn.Identity()), lambda: [randn(2, 5)],
         is_module=True, targets=["torch.nn.modules.linear.Identity"]),
]

CASES = CONV + BATCH_NORM + POOL + ADAPTIVE + DROPOUT
