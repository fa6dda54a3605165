"""Hugging Face transformers: the attention-mask shortcuts that read mask values, ``is_tracing``, the
experts loop of mixture-of-experts models.

transformers (``masking_utils.sdpa_mask``) skips building the 4D attention mask when the 2D padding
mask has no padding: ``_ignore_bidirectional_mask_sdpa`` / ``_ignore_causal_mask_sdpa`` evaluate
``padding_mask.all()`` in Python, a data-dependent branch the strict guard refuses. They run here
as converted calls (their internals are not traced) and add no layers:

* a mask computed from the inputs (an engine input): the answer is "build the mask", as transformers
  itself answers while tracing (``is_tracing(padding_mask)``: torch.fx, torch.compile), whether or not
  the traced mask has padding. It is right for every mask the engine will see: the mask is built from
  converted ops on the input (padding, causal pattern), and for a mask of ones it masks nothing, as
  the skip does. Answering "skip" would freeze "no mask" into the engine.
* no mask, or a mask the network proves to be all ones (:func:`_mask_of_ones`): the traced answer, where
  it holds for every size of the range (:func:`_skip_holds_for_every_size`), else refused.

transformers' ``is_tracing(tensor)`` (``utils.import_utils``) asks, among others,
``is_torch_fx_proxy(tensor)``; this tracer answers it True for a tensor computed from the inputs
(:func:`convert_fx_proxy`), so the value checks that transformers skips while tracing
(``if not is_tracing(mask) and torch.all(mask == 1): return None`` in the masks of its state-space and
hybrid models) do not read values here either. Only that question is answered (``is_tracing()`` with
no tensor, ``torch.jit.is_tracing()`` and ``torch.compiler.is_compiling()`` stay False: their branches
are on sizes, which the symbolic guard decides), and only for traced tensors.

The SDPA integration (``transformers.integrations.sdpa_attention.sdpa_attention_forward``) branches
on the query length: ``is_causal = q_length > 1 and ...`` and, for grouped-query attention with a
mask, ``q_length == 1`` picks ``pack_gqa`` instead of ``repeat_kv``. With a dynamic sequence range
that holds 1 the guard (converters/impl/sizes.py) would refuse both; :func:`_sdpa_general_path`
answers them with the general branch (``q_length > 1``: True, ``q_length == 1``: False), which is
provably the same at length 1: ``repeat_kv`` is exact GQA at every length, and a causal mask of
``q_length == kv_length == 1`` masks nothing (so ``is_causal=True`` equals ``False`` there). Only
when the traced length takes that branch, the comparison is of the function's own ``q_length`` with
1, and (for causality) the keys have the same dynamic length as the queries (self-attention without
a cache); anything else (cross-attention, a KV cache) is refused as before.

Registered once the user has imported transformers: loading the converters never imports it (listing
them with ``supported_ops()`` does, when it is installed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.registry import Call, converter, when_imported

from .impl import sizes as Y
from .impl.active import active_context
from .impl.nn_common import producer_layers

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

_SKIP_TARGETS = (
    "transformers.masking_utils._ignore_bidirectional_mask_sdpa",
    "transformers.masking_utils._ignore_causal_mask_sdpa",
)


def _mask_of_ones(mask: Any) -> bool:
    """Is every element of traced ``mask`` 1 (True) for every input: a creation of ones
    (``ctx.filled_value``), or a network tensor that the network itself proves to be all ones
    (:func:`_uniform_value`: e.g. DETR's pixel mask, torch.ones of the dynamic batch indexed, cast and
    interpolated before it reaches the shortcut)?"""
    ctx = active_context()  # NOTE: a check= function: no ctx of its own
    if ctx is None:
        return False
    if ctx.filled_value(mask) in (True, 1):
        return True
    entry = ctx.mapped(mask) if ctx.network is not None else None
    return entry is not None and _uniform_value(ctx, entry[0]) in (True, 1)


# Layers whose output elements are elements of their input 0 (converted to the output type): a tensor
# computed through them from a tensor holding one value everywhere holds that value everywhere.
_KEEPS_VALUES = {"SHUFFLE": None, "SLICE": "ISliceLayer", "GATHER": None, "CAST": None, "IDENTITY": None,
                 "RESIZE": "IResizeLayer"}


def _uniform_value(ctx: ConversionContext, it: Any) -> Any:
    """The value every element of network tensor ``it`` holds whatever the inputs, when its layers prove
    one: a constant of one value, then shuffles, slices (not FILL), gathers from it, casts, identities,
    nearest resizes and concatenations of such tensors; None otherwise."""
    import numpy as np

    trt, producers = ctx.trt, producer_layers(ctx.network)

    def value(t: Any, depth: int) -> Any:
        layer = producers.get(str(t.name))
        if layer is None or depth > 64:  # a network input (or too deep to follow)
            return None
        kind = layer.type.name
        if kind == "CONSTANT":
            layer.__class__ = trt.IConstantLayer
            w = layer.weights  # TensorRT gives a numpy array, the sim its Weights
            vals = np.unique(np.asarray(w.numpy() if hasattr(w, "numpy") else w))
            return vals[0].item() if vals.size == 1 else None
        if kind == "CONCATENATION":
            parts = {value(layer.get_input(k), depth + 1) for k in range(int(layer.num_inputs))}
            return parts.pop() if len(parts) == 1 else None
        if kind not in _KEEPS_VALUES:
            return None
        sub = _KEEPS_VALUES[kind]
        if sub is not None:
            layer.__class__ = getattr(trt, sub)
            if kind == "SLICE" and layer.mode == trt.SampleMode.FILL:
                return None
            if kind == "RESIZE" and layer.resize_mode != trt.InterpolationMode.NEAREST:
                return None
        v = value(layer.get_input(0), depth + 1)
        if v is None:
            return None
        out = layer.get_output(0).dtype
        if out == trt.bool:
            return bool(v)
        if out in (trt.int32, trt.int64, trt.int8, trt.uint8):
            return int(v)
        return v

    return value(it, 0)


def _skip_holds_for_every_size(call: Call) -> bool:
    """No mask values are read (``padding_mask`` None) and the sizes the decision compares are static
    or the same dynamic size (``kv_length == q_length`` of one sequence): dynamic shapes, where the
    call is converted because its sizes are symbolic (converters/impl/sizes.py)."""
    mask = call.arg(0, "padding_mask", None)
    if mask is not None and not _mask_of_ones(mask):  # a mask of ones (a creation) pads nothing
        return False
    if call.qualname.endswith("_ignore_bidirectional_mask_sdpa"):
        return not Y.is_sym(call.arg(2, "local_attention_size", None))
    sizes = [call.arg(1, "q_length"), call.arg(2, "kv_length"), call.arg(5, "local_attention_size", None)]
    if sizes[2] is not None:
        return False
    if not Y.has_sym(sizes[:2]):
        return True
    return Y.is_sym(sizes[0]) and Y.is_sym(sizes[1]) and Y.size_key(sizes[0]) == Y.size_key(sizes[1])


def _built_from_input(mask: Any) -> bool:
    """Is ``mask`` computed from the inputs, and not proven all ones: transformers' ``is_tracing`` case."""
    ctx = active_context()
    return mask is not None and ctx is not None and ctx.is_traced(mask) and not _mask_of_ones(mask)


def _check_mask_skip(call: Call) -> str | None:
    if call.output and not _built_from_input(call.arg(0, "padding_mask", None)) and not _skip_holds_for_every_size(call):
        return (
            "transformers skips the attention mask for the traced sequence lengths, a decision that depends on "
            "the dynamic sizes; convert with a static sequence length or pass an attention_mask"
        )
    return None


def convert_mask_skip(ctx: ConversionContext, call: Call) -> Any:
    """False ("build the mask") for a mask computed from the inputs, as transformers answers while
    tracing; else the traced answer, which the check proved right for every size."""
    return False if _built_from_input(call.arg(0, "padding_mask", None)) else call.output


def convert_fx_proxy(ctx: ConversionContext, call: Call) -> Any:
    """``is_torch_fx_proxy(t)`` of a tensor computed from the inputs: True, so that transformers'
    ``is_tracing(t)`` says what it says under torch.fx (see the module docstring)."""
    return True


def _register() -> None:
    converter(*_SKIP_TARGETS, check=_check_mask_skip, python_result=True)(convert_mask_skip)
    converter("transformers.utils.import_utils.is_torch_fx_proxy", python_result=True)(convert_fx_proxy)


def _sdpa_general_path(frame: Any, size: Any, op: str, other: Any, traced: bool) -> bool | None:
    """The guard rule for sdpa_attention_forward's ``q_length`` branches (see the module docstring)."""
    if frame.f_locals.get("q_length") is not size or type(other) is not int or other != 1 or size._lo < 1:
        return None
    if op == "eq" and not traced:  # q_length == 1: False takes repeat_kv, exact GQA at every length
        return False
    if op == "gt" and traced:  # q_length > 1: True keeps is_causal, the same at q_length == kv_length == 1
        ctx, key = active_context(), frame.f_locals.get("key")
        if ctx is None or key is None:
            return None
        kv = Y.sizes_of(ctx, key)
        if len(kv) == 4 and Y.is_sym(kv[2]) and Y.size_key(kv[2]) == Y.size_key(size):
            return True
    return None


def _register_sdpa_guards() -> None:
    from transformers.integrations import sdpa_attention

    Y.specialize_guard(sdpa_attention.sdpa_attention_forward.__code__, _sdpa_general_path)


when_imported("transformers", _register)
when_imported("transformers", _register_sdpa_guards)


# ------------------------------------------------------------------ the padding mask of a KV cache
# transformers.masking_utils.prepare_padding_mask(attention_mask, kv_length, kv_offset) pads the 2D
# mask with zeros up to kv_length + kv_offset positions. In a decode step with a dynamic cache, the
# mask's length (past + query tokens, an engine input) and kv_length (the cache's length + query) are
# two dynamic sizes the symbolic tracer cannot relate, so the Python comparison that decides the
# padding is refused. Converted instead as one slice layer: the mask's first kv_length + kv_offset
# positions, zero-filled past its end (transformers pads a shorter mask with zeros, and reads only
# those positions of a longer one: ``padding_mask[:, kv_idx]`` with kv_idx < kv_length + kv_offset).
_PADDING_MASK_TARGET = "transformers.masking_utils.prepare_padding_mask"


def _check_padding_mask(call: Call) -> str | None:
    mask = call.arg(0, "attention_mask", None)
    if mask is not None and mask.dim() != 2:
        return f"only a 2D attention_mask (batch, length) is supported, got {mask.dim()}D"
    return None


def convert_padding_mask(ctx: ConversionContext, call: Call) -> Any:
    from .impl import shape as S

    mask = call.arg(0, "attention_mask", None)
    if mask is None:
        return None
    length = call.arg(1, "kv_length") + call.arg(2, "kv_offset", 0)
    have = Y.sizes_of(ctx, mask)[-1]
    static = not (Y.has_sym([length]) or Y.is_sym(have))
    if (static and call.output is mask) or (not static and Y.size_key(length) == Y.size_key(have)):
        return ctx.itensor(mask)  # nothing to pad (a dynamic mask of the sequence itself: the same size)
    work = torch.int32 if mask.dtype == torch.bool else mask.dtype  # NOTE: padded in numbers, cast back
    it = ctx.cast(ctx.itensor(mask), work)
    if static:  # as the call computed it
        from .impl import resize as rs

        pad = int(call.output.shape[-1]) - int(mask.shape[-1])
        return ctx.cast(rs.pad(ctx, it, [0, pad], "constant", 0, work), mask.dtype)
    layer = ctx.network.add_slice(it, (0, 0), (1, 1), (1, 1))
    layer.set_input(2, S.dims_tensor(ctx, it, [S.Copy(0), length]))
    layer.mode = ctx.trt.SampleMode.FILL
    layer.set_input(4, ctx.constant(torch.zeros((), dtype=work)))
    return ctx.cast(layer.get_output(0), mask.dtype)


def _register_padding_mask() -> None:
    converter(_PADDING_MASK_TARGET, check=_check_padding_mask)(convert_padding_mask)


when_imported("transformers", _register_padding_mask)


# ------------------------------------------------------------------ mixture-of-experts: the experts loop
# transformers' experts classes (``@use_experts_implementation``: Mixtral, Qwen-MoE, DeepSeek, ...) pick
# their forward with ``ExpertsInterface.get_interface(config._experts_implementation, eager_forward)``.
# The eager forward loops in Python over the experts hit: ``for expert_idx in expert_hit`` iterates a
# ``nonzero()`` (a data-dependent count: one network output per expert hit cannot be expressed). While
# converting, "eager" is answered with transformers' own ``batched_mm_experts_forward``: the same
# experts on the same tokens with the same routing weights, every token's top-k experts gathered and
# applied as batched matrix multiplies, without a loop; its outputs sum the top-k contributions in
# another order than eager's ``index_add_`` (float rounding only). The other implementations
# (``grouped_mm``, the default, and ``batched_mm``) are kept as chosen.
_EXPERTS_TARGET = "transformers.integrations.moe.ExpertsInterface.get_interface"


def convert_experts_interface(ctx: ConversionContext, call: Call) -> Any:
    """``get_interface("eager", forward)`` while converting: ``batched_mm_experts_forward`` (above)."""
    if call.arg(1, "experts_implementation") != "eager":
        return call.output
    from transformers.integrations.moe import batched_mm_experts_forward

    return batched_mm_experts_forward


def _register_experts() -> None:
    try:
        from transformers.integrations import moe
    except ImportError:  # NOTE: a transformers release without the experts interface: nothing to answer
        return
    if hasattr(moe, "batched_mm_experts_forward") and hasattr(moe, "ExpertsInterface"):
        converter(_EXPERTS_TARGET, constant_inputs=True, python_result=True)(convert_experts_interface)


when_imported("transformers", _register_experts)
