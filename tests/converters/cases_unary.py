"""Harness cases: unary math, every callable form (torch.f, Tensor.f, Tensor.f_, torch.f_, special, operators)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tests.converters.harness import Case, randn


def _any() -> list[torch.Tensor]:
    return [randn(2, 3, 4) * 2]


def _rounded() -> list[torch.Tensor]:  # zeros occur: logical_not varies
    return [randn(2, 3, 4).round()]


def _pos() -> list[torch.Tensor]:
    return [randn(2, 3, 4).abs() + 0.1]


def _unit() -> list[torch.Tensor]:
    return [randn(2, 3, 4).tanh() * 0.95]


def _ge1() -> list[torch.Tensor]:
    return [randn(2, 3, 4).abs() + 1.0]


def _prob() -> list[torch.Tensor]:
    return [randn(2, 3, 4).sigmoid() * 0.9 + 0.05]


def _special() -> list[torch.Tensor]:
    return [torch.tensor([0.0, -0.0, 1.5, -2.5, float("inf"), float("-inf"), float("nan"), 3.0])]


def _halves() -> list[torch.Tensor]:
    return [torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, 0.49, -2.51, 3.7])]


def _ints() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randint(-9, 9, (3, 4), generator=g).to(torch.int32)]


def _bools() -> list[torch.Tensor]:
    return [randn(3, 4) > 0]


# name -> (aliases, inputs, rtol/atol override)
_TABLE: dict[str, tuple[tuple[str, ...], Callable[[], list[torch.Tensor]], float]] = {
    "abs": (("absolute",), _any, 1e-5),
    "neg": (("negative",), _any, 1e-5),
    "exp": ((), _any, 1e-5),
    "expm1": ((), _any, 1e-5),
    "exp2": ((), _any, 1e-5),
    "log": ((), _pos, 1e-5),
    "log1p": ((), _pos, 1e-5),
    "log2": ((), _pos, 1e-5),
    "log10": ((), _pos, 1e-5),
    "sqrt": ((), _pos, 1e-5),
    "rsqrt": ((), _pos, 1e-5),
    "reciprocal": ((), _pos, 1e-5),
    "sin": ((), _any, 1e-5),
    "cos": ((), _any, 1e-5),
    "tan": ((), _unit, 1e-5),
    "asin": (("arcsin",), _unit, 1e-5),
    "acos": (("arccos",), _unit, 1e-5),
    "atan": (("arctan",), _any, 1e-5),
    "sinh": ((), _any, 1e-5),
    "cosh": ((), _any, 1e-5),
    "asinh": (("arcsinh",), _any, 1e-5),
    "acosh": (("arccosh",), _ge1, 1e-5),
    "atanh": (("arctanh",), _unit, 1e-5),
    "erf": ((), _any, 1e-5),
    "erfc": ((), _any, 1e-5),
    "floor": ((), _any, 1e-5),
    "ceil": ((), _any, 1e-5),
    "trunc": (("fix",), _any, 1e-5),
    "frac": ((), _any, 1e-5),
    "sign": (("sgn",), _special, 1e-5),
    "logical_not": ((), _rounded, 1e-5),
    "bitwise_not": ((), _bools, 1e-5),
    "isnan": ((), _special, 1e-5),
    "isinf": ((), _special, 1e-5),
    "isfinite": ((), _special, 1e-5),
    "isposinf": ((), _special, 1e-5),
    "isneginf": ((), _special, 1e-5),
    "signbit": ((), _special, 1e-5),
    "square": ((), _any, 1e-5),
    "positive": ((), _any, 1e-5),
    "deg2rad": ((), _any, 1e-5),
    "rad2deg": ((), _any, 1e-4),
    "sinc": ((), lambda: [torch.cat([randn(7), torch.zeros(1)])], 1e-5),
    "round": ((), _halves, 1e-5),
    "logit": ((), _prob, 1e-5),
}
_SPECIAL = {"expm1", "exp2", "log1p", "erf", "erfc", "sinc", "round", "logit"}
_OPERATORS = {"abs": ("__abs__", abs), "neg": ("__neg__", lambda x: -x), "bitwise_not": ("__invert__", lambda x: ~x),
              "positive": ("__pos__", lambda x: +x)}


def _call(owner: Any, name: str, method: bool) -> Callable[..., Any]:
    if method:
        if name.endswith("_"):
            return lambda x: getattr(x * 1 if x.dtype != torch.bool else x.clone(), name)()
        return lambda x: getattr(x, name)()
    fn = getattr(owner, name)
    if name.endswith("_"):
        return lambda x: fn(x * 1 if x.dtype != torch.bool else x.clone())
    return fn


def _cases() -> list[Case]:
    out: list[Case] = []
    for kind, (aliases, inputs, tol) in _TABLE.items():
        for name in (kind, *aliases):
            for owner, prefix, method in ((torch, "torch.", False), (torch.Tensor, "torch.Tensor.", True)):
                for n in (name, name + "_"):
                    if not hasattr(owner, n):
                        continue
                    inp = inputs
                    if n.endswith("_") and kind == "logical_not":
                        inp = _bools  # in place keeps the input dtype
                    out.append(Case(f"unary_{prefix.replace('.', '_')}{n}", _call(owner, n, method), inp,
                                    targets=[prefix + n], rtol=tol, atol=tol))
        if kind in _SPECIAL:
            fn = getattr(torch.special, kind)
            out.append(Case(f"unary_special_{kind}", fn, inputs, targets=[f"torch.special.{kind}"], rtol=tol, atol=tol))
        if kind in _OPERATORS:
            op, fn = _OPERATORS[kind]
            out.append(Case(f"unary_op_{op.strip('_')}", fn, inputs, targets=[f"torch.Tensor.{op}"]))
    return out


CASES = _cases() + [
    # dtype handling: integer inputs
    Case("unary_abs_int", torch.abs, _ints),
    Case("unary_neg_int", lambda x: -x, _ints),
    Case("unary_sign_int", torch.sign, _ints),
    Case("unary_square_int", torch.square, _ints),
    Case("unary_floor_int", torch.floor, _ints),
    Case("unary_exp_int", torch.exp, _ints, rtol=1e-5, atol=1e-3),
    Case("unary_sqrt_int", lambda x: torch.sqrt(x.abs()), _ints),
    Case("unary_isnan_int", torch.isnan, _ints, constant="an integer is never NaN"),
    Case("unary_isfinite_int", torch.isfinite, _ints, constant="an integer is always finite"),
    Case("unary_signbit_int", torch.signbit, _ints),
    Case("unary_bitwise_not_int", torch.bitwise_not, _ints),
    Case("unary_invert_int64", lambda x: ~x.long(), _ints),
    Case("unary_logical_not_int", torch.logical_not, _ints),
    Case("unary_round_decimals", lambda x: torch.round(x * 10, decimals=1), _any),
    Case("unary_round_decimals_method", lambda x: (x * 100).round(decimals=-1), _any),
    Case("unary_logit_eps", lambda x: torch.logit(x, eps=0.2), _prob),
    Case("unary_exp_fp16", torch.exp, lambda: [randn(3, 4, dtype=torch.float16)], rtol=1e-3, atol=1e-3),
]
