"""Harness cases: interpolate / Upsample, pad, grid_sample, affine_grid, pixel (un)shuffle, unfold/fold."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.converters.harness import Case, randn


def _interp(**kw):  # type: ignore[no-untyped-def]
    return lambda x: F.interpolate(x, **kw)


THETA2 = torch.tensor([[[0.9, -0.2, 0.1], [0.3, 1.1, -0.2]], [[1.2, 0.1, 0.0], [0.0, 0.8, 0.3]]])
THETA3 = torch.tensor([[[0.9, -0.2, 0.1, 0.0], [0.3, 1.1, -0.2, 0.1], [0.0, 0.1, 1.0, 0.2]]])

INTERPOLATE = [
    Case("interp_nearest_scale2", _interp(scale_factor=2), lambda: [randn(1, 2, 3, 4)],
         targets=["torch.nn.functional.interpolate"]),
    Case("interp_nearest_size_down", _interp(size=(3, 5)), lambda: [randn(1, 2, 7, 9)]),
    Case("interp_nearest_size_up_odd", _interp(size=(7, 10)), lambda: [randn(1, 2, 3, 4)]),
    Case("interp_nearest_frac_scale", _interp(scale_factor=(1.5, 0.7)), lambda: [randn(1, 2, 5, 7)]),
    Case("interp_nearest_recompute", _interp(scale_factor=1.7, recompute_scale_factor=True),
         lambda: [randn(1, 2, 5, 6)]),
    Case("interp_nearest_1d", _interp(size=9), lambda: [randn(2, 3, 4)]),
    Case("interp_nearest_3d", _interp(scale_factor=(2, 1, 3)), lambda: [randn(1, 2, 2, 3, 2)]),
    Case("interp_nearest_exact", _interp(size=(5, 7), mode="nearest-exact"), lambda: [randn(1, 2, 3, 4)]),
    Case("interp_nearest_exact_down", _interp(scale_factor=0.6, mode="nearest-exact"), lambda: [randn(1, 2, 8, 9)]),
    Case("interp_bilinear", _interp(size=(6, 9), mode="bilinear"), lambda: [randn(1, 2, 3, 4)]),
    Case("interp_bilinear_down", _interp(size=(3, 2), mode="bilinear"), lambda: [randn(1, 2, 7, 5)]),
    Case("interp_bilinear_align", _interp(size=(6, 9), mode="bilinear", align_corners=True),
         lambda: [randn(1, 2, 3, 4)]),
    Case("interp_bilinear_scale", _interp(scale_factor=2.5, mode="bilinear"), lambda: [randn(1, 2, 3, 4)]),
    Case("interp_bilinear_to_one", _interp(size=(1, 1), mode="bilinear"), lambda: [randn(1, 2, 4, 5)]),
    Case("interp_bilinear_align_to_one", _interp(size=(1, 3), mode="bilinear", align_corners=True),
         lambda: [randn(1, 2, 4, 5)]),
    Case("interp_linear", _interp(scale_factor=3, mode="linear"), lambda: [randn(2, 3, 4)]),
    Case("interp_linear_align", _interp(size=7, mode="linear", align_corners=True), lambda: [randn(2, 3, 4)]),
    Case("interp_trilinear", _interp(size=(3, 4, 5), mode="trilinear"), lambda: [randn(1, 2, 2, 3, 3)]),
    Case("interp_trilinear_align", _interp(scale_factor=2, mode="trilinear", align_corners=True),
         lambda: [randn(1, 2, 2, 3, 3)]),
    Case("interp_bicubic", _interp(size=(7, 9), mode="bicubic"), lambda: [randn(1, 2, 4, 5)], rtol=1e-4, atol=1e-5),
    Case("interp_bicubic_align_scale", _interp(scale_factor=2, mode="bicubic", align_corners=True),
         lambda: [randn(1, 2, 4, 5)], rtol=1e-4, atol=1e-5),
    Case("interp_bicubic_down", _interp(size=(3, 3), mode="bicubic"), lambda: [randn(1, 2, 8, 7)],
         rtol=1e-4, atol=1e-5),
    Case("interp_area", _interp(size=(3, 4), mode="area"), lambda: [randn(1, 2, 7, 8)]),
    Case("upsample_module_nearest", lambda: nn.Upsample(scale_factor=2), lambda: [randn(1, 3, 4, 4)], is_module=True),
    Case("upsample_module_bilinear", lambda: nn.Upsample(size=(5, 7), mode="bilinear"), lambda: [randn(1, 3, 4, 4)],
         is_module=True),
    Case("upsampling_bilinear2d", lambda: nn.UpsamplingBilinear2d(scale_factor=2), lambda: [randn(1, 3, 4, 4)],
         is_module=True),
    Case("upsampling_nearest2d", lambda: nn.UpsamplingNearest2d(size=(6, 5)), lambda: [randn(1, 3, 4, 4)],
         is_module=True),
]

PAD = [
    Case("pad_constant", lambda x: F.pad(x, (1, 2)), lambda: [randn(2, 3, 4)], targets=["torch.nn.functional.pad"]),
    Case("pad_constant_value_2d", lambda x: F.pad(x, (1, 0, 2, 3), value=-1.5), lambda: [randn(2, 3, 4, 5)]),
    Case("pad_constant_negative_crop", lambda x: F.pad(x, (-1, 2, 0, -2)), lambda: [randn(1, 3, 5, 5)]),
    Case("pad_constant_all_dims", lambda x: F.pad(x, (1, 1, 0, 2, 1, 0)), lambda: [randn(2, 3, 4)]),
    Case("pad_constant_int", lambda x: F.pad(x, (2, 1), value=7), lambda: [torch.arange(12, dtype=torch.int32).reshape(3, 4)]),
    Case("pad_reflect", lambda x: F.pad(x, (2, 1, 1, 3), mode="reflect"), lambda: [randn(1, 2, 5, 6)]),
    Case("pad_reflect_1d", lambda x: F.pad(x, (3, 3), mode="reflect"), lambda: [randn(2, 3, 5)]),
    Case("pad_replicate", lambda x: F.pad(x, (2, 3, 1, 1), mode="replicate"), lambda: [randn(1, 2, 3, 4)]),
    Case("pad_replicate_3d", lambda x: F.pad(x, (1, 1, 2, 0, 0, 1), mode="replicate"), lambda: [randn(1, 2, 2, 3, 3)]),
    Case("pad_circular", lambda x: F.pad(x, (1, 2, 2, 1), mode="circular"), lambda: [randn(1, 2, 3, 4)]),
    # negative pads crop first, then the rest wraps / replicates / reflects
    Case("pad_circular_crop", lambda x: F.pad(x, (-1, 2, 1, -1), mode="circular"), lambda: [randn(1, 2, 3, 4)]),
    Case("pad_replicate_crop", lambda x: F.pad(x, (2, -1), mode="replicate"), lambda: [randn(1, 2, 5)]),
    Case("pad_module_reflection", lambda: nn.ReflectionPad2d((1, 2, 0, 1)), lambda: [randn(1, 2, 4, 4)],
         is_module=True),
    Case("pad_module_zero", lambda: nn.ZeroPad2d(2), lambda: [randn(1, 2, 3, 3)], is_module=True),
    Case("pad_module_constant3d", lambda: nn.ConstantPad3d(1, 0.5), lambda: [randn(1, 2, 2, 2, 2)], is_module=True),
    Case("conv2d_module_reflect", lambda: nn.Conv2d(4, 4, 3, padding=1, padding_mode="reflect"),
         lambda: [randn(1, 4, 6, 6)], is_module=True),
    Case("conv2d_module_circular", lambda: nn.Conv2d(4, 4, 3, padding=(1, 2), padding_mode="circular"),
         lambda: [randn(1, 4, 6, 6)], is_module=True),
    Case("conv1d_module_replicate", lambda: nn.Conv1d(3, 4, 3, padding=2, padding_mode="replicate"),
         lambda: [randn(1, 3, 8)], is_module=True),
]

GRID = [
    Case("grid_sample_bilinear", lambda x, g: F.grid_sample(x, g, align_corners=False),
         lambda: [randn(2, 3, 5, 6), randn(2, 4, 7, 2, seed=1) * 0.8], targets=["torch.nn.functional.grid_sample"]),
    Case("grid_sample_nearest_border", lambda x, g: F.grid_sample(x, g, mode="nearest", padding_mode="border",
                                                                  align_corners=True),
         lambda: [randn(1, 3, 5, 6), randn(1, 4, 4, 2, seed=2) * 1.2]),
    Case("grid_sample_bicubic_reflection", lambda x, g: F.grid_sample(x, g, mode="bicubic", padding_mode="reflection",
                                                                      align_corners=False),
         lambda: [randn(1, 2, 5, 6), randn(1, 3, 4, 2, seed=3)], rtol=1e-4, atol=1e-5),
    Case("affine_grid_2d", lambda t: F.affine_grid(t, [2, 3, 4, 5], align_corners=False),
         lambda: [THETA2.clone()], targets=["torch.nn.functional.affine_grid"]),
    Case("affine_grid_2d_align", lambda t: F.affine_grid(t, [2, 1, 3, 4], align_corners=True),
         lambda: [THETA2.clone()]),
    Case("affine_grid_3d", lambda t: F.affine_grid(t, [1, 1, 2, 3, 4], align_corners=False),
         lambda: [THETA3.clone()]),
    Case("affine_grid_then_sample", lambda x, t: F.grid_sample(x, F.affine_grid(t, [2, 3, 4, 4], align_corners=False),
                                                                align_corners=False),
         lambda: [randn(2, 3, 5, 5), THETA2.clone()]),
]

SHUFFLE = [
    Case("pixel_shuffle", lambda x: F.pixel_shuffle(x, 2), lambda: [randn(2, 8, 3, 4)],
         targets=["torch.pixel_shuffle"]),
    Case("pixel_shuffle_module_5d", lambda: nn.PixelShuffle(3), lambda: [randn(2, 2, 9, 2, 3)], is_module=True),
    Case("pixel_unshuffle", lambda x: F.pixel_unshuffle(x, 2), lambda: [randn(2, 3, 4, 6)],
         targets=["torch.pixel_unshuffle"]),
    Case("pixel_unshuffle_module_3d", lambda: nn.PixelUnshuffle(3), lambda: [randn(2, 6, 9)], is_module=True),
    Case("unfold", lambda x: F.unfold(x, 3), lambda: [randn(2, 3, 5, 6)], targets=["torch.nn.functional.unfold"]),
    Case("unfold_all_args", lambda x: F.unfold(x, (2, 3), dilation=(2, 1), padding=1, stride=(1, 2)),
         lambda: [randn(2, 3, 6, 7)]),
    Case("unfold_module_unbatched", lambda: nn.Unfold(2, stride=2), lambda: [randn(3, 4, 6)], is_module=True),
    Case("fold", lambda x: F.fold(x, (4, 5), 2), lambda: [randn(2, 12, 12)], targets=["torch.nn.functional.fold"]),
    Case("fold_all_args", lambda x: F.fold(x, (7, 8), (2, 3), dilation=(1, 2), padding=1, stride=2),
         lambda: [randn(1, 12, 12)]),
    Case("fold_uncovered_edge", lambda x: F.fold(x, (6, 6), 2, stride=3), lambda: [randn(1, 8, 4)]),
    Case("fold_unfold_roundtrip", lambda x: F.fold(F.unfold(x, 3, padding=1), (5, 5), 3, padding=1),
         lambda: [randn(1, 2, 5, 5)]),
]

CASES = INTERPOLATE + PAD + GRID + SHUFFLE
