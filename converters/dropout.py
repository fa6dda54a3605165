"""Dropout (identity at inference) and nn.Identity."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from torch2trt_lite.registry import Call, converter

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

# NOTE: alpha_dropout and feature_alpha_dropout default to training=False, the others to True
_TRAINING_DEFAULT = {"torch.nn.functional.alpha_dropout": False, "torch.nn.functional.feature_alpha_dropout": False}


def _check_dropout(call: Call) -> str | None:
    p = float(call.arg(1, "p", 0.5))
    default = _TRAINING_DEFAULT.get(call.qualname, True)
    training = bool(call.arg(2, "train", default) if "train" in call.kwargs else call.arg(2, "training", default))
    if training and p > 0:
        return (
            f"dropout with p={p} in training mode is random; call model.eval() (or pass training=False) "
            "to convert it as the identity"
        )
    return None


@converter(
    F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout, torch.dropout,
    check=_check_dropout,
)
def convert_dropout(ctx: ConversionContext, call: Call) -> Any:
    return ctx.itensor(call.arg(0, "input"))


@converter(torch.nn.Identity)
def convert_identity(ctx: ConversionContext, call: Call) -> Any:
    return ctx.itensor(call.args[1] if len(call.args) > 1 else call.kwargs["input"])
