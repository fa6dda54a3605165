"""``torch.compile(model, backend="torch2trt_lite")``: engines for what converts, PyTorch for the rest.

Every test compares with eager PyTorch (``torch.testing.assert_close``, tolerances stated) and reads
``compile_report()`` for where the ops ran. Engines run on the sim; the ``rtx`` test builds the
blocks with TensorRT-RTX (engines that cannot run without a GPU: the call runs in PyTorch, and the
report says so).
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F
from torch import nn

import torch2trt_lite
from torch2trt_lite import registry
from torch2trt_lite.compile import CompileReport, compile_backend, compile_report

TOL = {"rtol": 1e-4, "atol": 1e-4}  # fp32 engines on the sim against eager fp32


def _compiled(model: nn.Module, dynamic: bool | None = False, **options: Any) -> Any:
    options.setdefault("backend", "sim")
    return torch.compile(model, backend=compile_backend(**options), dynamic=dynamic)


def _check(model: nn.Module, *xs: torch.Tensor, tol: dict[str, float] = TOL, **options: Any) -> CompileReport:
    fn = _compiled(model, **options)
    with torch.no_grad():
        torch.testing.assert_close(fn(*xs), model(*xs), **tol)
    return compile_report()


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn(self.conv1(x)))
        y = F.max_pool2d(self.conv2(y), 2)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1)).softmax(-1)


class Block(nn.Module):
    """A pre-norm transformer block: attention and a GELU MLP."""

    def __init__(self, d: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.mlp(self.norm2(x))


@pytest.mark.parametrize("model, shape", [(SmallCNN(), (2, 3, 16, 16)), (Block(), (2, 5, 16))], ids=["cnn", "transformer"])
def test_model_runs_entirely_in_tensorrt_where_convert_succeeds(model: nn.Module, shape: tuple[int, ...]) -> None:
    model.eval()
    x = torch.randn(shape)
    torch2trt_lite.convert(model, [x], backend="sim")  # convert succeeds: so must every op of the backend
    report = _check(model, x)
    assert len(report.graphs) == 1
    graph = report.graphs[0]
    assert graph.share == 1.0 and graph.engines() == 1 and not graph.pytorch_ops, str(report)
    assert graph.partitions[0].engine_calls == 1  # the engine, not a fallback, gave the result


class Unsupported(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(self.a(x)) * 0.5
        y = torch.erfinv(y)  # no converter: PyTorch between two engines
        return torch.sigmoid(self.b(y)) + 1


def test_unsupported_op_in_the_middle_makes_two_engines_and_one_pytorch_call() -> None:
    report = _check(Unsupported().eval(), torch.randn(4, 8))
    graph = report.graphs[0]
    assert graph.engines() == 2, str(report)
    assert [p.engine_calls for p in graph.partitions if p.runs_on != "PyTorch"] == [1, 1]
    assert [o.op for o in graph.pytorch_ops] == ["torch.erfinv"], str(report)
    assert "no converter" in graph.pytorch_ops[0].reason
    assert graph.trt_ops == graph.ops - 1
    assert "torch.erfinv" in str(report)


class Branchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.fc(x)) + x
        if y.sum() > 0:  # data-dependent Python: a graph break
            return torch.sigmoid(y) * 2 + 1
        return torch.tanh(y) * 3 - 1


def test_data_dependent_branch_takes_both_ways_with_a_graph_break() -> None:
    model = Branchy().eval()
    fn = _compiled(model, min_block_size=1)
    xs = [torch.full((2, 6), 5.0), torch.full((2, 6), -5.0)]
    with torch.no_grad():
        for x in xs:
            torch.testing.assert_close(fn(x), model(x), **TOL)
    report = compile_report()
    assert sum(report.graph_breaks.values()) >= 1, str(report)
    assert len(report.graphs) >= 3 and report.share == 1.0, str(report)  # before the branch, and each way


def test_dynamic_batch_three_sizes_without_recompiling() -> None:
    model = SmallCNN().eval()
    fn = _compiled(model, dynamic=True)
    with torch.no_grad():
        for b in (2, 3, 5):
            x = torch.randn(b, 3, 16, 16)
            torch.testing.assert_close(fn(x), model(x), **TOL)
    report = compile_report()
    assert len(report.graphs) == 1, str(report)
    assert report.graphs[0].dynamic_inputs and report.graphs[0].share == 1.0, str(report)


def test_fp16_through_the_backend() -> None:
    model = SmallCNN().eval()
    x = torch.randn(2, 3, 16, 16)
    report = _check(model, x, precision="fp16", tol={"rtol": 2e-2, "atol": 2e-2})  # fp16 compute, fp32 io
    assert report.graphs[0].share == 1.0


@torch.library.custom_op("t2tl_compile::scale", mutates_args=())
def _scale(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@_scale.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class UsesCustomOp(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.t2tl_compile.scale(torch.relu(x) + 1).sigmoid() - 0.5


def _convert_scale(ctx: Any, call: Any) -> Any:
    x = ctx.itensor(call.arg(0, "x"))
    two = ctx.constant(torch.full((1,) * len(x.shape), 2.0))
    return ctx.network.add_elementwise(x, two, ctx.trt.ElementWiseOperation.PROD).get_output(0)


def test_custom_op_through_a_registered_converter() -> None:
    model, x = UsesCustomOp().eval(), torch.randn(3, 4)
    report = _check(model, x, min_block_size=1)
    assert [o.op for o in report.graphs[0].pytorch_ops] == ["torch.ops.t2tl_compile.scale"], str(report)
    torch._dynamo.reset()
    compile_report(clear=True)
    torch2trt_lite.converter("torch.ops.t2tl_compile.scale")(_convert_scale)
    try:
        report = _check(model, x)
    finally:
        registry.REGISTRY.remove("torch.ops.t2tl_compile.scale")
    assert report.graphs[0].share == 1.0 and report.graphs[0].engines() == 1, str(report)


class Mutates(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1  # a mutated buffer
        y = torch.relu(self.fc(x)) * 2 + 1
        x.mul_(3)  # an in-place write into the input
        return y + x


def test_in_place_writes_and_mutated_buffers_match_eager() -> None:
    model, ref = Mutates().eval(), Mutates().eval()
    ref.load_state_dict(model.state_dict())
    fn = _compiled(model)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(2, 4)
            x_ref = x.clone()
            torch.testing.assert_close(fn(x), ref(x_ref), **TOL)
            torch.testing.assert_close(x, x_ref, rtol=0, atol=0)  # the input was written as eager writes it
    torch.testing.assert_close(model.calls, ref.calls, rtol=0, atol=0)
    graph = compile_report().graphs[0]
    assert graph.trt_ops >= 3, str(graph)
    assert any("in place" in o.reason for o in graph.pytorch_ops), str(graph)


def test_weight_written_in_place_is_never_served_from_a_stale_engine() -> None:
    model = Unsupported().eval()
    fn = _compiled(model)
    x = torch.randn(4, 8)
    with torch.no_grad():
        fn(x)
        model.a.weight.mul_(2)
        with pytest.warns(UserWarning, match="written in place since conversion"):
            out = fn(x)
        torch.testing.assert_close(out, model(x), **TOL)


def test_graph_that_records_autograd_runs_in_pytorch() -> None:
    model = SmallCNN().eval()
    x = torch.randn(2, 3, 16, 16)
    out = _compiled(model)(x)  # grad mode on, parameters require grad
    assert out.requires_grad
    torch.testing.assert_close(out, model(x), **TOL)
    graph = compile_report().graphs[0]
    assert graph.trt_ops == 0 and "autograd" in graph.note


def test_torch_executed_ops_and_min_block_size_keep_ops_in_pytorch() -> None:
    model, x = SmallCNN().eval(), torch.randn(2, 3, 16, 16)
    report = _check(model, x, torch_executed_ops=[F.max_pool2d])
    graph = report.graphs[0]
    assert [o.op for o in graph.pytorch_ops] == ["torch.nn.functional.max_pool2d"], str(report)
    assert graph.engines() == 2
    torch._dynamo.reset()
    compile_report(clear=True)
    report = _check(model, x, min_block_size=100)
    assert report.graphs[0].trt_ops == 0 and "min_block_size=100" in report.graphs[0].pytorch_ops[0].reason


def test_backend_by_name() -> None:
    torch2trt_lite.compile.register()
    model, x = SmallCNN().eval(), torch.randn(1, 3, 16, 16)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend="torch2trt_lite")(x), model(x), **TOL)
    assert compile_report().graphs[0].share == 1.0


def test_bad_options_are_refused() -> None:
    with pytest.raises(torch2trt_lite.Torch2TRTError, match="min_block_size"):
        compile_backend(min_block_size=0)
    with pytest.raises(torch2trt_lite.Torch2TRTError, match="key the overrides by op"):
        compile_backend(precision="fp16", precision_overrides={"fc": "fp32"})  # modules are inlined by dynamo


@pytest.mark.rtx
def test_blocks_build_on_tensorrt_rtx() -> None:
    model, x = Unsupported().eval(), torch.randn(4, 8)
    fn = _compiled(model, backend="tensorrt-rtx")
    with warnings.catch_warnings(record=True), torch.no_grad():  # engines need a GPU: this call runs in PyTorch
        warnings.simplefilter("always")
        torch.testing.assert_close(fn(x), model(x), **TOL)
    graph = compile_report().graphs[0]
    engines = [p for p in graph.partitions if p.runs_on == "TensorRT-RTX"]
    assert len(engines) == 2 and not any(p.reason for p in engines), str(graph)
    if not torch.cuda.is_available():
        assert all(p.runtime_fallback for p in engines), str(graph)


class WritesInside(nn.Module):
    """In-place writes into tensors the graph makes (a residual ``+=``, an in-place ReLU)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        y += x
        return F.relu(y, inplace=True) * 2


class WriteAfterUnsupported(nn.Module):
    """A write whose tensor a PyTorch-only op reads first: the write's whole family stays in PyTorch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(x) * 0.5 + 0.1
        z = torch.erfinv(y)  # reads y before the write below
        y.mul_(4)
        return torch.sigmoid(z) + y.relu() * 3 - 1


def test_writes_into_tensors_the_graph_makes_convert_in_one_block() -> None:
    report = _check(WritesInside().eval(), torch.randn(2, 4, 8, 8))
    assert report.graphs[0].share == 1.0 and report.graphs[0].engines() == 1, str(report)


class ReluInPlaceAfterUnsupported(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(x) * 0.5 - 0.2
        z = torch.erfinv(y)  # reads y before the in-place ReLU below
        F.relu(y, inplace=True)
        return z + y * 3 + 1


@pytest.mark.parametrize("model, write", [(WriteAfterUnsupported(), "torch.Tensor.mul_"),
                                          (ReluInPlaceAfterUnsupported(), "torch.nn.functional.relu")])
def test_write_whose_family_cannot_share_one_block_stays_in_pytorch(model: nn.Module, write: str) -> None:
    report = _check(model.eval(), torch.randn(3, 5), min_block_size=1)
    graph = report.graphs[0]
    reasons = {o.op: o.reason for o in graph.pytorch_ops}
    assert write in reasons and "in-place write" in reasons[write], str(report)
    assert graph.engines() >= 1, str(report)


def test_call_outside_the_dynamic_range_runs_the_block_in_pytorch() -> None:
    model = Block().eval()
    fn = _compiled(model, dynamic=True, dynamic_max=6)
    with torch.no_grad():
        x = torch.randn(2, 4, 16)
        torch.testing.assert_close(fn(x), model(x), **TOL)
        x = torch.randn(2, 9, 16)  # 9 > dynamic_max
        with pytest.warns(UserWarning, match="outside the engine's ranges"):
            out = fn(x)
        torch.testing.assert_close(out, model(x), **TOL)
    graph = compile_report().graphs[0]
    assert "1..6" in graph.dynamic_inputs[0] or "2..6" in graph.dynamic_inputs[0], str(graph)
    assert any(p.runtime_fallback for p in graph.partitions), str(graph)


def test_entry_point_names_the_default_backend() -> None:
    import importlib.metadata
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()  # NOTE: no tomllib on 3.10
    found = re.search(r'\[project\.entry-points\.torch_dynamo_backends\]\ntorch2trt_lite = "([^"]+)"', text)
    assert found, "pyproject.toml declares no torch_dynamo_backends entry point named torch2trt_lite"
    value = found.group(1)
    backend = importlib.metadata.EntryPoint("torch2trt_lite", value, "torch_dynamo_backends").load()
    assert isinstance(backend, torch2trt_lite.compile.Backend) and backend.options.backend == "auto"


class Pdist(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = torch.pdist(torch.relu(self.fc(x)) * 2)  # its converter refuses a dynamic row count
        return torch.sigmoid(d) + 1


def test_op_refusing_a_dynamic_size_runs_in_pytorch_and_the_rest_in_engines() -> None:
    model = Pdist().eval()
    fn = _compiled(model, dynamic=True, min_block_size=1)
    with torch.no_grad():
        for b in (3, 5):
            x = torch.randn(b, 4)
            torch.testing.assert_close(fn(x), model(x), **TOL)
    graph = compile_report().graphs[0]
    assert [o.op for o in graph.pytorch_ops] == ["torch.pdist"], str(graph)
    assert "dynamic size" in graph.pytorch_ops[0].reason and graph.engines() == 2, str(graph)


@pytest.mark.parametrize("name", ["tv_resnet18", "hf_bert"])
def test_zoo_models_run_entirely_in_tensorrt(name: str) -> None:
    """A zoo CNN and transformer (tests/zoo; the whole zoo: benchmarks/bench_compile.py, kept out of CI
    for its time): convert succeeds on them, so every op runs in TensorRT, and the outputs match eager."""
    from tests.zoo.test_zoo import ZOO

    zoo = next(z for z in ZOO if z.name == name)
    torch.manual_seed(0)
    model, xs = zoo.build().eval(), zoo.inputs()
    fn = _compiled(model)
    with torch.no_grad():
        got, want = fn(*xs), model(*xs)
    if hasattr(want, "to_tuple"):  # a Hugging Face ModelOutput
        got, want = got.to_tuple(), want.to_tuple()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    report = compile_report()
    assert report.share == 1.0 and not report.graph_breaks, str(report)


def test_automatic_dynamic_shapes_make_one_dynamic_engine_after_a_second_size() -> None:
    model = Block().eval()
    fn = _compiled(model, dynamic=None)  # dynamo's default: static first, dynamic once a size changes
    with torch.no_grad():
        for t in (4, 5, 7):
            x = torch.randn(2, t, 16)
            torch.testing.assert_close(fn(x), model(x), **TOL)
    graphs = compile_report().graphs
    assert len(graphs) == 2 and not graphs[0].dynamic_inputs and graphs[1].dynamic_inputs, "\n".join(map(str, graphs))
    assert all(g.share == 1.0 for g in graphs)


class Act(nn.Module):
    def __init__(self, act: Any) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x)) * 2 + 1


def test_engine_cache_keeps_blocks_of_different_graphs_apart(tmp_path: Any) -> None:
    x = torch.randn(2, 6)
    for act in (torch.relu, torch.sigmoid, torch.relu):  # same weights and shapes, other code
        model = Act(act).eval()
        torch.nn.init.constant_(model.fc.weight, 0.1)
        torch._dynamo.reset()
        compile_report(clear=True)
        report = _check(model, x, cache_dir=tmp_path)
        assert report.graphs[0].share == 1.0


class ViewOut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.relu(self.fc(x)) * 2 + 1
        return y, y[:, 0]  # two outputs, one a view of the other


def test_outputs_that_view_each_other_stay_one_tensor() -> None:
    model, x = ViewOut().eval(), torch.randn(3, 6)
    report = _check(model, x)
    with torch.no_grad():
        y, first = _compiled(model)(x)
    y.add_(1)  # as in eager, the write shows through the view
    torch.testing.assert_close(first, y[:, 0], rtol=0, atol=0)
    graph = report.graphs[0]
    assert graph.engines() == 1 and [o.op for o in graph.pytorch_ops] == ["operator.getitem"], str(graph)
    # the view computes nothing: counted apart, the share is of the ops that compute
    assert graph.output_views == 1 and graph.share == 1.0 and "+1 view(s) of outputs" in graph.line(), str(graph)


def test_rnn_graph_break_names_the_dynamo_setting_that_lets_the_backend_convert_it() -> None:
    model, x = nn.LSTM(4, 6, batch_first=True).eval(), torch.randn(2, 5, 4)
    with torch.no_grad():
        torch.testing.assert_close(_compiled(model)(x), model(x), rtol=0, atol=0)  # dynamo leaves it to Python
    text = str(compile_report())
    assert "Attempted to wrap RNN" in text and "torch._dynamo.config.allow_rnn = True" in text, text


class UsesCond(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.fc(x)) - 0.2
        return torch.cond(x.sum() > 0, lambda t: torch.relu(t) * 2, lambda t: t - 1, (y,)).sigmoid() * 3


def test_higher_order_op_runs_whole_in_pytorch_and_the_rest_in_engines() -> None:
    """torch.cond reaches the backend as one higher-order op node (its branches are subgraphs): PyTorch
    runs it whole, taking either branch as eager does; the ops before and after it convert."""
    model = UsesCond().eval()
    fn = _compiled(model, min_block_size=1)
    with torch.no_grad():
        xs = [torch.full((3, 4), v) + 0.01 * torch.randn(3, 4) for v in (-1.0, 1.0)]  # both branches
        for x in xs:
            torch.testing.assert_close(fn(x), model(x), **TOL)
    report = compile_report()
    graph = report.graphs[0]
    assert len(report.graphs) == 1 and graph.engines() == 2, str(report)
    assert [o.op for o in graph.pytorch_ops] == ["torch.ops.higher_order.cond"], str(report)
    assert "higher-order op" in graph.pytorch_ops[0].reason, str(report)


@pytest.mark.parametrize("name", ["lstm_gru_sequence", "patch_time_series"])
def test_fused_rnn_and_transformer_ops_run_entirely_in_tensorrt(name: str) -> None:
    """What dynamo emits for nn.LSTM / nn.GRU under ``allow_rnn`` (``torch.lstm``, ``torch.gru`` with
    flat weights) and for nn.TransformerEncoderLayer's fast path in eval (``_transformer_encoder_layer_fwd``)
    converts: the whole zoo model runs in TensorRT and matches eager."""
    from tests.zoo.test_zoo import ZOO

    zoo = next(z for z in ZOO if z.name == name)
    torch.manual_seed(0)
    model, xs = zoo.build().eval(), zoo.inputs()
    with torch._dynamo.config.patch(allow_rnn=True), torch.no_grad():
        got, want = _compiled(model)(*xs), model(*xs)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    report = compile_report()
    assert report.share == 1.0 and not report.graph_breaks, str(report)


@pytest.mark.rtx
@pytest.mark.parametrize("name", ["lstm_gru_sequence", "patch_time_series"])
def test_fused_rnn_and_transformer_ops_build_on_tensorrt_rtx(name: str) -> None:
    """TensorRT-RTX's builder accepts the loops and attention of these converters (one engine per model;
    without a GPU the calls then run in PyTorch, which the outputs check)."""
    from tests.zoo.test_zoo import ZOO

    zoo = next(z for z in ZOO if z.name == name)
    torch.manual_seed(0)
    model, xs = zoo.build().eval(), zoo.inputs()
    with torch._dynamo.config.patch(allow_rnn=True), warnings.catch_warnings(record=True), torch.no_grad():
        warnings.simplefilter("always")
        torch.testing.assert_close(_compiled(model, backend="tensorrt-rtx")(*xs), model(*xs), **TOL)
    graph = compile_report().graphs[0]
    engines = [p for p in graph.partitions if p.runs_on == "TensorRT-RTX"]
    assert len(engines) == 1 and not engines[0].reason and graph.share == 1.0, str(graph)


def test_float64_input_runs_the_graph_in_pytorch_with_the_reason() -> None:
    """TensorRT has no float64 (convert() refuses such an input): the graph runs in PyTorch, in float64
    as eager, and the report says why; no "analysis failed" warning asks for a bug report."""
    model, x = Act(torch.relu).double().eval(), torch.randn(2, 6, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = _check(model, x)
    graph = report.graphs[0]
    assert graph.trt_ops == 0 and "float64" in graph.note and "TensorRT has none of" in graph.note, str(graph)



class ReshapeBySize(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.erfinv(torch.tanh(x) * 0.5)  # no converter: PyTorch between two blocks
        t = torch.tanh(t.reshape(t.shape[0], -1)) * 0.5
        return torch.erfinv(t).reshape(t.shape[0], -1)


def test_size_read_in_one_block_and_used_past_pytorch_is_not_frozen() -> None:
    """With dynamic=True the graph reads ``x.size(0)`` once; the partitioner cut its two users into
    two blocks, the first returned the size, and an engine's number output is its traced value: at
    4 rows the second reshape made [3, 8]. A Python value never leaves its block now."""
    model = ReshapeBySize().eval()
    fn = _compiled(model, dynamic=True, min_block_size=1)
    with torch.no_grad():
        for b in (3, 4, 6):
            x = torch.randn(b, 6)
            got, want = fn(x), model(x)
            assert got.shape == want.shape, (b, got.shape, want.shape)
            torch.testing.assert_close(got, want, **TOL)
    assert compile_report().graphs[0].engines() >= 1
