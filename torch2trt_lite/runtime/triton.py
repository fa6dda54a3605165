"""Triton Inference Server model repository for an engine: ``REPO/NAME/config.pbtxt`` + ``REPO/NAME/V/model.plan``.

    trt_model.export_triton("models", "resnet18", instances=2)   # or runtime.triton.export_triton(trt_model, ...)
    torch2trt-lite export-triton model.engine models --name resnet18 [--max-batch-size 8] [--instances 2]

The config is a ``ModelConfig`` message of tritonclient's own protobuf (``model_config_pb2``),
written with ``google.protobuf.text_format`` and parsed back before anything is written, so Triton
reads exactly what was meant. ``platform: "tensorrt_plan"``; inputs and outputs come from the
engine's metadata (names, dtypes, dims; a dim whose profile range is not one value is ``-1``).
Dynamic batching is used when the engine's profile allows it: every input's first dim ranges from
1 to some max >= 2. Then ``max_batch_size`` is that max (or the smaller one asked for), dims are
listed without the batch dim and ``dynamic_batching {}`` is set; otherwise ``max_batch_size: 0``
and full dims. A rank-0 tensor (or a batched rank-1 one) is written as ``dims: [1]`` with
``reshape { shape: [] }``, as Triton requires.

Only TensorRT (and TensorRT-RTX) plans can be served: a sim engine's plan is the sim's own format,
so it is refused unless ``allow_sim=True`` (for testing the layout only; Triton cannot load it).
NOTE: Triton's stock ``tensorrt_plan`` backend is built against TensorRT; a TensorRT-RTX plan needs
a Triton TensorRT backend built against the TensorRT-RTX runtime of the same version.

Writes are atomic: the version folder is filled under a hidden temporary name and renamed into
place, and the config is written with ``engine_file.atomic_write``. An existing version folder is
refused unless ``overwrite=True``.
"""

from __future__ import annotations

import os
import secrets
import shutil
from typing import TYPE_CHECKING, Any

from torch2trt_lite.errors import BackendUnavailableError, EngineFileError, InternalError, Torch2TRTError
from torch2trt_lite.runtime import engine_file

if TYPE_CHECKING:
    from torch2trt_lite.runtime.module import TRTModule

TRITON_DTYPES = {
    "float32": "TYPE_FP32", "float16": "TYPE_FP16", "bfloat16": "TYPE_BF16", "int32": "TYPE_INT32",
    "int64": "TYPE_INT64", "int8": "TYPE_INT8", "uint8": "TYPE_UINT8", "bool": "TYPE_BOOL",
}
KINDS = {"gpu": "KIND_GPU", "cpu": "KIND_CPU"}
PLAN_FILENAME = "model.plan"  # the default_model_filename of Triton's tensorrt_plan platform


def _protobuf() -> tuple[Any, Any]:
    try:
        from google.protobuf import text_format
        from tritonclient.grpc import model_config_pb2
    except ImportError as e:
        raise BackendUnavailableError(
            f"exporting a Triton model repository needs tritonclient[grpc] ({e}): "
            "pip install 'torch2trt-lite[deploy]' (or pip install 'tritonclient[grpc]')"
        ) from None
    return model_config_pb2, text_format


def _dims(shape: list[int], lo: list[int] | None = None, hi: list[int] | None = None) -> list[int]:
    """Triton dims: -1 where the profile range is more than one value (or the shape says -1)."""
    if lo is None or hi is None:
        return [int(d) for d in shape]
    return [int(d) if a == b and d != -1 else -1 for d, a, b in zip(shape, lo, hi, strict=True)]


def _batch_max(meta: dict[str, Any]) -> int | None:
    """The largest batch every input's profile allows, when all their first dims range from 1 to >= 2."""
    ins = meta["inputs"]
    if not ins or not all(i["min"] and i["min"][0] == 1 and i["max"][0] >= 2 for i in ins):
        return None
    return min(int(i["max"][0]) for i in ins)


def _no_batch_reason(meta: dict[str, Any]) -> str:
    ins = meta["inputs"]
    if not ins:
        return "the engine has no inputs to batch"
    for i in ins:
        if not i["min"]:
            return f"the engine's input '{i['name']}' is a scalar (no batch dim)"
        lo, hi = i["min"][0], i["max"][0]
        if lo == hi:
            return (
                f"the engine's input batch is fixed at {lo}; convert with a dynamic batch range to serve with "
                f"dynamic batching (input '{i['name']}' has shape {i['shape']}; without max_batch_size the "
                "engine is exported with full shapes and no batching)"
            )
        if lo != 1:
            return (
                f"the engine's input '{i['name']}' batch ranges from {lo} to {hi}; Triton's dynamic batching "
                "needs a range from 1: convert with a dynamic batch range of min 1"
            )
    raise InternalError("_no_batch_reason called for an engine that batches")


def _check_int(what: str, v: Any, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise Torch2TRTError(f"{what} must be an int >= {lo}, got {v!r}")
    return v


def triton_config(
    meta: dict[str, Any], name: str, *, max_batch_size: int | None = None, instances: int = 1, kind: str = "gpu",
) -> Any:
    """The ``model_config_pb2.ModelConfig`` of a ``tensorrt_plan`` model for an engine's metadata.

    ``max_batch_size``: None picks it from the engine's profile (its batch max when every input's
    first dim ranges from 1, else 0); 0 asks for full shapes and no batching; N >= 1 asks for
    dynamic batching up to N (refused when the profile does not allow it).
    """
    mc, _ = _protobuf()
    engine_file.validate_meta(meta, "export_triton")
    _check_int("instances", instances, 1)
    if kind not in KINDS:
        raise Torch2TRTError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    engine_max = _batch_max(meta)
    if max_batch_size is None:
        mbs = engine_max or 0
    else:
        mbs = _check_int("max_batch_size", max_batch_size, 0)
        if mbs and engine_max is None:
            raise Torch2TRTError(f"max_batch_size {mbs}: {_no_batch_reason(meta)}")
        if engine_max is not None and mbs > engine_max:
            raise Torch2TRTError(
                f"max_batch_size {mbs} is over the engine's batch range (1 to {engine_max}); give at most "
                f"{engine_max}, or convert with a larger dynamic batch range"
            )
    batched = mbs > 0
    if batched:
        for o in meta["outputs"]:
            if not o["shape"] or o["shape"][0] != -1:
                raise Torch2TRTError(
                    f"output '{o['name']}' has shape {o['shape']}, without a dynamic batch dim first; Triton's "
                    "dynamic batching needs every output to carry the batch: export with max_batch_size=0 "
                    "(full shapes, no batching)"
                )

    cfg = mc.ModelConfig(name=name, platform="tensorrt_plan", max_batch_size=mbs)

    def fill(t: Any, spec: dict[str, Any], dims: list[int]) -> None:
        t.name = spec["name"]
        t.data_type = mc.DataType.Value(TRITON_DTYPES[spec["dtype"]])
        if batched:
            dims = dims[1:]
        if dims:
            t.dims.extend(dims)
        else:  # a scalar per request: Triton needs dims [1], reshaped to the engine's []
            t.dims.append(1)
            t.reshape.SetInParent()

    for i in meta["inputs"]:
        fill(cfg.input.add(), i, _dims(i["shape"], i["min"], i["max"]))
    for o in meta["outputs"]:
        fill(cfg.output.add(), o, _dims(o["shape"]))
    if batched:
        cfg.dynamic_batching.SetInParent()
    cfg.instance_group.add(count=instances, kind=mc.ModelInstanceGroup.Kind.Value(KINDS[kind]))
    return cfg


def config_text(cfg: Any) -> str:
    """``config.pbtxt`` text of a ModelConfig, checked by parsing it back with ``text_format.Parse``."""
    mc, text_format = _protobuf()
    text = str(text_format.MessageToString(cfg))
    try:
        back = text_format.Parse(text, mc.ModelConfig())
    except text_format.ParseError as e:
        raise InternalError(f"the generated config.pbtxt does not parse: {e}") from None
    if back != cfg:
        raise InternalError("the generated config.pbtxt parses to a different ModelConfig")
    return text


def _engine(module_or_path: TRTModule | str | os.PathLike[str]) -> tuple[dict[str, Any], Any, str]:
    """The metadata and plan of a TRTModule or an engine file, and how to name it in messages. A
    TRTModule is known by its ``metadata`` (a dict) and ``plan``: this module does not import
    runtime.module (TRTModule.export_triton imports this one)."""
    if isinstance(module_or_path, (str, os.PathLike)):
        meta, plan = engine_file.read(module_or_path)
        return meta, plan, repr(os.fspath(module_or_path))
    held = getattr(module_or_path, "metadata", None)
    if isinstance(held, dict) and hasattr(module_or_path, "plan"):
        if not held:
            raise Torch2TRTError("export_triton: this TRTModule holds no engine")
        return held, module_or_path.plan, "the TRTModule"
    raise Torch2TRTError(
        f"export_triton: expected a TRTModule or the path of an engine file, got {type(module_or_path).__name__}"
    )


def _check_name(name: Any) -> str:
    bad = (
        not isinstance(name, str) or not name or name in (".", "..") or name.startswith(".")
        or any(c in name for c in "/\\\0") or (os.altsep is not None and os.altsep in name)
    )
    if bad:
        raise Torch2TRTError(
            f"model name {name!r} must be a folder name (not empty, no '/', '\\' or NUL, not starting with '.')"
        )
    return str(name)


def export_triton(
    module_or_path: TRTModule | str | os.PathLike[str], repo: str | os.PathLike[str], name: str, *, max_batch_size: int | None = None,
    instances: int = 1, kind: str = "gpu", version: int = 1, overwrite: bool = False, allow_sim: bool = False,
) -> str:
    """Write the Triton model ``REPO/NAME`` (``config.pbtxt`` and ``VERSION/model.plan``); return its folder.

    ``module_or_path``: a TRTModule or an engine file. ``max_batch_size``: see :func:`triton_config`.
    ``instances``/``kind``: the ``instance_group`` (Triton's TensorRT backend runs plans on GPU
    instances). ``overwrite``: replace an existing version folder. ``allow_sim``: write a sim engine
    too (its plan is not a TensorRT plan: Triton cannot load it; for testing the layout only).
    """
    meta, plan, source = _engine(module_or_path)
    name = _check_name(name)
    version = _check_int("version", version, 1)
    if meta.get("backend") == "sim" and not allow_sim:
        raise Torch2TRTError(
            f"{source} is a sim engine: the sim's plan is not a TensorRT plan, so Triton's tensorrt_plan platform "
            "cannot serve it; convert with backend='tensorrt' (or 'tensorrt-rtx') to serve it, or pass "
            "allow_sim=True (--allow-sim) to write the repository layout anyway for testing"
        )
    text = config_text(triton_config(meta, name, max_batch_size=max_batch_size, instances=instances, kind=kind))

    model_dir = os.path.join(os.fspath(repo), name)
    vdir = os.path.join(model_dir, str(version))
    if os.path.lexists(vdir) and not overwrite:
        raise Torch2TRTError(
            f"{vdir!r} already exists; pass overwrite=True (--overwrite) to replace it, or another version"
        )
    try:
        os.makedirs(model_dir, exist_ok=True)
    except OSError as e:
        raise EngineFileError(f"cannot create the model folder {model_dir!r}: {e.strerror or e}") from None
    tmp = os.path.join(model_dir, f".t2tl-export-{secrets.token_hex(6)}")
    old = tmp + "-old"
    moved = False
    try:
        os.mkdir(tmp)  # NOTE: mode 0o777 less the umask, as the server reading it expects (mkdtemp gives 0o700)
        engine_file.atomic_write(os.path.join(tmp, PLAN_FILENAME), plan)
        if os.path.lexists(vdir):  # overwrite: the old version leaves only once the new one is complete
            os.rename(vdir, old)
            moved = True
        os.rename(tmp, vdir)
    except OSError as e:
        if moved and not os.path.lexists(vdir):
            try:
                os.rename(old, vdir)  # put the old version back
            except OSError:
                pass
        raise EngineFileError(f"cannot write {vdir!r}: {e.strerror or e}; the version folder was not replaced") from None
    finally:
        _remove(tmp)
        if os.path.lexists(vdir):
            _remove(old)
    engine_file.atomic_write(os.path.join(model_dir, "config.pbtxt"), text.encode())
    return model_dir


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        try:
            os.unlink(path)
        except OSError:
            pass
