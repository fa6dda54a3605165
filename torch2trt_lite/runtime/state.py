"""A TRTModule's engine as plain data: its state dict entries (``engine`` and ``metadata``, 1-D uint8
tensors) and what pickling keeps (the plan bytes and the metadata).

Both record the plan's size and SHA-256 in the metadata; reading them back checks the plan against
them and deserializes it through :func:`~torch2trt_lite.runtime.loading.prepare`, which changes
nothing on failure (and cross-checks the metadata's inputs and outputs against the engine's).

A state dict's metadata also carries its own checksum, ``metadata_sha256``: the SHA-256 of the rest
of it as canonical JSON (sorted keys). ``load_state_dict`` refuses metadata without it or that does
not match it, as an engine file refuses a header whose checksum does not match: a flipped byte in
the output structure or a dtype would otherwise load and run (the plan does not record the output
structure).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import torch

from torch2trt_lite.errors import EngineFileError, Torch2TRTError
from torch2trt_lite.runtime.cuda_graph import check_graph_backend
from torch2trt_lite.runtime.loading import Loaded, prepare

META_SHA256 = "metadata_sha256"  # the state dict metadata's own checksum (see the module docstring)


def _meta_with_plan(st: Loaded) -> dict[str, Any]:
    return dict(st.meta, plan_nbytes=len(st.plan), plan_sha256=st.sha256())


def meta_digest(meta: dict[str, Any]) -> str:
    """SHA-256 of ``meta`` as canonical JSON (sorted keys, ``json.dumps``' defaults)."""
    try:
        text = json.dumps(meta, sort_keys=True)
    except (RecursionError, ValueError, TypeError):
        raise EngineFileError("the metadata cannot be written as JSON (nested too deeply or not plain data)") from None
    return hashlib.sha256(text.encode()).hexdigest()


def sealed_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with its checksum ``metadata_sha256`` (as ``state_dict()`` writes it)."""
    body = {k: v for k, v in meta.items() if k != META_SHA256}
    return dict(body, **{META_SHA256: meta_digest(body)})


def unsealed_meta(meta: Any, key: str) -> dict[str, Any]:
    """State dict metadata ``meta`` (under ``key``) without its checksum, checked against it."""
    if not isinstance(meta, dict):
        raise EngineFileError(f"{key!r} must hold a JSON object (as state_dict() writes it), got {type(meta).__name__}")
    body = {k: v for k, v in meta.items() if k != META_SHA256}
    sha = meta.get(META_SHA256)
    if not isinstance(sha, str):
        raise EngineFileError(
            f"{key!r} has no metadata checksum ({META_SHA256}): it was edited, is corrupt, or was saved by a "
            "torch2trt-lite older than the checksum. Save the state dict again from a TRTModule (or build the "
            "module with TRTModule(plan, metadata), which checks the plan against the metadata but cannot "
            "check the metadata itself)"
        )
    got = meta_digest(body)
    if got != sha:
        raise EngineFileError(
            f"{key!r}: metadata checksum mismatch (it says {sha[:16]}..., its content hashes to {got[:16]}...): "
            "the metadata is corrupt or was edited; save the state dict again from a TRTModule"
        )
    return body


def save_entries(st: Loaded, destination: Any, prefix: str) -> None:
    """Write engine ``st`` into a state dict: ``prefix + "engine"`` (the plan) and ``prefix + "metadata"``
    (its JSON), both 1-D uint8 tensors."""
    meta = sealed_meta(_meta_with_plan(st))
    destination[prefix + "engine"] = torch.frombuffer(bytearray(st.plan), dtype=torch.uint8)
    destination[prefix + "metadata"] = torch.frombuffer(bytearray(json.dumps(meta).encode()), dtype=torch.uint8)


def load_entries(
    state_dict: Any, prefix: str, strict: bool, own: set[str], missing_keys: list[str],
    unexpected_keys: list[str], error_msgs: list[str], *, cuda_graph: bool,
) -> Loaded | None:
    """The engine of a state dict's ``engine`` and ``metadata`` entries under ``prefix``, prepared; None
    when there is none to install (the keys and refusals are reported in the lists, as
    ``nn.Module._load_from_state_dict`` does). ``own``: the names the module itself has under ``prefix``."""
    ek, mk = prefix + "engine", prefix + "metadata"
    if strict:
        unexpected_keys.extend(
            k for k in state_dict if k.startswith(prefix) and k[len(prefix):].split(".", 1)[0] not in own
        )
    if ek not in state_dict and mk not in state_dict:
        missing_keys.extend((ek, mk))
        return None
    missing = [k for k in (ek, mk) if k not in state_dict]
    if missing:
        missing_keys.extend(missing)
        error_msgs.append(f"TRTModule: the state dict has only one of {ek!r} and {mk!r}; both are needed")
        return None
    try:
        plan = _state_bytes(state_dict[ek], ek)
        raw = _state_bytes(state_dict[mk], mk)
        try:
            meta_d = json.loads(raw.decode())
        except RecursionError:
            raise EngineFileError(f"{mk!r} is corrupt (nested too deeply)") from None
        except ValueError as e:
            raise EngineFileError(f"{mk!r} is not JSON ({e})") from None
        meta_d = unsealed_meta(meta_d, mk)
        check_graph_backend(cuda_graph, meta_d)
        return prepare(plan, meta_d, source=f"state dict {prefix or '<root>'}")
    except Torch2TRTError as e:
        error_msgs.append(f"TRTModule: {e}; the module keeps the engine it had")
        return None


def _state_bytes(t: Any, key: str) -> bytes:
    if not isinstance(t, torch.Tensor) or t.dtype != torch.uint8 or t.dim() != 1:
        what = f"a {t.dtype} tensor of shape {tuple(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
        raise EngineFileError(f"{key!r} must be a 1-D uint8 tensor (as state_dict() writes it), got {what}")
    return bytes(t.detach().cpu().contiguous().numpy().tobytes())


def pickled_engine(st: Loaded | None) -> dict[str, Any] | None:
    """What pickling keeps of engine ``st``: plain data only, the plan bytes and the metadata with the
    plan's SHA-256 (nothing of the backend: its objects cannot be pickled)."""
    if st is None or not st.plan:
        return None
    return {"plan": bytes(st.plan), "meta": json.loads(json.dumps(_meta_with_plan(st)))}


def unpickled_engine(engine: Any, *, cuda_graph: bool) -> Loaded | None:
    """The engine of :func:`pickled_engine`'s data, checked and prepared (None for None)."""
    if engine is None:
        return None
    if not (isinstance(engine, dict) and isinstance(engine.get("plan"), (bytes, bytearray))):
        raise EngineFileError("unpickling a TRTModule: the pickled engine is not plan bytes and metadata")
    check_graph_backend(cuda_graph, engine.get("meta"))
    return prepare(engine["plan"], engine.get("meta"), source="unpickled TRTModule")
