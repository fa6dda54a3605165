"""Harness cases: binary elementwise ops (arithmetic, comparison, logical, bitwise, where/clamp, ...)."""

from __future__ import annotations

from typing import Any

import torch

from tests.converters.harness import Case, randn

T = "torch.Tensor."


def pos(*shape: int, seed: int = 0) -> torch.Tensor:
    """Values away from zero (safe denominators), both signs."""
    x = randn(*shape, seed=seed)
    return x.sign() * (x.abs() + 0.5)


def ints(*shape: int, lo: int = -20, hi: int = 20, seed: int = 0, dtype: torch.dtype = torch.int32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def nz_ints(*shape: int, seed: int = 0, dtype: torch.dtype = torch.int32) -> torch.Tensor:
    x = ints(*shape, lo=1, hi=9, seed=seed, dtype=dtype)
    return torch.where(ints(*shape, lo=0, hi=2, seed=seed + 7, dtype=dtype) > 0, x, -x)


def xy() -> list[torch.Tensor]:
    return [randn(2, 3, 4), randn(2, 3, 4, seed=1)]


def xb() -> list[torch.Tensor]:
    """Broadcasting pair: (2, 3, 4) with (3, 1)."""
    return [randn(2, 3, 4), randn(3, 1, seed=1)]


def xd() -> list[torch.Tensor]:
    return [randn(2, 3, 4), pos(2, 3, 4, seed=1)]


def x1() -> list[torch.Tensor]:
    return [randn(2, 3, 4)]


def inplace(fn: Any) -> Any:
    """Apply an in-place op to a copy made inside the network (inputs stay untouched)."""
    return lambda x, *r: fn(x * 1, *r)


def _iadd(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x = x * 1
    x += y
    return x


def _isub(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x = x * 1
    x -= y
    return x


def _imul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x = x * 1
    x *= y
    return x


def _idiv(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x = x * 1
    x /= y
    return x


def _ifloordiv(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x = x * 1
    x //= y
    return x


def _imod(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x = x * 1
    x %= y
    return x


def _ipow(x: torch.Tensor) -> torch.Tensor:
    x = x.abs() + 1
    x **= 1.5
    return x


def _iand(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x = x | y
    x &= y  # (x | y) & y == y; a no-op &= would leave x | y
    return x


def _ior(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x = x & y
    x |= y  # (x & y) | y == y; a no-op |= would leave x & y
    return x


def _ixor(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x = x ^ y
    x ^= y
    return x


def _ilshift(x: torch.Tensor) -> torch.Tensor:
    x = x * 1
    x <<= 2
    return x


def _irshift(x: torch.Tensor) -> torch.Tensor:
    x = x * 1
    x >>= 1
    return x


def bools() -> list[torch.Tensor]:
    return [randn(2, 3, 4) > 0, randn(2, 3, 4, seed=1) > 0]


def ipair() -> list[torch.Tensor]:
    return [ints(2, 3, 4), ints(2, 3, 4, seed=1)]


def rounded_pair() -> list[torch.Tensor]:  # equal pairs and zeros occur (comparisons, logical ops)
    return [randn(2, 3, 4).round(), randn(2, 3, 4, seed=1).round()]


def small_ipair() -> list[torch.Tensor]:  # -1, 0, 1: both-zero pairs occur
    return [ints(2, 3, 4, lo=-1, hi=2), ints(2, 3, 4, lo=-1, hi=2, seed=1)]


def i64pair() -> list[torch.Tensor]:
    return [ints(2, 3, 4, dtype=torch.int64, lo=-1000, hi=1000), ints(2, 3, 4, seed=1, dtype=torch.int64)]


CASES = [
    # ------------------------------------------------------------------------------ add
    Case("add_fn", torch.add, xy, targets=["torch.add"]),
    Case("add_alpha", lambda x, y: torch.add(x, y, alpha=2.5), xy),
    Case("add_op", lambda x, y: x + y, xy, targets=[T + "__add__"]),
    Case("add_broadcast", lambda x, y: x + y, xb),
    Case("add_scalar", lambda x: x + 2, x1),
    Case("add_rscalar", lambda x: 2.5 + x, x1, targets=[T + "__radd__"]),
    Case("add_method", lambda x, y: x.add(y, alpha=-1), xy, targets=[T + "add"]),
    Case("add_inplace", inplace(lambda x, y: x.add_(y)), xy, targets=[T + "add_"]),
    Case("add_iadd", _iadd, xb, targets=[T + "__iadd__"]),
    Case("add_int_float_promote", lambda x, y: x + y, lambda: [ints(2, 3), randn(2, 3)]),
    Case("add_int_scalar", lambda x: x + 3, lambda: [ints(2, 3)]),
    Case("add_int_float_scalar", lambda x: x + 0.5, lambda: [ints(2, 3)]),
    Case("add_bool", lambda x, y: x + y, bools),
    Case("add_fp16", lambda x, y: x + y, lambda: [randn(4, 5, dtype=torch.float16), randn(5, dtype=torch.float16)],
         rtol=1e-3, atol=1e-3),
    Case("add_fp16_fp32_promote", lambda x, y: x + y, lambda: [randn(4, 5, dtype=torch.float16), randn(5)],
         rtol=1e-3, atol=1e-3),
    Case("add_buffer", lambda x: x + torch.arange(4.0), x1),
    # ------------------------------------------------------------------------------ sub
    Case("sub_fn", torch.sub, xy, targets=["torch.sub"]),
    Case("sub_subtract", lambda x, y: torch.subtract(x, y, alpha=3), xy, targets=["torch.subtract"]),
    Case("sub_op", lambda x, y: x - y, xb, targets=[T + "__sub__"]),
    Case("sub_rscalar", lambda x: 2 - x, x1, targets=[T + "__rsub__"]),
    Case("sub_rsub_fn", lambda x, y: torch.rsub(x, y, alpha=2), xy, targets=["torch.rsub"]),
    Case("sub_method", lambda x, y: x.sub(y), xy, targets=[T + "sub"]),
    Case("sub_method_subtract", lambda x, y: x.subtract(y), xy, targets=[T + "subtract"]),
    Case("sub_inplace", inplace(lambda x, y: x.sub_(y)), xy, targets=[T + "sub_"]),
    Case("sub_inplace_subtract", inplace(lambda x, y: x.subtract_(y)), xy, targets=[T + "subtract_"]),
    Case("sub_isub", _isub, xy, targets=[T + "__isub__"]),
    # ------------------------------------------------------------------------------ mul
    Case("mul_fn", torch.mul, xb, targets=["torch.mul"]),
    Case("mul_multiply", torch.multiply, xy, targets=["torch.multiply"]),
    Case("mul_op", lambda x, y: x * y, xy, targets=[T + "__mul__"]),
    Case("mul_rscalar", lambda x: 3 * x, x1, targets=[T + "__rmul__"]),
    Case("mul_method", lambda x, y: x.mul(y), xy, targets=[T + "mul"]),
    Case("mul_method_multiply", lambda x, y: x.multiply(y), xy, targets=[T + "multiply"]),
    Case("mul_inplace", inplace(lambda x, y: x.mul_(y)), xy, targets=[T + "mul_"]),
    Case("mul_inplace_multiply", inplace(lambda x, y: x.multiply_(y)), xy, targets=[T + "multiply_"]),
    Case("mul_imul", _imul, xb, targets=[T + "__imul__"]),
    Case("mul_bool", lambda x, y: x * y, bools),
    Case("mul_int", lambda x, y: x * y, ipair),
    # ------------------------------------------------------------------------------ div
    Case("div_fn", torch.div, xd, targets=["torch.div"]),
    Case("div_divide", torch.divide, xd, targets=["torch.divide"]),
    Case("div_true_divide", torch.true_divide, xd, targets=["torch.true_divide"]),
    Case("div_op", lambda x, y: x / y, xd, targets=[T + "__truediv__"]),
    Case("div_rscalar", lambda x, y: 2 / y, xd, targets=[T + "__rtruediv__"]),
    Case("div_method", lambda x, y: x.div(y), xd, targets=[T + "div"]),
    Case("div_method_divide", lambda x, y: x.divide(y), xd, targets=[T + "divide"]),
    Case("div_method_true_divide", lambda x, y: x.true_divide(y), xd, targets=[T + "true_divide"]),
    Case("div_inplace", inplace(lambda x, y: x.div_(y)), xd, targets=[T + "div_"]),
    Case("div_inplace_divide", inplace(lambda x, y: x.divide_(y)), xd, targets=[T + "divide_"]),
    Case("div_inplace_true_divide", inplace(lambda x, y: x.true_divide_(y)), xd, targets=[T + "true_divide_"]),
    Case("div_itruediv", _idiv, xd, targets=[T + "__itruediv__"]),
    Case("div_int_true", lambda x, y: x / y, lambda: [ints(3, 4), nz_ints(3, 4, seed=1)]),
    Case("div_floor_float", lambda x, y: torch.div(x * 4, y, rounding_mode="floor"), xd),
    Case("div_trunc_float", lambda x, y: torch.div(x * 4, y, rounding_mode="trunc"), xd),
    Case("div_floor_int", lambda x, y: torch.div(x, y, rounding_mode="floor"), lambda: [ints(3, 4), nz_ints(3, 4)]),
    Case("div_trunc_int", lambda x, y: torch.div(x, y, rounding_mode="trunc"), lambda: [ints(3, 4), nz_ints(3, 4)]),
    Case("div_scalar", lambda x: x / 3, x1),
    # ----------------------------------------------------------------------- floor div / mod
    Case("floordiv_fn", lambda x, y: torch.floor_divide(x * 4, y), xd, targets=["torch.floor_divide"]),
    Case("floordiv_method", lambda x, y: (x * 4).floor_divide(y), xd, targets=[T + "floor_divide"]),
    Case("floordiv_inplace", inplace(lambda x, y: x.floor_divide_(y)), xd, targets=[T + "floor_divide_"]),
    Case("floordiv_op_int", lambda x, y: x // y, lambda: [ints(3, 4), nz_ints(3, 4, seed=1)],
         targets=[T + "__floordiv__"]),
    Case("floordiv_rscalar", lambda x: 7 // x, lambda: [nz_ints(3, 4)], targets=[T + "__rfloordiv__"]),
    Case("floordiv_ifloordiv", _ifloordiv, lambda: [ints(3, 4), nz_ints(3, 4, seed=1)], targets=[T + "__ifloordiv__"]),
    Case("remainder_fn", lambda x, y: torch.remainder(x * 4, y), xd, targets=["torch.remainder"], atol=1e-4),
    Case("remainder_method", lambda x, y: x.remainder(y), lambda: [ints(3, 4), nz_ints(3, 4, seed=1)],
         targets=[T + "remainder"]),
    Case("remainder_inplace", inplace(lambda x, y: x.remainder_(y)), lambda: [ints(3, 4), nz_ints(3, 4)],
         targets=[T + "remainder_"]),
    Case("remainder_op", lambda x: x % 3, lambda: [ints(3, 4)], targets=[T + "__mod__"]),
    Case("remainder_rscalar", lambda x: 7 % x, lambda: [nz_ints(3, 4)], targets=[T + "__rmod__"]),
    Case("remainder_imod", _imod, lambda: [ints(3, 4), nz_ints(3, 4, seed=1)], targets=[T + "__imod__"]),
    Case("fmod_fn", lambda x, y: torch.fmod(x * 4, y), xd, targets=["torch.fmod"], atol=1e-4),
    Case("fmod_method_int", lambda x, y: x.fmod(y), lambda: [ints(3, 4), nz_ints(3, 4, seed=1)],
         targets=[T + "fmod"]),
    Case("fmod_inplace", inplace(lambda x: x.fmod_(-3)), lambda: [ints(3, 4)], targets=[T + "fmod_"]),
    # ------------------------------------------------------------------------------ pow
    Case("pow_fn_tensor", lambda x, y: torch.pow(x.abs() + 0.1, y), xy, targets=["torch.pow"], rtol=1e-4),
    Case("pow_scalar_base", lambda x: torch.pow(2.0, x), x1, rtol=1e-5),
    Case("pow_method", lambda x: x.pow(3), x1, targets=[T + "pow"]),
    Case("pow_op_square", lambda x: x**2, x1, targets=[T + "__pow__"]),
    Case("pow_op_sqrt", lambda x: x.abs() ** 0.5, x1),
    Case("pow_op_frac", lambda x: (x.abs() + 1) ** 1.7, x1),
    Case("pow_rscalar", lambda x: 3**x, x1, targets=[T + "__rpow__"], rtol=1e-5),
    Case("pow_inplace", inplace(lambda x: x.pow_(2)), x1, targets=[T + "pow_"]),
    Case("pow_ipow", _ipow, x1, targets=[T + "__ipow__"]),
    Case("pow_int", lambda x: x**2, lambda: [ints(3, 4)]),
    # ------------------------------------------------------------------------- max / min
    Case("maximum_fn", torch.maximum, xb, targets=["torch.maximum"]),
    Case("maximum_method", lambda x, y: x.maximum(y), xy, targets=[T + "maximum"]),
    Case("minimum_fn", torch.minimum, xb, targets=["torch.minimum"]),
    Case("minimum_method", lambda x, y: x.minimum(y), ipair, targets=[T + "minimum"]),
    Case("atan2_fn", torch.atan2, lambda: [randn(4, 5), torch.tensor([0.0, 1.0, -1.0, 0.5, -2.0])],
         targets=["torch.atan2"]),
    Case("atan2_zero", torch.atan2, lambda: [torch.tensor([0.0, 1.0, -1.0, 0.0]), torch.tensor([0.0, 0.0, 0.0, -1.0])]),
    Case("atan2_arctan2", torch.arctan2, xy, targets=["torch.arctan2"]),
    Case("atan2_method", lambda x, y: x.atan2(y), xy, targets=[T + "atan2"]),
    Case("atan2_method_arctan2", lambda x, y: x.arctan2(y), xy, targets=[T + "arctan2"]),
    Case("atan2_inplace", inplace(lambda x, y: x.atan2_(y)), xy, targets=[T + "atan2_"]),
    Case("atan2_inplace_arctan2", inplace(lambda x, y: x.arctan2_(y)), xy, targets=[T + "arctan2_"]),
    # ----------------------------------------------------------------------- comparisons
    Case("eq_fn", lambda x, y: torch.eq(x.round(), y.round()), xy, targets=["torch.eq"]),
    Case("eq_op", lambda x: x == 1, lambda: [ints(3, 4, lo=0, hi=3)], targets=[T + "__eq__"]),
    Case("eq_method", lambda x, y: x.eq(y), lambda: [ints(3, 4, lo=0, hi=3), ints(4, lo=0, hi=3)], targets=[T + "eq"]),
    Case("eq_inplace", inplace(lambda x, y: x.eq_(y)), lambda: [ints(3, 4, lo=0, hi=3), ints(4, lo=0, hi=3)],
         targets=[T + "eq_"]),
    Case("eq_bool", lambda x, y: x == y, bools),
    Case("ne_fn", lambda x, y: torch.ne(x, y), lambda: [ints(3, 4, lo=0, hi=3), ints(4, lo=0, hi=3)],
         targets=["torch.ne"]),
    Case("ne_not_equal", torch.not_equal, lambda: [ints(3, 4, lo=0, hi=3), ints(4, lo=0, hi=3)],
         targets=["torch.not_equal"]),
    Case("ne_op", lambda x: x != 2, lambda: [ints(3, 4, lo=0, hi=3)], targets=[T + "__ne__"]),
    Case("ne_method", lambda x, y: x.ne(y), bools, targets=[T + "ne"]),
    Case("ne_method_not_equal", lambda x, y: x.not_equal(y), bools, targets=[T + "not_equal"]),
    Case("ne_inplace", inplace(lambda x, y: x.ne_(y)), rounded_pair, targets=[T + "ne_"]),
    Case("ne_inplace_not_equal", inplace(lambda x, y: x.not_equal_(y)), rounded_pair, targets=[T + "not_equal_"]),
    Case("lt_fn", torch.lt, xb, targets=["torch.lt"]),
    Case("lt_less", torch.less, xy, targets=["torch.less"]),
    Case("lt_op", lambda x: x < 0.5, x1, targets=[T + "__lt__"]),
    Case("lt_rscalar", lambda x: 0.5 < x, x1),
    Case("lt_method", lambda x, y: x.lt(y), xy, targets=[T + "lt"]),
    Case("lt_method_less", lambda x, y: x.less(y), xy, targets=[T + "less"]),
    Case("lt_inplace", inplace(lambda x, y: x.lt_(y)), xy, targets=[T + "lt_"]),
    Case("lt_inplace_less", inplace(lambda x, y: x.less_(y)), xy, targets=[T + "less_"]),
    Case("lt_bool", lambda x, y: x < y, bools),
    Case("le_fn", torch.le, lambda: [ints(3, 4, lo=0, hi=3), ints(4, lo=0, hi=3)], targets=["torch.le"]),
    Case("le_less_equal", torch.less_equal, xy, targets=["torch.less_equal"]),
    Case("le_op", lambda x: x <= 0.0, lambda: [randn(3, 4).round()], targets=[T + "__le__"]),
    Case("le_method", lambda x, y: x.le(y), xy, targets=[T + "le"]),
    Case("le_method_less_equal", lambda x, y: x.less_equal(y), xy, targets=[T + "less_equal"]),
    Case("le_inplace", inplace(lambda x, y: x.le_(y)), xy, targets=[T + "le_"]),
    Case("le_inplace_less_equal", inplace(lambda x, y: x.less_equal_(y)), xy, targets=[T + "less_equal_"]),
    Case("gt_fn", torch.gt, xb, targets=["torch.gt"]),
    Case("gt_greater", torch.greater, xy, targets=["torch.greater"]),
    Case("gt_op", lambda x: x > 0, x1, targets=[T + "__gt__"]),
    Case("gt_method", lambda x, y: x.gt(y), xy, targets=[T + "gt"]),
    Case("gt_method_greater", lambda x, y: x.greater(y), xy, targets=[T + "greater"]),
    Case("gt_inplace", inplace(lambda x, y: x.gt_(y)), xy, targets=[T + "gt_"]),
    Case("gt_inplace_greater", inplace(lambda x, y: x.greater_(y)), xy, targets=[T + "greater_"]),
    Case("ge_fn", torch.ge, lambda: [ints(3, 4, lo=0, hi=3), ints(4, lo=0, hi=3)], targets=["torch.ge"]),
    Case("ge_greater_equal", torch.greater_equal, xy, targets=["torch.greater_equal"]),
    Case("ge_op", lambda x: x >= 0.0, lambda: [randn(3, 4).round()], targets=[T + "__ge__"]),
    Case("ge_method", lambda x, y: x.ge(y), xy, targets=[T + "ge"]),
    Case("ge_method_greater_equal", lambda x, y: x.greater_equal(y), xy, targets=[T + "greater_equal"]),
    Case("ge_inplace", inplace(lambda x, y: x.ge_(y)), xy, targets=[T + "ge_"]),
    Case("ge_inplace_greater_equal", inplace(lambda x, y: x.greater_equal_(y)), xy, targets=[T + "greater_equal_"]),
    Case("cmp_int_float_scalar", lambda x: x > 1.5, lambda: [ints(3, 4)]),
    # --------------------------------------------------------------------------- logical
    Case("logical_and_fn", torch.logical_and, bools, targets=["torch.logical_and"]),
    Case("logical_and_float", torch.logical_and, lambda: [randn(3, 4).round(), randn(3, 4, seed=1).round()]),
    Case("logical_and_method", lambda x, y: x.logical_and(y), bools, targets=[T + "logical_and"]),
    Case("logical_and_inplace", lambda x, y: (x | y).logical_and_(y), bools, targets=[T + "logical_and_"]),
    Case("logical_or_fn", torch.logical_or, bools, targets=["torch.logical_or"]),
    Case("logical_or_method", lambda x, y: x.logical_or(y), small_ipair, targets=[T + "logical_or"]),
    Case("logical_or_inplace", inplace(lambda x, y: x.logical_or_(y)), rounded_pair, targets=[T + "logical_or_"]),
    Case("logical_xor_fn", torch.logical_xor, bools, targets=["torch.logical_xor"]),
    Case("logical_xor_method", lambda x, y: x.logical_xor(y), bools, targets=[T + "logical_xor"]),
    Case("logical_xor_inplace", lambda x, y: (x & y).logical_xor_(y), bools, targets=[T + "logical_xor_"]),
    # --------------------------------------------------------------------------- bitwise
    Case("bitwise_and_bool", lambda x, y: x & y, bools, targets=[T + "__and__"]),
    Case("bitwise_and_fn", torch.bitwise_and, ipair, targets=["torch.bitwise_and"]),
    Case("bitwise_and_int64", torch.bitwise_and, i64pair),
    Case("bitwise_and_method", lambda x, y: x.bitwise_and(y), bools, targets=[T + "bitwise_and"]),
    Case("bitwise_and_inplace", lambda x, y: (x | y).bitwise_and_(y), bools, targets=[T + "bitwise_and_"]),
    Case("bitwise_and_rscalar", lambda x: 6 & x, lambda: [ints(3, 4)], targets=[T + "__rand__"]),
    Case("bitwise_and_iand", _iand, bools, targets=[T + "__iand__"]),
    Case("bitwise_or_bool", lambda x, y: x | y, bools, targets=[T + "__or__"]),
    Case("bitwise_or_fn", torch.bitwise_or, ipair, targets=["torch.bitwise_or"]),
    Case("bitwise_or_method", lambda x, y: x.bitwise_or(y), i64pair, targets=[T + "bitwise_or"]),
    Case("bitwise_or_inplace", lambda x, y: (x & y).bitwise_or_(y), bools, targets=[T + "bitwise_or_"]),
    Case("bitwise_or_rscalar", lambda x: 5 | x, lambda: [ints(3, 4)], targets=[T + "__ror__"]),
    Case("bitwise_or_ior", _ior, ipair, targets=[T + "__ior__"]),
    Case("bitwise_xor_bool", lambda x, y: x ^ y, bools, targets=[T + "__xor__"]),
    Case("bitwise_xor_fn", torch.bitwise_xor, ipair, targets=["torch.bitwise_xor"]),
    Case("bitwise_xor_method", lambda x, y: x.bitwise_xor(y), i64pair, targets=[T + "bitwise_xor"]),
    Case("bitwise_xor_inplace", lambda x, y: (x & y).bitwise_xor_(y), bools, targets=[T + "bitwise_xor_"]),
    Case("bitwise_xor_rscalar", lambda x, y: True ^ x, bools, targets=[T + "__rxor__"]),
    Case("bitwise_xor_ixor", _ixor, ipair, targets=[T + "__ixor__"]),
    # ------------------------------------------------------------------- where / clamp
    Case("where_fn", lambda x, y: torch.where(x > 0, x, y), xb, targets=["torch.where"]),
    Case("where_scalar", lambda x: torch.where(x > 0, x, 0.0), x1),
    Case("where_scalars_both", lambda x: torch.where(x > 0, 1.0, -1.0), x1),
    Case("where_promote", lambda x, y: torch.where(x > 0, x, y), lambda: [randn(3, 4), ints(3, 4)]),
    Case("where_method", lambda x, y: x.where(x > 0, y), xy, targets=[T + "where"]),
    Case("clamp_fn", lambda x: torch.clamp(x, -0.5, 0.5), x1, targets=["torch.clamp"]),
    Case("clamp_min_only", lambda x: torch.clamp(x, min=0.1), x1),
    Case("clamp_max_only", lambda x: torch.clamp(x, max=0.1), x1),
    Case("clamp_tensors", lambda x, y: torch.clamp(x, y, y + 1), xb),
    Case("clamp_int", lambda x: torch.clamp(x, -3, 4), lambda: [ints(3, 4)]),
    Case("clip_fn", lambda x: torch.clip(x, -0.5, 0.5), x1, targets=["torch.clip"]),
    Case("clamp_method", lambda x: x.clamp(-0.5, 0.5), x1, targets=[T + "clamp"]),
    Case("clip_method", lambda x: x.clip(max=0.5), x1, targets=[T + "clip"]),
    Case("clamp_inplace", inplace(lambda x: x.clamp_(-0.5, 0.5)), x1, targets=[T + "clamp_"]),
    Case("clip_inplace", inplace(lambda x: x.clip_(-0.5)), x1, targets=[T + "clip_"]),
    Case("clamp_min_fn", lambda x: torch.clamp_min(x, 0.2), x1, targets=["torch.clamp_min"]),
    Case("clamp_min_method", lambda x: x.clamp_min(0.2), x1, targets=[T + "clamp_min"]),
    Case("clamp_min_inplace", inplace(lambda x: x.clamp_min_(0.2)), x1, targets=[T + "clamp_min_"]),
    Case("clamp_max_fn", lambda x: torch.clamp_max(x, 0.2), x1, targets=["torch.clamp_max"]),
    Case("clamp_max_method", lambda x: x.clamp_max(0.2), x1, targets=[T + "clamp_max"]),
    Case("clamp_max_inplace", inplace(lambda x: x.clamp_max_(0.2)), x1, targets=[T + "clamp_max_"]),
    Case("masked_fill_fn", lambda x: torch.masked_fill(x, x > 0, -1.0), x1, targets=["torch.masked_fill"]),
    Case("masked_fill_method", lambda x, y: x.masked_fill(y > 0, float("-inf")),
         lambda: [randn(2, 3, 4), randn(3, 1, seed=2)], targets=[T + "masked_fill"]),  # mask: rows 1, 2 kept
    Case("masked_fill_const_mask", lambda x: x.masked_fill(torch.tensor([True, False, True, False]), 2.0), x1),
    Case("masked_fill_inplace", inplace(lambda x: x.masked_fill_(x < 0, 0.0)), x1, targets=[T + "masked_fill_"]),
    Case("lerp_fn", lambda x, y: torch.lerp(x, y, 0.3), xy, targets=["torch.lerp"]),
    Case("lerp_tensor_weight", lambda x, y: torch.lerp(x, y, y.sigmoid()), xb),
    Case("lerp_method", lambda x, y: x.lerp(y, 0.7), xy, targets=[T + "lerp"]),
    Case("lerp_inplace", inplace(lambda x, y: x.lerp_(y, 0.7)), xy, targets=[T + "lerp_"]),
    Case("addcmul_fn", lambda x, y: torch.addcmul(x, x, y, value=0.5), xy, targets=["torch.addcmul"]),
    Case("addcmul_method", lambda x, y: x.addcmul(y, y), xb, targets=[T + "addcmul"]),
    Case("addcmul_inplace", inplace(lambda x, y: x.addcmul_(y, y, value=2)), xy, targets=[T + "addcmul_"]),
    Case("addcdiv_fn", lambda x, y: torch.addcdiv(x, x, y, value=0.5), xd, targets=["torch.addcdiv"]),
    Case("addcdiv_method", lambda x, y: x.addcdiv(x, y), xd, targets=[T + "addcdiv"]),
    Case("addcdiv_inplace", inplace(lambda x, y: x.addcdiv_(x, y, value=2)), xd, targets=[T + "addcdiv_"]),
    # ---------------------------------------------------------------------------- shifts
    Case("lshift_fn", lambda x: torch.bitwise_left_shift(x, 3), lambda: [ints(3, 4)],
         targets=["torch.bitwise_left_shift"]),
    Case("lshift_method_tensor", lambda x, y: x.bitwise_left_shift(y), lambda: [ints(3, 4), ints(3, 4, lo=0, hi=5)],
         targets=[T + "bitwise_left_shift"]),
    Case("lshift_inplace", lambda x: (x * 1).bitwise_left_shift_(2), lambda: [ints(3, 4)],
         targets=[T + "bitwise_left_shift_"]),
    Case("lshift_op", lambda x: x << 1, lambda: [ints(3, 4, dtype=torch.int64)], targets=[T + "__lshift__"]),
    Case("lshift_iop", _ilshift, lambda: [ints(3, 4)], targets=[T + "__ilshift__"]),
    Case("lshift_rop", lambda x: 1 << x, lambda: [ints(3, 4, lo=0, hi=10)], targets=[T + "__rlshift__"]),
    Case("rshift_fn", lambda x: torch.bitwise_right_shift(x, 2), lambda: [ints(3, 4)],
         targets=["torch.bitwise_right_shift"]),
    Case("rshift_method", lambda x: x.bitwise_right_shift(1), lambda: [ints(3, 4)], targets=[T + "bitwise_right_shift"]),
    Case("rshift_inplace", lambda x: (x * 1).bitwise_right_shift_(1), lambda: [ints(3, 4)],
         targets=[T + "bitwise_right_shift_"]),
    Case("rshift_op", lambda x: x >> 2, lambda: [ints(3, 4)], targets=[T + "__rshift__"]),
    Case("rshift_iop", _irshift, lambda: [ints(3, 4)], targets=[T + "__irshift__"]),
    Case("rshift_rop", lambda x: 1024 >> x, lambda: [ints(3, 4, lo=0, hi=10)], targets=[T + "__rrshift__"]),
]
