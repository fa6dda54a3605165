"""``torch.compile(model, backend="torch2trt_lite")``: TensorRT engines for the parts of each graph
that convert, PyTorch for the rest (:mod:`.backend`), and what ran where (:mod:`.report`).

The backend name resolves through the ``torch_dynamo_backends`` entry point (no import needed once
the package is installed); ``import torch2trt_lite`` also registers it where dynamo is loaded
already (importing dynamo costs a second, so the package does not import it for this).
"""

from __future__ import annotations

import sys

from torch2trt_lite.compile.backend import Backend, CompileOptions, compile_backend
from torch2trt_lite.compile.report import CompileReport, GraphReport, compile_report

NAME = "torch2trt_lite"
torch2trt_lite_backend = compile_backend()  # the entry point's object: the backend with default options


def register() -> None:
    """Register the backend under ``NAME`` with dynamo (importing dynamo) unless it is known already."""
    from torch._dynamo.backends import registry

    if NAME not in registry.list_backends(exclude_tags=()):  # NOTE: also the installed entry point's name
        registry.register_backend(torch2trt_lite_backend, name=NAME)


if "torch._dynamo" in sys.modules:
    register()

__all__ = ["NAME", "Backend", "CompileOptions", "CompileReport", "GraphReport", "compile_backend", "compile_report",
           "register", "torch2trt_lite_backend"]
