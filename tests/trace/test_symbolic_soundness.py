"""Symbolic sizes that are right by construction (issue 22, item 2): an engine matches eager on every
input it accepts, or a torch2trt-lite error says why not.

* every data-dependent size (a NonZero/NMS count, a size read from a value) is a symbol of its own:
  two counts traced at the same value are not one size, nor is a count traced at an input's size;
* duck sizing (dynamic input dims traced at the same size) is an assumption: a decision that needs it
  records the dims in the engine's metadata (``equal_dims``, with the range assumed), and ``TRTModule``
  checks them on every call; dims never assumed equal stay independent;
* bounds survive arithmetic (products, floor divisions, reshapes, transposes).

Every engine is compared with eager PyTorch at inputs other than the traced ones.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import torch
from torch import nn

import torch2trt_lite
from torch2trt_lite import Input, Torch2TRTError
from torch2trt_lite.cli import main as cli_main
from torch2trt_lite.converters.impl import sizes as Y
from torch2trt_lite.errors import DynamicSizeGuardError, EngineFileError
from torch2trt_lite.runtime import engine_file


def _close(got: object, want: object) -> None:
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert tuple(g.shape) == tuple(w.shape)
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def _run(engine: nn.Module, model: nn.Module, *xs: torch.Tensor) -> None:
    with torch.no_grad():
        want = model(*xs)
    _close(engine(*xs), want)


def _rows(*cols: tuple[float, float]) -> torch.Tensor:
    return torch.tensor([list(c) for c in cols])


# ------------------------------------------------------- class 2: two counts traced alike are two sizes
class CountDifference(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = x[x[:, 0] > 0], x[x[:, 1] > 0]
        return torch.zeros(a.size(0) - b.size(0) + 1) + a.sum()


class CountBranch(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = x[x[:, 0] > 0], x[x[:, 1] > 0]
        return a + 1 if a.size(0) == b.size(0) else a - 1


_TRACED = _rows((1, 1), (1, 1), (1, 1), (-1, -1))  # both masks keep 3 rows


def test_two_counts_traced_at_one_value_are_two_sizes() -> None:
    m = CountDifference().eval()
    engine = torch2trt_lite.convert(m, [_TRACED], backend="sim")
    _run(engine, m, _TRACED)
    _run(engine, m, _rows((1, -1), (1, -1), (1, 1), (-1, -1)))  # counts 3 and 1: three zeros, not one
    _run(engine, m, _rows((1, -1), (1, 1), (-1, -1), (-1, -1)))  # counts 2 and 1: two zeros
    with pytest.raises(DynamicSizeGuardError, match=r"nonzero count .*#1 == .*nonzero count .*#2"):
        torch2trt_lite.convert(CountBranch().eval(), [_TRACED], backend="sim")


# -------------------------------------------- class 3: a count traced at an input's size is not that size
class CountPositive(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idx = torch.nonzero(x[:, 0] > 0)[:, 0]
        return x[idx] * 2 if idx.size(0) > 0 else x[idx] * 3


class CountAtMostBatch(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idx = torch.nonzero(x[:, 0] > 0)[:, 0]
        return x[idx] * 2 if idx.size(0) <= 8 else x[idx] * 3  # true over the batch range [1, 8]


class CountIsBatch(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = x[x[:, 0] > 0]
        return a * 2 if a.size(0) == x.size(0) else a - 1


class SliceIsBatch(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = x[:3]  # min(n, 3), traced at n = 3
        return a * 2 if a.size(0) == x.size(0) else a - 1


def _all_positive(rows: int) -> torch.Tensor:
    x = torch.randn(rows, 2, generator=torch.Generator().manual_seed(rows))
    x[:, 0] = x[:, 0].abs() + 0.1
    return x


def test_a_count_traced_at_the_batch_size_keeps_its_own_range() -> None:
    spec = [Input((1, 2), (4, 2), (8, 2), example=_all_positive(4))]
    with pytest.raises(DynamicSizeGuardError, match=r"nonzero count .* range \[0, 8\].*> 0"):
        torch2trt_lite.convert(CountPositive().eval(), spec, backend="sim")
    with pytest.raises(DynamicSizeGuardError, match=r"nonzero count .*== input_0\.size\(0\)"):
        torch2trt_lite.convert(CountIsBatch().eval(), spec, backend="sim")
    m = CountAtMostBatch().eval()  # at most the batch's max (8), not the traced one (4)
    engine = torch2trt_lite.convert(m, spec, backend="sim")
    for rows, seed in ((4, 0), (8, 1), (6, 2), (1, 3)):
        _run(engine, m, torch.randn(rows, 2, generator=torch.Generator().manual_seed(seed)))


def test_a_slice_traced_at_the_dim_size_is_not_the_dim() -> None:
    with pytest.raises(DynamicSizeGuardError, match=r"min\(3, input_0\.size\(0\)\) == input_0\.size\(0\)"):
        torch2trt_lite.convert(SliceIsBatch().eval(), [Input((1, 2), (3, 2), (8, 2))], backend="sim")


# ------------------------------------------- class 4: duck sizing never takes another input's range silently
class SmallY(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (y * 2 if y.size(1) <= 8 else y * 3) + x.sum()


@pytest.mark.parametrize("verify", [True, False])
def test_duck_sizing_does_not_take_another_input_s_range_silently(verify: bool) -> None:
    m = SmallY().eval()
    spec = [Input((1, 3), (8, 3), (8, 3)), Input((1, 1), (1, 8), (1, 64))]  # y goes to 64, x to 8
    engine = torch2trt_lite.convert(m, spec, backend="sim", input_names=["x", "y"], verify=verify)
    assert engine.metadata["equal_dims"] == [{"dims": [["x", 0], ["y", 1]], "min": 1, "max": 8}]
    _run(engine, m, torch.randn(8, 3), torch.randn(1, 8))
    _run(engine, m, torch.randn(5, 3), torch.randn(1, 5))
    for rows, cols in ((3, 64), (8, 40)):
        with pytest.raises(Torch2TRTError, match=r"input 'x' dim 0 is \d+ but input 'y' dim 1 is \d+: they were traced at "
                                                 r"the same size, so the engine assumes they are equal.*distinct sizes"):
            engine(torch.randn(rows, 3), torch.randn(1, cols))


# -------------------------------------------------- class 5: equalities assumed are checked on every call
class SameBatch(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if x.size(0) == y.size(0):
            return x.sum(0) + y.sum(0) + 1
        return x.sum(0) - y.sum(0)


def test_dims_assumed_equal_are_checked_on_every_call() -> None:
    m = SameBatch().eval()
    spec = [Input((1, 3), (4, 3), (8, 3)), Input((1, 3), (4, 3), (8, 3))]
    engine = torch2trt_lite.convert(m, spec, backend="sim", input_names=["x", "y"])
    assert engine.metadata["equal_dims"] == [{"dims": [["x", 0], ["y", 0]], "min": 1, "max": 8}]
    _run(engine, m, torch.randn(4, 3), torch.randn(4, 3))
    _run(engine, m, torch.randn(7, 3), torch.randn(7, 3))
    with pytest.raises(Torch2TRTError, match=r"input 'x' dim 0 is 2 but input 'y' dim 0 is 6: they were traced at the same "
                                             r"size, so the engine assumes they are equal; trace them at distinct sizes"):
        engine(torch.randn(2, 3), torch.randn(6, 3))
    # traced at distinct sizes, nothing is assumed: the branch is refused at conversion instead
    distinct = [Input((1, 3), (4, 3), (8, 3)), Input((1, 3), (5, 3), (8, 3))]
    with pytest.raises(DynamicSizeGuardError, match=r"input_0\.size\(0\) == input_1\.size\(0\)"):
        torch2trt_lite.convert(m, distinct, backend="sim")


class Resolution(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).mean((2, 3)) + x.size(2) // x.size(2)


def test_dims_traced_alike_but_never_compared_stay_independent() -> None:
    m = Resolution().eval()  # H and W traced at 16 x 16: nothing of the model needs them equal
    engine = torch2trt_lite.convert(m, [Input((1, 3, 8, 8), (1, 3, 16, 16), (1, 3, 32, 32))], backend="sim")
    assert "equal_dims" not in engine.metadata
    _run(engine, m, torch.randn(1, 3, 24, 12))


class MaskedHidden(nn.Module):
    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if mask.size(0) < hidden.size(0) * 2:  # decided when the batches are one size (traced alike)
            return hidden * mask.sum(1, keepdim=True)
        return hidden


def test_batches_of_two_inputs_given_as_separate_ranges_are_one_size_when_traced_alike() -> None:
    m = MaskedHidden().eval()
    engine = torch2trt_lite.convert(m, [torch.randn(2, 4), torch.randn(2, 3)], backend="sim", max_batch_size=8,
                                    input_names=["hidden", "mask"])
    assert engine.metadata["equal_dims"] == [{"dims": [["hidden", 0], ["mask", 0]], "min": 1, "max": 8}]
    _run(engine, m, torch.randn(5, 4), torch.randn(5, 3))
    with pytest.raises(Torch2TRTError, match="input 'hidden' dim 0 is 5 but input 'mask' dim 0 is 3"):
        engine(torch.randn(5, 4), torch.randn(3, 3))


# ------------------------------------------------------------------------ bounds survive arithmetic
class MoERouting(nn.Module):
    """Mixture-of-experts routing under a dynamic batch: top-2 experts of each token, then the
    token-expert pairs sorted by expert (at most 8 * 6 * 2 = 96 of them, far below top-k's 3840)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, s, h = x.shape
        tokens = x.view(-1, h)
        weights, experts = torch.topk(self.gate(tokens).softmax(-1), 2, dim=-1)
        order = experts.view(-1).argsort(stable=True)
        return weights, order


class AttentionShapeCheck(nn.Module):
    """BART-style attention: its shape check `attn_weights.size() != (bsz * heads, tgt, src)`."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bsz, tgt, _ = x.size()
        heads, hd = 4, 4
        q = self.q(x).view(bsz, tgt, heads, hd).transpose(1, 2).reshape(bsz * heads, tgt, hd)
        attn_weights = torch.bmm(q, q.transpose(1, 2))
        if attn_weights.size() != (bsz * heads, tgt, tgt):
            raise ValueError(f"attention weights should be of size {(bsz * heads, tgt, tgt)}")
        return attn_weights.softmax(-1)


def test_mixture_of_experts_sort_keeps_its_bound() -> None:
    m = MoERouting().eval()
    engine = torch2trt_lite.convert(m, [Input((1, 6, 16), (2, 6, 16), (8, 6, 16))], backend="sim")
    for b in (2, 8, 5):
        _run(engine, m, torch.randn(b, 6, 16, generator=torch.Generator().manual_seed(b)))


def test_attention_shape_check_of_a_product_is_decided() -> None:
    m = AttentionShapeCheck().eval()
    engine = torch2trt_lite.convert(m, [Input((1, 1, 16), (2, 5, 16), (8, 9, 16))], backend="sim")
    for b, t in ((2, 5), (7, 3), (8, 9), (1, 1)):
        _run(engine, m, torch.randn(b, t, 16))


def _size(value: int, lo: float, hi: float, key: str) -> Y.SymSize:
    return Y.SymSize(value, Y.Dim(None, 0, key, ("test", key)), lo, hi)


def test_interval_arithmetic_keeps_finite_bounds() -> None:
    b, s = _size(2, 1, 8, "b"), _size(6, 1, 6, "s")
    assert Y.bounds(b * s * 2) == (2, 96)
    assert Y.bounds((b * 16) // 16) == (1, 8) and Y.size_key((b * 16) // 16) == Y.size_key(b)
    assert Y.bounds((b * s) // 4) == (0, 12)
    assert Y.bounds(Y.sym_min(b * s, 40)) == (1, 40)
    assert Y.bounds((b - 3) // 2) == (-1, 2)  # floor division of a range that crosses 0
    assert Y.bounds(b % 3) == (0, 2)
    assert (b + 1) - 1 is b and (2 * b - b) is b
    assert Y.diff_bounds(b, b * 2) == (-8, -1)  # b < 2 * b is decided


# ---------------------------------------------------------------------- engine files keep what is assumed
def _equal_engine() -> tuple[nn.Module, nn.Module]:
    m = SameBatch().eval()
    spec = [Input((1, 3), (4, 3), (8, 3)), Input((1, 3), (4, 3), (8, 3))]
    return m, torch2trt_lite.convert(m, spec, backend="sim", input_names=["x", "y"])


def test_engine_file_and_state_dict_keep_the_equalities(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    m, engine = _equal_engine()
    path = tmp_path / "e.engine"
    engine.save(path)
    header, _ = engine_file.read(path)
    assert header["equal_dims"] == [{"dims": [["x", 0], ["y", 0]], "min": 1, "max": 8}]
    assert cli_main(["info", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["equal_dims"] == header["equal_dims"]
    for loaded in (torch2trt_lite.load(path), _from_state_dict(engine)):
        _run(loaded, m, torch.randn(3, 3), torch.randn(3, 3))
        with pytest.raises(Torch2TRTError, match="input 'x' dim 0 is 3 but input 'y' dim 0 is 5"):
            loaded(torch.randn(3, 3), torch.randn(5, 3))


def _from_state_dict(engine: nn.Module) -> nn.Module:
    fresh = torch2trt_lite.TRTModule()
    fresh.load_state_dict(engine.state_dict())
    return fresh


@pytest.mark.parametrize(("field", "message"), [
    ([{"dims": [["x", 0], ["z", 0]], "min": 1, "max": 8}], r"equal_dims\[0\]\.dims must be \[input name, dim\]"),
    ([{"dims": [["x", 0], ["y", 5]], "min": 1, "max": 8}], r"equal_dims\[0\]\.dims must be \[input name, dim\]"),
    ([{"dims": [["x", 0]], "min": 1, "max": 8}], r"equal_dims\[0\] must be an object of dims \(at least two"),
    ([{"dims": [["x", 0], ["y", 0]], "min": 1, "max": 80}], r"equal_dims\[0\]\.min/max must be within the range"),
    ([{"dims": [["x", 0], ["y", 0]], "min": 5, "max": 2}], r"equal_dims\[0\]\.min/max must be ints with 0 <= min <= max"),
    ([{"dims": [["x", 0], ["x", 0]], "min": 1, "max": 8}], r"must be dims that appear once"),
    ("x", r"equal_dims must be a list"),
])
def test_a_tampered_equal_dims_field_is_refused_on_load(tmp_path: pathlib.Path, field: object, message: str) -> None:
    _, engine = _equal_engine()
    path = tmp_path / "e.engine"
    engine.save(path)
    header, plan = engine_file.read(path)
    header = {k: v for k, v in header.items() if k not in ("plan_nbytes", "plan_sha256")}
    header["equal_dims"] = field
    engine_file.write(path, header, plan)  # a well-formed file (checksums right) with a bad field
    with pytest.raises(EngineFileError, match=message):
        torch2trt_lite.load(path)


def test_a_file_without_equal_dims_still_loads(tmp_path: pathlib.Path) -> None:
    m, engine = _equal_engine()
    path = tmp_path / "e.engine"
    engine.save(path)
    header, plan = engine_file.read(path)
    header = {k: v for k, v in header.items() if k not in ("plan_nbytes", "plan_sha256", "equal_dims")}
    engine_file.write(path, header, plan)  # as written before the field existed
    loaded = torch2trt_lite.load(path)
    _run(loaded, m, torch.randn(3, 3), torch.randn(3, 3))


class SliceByValue(nn.Module):
    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        return x[:, : n.max().item()] * 2


@pytest.mark.parametrize("high", [31, 100])
def test_a_slice_by_a_value_read_of_a_narrow_dim_converts(high: int) -> None:
    """``x[:, :k]`` with ``k`` read from a shape input, on a dim narrower than the sim's probe sizes (24,
    56): the slice's size stands in for a value known only at run time, so its bounds are checked there,
    not at build (TensorRT's rule); beyond the dim, Python's slice clamps, and so does the engine."""
    model = SliceByValue().eval()
    x = torch.randn(2, 30)
    n = Input((2,), (2,), (2,), dtype=torch.int64, example=torch.tensor([5, 7]), low=0, high=high)
    trt = torch2trt_lite.convert(model, [x, n], backend="sim")
    for k in (0, 1, 7, 30, high - 1):
        v = torch.tensor([k, 0])
        torch.testing.assert_close(trt(x, v), model(x, v), rtol=0, atol=0)


def _refusal(model: torch.nn.Module, inputs: list[Any]) -> str:
    with pytest.raises(torch2trt_lite.Torch2TRTError) as info:
        torch2trt_lite.convert(model.eval(), inputs, backend="sim")
    return str(info.value)


class _OnRows(torch.nn.Module):
    """Rows of the input (``select``: those with a positive first column, a data-dependent count),
    then ``unbind`` over them or a Python branch on their count."""

    def __init__(self, select: bool, branch: bool) -> None:
        super().__init__()
        self.select, self.branch = select, branch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x[x[:, 0] > 0] if self.select else x
        if self.branch:
            return rows.sum(0) if rows.shape[0] != 3 else rows.mean(0)
        return torch.stack(rows.unbind(0)).sum(0)


@pytest.mark.parametrize("branch", [False, True], ids=["unbind", "branch"])
def test_refusal_advice_fits_the_kind_of_size(branch: bool) -> None:
    """A refused input dim is fixed by a static shape; a data-dependent count is not (it depends on
    the values), so its refusal says what helps instead of advising a static shape."""
    x = torch.randn(6, 3)
    x[:4, 0] = x[:4, 0].abs() + 0.1
    on_input = _refusal(_OnRows(False, branch), [torch2trt_lite.Input((1, 3), (6, 3), (8, 3), example=x)])
    on_values = _refusal(_OnRows(True, branch), [x])
    assert "static" in on_input and "depends on the input's values" not in on_input, on_input
    assert "depends on the input's values" in on_values and "static shape for this dim" not in on_values, on_values
    assert "Make the dim static" not in on_values, on_values


class _ReturnsSize(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[int, torch.Tensor]:
        return x.size(0), x * 2


def test_dynamic_size_returned_as_a_python_number_is_refused() -> None:
    """An engine returns tensors: ``return x.size(0), y`` stored the traced size as a constant output
    (an engine traced at 3 rows answered 3 for 5). Refused for a dynamic dim; a static one is a
    true constant."""
    model, x = _ReturnsSize().eval(), torch.randn(3, 6)
    spec = torch2trt_lite.Input((1, 6), (3, 6), (8, 6), example=x)
    said = _refusal(model, [spec])
    assert "input_0.size(0)" in said and "would always return 3" in said, said
    report = torch2trt_lite.check(model, [spec])  # check() says what convert() refuses
    assert not report.ok and "would always return 3" in str(report), str(report)
    static = torch2trt_lite.convert(model, [x], backend="sim")
    n, y = static(x)
    assert n == 3
    torch.testing.assert_close(y, x * 2)
