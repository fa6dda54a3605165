"""``torch.vmap`` through the ``torch2trt_lite`` backend: dynamo inlines it as a region of functorch
calls (batch dims added and removed, per-sample ops between); the backend writes a region it
understands as the same ops on whole tensors (``torch2trt_lite.compile.vmap``), so it converts.

Every test compares with eager PyTorch (``torch.testing.assert_close``, tolerances stated) and
reads ``compile_report()`` for where the ops ran. A region the rewrite does not understand, or
whose rewritten ops would give another shape or dtype than dynamo recorded, leaves the graph to
PyTorch: the outputs still match eager and the report names the op.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch._dynamo

from tests.converters.harness import Fn
from torch2trt_lite.compile import CompileReport, compile_backend, compile_report

TOL = {"rtol": 1e-5, "atol": 1e-5}  # fp32 engines on the sim against eager fp32 (elementwise ops, small sums)


def _run(fn: Callable[..., Any], *xs: torch.Tensor, backend: str = "sim", tol: dict[str, float] = TOL) -> CompileReport:
    model = Fn(fn).eval()
    compiled = torch.compile(model, backend=compile_backend(backend=backend, min_block_size=1), dynamic=False)
    g = torch.Generator().manual_seed(11)
    others = [torch.randn(x.shape, generator=g, dtype=x.dtype) if x.is_floating_point() else x for x in xs]
    with torch.no_grad():
        for args in (xs, others):  # the values compiled at, then other values: no recompile, the same engines
            got, want = compiled(*args), model(*args)
            torch.testing.assert_close(got, want, **tol)
    return compile_report()


Z = torch.randn(4, generator=torch.Generator().manual_seed(3))
W = torch.randn(3, 4, generator=torch.Generator().manual_seed(4))


def _scan_combine(a: tuple[torch.Tensor, torch.Tensor], b: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    return a[0] * b[0], b[0] * a[1] + b[1]


def _associative_scan(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """torch's generic associative scan (what transformers' Mamba calls): vmap over the combine fn."""
    from torch._higher_order_ops.associative_scan import associative_scan

    return associative_scan(_scan_combine, (a, b), dim=1, combine_mode="generic")


# name -> (function of the inputs, inputs)
REWRITTEN: dict[str, tuple[Callable[..., Any], Callable[[], list[torch.Tensor]]]] = {
    "elementwise": (lambda x: torch.vmap(lambda r: torch.relu(r) * 2 - r.exp())(x), lambda: [torch.randn(3, 4)]),
    "in_dims_1_out_dims_1": (lambda x, y: torch.vmap(lambda a, b: a * b + Z, in_dims=(1, 0), out_dims=1)(x, y),
                             lambda: [torch.randn(3, 5, 4), torch.randn(5, 4)]),
    "in_dims_negative": (lambda x: torch.vmap(lambda r: r.softmax(-1) * W, in_dims=-2)(x), lambda: [torch.randn(3, 6, 4)]),
    "lower_rank_broadcasts_per_sample": (lambda x, y: torch.vmap(lambda a, b: a * b)(x, y),
                                         lambda: [torch.randn(5, 3, 4), torch.randn(5, 4)]),
    "unbatched_argument": (lambda x, y: torch.vmap(lambda a, b: a - b, in_dims=(0, None))(x, y),
                           lambda: [torch.randn(5, 3, 4), torch.randn(4)]),
    "same_input_batched_and_not": (lambda x: torch.vmap(lambda a, b: a * b.sum(0), in_dims=(0, None))(x, x),
                                   lambda: [torch.randn(3, 3)]),
    "dim_ops": (lambda x: torch.vmap(lambda r: r.transpose(0, 1).sum(1, keepdim=True) + r.mean(dim=(0, 1)))(x),
                lambda: [torch.randn(2, 3, 4)]),
    "whole_sample_reduction": (lambda x: torch.vmap(lambda r: torch.relu(r) * 2 + r.sum())(x) + 1,
                               lambda: [torch.randn(3, 4)]),
    "basic_indexing": (lambda x: torch.vmap(lambda r: r[1:, None, ::2] * r[..., -1:, :1])(x), lambda: [torch.randn(2, 3, 4)]),
    "output_independent_of_the_batch": (lambda x: torch.vmap(lambda r: (r * 2, Z + 1))(x), lambda: [torch.randn(3, 4)]),
    "associative_scan": (_associative_scan, lambda: [torch.rand(2, 7, 3), torch.randn(2, 7, 3)]),
}


@pytest.mark.parametrize("name", sorted(REWRITTEN))
def test_vmap_region_is_written_out_and_runs_in_tensorrt(name: str) -> None:
    fn, inputs = REWRITTEN[name]
    report = _run(fn, *inputs())
    assert report.share == 1.0 and all("torch.vmap" in g.note for g in report.graphs if g.ops), str(report)


# name -> (function, inputs, words the report gives for the region left as it is)
LEFT: dict[str, tuple[Callable[..., Any], Callable[[], list[torch.Tensor]], str]] = {
    # per sample, a 0-d float64 times float32 is float32; on the whole tensor it would be float64
    "type_promotion_of_a_0d_sample": (lambda x: torch.vmap(lambda s: s * Z)(x.double()),
                                      lambda: [torch.randn(3)], "dynamo recorded torch.float32"),
    "advanced_index": (lambda x, i: torch.vmap(lambda r, j: r[j] * 2)(x, i),
                       lambda: [torch.randn(3, 5), torch.tensor([4, 0, 2])], "advanced index"),
    "op_without_a_rewrite": (lambda x: torch.vmap(lambda r: torch.matmul(r, r))(x), lambda: [torch.randn(2, 3, 3)],
                             "torch.matmul on a batched value"),
    "nested": (lambda x: torch.vmap(torch.vmap(lambda v: v * 2 + 1))(x), lambda: [torch.randn(2, 3, 4)], "nested"),
}


@pytest.mark.parametrize("name", sorted(LEFT))
def test_vmap_region_without_a_rewrite_runs_in_pytorch_and_matches(name: str) -> None:
    fn, inputs, words = LEFT[name]
    report = _run(fn, *inputs())
    graph = report.graphs[0]
    assert graph.trt_ops == 0 and "run whole in PyTorch" in graph.note, str(report)
    region = [o for o in graph.pytorch_ops if "in a torch.vmap that PyTorch runs whole" in o.reason]
    assert region and all(words in o.reason for o in region), str(report)


def test_ops_around_a_vmap_left_to_pytorch_run_in_engines() -> None:
    """The region runs whole in PyTorch (one submodule call: no engine between its nesting's
    increment and decrement); what feeds it and what reads it converts, in two engines."""
    def fn(x: torch.Tensor) -> torch.Tensor:
        y = torch.vmap(lambda r: torch.matmul(r, r))(torch.relu(x) * 2 + 1)
        return (y.sigmoid() * 3 - 1).sum(-1)

    report = _run(fn, torch.randn(2, 3, 3))
    graph = report.graphs[0]
    assert graph.engines() == 2 and graph.trt_ops == 7, str(report)
    assert [o.op for o in graph.pytorch_ops] == ["torch._functorch.predispatch._add_batch_dim", "torch.matmul",
                                                 "torch._functorch.predispatch._remove_batch_dim"], str(report)


def test_vmap_over_a_dynamic_dim_converts_once_for_three_sizes() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.vmap(lambda r: torch.relu(r) * 2 + Z + r.flatten().sum(), in_dims=1, out_dims=-1)(x)

    compiled = torch.compile(Fn(fn).eval(), backend=compile_backend(backend="sim", min_block_size=1), dynamic=True)
    with torch.no_grad():
        for b in (3, 5, 9):
            x = torch.randn(6, b, 4)
            torch.testing.assert_close(compiled(x), fn(x), **TOL)
    report = compile_report()
    assert len(report.graphs) == 1 and report.share == 1.0 and report.graphs[0].dynamic_inputs, str(report)


def test_hf_mamba_runs_entirely_in_tensorrt() -> None:
    """transformers' Mamba (its slow path scans with torch's associative_scan): convert() converts it,
    and through the backend every op runs in TensorRT too; the outputs match eager."""
    from tests.zoo.test_zoo import ZOO

    zoo = next(z for z in ZOO if z.name == "hf_mamba")
    torch.manual_seed(0)
    model, xs = zoo.build().eval(), zoo.inputs()
    compiled = torch.compile(model, backend=compile_backend(backend="sim"))
    with torch.no_grad():
        got, want = compiled(*xs).to_tuple(), model(*xs).to_tuple()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    report = compile_report()
    assert report.share == 1.0 and "12 torch.vmap region(s)" in report.graphs[0].note, str(report)


@pytest.mark.rtx
def test_vmap_regions_build_on_tensorrt_rtx() -> None:
    """TensorRT-RTX's builder accepts the written-out region (the engine cannot run without a GPU:
    the call then runs in PyTorch, which the outputs check)."""
    import warnings

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        report = _run(_associative_scan, torch.rand(2, 7, 3), torch.randn(2, 7, 3), backend="tensorrt-rtx")
    engines = [p for g in report.graphs for p in g.partitions if p.runs_on == "TensorRT-RTX"]
    assert engines and not any(p.reason for p in engines) and report.share == 1.0, str(report)


def _random_body(rng: random.Random, rank: int) -> tuple[Callable[..., Any], str]:
    """A per-sample function of (a, b) of a few ops the rewrite knows, and its text."""
    steps: list[tuple[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]] = []
    r = rank
    for _ in range(rng.randint(2, 5)):
        choices = ["mul_b", "add_b", "sigmoid", "where"]
        if r >= 1:
            choices += ["sum", "softmax", "getitem", "unsqueeze"]
        if r >= 2:
            choices += ["transpose", "flatten"]
        op = rng.choice(choices)
        if op == "mul_b":
            steps.append((op, lambda t, b: t * b.sum(-1, keepdim=True) if b.dim() else t * b))
        elif op == "add_b":
            steps.append((op, lambda t, b: t + b.mean()))
        elif op == "sigmoid":
            steps.append((op, lambda t, b: torch.sigmoid(t) - 0.5))
        elif op == "where":
            steps.append((op, lambda t, b: torch.where(t > 0, t, t * 0.1)))
        elif op == "sum":
            d, keep = rng.randrange(-r, r), rng.random() < 0.5
            steps.append((f"sum({d}, {keep})", lambda t, b, d=d, keep=keep: t.sum(d, keepdim=keep)))
            r -= 0 if keep else 1
        elif op == "softmax":
            d = rng.randrange(-r, r)
            steps.append((f"softmax({d})", lambda t, b, d=d: t.softmax(d)))
        elif op == "getitem":
            steps.append(("[..., 1:]", lambda t, b: t[..., 1:] if t.shape[-1] > 1 else t))
        elif op == "unsqueeze":
            d = rng.randrange(-r - 1, r + 1)
            steps.append((f"unsqueeze({d})", lambda t, b, d=d: t.unsqueeze(d)))
            r += 1
        elif op == "transpose":
            d0, d1 = rng.sample(range(-r, r), 2)
            steps.append((f"transpose({d0}, {d1})", lambda t, b, d0=d0, d1=d1: t.transpose(d0, d1)))
        elif op == "flatten":
            steps.append(("flatten()", lambda t, b: t.flatten()))
            r = 1

    def body(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        for _, f in steps:
            a = f(a, b)
        return a

    return body, " -> ".join(name for name, _ in steps)


@pytest.mark.parametrize("seed", range(24))
def test_random_vmap_bodies_match_eager(seed: int) -> None:
    """Random bodies of the ops the rewrite knows, random in_dims/out_dims, a batched or unbatched
    second argument: the compiled graph equals eager, written out (the rewrite checks shapes and
    dtypes; this checks values, i.e. where a dim lands). 2,000 seeds passed when this was written."""
    rng = random.Random(seed)
    rank = rng.randint(1, 3)
    shape = [rng.randint(2, 4) for _ in range(rank)]
    batch, in_dim = rng.randint(2, 4), rng.randint(-rank - 1, rank)
    x_shape = list(shape)
    x_shape.insert(in_dim % (rank + 1), batch)
    b_batched = rng.random() < 0.5
    b_shape = [batch, shape[-1]] if b_batched else [shape[-1]]
    body, text = _random_body(rng, rank)
    out_dim = rng.choice([0, -1])
    g = torch.Generator().manual_seed(seed)
    x, b = torch.randn(x_shape, generator=g), torch.randn(b_shape, generator=g)

    def fn(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.vmap(body, in_dims=(in_dim, 0 if b_batched else None), out_dims=out_dim)(x, b)

    report = _run(fn, x, b)
    graph = report.graphs[0]
    assert "written as ops on whole tensors" in graph.note, f"{text}\n{report}"
    # in PyTorch only where a pure view of the input is returned (aliasing, as for any graph)
    assert all("view of a graph input" in o.reason for o in graph.pytorch_ops), f"{text}\n{report}"
