"""The converter harness with a dynamic batch (issue 10): every case whose inputs can vary along dim 0
is converted with that dim dynamic, then run at two other batch sizes and compared with eager.

A case's *batched* inputs are its tensors whose dim 0 equals the first tensor input's; each becomes a
``torch2trt_lite.Input`` ranging over batch [1, b + 2] (b: the case's own batch, the opt size, and the
traced one). The other sizes are 1 (2 when b is 1) and b + 2; their inputs cycle the case's rows
(``x[arange(n) % b]``), so values keep their domain (indices stay valid, masks stay masks).

A case is skipped, with the reason, when eager PyTorch itself cannot run it at the other sizes (its
inputs are tied to the batch, e.g. an index into dim 0). ``DYNAMIC_XFAIL`` lists the cases whose
dynamic conversion is refused today, with the refusal, and ``DYNAMIC_WRONG`` those that give wrong
values at another batch: each must still fail (strict), so a fixed converter shows up here
(``tools/dynamic_xfail.py`` regenerates both).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch

import torch2trt_lite
from tests.converters.dynamic_xfail import DYNAMIC_WRONG, DYNAMIC_XFAIL
from tests.converters.harness import Case, _clones
from tests.converters.test_converters import CASES
from torch2trt_lite.errors import Torch2TRTError


def _rows(x: torch.Tensor, n: int, distinct: bool = False) -> torch.Tensor:
    """``n`` rows of ``x``, repeating them; ``distinct``: each repetition of a floating input shifted by
    10 (a sort along the batch dim then has no ties, whose order neither torch nor TensorRT defines)."""
    out = x[torch.arange(n) % x.shape[0]].clone()
    if distinct and out.is_floating_point():
        out += 10.0 * (torch.arange(n) // x.shape[0]).to(out.dtype).view(-1, *([1] * (x.dim() - 1)))
    return out


def dynamic_form(case: Case) -> tuple[list[Any], list[list[Any]]] | str:
    """(convert's inputs, with Input ranges on the batched inputs; the inputs at the two other sizes),
    or why the case cannot vary its batch."""
    torch.manual_seed(0)
    xs = list(case.inputs())
    tensors = [x for x in xs if isinstance(x, torch.Tensor) and x.dim() >= 1]
    if not tensors:
        return "no tensor input with a dim 0"
    b = int(tensors[0].shape[0])
    batched = [isinstance(x, torch.Tensor) and x.dim() >= 1 and int(x.shape[0]) == b for x in xs]
    sizes = [2 if b == 1 else 1, b + 2]
    model = case.build()
    others = []
    for n in sizes:
        other = [_rows(x, n, bool(case.extra.get("distinct_rows"))) if k else x for x, k in zip(xs, batched, strict=True)]
        try:
            with torch.no_grad():
                model(*_clones(other))
        except (RuntimeError, IndexError, ValueError, TypeError, AssertionError) as e:
            return f"eager PyTorch cannot run this case at batch {n} ({type(e).__name__}: {str(e)[:120]})"
        others.append(other)
    specs: list[Any] = []
    for x, k in zip(xs, batched, strict=True):
        if k:
            rest = tuple(x.shape[1:])
            specs.append(torch2trt_lite.Input((1, *rest), tuple(x.shape), (b + 2, *rest), dtype=x.dtype, example=x))
        else:
            specs.append(x)
    return specs, others


def _param(c: Case) -> Any:
    marks = []
    if c.name in DYNAMIC_XFAIL:
        marks = [pytest.mark.xfail(reason=DYNAMIC_XFAIL[c.name], strict=True, raises=Torch2TRTError)]
    elif c.name in DYNAMIC_WRONG:
        marks = [pytest.mark.xfail(reason=f"wrong values at another batch: {DYNAMIC_WRONG[c.name]}", strict=True,
                                   raises=AssertionError)]
    return pytest.param(c, id=c.name, marks=marks)


_CASES = [c for c in CASES if not c.xfail and not c.extra.get("needs_cuda")]


def run_dynamic(case: Case, specs: list[Any], others: list[list[Any]]) -> None:
    """Convert ``case`` with its dynamic inputs ``specs`` and compare with eager at each of ``others``."""
    model = case.build()
    # NOTE: verify=False: the runs below at two other sizes are the check (convert's own check would draw
    # random inputs, which an integer divisor or index of a case cannot take)
    trt = torch2trt_lite.convert(model, specs, backend="sim", verify=False, progress=False)
    for other in others:
        with torch.no_grad():
            want = model(*_clones(other))
        got = trt(*_clones(other))
        n = next(int(x.shape[0]) for x in other if isinstance(x, torch.Tensor) and x.dim() >= 1)
        torch.testing.assert_close(got, want, rtol=case.rtol, atol=case.atol, equal_nan=True,
                                   msg=functools.partial(_at_batch, n))


@pytest.mark.parametrize("case", [_param(c) for c in _CASES])
def test_converter_with_dynamic_batch(case: Case) -> None:
    form = dynamic_form(case)
    if isinstance(form, str):
        pytest.skip(form)
    run_dynamic(case, *form)


def _at_batch(n: int, message: str) -> str:
    return f"at batch {n}: {message}"


def test_xfail_table_names_real_cases() -> None:
    names = {c.name for c in _CASES}
    assert not sorted((set(DYNAMIC_XFAIL) | set(DYNAMIC_WRONG)) - names), "the tables name cases that do not exist"
