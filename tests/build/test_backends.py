"""Backend selection: ``auto`` takes TensorRT, else TensorRT-RTX, on a GPU machine, else the sim, and
says which once per process; unknown and missing backends are clear errors."""

from __future__ import annotations

import logging
from typing import Any
from unittest import mock

import pytest
import torch

import torch2trt_lite
from torch2trt_lite import backends


@pytest.fixture(autouse=True)
def _fresh_messages() -> Any:
    saved = set(backends._said)
    backends._said.clear()
    yield
    backends._said.clear()
    backends._said.update(saved)


def _fake_import(available: set[str]) -> Any:
    def fake(name: str) -> Any:
        if name not in available:
            raise torch2trt_lite.BackendUnavailableError(f"{name} is not installed (test)")
        return mock.MagicMock(__version__="1.7.1.116" if name == "tensorrt-rtx" else "10.16.0.72")

    return fake


@pytest.mark.parametrize(("gpu", "installed", "chosen"), [
    (False, {"tensorrt", "tensorrt-rtx"}, "sim"),
    (True, {"tensorrt", "tensorrt-rtx"}, "tensorrt"),
    (True, {"tensorrt-rtx"}, "tensorrt-rtx"),
    (True, set(), "sim"),
])
def test_auto_prefers_tensorrt_then_rtx_on_a_gpu(gpu: bool, installed: set[str], chosen: str) -> None:
    with mock.patch.object(backends, "_import", _fake_import(installed)), \
            mock.patch.object(torch.cuda, "is_available", return_value=gpu):
        assert backends.get_backend("auto").name == chosen


def test_auto_says_its_choice_once(caplog: pytest.LogCaptureFixture) -> None:
    with mock.patch.object(torch.cuda, "is_available", return_value=False), \
            caplog.at_level(logging.INFO, logger="torch2trt_lite"):
        for _ in range(3):
            assert backends.get_backend("auto").name == "sim"
    said = [r for r in caplog.records if "backend='auto' chose" in r.getMessage()]
    assert len(said) == 1 and "no CUDA GPU" in said[0].getMessage()


def test_unknown_backend() -> None:
    with pytest.raises(torch2trt_lite.BackendUnavailableError, match="tensorrt-rtx"):
        backends.get_backend("onnx")


def test_missing_backend_says_how_to_install() -> None:
    with mock.patch.object(backends, "_import", _fake_import(set())), \
            pytest.raises(torch2trt_lite.BackendUnavailableError, match="not installed"):
        backends.get_backend("tensorrt-rtx")
    err = None
    try:
        backends._import.__wrapped__("tensorrt")  # the real message (TensorRT cannot be installed here)
    except torch2trt_lite.BackendUnavailableError as e:
        err = str(e)
    if err is not None:
        assert "pip install tensorrt" in err and "backend='sim'" in err


def test_engine_of_a_missing_backend_is_an_engine_file_error(tmp_path: Any) -> None:
    from torch2trt_lite.runtime import engine_file

    m = torch2trt_lite.convert(torch.nn.ReLU().eval(), [torch.randn(2, 3)], backend="sim")
    meta = dict(m.metadata)
    meta["backend"] = "tensorrt-rtx"
    plan = b"vtrt" + bytes(60)  # starts as a TensorRT-RTX plan does (engine_file checks a plan's first bytes)
    engine_file.write(tmp_path / "e.engine", meta, plan)
    with mock.patch.object(backends, "_import", _fake_import(set())), \
            pytest.raises(torch2trt_lite.EngineFileError, match="built by TensorRT-RTX .*not installed"):
        torch2trt_lite.load(tmp_path / "e.engine")


@pytest.mark.parametrize("bad", [0, -1, "big", 1.5, True])
def test_workspace_must_be_a_positive_int(bad: Any) -> None:
    with pytest.raises(torch2trt_lite.Torch2TRTError, match="max_workspace_size"):
        torch2trt_lite.convert(torch.nn.ReLU().eval(), [torch.randn(2)], backend="sim", max_workspace_size=bad)


def test_backend_messages_reach_python_logging(caplog: pytest.LogCaptureFixture) -> None:
    """TensorRT's severities map onto logging (logger torch2trt_lite.tensorrt); errors also reach the
    capturing logger of the call that caused them."""
    from torch2trt_lite import sim

    cap = backends.CapturingLogger(sim)
    with caplog.at_level(logging.DEBUG, logger="torch2trt_lite.tensorrt"):
        cap.logger.log(sim.ILogger.Severity.ERROR, "an error")
        cap.logger.log(sim.ILogger.Severity.WARNING, "a warning")
        cap.logger.log(sim.ILogger.Severity.INFO, "some info")
    levels = {r.getMessage(): r.levelno for r in caplog.records if r.name == "torch2trt_lite.tensorrt"}
    assert levels == {"an error": logging.ERROR, "a warning": logging.WARNING, "some info": logging.DEBUG}
    assert cap.errors == ["an error"]


def test_real_backend_logger_is_shared_and_captures_per_call() -> None:
    rtx = pytest.importorskip("tensorrt_rtx", reason="needs TensorRT-RTX: pip install -e '.[rtx]'")
    first, second = backends.CapturingLogger(rtx), backends.CapturingLogger(rtx)
    assert first.logger is second.logger  # TensorRT keeps the first logger of a process
    second.logger.log(rtx.ILogger.Severity.ERROR, "boom")
    assert "boom" in second.errors
