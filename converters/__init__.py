"""Built-in converters, one module per op family. Importing a family registers its converters;
:func:`load` imports them all (``torch2trt_lite.registry.load_builtin_converters`` calls it before a
conversion). Importing this package alone registers nothing, so the shared builders of ``impl/``
(the size algebra of ``impl/sizes.py`` among them) can be imported by the trace phase without
loading every family."""

from __future__ import annotations

import importlib

# One family a line (merge-friendly), in the order they register (datadep overrides elementwise's
# torch.where, so it comes after it).
FAMILIES: tuple[str, ...] = (
    "activation",
    "elementwise",
    "unary",
    "shape",
    "softmax",
    "reduce",
    "indexing",
    "types",
    "conv",
    "dropout",
    "linear",
    "normalization",
    "pooling",
    "resize",
    "attention",
    "embedding",
    "recurrent",
    "signal",
    "complex",
    "zoo_transformers",
    "quantization",
    "accumulate",
    "assertions",
    "detection",
    "datadep",
    "zoo_torchvision",
    "zoo_ultralytics",
)


def load() -> None:
    """Import (register) every built-in family."""
    for name in FAMILIES:
        importlib.import_module(f"{__name__}.{name}")


__all__ = ["FAMILIES", "load"]
