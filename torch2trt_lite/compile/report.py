"""What the ``torch2trt_lite`` torch.compile backend did, per compiled graph: :func:`compile_report`.

For each FX graph dynamo handed the backend: its partitions (op count, ops, where each runs), the
ops that forced PyTorch with the reason, the share of the graph's ops that run in TensorRT and the
time spent converting; for the whole process, dynamo's graph breaks with their reasons
(``torch._dynamo.utils.counters["graph_break"]``: every break makes one more graph, and each graph
boundary is a return to Python).
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class PartitionReport:
    """One partition: ``runs_on`` is ``"TensorRT (sim)"``, ``"TensorRT"``, ``"TensorRT-RTX"``,
    ``"PyTorch"``, or ``"nowhere"`` (a block nothing reads, dead code dynamo kept: not run, its ops
    not counted in the graph's); ``reason`` says why a block meant for TensorRT runs in PyTorch (its conversion
    failed); ``runtime_fallback`` is set when an engine call fell back to PyTorch (an input outside
    the engine's shape range, an engine that cannot run on this machine); ``engine_calls`` counts the
    calls the engine served."""

    name: str
    runs_on: str
    ops: list[str]
    reason: str = ""
    runtime_fallback: str = ""
    engine_calls: int = 0  # calls the engine served (a live count, also after the report was taken)

    @property
    def op_count(self) -> int:
        return len(self.ops)


@dataclass
class PyTorchOp:
    """A node of the graph that runs in PyTorch, its op and why."""

    node: str
    op: str
    reason: str


@dataclass
class GraphReport:
    """One FX graph that dynamo compiled with the backend."""

    index: int
    backend: str
    ops: int  # tensor ops of the graph (elements of a multi-output op's result and size arithmetic not counted)
    trt_ops: int  # of those, how many run in TensorRT engines
    partitions: list[PartitionReport] = field(default_factory=list)
    pytorch_ops: list[PyTorchOp] = field(default_factory=list)
    conversion_s: float = 0.0
    dynamic_inputs: list[str] = field(default_factory=list)  # "input: [min..max, 3, ...]"
    note: str = ""
    # of the ops in PyTorch, how many only make a view of another output (``return y, y[:, 0]``):
    # no computation, kept in PyTorch so that the outputs share memory as in eager (an engine's
    # outputs are separate tensors)
    output_views: int = 0

    @property
    def share(self) -> float:
        """Share of the graph's computing ops that run in TensorRT: ``trt_ops / (ops - output_views)``
        (0.0 for a graph without such ops)."""
        computing = self.ops - self.output_views
        return self.trt_ops / computing if computing > 0 else 0.0

    def engines(self) -> int:
        return sum(1 for p in self.partitions if p.runs_on not in ("PyTorch", "nowhere"))

    def line(self) -> str:
        """The one-line summary logged when the graph is compiled."""
        views = f" (+{self.output_views} view(s) of outputs in PyTorch)" if self.output_views else ""
        return (f"graph {self.index}: {self.trt_ops}/{self.ops - self.output_views} ops in TensorRT{views} "
                f"({100 * self.share:.0f}%), "
                f"{self.engines()} engine(s) on {self.backend}, "
                f"{sum(1 for p in self.partitions if p.runs_on == 'PyTorch')} PyTorch block(s), "
                f"converted in {self.conversion_s:.2f} s" + (f"; {self.note}" if self.note else ""))

    def __str__(self) -> str:
        lines = [self.line()]
        if self.dynamic_inputs:
            lines.append("  dynamic inputs: " + "; ".join(self.dynamic_inputs))
        for p in self.partitions:
            extra = f" ({p.reason})" if p.reason else ""
            extra += f" [called in PyTorch: {p.runtime_fallback}]" if p.runtime_fallback else ""
            ops = ", ".join(p.ops[:8]) + (", ..." if len(p.ops) > 8 else "")
            lines.append(f"  {p.name}: {p.runs_on}, {p.op_count} op(s): {ops}{extra}")
        for o in self.pytorch_ops:
            lines.append(f"  in PyTorch: {o.node} ({o.op}): {o.reason}")
        return "\n".join(lines)


@dataclass
class CompileReport:
    """Every graph compiled since the last ``compile_report(clear=True)``, and dynamo's graph breaks
    since then (reason -> count)."""

    graphs: list[GraphReport]
    graph_breaks: dict[str, int]

    @property
    def share(self) -> float:
        """Share of all compiled graphs' computing ops that run in TensorRT (views of outputs not
        counted, see :attr:`GraphReport.output_views`; 0.0 where no graph has ops: dynamo compiled
        nothing, e.g. a frame it runs in Python after a graph break)."""
        ops = sum(g.ops - g.output_views for g in self.graphs)
        return sum(g.trt_ops for g in self.graphs) / ops if ops > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = {"graphs": [asdict(g) | {"share": g.share} for g in self.graphs], "graph_breaks": self.graph_breaks,
               "share": self.share}
        return out

    def __str__(self) -> str:
        head = (f"torch.compile(backend='torch2trt_lite'): {len(self.graphs)} graph(s), "
                f"{100 * self.share:.0f}% of ops in TensorRT, {sum(self.graph_breaks.values())} graph break(s)")
        lines = [head]
        for reason, n in sorted(self.graph_breaks.items(), key=lambda kv: -kv[1]):
            lines.append(f"  graph break x{n}: {reason}")
            lines += [f"    hint: {hint}" for words, hint in _HINTS.items() if words in reason]
        lines += [str(g) for g in self.graphs]
        return "\n".join(lines)


# what a user can do about a graph break, by words of dynamo's reason
_HINTS = {
    "Attempted to wrap RNN, GRU, or LSTM": (
        "dynamo leaves nn.LSTM / nn.GRU / nn.RNN (and the rest of that frame) to Python unless "
        "torch._dynamo.config.allow_rnn = True is set before the first call (torch2trt-lite check --compile "
        "--allow-rnn); with it, the backend converts them (torch.lstm, torch.gru, torch.rnn_tanh, torch.rnn_relu)"),
}
_LOCK = threading.Lock()
_BREAK_GROUPS = ("graph_break", "unimplemented")  # dynamo's counters of graph breaks (torch >= 2.9: the second)
_GRAPHS: list[GraphReport] = []


def record(graph: GraphReport) -> None:
    with _LOCK:
        graph.index = len(_GRAPHS)
        _GRAPHS.append(graph)


def graph_breaks() -> dict[str, int]:
    """dynamo's graph breaks (reason, with the user's line where dynamo names it -> count), from its
    counters (``"graph_break"``; torch >= 2.9 counts them under ``"unimplemented"``); empty if dynamo
    was never imported."""
    import sys

    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return {}
    out: dict[str, int] = {}
    for group in _BREAK_GROUPS:
        for reason, n in utils.counters.get(group, {}).items():
            key = _short(str(reason))
            out[key] = out.get(key, 0) + int(n)
    return out


def _short(reason: str) -> str:
    """dynamo's reason text cut to its first line and the line of user code it names."""
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    where = next((line.lstrip("# ") for line in lines if line.startswith("# File ")), "")
    return lines[0] + (f" ({where})" if where else "") if lines else reason


def compile_report(clear: bool = False) -> CompileReport:
    """What the backend did with every graph compiled, and dynamo's graph breaks, since the last
    ``compile_report(clear=True)``; ``clear=True`` starts a new record of both (it clears dynamo's
    graph-break counters, which ``torch._dynamo.reset()`` leaves)."""
    import sys

    with _LOCK:
        report = CompileReport(list(_GRAPHS), graph_breaks())
        if clear:
            _GRAPHS.clear()
            utils = sys.modules.get("torch._dynamo.utils")
            if utils is not None:
                for group in _BREAK_GROUPS:
                    utils.counters.pop(group, None)
    return report


__all__ = ["CompileReport", "GraphReport", "PartitionReport", "PyTorchOp", "compile_report", "graph_breaks", "record"]
