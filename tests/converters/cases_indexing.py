"""Harness cases: indexing (x[idx], x[idx] = v), gathers, scatters, index_put, sorting, one_hot."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.converters.harness import Case, randn

T = "torch.Tensor."


def x3() -> list[torch.Tensor]:
    return [randn(4, 5, 6)]


def x2() -> list[torch.Tensor]:
    return [randn(5, 6)]


def x_idx() -> list[torch.Tensor]:
    """Data and a traced index tensor (an input of the network)."""
    return [randn(4, 5, 6), torch.tensor([[0, 3], [-1, 2]])]


def _set_slice(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[:, 1:3] = 0.5
    return y


def _set_int(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[1] = v
    return y


def _set_step(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[::2, 1, -3:] = y[1::2, 2, :3] * 2
    return y


def _set_ellipsis(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[..., 0] = -1
    return y


def _set_full(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[:] = 3.0
    return y


def _set_int_tensor_value(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[:, 2] = torch.arange(4.0)[:, None]
    return y


def _set_mask(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[y < 0] = 0
    return y


def _set_mask_leading(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[y[:, 0, 0] > 0] = -5.0
    return y


def _set_const_mask(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[torch.tensor([True, False, True, False])] = 7.0
    return y


def _set_index_tensor(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[i] = 0.0
    return y


def _set_index_list(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[:, [0, 4]] = y[:, [1, 2]]
    return y


def _set_two_index(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[[0, 2], [1, 3]] = torch.ones(6)
    return y


def _set_nonadjacent(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[[0, 2], :, [1, 3]] = torch.arange(10.0).reshape(2, 5)
    return y


def _set_int_and_tensor(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[:, [0, 1], 2, [1, 2]] = torch.arange(8.0).reshape(4, 2)
    y[1, :, 2, [0, 3]] = -torch.arange(10.0).reshape(5, 2)
    return y


def _iadd_view(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[:, 0] += 1
    y[1:, 2:4] *= y[:-1, :2]
    return y


def _untraced_buffer(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(4, 7)
    out[:, 1:] = x[:, :6]
    return out


def _untraced_buffer_iadd(x: torch.Tensor) -> torch.Tensor:
    out = torch.ones(5, 6)
    out[:, 0] += x[:, 0]
    return out


def _untraced_inplace(x: torch.Tensor) -> torch.Tensor:
    buf = torch.full((5, 6), 2.0)
    buf.add_(x)
    return buf


def _view_modified(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    v = y[0]
    v.add_(1)
    y[1] = 2.0
    return y


def _copy(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(5, 6)
    out.copy_(x)
    return out


def _copy_bcast(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y.copy_(x[0].int())
    return y


def _index_put_(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y.index_put_((i,), torch.tensor(9.0))
    return y


CASES = [
    # a 0-D index computed from the inputs, and a 0-D result
    Case("getitem_traced_0d_index", lambda x, i: x[i] * 2, lambda: [randn(5), torch.tensor(3)]),
    # ---------------------------------------------------------------------- __getitem__
    Case("getitem_int", lambda x: x[1], x3, targets=[T + "__getitem__"]),
    Case("getitem_neg_int", lambda x: x[-1, -2], x3),
    Case("getitem_slice", lambda x: x[1:3], x3),
    Case("aten_slice_step", lambda x: torch.ops.aten.slice(x, 1, 1, None, 2) * 2, x3,
         targets=["torch.ops.aten.slice"]),
    Case("aten_slice_tensor_neg_end", lambda x: torch.ops.aten.slice.Tensor(x, -1, 0, -1) + 1, x3,
         targets=["torch.ops.aten.slice.Tensor"]),
    Case("getitem_slice_step", lambda x: x[::2, 1::3, -4:-1:2], x3),
    Case("getitem_slice_clamp", lambda x: x[2:100, -100:2], x3),
    Case("getitem_empty_slice", lambda x: x[3:1], x3),
    Case("getitem_none", lambda x: x[None, :, None, 1], x3),
    Case("getitem_ellipsis", lambda x: x[..., 0], x3),
    Case("getitem_ellipsis_mid", lambda x: x[1, ..., 2:], x3),
    Case("getitem_ellipsis_none", lambda x: x[..., None], x3),
    Case("getitem_scalar_tensor", lambda x: x.sum(0)[2, 3], x3),
    Case("getitem_list", lambda x: x[[0, 2, 2]], x3),
    Case("getitem_list_dim1", lambda x: x[:, [4, 0, -1]], x3),
    Case("getitem_const_tensor", lambda x: x[..., torch.tensor([[1, 2], [0, 5]])], x3),
    Case("getitem_traced_tensor", lambda x, i: x[i], x_idx),
    Case("getitem_traced_tensor_dim", lambda x, i: x[:, i], x_idx),
    Case("getitem_traced_argmax", lambda x: x[x.sum((1, 2)).argmax()], x3),
    Case("getitem_const_table_traced_index", lambda x: torch.arange(10.0)[x.argmax(-1)] * x.max(-1).values, x3),
    Case("getitem_two_adjacent", lambda x: x[:, [0, 1, 4], [5, 0, 2]], x3),
    Case("getitem_two_broadcast", lambda x: x[[[0], [3]], [1, 2, 4]], x3),
    Case("getitem_nonadjacent", lambda x: x[[0, 2], :, [1, 5]], x3),
    Case("getitem_int_with_tensor", lambda x: x[1, :, [0, 3]], x3),
    Case("getitem_int_adjacent", lambda x: x[:, 1, [0, 3]], x3),
    Case("getitem_int_between", lambda x: x[:, [0, 1], 2, [1, 2]], lambda: [randn(4, 5, 6, 7)]),
    Case("getitem_none_between", lambda x: x[:, [0, 1], None, [1, 2]], lambda: [randn(4, 5, 6, 7)]),
    Case("getitem_slice_between", lambda x: x[:, [0, 1], 2:4, [1, 2]], lambda: [randn(4, 5, 6, 7)]),
    Case("getitem_tensor_slice_mix", lambda x, i: x[1:, i, ::2], x_idx),
    Case("getitem_const_mask", lambda x: x[torch.tensor([True, False, True, True])], x3),
    Case("getitem_const_mask_2d", lambda x: x[:, torch.tensor([[True, False] * 3] * 5)], x3),
    Case("getitem_traced_mask", lambda x: x[x > 0], x3),  # a data-dependent size: converters/datadep.py
    Case("getitem_int_tensor_int32", lambda x: x[torch.tensor([1, 0], dtype=torch.int32)], x3),
    Case("getitem_bool_int", lambda x: (x > 0)[1:, 2], x3),
    # ---------------------------------------------------------------------- __setitem__
    Case("setitem_slice", _set_slice, x3, targets=[T + "__setitem__"]),
    Case("setitem_int_tensor", _set_int, lambda: [randn(4, 5, 6), randn(6, seed=1)]),
    Case("setitem_step", _set_step, x3),
    Case("setitem_ellipsis", _set_ellipsis, x3),
    Case("setitem_full", _set_full, x3, constant="y[:] = 3 overwrites every element"),
    Case("setitem_value_broadcast", _set_int_tensor_value, x3),
    Case("setitem_traced_mask", _set_mask, x3),
    Case("setitem_traced_mask_leading", _set_mask_leading, x3),
    Case("setitem_const_mask", _set_const_mask, x3),
    Case("setitem_index_tensor", _set_index_tensor, x_idx),
    Case("setitem_index_list", _set_index_list, x2),
    Case("setitem_two_index", _set_two_index, x3),
    Case("setitem_nonadjacent", _set_nonadjacent, x3),
    Case("setitem_int_and_tensor", _set_int_and_tensor, lambda: [randn(4, 5, 6, 7)]),
    Case("setitem_augmented_view", _iadd_view, x2),
    Case("setitem_untraced_buffer", _untraced_buffer, lambda: [randn(4, 8)]),
    Case("setitem_untraced_buffer_iadd", _untraced_buffer_iadd, x2),
    Case("inplace_untraced_buffer", _untraced_inplace, x2),
    Case("setitem_view_modified", _view_modified, x2),  # the base follows writes into its views (context.py)
    Case("copy_", _copy, x2, targets=[T + "copy_"]),
    Case("copy_broadcast_cast", _copy_bcast, x2),
    # --------------------------------------------------------------------- index_put
    Case("index_put", lambda x, i: torch.index_put(x, (i,), torch.tensor(1.0)), x_idx, targets=["torch.index_put"]),
    Case("index_put_method", lambda x: x.index_put((torch.tensor([0, 2]), torch.tensor([1, 1])), torch.ones(6)),
         x3, targets=[T + "index_put"]),
    Case("index_put_accumulate", lambda x: x.index_put((torch.tensor([0, 3]),), x[1:3], accumulate=True), x3),
    Case("index_put_accumulate_dup", lambda x: x.index_put((torch.tensor([0, 0]),), x[1:3], accumulate=True), x3,
         xfail="accumulate with repeated indices is not supported"),
    Case("index_put_inplace", _index_put_, x_idx, targets=[T + "index_put_"]),
    Case("index_put_inplace_fn", lambda x: torch.index_put_(x * 1, (torch.tensor([1]),), torch.tensor(0.0)), x3,
         targets=["torch.index_put_"]),
    # ------------------------------------------------------------------------ gathers
    Case("index_select", lambda x: torch.index_select(x, 1, torch.tensor([4, 0, 0])), x3,
         targets=["torch.index_select"]),
    Case("index_select_traced", lambda x, i: x.index_select(-1, i.abs().flatten()), x_idx, targets=[T + "index_select"]),
    Case("gather", lambda x: torch.gather(x, 1, torch.tensor([[0, 1, 1, 0, 4, 3]] * 5)), x2, targets=["torch.gather"]),
    Case("gather_smaller", lambda x: x.gather(0, torch.tensor([[4, 0, 1], [1, 1, 2]])), x2, targets=[T + "gather"]),
    Case("gather_traced", lambda x: x.gather(-1, x.argsort(-1)), x2),
    Case("take_along_dim", lambda x: torch.take_along_dim(x, x.argmax(1, keepdim=True), 1), x3,
         targets=["torch.take_along_dim"]),
    Case("take_along_dim_flat", lambda x: x.take_along_dim(torch.tensor([0, 7, 119])), x3,
         targets=[T + "take_along_dim"]),
    Case("take_along_dim_bcast", lambda x: x.take_along_dim(torch.tensor([[[0], [2], [1], [5], [3]]]), dim=2), x3),
    Case("take", lambda x: torch.take(x, torch.tensor([[0, 10], [-1, 3]])), x3, targets=["torch.take"]),
    Case("take_method", lambda x: x.take(torch.tensor([5])), x3, targets=[T + "take"]),
    # ----------------------------------------------------------------------- scatters
    Case("scatter", lambda x: torch.scatter(x, 0, torch.tensor([[1, 0, 2, 4, 3, 0]]), x[:1] * 2), x2,
         targets=["torch.scatter"]),
    Case("scatter_value", lambda x: x.scatter(1, torch.tensor([[0], [2], [5], [1], [1]]), 7.0), x2,
         targets=[T + "scatter"]),
    Case("scatter_src_bigger", lambda x, y: x.scatter(1, torch.tensor([[0, 5]] * 5), y), lambda: [randn(5, 6), randn(5, 4)]),
    Case("scatter_inplace", lambda x: (x * 1).scatter_(1, torch.tensor([[3]] * 5), 0.0), x2, targets=[T + "scatter_"]),
    Case("scatter_traced_index", lambda x: x.scatter(1, x.argmax(1, keepdim=True), -1.0), x2),
    Case("scatter_add", lambda x: torch.scatter_add(x, 1, torch.tensor([[0, 0, 1, 5, 5, 5]] * 5), x), x2,
         targets=["torch.scatter_add"]),
    Case("scatter_add_method", lambda x: x.scatter_add(0, torch.tensor([[0, 1, 0, 1, 0, 1]] * 2), x[:2]), x2,
         targets=[T + "scatter_add"]),
    Case("scatter_add_inplace", lambda x: (x * 1).scatter_add_(1, torch.tensor([[2, 2]] * 5), x[:, :2]), x2,
         targets=[T + "scatter_add_"]),
    Case("scatter_reduce_sum", lambda x: torch.scatter_reduce(x, 1, torch.tensor([[0, 0, 1, 5, 5, 5]] * 5), x, "sum"),
         x2, targets=["torch.scatter_reduce"]),
    Case("scatter_reduce_amax", lambda x: x.scatter_reduce(1, torch.tensor([[0, 0, 1, 5, 5, 5]] * 5), x * 3, "amax"),
         x2, targets=[T + "scatter_reduce"]),
    Case("scatter_reduce_amin_noself", lambda x: x.scatter_reduce(1, torch.tensor([[0, 0, 1, 5, 5, 5]] * 5), x * 3,
                                                                  "amin", include_self=False), x2),
    Case("scatter_reduce_mean", lambda x: x.scatter_reduce(1, torch.tensor([[0, 0, 1, 5, 5, 5]] * 5), x * 3, "mean"),
         x2),
    Case("scatter_reduce_prod_noself", lambda x: x.scatter_reduce(
        1, torch.tensor([[0, 0, 1, 5, 5, 5]] * 5), x * 3, "prod", include_self=False), x2),
    Case("scatter_reduce_inplace", lambda x: (x * 1).scatter_reduce_(0, torch.tensor([[4, 4, 0, 0, 1, 1]] * 5), x,
                                                                    "sum"), x2, targets=[T + "scatter_reduce_"]),
    Case("masked_scatter", lambda x: torch.masked_scatter(x, x > 0, x * 10), x2, targets=["torch.masked_scatter"]),
    Case("masked_scatter_method", lambda x, y: x.masked_scatter(x[0] > 0, y), lambda: [randn(5, 6), randn(40)],
         targets=[T + "masked_scatter"]),
    Case("masked_scatter_inplace", lambda x: (x * 1).masked_scatter_(x < 0, -x.flip(0)), x2,
         targets=[T + "masked_scatter_"]),
    # ------------------------------------------------------------------------ sorting
    Case("topk", lambda x: torch.topk(x, 3), x3, targets=["torch.topk"]),
    Case("topk_dim_smallest", lambda x: x.topk(2, dim=0, largest=False), x3, targets=[T + "topk"]),
    Case("topk_int", lambda x: x.topk(2), lambda: [torch.randperm(24).reshape(4, 6).int()]),
    Case("topk_first_dim_rank5", lambda x: x.topk(2, 0), lambda: [randn(4, 2, 2, 2, 3)]),
    # TensorRT's top-k needs 2 dims: a 1D input runs as [1, N]
    Case("topk_1d", lambda x: x.topk(3, largest=False), lambda: [randn(7)]),
    Case("sort_1d", lambda x: x.sort(descending=True), lambda: [randn(6)]),
    Case("max_dim_1d", lambda x: x.max(0), lambda: [randn(6)]),
    Case("argmin_1d_keepdim", lambda x: x.argmin(0, keepdim=True), lambda: [randn(6)]),
    Case("sort", lambda x: torch.sort(x), x3, targets=["torch.sort"]),
    # sorted along the dynamic batch dim: repeated rows would tie, and tied indices have no defined order
    Case("sort_desc_dim", lambda x: x.sort(0, True), x3, targets=[T + "sort"], extra={"distinct_rows": True}),
    Case("sort_kw", lambda x: x.sort(dim=1, descending=True, stable=True), x3),
    Case("argsort", lambda x: torch.argsort(x, 1), x3, targets=["torch.argsort"]),
    Case("argsort_desc", lambda x: x.argsort(descending=True), x3, targets=[T + "argsort"]),
    Case("one_hot", lambda x: F.one_hot(x, 7), lambda: [torch.tensor([[0, 3], [6, 1]])],
         targets=["torch.nn.functional.one_hot"]),
    Case("one_hot_traced", lambda x: F.one_hot(x.argmax(-1), 6).float() * x, x2),
    Case("one_hot_no_classes", lambda x: F.one_hot(x), lambda: [torch.tensor([0, 3])],
         xfail="one_hot without num_classes is data dependent"),
]
