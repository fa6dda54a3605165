"""One table-driven harness for every converter.

A case is (name, module factory or callable, input factory, tolerance). The harness converts the
module on the sim, serializes the engine, reloads it through ``TRTModule`` and compares the
reloaded module's outputs with eager PyTorch using ``torch.testing.assert_close``.

Case tables live in ``cases_*.py`` beside this file: each defines ``CASES: list[Case]``.
``targets`` names the registered qualnames a case covers (the coverage test checks that every
registered converter is covered by at least one case).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

import torch2trt_lite


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

    def build(self) -> torch.nn.Module:
        if self.is_module:
            m = self.model()
            assert isinstance(m, torch.nn.Module)
            return m.eval()
        return Fn(self.model).eval()


def randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def run_case(case: Case) -> None:
    torch.manual_seed(0)
    model = case.build()
    xs = list(case.inputs())
    with torch.no_grad():
        expected = model(*[x.clone() for x in xs])
    trt_model = torch2trt_lite.convert(model, [x.clone() for x in xs], backend="sim")
    buf = io.BytesIO()
    torch.save(trt_model.state_dict(), buf)
    buf.seek(0)
    reloaded = torch2trt_lite.TRTModule()
    reloaded.load_state_dict(torch.load(buf, weights_only=True))
    got = reloaded(*[x.clone() for x in xs])
    torch.testing.assert_close(got, expected, rtol=case.rtol, atol=case.atol, equal_nan=True)
