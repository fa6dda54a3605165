"""chunk / tensor_split / unbind along a dynamic dim (issue 10): what converts, what is refused while
converting (never a wrong or failing engine), checked against eager PyTorch on the sim."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import torch2trt_lite
from torch2trt_lite import Input
from torch2trt_lite.errors import UnsupportedOperatorError


class _Fn(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs: torch.Tensor) -> Any:
        return self.fn(*xs)


def _convert(fn: Callable[..., Any], lo: int, opt: int, hi: int, rest: tuple[int, ...] = (3,)) -> Any:
    x = torch.randn(opt, *rest)
    return torch2trt_lite.convert(_Fn(fn).eval(), [Input((lo, *rest), (opt, *rest), (hi, *rest), example=x)],
                                  backend="sim", verify=False, progress=False)


def _check(trt: Any, fn: Callable[..., Any], sizes: list[int], rest: tuple[int, ...] = (3,)) -> None:
    for n in sizes:
        x = torch.randn(n, *rest)
        torch.testing.assert_close(trt(x), fn(x), rtol=1e-6, atol=1e-6, msg=lambda m, n=n: f"at size {n}: {m}")


@pytest.mark.parametrize("n, lo, hi", [(2, 2, 9), (3, 7, 12), (4, 13, 30)])
def test_chunk_of_dynamic_dim_with_a_fixed_count(n: int, lo: int, hi: int) -> None:
    """torch.chunk makes ceil(S / ceil(S / n)) pieces: n for every size in these ranges, so it converts
    and the pieces' bounds follow the runtime size."""
    def fn(x: torch.Tensor) -> list[torch.Tensor]:
        return [p * (k + 1) for k, p in enumerate(torch.chunk(x, n))]

    trt = _convert(fn, lo, (lo + hi) // 2, hi)
    _check(trt, fn, sorted({lo, lo + 1, (lo + hi) // 2, hi}))


def test_chunk_of_dynamic_dim_whose_count_varies_is_refused() -> None:
    """chunk(3) of 4 rows is 2 pieces, of 6 rows 3: a network has a fixed number of outputs."""
    with pytest.raises(UnsupportedOperatorError, match=r"torch.chunk .*input_0.size\(0\).*\[4, 9\]"):
        _convert(lambda x: torch.chunk(x, 3), 4, 6, 9)


def test_chunk_of_raft_style_concatenation() -> None:
    """chunk(2) of cat([a, b]) (as RAFT splits its two images): cat's size is the sum of its inputs'
    (symbolic.known_sizes), 2 * S for S in [1, 4], so the count is provably 2 and it converts."""
    def fn(x: torch.Tensor) -> list[torch.Tensor]:
        a, b = torch.chunk(torch.cat([x, x * 2]), 2)
        return [a + 1, b * 3]

    _check(_convert(fn, 1, 2, 4), fn, [1, 2, 3, 4])


def test_chunk_of_a_computed_size_without_bounds_is_refused() -> None:
    """chunk(2) of a size only known to be >= 0 (the rows a mask keeps): 1 piece at size 1, 2 at 2,
    so the count is not fixed and it is refused, not baked in."""
    with pytest.raises(UnsupportedOperatorError, match="different number of pieces"):
        _convert(lambda x: torch.chunk(x[x[:, 0] > -10], 2), 1, 4, 6)


# NOTE: no index that clamps (x[:4] of a dim that may be below 4): its length min(S, 4) is 4 at both of
# the sim's shape probes (24, 56), so the sim declares it static (TensorRT-RTX declares -1)
@pytest.mark.parametrize("split", [3, [1, -1]], ids=["sections", "indices"])
def test_tensor_split_of_dynamic_dim(split: Any) -> None:
    """tensor_split's count is fixed (n sections, or one more than the indices): it always converts,
    empty pieces included."""
    def fn(x: torch.Tensor) -> list[torch.Tensor]:
        return [p + k for k, p in enumerate(torch.tensor_split(x, split))]

    trt = _convert(fn, 1, 5, 8)
    _check(trt, fn, [1, 2, 3, 5, 8])


def test_unbind_of_dynamic_dim_is_refused_and_of_static_dim_converts() -> None:
    with pytest.raises(UnsupportedOperatorError, match=r"torch.unbind .*input_0.size\(0\).*one output per index"):
        _convert(torch.unbind, 1, 2, 4)

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x.unbind(1)

    trt = _convert(fn, 1, 2, 5, (3, 2))
    _check(trt, fn, [1, 5], (3, 2))
