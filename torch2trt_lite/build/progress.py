"""Build progress: TensorRT's ``IProgressMonitor`` driving a ``rich.progress`` display.

``convert(..., progress=...)`` takes:

* ``None`` (the default): a display on stderr when stderr is a terminal, else nothing;
* ``True`` / ``False``: always / never a display (``False`` prints nothing at all);
* a :class:`RichProgress` (e.g. ``RichProgress(console=Console(file=...))`` for another stream);
* any object with TensorRT's three monitor methods, ``phase_start(phase_name, parent_phase,
  num_steps)``, ``step_complete(phase_name, step) -> bool`` (False cancels the build) and
  ``phase_finish(phase_name)``: it sees every phase the backend's builder reports, on the sim,
  TensorRT and TensorRT-RTX alike. It need not subclass any backend's ``IProgressMonitor``:
  :func:`attached` wraps it in a subclass of the backend's own class, which is what
  ``config.progress_monitor`` is set to.

A monitor that raises cancels the build, and ``convert`` raises that exception once the builder has
returned (TensorRT itself only prints it). So Ctrl-C during a build stops it at the next step.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

from torch2trt_lite.errors import Torch2TRTError

_METHODS = ("phase_start", "step_complete", "phase_finish")


class RichProgress:
    """A progress display of the builder's phases: one bar per open phase, nested by indentation.

    ``console``: a ``rich.console.Console`` (default: one on stderr). ``transient``: remove the
    display when the build ends (default True). Used as a context manager by ``convert``.
    """

    def __init__(self, console: Any = None, *, transient: bool = True) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = console if console is not None else Console(stderr=True)
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=self.console, transient=transient, refresh_per_second=10,
        )
        self._tasks: dict[str, Any] = {}
        self._depth: dict[str, int] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._progress.stop()
        self._tasks.clear()
        self._depth.clear()

    def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
        with self._lock:
            depth = self._depth.get(parent_phase, -1) + 1 if parent_phase is not None else 0
            self._depth[phase_name] = depth
            self._tasks[phase_name] = self._progress.add_task("  " * depth + phase_name, total=max(int(num_steps), 1))

    def step_complete(self, phase_name: str, step: int) -> bool:
        with self._lock:
            task = self._tasks.get(phase_name)
            if task is not None:
                self._progress.update(task, completed=int(step) + 1)
        return True

    def phase_finish(self, phase_name: str) -> None:
        with self._lock:
            task = self._tasks.pop(phase_name, None)
            depth = self._depth.pop(phase_name, 0)
            if task is not None and depth > 0:
                self._progress.remove_task(task)  # (a top phase's bar stays until the display ends)


def resolve(progress: Any) -> Any:
    """The monitor object for ``convert``'s ``progress=`` argument (None: no monitor)."""
    if progress is None:
        stream = sys.stderr
        return RichProgress() if stream is not None and stream.isatty() else None
    if progress is True:
        return RichProgress()
    if progress is False:
        return None
    missing = [m for m in _METHODS if not callable(getattr(progress, m, None))]
    if missing:
        raise Torch2TRTError(
            f"progress= must be True, False, None (a display when stderr is a terminal) or a progress monitor "
            f"with methods phase_start(phase_name, parent_phase, num_steps), step_complete(phase_name, step) "
            f"and phase_finish(phase_name); got {type(progress).__name__}, which lacks {', '.join(missing)}"
        )
    return progress


class Watch:
    """What happened to a build watched by :func:`attached`: cancelled by the monitor, or its error."""

    def __init__(self) -> None:
        self.cancelled = False
        self.error: BaseException | None = None
        self.phases = 0  # phases the builder started


_ADAPTERS: dict[int, tuple[Any, type]] = {}
_ADAPTERS_LOCK = threading.Lock()


def _adapter_class(trt: Any) -> type | None:
    base: Any = getattr(trt, "IProgressMonitor", None)
    if base is None:
        return None
    with _ADAPTERS_LOCK:
        found = _ADAPTERS.get(id(trt))
        if found is not None:
            return found[1]

        class Monitor(base):  # type: ignore[misc, valid-type]
            """Forwards the builder's calls to ``target``; an exception there cancels the build."""

            def __init__(self, target: Any, watch: Watch) -> None:
                base.__init__(self)
                self._target = target
                self._watch = watch

            def _fail(self, e: BaseException) -> bool:
                if self._watch.error is None:
                    self._watch.error = e
                self._watch.cancelled = True
                return False

            def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
                self._watch.phases += 1
                if self._watch.error is not None:
                    return
                try:
                    self._target.phase_start(phase_name, parent_phase, num_steps)
                except BaseException as e:  # noqa: BLE001 - re-raised by convert once the builder returns
                    self._fail(e)

            def step_complete(self, phase_name: str, step: int) -> bool:
                if self._watch.error is not None:
                    return False
                try:
                    go = bool(self._target.step_complete(phase_name, step))
                except BaseException as e:  # noqa: BLE001 - re-raised by convert once the builder returns
                    return self._fail(e)
                if not go:
                    self._watch.cancelled = True
                return go

            def phase_finish(self, phase_name: str) -> None:
                if self._watch.error is not None:
                    return
                try:
                    self._target.phase_finish(phase_name)
                except BaseException as e:  # noqa: BLE001 - re-raised by convert once the builder returns
                    self._fail(e)

        _ADAPTERS[id(trt)] = (trt, Monitor)  # NOTE: the module is kept too, so its id stays unique
        return Monitor


@contextlib.contextmanager
def attached(trt: Any, config: Any, monitor: Any) -> Iterator[Watch]:
    """Attach ``monitor`` (from :func:`resolve`; None: nothing) to the builder ``config`` for one build.

    A :class:`RichProgress` display runs while the block does. The block's :class:`Watch` says
    whether the monitor cancelled the build and what it raised."""
    watch = Watch()
    cls = _adapter_class(trt) if monitor is not None else None
    if cls is None:
        yield watch
        return
    adapter = cls(monitor, watch)
    config.progress_monitor = adapter
    display = monitor if isinstance(monitor, RichProgress) else contextlib.nullcontext()
    try:
        with display:
            yield watch
    finally:
        config.progress_monitor = None


__all__ = ["RichProgress", "Watch", "attached", "resolve"]
