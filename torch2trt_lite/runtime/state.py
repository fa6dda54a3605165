"""A TRTModule's engine as plain data: its state dict entries (``engine`` and ``metadata``, 1-D uint8
tensors) and what pickling keeps (the plan bytes and the metadata).

Both record the plan's size and SHA-256 in the metadata; reading them back checks the plan against
them and deserializes it through :func:`~torch2trt_lite.runtime.loading.prepare`, which changes
nothing on failure.
"""

from __future__ import annotations

import json
from typing import Any

import torch

from torch2trt_lite.errors import EngineFileError, Torch2TRTError
from torch2trt_lite.runtime.cuda_graph import check_graph_backend
from torch2trt_lite.runtime.loading import Loaded, prepare


def _meta_with_plan(st: Loaded) -> dict[str, Any]:
    return dict(st.meta, plan_nbytes=len(st.plan), plan_sha256=st.sha256())


def save_entries(st: Loaded, destination: Any, prefix: str) -> None:
    """Write engine ``st`` into a state dict: ``prefix + "engine"`` (the plan) and ``prefix + "metadata"``
    (its JSON), both 1-D uint8 tensors."""
    meta = _meta_with_plan(st)
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
