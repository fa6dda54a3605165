"""Hugging Face transformers: the attention-mask shortcut that reads mask values.

transformers (``masking_utils.sdpa_mask``) skips building the 4D attention mask when the 2D padding
mask has no padding: ``_ignore_bidirectional_mask_sdpa`` / ``_ignore_causal_mask_sdpa`` evaluate
``padding_mask.all()`` in Python, a data-dependent branch the strict guard refuses. They run here
as converted calls (their internals are not traced) and add no layers:

* the traced mask has padding: the answer is "build the mask", which is right for every mask the
  engine will see; the mask is then built from converted ops on the input (padding, causal pattern).
* the traced mask has no padding: the answer "skip" would freeze "no mask" into the engine, and a
  padded mask given to the engine later would be ignored. Refused, with the fix.

Registered once the user has imported transformers: loading the converters never imports it (listing
them with ``supported_ops()`` does, when it is installed).
"""

from __future__ import annotations

from typing import Any

from torch2trt_lite.context import ConversionContext
from torch2trt_lite.registry import Call, converter, when_imported

_SKIP_TARGETS = (
    "transformers.masking_utils._ignore_bidirectional_mask_sdpa",
    "transformers.masking_utils._ignore_causal_mask_sdpa",
)


def _skip_holds_for_every_size(call: Call) -> bool:
    """No mask values are read (``padding_mask`` None) and the sizes the decision compares are static
    or the same dynamic size (``kv_length == q_length`` of one sequence): dynamic shapes, where the
    call is converted because its sizes are symbolic (torch2trt_lite.symbolic)."""
    from torch2trt_lite import symbolic as Y

    mask = call.arg(0, "padding_mask", None)
    if mask is not None and Y.filled_value(mask) not in (True, 1):  # a mask of ones (a creation) pads nothing
        return False
    if call.qualname.endswith("_ignore_bidirectional_mask_sdpa"):
        return not Y.is_sym(call.arg(2, "local_attention_size", None))
    sizes = [call.arg(1, "q_length"), call.arg(2, "kv_length"), call.arg(5, "local_attention_size", None)]
    if sizes[2] is not None:
        return False
    if not Y.has_sym(sizes[:2]):
        return True
    return Y.is_sym(sizes[0]) and Y.is_sym(sizes[1]) and Y._key(sizes[0]) == Y._key(sizes[1])


def _check_mask_skip(call: Call) -> str | None:
    mask = call.arg(0, "padding_mask", None)
    from torch2trt_lite import symbolic as Y

    if call.output and (mask is None or Y.filled_value(mask) in (True, 1)) and not _skip_holds_for_every_size(call):
        return (
            "transformers skips the attention mask for the traced sequence lengths, a decision that depends on "
            "the dynamic sizes; convert with a static sequence length or pass an attention_mask with padding"
        )
    if call.output and not _skip_holds_for_every_size(call):
        return (
            "transformers skips the attention mask because the traced attention_mask has no padding; the engine "
            "would then ignore the attention_mask input. Convert with an attention_mask that masks at least one "
            "position (the engine then applies any mask it is given)"
        )
    return None


def convert_mask_skip(ctx: ConversionContext, call: Call) -> Any:
    return None  # the decision "build the mask" holds for every input; the mask ops are converted


def _register() -> None:
    converter(*_SKIP_TARGETS, check=_check_mask_skip)(convert_mask_skip)


when_imported("transformers", _register)
