"""One table-driven harness for every converter.

A case is (name, module factory or callable, input factory, tolerance). The harness converts the
module on the sim, serializes the engine, reloads it through ``TRTModule`` and compares the
reloaded module's outputs with eager PyTorch using ``torch.testing.assert_close``: on the traced
inputs, and again on other inputs (floating-point inputs rolled by one along their last dimension,
which keeps their values' domain), so a converter that bakes a traced value into the network as a
constant fails. The expected outputs must not be constant, and every target a case names must
really be converted while the case is traced.

Case tables live in ``cases_*.py`` beside this file: each defines ``CASES: list[Case]``.
``targets`` names the registered qualnames a case covers (the coverage test checks that every
registered converter is covered by at least one case).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import torch
from torch.utils._pytree import tree_flatten

import torch2trt_lite
from torch2trt_lite.trace import tracer


class Fn(torch.nn.Module):
    """Wrap a function of the inputs (``lambda x: x.relu()``) as a module."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs: Any) -> Any:
        return self.fn(*xs)


@dataclass
class Case:
    name: str
    model: Callable[[], torch.nn.Module] | Callable[..., Any]
    inputs: Callable[[], Sequence[torch.Tensor]]
    targets: Sequence[str] = ()
    rtol: float = 1e-5
    atol: float = 1e-5
    xfail: str | None = None  # reason, when the case cannot pass yet
    is_module: bool = False  # model() builds an nn.Module (else model is a function of the inputs)
    extra: dict[str, Any] = field(default_factory=dict)
    vary: str | None = None  # why the second run on rolled inputs is skipped (inputs whose order matters)
    others: Callable[[Sequence[Any]], Sequence[Any]] | None = None  # the second run's inputs (default: varied)
    constant: str | None = None  # why an output may be constant (e.g. ones_like: shape-only)

    def build(self) -> torch.nn.Module:
        if self.is_module:
            m = self.model()
            assert isinstance(m, torch.nn.Module)
            return m.eval()
        return Fn(self.model).eval()


@contextlib.contextmanager
def converted_calls() -> Iterator[set[str]]:
    """The qualnames of the calls converters handle while the block runs (convert or check)."""
    seen: set[str] = set()
    original = tracer.Tracer.convert_call

    def recording(self: Any, record: Any, *args: Any) -> Any:
        seen.add(record.qualname)
        return original(self, record, *args)

    with mock.patch.object(tracer.Tracer, "convert_call", recording):
        yield seen


def randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def varied(xs: Sequence[Any]) -> list[Any]:
    """Other inputs of the same shapes and value domain: floating-point tensors rolled by one along
    their last dimension (integer and boolean inputs, often indices and masks, are kept)."""
    return [
        torch.roll(x, 1, -1) if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dim() and x.shape[-1] > 1
        else x
        for x in xs
    ]


def _clones(xs: Sequence[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]


def _leaves(tree: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


def run_case(case: Case) -> None:
    torch.manual_seed(0)
    model = case.build()
    xs = list(case.inputs())
    with torch.no_grad():
        expected = model(*_clones(xs))
    if case.constant is None:
        for i, leaf in enumerate(_leaves(expected)):
            if leaf.numel() > 1:
                flat = leaf.flatten()
                assert not bool((flat == flat[0]).all()), (
                    f"output {i} of the case is constant in eager mode: choose inputs that make it vary")
    with converted_calls() as invoked:
        trt_model = torch2trt_lite.convert(model, _clones(xs), backend="sim")
    # NOTE: "dynamic_targets" convert only with dynamic shapes (torch.zeros(x.size(0)) is a constant otherwise)
    not_run = sorted(set(case.targets) - invoked - set(case.extra.get("dynamic_targets", ())))
    assert not not_run, f"the case names targets it never converts: {not_run} (converted: {sorted(invoked)})"
    buf = io.BytesIO()
    torch.save(trt_model.state_dict(), buf)
    buf.seek(0)
    reloaded = torch2trt_lite.TRTModule()
    reloaded.load_state_dict(torch.load(buf, weights_only=True))
    got = reloaded(*_clones(xs))
    torch.testing.assert_close(got, expected, rtol=case.rtol, atol=case.atol, equal_nan=True)
    others = list(case.others(xs)) if case.others is not None else varied(xs)
    if case.vary is None and any(a is not b for a, b in zip(others, xs, strict=True)):
        with torch.no_grad():
            expected2 = model(*_clones(others))
        got2 = reloaded(*_clones(others))
        torch.testing.assert_close(got2, expected2, rtol=case.rtol, atol=case.atol, equal_nan=True,
                                   msg=lambda m: f"on other inputs (rolled by one): {m}")
