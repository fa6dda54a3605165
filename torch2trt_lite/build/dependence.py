"""The engine follows the inputs where eager does (issue 22): the net under the tracer's rules.

A call the tracer cannot see into (a C++ extension function, code run with torch function disabled)
hands back a tensor the tracer did not make, which the network holds as a constant. Two signs show it
after the trace, and only they cost anything:

* an engine output that no network input reaches (its layers hold only constants), and
* a *suspect* (``torch2trt_lite.trace.opaque.Provenance``): an untraced tensor argument of a
  converted call that no call the tracer saw made, and that no attribute, global or parameter holds.

Either is confirmed by running the model twice more under a tracer that builds nothing (check mode):
on copies of the traced inputs and on perturbed ones. A suspect or an output whose values change with
the inputs (and, in a third run on the traced inputs, not by themselves: random or uninitialized values)
is refused with :class:`UnsupportedOperatorError`; one that stays the same (a constant built where the
tracer could not see, an output that truly depends on no input) stays allowed. When a run fails (the
perturbed inputs are not ones the model accepts), there is nothing to compare with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from torch2trt_lite.build.inputs import example_copy
from torch2trt_lite.errors import UnsupportedOperatorError
from torch2trt_lite.runtime.structure import decode_tree, tensor_leaves
from torch2trt_lite.trace.context import CheckContext
from torch2trt_lite.trace.opaque import Key, Suspect
from torch2trt_lite.trace.tracer import Tracer


def unreached_outputs(network: Any, outputs: Sequence[Any]) -> list[int]:
    """Indices of the network tensors ``outputs`` that no network input reaches through the layers."""
    reach = {str(network.get_input(i).name) for i in range(int(network.num_inputs))}
    want = [str(it.name) for it in outputs]
    if all(n in reach for n in want):
        return []
    layers = [network.get_layer(i) for i in range(int(network.num_layers))]
    while True:  # NOTE: layers come in the order they were added; a later set_input needs another pass
        size = len(reach)
        for layer in layers:
            ins = (layer.get_input(j) for j in range(int(layer.num_inputs)))
            if any(t is not None and str(t.name) in reach for t in ins):
                reach.update(str(layer.get_output(j).name) for j in range(int(layer.num_outputs)))
        missing = [k for k, n in enumerate(want) if n not in reach]
        if not missing or len(reach) == size:
            return missing


def perturbed(x: torch.Tensor) -> torch.Tensor:
    """Other values for input ``x``, within its own: its elements in reverse order (integer indices
    stay valid), floating ones moved by a small noise as well."""
    y = example_copy(x).reshape(-1).flip(0).reshape(x.shape)
    if y.is_floating_point():
        g = torch.Generator().manual_seed(22)
        scale = float(y.float().abs().mean()) * 0.1 + 1e-2 if y.numel() else 0.0
        y = y + (torch.randn(tuple(y.shape), generator=g) * scale).to(y.device, y.dtype)
    return y


def _eager(model: Any, xs: Sequence[torch.Tensor], in_tree: Any) -> tuple[list[torch.Tensor], dict[Key, Suspect]] | None:
    """The model's output tensors and suspects on ``xs`` under a tracer that builds nothing; None when
    the model raises on them."""
    module = model if isinstance(model, torch.nn.Module) else None
    ctx = CheckContext()
    traced = [example_copy(x) for x in xs]
    ctx.mark_traced(traced)
    tracer = Tracer(ctx, module, collect=True)
    tracer.provenance.keep_values = True
    args = traced if in_tree is None else list(decode_tree(in_tree, traced))
    try:
        out = tracer.run_model(model, args)
    except Exception:  # noqa: BLE001 - the model refuses these inputs: nothing to compare
        return None
    return [t.detach().clone() for t in tensor_leaves(out)], tracer.provenance.suspects


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    if a is None or b is None or a.shape != b.shape or a.dtype != b.dtype:
        return a is b
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return torch.equal(a, b)


def check_dependence(
    model: Any, xs: Sequence[torch.Tensor], in_tree: Any, suspects: dict[Key, Suspect], network: Any,
    outputs: Sequence[Any], names: Sequence[str],
) -> None:
    """Refuse a suspect or an engine output (network tensors ``outputs`` named ``names``) that holds
    constants where the model's values follow its inputs ``xs`` (see module docstring)."""
    unreached = unreached_outputs(network, outputs)
    if not suspects and not unreached:
        return
    with torch.no_grad():
        base = _eager(model, xs, in_tree)
        other = _eager(model, [perturbed(x) for x in xs], in_tree) if base is not None else None
        if base is None or other is None:
            return
        moved = [(key, s) for key, s in base[1].items() if key in other[1] and not _same(s.value, other[1][key].value)]
        n_out = min(len(base[0]), len(other[0]))
        moved_out = [k for k in unreached if k < n_out and not _same(base[0][k], other[0][k])]
        # NOTE: the traced inputs once more: values that change by themselves (random, uninitialized) prove nothing
        again = _eager(model, xs, in_tree) if moved or moved_out else None
    if again is None:
        return
    for key, s in moved:
        if key in again[1] and _same(s.value, again[1][key].value):
            raise UnsupportedOperatorError(
                f"{s.op} at module '{s.module_path or '<model>'}' ({s.location}) takes a tensor (its tensor argument "
                f"#{s.index + 1}) that a call torch2trt-lite cannot see into made earlier (a C++ extension "
                "function, code run with torch function disabled, ...): no call the tracer saw made it, and its "
                "values change with the model's inputs, so the engine would hold the traced input's values as a "
                "constant. Convert the call that makes it: register a converter for it with "
                "@torch2trt_lite.converter (or declare a plugin), or compute the tensor with torch operations",
                op=s.op, module_path=s.module_path, location=s.location,
            )
    for k in moved_out:
        if k < len(again[0]) and _same(base[0][k], again[0][k]):
            raise UnsupportedOperatorError(
                f"the engine output '{names[k]}' (tensor {k} of the model's output) depends on no engine input: "
                "the network holds it as a constant, yet the model's output changes with its inputs. A call "
                "torch2trt-lite cannot see into made it (a C++ extension function, code run with torch function "
                "disabled, ...): convert that call with a converter (@torch2trt_lite.converter) or a plugin, or "
                "compute the output with torch operations the tracer sees",
                op=names[k],
            )

__all__ = ["check_dependence", "perturbed", "unreached_outputs"]
