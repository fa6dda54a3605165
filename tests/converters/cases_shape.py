"""Harness cases: shape ops (view/reshape/flatten, (un)squeeze, permutes, expand/repeat, split/join, flips)."""

from __future__ import annotations

import torch

from tests.converters.harness import Case, randn

T = "torch.Tensor."


def x4() -> list[torch.Tensor]:
    return [randn(2, 3, 4, 5)]


def x3() -> list[torch.Tensor]:
    return [randn(2, 3, 4)]


def x2() -> list[torch.Tensor]:
    return [randn(4, 5)]


def _inplace_squeeze(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y.squeeze_(1)
    return y


def _inplace_unsqueeze(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y.unsqueeze_(-1)
    return y


def _inplace_transpose(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y.transpose_(0, 2)
    return y


CASES = [
    # ------------------------------------------------------------------------ reshapes
    Case("view", lambda x: x.view(2, 12), x3, targets=[T + "view"]),
    Case("view_neg", lambda x: x.view(-1, 4), x3),
    Case("view_tuple", lambda x: x.view((6, -1)), x3),
    Case("view_size_arith", lambda x: x.view(x.size(0), -1) * x.shape[1] + x.dim() + x.numel(), x3),
    Case("view_size_tuple", lambda x: x.view(x.size()[0], x.shape[1] * x.shape[2]), x3),
    Case("view_dtype_unsupported", lambda x: x.view(torch.int32), x3, xfail="Tensor.view(dtype) reinterprets bits"),
    Case("reshape", lambda x: torch.reshape(x, (4, 6)), x3, targets=["torch.reshape"]),
    Case("reshape_method", lambda x: x.reshape(3, -1, 2), x3, targets=[T + "reshape"]),
    Case("reshape_scalar", lambda x: x.sum().reshape(1, 1), x3),
    Case("reshape_to_scalar", lambda x: x[:1, :1, :1].reshape(()), x3),
    Case("view_as", lambda x, y: x.view_as(y), lambda: [randn(2, 6), randn(3, 4, seed=1)], targets=[T + "view_as"]),
    Case("reshape_as", lambda x, y: x.reshape_as(y), lambda: [randn(2, 6), randn(3, 4, seed=1)],
         targets=[T + "reshape_as"]),
    Case("flatten", torch.flatten, x4, targets=["torch.flatten"]),
    Case("flatten_start", lambda x: torch.flatten(x, 1), x4),
    Case("flatten_mid", lambda x: x.flatten(1, 2), x4, targets=[T + "flatten"]),
    Case("flatten_neg", lambda x: x.flatten(-3, -2), x4),
    Case("flatten_scalar", lambda x: x.sum().flatten(), x4),
    Case("flatten_module", lambda: torch.nn.Flatten(), x4, is_module=True),
    Case("flatten_module_dims", lambda: torch.nn.Flatten(0, 1), x4, is_module=True),
    Case("unflatten", lambda x: torch.unflatten(x, 1, (3, 1)), x3, targets=["torch.unflatten"]),
    Case("unflatten_method", lambda x: x.unflatten(-1, (2, -1)), x3, targets=[T + "unflatten"]),
    Case("unflatten_module", lambda: torch.nn.Unflatten(2, (2, 2)), x3, is_module=True),
    Case("squeeze_all", torch.squeeze, lambda: [randn(1, 3, 1, 4)], targets=["torch.squeeze"]),
    Case("squeeze_dim", lambda x: x.squeeze(2), lambda: [randn(1, 3, 1, 4)], targets=[T + "squeeze"]),
    Case("squeeze_dim_noop", lambda x: x.squeeze(1), lambda: [randn(1, 3, 1, 4)]),
    Case("squeeze_dims", lambda x: x.squeeze((0, -2)), lambda: [randn(1, 3, 1, 4)]),
    Case("squeeze_inplace", _inplace_squeeze, lambda: [randn(3, 1, 4)], targets=[T + "squeeze_"]),
    Case("unsqueeze", lambda x: torch.unsqueeze(x, 1), x3, targets=["torch.unsqueeze"]),
    Case("unsqueeze_neg", lambda x: x.unsqueeze(-1), x3, targets=[T + "unsqueeze"]),
    Case("unsqueeze_front", lambda x: x.unsqueeze(0), x3),
    Case("unsqueeze_inplace", _inplace_unsqueeze, x3, targets=[T + "unsqueeze_"]),
    # ------------------------------------------------------------------- permutations
    Case("permute", lambda x: torch.permute(x, (0, 2, 3, 1)), x4, targets=["torch.permute"]),
    Case("permute_method", lambda x: x.permute(3, 0, -2, 1), x4, targets=[T + "permute"]),
    Case("transpose", lambda x: torch.transpose(x, 0, 2), x3, targets=["torch.transpose"]),
    Case("transpose_method", lambda x: x.transpose(-1, -2), x3, targets=[T + "transpose"]),
    Case("transpose_inplace", _inplace_transpose, x3, targets=[T + "transpose_"]),
    Case("swapaxes", lambda x: torch.swapaxes(x, 0, 1), x3, targets=["torch.swapaxes"]),
    Case("swapaxes_method", lambda x: x.swapaxes(0, 1), x3, targets=[T + "swapaxes"]),
    Case("swapaxes_inplace", lambda x: (x * 1).swapaxes_(0, 1), x3, targets=[T + "swapaxes_"]),
    Case("swapdims", lambda x: torch.swapdims(x, 0, 1), x3, targets=["torch.swapdims"]),
    Case("swapdims_method", lambda x: x.swapdims(0, 1), x3, targets=[T + "swapdims"]),
    Case("swapdims_inplace", lambda x: (x * 1).swapdims_(0, 1), x3, targets=[T + "swapdims_"]),
    Case("t", torch.t, x2, targets=["torch.t"]),
    Case("t_method", lambda x: x.t(), x2, targets=[T + "t"]),
    Case("t_1d", lambda x: x.t(), lambda: [randn(5)]),
    Case("t_inplace", lambda x: (x * 1).t_(), x2, targets=[T + "t_"]),
    Case("T_property", lambda x: x.T, x2, targets=[T + "T"]),
    Case("mT_property", lambda x: x.mT, x3, targets=[T + "mT"]),
    Case("movedim", lambda x: torch.movedim(x, 1, -1), x4, targets=["torch.movedim"]),
    Case("movedim_multi", lambda x: x.movedim((0, 1), (2, 0)), x4, targets=[T + "movedim"]),
    Case("moveaxis", lambda x: torch.moveaxis(x, 0, 2), x4, targets=["torch.moveaxis"]),
    Case("moveaxis_method", lambda x: x.moveaxis(-1, 0), x4, targets=[T + "moveaxis"]),
    # ------------------------------------------------------------------------ identity
    Case("contiguous", lambda x: x.transpose(0, 1).contiguous(), x3, targets=[T + "contiguous"]),
    Case("detach", lambda x: torch.detach(x) + x.detach(), x3, targets=["torch.detach", T + "detach"]),
    Case("detach_inplace", lambda x: (x * 1).detach_(), x3, targets=[T + "detach_"]),
    Case("requires_grad_", lambda x: (x * 1).requires_grad_(False), x3, targets=[T + "requires_grad_"]),
    Case("clone", torch.clone, x3, targets=["torch.clone"]),
    Case("clone_method", lambda x: x.clone() + x, x3, targets=[T + "clone"]),
    # ---------------------------------------------------------------- expand / repeat
    Case("expand", lambda x: x.expand(2, 3, 4), lambda: [randn(3, 1)], targets=[T + "expand"]),
    Case("expand_neg", lambda x: x.expand(5, -1, 4), lambda: [randn(1, 3, 1)]),
    Case("expand_as", lambda x, y: x.expand_as(y), lambda: [randn(3, 1), randn(2, 3, 4)], targets=[T + "expand_as"]),
    Case("broadcast_to", lambda x: torch.broadcast_to(x, (2, 3, 4)), lambda: [randn(4)],
         targets=["torch.broadcast_to"]),
    Case("broadcast_to_method", lambda x: x.broadcast_to((3, 4)), lambda: [randn(1, 4)],
         targets=[T + "broadcast_to"]),
    Case("broadcast_tensors", lambda x, y: torch.broadcast_tensors(x, y), lambda: [randn(3, 1), randn(4)],
         targets=["torch.broadcast_tensors"]),
    Case("repeat", lambda x: x.repeat(2, 1, 3), x3, targets=[T + "repeat"]),
    Case("repeat_more_dims", lambda x: x.repeat(2, 1, 1, 2), x3),
    Case("tile", lambda x: torch.tile(x, (2,)), x3, targets=["torch.tile"]),
    Case("tile_method", lambda x: x.tile((2, 1, 1, 2)), x3, targets=[T + "tile"]),
    Case("repeat_interleave", lambda x: torch.repeat_interleave(x, 2, dim=1), x3,
         targets=["torch.repeat_interleave"]),
    Case("repeat_interleave_flat", lambda x: x.repeat_interleave(3), x3, targets=[T + "repeat_interleave"]),
    Case("repeat_interleave_tensor", lambda x: x.repeat_interleave(torch.tensor([1, 0, 2]), dim=1), x3),
    # ------------------------------------------------------------------- split / join
    Case("split", lambda x: torch.split(x, 2, dim=2), x3, targets=["torch.split"]),
    Case("split_uneven", lambda x: x.split(3, -1), lambda: [randn(2, 7)], targets=[T + "split"]),
    Case("split_list", lambda x: x.split([1, 3], dim=2), x3),
    Case("split_with_sizes", lambda x: torch.split_with_sizes(x, [2, 1], 1), x3,
         targets=["torch.split_with_sizes"]),
    Case("split_with_sizes_method", lambda x: x.split_with_sizes([3, 1], -1), x3,
         targets=[T + "split_with_sizes"]),
    Case("chunk", lambda x: torch.chunk(x, 2, 2), x3, targets=["torch.chunk"]),
    Case("chunk_uneven", lambda x: x.chunk(3, dim=-1), lambda: [randn(2, 8)], targets=[T + "chunk"]),
    Case("tensor_split", lambda x: torch.tensor_split(x, 3, dim=1), lambda: [randn(2, 8)],
         targets=["torch.tensor_split"]),
    # indices that do not increase: the pieces are x[:4], x[4:2] (empty) and x[2:], overlapping
    Case("tensor_split_unordered_idx", lambda x: x.tensor_split([-3, 2], dim=1), lambda: [randn(2, 7)]),
    Case("tensor_split_idx", lambda x: x.tensor_split([1, 5], dim=1), lambda: [randn(2, 8)],
         targets=[T + "tensor_split"]),
    Case("unbind", torch.unbind, x3, targets=["torch.unbind"]),
    Case("unbind_dim", lambda x: x.unbind(-1), x3, targets=[T + "unbind"]),
    Case("cat", lambda x, y: torch.cat([x, y], 1), lambda: [randn(2, 3), randn(2, 5)], targets=["torch.cat"]),
    Case("cat_neg_dim_const", lambda x: torch.cat((x, torch.ones(2, 3, 1)), dim=-1), x3),
    Case("cat_promote", lambda x, y: torch.cat([x, y]), lambda: [randn(2, 3), torch.ones(1, 3, dtype=torch.int32)]),
    Case("cat_self", lambda x: torch.cat([x, x, x], 0), x3),
    Case("concat", lambda x, y: torch.concat([x, y], dim=0), lambda: [randn(2, 3), randn(1, 3)],
         targets=["torch.concat"]),
    Case("concatenate", lambda x, y: torch.concatenate([x, y], axis=1), lambda: [randn(2, 3), randn(2, 1)],
         targets=["torch.concatenate"]),
    Case("stack", lambda x, y: torch.stack([x, y]), lambda: [randn(2, 3), randn(2, 3)], targets=["torch.stack"]),
    Case("stack_last", lambda x, y: torch.stack((x, y), dim=-1), lambda: [randn(2, 3), randn(2, 3)]),
    Case("hstack", lambda x, y: torch.hstack([x, y]), lambda: [randn(2, 3), randn(2, 1)], targets=["torch.hstack"]),
    Case("hstack_1d", lambda x, y: torch.hstack([x, y]), lambda: [randn(3), randn(2)]),
    Case("vstack", lambda x, y: torch.vstack([x, y]), lambda: [randn(3), randn(3)], targets=["torch.vstack"]),
    Case("row_stack", lambda x, y: torch.row_stack([x, y]), lambda: [randn(2, 3), randn(3)],
         targets=["torch.row_stack"]),
    Case("dstack", lambda x, y: torch.dstack([x, y]), lambda: [randn(2, 3), randn(2, 3)], targets=["torch.dstack"]),
    Case("column_stack", lambda x, y: torch.column_stack([x, y]), lambda: [randn(3), randn(3, 2)],
         targets=["torch.column_stack"]),
    Case("narrow", lambda x: torch.narrow(x, 2, 1, 2), x3, targets=["torch.narrow"]),
    Case("narrow_method", lambda x: x.narrow(-1, -3, 2), x3, targets=[T + "narrow"]),
    # ------------------------------------------------------------------- roll / flip
    Case("roll", lambda x: torch.roll(x, 1, 2), x3, targets=["torch.roll"]),
    Case("roll_multi", lambda x: x.roll((1, -2), (0, 2)), x3, targets=[T + "roll"]),
    Case("roll_flat", lambda x: x.roll(5), x3),
    Case("roll_zero", lambda x: x.roll(4, -1), x3),
    Case("flip", lambda x: torch.flip(x, (0, 2)), x3, targets=["torch.flip"]),
    Case("flip_method", lambda x: x.flip(-1), x3, targets=[T + "flip"]),
    Case("fliplr", torch.fliplr, x3, targets=["torch.fliplr"]),
    Case("fliplr_method", lambda x: x.fliplr(), x2, targets=[T + "fliplr"]),
    Case("flipud", torch.flipud, x3, targets=["torch.flipud"]),
    Case("flipud_method", lambda x: x.flipud(), x2, targets=[T + "flipud"]),
    # -------------------------------------------------------------- diag / tril / triu
    Case("tril", torch.tril, x2, targets=["torch.tril"]),
    Case("tril_k", lambda x: x.tril(-1), x3, targets=[T + "tril"]),
    Case("tril_inplace", lambda x: (x * 1).tril_(1), x2, targets=[T + "tril_"]),
    Case("triu", lambda x: torch.triu(x, 1), x2, targets=["torch.triu"]),
    Case("triu_method", lambda x: x.triu(), x3, targets=[T + "triu"]),
    Case("triu_inplace", lambda x: (x * 1).triu_(-1), x2, targets=[T + "triu_"]),
    Case("triu_inf", lambda x: x.masked_fill(x > 0, float("inf")).triu(), x2),
    Case("diag_1d", torch.diag, lambda: [randn(4)], targets=["torch.diag"]),
    Case("diag_1d_k", lambda x: x.diag(-2), lambda: [randn(3)], targets=[T + "diag"]),
    Case("diag_2d", lambda x: x.diag(), x2),
    Case("diag_2d_k", lambda x: torch.diag(x, 2), x2),
    Case("diagonal", lambda x: torch.diagonal(x), x2, targets=["torch.diagonal"]),
    Case("diagonal_dims", lambda x: x.diagonal(1, 0, 2), x3, targets=[T + "diagonal"]),
    # dynamic-batch regressions (tests/converters/test_dynamic_harness.py varies dim 0): the mask, the
    # diagonal's indices and the pieces follow the runtime size instead of the traced one
    Case("diag_1d_k_pos", lambda x: x.diag(2), lambda: [randn(3)]),
    Case("diagonal_batched", lambda x: x.diagonal(-1, 1, 2) * 2, x3),
    Case("triu_rows_dim0_k", lambda x: x.triu(2) + x.tril(-3), lambda: [randn(6, 4)]),
    Case("tensor_split_dim0", lambda x: [p * (k + 1) for k, p in enumerate(torch.tensor_split(x, 3))],
         lambda: [randn(5, 4)]),
    Case("tensor_split_dim0_idx", lambda x: [p.sum(0) for p in x.tensor_split([1, -1])], lambda: [randn(5, 4)]),
    Case("chunk_static_dim_of_batch", lambda x: [p.sum(-1) for p in x.chunk(3, dim=2)], lambda: [randn(3, 2, 7)]),
    Case("repeat_interleave_dim0", lambda x: x.repeat_interleave(2, dim=0) + 1, x3),
    # ------------------------------------------------------ a torchvision-style head
    Case("resnet_head", lambda x: torch.flatten(x.mean((2, 3), keepdim=True), 1), x4),
]
