"""ultralytics' ``non_max_suppression``: the Python branches of its per-image loop on a data-dependent count.

The YOLO post-processing (``ultralytics.utils.nms.non_max_suppression``; ``ultralytics.utils.ops`` in
older releases) keeps the candidates over the confidence threshold (``x = x[filt]``: a data-dependent
count) and branches on that count in Python:

* ``if not x.shape[0]: continue`` and ``if not n: continue`` (no candidate left): answered "not empty"
  (:func:`nms_guard`). The general branch computes the same result on zero candidates as the
  ``continue``: the split, ``max``, ``cat`` and ``nms`` of zero rows give a ``[0, 6 + extra]`` float32
  detection tensor, the ``torch.zeros((0, 6 + extra))`` the loop starts from. Only when the function
  returns just the detections (``return_idxs=False``, the default): the kept indices of the general
  branch are int64 ``[0]`` where the ``continue`` leaves float32 ``[0, 1]``, so with
  ``return_idxs=True`` the branch is refused as before.
* ``if n > max_nms:`` (truncate to the ``max_nms`` best candidates): decided by the count's range where
  it can be (a count of at most ``max_nms`` rows, ultralytics' usual 8400 anchors under 30000, takes the
  other branch for every input); else answered "truncate". ``x[:, 4].argsort(descending=True)[:max_nms]``
  of ``n <= max_nms`` candidates keeps them all, sorted by score: ``nms`` ranks its candidates by score,
  so the detections are the same (the order among exactly tied scores, which ``nms`` does not fix either,
  may differ).

Registered once the user has imported ultralytics (a guard rule on the function's code, as
``converters/zoo_torchvision.py`` does for torchvision's); :func:`nms_guard` is the rule, for a copy of
the function elsewhere.
"""

from __future__ import annotations

import linecache
import sys
from typing import Any

from torch2trt_lite.registry import when_imported

from .impl import sizes as Y

_MODULES = ("ultralytics.utils.nms", "ultralytics.utils.ops")  # where releases define non_max_suppression
_EMPTY_BRANCHES = ("if not x.shape[0]:", "if not n:")  # each followed by `continue` (the source line is checked)


def nms_guard(frame: Any, size: Any, op: str, other: Any, traced: bool) -> bool | None:
    """The guard rule for ``non_max_suppression``'s count branches (see the module docstring)."""
    del traced  # NOTE: the answers hold for every count, the traced one included (also zero candidates)
    local = frame.f_locals
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    if op == "ne" and other == 0 and line in _EMPTY_BRANCHES and local.get("return_idxs") is False:
        return True
    max_nms = local.get("max_nms")
    if op == "gt" and type(other) is int and other == max_nms and size is local.get("n") and line == "if n > max_nms:":
        return True
    return None


def _register() -> None:
    for name in _MODULES:
        module = sys.modules.get(name)
        if module is None:
            try:
                module = __import__(name, fromlist=["non_max_suppression"])
            except ImportError:
                continue
        fn = getattr(module, "non_max_suppression", None)
        if fn is not None and hasattr(fn, "__code__"):
            Y.specialize_guard(fn.__code__, nms_guard)


when_imported("ultralytics", _register)


__all__ = ["nms_guard"]
