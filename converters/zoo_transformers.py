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


def _check_mask_skip(call: Call) -> str | None:
    if call.output:
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
