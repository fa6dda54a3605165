"""Ctrl-C at every line of the tracer's patch/unpatch code: does torch stay as it was?

A ``KeyboardInterrupt`` is injected (with ``sys.settrace``) at the k-th line event executed in the
tracer's install/restore/activate functions during one tiny conversion, for every k (or every
``--every``-th k plus the first and last points of each of those functions' runs). After each
interrupted conversion torch must be exactly as before the first one: every patched attribute is
the original object (identity, against a snapshot), no own attribute added or lost on an owner,
the torch function mode stack as long as before, the tracer's ``ContextVar`` unset, the patch
depth 0, no patch left in the table; and the next conversion must work.

    python tools/interrupt_sweep.py            # every point (a few minutes on 2 cores)
    python tools/interrupt_sweep.py --every 25

``tests/trace/test_tracer_safety.py`` runs a deterministic sample of the points (and, marked slow, all).
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any

import torch
from torch._C import _len_torch_function_stack

import torch2trt_lite
from torch2trt_lite.registry import REGISTRY, load_builtin_converters
from torch2trt_lite.trace import tracer

try:
    from torch2trt_lite.trace import opaque as _opaque
except ImportError:  # older code: no TorchScript patches
    _opaque = None  # type: ignore[assignment]

# The functions an interrupt is injected into (those that exist: the sweep also runs on older code).
TARGET_NAMES = (
    "activate", "_install", "_patch_all", "_uninstall", "_install_hooks", "_deactivate",
    "_restore_all", "_remove_mode",
)

Snapshot = dict[tuple[int, str], tuple[Any, str, bool, Any]]


def target_codes() -> dict[CodeType, str]:
    out: dict[CodeType, str] = {}
    for name in TARGET_NAMES:
        fn = getattr(tracer.Tracer, name, None) or getattr(tracer, name, None)
        fn = getattr(fn, "__wrapped__", fn)  # activate: the generator under @contextmanager
        code = getattr(fn, "__code__", None)
        if isinstance(code, CodeType):
            out[code] = name
    return out


def snapshot() -> Snapshot:
    """(owner, attr) -> (owner, attr, has an own entry, the object found), for every registered target."""
    load_builtin_converters()
    snap: Snapshot = {}
    for record in REGISTRY.records():
        for owner, attr in record.owners:
            own = attr in vars(owner)
            snap[(id(owner), attr)] = (owner, attr, own, inspect.getattr_static(owner, attr))
    for owner, attr, _, _ in getattr(_opaque, "PATCHES", ()):  # TorchScript's __call__ (trace/opaque.py)
        snap[(id(owner), attr)] = (owner, attr, attr in vars(owner), inspect.getattr_static(owner, attr))
    return snap


@dataclass
class State:
    snap: Snapshot
    tensor_keys: list[str]
    modes: int


def take_state() -> State:
    return State(snapshot(), list(vars(torch.Tensor)), _len_torch_function_stack())


def problems(before: State) -> list[str]:
    """What differs from ``before`` (empty when torch and the tracer are as they were)."""
    out = []
    for (owner, attr, own, value) in before.snap.values():
        now_own = attr in vars(owner)
        now = inspect.getattr_static(owner, attr)
        if now_own != own or now is not value:
            out.append(f"{getattr(owner, '__name__', owner)}.{attr} not restored")
    if list(vars(torch.Tensor)) != before.tensor_keys:
        out.append("torch.Tensor.__dict__ keys changed")
    if _len_torch_function_stack() != before.modes:
        out.append(f"torch function mode stack: {_len_torch_function_stack()} modes, was {before.modes}")
    if tracer._ACTIVE.get() is not None:
        out.append("the tracer's ContextVar is still set")
    if tracer._PATCH_DEPTH != 0:
        out.append(f"patch depth {tracer._PATCH_DEPTH}")
    if tracer._PATCHES:
        out.append(f"{len(tracer._PATCHES)} entries left in the patch table")
    return out


class _Injector:
    """Counts line events in the target functions; raises KeyboardInterrupt at event ``at``."""

    def __init__(self, codes: dict[CodeType, str], at: int | None) -> None:
        self.codes, self.at, self.count = codes, at, 0
        self.where = ""
        self.lines: list[tuple[str, int]] = []  # with record=True: (function, line) of each event
        self.record = False

    def global_trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        return self.local_trace if frame.f_code in self.codes else None

    def local_trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self.count += 1
            if self.record:
                self.lines.append((self.codes[frame.f_code], frame.f_lineno))
            if self.count == self.at:
                self.where = f"{self.codes[frame.f_code]}:{frame.f_lineno}"
                raise KeyboardInterrupt
        return self.local_trace


def _traced(inj: _Injector, run: Callable[[], Any]) -> bool:
    """Run ``run`` under ``inj``; True if the injected KeyboardInterrupt came out of it."""
    old = sys.gettrace()
    sys.settrace(inj.global_trace)
    try:
        run()
    except KeyboardInterrupt:
        return True
    finally:
        sys.settrace(old)
    return False


def tiny_conversion() -> Callable[[], Any]:
    model = torch.nn.Linear(3, 2).eval()
    x = torch.randn(1, 3)

    def run() -> Any:
        report = torch2trt_lite.check(model, [x])
        if not report.ok:
            raise AssertionError(f"the next conversion failed: {report}")
        return report

    return run


def count_points(run: Callable[[], Any]) -> tuple[int, list[tuple[str, int]]]:
    inj = _Injector(target_codes(), None)
    inj.record = True
    _traced(inj, run)
    return inj.count, inj.lines


def sample(lines: list[tuple[str, int]], every: int, small: int = 200) -> list[int]:
    """The points to try (1-based): every point of the functions with at most ``small`` events in all
    (``activate``, ``_install``, ``_uninstall``, ...); in the big loops (``_patch_all``,
    ``_restore_all``) every ``every``-th point plus every point of their first two and last two
    iterations and of each run's first and last lines (loop entry and exit)."""
    n = len(lines)
    per_fn: dict[str, int] = {}
    for fn, _ in lines:
        per_fn[fn] = per_fn.get(fn, 0) + 1
    picked = {i + 1 for i, (fn, _) in enumerate(lines) if per_fn[fn] <= small}
    picked.update(range(1, n + 1, max(1, every)))
    # runs of consecutive events in one function: its entry and exit, and the iterations at both ends
    i = 0
    while i < n:
        j = i
        while j + 1 < n and lines[j + 1][0] == lines[i][0]:
            j += 1
        run = range(i, j + 1)
        back = [k for k in run[1:] if lines[k][1] < lines[k - 1][1]]  # where an iteration starts
        edges = set(run[:6]) | set(run[-6:])
        if back:
            first, last = back[0], back[-1]
            second = back[1] if len(back) > 1 else last
            before_last = back[-2] if len(back) > 1 else first
            edges |= set(range(i, second + (second - first) + 1))  # entry and the first two iterations
            edges |= set(range(before_last, j + 1))  # the last two iterations and the exit
        picked.update(k + 1 for k in edges)
        i = j + 1
    return sorted(k for k in picked if 1 <= k <= n)


@dataclass
class Result:
    points: int
    tried: int
    failures: list[tuple[int, str, list[str]]] = field(default_factory=list)
    not_raised: list[int] = field(default_factory=list)
    seconds: float = 0.0


def sweep(points: Iterable[int] | None = None, every: int = 1) -> Result:
    run = tiny_conversion()
    run()  # warm: converters loaded, wrappers cached
    before = take_state()
    total, lines = count_points(run)
    if points is None:
        points = range(1, total + 1) if every <= 1 else sample(lines, every)
    res = Result(total, 0)
    t0 = time.perf_counter()
    codes = target_codes()
    for k in points:
        res.tried += 1
        inj = _Injector(codes, k)
        if not _traced(inj, run):
            res.not_raised.append(k)
        bad = problems(before)
        if not bad:
            try:
                run()
            except Exception as e:  # noqa: BLE001 - any failure of the next conversion is reported
                bad = [f"the next conversion failed: {type(e).__name__}: {e}"]
            else:
                bad = problems(before)
        if bad:
            res.failures.append((k, inj.where, bad))
            _repair(before)
    res.seconds = time.perf_counter() - t0
    return res


def _repair(before: State) -> None:
    """Put torch and the tracer back as ``before`` after a failed point, so the next points start clean."""
    from torch._C import _pop_torch_function_stack

    tracer._ACTIVE.set(None)
    tracer._PATCHES.clear()
    tracer._PATCH_DEPTH = 0
    users = getattr(tracer, "_USERS", None)
    if isinstance(users, list):
        users.clear()
    for owner, attr, own, value in before.snap.values():
        if own:
            setattr(owner, attr, value)
        elif attr in vars(owner):
            delattr(owner, attr)
    while _len_torch_function_stack() > before.modes:
        _pop_torch_function_stack()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--every", type=int, default=1, help="try every N-th point (plus loop edges); default all")
    args = p.parse_args(argv)
    res = sweep(every=args.every)
    print(f"{res.points} injection points, {res.tried} tried in {res.seconds:.1f} s: "
          f"{len(res.failures)} left torch or the tracer changed, {len(res.not_raised)} swallowed the interrupt")
    for k, where, bad in res.failures[:40]:
        print(f"  point {k} ({where}): {'; '.join(bad[:3])}")
    return 1 if res.failures or res.not_raised else 0


if __name__ == "__main__":
    sys.exit(main())
