"""What an engine's inputs and outputs look like to torch: dtype names and the structure trees.

``encode_tree`` describes a model's output (or input) structure as JSON, its tensors as leaf
indices; ``decode_tree`` rebuilds it from an engine's leaves (tuples, lists, dicts, namedtuples,
``torch.return_types``, transformers ModelOutputs and DynamicCaches). ``flatten_args`` takes a
call's structured arguments apart into the engine's input tensors.
"""

from __future__ import annotations

import collections
import functools
import logging
import sys
from typing import Any

import torch

from torch2trt_lite.converters.impl.sizes import SymSize, bounds
from torch2trt_lite.errors import ConversionError, EngineFileError, RuntimeExecutionError, Torch2TRTError

log = logging.getLogger("torch2trt_lite")

DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int8": torch.int8,
    "int32": torch.int32, "int64": torch.int64, "bool": torch.bool, "uint8": torch.uint8,
}


def dtype_name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


def encode_tree(obj: Any, leaf_index: list[int]) -> Any:
    """JSON description of the model's output structure; tensors become leaf indices, other leaves
    constants (refused for a dynamic size: its traced value would be frozen)."""
    if isinstance(obj, torch.Tensor):
        leaf_index[0] += 1
        return {"t": leaf_index[0] - 1}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        if isinstance(obj, SymSize) and bounds(obj)[0] != bounds(obj)[1]:
            raise ConversionError(
                f"the model returns {obj.describe()} as an output, a Python number that is a dynamic size (traced "
                f"as {int.__int__(obj)}); an engine returns tensors, and a number in its outputs is stored as a "
                f"constant, so it would always return {int.__int__(obj)}. Return a tensor that has the size (e.g. "
                "the tensor itself, and read .shape[...] of the engine's output), or convert with a static shape "
                "for this dim"
            )
        return {"c": obj}
    if isinstance(obj, tuple):
        items = [encode_tree(x, leaf_index) for x in obj]
        cls = type(obj)
        if cls.__module__ == "torch.return_types" and getattr(torch.return_types, cls.__name__, None) is cls:
            return {"tuple": items, "return_type": cls.__name__}  # torch.max(x, 0) -> (values, indices)
        fields = getattr(cls, "_fields", None)
        if isinstance(fields, tuple) and all(isinstance(f, str) for f in fields):  # a namedtuple
            return {"tuple": items, "namedtuple": cls.__name__, "fields": list(fields)}
        return {"tuple": items}
    if isinstance(obj, list):
        return {"list": [encode_tree(x, leaf_index) for x in obj]}
    if isinstance(obj, dict):
        keys = list(obj)
        if not all(isinstance(k, (str, int)) for k in keys):
            raise Torch2TRTError("model outputs: dict keys must be str or int to be stored in an engine")
        node: dict[str, Any] = {"dict": [[k, encode_tree(obj[k], leaf_index)] for k in keys]}
        dcls = type(obj)
        if is_transformers_class(dcls, "ModelOutput"):
            # NOTE: rebuilt on decode by module and qualname, only from modules already imported
            node["model_output"] = {"module": dcls.__module__, "qualname": dcls.__qualname__}
        return node
    if is_transformers_class(type(obj), "Cache"):
        pairs = cache_layers(obj, "model outputs")
        return {"cache": CACHE_KIND, "layers": [[encode_tree(k, leaf_index), encode_tree(v, leaf_index)] for k, v in pairs]}
    raise Torch2TRTError(
        f"model outputs: a {type(obj).__name__} cannot be returned by an engine; return tensors in "
        "tuples, lists or dicts"
    )


# A transformers key/value cache in a model's inputs or outputs: one (key, value) pair of tensors
# [batch, heads, length, head_dim] per layer, which are engine inputs / outputs of their own.
CACHE_KIND = "DynamicCache"


def cache_layers(cache: Any, where: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The (key, value) tensors of each layer of a transformers ``DynamicCache`` (layers of full
    attention); any other cache is refused, saying what is supported."""
    cls = type(cache)
    if cls.__name__ != CACHE_KIND or not is_transformers_class(cls, "Cache"):
        raise Torch2TRTError(
            f"{where}: a transformers {cls.__name__} is not supported; only a DynamicCache (keys and values that "
            "grow by one step per call) can be an engine input or output. Use transformers.DynamicCache"
        )
    if getattr(cache, "offloading", False):
        raise Torch2TRTError(f"{where}: a DynamicCache with offloading=True is not supported (the engine holds no state)")
    layers = list(getattr(cache, "layers", None) or [])
    if not layers:
        raise Torch2TRTError(
            f"{where}: the DynamicCache is empty (no layer holds keys and values yet); an engine input needs tensors: "
            "pass the cache of a previous step (or None / no cache for the first step)"
        )
    out = []
    for i, layer in enumerate(layers):
        k, v = getattr(layer, "keys", None), getattr(layer, "values", None)
        if type(layer).__name__ != "DynamicLayer" or not getattr(layer, "is_initialized", False) or not (
            isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor) and k.dim() == 4 and v.dim() == 4
        ):
            raise Torch2TRTError(
                f"{where}: layer {i} of the DynamicCache is a {type(layer).__name__} "
                f"{'holding ' + str(tuple(k.shape)) + ' keys' if isinstance(k, torch.Tensor) else 'without keys'}; "
                "only full-attention DynamicLayer layers holding 4D keys and values [batch, heads, length, head_dim] "
                "are supported (no sliding-window or empty layers)"
            )
        out.append((k, v))
    return out


def _make_cache(pairs: list[tuple[Any, Any]]) -> Any:
    """A transformers DynamicCache whose layers hold exactly these tensors (not copies), else, when
    transformers is not imported, the (key, value) pairs as a tuple (with a warning once)."""
    utils = sys.modules.get("transformers.cache_utils")
    cls, layer_cls = getattr(utils, CACHE_KIND, None), getattr(utils, "DynamicLayer", None)
    if not (isinstance(cls, type) and isinstance(layer_cls, type)):
        if ("transformers", CACHE_KIND) not in _WARNED:
            _WARNED.add(("transformers", CACHE_KIND))
            log.warning("engine output DynamicCache is returned as a tuple of (key, value) pairs: transformers is "
                        "not imported; import it before running the engine to get the DynamicCache back")
        return tuple((k, v) for k, v in pairs)
    cache = cls(ddp_cache_data=[(None, None)] * len(pairs))  # one empty DynamicLayer per pair
    for entry, (k, v) in zip(cache.layers, pairs, strict=True):
        entry.lazy_initialization(k, v)
        entry.keys, entry.values = k, v
    return cache


def tensor_leaves(obj: Any) -> list[torch.Tensor]:
    """The tensors of a model's inputs or outputs in :func:`encode_tree`'s order (tuples, lists,
    dicts, namedtuples, ModelOutputs and DynamicCaches; other objects hold none)."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for x in obj for t in tensor_leaves(x)]
    if isinstance(obj, dict):
        return [t for x in obj.values() for t in tensor_leaves(x)]
    if is_transformers_class(type(obj), "Cache"):
        return [t for pair in cache_layers(obj, "model outputs") for t in pair]
    return []


def flatten_args(spec: Any, args: Any, where: str = "inputs") -> list[Any]:
    """The engine's input tensors from a call's arguments structured as the engine's ``in_tree``
    (tensors, tuples and lists of them, DynamicCaches); a mismatch is a RuntimeExecutionError naming
    where it is."""
    if "t" in spec:
        return [args]
    if "tuple" in spec or "list" in spec:
        items = spec.get("tuple", spec.get("list"))
        if not isinstance(args, (tuple, list)) or is_transformers_class(type(args), "Cache"):
            raise RuntimeExecutionError(
                f"{where}: expected a {'tuple' if 'tuple' in spec else 'list'} of {len(items)} as when converted, "
                f"got {type(args).__name__}"
            )
        if len(args) != len(items):
            raise RuntimeExecutionError(f"{where}: expected {len(items)} entries as when converted, got {len(args)}")
        return [t for k, (s, a) in enumerate(zip(items, args, strict=True)) for t in flatten_args(s, a, f"{where}[{k}]")]
    if "cache" in spec:
        if not is_transformers_class(type(args), "Cache"):
            raise RuntimeExecutionError(f"{where}: expected a transformers DynamicCache as when converted, got "
                                        f"{type(args).__name__}")
        try:
            pairs = cache_layers(args, where)
        except Torch2TRTError as e:
            raise RuntimeExecutionError(str(e)) from None
        if len(pairs) != len(spec["layers"]):
            raise RuntimeExecutionError(
                f"{where}: the DynamicCache has {len(pairs)} layers, the engine was converted with {len(spec['layers'])}"
            )
        return [t for pair in pairs for t in pair]
    raise EngineFileError(f"engine metadata: unknown input structure node {spec!r}")


def is_transformers_class(cls: type, base: str) -> bool:
    """Is ``cls`` a subclass of transformers' class named ``base`` (``ModelOutput``, ``Cache``)? Checked
    by walking the MRO, so transformers is never imported for it."""
    return any(
        c.__name__ == base and str(getattr(c, "__module__", "")).startswith("transformers") for c in cls.__mro__
    )


_WARNED: set[tuple[str, str]] = set()


def _model_output_class(module: str, qualname: str) -> type | None:
    """The ModelOutput subclass ``module.qualname`` if that module is imported already, else None.

    Nothing is imported: a name read from an engine file only selects among loaded classes."""
    obj: Any = sys.modules.get(module)
    for part in qualname.split("."):
        if obj is None or not part.isidentifier():
            return None
        obj = getattr(obj, part, None)
    if isinstance(obj, type) and issubclass(obj, dict) and is_transformers_class(obj, "ModelOutput"):
        return obj
    return None


def _model_output(spec: dict[str, Any], items: dict[Any, Any]) -> Any:
    """The model's ModelOutput rebuilt from its class name and ``items`` (in order), else ``items``."""
    module, qualname = str(spec.get("module", "")), str(spec.get("qualname", ""))
    cls = _model_output_class(module, qualname)
    why = f"its module {module!r} is not imported" if module not in sys.modules else "it is not a ModelOutput class"
    if cls is not None:
        try:
            out = cls(**items)
        except (TypeError, ValueError) as e:
            out, why = None, f"it refused the outputs ({type(e).__name__}: {e})"
        if out is not None and list(out.keys()) == list(items):
            return out
        if out is not None:
            why = "it would reorder or drop outputs"
    if (module, qualname) not in _WARNED:
        _WARNED.add((module, qualname))
        log.warning(
            "engine output %s.%s is returned as a plain dict (same keys, same order): %s; import it "
            "(e.g. import transformers) before running the engine to get the class back", module, qualname, why,
        )
    return items


@functools.lru_cache(maxsize=256)
def _namedtuple(name: str, fields: tuple[str, ...]) -> Any:
    """A namedtuple type like the model's (rebuilt from its name and fields; nothing is imported)."""
    try:
        return collections.namedtuple(name, fields)  # type: ignore[misc]
    except (TypeError, ValueError) as e:
        raise EngineFileError(f"engine metadata: invalid output namedtuple {name}{fields}: {e}") from None


def decode_tree(spec: Any, leaves: list[torch.Tensor]) -> Any:
    """The structure ``spec`` (of :func:`encode_tree`) rebuilt around the engine's output tensors ``leaves``."""
    if "t" in spec:
        return leaves[spec["t"]]
    if "c" in spec:
        return spec["c"]
    if "tuple" in spec:
        items = tuple(decode_tree(s, leaves) for s in spec["tuple"])
        if "return_type" in spec:
            cls = getattr(torch.return_types, str(spec["return_type"]), None)
            if not isinstance(cls, type) or not issubclass(cls, tuple):
                raise EngineFileError(f"engine metadata: unknown torch.return_types.{spec['return_type']}")
            return cls(items)
        if "namedtuple" in spec:
            return _namedtuple(str(spec["namedtuple"]), tuple(spec["fields"]))(*items)
        return items
    if "list" in spec:
        return [decode_tree(s, leaves) for s in spec["list"]]
    if "dict" in spec:
        fields = {k: decode_tree(s, leaves) for k, s in spec["dict"]}
        if "model_output" in spec:
            return _model_output(spec["model_output"], fields)
        return fields
    if "cache" in spec:
        return _make_cache([(decode_tree(k, leaves), decode_tree(v, leaves)) for k, v in spec["layers"]])
    raise EngineFileError(f"engine metadata: unknown output structure node {spec!r}")
