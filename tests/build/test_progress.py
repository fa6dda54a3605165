"""Build progress: IProgressMonitor in the sim (TensorRT's phases, steps and cancellation) and
``convert(..., progress=...)`` (a recording monitor, cancellation, the rich display, silence)."""

from __future__ import annotations

import io
from typing import Any

import pytest
import torch
from rich.console import Console

import torch2trt_lite
import torch2trt_lite.sim as sim
from torch2trt_lite.build.progress import RichProgress
from torch2trt_lite.errors import BuildError, Torch2TRTError


class Recorder:
    """A progress monitor that records every call; ``cancel_at``: the step_complete call (0-based)
    that returns False; ``raise_at``: the one that raises."""

    def __init__(self, cancel_at: int | None = None, raise_at: int | None = None) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.steps = 0
        self.cancel_at, self.raise_at = cancel_at, raise_at

    def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
        self.events.append(("start", phase_name, parent_phase, num_steps))

    def step_complete(self, phase_name: str, step: int) -> bool:
        self.events.append(("step", phase_name, step))
        k, self.steps = self.steps, self.steps + 1
        if k == self.raise_at:
            raise ValueError("monitor failed on purpose")
        return k != self.cancel_at

    def phase_finish(self, phase_name: str) -> None:
        self.events.append(("finish", phase_name))


def _model() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).eval()
    return m, torch.randn(2, 4)


def check_nesting(events: list[tuple[Any, ...]], *, complete: bool = True) -> list[str]:
    """Assert the events nest like TensorRT's (a phase's parent is the open phase, every phase
    finishes, innermost first); with ``complete``, a phase's steps are 0..num_steps-1 in order
    (TensorRT itself may skip steps, so not on the real builder). Returns the phase names."""
    open_: list[str] = []
    steps: dict[str, list[int]] = {}
    sizes: dict[str, int] = {}
    names = []
    for ev in events:
        if ev[0] == "start":
            _, name, parent, n = ev
            assert parent == (open_[-1] if open_ else None), ev
            open_.append(name)
            names.append(name)
            steps[name], sizes[name] = [], n
        elif ev[0] == "step":
            assert ev[1] in open_, ev
            steps[ev[1]].append(ev[2])
        else:
            assert open_ and open_[-1] == ev[1], (ev, open_)
            open_.pop()
            if complete:
                assert steps[ev[1]] == list(range(sizes[ev[1]])), (ev[1], steps[ev[1]], sizes[ev[1]])
    assert not open_, f"phases never finished: {open_}"
    return names


# ----------------------------------------------------------------------------- the sim's API
def test_sim_exposes_iprogressmonitor() -> None:
    for version in sim.VERSIONS:
        ns: Any = sim.api(version)
        assert hasattr(ns, "IProgressMonitor"), version
        cfg = ns.Builder(ns.Logger()).create_builder_config()
        assert cfg.progress_monitor is None
    base = sim.IProgressMonitor()
    assert base.step_complete("x", 0) is True  # the base class never cancels


def test_sim_builder_reports_nested_phases() -> None:
    m, x = _model()
    rec = Recorder()
    t = torch2trt_lite.convert(m, [x], backend="sim", progress=rec)
    torch.testing.assert_close(t(x), m(x), rtol=1e-5, atol=1e-6)
    names = check_nesting(rec.events)
    assert names == ["Building engine", "Validating network", "Processing layers", "Serializing engine"]
    assert rec.events[0] == ("start", "Building engine", None, 3)
    assert ("start", "Processing layers", "Building engine", t.num_layers) in rec.events
    assert [e for e in rec.events if e[:2] == ("step", "Building engine")] == [
        ("step", "Building engine", i) for i in range(3)
    ]
    assert rec.events[-1] == ("finish", "Building engine")


def test_sim_api_subclass_and_cancellation() -> None:
    """TensorRT's contract on the sim's own API: a subclass set as config.progress_monitor; False
    from step_complete makes build_serialized_network return None, finishing the open phases and
    logging the cancellation."""
    logs: list[str] = []

    class Log(sim.ILogger):
        def log(self, severity: Any, msg: str) -> None:
            logs.append(msg)

    class Cancel(sim.IProgressMonitor):
        def __init__(self) -> None:
            super().__init__()
            self.events: list[tuple[Any, ...]] = []

        def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
            self.events.append(("start", phase_name, parent_phase, num_steps))

        def step_complete(self, phase_name: str, step: int) -> bool:
            self.events.append(("step", phase_name, step))
            return phase_name != "Processing layers"

        def phase_finish(self, phase_name: str) -> None:
            self.events.append(("finish", phase_name))

    builder = sim.Builder(Log())
    net = builder.create_network(0)
    x = net.add_input("x", sim.float32, (2, 3))
    net.mark_output(net.add_activation(x, sim.ActivationType.RELU).get_output(0))
    cfg = builder.create_builder_config()
    mon = Cancel()
    cfg.progress_monitor = mon
    assert cfg.progress_monitor is mon
    assert builder.build_serialized_network(net, cfg) is None
    assert any("BuildCanceled" in m and "cancel" in m.lower() for m in logs), logs
    assert mon.events[-2:] == [("finish", "Processing layers"), ("finish", "Building engine")]
    check_nesting(mon.events, complete=False)
    cfg.progress_monitor = None
    assert builder.build_serialized_network(net, cfg) is not None


# ------------------------------------------------------------------------------------ convert
def test_convert_cancelled_raises_build_error() -> None:
    m, x = _model()
    rec = Recorder(cancel_at=2)
    with pytest.raises(BuildError, match="cancelled"):
        torch2trt_lite.convert(m, [x], backend="sim", progress=rec)
    assert rec.steps == 3  # the build stopped at the step that said no
    check_nesting(rec.events, complete=False)


def test_convert_monitor_exception_is_raised() -> None:
    m, x = _model()
    rec = Recorder(raise_at=1)
    with pytest.raises(ValueError, match="on purpose"):
        torch2trt_lite.convert(m, [x], backend="sim", progress=rec)
    assert rec.steps == 2


def test_rich_display_renders_phases() -> None:
    m, x = _model()
    out = io.StringIO()
    display = RichProgress(console=Console(file=out, force_terminal=True, width=100), transient=False)
    t = torch2trt_lite.convert(m, [x], backend="sim", progress=display)
    torch.testing.assert_close(t(x), m(x), rtol=1e-5, atol=1e-6)
    text = out.getvalue()
    assert "Building engine" in text and "Processing layers" in text
    assert "3/3" in text  # the top phase's bar reached its last step


def test_progress_off_prints_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    m, x = _model()
    torch2trt_lite.convert(m, [x], backend="sim", progress=False)
    torch2trt_lite.convert(m, [x], backend="sim")  # None: stderr is no terminal under capfd
    assert capfd.readouterr() == ("", "")


def test_progress_argument_checked() -> None:
    m, x = _model()
    with pytest.raises(Torch2TRTError, match="step_complete"):
        torch2trt_lite.convert(m, [x], backend="sim", progress="yes")


# -------------------------------------------------------------------------------- TensorRT-RTX
@pytest.mark.rtx
def test_rtx_builder_reports_phases_through_convert() -> None:
    m, x = _model()
    rec = Recorder()
    t = torch2trt_lite.convert(m, [x], backend="tensorrt-rtx", progress=rec)
    assert t.backend == "tensorrt-rtx"
    names = check_nesting(rec.events, complete=False)
    assert names[0] == "Building engine" and len(names) > 1
    cancel = Recorder(cancel_at=0)
    with pytest.raises(BuildError, match="cancelled"):
        torch2trt_lite.convert(m, [x], backend="tensorrt-rtx", progress=cancel)
