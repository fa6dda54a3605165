"""CUDA graphs of engine executions (``TRTModule(..., cuda_graph=True)``; see TRTModule's docstring):
one per thread, captured at a set of input shapes and replayed while the shapes stay the same."""

from __future__ import annotations

import logging
from typing import Any

import torch

from torch2trt_lite.errors import RuntimeExecutionError, Torch2TRTError
from torch2trt_lite.runtime.binding import bind
from torch2trt_lite.runtime.loading import Loaded

log = logging.getLogger("torch2trt_lite")


def check_graph_backend(cuda_graph: bool, meta: Any) -> None:
    """Refuse ``cuda_graph=True`` for a sim engine (metadata ``meta``): there is nothing to capture."""
    if cuda_graph and isinstance(meta, dict) and meta.get("backend") == "sim":
        raise Torch2TRTError(
            "cuda_graph=True: CUDA graphs need a real TensorRT backend on a GPU; this engine was built "
            "by the sim, which runs eagerly with torch (nothing to capture). Convert with "
            "backend='tensorrt' (or 'tensorrt-rtx') on a GPU machine, or leave cuda_graph off"
        )


def replay(tls: Any, st: Loaded, ctx: Any, xs: list[torch.Tensor]) -> list[torch.Tensor] | None:
    """Replay this thread's CUDA graph for these input shapes (capturing it first when needed);
    None when no graph can be used (the caller then runs the engine as usual). ``tls`` holds the
    thread's graph (``tls.graph``), ``ctx`` is the thread's execution context of ``st``."""
    key = tuple((tuple(x.shape), str(x.device)) for x in xs)
    g: Graph | None = getattr(tls, "graph", None)
    if g is None or g.state is not st or g.key != key:
        g = tls.graph = capture(st, ctx, xs, key)
    elif g.graph is not None:
        for buf, x in zip(g.inputs, xs, strict=True):
            buf.copy_(x)
    if g.graph is None:
        return None
    g.graph.replay()  # NOTE: on torch's current stream
    return [y.clone() for y in g.outputs]


class Graph:
    """One thread's CUDA graph of one engine at one set of input shapes (``graph`` None: not usable)."""

    def __init__(self, state: Loaded, key: Any, graph: Any, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
        self.state, self.key, self.graph, self.inputs, self.outputs = state, key, graph, inputs, outputs


def capture(st: Loaded, ctx: Any, xs: list[torch.Tensor], key: Any) -> Graph:
    """Capture ``ctx``'s execution at the shapes of ``xs`` with static input and output buffers."""
    device = xs[0].device
    static_in = [x.clone() for x in xs]
    outs, allocators = bind(st, ctx, static_in, device)
    if allocators:
        names = [o["name"] for o, y in zip(st.outputs, outs, strict=True) if y is None]
        log.warning("cuda_graph: outputs %s have data-dependent shapes, which a CUDA graph cannot replay; "
                    "running without a graph", names)
        return Graph(st, key, None, [], [])
    static_out = [y for y in outs if y is not None]
    stream = torch.cuda.Stream(device)  # NOTE: a side stream: CUDA cannot capture the legacy default stream
    capturable = getattr(ctx, "is_stream_capturable", None)  # TensorRT-RTX: some engines cannot be captured
    if capturable is not None and not capturable(int(stream.cuda_stream)):
        log.warning("cuda_graph: the execution context says the stream is not capturable (TensorRT-RTX "
                    "is_stream_capturable is False); running without a CUDA graph")
        return Graph(st, key, None, [], [])
    current = torch.cuda.current_stream(device)
    stream.wait_stream(current)
    errors = st.log.errors
    with torch.cuda.stream(stream):  # NOTE: one ordinary run first: TensorRT's lazy setup stays out of the graph
        if not ctx.execute_async_v3(int(stream.cuda_stream)):
            raise RuntimeExecutionError("engine execution failed: " + ("; ".join(errors) or "no reason given"))
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, stream=stream):
            ok = ctx.execute_async_v3(int(stream.cuda_stream))
    except RuntimeError as e:  # CUDA refused the capture (an operation that cannot be captured)
        current.wait_stream(stream)
        log.warning("cuda_graph: capturing the engine failed (%s); running without a CUDA graph", e)
        return Graph(st, key, None, [], [])
    if not ok:
        raise RuntimeExecutionError(
            "capturing the engine in a CUDA graph failed: " + ("; ".join(errors) or "no reason given")
            + "; run with cuda_graph=False"
        )
    current.wait_stream(stream)
    return Graph(st, key, graph, static_in, static_out)
