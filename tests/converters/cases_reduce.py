"""Harness cases: reductions (keepdim, negative and multiple dims), arg/top-k style reductions, statistics."""

from __future__ import annotations

import torch

from tests.converters.harness import Case, randn

T = "torch.Tensor."


def x3() -> list[torch.Tensor]:
    return [randn(2, 3, 4)]


def x4() -> list[torch.Tensor]:
    return [randn(2, 3, 4, 5)]


def ints() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randint(-5, 6, (3, 4), generator=g).to(torch.int32)]


def bools() -> list[torch.Tensor]:
    return [randn(3, 4) > -0.5]


def rows_all_or_not() -> list[torch.Tensor]:  # row 0 all True, rows 1 and 2 not: all(1) and prod vary
    return [torch.tensor([[True, True, True, True], [True, False, True, True], [False, True, True, True]])]


def a_column_all_false() -> list[torch.Tensor]:  # any(0) is False in column 1
    return [torch.tensor([[True, False, True, False], [False, False, True, True], [True, False, False, False]])]


def sparse_ints() -> list[torch.Tensor]:  # a zero row, one nonzero, two nonzeros: any / count_nonzero vary
    return [torch.tensor([[0, 0, 0, 0], [0, 3, 0, 0], [-2, 0, 0, 1]], dtype=torch.int32)]


CASES = [
    # --------------------------------------------------------------------------- sum / mean
    Case("sum_all", torch.sum, x3, targets=["torch.sum"]),
    Case("sum_dim", lambda x: x.sum(1), x3, targets=[T + "sum"]),
    Case("sum_dims_keep", lambda x: x.sum((0, -1), keepdim=True), x3),
    Case("sum_neg_dim", lambda x: torch.sum(x, dim=-2), x3),
    Case("sum_dtype", lambda x: x.sum(1, dtype=torch.float16), x3, rtol=1e-3, atol=1e-3),
    Case("sum_int", lambda x: x.sum(0), ints),
    Case("sum_bool", lambda x: x.sum(), bools),
    Case("sum_bool_dim", lambda x: (x > 0).sum(-1), x3),
    Case("mean_all", torch.mean, x3, targets=["torch.mean"]),
    Case("mean_dims", lambda x: x.mean((2, 3)), x4, targets=[T + "mean"]),
    Case("mean_keep", lambda x: x.mean(dim=[-1, -2], keepdim=True), x4),
    Case("mean_int_dtype", lambda x: x.mean(dtype=torch.float32), ints),
    Case("nansum", lambda x: torch.nansum(torch.where(x > 1, float("nan"), x), 1), x3, targets=["torch.nansum"]),
    Case("nansum_method", lambda x: x.nansum(), x3, targets=[T + "nansum"]),
    Case("nanmean", lambda x: torch.nanmean(torch.where(x > 1, float("nan"), x), -1), x3, targets=["torch.nanmean"]),
    Case("nanmean_method", lambda x: x.nanmean((0, 1), keepdim=True), x3, targets=[T + "nanmean"]),
    Case("prod_all", torch.prod, x3, targets=["torch.prod"]),
    Case("prod_dim", lambda x: x.prod(1, keepdim=True), x3, targets=[T + "prod"]),
    Case("prod_int", lambda x: x.prod(-1), ints),
    Case("prod_bool", lambda x: x.prod(-1), rows_all_or_not),
    # dtype= converts the input like torch (float -> integer truncates) before reducing
    Case("sum_float_to_int_dtype", lambda x: torch.sum(x * 3, 1, dtype=torch.int64), x3),
    Case("prod_float_to_int_dtype", lambda x: torch.prod(x * 3, -1, dtype=torch.int32), x3),
    Case("cumsum_float_to_int_dtype", lambda x: torch.cumsum(x * 3, 2, dtype=torch.int64), x3),
    # fp16: squares of |x| > 256 overflow half; torch accumulates in fp32
    Case("var_half_large", lambda x: torch.var((x * 300).half(), -1), x3, rtol=1e-2, atol=1e-2),
    Case("norm_half_large", lambda x: torch.linalg.vector_norm((x * 300).half(), 3, -1), x3, rtol=1e-2, atol=1e-2),
    Case("amax", lambda x: torch.amax(x, (0, 2)), x3, targets=["torch.amax"]),
    Case("amax_all", lambda x: x.amax(), x3, targets=[T + "amax"]),
    Case("amin", lambda x: torch.amin(x, -1, keepdim=True), x3, targets=["torch.amin"]),
    Case("amin_method", lambda x: x.amin(1), ints, targets=[T + "amin"]),
    # --------------------------------------------------------------------------- max / min
    Case("max_all", torch.max, x3, targets=["torch.max"]),
    Case("max_dim", lambda x: torch.max(x, 1), x3),
    Case("max_dim_keep", lambda x: x.max(dim=-1, keepdim=True), x3, targets=[T + "max"]),
    Case("max_dim_values", lambda x: x.max(0)[0] + x.max(0).values, x3),
    Case("max_dim_indices", lambda x: x.max(2).indices, x3),
    Case("max_binary", lambda x, y: torch.max(x, y), lambda: [randn(3, 4), randn(4, seed=1)]),
    Case("max_int", lambda x: x.max(1), lambda: [torch.randperm(12).reshape(3, 4).int()]),
    Case("max_rank5", lambda x: x.max(0), lambda: [randn(3, 2, 2, 2, 2)]),
    Case("min_all", lambda x: x.min(), x3, targets=[T + "min"]),
    Case("min_dim", lambda x: torch.min(x, 0, True), x3, targets=["torch.min"]),
    Case("min_binary", lambda x, y: x.min(y), lambda: [randn(3, 4), randn(3, 1, seed=1)]),
    Case("aminmax", lambda x: torch.aminmax(x), x3, targets=["torch.aminmax"]),
    Case("aminmax_dim", lambda x: x.aminmax(dim=1, keepdim=True), x3, targets=[T + "aminmax"]),
    Case("argmax", lambda x: torch.argmax(x), x3, targets=["torch.argmax"]),
    Case("argmax_dim", lambda x: x.argmax(-1), x3, targets=[T + "argmax"]),
    Case("argmax_keep", lambda x: x.argmax(1, keepdim=True), x3),
    Case("argmin", lambda x: torch.argmin(x, 0), x3, targets=["torch.argmin"]),
    Case("argmin_all_keep", lambda x: x.argmin(keepdim=True), x3, targets=[T + "argmin"]),
    # ------------------------------------------------------------------------- statistics
    Case("var", torch.var, x3, targets=["torch.var"]),
    Case("var_dim", lambda x: x.var(1), x3, targets=[T + "var"]),
    Case("var_correction", lambda x: torch.var(x, dim=(0, 2), correction=0, keepdim=True), x3),
    Case("var_unbiased_false", lambda x: x.var(-1, False, True), x3),
    Case("var_unbiased_pos", lambda x: torch.var(x, False), x3),
    Case("std", torch.std, x3, targets=["torch.std"]),
    Case("std_dim", lambda x: x.std(dim=-1, keepdim=True), x3, targets=[T + "std"]),
    Case("std_correction2", lambda x: x.std(1, correction=2), x3),
    Case("var_mean", lambda x: torch.var_mean(x, 1), x3, targets=["torch.var_mean"]),
    Case("std_mean", lambda x: torch.std_mean(x, dim=(1, 2), unbiased=False), x3, targets=["torch.std_mean"]),
    Case("norm", torch.norm, x3, targets=["torch.norm"]),
    Case("norm_p1_dim", lambda x: torch.norm(x, 1, -1), x3),
    Case("norm_method", lambda x: x.norm(dim=1, keepdim=True), x3, targets=[T + "norm"]),
    Case("norm_inf", lambda x: x.norm(float("inf"), dim=(0, 1)), x3),
    Case("norm_p3", lambda x: x.norm(3, dim=2), x3),
    Case("vector_norm", lambda x: torch.linalg.vector_norm(x), x3, targets=["torch.linalg.vector_norm"]),
    Case("vector_norm_ord", lambda x: torch.linalg.vector_norm(x, ord=1, dim=(-1, -2), keepdim=True), x3),
    Case("vector_norm_0", lambda x: torch.linalg.vector_norm(x.round(), 0, -1), x3),
    Case("vector_norm_neg_inf", lambda x: torch.linalg.vector_norm(x, float("-inf"), 1), x3),
    Case("linalg_norm", lambda x: torch.linalg.norm(x, dim=-1), x3, targets=["torch.linalg.norm"]),
    Case("linalg_norm_fro", lambda x: torch.linalg.norm(x, "fro"), lambda: [randn(3, 4)]),
    Case("linalg_norm_nuc", lambda x: torch.linalg.norm(x, "nuc"), lambda: [randn(3, 4)],
         xfail="matrix nuclear norm is not supported"),
    Case("logsumexp", lambda x: torch.logsumexp(x, 1), x3, targets=["torch.logsumexp"]),
    Case("logsumexp_method", lambda x: (x * 30).logsumexp((0, 2), keepdim=True), x3, targets=[T + "logsumexp"],
         rtol=1e-5, atol=1e-4),
    Case("logsumexp_special", lambda x: torch.special.logsumexp(x, -1), x3, targets=["torch.special.logsumexp"]),
    Case("logsumexp_neg_inf", lambda x: torch.logsumexp(x.masked_fill(x[:, :1] > 0, float("-inf")), -1), x3),
    # ----------------------------------------------------------------------------- logic
    Case("all", torch.all, bools, targets=["torch.all"]),
    Case("all_dim", lambda x: x.all(1), rows_all_or_not, targets=[T + "all"]),
    Case("all_float", lambda x: (x * 3).round().all(-1, keepdim=True), x3),
    Case("any", lambda x: torch.any(x > 1.5), x3, targets=["torch.any"]),
    Case("any_dim", lambda x: x.any(0), a_column_all_false, targets=[T + "any"]),
    Case("any_int", lambda x: x.any(1), sparse_ints),
    Case("count_nonzero", lambda x: torch.count_nonzero(x.round()), x3, targets=["torch.count_nonzero"]),
    Case("count_nonzero_dim", lambda x: x.count_nonzero(1), sparse_ints, targets=[T + "count_nonzero"]),
    Case("count_nonzero_dims", lambda x: x.round().count_nonzero((0, 2)), x3),
    # ------------------------------------------------------------------------ cumulative
    Case("cumsum", lambda x: torch.cumsum(x, 1), x3, targets=["torch.cumsum"]),
    Case("cumsum_neg", lambda x: x.cumsum(-1), x3, targets=[T + "cumsum"]),
    Case("cumsum_int", lambda x: x.cumsum(1), ints),
    Case("cumsum_bool", lambda x: x.cumsum(0), bools),
    Case("cumsum_dtype", lambda x: x.cumsum(0, dtype=torch.float32), ints),
    Case("cumsum_inplace", lambda x: (x * 1).cumsum_(0), x3, targets=[T + "cumsum_"]),
    Case("cumprod", lambda x: torch.cumprod(x, 1), x3, targets=["torch.cumprod"]),
    Case("cumprod_zero", lambda x: x.cumprod(-1), lambda: [torch.tensor([[1.5, -2.0, 0.0, 3.0], [-1.0, -1.0, 2.0, 0.5]])],
         targets=[T + "cumprod"]),
    Case("cumprod_int", lambda x: x.cumprod(1), ints),
    Case("cumprod_inplace", lambda x: (x * 1).cumprod_(2), x3, targets=[T + "cumprod_"]),
]


def _ties_nan() -> list[torch.Tensor]:  # ties (torch: the last index wins) and NaNs (the last NaN wins)
    n = float("nan")
    return [torch.tensor([[1.0, 3, 3, n, 2, n, 5, 5], [0, 0, -1, -1, 2, 2, 1, 1], [4, 3, 3, 4, -2, 4, 0, 6]])]


def _small_ints() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, 4, (3, 9), generator=g)]


_HALF = {"rtol": 1e-3, "atol": 1e-3}

# cummax / cummin (values and int64 indices) and isin
CASES += [
    Case("cummax", lambda x: torch.cummax(x, 1), _ties_nan, targets=["torch.cummax"]),
    Case("cummin_method_neg_dim", lambda x: x.cummin(-1), _ties_nan, targets=[T + "cummin"]),
    Case("cummax_method_dim0", lambda x: x.cummax(0), _small_ints, targets=[T + "cummax"]),
    Case("cummin_int_dim1", lambda x: torch.cummin(x, 1), _small_ints, targets=["torch.cummin"]),
    Case("cummax_bool", lambda x: torch.cummax(x > 1, 1), _small_ints),
    Case("cummax_3d_middle", lambda x: torch.cummax(x, 1), lambda: [randn(2, 6, 3)]),
    Case("cummin_long_axis", lambda x: torch.cummin(x, -1), lambda: [randn(2, 37)]),
    Case("cummax_half", lambda x: torch.cummax(x, -1), lambda: [randn(3, 7, dtype=torch.float16)], **_HALF),
    Case("isin_constant_set", lambda x: torch.isin(x, torch.tensor([1, 3, 5])), lambda: [torch.randint(
        0, 8, (3, 5), generator=torch.Generator().manual_seed(2))], targets=["torch.isin"]),
    Case("isin_traced_set_invert", lambda x, t: torch.isin(x, t, invert=True), lambda: [
        torch.randint(0, 8, (3, 5), generator=torch.Generator().manual_seed(2)), torch.tensor([[1, 3], [6, 6]])]),
    Case("isin_float_scalar_nan", lambda x: torch.isin(x, 2.0), lambda: [torch.tensor([[1.0, 2.0, float("nan")],
                                                                                       [2.0, 0.0, 2.0]])]),
    Case("isin_float_elements_int_set", lambda x: torch.isin(x.round(), torch.tensor([0, 1])), lambda: [randn(4, 5)]),
    Case("isin_empty_set", lambda x: torch.isin(x, torch.tensor([], dtype=torch.int64)), _small_ints,
         constant="nothing is in an empty set: all False"),
    Case("isin_half", lambda x: torch.isin(x.round(), torch.tensor([0.0, 1.0], dtype=torch.float16)),
         lambda: [randn(4, 5, dtype=torch.float16)]),
]
