"""In-place writes into the model's own inputs: refused, naming the op, the input and the line.

Eager PyTorch changes the caller's tensor when a model writes into one of its arguments
(``x.add_(1)``, ``x[0] = 0``, ``x.copy_(y)``, ``torch.add(a, b, out=x)``, ``F.relu(x, inplace=True)``,
``x.unsqueeze_(0)``, or any of these through a view of ``x``). An engine cannot: it reads its inputs
and writes only its outputs, so the caller would silently keep the old values. The traced run works
on its own copies of the examples (``build/inputs.example_copy``), so nothing reaches the user's
tensors while converting; :class:`InputWrites` watches those copies' version counters (views and
``detach()`` share them) after every converted call, and once more after the forward pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from torch2trt_lite.converters.impl.active import user_location
from torch2trt_lite.errors import ConversionError


class InputWrites:
    """The traced copies of the model's inputs and their version counters when tracing began."""

    def __init__(self, names: Sequence[str], tensors: Sequence[torch.Tensor]) -> None:
        self.watched = [(name, t, t._version) for name, t in zip(names, tensors, strict=True)]

    def after(self, tracer: Any, op: str) -> None:
        """After the converted call ``op`` of ``tracer`` (a Tracer): refuse a write it made into an input
        (in check mode, ``tracer.collect``, record it as an unsupported call instead)."""
        if any(t._version != version for _, t, version in self.watched):
            self.check(op, tracer.module_path, tracer.unsupported if tracer.collect else None)

    def check(self, op: str | None, module_path: str, report: Callable[[str, str], None] | None = None) -> None:
        """Refuse a write into an input made by the call ``op`` (None: somewhere in the forward pass).
        ``report(op, reason)`` (check mode) records it instead of raising."""
        for i, (name, t, version) in enumerate(self.watched):
            if t._version == version:
                continue
            self.watched[i] = (name, t, t._version)  # reported once
            where = (f" by {op} at module '{module_path or '<model>'}' ({user_location(2)})" if op is not None
                     else " during the forward pass")
            if report is not None and op is not None:
                where = ""  # NOTE: the check report names the op, the module and the line itself
            reason = (
                f"the model writes in place into its input '{name}'{where}. Eager PyTorch changes the "
                "caller's tensor; an engine cannot write into the tensors it is called with, so that change "
                "would be silently lost. Write into a copy instead (`x = x.clone()` before the write) or use "
                "the out-of-place form (`x.add(1)` for `x.add_(1)`, `F.relu(x)` for `inplace=True`, "
                "`torch.where`/`index_put` for `x[i] = v`)"
            )
            if report is not None and op is not None:
                report(op, reason)
                continue
            raise ConversionError(reason)


__all__ = ["InputWrites"]
