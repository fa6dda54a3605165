"""Harness cases: linear, matmul (every rank combination), mm, bmm, addmm, baddbmm, einsum, outer, bilinear."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.converters.harness import Case, randn

W = randn(5, 4, seed=1)
B = randn(5, seed=2)
_TOL = {"rtol": 1e-5, "atol": 2e-5}  # sums of products: summation order differs from torch's kernels


def _pair(a: tuple[int, ...], b: tuple[int, ...]):  # type: ignore[no-untyped-def]
    return lambda: [randn(*a, seed=1), randn(*b, seed=2)]


MATMUL_SHAPES = {
    "1d_1d": ((4,), (4,)),
    "2d_1d": ((3, 4), (4,)),
    "1d_2d": ((4,), (4, 5)),
    "3d_1d": ((2, 3, 4), (4,)),
    "1d_3d": ((4,), (2, 4, 5)),
    "2d_2d": ((3, 4), (4, 5)),
    "3d_2d": ((2, 3, 4), (4, 5)),
    "2d_4d": ((3, 4), (2, 3, 4, 5)),
    "4d_3d_bcast": ((2, 1, 3, 4), (3, 4, 5)),
}

MATMUL = [
    Case(f"matmul_{k}", torch.matmul, _pair(a, b), targets=["torch.matmul"] if k == "2d_2d" else (), **_TOL)
    for k, (a, b) in MATMUL_SHAPES.items()
] + [
    Case("matmul_method", lambda a, b: a.matmul(b), _pair((2, 3, 4), (2, 4, 5)), targets=["torch.Tensor.matmul"],
         **_TOL),
    Case("matmul_operator", lambda a, b: a @ b, _pair((3, 4), (4,)), targets=["torch.Tensor.__matmul__"], **_TOL),
    Case("matmul_rmatmul_const", lambda a: a.__rmatmul__(W), lambda: [randn(4, 3)], targets=["torch.Tensor.__rmatmul__"],
         **_TOL),
    Case("matmul_const_right", lambda a: a @ W.t(), lambda: [randn(2, 3, 4)], **_TOL),
    Case("mm", torch.mm, _pair((3, 4), (4, 5)), targets=["torch.mm"], **_TOL),
    Case("mm_method", lambda a, b: a.mm(b), _pair((3, 4), (4, 5)), targets=["torch.Tensor.mm"], **_TOL),
    Case("bmm", torch.bmm, _pair((2, 3, 4), (2, 4, 5)), targets=["torch.bmm"], **_TOL),
    Case("bmm_method", lambda a, b: a.bmm(b), _pair((2, 3, 4), (2, 4, 5)), targets=["torch.Tensor.bmm"], **_TOL),
    Case("addmm", lambda c, a, b: torch.addmm(c, a, b), lambda: [randn(3, 5), *_pair((3, 4), (4, 5))()],
         targets=["torch.addmm"], **_TOL),
    Case("addmm_alpha_beta_bcast", lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0),
         lambda: [randn(5), *_pair((3, 4), (4, 5))()], **_TOL),
    Case("addmm_beta0", lambda c, a, b: torch.addmm(c, a, b, beta=0), lambda: [randn(3, 5), *_pair((3, 4), (4, 5))()],
         **_TOL),
    Case("addmm_method", lambda c, a, b: c.addmm(a, b, alpha=-1.0), lambda: [randn(3, 5), *_pair((3, 4), (4, 5))()],
         targets=["torch.Tensor.addmm"], **_TOL),
    Case("baddbmm", lambda c, a, b: torch.baddbmm(c, a, b, beta=2.0), lambda: [randn(2, 3, 5),
                                                                              *_pair((2, 3, 4), (2, 4, 5))()],
         targets=["torch.baddbmm"], **_TOL),
    Case("baddbmm_method", lambda c, a, b: c.baddbmm(a, b), lambda: [randn(1, 3, 5), *_pair((2, 3, 4), (2, 4, 5))()],
         targets=["torch.Tensor.baddbmm"], **_TOL),
    Case("linear", lambda x: F.linear(x, W, B), lambda: [randn(2, 3, 4)], targets=["torch.nn.functional.linear"],
         **_TOL),
    Case("linear_no_bias_1d", lambda x: F.linear(x, W), lambda: [randn(4)], **_TOL),
    Case("linear_module", lambda: nn.Linear(4, 6), lambda: [randn(3, 4)], is_module=True, **_TOL),
    Case("linear_module_4d", lambda: nn.Linear(4, 2), lambda: [randn(2, 3, 2, 4)], is_module=True, **_TOL),
    Case("linear_traced_weight", lambda x, w: F.linear(x, w), _pair((3, 4), (5, 4)), **_TOL),
    Case("einsum_matmul", lambda a, b: torch.einsum("ij,jk->ik", a, b), _pair((3, 4), (4, 5)),
         targets=["torch.functional.einsum"], **_TOL),
    Case("einsum_implicit_batch", lambda a, b: torch.einsum("bij,bjk", a, b), _pair((2, 3, 4), (2, 4, 5)), **_TOL),
    Case("einsum_list_upper", lambda a, b: torch.einsum("bIJ,bJK->bKI", [a, b]), _pair((2, 3, 4), (2, 4, 5)),
         **_TOL),
    Case("einsum_ellipsis", lambda a, b: torch.einsum("...ij,...jk->...ik", a, b), _pair((2, 3, 4), (4, 5)),
         **_TOL),
    Case("einsum_attention_scores", lambda a, b: torch.einsum("bhqd,bhkd->bhqk", a, b),
         _pair((2, 2, 3, 4), (2, 2, 5, 4)), **_TOL),
    Case("einsum_single_transpose_sum", lambda a: torch.einsum("ijk->ki", a), lambda: [randn(2, 3, 4)], **_TOL),
    Case("outer", torch.outer, _pair((3,), (4,)), targets=["torch.outer"]),
    Case("outer_method", lambda a, b: a.outer(b), _pair((3,), (4,)), targets=["torch.Tensor.outer"]),
    Case("ger", torch.ger, _pair((3,), (4,)), targets=["torch.ger"]),
    Case("ger_method", lambda a, b: a.ger(b), _pair((3,), (4,)), targets=["torch.Tensor.ger"]),
    Case("bilinear", lambda a, b: F.bilinear(a, b, randn(3, 4, 5, seed=7), randn(3, seed=8)),
         _pair((2, 4), (2, 5)), targets=["torch.bilinear"], **_TOL),
    Case("bilinear_module_3d", lambda: nn.Bilinear(4, 5, 3), _pair((2, 6, 4), (2, 6, 5)), is_module=True, **_TOL),
]

CASES = MATMUL
